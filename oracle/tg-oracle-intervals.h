/* tgsched oracle: an independent judge of interval plans (tg-plan.h).
 *
 * Given the buffers as the caller passed them and as the planner returned
 * them, it checks every rule a plan must keep, with its own code (pairs that
 * overlap come from the oracle's sweep, tg-oracle-overlaps.h): no two
 * buffers live at the same step share a byte, every free buffer's offset is
 * a multiple of its alignment, fixed buffers stayed where they were, sizes
 * and lifetimes are untouched, no buffer ends past SIZE_MAX, the plan's
 * peak is what the planner claimed, and at most the capacity when the
 * planner says the plan fits one. */
#ifndef TG_ORACLE_INTERVALS_H
#define TG_ORACLE_INTERVALS_H

#include "tg-plan.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tg_oracle_interval_rule {
    TG_IRULE_OVERLAP,       /* two buffers live at one step share a byte */
    TG_IRULE_MISALIGNED,    /* a free buffer's offset is not a multiple of its alignment */
    TG_IRULE_FIXED_MOVED,   /* a fixed buffer is not at its given offset */
    TG_IRULE_INPUT_CHANGED, /* a size, lifetime, alignment or fixed flag differs from the input */
    TG_IRULE_WRONG_PEAK,    /* the claimed peak is not the highest end of a buffer */
    TG_IRULE_OVER_CAPACITY, /* a plan said to fit the capacity ends above it */
    TG_IRULE_PAST_END,      /* a buffer ends past SIZE_MAX: its last bytes would wrap to address 0 */
    TG_IRULE_COUNT
};
const char *tg_oracle_interval_rule_name(enum tg_oracle_interval_rule r);

struct tg_oracle_interval_report {
    int n;                    /* violations in all */
    int count[TG_IRULE_COUNT];
    char first[256];          /* the first violation, in words ("" when none) */
    int first_buffers[2];     /* the buffers (indices) it names, -1 for none: a caller names them its way */
};

/* before: the buffers as passed to tg_plan_intervals; after: as it returned
 * them, with its claimed peak; capacity: 0, or one the plan is said to fit.
 * Returns false when the check could not run (out of host memory). */
bool tg_oracle_check_intervals(const struct tg_interval *before, const struct tg_interval *after, int n,
                               size_t claimed_peak, size_t capacity, struct tg_oracle_interval_report *rep);

/* A plan given whole, every offset in it (as `tgsched plan --out` writes
 * one, read back to verify): every offset is a planned one, so every
 * buffer's must be a multiple of its alignment.  tg_oracle_check_intervals
 * cannot tell such a plan from buffers the caller pre-placed, which the
 * planner keeps where they are whatever their alignment (and which it
 * therefore does not judge).  The other rules as there. */
bool tg_oracle_check_interval_plan(const struct tg_interval *plan, int n, size_t claimed_peak, size_t capacity,
                                   struct tg_oracle_interval_report *rep);

/* The lower bound of every plan, from its definition (quadratic, sharing
 * nothing with the planner): the most bytes live at one step, and the end
 * of every non-empty fixed buffer (SIZE_MAX when a sum passes it). */
size_t tg_oracle_intervals_lower_bound(const struct tg_interval *buffers, int n);

#ifdef __cplusplus
}
#endif

#endif

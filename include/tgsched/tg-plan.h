/* tgsched interval planner: offsets for buffers with known lifetimes, the
 * dynamic storage allocation problem as MiniMalloc states it (Moffitt,
 * ASPLOS 2023).  The graph allocator plans its tensors this way
 * (TG_PLAN_BEST); this is the same planner for callers that have the
 * lifetimes themselves: a compiler's buffers, a trace, MiniMalloc's CSV
 * files (`tgsched plan FILE.csv`).
 *
 * Every buffer gets an offset such that buffers live at the same time never
 * share a byte.  Without a capacity the planner makes the peak (the highest
 * end of any buffer) as low as it finds; with one, it looks for a plan whose
 * peak is at most the capacity and says whether it found one, proved there
 * is none, or gave up.  Buffers may be pre-placed (fixed at their offset)
 * and may ask for an alignment of their own.
 *
 * By default the search is bounded by work, not time, so the same input
 * gives the same offsets on every machine and for every thread count (tens
 * of milliseconds for a few hundred buffers).  With seconds > 0 it goes on by the clock: towards the
 * lower bound, or until it finds a plan under the capacity or proves there
 * is none. */
#ifndef TG_PLAN_H
#define TG_PLAN_H

#include "tg.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tg_interval {
    size_t size;      /* bytes (0: takes no memory, offset 0 unless fixed) */
    int lower, upper; /* live over the steps [lower, upper), lower < upper */
    size_t alignment; /* the offset is a multiple of it (0 or 1: any offset) */
    bool fixed;       /* pre-placed: offset is given and kept */
    size_t offset;    /* out; in when fixed */
};

struct tg_interval_options {
    size_t capacity; /* > 0: a plan whose peak is at most this is wanted */
    double seconds;  /* > 0: search by the clock for up to this long; 0: work-bounded, deterministic */
    int threads;     /* > 1: the exact searches also run on threads - 1 more threads; the same offsets for every
                      * count (0, 1: the calling thread alone) */
};

enum tg_interval_result {
    TG_INTERVALS_PLANNED,    /* offsets written; the peak is at most the capacity, when one was given */
    TG_INTERVALS_INFEASIBLE, /* proved: no plan fits the capacity */
    TG_INTERVALS_NOT_FOUND,  /* none under the capacity within the limits; offsets hold the lowest plan found */
};

/* Plans n buffers.  *result says how the plan relates to the capacity
 * (TG_INTERVALS_PLANNED without one); *peak receives the plan's peak.  opts
 * may be NULL (no capacity, work-bounded).  TG_ERR_INVALID names the first
 * malformed buffer (upper not above lower, a fixed buffer that ends past
 * SIZE_MAX), the buffer with which the highest end of a non-empty fixed
 * buffer plus every free buffer's size and alignment less one passes
 * SIZE_MAX (offsets could wrap, so such problems are refused whole, live
 * together or not), or two fixed buffers live together that share bytes (no
 * plan can exist: *result is TG_INTERVALS_INFEASIBLE, *peak SIZE_MAX);
 * offsets are then left as they were.  TG_ERR_ALLOC when host memory runs out.
 * result and peak may be NULL. */
TG_NODISCARD enum tg_status tg_plan_intervals(struct tg_interval *buffers, int n, const struct tg_interval_options *opts,
                                              enum tg_interval_result *result, size_t *peak);

/* Two fixed buffers (of n, sizes above 0) that are live at a common step
 * and share bytes, the reason no plan exists: *first < *second, their
 * indices, or both -1 when there are none.  TG_ERR_ALLOC without memory. */
TG_NODISCARD enum tg_status tg_intervals_fixed_overlap(const struct tg_interval *buffers, int n, int *first,
                                                       int *second);

#ifdef __cplusplus
}
#endif

#endif

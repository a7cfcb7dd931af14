/* tgsched oracle: checkers of a scheduled and allocated graph (docs/scheduler.md; docs/testing.md, "The oracle").
 *
 * They read only what the scheduler exposes publicly (tg-sched.h introspection:
 * splits, per-tensor backend ids, the graph copy, copy sources, buffer ids) and
 * where tensors actually live after binding, so a scheduler bug cannot hide
 * itself.  Usage: build a fresh graph, take a tg_oracle_snapshot of it (before
 * anything binds it), tg_sched_alloc_graph, then tg_oracle_sched_check. */
#ifndef TG_ORACLE_SCHED_H
#define TG_ORACLE_SCHED_H

#include "tg-oracle.h"
#include "tg-sched.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tg_oracle_sched_rule {
    TG_OSCHED_UNSUPPORTED,      /* a computed node is on a backend that does not support its op */
    TG_OSCHED_WRONG_SPLIT,      /* a node's backend differs from its split's backend */
    TG_OSCHED_PREALLOC_MOVED,   /* pre-allocated memory changed, or the tensor (or a view of it) is
                                 * assigned to a backend that cannot use its buffer */
    TG_OSCHED_PIN_IGNORED,      /* a user pin on a tensor without memory was not honoured */
    TG_OSCHED_MISSING_COPY,     /* a node reads memory its split's backend cannot use, not through a
                                 * copy made for that split */
    TG_OSCHED_INPUT_LIMIT,      /* a split has more than TG_SCHED_MAX_SPLIT_INPUTS inputs */
    TG_OSCHED_FOREIGN_RESULT,   /* a node writes its result (e.g. a cpy/set_rows view) into memory
                                 * its split's backend cannot use */
    TG_OSCHED_ALLOC,            /* an allocator checker fired on the scheduler's graph copy */
    TG_OSCHED_COUNT
};
const char *tg_oracle_sched_rule_name(enum tg_oracle_sched_rule r);

struct tg_oracle_sched_pin {
    const struct tg_tensor *tensor;
    int backend_id;
};

struct tg_oracle_sched_violation {
    enum tg_oracle_sched_rule rule;
    const struct tg_tensor *tensor;
    char message[360];
};

struct tg_oracle_sched_report {
    int n;
    int cap;
    struct tg_oracle_sched_violation *items;
    int n_checked_nodes;
};

void tg_oracle_sched_report_free(struct tg_oracle_sched_report *rep);
int tg_oracle_sched_report_count(const struct tg_oracle_sched_report *rep, enum tg_oracle_sched_rule rule);
/* Writes up to max_lines violations through tg_logf. */
void tg_oracle_sched_report_print(const struct tg_oracle_sched_report *rep, int max_lines);

/* Checks the graph the scheduler allocated last.  snap: taken of the user's
 * graph before tg_sched_alloc_graph bound it (its entries are the pre-allocated
 * tensors).  bufts: buffer type per backend id as given to tg_sched_new (NULL:
 * each backend's default).  pins: the pins the caller set (may be NULL).
 * TG_OK with the violations in rep, or an error when the check could not run
 * (nothing allocated, out of memory). */
enum tg_status tg_oracle_sched_check(const tg_sched *sched, const struct tg_oracle_snapshot *snap,
                                     tg_buffer_type **bufts, const struct tg_oracle_sched_pin *pins, int n_pins,
                                     struct tg_oracle_sched_report *rep);

#ifdef __cplusplus
}
#endif
#endif

/* The canonical searches of one capacity taking turns (internal): the
 * offline planner's round robin, on the calling thread alone or with
 * helper threads, with the same result for every thread count.
 *
 * The turns are numbered 0, 1, 2, ...: turn t is the (t / n)-th slice of
 * search (first + t) % n, slice units of work each (the last turn the
 * budget allows gets what is left of it).  The answer is that of the
 * lowest-numbered turn whose slice finished its search (found a plan or
 * proved there is none), as one thread taking the turns in order would
 * give; with several threads, turns run side by side, a search's slices
 * one after another, and turns numbered above an answer found are not
 * counted.  So the default mode, bounded by work, stays deterministic;
 * only a deadline makes the answer depend on the machine, as it does
 * alone. */
#ifndef TG_PLAN_TURNS_H
#define TG_PLAN_TURNS_H

#include "plan-canonical.h"

#include <stdbool.h>
#include <stddef.h>

/* threads - 1 helper threads, started at once; NULL for threads <= 1, or
 * when none could be started (then the caller's thread takes every turn). */
struct tg_turn_pool;
struct tg_turn_pool *tg_turn_pool_new(int threads);
void tg_turn_pool_free(struct tg_turn_pool *pool);

struct tg_turns {
    struct tg_canonical_search *const *search; /* n of them, at one capacity */
    int n;
    int first;       /* the search that takes turn 0 */
    long long slice; /* units of work per turn, > 0 */
    long long budget; /* units for all turns together (<= 0: no limit) */
    double deadline;  /* CLOCK_MONOTONIC seconds after which no turn starts or goes on (<= 0: none) */
};

struct tg_turns_report {
    long long spent;         /* work of the turns counted (those up to the answer) */
    int next_first;          /* the search that would take the next turn */
    long long helper_turns;  /* turns run on helper threads (whether they take part) */
    bool out_of_memory;      /* the turns stopped (or never started) for want of scratch memory */
};

/* Takes the turns on pool (NULL: the calling thread alone) until an answer
 * or the budget or the deadline.  FOUND writes the plan to offset (n
 * entries of the problem).  Without scratch memory, GAVE_UP before any
 * turn. */
enum tg_canonical_result tg_turns_run(struct tg_turn_pool *pool, const struct tg_turns *turns, size_t *offset,
                                      struct tg_turns_report *report);

#endif

/* The offline planner's problem and what its files share (internal).
 *
 *   plan_problem.c   the lower bound; the problem: sizes rounded to the
 *                    alignment, inclusive step ranges, the conflict graph,
 *                    alignments and fixed offsets
 *   plan_place.c     placement of priority orders, the strategies' orders
 *   plan_offline.c   the portfolio, the local search, the canonical search
 *                    in rounds, tg_plan_offline_fit
 *   plan_exact.c     the depth-first exact search
 *   plan_canonical.c the canonical exact search (plan-canonical.h)
 *   plan_turns.c     its searches taking turns, on one thread or several
 *                    (plan-turns.h) */
#ifndef TG_PLAN_OFFLINE_IMPL_H
#define TG_PLAN_OFFLINE_IMPL_H

#include "plan-offline.h"
#include "tg-size.h"
#include "tg-sort.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in seconds (deadlines of the searches run by the clock). */
double offline_now_seconds(void);

/* ---- the problem (plan_problem.c) ---- */

#define OFFLINE_FREE SIZE_MAX /* a fixed[] entry: the block may go anywhere */

struct offline_problem {
    int n;
    size_t *size;   /* rounded to the alignment */
    int *start;
    int *end;       /* inclusive, never below start */
    int *adj_begin; /* n + 1 entries: conflicts of i are adj[adj_begin[i] .. adj_begin[i+1]) */
    int *adj;
    /* Where a block has an alignment of its own or some block is fixed:
     * each block's alignment (the options' and its own), else NULL (every
     * offset that sums rounded sizes is aligned already). */
    size_t *align;
    size_t *fixed;  /* each block's fixed offset or OFFLINE_FREE; NULL when none is fixed */
    int n_fixed;
    bool fixed_overlap; /* two fixed blocks live together share bytes: no plan exists */
    size_t lower_bound; /* of the rounded sizes, and the ends of fixed blocks */
};

/* The lowest offset at or above at that block i may take (SIZE_MAX when none). */
static inline size_t offline_aligned(const struct offline_problem *p, int i, size_t at) {
    return p->align ? round_up(at, p->align[i]) : at;
}

/* One full placement's work: every conflict-list entry and every block (what
 * a placement of every block counts); the searches' budgets are multiples of it. */
static inline long long offline_full_placement_work(const struct offline_problem *p) {
    return (long long)p->adj_begin[p->n] + p->n;
}

/* block_alignment, fixed: as in tg_offline_options (NULL: none).  false
 * when scratch memory cannot be had (p is left empty). */
bool offline_problem_init(struct offline_problem *p, const struct tg_live_block *blocks, int n, size_t alignment,
                          const size_t *block_alignment, const bool *fixed);
void offline_problem_release(struct offline_problem *p);

/* Blocks by start step (ties by index): the sweeps' order. */
struct start_key {
    int start;
    int index;
};
#define START_BEFORE(x, y) ((x).start != (y).start ? (x).start < (y).start : (x).index < (y).index)

/* ---- placement of priority orders (plan_place.c) ---- */

/* FIT_LOWEST places blocks in offset order instead of priority order: the
 * order only breaks ties (see plan_place.c). */
enum fit_mode { FIT_FIRST, FIT_BEST, FIT_LOWEST };

struct span {
    size_t offset;
    size_t size;
};

struct heap_entry {
    size_t floor; /* lowest offset the block can take above its placed neighbours */
    int rank;     /* position in the priority order */
    int block;
};

/* A placed block in the dense problems' placement. */
struct placed_block {
    size_t offset, top;
    int first_step, last_step;
};

struct placer {
    const struct offline_problem *p;
    struct span *spans; /* scratch, max degree entries */
    /* Dense problems: the blocks placed so far by offset, n entries,
     * instead of sorting each block's conflicts (NULL: not dense). */
    struct placed_block *by_offset;
    int n_by_offset;
    int *position;      /* position of each block in the order being placed */
    long long work;     /* conflict-list entries visited: the deterministic effort unit */
    struct heap_entry *heap; /* scratch of the lowest-first placement, n entries */
    int *heap_index;         /* per block, its entry in heap */
    size_t *floor;           /* per block, for the lowest-first placement */
    bool *placed;
};

/* Places order[from..n) given the offsets of order[0..from) and prefix_peak
 * (prefix_peak[q] = peak of order[0..q]).  Stops early, returning SIZE_MAX,
 * as soon as the peak passes give_up_above.  FIT_LOWEST places the whole
 * order again (from is ignored) and needs a problem without fixed blocks. */
size_t place_order(struct placer *pl, const int *order, int from, size_t *offset, size_t *prefix_peak,
                   enum fit_mode fit, size_t give_up_above);

/* A strategy's priority order (keys: n entries of scratch); fixed blocks
 * first.  breadth may be NULL (the breadth order degrades to index order). */
void make_order(const struct offline_problem *p, enum tg_offline_strategy s, const size_t *breadth,
                struct tg_rank_key *keys, int *order);
enum fit_mode strategy_fit(enum tg_offline_strategy s);
/* Live bytes of the busiest step each block spans; false without memory. */
bool compute_breadth(const struct offline_problem *p, size_t *breadth);

/* ---- the depth-first exact search (plan_exact.c) ---- */

/* Rounds of depth-first attempts at capacities between the lower bound and
 * *peak (see plan_exact.c), improving the caller's best plan (*peak and
 * offset, n entries) whenever one is found.  rank: the blocks' ranks in the
 * best heuristic order.  Stops at the deadline (seconds > 0), after
 * total_nodes nodes and total_work work (deterministic mode, > 0), or when
 * the plan is at the bound.  bound_only: attempts at the lower bound only.
 * false when it could not run for want of scratch memory (the plan is then
 * the caller's, not the one the search would find). */
bool offline_exact_search(const struct offline_problem *p, const int *rank, const struct tg_offline_budgets *budgets,
                          double seconds, long long total_nodes, long long total_work, bool bound_only, size_t *peak,
                          size_t *offset);

#endif

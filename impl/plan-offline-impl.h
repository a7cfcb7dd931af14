/* The offline planner's problem and what its files share (internal).
 *
 *   plan_problem.c   the lower bound; the problem: sizes rounded to the
 *                    alignment, inclusive step ranges, the conflict graph
 *   plan_offline.c   placement of priority orders, the portfolio, the local
 *                    search, the canonical search in rounds, tg_plan_offline
 *   plan_exact.c     the depth-first exact search
 *   plan_canonical.c the canonical exact search (plan-canonical.h) */
#ifndef TG_PLAN_OFFLINE_IMPL_H
#define TG_PLAN_OFFLINE_IMPL_H

#include "plan-offline.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- saturating size arithmetic (a peak past SIZE_MAX reads as SIZE_MAX) ---- */

static inline size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

static inline size_t sat_mul(size_t a, size_t b) {
    if (a != 0 && b > SIZE_MAX / a) return SIZE_MAX;
    return a * b;
}

static inline size_t round_up(size_t size, size_t alignment) {
    if (alignment <= 1) return size;
    const size_t rem = size % alignment;
    if (rem == 0) return size;
    /* A size that cannot be rounded cannot be placed either: saturate. */
    if (size > SIZE_MAX - (alignment - rem)) return SIZE_MAX;
    return size + (alignment - rem);
}

/* CLOCK_MONOTONIC in seconds (deadlines of the searches run by the clock). */
double offline_now_seconds(void);

/* ---- the problem (plan_problem.c) ---- */

struct offline_problem {
    int n;
    size_t *size;   /* rounded to the alignment */
    int *start;
    int *end;       /* inclusive, never below start */
    int *adj_begin; /* n + 1 entries: conflicts of i are adj[adj_begin[i] .. adj_begin[i+1]) */
    int *adj;
    size_t lower_bound; /* of the rounded sizes */
};

/* One full placement's work: every conflict-list entry and every block (what
 * a placement of every block counts); the searches' budgets are multiples of it. */
static inline long long offline_full_placement_work(const struct offline_problem *p) {
    return (long long)p->adj_begin[p->n] + p->n;
}

/* false when scratch memory cannot be had (p is left empty). */
bool offline_problem_init(struct offline_problem *p, const struct tg_live_block *blocks, int n, size_t alignment);
void offline_problem_release(struct offline_problem *p);

/* Blocks by start step (ties by index): the sweeps' order. */
struct start_key {
    int start;
    int index;
};
#define START_BEFORE(x, y) ((x).start != (y).start ? (x).start < (y).start : (x).index < (y).index)

/* ---- the depth-first exact search (plan_exact.c) ---- */

/* Rounds of depth-first attempts at capacities between the lower bound and
 * *peak (see plan_exact.c), improving the caller's best plan (*peak and
 * offset, n entries) whenever one is found.  rank: the blocks' ranks in the
 * best heuristic order.  Stops at the deadline (seconds > 0), after
 * total_nodes nodes and total_work work (deterministic mode, > 0), or when
 * the plan is at the bound.  bound_only: attempts at the lower bound only. */
void offline_exact_search(const struct offline_problem *p, const int *rank, const struct tg_offline_budgets *budgets,
                          double seconds, long long total_nodes, long long total_work, bool bound_only, size_t *peak,
                          size_t *offset);

#endif

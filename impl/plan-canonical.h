/* Canonical exact search of the offline planner, internal.
 *
 * Decides whether blocks (sizes already rounded to the alignment, live over
 * inclusive step ranges, conflicts given as a CSR list) fit under a capacity,
 * by a depth-first search over canonical plans: every block sits on top of the
 * highest block placed before it that it conflicts with, and blocks are placed
 * in order of offset (MiniMalloc's canonical solutions, Moffitt, ASPLOS 2023).
 * Bounded by an effort count and an optional deadline, so a caller can run
 * it deterministically (effort only) or by the clock. */
#ifndef TG_PLAN_CANONICAL_H
#define TG_PLAN_CANONICAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_CANONICAL_FREE SIZE_MAX /* a fixed_offset entry: the block may go anywhere */

struct tg_canonical_problem {
    int n;
    const size_t *size;         /* 0: takes no memory */
    const int *start, *end;     /* inclusive steps, end >= start */
    const int *adj_begin, *adj; /* conflicts of i: adj[adj_begin[i] .. adj_begin[i+1]) */
    const size_t *alignment;    /* offsets of i are multiples of alignment[i] (NULL: 1 each) */
    const size_t *fixed_offset; /* i stays at fixed_offset[i] unless TG_CANONICAL_FREE (NULL: none fixed) */
};

enum tg_canonical_result {
    TG_CANONICAL_FOUND,      /* offsets written, every block ends at or below the capacity */
    TG_CANONICAL_INFEASIBLE, /* the whole search space was visited: no plan fits */
    TG_CANONICAL_GAVE_UP,    /* node limit, deadline, or no scratch memory */
};

/* MiniMalloc's preorders: the order blocks are tried in within a piece
 * (ties broken within a node by the lowest offset first), "total" being the
 * largest sum of unplaced sizes in a section the block spans when its piece
 * is ranked.  Instances fall to different ones. */
enum tg_canonical_preorder {
    TG_PREORDER_WIDTH_AREA_TOTAL, /* WAT: longest lived, then largest area, then busiest sections */
    TG_PREORDER_TOTAL_AREA_WIDTH, /* TAW */
    TG_PREORDER_TOTAL_WIDTH_AREA, /* TWA */
    TG_N_PREORDERS
};

/* effort: in, the most work to do (<= 0: no limit); out, the work done.
 * Work counts the entries the search visits (candidate-list entries,
 * conflicts, section spans and section members), so it tracks time across
 * instances where a count of placements would not: what one placement costs
 * varies by an order of magnitude between instances.  deadline: a
 * CLOCK_MONOTONIC time in seconds after which the search gives up (<= 0:
 * none).  offset: n entries, written only when found. */
enum tg_canonical_result tg_canonical_search(const struct tg_canonical_problem *p, size_t capacity,
                                             enum tg_canonical_preorder preorder, long long *effort, double deadline,
                                             size_t *offset);

/* The same search, run in slices: each run goes on from where the last one
 * stopped (at its effort or deadline), so a caller can take turns between
 * searches (several preorders or capacities) without repeating work; the
 * slices visit exactly the nodes one run with their total effort would.
 * tg_canonical_new returns NULL without memory or for a problem outside
 * the contract (an end below its start); tg_canonical_run then gives up.
 * Once a run returns FOUND or INFEASIBLE, every later run returns the same
 * (FOUND writes the offsets again); p must outlive the search. */
struct tg_canonical_search;
struct tg_canonical_search *tg_canonical_new(const struct tg_canonical_problem *p, size_t capacity,
                                             enum tg_canonical_preorder preorder);
enum tg_canonical_result tg_canonical_run(struct tg_canonical_search *search, long long *effort, double deadline,
                                          size_t *offset);
void tg_canonical_free(struct tg_canonical_search *search);
/* Whether search gave up for want of scratch memory (not for its effort or
 * deadline): its GAVE_UP then is no answer the budgets give. */
bool tg_canonical_out_of_memory(const struct tg_canonical_search *search);

/* A search whose preorder is a plan: blocks are tried in the order of their
 * offsets in guide (n entries, copied; ties by the busiest section's total,
 * then lifetime), so that below a plan's peak its first plans differ from
 * that plan in the blocks placed last, the highest ones, and the search
 * walks outward from there.  Still complete: INFEASIBLE is a proof, as for
 * any preorder.  NULL when guide is NULL, as tg_canonical_new otherwise. */
struct tg_canonical_search *tg_canonical_new_guided(const struct tg_canonical_problem *p, size_t capacity,
                                                    const size_t *guide);

#endif

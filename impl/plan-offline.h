/* Offline offset planner (the engine of TG_PLAN_BEST, and of tg-plan.h),
 * internal.
 *
 * Input: blocks with a size and an inclusive step range [start, end] over which
 * they are live, optionally an alignment of their own and a fixed offset.
 * Output: an offset per block such that blocks whose step ranges intersect
 * never share a byte, with the peak (max offset + size) as small as the
 * planner can make it, or at most a given capacity.  Pure algorithm: no
 * tensors, no buffers.
 *
 * Default mode is deterministic: the same input and options give the same
 * offsets, because every search is bounded by work derived from the input,
 * never by the clock.  Only exact makes the result depend on timing. */
#ifndef TG_PLAN_OFFLINE_H
#define TG_PLAN_OFFLINE_H

#include <stdbool.h>
#include <stddef.h>

struct tg_live_block {
    size_t size;
    int start;     /* first step the block is live */
    int end;       /* last step the block is live (inclusive) */
    size_t offset; /* output; the input of a fixed block */
};

/* The planner's effort budgets, one reason each at tg_offline_default_budgets
 * (plan_offline.c).  Units: "placements" are full re-placements of every
 * block, whose work is the conflict-list entries and blocks they visit (the
 * searches' work units are plan-canonical.h's); nodes are depth-first search
 * nodes. */
struct tg_offline_budgets {
    int dense_one_in;           /* place by walking the placed blocks when a block conflicts with > 1 in this many (0: never) */
    int small_problem_blocks;   /* up to this many blocks: the small budgets below */
    int search_max_blocks;      /* the exact searches are skipped above this many blocks */
    long long local_search_placements;
    long long small_local_search_placements;
    long long local_search_max_work;
    long long early_search_placements;
    double early_search_max_excess; /* the early search is tried within this fraction above the bound */
    long long bound_search_work; /* the canonical search at the bound, before the local search */
    long long small_bound_search_placements;
    long long canonical_ladder_effort;
    long long small_ladder_placements;
    long long capacity_placements; /* the canonical search at a given capacity the heuristics missed */
    long long small_dfs_nodes;
    long long small_dfs_work;
    long long small_bound_dfs_nodes;
    long long dfs_first_attempt_nodes;
    double exact_default_seconds; /* opts->exact without exact_seconds */
    double exact_bound_share;     /* ... the canonical search at the bound (or the capacity) until this share of the time */
    double exact_ladder_share;    /* ... and down the ladder until this share */
};
extern const struct tg_offline_budgets tg_offline_default_budgets;

struct tg_offline_options {
    size_t alignment;     /* sizes are rounded up to it, offsets are multiples of it (0 or 1: no alignment) */
    const size_t *block_alignment; /* n entries or NULL: block i's offset is a multiple of this too (0, 1: none) */
    const bool *fixed;    /* n entries or NULL: block i is pre-placed, it stays at its offset */
    size_t capacity;      /* > 0: a plan whose peak is at most this is wanted (tg_plan_offline_fit) */
    bool exact;           /* after the heuristics, search by the clock: for a plan at the lower bound, or under the capacity */
    double exact_seconds; /* wall-clock limit of the exact search (<= 0: the budgets' default) */
    const struct tg_offline_budgets *budgets; /* NULL: tg_offline_default_budgets */
    int threads; /* > 1: the canonical searches' turns also run on threads - 1 helpers (the same plan for any count) */
};

enum tg_offline_fit {
    TG_OFFLINE_FITS,       /* offsets written; the peak is at most the capacity (or no capacity was given) */
    TG_OFFLINE_INFEASIBLE, /* no plan fits: two fixed blocks overlap, the lower bound exceeds the capacity, or
                            * the canonical search visited every plan it must (offsets: the best plan found, if any) */
    TG_OFFLINE_NOT_FOUND,  /* no plan under the capacity within the limits; offsets hold the best plan found */
    TG_OFFLINE_NO_MEMORY,  /* scratch memory ran out: offsets hold a valid plan (the blocks stacked, or the best
                            * found before), but not the one the budgets give, and no answer about the capacity */
};

/* Places every block and reports whether the plan fits opts->capacity;
 * *peak receives the plan's peak (SIZE_MAX when it does not fit in size_t,
 * or when fixed blocks overlap and no plan exists).  Fixed blocks keep their
 * offsets; every other block's offset is a multiple of the options' alignment
 * and of its own.  opts may be NULL (alignment 1, no capacity,
 * deterministic default). */
enum tg_offline_fit tg_plan_offline_fit(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts,
                                        size_t *peak);

/* Places every block with the lowest peak the planner finds (sizes are
 * rounded up to the alignment again here) and returns the peak.  Never fails
 * without fixed blocks: when scratch memory cannot be had, the blocks are
 * stacked one above the other, which is valid but not tight.  A peak that
 * does not fit in size_t is reported as SIZE_MAX.  opts may be NULL
 * (alignment 1, deterministic default); its capacity is ignored. */
size_t tg_plan_offline(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts);

/* Max over steps of the sum of sizes of the blocks live at that step
 * (sizes as given, saturating at SIZE_MAX). */
size_t tg_live_lower_bound(const struct tg_live_block *blocks, int n);

/* The single strategies of the portfolio, exposed for the benchmark and tests
 * (to show what the portfolio gains over each). */
enum tg_offline_strategy {
    TG_OFFLINE_GREEDY_SIZE,     /* largest first, lowest offset that fits */
    TG_OFFLINE_GREEDY_AREA,     /* size x lifetime first, lowest offset that fits */
    TG_OFFLINE_GREEDY_BREADTH,  /* blocks at the busiest steps first */
    TG_OFFLINE_GREEDY_LIFETIME, /* longest lived first */
    TG_OFFLINE_BEST_FIT_TIME,   /* sweep by start, smallest hole that fits */
    TG_OFFLINE_LOWEST_AREA,     /* bottom up: lowest free floor next, ties by size x lifetime */
    TG_OFFLINE_LOWEST_LIFETIME, /* bottom up, ties by lifetime */
    TG_OFFLINE_LOWEST_SIZE,     /* bottom up, ties by size */
    TG_OFFLINE_N_STRATEGIES
};

const char *tg_offline_strategy_name(enum tg_offline_strategy s);

/* Places the blocks with one strategy only, no local search; returns the peak.
 * opts: its alignment and budgets (NULL: alignment 1, the default budgets). */
size_t tg_plan_offline_single(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts,
                              enum tg_offline_strategy s);

#endif

/* Offline offset planner (the engine of TG_PLAN_BEST), internal.
 *
 * Input: blocks with a size and an inclusive step range [start, end] over which
 * they are live.  Output: an offset per block such that blocks whose step
 * ranges intersect never share a byte, with the peak (max offset + size) as
 * small as the planner can make it.  Pure algorithm: no tensors, no buffers.
 *
 * Default mode is deterministic: the same input and options give the same
 * offsets, because the local search is bounded by an iteration count derived
 * from the input size, never by the clock.  Only time_budget_ms > 0 or exact
 * make the result depend on timing. */
#ifndef TG_PLAN_OFFLINE_H
#define TG_PLAN_OFFLINE_H

#include <stdbool.h>
#include <stddef.h>

struct tg_live_block {
    size_t size;
    int start;     /* first step the block is live */
    int end;       /* last step the block is live (inclusive) */
    size_t offset; /* output */
};

struct tg_offline_options {
    size_t alignment;      /* offsets are multiples of it (0 or 1: no alignment) */
    double time_budget_ms; /* > 0: also stop the local search after this long (non-deterministic) */
    bool exact;            /* after the heuristics, search for a plan at the lower bound */
    double exact_seconds;  /* wall-clock limit of the exact search (<= 0: 10 s) */
};

/* Places every block (sizes are rounded up to the alignment again here) and
 * returns the peak.  Never fails: when scratch memory cannot be had, the blocks
 * are stacked one above the other, which is valid but not tight.  A peak that
 * does not fit in size_t is reported as SIZE_MAX.  opts may be NULL (alignment
 * 1, deterministic default). */
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

/* Places the blocks with one strategy only, no local search; returns the peak. */
size_t tg_plan_offline_single(struct tg_live_block *blocks, int n, size_t alignment, enum tg_offline_strategy s);

#endif

/* Offline offset planner (the engine of TG_PLAN_BEST; the contract is in
 * plan-offline.h): a portfolio of greedy placements of priority orders over
 * the conflict graph, a bounded local search on the best order, and exact
 * searches (the canonical one of plan-canonical.h, the depth-first one of
 * plan_exact.c) bounded by work, in the order tg_plan_offline lists.
 *
 * A placement query looks only at the blocks whose step ranges intersect the
 * block being placed (its adjacency list in the conflict graph), sorts them
 * by offset and scans the holes: O(k log k) for k conflicting blocks.  On
 * dense problems, where k is a good part of all blocks, it walks the placed
 * blocks kept in offset order instead (same holes, no sort). */
#include "plan-canonical.h"
#include "plan-offline-impl.h"
#include "tg-checks.h"
#include "tg-sort.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

TG_DEFINE_SORT(sort_start_keys, struct start_key, START_BEFORE)

/* ---- budgets ---- */

const struct tg_offline_budgets tg_offline_default_budgets = {
    /* a walk visits up to all placed blocks, a sort d log d entries for d conflicts */
    .dense_one_in = 4,
    /* problems of the fuzz targets' size get their own, smaller budgets */
    .small_problem_blocks = 64,
    .medium_problem_blocks = 128,
    /* the exact searches keep blocks x depth entries of scratch; beyond this they cannot finish anyway */
    .search_max_blocks = 2048,
    /* the local search re-places the best order this many times... */
    .local_search_placements = 400,
    .small_local_search_placements = 100,
    /* ...but visits no more entries than this: big dense problems stay at tens of milliseconds */
    .local_search_max_work = 1000000,
    /* near the bound, a short local search first often reaches it, and then the portfolio is skipped */
    .early_search_placements = 16,
    .early_search_max_excess = 0.10,
    /* the canonical search's first round at the bound, per preorder: this effort, or these many
     * placements' worth where that is less (a search a few placements cannot finish rarely pays) */
    .canonical_first_effort = 524288,
    .canonical_first_placements = 87,
    .medium_canonical_first_placements = 40,
    /* the canonical search down the ladder of capacities after the other searches: this effort
     * in full from ladder_full_excess above the bound, in proportion below, and never more than
     * these many placements' worth (close to the bound its steps are small and rarely pay) */
    .canonical_ladder_effort = 8000000,
    .ladder_full_excess = 0.10,
    .ladder_max_placements = 2000,
    /* the depth-first search after the local search: nodes, and work (long-lived blocks make nodes dear) */
    .dfs_nodes = 8000,
    .dfs_work = 16000000,
    .small_dfs_nodes = 1000,
    /* small problems try this many depth-first nodes at the bound before the canonical search:
     * each finds bound plans the other misses */
    .small_bound_dfs_nodes = 100,
    /* the depth-first search's first attempts are this short, and double per round */
    .dfs_first_attempt_nodes = 256,
    /* opts->exact: the default time, and the shares of it the canonical search takes at the
     * bound and down the ladder (the depth-first search has the rest) */
    .exact_default_seconds = 10.0,
    .exact_bound_share = 0.5,
    .exact_ladder_share = 0.8,
};

/* ---- placement of one priority order ---- */

struct span {
    size_t offset;
    size_t size;
};

#define SPAN_BEFORE(x, y) ((x).offset < (y).offset)
TG_DEFINE_SORT(sort_spans, struct span, SPAN_BEFORE)

/* FIT_LOWEST places blocks in offset order instead of priority order: the
 * order only breaks ties (see place_lowest_first). */
enum fit_mode { FIT_FIRST, FIT_BEST, FIT_LOWEST };

struct heap_entry {
    size_t floor; /* lowest offset the block can take above its placed neighbours */
    int rank;     /* position in the priority order */
    int block;
};

/* A placed block in the dense problems' placement (see place_block_dense). */
struct placed_block {
    size_t offset, top;
    int first_step, last_step;
};

#define PLACED_BEFORE(x, y) ((x).offset < (y).offset)
TG_DEFINE_SORT(sort_placed, struct placed_block, PLACED_BEFORE)

struct placer {
    const struct offline_problem *p;
    struct span *spans; /* scratch, max degree entries */
    /* Dense problems (see dense_problem): the blocks placed so far by
     * offset, n entries, instead of sorting each block's conflicts. */
    struct placed_block *by_offset;
    int n_by_offset;
    int *position;      /* position of each block in the order being placed */
    long long work;     /* conflict-list entries visited: the deterministic effort unit */
    struct heap_entry *heap; /* scratch of the lowest-first placement, n entries */
    int *heap_index;         /* per block, its entry in heap */
    size_t *floor;           /* per block, for the lowest-first placement */
    bool *placed;
};

/* place_block for dense problems: the placed blocks are kept in offset
 * order, so the holes are read off in one walk over them, skipping those
 * whose steps do not meet block i's, and a first fit stops at its hole.
 * The same offsets as place_block (the holes are the same, in the same
 * order) and the same work count; then i joins the placed blocks. */
static size_t place_block_dense(struct placer *pl, int i, enum fit_mode fit) {
    const struct offline_problem *p = pl->p;
    const size_t size = p->size[i];
    if (size == 0) return 0;
    pl->work += p->adj_begin[i + 1] - p->adj_begin[i] + 1;
    const int first = p->start[i], last = p->end[i];
    const struct placed_block *placed = pl->by_offset;
    const int count = pl->n_by_offset;
    size_t top = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int k = 0; k < count; k++) {
        const struct placed_block *b = &placed[k];
        if (b->first_step > last || b->last_step < first) continue;
        if (b->offset > top && b->offset - top >= size) {
            const size_t gap = b->offset - top;
            if (fit == FIT_FIRST) {
                best = top;
                break;
            }
            if (gap < best_gap) {
                best_gap = gap;
                best = top;
            }
        }
        if (b->top > top) top = b->top;
    }
    const size_t at = best != SIZE_MAX ? best : top;
    /* after the blocks at or below its offset: the binary search finds the place */
    int lo = 0, hi = count;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (placed[mid].offset <= at) lo = mid + 1;
        else hi = mid;
    }
    memmove(&pl->by_offset[lo + 1], &pl->by_offset[lo], sizeof(pl->by_offset[0]) * (size_t)(count - lo));
    pl->by_offset[lo] = (struct placed_block){at, sat_add(at, size), first, last};
    pl->n_by_offset++;
    return at;
}

/* Lowest (FIT_FIRST) or tightest (FIT_BEST) offset for block i among the
 * already-placed blocks it conflicts with (those before it in the order). */
static size_t place_block(struct placer *pl, int i, const size_t *offset, enum fit_mode fit) {
    const struct offline_problem *p = pl->p;
    const size_t size = p->size[i];
    if (size == 0) return 0;
    const int my_pos = pl->position[i];
    int k = 0;
    for (int e = p->adj_begin[i]; e < p->adj_begin[i + 1]; e++) {
        const int j = p->adj[e];
        if (pl->position[j] < my_pos) pl->spans[k++] = (struct span){offset[j], p->size[j]};
    }
    pl->work += p->adj_begin[i + 1] - p->adj_begin[i] + 1;
    sort_spans(pl->spans, k);
    size_t top = 0; /* everything below top is taken by an earlier span */
    size_t best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int s = 0; s < k; s++) {
        const struct span sp = pl->spans[s];
        if (sp.offset > top && sp.offset - top >= size) {
            const size_t gap = sp.offset - top;
            if (fit == FIT_FIRST) return top;
            if (gap < best_gap) {
                best_gap = gap;
                best = top;
            }
        }
        const size_t sp_end = sat_add(sp.offset, sp.size);
        if (sp_end > top) top = sp_end;
    }
    return best != SIZE_MAX ? best : top;
}

static bool heap_less(const struct heap_entry *a, const struct heap_entry *b) {
    if (a->floor != b->floor) return a->floor < b->floor;
    return a->rank < b->rank;
}

/* The lowest-first placement's heap holds one entry per unplaced block;
 * heap_index[block] is where.  Floors only rise, so a raised entry moves
 * down: no stale entries to push and skip. */
static void heap_sift_down(struct placer *pl, int count, int at) {
    struct heap_entry *h = pl->heap;
    const struct heap_entry e = h[at];
    for (;;) {
        int child = 2 * at + 1;
        if (child >= count) break;
        if (child + 1 < count && heap_less(&h[child + 1], &h[child])) child++;
        if (!heap_less(&h[child], &e)) break;
        h[at] = h[child];
        pl->heap_index[h[at].block] = at;
        at = child;
    }
    h[at] = e;
    pl->heap_index[e.block] = at;
}

/* Canonical placement (the shape of MiniMalloc's solutions): repeatedly the
 * unplaced block with the lowest floor (the top of its placed conflicting
 * blocks), ties to the earliest in the priority order, takes its floor.
 * Memory fills bottom up, so a hole only stays open when no remaining block
 * can use it. */
static size_t place_lowest_first(struct placer *pl, const int *order, size_t *offset, size_t give_up_above) {
    const struct offline_problem *p = pl->p;
    int count = p->n;
    /* All floors start at 0, so the entries in rank order already form a heap. */
    for (int q = 0; q < p->n; q++) {
        const int i = order[q];
        pl->floor[i] = 0;
        pl->placed[i] = false;
        pl->heap[q] = (struct heap_entry){0, q, i};
        pl->heap_index[i] = q;
    }
    size_t peak = 0;
    while (count > 0) {
        const struct heap_entry e = pl->heap[0];
        const int i = e.block;
        if (--count > 0) {
            pl->heap[0] = pl->heap[count];
            heap_sift_down(pl, count, 0);
        }
        pl->placed[i] = true;
        offset[i] = e.floor;
        const size_t end = sat_add(e.floor, p->size[i]);
        if (end > peak) {
            peak = end;
            if (peak > give_up_above) return SIZE_MAX;
        }
        pl->work += p->adj_begin[i + 1] - p->adj_begin[i] + 1;
        for (int a = p->adj_begin[i]; a < p->adj_begin[i + 1]; a++) {
            const int j = p->adj[a];
            if (pl->placed[j] || pl->floor[j] >= end) continue;
            pl->floor[j] = end;
            pl->heap[pl->heap_index[j]].floor = end;
            heap_sift_down(pl, count, pl->heap_index[j]);
        }
    }
    return peak;
}

/* Places order[from..n) given the offsets of order[0..from) and prefix_peak
 * (prefix_peak[q] = peak of order[0..q]).  Stops early, returning SIZE_MAX,
 * as soon as the peak passes give_up_above. */
static size_t place_order(struct placer *pl, const int *order, int from, size_t *offset, size_t *prefix_peak,
                          enum fit_mode fit, size_t give_up_above) {
    const struct offline_problem *p = pl->p;
    for (int q = from; q < p->n; q++) pl->position[order[q]] = q;
    if (fit == FIT_LOWEST) {
        /* Places the whole order again: a block's rank is its position in it. */
        return place_lowest_first(pl, order, offset, give_up_above);
    }
    if (pl->by_offset) {
        /* the kept prefix, by offset */
        pl->n_by_offset = 0;
        for (int q = 0; q < from; q++) {
            const int i = order[q];
            if (p->size[i] > 0)
                pl->by_offset[pl->n_by_offset++] =
                    (struct placed_block){offset[i], sat_add(offset[i], p->size[i]), p->start[i], p->end[i]};
        }
        sort_placed(pl->by_offset, pl->n_by_offset);
    }
    size_t peak = from > 0 ? prefix_peak[from - 1] : 0;
    for (int q = from; q < p->n; q++) {
        const int i = order[q];
        offset[i] = pl->by_offset ? place_block_dense(pl, i, fit) : place_block(pl, i, offset, fit);
        const size_t end = sat_add(offset[i], p->size[i]);
        if (end > peak) peak = end;
        prefix_peak[q] = peak;
        if (peak > give_up_above) return SIZE_MAX;
    }
    return peak;
}

/* ---- priority orders ---- */

TG_DEFINE_SORT(sort_keys_desc, struct tg_rank_key, TG_RANK_KEY_BEFORE)

/* Live bytes of the busiest step each block spans: a sweep over the rounded
 * sizes at the distinct start steps (the live sum only peaks at a start). */
static bool compute_breadth(const struct offline_problem *p, size_t *breadth) {
    const int n = p->n;
    struct start_key *starts = malloc(sizeof(*starts) * (size_t)n);
    size_t *live = calloc((size_t)n + 1, sizeof(size_t));
    if (!starts || !live) {
        free(starts);
        free(live);
        return false;
    }
    for (int i = 0; i < n; i++) starts[i] = (struct start_key){p->start[i], i};
    sort_start_keys(starts, n);
    /* live[s] for the s-th start in sorted order (duplicates share a value). */
    for (int s = 0; s < n; s++) {
        const int t = starts[s].start;
        size_t sum = 0;
        for (int e = p->adj_begin[starts[s].index]; e < p->adj_begin[starts[s].index + 1]; e++) {
            const int j = p->adj[e];
            if (p->start[j] <= t && p->end[j] >= t) sum = sat_add(sum, p->size[j]);
        }
        live[s] = sat_add(sum, p->size[starts[s].index]);
        /* Blocks with size 0 have no edges; the step still counts others live
         * through any sized block starting at the same step. */
    }
    for (int i = 0; i < n; i++) breadth[i] = 0;
    /* A block's busiest step is the start of itself or of a conflicting block
     * inside its range: both are visited through its own conflict list. */
    for (int s = 0; s < n; s++) {
        const int i = starts[s].index;
        if (live[s] > breadth[i]) breadth[i] = live[s];
        for (int e = p->adj_begin[i]; e < p->adj_begin[i + 1]; e++) {
            const int j = p->adj[e];
            if (p->start[i] >= p->start[j] && live[s] > breadth[j]) breadth[j] = live[s];
        }
    }
    free(starts);
    free(live);
    return true;
}

static void make_order(const struct offline_problem *p, enum tg_offline_strategy s, const size_t *breadth,
                       struct tg_rank_key *keys, int *order) {
    const int n = p->n;
    for (int i = 0; i < n; i++) {
        const size_t size = p->size[i];
        const size_t life = (size_t)((long long)p->end[i] - p->start[i] + 1);
        struct tg_rank_key k = {size, life, 0, i};
        switch (s) {
        case TG_OFFLINE_LOWEST_SIZE:
        case TG_OFFLINE_GREEDY_SIZE: k = (struct tg_rank_key){size, life, 0, i}; break;
        case TG_OFFLINE_LOWEST_AREA:
        case TG_OFFLINE_GREEDY_AREA: k = (struct tg_rank_key){sat_mul(size, life), size, 0, i}; break;
        case TG_OFFLINE_GREEDY_BREADTH: k = (struct tg_rank_key){breadth ? breadth[i] : 0, size, life, i}; break;
        case TG_OFFLINE_LOWEST_LIFETIME:
        case TG_OFFLINE_GREEDY_LIFETIME: k = (struct tg_rank_key){life, size, 0, i}; break;
        case TG_OFFLINE_BEST_FIT_TIME:
            /* Earliest start first: negate by subtracting from the maximum. */
            k = (struct tg_rank_key){(size_t)INT_MAX - (size_t)((long long)p->start[i] - INT_MIN), size, life, i};
            break;
        default: break;
        }
        keys[i] = k;
    }
    sort_keys_desc(keys, n);
    for (int i = 0; i < n; i++) order[i] = keys[i].index;
}

static enum fit_mode strategy_fit(enum tg_offline_strategy s) {
    if (s == TG_OFFLINE_BEST_FIT_TIME) return FIT_BEST;
    if (s == TG_OFFLINE_LOWEST_AREA || s == TG_OFFLINE_LOWEST_LIFETIME || s == TG_OFFLINE_LOWEST_SIZE)
        return FIT_LOWEST;
    return FIT_FIRST;
}

const char *tg_offline_strategy_name(enum tg_offline_strategy s) {
    switch (s) {
    case TG_OFFLINE_GREEDY_SIZE: return "greedy-size";
    case TG_OFFLINE_GREEDY_AREA: return "greedy-area";
    case TG_OFFLINE_GREEDY_BREADTH: return "greedy-breadth";
    case TG_OFFLINE_GREEDY_LIFETIME: return "greedy-lifetime";
    case TG_OFFLINE_BEST_FIT_TIME: return "best-fit-time";
    case TG_OFFLINE_LOWEST_AREA: return "lowest-area";
    case TG_OFFLINE_LOWEST_LIFETIME: return "lowest-lifetime";
    case TG_OFFLINE_LOWEST_SIZE: return "lowest-size";
    default: return "unknown";
    }
}

/* ---- fallback and small-n paths ---- */

/* Stack every block above the previous one: valid for any input, needs no memory. */
static size_t stack_blocks(struct tg_live_block *blocks, int n, size_t alignment) {
    size_t top = 0;
    for (int i = 0; i < n; i++) {
        blocks[i].offset = top;
        top = sat_add(top, round_up(blocks[i].size, alignment));
    }
    return top;
}

static size_t normalize_alignment(size_t alignment) {
    return alignment == 0 ? 1 : alignment;
}

/* ---- the search state shared by the portfolio, local search and exact mode ---- */

struct planner_run {
    struct offline_problem prob;
    struct placer pl;
    struct tg_rank_key *keys;
    size_t *breadth;
    int *order;        /* current order */
    int *cand_order;   /* candidate order */
    size_t *offset;    /* offsets for the current order */
    size_t *cand_offset;
    size_t *prefix_peak;
    size_t *cand_prefix_peak;
    size_t peak;
    bool have_plan; /* order/offset hold a complete placement */
    enum fit_mode fit;
    const struct tg_offline_budgets *b;
};

static void run_release(struct planner_run *r) {
    offline_problem_release(&r->prob);
    free(r->pl.spans);
    free(r->pl.by_offset);
    free(r->pl.position);
    free(r->pl.heap);
    free(r->pl.heap_index);
    free(r->pl.floor);
    free(r->pl.placed);
    free(r->keys);
    free(r->breadth);
    free(r->order);
    free(r->cand_order);
    free(r->offset);
    free(r->cand_offset);
    free(r->prefix_peak);
    free(r->cand_prefix_peak);
}

/* Whether to place by walking the placed blocks in offset order rather than
 * sorting each block's placed conflicts: the walk pays when the average
 * block conflicts with more than one in dense_one_in blocks (0: never). */
static bool dense_problem(const struct offline_problem *p, const struct tg_offline_budgets *b) {
    return b->dense_one_in > 0 && (long long)p->adj_begin[p->n] * b->dense_one_in > (long long)p->n * p->n;
}

static bool run_init(struct planner_run *r, const struct tg_live_block *blocks, int n, size_t alignment,
                     const struct tg_offline_budgets *budgets) {
    memset(r, 0, sizeof(*r));
    r->b = budgets;
    if (!offline_problem_init(&r->prob, blocks, n, alignment)) return false;
    int max_degree = 0;
    for (int i = 0; i < n; i++) {
        const int d = r->prob.adj_begin[i + 1] - r->prob.adj_begin[i];
        if (d > max_degree) max_degree = d;
    }
    const size_t un = (size_t)n;
    r->pl.p = &r->prob;
    r->pl.spans = malloc(sizeof(struct span) * ((size_t)max_degree + 1));
    const bool dense = dense_problem(&r->prob, budgets);
    if (dense) r->pl.by_offset = malloc(sizeof(*r->pl.by_offset) * un);
    r->pl.position = malloc(sizeof(int) * un);
    r->pl.heap = malloc(sizeof(struct heap_entry) * un);
    r->pl.heap_index = malloc(sizeof(int) * un);
    r->pl.floor = malloc(sizeof(size_t) * un);
    r->pl.placed = malloc(sizeof(bool) * un);
    r->keys = malloc(sizeof(*r->keys) * un);
    r->breadth = malloc(sizeof(size_t) * un);
    r->order = malloc(sizeof(int) * un);
    r->cand_order = malloc(sizeof(int) * un);
    r->offset = malloc(sizeof(size_t) * un);
    r->cand_offset = malloc(sizeof(size_t) * un);
    r->prefix_peak = calloc(un, sizeof(size_t));
    r->cand_prefix_peak = calloc(un, sizeof(size_t));
    if (!r->pl.spans || (dense && !r->pl.by_offset) || !r->pl.position || !r->pl.heap || !r->pl.heap_index || !r->pl.floor || !r->pl.placed || !r->keys || !r->breadth || !r->order || !r->cand_order ||
        !r->offset || !r->cand_offset || !r->prefix_peak || !r->cand_prefix_peak) {
        run_release(r);
        return false;
    }
    if (!compute_breadth(&r->prob, r->breadth)) {
        free(r->breadth);
        r->breadth = NULL; /* the breadth order degrades to index order */
    }
    r->peak = SIZE_MAX;
    return true;
}

/* Runs one strategy into the candidate buffers; adopts it when it is at least
 * as good as the current one (ties keep the earlier strategy). */
/* The analyzer loses track of the buffers when they are swapped: none is lost. */
// NOLINTBEGIN(clang-analyzer-unix.Malloc)
static size_t run_strategy(struct planner_run *r, enum tg_offline_strategy s) {
    make_order(&r->prob, s, r->breadth, r->keys, r->cand_order);
    const enum fit_mode fit = strategy_fit(s);
    const size_t peak = place_order(&r->pl, r->cand_order, 0, r->cand_offset, r->cand_prefix_peak, fit, SIZE_MAX);
    if (!r->have_plan || peak < r->peak) {
        r->have_plan = true;
        int *to = r->order;
        r->order = r->cand_order;
        r->cand_order = to;
        size_t *so = r->offset;
        r->offset = r->cand_offset;
        r->cand_offset = so;
        size_t *sp = r->prefix_peak;
        r->prefix_peak = r->cand_prefix_peak;
        r->cand_prefix_peak = sp;
        r->peak = peak;
        r->fit = fit;
    }
    return peak;
}
// NOLINTEND(clang-analyzer-unix.Malloc)

static void write_offsets(const struct planner_run *r, struct tg_live_block *blocks) {
    for (int i = 0; i < r->prob.n; i++) blocks[i].offset = r->offset[i];
}

size_t tg_plan_offline_single(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts,
                              enum tg_offline_strategy s) {
    if (blocks == NULL || n <= 0) return 0;
    const size_t alignment = normalize_alignment(opts ? opts->alignment : 1);
    const struct tg_offline_budgets *b = opts && opts->budgets ? opts->budgets : &tg_offline_default_budgets;
    if ((unsigned)s >= TG_OFFLINE_N_STRATEGIES) s = TG_OFFLINE_GREEDY_SIZE;
    struct planner_run r;
    if (!run_init(&r, blocks, n, alignment, b)) return stack_blocks(blocks, n, alignment);
    const size_t peak = run_strategy(&r, s);
    write_offsets(&r, blocks);
    run_release(&r);
    return peak;
}

/* ---- bounded local search ---- */

/* Small deterministic generator (xorshift64*), seeded from the input size so
 * the same input always walks the same path. */
static uint64_t next_random(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* The local search's moves: a block at the peak hops up to this many places
 * earlier in the order, or anywhere earlier, or two blocks swap; out of
 * LOCAL_MOVES draws, LOCAL_SHORT_HOPS are short hops and LOCAL_HOPS hops. */
#define LOCAL_HOP_WINDOW 8
#define LOCAL_MOVES 8
#define LOCAL_SHORT_HOPS 4
#define LOCAL_HOPS 6
/* The deadline of a timed local search is read once every this many iterations. */
#define LOCAL_CLOCK_EVERY 16

/* Makes pl.position give the rank of order[from..n) again (the searches
 * read the ranks of the adopted order).  order is the permutation the
 * placements wrote; the analyzer loses track of it through the generated
 * sort. */
static void adopt_positions(struct planner_run *r, int from) {
    // NOLINTNEXTLINE(clang-analyzer-core.uninitialized.ArraySubscript)
    for (int q = from; q < r->prob.n; q++) r->pl.position[r->order[q]] = q;
}

/* placements: the work budget in full re-placements (capped by the budgets'
 * local_search_max_work).  Deterministic by construction unless a time
 * budget is given. */
static void local_search(struct planner_run *r, double time_budget_ms, long long placements) {
    const int n = r->prob.n;
    if (n < 2 || r->peak <= r->prob.lower_bound) return;
    const long long full_placement = offline_full_placement_work(&r->prob);
    long long budget = full_placement * placements;
    if (budget > r->b->local_search_max_work) budget = r->b->local_search_max_work;
    const double deadline = time_budget_ms > 0 ? offline_now_seconds() + time_budget_ms * 1e-3 : 0;
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    int *peak_blocks = malloc(sizeof(int) * (size_t)n);
    if (peak_blocks == NULL) return;
    const long long start_work = r->pl.work;
    for (long long iter = 0; r->pl.work - start_work < budget; iter++) {
        if (r->peak <= r->prob.lower_bound) break;
        if (deadline > 0 && iter % LOCAL_CLOCK_EVERY == 0 && offline_now_seconds() > deadline) break;
        /* The blocks touching the peak decide it: move one of them earlier in
         * the order so it is placed before what now sits below it. */
        int n_peak = 0;
        for (int q = 0; q < n; q++) {
            const int i = r->order[q];
            if (sat_add(r->offset[i], r->prob.size[i]) == r->peak) peak_blocks[n_peak++] = q;
        }
        memcpy(r->cand_order, r->order, sizeof(int) * (size_t)n);
        int first_changed;
        const uint64_t move = next_random(&rng) % LOCAL_MOVES;
        const int from = n_peak > 0 ? peak_blocks[next_random(&rng) % (uint64_t)n_peak] : 0;
        if (move < LOCAL_HOPS && from > 0) {
            /* Mostly short hops (keep the good prefix), sometimes anywhere. */
            int to;
            if (move < LOCAL_SHORT_HOPS) {
                const int window = from < LOCAL_HOP_WINDOW ? from : LOCAL_HOP_WINDOW;
                to = from - 1 - (int)(next_random(&rng) % (uint64_t)window);
            } else {
                to = (int)(next_random(&rng) % (uint64_t)from);
            }
            const int moved = r->cand_order[from];
            memmove(r->cand_order + to + 1, r->cand_order + to, sizeof(int) * (size_t)(from - to));
            r->cand_order[to] = moved;
            first_changed = to;
        } else {
            /* Diversify: swap two random blocks. */
            int a = (int)(next_random(&rng) % (uint64_t)n);
            int b = (int)(next_random(&rng) % (uint64_t)n);
            if (a == b) continue;
            if (a > b) {
                const int t = a;
                a = b;
                b = t;
            }
            const int t = r->cand_order[a];
            r->cand_order[a] = r->cand_order[b];
            r->cand_order[b] = t;
            first_changed = a;
        }
        memcpy(r->cand_offset, r->offset, sizeof(size_t) * (size_t)n);
        memcpy(r->cand_prefix_peak, r->prefix_peak, sizeof(size_t) * (size_t)first_changed);
        /* Positions of the unchanged prefix are already right. */
        const size_t peak =
            place_order(&r->pl, r->cand_order, first_changed, r->cand_offset, r->cand_prefix_peak, r->fit, r->peak);
        if (peak <= r->peak) {
            /* Equal peaks are accepted too: walking the plateau finds exits. */
            int *to = r->order;
            r->order = r->cand_order;
            r->cand_order = to;
            size_t *so = r->offset;
            r->offset = r->cand_offset;
            r->cand_offset = so;
            size_t *sp = r->prefix_peak;
            r->prefix_peak = r->cand_prefix_peak;
            r->cand_prefix_peak = sp;
            r->peak = peak;
        } else {
            /* Restore the positions of the current order. */
            adopt_positions(r, first_changed);
        }
    }
    free(peak_blocks);
}

/* ---- the canonical search (plan-canonical.h) in rounds ---- */

/* Preorders in the order tried: each of the first four finds a bound plan
 * the others miss on some instances; the last finds plans above the bound
 * the others do not. */
static const enum tg_canonical_preorder canonical_preorders[] = {
    TG_PREORDER_TOTAL_WIDTH_AREA, TG_PREORDER_SECTIONS_AREA_TOTAL, TG_PREORDER_TOTAL_CONFLICTS_WIDTH,
    TG_PREORDER_TOTAL_AREA_WIDTH, TG_PREORDER_WIDTH_AREA_TOTAL};
#define N_CANONICAL_PREORDERS ((int)(sizeof(canonical_preorders) / sizeof(canonical_preorders[0])))
/* The ladder's next capacity is this fraction of the gap below the best peak
 * (each plan found shrinks the gap; a capacity halfway to the bound would
 * take far longer or have no plan). */
#define LADDER_STEP_DIVISOR 8

/* Takes a plan found by a search as the run's result. */
static void adopt_offsets(struct planner_run *r, const size_t *offset) {
    const struct offline_problem *p = &r->prob;
    size_t peak = 0;
    for (int i = 0; i < p->n; i++) {
        r->offset[i] = offset[i];
        if (sat_add(offset[i], p->size[i]) > peak) peak = sat_add(offset[i], p->size[i]);
    }
    r->peak = peak;
}

/* Rounds of canonical searches, every preorder in turn, the effort limit
 * doubling each round: at the lower bound (at_bound), or else a ladder, one
 * LADDER_STEP_DIVISOR-th of the gap below the best peak.  A capacity the
 * search proved infeasible (it visited every canonical plan) is not tried
 * again, nor any below it.  The first round gives each preorder first_effort
 * units.  Stops after budget units of effort (<= 0: no limit) or at the
 * deadline (<= 0: none). */
static void canonical_run(struct planner_run *r, long long first_effort, long long budget, double deadline,
                          bool at_bound) {
    const struct offline_problem *p = &r->prob;
    if (r->peak <= p->lower_bound || p->n > r->b->search_max_blocks) return;
    size_t *offset = malloc(sizeof(size_t) * (size_t)p->n);
    const struct tg_canonical_problem cp = {p->n, p->size, p->start, p->end, p->adj_begin, p->adj, NULL, NULL};
    size_t infeasible_up_to = 0; /* every capacity at or below it has no plan (0: none known) */
    long long spent = 0;
    bool done = offset == NULL;
    for (long long limit = first_effort; !done && r->peak > p->lower_bound; limit *= 2) {
        const size_t cap = at_bound ? p->lower_bound : r->peak - (r->peak - p->lower_bound) / LADDER_STEP_DIVISOR;
        if (cap <= infeasible_up_to || cap >= r->peak) break;
        for (int k = 0; k < N_CANONICAL_PREORDERS; k++) {
            long long effort = limit;
            if (budget > 0 && spent + effort > budget) effort = budget - spent;
            if (effort <= 0 || (deadline > 0 && offline_now_seconds() > deadline)) {
                done = true;
                break;
            }
            const enum tg_canonical_result result =
                tg_canonical_search(&cp, cap, canonical_preorders[k], &effort, deadline, offset);
            spent += effort;
            if (result == TG_CANONICAL_FOUND) adopt_offsets(r, offset);
            if (result == TG_CANONICAL_INFEASIBLE) infeasible_up_to = cap;
            if (result != TG_CANONICAL_GAVE_UP) break;
        }
        if (limit > LLONG_MAX / 4) break;
    }
    free(offset);
}

/* The depth-first search (plan_exact.c) from the run's best plan. */
static void exact_run(struct planner_run *r, double seconds, long long nodes, long long work, bool bound_only) {
    offline_exact_search(&r->prob, r->pl.position, r->b, seconds, nodes, work, bound_only, &r->peak, r->offset);
}

/* The ladder's effort: in proportion to how far the plan is above the bound,
 * in full from ladder_full_excess up, and at most ladder_max_placements
 * placements' worth. */
static long long ladder_effort(const struct planner_run *r) {
    const struct tg_offline_budgets *b = r->b;
    const size_t bound = r->prob.lower_bound;
    if (r->peak <= bound || bound == 0) return 0;
    const double excess = (double)(r->peak - bound) / (double)bound;
    const long long effort = excess >= b->ladder_full_excess
                                 ? b->canonical_ladder_effort
                                 : (long long)((double)b->canonical_ladder_effort * excess / b->ladder_full_excess) + 1;
    const long long most = offline_full_placement_work(&r->prob) * b->ladder_max_placements;
    return effort < most ? effort : most;
}

/* The first round's effort per preorder at the lower bound, before the local
 * search: canonical_first_effort, or canonical_first_placements placements'
 * worth (medium_canonical_first_placements up to medium_problem_blocks
 * blocks) where that is less. */
static long long bound_search_effort(const struct planner_run *r) {
    const struct tg_offline_budgets *b = r->b;
    const long long full_placement = offline_full_placement_work(&r->prob);
    const long long placements = r->prob.n <= b->medium_problem_blocks ? b->medium_canonical_first_placements
                                                                        : b->canonical_first_placements;
    return full_placement < b->canonical_first_effort / placements ? full_placement * placements
                                                                   : b->canonical_first_effort;
}

/* ---- entry point ---- */

/* A short local search from the first strategy's order, kept only when it
 * reaches the lower bound (then nothing can beat it and the other strategies
 * are skipped).  Otherwise the run is put back as it was, so the full
 * portfolio gives the same plan as without this try.  Tried only when the
 * first plan is within early_search_max_excess of the bound: from further
 * away a short search does not get there. */
static void early_search(struct planner_run *r) {
    const int n = r->prob.n;
    const size_t bound = r->prob.lower_bound;
    if (r->peak <= bound || (double)(r->peak - bound) > r->b->early_search_max_excess * (double)bound) return;
    int *order = malloc(sizeof(int) * (size_t)n);
    size_t *offset = malloc(sizeof(size_t) * (size_t)n);
    size_t *prefix_peak = malloc(sizeof(size_t) * (size_t)n);
    if (order && offset && prefix_peak) {
        memcpy(order, r->order, sizeof(int) * (size_t)n);
        memcpy(offset, r->offset, sizeof(size_t) * (size_t)n);
        memcpy(prefix_peak, r->prefix_peak, sizeof(size_t) * (size_t)n);
        const size_t peak = r->peak;
        const long long work = r->pl.work;
        adopt_positions(r, 0);
        local_search(r, 0, r->b->early_search_placements);
        if (r->peak > bound) {
            memcpy(r->order, order, sizeof(int) * (size_t)n);
            memcpy(r->offset, offset, sizeof(size_t) * (size_t)n);
            memcpy(r->prefix_peak, prefix_peak, sizeof(size_t) * (size_t)n);
            r->peak = peak;
            r->pl.work = work;
        }
    }
    free(order);
    free(offset);
    free(prefix_peak);
}

/* Every block placed lies below the peak, apart from every block it conflicts with. */
static void assert_plan(const struct planner_run *r) {
    if (!TG_CHECKS) return;
    const struct offline_problem *p = &r->prob;
    for (int i = 0; i < p->n; i++) {
        const size_t end = sat_add(r->offset[i], p->size[i]);
        TG_ASSERT(p->size[i] == 0 || end <= r->peak, "block %d ends at %zu, the peak is %zu", i, end, r->peak);
        for (int e = p->adj_begin[i]; e < p->adj_begin[i + 1]; e++) {
            const int j = p->adj[e];
            TG_ASSERT(end <= r->offset[j] || sat_add(r->offset[j], p->size[j]) <= r->offset[i],
                      "blocks %d and %d live together and overlap", i, j);
        }
    }
}

size_t tg_plan_offline(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts) {
    if (blocks == NULL || n <= 0) return 0;
    const struct tg_offline_options defaults = {1, 0, false, 0, NULL};
    if (opts == NULL) opts = &defaults;
    const struct tg_offline_budgets *b = opts->budgets ? opts->budgets : &tg_offline_default_budgets;
    const size_t alignment = normalize_alignment(opts->alignment);
    struct planner_run r;
    if (!run_init(&r, blocks, n, alignment, b)) return stack_blocks(blocks, n, alignment);
    const bool small = n <= b->small_problem_blocks;
    run_strategy(&r, (enum tg_offline_strategy)0);
    if (!small) early_search(&r);
    for (int s = 1; s < TG_OFFLINE_N_STRATEGIES && r.peak > r.prob.lower_bound; s++)
        run_strategy(&r, (enum tg_offline_strategy)s);
    adopt_positions(&r, 0);
    /* One short round of the canonical search at the bound, before the local
     * search: where it finds the plan (most problems) the rest is skipped.
     * Small problems try a few depth-first nodes there first. */
    if (small) exact_run(&r, 0, b->small_bound_dfs_nodes, 0, true);
    const long long first = bound_search_effort(&r);
    canonical_run(&r, first, first * N_CANONICAL_PREORDERS, 0, true);
    local_search(&r, opts->time_budget_ms, small ? b->small_local_search_placements : b->local_search_placements);
    adopt_positions(&r, 0);
    /* Short, work-bounded runs of the two exact searches: they often reach
     * the bound or lower the peak where the local search stalls, and stay
     * deterministic. */
    exact_run(&r, 0, small ? b->small_dfs_nodes : b->dfs_nodes, b->dfs_work, false);
    canonical_run(&r, b->canonical_first_effort, ladder_effort(&r), 0, false);
    if (opts->exact) {
        /* by the clock: the canonical search at the bound, then down the
         * ladder, each until its share of the time; the depth-first search
         * with the rest */
        const double seconds = opts->exact_seconds > 0 ? opts->exact_seconds : b->exact_default_seconds;
        const double start = offline_now_seconds();
        canonical_run(&r, b->canonical_first_effort, 0, start + seconds * b->exact_bound_share, true);
        canonical_run(&r, b->canonical_first_effort, 0, start + seconds * b->exact_ladder_share, false);
        const double left = start + seconds - offline_now_seconds();
        if (left > 0) exact_run(&r, left, 0, 0, false);
    }
    assert_plan(&r);
    const size_t peak = r.peak;
    write_offsets(&r, blocks);
    run_release(&r);
    return peak;
}

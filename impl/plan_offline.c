/* Offline offset planner: a portfolio of greedy placements over a conflict
 * graph, a bounded local search on the best priority order, and an optional
 * time-limited exact search.  See plan-offline.h for the contract.
 *
 * A placement query looks only at the blocks whose step ranges intersect the
 * block being placed (its adjacency list in the conflict graph, built once by
 * a sweep over start steps), sorts them by offset and scans the holes:
 * O(k log k) for k conflicting blocks.  On dense problems, where k is a good
 * part of all blocks, it walks the placed blocks kept in offset order instead
 * (same holes, no sort). */
#include "plan-offline.h"
#include "plan-canonical.h"
#include "tg-sort.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- saturating size arithmetic (a peak past SIZE_MAX reads as SIZE_MAX) ---- */

static size_t sat_add(size_t a, size_t b) {
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t sat_mul(size_t a, size_t b) {
    if (a != 0 && b > SIZE_MAX / a) return SIZE_MAX;
    return a * b;
}

static size_t round_up(size_t size, size_t alignment) {
    if (alignment <= 1) return size;
    const size_t rem = size % alignment;
    if (rem == 0) return size;
    /* A size that cannot be rounded cannot be placed either: saturate. */
    if (size > SIZE_MAX - (alignment - rem)) return SIZE_MAX;
    return size + (alignment - rem);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- lower bound: sweep over start/end events with a 128-bit running sum ---- */

struct live_event {
    long long time; /* step at which the change takes effect */
    int is_add;     /* removals sort first at equal time */
    size_t size;
};

/* removals first at equal time */
#define EVENT_BEFORE(x, y) ((x).time != (y).time ? (x).time < (y).time : (x).is_add < (y).is_add)
TG_DEFINE_SORT(sort_events, struct live_event, EVENT_BEFORE)

static int block_last_step(const struct tg_live_block *b) {
    /* A reversed range is read as live at its start only. */
    return b->end < b->start ? b->start : b->end;
}

size_t tg_live_lower_bound(const struct tg_live_block *blocks, int n) {
    if (blocks == NULL || n <= 0) return 0;
    struct live_event *ev = malloc(sizeof(*ev) * 2 * (size_t)n);
    if (ev == NULL) {
        /* Without scratch memory the largest block is still a valid bound. */
        size_t largest = 0;
        for (int i = 0; i < n; i++)
            if (blocks[i].size > largest) largest = blocks[i].size;
        return largest;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (blocks[i].size == 0) continue;
        ev[m++] = (struct live_event){blocks[i].start, 1, blocks[i].size};
        ev[m++] = (struct live_event){(long long)block_last_step(&blocks[i]) + 1, 0, blocks[i].size};
    }
    sort_events(ev, m);
    /* live = hi * 2^bits + lo; sums of many huge blocks must not wrap. */
    size_t hi = 0, lo = 0, best = 0;
    for (int i = 0; i < m; i++) {
        if (ev[i].is_add) {
            if (lo > SIZE_MAX - ev[i].size) hi++;
            lo += ev[i].size;
            if (hi > 0) best = SIZE_MAX;
            else if (lo > best) best = lo;
        } else {
            if (lo < ev[i].size) hi--;
            lo -= ev[i].size;
        }
    }
    free(ev);
    return best;
}

/* ---- the problem: rounded sizes and the conflict graph ---- */

struct problem {
    int n;
    size_t *size;   /* rounded to the alignment */
    int *start;
    int *end;       /* inclusive, never below start */
    int *adj_begin; /* n + 1 entries: conflicts of i are adj[adj_begin[i] .. adj_begin[i+1]) */
    int *adj;
    size_t lower_bound; /* of the rounded sizes */
};

/* One full placement's work: every conflict-list entry and every block (what
 * place_order counts); the searches' budgets are multiples of it. */
static long long full_placement_work(const struct problem *p) {
    return (long long)p->adj_begin[p->n] + p->n;
}

static void problem_release(struct problem *p) {
    free(p->size);
    free(p->start);
    free(p->end);
    free(p->adj_begin);
    free(p->adj);
    memset(p, 0, sizeof(*p));
}

struct start_key {
    int start;
    int index;
};

#define START_BEFORE(x, y) ((x).start != (y).start ? (x).start < (y).start : (x).index < (y).index)
TG_DEFINE_SORT(sort_start_keys, struct start_key, START_BEFORE)

/* Conflict graph by a sweep over blocks in start order: every block still
 * active when a new one starts overlaps it in time, and nothing else does, so
 * the work is proportional to the number of conflicts.  Zero-size blocks take
 * no memory and get no edges. */
static bool build_conflicts(struct problem *p) {
    const int n = p->n;
    struct start_key *order = malloc(sizeof(*order) * (size_t)n);
    int *active = malloc(sizeof(int) * (size_t)n);
    int *degree = calloc((size_t)n + 1, sizeof(int));
    int *edge_pairs = NULL; /* (a, b) with a < b in start order */
    size_t n_edges = 0, cap_edges = 0;
    bool ok = order && active && degree;
    int n_order = 0;
    if (ok) {
        for (int i = 0; i < n; i++)
            if (p->size[i] > 0) order[n_order++] = (struct start_key){p->start[i], i};
        sort_start_keys(order, n_order);
    }
    int n_active = 0;
    for (int k = 0; ok && k < n_order; k++) {
        const int j = order[k].index;
        int kept = 0;
        for (int a = 0; a < n_active; a++)
            if (p->end[active[a]] >= p->start[j]) active[kept++] = active[a];
        n_active = kept;
        if (n_edges + (size_t)n_active > (size_t)INT_MAX / 2) {
            ok = false; /* CSR indices are int: far beyond any real plan */
            break;
        }
        if (n_edges + (size_t)n_active > cap_edges) {
            size_t cap = cap_edges ? cap_edges * 2 : 1024;
            while (cap < n_edges + (size_t)n_active) cap *= 2;
            int *grown = realloc(edge_pairs, sizeof(int) * 2 * cap);
            if (grown == NULL) {
                ok = false;
                break;
            }
            edge_pairs = grown;
            cap_edges = cap;
        }
        for (int a = 0; a < n_active; a++) {
            edge_pairs[2 * n_edges] = active[a];
            edge_pairs[2 * n_edges + 1] = j;
            n_edges++;
            degree[active[a]]++;
            degree[j]++;
        }
        active[n_active++] = j;
    }
    if (ok) {
        p->adj_begin = malloc(sizeof(int) * ((size_t)n + 1));
        p->adj = malloc(sizeof(int) * (2 * n_edges + 1));
        ok = p->adj_begin && p->adj;
    }
    if (ok) {
        p->adj_begin[0] = 0;
        for (int i = 0; i < n; i++) p->adj_begin[i + 1] = p->adj_begin[i] + degree[i];
        for (int i = 0; i < n; i++) degree[i] = p->adj_begin[i]; /* reuse as fill cursor */
        for (size_t e = 0; e < n_edges; e++) {
            const int a = edge_pairs[2 * e], b = edge_pairs[2 * e + 1];
            p->adj[degree[a]++] = b;
            p->adj[degree[b]++] = a;
        }
    }
    free(order);
    free(active);
    free(degree);
    free(edge_pairs);
    return ok;
}

static bool problem_init(struct problem *p, const struct tg_live_block *blocks, int n, size_t alignment) {
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->size = malloc(sizeof(size_t) * (size_t)n);
    p->start = malloc(sizeof(int) * (size_t)n);
    p->end = malloc(sizeof(int) * (size_t)n);
    struct tg_live_block *rounded = malloc(sizeof(*rounded) * (size_t)n);
    if (!p->size || !p->start || !p->end || !rounded) {
        free(rounded);
        problem_release(p);
        return false;
    }
    for (int i = 0; i < n; i++) {
        p->size[i] = round_up(blocks[i].size, alignment);
        p->start[i] = blocks[i].start;
        p->end[i] = block_last_step(&blocks[i]);
        rounded[i] = (struct tg_live_block){p->size[i], p->start[i], p->end[i], 0};
    }
    p->lower_bound = tg_live_lower_bound(rounded, n);
    free(rounded);
    if (!build_conflicts(p)) {
        problem_release(p);
        return false;
    }
    return true;
}

/* ---- placement of one priority order ---- */

struct span {
    size_t offset;
    size_t size;
};

#define INT_BEFORE(x, y) ((x) < (y))
TG_DEFINE_SORT(sort_ints, int, INT_BEFORE)

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
    const struct problem *p;
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
    const struct problem *p = pl->p;
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
    const struct problem *p = pl->p;
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
    const struct problem *p = pl->p;
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
    const struct problem *p = pl->p;
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
static bool compute_breadth(const struct problem *p, size_t *breadth) {
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

static void make_order(const struct problem *p, enum tg_offline_strategy s, const size_t *breadth,
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
    struct problem prob;
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
};

static void run_release(struct planner_run *r) {
    problem_release(&r->prob);
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
 * sorting each block's placed conflicts: a walk visits up to all placed
 * blocks, a sort about d log d entries for d conflicts, so the walk pays when
 * the average block conflicts with more than one in DENSE_ONE_IN blocks (0:
 * never).  With 4, the problems four fuzz input sets planned (5,725 of up to
 * 128 blocks) took 1.7-8% fewer planner instructions than with none dense,
 * and 2 or 8 saved less; the MiniMalloc files A-D are dense by this rule (1-2%
 * fewer), the model graphs are not. */
#ifndef DENSE_ONE_IN
#define DENSE_ONE_IN 4
#endif
static bool dense_problem(const struct problem *p) {
    return (long long)p->adj_begin[p->n] * DENSE_ONE_IN > (long long)p->n * p->n;
}

static bool run_init(struct planner_run *r, const struct tg_live_block *blocks, int n, size_t alignment) {
    memset(r, 0, sizeof(*r));
    if (!problem_init(&r->prob, blocks, n, alignment)) return false;
    int max_degree = 0;
    for (int i = 0; i < n; i++) {
        const int d = r->prob.adj_begin[i + 1] - r->prob.adj_begin[i];
        if (d > max_degree) max_degree = d;
    }
    const size_t un = (size_t)n;
    r->pl.p = &r->prob;
    r->pl.spans = malloc(sizeof(struct span) * ((size_t)max_degree + 1));
    const bool dense = dense_problem(&r->prob);
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

size_t tg_plan_offline_single(struct tg_live_block *blocks, int n, size_t alignment, enum tg_offline_strategy s) {
    if (blocks == NULL || n <= 0) return 0;
    alignment = normalize_alignment(alignment);
    if ((unsigned)s >= TG_OFFLINE_N_STRATEGIES) s = TG_OFFLINE_GREEDY_SIZE;
    struct planner_run r;
    if (!run_init(&r, blocks, n, alignment)) return stack_blocks(blocks, n, alignment);
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

/* Effort of the default local search, in conflict-list entries visited: up to
 * 400 full re-placements, capped so that a few hundred blocks with thousands
 * of conflicts take some tens of milliseconds.  Deterministic by construction. */
#define LOCAL_SEARCH_WORK_PER_PLACEMENT 400
#ifndef LOCAL_SEARCH_MAX_WORK
#define LOCAL_SEARCH_MAX_WORK 1000000LL
#endif

/* Makes pl.position give the rank of order[from..n) again (the searches
 * read the ranks of the adopted order).  order is the permutation the
 * placements wrote; the analyzer loses track of it through the generated
 * sort. */
static void adopt_positions(struct planner_run *r, int from) {
    // NOLINTNEXTLINE(clang-analyzer-core.uninitialized.ArraySubscript)
    for (int q = from; q < r->prob.n; q++) r->pl.position[r->order[q]] = q;
}

/* placements: the work budget in full re-placements (capped as above). */
static void local_search(struct planner_run *r, double time_budget_ms, long long placements) {
    const int n = r->prob.n;
    if (n < 2 || r->peak <= r->prob.lower_bound) return;
    const long long full_placement = full_placement_work(&r->prob);
    long long budget = full_placement * placements;
    if (budget > LOCAL_SEARCH_MAX_WORK) budget = LOCAL_SEARCH_MAX_WORK;
    const double deadline = time_budget_ms > 0 ? now_seconds() + time_budget_ms * 1e-3 : 0;
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    int *peak_blocks = malloc(sizeof(int) * (size_t)n);
    if (peak_blocks == NULL) return;
    const long long start_work = r->pl.work;
    for (long long iter = 0; r->pl.work - start_work < budget; iter++) {
        if (r->peak <= r->prob.lower_bound) break;
        if (deadline > 0 && (iter & 15) == 0 && now_seconds() > deadline) break;
        /* The blocks touching the peak decide it: move one of them earlier in
         * the order so it is placed before what now sits below it. */
        int n_peak = 0;
        for (int q = 0; q < n; q++) {
            const int i = r->order[q];
            if (sat_add(r->offset[i], r->prob.size[i]) == r->peak) peak_blocks[n_peak++] = q;
        }
        memcpy(r->cand_order, r->order, sizeof(int) * (size_t)n);
        int first_changed;
        const uint64_t move = next_random(&rng) % 8;
        const int from = n_peak > 0 ? peak_blocks[next_random(&rng) % (uint64_t)n_peak] : 0;
        if (move < 6 && from > 0) {
            /* Mostly short hops (keep the good prefix), sometimes anywhere. */
            int to;
            if (move < 4) {
                const int window = from < 8 ? from : 8;
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

/* ---- exact mode: depth-first search over canonical (bottom-up) plans ---- */

/* Searches for a plan with peak <= capacity the way MiniMalloc does: blocks
 * are placed in nondecreasing offset order, each on its floor; at every node
 * the branches are the blocks that can cover the lowest free point (in
 * priority order), plus leaving that point empty.  Pruned
 * when a block no longer fits under the capacity, or when the blocks still to
 * place at some step cannot stack between their lowest floor and the capacity.
 * Stops at the deadline. */
struct exact_search {
    const struct problem *p;
    const int *rank;
    size_t capacity;
    size_t *floor;
    bool *placed;
    size_t *offset;
    int n_placed;
    long long nodes;
    double deadline;
    bool timed_out;
    struct exact_undo {
        int block;
        size_t old_floor;
    } * undo;
    int n_undo;
    int *cands; /* per depth: n entries */
    int max_depth;
    int candidate_order; /* enum candidate_order */
    long long node_limit;
    /* work: blocks scanned per node and section entries the prune sums; it
     * bounds the search on instances whose nodes are dear (long-lived blocks
     * make the prune's sweep long) where the node limit alone would not */
    long long work, work_limit;
    /* Sections: the distinct start steps in order.  Block i is live at
     * sections first_section[i]..last_section[i].  by_first lists the blocks
     * by first section; section_sum (m + 1 entries) and the heap of the
     * blocks live in the swept section are the prune's scratch. */
    int m;
    int *first_section, *last_section, *by_first;
    size_t *section_sum;
    struct live_floor {
        size_t floor;
        int last_section;
    } * live;
};

/* Candidate orders of the exact search.  No single one is best: different
 * instances fall to different orders, so attempts rotate through them. */
enum candidate_order { BY_RANK, BY_LATEST_END, BY_SIZE, BY_AREA, N_CANDIDATE_ORDERS };

/* True when block u should be tried after block v (both start at the same step). */
static bool try_later(const struct exact_search *x, int u, int v) {
    const struct problem *p = x->p;
    switch (x->candidate_order) {
    case BY_LATEST_END:
        if (p->end[u] != p->end[v]) return p->end[u] < p->end[v];
        return p->size[u] < p->size[v];
    case BY_SIZE:
        if (p->size[u] != p->size[v]) return p->size[u] < p->size[v];
        return p->end[u] < p->end[v];
    case BY_AREA: {
        const size_t au = sat_mul(p->size[u], (size_t)((long long)p->end[u] - p->start[u] + 1));
        const size_t av = sat_mul(p->size[v], (size_t)((long long)p->end[v] - p->start[v] + 1));
        if (au != av) return au < av;
        return x->rank[u] > x->rank[v];
    }
    default: return x->rank[u] > x->rank[v];
    }
}

/* Sizes of the unplaced blocks summed per section.  As differences and a
 * running sum (O(n + m)) when no sum can overflow; the blocks are all below
 * the capacity here, so that holds unless the capacity is near SIZE_MAX, and
 * then section by section with saturation (O(sum of spans)). */
static void exact_section_sums(struct exact_search *x) {
    const struct problem *p = x->p;
    size_t *sum = x->section_sum;
    for (int s = 0; s <= x->m; s++) sum[s] = 0;
    if (x->capacity <= SIZE_MAX / (size_t)p->n) {
        for (int i = 0; i < p->n; i++) {
            if (x->placed[i]) continue;
            sum[x->first_section[i]] += p->size[i];
            sum[x->last_section[i] + 1] -= p->size[i]; /* wraps, and the running sum unwraps it */
        }
        for (int s = 1; s < x->m; s++) sum[s] += sum[s - 1];
        return;
    }
    for (int i = 0; i < p->n; i++) {
        if (x->placed[i]) continue;
        for (int s = x->first_section[i]; s <= x->last_section[i]; s++) sum[s] = sat_add(sum[s], p->size[i]);
    }
}

static void live_sift_down(struct live_floor *h, int count, int at) {
    const struct live_floor e = h[at];
    for (;;) {
        int child = 2 * at + 1;
        if (child >= count) break;
        if (child + 1 < count && h[child + 1].floor < h[child].floor) child++;
        if (h[child].floor >= e.floor) break;
        h[at] = h[child];
        at = child;
    }
    h[at] = e;
}

static void live_push(struct live_floor *h, int *count, struct live_floor e) {
    int at = (*count)++;
    while (at > 0 && h[(at - 1) / 2].floor > e.floor) {
        h[at] = h[(at - 1) / 2];
        at = (at - 1) / 2;
    }
    h[at] = e;
}

/* The unplaced blocks live at a step all conflict with each other: they
 * stack above the lowest of their floors and must fit under the capacity.
 * Checked at the start step of every unplaced block, sweeping the sections
 * in order with the blocks that have started in a heap by floor (a block is
 * dropped once it surfaces after its last section).  Its effort is counted
 * as the sections each unplaced block spans, what summing section by
 * section would visit, so that budgets in work units stay as tuned. */
static bool exact_prune(struct exact_search *x) {
    const struct problem *p = x->p;
    const size_t capacity = x->capacity;
    for (int i = 0; i < p->n; i++) {
        if (x->placed[i]) continue;
        const size_t floor = x->floor[i], size = p->size[i];
        if (floor > capacity || size > capacity - floor) return true;
        x->work += x->last_section[i] - x->first_section[i] + 1;
    }
    exact_section_sums(x);
    struct live_floor *live = x->live;
    int n_live = 0;
    for (int k = 0; k < p->n;) {
        const int s = x->first_section[x->by_first[k]];
        bool starts_here = false;
        for (; k < p->n && x->first_section[x->by_first[k]] == s; k++) {
            const int i = x->by_first[k];
            if (x->placed[i]) continue;
            live_push(live, &n_live, (struct live_floor){x->floor[i], x->last_section[i]});
            starts_here = true;
        }
        if (!starts_here) continue;
        while (live[0].last_section < s) {
            live[0] = live[--n_live];
            live_sift_down(live, n_live, 0);
        }
        const size_t sum = x->section_sum[s];
        if (sum > capacity || live[0].floor > capacity - sum) return true;
    }
    return false;
}

/* How many of the m sorted values are below v (or at most v, inclusive). */
static int count_below(const int *sorted, int m, int v, bool inclusive) {
    int lo = 0, hi = m;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (inclusive ? sorted[mid] <= v : sorted[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Sections of the problem for exact_prune; false when out of memory. */
static bool exact_sections(struct exact_search *x) {
    const struct problem *p = x->p;
    const int n = p->n;
    int *starts = malloc(sizeof(int) * (size_t)n);
    x->first_section = malloc(sizeof(int) * (size_t)n);
    x->last_section = malloc(sizeof(int) * (size_t)n);
    x->by_first = malloc(sizeof(int) * (size_t)n);
    x->section_sum = malloc(sizeof(size_t) * ((size_t)n + 1));
    x->live = malloc(sizeof(*x->live) * (size_t)n);
    bool ok = starts && x->first_section && x->last_section && x->by_first && x->section_sum && x->live;
    if (ok) {
        for (int i = 0; i < n; i++) starts[i] = p->start[i];
        sort_ints(starts, n);
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (m == 0 || starts[m - 1] != starts[i]) starts[m++] = starts[i];
        }
        x->m = m;
        for (int i = 0; i < n; i++) {
            /* its own start's section, and the last section at or before its end */
            x->first_section[i] = count_below(starts, m, p->start[i], false);
            x->last_section[i] = count_below(starts, m, p->end[i], true) - 1;
        }
        /* by_first: a counting sort on the first section (starts becomes the counts) */
        int *next = starts;
        for (int s = 0; s < m; s++) next[s] = 0;
        for (int i = 0; i < n; i++) next[x->first_section[i]]++;
        for (int s = 0, at = 0; s < m; s++) {
            const int count = next[s];
            next[s] = at;
            at += count;
        }
        for (int i = 0; i < n; i++) x->by_first[next[x->first_section[i]]++] = i;
    }
    free(starts);
    return ok;
}

static void exact_undo_to(struct exact_search *x, int mark) {
    while (x->n_undo > mark) {
        x->n_undo--;
        x->floor[x->undo[x->n_undo].block] = x->undo[x->n_undo].old_floor;
    }
}

static void exact_set_floor(struct exact_search *x, int j, size_t value) {
    x->undo[x->n_undo++] = (struct exact_undo){j, x->floor[j]};
    x->floor[j] = value;
}

static bool exact_dfs(struct exact_search *x, int depth) {
    const struct problem *p = x->p;
    if (x->n_placed == p->n) return true;
    if (++x->nodes >= x->node_limit) x->timed_out = true;
    x->work += p->n;
    if (x->work_limit > 0 && x->work >= x->work_limit) x->timed_out = true;
    if ((x->nodes & 1023) == 0 && x->deadline > 0 && now_seconds() > x->deadline) x->timed_out = true;
    if (x->timed_out || depth >= x->max_depth || exact_prune(x)) return false;
    /* The lowest free point: the lowest floor, at the earliest start among
     * the blocks on it.  In a canonical plan the byte at (t, lowest) is either
     * the bottom of a block live at t on that floor (one branch each) or
     * stays empty (the last branch), so nothing else needs trying here. */
    size_t lowest = SIZE_MAX;
    int t = INT_MAX;
    for (int i = 0; i < p->n; i++) {
        if (x->placed[i]) continue;
        if (x->floor[i] < lowest || (x->floor[i] == lowest && p->start[i] < t)) {
            lowest = x->floor[i];
            t = p->start[i];
        }
    }
    int *cands = x->cands + (size_t)depth * (size_t)p->n;
    int n_cands = 0;
    size_t raise_to = SIZE_MAX; /* the next offset a block could sit at */
    for (int i = 0; i < p->n; i++) {
        if (x->placed[i]) continue;
        if (x->floor[i] == lowest && p->start[i] == t) {
            cands[n_cands++] = i;
        } else if (x->floor[i] > lowest) {
            if (x->floor[i] < raise_to) raise_to = x->floor[i];
        } else if (sat_add(lowest, p->size[i]) < raise_to) {
            raise_to = sat_add(lowest, p->size[i]); /* on top of a block placed here later */
        }
    }
    /* Candidates in the attempt's order (insertion sort: few candidates). */
    for (int a = 1; a < n_cands; a++) {
        const int c = cands[a];
        int b = a - 1;
        while (b >= 0 && try_later(x, cands[b], c)) {
            cands[b + 1] = cands[b];
            b--;
        }
        cands[b + 1] = c;
    }
    for (int c = 0; c < n_cands && !x->timed_out; c++) {
        const int i = cands[c];
        const int mark = x->n_undo;
        const size_t end = lowest + p->size[i];
        x->placed[i] = true;
        x->offset[i] = lowest;
        x->n_placed++;
        for (int a = p->adj_begin[i]; a < p->adj_begin[i + 1]; a++) {
            const int j = p->adj[a];
            if (!x->placed[j] && x->floor[j] < end) exact_set_floor(x, j, end);
        }
        if (exact_dfs(x, depth + 1)) return true;
        exact_undo_to(x, mark);
        x->placed[i] = false;
        x->n_placed--;
    }
    /* Leave (t, lowest) empty: the blocks starting there move up to the next
     * offset any block could take (incomplete in rare cases; a search, not a
     * proof, when it gives up). */
    if (!x->timed_out && raise_to != SIZE_MAX) {
        const int mark = x->n_undo;
        for (int c = 0; c < n_cands; c++) exact_set_floor(x, cands[c], raise_to);
        if (exact_dfs(x, depth + 1)) return true;
        exact_undo_to(x, mark);
    }
    return false;
}

/* Takes a plan found by a search as the run's result. */
static void adopt_offsets(struct planner_run *r, const size_t *offset) {
    const struct problem *p = &r->prob;
    size_t peak = 0;
    for (int i = 0; i < p->n; i++) {
        r->offset[i] = offset[i];
        if (sat_add(offset[i], p->size[i]) > peak) peak = sat_add(offset[i], p->size[i]);
    }
    r->peak = peak;
}

/* One depth-first attempt at a capacity with one candidate order, stopped
 * after node_limit nodes or at the deadline; adopts the plan when found. */
static bool exact_attempt(struct planner_run *r, struct exact_search *x, size_t capacity, int order,
                          long long node_limit, long long work_limit) {
    const struct problem *p = &r->prob;
    for (int i = 0; i < p->n; i++) {
        x->floor[i] = 0;
        x->placed[i] = false;
    }
    x->n_placed = 0;
    x->n_undo = 0;
    x->nodes = 0;
    x->work = 0;
    x->work_limit = work_limit;
    x->timed_out = false;
    x->capacity = capacity;
    x->candidate_order = order;
    x->node_limit = node_limit;
    if (!exact_dfs(x, 0)) return false;
    adopt_offsets(r, x->offset);
    return true;
}

/* Both exact searches keep a candidate list per open node, up to blocks x
 * depth entries of scratch: past this many blocks they are skipped (an exact
 * search over thousands of blocks is hopeless within their budgets anyway). */
#define SEARCH_MAX_BLOCKS 2048

/* Restarted search: rounds of attempts with every candidate order, first at
 * the lower bound, then halfway between it and the best peak so far, then an
 * eighth of that gap below the best peak; the node
 * limit doubles each round (short attempts first, since a lucky order often
 * succeeds fast and an unlucky one stays stuck in one subtree).  Stops at the
 * deadline (seconds > 0) or after total_nodes nodes (deterministic mode).
 * bound_only: attempts at the lower bound only, so a plan is adopted only
 * there (the priority order and prefix peaks then no longer matter). */
static void exact_search_run(struct planner_run *r, double seconds, long long total_nodes, long long total_work,
                             bool bound_only) {
    const struct problem *p = &r->prob;
    const int n = p->n;
    if (r->peak <= p->lower_bound || n > SEARCH_MAX_BLOCKS) return;
    struct exact_search x = {0};
    x.p = p;
    x.rank = r->pl.position; /* ranks of the best heuristic order */
    x.floor = malloc(sizeof(size_t) * (size_t)n);
    x.placed = malloc(sizeof(bool) * (size_t)n);
    x.offset = malloc(sizeof(size_t) * (size_t)n);
    /* A node places a block or lifts some floors; the depth is capped at
     * 4n + 4 (deeper paths are abandoned, which only costs completeness). */
    const size_t max_depth = 4 * (size_t)n + 4;
    x.cands = malloc(sizeof(int) * (size_t)n * max_depth);
    x.undo = malloc(sizeof(struct exact_undo) * ((size_t)p->adj_begin[n] + (size_t)n * max_depth + 1));
    x.max_depth = (int)max_depth;
    x.deadline = seconds > 0 ? now_seconds() + seconds : 0;
    long long spent = 0, spent_work = 0;
    bool out_of_time = !(x.floor && x.placed && x.offset && x.cands && x.undo) || !exact_sections(&x);
    for (long long limit = 256; !out_of_time && r->peak > p->lower_bound; limit *= 2) {
        for (int pass = 0; pass < (bound_only ? 1 : 3) && !out_of_time && r->peak > p->lower_bound; pass++) {
            /* the bound, halfway to the best peak, and an eighth of the gap
             * below it (the easiest improvement, often the only one in reach) */
            const size_t gap = r->peak - p->lower_bound;
            const size_t cap = pass == 0 ? p->lower_bound : pass == 1 ? p->lower_bound + gap / 2 : r->peak - gap / 8;
            for (int order = 0; order < N_CANDIDATE_ORDERS; order++) {
                long long my_limit = limit;
                if (total_nodes > 0 && spent + my_limit > total_nodes) my_limit = total_nodes - spent;
                const long long work_left = total_work > 0 ? total_work - spent_work : 0;
                if (my_limit <= 0 || (total_work > 0 && work_left <= 0) ||
                    (x.deadline > 0 && now_seconds() > x.deadline)) {
                    out_of_time = true;
                    break;
                }
                const bool found = exact_attempt(r, &x, cap, order, my_limit, work_left);
                spent += x.nodes;
                spent_work += x.work;
                if (found) break;
            }
        }
        if (limit > LLONG_MAX / 4) break;
    }
    free(x.floor);
    free(x.placed);
    free(x.offset);
    free(x.cands);
    free(x.undo);
    free(x.first_section);
    free(x.last_section);
    free(x.by_first);
    free(x.section_sum);
    free(x.live);
}

/* ---- the canonical search (plan-canonical.h) in rounds ---- */

/* Preorders in the order tried: on the MiniMalloc instances each of the
 * first four finds some file's bound plan within 512K units of work (F and
 * G, H, E, C); the last finds none, but D's plan at MiniMalloc's capacity. */
static const enum tg_canonical_preorder canonical_preorders[] = {
    TG_PREORDER_TOTAL_WIDTH_AREA, TG_PREORDER_SECTIONS_AREA_TOTAL, TG_PREORDER_TOTAL_CONFLICTS_WIDTH,
    TG_PREORDER_TOTAL_AREA_WIDTH, TG_PREORDER_WIDTH_AREA_TOTAL};
#define N_CANONICAL_PREORDERS ((int)(sizeof(canonical_preorders) / sizeof(canonical_preorders[0])))
/* The first round's effort per preorder (units of plan-canonical.h: about
 * 1-3 ns each here), doubled each round. */
#ifndef CANONICAL_FIRST_EFFORT
#define CANONICAL_FIRST_EFFORT 524288
#endif
/* ... or, on smaller problems, this many full placements' worth of conflict
 * entries (adjacency + blocks) when that is less.  The MiniMalloc files all
 * keep the full effort (a full placement is 6,084-25,299 entries there); the
 * 65-100-block problems fuzz_alloc makes get 22K-193K.  On 508 of those from
 * an AFL++ queue the search at the bound took 0.96 s and then 0.27 s, with
 * the same plans at the end (every one at its bound). */
#define CANONICAL_FIRST_PLACEMENTS 87
/* Problems of up to MEDIUM_PROBLEM_BLOCKS blocks (the fuzz targets' graphs;
 * the model graphs and MiniMalloc files have 150 and more) get fewer: where
 * this search fails, a few re-placements of the local search usually find the
 * plan at the bound.  On the problems three fuzz_alloc input sets planned
 * (1,647 of an AFL++ queue, 931 of the corpus, 463 from a libFuzzer
 * campaign) 40 placements gave the same plans as 87 in 20%, 4% and 9% fewer
 * instructions; 30 and 60 the same plans too, 20 the same plans for 79% more
 * instructions on the campaign's problems. */
#define MEDIUM_PROBLEM_BLOCKS 128
#define MEDIUM_CANONICAL_FIRST_PLACEMENTS 40

/* Rounds of canonical searches, every preorder in turn, the effort limit
 * doubling each round: at the lower bound (at_bound), or else an eighth of the
 * gap below the best peak, a ladder: each plan found shrinks the gap, and on
 * the MiniMalloc files these steps take a few hundred placements where a
 * capacity halfway to the bound takes thousands or has no plan.  A capacity
 * the search proved infeasible (it visited every canonical plan) is not
 * tried again, nor any below it.  The first round gives each preorder
 * first_effort units.  Stops after budget units of effort (<= 0: no limit)
 * or at the deadline (<= 0: none). */
static void canonical_run(struct planner_run *r, long long first_effort, long long budget, double deadline,
                          bool at_bound) {
    const struct problem *p = &r->prob;
    if (r->peak <= p->lower_bound || p->n > SEARCH_MAX_BLOCKS) return;
    size_t *offset = malloc(sizeof(size_t) * (size_t)p->n);
    const struct tg_canonical_problem cp = {p->n, p->size, p->start, p->end, p->adj_begin, p->adj};
    size_t infeasible_up_to = 0; /* every capacity at or below it has no plan (0: none known) */
    long long spent = 0;
    bool done = offset == NULL;
    for (long long limit = first_effort; !done && r->peak > p->lower_bound; limit *= 2) {
        const size_t cap = at_bound ? p->lower_bound : r->peak - (r->peak - p->lower_bound) / 8;
        if (cap <= infeasible_up_to || cap >= r->peak) break;
        for (int k = 0; k < N_CANONICAL_PREORDERS; k++) {
            long long effort = limit;
            if (budget > 0 && spent + effort > budget) effort = budget - spent;
            if (effort <= 0 || (deadline > 0 && now_seconds() > deadline)) {
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

#ifndef DEFAULT_SEARCH_NODES
#define DEFAULT_SEARCH_NODES 8000
#endif
/* ... and at most this much work (see struct exact_search): 8,000 nodes'
 * worth on A and B (1,650-1,870 units a node), 3,250 nodes on D (4,900). */
#ifndef DEFAULT_SEARCH_WORK
#define DEFAULT_SEARCH_WORK 16000000
#endif
#define SMALL_PROBLEM_BLOCKS 64
/* Small problems' depth-first nodes at the bound before the canonical search:
 * each search finds bound plans the other misses in a few hundred
 * placements' worth.  Over seven fuzz_alloc input sets (9,419 problems),
 * 100 nodes first took 20% fewer planner instructions than the canonical
 * search alone and 33% fewer than 1,000 nodes alone (the earlier rule), with
 * the same plans as the former; 50, 150, 300 and 1,000 nodes took more. */
#define SMALL_PROBLEM_BOUND_NODES 100
/* Small problems' later steps: 100 re-placements of local search and 1,000
 * nodes of the depth-first search.  On 18,961 problems a fuzz_alloc run
 * planned (17,595 of them small) the full budgets took 1.29 s for 45 plans
 * left above the bound, these 0.84 s for 44, with less excess in all. */
#define SMALL_PROBLEM_LOCAL_PLACEMENTS 100
#define SMALL_PROBLEM_DFS_NODES 1000
/* The canonical search's effort down the ladder of capacities after the
 * other searches. */
#ifndef CANONICAL_GAP_EFFORT
#define CANONICAL_GAP_EFFORT 8000000
#endif

/* ... and at most this many full placements' worth: the MiniMalloc files
 * (6,084 units a placement and more) keep the full effort, a 40-block problem
 * gets about 1M units instead of up to 8M (the fuzz targets' problems that
 * stay above their bound spent most of their time here).  On the 10,793
 * problems eight fuzz_alloc input sets planned, the same plans in 0-15% fewer
 * planner instructions; at 1,000 three plans came out worse. */
#define LADDER_MAX_PLACEMENTS 2000

/* The ladder's effort: in proportion to how far the plan is above the bound,
 * in full from 10% up (close to the bound its steps are small and rarely pay:
 * on A, 3.6% above, the full effort added 12 ms and found nothing). */
static long long ladder_effort(const struct planner_run *r) {
    const size_t bound = r->prob.lower_bound;
    if (r->peak <= bound || bound == 0) return 0;
    const double excess = (double)(r->peak - bound) / (double)bound;
    const long long effort =
        excess >= 0.10 ? CANONICAL_GAP_EFFORT : (long long)((double)CANONICAL_GAP_EFFORT * excess / 0.10) + 1;
    const long long full_placement = full_placement_work(&r->prob);
    return effort < full_placement * LADDER_MAX_PLACEMENTS ? effort : full_placement * LADDER_MAX_PLACEMENTS;
}

/* The first round's effort per preorder at the lower bound, before the
 * local search (one round: a few ms where it finds nothing): the full
 * CANONICAL_FIRST_EFFORT, or CANONICAL_FIRST_PLACEMENTS full placements'
 * worth (MEDIUM_CANONICAL_FIRST_PLACEMENTS up to MEDIUM_PROBLEM_BLOCKS
 * blocks) where that is less. */
static long long bound_search_effort(const struct problem *p) {
    const long long full_placement = full_placement_work(p);
    const long long placements =
        p->n <= MEDIUM_PROBLEM_BLOCKS ? MEDIUM_CANONICAL_FIRST_PLACEMENTS : CANONICAL_FIRST_PLACEMENTS;
    return full_placement < CANONICAL_FIRST_EFFORT / placements ? full_placement * placements : CANONICAL_FIRST_EFFORT;
}

/* ---- entry point ---- */

/* A short local search from the first strategy's order, kept only when it
 * reaches the lower bound (then nothing can beat it and the other strategies
 * are skipped: the 7B decode graph's plan costs half).  Otherwise the run is
 * put back as it was, so the full portfolio gives the same plan as without
 * this try; its cost is then EARLY_SEARCH_PLACEMENTS re-placements.  Tried
 * only when the first plan is near the bound (the model graphs start 2-8%
 * above it): from further away 16 re-placements do not get there, and on
 * the MiniMalloc files (29-37% above) they cost 2-6 ms each. */
#define EARLY_SEARCH_PLACEMENTS 16
#define EARLY_SEARCH_MAX_EXCESS 0.10
static void early_search(struct planner_run *r) {
    const int n = r->prob.n;
    const size_t bound = r->prob.lower_bound;
    if (r->peak <= bound || (double)(r->peak - bound) > EARLY_SEARCH_MAX_EXCESS * (double)bound) return;
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
        local_search(r, 0, EARLY_SEARCH_PLACEMENTS);
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

size_t tg_plan_offline(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts) {
    if (blocks == NULL || n <= 0) return 0;
    const struct tg_offline_options defaults = {1, 0, false, 0};
    if (opts == NULL) opts = &defaults;
    const size_t alignment = normalize_alignment(opts->alignment);
    struct planner_run r;
    if (!run_init(&r, blocks, n, alignment)) return stack_blocks(blocks, n, alignment);
    const bool small = n <= SMALL_PROBLEM_BLOCKS;
    run_strategy(&r, (enum tg_offline_strategy)0);
    if (!small) early_search(&r);
    for (int s = 1; s < TG_OFFLINE_N_STRATEGIES && r.peak > r.prob.lower_bound; s++)
        run_strategy(&r, (enum tg_offline_strategy)s);
    adopt_positions(&r, 0);
    /* One short round of the canonical search at the bound, before the local
     * search: where it finds the plan (most problems) the rest is skipped.
     * Small problems try a few depth-first nodes there first. */
    if (small) exact_search_run(&r, 0, SMALL_PROBLEM_BOUND_NODES, 0, true);
    const long long first = bound_search_effort(&r.prob);
    canonical_run(&r, first, first * N_CANONICAL_PREORDERS, 0, true);
    local_search(&r, opts->time_budget_ms, small ? SMALL_PROBLEM_LOCAL_PLACEMENTS : LOCAL_SEARCH_WORK_PER_PLACEMENT);
    adopt_positions(&r, 0);
    /* Short, work-bounded runs of the two exact searches: they often reach
     * the bound or lower the peak where the local search stalls, and stay
     * deterministic. */
    exact_search_run(&r, 0, small ? SMALL_PROBLEM_DFS_NODES : DEFAULT_SEARCH_NODES, DEFAULT_SEARCH_WORK, false);
    canonical_run(&r, CANONICAL_FIRST_EFFORT, ladder_effort(&r), 0, false);
    if (opts->exact) {
        /* by the clock: the canonical search at the bound for half the time,
         * down the ladder until 80%, the other search with the rest */
        const double seconds = opts->exact_seconds > 0 ? opts->exact_seconds : 10.0;
        const double start = now_seconds();
        canonical_run(&r, CANONICAL_FIRST_EFFORT, 0, start + seconds * 0.5, true);
        canonical_run(&r, CANONICAL_FIRST_EFFORT, 0, start + seconds * 0.8, false);
        const double left = start + seconds - now_seconds();
        if (left > 0) exact_search_run(&r, left, 0, 0, false);
    }
    const size_t peak = r.peak;
    write_offsets(&r, blocks);
    run_release(&r);
    return peak;
}

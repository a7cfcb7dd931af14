/* Placement of priority orders (plan-offline-impl.h): each block in turn at
 * the lowest (or tightest) hole among its placed conflicts, or bottom up by
 * floor; and the priority orders of the portfolio's strategies.
 *
 * A placement query looks only at the blocks whose step ranges intersect the
 * block being placed (its adjacency list in the conflict graph), sorts them
 * by offset and scans the holes: O(k log k) for k conflicting blocks.  On
 * dense problems, where k is a good part of all blocks, it walks the placed
 * blocks kept in offset order instead (same holes, no sort). */
#include "plan-offline-impl.h"
#include "tg-sort.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

TG_DEFINE_SORT(sort_start_keys, struct start_key, START_BEFORE)

/* A fixed block's offset, else otherwise. */
static size_t fixed_or(const struct offline_problem *p, int i, size_t otherwise) {
    return p->fixed && p->fixed[i] != OFFLINE_FREE ? p->fixed[i] : otherwise;
}

/* ---- placement of one priority order ---- */

#define SPAN_BEFORE(x, y) ((x).offset < (y).offset)
TG_DEFINE_SORT(sort_spans, struct span, SPAN_BEFORE)

#define PLACED_BEFORE(x, y) ((x).offset < (y).offset)
TG_DEFINE_SORT(sort_placed, struct placed_block, PLACED_BEFORE)

/* place_block for dense problems: the placed blocks are kept in offset
 * order, so the holes are read off in one walk over them, skipping those
 * whose steps do not meet block i's, and a first fit stops at its hole.
 * The same offsets as place_block (the holes are the same, in the same
 * order) and the same work count; then i joins the placed blocks. */
static size_t place_block_dense(struct placer *pl, int i, enum fit_mode fit) {
    const struct offline_problem *p = pl->p;
    const size_t size = p->size[i];
    if (size == 0) return fixed_or(p, i, 0);
    pl->work += p->adj_begin[i + 1] - p->adj_begin[i] + 1;
    const int first = p->start[i], last = p->end[i];
    const struct placed_block *placed = pl->by_offset;
    const int count = pl->n_by_offset;
    size_t top = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int k = 0; k < count && fixed_or(p, i, SIZE_MAX) == SIZE_MAX; k++) {
        const struct placed_block *b = &placed[k];
        if (b->first_step > last || b->last_step < first) continue;
        const size_t from = offline_aligned(p, i, top);
        if (b->offset > from && b->offset - from >= size) {
            const size_t gap = b->offset - from;
            if (fit == FIT_FIRST) {
                best = from;
                break;
            }
            if (gap < best_gap) {
                best_gap = gap;
                best = from;
            }
        }
        if (b->top > top) top = b->top;
    }
    const size_t at = fixed_or(p, i, best != SIZE_MAX ? best : offline_aligned(p, i, top));
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
 * already-placed blocks it conflicts with (those before it in the order);
 * a fixed block's own. */
static size_t place_block(struct placer *pl, int i, const size_t *offset, enum fit_mode fit) {
    const struct offline_problem *p = pl->p;
    const size_t size = p->size[i];
    if (size == 0 || fixed_or(p, i, SIZE_MAX) != SIZE_MAX) return fixed_or(p, i, 0);
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
        const size_t from = offline_aligned(p, i, top);
        if (sp.offset > from && sp.offset - from >= size) {
            const size_t gap = sp.offset - from;
            if (fit == FIT_FIRST) return from;
            if (gap < best_gap) {
                best_gap = gap;
                best = from;
            }
        }
        const size_t sp_end = sat_add(sp.offset, sp.size);
        if (sp_end > top) top = sp_end;
    }
    return best != SIZE_MAX ? best : offline_aligned(p, i, top);
}

/* Without branches: which of two entries comes first is a coin toss to the
 * branch predictor, and the heaps are small enough to sit in L1. */
static bool heap_less(const struct heap_entry *a, const struct heap_entry *b) {
    return (a->floor < b->floor) | ((a->floor == b->floor) & (a->rank < b->rank));
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
        if (child + 1 < count) child += heap_less(&h[child + 1], &h[child]);
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
 * blocks, aligned), ties to the earliest in the priority order, takes its
 * floor.  Memory fills bottom up, so a hole only stays open when no
 * remaining block can use it.  Not for problems with fixed blocks (one
 * higher up would not be seen). */
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
        if (p->size[i] > 0 && end > peak) {
            peak = end;
            if (peak > give_up_above) return SIZE_MAX;
        }
        pl->work += p->adj_begin[i + 1] - p->adj_begin[i] + 1;
        for (int a = p->adj_begin[i]; a < p->adj_begin[i + 1]; a++) {
            const int j = p->adj[a];
            if (pl->placed[j] || pl->floor[j] >= end) continue;
            pl->floor[j] = offline_aligned(p, j, end);
            pl->heap[pl->heap_index[j]].floor = pl->floor[j];
            heap_sift_down(pl, count, pl->heap_index[j]);
        }
    }
    return peak;
}

/* Places order[from..n) given the offsets of order[0..from) and prefix_peak
 * (prefix_peak[q] = peak of order[0..q]).  Stops early, returning SIZE_MAX,
 * as soon as the peak passes give_up_above. */
size_t place_order(struct placer *pl, const int *order, int from, size_t *offset, size_t *prefix_peak,
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
        if (p->size[i] > 0 && end > peak) peak = end; /* an empty fixed block ends nowhere */
        prefix_peak[q] = peak;
        if (peak > give_up_above) return SIZE_MAX;
    }
    return peak;
}

/* ---- priority orders ---- */

TG_DEFINE_SORT(sort_keys_desc, struct tg_rank_key, TG_RANK_KEY_BEFORE)

/* Live bytes of the busiest step each block spans: a sweep over the rounded
 * sizes at the distinct start steps (the live sum only peaks at a start). */
bool compute_breadth(const struct offline_problem *p, size_t *breadth) {
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

void make_order(const struct offline_problem *p, enum tg_offline_strategy s, const size_t *breadth,
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
    /* fixed blocks first, so every other block is placed around them */
    int q = 0;
    for (int k = 0; k < n; k++)
        if (p->fixed && p->fixed[keys[k].index] != OFFLINE_FREE) order[q++] = keys[k].index;
    for (int k = 0; k < n; k++)
        if (!p->fixed || p->fixed[keys[k].index] == OFFLINE_FREE) order[q++] = keys[k].index;
}

enum fit_mode strategy_fit(enum tg_offline_strategy s) {
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


/* The offline planner's problem: the lower bound of a set of live blocks,
 * and the problem the placements and searches work on (sizes rounded to the
 * alignment, inclusive step ranges, the conflict graph as CSR lists). */
#include "plan-offline-impl.h"
#include "tg-sort.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double offline_now_seconds(void) {
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

/* The bound into *bound; false (nothing written) without scratch memory. */
static bool exact_live_lower_bound(const struct tg_live_block *blocks, int n, size_t *bound) {
    struct live_event *ev = malloc(sizeof(*ev) * 2 * (size_t)n);
    if (ev == NULL) return false;
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
    *bound = best;
    return true;
}

size_t tg_live_lower_bound(const struct tg_live_block *blocks, int n) {
    if (blocks == NULL || n <= 0) return 0;
    size_t bound;
    if (exact_live_lower_bound(blocks, n, &bound)) return bound;
    /* Without scratch memory the largest block is still a valid bound. */
    size_t largest = 0;
    for (int i = 0; i < n; i++)
        if (blocks[i].size > largest) largest = blocks[i].size;
    return largest;
}

/* ---- the problem: rounded sizes and the conflict graph ---- */


void offline_problem_release(struct offline_problem *p) {
    free(p->align);
    free(p->fixed);
    free(p->size);
    free(p->start);
    free(p->end);
    free(p->adj_begin);
    free(p->adj);
    memset(p, 0, sizeof(*p));
}

TG_DEFINE_SORT(sort_start_keys, struct start_key, START_BEFORE)

/* Conflict graph by a sweep over blocks in start order: every block still
 * active when a new one starts overlaps it in time, and nothing else does, so
 * the work is proportional to the number of conflicts.  Zero-size blocks take
 * no memory and get no edges. */
static bool build_conflicts(struct offline_problem *p) {
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

/* The least common multiple of two alignments (0 counts as 1), SIZE_MAX
 * when it does not fit: then only offset 0 is aligned. */
static size_t common_multiple(size_t a, size_t b) {
    if (a <= 1) return b <= 1 ? 1 : b;
    if (b <= 1) return a;
    size_t x = a, y = b;
    while (y != 0) {
        const size_t t = x % y;
        x = y;
        y = t;
    }
    return sat_mul(a / x, b);
}

/* Whether fixed block i shares bytes with a fixed block it is live with. */
static bool fixed_overlaps(const struct offline_problem *p, int i) {
    if (p->fixed[i] == OFFLINE_FREE || p->size[i] == 0) return false;
    const size_t end = sat_add(p->fixed[i], p->size[i]);
    for (int e = p->adj_begin[i]; e < p->adj_begin[i + 1]; e++) {
        const int j = p->adj[e];
        if (p->fixed[j] == OFFLINE_FREE) continue;
        if (end > p->fixed[j] && sat_add(p->fixed[j], p->size[j]) > p->fixed[i]) return true;
    }
    return false;
}

bool offline_problem_init(struct offline_problem *p, const struct tg_live_block *blocks, int n, size_t alignment,
                          const size_t *block_alignment, const bool *fixed) {
    memset(p, 0, sizeof(*p));
    if (n <= 0) return false;
    p->n = n;
    p->size = malloc(sizeof(size_t) * (size_t)n);
    p->start = malloc(sizeof(int) * (size_t)n);
    p->end = malloc(sizeof(int) * (size_t)n);
    struct tg_live_block *rounded = malloc(sizeof(*rounded) * (size_t)n);
    if (!p->size || !p->start || !p->end || !rounded) {
        free(rounded);
        offline_problem_release(p);
        return false;
    }
    bool own_alignment = false;
    size_t fixed_top = 0; /* no plan is lower than a fixed block's end */
    for (int i = 0; i < n; i++) {
        p->size[i] = round_up(blocks[i].size, alignment);
        p->start[i] = blocks[i].start;
        p->end[i] = block_last_step(&blocks[i]);
        rounded[i] = (struct tg_live_block){p->size[i], p->start[i], p->end[i], 0};
        own_alignment |= block_alignment && block_alignment[i] > 1 && alignment % block_alignment[i] != 0;
        if (fixed && fixed[i]) {
            p->n_fixed++;
            if (p->size[i] > 0 && sat_add(blocks[i].offset, p->size[i]) > fixed_top)
                fixed_top = sat_add(blocks[i].offset, p->size[i]);
        }
    }
    /* A weaker bound (the fallback without memory) would steer the searches
     * to another plan: the problem needs the exact one. */
    bool ok = exact_live_lower_bound(rounded, n, &p->lower_bound);
    if (fixed_top > p->lower_bound) p->lower_bound = fixed_top;
    free(rounded);
    ok = ok && build_conflicts(p);
    if (ok && (own_alignment || p->n_fixed > 0)) {
        p->align = malloc(sizeof(size_t) * (size_t)n);
        ok = p->align != NULL;
        for (int i = 0; ok && i < n; i++) p->align[i] = common_multiple(alignment, block_alignment ? block_alignment[i] : 1);
    }
    if (ok && fixed && p->n_fixed > 0) { /* n_fixed counts entries of fixed: never without it */
        p->fixed = malloc(sizeof(size_t) * (size_t)n);
        ok = p->fixed != NULL;
        for (int i = 0; ok && i < n; i++) p->fixed[i] = fixed[i] ? blocks[i].offset : OFFLINE_FREE;
        for (int i = 0; ok && i < n; i++) p->fixed_overlap |= fixed_overlaps(p, i);
    }
    if (!ok) offline_problem_release(p);
    return ok;
}


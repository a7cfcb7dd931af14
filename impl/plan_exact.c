/* The offline planner's depth-first exact search, the way MiniMalloc searches
 * (Moffitt, ASPLOS 2023): blocks are placed in nondecreasing offset order,
 * each on its floor (the top of its placed conflicting blocks); at every
 * node the branches are the blocks that can cover the lowest free point, in
 * the attempt's candidate order, plus leaving that point empty.  A branch is
 * pruned when a block no longer fits under the capacity, or when the blocks
 * still to place at some step cannot stack between their lowest floor and
 * the capacity.  Bounded by nodes, work and a deadline. */
#include "plan-offline-impl.h"
#include "tg-checks.h"
#include "tg-sort.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define INT_BEFORE(x, y) ((x) < (y))
TG_DEFINE_SORT(sort_ints, int, INT_BEFORE)

/* A node places a block or lifts some floors: paths deeper than this many
 * nodes per block are abandoned (which only costs completeness). */
#define EXACT_DEPTH_PER_BLOCK 4
/* The deadline is read once every this many nodes (a clock read per node would cost more than the node). */
#define EXACT_CLOCK_EVERY_NODES 1024

/* The state of one attempt: a plan with peak <= capacity is searched for. */
struct exact_search {
    const struct offline_problem *p;
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
    const struct offline_problem *p = x->p;
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
    const struct offline_problem *p = x->p;
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
    const struct offline_problem *p = x->p;
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
    const struct offline_problem *p = x->p;
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
    const struct offline_problem *p = x->p;
    if (x->n_placed == p->n) return true;
    if (++x->nodes >= x->node_limit) x->timed_out = true;
    x->work += p->n;
    if (x->work_limit > 0 && x->work >= x->work_limit) x->timed_out = true;
    if ((x->nodes % EXACT_CLOCK_EVERY_NODES) == 0 && x->deadline > 0 && offline_now_seconds() > x->deadline) x->timed_out = true;
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

/* Takes a plan a search found as the caller's best. */
static void adopt_offsets(const struct offline_problem *p, const size_t *found, size_t *peak, size_t *offset) {
    size_t top = 0;
    for (int i = 0; i < p->n; i++) {
        offset[i] = found[i];
        if (sat_add(found[i], p->size[i]) > top) top = sat_add(found[i], p->size[i]);
    }
    *peak = top;
}

/* One depth-first attempt at a capacity with one candidate order, stopped
 * after node_limit nodes or work_limit work or at the deadline. */
static bool exact_attempt(struct exact_search *x, size_t capacity, int order, long long node_limit,
                          long long work_limit) {
    const struct offline_problem *p = x->p;
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
    return exact_dfs(x, 0);
}

/* Restarted search: rounds of attempts with every candidate order, first at
 * the lower bound, then halfway between it and the best peak so far, then an
 * eighth of that gap below the best peak; the node limit doubles each round
 * (short attempts first: a lucky order often succeeds fast and an unlucky one
 * stays stuck in one subtree). */
bool offline_exact_search(const struct offline_problem *p, const int *rank, const struct tg_offline_budgets *budgets,
                          double seconds, long long total_nodes, long long total_work, bool bound_only, size_t *peak,
                          size_t *offset) {
    const int n = p->n;
    TG_ASSERT(n > 0 && rank && peak && offset && *peak >= p->lower_bound, "a search of %d blocks below its bound", n);
    if (*peak <= p->lower_bound || n > budgets->search_max_blocks) return true;
    struct exact_search x = {0};
    x.p = p;
    x.rank = rank;
    x.floor = malloc(sizeof(size_t) * (size_t)n);
    x.placed = malloc(sizeof(bool) * (size_t)n);
    x.offset = malloc(sizeof(size_t) * (size_t)n);
    const size_t max_depth = (size_t)EXACT_DEPTH_PER_BLOCK * (size_t)n + EXACT_DEPTH_PER_BLOCK;
    x.cands = malloc(sizeof(int) * (size_t)n * max_depth);
    x.undo = malloc(sizeof(struct exact_undo) * ((size_t)p->adj_begin[n] + (size_t)n * max_depth + 1));
    x.max_depth = (int)max_depth;
    x.deadline = seconds > 0 ? offline_now_seconds() + seconds : 0;
    long long spent = 0, spent_work = 0;
    const bool have_memory = x.floor && x.placed && x.offset && x.cands && x.undo && exact_sections(&x);
    bool out_of_time = !have_memory;
    for (long long limit = budgets->dfs_first_attempt_nodes; !out_of_time && *peak > p->lower_bound; limit *= 2) {
        for (int pass = 0; pass < (bound_only ? 1 : 3) && !out_of_time && *peak > p->lower_bound; pass++) {
            /* the bound, halfway to the best peak, and an eighth of the gap
             * below it (the easiest improvement, often the only one in reach) */
            const size_t gap = *peak - p->lower_bound;
            const size_t cap = pass == 0 ? p->lower_bound : pass == 1 ? p->lower_bound + gap / 2 : *peak - gap / 8;
            for (int order = 0; order < N_CANDIDATE_ORDERS; order++) {
                long long my_limit = limit;
                if (total_nodes > 0 && spent + my_limit > total_nodes) my_limit = total_nodes - spent;
                const long long work_left = total_work > 0 ? total_work - spent_work : 0;
                if (my_limit <= 0 || (total_work > 0 && work_left <= 0) ||
                    (x.deadline > 0 && offline_now_seconds() > x.deadline)) {
                    out_of_time = true;
                    break;
                }
                const bool found = exact_attempt(&x, cap, order, my_limit, work_left);
                spent += x.nodes;
                spent_work += x.work;
                if (found) {
                    adopt_offsets(p, x.offset, peak, offset);
                    break;
                }
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
    return have_memory;
}

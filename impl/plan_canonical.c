/* Canonical exact search (see plan-canonical.h), MiniMalloc's (Moffitt,
 * ASPLOS 2023), written from the paper and its rules.
 *
 * Any plan can be pressed down until every free block rests on a
 * conflicting block or on offset 0 (at the next multiple of its alignment);
 * taken in order of offset, each block then sits exactly at the top of the
 * highest conflicting block placed before it, aligned, or at its fixed
 * offset.  So a search only needs to choose the next block: its offset is
 * forced (its "floor").  Blocks are chosen in non-decreasing (floor, rank),
 * which visits each pressed-down plan once, and these rules cut the tree:
 *  - sections: at each step where a block ends, the blocks live there all
 *    conflict with each other, so the unplaced ones stack above the
 *    section's floor (the highest placed top there, at least the lowest
 *    unplaced floor, at least the current offset) and must fit under the
 *    capacity;
 *  - dominance: a block whose floor is at or above the top of some other
 *    unplaced block's lowest position would leave room that block could have
 *    taken first, so it is not tried;
 *  - a block pushed above the capacity (or above its fixed offset) by its
 *    floor ends the branch at once;
 *  - fixed blocks: a fixed block's floor is its offset, so a branch that
 *    left one behind the last placement of its piece ends (a split may let a
 *    sub-piece place it later, but any plan so found is also found with the
 *    fixed block placed first: nothing placed after it overlaps it in time,
 *    or its floor would have passed its offset), and when one tried at its
 *    offset fails, every later candidate would leave it behind (the node ends);
 *  - hatless: when a block that conflicts with nothing unplaced was placed
 *    and the rest failed, no other block is tried in its place;
 *  - decomposition: once no unplaced block spans the boundary between two
 *    sections, the two sides are independent problems, each ranked again by
 *    what is left of it and solved one after the other; a side that fails
 *    fails the branch without re-searching the other.
 * Every change is logged and undone by unwinding the log to a mark. */
#include "plan-canonical.h"
#include "tg-checks.h"
#include "tg-size.h"
#include "tg-sort.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNPLACED SIZE_MAX

enum change_kind { CHANGE_FLOOR, CHANGE_SECTION_FLOOR, CHANGE_PLACED };

struct change {
    enum change_kind kind;
    int index;
    size_t old_value;
};

struct canon {
    const struct tg_canonical_problem *p;
    size_t capacity;
    enum tg_canonical_preorder preorder;
    size_t *guide;     /* a guided search's plan (tg_canonical_new_guided), else NULL */
    int *rank;         /* position in the preorder of the piece it belongs to */
    struct tg_rank_key *keys; /* scratch of rank_piece, n entries */
    size_t *floor;     /* unplaced block: the top of its highest placed conflict */
    size_t *offset;    /* UNPLACED until placed */
    int m;             /* sections */
    int *first_section, *last_section;
    /* The blocks live in each section (CSR), the unplaced ones first:
     * members[member_begin[s] .. + n_unplaced[s]).  slot[membership_base[i]
     * + s - first_section[i]] is where block i sits in section s's list. */
    int *member_begin, *members, *n_unplaced, *membership_base, *slot;
    size_t *section_total;       /* sizes of the unplaced blocks live in it */
    size_t *section_floor;       /* no unplaced block of the section can sit lower */
    int *cut;                    /* unplaced blocks live in both s and s + 1 */
    unsigned *section_seen;      /* stamps: sections already refreshed this placement */
    unsigned seen_stamp;
    int *touched, n_touched; /* sections whose floor or total the last placement changed */
    struct change *log;
    int n_log, log_cap;
    int *pool; /* stack of candidate lists, one per open search node */
    size_t pool_used, pool_cap;
    long long work, work_limit; /* entries visited: see plan-canonical.h */
    long long placements;        /* tried, for the deadline's clock reads */
    double deadline;
    bool out_of_memory; /* the search cannot go on */
    bool hatless; /* the last placement had no unplaced conflict */
    /* The search's call stack, explicit so that a search stopped by its
     * work limit or deadline can go on later from where it stopped. */
    struct frame *frames;
    int depth, frames_cap;
};

static double clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the change log ---- */

static bool log_change(struct canon *x, enum change_kind kind, int index, size_t old_value) {
    if (x->n_log == x->log_cap) {
        int cap = x->log_cap ? x->log_cap * 2 : 1024;
        struct change *grown = realloc(x->log, sizeof(*grown) * (size_t)cap);
        if (!grown) {
            x->out_of_memory = true;
            return false;
        }
        x->log = grown;
        x->log_cap = cap;
    }
    x->log[x->n_log++] = (struct change){kind, index, old_value};
    return true;
}

/* Swaps block i in section s's list with the entry at position to. */
static void move_member(struct canon *x, int i, int s, int to) {
    int *slot_i = &x->slot[x->membership_base[i] + s - x->first_section[i]];
    const int other = x->members[to];
    x->slot[x->membership_base[other] + s - x->first_section[other]] = *slot_i;
    x->members[*slot_i] = other;
    x->members[to] = i;
    *slot_i = to;
}

static void unplace(struct canon *x, int i) {
    const struct tg_canonical_problem *p = x->p;
    x->offset[i] = UNPLACED;
    for (int s = x->first_section[i]; s <= x->last_section[i]; s++) {
        x->section_total[s] += p->size[i];
        if (s < x->last_section[i]) x->cut[s]++;
        move_member(x, i, s, x->member_begin[s] + x->n_unplaced[s]++);
    }
}

static void unwind(struct canon *x, int mark) {
    while (x->n_log > mark) {
        const struct change c = x->log[--x->n_log];
        switch (c.kind) {
        case CHANGE_FLOOR: x->floor[c.index] = c.old_value; break;
        case CHANGE_SECTION_FLOOR: x->section_floor[c.index] = c.old_value; break;
        case CHANGE_PLACED: unplace(x, c.index); break;
        }
    }
}

/* ---- placing a block ---- */

/* Raises section s's floor to the lowest floor among its unplaced blocks,
 * stopping early at one not above the current floor (then nothing rises). */
static bool refresh_section_floor(struct canon *x, int s) {
    const size_t current = x->section_floor[s];
    size_t lowest = SIZE_MAX;
    const int *unplaced = x->members + x->member_begin[s];
    for (int k = 0; k < x->n_unplaced[s]; k++) {
        const int j = unplaced[k];
        x->work++;
        if (x->floor[j] <= current) return true;
        if (x->floor[j] < lowest) lowest = x->floor[j];
    }
    if (lowest == SIZE_MAX) return true;
    if (!log_change(x, CHANGE_SECTION_FLOOR, s, current)) return false;
    x->section_floor[s] = lowest;
    return true;
}

/* Queues the sections of block i whose floor may rise now that i's floor
 * rose from old_floor (0 when i was just placed: all its sections).  Where
 * old_floor was above a section's floor, i was not the lowest there. */
static void touch_sections(struct canon *x, int i, size_t old_floor, int *n_touched) {
    x->work += x->last_section[i] - x->first_section[i] + 1;
    for (int s = x->first_section[i]; s <= x->last_section[i]; s++) {
        if (x->section_seen[s] == x->seen_stamp || old_floor > x->section_floor[s]) continue;
        x->section_seen[s] = x->seen_stamp;
        x->touched[(*n_touched)++] = s;
    }
}

/* The lowest offset at or above at that block j may take. */
static size_t aligned_floor(const struct tg_canonical_problem *p, int j, size_t at) {
    const size_t a = p->alignment ? p->alignment[j] : 1;
    if (a <= 1 || at % a == 0) return at;
    const size_t up = a - at % a;
    return at > SIZE_MAX - up ? SIZE_MAX : at + up;
}

/* Places block i at its floor and propagates: conflicts' floors rise to its
 * top (aligned), the sections they span raise their floors.  False when a
 * conflict no longer fits under the capacity, or above its fixed offset, or
 * memory ran out (the caller unwinds).  Sets x->hatless when i has no
 * unplaced conflict. */
static bool place(struct canon *x, int i) {
    const struct tg_canonical_problem *p = x->p;
    const size_t top = x->floor[i] + p->size[i];
    if (!log_change(x, CHANGE_PLACED, i, 0)) return false;
    x->offset[i] = x->floor[i];
    for (int s = x->first_section[i]; s <= x->last_section[i]; s++) {
        x->section_total[s] -= p->size[i];
        if (s < x->last_section[i]) x->cut[s]--;
        move_member(x, i, s, x->member_begin[s] + --x->n_unplaced[s]);
    }
    if (++x->seen_stamp == 0) { /* wrapped: forget every old stamp */
        memset(x->section_seen, 0, sizeof(unsigned) * (size_t)x->m);
        x->seen_stamp = 1;
    }
    int n_touched = 0;
    touch_sections(x, i, 0, &n_touched);
    bool fits = true;
    x->hatless = true;
    x->work += p->adj_begin[i + 1] - p->adj_begin[i];
    for (int a = p->adj_begin[i]; a < p->adj_begin[i + 1]; a++) {
        const int j = p->adj[a];
        if (x->offset[j] != UNPLACED) continue;
        x->hatless = false;
        if (x->floor[j] >= top) continue;
        const size_t old_floor = x->floor[j];
        const size_t floor = aligned_floor(p, j, top);
        if (!log_change(x, CHANGE_FLOOR, j, old_floor)) return false;
        x->floor[j] = floor;
        if (floor > x->capacity || p->size[j] > x->capacity - floor) fits = false;
        if (p->fixed_offset && p->fixed_offset[j] != TG_CANONICAL_FREE && floor > p->fixed_offset[j]) fits = false;
        touch_sections(x, j, old_floor, &n_touched);
    }
    if (!fits) return false;
    x->n_touched = n_touched;
    for (int k = 0; k < n_touched; k++)
        if (!refresh_section_floor(x, x->touched[k])) return false;
    return true;
}

/* Whether the unplaced blocks of every section in [lo, hi) still stack under
 * the capacity, none of them below offset (placements only go up). */
static bool sections_fit(const struct canon *x, int lo, int hi, size_t offset) {
    for (int s = lo; s < hi; s++) {
        const size_t total = x->section_total[s];
        if (total == 0) continue;
        const size_t base = x->section_floor[s] > offset ? x->section_floor[s] : offset;
        if (base > x->capacity || total > x->capacity - base) return false;
    }
    return true;
}

/* Whether the sections a placement at offset changed still fit. */
static bool changed_sections_fit(const struct canon *x, size_t offset) {
    for (int k = 0; k < x->n_touched; k++) {
        const int s = x->touched[k];
        const size_t base = x->section_floor[s] > offset ? x->section_floor[s] : offset;
        if (base > x->capacity || x->section_total[s] > x->capacity - base) return false;
    }
    return true;
}

/* ---- the preorder ---- */

TG_DEFINE_SORT(sort_rank_keys, struct tg_rank_key, TG_RANK_KEY_BEFORE)

/* Ranks the blocks of a piece (pool entries list .. + count) by the
 * preorder, "total" being the largest sum of the unplaced sizes in any
 * section the block spans, as it stands now: after a split each piece is
 * ranked by what is left of it (MiniMalloc's dynamic ordering per
 * partition), not by the totals the whole problem started with. */
static void rank_piece(struct canon *x, size_t list, int count) {
    const struct tg_canonical_problem *p = x->p;
    struct tg_rank_key *keys = x->keys;
    for (int k = 0; k < count; k++) {
        const int i = x->pool[list + (size_t)k];
        size_t busiest = 0;
        for (int s = x->first_section[i]; s <= x->last_section[i]; s++)
            if (x->section_total[s] > busiest) busiest = x->section_total[s];
        x->work += x->last_section[i] - x->first_section[i] + 1;
        const size_t width = (size_t)((long long)p->end[i] - p->start[i] + 1);
        const size_t area = width != 0 && p->size[i] > SIZE_MAX / width ? SIZE_MAX : p->size[i] * width;
        if (x->guide) {
            keys[k] = (struct tg_rank_key){SIZE_MAX - x->guide[i], busiest, width, i}; /* lowest offset first */
            continue;
        }
        switch (x->preorder) {
        case TG_PREORDER_WIDTH_AREA_TOTAL: keys[k] = (struct tg_rank_key){width, area, busiest, i}; break;
        case TG_PREORDER_TOTAL_AREA_WIDTH: keys[k] = (struct tg_rank_key){busiest, area, width, i}; break;
        default: keys[k] = (struct tg_rank_key){busiest, width, area, i}; break;
        }
    }
    sort_rank_keys(keys, count);
    for (int r = 0; r < count; r++) x->rank[keys[r].index] = r;
    for (int c = count; c > 1; c >>= 1) x->work += count; /* the sort: count log count */
}

/* ---- the search ---- */

enum outcome { OUT_FOUND, OUT_NOT_FOUND, OUT_GAVE_UP };

/* A candidate list on the pool stack; returned as an index (the pool moves). */
static bool pool_reserve(struct canon *x, size_t count) {
    if (x->pool_used + count <= x->pool_cap) return true;
    size_t cap = x->pool_cap ? x->pool_cap : 4096;
    while (cap < x->pool_used + count) cap *= 2;
    int *grown = realloc(x->pool, sizeof(int) * cap);
    if (!grown) return false;
    x->pool = grown;
    x->pool_cap = cap;
    return true;
}

static bool candidate_before(const struct canon *x, int a, int b) {
    if (x->floor[a] != x->floor[b]) return x->floor[a] < x->floor[b];
    return x->rank[a] < x->rank[b];
}

/* Restores the heap order of h[0 .. count) below position at. */
static void candidate_sift_down(const struct canon *x, int *h, int count, int at) {
    const int e = h[at];
    for (;;) {
        int child = 2 * at + 1;
        if (child >= count) break;
        if (child + 1 < count && candidate_before(x, h[child + 1], h[child])) child++;
        if (!candidate_before(x, h[child], e)) break;
        h[at] = h[child];
        at = child;
    }
    h[at] = e;
}

static size_t largest_section_total(const struct canon *x, int lo, int hi) {
    size_t largest = 0;
    for (int s = lo; s < hi; s++)
        if (x->section_total[s] > largest) largest = x->section_total[s];
    return largest;
}

/* The search is two kinds of frame calling each other:
 *  - a range solves the unplaced blocks of a list over sections [lo, hi):
 *    split at every boundary no unplaced block spans, each side solved on
 *    its own by a node (from a fresh canonical order: the sides do not
 *    interact), else one node for the whole range;
 *  - a node places each block that may come next in a canonical plan, in
 *    (floor, rank) order, and solves the rest by a range.
 * Each frame is a small state machine (its step) so the stack can stop at a
 * node about to place a block, when the work limit or the deadline is
 * reached, and go on from there later: the search then visits exactly the
 * plans it would have visited in one run, and work is never repeated. */
enum frame_step {
    RANGE_ENTER,     /* split the range, or become a node */
    RANGE_NEXT,      /* the next piece, or done */
    RANGE_RETURNED,  /* a piece's node returned */
    NODE_ENTER,      /* the list and the candidates */
    NODE_NEXT,       /* the next candidate, or done */
    NODE_PLACE,      /* place the chosen candidate (where a stopped search goes on) */
    NODE_RETURNED,   /* the range above the candidate returned */
    NODE_AFTER,      /* undo a failed candidate */
    FRAME_EXIT,      /* return the result */
};

struct frame {
    bool node; /* else a range */
    enum frame_step step;
    /* the call: the list (pool index, len entries), sections [lo, hi) */
    size_t list;
    int len, lo, hi;
    size_t max_total;   /* an upper bound of the range's section totals */
    size_t last_offset; /* the last placement, for canonical order */
    int last_rank;
    int new_cuts_lo, new_cuts_hi; /* range: only these boundaries can have lost their last spanning block */
    enum outcome result;
    size_t saved_pool;
    int mark;
    /* node */
    size_t mine;  /* its list of the unplaced, n entries, then the candidates' heap */
    int n, left;  /* left: candidates still in the heap */
    int block;    /* the candidate being tried, and its offset */
    size_t at;
    bool max_total_exact, hatless;
    /* range */
    int s, piece_lo, piece_hi, count;
    size_t piece; /* its blocks, count entries, then their saved ranks */
};

enum frame_status { FRAME_PUSHED, FRAME_DONE, FRAME_STOPPED };

static struct frame *push_frame(struct canon *x, enum frame_step step, size_t list, int len, int lo, int hi,
                                size_t max_total, size_t last_offset, int last_rank) {
    /* depth: a node per placed block plus one, a range below each */
    TG_ASSERT(x->depth < x->frames_cap, "canonical search stack overflow at depth %d", x->depth);
    struct frame *f = &x->frames[x->depth++];
    memset(f, 0, sizeof(*f));
    f->node = step == NODE_ENTER;
    f->step = step;
    f->list = list;
    f->len = len;
    f->lo = lo;
    f->hi = hi;
    f->max_total = max_total;
    f->last_offset = last_offset;
    f->last_rank = last_rank;
    return f;
}

/* The unplaced blocks of the parent's list, and the candidates: only the
 * blocks below the lowest top can come next (dominance), usually a few of
 * the list; they alone go into a heap.  false: the list is empty. */
static bool node_enter(struct canon *x, struct frame *f) {
    f->saved_pool = x->pool_used;
    if (x->out_of_memory || !pool_reserve(x, 2 * (size_t)f->len)) { /* the list, then the candidates */
        x->out_of_memory = true;
        f->result = OUT_GAVE_UP;
        return false;
    }
    f->mine = x->pool_used;
    /* the lists below, and the range's sections, which nodes used to scan:
     * budgets in work units stay as tuned */
    x->work += f->len + (f->hi - f->lo);
    /* the pool does not move until a child reserves more */
    int *const list = x->pool + f->mine;
    const int *const parent = x->pool + f->list;
    const size_t *const floor = x->floor;
    int n = 0;
    size_t lowest_top = SIZE_MAX;
    for (int k = 0; k < f->len; k++) {
        const int i = parent[k];
        if (x->offset[i] != UNPLACED) continue;
        list[n++] = i;
        const size_t top = sat_add(floor[i], x->p->size[i]);
        if (top < lowest_top) lowest_top = top;
    }
    f->n = n;
    if (n == 0) {
        x->pool_used = f->saved_pool;
        f->result = OUT_FOUND;
        return false;
    }
    /* canonical after the last placement: not below its offset, nor beside
     * it with a lower rank */
    int *const cand = list + n;
    int n_cands = 0;
    const size_t *const fixed = x->p->fixed_offset;
    for (int k = 0; k < n; k++) {
        const int i = list[k];
        const size_t at = floor[i];
        const bool behind = at < f->last_offset || (at == f->last_offset && x->rank[i] < f->last_rank);
        if (at >= lowest_top || behind) {
            /* A fixed block behind the last placement of its piece: every plan
             * below is also found with it placed first (a free block's floor
             * may still rise to where it can come next, a fixed one's not). */
            if (behind && fixed && fixed[i] != TG_CANONICAL_FREE) {
                x->pool_used = f->saved_pool;
                x->work += k;
                f->result = OUT_NOT_FOUND;
                return false;
            }
            continue;
        }
        cand[n_cands++] = i;
    }
    /* a heap: the first candidates are often all that is tried */
    for (int k = n_cands / 2 - 1; k >= 0; k--) candidate_sift_down(x, cand, n_cands, k);
    x->work += n_cands;
    x->pool_used = f->mine + (size_t)n + (size_t)n_cands;
    f->left = n_cands;
    f->result = OUT_NOT_FOUND;
    return true;
}

/* Takes the next candidate off the heap; false when no candidate is left
 * that could lead to a plan.  Room above a candidate's offset: plain when
 * even the largest section total fits there; else section by section (a
 * node asks once or twice before it places a block or stops, so sorting the
 * sections by floor to answer faster cost more).  At a node every section
 * fits above its own floor, so a failure here holds for every later, higher
 * candidate. */
static bool node_next(struct canon *x, struct frame *f) {
    while (f->left > 0) {
        int *const heap = x->pool + f->mine + (size_t)f->n; /* a child may have moved the pool */
        const int i = heap[0];
        heap[0] = heap[--f->left];
        candidate_sift_down(x, heap, f->left, 0);
        for (int c = f->left; c > 1; c >>= 1) x->work++; /* the sift: log left */
        const size_t at = x->floor[i];
        if (at <= x->capacity && f->max_total > x->capacity - at && !f->max_total_exact) {
            f->max_total = largest_section_total(x, f->lo, f->hi);
            f->max_total_exact = true;
        }
        if ((at > x->capacity || f->max_total > x->capacity - at) && !sections_fit(x, f->lo, f->hi, at)) return false;
        if (sat_add(at, x->p->size[i]) > x->capacity) continue;
        f->block = i;
        f->at = at;
        return true;
    }
    return false;
}

static enum frame_status step_node(struct canon *x, struct frame *f, enum outcome returned) {
    for (;;) {
        switch (f->step) {
        case NODE_ENTER:
            f->step = node_enter(x, f) ? NODE_NEXT : FRAME_EXIT;
            break;
        case NODE_NEXT:
            f->step = f->result == OUT_NOT_FOUND && node_next(x, f) ? NODE_PLACE : FRAME_EXIT;
            break;
        case NODE_PLACE: {
            if ((x->work_limit > 0 && x->work >= x->work_limit) ||
                (x->deadline > 0 && (x->placements++ & 255) == 0 && clock_seconds() > x->deadline))
                return FRAME_STOPPED; /* goes on here when called again */
            const int i = f->block;
            f->mark = x->n_log;
            f->hatless = false;
            f->step = NODE_AFTER;
            if (place(x, i) && changed_sections_fit(x, f->at)) {
                f->hatless = x->hatless;
                f->step = NODE_RETURNED;
                struct frame *range = push_frame(x, RANGE_ENTER, f->mine, f->n, f->lo, f->hi, f->max_total, f->at,
                                                 x->rank[i]);
                range->new_cuts_lo = x->first_section[i];
                range->new_cuts_hi = x->last_section[i];
                return FRAME_PUSHED;
            }
            if (x->out_of_memory) f->result = OUT_GAVE_UP;
            break;
        }
        case NODE_RETURNED:
            f->result = returned;
            f->step = NODE_AFTER;
            break;
        case NODE_AFTER:
            if (f->result != OUT_FOUND) unwind(x, f->mark);
            /* A block that conflicts with nothing unplaced changes nothing
             * for the rest: where the rest fails with it here, it fails with
             * it anywhere higher, so no other candidate is tried
             * (MiniMalloc's hatless pruning). */
            /* A fixed block tried and failed: every later candidate is at
             * or above its offset, which would leave it behind. */
            f->step = f->hatless || (f->result != OUT_FOUND && x->p->fixed_offset &&
                                     x->p->fixed_offset[f->block] != TG_CANONICAL_FREE)
                          ? FRAME_EXIT
                          : NODE_NEXT;
            break;
        case FRAME_EXIT:
            x->pool_used = f->saved_pool; /* the lists are done with either way */
            return FRAME_DONE;
        default:
            TG_ASSERT(false, "canonical search: node frame at step %d", (int)f->step);
        }
    }
}

/* The first boundary in the range that no unplaced block spans, among those
 * that can have lost their last spanning block; -1 when none. */
static int first_split(const struct canon *x, const struct frame *f) {
    const int scan_hi = f->new_cuts_hi < f->hi - 1 ? f->new_cuts_hi : f->hi - 1;
    for (int s = f->new_cuts_lo > f->lo ? f->new_cuts_lo : f->lo; s < scan_hi; s++)
        if (x->cut[s] == 0) return s;
    return -1;
}

/* The next piece with unplaced blocks gets a node: its blocks listed and
 * ranked by what is left of it (the list's ranks are saved to come back
 * after it).  false when no piece is left or memory ran out. */
static bool range_next(struct canon *x, struct frame *f) {
    while (f->piece_lo < f->hi) {
        const int s = f->s++;
        if (s + 1 < f->hi && x->cut[s] != 0) continue;
        f->piece_hi = s + 1;
        if (!pool_reserve(x, (size_t)f->len)) {
            x->out_of_memory = true;
            f->result = OUT_GAVE_UP;
            return false;
        }
        f->piece = x->pool_used;
        int count = 0;
        for (int k = 0; k < f->len; k++) {
            const int i = x->pool[f->list + (size_t)k];
            if (x->offset[i] == UNPLACED && x->first_section[i] < f->piece_hi && x->last_section[i] >= f->piece_lo)
                x->pool[f->piece + (size_t)count++] = i;
        }
        x->pool_used = f->piece + (size_t)count;
        if (count > 0) {
            if (!pool_reserve(x, (size_t)count)) {
                x->out_of_memory = true;
                f->result = OUT_GAVE_UP;
                return false;
            }
            const size_t saved_ranks = f->piece + (size_t)count;
            for (int k = 0; k < count; k++) x->pool[saved_ranks + (size_t)k] = x->rank[x->pool[f->piece + (size_t)k]];
            x->pool_used = saved_ranks + (size_t)count;
            rank_piece(x, f->piece, count);
            f->count = count;
            return true;
        }
        x->pool_used = f->piece;
        f->piece_lo = f->piece_hi;
    }
    return false;
}

static enum frame_status step_range(struct canon *x, struct frame *f, enum outcome returned) {
    for (;;) {
        switch (f->step) {
        case RANGE_ENTER: {
            const int split = first_split(x, f);
            if (split < 0) { /* one piece: the range is a node */
                f->node = true;
                f->step = NODE_ENTER;
                return step_node(x, f, returned);
            }
            f->saved_pool = x->pool_used;
            f->mark = x->n_log;
            f->result = OUT_FOUND;
            f->piece_lo = f->lo;
            f->s = split;
            f->step = RANGE_NEXT;
            break;
        }
        case RANGE_NEXT:
            if (f->result != OUT_FOUND || !range_next(x, f)) {
                f->step = FRAME_EXIT;
                break;
            }
            f->step = RANGE_RETURNED;
            push_frame(x, NODE_ENTER, f->piece, f->count, f->piece_lo, f->piece_hi, f->max_total, 0, -1);
            return FRAME_PUSHED;
        case RANGE_RETURNED:
            f->result = returned;
            for (int k = 0; k < f->count; k++)
                x->rank[x->pool[f->piece + (size_t)k]] = x->pool[f->piece + (size_t)f->count + (size_t)k];
            x->pool_used = f->piece;
            f->piece_lo = f->piece_hi;
            f->step = RANGE_NEXT;
            break;
        case FRAME_EXIT:
            /* a side that fails fails the branch without re-searching the other */
            if (f->result != OUT_FOUND) {
                unwind(x, f->mark);
                x->pool_used = f->saved_pool;
            }
            return FRAME_DONE;
        default:
            TG_ASSERT(false, "canonical search: range frame at step %d", (int)f->step);
        }
    }
}

/* Runs the stack until the root frame returns (its outcome) or the search
 * stops at its work limit or deadline (OUT_GAVE_UP, the stack kept). */
static enum outcome run_frames(struct canon *x) {
    enum outcome returned = OUT_FOUND;
    while (x->depth > 0) {
        struct frame *f = &x->frames[x->depth - 1];
        const enum frame_status status = f->node ? step_node(x, f, returned) : step_range(x, f, returned);
        if (status == FRAME_STOPPED) return OUT_GAVE_UP;
        if (status == FRAME_DONE) {
            returned = f->result;
            x->depth--;
        }
    }
    return returned;
}

/* ---- setup ---- */

#define INT_BEFORE(a, b) ((a) < (b))
TG_DEFINE_SORT(sort_ints_ascending, int, INT_BEFORE)

static int index_of(const int *sorted, int m, int v) {
    int lo = 0, hi = m;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Sections, as MiniMalloc's sweep makes them: one at each step where a
 * block ends (holding every block live there), so every set of blocks live
 * together lies inside one; their members and totals, the cuts between
 * them; false when out of memory. */
static bool build_sections(struct canon *x) {
    const struct tg_canonical_problem *p = x->p;
    const int n = p->n;
    int *events = malloc(sizeof(int) * (size_t)n);
    if (!events) return false;
    int n_events = 0;
    for (int i = 0; i < n; i++)
        if (p->size[i] > 0) events[n_events++] = p->end[i];
    sort_ints_ascending(events, n_events);
    int unique = 0;
    for (int e = 0; e < n_events; e++)
        if (unique == 0 || events[unique - 1] != events[e]) events[unique++] = events[e];
    const int m = unique > 0 ? unique : 1;
    x->m = m;
    x->member_begin = calloc((size_t)m + 1, sizeof(int));
    x->section_total = calloc((size_t)m, sizeof(size_t));
    x->section_floor = calloc((size_t)m, sizeof(size_t));
    x->cut = calloc((size_t)m, sizeof(int));
    x->section_seen = calloc((size_t)m, sizeof(unsigned));
    x->touched = malloc(sizeof(int) * (size_t)m);
    x->n_unplaced = calloc((size_t)m, sizeof(int));
    x->membership_base = calloc((size_t)n, sizeof(int));
    bool ok = x->n_unplaced && x->membership_base && x->member_begin && x->section_total && x->section_floor &&
              x->cut && x->section_seen && x->touched;
    int n_members = 0; /* memberships: the sum of spans */
    for (int i = 0; ok && i < n; i++) {
        if (p->size[i] == 0) { /* takes no memory: in no section */
            x->first_section[i] = 0;
            x->last_section[i] = -1;
            continue;
        }
        /* the first end at or after its start, and its own end */
        x->first_section[i] = index_of(events, unique, p->start[i]);
        x->last_section[i] = index_of(events, unique, p->end[i]);
        x->membership_base[i] = n_members;
        for (int s = x->first_section[i]; s <= x->last_section[i]; s++) {
            x->member_begin[s + 1]++;
            x->n_unplaced[s]++;
            x->section_total[s] = sat_add(x->section_total[s], p->size[i]);
            if (s < x->last_section[i]) x->cut[s]++;
        }
        const int span = x->last_section[i] - x->first_section[i] + 1;
        if (span < 1 || span > INT_MAX / 2 - n_members) ok = false; /* int indices: far beyond any real plan */
        else n_members += span;
    }
    free(events);
    if (ok) {
        for (int s = 0; s < m; s++) x->member_begin[s + 1] += x->member_begin[s];
        const size_t entries = (size_t)n_members + 1;
        x->members = malloc(sizeof(int) * entries);
        x->slot = malloc(sizeof(int) * entries);
        ok = x->members && x->slot;
    }
    if (ok) {
        int *fill = x->touched; /* scratch here: m entries */
        for (int s = 0; s < m; s++) fill[s] = x->member_begin[s];
        for (int i = 0; i < n; i++) {
            if (p->size[i] == 0) continue;
            for (int s = x->first_section[i]; s <= x->last_section[i]; s++) {
                x->slot[x->membership_base[i] + s - x->first_section[i]] = fill[s];
                x->members[fill[s]++] = i;
            }
        }
    }
    return ok;
}

static void canon_release(struct canon *x) {
    free(x->guide);
    free(x->rank);
    free(x->keys);
    free(x->floor);
    free(x->offset);
    free(x->first_section);
    free(x->last_section);
    free(x->member_begin);
    free(x->members);
    free(x->n_unplaced);
    free(x->membership_base);
    free(x->slot);
    free(x->section_total);
    free(x->section_floor);
    free(x->cut);
    free(x->section_seen);
    free(x->touched);
    free(x->log);
    free(x->pool);
    free(x->frames);
}

struct tg_canonical_search {
    struct canon x;
    bool done;                      /* result is final */
    enum tg_canonical_result result;
    long long reported;             /* work reported by the runs so far */
};

static struct tg_canonical_search *search_new(const struct tg_canonical_problem *p, size_t capacity,
                                              enum tg_canonical_preorder preorder, const size_t *guide) {
    if (!p || p->n <= 0) return NULL;
    const int n = p->n;
    for (int i = 0; i < n; i++) /* outside the contract, or no index for the section after it */
        if (p->end[i] < p->start[i] || p->end[i] == INT_MAX) return NULL;
    struct tg_canonical_search *search = calloc(1, sizeof(*search));
    if (!search) return NULL;
    struct canon *x = &search->x;
    x->p = p;
    x->capacity = capacity;
    x->preorder = preorder;
    x->guide = guide ? malloc(sizeof(size_t) * (size_t)n) : NULL;
    x->rank = malloc(sizeof(int) * (size_t)n);
    x->keys = malloc(sizeof(*x->keys) * (size_t)n);
    x->floor = calloc((size_t)n, sizeof(size_t));
    x->offset = malloc(sizeof(size_t) * (size_t)n);
    x->first_section = malloc(sizeof(int) * (size_t)n);
    x->last_section = malloc(sizeof(int) * (size_t)n);
    x->frames_cap = 2 * n + 4; /* a node per placed block and the root's, a range below each */
    x->frames = malloc(sizeof(struct frame) * (size_t)x->frames_cap);
    if ((guide && !x->guide) || !x->rank || !x->keys || !x->floor || !x->offset || !x->first_section ||
        !x->last_section || !x->frames || !build_sections(x) || !pool_reserve(x, (size_t)n)) {
        tg_canonical_free(search);
        return NULL;
    }
    if (guide) memcpy(x->guide, guide, sizeof(size_t) * (size_t)n);
    int len = 0;
    bool fits = true;
    for (int i = 0; i < n; i++) {
        const size_t fixed = p->fixed_offset ? p->fixed_offset[i] : TG_CANONICAL_FREE;
        x->offset[i] = UNPLACED;
        if (fixed != TG_CANONICAL_FREE) x->floor[i] = fixed;
        if (p->size[i] == 0) x->offset[i] = fixed != TG_CANONICAL_FREE ? fixed : 0;
        else if (x->floor[i] > capacity || p->size[i] > capacity - x->floor[i]) fits = false;
        else x->pool[len++] = i;
    }
    x->pool_used = (size_t)len;
    if (!fits || !sections_fit(x, 0, x->m, 0)) {
        search->done = true;
        search->result = TG_CANONICAL_INFEASIBLE;
        return search;
    }
    rank_piece(x, 0, len);
    struct frame *root = push_frame(x, RANGE_ENTER, 0, len, 0, x->m, largest_section_total(x, 0, x->m), 0, -1);
    root->new_cuts_lo = 0;
    root->new_cuts_hi = x->m;
    return search;
}

struct tg_canonical_search *tg_canonical_new(const struct tg_canonical_problem *p, size_t capacity,
                                             enum tg_canonical_preorder preorder) {
    return search_new(p, capacity, preorder, NULL);
}

struct tg_canonical_search *tg_canonical_new_guided(const struct tg_canonical_problem *p, size_t capacity,
                                                    const size_t *guide) {
    return guide ? search_new(p, capacity, TG_PREORDER_TOTAL_WIDTH_AREA, guide) : NULL;
}

enum tg_canonical_result tg_canonical_run(struct tg_canonical_search *search, long long *effort, double deadline,
                                          size_t *offset) {
    const long long limit = effort ? *effort : 0;
    if (effort) *effort = 0;
    if (!search) return TG_CANONICAL_GAVE_UP;
    struct canon *x = &search->x;
    if (!search->done && !x->out_of_memory) {
        x->work_limit = limit > 0 ? search->reported + limit : 0;
        x->deadline = deadline;
        const enum outcome o = run_frames(x);
        if (o != OUT_GAVE_UP || x->out_of_memory) {
            search->done = true;
            search->result = o == OUT_FOUND ? TG_CANONICAL_FOUND : o == OUT_NOT_FOUND ? TG_CANONICAL_INFEASIBLE
                                                                                     : TG_CANONICAL_GAVE_UP;
        }
    }
    if (effort) *effort = x->work - search->reported;
    search->reported = x->work;
    if (search->result == TG_CANONICAL_FOUND && offset)
        memcpy(offset, x->offset, sizeof(size_t) * (size_t)x->p->n);
    return search->done ? search->result : TG_CANONICAL_GAVE_UP;
}

bool tg_canonical_out_of_memory(const struct tg_canonical_search *search) {
    return search && search->x.out_of_memory;
}

void tg_canonical_free(struct tg_canonical_search *search) {
    if (!search) return;
    canon_release(&search->x);
    free(search);
}

enum tg_canonical_result tg_canonical_search(const struct tg_canonical_problem *p, size_t capacity,
                                             enum tg_canonical_preorder preorder, long long *effort, double deadline,
                                             size_t *offset) {
    struct tg_canonical_search *search = offset ? tg_canonical_new(p, capacity, preorder) : NULL;
    const enum tg_canonical_result result = tg_canonical_run(search, effort, deadline, offset);
    tg_canonical_free(search);
    return result;
}

/* Overlapping block pairs by a sweep over steps (see tg-oracle-overlaps.h).
 *
 * Blocks are ranked by (space, begin).  Sweeping the blocks in order of their
 * first step, the blocks still live are marked in a max-tree over the ranks
 * that holds, per subtree, the largest end among the live blocks.  A block
 * that starts overlaps in bytes exactly the live blocks of its space whose
 * rank lies before the first block beginning at or after its end and whose
 * end lies after its begin: a range of ranks, searched by descending only
 * into subtrees whose largest end is past its begin. */
#include "tg-oracle-overlaps.h"

#include <stdlib.h>

struct sweep {
    const struct tg_oracle_block *blocks;
    int *by_addr;      /* block indices in (space, begin, index) order */
    int *rank;         /* block index -> position in by_addr */
    uintptr_t *tree;   /* max end of live blocks per subtree; leaves at [size, 2 size) */
    int size;
    bool (*pair)(void *user, int i, int j);
    void *user;
};

/* Sort records carry their keys, so the comparators need no shared state. */
struct addr_key {
    uintptr_t space, begin;
    int index;
};
struct step_key {
    int step, index;
};

static int cmp_addr(const void *pa, const void *pb) {
    const struct addr_key *a = pa, *b = pb;
    if (a->space != b->space) return a->space < b->space ? -1 : 1;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int cmp_step(const void *pa, const void *pb) {
    const struct step_key *a = pa, *b = pb;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static void set_leaf(struct sweep *s, int rank, uintptr_t end) {
    int k = rank + s->size;
    s->tree[k] = end;
    for (k /= 2; k >= 1; k /= 2) s->tree[k] = s->tree[2 * k] > s->tree[2 * k + 1] ? s->tree[2 * k] : s->tree[2 * k + 1];
}

/* First rank in [lo, hi) whose block begins at or after end (hi when none). */
static int first_at_or_after(const struct sweep *s, int lo, int hi, uintptr_t end) {
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->blocks[s->by_addr[mid]].begin < end) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Live blocks with rank in [lo, hi) under node k (covering [k_lo, k_hi)) ending after begin. */
static bool visit(struct sweep *s, int k, int k_lo, int k_hi, int lo, int hi, uintptr_t begin, int j) {
    if (k_hi <= lo || hi <= k_lo || s->tree[k] <= begin) return true;
    if (k >= s->size) {
        int i = s->by_addr[k - s->size];
        return s->rank[i] < s->rank[j] ? s->pair(s->user, i, j) : s->pair(s->user, j, i);
    }
    int mid = k_lo + (k_hi - k_lo) / 2;
    return visit(s, 2 * k, k_lo, mid, lo, hi, begin, j) && visit(s, 2 * k + 1, mid, k_hi, lo, hi, begin, j);
}

bool tg_oracle_for_each_overlap(const struct tg_oracle_block *blocks, int n,
                                bool (*pair)(void *user, int i, int j), void *user) {
    if (n <= 1) return true;
    struct sweep s = {.blocks = blocks, .pair = pair, .user = user, .size = 1};
    while (s.size < n) s.size *= 2;
    struct addr_key *addr = malloc((size_t)n * sizeof *addr);
    struct step_key *by_first = malloc((size_t)n * sizeof *by_first);
    struct step_key *by_last = malloc((size_t)n * sizeof *by_last);
    s.by_addr = malloc((size_t)n * sizeof *s.by_addr);
    s.rank = malloc((size_t)n * sizeof *s.rank);
    int *space_start = malloc((size_t)n * sizeof *space_start); /* rank -> first rank of its space */
    int *space_end = malloc((size_t)n * sizeof *space_end);     /* rank -> one past its space's last rank */
    s.tree = calloc(2 * (size_t)s.size, sizeof *s.tree);
    bool ok = addr && by_first && by_last && s.by_addr && s.rank && space_start && space_end && s.tree;
    if (ok) {
        for (int i = 0; i < n; i++) {
            addr[i] = (struct addr_key){(uintptr_t)blocks[i].space, blocks[i].begin, i};
            by_first[i] = (struct step_key){blocks[i].first, i};
            by_last[i] = (struct step_key){blocks[i].last, i};
        }
        qsort(addr, (size_t)n, sizeof *addr, cmp_addr);
        qsort(by_first, (size_t)n, sizeof *by_first, cmp_step);
        qsort(by_last, (size_t)n, sizeof *by_last, cmp_step);
        for (int r = 0; r < n; r++) {
            s.by_addr[r] = addr[r].index;
            s.rank[addr[r].index] = r;
            bool same = r > 0 && addr[r - 1].space == addr[r].space;
            space_start[r] = same ? space_start[r - 1] : r;
        }
        for (int r = n - 1; r >= 0; r--) {
            bool same = r + 1 < n && addr[r + 1].space == addr[r].space;
            space_end[r] = same ? space_end[r + 1] : r + 1;
        }
    }
    int expired = 0;
    bool go_on = true;
    for (int f = 0; ok && go_on && f < n; f++) {
        int j = by_first[f].index;
        const struct tg_oracle_block *b = &blocks[j];
        for (; expired < n && by_last[expired].step < b->first; expired++) set_leaf(&s, s.rank[by_last[expired].index], 0);
        /* ranks of this space beginning before b's end: [space start, hi) */
        int r = s.rank[j];
        int hi = first_at_or_after(&s, r, space_end[r], b->end);
        go_on = visit(&s, 1, 0, s.size, space_start[r], hi, b->begin, j);
        set_leaf(&s, s.rank[j], b->end);
    }
    free(addr);
    free(by_first);
    free(by_last);
    free(s.by_addr);
    free(s.rank);
    free(space_start);
    free(space_end);
    free(s.tree);
    return ok;
}

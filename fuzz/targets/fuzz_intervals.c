/* Fuzz target for the interval planner's API (tg-plan.h): the bytes decode
 * to buffers with lifetimes, sizes, alignments and pre-placed offsets, and a
 * capacity.  Properties, each against a reference written here:
 *  - fixed buffers live together that share bytes (found here pair by pair)
 *    are refused with TG_ERR_INVALID naming two of them, offsets untouched;
 *    otherwise the call succeeds;
 *  - the oracle's interval checker finds no violation (overlap, alignment,
 *    a fixed buffer moved, the peak, the capacity of a plan said to fit);
 *  - the peak is at least the most bytes live at one step and the end of
 *    every fixed buffer;
 *  - a capacity a plan is known to meet (the planner's own first peak) is
 *    never called infeasible;
 *  - with at most MAX_EXHAUSTIVE buffers, every verdict agrees with an
 *    exhaustive search: INFEASIBLE only when no order of the buffers, each
 *    pressed down onto those before it, fits the capacity, and PLANNED
 *    whenever one does;
 *  - the canonical search alone (impl/plan-canonical.h, each preorder, a
 *    bounded effort), which the planner runs only where its heuristics fall
 *    short: every plan it finds passes the oracle, and it proves no plan
 *    infeasible where one exists (the exhaustive search's, the planner's,
 *    or another preorder's).
 *
 * Layout: byte 0 the count (1 + b % MAX_BUFFERS); byte 1 the options (bits
 * 0-1 the capacity: none, the first plan's peak, the lower bound plus byte 2
 * less 8 (so it may lie below the bound), the lower bound; bit 2 alignments;
 * bit 3 pre-placed buffers); then 5 bytes per buffer: first step, steps
 * live, size, alignment and pre-placement, offset.  Missing bytes read 0. */
#include "plan-canonical.h"
#include "tg-oracle-intervals.h"
#include "tg-plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BUFFERS = 24, MAX_EXHAUSTIVE = 7, BYTES_PER_BUFFER = 5, CANONICAL_EFFORT = 20000 };

static void fail(const char *what, const struct tg_interval *in, int n, size_t capacity) {
    fprintf(stderr, "fuzz_intervals: %s (capacity %zu; last error: %s)\n", what, capacity, tg_last_error());
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  %d: steps [%d, %d) size %zu alignment %zu%s%zu\n", i, in[i].lower, in[i].upper, in[i].size,
                in[i].alignment, in[i].fixed ? " fixed at " : " offset ", in[i].offset);
    abort();
}

/* Field by field: a struct's padding is not part of it. */
static bool same_buffers(const struct tg_interval *a, const struct tg_interval *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].size != b[i].size || a[i].lower != b[i].lower || a[i].upper != b[i].upper ||
            a[i].alignment != b[i].alignment || a[i].fixed != b[i].fixed || a[i].offset != b[i].offset)
            return false;
    return true;
}

static uint8_t byte_at(const uint8_t *data, size_t size, size_t k) { return k < size ? data[k] : 0; }

static bool live_together(const struct tg_interval *x, const struct tg_interval *y) {
    return x->lower < y->upper && y->lower < x->upper;
}

static bool share_bytes(size_t x_offset, size_t x_size, size_t y_offset, size_t y_size) {
    return x_size > 0 && y_size > 0 && x_offset < y_offset + y_size && y_offset < x_offset + x_size;
}

static size_t round_up(size_t at, size_t alignment) {
    return alignment > 1 ? (at + alignment - 1) / alignment * alignment : at;
}

/* Exhaustive: every order of the buffers, each free one placed at the
 * lowest aligned offset above those before it in the order that it lives
 * with, each fixed one where it is (the order fails where that overlaps).
 * Every plan pressed down (free buffers moved down while they can) is made
 * by its buffers in offset order, so some order fits the capacity exactly
 * when a plan does. */
struct exhaustive {
    const struct tg_interval *in;
    int n;
    size_t capacity;
    int order[MAX_EXHAUSTIVE];
    size_t offset[MAX_EXHAUSTIVE];
    bool used[MAX_EXHAUSTIVE];
};

static bool fits_from(struct exhaustive *e, int depth) {
    if (depth == e->n) return true;
    for (int i = 0; i < e->n; i++) {
        if (e->used[i]) continue;
        const struct tg_interval *b = &e->in[i];
        size_t at = 0;
        for (int k = 0; k < depth; k++) {
            const int j = e->order[k];
            if (live_together(b, &e->in[j]) && e->in[j].size > 0 && e->offset[j] + e->in[j].size > at)
                at = e->offset[j] + e->in[j].size;
        }
        if (b->fixed) {
            if (b->size > 0 && b->offset < at) continue; /* it would overlap one below it */
            at = b->offset;
        } else {
            at = b->size > 0 ? round_up(at, b->alignment) : 0;
        }
        if (b->size > 0 && at + b->size > e->capacity) continue;
        e->used[i] = true;
        e->order[depth] = i;
        e->offset[i] = at;
        const bool fits = fits_from(e, depth + 1);
        e->used[i] = false;
        if (fits) return true;
    }
    return false;
}

static bool some_plan_fits(const struct tg_interval *in, int n, size_t capacity) {
    struct exhaustive e = {.in = in, .n = n, .capacity = capacity};
    return fits_from(&e, 0);
}

/* Each preorder of the canonical search at the capacity, and a search guided
 * by the input's offsets; a plan that exists (plan_exists: known by another
 * way) is never called infeasible. */
static void check_canonical_search(const struct tg_interval *in, int n, size_t capacity, bool plan_exists) {
    size_t sizes[MAX_BUFFERS], alignment[MAX_BUFFERS], fixed[MAX_BUFFERS], offset[MAX_BUFFERS];
    int start[MAX_BUFFERS], end[MAX_BUFFERS], adj_begin[MAX_BUFFERS + 1], adj[MAX_BUFFERS * MAX_BUFFERS];
    int n_adj = 0;
    for (int i = 0; i < n; i++) {
        sizes[i] = in[i].size;
        start[i] = in[i].lower;
        end[i] = in[i].upper - 1;
        alignment[i] = in[i].alignment > 1 ? in[i].alignment : 1;
        fixed[i] = in[i].fixed ? in[i].offset : TG_CANONICAL_FREE;
        adj_begin[i] = n_adj;
        for (int j = 0; j < n; j++)
            if (j != i && in[i].size > 0 && in[j].size > 0 && live_together(&in[i], &in[j])) adj[n_adj++] = j;
    }
    adj_begin[n] = n_adj;
    const struct tg_canonical_problem p = {n, sizes, start, end, adj_begin, adj, alignment, fixed};
    bool found = false, refuted = false;
    /* the preorders, then a search guided by the input's offsets (any
     * values: a guide orders the search, it must not change the verdict) */
    size_t guide[MAX_BUFFERS];
    for (int i = 0; i < n; i++) guide[i] = in[i].offset;
    for (int k = 0; k <= TG_N_PREORDERS; k++) {
        long long effort = CANONICAL_EFFORT;
        enum tg_canonical_result r = TG_CANONICAL_GAVE_UP;
        if (k < TG_N_PREORDERS) {
            r = tg_canonical_search(&p, capacity, (enum tg_canonical_preorder)k, &effort, 0, offset);
        } else {
            struct tg_canonical_search *guided = tg_canonical_new_guided(&p, capacity, guide);
            r = tg_canonical_run(guided, &effort, 0, offset);
            tg_canonical_free(guided);
        }
        refuted |= r == TG_CANONICAL_INFEASIBLE;
        if (r != TG_CANONICAL_FOUND) continue;
        found = true;
        struct tg_interval out[MAX_BUFFERS];
        size_t peak = 0;
        for (int i = 0; i < n; i++) {
            out[i] = in[i];
            out[i].offset = offset[i];
            if (in[i].size > 0 && offset[i] + in[i].size > peak) peak = offset[i] + in[i].size;
        }
        struct tg_oracle_interval_report rep;
        if (tg_oracle_check_intervals(in, out, n, peak, capacity, &rep) && rep.n > 0) {
            fprintf(stderr, "oracle: %s (preorder %d, %d: guided)\n", rep.first, k, TG_N_PREORDERS);
            fail("the canonical search's plan breaks a rule", in, n, capacity);
        }
    }
    if (refuted && (found || plan_exists)) fail("the canonical search refuted a capacity a plan meets", in, n, capacity);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t alignments[8] = {1, 1, 2, 3, 4, 8, 16, 6};
    struct tg_interval in[MAX_BUFFERS], out[MAX_BUFFERS];
    const int n = 1 + byte_at(data, size, 0) % MAX_BUFFERS;
    const uint8_t options = byte_at(data, size, 1);
    const int capacity_kind = options & 3;
    const bool aligned = options & 4, with_fixed = options & 8;
    for (int i = 0; i < n; i++) {
        const size_t at = 3 + (size_t)i * BYTES_PER_BUFFER;
        const uint8_t shape = byte_at(data, size, at + 3);
        const int lower = byte_at(data, size, at) % 24;
        in[i] = (struct tg_interval){
            .size = byte_at(data, size, at + 2) % 17,
            .lower = lower,
            .upper = lower + 1 + byte_at(data, size, at + 1) % 12,
            .alignment = aligned ? alignments[shape & 7] : 0,
            .fixed = with_fixed && (shape >> 3) % 4 == 0,
            .offset = byte_at(data, size, at + 4) % 64,
        };
    }

    /* the reference for fixed buffers that clash */
    bool clash = false;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            clash |= in[i].fixed && in[j].fixed && live_together(&in[i], &in[j]) &&
                     share_bytes(in[i].offset, in[i].size, in[j].offset, in[j].size);
    const size_t bound = tg_oracle_intervals_lower_bound(in, n);
    size_t capacity = 0;
    if (capacity_kind == 2) { /* from 8 below the bound to 15 above it */
        const size_t above = bound + byte_at(data, size, 2) % 24;
        capacity = above > 8 ? above - 8 : 1;
    }
    if (capacity_kind == 3) capacity = bound > 0 ? bound : 1;

    memcpy(out, in, sizeof(in[0]) * (size_t)n);
    if (capacity_kind == 1) { /* a capacity a plan is known to meet: the first plan's peak */
        size_t first_peak = 0;
        enum tg_interval_result first = TG_INTERVALS_NOT_FOUND;
        const enum tg_status st = tg_plan_intervals(out, n, NULL, &first, &first_peak);
        if (clash) {
            if (st != TG_ERR_INVALID) fail("fixed buffers that clash were not refused", in, n, 0);
            return 0;
        }
        if (st != TG_OK || first != TG_INTERVALS_PLANNED) fail("a plan without a capacity failed", in, n, 0);
        capacity = first_peak > 0 ? first_peak : 1;
        memcpy(out, in, sizeof(in[0]) * (size_t)n);
    }

    const struct tg_interval_options opts = {.capacity = capacity};
    enum tg_interval_result result = TG_INTERVALS_NOT_FOUND;
    size_t peak = 0;
    tg_clear_error();
    const enum tg_status st = tg_plan_intervals(out, n, &opts, &result, &peak);
    if (clash) {
        if (st != TG_ERR_INVALID) fail("fixed buffers that clash were not refused", in, n, capacity);
        if (strstr(tg_last_error(), "fixed buffers") == NULL) fail("the refusal does not name the buffers", in, n, capacity);
        if (result != TG_INTERVALS_INFEASIBLE || !same_buffers(out, in, n))
            fail("a refused call changed its outputs otherwise than documented", in, n, capacity);
        return 0;
    }
    if (st != TG_OK) fail("a valid input was refused", in, n, capacity);

    struct tg_oracle_interval_report rep;
    if (!tg_oracle_check_intervals(in, out, n, peak, result == TG_INTERVALS_PLANNED ? capacity : 0, &rep)) return 0;
    if (rep.n > 0) {
        fprintf(stderr, "oracle: %s\n", rep.first);
        fail("the oracle found a violation", in, n, capacity);
    }
    if (peak < bound) fail("the peak is below the lower bound", in, n, capacity);
    if (capacity == 0 && result != TG_INTERVALS_PLANNED) fail("no capacity, but not planned", in, n, capacity);
    if (capacity_kind == 1 && result == TG_INTERVALS_INFEASIBLE)
        fail("a capacity a plan meets was called infeasible", in, n, capacity);
    bool plan_exists = result == TG_INTERVALS_PLANNED || capacity_kind == 1;
    if (capacity > 0 && n <= MAX_EXHAUSTIVE) {
        const bool fits = some_plan_fits(in, n, capacity);
        if (result == TG_INTERVALS_INFEASIBLE && fits) fail("called infeasible, but a plan fits", in, n, capacity);
        if (result != TG_INTERVALS_PLANNED && fits) fail("a plan fits, but none was found", in, n, capacity);
        if (result == TG_INTERVALS_PLANNED && !fits) fail("planned, but no plan fits (the reference is wrong)", in, n, capacity);
        plan_exists |= fits;
    }
    if (capacity > 0) check_canonical_search(in, n, capacity, plan_exists);
    return 0;
}

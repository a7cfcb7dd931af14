/* tg_plan_intervals (tg-plan.h): the offline planner (plan-offline.h) for
 * callers with buffers of their own: checks the input, hands the planner
 * inclusive step ranges, the alignments and the fixed offsets, and returns
 * its verdict. */
#include "plan-offline.h"
#include "tg-plan.h"
#include "tg-sort.h"

#include <stdint.h>
#include <stdlib.h>

struct fixed_entry {
    int lower, index;
};
#define FIXED_BEFORE(x, y) ((x).lower != (y).lower ? (x).lower < (y).lower : (x).index < (y).index)
TG_DEFINE_SORT(sort_fixed_entries, struct fixed_entry, FIXED_BEFORE)

/* Without forming an end, which may pass SIZE_MAX. */
static bool share_bytes(const struct tg_interval *x, const struct tg_interval *y) {
    return x->offset <= y->offset ? y->offset - x->offset < x->size : x->offset - y->offset < y->size;
}

/* A sweep over the fixed buffers by first step, each compared with those
 * still live when it starts: the cost is the pairs live together, as the
 * planner's own conflict lists. */
enum tg_status tg_intervals_fixed_overlap(const struct tg_interval *buffers, int n, int *first, int *second) {
    if (first == NULL || second == NULL || n < 0 || (n > 0 && buffers == NULL))
        return tg_fail(TG_ERR_INVALID, "tg_intervals_fixed_overlap: %d buffers at %p", n, (const void *)buffers);
    *first = *second = -1;
    int n_fixed = 0;
    for (int i = 0; i < n; i++) n_fixed += buffers[i].fixed && buffers[i].size > 0;
    if (n_fixed < 2) return TG_OK;
    struct fixed_entry *by_lower = malloc(sizeof(*by_lower) * (size_t)n_fixed);
    int *live = malloc(sizeof(int) * (size_t)n_fixed);
    if (!by_lower || !live) {
        free(by_lower);
        free(live);
        return tg_fail(TG_ERR_ALLOC, "tg_intervals_fixed_overlap: no memory for %d fixed buffers", n_fixed);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (buffers[i].fixed && buffers[i].size > 0) by_lower[k++] = (struct fixed_entry){buffers[i].lower, i};
    sort_fixed_entries(by_lower, n_fixed);
    int n_live = 0;
    for (k = 0; k < n_fixed && *first < 0; k++) {
        const struct tg_interval *x = &buffers[by_lower[k].index];
        int kept = 0;
        for (int l = 0; l < n_live; l++) {
            const struct tg_interval *y = &buffers[live[l]];
            if (y->upper <= x->lower) continue; /* ended before x starts: ends before every later one too */
            live[kept++] = live[l];
            if (*first < 0 && share_bytes(x, y)) {
                *first = live[l] < by_lower[k].index ? live[l] : by_lower[k].index;
                *second = live[l] < by_lower[k].index ? by_lower[k].index : live[l];
            }
        }
        n_live = kept;
        live[n_live++] = by_lower[k].index;
    }
    free(by_lower);
    free(live);
    return TG_OK;
}

enum tg_status tg_plan_intervals(struct tg_interval *buffers, int n, const struct tg_interval_options *opts,
                                 enum tg_interval_result *result, size_t *peak) {
    enum tg_interval_result ignored_result;
    size_t ignored_peak;
    if (result == NULL) result = &ignored_result;
    if (peak == NULL) peak = &ignored_peak;
    *result = TG_INTERVALS_PLANNED;
    *peak = 0;
    if (n < 0 || (n > 0 && buffers == NULL))
        return tg_fail(TG_ERR_INVALID, "tg_plan_intervals: %d buffers at %p", n, (void *)buffers);
    for (int i = 0; i < n; i++) {
        const struct tg_interval *b = &buffers[i];
        if (b->upper <= b->lower)
            return tg_fail(TG_ERR_INVALID,
                           "tg_plan_intervals: buffer %d is live over [%d, %d): upper must be above lower", i,
                           b->lower, b->upper);
        if (b->fixed && b->offset > SIZE_MAX - b->size)
            return tg_fail(TG_ERR_INVALID, "tg_plan_intervals: fixed buffer %d at %zu with %zu bytes ends past SIZE_MAX",
                           i, b->offset, b->size);
    }
    /* Every plan the planner makes lies below the highest fixed end plus every
     * free buffer stacked, each aligned: where that passes SIZE_MAX, offsets
     * could wrap, so such a problem is refused whole.  An empty fixed buffer
     * takes no bytes and bounds nothing (the planner ignores it too), so its
     * offset, which may be anything up to SIZE_MAX, does not count. */
    size_t fixed_top = 0;
    for (int i = 0; i < n; i++)
        if (buffers[i].fixed && buffers[i].size > 0 && buffers[i].offset + buffers[i].size > fixed_top)
            fixed_top = buffers[i].offset + buffers[i].size;
    size_t stacked = fixed_top;
    for (int i = 0; i < n; i++) {
        const struct tg_interval *b = &buffers[i];
        if (b->fixed) continue;
        const size_t pad = b->alignment > 1 ? b->alignment - 1 : 0;
        if (b->size > SIZE_MAX - pad || b->size + pad > SIZE_MAX - stacked)
            return tg_fail(TG_ERR_INVALID, "tg_plan_intervals: with buffer %d (%zu bytes, alignment %zu) the buffers' "
                           "sizes and alignments add up past SIZE_MAX, so their offsets could not be addressed",
                           i, b->size, b->alignment);
        stacked += b->size + pad;
    }
    if (n == 0) return TG_OK;
    int a, b;
    enum tg_status st = tg_intervals_fixed_overlap(buffers, n, &a, &b);
    if (st != TG_OK) return st;
    if (a >= 0) {
        const struct tg_interval *x = &buffers[a], *y = &buffers[b];
        *result = TG_INTERVALS_INFEASIBLE;
        *peak = SIZE_MAX;
        return tg_fail(TG_ERR_INVALID,
                       "tg_plan_intervals: fixed buffers %d (bytes [%zu, %zu), steps [%d, %d)) and %d (bytes [%zu, "
                       "%zu), steps [%d, %d)) are live together and share bytes: give one of them another offset or "
                       "leave it free",
                       a, x->offset, x->offset + x->size, x->lower, x->upper, b, y->offset, y->offset + y->size,
                       y->lower, y->upper);
    }
    struct tg_live_block *blocks = malloc(sizeof(*blocks) * (size_t)n);
    size_t *alignment = malloc(sizeof(size_t) * (size_t)n);
    bool *fixed = malloc(sizeof(bool) * (size_t)n);
    if (!blocks || !alignment || !fixed) {
        free(blocks);
        free(alignment);
        free(fixed);
        return tg_fail(TG_ERR_ALLOC, "tg_plan_intervals: out of host memory for %d buffers", n);
    }
    for (int i = 0; i < n; i++) {
        blocks[i] = (struct tg_live_block){buffers[i].size, buffers[i].lower, buffers[i].upper - 1, buffers[i].offset};
        alignment[i] = buffers[i].alignment;
        fixed[i] = buffers[i].fixed;
    }
    const struct tg_offline_options options = {
        .alignment = 1,
        .block_alignment = alignment,
        .fixed = fixed,
        .capacity = opts ? opts->capacity : 0,
        .exact = opts && opts->seconds > 0,
        .exact_seconds = opts ? opts->seconds : 0,
        .threads = opts ? opts->threads : 1,
    };
    const enum tg_offline_fit fit = tg_plan_offline_fit(blocks, n, &options, peak);
    if (fit == TG_OFFLINE_NO_MEMORY) {
        /* Whatever plan the planner fell back to is not the deterministic
         * one, and says nothing about the capacity: not a result. */
        free(blocks);
        free(alignment);
        free(fixed);
        *peak = 0;
        return tg_fail(TG_ERR_ALLOC, "tg_plan_intervals: out of host memory planning %d buffers", n);
    }
    for (int i = 0; i < n; i++)
        if (!buffers[i].fixed) buffers[i].offset = blocks[i].offset;
    *result = fit == TG_OFFLINE_FITS ? TG_INTERVALS_PLANNED
              : fit == TG_OFFLINE_INFEASIBLE ? TG_INTERVALS_INFEASIBLE
                                             : TG_INTERVALS_NOT_FOUND;
    free(blocks);
    free(alignment);
    free(fixed);
    return TG_OK;
}

/* tg_plan_intervals (tg-plan.h): the offline planner (plan-offline.h) for
 * callers with buffers of their own: checks the input, hands the planner
 * inclusive step ranges, the alignments and the fixed offsets, and returns
 * its verdict. */
#include "plan-offline.h"
#include "tg-plan.h"

#include <stdint.h>
#include <stdlib.h>

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
    if (n == 0) return TG_OK;
    struct tg_live_block *blocks = malloc(sizeof(*blocks) * (size_t)n);
    size_t *alignment = malloc(sizeof(size_t) * (size_t)n);
    bool *fixed = malloc(sizeof(bool) * (size_t)n);
    if (!blocks || !alignment || !fixed) {
        free(blocks);
        free(alignment);
        free(fixed);
        return tg_fail(TG_ERR_ALLOC, "tg_plan_intervals: no memory for %d buffers", n);
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
    };
    const enum tg_offline_fit fit = tg_plan_offline_fit(blocks, n, &options, peak);
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

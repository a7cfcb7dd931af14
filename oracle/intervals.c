/* The interval plan checker (tg-oracle-intervals.h). */
#include "tg-oracle-intervals.h"
#include "tg-oracle-overlaps.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tg_oracle_interval_rule_name(enum tg_oracle_interval_rule r) {
    switch (r) {
    case TG_IRULE_OVERLAP: return "overlap";
    case TG_IRULE_MISALIGNED: return "misaligned";
    case TG_IRULE_FIXED_MOVED: return "fixed-moved";
    case TG_IRULE_INPUT_CHANGED: return "input-changed";
    case TG_IRULE_WRONG_PEAK: return "wrong-peak";
    case TG_IRULE_OVER_CAPACITY: return "over-capacity";
    case TG_IRULE_PAST_END: return "past-end";
    case TG_IRULE_COUNT: break;
    }
    return "unknown";
}

static size_t add_or_max(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* A sum of live sizes peaks at some buffer's first step. */
size_t tg_oracle_intervals_lower_bound(const struct tg_interval *buffers, int n) {
    size_t bound = 0;
    for (int i = 0; i < n; i++) {
        size_t live = 0;
        for (int j = 0; j < n; j++)
            if (buffers[j].lower <= buffers[i].lower && buffers[i].lower < buffers[j].upper)
                live = add_or_max(live, buffers[j].size);
        if (live > bound) bound = live;
        const size_t end = add_or_max(buffers[i].offset, buffers[i].size);
        if (buffers[i].fixed && buffers[i].size > 0 && end > bound) bound = end;
    }
    return bound;
}

/* a, b: the buffers the violation names, -1 for none */
static void report(struct tg_oracle_interval_report *rep, enum tg_oracle_interval_rule rule, int a, int b,
                   const char *fmt, ...) {
    if (rep->n == 0) {
        rep->first_buffers[0] = a;
        rep->first_buffers[1] = b;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rep->first, sizeof rep->first, fmt, ap);
        va_end(ap);
    }
    rep->n++;
    rep->count[rule]++;
}

struct overlap_walk {
    const int *index; /* oracle block -> buffer */
    const struct tg_interval *after;
    struct tg_oracle_interval_report *rep;
};

static bool on_overlap(void *user, int i, int j) {
    struct overlap_walk *w = user;
    const int a = w->index[i], b = w->index[j];
    report(w->rep, TG_IRULE_OVERLAP, a, b, "buffers %d [%zu, +%zu) and %d [%zu, +%zu) live together and share bytes", a,
           w->after[a].offset, w->after[a].size, b, w->after[b].offset, w->after[b].size);
    return true;
}

bool tg_oracle_check_intervals(const struct tg_interval *before, const struct tg_interval *after, int n,
                               size_t claimed_peak, size_t capacity, struct tg_oracle_interval_report *rep) {
    memset(rep, 0, sizeof *rep);
    rep->first_buffers[0] = rep->first_buffers[1] = -1;
    size_t peak = 0;
    int n_sized = 0;
    for (int i = 0; i < n; i++) {
        const struct tg_interval *in = &before[i], *out = &after[i];
        if (in->size != out->size || in->lower != out->lower || in->upper != out->upper ||
            in->alignment != out->alignment || in->fixed != out->fixed)
            report(rep, TG_IRULE_INPUT_CHANGED, i, -1, "buffer %d: its size, lifetime, alignment or fixed flag changed", i);
        if (in->fixed && out->offset != in->offset)
            report(rep, TG_IRULE_FIXED_MOVED, i, -1, "fixed buffer %d moved from %zu to %zu", i, in->offset, out->offset);
        if (!in->fixed && in->alignment > 1 && out->offset % in->alignment != 0)
            report(rep, TG_IRULE_MISALIGNED, i, -1, "buffer %d at %zu, not a multiple of its alignment %zu", i, out->offset,
                   in->alignment);
        if (out->size == 0) continue;
        n_sized++;
        /* an end past SIZE_MAX has no size_t to name it: a claimed peak of
         * SIZE_MAX would match the saturated end, and the wrapped bytes
         * would overlap nothing in the sweep, so it is a violation of its own */
        if (out->offset > SIZE_MAX - out->size)
            report(rep, TG_IRULE_PAST_END, i, -1, "buffer %d at %zu with %zu bytes ends past SIZE_MAX", i, out->offset,
                   out->size);
        const size_t end = out->offset > SIZE_MAX - out->size ? SIZE_MAX : out->offset + out->size;
        if (end > peak) peak = end;
    }
    if (peak != claimed_peak)
        report(rep, TG_IRULE_WRONG_PEAK, -1, -1, "the plan's highest end is %zu, the planner claimed %zu", peak, claimed_peak);
    if (capacity > 0 && peak > capacity)
        report(rep, TG_IRULE_OVER_CAPACITY, -1, -1, "the plan ends at %zu, above the capacity %zu", peak, capacity);
    /* pairs that share a step and a byte, by the oracle's own sweep */
    struct tg_oracle_block *blocks = malloc(sizeof *blocks * (size_t)(n_sized > 0 ? n_sized : 1));
    int *index = malloc(sizeof *index * (size_t)(n_sized > 0 ? n_sized : 1));
    bool ok = blocks && index;
    int k = 0;
    for (int i = 0; ok && i < n; i++) {
        if (after[i].size == 0 || after[i].upper <= after[i].lower) continue;
        const size_t end = after[i].offset > SIZE_MAX - after[i].size ? SIZE_MAX : after[i].offset + after[i].size;
        blocks[k] = (struct tg_oracle_block){NULL, (uintptr_t)after[i].offset, (uintptr_t)end, after[i].lower,
                                             after[i].upper - 1};
        index[k++] = i;
    }
    struct overlap_walk walk = {index, after, rep};
    if (ok) ok = tg_oracle_for_each_overlap(blocks, k, on_overlap, &walk);
    free(blocks);
    free(index);
    return ok;
}

bool tg_oracle_check_interval_plan(const struct tg_interval *plan, int n, size_t claimed_peak, size_t capacity,
                                   struct tg_oracle_interval_report *rep) {
    memset(rep, 0, sizeof *rep);
    struct tg_interval *planned = malloc(sizeof *planned * (size_t)(n > 0 ? n : 1));
    if (!planned) return false;
    for (int i = 0; i < n; i++) {
        planned[i] = plan[i];
        planned[i].fixed = false; /* placed by a planner, so held to its alignment */
    }
    const bool ok = tg_oracle_check_intervals(planned, planned, n, claimed_peak, capacity, rep);
    free(planned);
    return ok;
}

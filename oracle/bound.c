/* Lower bound on any legal plan's peak, and the naive total (no reuse at all).
 * Sizes are the buffer type's alloc sizes rounded up to its alignment, as any
 * planner that aligns offsets must reserve them. */
#include "tg-oracle.h"

#include <stdlib.h>

static size_t aligned_size(tg_buffer_type *buft, const struct tg_tensor *t) {
    size_t size = tg_buft_get_alloc_size(buft, t);
    size_t align = tg_buft_get_alignment(buft);
    if (align > 1) size = (size + align - 1) / align * align;
    return size;
}

/* Ids that share a buffer type share the address space of the first such id. */
static int owner_of(tg_buffer_type **bufts, int id) {
    for (int i = 0; i < id; i++) {
        if (bufts[i] == bufts[id]) return i;
    }
    return id;
}

/* A node that could legally sit in one of its sources' memory adds no bytes at its step. */
static bool has_legal_inplace_source(const struct tg_oracle_liveness *lv, const struct tg_oracle_tensor_info *ni,
                                     tg_buffer_type **bufts, int n_bufs) {
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *s = ni->tensor->src[k];
        if (s && tg_oracle_inplace_check(lv, ni->tensor, s, bufts, n_bufs) == TG_INPLACE_OK) return true;
    }
    return false;
}

enum tg_status tg_oracle_lower_bound(const struct tg_oracle_liveness *lv, tg_buffer_type **bufts, int n_bufs,
                                     size_t *lower_bounds, size_t *naive_totals) {
    int n_steps = lv->n_steps > 0 ? lv->n_steps : 1;
    /* delta[id][s]: bytes that become live at step s minus bytes released before it. */
    long long *delta = calloc((size_t)n_bufs * (size_t)(n_steps + 1), sizeof *delta);
    if (!delta) return tg_fail(TG_ERR_ALLOC, "oracle lower bound: out of host memory");
    for (int id = 0; id < n_bufs; id++) {
        lower_bounds[id] = 0;
        naive_totals[id] = 0;
    }
    for (int i = 0; i < lv->n; i++) {
        const struct tg_oracle_tensor_info *ti = &lv->infos[i];
        if (!ti->owned || ti->buffer_id < 0 || ti->buffer_id >= n_bufs) continue;
        int owner = owner_of(bufts, ti->buffer_id);
        size_t size = aligned_size(bufts[ti->buffer_id], ti->tensor);
        naive_totals[owner] += size;
        int first = ti->first;
        if (ti->node_index >= 0 && ti->first == ti->node_index && has_legal_inplace_source(lv, ti, bufts, n_bufs)) {
            first++; /* counted once with its source at its own step */
        }
        int last = ti->last >= n_steps ? n_steps - 1 : ti->last;
        if (first > last) continue;
        long long *row = delta + (size_t)owner * (size_t)(n_steps + 1);
        row[first] += (long long)size;
        row[last + 1] -= (long long)size;
    }
    for (int id = 0; id < n_bufs; id++) {
        long long *row = delta + (size_t)id * (size_t)(n_steps + 1);
        long long live = 0;
        for (int s = 0; s < n_steps; s++) {
            live += row[s];
            if (live > (long long)lower_bounds[id]) lower_bounds[id] = (size_t)live;
        }
    }
    free(delta);
    return TG_OK;
}

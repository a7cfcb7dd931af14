/* The naive allocator: every owned tensor gets its own aligned block, nothing is
 * ever reused.  Trivially legal, so it is the reference for differential runs. */
#include "tg-oracle.h"

#include <stdio.h>
#include <stdlib.h>

static size_t round_up(size_t x, size_t align) { return align > 1 ? (x + align - 1) / align * align : x; }

void tg_oracle_naive_free(struct tg_oracle_naive *naive) {
    if (!naive) return;
    for (int i = 0; i < naive->n_buffers; i++) tg_buffer_free(naive->buffers[i]); // NOLINT(clang-analyzer-core.NullDereference): n_buffers is 0 without buffers
    free(naive->buffers);
    *naive = (struct tg_oracle_naive){0};
}

static int owner_of(tg_buffer_type **bufts, int id) {
    for (int i = 0; i < id; i++) {
        if (bufts[i] == bufts[id]) return i;
    }
    return id;
}

enum tg_status tg_oracle_naive_alloc(struct tg_graph *graph, const struct tg_oracle_liveness *lv,
                                     tg_buffer_type **bufts, int n_bufs, struct tg_oracle_naive *naive) {
    *naive = (struct tg_oracle_naive){0};
    size_t *offsets = calloc((size_t)lv->n + 1, sizeof *offsets);
    size_t *sizes = calloc((size_t)n_bufs, sizeof *sizes);
    naive->buffers = calloc((size_t)n_bufs, sizeof *naive->buffers);
    enum tg_status st = TG_OK;
    if (!offsets || !sizes || !naive->buffers) {
        st = tg_fail(TG_ERR_ALLOC, "naive allocator: out of host memory");
        goto done;
    }
    naive->n_buffers = n_bufs;
    /* Offsets in registration order, then one buffer per address space. */
    for (int i = 0; i < lv->n; i++) {
        const struct tg_oracle_tensor_info *ti = &lv->infos[i];
        if (!ti->owned) continue;
        if (ti->buffer_id < 0 || ti->buffer_id >= n_bufs) {
            st = tg_fail(TG_ERR_INVALID, "naive allocator: tensor '%s' has no memory and is neither a node nor a "
                         "leaf of the graph (buffer id %d of %d)", ti->tensor->name, ti->buffer_id, n_bufs);
            goto done;
        }
        int owner = owner_of(bufts, ti->buffer_id);
        size_t align = tg_buft_get_alignment(bufts[owner]);
        offsets[i] = round_up(sizes[owner], align);
        sizes[owner] = offsets[i] + tg_buft_get_alloc_size(bufts[ti->buffer_id], ti->tensor);
    }
    for (int id = 0; id < n_bufs; id++) {
        if (owner_of(bufts, id) != id || sizes[id] == 0) continue;
        naive->buffers[id] = tg_buft_alloc_buffer(bufts[id], sizes[id]);
        if (!naive->buffers[id]) {
            /* the buffer type's reason (out of host memory, a max size) is
             * the one to read; copied, as tg_fail writes where it lies */
            char why[256];
            snprintf(why, sizeof why, "%s", tg_last_error());
            st = tg_fail(TG_ERR_ALLOC, "naive allocator: buffer type '%s' could not allocate %zu bytes: %s",
                         tg_buft_name(bufts[id]), sizes[id], why);
            goto done;
        }
        tg_buffer_set_usage(naive->buffers[id], TG_BUFFER_USAGE_COMPUTE);
        naive->total += sizes[id];
    }
    for (int i = 0; i < lv->n && st == TG_OK; i++) {
        const struct tg_oracle_tensor_info *ti = &lv->infos[i];
        if (!ti->owned) continue;
        tg_buffer *buf = naive->buffers[owner_of(bufts, ti->buffer_id)];
        st = tg_tensor_bind(ti->tensor, buf, (char *)tg_buffer_get_base(buf) + offsets[i]);
    }
    /* Views after all roots: a view's root is never an intermediate view. */
    for (int i = 0; i < lv->n && st == TG_OK; i++) {
        struct tg_tensor *t = lv->infos[i].tensor;
        if (t->view_src && t->view_src->data) st = tg_tensor_view_bind(t);
    }
    (void)graph;
done:
    free(offsets);
    free(sizes);
    if (st != TG_OK) tg_oracle_naive_free(naive);
    return st;
}

enum tg_status tg_oracle_naive_alloc_one_type(struct tg_graph *graph, tg_buffer_type *buft,
                                              struct tg_oracle_naive *naive) {
    struct tg_oracle_snapshot snap;
    enum tg_status st = tg_oracle_snapshot_take(graph, &snap);
    if (st != TG_OK) return st;
    struct tg_oracle_liveness lv;
    st = tg_oracle_liveness_build(graph, &snap, NULL, NULL, &lv);
    if (st == TG_OK) {
        st = tg_oracle_naive_alloc(graph, &lv, &buft, 1, naive);
        tg_oracle_liveness_free(&lv);
    }
    tg_oracle_snapshot_free(&snap);
    return st;
}

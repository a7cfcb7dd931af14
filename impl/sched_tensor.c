/* What the scheduler's passes ask of a tensor: the buffer its memory is
 * already in (memory an earlier plan gave counts as none: it is planned
 * again), the buffer type it lives in, and whether a backend can use that
 * buffer type or run its op. */
#include "sched-impl.h"

/* Ops that compute nothing are "supported" everywhere. */
bool sched_op_supported(const tg_sched *s, int b, const struct tg_tensor *t) {
    if (t->op == TG_OP_NONE || tg_op_is_view(t->op)) return true;
    return tg_backend_supports_op(s->backends[b], t);
}

/* memory an earlier plan gave is planned again, as the allocator does: any
 * node of this graph, and a leaf in this scheduler's own compute buffers
 * (the same graph allocated again after a reset) */
tg_buffer *sched_existing_buffer(const tg_sched *s, const struct tg_tensor *t) {
    return sched_existing_buffer_known(s, t, false);
}

bool sched_graph_lists_as_leaf(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_leafs; i++)
        if (g->leafs[i] == t) return true;
    return false;
}

/* Buffer type t lives in: its real buffer's, else its (root's) backend's. */
static tg_buffer_type *tensor_buft(const tg_sched *s, const struct tg_tensor *t) {
    tg_buffer *buf = sched_existing_buffer(s, t);
    if (buf) return buf->buft;
    int id = sched_rec_backend(s, t);
    if (id < 0 && t->view_src) id = sched_rec_backend(s, t->view_src);
    return id >= 0 ? s->bufts[id] : NULL;
}

bool sched_buffer_supported(const tg_sched *s, const struct tg_tensor *t, int b) {
    tg_buffer_type *buft = tensor_buft(s, t);
    return buft && tg_backend_supports_buft(s->backends[b], buft);
}

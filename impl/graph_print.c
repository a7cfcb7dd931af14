/* A graph as allocated: what compute relies on, taken by an allocation
 * (tg_sched_alloc_graph, tg_gallocr_alloc_graph) and checked by every
 * compute of that graph, in every build.
 *
 * The schedule and the plan are functions of each tensor's header, sources,
 * view and memory (docs/scheduler.md, "Schedule replay"), so compute is
 * right only while these are as they were at alloc.  An edit that leaves the
 * lists alone (a source replaced, op params or a shape changed, a view moved,
 * data repointed) would otherwise be computed with the old splits and plan:
 * a write past the tensor's planned bytes, a read of memory the plan gave to
 * another tensor, of another backend's memory, or of a stale view.  Per
 * position of the graph (nodes, then leafs) the print holds the tensor, its
 * memory, and a hash each of its header, its sources (with their memory) and
 * its view (with its root's memory): O(nodes + sources) per compute. */
#include "tg-impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct tg_print_entry {
    const struct tg_tensor *t;
    const void *data;
    const struct tg_buffer *buffer;
    uint64_t header;  /* type, op, flags, shape, strides, op params */
    uint64_t sources; /* each source slot, each source's memory and the view root's */
    uint64_t view;    /* view root and offset */
};

static inline uint64_t mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static inline uint64_t word_of(const void *p) { return (uint64_t)(uintptr_t)p; }

static uint64_t header_of(const struct tg_tensor *t) {
    uint64_t h = mix(mix(mix(0, (uint64_t)t->type), (uint64_t)t->op), (uint64_t)(uint32_t)t->flags);
    for (int d = 0; d < TG_MAX_DIMS; d++) h = mix(mix(h, (uint64_t)t->ne[d]), (uint64_t)t->nb[d]);
    for (int k = 0; k < TG_MAX_OP_PARAMS; k++) h = mix(h, (uint64_t)(uint32_t)t->op_params[k]);
    return h;
}

static uint64_t sources_of(const struct tg_tensor *t) {
    uint64_t h = 0;
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *src = t->src[k];
        h = mix(h, word_of(src));
        if (src) h = mix(mix(h, word_of(src->data)), word_of(src->buffer));
    }
    const struct tg_tensor *root = t->view_src;
    return root ? mix(mix(h, word_of(root->data)), word_of(root->buffer)) : h;
}

static uint64_t view_of(const struct tg_tensor *t) {
    return mix(mix(0, word_of(t->view_src)), (uint64_t)t->view_offs);
}

static struct tg_print_entry print_of(const struct tg_tensor *t) {
    if (!t) return (struct tg_print_entry){0};
    return (struct tg_print_entry){t, t->data, t->buffer, header_of(t), sources_of(t), view_of(t)};
}

static const struct tg_tensor *tensor_at(const struct tg_graph *g, int u) {
    return u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
}

enum tg_status tg_graph_print_take(struct tg_graph_print *p, const struct tg_graph *g) {
    const int n = g->n_nodes + g->n_leafs;
    if (!tg_grow_array((void **)&p->at, &p->cap, n + 1, sizeof *p->at)) {
        p->taken = false;
        return tg_fail(TG_ERR_ALLOC, "out of host memory recording the allocated graph (%d tensors)", n);
    }
    for (int u = 0; u < n; u++) p->at[u] = print_of(tensor_at(g, u));
    p->n_nodes = g->n_nodes;
    p->n_leafs = g->n_leafs;
    p->edits = tg_graph_edits(g);
    p->taken = true;
    return TG_OK;
}

void tg_graph_print_free(struct tg_graph_print *p) {
    free(p->at);
    *p = (struct tg_graph_print){0};
}

/* What differs between the print p and t itself (not its sources), in words
 * for the message; NULL when nothing. */
static const char *own_change(const struct tg_print_entry *p, const struct tg_print_entry *now) {
    if (now->t != p->t) return "another tensor is at its place in the lists";
    if (now->header != p->header) return "its op, type, shape, strides, flags or op params";
    if (now->view != p->view) return "its view root or offset";
    if (now->data != p->data || now->buffer != p->buffer) return "its memory (data or buffer)";
    return NULL;
}

static enum tg_status changed(const struct tg_graph *g, int u, const char *what, const struct tg_print_words *w) {
    const bool is_node = u < g->n_nodes;
    const struct tg_tensor *t = tensor_at(g, u);
    /* the old tensor may be freed by now: only the current one is named */
    return tg_fail(TG_ERR_INVALID, "%s: %s %d '%s' changed since %s: %s; %s", w->caller, is_node ? "node" : "leaf",
                   is_node ? u : u - g->n_nodes, t ? t->name : "(NULL)", w->alloc_call, what, w->again);
}

enum tg_status tg_graph_print_check(const struct tg_graph_print *p, const struct tg_graph *g,
                                    const struct tg_print_words *w) {
    if (!p->taken) return TG_OK;
    if (g->n_nodes != p->n_nodes || g->n_leafs != p->n_leafs || tg_graph_edits(g) != p->edits) {
        /* the plan covers the graph as it was: the rest would be left
         * uncomputed (and unallocated) while the call says success; so would
         * a graph reset and built again to the same size (the next token's) */
        return tg_fail(TG_ERR_INVALID, "%s: the graph changed since %s (%d nodes and %d leafs then, %d and %d now): %s",
                       w->caller, w->alloc_call, p->n_nodes, p->n_leafs, g->n_nodes, g->n_leafs, w->again);
    }
    /* a tensor changed itself is named before a reader whose sources changed
     * (its source's or its view root's memory moved): that is where the edit
     * was */
    int sources_changed = -1;
    const int n = p->n_nodes + p->n_leafs;
    for (int u = 0; u < n; u++) {
        const struct tg_print_entry now = print_of(tensor_at(g, u));
        const char *what = own_change(&p->at[u], &now);
        if (what) return changed(g, u, what, w);
        if (sources_changed < 0 && now.sources != p->at[u].sources) sources_changed = u;
    }
    if (sources_changed >= 0) {
        return changed(g, sources_changed, "its sources (one replaced, or the memory of one or of its view root moved)", w);
    }
    return TG_OK;
}

/* A tensor whose memory was handed to other tensors since it was bound (a
 * later plan in its buffer, which may also have given the memory back when it
 * grew) has the same pointers: the print cannot see it. */
enum tg_status tg_graph_check_fresh(const struct tg_graph *g, const struct tg_print_words *w) {
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        const struct tg_tensor *t = tensor_at(g, u);
        if (!t || !t->buffer || t->bind_generation == t->buffer->generation) continue;
        const bool is_node = u < g->n_nodes;
        return tg_fail(TG_ERR_STALE, "%s: %s %d '%s' is stale: its memory in a buffer of type '%s' was handed to "
                       "other tensors since %s (a later graph planned in that buffer, or tg_buffer_begin_plan); %s",
                       w->caller, is_node ? "node" : "leaf", is_node ? u : u - g->n_nodes, t->name,
                       tg_buft_name(t->buffer->buft), w->alloc_call, w->again);
    }
    return TG_OK;
}

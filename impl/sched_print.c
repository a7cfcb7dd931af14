/* The graph as allocated: what compute relies on, taken by alloc_graph and
 * checked by every compute of that graph, in every build.
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
#include "sched-impl.h"
#include "tg-checks.h"
#include "tg-impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct sched_print {
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

static struct sched_print print_of(const struct tg_tensor *t) {
    if (!t) return (struct sched_print){0};
    return (struct sched_print){t, t->data, t->buffer, header_of(t), sources_of(t), view_of(t)};
}

static const struct tg_tensor *tensor_at(const struct tg_graph *g, int u) {
    return u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
}

enum tg_status sched_print_take(tg_sched *s, const struct tg_graph *g) {
    const int n = g->n_nodes + g->n_leafs;
    if (!tg_grow_array((void **)&s->prints, &s->cap_prints, n + 1, sizeof *s->prints)) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory recording the allocated graph (%d tensors)", n);
    }
    for (int u = 0; u < n; u++) s->prints[u] = print_of(tensor_at(g, u));
    s->n_prints = n;
    return TG_OK;
}

/* What differs between the print p and t itself (not its sources), in words
 * for the message; NULL when nothing. */
static const char *own_change(const struct sched_print *p, const struct sched_print *now) {
    if (now->t != p->t) return "another tensor is at its place in the lists";
    if (now->header != p->header) return "its op, type, shape, strides, flags or op params";
    if (now->view != p->view) return "its view root or offset";
    if (now->data != p->data || now->buffer != p->buffer) return "its memory (data or buffer)";
    return NULL;
}

static enum tg_status changed(const struct tg_graph *g, int u, const char *what) {
    const bool is_node = u < g->n_nodes;
    const struct tg_tensor *t = tensor_at(g, u);
    /* the old tensor may be freed by now: only the current one is named */
    return tg_fail(TG_ERR_INVALID, "graph_compute: %s %d '%s' changed since tg_sched_alloc_graph: %s; the schedule "
                   "and the plan are of the graph as it was: call tg_sched_reset and allocate it again",
                   is_node ? "node" : "leaf", is_node ? u : u - g->n_nodes, t ? t->name : "(NULL)", what);
}

enum tg_status sched_print_check(const tg_sched *s, const struct tg_graph *g) {
    if (g->n_nodes != s->user_n_nodes || g->n_leafs != s->user_n_leafs || tg_graph_edits(g) != s->user_edits) {
        /* the splits cover the graph as it was: the rest would be left
         * uncomputed (and unallocated) while the call says success; so would
         * a graph reset and built again to the same size (the next token's) */
        return tg_fail(TG_ERR_INVALID, "graph_compute: the graph changed since tg_sched_alloc_graph (%d nodes and %d "
                       "leafs then, %d and %d now): call tg_sched_reset and allocate it again", s->user_n_nodes,
                       s->user_n_leafs, g->n_nodes, g->n_leafs);
    }
    TG_ASSERT(s->n_prints == g->n_nodes + g->n_leafs, "a print per tensor of the allocated graph (%d for %d)",
              s->n_prints, g->n_nodes + g->n_leafs);
    /* a tensor changed itself is named before a reader whose sources changed
     * (its source's or its view root's memory moved): that is where the edit
     * was */
    int sources_changed = -1;
    for (int u = 0; u < s->n_prints; u++) {
        const struct sched_print now = print_of(tensor_at(g, u));
        const char *what = own_change(&s->prints[u], &now);
        if (what) return changed(g, u, what);
        if (sources_changed < 0 && now.sources != s->prints[u].sources) sources_changed = u;
    }
    if (sources_changed >= 0) return changed(g, sources_changed, "its sources (one replaced, or the memory of one or of its view root moved)");
    return TG_OK;
}

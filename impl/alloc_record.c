/* The graph allocator's recorded plan and its binding (docs/allocator.md, "Plan records and replay"):
 * per graph position, a signature of the structure the plan depends on (op,
 * type, flags, sources and view root by position, view offset, same-layout
 * sources, memory of its own) and where its memory is; the general replay
 * check compares a classified graph with it, slot by slot; binding writes
 * the recorded places into the graph's tensors, and keeps the list of the
 * nodes bound, which tells a result of the last graph from an input. */
#include "alloc-impl.h"
#include "tg-checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- records ------------------------------------------------------------------------------- */

static int ref_of_info(const struct tensor_info *info) { return info ? ref_of_pos(info->pos) : REF_OUTSIDE; }

/* Position pos's signature, after alloc_classify(graph): a node's sources
 * come from the pass's tables, a leaf's (not walked: any tensor) by lookup. */
static void make_signature(tg_gallocr *g, const struct tg_graph *graph, int pos, struct signature *sig) {
    const struct tg_tensor *t = tensor_at(graph, pos);
    const struct tensor_info *info = alloc_info_at(g, graph, pos);
    memset(sig, 0, sizeof *sig);
    _Static_assert(REF_NONE == -1, "a source of all one bits reads as empty");
    memset(sig->src, 0xff, sizeof sig->src);
    sig->op = t->op;
    sig->type = t->type;
    sig->flags = t->flags;
    const int node_index = pos - graph->n_leafs;
    /* a node's sources past n_src are empty (the pass's tables say so) */
    const int n_src = node_index >= 0 ? g->n_src[node_index] : TG_MAX_SRC;
    for (int k = 0; k < n_src; k++) {
        const struct tg_tensor *src = t->src[k];
        if (!src) continue;
        sig->src[k] = ref_of_info(node_index >= 0 ? &g->infos[alloc_sources_of(g, node_index)[k]]
                                                  : alloc_info_of(g, src));
        if (same_layout(t, src)) sig->same_layout_srcs |= (uint16_t)(1u << k);
        sig->n_src = (unsigned char)(k + 1);
    }
    sig->view_src = t->view_src ? ref_of_info(&g->infos[info->root]) : REF_NONE;
    sig->window = t->view_src && g->infos[info->root].external;
    sig->view_offs = sig->window ? 0 : t->view_offs;
    sig->external = info->external;
}

static void record_position(tg_gallocr *g, const struct tg_graph *graph, int pos, struct record *rec) {
    make_signature(g, graph, pos, &rec->sig);
    const struct tg_tensor *t = tensor_at(graph, pos);
    const struct tensor_info *info = alloc_info_at(g, graph, pos);
    rec->buffer_id = -1;
    rec->addr = (struct tg_plan_addr){-1, 0};
    rec->size = 0;
    _Static_assert(sizeof rec->shape == sizeof t->ne + sizeof t->nb, "ne and nb are recorded as one block");
    memcpy(rec->shape, t->ne, sizeof t->ne);
    memcpy(rec->shape + TG_MAX_DIMS, t->nb, sizeof t->nb);
    rec->was_result = -1;
    rec->shape_unchanged = false;
    if (info->placed && !t->view_src && !info->external) {
        rec->buffer_id = info->buffer_id;
        rec->addr = info->addr;
        rec->size = info->size;
    }
}

enum tg_status alloc_record_plan(tg_gallocr *g, const struct tg_graph *graph) {
    const int n_graph = graph->n_nodes + graph->n_leafs;
    /* one entry to spare in each table: they exist even for an empty graph (no offsets from NULL) */
    if (!tg_grow_array((void **)&g->records, &g->cap_records, n_graph + 1, sizeof *g->records) ||
        !tg_grow_array((void **)&g->views, &g->cap_views, n_graph + 1, sizeof *g->views) ||
        !tg_grow_array((void **)&g->external_nodes, &g->cap_external_nodes, graph->n_nodes + 1,
                       sizeof *g->external_nodes)) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory recording a plan of %d nodes", graph->n_nodes);
    }
    for (int pos = 0; pos < n_graph; pos++) record_position(g, graph, pos, &g->records[pos]);
    g->n_nodes = graph->n_nodes;
    g->n_leafs = graph->n_leafs;
    g->n_views = 0;
    g->plan_refers_outside = false;
    for (int pos = 0; pos < n_graph; pos++) {
        const struct signature *sig = &g->records[pos].sig;
        for (int k = 0; k < sig->n_src; k++) g->plan_refers_outside |= sig->src[k] == REF_OUTSIDE;
        if (sig->view_src == REF_NONE) continue;
        g->plan_refers_outside |= sig->view_src == REF_OUTSIDE;
        bool root_ours = sig->view_src != REF_OUTSIDE && !g->records[pos_of_ref(sig->view_src)].sig.external;
        g->views[g->n_views++] = (struct view_record){pos, sig->view_src, sig->view_offs, root_ours};
    }
    g->n_external_nodes = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        if (g->records[graph->n_leafs + i].sig.external) g->external_nodes[g->n_external_nodes++] = i;
    }
    g->binds_stale = true;
    return TG_OK;
}

/* ---- the general replay check ------------------------------------------------------------------ */

/* Whether position pos of graph (classified) matches its record; why names
 * the difference. */
static bool position_matches(tg_gallocr *g, const struct tg_graph *graph, int pos, char *why, size_t why_size) {
    const struct record *rec = &g->records[pos];
    const struct tg_tensor *t = tensor_at(graph, pos);
    const bool is_leaf = pos < graph->n_leafs;
    const char *kind = is_leaf ? "leaf" : "node";
    const int index = is_leaf ? pos : pos - graph->n_leafs;
    struct signature sig;
    make_signature(g, graph, pos, &sig);
    /* The injected fault is ggml's check: counts and sizes only. */
    /* both signatures are memset to 0 before they are filled: padding compares equal */
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    if (g->fault != TG_FAULT_STALE_REPLAY && memcmp(&sig, &rec->sig, sizeof sig) != 0) {
        snprintf(why, why_size, "%s %d ('%s') differs in op, type, flags, sources, view or external memory", kind,
                 index, t->name);
        return false;
    }
    bool needs_memory = !t->view_src && !alloc_info_at(g, graph, pos)->external;
    if (needs_memory && rec->buffer_id < 0) {
        snprintf(why, why_size, "%s %d ('%s') has no memory in the plan", kind, index, t->name);
        return false;
    }
    if (needs_memory && alloc_size(g, rec->buffer_id, t) > rec->size) {
        snprintf(why, why_size, "%s %d ('%s') needs %zu bytes, the plan has %zu", kind, index, t->name,
                 alloc_size(g, rec->buffer_id, t), rec->size);
        return false;
    }
    return true;
}

/* Nodes first, then leafs: the first difference named is the earliest node. */
bool alloc_plan_matches(tg_gallocr *g, const struct tg_graph *graph, char *why, size_t why_size) {
    if (graph->n_nodes != g->n_nodes || graph->n_leafs != g->n_leafs) {
        snprintf(why, why_size, "the graph has %d nodes and %d leafs, the plan %d and %d", graph->n_nodes,
                 graph->n_leafs, g->n_nodes, g->n_leafs);
        return false;
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!position_matches(g, graph, graph->n_leafs + i, why, why_size)) return false;
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        if (!position_matches(g, graph, j, why, why_size)) return false;
    }
    return true;
}

/* ---- the nodes of the last bind ---------------------------------------------------------------- */

bool alloc_was_last_result(tg_gallocr *g, const struct tg_tensor *t) {
    if (g->n_last_bound == 0) return false;
    if (!g->last_bound_hashed) {
        size_t want = (size_t)g->n_last_bound * 2 + 16;
        if (g->last_bound_set.size < want) {
            tg_hash_free(&g->last_bound_set);
            if (!tg_hash_init(&g->last_bound_set, want)) {
                /* no memory for the table: a linear scan gives the same answer */
                for (int i = 0; i < g->n_last_bound; i++) {
                    if (g->last_bound[i] == t) return true;
                }
                return false;
            }
        } else {
            tg_hash_clear(&g->last_bound_set);
        }
        for (int i = 0; i < g->n_last_bound; i++) tg_hash_insert(&g->last_bound_set, g->last_bound[i]);
        g->last_bound_hashed = true;
    }
    return tg_hash_contains(&g->last_bound_set, t);
}

/* After a bind succeeded: the nodes it bound are the last bound. */
static void swap_in_bound_nodes(tg_gallocr *g) {
    const struct tg_tensor **list = g->last_bound;
    g->last_bound = g->next_bound;
    g->next_bound = list;
    int cap = g->cap_next_bound;
    g->cap_next_bound = g->cap_last_bound;
    g->cap_last_bound = cap;
    g->n_last_bound = g->n_next_bound;
    g->last_bound_hashed = false;
}

/* ---- binding --------------------------------------------------------------------------------- */

static enum tg_status resolve_binds(tg_gallocr *g) {
    const int n_graph = g->n_leafs + g->n_nodes;
    if (!tg_grow_array((void **)&g->binds, &g->cap_binds, n_graph + 1, sizeof *g->binds) ||
        !tg_grow_array((void **)&g->bind_fits, &g->cap_bind_fits, n_graph + 1, sizeof *g->bind_fits)) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
    }
    g->n_binds = 0;
    for (int pos = 0; pos < n_graph; pos++) {
        const struct record *rec = &g->records[pos];
        if (rec->buffer_id < 0) continue;
        const struct chunk_buffers *cb = &g->buffers[g->owner_of[rec->buffer_id]];
        TG_ASSERT(rec->addr.chunk < cb->n_chunks &&
                      rec->addr.offset + rec->size <= tg_buffer_get_size(cb->chunks[rec->addr.chunk]),
                  "position %d: chunk %d at %zu (+%zu) of %d chunks", pos, rec->addr.chunk, rec->addr.offset,
                  rec->size, cb->n_chunks);
        struct bind_fit *fit = &g->bind_fits[g->n_binds];
        g->binds[g->n_binds++] =
            (struct bind_entry){pos, cb->chunks[rec->addr.chunk], cb->bases[rec->addr.chunk] + rec->addr.offset, rec->size};
        *fit = (struct bind_fit){g->bufts[rec->buffer_id]->iface.get_alloc_size != NULL, rec->sig.type, {0}};
        memcpy(fit->shape, rec->shape, sizeof fit->shape);
    }
    g->binds_stale = false;
    return TG_OK;
}

/* Whether a view of a tensor the plan does not own already sits at its
 * offset (it stays; a view moved to another window since, a KV cache's, is
 * bound again), or its root has no memory to bind it to. */
static bool external_view_in_place(const struct tg_tensor *t) {
    const struct tg_tensor *root = t->view_src;
    return !root->data || (t->buffer == root->buffer && t->data == (uint8_t *)root->data + t->view_offs);
}

static enum tg_status bind_view(struct tg_tensor *t, bool root_is_ours) {
    if (!t->view_src) return TG_OK;
    if (!root_is_ours && external_view_in_place(t)) return TG_OK;
    return tg_tensor_view_bind(t);
}

/* bind_view for a graph a replay check matched (its views' roots and
 * offsets are the plan's).  The view's own shape is not in the records, so
 * its range in the root is checked again, as the general path does. */
static enum tg_status bind_matched_view(struct tg_tensor *t, bool root_is_ours) {
    if (!root_is_ours && external_view_in_place(t)) return TG_OK;
    return tg_tensor_view_bind(t);
}

static bool view_root_is_ours(tg_gallocr *g, const struct tg_tensor *t) {
    struct tensor_info *root = alloc_info_of(g, t->view_src);
    return root && !root->external;
}

static void begin_binding(tg_gallocr *g) {
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        for (int c = 0; c < g->buffers[i].n_chunks; c++) {
            tg_buffer_reset(g->buffers[i].chunks[c]);
            tg_buffer_begin_plan(g->buffers[i].chunks[c]);
            alloc_unpoison_chunk(g->buffers[i].chunks[c]);
            alloc_poison_chunk(g->buffers[i].chunks[c]);
        }
    }
}

/* The whole rule of vouched_entry_fits, below. */
static __attribute__((noinline)) bool vouched_entry_fits_slow(tg_gallocr *g, const struct bind_entry *b,
                                                              const struct bind_fit *fit, const struct tg_tensor *t) {
    if ((t->data || t->buffer) && !alloc_owns_buffer_cached(g, t->buffer) &&
        !(t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE)) {
        return false;
    }
    if (!fit->own_size_rule && t->type == fit->type &&
        tg_lanes_zero(tg_lanes_diff(t->ne, fit->shape, sizeof fit->shape))) {
        return true;
    }
    if (!fit->own_size_rule) return tg_nbytes_inline(t) <= b->size;
    return tg_buft_get_alloc_size(b->buf->buft, t) <= b->size;
}

/* For a vouched graph: whether t is planned here as b says (no memory yet,
 * or ours from an earlier bind, or a compute buffer's of another plan) and
 * fits the bytes b gives it (fit: the recorded type and shape, else its
 * alloc size).  Binding t where it does not fit would hand out bytes the
 * plan gave another tensor.  The common case is one test (no memory yet,
 * the recorded type and shape, the default size rule); anything else takes
 * the whole rule. */
static inline __attribute__((always_inline)) bool vouched_entry_fits(tg_gallocr *g, const struct bind_entry *b,
                                                                     const struct bind_fit *fit,
                                                                     const struct tg_tensor *t) {
    tg_lanes d = tg_lanes_diff(t->ne, fit->shape, sizeof fit->shape);
    const uint64_t other = (uint64_t)(uintptr_t)t->data | (uint64_t)(uintptr_t)t->buffer |
                           (uint64_t)((unsigned)t->type ^ (unsigned)fit->type) | (uint64_t)fit->own_size_rule;
    if ((d[0] | d[1] | other) == 0) return true;
    return vouched_entry_fits_slow(g, b, fit, t);
}

/* Binds every position with memory at the place the planner chose inside
 * its chunk (tg_tensor_bind's checks would only repeat that), and lists the
 * nodes bound.  check_fit: a tensor that is not planned here or does not
 * fit its bytes stops the binding with TG_ERR_NEEDS_RESERVE. */
static enum tg_status bind_positions(tg_gallocr *g, struct tg_graph *graph, bool check_fit) {
    enum tg_status st = g->binds_stale ? resolve_binds(g) : TG_OK;
    if (st == TG_OK &&
        (!tg_grow_array((void **)&g->last_bound, &g->cap_last_bound, graph->n_nodes, sizeof *g->last_bound) ||
         !tg_grow_array((void **)&g->next_bound, &g->cap_next_bound, graph->n_nodes, sizeof *g->next_bound))) {
        st = tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
    }
    const struct tg_tensor **bound_nodes = g->next_bound;
    int n_bound_nodes = 0;
    const int n_leafs = graph->n_leafs;
    for (int e = 0; e < g->n_binds && st == TG_OK; e++) {
        const struct bind_entry *b = &g->binds[e];
        struct tg_tensor *t = tensor_at(graph, b->pos);
        if (check_fit && !vouched_entry_fits(g, b, &g->bind_fits[e], t)) return TG_ERR_NEEDS_RESERVE;
        st = tg_tensor_bind_placed(t, b->buf, b->addr);
        if (st == TG_OK) alloc_unpoison_tensor(t, b->size);
        if (b->pos >= n_leafs) bound_nodes[n_bound_nodes++] = t;
    }
    g->n_next_bound = n_bound_nodes;
    return st;
}

static uint64_t bind_token_counter; /* shared by all allocators: tokens never repeat */

enum tg_status alloc_bind(tg_gallocr *g, struct tg_graph *graph, enum bind_mode mode, uint64_t pass) {
    TG_ASSERT(g->have_plan && g->plan_bindable, "binding needs a plan with buffers");
    TG_ASSERT(mode == BIND_CLASSIFIED || (graph->n_nodes == g->n_nodes && graph->n_leafs == g->n_leafs),
              "a matched graph has the plan's %d nodes and %d leafs, not %d and %d", g->n_nodes, g->n_leafs,
              graph->n_nodes, graph->n_leafs);
    begin_binding(g);
    enum tg_status st = bind_positions(g, graph, mode == BIND_VOUCHED);
    /* after the positions with memory: a node may view a leaf.  The general
     * path looks at every position (under the stale-replay fault the graph
     * may differ from the plan). */
    if (mode != BIND_CLASSIFIED) {
        for (int v = 0; v < g->n_views && st == TG_OK; v++) {
            const struct view_record *vr = &g->views[v];
            struct tg_tensor *t = tensor_at(graph, vr->pos);
            if (mode == BIND_VOUCHED &&
                (!t->view_src || (vr->root_ours && t->view_offs != vr->offset) || vr->root_ref == REF_OUTSIDE ||
                 t->view_src != tensor_at(graph, pos_of_ref(vr->root_ref)))) {
                st = TG_ERR_NEEDS_RESERVE; /* not the recorded root and offset */
                break;
            }
            st = bind_matched_view(t, vr->root_ours);
        }
    } else {
        for (int pos = 0; pos < graph->n_nodes + graph->n_leafs && st == TG_OK; pos++) {
            struct tg_tensor *t = tensor_at(graph, pos);
            if (t->view_src) st = bind_view(t, view_root_is_ours(g, t));
        }
    }
    if (st != TG_OK) {
        alloc_forget_replays(g);
        return st;
    }
    swap_in_bound_nodes(g);
    g->last_bind_pass = pass;
    g->bind_token = __atomic_add_fetch(&bind_token_counter, 1, __ATOMIC_RELAXED);
    g->stats.n_allocs++;
    return TG_OK;
}

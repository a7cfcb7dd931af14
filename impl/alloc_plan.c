/* The graph allocator's planning pass (docs/allocator.md, "The rules"): every tensor the
 * graph touches is tracked and classified (memory of its own, or planned
 * here); walking the nodes in order, each source's remaining consumers are
 * counted down and its memory returns to the free list when no consumer and
 * no live view remains; a node may take a source's memory in place; outputs
 * and the roots of output views are never freed.  Memory is placed online
 * per buffer id (plan.c), and for TG_PLAN_BEST the lifetime blocks of that
 * pass are placed again by the offline planner (plan-offline.h) when that is
 * smaller. */
#include "alloc-impl.h"
#include "tg-checks.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table of tracked tensors ---------------------------------------------------------- */

/* The track id a tensor's hint names, when this pass tracks the tensor there.
 * The hint is only a guess (another allocator, or one in another thread, may
 * have written it since): the tensor check makes any value safe. */
static inline __attribute__((always_inline)) int hinted_track(const tg_gallocr *g, const struct tg_tensor *t) {
    const uint64_t hint = __atomic_load_n(&t->private_.plan_hint, __ATOMIC_RELAXED);
    if (hint < (uint64_t)g->n_tracked && g->tracked[hint] == t) return (int)hint;
    return -1;
}

/* The track id of t, or -1 when the pass does not track it. */
static int track_of(const tg_gallocr *g, const struct tg_tensor *t) {
    int id = hinted_track(g, t);
    if (id >= 0) return id;
    size_t bucket = tg_hash_find(&g->hash, t);
    return bucket == TG_HASH_FULL ? -1 : g->track_of_bucket[bucket];
}

struct tensor_info *alloc_info_of(tg_gallocr *g, const struct tg_tensor *t) {
    int id = track_of(g, t);
    return id < 0 ? NULL : &g->infos[id];
}

/* Room for n tracked tensors in tracked, infos and walk (each tensor is
 * listed in walk at most once); false when memory is short. */
static bool size_tracking_tables(tg_gallocr *g, int n) {
    int cap = g->cap_infos; /* tracked and walk are at least as long as infos */
    if (!tg_grow_array((void **)&g->tracked, &cap, n, sizeof *g->tracked)) return false;
    cap = g->cap_infos;
    if (!tg_grow_array((void **)&g->walk, &cap, n, sizeof *g->walk)) return false;
    return tg_grow_array((void **)&g->infos, &g->cap_infos, n, sizeof *g->infos);
}

/* Sets the hash table to size buckets (a power of two) holding every tensor
 * tracked so far; false when memory is short (the old table is kept). */
static bool size_tracking_hash(tg_gallocr *g, size_t size) {
    struct tg_hash_set grown;
    int *track = malloc(size * sizeof *track);
    if (!track || !tg_hash_init(&grown, size)) {
        free(track);
        return false;
    }
    for (int id = 0; id < g->n_tracked; id++) track[tg_hash_insert(&grown, g->tracked[id])] = id;
    tg_hash_free(&g->hash);
    free(g->track_of_bucket);
    g->hash = grown;
    g->track_of_bucket = track;
    return true;
}

/* The table is kept at most half full.  It starts sized for the graph's own
 * nodes and leafs: tensors outside the graph (sources and view roots it does
 * not list) are few, and every bucket is touched, so a table sized for the
 * worst case (every source distinct) would cost fresh pages. */
static bool grow_tracking_hash(tg_gallocr *g) { return size_tracking_hash(g, g->hash.size * 2); }

/* Tracks t (graph position pos, or POS_OUTSIDE): its track id, or -1 when
 * memory for the table is short. */
static int track(tg_gallocr *g, struct tg_tensor *t, int pos) {
    int id = hinted_track(g, t);
    if (id < 0) {
        if ((size_t)(g->n_tracked + 1) * 2 > g->hash.size && !grow_tracking_hash(g)) return -1;
        bool added;
        size_t bucket = tg_hash_insert_new(&g->hash, t, &added);
        if (bucket == TG_HASH_FULL) return -1;
        if (!added) {
            id = g->track_of_bucket[bucket];
        } else {
            /* infos may move: callers hold no info across a track */
            if (g->n_tracked == g->cap_infos && !size_tracking_tables(g, g->cap_infos * 2)) return -1;
            id = g->n_tracked++;
            g->track_of_bucket[bucket] = id;
            g->tracked[id] = t;
            memset(&g->infos[id], 0, sizeof g->infos[id]);
            g->infos[id].pos = pos;
            g->infos[id].buffer_id = -1;
            g->infos[id].block = -1;
            g->infos[id].root = -1;
        }
    }
    __atomic_store_n(&t->private_.plan_hint, (uint64_t)id, __ATOMIC_RELAXED);
    return id;
}

static enum tg_status prepare_tracking(tg_gallocr *g, const struct tg_graph *graph) {
    if ((size_t)graph->n_nodes + (size_t)graph->n_leafs > (size_t)INT_MAX / 8 ||
        (size_t)graph->n_nodes > (size_t)INT_MAX / TG_MAX_SRC) {
        return tg_fail(TG_ERR_INVALID, "graph of %d nodes and %d leafs is too large to plan", graph->n_nodes,
                       graph->n_leafs);
    }
    /* Room for the listed tensors: the few outside the graph (sources and
     * view roots it does not list) grow the tables as they come. */
    const int listed = graph->n_nodes + graph->n_leafs + 16;
    if (!tg_grow_array((void **)&g->leaf_track, &g->cap_leaf_track, graph->n_leafs, sizeof *g->leaf_track) ||
        !tg_grow_array((void **)&g->node_track, &g->cap_node_track, graph->n_nodes, sizeof *g->node_track) ||
        !tg_grow_array((void **)&g->src_track, &g->cap_src_track, graph->n_nodes * TG_MAX_SRC, sizeof *g->src_track) ||
        !tg_grow_array((void **)&g->n_src, &g->cap_n_src, graph->n_nodes, sizeof *g->n_src) ||
        (g->cap_infos < listed && !size_tracking_tables(g, listed))) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
    }
    g->n_tracked = 0;
    const size_t hash_size = (size_t)listed * 2;
    if (g->hash.size < hash_size) {
        if (!size_tracking_hash(g, tg_hash_size_for(hash_size))) {
            return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
        }
    } else {
        tg_hash_clear(&g->hash);
    }
    g->n_walk = 0;
    return TG_OK;
}

/* ---- classification -------------------------------------------------------------------------- */

/* Decides whether t (not a view) has memory the plan does not own, and
 * refuses a result of an earlier graph used as an input here. */
static enum tg_status classify_one(tg_gallocr *g, const struct tg_tensor *t, struct tensor_info *info, int n_leafs) {
    if (info->classified || t->view_src) return TG_OK;
    info->classified = true;
    const bool node_here = info->pos >= n_leafs;
    const bool leaf_here = info->pos >= 0 && info->pos < n_leafs;
    bool has_memory = t->data || t->buffer;
    if (has_memory && alloc_owns_buffer(g, t->buffer)) {
        /* Ours from an earlier bind: a node (or input leaf) of this graph is
         * planned again; anything else is a result the new plan would overwrite. */
        if (!node_here && (!leaf_here || alloc_was_last_result(g, t))) {
            return tg_fail(TG_ERR_STALE, "tensor '%s' lives in this allocator's compute buffer (a result of an "
                           "earlier graph) and is used as an input here; planning this graph would overwrite "
                           "it: copy it into a buffer you own (tg_alloc_ctx_tensors + tg_tensor_copy) first",
                           t->name);
        }
        has_memory = false;
    } else if (has_memory && (node_here || (leaf_here && t->op == TG_OP_NONE)) && t->buffer &&
               tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE) {
        /* a node, or an input leaf, bound by another allocator earlier (the
         * graph moved between schedulers): its memory belongs to that plan,
         * which may free it or give it to another tensor, so plan it again
         * here.  A result of another plan listed as a leaf keeps its memory:
         * its value is what this graph reads. */
        has_memory = false;
    }
    info->external = has_memory;
    if (!has_memory && info->pos == POS_OUTSIDE) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' is used by the graph but is neither a node nor a leaf of it "
                       "and has no memory: build the graph with tg_graph_build_forward_expand", t->name);
    }
    return TG_OK;
}

/* A view the graph reads but does not list is never bound by the plan: it
 * must already sit at its offset of a root the plan does not move. */
static enum tg_status check_outside_view(const struct tg_tensor *t, const struct tensor_info *root) {
    const struct tg_tensor *r = t->view_src;
    if (!root->external) {
        return tg_fail(TG_ERR_INVALID, "view '%s' of '%s' is read by the graph but not listed in it, and its root "
                       "is planned here, so its memory moves with every plan: list the view in the graph "
                       "(tg_graph_build_forward_expand lists views)", t->name, r->name);
    }
    if (!r->data || t->data != (uint8_t *)r->data + t->view_offs) {
        return tg_fail(TG_ERR_INVALID, "view '%s' is read by the graph but not listed in it, and it is not bound at "
                       "its offset %zu of '%s': bind it with tg_tensor_view_bind or list it in the graph", t->name,
                       t->view_offs, r->name);
    }
    return TG_OK;
}

/* Appends track id `id` to the classification order unless it is there already. */
static void list_once(tg_gallocr *g, int id) {
    if (g->infos[id].listed) return;
    g->infos[id].listed = true;
    g->walk[g->n_walk++] = id;
}

/* Tracks t and its view root (the root's track id kept in t's info) and
 * lists both for classification on first sight; t's track id, or -1. */
static int walk_tensor(tg_gallocr *g, struct tg_tensor *t) {
    int id = track(g, t, POS_OUTSIDE);
    if (id < 0) return -1;
    list_once(g, id);
    if (t->view_src && g->infos[id].root < 0) {
        int root = track(g, t->view_src, POS_OUTSIDE); /* may move infos */
        if (root < 0) return -1;
        g->infos[id].root = root;
        list_once(g, root);
    }
    return id;
}

static enum tg_status tracking_out_of_memory(void) {
    return tg_fail(TG_ERR_ALLOC, "out of host memory for the allocator's tensor table");
}

/* Planned twice, a tensor's second computation could land on memory given to
 * another tensor since. */
static enum tg_status listed_twice(const struct tg_tensor *t) {
    return tg_fail(TG_ERR_INVALID, "tensor '%s' is listed twice in the graph (as nodes, or as a node and a leaf): "
                   "a graph lists each tensor once (tg_graph_build_forward_expand does)", t->name);
}

/* A node listed before a source it reads would read that source before it
 * is computed. */
static enum tg_status computed_later(const struct tg_tensor *node, const struct tg_tensor *src) {
    return tg_fail(TG_ERR_INVALID, "node '%s' reads '%s', which the graph lists after it: a graph lists every node "
                   "after its sources (tg_graph_build_forward_expand does)", node->name, src->name);
}

/* Registers nodes, leafs, node sources and view roots (the pass's tables),
 * then classifies them in graph order (so the first offending tensor is the
 * one reported). */
enum tg_status alloc_classify(tg_gallocr *g, struct tg_graph *graph) {
    enum tg_status st = prepare_tracking(g, graph);
    if (st != TG_OK) return st;
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!graph->nodes[i]) return tg_fail(TG_ERR_INVALID, "node %d of the graph is NULL", i);
        if ((g->node_track[i] = track(g, graph->nodes[i], graph->n_leafs + i)) < 0) return tracking_out_of_memory();
        if (g->infos[g->node_track[i]].pos != graph->n_leafs + i) return listed_twice(graph->nodes[i]);
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        if (!graph->leafs[j]) return tg_fail(TG_ERR_INVALID, "leaf %d of the graph is NULL", j);
        if ((g->leaf_track[j] = track(g, graph->leafs[j], j)) < 0) return tracking_out_of_memory();
        if (g->infos[g->leaf_track[j]].pos != j) return listed_twice(graph->leafs[j]);
    }
    /* A leaf is not computed here: its own sources do not matter. */
    for (int j = 0; j < graph->n_leafs; j++) {
        if (walk_tensor(g, graph->leafs[j]) < 0) return tracking_out_of_memory();
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        struct tg_tensor *t = graph->nodes[i];
        if (walk_tensor(g, t) < 0) return tracking_out_of_memory();
        int *srcs = &g->src_track[(size_t)i * TG_MAX_SRC];
        int n = 0;
        for (int k = 0; k < TG_MAX_SRC; k++) {
            srcs[k] = -1;
            if (!t->src[k]) continue;
            if ((srcs[k] = walk_tensor(g, t->src[k])) < 0) return tracking_out_of_memory();
            /* (the scheduler's op-none dependency markers compute nothing) */
            if (g->infos[srcs[k]].pos > graph->n_leafs + i && t->op != TG_OP_NONE) return computed_later(t, t->src[k]);
            n = k + 1;
        }
        g->n_src[i] = (unsigned char)n;
    }
    for (int w = 0; w < g->n_walk; w++) {
        const int id = g->walk[w];
        if ((st = classify_one(g, g->tracked[id], &g->infos[id], graph->n_leafs)) != TG_OK) return st;
    }
    for (int w = 0; w < g->n_walk; w++) {
        const int id = g->walk[w];
        const struct tensor_info *info = &g->infos[id];
        if (info->pos != POS_OUTSIDE || !g->tracked[id]->view_src) continue;
        if ((st = check_outside_view(g->tracked[id], &g->infos[info->root])) != TG_OK) return st;
    }
    return TG_OK;
}

/* ---- liveness and placement ---------------------------------------------------------------- */

static void note_live(tg_gallocr *g, int owner, size_t delta_up, size_t delta_down) {
    g->live_bytes[owner] += delta_up;
    g->live_bytes[owner] -= delta_down;
    if (g->live_bytes[owner] > g->lower_bound[owner]) g->lower_bound[owner] = g->live_bytes[owner];
}

static enum tg_status release_tensor(tg_gallocr *g, const struct tg_tensor *t, struct tensor_info *info) {
    if (info->protected_ || !info->owned) return TG_OK;
    if (info->block >= 0) g->blocks[info->block].end = g->step;
    int owner = g->owner_of[info->buffer_id];
    struct tg_planner *p = &g->planners[owner];
    info->owned = false;
    note_live(g, owner, 0, tg_planner_round(p, info->size));
    return tg_planner_free(p, info->addr, info->size, t->name);
}

/* Tries to give node i the memory of one of its sources (docs/allocator.md, "The rules"). */
static bool take_source_in_place(tg_gallocr *g, int i, struct tg_tensor *node, struct tensor_info *info,
                                 int buffer_id, enum tg_status *st) {
    if (!tg_op_can_inplace(node->op)) return false;
    int owner = g->owner_of[buffer_id];
    struct tg_planner *p = &g->planners[owner];
    size_t node_padded = tg_planner_round(p, alloc_size(g, buffer_id, node));
    const int *srcs = alloc_sources_of(g, i);
    for (int k = 0; k < g->n_src[i]; k++) {
        if (srcs[k] < 0) continue;
        struct tg_tensor *parent = node->src[k];
        struct tensor_info *pi = &g->infos[srcs[k]];
        if (!pi->owned || pi->buffer_id != buffer_id || pi->protected_) continue;
        if (g->fault != TG_FAULT_INPLACE_IGNORE_LAYOUT && !tg_are_same_layout(node, parent)) continue;
        if (pi->n_consumers != 1 || pi->n_views != 0) continue;
        size_t parent_padded = tg_planner_round(p, pi->size);
        if (node_padded > parent_padded) continue;
        info->buffer_id = buffer_id;
        info->addr = pi->addr;
        info->size = alloc_size(g, buffer_id, node);
        info->block = pi->block; /* the parent's block lives on (its surplus tail too: conservative) */
        pi->owned = false;
        if (parent_padded > node_padded) {
            /* Op-dependent alloc sizes: hand the parent's surplus tail back. */
            struct tg_plan_addr tail = {pi->addr.chunk, pi->addr.offset + node_padded};
            note_live(g, owner, 0, parent_padded - node_padded);
            *st = tg_planner_free(p, tail, parent_padded - node_padded, parent->name);
        }
        return true;
    }
    return false;
}

static enum tg_status open_block(tg_gallocr *g, struct tensor_info *info, int owner) {
    if (g->n_blocks == g->cap_blocks) {
        int cap = g->cap_blocks ? g->cap_blocks * 2 : 256;
        struct tg_live_block *b = realloc(g->blocks, (size_t)cap * sizeof *b);
        if (b) g->blocks = b;
        int *o = realloc(g->block_owner, (size_t)cap * sizeof *o);
        if (o) g->block_owner = o;
        if (!b || !o) return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
        g->cap_blocks = cap;
    }
    info->block = g->n_blocks;
    g->block_owner[g->n_blocks] = owner;
    g->blocks[g->n_blocks++] = (struct tg_live_block){tg_planner_round(&g->planners[owner], info->size), g->step, -1, 0};
    return TG_OK;
}

/* Gives t (track id `id`) memory in buffer_id unless it has some already.
 * node_index: t's index when it is the node being computed (it may then take
 * a source's memory in place), else -1. */
static enum tg_status place_tensor(tg_gallocr *g, struct tg_tensor *t, int id, int buffer_id, int node_index) {
    struct tensor_info *info = &g->infos[id];
    if (t->view_src || info->external || info->placed) return TG_OK;
    if (buffer_id < 0 || buffer_id >= g->n_bufs) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s': buffer id %d is out of range (the allocator has %d buffers)",
                       t->name, buffer_id, g->n_bufs);
    }
    info->placed = true;
    info->owned = true;
    g->n_tensors[buffer_id]++;
    enum tg_status st = TG_OK;
    if (node_index >= 0 && take_source_in_place(g, node_index, t, info, buffer_id, &st)) return st;
    int owner = g->owner_of[buffer_id];
    info->buffer_id = buffer_id;
    info->size = alloc_size(g, buffer_id, t);
    st = tg_planner_alloc(&g->planners[owner], info->size, t->name, &info->addr);
    if (st == TG_OK) note_live(g, owner, tg_planner_round(&g->planners[owner], info->size), 0);
    if (st == TG_OK) st = open_block(g, info, owner);
    return st;
}

static int id_at(const int *ids, int i) { return ids ? ids[i] : 0; }

static void mark_protected(tg_gallocr *g, const struct tg_tensor *t, int id) {
    if (!(t->flags & TG_FLAG_OUTPUT) || g->fault == TG_FAULT_IGNORE_OUTPUT_FLAG) return;
    struct tensor_info *info = &g->infos[id];
    info->protected_ = true;
    if (info->root >= 0) g->infos[info->root].protected_ = true;
}

/* Node i's sources are done with once it ran: free those no one needs any more. */
static enum tg_status release_sources(tg_gallocr *g, int i, const struct tg_tensor *node) {
    const int *srcs = alloc_sources_of(g, i);
    for (int k = 0; k < g->n_src[i]; k++) {
        if (srcs[k] < 0) continue;
        const struct tg_tensor *src = node->src[k];
        struct tensor_info *si = &g->infos[srcs[k]];
        si->n_consumers--;
        if (si->root >= 0 && src->op == TG_OP_NONE) {
            /* One read through an op-none view is done.  A root whose other
             * readers ran before goes with the last such read; a root read
             * only through such views stays, as in ggml. */
            if (g->fault == TG_FAULT_FREE_VIEW_ROOT) continue;
            struct tensor_info *ri = &g->infos[si->root];
            if (--ri->n_views != 0 || ri->n_consumers != 0 || !ri->has_readers) continue;
            enum tg_status st = release_tensor(g, src->view_src, ri);
            if (st != TG_OK) return st;
            continue;
        }
        if (si->n_consumers != 0 || si->n_views != 0) continue;
        enum tg_status st;
        if (si->root >= 0) {
            struct tensor_info *ri = &g->infos[si->root];
            /* The view is done with: its root may go once nothing else needs it. */
            if (g->fault != TG_FAULT_FREE_VIEW_ROOT) ri->n_views--;
            if (ri->n_views != 0 || ri->n_consumers != 0) continue;
            st = release_tensor(g, src->view_src, ri);
        } else {
            st = release_tensor(g, src, si);
        }
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* TG_PLAN_BEST: the online pass fixed which tensors share memory (in-place
 * chains) and when each block is taken and freed; place those lifetime blocks
 * again with the offline planner, and keep the result when it is smaller
 * than the online plan.  Only single-chunk address spaces are re-placed (a
 * buffer type with a max size keeps the online chunking). */
static void replan_offline(tg_gallocr *g, const struct tg_graph *graph) {
    for (int b = 0; b < g->n_blocks; b++) {
        if (g->blocks[b].end < 0) g->blocks[b].end = graph->n_nodes; /* never freed: live to the end */
    }
    for (int owner = 0; owner < g->n_bufs; owner++) {
        struct tg_planner *p = &g->planners[owner];
        if (g->owner_of[owner] != owner || p->n_chunks != 1) continue;
        int n = 0;
        for (int b = 0; b < g->n_blocks; b++) n += g->block_owner[b] == owner;
        struct tg_live_block *mine = malloc((size_t)(n > 0 ? n : 1) * sizeof *mine);
        int *index = malloc((size_t)(n > 0 ? n : 1) * sizeof *index);
        if (!mine || !index) { /* keep the online plan: valid, just not re-placed */
            free(mine);
            free(index);
            continue;
        }
        n = 0;
        for (int b = 0; b < g->n_blocks; b++) {
            if (g->block_owner[b] != owner) continue;
            index[n] = b;
            mine[n++] = g->blocks[b];
        }
        struct tg_offline_options opts = {.alignment = p->alignment};
        size_t peak = tg_plan_offline(mine, n, &opts);
        if (peak < tg_planner_chunk_size(p, 0) && peak <= p->max_chunk_size) {
            for (int k = 0; k < n; k++) g->blocks[index[k]].offset = mine[k].offset;
            for (int pos = 0; pos < graph->n_leafs + graph->n_nodes; pos++) {
                struct tensor_info *info = alloc_info_at(g, graph, pos);
                if (!info->placed || info->block < 0 || g->block_owner[info->block] != owner) continue;
                info->addr = (struct tg_plan_addr){0, g->blocks[info->block].offset};
            }
            tg_planner_set_chunk_size(p, 0, peak);
        }
        free(mine);
        free(index);
    }
}

/* Every tensor the plan gives memory lies inside its chunk, at an aligned offset. */
static void assert_placements(const tg_gallocr *g, const struct tg_graph *graph) {
    if (!TG_CHECKS) return;
    for (int pos = 0; pos < graph->n_leafs + graph->n_nodes; pos++) {
        const int id = pos < graph->n_leafs ? g->leaf_track[pos] : g->node_track[pos - graph->n_leafs];
        const struct tensor_info *info = &g->infos[id];
        if (!info->placed || info->external) continue;
        const struct tg_planner *p = &g->planners[g->owner_of[info->buffer_id]];
        TG_ASSERT(info->addr.chunk >= 0 && info->addr.chunk < p->n_chunks, "'%s' in chunk %d of %d",
                  g->tracked[id]->name, info->addr.chunk, p->n_chunks);
        TG_ASSERT(info->addr.offset % p->alignment == 0 &&
                      info->addr.offset + tg_planner_round(p, info->size) <= tg_planner_chunk_size(p, info->addr.chunk),
                  "'%s' at %zu (+%zu) in a chunk of %zu bytes, alignment %zu", g->tracked[id]->name,
                  info->addr.offset, info->size, tg_planner_chunk_size(p, info->addr.chunk), p->alignment);
    }
}

enum tg_status alloc_plan_graph(tg_gallocr *g, struct tg_graph *graph, const int *node_ids, const int *leaf_ids) {
    TG_ASSERT(g->n_tracked >= graph->n_nodes + graph->n_leafs, "the graph is classified before it is planned");
    enum tg_status st = TG_OK;
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] == i) {
            tg_planner_reset(&g->planners[i]);
            g->planners[i].alignment = g->fault == TG_FAULT_IGNORE_ALIGNMENT ? 1 : tg_buft_get_alignment(g->bufts[i]);
            if (g->planners[i].alignment == 0) g->planners[i].alignment = 1;
            g->planners[i].merge_off_by_one = g->fault == TG_FAULT_MERGE_OFF_BY_ONE;
        }
        g->live_bytes[i] = g->lower_bound[i] = 0;
        g->n_tensors[i] = 0;
    }
    for (int i = 0; i < graph->n_nodes; i++) mark_protected(g, graph->nodes[i], g->node_track[i]);
    for (int j = 0; j < graph->n_leafs; j++) mark_protected(g, graph->leafs[j], g->leaf_track[j]);
    g->n_blocks = 0;
    g->step = 0;

    /* Leafs first, then input-flagged tensors, so inputs never land on reused memory. */
    for (int j = 0; j < graph->n_leafs && st == TG_OK; j++) {
        st = place_tensor(g, graph->leafs[j], g->leaf_track[j], id_at(leaf_ids, j), -1);
    }

    bool skipped_one = false;
    for (int i = 0; i < graph->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *node = graph->nodes[i];
        struct tensor_info *info = &g->infos[g->node_track[i]];
        if (info->root >= 0 && node->op != TG_OP_NONE && g->fault != TG_FAULT_FREE_VIEW_ROOT) {
            g->infos[info->root].n_views++;
            g->infos[info->root].has_readers = true;
        }
        if (node->flags & TG_FLAG_INPUT) st = place_tensor(g, node, g->node_track[i], id_at(node_ids, i), -1);
        const int *srcs = alloc_sources_of(g, i);
        for (int k = 0; k < g->n_src[i] && st == TG_OK; k++) {
            if (srcs[k] < 0) continue;
            struct tensor_info *si = &g->infos[srcs[k]];
            if (g->fault == TG_FAULT_SKIP_CONSUMER_COUNT && !skipped_one && si->n_consumers > 0) {
                skipped_one = true; /* fault: a source with several consumers loses one */
                continue;
            }
            si->n_consumers++;
            si->has_readers = true;
            /* A view with op none (ggml_view_tensor's kind, a leaf) is no view
             * above, yet reading it reads its root: each read holds the root
             * like a live view until it is done. */
            if (si->root >= 0 && node->src[k]->op == TG_OP_NONE && g->fault != TG_FAULT_FREE_VIEW_ROOT) {
                g->infos[si->root].n_views++;
            }
            if (node->src[k]->flags & TG_FLAG_INPUT) st = place_tensor(g, node->src[k], srcs[k], id_at(node_ids, i), -1);
        }
    }

    for (int i = 0; i < graph->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *node = graph->nodes[i];
        int buffer_id = id_at(node_ids, i);
        g->step = i;
        const int *srcs = alloc_sources_of(g, i);
        for (int k = 0; k < g->n_src[i] && st == TG_OK; k++) {
            if (srcs[k] >= 0) st = place_tensor(g, node->src[k], srcs[k], buffer_id, -1);
        }
        if (st == TG_OK) st = place_tensor(g, node, g->node_track[i], buffer_id, i);
        if (st == TG_OK) st = release_sources(g, i, node);
    }
    /* A fault-injected allocator keeps the online plan, so the injected
     * deviation reaches the bound plan unchanged for the checkers to find. */
    if (st == TG_OK && g->requested_policy == TG_PLAN_BEST && !alloc_fault_changes_planning(g)) {
        replan_offline(g, graph);
    }
    if (st == TG_OK) assert_placements(g, graph);
    return st;
}

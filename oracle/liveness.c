/* The oracle's own liveness analysis (rules in tg-oracle.h).  Written from the
 * contract, not from the planner: steps are node indices, and a tensor's live
 * range is [first, last] inclusive. */
#include "tg-oracle.h"
#include "tg-oracle-map.h"

#include <stdlib.h>

static int max_int(int a, int b) { return a > b ? a : b; }

static int add_tensor(struct tg_oracle_liveness *lv, int *cap, struct tg_tensor *t,
                      const struct tg_oracle_snapshot *snap) {
    int i = tg_oracle_map_get(lv->map, t);
    if (i >= 0) return i;
    if (lv->n == *cap) {
        int new_cap = *cap ? *cap * 2 : 64;
        struct tg_oracle_tensor_info *p = realloc(lv->infos, (size_t)new_cap * sizeof *p);
        if (!p) return -1;
        lv->infos = p;
        *cap = new_cap;
    }
    bool had_memory = tg_oracle_snapshot_find(snap, t) != NULL;
    lv->infos[lv->n] = (struct tg_oracle_tensor_info){
        .tensor = t,
        .owned = !t->view_src && !had_memory,
        .external = !t->view_src && had_memory,
        .node_index = -1,
        .buffer_id = -1,
        .first = 0,
        .last = 0,
        .last_direct_use = -1,
        .last_view_use = -1,
    };
    if (!tg_oracle_map_put(lv->map, t, lv->n)) return -1;
    return lv->n++;
}

static struct tg_oracle_tensor_info *info_of(struct tg_oracle_liveness *lv, const struct tg_tensor *t) {
    int i = tg_oracle_map_get(lv->map, t);
    return i >= 0 ? &lv->infos[i] : NULL;
}

/* Registers every tensor the graph touches: leafs, nodes, sources, view roots. */
static bool register_all(const struct tg_graph *graph, const struct tg_oracle_snapshot *snap,
                         const int *node_ids, const int *leaf_ids, struct tg_oracle_liveness *lv) {
    int cap = 0;
    for (int j = 0; j < graph->n_leafs; j++) {
        int i = add_tensor(lv, &cap, graph->leafs[j], snap);
        if (i < 0) return false;
        lv->infos[i].buffer_id = leaf_ids ? leaf_ids[j] : 0;
    }
    for (int n = 0; n < graph->n_nodes; n++) {
        int i = add_tensor(lv, &cap, graph->nodes[n], snap);
        if (i < 0) return false;
        lv->infos[i].node_index = n;
        lv->infos[i].buffer_id = node_ids ? node_ids[n] : 0;
    }
    for (int n = 0; n < graph->n_nodes; n++) {
        struct tg_tensor *node = graph->nodes[n];
        for (int k = -1; k < TG_MAX_SRC; k++) {
            struct tg_tensor *s = k < 0 ? node : node->src[k]; // NOLINT(clang-analyzer-core.NullDereference): node is a graph node
            if (!s) continue;
            if (add_tensor(lv, &cap, s, snap) < 0) return false;
            if (s->view_src && add_tensor(lv, &cap, s->view_src, snap) < 0) return false;
        }
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        if (graph->leafs[j]->view_src && add_tensor(lv, &cap, graph->leafs[j]->view_src, snap) < 0) return false;
    }
    return true;
}

enum tg_status tg_oracle_liveness_build(const struct tg_graph *graph, const struct tg_oracle_snapshot *snap,
                                        const int *node_ids, const int *leaf_ids, struct tg_oracle_liveness *lv) {
    *lv = (struct tg_oracle_liveness){.n_steps = graph->n_nodes};
    lv->map = tg_oracle_map_new((size_t)(graph->n_nodes + graph->n_leafs) * 2 + 16);
    if (!lv->map || !register_all(graph, snap, node_ids, leaf_ids, lv)) {
        tg_oracle_liveness_free(lv);
        return tg_fail(TG_ERR_ALLOC, "oracle liveness: out of host memory");
    }

    /* Uses: a node reads its sources; reading (or creating) a view uses its root. */
    bool *consumed = calloc((size_t)lv->n + 1, sizeof *consumed);
    if (!consumed) {
        tg_oracle_liveness_free(lv);
        return tg_fail(TG_ERR_ALLOC, "oracle liveness: out of host memory");
    }
    for (int n = 0; n < graph->n_nodes; n++) {
        struct tg_tensor *node = graph->nodes[n];
        if (node->view_src) {
            struct tg_oracle_tensor_info *root = info_of(lv, node->view_src);
            root->last_view_use = max_int(root->last_view_use, n);
        }
        for (int k = 0; k < TG_MAX_SRC; k++) {
            struct tg_tensor *s = node->src[k];
            if (!s) continue;
            struct tg_oracle_tensor_info *si = info_of(lv, s);
            si->last_direct_use = max_int(si->last_direct_use, n);
            consumed[si - lv->infos] = true;
            if (s->view_src) {
                struct tg_oracle_tensor_info *root = info_of(lv, s->view_src);
                root->last_view_use = max_int(root->last_view_use, n);
                consumed[root - lv->infos] = true; /* read through the view: no sink */
            }
        }
    }

    /* Protection: outputs and roots of output views; sinks (nothing reads them)
     * are never released either, and a sink view keeps its root. */
    for (int i = 0; i < lv->n; i++) {
        struct tg_oracle_tensor_info *ti = &lv->infos[i];
        struct tg_tensor *t = ti->tensor;
        bool in_graph = ti->node_index >= 0 || ti->buffer_id >= 0;
        bool is_output = (t->flags & TG_FLAG_OUTPUT) != 0;
        bool is_sink = in_graph && !consumed[i];
        if (is_output) ti->protected_ = true;
        if (t->view_src) {
            struct tg_oracle_tensor_info *root = info_of(lv, t->view_src);
            if (is_output) root->protected_ = true;
            if (is_output || (is_sink && ti->node_index >= 0)) root->last_view_use = TG_ORACLE_STEP_END;
        } else if (is_sink) {
            ti->last_direct_use = TG_ORACLE_STEP_END;
        }
    }
    free(consumed);

    for (int i = 0; i < lv->n; i++) {
        struct tg_oracle_tensor_info *ti = &lv->infos[i];
        bool early = ti->node_index < 0 || (ti->tensor->flags & TG_FLAG_INPUT);
        ti->first = early ? 0 : ti->node_index;
        ti->last = max_int(ti->first, max_int(ti->last_direct_use, ti->last_view_use));
        if (ti->protected_) ti->last = TG_ORACLE_STEP_END;
    }
    return TG_OK;
}

void tg_oracle_liveness_free(struct tg_oracle_liveness *lv) {
    if (!lv) return;
    free(lv->infos);
    tg_oracle_map_free(lv->map);
    *lv = (struct tg_oracle_liveness){0};
}

const struct tg_oracle_tensor_info *tg_oracle_liveness_find(const struct tg_oracle_liveness *lv,
                                                           const struct tg_tensor *t) {
    int i = tg_oracle_map_get(lv->map, t);
    return i >= 0 ? &lv->infos[i] : NULL;
}

bool tg_oracle_live_together(const struct tg_oracle_tensor_info *a, const struct tg_oracle_tensor_info *b) {
    return a->first <= b->last && b->first <= a->last;
}

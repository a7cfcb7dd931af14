/* Snapshot of which tensors had memory before planning (external tensors).
 * Taken before the plan is bound: afterwards every tensor has data and the
 * difference between "pre-allocated" and "planned" is lost. */
#include "tg-oracle.h"
#include "tg-oracle-map.h"

#include <stdlib.h>

static bool remember(struct tg_oracle_snapshot *snap, int *cap, const struct tg_tensor *t) {
    if (!t || !t->data || tg_oracle_map_get(snap->map, t) >= 0) return true;
    /* a view left at an old offset (a KV cache's window moved since it was
     * bound) is bound where it now points (docs/allocator.md): the view
     * checker judges it there */
    if (t->view_src && t->view_src->data && t->data != (const char *)t->view_src->data + t->view_offs) return true;
    if (snap->user_memory_only && t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE) return true;
    if (snap->n == *cap) {
        int new_cap = *cap ? *cap * 2 : 64;
        struct tg_oracle_snapshot_entry *e = realloc(snap->entries, (size_t)new_cap * sizeof *e);
        if (!e) return false;
        snap->entries = e;
        *cap = new_cap;
    }
    snap->entries[snap->n] = (struct tg_oracle_snapshot_entry){t, t->data, t->buffer};
    if (!tg_oracle_map_put(snap->map, t, snap->n)) return false;
    snap->n++;
    return true;
}

/* The tensor, its view root, and for nodes its sources and their roots. */
static bool remember_around(struct tg_oracle_snapshot *snap, int *cap, const struct tg_tensor *t, bool with_srcs) {
    if (!remember(snap, cap, t) || !remember(snap, cap, t->view_src)) return false;
    for (int k = 0; with_srcs && k < TG_MAX_SRC; k++) {
        const struct tg_tensor *s = t->src[k];
        if (s && (!remember(snap, cap, s) || !remember(snap, cap, s->view_src))) return false;
    }
    return true;
}

static enum tg_status take(const struct tg_graph *graph, struct tg_oracle_snapshot *snap, bool user_memory_only) {
    *snap = (struct tg_oracle_snapshot){.user_memory_only = user_memory_only};
    snap->map = tg_oracle_map_new((size_t)(graph->n_nodes + graph->n_leafs) * 2 + 16);
    int cap = 0;
    bool ok = snap->map != NULL;
    for (int i = 0; ok && i < graph->n_leafs; i++) ok = remember_around(snap, &cap, graph->leafs[i], false);
    for (int i = 0; ok && i < graph->n_nodes; i++) ok = remember_around(snap, &cap, graph->nodes[i], true);
    if (!ok) {
        tg_oracle_snapshot_free(snap);
        return tg_fail(TG_ERR_ALLOC, "oracle snapshot: out of host memory");
    }
    return TG_OK;
}

enum tg_status tg_oracle_snapshot_take(const struct tg_graph *graph, struct tg_oracle_snapshot *snap) {
    return take(graph, snap, false);
}

enum tg_status tg_oracle_snapshot_take_user_memory(const struct tg_graph *graph, struct tg_oracle_snapshot *snap) {
    return take(graph, snap, true);
}

void tg_oracle_snapshot_free(struct tg_oracle_snapshot *snap) {
    if (!snap) return;
    free(snap->entries);
    tg_oracle_map_free(snap->map);
    *snap = (struct tg_oracle_snapshot){0};
}

const struct tg_oracle_snapshot_entry *tg_oracle_snapshot_find(const struct tg_oracle_snapshot *snap,
                                                              const struct tg_tensor *t) {
    int i = tg_oracle_map_get(snap->map, t);
    return i >= 0 ? &snap->entries[i] : NULL;
}

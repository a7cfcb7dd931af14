/* Graphs: node and leaf lists plus a membership set.  build_forward_expand
 * adds a tensor after everything it depends on (depth first, sources in slot
 * order), so node order is a valid execution order. */
#include "tg.h"
#include "tg-hash.h"
#include "tg-impl.h"

#include <stdlib.h>
#include <string.h>

struct tg_graph_visited {
    struct tg_hash_set set;
    bool stale; /* lists were filled by tg_graph_push_unindexed: rebuild before use */
};

/* false: the set cannot hold the lists (cannot happen for lists within size) */
static bool refresh_visited(const struct tg_graph *g) {
    struct tg_graph_visited *v = g->visited;
    if (!v->stale) return true;
    tg_hash_clear(&v->set);
    for (int i = 0; i < g->n_nodes; i++) {
        if (tg_hash_insert(&v->set, g->nodes[i]) == TG_HASH_FULL) return false;
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (tg_hash_insert(&v->set, g->leafs[i]) == TG_HASH_FULL) return false;
    }
    v->stale = false;
    return true;
}

struct tg_graph *tg_graph_new(int size) {
    if (size <= 0) {
        tg_fail(TG_ERR_INVALID, "graph size must be positive (got %d)", size);
        return NULL;
    }
    struct tg_graph *g = calloc(1, sizeof *g);
    struct tg_graph_visited *v = calloc(1, sizeof *v);
    struct tg_tensor **nodes = calloc((size_t)size, sizeof *nodes);
    struct tg_tensor **leafs = calloc((size_t)size, sizeof *leafs);
    if (!g || !v || !nodes || !leafs || !tg_hash_init(&v->set, (size_t)size * 4)) {
        free(g);
        free(v);
        free(nodes);
        free(leafs);
        tg_fail(TG_ERR_ALLOC, "out of host memory for a graph of %d nodes", size);
        return NULL;
    }
    g->size = size;
    g->nodes = nodes;
    g->leafs = leafs;
    g->visited = v;
    return g;
}

void tg_graph_free(struct tg_graph *g) {
    if (!g) return;
    if (!g->is_view) {
        free(g->nodes);
        free(g->leafs);
    }
    if (g->visited) {
        tg_hash_free(&g->visited->set);
        free(g->visited);
    }
    free(g);
}

bool tg_graph_contains(const struct tg_graph *g, const struct tg_tensor *t) {
    if (g->visited && refresh_visited(g)) return tg_hash_contains(&g->visited->set, t);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] == t) return true;
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (g->leafs[i] == t) return true;
    }
    return false;
}

static bool is_leaf_tensor(const struct tg_tensor *t) {
    return t->op == TG_OP_NONE && !(t->flags & TG_FLAG_PARAM);
}

static enum tg_status append(struct tg_graph *g, struct tg_tensor *t, bool as_leaf) {
    if (g->is_view || !g->visited) return tg_fail(TG_ERR_INVALID, "cannot add tensors to a graph view");
    int *count = as_leaf ? &g->n_leafs : &g->n_nodes;
    if (*count >= g->size) {
        return tg_fail(TG_ERR_INVALID, "graph is full (%d %s) adding '%s': create it with a larger size",
                       g->size, as_leaf ? "leafs" : "nodes", t->name);
    }
    if (!refresh_visited(g) || tg_hash_insert(&g->visited->set, t) == TG_HASH_FULL) {
        return tg_fail(TG_ERR_INVALID, "graph membership set is full adding '%s'", t->name);
    }
    (as_leaf ? g->leafs : g->nodes)[(*count)++] = t;
    return TG_OK;
}

enum tg_status tg_graph_add_node(struct tg_graph *g, struct tg_tensor *t) { return append(g, t, false); }

bool tg_graph_push_unindexed(struct tg_graph *g, struct tg_tensor *t, bool as_leaf) {
    if (g->is_view || !g->visited) return false;
    int *count = as_leaf ? &g->n_leafs : &g->n_nodes;
    if (*count >= g->size) return false;
    (as_leaf ? g->leafs : g->nodes)[(*count)++] = t;
    g->visited->stale = true;
    return true;
}
enum tg_status tg_graph_add_leaf(struct tg_graph *g, struct tg_tensor *t) { return append(g, t, true); }

struct dfs_frame {
    struct tg_tensor *t;
    int next_src;
};

enum tg_status tg_graph_build_forward_expand(struct tg_graph *g, struct tg_tensor *root) {
    if (!g || !root) return tg_fail(TG_ERR_INVALID, "build_forward_expand needs a graph and a tensor (a constructor "
                                    "returned NULL earlier? see its message)");
    if (tg_graph_contains(g, root)) return TG_OK;
    /* Explicit stack: real graphs are thousands of nodes deep in chains. */
    int cap = 64, depth = 0;
    struct dfs_frame *stack = malloc((size_t)cap * sizeof *stack);
    if (!stack) return tg_fail(TG_ERR_ALLOC, "out of host memory expanding a graph");
    /* "on the stack" marks are kept in a local set so cycles are reported, not looped. */
    struct tg_hash_set pending;
    if (!tg_hash_init(&pending, (size_t)g->size * 4)) {
        free(stack);
        return tg_fail(TG_ERR_ALLOC, "out of host memory expanding a graph");
    }
    enum tg_status st = TG_OK;
    stack[depth++] = (struct dfs_frame){root, 0};
    tg_hash_insert(&pending, root);
    while (depth > 0 && st == TG_OK) {
        struct dfs_frame *f = &stack[depth - 1];
        if (f->next_src < TG_MAX_SRC) {
            struct tg_tensor *s = f->t->src[f->next_src++];
            if (!s || s == f->t || tg_graph_contains(g, s)) continue;
            if (tg_hash_contains(&pending, s)) {
                st = tg_fail(TG_ERR_INVALID, "graph has a cycle through '%s'", s->name);
                break;
            }
            if (depth == cap) {
                cap *= 2;
                struct dfs_frame *grown = realloc(stack, (size_t)cap * sizeof *stack);
                if (!grown) {
                    st = tg_fail(TG_ERR_ALLOC, "out of host memory expanding a graph");
                    break;
                }
                stack = grown;
            }
            if (tg_hash_insert(&pending, s) == TG_HASH_FULL) {
                st = tg_fail(TG_ERR_INVALID, "graph too large for its size (%d) while adding '%s'", g->size, s->name);
                break;
            }
            stack[depth++] = (struct dfs_frame){s, 0};
            continue;
        }
        st = append(g, f->t, is_leaf_tensor(f->t));
        depth--;
    }
    tg_hash_free(&pending);
    free(stack);
    return st;
}

struct tg_tensor *tg_graph_node(const struct tg_graph *g, int i) {
    if (i < 0) i += g->n_nodes;
    if (i < 0 || i >= g->n_nodes) return NULL;
    return g->nodes[i];
}

struct tg_graph *tg_graph_view(const struct tg_graph *g, int i0, int i1) {
    if (i0 < 0 || i1 > g->n_nodes || i0 > i1) {
        tg_fail(TG_ERR_INVALID, "graph view [%d, %d) outside the graph's %d nodes", i0, i1, g->n_nodes);
        return NULL;
    }
    struct tg_graph *v = calloc(1, sizeof *v);
    if (!v) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a graph view");
        return NULL;
    }
    v->size = i1 - i0;
    v->n_nodes = i1 - i0;
    v->nodes = g->nodes + i0;
    v->leafs = NULL;
    v->is_view = true;
    return v;
}

enum tg_status tg_graph_copy(const struct tg_graph *src, struct tg_graph *dst) {
    if (dst->is_view || !dst->visited) return tg_fail(TG_ERR_INVALID, "cannot copy into a graph view");
    if (src->n_nodes > dst->size || src->n_leafs > dst->size) {
        return tg_fail(TG_ERR_INVALID, "graph copy: destination holds %d, source has %d nodes and %d leafs",
                       dst->size, src->n_nodes, src->n_leafs);
    }
    tg_graph_reset_lists(dst);
    for (int i = 0; i < src->n_leafs; i++) {
        enum tg_status st = append(dst, src->leafs[i], true);
        if (st != TG_OK) return st;
    }
    for (int i = 0; i < src->n_nodes; i++) {
        enum tg_status st = append(dst, src->nodes[i], false);
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

void tg_graph_reset_lists(struct tg_graph *g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    if (g->visited) {
        tg_hash_clear(&g->visited->set);
        g->visited->stale = false;
    }
}

/* Graphs: node and leaf lists plus a membership set.  build_forward_expand
 * adds a tensor after everything it depends on (depth first, sources in slot
 * order), so node order is a valid execution order. */
#include "tg.h"
#include "tg-hash.h"
#include "tg-impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tg_graph_visited {
    struct tg_hash_set set;
    bool stale; /* lists were rewritten by tg_graph_lists_rewritten: rebuild before use */
    uint64_t edits; /* changes of the lists so far (tg_graph_edits) */
    struct tg_graph_print allocated; /* as tg_gallocr_alloc_graph left it (graph_print.c) */
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
        tg_graph_print_free(&g->visited->allocated);
        free(g->visited);
    }
    free(g);
}

enum tg_status tg_graph_note_allocated(struct tg_graph *g) {
    return g->visited ? tg_graph_print_take(&g->visited->allocated, g) : TG_OK;
}

enum tg_status tg_graph_check_allocated(const struct tg_graph *g) {
    static const struct tg_print_words words = {
        "tg_backend_graph_compute", "tg_gallocr_alloc_graph",
        "the plan is of the graph as it was: allocate it again (tg_gallocr_alloc_graph)"};
    if (!g->visited || !g->visited->allocated.taken) return TG_OK;
    enum tg_status st = tg_graph_print_check(&g->visited->allocated, g, &words);
    /* a later plan in the same buffers leaves the print as it was */
    return st == TG_OK ? tg_graph_check_fresh(g, &words) : st;
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
    if (!t) return tg_fail(TG_ERR_INVALID, "cannot add a NULL tensor to a graph (as a %s)", as_leaf ? "leaf" : "node");
    if (g->is_view || !g->visited) return tg_fail(TG_ERR_INVALID, "cannot add tensors to a graph view");
    int *count = as_leaf ? &g->n_leafs : &g->n_nodes;
    if (*count >= g->size) {
        return tg_fail(TG_ERR_INVALID, "graph is full (%d %s) adding '%s': create it with a larger size",
                       g->size, as_leaf ? "leafs" : "nodes", t->name);
    }
    bool added = false;
    if (!refresh_visited(g) || tg_hash_insert_new(&g->visited->set, t, &added) == TG_HASH_FULL) {
        return tg_fail(TG_ERR_INVALID, "graph membership set is full adding '%s'", t->name);
    }
    /* a tensor listed twice would be planned twice: its second computation
     * could land on memory given to another tensor since */
    if (!added) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' is in the graph already: a graph lists each tensor once, as a "
                       "node or as a leaf", t->name);
    }
    (as_leaf ? g->leafs : g->nodes)[(*count)++] = t;
    g->visited->edits++;
    return TG_OK;
}

enum tg_status tg_graph_add_node(struct tg_graph *g, struct tg_tensor *t) { return append(g, t, false); }

enum tg_status tg_graph_add_leaf(struct tg_graph *g, struct tg_tensor *t) { return append(g, t, true); }

void tg_graph_lists_rewritten(struct tg_graph *g) {
    if (g->visited) {
        g->visited->stale = true;
        g->visited->edits++;
    }
}

uint64_t tg_graph_edits(const struct tg_graph *g) { return g->visited ? g->visited->edits : 0; }

struct dfs_frame {
    struct tg_tensor *t;
    int next_src;
};

/* Tensors one expansion has entered but not yet appended: a source found among
 * them closes a cycle.  Sized by what the call visits, not by the graph's
 * capacity (llama.cpp-style builders expand many times into one big graph),
 * and the first entries need no heap at all. */
#define PENDING_INLINE 128
struct pending_set {
    const struct tg_tensor **slots;
    unsigned bits;
    size_t count;
    const struct tg_tensor *inline_slots[PENDING_INLINE];
};

static size_t pending_home(const struct pending_set *p, const struct tg_tensor *t) {
    return (size_t)(((uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ull) >> (64 - p->bits));
}

static void pending_init(struct pending_set *p) {
    p->slots = p->inline_slots;
    p->bits = 7; /* log2(PENDING_INLINE) */
    p->count = 0;
    memset(p->inline_slots, 0, sizeof p->inline_slots);
}

static void pending_free(struct pending_set *p) {
    if (p->slots != p->inline_slots) free((void *)p->slots);
}

static bool pending_contains(const struct pending_set *p, const struct tg_tensor *t) {
    const size_t mask = ((size_t)1 << p->bits) - 1;
    for (size_t i = pending_home(p, t);; i = (i + 1) & mask) {
        if (p->slots[i] == t) return true;
        if (!p->slots[i]) return false; /* never full: kept at most half used */
    }
}

static void pending_place(struct pending_set *p, const struct tg_tensor *t) {
    const size_t mask = ((size_t)1 << p->bits) - 1;
    size_t i = pending_home(p, t);
    while (p->slots[i] && p->slots[i] != t) i = (i + 1) & mask;
    if (!p->slots[i]) p->count++;
    p->slots[i] = t;
}

/* false when memory is short */
static bool pending_insert(struct pending_set *p, const struct tg_tensor *t) {
    if (2 * (p->count + 1) > ((size_t)1 << p->bits)) {
        const size_t old_size = (size_t)1 << p->bits;
        const struct tg_tensor **old = p->slots;
        const struct tg_tensor **grown = calloc(2 * old_size, sizeof *grown);
        if (!grown) return false;
        p->slots = grown;
        p->bits++;
        p->count = 0;
        for (size_t i = 0; i < old_size; i++) {
            if (old[i]) pending_place(p, old[i]);
        }
        if (old != p->inline_slots) free((void *)old);
    }
    pending_place(p, t);
    return true;
}

enum tg_status tg_graph_build_forward_expand(struct tg_graph *g, struct tg_tensor *root) {
    if (!g || !root) return tg_fail(TG_ERR_INVALID, "build_forward_expand needs a graph and a tensor (a constructor "
                                    "returned NULL earlier? see its message)");
    if (tg_graph_contains(g, root)) return TG_OK;
    /* Explicit stack: real graphs are thousands of nodes deep in chains.  Small
     * expansions (most calls) stay in the inline frames. */
    struct dfs_frame inline_stack[64];
    struct dfs_frame *stack = inline_stack;
    int cap = (int)(sizeof inline_stack / sizeof inline_stack[0]), depth = 0;
    struct pending_set pending;
    pending_init(&pending);
    enum tg_status st = TG_OK;
    const int n_nodes_before = g->n_nodes, n_leafs_before = g->n_leafs;
    const uint64_t edits_before = tg_graph_edits(g);
    stack[depth++] = (struct dfs_frame){root, 0};
    pending_insert(&pending, root); /* the inline table has room: cannot fail */
    while (depth > 0 && st == TG_OK) {
        struct dfs_frame *f = &stack[depth - 1];
        if (f->next_src < TG_MAX_SRC) {
            struct tg_tensor *s = f->t->src[f->next_src++];
            if (!s || s == f->t || tg_graph_contains(g, s)) continue;
            if (pending_contains(&pending, s)) {
                st = tg_fail(TG_ERR_INVALID, "graph has a cycle through '%s'", s->name);
                break;
            }
            if (depth == cap) {
                struct dfs_frame *grown = stack == inline_stack ? malloc(2 * (size_t)cap * sizeof *stack)
                                                                : realloc(stack, 2 * (size_t)cap * sizeof *stack);
                if (!grown) {
                    st = tg_fail(TG_ERR_ALLOC, "out of host memory expanding a graph");
                    break;
                }
                if (stack == inline_stack) memcpy(grown, inline_stack, sizeof inline_stack);
                stack = grown;
                cap *= 2;
            }
            if (!pending_insert(&pending, s)) {
                st = tg_fail(TG_ERR_ALLOC, "out of host memory expanding a graph");
                break;
            }
            stack[depth++] = (struct dfs_frame){s, 0};
            continue;
        }
        st = append(g, f->t, is_leaf_tensor(f->t));
        depth--;
    }
    pending_free(&pending);
    if (stack != inline_stack) free(stack);
    if (st != TG_OK && (g->n_nodes != n_nodes_before || g->n_leafs != n_leafs_before)) {
        /* all or nothing: half an expansion would plan and compute the part
         * without the rest, without a word */
        g->n_nodes = n_nodes_before;
        g->n_leafs = n_leafs_before;
        tg_graph_lists_rewritten(g);
        g->visited->edits = edits_before; /* the lists are as they were */
    }
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
        g->visited->edits++;
    }
}

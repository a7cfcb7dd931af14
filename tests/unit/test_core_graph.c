/* Graphs: build_forward_expand order, leafs vs nodes, views, copies, capacity
 * errors; the pointer hash set. */
#include "tg.h"
#include "tg-hash.h"
#include "tg-impl.h"
#include "tg_test.h"

static int index_of(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++) if (g->nodes[i] == t) return i;
    return -1;
}

static void test_order(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    struct tg_tensor *w = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    struct tg_tensor *a = tg_mul(ctx, x, w);
    struct tg_tensor *b = tg_scale(ctx, a, 2.0f);
    struct tg_tensor *c = tg_add(ctx, a, b); /* diamond */
    struct tg_tensor *d = tg_cast(ctx, c, TG_TYPE_F16); /* self-source */
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, d));
    CHECK(g->n_nodes == 4 && g->n_leafs == 2);
    CHECK(g->leafs[0] == x && g->leafs[1] == w);
    CHECK(index_of(g, a) < index_of(g, b) && index_of(g, b) < index_of(g, c) && index_of(g, c) < index_of(g, d));
    CHECK(tg_graph_node(g, -1) == d && tg_graph_node(g, 4) == NULL);
    CHECK_OK(tg_graph_build_forward_expand(g, d)); /* idempotent */
    CHECK(g->n_nodes == 4);
    CHECK(tg_graph_contains(g, x) && tg_graph_contains(g, c));
    struct tg_graph *v = tg_graph_view(g, 1, 3);
    CHECK(v && v->n_nodes == 2 && v->nodes[0] == b && tg_graph_contains(v, c) && !tg_graph_contains(v, a));
    CHECK(tg_graph_add_node(v, a) != TG_OK);
    tg_graph_free(v);
    struct tg_graph *g2 = tg_graph_new(4);
    CHECK_OK(tg_graph_copy(g, g2));
    CHECK(g2->n_nodes == 4 && g2->nodes[3] == d);
    struct tg_graph *tiny = tg_graph_new(2);
    CHECK_STATUS(tg_graph_build_forward_expand(tiny, d), TG_ERR_INVALID);
    CHECK_ERR_HAS("larger size");
    CHECK_STATUS(tg_graph_build_forward_expand(g, NULL), TG_ERR_INVALID);
    tg_graph_free(tiny);
    tg_graph_free(g2);
    tg_graph_free(g);
    tg_context_free(ctx);
}

static void test_deep_chain(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    for (int i = 0; i < 20000; i++) t = tg_scale(ctx, t, 1.0f);
    struct tg_graph *g = tg_graph_new(20001);
    CHECK_OK(tg_graph_build_forward_expand(g, t));
    CHECK(g->n_nodes == 20000 && g->n_leafs == 1 && g->nodes[19999] == t);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A cycle (sources set by hand) is refused with its name, at any depth: a short
 * one, and one deeper than the expansion's inline stack and pending table. */
static void test_cycles(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    const int lengths[] = {2, 300};
    for (int k = 0; k < 2; k++) {
        struct tg_tensor *first = tg_scale(ctx, tg_new_tensor_1d(ctx, TG_TYPE_F32, 4), 1.0f);
        tg_set_name(first, "cycle_start");
        struct tg_tensor *t = first;
        for (int i = 1; i < lengths[k]; i++) t = tg_scale(ctx, t, 1.0f);
        struct tg_tensor *leaf = first->src[0];
        first->src[0] = t; /* closes the loop */
        struct tg_graph *g = tg_graph_new(1024);
        CHECK_STATUS(tg_graph_build_forward_expand(g, t), TG_ERR_INVALID);
        CHECK_ERR_HAS("cycle through");
        first->src[0] = leaf; /* broken again: the same graph object expands fine */
        tg_graph_reset_lists(g);
        CHECK_OK(tg_graph_build_forward_expand(g, t));
        CHECK(g->n_nodes == lengths[k] && g->n_leafs == 1);
        tg_graph_free(g);
    }
    tg_context_free(ctx);
}

/* Many small expansions into one large graph (the way model builders call it):
 * every call adds its node after its sources, whatever the graph's capacity. */
static void test_many_expansions(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(65536);
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    for (int i = 0; i < 3000; i++) {
        struct tg_tensor *w = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
        t = tg_add(ctx, t, w);
        CHECK_OK(tg_graph_build_forward_expand(g, t));
    }
    CHECK(g->n_nodes == 3000 && g->n_leafs == 3001 && g->nodes[2999] == t);
    tg_graph_free(g);
    tg_context_free(ctx);
}

static void test_hash(void) {
    struct tg_hash_set set;
    CHECK(tg_hash_init(&set, 10));
    CHECK(set.size == 16); /* the power of two >= 10 */
    int keys[16];
    for (int i = 0; i < 16; i++) CHECK(tg_hash_insert(&set, &keys[i]) != TG_HASH_FULL);
    int extra;
    CHECK(tg_hash_insert(&set, &extra) == TG_HASH_FULL);
    CHECK(!tg_hash_contains(&set, &extra));
    for (int i = 0; i < 16; i++) CHECK(tg_hash_contains(&set, &keys[i]));
    CHECK(tg_hash_insert(&set, &keys[3]) == tg_hash_find(&set, &keys[3]));
    tg_hash_clear(&set);
    CHECK(!tg_hash_contains(&set, &keys[0]));
    tg_hash_free(&set);
}

/* Lists rewritten in place without indexing (the scheduler's replay):
 * membership is rebuilt on first use, and adding after it works. */
static void test_rewritten_lists(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    struct tg_tensor *b = tg_scale(ctx, a, 2.0f);
    struct tg_tensor *c = tg_scale(ctx, b, 2.0f);
    struct tg_tensor *d = tg_scale(ctx, c, 2.0f);
    struct tg_graph *g = tg_graph_new(3);
    CHECK_OK(tg_graph_build_forward_expand(g, c)); /* leaf a, nodes b and c, indexed */
    CHECK(g->n_leafs == 1 && g->n_nodes == 2 && tg_graph_contains(g, b));
    g->nodes[0] = d; /* b's slot now holds d */
    tg_graph_lists_rewritten(g);
    CHECK(tg_graph_contains(g, d) && tg_graph_contains(g, c) && tg_graph_contains(g, a) && !tg_graph_contains(g, b));
    CHECK_OK(tg_graph_add_node(g, b));
    CHECK(g->n_nodes == 3 && tg_graph_contains(g, b));
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A graph lists each tensor once, and never NULL: a tensor listed twice was
 * planned twice (its second computation overwrote another tensor's memory),
 * a NULL crashed the allocator later. */
static void test_listed_once(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    tg_set_name(a, "a");
    struct tg_tensor *b = tg_scale(ctx, a, 2.0f);
    tg_set_name(b, "b");
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, a));
    CHECK_OK(tg_graph_add_node(g, b));
    CHECK_STATUS(tg_graph_add_node(g, b), TG_ERR_INVALID);
    CHECK_ERR_HAS("tensor 'b' is in the graph already");
    CHECK_STATUS(tg_graph_add_node(g, a), TG_ERR_INVALID); /* a leaf as a node too */
    CHECK_STATUS(tg_graph_add_node(g, NULL), TG_ERR_INVALID);
    CHECK_STATUS(tg_graph_add_leaf(g, NULL), TG_ERR_INVALID);
    CHECK(g->n_nodes == 1 && g->n_leafs == 1);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* An expansion that fails (here: the graph is full) adds nothing, rather
 * than the part before the failure. */
static void test_failed_expansion_adds_nothing(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    struct tg_tensor *d = tg_scale(ctx, tg_scale(ctx, tg_scale(ctx, a, 2.0f), 2.0f), 2.0f);
    struct tg_graph *g = tg_graph_new(2);
    CHECK_STATUS(tg_graph_build_forward_expand(g, d), TG_ERR_INVALID);
    CHECK_ERR_HAS("graph is full");
    CHECK(g->n_nodes == 0 && g->n_leafs == 0 && !tg_graph_contains(g, a));
    CHECK_OK(tg_graph_build_forward_expand(g, d->src[0])); /* what fits still goes in */
    CHECK(g->n_nodes == 2 && g->n_leafs == 1 && tg_graph_contains(g, a));
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Bounds of tg_graph_node (negative counts from the end), tg_graph_view
 * (an empty range is a view, a reversed one is refused) and tg_graph_copy
 * (a destination too small for the leafs alone is refused before anything
 * in it changes). */
static void test_bounds(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8), *y = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    struct tg_tensor *a = tg_add(ctx, x, y), *b = tg_scale(ctx, a, 2.0f);
    struct tg_graph *g = tg_graph_new(8);
    CHECK(tg_graph_build_forward_expand(g, b) == TG_OK && g->n_nodes == 2 && g->n_leafs == 2);
    CHECK(tg_graph_node(g, 1) == b && tg_graph_node(g, -1) == b && tg_graph_node(g, -2) == a);
    CHECK(tg_graph_node(g, 2) == NULL && tg_graph_node(g, -3) == NULL);
    struct tg_graph *v = tg_graph_view(g, 1, 1);
    CHECK(v != NULL && v->n_nodes == 0);
    CHECK(tg_graph_add_node(v, a) == TG_ERR_INVALID && tg_graph_add_leaf(v, x) == TG_ERR_INVALID);
    CHECK(strstr(tg_last_error(), "cannot add tensors to a graph view") != NULL);
    tg_graph_free(v);
    CHECK(tg_graph_view(g, 2, 1) == NULL);
    CHECK(strstr(tg_last_error(), "graph view [2, 1) outside the graph's 2 nodes") != NULL);
    struct tg_graph *small = tg_graph_new(1);
    struct tg_tensor *z = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    CHECK(tg_graph_add_leaf(small, z) == TG_OK);
    struct tg_graph *one_node = tg_graph_new(8); /* 1 node, 2 leafs */
    CHECK(tg_graph_build_forward_expand(one_node, a) == TG_OK && one_node->n_nodes == 1 && one_node->n_leafs == 2);
    CHECK(tg_graph_copy(one_node, small) == TG_ERR_INVALID);
    CHECK(strstr(tg_last_error(), "destination holds 1, source has 1 nodes and 2 leafs") != NULL);
    CHECK(small->n_leafs == 1 && small->leafs[0] == z && small->n_nodes == 0);
    /* g copied from a shorter graph: past its last node there is none */
    CHECK(tg_graph_copy(one_node, g) == TG_OK && g->n_nodes == 1);
    CHECK(tg_graph_node(g, 0) == a && tg_graph_node(g, 1) == NULL && tg_graph_node(g, -1) == a);
    tg_graph_free(small);
    tg_graph_free(one_node);
    tg_graph_free(g);
    tg_context_free(ctx);
}

int main(void) {
    test_bounds();
    test_rewritten_lists();
    test_listed_once();
    test_failed_expansion_adds_nothing();
    test_order();
    test_deep_chain();
    test_cycles();
    test_many_expansions();
    test_hash();
    return tg_test_finish();
}

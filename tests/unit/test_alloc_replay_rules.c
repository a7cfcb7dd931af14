/* The allocator's replays follow the general path's rules (impl/alloc_replay.c):
 * after a reserve, alloc_graph replays the recorded plan; each case below
 * changes what a rule looks at between two calls and requires the replay to
 * answer as a fresh allocator then does on the same state (status, and where
 * the tensor ends up), in every build type.  The replay goes first: a fresh
 * allocator's bind would change what the replay sees. */
#include "tg_test.h"
#include "tgsched/tg-alloc.h"
#include "tgsched/tg-backend.h"
#include "tgsched/tg-cpu.h"
#include "tgsched/tg.h"

#include <stdint.h>
#include <string.h>

static struct tg_context *new_context(void) {
    return tg_context_new((struct tg_context_params){.mem_size = 1 << 16, .no_alloc = true});
}

static int n_replayed(const tg_gallocr *ga) {
    struct tg_gallocr_stats s;
    tg_gallocr_get_stats(ga, &s);
    return (int)(s.n_allocs_replayed + s.n_allocs_unchanged + s.n_allocs_vouched);
}

/* y = 2 * v, v an unlisted view of leaf k (memory of its own).  k moves to
 * new memory and its old buffer is freed, v is not bound again: a fresh
 * allocator refuses (an unlisted view must sit at its offset of its root);
 * the replay did not look and y read freed memory. */
static void test_unlisted_view_left_behind(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *k = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    struct tg_tensor *v = tg_view_1d(ctx, k, 16, 64);
    tg_set_name(v, "v");
    struct tg_tensor *y = tg_scale(ctx, v, 2.0f);
    tg_set_output(y);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, k));
    CHECK_OK(tg_graph_add_node(g, y)); /* v is read, not listed */
    tg_buffer *first = tg_buft_alloc_buffer(bt, 1024), *second = tg_buft_alloc_buffer(bt, 1024);
    CHECK_OK(tg_tensor_bind(k, first, tg_buffer_get_base(first)));
    CHECK_OK(tg_tensor_view_bind(v));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK_OK(tg_tensor_bind(k, second, tg_buffer_get_base(second)));
    tg_buffer_free(first);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("not bound at its offset");
    tg_gallocr *fresh = tg_gallocr_new(bt);
    CHECK_STATUS(tg_gallocr_alloc_graph(fresh, g), TG_ERR_INVALID);
    /* bound again at its offset, the replay takes it */
    CHECK_OK(tg_tensor_view_bind(v));
    const int before = n_replayed(ga);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(n_replayed(ga) == before + 1);
    tg_gallocr_free(fresh);
    tg_gallocr_free(ga);
    tg_buffer_free(second);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A listed view of a planned node grown past its root between two calls: a
 * fresh allocator refuses it; the replay bound it past the root (and past the
 * compute buffer). */
static void test_view_grown_past_its_root(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    tg_set_input(x);
    struct tg_tensor *a = tg_scale(ctx, x, 2.0f); /* 256 bytes */
    struct tg_tensor *v = tg_view_1d(ctx, a, 16, 0);
    struct tg_tensor *b = tg_sum_rows(ctx, v);
    tg_set_output(b);
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, b));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    v->ne[0] = 1024; /* 4,096 bytes from a's start */
    v->nb[1] = v->nb[2] = v->nb[3] = 4096;
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("lies outside");
    tg_gallocr *fresh = tg_gallocr_new(bt);
    CHECK_STATUS(tg_gallocr_alloc_graph(fresh, g), TG_ERR_INVALID);
    tg_gallocr_free(fresh);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A listed view of an external leaf (a KV cache) whose root shrank and moved
 * to a smaller buffer: the view no longer fits in it. */
static void test_view_of_a_shrunk_external_root(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *k = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    struct tg_tensor *v = tg_view_1d(ctx, k, 16, 0);
    struct tg_tensor *y = tg_sum_rows(ctx, v);
    tg_set_output(y);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    tg_buffer *first = tg_buft_alloc_buffer(bt, 256), *small = tg_buft_alloc_buffer(bt, 32);
    CHECK_OK(tg_tensor_bind(k, first, tg_buffer_get_base(first)));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    k->ne[0] = 8; /* 32 bytes: the 64-byte view no longer fits */
    k->nb[1] = k->nb[2] = k->nb[3] = 32;
    CHECK_OK(tg_tensor_bind(k, small, tg_buffer_get_base(small)));
    void *const data = v->data;
    tg_buffer *const buffer = v->buffer;
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("lies outside");
    CHECK(v->data == data && v->buffer == buffer); /* refused before binding it */
    tg_gallocr *fresh = tg_gallocr_new(bt);
    CHECK_STATUS(tg_gallocr_alloc_graph(fresh, g), TG_ERR_INVALID);
    tg_gallocr_free(fresh);
    tg_gallocr_free(ga);
    tg_buffer_free(first);
    tg_buffer_free(small);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* An input leaf in memory of its own at the reserve, then moved into a
 * compute buffer of another plan (the graph went to another allocator): a
 * fresh allocator plans it in its own buffer; the replay kept it in memory
 * the other plan gives to other tensors. */
static void test_input_leaf_in_another_plans_memory(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    struct tg_tensor *z = tg_sqr(ctx, tg_scale(ctx, x, 2.0f));
    tg_set_output(z);
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, z));
    tg_buffer *own = tg_buft_alloc_buffer(bt, 4096), *other = tg_buft_alloc_buffer(bt, 4096);
    tg_buffer_set_usage(other, TG_BUFFER_USAGE_COMPUTE);
    CHECK_OK(tg_tensor_bind(x, own, tg_buffer_get_base(own)));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(x->buffer == own);
    CHECK_OK(tg_tensor_bind(x, other, tg_buffer_get_base(other)));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK_MSG(tg_gallocr_owns_buffer(ga, x->buffer), "x stayed in the other plan's compute buffer");
    CHECK_OK(tg_tensor_bind(x, other, tg_buffer_get_base(other)));
    tg_gallocr *fresh = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_alloc_graph(fresh, g));
    CHECK(tg_gallocr_owns_buffer(fresh, x->buffer));
    tg_gallocr_free(fresh);
    tg_gallocr_free(ga);
    tg_buffer_free(own);
    tg_buffer_free(other);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A result of another plan listed here as a leaf (an op, in that plan's
 * compute buffer) keeps its memory: it is what this graph reads.  The replay
 * takes it as the plan recorded it (external), not as an input leaf to plan
 * again, so the second call replays and y stays put. */
static void test_result_leaf_of_another_plan_replays(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    tg_set_input(x);
    struct tg_tensor *y = tg_scale(ctx, x, 2.0f);
    tg_set_output(y);
    struct tg_graph *first = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(first, y));
    tg_gallocr *other = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_alloc_graph(other, first));
    struct tg_tensor *z = tg_sqr(ctx, y);
    tg_set_output(z);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, y)); /* a result of the first graph, read here */
    CHECK_OK(tg_graph_add_node(g, z));
    void *y_data = y->data;
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    const int before = n_replayed(ga);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(n_replayed(ga) == before + 1);
    CHECK(y->data == y_data && tg_gallocr_owns_buffer(other, y->buffer));
    tg_gallocr_free(ga);
    tg_gallocr_free(other);
    tg_graph_free(g);
    tg_graph_free(first);
    tg_context_free(ctx);
}

/* A listed view v of a root k the graph does not list: k must bring memory
 * of its own.  k loses its memory between two calls: a fresh allocator
 * refuses (k has none and the plan cannot give it any); so must the replay,
 * which would bind v at an offset of nothing. */
static void test_listed_view_of_unlisted_root_without_memory(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *k = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    tg_set_name(k, "k");
    struct tg_tensor *v = tg_view_1d(ctx, k, 16, 64);
    struct tg_tensor *y = tg_scale(ctx, v, 2.0f);
    tg_set_output(y);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, v));
    CHECK_OK(tg_graph_add_node(g, y));
    tg_buffer *own = tg_buft_alloc_buffer(bt, 1024);
    CHECK_OK(tg_tensor_bind(k, own, tg_buffer_get_base(own)));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(v->data == (uint8_t *)k->data + 64);
    k->data = NULL; /* as a tensor of a context that was never allocated */
    k->buffer = NULL;
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    tg_gallocr *fresh = tg_gallocr_new(bt);
    CHECK_STATUS(tg_gallocr_alloc_graph(fresh, g), TG_ERR_INVALID);
    tg_gallocr_free(fresh);
    tg_gallocr_free(ga);
    tg_buffer_free(own);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A tensor written into the node or leaf list twice, in place of another
 * of the same kind (so every position still matches its record): refused,
 * as a fresh allocator refuses it, not bound at two addresses. */
static void test_listed_twice_in_place_of_another(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *u = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64), *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    tg_set_input(u);
    tg_set_input(x);
    struct tg_tensor *a = tg_scale(ctx, x, 2.0f), *b = tg_scale(ctx, x, 2.0f);
    tg_set_output(a);
    tg_set_output(b);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, u)); /* read by no node */
    CHECK_OK(tg_graph_add_leaf(g, x));
    CHECK_OK(tg_graph_add_node(g, a));
    CHECK_OK(tg_graph_add_node(g, b));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    struct tg_tensor **slots[2] = {&g->leafs[0], &g->nodes[0]};
    struct tg_tensor *twice[2] = {x, b};
    for (int k = 0; k < 2; k++) {
        struct tg_tensor *keep = *slots[k];
        *slots[k] = twice[k];
        CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
        CHECK_ERR_HAS("listed twice");
        tg_gallocr *fresh = tg_gallocr_new(bt);
        CHECK_STATUS(tg_gallocr_alloc_graph(fresh, g), TG_ERR_INVALID);
        tg_gallocr_free(fresh);
        *slots[k] = keep;
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    }
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A NULL entry written into the node or leaf list: refused, as a fresh
 * allocator refuses it, not read (the replays crashed). */
static void test_null_entry(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    struct tg_context *ctx = new_context();
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    tg_set_input(x);
    struct tg_tensor *z = tg_sqr(ctx, tg_scale(ctx, x, 2.0f));
    tg_set_output(z);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, z));
    tg_gallocr *ga = tg_gallocr_new(bt);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    for (int round = 0; round < 4; round++) { /* enough binds of the same graph to be imaged */
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    }
    struct tg_tensor **lists[2] = {&g->nodes[0], &g->leafs[0]};
    for (int k = 0; k < 2; k++) {
        struct tg_tensor *keep = *lists[k];
        *lists[k] = NULL;
        CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
        tg_gallocr *fresh = tg_gallocr_new(bt);
        CHECK_STATUS(tg_gallocr_alloc_graph(fresh, g), TG_ERR_INVALID);
        *lists[k] = keep;
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        tg_gallocr_free(fresh);
    }
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A listed view of an external leaf (a KV cache's window) moved a row on per
 * token, as n_past moves it: the plan does not depend on where a window of
 * memory it does not own sits, so each token replays the recorded plan and
 * binds the window at its new offset.  The offset was part of the record:
 * one buffer re-planned every token, two buffers refused the graph
 * (TG_ERR_NEEDS_RESERVE), where ggml binds it. */
static void test_moving_window_of_an_external_root_replays(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    for (int n_ids = 1; n_ids <= 2; n_ids++) {
        struct tg_context *ctx = new_context();
        struct tg_tensor *kv = tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 8);
        struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
        tg_set_input(x);
        struct tg_tensor *w = tg_view_1d(ctx, kv, 16, 0);
        struct tg_tensor *y = tg_sum_rows(ctx, tg_add(ctx, w, tg_scale(ctx, x, 2.0f)));
        tg_set_output(y);
        struct tg_graph *g = tg_graph_new(16);
        CHECK_OK(tg_graph_build_forward_expand(g, y));
        tg_buffer *cache = tg_buft_alloc_buffer(bt, tg_nbytes(kv));
        CHECK_OK(tg_tensor_bind(kv, cache, tg_buffer_get_base(cache)));
        CHECK_OK(tg_tensor_view_bind(w));
        tg_buffer_type *bufts[2] = {bt, bt};
        int node_ids[16] = {0}, leaf_ids[16] = {0};
        for (int i = 0; i < g->n_nodes; i++) node_ids[i] = i % n_ids;
        tg_gallocr *ga = tg_gallocr_new_n(bufts, n_ids);
        CHECK_OK(tg_gallocr_reserve_n(ga, g, node_ids, leaf_ids));
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        struct tg_gallocr_stats before;
        tg_gallocr_get_stats(ga, &before);
        for (int pos = 1; pos < 8; pos++) {
            w->view_offs = (size_t)pos * kv->nb[1];
            if (pos % 2) CHECK_OK(tg_tensor_view_bind(w)); /* else left where it was: the allocator binds it */
            CHECK_OK(tg_gallocr_alloc_graph(ga, g));
            CHECK(w->buffer == cache && w->data == (char *)kv->data + w->view_offs);
        }
        struct tg_gallocr_stats after;
        tg_gallocr_get_stats(ga, &after);
        CHECK_MSG(after.n_plans == before.n_plans && after.n_allocs_general == before.n_allocs_general,
                  "%d buffer id(s): %d plans and %d general binds for 7 moved windows", n_ids,
                  (int)(after.n_plans - before.n_plans), (int)(after.n_allocs_general - before.n_allocs_general));
        tg_gallocr_free(ga);
        tg_buffer_free(cache);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

int main(void) {
    test_unlisted_view_left_behind();
    test_view_grown_past_its_root();
    test_view_of_a_shrunk_external_root();
    test_input_leaf_in_another_plans_memory();
    test_null_entry();
    test_result_leaf_of_another_plan_replays();
    test_listed_view_of_unlisted_root_without_memory();
    test_listed_twice_in_place_of_another();
    test_moving_window_of_an_external_root_replays();
    return tg_test_finish();
}

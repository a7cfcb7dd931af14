/* One token's graph for the allocator's replay tests (test_alloc_vouched,
 * test_alloc_unchanged): x, an input the plan places, and a weight w with
 * memory of its own (a buffer of weights_buft, usage WEIGHTS); a view of
 * their sum, an in-place scale and activation, a copy of the view, an
 * output.  width sets the shapes. */
#ifndef TEST_TOKEN_GRAPH_H
#define TEST_TOKEN_GRAPH_H

#include "test_alloc_buft.h"
#include "tg_test.h"

struct test_token_graph {
    struct tg_context *ctx;
    struct tg_tensor *x, *w, *sum, *view, *scaled, *act, *half, *out;
    struct tg_graph *graph;
    tg_buffer *weights;
};

static inline void test_token_graph_build(struct test_token_graph *tg, tg_buffer_type *weights_buft, int64_t width) {
    tg->ctx = test_ctx();
    tg->x = test_f32(tg->ctx, "x", width, true);
    tg->w = test_f32(tg->ctx, "w", width, false);
    enum tg_status st = TG_OK;
    tg->weights = tg_alloc_ctx_tensors(tg->ctx, weights_buft, &st); /* binds x and w */
    CHECK(tg->weights != NULL);
    tg_buffer_set_usage(tg->weights, TG_BUFFER_USAGE_WEIGHTS);
    /* x is an input the plan places: unbind it again */
    tg->x->data = NULL;
    tg->x->buffer = NULL;
    tg->sum = test_named(tg_add(tg->ctx, tg->x, tg->w), "sum");
    tg->view = test_named(tg_view_1d(tg->ctx, tg->sum, width / 2, 0), "view");
    tg->scaled = test_named(tg_scale(tg->ctx, tg->sum, 2.0f), "scaled");
    tg->act = test_named(tg_unary(tg->ctx, tg->scaled, TG_UNARY_SILU), "act");
    tg->half = test_named(tg_cont(tg->ctx, tg->view), "half");
    tg->out = test_named(tg_add(tg->ctx, tg->act, tg->w), "out");
    tg_set_output(tg->out);
    tg->graph = tg_graph_new(256);
    CHECK_OK(tg_graph_build_forward_expand(tg->graph, tg->out));
    CHECK_OK(tg_graph_build_forward_expand(tg->graph, tg->half));
}

static inline void test_token_graph_free(struct test_token_graph *tg) {
    tg_graph_free(tg->graph);
    tg_buffer_free(tg->weights);
    tg_context_free(tg->ctx);
}

#endif

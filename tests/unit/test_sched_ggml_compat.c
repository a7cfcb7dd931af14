/* What a port from ggml relies on (docs/porting-from-ggml.md):
 * tg_sched_get_n_splits answers after reserve (llama.cpp prints it there) and
 * after reset, as ggml's does; a successful reserve / alloc_graph / compute
 * leaves no older failure in tg_last_error(), in the scheduler and in the
 * graph allocator. */
#include "sched_fixture.h"

int main(void) {
    /* gpu0 runs mul only: mul (weights on gpu0) -> add (cpu) -> mul (gpu0) makes three splits */
    enum tg_op ops[] = {TG_OP_MUL};
    tg_backend *backends[2] = {fx_sim("gpu0", false, ops, 1), tg_backend_cpu_new()};
    struct tg_context *wctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *w = tg_new_tensor_1d(wctx, TG_TYPE_F32, 16);
    tg_buffer *wbuf = fx_alloc(wctx, backends[0], TG_BUFFER_USAGE_WEIGHTS);
    CHECK(wbuf != NULL);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    tg_set_input(x);
    struct tg_tensor *a = tg_mul(ctx, x, w);
    struct tg_tensor *b = tg_add(ctx, a, a);
    struct tg_tensor *c = tg_mul(ctx, b, w);
    tg_set_output(c);
    struct tg_graph *g = tg_graph_new(64);
    CHECK_OK(tg_graph_build_forward_expand(g, c));

    tg_sched *sched = tg_sched_new(backends, NULL, 2, 64, false, false);
    CHECK(sched != NULL);
    CHECK_OK(tg_sched_reserve(sched, g));
    int after_reserve = tg_sched_get_n_splits(sched);
    CHECK_MSG(after_reserve == 3, "%d splits after reserve, want 3", after_reserve);
    CHECK_OK(tg_sched_alloc_graph(sched, g));
    CHECK(tg_sched_get_n_splits(sched) == after_reserve);

    /* a failure, then a success: the message does not outlive it */
    CHECK_STATUS(tg_sched_alloc_graph(sched, g), TG_ERR_INVALID); /* already allocated */
    CHECK(tg_last_error()[0] != '\0');
    tg_sched_reset(sched);
    CHECK_MSG(tg_sched_get_n_splits(sched) == after_reserve, "%d splits after reset", tg_sched_get_n_splits(sched));
    CHECK_OK(tg_sched_alloc_graph(sched, g));
    CHECK_MSG(tg_last_error()[0] == '\0', "stale message after a successful alloc_graph: '%s'", tg_last_error());
    CHECK_STATUS(tg_sched_reserve(sched, NULL), TG_ERR_INVALID);
    CHECK_OK(tg_sched_reserve(sched, g));
    CHECK_MSG(tg_last_error()[0] == '\0', "stale message after a successful reserve: '%s'", tg_last_error());

    /* the graph allocator alone */
    tg_gallocr *galloc = tg_gallocr_new(tg_cpu_buffer_type());
    CHECK_STATUS(tg_gallocr_alloc_graph(galloc, NULL), TG_ERR_INVALID);
    CHECK(tg_last_error()[0] != '\0');
    struct tg_context *ctx2 = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *y = tg_scale(ctx2, tg_new_tensor_1d(ctx2, TG_TYPE_F32, 8), 2.0f);
    struct tg_graph *g2 = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g2, y));
    CHECK_OK(tg_gallocr_reserve(galloc, g2));
    CHECK_MSG(tg_last_error()[0] == '\0', "stale message after a successful gallocr reserve: '%s'", tg_last_error());
    CHECK_STATUS(tg_gallocr_alloc_graph(galloc, NULL), TG_ERR_INVALID);
    CHECK_OK(tg_gallocr_alloc_graph(galloc, g2));
    CHECK_MSG(tg_last_error()[0] == '\0', "stale message after a successful alloc_graph: '%s'", tg_last_error());

    tg_gallocr_free(galloc);
    tg_graph_free(g2);
    tg_context_free(ctx2);
    tg_sched_free(sched);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_buffer_free(wbuf);
    tg_context_free(wctx);
    tg_backend_free(backends[0]);
    tg_backend_free(backends[1]);
    return tg_test_finish();
}

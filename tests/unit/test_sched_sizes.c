/* What a scheduler's graph_size covers, and what its introspection reports
 * while a graph is allocated, as ggml_backend_sched does. */
#include "sched_fixture.h"

enum { LAYERS = 20 };

/* LAYERS rounds of a matmul on a device weight, an add of the input (both on
 * the device), a matmul on a CPU weight: 3 nodes per round, 3 leafs, 2
 * splits per round; the device splits copy the input and the CPU's result,
 * the CPU splits the device's. */
static struct tg_graph *layered_graph(struct tg_context *ctx, struct tg_tensor *wd, struct tg_tensor *wc,
                                      struct tg_tensor **x) {
    *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 4);
    tg_set_input(*x);
    struct tg_tensor *h = *x;
    for (int l = 0; l < LAYERS; l++) h = tg_mul_mat(ctx, wc, tg_add(ctx, tg_mul_mat(ctx, wd, h), *x));
    tg_set_output(h);
    struct tg_graph *g = tg_graph_new(4 * LAYERS);
    CHECK_OK(tg_graph_build_forward_expand(g, h));
    return g;
}

/* graph_size = nodes + leafs: ggml schedules this graph with pipeline
 * copies; the scheduler's table was sized 4 x graph_size and each split
 * input adds a dependency view and four copies, so it was full. */
static void test_graph_size_holds_pipeline_copies(void) {
    const enum tg_op ops[] = {TG_OP_MUL_MAT, TG_OP_ADD};
    tg_backend *dev = fx_sim("dev0", false, ops, 2), *cpu = tg_backend_cpu_new();
    tg_backend *backends[2] = {dev, cpu};
    struct tg_context *wctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *wd = tg_new_tensor_2d(wctx, TG_TYPE_F32, 16, 16);
    tg_buffer *wdb = fx_alloc(wctx, dev, TG_BUFFER_USAGE_WEIGHTS);
    struct tg_context *cctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *wc = tg_new_tensor_2d(cctx, TG_TYPE_F32, 16, 16);
    tg_buffer *wcb = fx_alloc(cctx, cpu, TG_BUFFER_USAGE_WEIGHTS);
    fx_fill(wd, 1);
    fx_fill(wc, 2);
    for (int parallel = 0; parallel < 2; parallel++) {
        /* a graph of its own each time: a freed scheduler leaves its tensors in freed memory */
        struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
        struct tg_tensor *x;
        struct tg_graph *g = layered_graph(ctx, wd, wc, &x);
        const size_t graph_size = (size_t)(g->n_nodes + g->n_leafs);
        tg_sched *s = tg_sched_new(backends, NULL, 2, graph_size, parallel, true);
        CHECK(s != NULL);
        if (s) {
            CHECK_MSG(tg_sched_alloc_graph(s, g) == TG_OK, "parallel %d, graph_size %zu: %s", parallel, graph_size,
                      tg_last_error());
            CHECK_MSG(tg_sched_get_n_splits(s) == 2 * LAYERS, "%d splits", tg_sched_get_n_splits(s));
            tg_sched_free(s);
        }
        tg_graph_free(g);
        tg_context_free(ctx);
    }
    tg_buffer_free(wdb);
    tg_buffer_free(wcb);
    tg_context_free(wctx);
    tg_context_free(cctx);
    tg_backend_free(dev);
    tg_backend_free(cpu);
}

/* A pin set while a graph is allocated applies to the next schedule; until
 * then the split count and the graph copy are still those of the graph
 * allocated (they were gone at once: 0 splits, no copy, also after the
 * compute that ran them and after the reset). */
static void test_pin_keeps_the_allocated_schedule(void) {
    const enum tg_op ops[] = {TG_OP_MUL_MAT};
    tg_backend *dev = fx_sim("dev0", false, ops, 1), *cpu = tg_backend_cpu_new();
    tg_backend *backends[2] = {dev, cpu};
    struct tg_context *wctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *w = tg_new_tensor_2d(wctx, TG_TYPE_F32, 16, 16);
    tg_buffer *wb = fx_alloc(wctx, dev, TG_BUFFER_USAGE_WEIGHTS);
    fx_fill(w, 3);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 4);
    tg_set_input(x);
    struct tg_tensor *z = tg_sqr(ctx, tg_mul_mat(ctx, w, x));
    tg_set_output(z);
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, z));
    tg_sched *s = tg_sched_new(backends, NULL, 2, 64, false, true);
    CHECK_OK(tg_sched_alloc_graph(s, g));
    CHECK(tg_sched_get_n_splits(s) == 2);
    struct tg_graph *copy = tg_sched_get_graph_copy(s);
    CHECK(copy != NULL);
    tg_sched_set_tensor_backend(s, z, cpu);
    CHECK_MSG(tg_sched_get_n_splits(s) == 2, "%d splits after the pin", tg_sched_get_n_splits(s));
    CHECK(tg_sched_get_graph_copy(s) == copy);
    fx_fill(x, 4);
    CHECK_OK(tg_sched_graph_compute(s, g));
    CHECK(tg_sched_get_n_splits(s) == 2);
    tg_sched_reset(s);
    CHECK_MSG(tg_sched_get_n_splits(s) == 2, "%d splits after the reset (ggml: the last count)",
              tg_sched_get_n_splits(s));
    /* the pin holds on the next schedule */
    tg_sched_set_tensor_backend(s, z, cpu);
    CHECK_OK(tg_sched_alloc_graph(s, g));
    CHECK(tg_sched_get_tensor_backend(s, z) == cpu);
    tg_sched_free(s);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_buffer_free(wb);
    tg_context_free(wctx);
    tg_backend_free(dev);
    tg_backend_free(cpu);
}

int main(void) {
    test_graph_size_holds_pipeline_copies();
    test_pin_keeps_the_allocated_schedule();
    return tg_test_finish();
}

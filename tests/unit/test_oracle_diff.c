/* The differential machinery on its own: input filling from op-safe ranges,
 * sink/output selection and bit comparison.  A tiny interpreter in this file
 * (contiguous f32 scale, sqr, cont and same-shape add) stands in for a backend
 * so the test does not depend on the CPU kernels; the props use the real CPU. */
#include "tg-gen.h"
#include "tg-oracle.h"
#include "tg_test.h"

static bool tiny_supports(const struct tg_tensor *n, void *user) {
    (void)user;
    if (n->type != TG_TYPE_F32 || !tg_is_contiguous(n)) return false;
    switch (n->op) {
    case TG_OP_SCALE: case TG_OP_SQR: case TG_OP_CONT: return true;
    case TG_OP_ADD: return tg_are_same_shape(n->src[0], n->src[1]);
    default: return false;
    }
}

static enum tg_status tiny_compute(struct tg_graph *g, void *user) {
    int *n_runs = user;
    (*n_runs)++;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *n = g->nodes[i];
        float *d = n->data;
        const float *a = n->src[0]->data, *b = n->src[1] ? n->src[1]->data : NULL;
        float s = n->op == TG_OP_SCALE ? tg_get_op_param_f32(n, 0) : 0.0f;
        for (int64_t k = 0; k < tg_nelements(n); k++) {
            float x = a[k]; /* read before write: in-place safe */
            switch (n->op) {
            case TG_OP_SCALE: d[k] = x * s; break;
            case TG_OP_SQR: d[k] = x * x; break;
            case TG_OP_CONT: d[k] = x; break;
            case TG_OP_ADD: d[k] = x + b[k]; break;
            default: return tg_fail(TG_ERR_UNSUPPORTED, "tiny interpreter: op %s", tg_op_name(n->op));
            }
        }
    }
    return TG_OK;
}

struct side {
    struct tg_context *ctx;
    struct tg_graph *graph;
    struct tg_tensor *x, *y, *z, *out;
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_naive naive;
};

/* x -> y = scale(x) -> z = sqr(y) -> out = add(z, x) */
static void side_build(struct side *s, tg_buffer_type **bufts) {
    memset(s, 0, sizeof *s);
    s->ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    s->x = tg_new_tensor_1d(s->ctx, TG_TYPE_F32, 64);
    tg_set_name(s->x, "x");
    tg_set_input(s->x);
    s->y = tg_scale(s->ctx, s->x, 3.0f);
    tg_set_name(s->y, "y");
    s->z = tg_sqr(s->ctx, s->y);
    tg_set_name(s->z, "z");
    s->out = tg_add(s->ctx, s->z, s->x);
    tg_set_name(s->out, "out");
    s->graph = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(s->graph, s->out));
    CHECK_OK(tg_oracle_snapshot_take(s->graph, &s->snap));
    CHECK_OK(tg_oracle_liveness_build(s->graph, &s->snap, NULL, NULL, &s->lv));
    CHECK_OK(tg_oracle_naive_alloc(s->graph, &s->lv, bufts, 1, &s->naive));
}

static void side_free(struct side *s) {
    tg_oracle_naive_free(&s->naive);
    tg_oracle_liveness_free(&s->lv);
    tg_oracle_snapshot_free(&s->snap);
    tg_graph_free(s->graph);
    tg_context_free(s->ctx);
}

static void test_equal_and_corrupted(void) {
    struct tg_gen_buft bt;
    tg_gen_buft_init(&bt, "host", 64, 0, TG_OP_COUNT, 0);
    tg_buffer_type *bufts[1] = {&bt.buft};
    struct side real, ref;
    side_build(&real, bufts);
    side_build(&ref, bufts);
    int n_runs = 0;
    struct tg_oracle_diff_result res;

    CHECK_OK(tg_oracle_diff(real.graph, ref.graph, tiny_compute, tiny_supports, &n_runs, 7, &res));
    CHECK(res.computed && n_runs == 2);
    CHECK(res.n_compared == 1 && res.n_mismatched == 0); /* out: the output and only sink */

    /* z = sqr(y) on x's memory while out still reads x: the classic early reuse */
    CHECK_OK(tg_tensor_bind(real.z, real.x->buffer, real.x->data));
    CHECK_OK(tg_oracle_diff(real.graph, ref.graph, tiny_compute, tiny_supports, &n_runs, 7, &res));
    CHECK(res.computed && res.n_mismatched == 1);
    CHECK_MSG(strstr(res.message, "'out'") != NULL, "message: %s", res.message);

    /* z on y's memory is a legal in-place pair: equal again */
    CHECK_OK(tg_tensor_bind(real.z, real.y->buffer, real.y->data));
    CHECK_OK(tg_oracle_diff(real.graph, ref.graph, tiny_compute, tiny_supports, &n_runs, 7, &res));
    CHECK(res.n_mismatched == 0);

    /* a node the backend cannot run: nothing is computed */
    real.graph->nodes[0]->op = TG_OP_LOG;
    int before = n_runs;
    CHECK_OK(tg_oracle_diff(real.graph, ref.graph, tiny_compute, tiny_supports, &n_runs, 7, &res));
    CHECK(!res.computed && n_runs == before);
    real.graph->nodes[0]->op = TG_OP_SCALE;
    side_free(&real);
    side_free(&ref);
}

/* tiny_compute, then on the graph named by user the last element of the
 * last node is off: a difference past the first byte. */
static enum tg_status compute_last_element_off(struct tg_graph *g, void *user) {
    int n_runs = 0;
    enum tg_status st = tiny_compute(g, &n_runs);
    if (st == TG_OK && g == user) {
        struct tg_tensor *last = g->nodes[g->n_nodes - 1];
        ((float *)last->data)[tg_nelements(last) - 1] += 1.0f;
    }
    return st;
}

static void test_difference_in_the_last_byte(void) {
    struct tg_gen_buft bt;
    tg_gen_buft_init(&bt, "host", 64, 0, TG_OP_COUNT, 0);
    tg_buffer_type *bufts[1] = {&bt.buft};
    struct side real, ref;
    side_build(&real, bufts);
    side_build(&ref, bufts);
    struct tg_oracle_diff_result res;
    CHECK_OK(tg_oracle_diff(real.graph, ref.graph, compute_last_element_off, tiny_supports, real.graph, 7, &res));
    CHECK(res.computed && res.n_compared == 1 && res.n_mismatched == 1);
    CHECK_MSG(strstr(res.message, "'out'") && strstr(res.message, "of 256"), "message: %s", res.message);
    side_free(&real);
    side_free(&ref);
}

/* Filled inputs: f32 in [0.5, 1.5), row indices below the rows of the table
 * (get_rows) or of the destination (set_rows). */
static void test_fill_ranges(void) {
    struct tg_gen_buft bt;
    tg_gen_buft_init(&bt, "host", 64, 0, TG_OP_COUNT, 0);
    tg_buffer_type *bufts[1] = {&bt.buft};
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *table = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 5);
    struct tg_tensor *rows = tg_new_tensor_1d(ctx, TG_TYPE_I32, 300);
    struct tg_tensor *got = tg_get_rows(ctx, table, rows);
    struct tg_tensor *dst = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 3);
    struct tg_tensor *vals = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 300);
    struct tg_tensor *dst_rows = tg_new_tensor_1d(ctx, TG_TYPE_I32, 300);
    struct tg_tensor *written = tg_set_rows(ctx, dst, vals, dst_rows);
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, got));
    CHECK_OK(tg_graph_build_forward_expand(g, written));
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_naive naive;
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    CHECK_OK(tg_oracle_naive_alloc(g, &lv, bufts, 1, &naive));
    CHECK_OK(tg_oracle_fill_inputs(g, 99));
    int32_t idx[300];
    CHECK_OK(tg_tensor_get(rows, idx, 0, sizeof idx));
    bool in_range = true, saw_top = false;
    for (int i = 0; i < 300; i++) {
        in_range = in_range && idx[i] >= 0 && idx[i] < 5;
        saw_top = saw_top || idx[i] == 4;
    }
    CHECK(in_range && saw_top);
    CHECK_OK(tg_tensor_get(dst_rows, idx, 0, sizeof idx));
    in_range = true, saw_top = false;
    for (int i = 0; i < 300; i++) {
        in_range = in_range && idx[i] >= 0 && idx[i] < 3;
        saw_top = saw_top || idx[i] == 2;
    }
    CHECK(in_range && saw_top);
    float v[40];
    CHECK_OK(tg_tensor_get(table, v, 0, sizeof v));
    bool safe = true;
    for (int i = 0; i < 40; i++) safe = safe && v[i] >= 0.5f && v[i] < 1.5f;
    CHECK(safe);
    float w[40];
    CHECK_OK(tg_oracle_fill_inputs(g, 99)); /* same seed, same values */
    CHECK_OK(tg_tensor_get(table, w, 0, sizeof w));
    CHECK(memcmp(v, w, sizeof v) == 0);
    CHECK_OK(tg_oracle_fill_inputs(g, 100));
    CHECK_OK(tg_tensor_get(table, w, 0, sizeof w));
    CHECK(memcmp(v, w, sizeof v) != 0);
    tg_oracle_naive_free(&naive);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Leaf views made as ggml_view_tensor makes them (op none) are not filled,
 * their roots are: a root outside the graph (ggml_view_tensor's leaf does
 * not bring it in) through its first view, once; a computed root not at all
 * (its memory may belong to another tensor before the compute). */
static void test_fill_none_views(void) {
    struct tg_gen_buft bt;
    tg_gen_buft_init(&bt, "host", 64, 0, TG_OP_COUNT, 0);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *outside = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    struct tg_tensor *computed = tg_sqr(ctx, x);
    struct tg_tensor *v1 = tg_view_1d(ctx, outside, 16, 0), *v2 = tg_view_1d(ctx, outside, 8, 32);
    struct tg_tensor *vc = tg_view_1d(ctx, computed, 16, 0);
    struct tg_tensor *views[3] = {v1, v2, vc};
    for (int i = 0; i < 3; i++) {
        views[i]->op = TG_OP_NONE;
        views[i]->src[0] = NULL;
    }
    struct tg_tensor *y = tg_add(ctx, tg_add(ctx, v1, vc), tg_concat(ctx, v2, v2, 0));
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, computed));
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    CHECK(!tg_graph_contains(g, outside) && tg_graph_contains(g, v1));
    enum tg_status st;
    tg_buffer *buf = tg_alloc_ctx_tensors(ctx, &bt.buft, &st);
    CHECK(buf != NULL);
    for (int i = 0; buf && i < 3; i++) CHECK_OK(tg_tensor_view_bind(views[i]));
    float before[16], after[16];
    for (int i = 0; i < 16; i++) before[i] = -7.0f;
    CHECK_OK(tg_tensor_set(outside, before, 0, sizeof before));
    CHECK_OK(tg_tensor_set(computed, before, 0, sizeof before));
    CHECK_OK(tg_oracle_fill_inputs(g, 5));
    CHECK_OK(tg_tensor_get(outside, after, 0, sizeof after));
    int filled = 0;
    for (int i = 0; i < 16; i++) filled += after[i] != -7.0f;
    CHECK_MSG(filled == 16, "the root outside the graph: %d of 16 values filled", filled);
    CHECK_OK(tg_tensor_get(computed, after, 0, sizeof after));
    CHECK_MSG(memcmp(before, after, sizeof before) == 0, "a computed root's memory was written before the compute");
    tg_buffer_free(buf);
    tg_graph_free(g);
    tg_context_free(ctx);
}

int main(void) {
    test_difference_in_the_last_byte();
    test_equal_and_corrupted();
    test_fill_ranges();
    test_fill_none_views();
    return tg_test_finish();
}

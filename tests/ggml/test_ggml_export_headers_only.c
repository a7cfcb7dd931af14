/* The export compiled as a user with ggml's public headers only compiles it
 * (TG_EXPORT_NO_GGML_IMPL; label ggml): ggml's leaf list is out of reach, so
 * leafs are written in the order the nodes first read them, and the file says
 * so.  The graph is the same: every node's op, shape and sources, the leafs
 * as a set. */
#include "tg-ggml-export.h"
#include "tg-io.h"
#include "tg_test.h"

int main(void) {
    struct ggml_init_params p = {.mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead(), .no_alloc = true};
    struct ggml_context *ctx = ggml_init(p);
    /* ggml lists leafs as its depth-first visit meets them: a, b, c; first use by node order is b, c, a */
    struct ggml_tensor *a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8), *b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    struct ggml_tensor *c = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_name(a, "a"), ggml_set_name(b, "b"), ggml_set_name(c, "c");
    struct ggml_tensor *bc = ggml_mul(ctx, ggml_scale(ctx, b, 2.0f), c);
    struct ggml_tensor *out = ggml_add(ctx, a, bc);
    ggml_set_name(out, "out");
    ggml_set_output(out);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    size_t len = 0;
    char *text = tg_ggml_export_mem(g, NULL, &len);
    CHECK_MSG(text != NULL, "%s", tg_ggml_export_error());
    struct tg_file *f = NULL;
    if (text) CHECK_OK(tg_file_parse(text, len, "headers-only.tg", &f));
    if (f) {
        CHECK(strstr(text, "\nmeta leaf_order=first_use\n") != NULL);
        CHECK(f->graph->n_leafs == 3 && f->graph->n_nodes == ggml_graph_n_nodes(g));
        CHECK(strcmp(f->graph->leafs[0]->name, "b") == 0 && strcmp(f->graph->leafs[1]->name, "c") == 0 &&
              strcmp(f->graph->leafs[2]->name, "a") == 0);
        for (int i = 0; i < f->graph->n_nodes; i++) {
            const struct tg_tensor *t = f->graph->nodes[i];
            const struct ggml_tensor *x = ggml_graph_node(g, i);
            CHECK(strcmp(t->name, x->name) == 0 && t->ne[0] == x->ne[0]);
            for (int k = 0; k < 2; k++) CHECK(!t->src[k] == !x->src[k] && (!t->src[k] || strcmp(t->src[k]->name, x->src[k]->name) == 0));
        }
        CHECK(f->graph->nodes[f->graph->n_nodes - 1]->flags & TG_FLAG_OUTPUT);
    }
    printf("headers only: %d leafs in first-use order, %d nodes\n", f ? f->graph->n_leafs : 0, f ? f->graph->n_nodes : 0);
    tg_file_free(f);
    free(text);
    ggml_free(ctx);

    /* a graph of one leaf, and a leaf whose name holds '#': found all the same */
    p.mem_size = 64 * ggml_tensor_overhead() + 2 * ggml_graph_overhead();
    ctx = ggml_init(p);
    a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_name(a, "only");
    g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, a);
    text = tg_ggml_export_mem(g, NULL, &len);
    CHECK_MSG(text && strstr(text, "leaf 0 f32 8 1 1 1 none name=only\n"), "one leaf: %s", text ? text : tg_ggml_export_error());
    free(text);
    b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_name(b, "w#1");
    g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ggml_scale(ctx, b, 2.0f));
    text = tg_ggml_export_mem(g, NULL, &len);
    f = NULL;
    CHECK_MSG(text != NULL, "'#' in a name: %s", tg_ggml_export_error());
    if (text) CHECK_OK(tg_file_parse(text, len, "hash.tg", &f));
    tg_file_free(f);
    free(text);
    ggml_free(ctx);
    return tg_test_finish();
}

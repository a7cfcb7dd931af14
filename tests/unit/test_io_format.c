/* What the reader makes of each construct of the format, and the writer's
 * canonical spelling of it: views resolved to their roots, empty source slots,
 * self-sources, params in decimal/hex, flags, backends/placements/pins, ignored
 * x- keys, comments and CRLF, sparse ids, name sanitizing, nb= only when not
 * contiguous; plain graphs written from constructors; writer failures. */
#include "tg-cpu.h"
#include "tg-io.h"
#include "tg_test.h"

#include <unistd.h>

/* Reads `in`, expects success, and compares the canonical text with `want`. */
static struct tg_file *read_expect_canonical(const char *in, const char *want) {
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_parse(in, strlen(in), "in.tg", &f));
    if (!f) return NULL;
    size_t len = 0;
    char *out = tg_file_write_mem(f, &len);
    CHECK_MSG(out && len == strlen(want) && strcmp(out, want) == 0, "canonical text:\n%s\nwanted:\n%s", out ? out : tg_last_error(),
              want);
    /* And the canonical text is its own canonical form. */
    struct tg_file *again = out ? tg_file_read_mem(out, len, "canonical.tg") : NULL;
    char *out2 = again ? tg_file_write_mem(again, NULL) : NULL;
    CHECK(out2 && strcmp(out2, want) == 0);
    free(out2);
    tg_file_free(again);
    free(out);
    return f;
}

static void views_and_sources(void) {
    struct tg_file *f = read_expect_canonical(
        "# a comment\n\ntgraph 1\r\n"
        "leaf 10 f32 16 4 1 1 none name=a\r\n"
        "node 5 f32 16 2 1 1 view src=10 view=10:64 name=rows\n"
        "node 700 f32 8 1 1 1 view src=5 view=5:16 x-origin=test name=part\n"
        "node 3 f32 4 16 1 1 transpose src=10 view=10:0 nb=64,4,256,256 params=1,0,2,3 name=t\n"
        "node 4 f16 16 4 1 1 cpy src=10,4 name=self\n"
        "leaf 11 f32 1 1 1 1 none name=sinks\n"
        "node 6 f32 16 4 1 1 soft_max src=10,-,11 name=sm\n",
        "tgraph 1\n"
        "leaf 10 f32 16 4 1 1 none name=a\n"
        "node 5 f32 16 2 1 1 view src=10 view=10:64 name=rows\n"
        "node 700 f32 8 1 1 1 view src=5 view=10:80 name=part\n"
        "node 3 f32 4 16 1 1 transpose src=10 view=10:0 nb=64,4,256,256 params=1,0,2,3 name=t\n"
        "node 4 f16 16 4 1 1 cpy src=10,4 name=self\n"
        "leaf 11 f32 1 1 1 1 none name=sinks\n"
        "node 6 f32 16 4 1 1 soft_max src=10,-,11 name=sm\n");
    if (!f) return;
    struct tg_tensor *a = f->tensors[0].tensor, *part = f->tensors[2].tensor, *self = f->tensors[4].tensor;
    struct tg_tensor *sm = f->tensors[6].tensor;
    CHECK(part->view_src == a && part->view_offs == 80);
    CHECK(f->tensors[2].id == 700 && f->tensors[1].id == 5);
    CHECK(self->src[0] == a && self->src[1] == self);
    CHECK(sm->src[1] == NULL && sm->src[2] == f->tensors[5].tensor);
    CHECK(f->tensors[3].tensor->nb[0] == 64 && f->tensors[3].tensor->op_params[0] == 1);
    CHECK(f->graph->n_leafs == 2 && f->graph->n_nodes == 5 && f->graph->nodes[3] == self);
    tg_file_free(f);
}

static void params_flags_names(void) {
    struct tg_file *f = read_expect_canonical(
        "tgraph 1\n"
        "leaf 0 f32 4 1 1 1 none flags=output,input,param,loss name=x(1)\n"
        "node 1 f32 4 1 1 1 scale src=0 params=1065353216,0X7,-1,65535,65536,0,0 name=s\n"
        "node 2 f32 4 1 1 1 sqr src=1 flags=nocompute,output name=q\n",
        "tgraph 1\n"
        "leaf 0 f32 4 1 1 1 none flags=input,output,param,loss name=x_1_\n"
        "node 1 f32 4 1 1 1 scale src=0 params=0x3f800000,7,0xffffffff,65535,0x10000 name=s\n"
        "node 2 f32 4 1 1 1 sqr src=1 flags=output,nocompute name=q\n");
    if (!f) return;
    struct tg_tensor *s = f->tensors[1].tensor;
    CHECK(tg_get_op_param_f32(s, 0) == 1.0f && s->op_params[2] == -1 && s->op_params[4] == 65536);
    CHECK(f->tensors[0].tensor->flags == (TG_FLAG_INPUT | TG_FLAG_OUTPUT | TG_FLAG_PARAM | TG_FLAG_LOSS));
    CHECK(f->tensors[2].tensor->flags == (TG_FLAG_OUTPUT | TG_FLAG_NO_COMPUTE));
    /* Names are kept as read; the writer maps characters outside [A-Za-z0-9_.#:-] to '_'. */
    CHECK(strcmp(f->tensors[0].tensor->name, "x(1)") == 0);
    tg_set_name(f->tensors[1].tensor, "a b/c#d:e.f-g (reshaped)");
    char *out = tg_file_write_mem(f, NULL);
    CHECK(out && strstr(out, " name=a_b_c#d:e.f-g__reshaped_\n") && strstr(out, " name=x_1_\n"));
    free(out);
    tg_file_free(f);
}

static void backends_and_placements(void) {
    struct tg_file *f = read_expect_canonical(
        "tgraph 1\nbackends gpu0,gpu1,cpu\nmeta model=test x=1 y\n"
        "leaf 0 q8_0 64 2 1 1 none buf=weights@gpu1 name=w\n"
        "leaf 1 f32 64 1 1 1 none buf=weights@cpu name=norm\n"
        "leaf 2 f16 64 8 1 1 none buf=data@gpu0 name=cache\n"
        "leaf 3 f32 64 1 1 1 none flags=input backend=gpu0 name=in\n"
        "node 4 f32 2 1 1 1 mul_mat src=0,3 backend=gpu1 name=out\n",
        "tgraph 1\nbackends gpu0,gpu1,cpu\nmeta model=test x=1 y\n"
        "leaf 0 q8_0 64 2 1 1 none buf=weights@gpu1 name=w\n"
        "leaf 1 f32 64 1 1 1 none buf=weights name=norm\n"
        "leaf 2 f16 64 8 1 1 none buf=data@gpu0 name=cache\n"
        "leaf 3 f32 64 1 1 1 none flags=input backend=gpu0 name=in\n"
        "node 4 f32 2 1 1 1 mul_mat src=0,3 backend=gpu1 name=out\n");
    if (!f) return;
    CHECK(f->n_backends == 3 && strcmp(f->backend_names[1], "gpu1") == 0);
    CHECK(f->n_meta == 1 && strcmp(f->meta[0], "model=test x=1 y") == 0);
    CHECK(f->tensors[0].placement == TG_PLACE_WEIGHTS && f->tensors[0].placement_backend == 1);
    CHECK(f->tensors[1].placement == TG_PLACE_WEIGHTS && f->tensors[1].placement_backend == 2);
    CHECK(f->tensors[2].placement == TG_PLACE_DATA && f->tensors[2].placement_backend == 0);
    CHECK(f->tensors[3].placement == TG_PLACE_NONE && f->tensors[3].pinned_backend == 0);
    CHECK(f->tensors[4].pinned_backend == 1 && f->tensors[0].pinned_backend == -1);
    CHECK(tg_nbytes(f->tensors[0].tensor) == 2 * 2 * 34);
    tg_file_free(f);

    /* No backends line: a single "cpu" backend, written back without the line. */
    f = read_expect_canonical("tgraph 1\nleaf 0 f32 4 1 1 1 none buf=data@cpu\n",
                              "tgraph 1\nleaf 0 f32 4 1 1 1 none buf=data\n");
    if (f) CHECK(f->n_backends == 1 && strcmp(f->backend_names[0], "cpu") == 0 && f->tensors[0].placement_backend == 0);
    tg_file_free(f);
}

/* Equal after the writer's mapping of other characters to '_'. */
static bool same_sanitized_name(const char *written, const char *orig) {
    if (strlen(written) != strlen(orig)) return false;
    for (size_t i = 0; orig[i]; i++) {
        bool kept = strchr("_.#:-", orig[i]) || (orig[i] >= '0' && orig[i] <= '9') ||
                    (orig[i] >= 'a' && orig[i] <= 'z') || (orig[i] >= 'A' && orig[i] <= 'Z');
        if (written[i] != (kept ? orig[i] : '_')) return false;
    }
    return true;
}

/* A plain graph built with constructors is written with positions as ids, leafs
 * first, and reads back to the same structure. */
static void plain_graph(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 6);
    struct tg_tensor *w = tg_new_tensor_2d(ctx, TG_TYPE_F16, 8, 4);
    tg_set_name(x, "x");
    tg_set_input(x);
    tg_set_name(w, "w");
    struct tg_tensor *y = tg_mul_mat(ctx, w, x);              /* [4, 6] */
    struct tg_tensor *r = tg_reshape_3d(ctx, y, 2, 2, 6);
    struct tg_tensor *p = tg_permute(ctx, r, 1, 0, 2, 3);
    struct tg_tensor *c = tg_cont(ctx, p);
    struct tg_tensor *s = tg_scale(ctx, c, 0.5f);
    tg_set_output(s);
    struct tg_graph *g = tg_graph_new(64);
    CHECK_OK(tg_graph_build_forward_expand(g, s));
    size_t len = 0;
    char *text = tg_graph_write_mem(g, &len);
    CHECK_MSG(text != NULL, "%s", tg_last_error());
    struct tg_file *f = text ? tg_file_read_mem(text, len, "plain.tg") : NULL;
    CHECK_MSG(f != NULL, "%s", tg_last_error());
    if (f) {
        CHECK(f->graph->n_leafs == g->n_leafs && f->graph->n_nodes == g->n_nodes);
        for (int i = 0; i < f->n_tensors && i < g->n_leafs + g->n_nodes; i++) {
            const struct tg_tensor *orig = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
            const struct tg_tensor *back = f->tensors[i].tensor;
            CHECK(f->tensors[i].id == i && f->tensors[i].is_leaf == (i < g->n_leafs));
            CHECK(back->type == orig->type && back->op == orig->op && back->flags == orig->flags);
            CHECK(memcmp(back->ne, orig->ne, sizeof back->ne) == 0 && memcmp(back->nb, orig->nb, sizeof back->nb) == 0);
            CHECK(memcmp(back->op_params, orig->op_params, sizeof back->op_params) == 0);
            CHECK(same_sanitized_name(back->name, orig->name) && back->view_offs == orig->view_offs);
            CHECK((back->view_src == NULL) == (orig->view_src == NULL));
            for (int k = 0; k < TG_MAX_SRC; k++) CHECK((back->src[k] == NULL) == (orig->src[k] == NULL));
        }
        CHECK(text && strstr(text, " nb=") != NULL); /* the permute */
        char *again = tg_file_write_mem(f, NULL);
        CHECK(again && strcmp(again, text) == 0);
        free(again);
    }
    tg_file_free(f);
    free(text);

    /* A node whose source is in neither list cannot be written re-readably. */
    struct tg_graph *partial = tg_graph_new(8);
    CHECK_OK(tg_graph_add_node(partial, s));
    CHECK(tg_graph_write_mem(partial, NULL) == NULL);
    CHECK_ERR_HAS("not part of the written graph");
    CHECK_STATUS(tg_graph_write("/tmp/never-written.tg", partial), TG_ERR_INVALID);
    tg_graph_free(partial);

    /* Files: written, read back; an unwritable path is TG_ERR_IO naming it. */
    char path[] = "/tmp/tg_io_format_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK_OK(tg_graph_write(path, g));
        struct tg_file *back = tg_file_read(path);
        CHECK(back && back->graph->n_nodes == g->n_nodes);
        if (back) CHECK_OK(tg_file_write(path, back));
        tg_file_free(back);
        remove(path);
    }
    CHECK_STATUS(tg_graph_write("/dev/full", g), TG_ERR_IO); /* no room: the write fails, not silently */
    CHECK_ERR_HAS("cannot write '/dev/full'");
    CHECK_STATUS(tg_graph_write("/nonexistent-dir/x.tg", g), TG_ERR_IO);
    CHECK_ERR_HAS("/nonexistent-dir/x.tg");
    CHECK_STATUS(tg_file_write("/tmp/x.tg", NULL), TG_ERR_INVALID);
    tg_graph_free(g);
    tg_context_free(ctx);

    /* Tensors with memory from an allocating context are pre-allocated: buf=data. */
    struct tg_context *mem = tg_context_new((struct tg_context_params){.mem_size = 4096, .no_alloc = false});
    struct tg_tensor *m = tg_new_tensor_1d(mem, TG_TYPE_F32, 16);
    struct tg_tensor *sq = tg_sqr(mem, m);
    struct tg_graph *gm = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(gm, sq));
    char *mt = tg_graph_write_mem(gm, NULL);
    CHECK(mt && strstr(mt, "leaf 0 f32 16 1 1 1 none buf=data\n") != NULL);
    free(mt);
    /* Bound to a buffer: its usage says which (weights, or any other data);
     * compute memory is the planner's, no placement. */
    struct tg_context *bound_ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *bw = tg_new_tensor_1d(bound_ctx, TG_TYPE_F32, 16);
    struct tg_tensor *bsq = tg_sqr(bound_ctx, bw);
    struct tg_graph *gb = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(gb, bsq));
    tg_buffer *wbuf = tg_alloc_ctx_tensors(bound_ctx, tg_cpu_buffer_type(), NULL);
    CHECK(wbuf != NULL);
    static const struct {
        enum tg_buffer_usage usage;
        const char *line;
    } by_usage[] = {{TG_BUFFER_USAGE_WEIGHTS, "leaf 0 f32 16 1 1 1 none buf=weights\n"},
                    {TG_BUFFER_USAGE_ANY, "leaf 0 f32 16 1 1 1 none buf=data\n"},
                    {TG_BUFFER_USAGE_COMPUTE, "leaf 0 f32 16 1 1 1 none\n"}};
    for (size_t i = 0; wbuf && i < sizeof by_usage / sizeof by_usage[0]; i++) {
        tg_buffer_set_usage(wbuf, by_usage[i].usage);
        char *bt = tg_graph_write_mem(gb, NULL);
        CHECK_MSG(bt && strstr(bt, by_usage[i].line) != NULL, "usage %d:\n%s", (int)by_usage[i].usage, bt ? bt : "");
        free(bt);
    }
    tg_buffer_free(wbuf);
    tg_graph_free(gb);
    tg_context_free(bound_ctx);
    tg_graph_free(gm);
    tg_context_free(mem);
}

/* A leaf that is a view of a node (ggml_view_tensor of a computed tensor:
 * op none) is written after that node's line; the leafs keep their order and
 * the nodes theirs, and the graph reads back the same. */
static void leaf_view_of_a_node(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    tg_set_name(x, "x");
    struct tg_tensor *y = tg_sqr(ctx, x);
    tg_set_name(y, "y");
    struct tg_tensor *v = tg_view_1d(ctx, y, 4, 16);
    v->op = TG_OP_NONE; /* as ggml_view_tensor leaves it: no source, no params */
    v->src[0] = NULL;
    memset(v->op_params, 0, sizeof v->op_params);
    tg_set_name(v, "v");
    struct tg_tensor *w = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    tg_set_name(w, "w");
    struct tg_tensor *z = tg_add(ctx, v, w);
    tg_set_name(z, "z");
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    CHECK_OK(tg_graph_build_forward_expand(g, z));
    CHECK(g->n_leafs == 3 && g->leafs[1] == v && g->n_nodes == 2);
    size_t len = 0;
    char *text = tg_graph_write_mem(g, &len);
    CHECK_MSG(text != NULL, "%s", tg_last_error());
    const char *want = "leaf 0 f32 8 1 1 1 none name=x\n"
                       "node 1 f32 8 1 1 1 sqr src=0 name=y\n"
                       "leaf 2 f32 4 1 1 1 none view=1:16 name=v\n"
                       "leaf 3 f32 4 1 1 1 none name=w\n"
                       "node 4 f32 4 1 1 1 add src=2,3 name=z\n";
    CHECK_MSG(text && strstr(text, want) != NULL, "%s", text ? text : "");
    struct tg_file *f = text ? tg_file_read_mem(text, len, "leaf-view.tg") : NULL;
    CHECK_MSG(f != NULL, "%s", tg_last_error());
    if (f) {
        const struct tg_graph *b = f->graph;
        CHECK(b->n_leafs == 3 && b->n_nodes == 2 && b->leafs[1]->view_src == b->nodes[0] && b->leafs[1]->view_offs == 16);
        CHECK(strcmp(b->leafs[2]->name, "w") == 0 && b->nodes[1]->src[0] == b->leafs[1]);
    }
    tg_file_free(f);
    free(text);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* ggml_add(ggml_view_tensor(y), y) lists the view before y's source x
 * (leafs v, x; nodes y, z): no line order keeps the leaf order, so x goes
 * ahead of v rather than the graph being refused. */
static void leaf_view_before_its_roots_source(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    tg_set_name(x, "x");
    struct tg_tensor *y = tg_sqr(ctx, x);
    tg_set_name(y, "y");
    struct tg_tensor *v = tg_view_1d(ctx, y, 8, 0);
    v->op = TG_OP_NONE; /* as ggml_view_tensor leaves it */
    v->src[0] = NULL;
    memset(v->op_params, 0, sizeof v->op_params);
    tg_set_name(v, "v");
    struct tg_tensor *z = tg_add(ctx, v, y);
    tg_set_name(z, "z");
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, z));
    CHECK(g->n_leafs == 2 && g->leafs[0] == v && g->leafs[1] == x && g->n_nodes == 2);
    size_t len = 0;
    char *text = tg_graph_write_mem(g, &len);
    CHECK_MSG(text != NULL, "%s", tg_last_error());
    const char *want = "leaf 0 f32 8 1 1 1 none name=x\n"
                       "node 1 f32 8 1 1 1 sqr src=0 name=y\n"
                       "leaf 2 f32 8 1 1 1 none view=1:0 name=v\n"
                       "node 3 f32 8 1 1 1 add src=2,1 name=z\n";
    CHECK_MSG(text && strstr(text, want) != NULL, "%s", text ? text : "");
    struct tg_file *f = text ? tg_file_read_mem(text, len, "leaf-view-first.tg") : NULL;
    CHECK_MSG(f != NULL, "%s", tg_last_error());
    if (f) CHECK(f->graph->n_leafs == 2 && f->graph->leafs[1]->view_src == f->graph->nodes[0]);
    tg_file_free(f);
    free(text);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Graphs a reader could not take back are refused, naming the tensor and why:
 * a computed tensor listed as a leaf, a source listed after its reader, a
 * view op without a view source. */
static void unwritable_graphs(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    struct tg_tensor *b = tg_scale(ctx, a, 2.0f);
    struct tg_tensor *c = tg_scale(ctx, b, 2.0f);
    struct tg_tensor *v = tg_view_1d(ctx, a, 2, 4);
    tg_set_name(a, "a");
    tg_set_name(b, "b");
    tg_set_name(c, "c");
    tg_set_name(v, "v");
    struct tg_graph *op_leaf = tg_graph_new(8), *late_source = tg_graph_new(8), *rootless = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(op_leaf, a));
    CHECK_OK(tg_graph_add_leaf(op_leaf, b));
    CHECK(tg_graph_write_mem(op_leaf, NULL) == NULL);
    CHECK_ERR_HAS("cannot write tensor 'b' as a leaf: it has op 'scale' and 1 sources");
    CHECK_OK(tg_graph_add_leaf(late_source, a));
    CHECK_OK(tg_graph_add_node(late_source, c));
    CHECK_OK(tg_graph_add_node(late_source, b));
    CHECK(tg_graph_write_mem(late_source, NULL) == NULL);
    CHECK_ERR_HAS("cannot write tensor 'c': its source 'b' is written after it");
    v->view_src = NULL; /* a caller's edit */
    CHECK_OK(tg_graph_add_leaf(rootless, a));
    CHECK_OK(tg_graph_add_node(rootless, v));
    CHECK(tg_graph_write_mem(rootless, NULL) == NULL);
    CHECK_ERR_HAS("cannot write tensor 'v': op 'view' makes a view but it has no view source");
    tg_graph_free(op_leaf);
    tg_graph_free(late_source);
    tg_graph_free(rootless);
    tg_context_free(ctx);
}

/* A node that is its own source (ggml_cast: cpy into itself) has its
 * references written once its other sources are: the leaf waiting for it
 * (a view of it) does not let a later leaf go ahead of it. */
static void own_source_keeps_the_order(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    tg_set_name(x, "x");
    struct tg_tensor *y = tg_cast(ctx, x, TG_TYPE_F16);
    tg_set_name(y, "y");
    struct tg_tensor *v = tg_view_1d(ctx, y, 4, 8);
    v->op = TG_OP_NONE; /* as ggml_view_tensor leaves it */
    v->src[0] = NULL;
    memset(v->op_params, 0, sizeof v->op_params);
    tg_set_name(v, "v");
    struct tg_tensor *w = tg_new_tensor_1d(ctx, TG_TYPE_F16, 4);
    tg_set_name(w, "w");
    struct tg_tensor *z = tg_add(ctx, v, w);
    tg_set_name(z, "z");
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    CHECK_OK(tg_graph_build_forward_expand(g, z));
    CHECK(y->src[1] == y && g->n_leafs == 3 && g->leafs[1] == v && g->n_nodes == 2);
    char *text = tg_graph_write_mem(g, NULL);
    const char *want = "leaf 0 f32 8 1 1 1 none name=x\n"
                       "node 1 f16 8 1 1 1 cpy src=0,1 name=y\n"
                       "leaf 2 f16 4 1 1 1 none view=1:8 name=v\n"
                       "leaf 3 f16 4 1 1 1 none name=w\n"
                       "node 4 f16 4 1 1 1 add src=2,3 name=z\n";
    CHECK_MSG(text && strstr(text, want) != NULL, "%s", text ? text : tg_last_error());
    free(text);
    tg_graph_free(g);
    tg_context_free(ctx);
}

int main(void) {
    unwritable_graphs();
    views_and_sources();
    own_source_keeps_the_order();
    params_flags_names();
    backends_and_placements();
    plain_graph();
    leaf_view_of_a_node();
    leaf_view_before_its_roots_source();
    return tg_test_finish();
}

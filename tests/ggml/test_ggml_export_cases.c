/* The export (tools/ggml-export) on graphs that are easy to write wrong
 * (label ggml): the scheduler's copies of two sources of one name mapped to
 * each by identity (and of a long name, and a name with '#'); ops ggml makes
 * as views of their input (ggml_clamp, the in-place norm, dup, sin, ...) load,
 * and tgsched's CPU computes what ggml computes or refuses; an op the format
 * cannot spell refused by name; the C locale not read; a view leaf before its
 * root; a graph of ggml_build_forward_order computes nothing; backend names
 * spelled alike, a meta line without '=' refused; a file not written says why. */
#include "tg-ggml-export.h"
#include "tg-ggml-sched.h"
#include "tg_test.h"

#include "ggml-cpu.h"
#include "tg-cpu.h"
#include "tg-io.h"

#include <locale.h>

static struct tg_tensor *named(const struct tg_file *f, const char *name) {
    for (int i = 0; i < f->graph->n_leafs; i++)
        if (strcmp(f->graph->leafs[i]->name, name) == 0) return f->graph->leafs[i];
    for (int i = 0; i < f->graph->n_nodes; i++)
        if (strcmp(f->graph->nodes[i]->name, name) == 0) return f->graph->nodes[i];
    return NULL;
}

static struct tg_file *parse(const char *text, size_t len, const char *what) {
    struct tg_file *f = NULL;
    CHECK_MSG(text != NULL, "%s: %s", what, tg_ggml_export_error());
    if (text) CHECK_MSG(tg_file_parse(text, len, what, &f) == TG_OK, "%s: %s\n%s", what, tg_last_error(), text);
    return f;
}

/* mul_mat on a device of k and q, both "qkv (view)": the copies are read back as k and q */
static void copies_by_identity(void) {
    for (int which = 0; which < 3; which++) {
        struct tg_ggml_test_backend dev, cpu;
        tg_ggml_test_cpu_init(&cpu, 1, NULL);
        bool ops[TG_OP_COUNT] = {0};
        ops[TG_OP_MUL_MAT] = true;
        tg_ggml_test_device_init(&dev, 0, "Dev0", 256, 0, false, &cpu, ops, 0, NULL);
        ggml_backend_t backends[2] = {&dev.backend, &cpu.backend};
        struct ggml_init_params p = {.mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead(), .no_alloc = true};
        struct ggml_context *ctx = ggml_init(p);
        struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 4);
        ggml_set_name(x, "x");
        ggml_set_input(x);
        struct ggml_tensor *qkv = ggml_scale(ctx, x, 2.0f), *a, *b;
        ggml_set_name(qkv, "qkv");
        if (which == 0) {
            a = ggml_view_2d(ctx, qkv, 8, 4, qkv->nb[1], 8 * sizeof(float)); /* k */
            b = ggml_view_2d(ctx, qkv, 8, 4, qkv->nb[1], 0);                 /* q */
        } else {
            a = ggml_scale(ctx, x, 3.0f), b = ggml_scale(ctx, x, 4.0f);
            ggml_set_name(a, which == 1 ? "a#1" : "model.layers.0.self_attn.q_proj.output_after_scale_0123abcd");
            ggml_set_name(b, which == 1 ? "a" : "model.layers.0.self_attn.q_proj.output_after_scale_0123abce");
        }
        struct ggml_tensor *out = ggml_mul_mat(ctx, a, b);
        ggml_set_name(out, "out");
        ggml_set_output(out);
        struct ggml_cgraph *g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, out);
        ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 256, false, false);
        ggml_backend_sched_set_tensor_backend(sched, out, &dev.backend);
        CHECK(ggml_backend_sched_alloc_graph(sched, g));
        CHECK(out->src[0] != a && out->src[1] != b); /* ggml read copies */
        struct tg_ggml_export_options o = {.sched = sched};
        size_t len = 0;
        char *text = tg_ggml_export_mem(g, &o, &len);
        struct tg_file *f = parse(text, len, "copies.tg");
        struct tg_tensor *t = f ? named(f, "out") : NULL;
        CHECK(t != NULL);
        if (t && t->src[0] && t->src[1]) {
            CHECK_MSG(t->src[0] != t->src[1], "case %d: both sources written as one tensor:\n%s", which, text);
            if (which == 0) CHECK_MSG(t->src[0]->view_offs == 32 && t->src[1]->view_offs == 0, "case 0: k and q swapped");
            else CHECK(strcmp(t->src[0]->name, a->name) == 0 && strcmp(t->src[1]->name, b->name) == 0);
        }
        tg_file_free(f);
        free(text);
        ggml_backend_sched_free(sched);
        ggml_free(ctx);
    }
}

/* ggml's views of their input: loaded; computed by tgsched's CPU as by ggml, or refused */
static void view_results(void) {
    for (int c = 0; c < 9; c++) {
        struct ggml_init_params p = {.mem_size = 1 << 20, .no_alloc = false};
        struct ggml_context *ctx = ggml_init(p);
        struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4), *bb = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
        ggml_set_name(x, "x"), ggml_set_name(bb, "b");
        for (int i = 0; i < 32; i++) ((float *)x->data)[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
        for (int i = 0; i < 4; i++) ((float *)bb->data)[i] = 2.0f;
        struct ggml_tensor *a = ggml_scale(ctx, x, 1.0f), *y = NULL;
        switch (c) {
        case 0: y = ggml_clamp(ctx, a, -0.5f, 0.5f); break;
        case 1: y = ggml_norm_inplace(ctx, a, 1e-5f); break;
        case 2: y = ggml_dup_inplace(ctx, a); break;
        case 3: y = ggml_leaky_relu(ctx, a, 0.1f, true); break;
        case 4: y = ggml_sin_inplace(ctx, a); break;
        case 5: y = ggml_set_1d_inplace(ctx, a, bb, 8); break;
        case 6: y = ggml_acc_inplace(ctx, a, bb, a->nb[1], a->nb[2], a->nb[3], 4); break;
        case 7: y = ggml_l2_norm_inplace(ctx, a, 1e-5f); break;
        case 8: y = ggml_cos_inplace(ctx, a); break;
        }
        CHECK(y->view_src == a);
        struct ggml_tensor *z = ggml_scale(ctx, y, 2.0f);
        ggml_set_name(z, "z");
        struct ggml_cgraph *g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, z);
        size_t len = 0;
        char *text = tg_ggml_export_mem(g, NULL, &len);
        struct tg_file *f = parse(text, len, ggml_op_desc(y));
        CHECK(ggml_graph_compute_with_ctx(ctx, g, 1) == GGML_STATUS_SUCCESS);
        if (f) {
            enum tg_status st;
            tg_buffer *buf = tg_alloc_ctx_tensors(f->ctx, tg_cpu_buffer_type(), &st);
            struct tg_tensor *tx = named(f, "x"), *tb = named(f, "b"), *tz = named(f, "z");
            CHECK(buf && tx && tz);
            if (buf && tx && tz) {
                CHECK_OK(tg_tensor_set(tx, x->data, 0, sizeof(float) * 32));
                if (tb) CHECK_OK(tg_tensor_set(tb, bb->data, 0, sizeof(float) * 4));
                st = tg_cpu_compute_graph(f->graph, 1);
                if (st == TG_OK) {
                    double err = 0;
                    for (int i = 0; i < 32; i++) {
                        double d = (double)tg_get_f32_nd(tz, i % 8, i / 8, 0, 0) - (double)((float *)z->data)[i];
                        err = d * d > err ? d * d : err;
                    }
                    CHECK_MSG(err < 1e-10, "%s: tgsched's CPU differs from ggml's (%g)", ggml_op_desc(y), err);
                } else {
                    CHECK_MSG(st == TG_ERR_UNSUPPORTED, "%s: %s", ggml_op_desc(y), tg_last_error());
                }
            }
            tg_buffer_free(buf);
        }
        tg_file_free(f);
        free(text);
        ggml_free(ctx);
    }
}

static struct ggml_context *small_ctx(void) {
    struct ggml_init_params p = {.mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead(), .no_alloc = true};
    return ggml_init(p);
}

static void refusals_and_spelling(void) {
    /* an op the format cannot name */
    struct ggml_context *ctx = small_ctx();
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ggml_top_k(ctx, x, 3));
    char *text = tg_ggml_export_mem(g, NULL, NULL);
    CHECK_MSG(!text && strstr(tg_ggml_export_error(), "TOP_K"), "top_k: '%s'", tg_ggml_export_error());
    free(text);
    ggml_free(ctx);

    /* a view leaf met before its root; ggml_build_forward_order; meta without '='; a path not written */
    ctx = small_ctx();
    struct ggml_tensor *r = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_name(r, "root");
    struct ggml_tensor *v = ggml_view_tensor(ctx, r);
    struct ggml_tensor *s = ggml_add(ctx, v, r);
    g = ggml_new_graph(ctx);
    ggml_build_forward_order(g, s);
    size_t len = 0;
    text = tg_ggml_export_mem(g, NULL, &len);
    struct tg_file *f = parse(text, len, "view-leaf.tg");
    if (f) {
        CHECK(f->graph->n_nodes == 1);
        CHECK_MSG(f->graph->nodes[0]->flags & TG_FLAG_NO_COMPUTE, "build_forward_order: ggml computes nothing:\n%s", text);
    }
    tg_file_free(f);
    free(text);
    ggml_free(ctx);
    ctx = small_ctx();
    r = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    g = ggml_new_graph(ctx);
    ggml_build_forward_order(g, ggml_scale(ctx, r, 2.0f));
    text = tg_ggml_export_mem(g, NULL, &len);
    CHECK_MSG(text && strstr(text, "nocompute"), "build_forward_order: ggml computes nothing:\n%s", text ? text : "");
    free(text);
    struct tg_ggml_export_options o = {.meta = "a=b\nnoequals"};
    text = tg_ggml_export_mem(g, &o, NULL);
    CHECK_MSG(!text && strstr(tg_ggml_export_error(), "noequals"), "meta: '%s'", tg_ggml_export_error());
    free(text);
    CHECK(tg_ggml_export(g, "/nonexistent-dir/x.tg", NULL) == -1);
    CHECK_MSG(strstr(tg_ggml_export_error(), "No such file") != NULL, "'%s'", tg_ggml_export_error());
    ggml_free(ctx);

    /* the locale: names and ops spelled in ASCII whatever LC_CTYPE says */
    const char *loc = setlocale(LC_ALL, "tr_TR.ISO-8859-9");
    if (!loc) loc = setlocale(LC_ALL, "tr_TR.UTF-8");
    ctx = small_ctx();
    x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 8);
    ggml_set_name(x, "x\xe7");
    g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ggml_diag_mask_inf(ctx, ggml_div(ctx, x, x), 0));
    text = tg_ggml_export_mem(g, NULL, &len);
    CHECK_MSG(text && strstr(text, " diag_mask_inf ") && strstr(text, "name=x_\n"), "locale %s:\n%s", loc ? "Turkish" : "C",
              text ? text : tg_ggml_export_error());
    free(text);
    setlocale(LC_ALL, "C");
    ggml_free(ctx);
    printf("locale checked: %s\n", loc ? "Turkish" : "(no Turkish locale here: the C locale only)");

    /* two backends spelled alike */
    struct tg_ggml_test_backend d0, d1, cpu;
    tg_ggml_test_cpu_init(&cpu, 2, NULL);
    bool ops[TG_OP_COUNT] = {0};
    tg_ggml_test_device_init(&d0, 0, "Dev 0", 256, 0, false, &cpu, ops, 0, NULL);
    tg_ggml_test_device_init(&d1, 1, "Dev_0", 256, 0, false, &cpu, ops, 0, NULL);
    ggml_backend_t backends[3] = {&d0.backend, &d1.backend, &cpu.backend};
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 3, 256, false, false);
    ctx = small_ctx();
    x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ggml_scale(ctx, x, 2.0f));
    struct tg_ggml_export_options os = {.sched = sched};
    text = tg_ggml_export_mem(g, &os, NULL);
    CHECK_MSG(!text && strstr(tg_ggml_export_error(), "dev_0"), "backend names: '%s'", tg_ggml_export_error());
    free(text);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
}

int main(void) {
    tg_ggml_quiet_log();
    copies_by_identity();
    view_results();
    refusals_and_spelling();
    return tg_test_finish();
}

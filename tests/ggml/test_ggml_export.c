/* The export users compile into their programs (tools/ggml-export), round
 * trip (label ggml): a LLaMA-style graph built with ggml's own API (weights in
 * a weights buffer, a KV cache written with set_rows and read through views,
 * rope, soft_max with a mask, swiglu, f16 weights), written by
 * tg_ggml_export, read by tgsched: every tensor equal in kind, type, shape,
 * strides, op, op params, sources, view, flags, memory and name; planned by
 * tgsched (TG_PLAN_GGML, ggml's CPU alignment) at the very offsets
 * ggml_gallocr gives the original graph.  Given a scheduler, the export
 * names its backends, where the weights live and what ggml chose for every
 * tensor, and writes the copies it put in place of split inputs as the
 * tensors they copy.  A type the format cannot spell is refused by name.
 * The branch ggml_build_forward_select leaves out is written nocompute, and
 * tgsched's CPU leaves it uncomputed as ggml's does. */
#include "tg-ggml-export.h"
#include "tg-ggml-sched.h"
#include "tg_test.h"

#include "ggml-cpu.h"
#include "tg-cpu.h"
#include "tg-io.h"

#define N_EMBD 64
#define N_HEAD 4
#define HEAD_DIM (N_EMBD / N_HEAD)
#define N_FF 96
#define N_VOCAB 50
#define N_CTX 32
#define N_TOKENS 6
#define N_LAYER 2

struct model {
    struct ggml_context *ctx_w, *ctx_kv, *ctx;
    ggml_backend_buffer_t buf_w, buf_kv;
    struct ggml_cgraph *graph;
};

static struct ggml_tensor *weight(struct ggml_context *ctx, enum ggml_type type, int64_t ne0, int64_t ne1, const char *name, int layer) {
    struct ggml_tensor *t = ne1 ? ggml_new_tensor_2d(ctx, type, ne0, ne1) : ggml_new_tensor_1d(ctx, type, ne0);
    if (layer >= 0) ggml_format_name(t, "blk.%d.%s", layer, name);
    else ggml_set_name(t, name);
    return t;
}

/* The graph llama.cpp's llm_build_llama makes, in small. */
static void build(struct model *m, ggml_backend_buffer_type_t buft) {
    struct ggml_init_params pw = {.mem_size = 64 * ggml_tensor_overhead(), .no_alloc = true};
    m->ctx_w = ggml_init(pw);
    m->ctx_kv = ggml_init(pw);
    struct ggml_init_params pg = {.mem_size = 512 * ggml_tensor_overhead() + ggml_graph_overhead(), .no_alloc = true};
    m->ctx = ggml_init(pg);
    m->graph = ggml_new_graph(m->ctx);
    struct ggml_context *w = m->ctx_w, *ctx = m->ctx;
    struct ggml_tensor *tok_embd = weight(w, GGML_TYPE_F16, N_EMBD, N_VOCAB, "token_embd.weight", -1);
    struct ggml_tensor *layers[N_LAYER][9], *cache_k[N_LAYER], *cache_v[N_LAYER];
    static const char *const names[9] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                         "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    for (int l = 0; l < N_LAYER; l++) {
        for (int k = 0; k < 9; k++) {
            bool norm = k == 0 || k == 5;
            int64_t ne0 = k == 8 ? N_FF : N_EMBD, ne1 = norm ? 0 : (k == 6 || k == 7 ? N_FF : N_EMBD);
            layers[l][k] = weight(w, norm ? GGML_TYPE_F32 : GGML_TYPE_F16, ne0, ne1, names[k], l);
        }
        cache_k[l] = ggml_new_tensor_2d(m->ctx_kv, GGML_TYPE_F16, N_EMBD, N_CTX);
        cache_v[l] = ggml_new_tensor_2d(m->ctx_kv, GGML_TYPE_F16, N_EMBD, N_CTX);
        ggml_format_name(cache_k[l], "cache_k_l%d", l);
        ggml_format_name(cache_v[l], "cache_v_l%d", l);
    }
    struct ggml_tensor *out_norm = weight(w, GGML_TYPE_F32, N_EMBD, 0, "output_norm.weight", -1);
    struct ggml_tensor *output = weight(w, GGML_TYPE_F16, N_EMBD, N_VOCAB, "output.weight", -1);
    m->buf_w = ggml_backend_alloc_ctx_tensors_from_buft(w, buft);
    ggml_backend_buffer_set_usage(m->buf_w, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    m->buf_kv = ggml_backend_alloc_ctx_tensors_from_buft(m->ctx_kv, buft);

    struct ggml_tensor *tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N_TOKENS);
    struct ggml_tensor *pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N_TOKENS);
    struct ggml_tensor *kv_idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, N_TOKENS);
    struct ggml_tensor *mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N_CTX, N_TOKENS);
    ggml_set_name(tokens, "inp_tokens"), ggml_set_name(pos, "inp_pos"), ggml_set_name(kv_idx, "inp_kv_idxs");
    ggml_set_name(mask, "kq_mask");
    ggml_set_input(tokens), ggml_set_input(pos), ggml_set_input(kv_idx), ggml_set_input(mask);
    struct ggml_tensor *cur = ggml_get_rows(ctx, tok_embd, tokens);
    for (int l = 0; l < N_LAYER; l++) {
        struct ggml_tensor **L = layers[l], *res = cur;
        cur = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), L[0]);
        struct ggml_tensor *q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, L[1], cur), HEAD_DIM, N_HEAD, N_TOKENS);
        struct ggml_tensor *k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, L[2], cur), HEAD_DIM, N_HEAD, N_TOKENS);
        struct ggml_tensor *v = ggml_mul_mat(ctx, L[3], cur);
        q = ggml_rope_ext(ctx, q, pos, NULL, HEAD_DIM, 0, N_CTX, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        k = ggml_rope_ext(ctx, k, pos, NULL, HEAD_DIM, 0, N_CTX, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        ggml_build_forward_expand(m->graph, ggml_set_rows(ctx, cache_k[l], ggml_reshape_2d(ctx, k, N_EMBD, N_TOKENS), kv_idx));
        ggml_build_forward_expand(m->graph, ggml_set_rows(ctx, cache_v[l], ggml_reshape_2d(ctx, v, N_EMBD, N_TOKENS), kv_idx));
        struct ggml_tensor *kk = ggml_view_3d(ctx, cache_k[l], HEAD_DIM, N_HEAD, N_CTX, cache_k[l]->nb[1] / N_HEAD, cache_k[l]->nb[1], 0);
        struct ggml_tensor *vv = ggml_view_3d(ctx, cache_v[l], HEAD_DIM, N_HEAD, N_CTX, cache_v[l]->nb[1] / N_HEAD, cache_v[l]->nb[1], 0);
        struct ggml_tensor *kq = ggml_mul_mat(ctx, ggml_permute(ctx, kk, 0, 2, 1, 3), ggml_permute(ctx, q, 0, 2, 1, 3));
        kq = ggml_soft_max_ext(ctx, kq, mask, 0.25f, 0.0f);
        struct ggml_tensor *vt = ggml_cont(ctx, ggml_permute(ctx, vv, 1, 2, 0, 3));
        struct ggml_tensor *kqv = ggml_permute(ctx, ggml_mul_mat(ctx, vt, kq), 0, 2, 1, 3);
        cur = ggml_mul_mat(ctx, L[4], ggml_cont_2d(ctx, kqv, N_EMBD, N_TOKENS));
        cur = ggml_add(ctx, cur, res);
        res = cur;
        cur = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), L[5]);
        cur = ggml_swiglu_split(ctx, ggml_mul_mat(ctx, L[6], cur), ggml_mul_mat(ctx, L[7], cur));
        cur = ggml_add(ctx, ggml_mul_mat(ctx, L[8], cur), res);
    }
    cur = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), out_norm);
    ggml_set_name(cur, "result_norm");
    ggml_set_output(cur);
    cur = ggml_mul_mat(ctx, output, cur);
    ggml_set_name(cur, "result_output");
    ggml_set_output(cur);
    ggml_build_forward_expand(m->graph, cur);
}

static void model_free(struct model *m) {
    ggml_backend_buffer_free(m->buf_w);
    ggml_backend_buffer_free(m->buf_kv);
    ggml_free(m->ctx_w);
    ggml_free(m->ctx_kv);
    ggml_free(m->ctx);
}

static struct model new_model(ggml_backend_buffer_type_t buft) {
    struct model m = {0};
    build(&m, buft);
    return m;
}

/* ---- structure ------------------------------------------------------------------------------ */

/* A name as the format writes it: characters outside [A-Za-z0-9_.#:-] as '_'. */
static bool same_name(const char *written, const char *ggml_name) {
    for (; *written && *ggml_name; written++, ggml_name++) {
        char c = *ggml_name;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("_.#:-", c);
        if (*written != (ok ? c : '_')) return false;
    }
    return *written == *ggml_name;
}

/* A source as written: the tensor itself, or for the scheduler's copy of a
 * split input ("BACKEND#NAME#COPY") the tensor it copies. */
static bool same_source(const char *written, const char *ggml_name) {
    const char *h1 = strchr(ggml_name, '#'), *h2 = h1 ? strchr(h1 + 1, '#') : NULL;
    if (!h2) return same_name(written, ggml_name);
    char copied[GGML_MAX_NAME];
    snprintf(copied, sizeof copied, "%.*s", (int)(h2 - h1 - 1), h1 + 1);
    return same_name(written, copied);
}

static int index_in(struct ggml_cgraph *g, const struct ggml_tensor *t, int n_leafs_written) {
    if (!t) return -1;
    for (int i = 0; i < ggml_graph_n_nodes(g); i++)
        if (ggml_graph_node(g, i) == t) return n_leafs_written + i;
    return -2; /* a leaf: found by name below */
}

/* Every tensor of the file against ggml's: position i of the file is ggml's
 * leaf i (found by name: ggml has no public leaf list), then node i - n_leafs. */
static void same_structure(struct ggml_cgraph *g, const struct tg_file *f, bool weights_expected) {
    int n_nodes = ggml_graph_n_nodes(g), n_leafs = f->graph->n_leafs;
    CHECK_MSG(f->graph->n_nodes == n_nodes && f->n_tensors == n_leafs + n_nodes, "%d nodes in the file, %d in ggml",
              f->graph->n_nodes, n_nodes);
    if (f->graph->n_nodes != n_nodes) return;
    int weights = 0, data = 0, mismatches = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *r = &f->tensors[i];
        const struct tg_tensor *t = r->tensor;
        const struct ggml_tensor *x = i >= n_leafs ? ggml_graph_node(g, i - n_leafs) : ggml_graph_get_tensor(g, t->name);
        bool ok = x && r->is_leaf == (i < n_leafs) && tg_ggml_type(t->type) == x->type && tg_ggml_op(t->op) == x->op &&
                  same_name(t->name, x->name) && memcmp(t->op_params, x->op_params, sizeof t->op_params) == 0 &&
                  (t->flags & 15) == (x->flags & 15);
        for (int d = 0; ok && d < 4; d++) ok = t->ne[d] == x->ne[d] && t->nb[d] == x->nb[d];
        for (int k = 0; ok && k < TG_MAX_SRC; k++) {
            ok = !t->src[k] == !x->src[k];
            if (ok && t->src[k]) ok = same_source(t->src[k]->name, x->src[k]->name) && index_in(g, x->src[k], n_leafs) != -1;
        }
        ok = ok && !t->view_src == !x->view_src && t->view_offs == x->view_offs &&
             (!t->view_src || same_name(t->view_src->name, x->view_src->name));
        bool compute = x->buffer && ggml_backend_buffer_get_usage(x->buffer) == GGML_BACKEND_BUFFER_USAGE_COMPUTE;
        if (ok && x->buffer && !x->view_src && !compute) {
            bool w = ggml_backend_buffer_get_usage(x->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
            ok = r->placement == (w ? TG_PLACE_WEIGHTS : TG_PLACE_DATA);
            weights += w;
            data += !w;
        } else if (ok) {
            ok = r->placement == TG_PLACE_NONE;
        }
        if (!ok && mismatches++ < 3) fprintf(stderr, "tensor %d '%s' differs from ggml's\n", i, t->name);
    }
    CHECK(mismatches == 0);
    if (weights_expected) CHECK(weights == 3 + 9 * N_LAYER && data == 2 * N_LAYER);
    printf("round trip: %d leafs, %d nodes; %d weights, %d other pre-allocated; every field equal\n", n_leafs, n_nodes,
           weights, data);
}

/* ---- the plan --------------------------------------------------------------------------------- */

static char *with_cpu_setup(const char *text, size_t len, size_t *out_len) {
    const char *setup = "buft cpu align=32\nbuffers cpu\n";
    const char *nl = memchr(text, '\n', len);
    size_t head = nl ? (size_t)(nl - text) + 1 : len, n = strlen(setup);
    char *out = malloc(len + n + 1);
    memcpy(out, text, head);
    memcpy(out + head, setup, n);
    memcpy(out + head + n, text + head, len - head);
    out[len + n] = '\0';
    *out_len = len + n;
    return out;
}

/* ggml_gallocr on the original graph, tgsched on the exported file. */
static void same_plan(struct ggml_cgraph *g, const char *text, size_t len) {
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(galloc, g));
    size_t ggml_size = ggml_gallocr_get_buffer_size(galloc, 0);
    size_t with_len = 0;
    char *with = with_cpu_setup(text, len, &with_len);
    struct tg_gen_case *c = NULL;
    CHECK_OK(tg_gen_case_from_text(with, with_len, "exported.tg", true, &c));
    tg_gallocr *tga = NULL;
    struct tg_gen_plan_result r;
    if (c) CHECK_OK(tg_gen_plan_and_check_policy(c, TG_FAULT_NONE, TG_PLAN_GGML, &tga, &r));
    int compared = 0, differ = 0;
    if (c && tga) {
        CHECK(r.report.n == 0 && r.buffer_size[0] == ggml_size);
        const struct tg_graph *tg = c->graph;
        for (int i = 0; i < tg->n_nodes; i++) {
            const struct tg_tensor *t = tg->nodes[i];
            const struct ggml_tensor *x = ggml_graph_node(g, i);
            if (t->view_src || !tg_gallocr_owns_buffer(tga, t->buffer)) continue;
            size_t a = (size_t)((char *)t->data - (char *)tg_buffer_get_base(t->buffer));
            size_t b = (size_t)((char *)x->data - (char *)ggml_backend_buffer_get_base(x->buffer));
            compared++;
            differ += a != b;
        }
        printf("plan: ggml_gallocr %zu bytes on the original graph, tgsched %zu on the exported file; %d node offsets "
               "compared, %d differ\n", ggml_size, r.buffer_size[0], compared, differ);
        tg_gen_plan_result_free(&r);
    }
    CHECK(compared > 40 && differ == 0);
    tg_gallocr_free(tga);
    tg_gen_case_free(c);
    free(with);
    ggml_gallocr_free(galloc);
}

/* ---- with a scheduler -------------------------------------------------------------------------- */

/* The value of key on the tensor line at position pos ("" when absent). */
static void key_at(const char *text, int pos, const char *key, char *out, size_t size) {
    out[0] = '\0';
    const char *line = text;
    for (int seen = -1; line && *line;) {
        bool tensor = strncmp(line, "leaf ", 5) == 0 || strncmp(line, "node ", 5) == 0;
        if (tensor && ++seen == pos) break;
        line = strchr(line, '\n');
        if (line) line++;
    }
    if (!line || !*line) return;
    const char *end = strchr(line, '\n');
    char k[40];
    snprintf(k, sizeof k, " %s=", key);
    const char *at = strstr(line, k);
    if (!at || (end && at > end)) return;
    at += strlen(k);
    size_t n = strcspn(at, " \n");
    snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), at);
}

/* The position of the tensor named name (the first, names may repeat). */
static int position_named(const struct tg_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].tensor->name, name) == 0) return i;
    return -1;
}

static void with_scheduler(void) {
    struct tg_ggml_test_backend dev, cpu;
    tg_ggml_test_cpu_init(&cpu, 1, NULL);
    /* a device with matrix products and norms only: the rest runs on the CPU, with copies between */
    bool ops[TG_OP_COUNT] = {0};
    static const enum tg_op dev_ops[] = {TG_OP_MUL_MAT, TG_OP_RMS_NORM, TG_OP_MUL, TG_OP_ADD, TG_OP_SET_ROWS, TG_OP_GET_ROWS};
    for (size_t i = 0; i < sizeof dev_ops / sizeof dev_ops[0]; i++) ops[dev_ops[i]] = true;
    tg_ggml_test_device_init(&dev, 0, "Dev0", 256, 0, false, &cpu, ops, 0, NULL);
    ggml_backend_t backends[2] = {&dev.backend, &cpu.backend};
    struct model m = new_model(dev.buft); /* weights and cache on the device */
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 2048, false, false);
    CHECK(ggml_backend_sched_alloc_graph(sched, m.graph));
    struct tg_ggml_export_options o = {.sched = sched};
    size_t len = 0;
    char *text = tg_ggml_export_mem(m.graph, &o, &len);
    CHECK_MSG(text != NULL, "%s", tg_ggml_export_error());
    struct tg_file *f = NULL;
    if (text) CHECK_OK(tg_file_parse(text, len, "sched.tg", &f));
    if (f) {
        CHECK(strstr(text, "\nbackends dev0,cpu\n") != NULL && f->n_backends == 2);
        char v[32];
        key_at(text, position_named(f, "blk.0.attn_q.weight"), "buf", v, sizeof v);
        CHECK_MSG(strcmp(v, "weights@dev0") == 0, "placement '%s'", v);
        key_at(text, position_named(f, "cache_k_l1"), "buf", v, sizeof v);
        CHECK_MSG(strcmp(v, "data@dev0") == 0, "placement '%s'", v);
        /* ggml's choice for every node, as the scheduler reports it */
        int n_leafs = f->graph->n_leafs, checked = 0, wrong = 0, pinnable = 0;
        for (int i = 0; i < ggml_graph_n_nodes(m.graph); i++) {
            struct ggml_tensor *x = ggml_graph_node(m.graph, i);
            key_at(text, n_leafs + i, "x-ggml-backend", v, sizeof v);
            ggml_backend_t b = ggml_backend_sched_get_tensor_backend(sched, x);
            wrong += !b || strcmp(v, b == &dev.backend ? "dev0" : "cpu") != 0;
            checked++;
            pinnable += b && !x->view_src;
        }
        CHECK(checked == ggml_graph_n_nodes(m.graph) && wrong == 0);
        /* the scheduler rewrote sources to its copies: written as the tensors copied */
        int copies = 0;
        for (int i = 0; i < ggml_graph_n_nodes(m.graph); i++)
            for (int k = 0; k < GGML_MAX_SRC; k++)
                copies += ggml_graph_node(m.graph, i)->src[k] && strchr(ggml_graph_node(m.graph, i)->src[k]->name, '#') != NULL;
        printf("with a scheduler: %d splits, %d sources read through copies; backends, placements and ggml's backend "
               "of all %d nodes written\n", ggml_backend_sched_get_n_splits(sched), copies, checked);
        CHECK(copies > 0);
        same_structure(m.graph, f, false);
        o.pin_assignment = true;
        char *pinned = tg_ggml_export_mem(m.graph, &o, NULL);
        struct tg_file *fp = NULL;
        CHECK(pinned && tg_file_parse(pinned, strlen(pinned), "pinned.tg", &fp) == TG_OK);
        int pins = 0;
        for (int i = n_leafs; fp && i < fp->n_tensors; i++) pins += fp->tensors[i].pinned_backend >= 0;
        CHECK_MSG(pins == pinnable, "%d pins, %d nodes to pin", pins, pinnable);
        tg_file_free(fp);
        free(pinned);
    }
    tg_file_free(f);
    free(text);
    ggml_backend_sched_free(sched);
    model_free(&m);
}

static struct tg_tensor *named(const struct tg_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].tensor->name, name) == 0) return f->tensors[i].tensor;
    return NULL;
}

/* ggml_build_forward_select: the branch left out stays in the graph but
 * ggml's CPU does not compute it.  Here it would write into a state
 * tensor; the export marks its nodes nocompute, and tgsched's CPU, computing
 * the exported file, leaves the state as ggml does. */
static void forward_select(void) {
    struct ggml_init_params p = {.mem_size = 1 << 20, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), *state = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_name(a, "a");
    ggml_set_name(state, "state");
    ggml_set_input(a);
    for (int i = 0; i < 4; i++) ((float *)a->data)[i] = (float)(i + 1), ((float *)state->data)[i] = 0.0f;
    struct ggml_tensor *branches[2] = {ggml_scale(ctx, a, 2.0f), ggml_cpy(ctx, ggml_scale(ctx, a, 3.0f), state)};
    ggml_set_name(branches[0], "chosen");
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_set_output(ggml_build_forward_select(g, branches, 2, 0));
    CHECK(ggml_graph_compute_with_ctx(ctx, g, 1) == GGML_STATUS_SUCCESS);
    float ggml_state[4], ggml_chosen[4];
    memcpy(ggml_state, state->data, sizeof ggml_state);
    memcpy(ggml_chosen, branches[0]->data, sizeof ggml_chosen);
    CHECK(ggml_state[3] == 0.0f && ggml_chosen[3] == 8.0f); /* ggml: the other branch did not run */

    size_t len = 0;
    char *text = tg_ggml_export_mem(g, NULL, &len);
    CHECK_MSG(text != NULL, "%s", tg_ggml_export_error());
    struct tg_file *f = NULL;
    if (text) CHECK_OK(tg_file_parse(text, len, "select.tg", &f));
    if (f) {
        int marked = 0;
        for (int i = 0; i < f->graph->n_nodes; i++) marked += (f->graph->nodes[i]->flags & TG_FLAG_NO_COMPUTE) != 0;
        CHECK_MSG(marked == 2, "%d nodes marked nocompute, want the 2 of the branch left out", marked);
        enum tg_status st;
        tg_buffer *buf = tg_alloc_ctx_tensors(f->ctx, tg_cpu_buffer_type(), &st);
        CHECK(buf != NULL);
        struct tg_tensor *ta = named(f, "a"), *tstate = named(f, "state"), *tchosen = named(f, "chosen");
        CHECK(ta && tstate && tchosen);
        if (buf && ta && tstate && tchosen) {
            const float zeros[4] = {0};
            CHECK_OK(tg_tensor_set(ta, a->data, 0, sizeof(float) * 4));
            CHECK_OK(tg_tensor_set(tstate, zeros, 0, sizeof zeros));
            CHECK_OK(tg_cpu_compute_graph(f->graph, 1));
            bool same = true;
            for (int i = 0; i < 4; i++)
                same &= tg_get_f32_nd(tstate, i, 0, 0, 0) == ggml_state[i] && tg_get_f32_nd(tchosen, i, 0, 0, 0) == ggml_chosen[i];
            CHECK_MSG(same, "tgsched computed the branch ggml left out: state[3] = %g",
                      (double)tg_get_f32_nd(tstate, 3, 0, 0, 0));
        }
        tg_buffer_free(buf);
    }
    tg_file_free(f);
    free(text);
    ggml_free(ctx);
}

static void refuses_unknown_type(void) {
    struct ggml_init_params p = {.mem_size = 16 * ggml_tensor_overhead() + ggml_graph_overhead(), .no_alloc = true};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q2_K, 256, 4);
    ggml_set_name(w, "odd.weight");
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 2);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ggml_mul_mat(ctx, w, x));
    char *text = tg_ggml_export_mem(g, NULL, NULL);
    CHECK(text == NULL && strstr(tg_ggml_export_error(), "odd.weight") && strstr(tg_ggml_export_error(), "q2_K"));
    free(text);
    ggml_free(ctx);
}

int main(void) {
    tg_ggml_quiet_log();
    struct model m = new_model(ggml_backend_cpu_buffer_type());
    size_t len = 0;
    char *text = tg_ggml_export_mem(m.graph, NULL, &len);
    CHECK_MSG(text != NULL, "%s", tg_ggml_export_error());
    struct tg_file *f = NULL;
    if (text) CHECK_OK(tg_file_parse(text, len, "exported.tg", &f));
    if (f) same_structure(m.graph, f, true);
    if (text) same_plan(m.graph, text, len);
    tg_file_free(f);
    free(text);
    model_free(&m);
    with_scheduler();
    refuses_unknown_type();
    forward_select();
    return tg_test_finish();
}

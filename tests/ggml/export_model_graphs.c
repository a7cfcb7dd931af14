/* Writes the model graphs that corpus/graphs adds to ../shared/graphs, built
 * with the pinned ggml's public API the way their programs build them:
 *
 *   llama-7b-decode.tg, llama-7b-prefill512.tg: LLaMA-7B shapes, q4_0
 *     weights, q6_k output, attention as mul_mat + soft_max_ext + mul_mat
 *     over an f16 KV cache whose V is stored transposed (llama.cpp's
 *     llm_build_llama, build_attn, cpy_k/cpy_v/get_k/get_v);
 *   llama-tiny-decode-flash.tg: llama-tiny's shapes (n_embd 256, 4 heads,
 *     2 layers, vocab 1000), f16 weights, decoding over 2,048 cached tokens
 *     with flash attention (V cached untransposed, the mask cast to f16,
 *     flash_attn_ext at GGML_PREC_F32): small enough for test_ggml_model in CI;
 *   whisper-base-encoder.tg: whisper.cpp's conv graph (two ggml_conv_1d_ph:
 *     im2col + mul_mat, gelu) and encoder graph (6 layers, layer norm,
 *     attention with f16 K/V copies) of whisper-base, f16 weights, joined
 *     into one graph (the conv graph's output is the encoder's input).
 *
 * The graph is written as ggml holds it (ggml's leaf list, then its node
 * list) by tools/ggml-export, weights and KV cache in buffers of their own
 * as a program holds them.  usage: export_model_graphs OUT_DIR */
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "tg-ggml-export.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Weights and KV cache get memory before the graph is written, as a
 * program holds them (ggml's CPU buffers: untouched pages cost nothing), so
 * the export marks them buf=weights (a weights buffer) and buf=data. */
struct memory {
    struct ggml_context *weights, *cache;
    ggml_backend_buffer_t weights_buf, cache_buf;
};

static int give_memory(struct memory *m) {
    m->weights_buf = ggml_backend_alloc_ctx_tensors_from_buft(m->weights, ggml_backend_cpu_buffer_type());
    if (!m->weights_buf) return 1;
    ggml_backend_buffer_set_usage(m->weights_buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    if (m->cache && ggml_get_first_tensor(m->cache)) {
        m->cache_buf = ggml_backend_alloc_ctx_tensors_from_buft(m->cache, ggml_backend_cpu_buffer_type());
        if (!m->cache_buf) return 1;
    }
    return 0;
}

static void free_memory(struct memory *m) {
    if (m->cache_buf) ggml_backend_buffer_free(m->cache_buf);
    if (m->weights_buf) ggml_backend_buffer_free(m->weights_buf);
    if (m->cache) ggml_free(m->cache);
    ggml_free(m->weights);
}

/* The .tg spelling of the types these graphs use (meta lines). */
static const char *spelling(enum ggml_type t) { return t == GGML_TYPE_Q4_0 ? "q4_0" : t == GGML_TYPE_Q6_K ? "q6_k" : "f16"; }

static int write_graph(const char *path, struct ggml_cgraph *gf, const char *meta) {
    const struct tg_ggml_export_options opts = {.meta = meta};
    if (tg_ggml_export(gf, path, &opts) != 0) {
        fprintf(stderr, "export: %s: %s\n", path, tg_ggml_export_error());
        return 1;
    }
    return 0;
}

/* ---- LLaMA, llama.cpp style ----------------------------------------------------------------- */

struct llama {
    const char *model;
    int n_embd, n_head, n_head_kv, n_ff, n_layer, n_vocab, n_ctx;
    enum ggml_type weight, output;
};

static struct ggml_tensor *weight(struct ggml_context *ctx, enum ggml_type type, int64_t n0, int64_t n1, const char *name,
                                  int layer) { /* ctx: the weights' context */
    struct ggml_tensor *t = ggml_new_tensor_2d(ctx, type, n0, n1);
    if (layer >= 0) ggml_format_name(t, "blk.%d.%s.weight", layer, name);
    else ggml_format_name(t, "%s.weight", name);
    return t;
}

static struct ggml_tensor *input(struct ggml_tensor *t, const char *name) {
    ggml_set_name(t, name);
    ggml_set_input(t);
    return t;
}

static struct ggml_context *meta_ctx(void) {
    return ggml_init((struct ggml_init_params){.mem_size = 16u << 20, .no_alloc = true});
}

/* flash: attention as llama.cpp builds it with flash attention on: V cached
 * untransposed (a row per token, as K), the mask cast to f16 once, and
 * flash_attn_ext at GGML_PREC_F32 in place of mul_mat + soft_max + mul_mat. */
static int export_llama(const char *dir, const struct llama *m, int n_tokens, int n_past, bool flash) {
    struct memory mem = {meta_ctx(), meta_ctx(), NULL, NULL};
    struct ggml_context *ctx = ggml_init((struct ggml_init_params){.mem_size = 64u << 20, .no_alloc = true});
    struct ggml_context *wctx = mem.weights;
    struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, 8192, false);
    const int head = m->n_embd / m->n_head, n_embd_gqa = head * m->n_head_kv, n_kv = n_past + n_tokens;
    const bool prefill = n_tokens > 1;
    const float eps = 1e-5f, kq_scale = 1.0f / sqrtf((float)head);

    struct ggml_tensor *tok_embd = weight(wctx, m->weight, m->n_embd, m->n_vocab, "token_embd", -1);
    struct ggml_tensor *inp_tokens = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens), "inp_tokens");
    struct ggml_tensor *inpL = ggml_get_rows(ctx, tok_embd, inp_tokens);
    ggml_set_name(inpL, "inp_embd");
    struct ggml_tensor *inp_pos = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens), "inp_pos");
    struct ggml_tensor *k_idxs = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens), "inp_k_idxs");
    /* the transposed V cache (without flash) is written an element per row */
    struct ggml_tensor *v_idxs =
        input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, flash ? n_tokens : (int64_t)n_tokens * n_embd_gqa), "inp_v_idxs");
    struct ggml_tensor *kq_mask = input(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens), "kq_mask");
    struct ggml_tensor *kq_mask_f16 = NULL;
    struct ggml_tensor *out_ids = NULL;
    for (int il = 0; il < m->n_layer; il++) {
        struct ggml_tensor *inpSA = inpL;
        struct ggml_tensor *cur = ggml_rms_norm(ctx, inpL, eps);
        ggml_format_name(cur, "norm-%d", il);
        cur = ggml_mul(ctx, cur, weight(wctx, GGML_TYPE_F32, m->n_embd, 1, "attn_norm", il));
        ggml_format_name(cur, "attn_norm-%d", il);
        struct ggml_tensor *q = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_embd, m->n_embd, "attn_q", il), cur);
        ggml_format_name(q, "Qcur-%d", il);
        q = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, q, head, m->n_head, n_tokens), inp_pos, NULL, head, 0, m->n_ctx,
                          10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        ggml_format_name(q, "Qcur_rope-%d", il);
        struct ggml_tensor *k = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_embd, n_embd_gqa, "attn_k", il), cur);
        ggml_format_name(k, "Kcur-%d", il);
        k = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, k, head, m->n_head_kv, n_tokens), inp_pos, NULL, head, 0, m->n_ctx,
                          10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        ggml_format_name(k, "Kcur_rope-%d", il);
        struct ggml_tensor *v = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_embd, n_embd_gqa, "attn_v", il), cur);
        ggml_format_name(v, "Vcur-%d", il);
        v = ggml_reshape_3d(ctx, v, head, m->n_head_kv, n_tokens);
        /* build_attn: q, k, v enter the graph together */
        ggml_build_forward_expand(gf, q);
        ggml_build_forward_expand(gf, k);
        ggml_build_forward_expand(gf, v);
        struct ggml_tensor *cache_k = ggml_new_tensor_2d(mem.cache, GGML_TYPE_F16, n_embd_gqa, m->n_ctx);
        ggml_format_name(cache_k, "cache_k_l%d", il);
        struct ggml_tensor *cache_v = ggml_new_tensor_2d(mem.cache, GGML_TYPE_F16, n_embd_gqa, m->n_ctx);
        ggml_format_name(cache_v, "cache_v_l%d", il);
        struct ggml_tensor *k_store =
            ggml_set_rows(ctx, cache_k, ggml_view_2d(ctx, k, n_embd_gqa, n_tokens, k->nb[2], 0), k_idxs);
        ggml_format_name(k_store, "k_store-%d", il);
        ggml_build_forward_expand(gf, k_store);
        struct ggml_tensor *kk = ggml_permute(ctx,
                                              ggml_view_3d(ctx, cache_k, head, m->n_head_kv, n_kv, (size_t)head * 2,
                                                           (size_t)n_embd_gqa * 2, 0),
                                              0, 2, 1, 3);
        struct ggml_tensor *qq = ggml_permute(ctx, ggml_view_3d(ctx, q, head, m->n_head, n_tokens, q->nb[1], q->nb[2], 0),
                                              0, 2, 1, 3);
        if (flash) {
            struct ggml_tensor *v_store =
                ggml_set_rows(ctx, cache_v, ggml_reshape_2d(ctx, v, n_embd_gqa, n_tokens), v_idxs);
            ggml_format_name(v_store, "v_store-%d", il);
            ggml_build_forward_expand(gf, v_store);
            /* get_v: the cache viewed [head, n_head_kv, n_kv], permuted as K's */
            struct ggml_tensor *vv = ggml_permute(ctx,
                                                  ggml_view_3d(ctx, cache_v, head, m->n_head_kv, n_kv, (size_t)head * 2,
                                                               (size_t)n_embd_gqa * 2, 0),
                                                  0, 2, 1, 3);
            if (!kq_mask_f16) {
                kq_mask_f16 = ggml_cast(ctx, kq_mask, GGML_TYPE_F16);
                ggml_set_name(kq_mask_f16, "kq_mask_f16");
            }
            cur = ggml_flash_attn_ext(ctx, qq, kk, vv, kq_mask_f16, kq_scale, 0.0f, 0.0f);
            ggml_flash_attn_ext_set_prec(cur, GGML_PREC_F32);
            ggml_format_name(cur, "fattn-%d", il);
            cur = ggml_reshape_2d(ctx, cur, m->n_embd, n_tokens);
        } else {
            struct ggml_tensor *v_rows = ggml_reshape_2d(ctx, ggml_reshape_2d(ctx, v, n_embd_gqa, n_tokens), 1,
                                                         (int64_t)n_embd_gqa * n_tokens);
            struct ggml_tensor *v_store =
                ggml_set_rows(ctx, ggml_reshape_2d(ctx, cache_v, 1, (int64_t)n_embd_gqa * m->n_ctx), v_rows, v_idxs);
            ggml_format_name(v_store, "v_store-%d", il);
            ggml_build_forward_expand(gf, v_store);
            /* get_v: the transposed cache viewed [n_kv, n_head_kv, head], permuted to [n_kv, head, n_head_kv] */
            struct ggml_tensor *vt = ggml_permute(ctx,
                                                  ggml_view_3d(ctx, cache_v, n_kv, m->n_head_kv, head,
                                                               (size_t)m->n_ctx * head * 2, (size_t)m->n_ctx * 2, 0),
                                                  0, 2, 1, 3);
            struct ggml_tensor *kq = ggml_mul_mat(ctx, kk, qq);
            ggml_mul_mat_set_prec(kq, GGML_PREC_F32);
            ggml_format_name(kq, "kq-%d", il);
            kq = ggml_soft_max_ext(ctx, kq, kq_mask, kq_scale, 0.0f);
            ggml_format_name(kq, "kq_soft_max-%d", il);
            struct ggml_tensor *kqv = ggml_mul_mat(ctx, vt, kq);
            ggml_format_name(kqv, "kqv-%d", il);
            cur = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), m->n_embd, n_tokens);
            ggml_format_name(cur, "kqv_out-%d", il);
        }
        cur = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_embd, m->n_embd, "attn_output", il), cur);
        ggml_format_name(cur, "attn_out-%d", il);
        if (il == m->n_layer - 1 && prefill) { /* only the last token's logits */
            out_ids = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1), "inp_out_ids");
            cur = ggml_get_rows(ctx, cur, out_ids);
            inpSA = ggml_get_rows(ctx, inpSA, out_ids);
        }
        struct ggml_tensor *ffn_inp = ggml_add(ctx, cur, inpSA);
        ggml_format_name(ffn_inp, "ffn_inp-%d", il);
        cur = ggml_rms_norm(ctx, ffn_inp, eps);
        ggml_format_name(cur, "norm-%d", il);
        cur = ggml_mul(ctx, cur, weight(wctx, GGML_TYPE_F32, m->n_embd, 1, "ffn_norm", il));
        ggml_format_name(cur, "ffn_norm-%d", il);
        struct ggml_tensor *gate = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_embd, m->n_ff, "ffn_gate", il), cur);
        ggml_format_name(gate, "ffn_gate-%d", il);
        struct ggml_tensor *up = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_embd, m->n_ff, "ffn_up", il), cur);
        ggml_format_name(up, "ffn_up-%d", il);
        cur = ggml_swiglu_split(ctx, gate, up);
        ggml_format_name(cur, "ffn_swiglu-%d", il);
        cur = ggml_mul_mat(ctx, weight(wctx, m->weight, m->n_ff, m->n_embd, "ffn_down", il), cur);
        ggml_format_name(cur, "ffn_out-%d", il);
        cur = ggml_add(ctx, cur, ffn_inp);
        ggml_format_name(cur, "l_out-%d", il);
        inpL = cur;
    }
    struct ggml_tensor *cur = ggml_rms_norm(ctx, inpL, eps);
    ggml_set_name(cur, "norm");
    cur = ggml_mul(ctx, cur, weight(wctx, GGML_TYPE_F32, m->n_embd, 1, "output_norm", -1));
    ggml_set_name(cur, "result_norm");
    ggml_set_output(cur);
    cur = ggml_mul_mat(ctx, weight(wctx, m->output, m->n_embd, m->n_vocab, "output", -1), cur);
    ggml_set_name(cur, "result_output");
    ggml_set_output(cur);
    ggml_build_forward_expand(gf, cur);

    char path[512], meta[1024];
    snprintf(meta, sizeof meta,
             "pinned=ggml@d99724f2b141fed9e1a9f402213506c081433465\n"
             "builder=tests/ggml/export_model_graphs.c:llama.cpp_style_llm_build_llama\n"
             "model=%s\nphase=%s\nn_embd=%d\nn_head=%d\nn_head_kv=%d\nn_ff=%d\nn_layer=%d\nn_vocab=%d\n"
             "n_ctx=%d\nn_tokens=%d\nn_past=%d\nn_kv=%d\nn_outputs=1\nattention=%s\n"
             "ffn=swiglu\nweight_type=%s\ntok_embd_type=%s\noutput_type=%s\nkv_type=f16",
             m->model, prefill ? "prefill" : "decode", m->n_embd, m->n_head, m->n_head_kv, m->n_ff, m->n_layer,
             m->n_vocab, m->n_ctx, n_tokens, n_past, n_kv, flash ? "flash_attn_ext" : "mul_mat+soft_max_ext+mul_mat",
             spelling(m->weight), spelling(m->weight),
             spelling(m->output));
    snprintf(path, sizeof path, "%s/%s-%s%s.tg", dir, m->model, prefill ? "prefill512" : "decode",
             flash ? "-flash" : "");
    int rc = give_memory(&mem);
    if (rc == 0) rc = write_graph(path, gf, meta);
    free_memory(&mem);
    ggml_free(ctx);
    return rc;
}

/* ---- whisper, whisper.cpp style ------------------------------------------------------------ */

static struct ggml_tensor *named(struct ggml_tensor *t, const char *fmt, int layer) {
    ggml_format_name(t, fmt, layer);
    return t;
}

static int export_whisper(const char *dir) {
    const int n_mels = 80, n_ctx = 1500, n_state = 512, n_head = 8, n_layer = 6, head = n_state / n_head;
    const float eps = 1e-5f, kq_scale = 1.0f / sqrtf((float)head);
    struct memory mem = {meta_ctx(), NULL, NULL, NULL};
    struct ggml_context *ctx = ggml_init((struct ggml_init_params){.mem_size = 16u << 20, .no_alloc = true});
    struct ggml_context *wctx = mem.weights;
    struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, 4096, false);
    /* the conv graph: mel [2 n_ctx, n_mels] -> [n_ctx, n_state] */
    struct ggml_tensor *mel = input(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2 * n_ctx, n_mels), "mel");
    struct ggml_tensor *w1 = named(ggml_new_tensor_3d(wctx, GGML_TYPE_F16, 3, n_mels, n_state), "encoder.conv1.weight", 0);
    struct ggml_tensor *b1 = named(ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 1, n_state), "encoder.conv1.bias", 0);
    struct ggml_tensor *w2 = named(ggml_new_tensor_3d(wctx, GGML_TYPE_F16, 3, n_state, n_state), "encoder.conv2.weight", 0);
    struct ggml_tensor *b2 = named(ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 1, n_state), "encoder.conv2.bias", 0);
    struct ggml_tensor *cur = ggml_gelu(ctx, ggml_add(ctx, ggml_conv_1d_ph(ctx, w1, mel, 1, 1), b1));
    cur = ggml_gelu(ctx, ggml_add(ctx, ggml_conv_1d_ph(ctx, w2, cur, 2, 1), b2));
    ggml_set_name(cur, "embd_conv");
    /* the encoder graph */
    struct ggml_tensor *pe = named(ggml_new_tensor_2d(wctx, GGML_TYPE_F32, n_state, n_ctx), "encoder.positional_embedding", 0);
    cur = ggml_add(ctx, ggml_view_2d(ctx, pe, n_state, n_ctx, pe->nb[1], 0), ggml_cont(ctx, ggml_transpose(ctx, cur)));
    struct ggml_tensor *inpL = cur;
    for (int il = 0; il < n_layer; il++) {
#define W(type, n0, n1, fmt) named(ggml_new_tensor_2d(wctx, type, n0, n1), "encoder.blocks.%d." fmt, il)
        cur = ggml_norm(ctx, inpL, eps);
        cur = ggml_add(ctx, ggml_mul(ctx, cur, W(GGML_TYPE_F32, n_state, 1, "attn_ln.weight")),
                       W(GGML_TYPE_F32, n_state, 1, "attn_ln.bias"));
        struct ggml_tensor *q = ggml_add(ctx, ggml_mul_mat(ctx, W(GGML_TYPE_F16, n_state, n_state, "attn.query.weight"), cur),
                                         W(GGML_TYPE_F32, n_state, 1, "attn.query.bias"));
        struct ggml_tensor *k = ggml_mul_mat(ctx, W(GGML_TYPE_F16, n_state, n_state, "attn.key.weight"), cur);
        struct ggml_tensor *v = ggml_add(ctx, ggml_mul_mat(ctx, W(GGML_TYPE_F16, n_state, n_state, "attn.value.weight"), cur),
                                         W(GGML_TYPE_F32, n_state, 1, "attn.value.bias"));
        struct ggml_tensor *Q = ggml_permute(ctx, ggml_reshape_3d(ctx, q, head, n_head, n_ctx), 0, 2, 1, 3);
        struct ggml_tensor *K = ggml_permute(ctx, ggml_cpy(ctx, k, ggml_new_tensor_3d(ctx, GGML_TYPE_F16, head, n_head, n_ctx)),
                                             0, 2, 1, 3);
        struct ggml_tensor *KQ = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, K, Q), NULL, kq_scale, 0.0f);
        struct ggml_tensor *V = ggml_cpy(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, v, head, n_head, n_ctx), 1, 2, 0, 3),
                                         ggml_new_tensor_3d(ctx, GGML_TYPE_F16, n_ctx, head, n_head));
        struct ggml_tensor *KQV = ggml_permute(ctx, ggml_mul_mat(ctx, V, KQ), 0, 2, 1, 3);
        cur = ggml_cpy(ctx, KQV, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_state, n_ctx));
        cur = ggml_add(ctx, ggml_mul_mat(ctx, W(GGML_TYPE_F16, n_state, n_state, "attn.out.weight"), cur),
                       W(GGML_TYPE_F32, n_state, 1, "attn.out.bias"));
        struct ggml_tensor *inpFF = ggml_add(ctx, cur, inpL);
        cur = ggml_norm(ctx, inpFF, eps);
        cur = ggml_add(ctx, ggml_mul(ctx, cur, W(GGML_TYPE_F32, n_state, 1, "mlp_ln.weight")),
                       W(GGML_TYPE_F32, n_state, 1, "mlp_ln.bias"));
        cur = ggml_add(ctx, ggml_mul_mat(ctx, W(GGML_TYPE_F16, n_state, 4 * n_state, "mlp.0.weight"), cur),
                       W(GGML_TYPE_F32, 4 * n_state, 1, "mlp.0.bias"));
        cur = ggml_gelu(ctx, cur);
        cur = ggml_add(ctx, ggml_mul_mat(ctx, W(GGML_TYPE_F16, 4 * n_state, n_state, "mlp.2.weight"), cur),
                       W(GGML_TYPE_F32, n_state, 1, "mlp.2.bias"));
        inpL = ggml_add(ctx, cur, inpFF);
#undef W
    }
    cur = ggml_norm(ctx, inpL, eps);
    cur = ggml_add(ctx, ggml_mul(ctx, cur, named(ggml_new_tensor_1d(wctx, GGML_TYPE_F32, n_state), "encoder.ln_post.weight", 0)),
                   named(ggml_new_tensor_1d(wctx, GGML_TYPE_F32, n_state), "encoder.ln_post.bias", 0));
    ggml_set_name(cur, "embd_enc");
    ggml_set_output(cur);
    ggml_build_forward_expand(gf, cur);
    const char *meta = "pinned=ggml@d99724f2b141fed9e1a9f402213506c081433465\n"
                       "builder=tests/ggml/export_model_graphs.c:whisper.cpp_style_conv_and_encoder_graphs\n"
                       "model=whisper-base\nphase=encode\nn_mels=80\nn_audio_ctx=1500\nn_audio_state=512\n"
                       "n_audio_head=8\nn_audio_layer=6\nattention=mul_mat+soft_max_ext+mul_mat\nweight_type=f16\n"
                       "conv=im2col+mul_mat";
    char path[512];
    snprintf(path, sizeof path, "%s/whisper-base-encoder.tg", dir);
    int rc = give_memory(&mem);
    if (rc == 0) rc = write_graph(path, gf, meta);
    free_memory(&mem);
    ggml_free(ctx);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: export_model_graphs OUT_DIR\n");
        return 2;
    }
    if (mkdir(argv[1], 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "export: cannot create '%s': %s\n", argv[1], strerror(errno));
        return 1;
    }
    const struct llama l7b = {"llama-7b", 4096, 32, 32, 11008, 32, 32000, 4096, GGML_TYPE_Q4_0, GGML_TYPE_Q6_K};
    int rc = export_llama(argv[1], &l7b, 1, 2047, false);
    rc |= export_llama(argv[1], &l7b, 512, 0, false);
    /* flash attention small enough for CI's model check (test_ggml_model):
     * llama-tiny's shapes, the 7B decode graph's 2,048 keys */
    const struct llama tiny = {"llama-tiny", 256, 4, 4, 768, 2, 1000, 2048, GGML_TYPE_F16, GGML_TYPE_F16};
    rc |= export_llama(argv[1], &tiny, 1, 2047, true);
    rc |= export_whisper(argv[1]);
    return rc;
}

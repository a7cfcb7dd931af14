/* Core model: types, fp16/bf16 conversion, tensor sizes and strides, contexts,
 * op constructor shapes and source slots, views resolving to their root. */
#include "tg.h"
#include "tg-cpu.h"
#include "tg-impl.h"
#include "tg_test.h"

static void test_types(void) {
    CHECK(tg_type_from_name("q4_0") == TG_TYPE_Q4_0);
    CHECK(tg_type_from_name("q6_k") == TG_TYPE_Q6_K);
    CHECK(tg_type_from_name("f64") == TG_TYPE_COUNT);
    CHECK(tg_type_size(TG_TYPE_Q8_0) == 34 && tg_blck_size(TG_TYPE_Q8_0) == 32);
    CHECK(tg_type_size(TG_TYPE_Q4_K) == 144 && tg_blck_size(TG_TYPE_Q4_K) == 256);
    CHECK(tg_type_is_quantized(TG_TYPE_Q5_1) && !tg_type_is_quantized(TG_TYPE_BF16));
    for (int t = 0; t < TG_TYPE_COUNT; t++) CHECK((int)tg_type_from_name(tg_type_name((enum tg_type)t)) == t);
    for (int op = 0; op < TG_OP_COUNT; op++) CHECK((int)tg_op_from_name(tg_op_name((enum tg_op)op)) == op);
    CHECK(tg_op_from_name("flash_attn_ext") == TG_OP_FLASH_ATTN_EXT);
    CHECK(tg_op_from_name("bogus") == TG_OP_COUNT);
    CHECK(tg_op_can_inplace(TG_OP_ADD) && tg_op_can_inplace(TG_OP_SOFT_MAX) && !tg_op_can_inplace(TG_OP_MUL_MAT));
    CHECK(!tg_op_can_inplace(TG_OP_CPY) && tg_op_is_view(TG_OP_PERMUTE) && !tg_op_is_view(TG_OP_CPY));
}

static void test_half(void) {
    /* exact values round-trip */
    const float exact[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        CHECK_MSG(tg_fp16_to_fp32(tg_fp32_to_fp16(exact[i])) == exact[i], "%g", (double)exact[i]);
    }
    CHECK(tg_fp32_to_fp16(1.0f) == 0x3c00);
    CHECK(tg_fp32_to_fp16(-2.0f) == 0xc000);
    CHECK(tg_fp32_to_fp16(1e6f) == 0x7c00);          /* overflow -> inf */
    CHECK(tg_fp32_to_fp16(1.0f + 1.0f / 2048) == 0x3c00); /* tie -> even */
    CHECK(tg_fp32_to_fp16(1.0f + 3.0f / 2048) == 0x3c02); /* tie -> even (up) */
    CHECK(isnan(tg_fp16_to_fp32(tg_fp32_to_fp16(NAN))));
    /* every half value converts to float and back unchanged (except nan payloads) */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = tg_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) continue;
        if (tg_fp32_to_fp16(f) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d half values do not round-trip", bad);
    CHECK(tg_bf16_to_fp32(tg_fp32_to_bf16(1.5f)) == 1.5f);
    CHECK(tg_fp32_to_bf16(1.0f) == 0x3f80);
}

static void test_sizes(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_3d(ctx, TG_TYPE_F32, 4, 3, 2);
    CHECK(a && tg_nbytes(a) == 96 && a->nb[1] == 16 && a->nb[2] == 48 && tg_is_contiguous(a));
    struct tg_tensor *q = tg_new_tensor_2d(ctx, TG_TYPE_Q4_0, 64, 3);
    CHECK(q && q->nb[1] == 36 && tg_nbytes(q) == 108);
    CHECK(tg_new_tensor_2d(ctx, TG_TYPE_Q4_0, 33, 3) == NULL); /* not a block multiple */
    CHECK(tg_new_tensor_1d(ctx, TG_TYPE_F32, 0) == NULL);
    CHECK_ERR_HAS("dimension 0");
    CHECK(tg_new_tensor_4d(ctx, TG_TYPE_F32, INT64_MAX / 2, 4, 4, 4) == NULL);
    CHECK_ERR_HAS("overflow");
    struct tg_tensor *p = tg_permute(ctx, a, 1, 0, 2, 3);
    CHECK(p && p->ne[0] == 3 && p->ne[1] == 4 && p->nb[0] == 16 && p->nb[1] == 4 && tg_is_permuted(p));
    CHECK(p && tg_nbytes(p) == tg_nbytes(a) && !tg_is_contiguous(p));
    /* a view with gaps between its rows spans its extent, not ne * type size
     * (llama.cpp#5137: copies of such views across backends were made too small) */
    struct tg_tensor *gappy = tg_view_2d(ctx, a, 2, 3, a->nb[1], 0);
    CHECK(gappy && tg_nbytes(gappy) == 40 && !tg_is_contiguous(gappy));
    CHECK(p && p->view_src == a && p->src[0] == a && p->op == TG_OP_PERMUTE);
    /* views of views resolve to the root, offsets add up */
    struct tg_tensor *v1 = tg_view_1d(ctx, a, 8, 16);
    struct tg_tensor *v2 = tg_view_1d(ctx, v1, 2, 8);
    CHECK(v2 && v2->view_src == a && v2->view_offs == 24 && v2->src[0] == v1);
    CHECK(tg_view_1d(ctx, a, 30, 0) == NULL); /* 120 bytes > 96 */
    CHECK_ERR_HAS("outside");
    CHECK(tg_reshape_2d(ctx, p, 12, 2) == NULL); /* not contiguous */
    struct tg_tensor *r = tg_reshape_2d(ctx, a, 12, 2);
    CHECK(r && r->view_src == a && r->ne[0] == 12 && r->nb[1] == 48);
    /* ggml_is_contiguous: a transposed column is packed (one-element rows),
     * so ggml reshapes it and takes it where a contiguous source is needed */
    struct tg_tensor *col = tg_new_tensor_2d(ctx, TG_TYPE_F32, 4, 1);
    struct tg_tensor *row = tg_transpose(ctx, col);
    CHECK(row && row->nb[0] == 16 && tg_is_contiguous(row) && tg_nbytes(row) == 16);
    CHECK_MSG(row && tg_reshape_1d(ctx, row, 4), "reshape of a transposed column: %s", tg_last_error());
    CHECK_MSG(row && tg_soft_max(ctx, row, NULL, 1.0f, 0.0f), "soft_max of a transposed column: %s", tg_last_error());
    CHECK_MSG(row && tg_unary(ctx, row, TG_UNARY_SILU), "silu of a transposed column: %s", tg_last_error());
    CHECK(p && tg_reshape_1d(ctx, tg_permute(ctx, a, 1, 0, 2, 3), 24) == NULL); /* still: rows of 3 strided */
    /* a 1-d view's strides past dim 0 are its row's size (ggml), blocks for the block types */
    struct tg_tensor *qv = tg_view_1d(ctx, q, 64, 36);
    CHECK(qv && qv->nb[0] == 18 && qv->nb[1] == 36 && qv->nb[2] == 36 && qv->nb[3] == 36 && tg_is_contiguous(qv));
    tg_context_free(ctx);
}

static void test_ops(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *w = tg_new_tensor_2d(ctx, TG_TYPE_F16, 16, 8);  /* [K, M] */
    struct tg_tensor *x = tg_new_tensor_3d(ctx, TG_TYPE_F32, 16, 5, 2); /* [K, N, B] */
    struct tg_tensor *y = tg_mul_mat(ctx, w, x);
    CHECK(y && y->ne[0] == 8 && y->ne[1] == 5 && y->ne[2] == 2 && y->type == TG_TYPE_F32);
    CHECK(tg_mul_mat(ctx, w, tg_new_tensor_1d(ctx, TG_TYPE_F32, 15)) == NULL);
    CHECK(tg_mul_mat(ctx, tg_transpose(ctx, w), x) == NULL);
    struct tg_tensor *b = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    struct tg_tensor *s = tg_add(ctx, y, b);
    CHECK(s && s->src[0] == y && s->src[1] == b && tg_are_same_shape(s, y));
    CHECK(tg_add(ctx, b, y) == NULL);
    CHECK(tg_add(ctx, NULL, b) == NULL); /* NULL passes through */
    struct tg_tensor *g = tg_glu(ctx, y, TG_GLU_SWIGLU, false);
    CHECK(g && g->ne[0] == 4 && g->op_params[0] == TG_GLU_SWIGLU);
    struct tg_tensor *cache = tg_new_tensor_2d(ctx, TG_TYPE_F16, 8, 32);
    struct tg_tensor *idx = tg_new_tensor_1d(ctx, TG_TYPE_I32, 5);
    struct tg_tensor *rows = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 5);
    struct tg_tensor *st = tg_set_rows(ctx, cache, rows, idx);
    CHECK(st && st->view_src == cache && st->src[0] == rows && st->src[1] == idx && st->src[2] == cache);
    struct tg_tensor *gr = tg_get_rows(ctx, cache, idx);
    CHECK(gr && gr->ne[0] == 8 && gr->ne[1] == 5 && gr->type == TG_TYPE_F32);
    struct tg_tensor *c = tg_cast(ctx, y, TG_TYPE_F16);
    CHECK(c && c->op == TG_OP_CPY && c->src[1] == c && c->type == TG_TYPE_F16);
    struct tg_tensor *cp = tg_cpy(ctx, y, tg_new_tensor_1d(ctx, TG_TYPE_F16, 80));
    CHECK(cp && cp->op == TG_OP_CPY && cp->view_src == cp->src[1]);
    struct tg_tensor *cc = tg_concat(ctx, y, y, 1);
    CHECK(cc && cc->ne[1] == 10 && cc->op_params[0] == 1);
    struct tg_tensor *pos = tg_new_tensor_1d(ctx, TG_TYPE_I32, 2);
    CHECK(tg_rope(ctx, y, pos, 8, TG_ROPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) != NULL);
    CHECK(tg_rope(ctx, y, pos, 7, TG_ROPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK(tg_rope(ctx, y, pos, 8, TG_ROPE_MROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK_ERR_HAS("tg_rope_multi");
    /* the multimodal modes: four positions per token, sections of pairs */
    struct tg_tensor *pos4 = tg_new_tensor_1d(ctx, TG_TYPE_I32, 8);
    const int sections[4] = {2, 1, 1, 0}, none[4] = {0}, negative[4] = {2, -1, 0, 0};
    struct tg_tensor *mr = tg_rope_multi(ctx, y, pos4, NULL, 8, sections, TG_ROPE_MROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                         32.0f, 1.0f);
    CHECK(mr && mr->op_params[2] == TG_ROPE_MROPE && mr->op_params[11] == 2 && mr->op_params[13] == 1);
    CHECK(tg_rope_multi(ctx, y, pos, NULL, 8, sections, TG_ROPE_MROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK_ERR_HAS("4 x ne2");
    CHECK(tg_rope_multi(ctx, y, pos4, NULL, 8, none, TG_ROPE_IMROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK_ERR_HAS("all 0");
    const int extra_only[4] = {0, 0, 0, 4};
    CHECK(tg_rope_multi(ctx, y, pos4, NULL, 8, extra_only, TG_ROPE_MROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK(tg_rope_multi(ctx, y, pos4, NULL, 8, negative, TG_ROPE_MROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK_ERR_HAS("negative");
    CHECK(tg_rope_multi(ctx, y, pos4, NULL, 8, sections, TG_ROPE_VISION, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK_ERR_HAS("ne0 / 2");
    CHECK(tg_rope_multi(ctx, y, pos4, NULL, 8, sections, TG_ROPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    struct tg_tensor *vr = tg_rope_multi(ctx, y, pos4, NULL, 4, sections, TG_ROPE_VISION, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                         32.0f, 1.0f);
    CHECK(vr != NULL);
    /* an offset moves the rotated dims: even, inside ne0, not for vision */
    struct tg_tensor *ro = tg_rope(ctx, y, pos, 4, TG_ROPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    CHECK_OK(tg_rope_set_offset(ro, 4));
    CHECK(ro->op_params[15] == 4);
    CHECK_STATUS(tg_rope_set_offset(ro, 6), TG_ERR_INVALID);
    CHECK_ERR_HAS("ne0 - n_dims = 4");
    CHECK_STATUS(tg_rope_set_offset(ro, 1), TG_ERR_INVALID);
    CHECK(ro->op_params[15] == 4);
    CHECK_STATUS(tg_rope_set_offset(vr, 0), TG_ERR_INVALID);
    CHECK_ERR_HAS("vision");
    CHECK_STATUS(tg_rope_set_offset(y, 0), TG_ERR_INVALID);
    struct tg_tensor *sr = tg_sum_rows(ctx, y);
    CHECK(sr && sr->ne[0] == 1 && sr->ne[1] == 5);
    struct tg_tensor *sm = tg_soft_max(ctx, y, tg_new_tensor_2d(ctx, TG_TYPE_F16, 8, 8), 0.5f, 0.0f);
    CHECK(sm && sm->src[1] && tg_get_op_param_f32(sm, 0) == 0.5f);
    struct tg_tensor *q = tg_new_tensor_4d(ctx, TG_TYPE_F32, 64, 3, 8, 1);
    struct tg_tensor *k = tg_new_tensor_4d(ctx, TG_TYPE_F16, 64, 10, 2, 1);
    struct tg_tensor *fa = tg_flash_attn_ext(ctx, q, k, k, NULL, 0.125f, 0.0f, 0.0f);
    CHECK(fa && fa->ne[0] == 64 && fa->ne[1] == 8 && fa->ne[2] == 3);
    tg_context_free(ctx);
}

static void test_context_data(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 1024});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 100);
    CHECK(a && a->data != NULL);
    CHECK(tg_new_tensor_1d(ctx, TG_TYPE_F32, 1000) == NULL);
    CHECK_ERR_HAS("arena full");
    const int64_t five[5] = {1, 1, 1, 1, 1};
    CHECK(tg_new_tensor(ctx, TG_TYPE_F32, 5, five) == NULL && tg_new_tensor(ctx, TG_TYPE_F32, 0, five) == NULL);
    /* what is left counts, not the whole arena: 400 and 400 bytes fit 1024, a third does not */
    struct tg_tensor *b = tg_new_tensor_1d(ctx, TG_TYPE_F32, 100);
    CHECK(b && b->data != NULL);
    CHECK(tg_new_tensor_1d(ctx, TG_TYPE_F32, 100) == NULL);
    CHECK_ERR_HAS("arena full");
    tg_set_name(a, "alpha");
    CHECK(tg_context_get_tensor(ctx, "alpha") == a);
    CHECK(tg_context_first_tensor(ctx) == a);
    tg_set_f32_nd(a, 3, 0, 0, 0, 2.5f);
    CHECK(tg_get_f32_nd(a, 3, 0, 0, 0) == 2.5f);
    tg_context_free(ctx);
}

/* A tensor a constructor made and then refused (arena full, a view outside its
 * source) leaves its context: iteration, lookups and static allocation see
 * only tensors handed out.  The refused entries stayed listed, and
 * tg_alloc_ctx_tensors bound them and returned a buffer where nothing needed
 * memory (documented: NULL with TG_OK). */
static void test_refused_tensors_leave_context(void) {
    struct tg_context *arena = tg_context_new((struct tg_context_params){.mem_size = 128});
    struct tg_tensor *a = tg_new_tensor_1d(arena, TG_TYPE_F32, 4);
    size_t used = tg_context_used_mem(arena);
    CHECK(a && tg_new_tensor_1d(arena, TG_TYPE_F32, 400) == NULL);
    CHECK_ERR_HAS("arena full");
    CHECK(tg_context_n_tensors(arena) == 1 && tg_context_used_mem(arena) == used);
    CHECK(tg_context_first_tensor(arena) == a && tg_context_next_tensor(arena, a) == NULL);
    CHECK(tg_context_get_tensor(arena, "") == a); /* the only unnamed tensor */
    enum tg_status st = TG_ERR_INVALID;
    tg_buffer *nothing = tg_alloc_ctx_tensors(arena, tg_cpu_buffer_type(), &st);
    CHECK(nothing == NULL && st == TG_OK);
    tg_buffer_free(nothing);
    /* the slot is reused: the next tensor is listed right after a */
    struct tg_tensor *b = tg_new_tensor_1d(arena, TG_TYPE_F32, 4);
    CHECK(b && tg_context_next_tensor(arena, a) == b && tg_context_n_tensors(arena) == 2);
    CHECK(b && b->view_src == NULL && b->op == TG_OP_NONE && b->name[0] == '\0');
    tg_context_free(arena);

    struct tg_context *meta = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *w = tg_new_tensor_1d(meta, TG_TYPE_F32, 4);
    CHECK(tg_view_1d(meta, w, 8, 0) == NULL);
    CHECK_ERR_HAS("lies outside");
    CHECK(tg_context_n_tensors(meta) == 1 && tg_context_next_tensor(meta, w) == NULL);
    tg_buffer *buf = tg_alloc_ctx_tensors(meta, tg_cpu_buffer_type(), &st);
    CHECK(buf && st == TG_OK && w->buffer == buf);
    tg_buffer_free(buf);
    tg_context_free(meta);

    /* an op result refused by its rules (max_bias without a mask) after its
     * arena data was carved: the data goes back, and the tensor made next in
     * its slot is a plain one (no op or sources of the refused result) */
    struct tg_context *ops = tg_context_new((struct tg_context_params){.mem_size = 4096});
    struct tg_tensor *x = tg_new_tensor_2d(ops, TG_TYPE_F32, 3, 1); /* 12 bytes: padded in the arena */
    size_t before = tg_context_used_mem(ops);
    CHECK(x && tg_soft_max(ops, x, NULL, 1.0f, 8.0f) == NULL);
    CHECK_ERR_HAS("needs a mask");
    CHECK(tg_context_n_tensors(ops) == 1 && tg_context_used_mem(ops) == before);
    CHECK(tg_context_next_tensor(ops, x) == NULL);
    struct tg_tensor *next = tg_new_tensor_1d(ops, TG_TYPE_F32, 3);
    CHECK(next && next->op == TG_OP_NONE && next->src[0] == NULL && tg_context_next_tensor(ops, x) == next);
    CHECK(next && next->op_params[0] == 0 && next->op_params[1] == 0);
    tg_context_free(ops);
}

/* The printf-free names of ops and scheduler copies: same text as the
 * format they replace, cut at the name's capacity like snprintf. */
static void test_name_join(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    char buf[12];
    CHECK(strcmp(tg_int_text(buf, 0), "0") == 0);
    CHECK(strcmp(tg_int_text(buf, 40213), "40213") == 0);
    CHECK(strcmp(tg_int_text(buf, -7), "-7") == 0);
    CHECK(strcmp(tg_int_text(buf, -2147483647 - 1), "-2147483648") == 0);
    tg_name_join(t, "CUDA0", "#", "attn_norm-3", "#", tg_int_text(buf, 1), (const char *)NULL);
    CHECK(strcmp(t->name, "CUDA0#attn_norm-3#1") == 0);
    tg_name_join(t, (const char *)NULL);
    CHECK(t->name[0] == '\0');
    char long_part[100];
    memset(long_part, 'x', sizeof long_part - 1);
    long_part[sizeof long_part - 1] = '\0';
    char expect[TG_MAX_NAME]; /* what snprintf("%s (view)") leaves: the first 63 bytes */
    memset(expect, 'x', sizeof expect - 1);
    expect[sizeof expect - 1] = '\0';
    tg_name_join(t, long_part, " (view)", (const char *)NULL);
    CHECK(strlen(t->name) == TG_MAX_NAME - 1 && strcmp(t->name, expect) == 0);
    /* op results keep the names the formats gave */
    struct tg_tensor *v = tg_scale(ctx, t, 2.0f);
    CHECK(strncmp(v->name, "scale-", 6) == 0);
    tg_set_name(t, "w");
    struct tg_tensor *view = tg_view_1d(ctx, t, 2, 0);
    CHECK(strcmp(view->name, "w (view)") == 0);
    tg_context_free(ctx);
}

/* Sizes at the end of the address space are refused, never wrapped: a view
 * of a view whose offsets add past SIZE_MAX, a CPU buffer that cannot be
 * rounded to its alignment, a context whose tensor cannot be (each returned
 * a few bytes claiming the size asked, and writes ran past them). */
static void test_sizes_past_address_space(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    struct tg_tensor *v1 = tg_view_1d(ctx, a, 8, 64);
    CHECK(v1 != NULL && tg_view_1d(ctx, v1, 4, SIZE_MAX - 15) == NULL);
    CHECK_ERR_HAS("passes SIZE_MAX");
    CHECK(tg_buft_alloc_buffer(tg_cpu_buffer_type(), SIZE_MAX - 10) == NULL);
    CHECK_ERR_HAS("more than the address space holds");
    struct tg_context *big = tg_context_new((struct tg_context_params){.no_alloc = true});
    CHECK(tg_new_tensor_2d(big, TG_TYPE_I8, INT64_MAX - 63, 2) != NULL); /* 2^64 - 128 bytes */
    enum tg_status st = TG_OK;
    CHECK(tg_alloc_ctx_tensors(big, tg_cpu_buffer_type(), &st) == NULL && st == TG_ERR_ALLOC);
    tg_context_free(big);
    /* a reshape whose dimensions multiply past INT64_MAX (signed overflow, undefined) */
    CHECK(tg_reshape_2d(ctx, a, (int64_t)1 << 62, 4) == NULL);
    CHECK_ERR_HAS("their product overflows");
    /* the cause named: a row of 33 is no whole number of q4_0 blocks (the message said the size overflowed) */
    CHECK(tg_new_tensor_1d(ctx, TG_TYPE_Q4_0, 33) == NULL);
    CHECK_ERR_HAS("ne0 must be a multiple of the type's block size 32");
    tg_context_free(ctx);
}

int main(void) {
    test_name_join();
    test_sizes_past_address_space();
    test_types();
    test_half();
    test_sizes();
    test_ops();
    test_context_data();
    test_refused_tensors_leave_context();
    return tg_test_finish();
}

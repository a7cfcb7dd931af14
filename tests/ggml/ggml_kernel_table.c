/* The kernel differential's table (see tg-ggml-kernels.h): one entry per op
 * form tgsched's CPU backend computes.  An entry names how its operands are
 * made (shared makers below), its two constructors, the types and layouts it
 * is tried with, whether it may run in place, and its bound.  To add an op or
 * a type: add an entry, or a bit to an entry's `types`. */
#include "tg-ggml-kernels.h"

#include <string.h>

/* ggml's NMSE bounds (test-backend-ops) */
#define NMSE_DEFAULT 1e-7
#define NMSE_SOFT_MAX 1e-6
#define NMSE_MATMUL 5e-4
#define EXACT 0.0
/* gelu and gelu_quick: ggml's CPU reference rounds the input to f16 and looks
 * the result up in a table (vec.h, GGML_GELU_FP16), a relative error up to
 * 2^-11 per element, itself up to about 2.5e-7 NMSE on short rows; tgsched
 * computes the formula.  The bound is soft_max's. */
#define NMSE_GELU_TABLE 1e-6

/* ---- operand makers --------------------------------------------------------------------- */

static const int64_t shapes[][4] = {{12, 7, 1, 1}, {5, 3, 4, 2}, {33, 1, 1, 1}, {16, 9, 3, 1}};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static void operand(struct kd_setup *s, enum tg_type t, const int64_t ne[4], enum kd_layout l, enum kd_fill f, int64_t limit) {
    struct kd_operand *o = &s->op[s->n++];
    o->type = t;
    memcpy(o->ne, ne, sizeof o->ne);
    o->layout = l;
    o->fill = f;
    o->limit = limit;
}

/* One operand in each shape, laid out as asked. */
static bool ops_one(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    if (v >= N_SHAPES) return false;
    operand(s, t, shapes[v], l, e->fill, 0);
    return true;
}

/* a and b: b the same shape or broadcast over a; the layout on b in even
 * variants (the strided second operand), on a in odd ones. */
static bool ops_binary(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    if (v >= N_SHAPES * 8) return false;
    const int64_t *a = shapes[v / 8];
    int kind = (v / 2) % 4;
    bool strided_b = v % 2 == 0;
    int64_t b[4] = {a[0], a[1], a[2], a[3]};
    if (kind == 1) b[1] = 1, b[3] = 1;          /* rows broadcast */
    if (kind == 2) b[0] = 1, b[2] = 1;          /* columns broadcast */
    if (kind == 3) b[1] = b[2] = b[3] = 1;      /* one row for all */
    operand(s, t, a, strided_b ? KD_CONTIGUOUS : l, e->fill, 0);
    operand(s, t, b, strided_b ? l : KD_CONTIGUOUS, e->fill, 0);
    return true;
}

static bool ops_add1(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t one[4] = {1, 1, 1, 1};
    if (!ops_one(e, v, t, l, s)) return false;
    operand(s, t, one, KD_CONTIGUOUS, KD_ANY, 0);
    return true;
}

/* glu: fused (both halves in a) in even variants, split (a and b) in odd ones. */
static bool ops_glu(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    if (v >= N_SHAPES * 2) return false;
    const int64_t *a = shapes[v / 2];
    if (v % 2 == 0) {
        int64_t both[4] = {2 * a[0], a[1], a[2], a[3]};
        operand(s, t, both, l, e->fill, 0);
    } else {
        operand(s, t, a, l, e->fill, 0);
        operand(s, t, a, KD_CONTIGUOUS, e->fill, 0);
    }
    return true;
}

/* soft_max: no mask, an f32 mask, an f16 mask, an f32 mask broadcast over dim 2 with ALiBi. */
static bool ops_soft_max(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    if (v >= N_SHAPES * 4) return false;
    const int64_t *a = shapes[v / 4];
    int kind = v % 4;
    operand(s, t, a, l, e->fill, 0);
    int64_t mask[4] = {a[0], a[1], kind == 3 ? 1 : a[2], kind == 3 ? 1 : a[3]};
    if (kind > 0) operand(s, kind == 2 ? TG_TYPE_F16 : TG_TYPE_F32, mask, KD_CONTIGUOUS, KD_MASK, 0);
    return true;
}

/* rope: [head dim, heads, tokens], positions, all dims or half rotated. */
static bool ops_rope(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t heads[][4] = {{8, 3, 5, 1}, {16, 2, 7, 1}, {6, 4, 2, 1}};
    if (v >= 3) return false;
    operand(s, t, heads[v], l, e->fill, 0);
    const int64_t pos[4] = {heads[v][2], 1, 1, 1};
    operand(s, TG_TYPE_I32, pos, KD_CONTIGUOUS, KD_INDEX, 64);
    return true;
}

/* rope's multimodal modes: the same heads, four positions per token. */
static bool ops_rope_multi(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t heads[][4] = {{8, 3, 5, 1}, {16, 2, 7, 1}, {6, 4, 2, 1}};
    if (v >= 3) return false;
    operand(s, t, heads[v], l, e->fill, 0);
    const int64_t pos[4] = {4 * heads[v][2], 1, 1, 1};
    operand(s, TG_TYPE_I32, pos, KD_CONTIGUOUS, KD_INDEX, 64);
    return true;
}

/* get_rows: a's rows picked by i32 indices (per a's dim 2). */
static bool ops_get_rows(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t src[][4] = {{12, 7, 1, 1}, {5, 9, 3, 1}};
    if (v >= 2) return false;
    operand(s, t, src[v], l, e->fill, 0);
    const int64_t idx[4] = {4, src[v][2], 1, 1};
    operand(s, TG_TYPE_I32, idx, KD_CONTIGUOUS, KD_INDEX, src[v][1]);
    return true;
}

/* set_rows: f32 rows written into a of type t at i32 indices. */
static bool ops_set_rows(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t dst[][4] = {{12, 9, 1, 1}, {6, 8, 3, 1}};
    if (v >= 2) return false;
    operand(s, t, dst[v], KD_CONTIGUOUS, KD_ANY, 0);
    const int64_t rows[4] = {dst[v][0], 3, dst[v][2], 1};
    operand(s, TG_TYPE_F32, rows, l, e->fill, 0);
    const int64_t idx[4] = {3, dst[v][2], 1, 1};
    operand(s, TG_TYPE_I32, idx, KD_CONTIGUOUS, KD_INDEX, dst[v][1]);
    return true;
}

/* cpy: a (laid out as asked) into a contiguous b; param 0: f32 -> t, 1: t -> f32. */
static bool ops_cpy(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    if (v >= N_SHAPES) return false;
    operand(s, e->param ? t : TG_TYPE_F32, shapes[v], l, e->fill, 0);
    operand(s, e->param ? TG_TYPE_F32 : t, shapes[v], KD_CONTIGUOUS, KD_ANY, 0);
    return true;
}

/* concat along dim param: a and b differ in that dim only. */
static bool ops_concat(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    if (v >= N_SHAPES) return false;
    int64_t b[4] = {shapes[v][0], shapes[v][1], shapes[v][2], shapes[v][3]};
    b[e->param] = 2;
    operand(s, t, shapes[v], l, e->fill, 0);
    operand(s, t, b, KD_CONTIGUOUS, e->fill, 0);
    return true;
}

/* mul_mat: a [K, M] (rows contiguous: permuted at most) times b [K, N], b's
 * dims 2-3 a multiple of a's (broadcast). */
static bool ops_mul_mat(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t mats[][2][4] = {
        {{16, 7, 1, 1}, {16, 5, 1, 1}}, {{32, 4, 2, 1}, {32, 3, 4, 2}}, {{8, 9, 3, 1}, {8, 6, 3, 1}}};
    if (v >= 6) return false;
    bool strided_b = v % 2 == 0;
    operand(s, t, mats[v / 2][0], strided_b || l == KD_TRANSPOSED ? KD_CONTIGUOUS : l, e->fill, 0);
    operand(s, TG_TYPE_F32, mats[v / 2][1], strided_b ? l : KD_CONTIGUOUS, e->fill, 0);
    return true;
}

/* flash attention: q [D, n_q, H], k/v [D, n_kv, H_kv] of type t, an f16 mask or none. */
static bool ops_flash_attn(const struct kd_entry *e, int v, enum tg_type t, enum kd_layout l, struct kd_setup *s) {
    static const int64_t qs[][4] = {{16, 3, 4, 1}, {8, 5, 2, 1}};
    if (v >= 4) return false;
    const int64_t *q = qs[v / 2];
    int64_t kv[4] = {q[0], 7, v / 2 == 0 ? 2 : q[2], 1}; /* GQA in the first */
    operand(s, TG_TYPE_F32, q, l, e->fill, 0);
    operand(s, t, kv, KD_CONTIGUOUS, KD_ANY, 0);
    operand(s, t, kv, KD_CONTIGUOUS, KD_ANY, 0);
    if (v % 2) {
        const int64_t mask[4] = {kv[1], q[1], 1, 1};
        operand(s, TG_TYPE_F16, mask, KD_CONTIGUOUS, KD_MASK, 0);
    }
    return true;
}

/* ---- constructors --------------------------------------------------------------------------- */

#define TG_BUILDER(name) static struct tg_tensor *name(struct tg_context *ctx, struct tg_tensor *const *x, const struct kd_entry *e, enum tg_type t)
#define GG_BUILDER(name) static struct ggml_tensor *name(struct ggml_context *ctx, struct ggml_tensor *const *x, const struct kd_entry *e, enum tg_type t)
#define UNUSED_ARGS (void)e, (void)t

TG_BUILDER(tg_add_) { UNUSED_ARGS; return tg_add(ctx, x[0], x[1]); }
GG_BUILDER(gg_add_) { UNUSED_ARGS; return ggml_add(ctx, x[0], x[1]); }
TG_BUILDER(tg_sub_) { UNUSED_ARGS; return tg_sub(ctx, x[0], x[1]); }
GG_BUILDER(gg_sub_) { UNUSED_ARGS; return ggml_sub(ctx, x[0], x[1]); }
TG_BUILDER(tg_mul_) { UNUSED_ARGS; return tg_mul(ctx, x[0], x[1]); }
GG_BUILDER(gg_mul_) { UNUSED_ARGS; return ggml_mul(ctx, x[0], x[1]); }
TG_BUILDER(tg_div_) { UNUSED_ARGS; return tg_div(ctx, x[0], x[1]); }
GG_BUILDER(gg_div_) { UNUSED_ARGS; return ggml_div(ctx, x[0], x[1]); }
TG_BUILDER(tg_add1_) { UNUSED_ARGS; return tg_add1(ctx, x[0], x[1]); }
GG_BUILDER(gg_add1_) {
    UNUSED_ARGS;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* ggml keeps the op; tgsched computes it */
    return ggml_add1(ctx, x[0], x[1]);
#pragma GCC diagnostic pop
}
TG_BUILDER(tg_scale_) { (void)t; return tg_scale_bias(ctx, x[0], e->f[0], e->f[1]); }
GG_BUILDER(gg_scale_) { (void)t; return ggml_scale_bias(ctx, x[0], e->f[0], e->f[1]); }
TG_BUILDER(tg_sqr_) { UNUSED_ARGS; return tg_sqr(ctx, x[0]); }
GG_BUILDER(gg_sqr_) { UNUSED_ARGS; return ggml_sqr(ctx, x[0]); }
TG_BUILDER(tg_sqrt_) { UNUSED_ARGS; return tg_sqrt(ctx, x[0]); }
GG_BUILDER(gg_sqrt_) { UNUSED_ARGS; return ggml_sqrt(ctx, x[0]); }
TG_BUILDER(tg_log_) { UNUSED_ARGS; return tg_log(ctx, x[0]); }
GG_BUILDER(gg_log_) { UNUSED_ARGS; return ggml_log(ctx, x[0]); }
TG_BUILDER(tg_fill_) { (void)t; return tg_fill(ctx, x[0], e->f[0]); }
GG_BUILDER(gg_fill_) { (void)t; return ggml_fill(ctx, x[0], e->f[0]); }
TG_BUILDER(tg_unary_) { (void)t; return tg_unary(ctx, x[0], (enum tg_unary_op)e->param); }
GG_BUILDER(gg_unary_) { (void)t; return ggml_unary(ctx, x[0], (enum ggml_unary_op)e->param); }
/* glu: param is the sub-op, f[0] != 0 swaps the halves (fused form) */
TG_BUILDER(tg_glu_) {
    (void)t;
    return x[1] ? tg_glu_split(ctx, x[0], x[1], (enum tg_glu_op)e->param) : tg_glu(ctx, x[0], (enum tg_glu_op)e->param, e->f[0] != 0);
}
GG_BUILDER(gg_glu_) {
    (void)t;
    return x[1] ? ggml_glu_split(ctx, x[0], x[1], (enum ggml_glu_op)e->param)
                : ggml_glu(ctx, x[0], (enum ggml_glu_op)e->param, e->f[0] != 0);
}
/* Where ggml's kernel asserts on a strided operand (its CPU backend says it
 * supports it: docs/upstream.md), the reference copies it contiguous first;
 * ggml's copy is exact, so the reference computes the same values. */
static struct ggml_tensor *contiguous_for_ggml(struct ggml_context *ctx, struct ggml_tensor *x) {
    return ggml_is_contiguous(x) ? x : ggml_cont(ctx, x);
}
TG_BUILDER(tg_diag_mask_inf_) { (void)t; return tg_diag_mask_inf(ctx, x[0], e->param); }
GG_BUILDER(gg_diag_mask_inf_) { (void)t; return ggml_diag_mask_inf(ctx, contiguous_for_ggml(ctx, x[0]), e->param); }
TG_BUILDER(tg_rms_norm_) { (void)t; return tg_rms_norm(ctx, x[0], e->f[0]); }
GG_BUILDER(gg_rms_norm_) { (void)t; return ggml_rms_norm(ctx, x[0], e->f[0]); }
TG_BUILDER(tg_norm_) { (void)t; return tg_norm(ctx, x[0], e->f[0]); }
GG_BUILDER(gg_norm_) { (void)t; return ggml_norm(ctx, x[0], e->f[0]); }
/* soft_max: f[0] scale, f[1] max_bias (ALiBi, only with a mask) */
TG_BUILDER(tg_soft_max_) { (void)t; return tg_soft_max(ctx, x[0], x[1], e->f[0], x[1] && x[1]->ne[2] == 1 ? e->f[1] : 0); }
GG_BUILDER(gg_soft_max_) { (void)t; return ggml_soft_max_ext(ctx, x[0], x[1], e->f[0], x[1] && x[1]->ne[2] == 1 ? e->f[1] : 0); }
/* rope: param the mode; f[0] != 0 rotates half the dims */
static int rope_dims(const struct kd_entry *e, int64_t head_dim) { return (int)(e->f[0] != 0 ? head_dim / 2 / 2 * 2 : head_dim); }
TG_BUILDER(tg_rope_) {
    (void)t;
    return tg_rope(ctx, x[0], x[1], rope_dims(e, x[0]->ne[0]), e->param, 64, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
}
GG_BUILDER(gg_rope_) {
    (void)t;
    return ggml_rope_ext(ctx, x[0], x[1], NULL, rope_dims(e, x[0]->ne[0]), e->param, 64, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
}
/* rope with its rotated dims moved: f[0] != 0 as above, f[1] the offset */
TG_BUILDER(tg_rope_offset_) {
    struct tg_tensor *r = tg_rope_(ctx, x, e, t);
    return r && tg_rope_set_offset(r, (int)e->f[1]) == TG_OK ? r : NULL;
}
GG_BUILDER(gg_rope_offset_) {
    struct ggml_tensor *r = gg_rope_(ctx, x, e, t);
    return ggml_rope_set_offset(r, (int)e->f[1]);
}
/* the multimodal modes (param): sections of one pair each, repeating; vision turns every dim */
static const int rope_sections[4] = {1, 1, 1, 0};
static int rope_multi_dims(const struct kd_entry *e, int64_t head_dim) {
    return (int)(e->param == TG_ROPE_VISION ? head_dim / 2 : head_dim);
}
TG_BUILDER(tg_rope_multi_) {
    (void)t;
    return tg_rope_multi(ctx, x[0], x[1], NULL, rope_multi_dims(e, x[0]->ne[0]), rope_sections, e->param, 64, 10000.0f,
                         1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
}
GG_BUILDER(gg_rope_multi_) {
    (void)t;
    int sections[4] = {rope_sections[0], rope_sections[1], rope_sections[2], rope_sections[3]};
    return ggml_rope_multi(ctx, x[0], x[1], NULL, rope_multi_dims(e, x[0]->ne[0]), sections, e->param, 64, 10000.0f,
                           1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
}
/* xielu: f[] alpha_n, alpha_p, beta, eps */
TG_BUILDER(tg_xielu_) { (void)t; return tg_xielu(ctx, x[0], e->f[0], e->f[1], e->f[2], e->f[3]); }
GG_BUILDER(gg_xielu_) { (void)t; return ggml_xielu(ctx, x[0], e->f[0], e->f[1], e->f[2], e->f[3]); }
TG_BUILDER(tg_get_rows_) { UNUSED_ARGS; return tg_get_rows(ctx, x[0], x[1]); }
GG_BUILDER(gg_get_rows_) { UNUSED_ARGS; return ggml_get_rows(ctx, x[0], x[1]); }
TG_BUILDER(tg_set_rows_) { UNUSED_ARGS; return tg_set_rows(ctx, x[0], x[1], x[2]); }
GG_BUILDER(gg_set_rows_) { UNUSED_ARGS; return ggml_set_rows(ctx, x[0], x[1], x[2]); }
TG_BUILDER(tg_cpy_) { UNUSED_ARGS; return tg_cpy(ctx, x[0], x[1]); }
GG_BUILDER(gg_cpy_) { UNUSED_ARGS; return ggml_cpy(ctx, x[0], x[1]); }
TG_BUILDER(tg_cont_) { UNUSED_ARGS; return tg_cont(ctx, x[0]); }
GG_BUILDER(gg_cont_) { UNUSED_ARGS; return ggml_cont(ctx, x[0]); }
TG_BUILDER(tg_dup_) { UNUSED_ARGS; return tg_dup(ctx, x[0]); }
GG_BUILDER(gg_dup_) { UNUSED_ARGS; return ggml_dup(ctx, x[0]); }
TG_BUILDER(tg_concat_) { (void)t; return tg_concat(ctx, x[0], x[1], e->param); }
GG_BUILDER(gg_concat_) { (void)t; return ggml_concat(ctx, x[0], x[1], e->param); }
TG_BUILDER(tg_sum_rows_) { UNUSED_ARGS; return tg_sum_rows(ctx, x[0]); }
GG_BUILDER(gg_sum_rows_) { UNUSED_ARGS; return ggml_sum_rows(ctx, contiguous_for_ggml(ctx, x[0])); }
TG_BUILDER(tg_mul_mat_) { UNUSED_ARGS; return tg_mul_mat(ctx, x[0], x[1]); }
GG_BUILDER(gg_mul_mat_) { UNUSED_ARGS; return ggml_mul_mat(ctx, x[0], contiguous_for_ggml(ctx, x[1])); }
TG_BUILDER(tg_flash_attn_) { (void)t; return tg_flash_attn_ext(ctx, x[0], x[1], x[2], x[3], e->f[0], 0.0f, e->f[1]); }
GG_BUILDER(gg_flash_attn_) { (void)t; return ggml_flash_attn_ext(ctx, x[0], x[1], x[2], x[3], e->f[0], 0.0f, e->f[1]); }

/* ---- the table ------------------------------------------------------------------------------ */

#define FLOATS KD_FLOAT_TYPES
#define F32 KD_TYPE_BIT(TG_TYPE_F32)
#define ALL KD_ALL_LAYOUTS
#define ROWS_CONTIGUOUS (KD_LAYOUT_BIT(KD_CONTIGUOUS) | KD_LAYOUT_BIT(KD_PERMUTED))
#define UNARY(op, nm, bound)                                                                                    \
    {.name = "unary." nm, .operands = ops_one, .build_tg = tg_unary_, .build_ggml = gg_unary_, .param = op,   \
     .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = bound}
#define GLU(op, nm, swapped, bound)                                                                             \
    {.name = "glu." nm, .operands = ops_glu, .build_tg = tg_glu_, .build_ggml = gg_glu_, .param = op,         \
     .f = {swapped}, .types = F32 | KD_TYPE_BIT(TG_TYPE_F16), .layouts = ALL, .max_nmse = bound} /* ggml: no bf16 glu */

const struct kd_entry kd_table[] = {
    {.name = "add", .operands = ops_binary, .build_tg = tg_add_, .build_ggml = gg_add_, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "sub", .operands = ops_binary, .build_tg = tg_sub_, .build_ggml = gg_sub_, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "mul", .operands = ops_binary, .build_tg = tg_mul_, .build_ggml = gg_mul_, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "div", .operands = ops_binary, .build_tg = tg_div_, .build_ggml = gg_div_, .fill = KD_POSITIVE, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "add1", .operands = ops_add1, .build_tg = tg_add1_, .build_ggml = gg_add1_, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "scale", .operands = ops_one, .build_tg = tg_scale_, .build_ggml = gg_scale_, .f = {0.75f, 0.25f}, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "sqr", .operands = ops_one, .build_tg = tg_sqr_, .build_ggml = gg_sqr_, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "sqrt", .operands = ops_one, .build_tg = tg_sqrt_, .build_ggml = gg_sqrt_, .fill = KD_POSITIVE, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "log", .operands = ops_one, .build_tg = tg_log_, .build_ggml = gg_log_, .fill = KD_POSITIVE, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "fill", .operands = ops_one, .build_tg = tg_fill_, .build_ggml = gg_fill_, .f = {-2.5f}, .types = FLOATS, .layouts = ALL, .inplace = true, .max_nmse = EXACT},
    UNARY(TG_UNARY_ABS, "abs", NMSE_DEFAULT), UNARY(TG_UNARY_SGN, "sgn", NMSE_DEFAULT),
    UNARY(TG_UNARY_NEG, "neg", NMSE_DEFAULT), UNARY(TG_UNARY_STEP, "step", NMSE_DEFAULT),
    UNARY(TG_UNARY_TANH, "tanh", NMSE_DEFAULT), UNARY(TG_UNARY_ELU, "elu", NMSE_DEFAULT),
    UNARY(TG_UNARY_RELU, "relu", NMSE_DEFAULT), UNARY(TG_UNARY_SIGMOID, "sigmoid", NMSE_DEFAULT),
    UNARY(TG_UNARY_GELU, "gelu", NMSE_GELU_TABLE), UNARY(TG_UNARY_GELU_QUICK, "gelu_quick", NMSE_GELU_TABLE),
    UNARY(TG_UNARY_SILU, "silu", NMSE_DEFAULT), UNARY(TG_UNARY_HARDSWISH, "hardswish", NMSE_DEFAULT),
    UNARY(TG_UNARY_HARDSIGMOID, "hardsigmoid", NMSE_DEFAULT), UNARY(TG_UNARY_EXP, "exp", NMSE_DEFAULT),
    {.name = "unary.xielu", .operands = ops_one, .build_tg = tg_xielu_, .build_ggml = gg_xielu_, .f = {0.8f, 0.8f, 0.5f, -1e-6f}, .types = F32, .layouts = ALL, .inplace = true, .max_nmse = NMSE_DEFAULT},
    GLU(TG_GLU_REGLU, "reglu", 0, NMSE_DEFAULT), GLU(TG_GLU_GEGLU, "geglu", 0, NMSE_GELU_TABLE),
    GLU(TG_GLU_SWIGLU, "swiglu", 0, NMSE_DEFAULT), GLU(TG_GLU_SWIGLU, "swiglu.swapped", 1, NMSE_DEFAULT),
    {.name = "diag_mask_inf", .operands = ops_one, .build_tg = tg_diag_mask_inf_, .build_ggml = gg_diag_mask_inf_, .param = 2, .types = F32, .layouts = ALL, .inplace = true, .max_nmse = EXACT},
    {.name = "rms_norm", .operands = ops_one, .build_tg = tg_rms_norm_, .build_ggml = gg_rms_norm_, .f = {1e-5f}, .types = F32, .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "norm", .operands = ops_one, .build_tg = tg_norm_, .build_ggml = gg_norm_, .f = {1e-5f}, .types = F32, .layouts = ROWS_CONTIGUOUS, .max_nmse = NMSE_DEFAULT},
    {.name = "soft_max", .operands = ops_soft_max, .build_tg = tg_soft_max_, .build_ggml = gg_soft_max_, .f = {0.125f, 8.0f}, .types = F32, .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_SOFT_MAX},
    {.name = "rope.normal", .operands = ops_rope, .build_tg = tg_rope_, .build_ggml = gg_rope_, .param = TG_ROPE_NORMAL, .types = F32 | KD_TYPE_BIT(TG_TYPE_F16), .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.neox", .operands = ops_rope, .build_tg = tg_rope_, .build_ggml = gg_rope_, .param = TG_ROPE_NEOX, .types = F32 | KD_TYPE_BIT(TG_TYPE_F16), .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.neox.partial", .operands = ops_rope, .build_tg = tg_rope_, .build_ggml = gg_rope_, .param = TG_ROPE_NEOX, .f = {1}, .types = F32, .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.normal.offset", .operands = ops_rope, .build_tg = tg_rope_offset_, .build_ggml = gg_rope_offset_, .param = TG_ROPE_NORMAL, .f = {1, 2}, .types = F32 | KD_TYPE_BIT(TG_TYPE_F16), .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.neox.offset", .operands = ops_rope, .build_tg = tg_rope_offset_, .build_ggml = gg_rope_offset_, .param = TG_ROPE_NEOX, .f = {1, 2}, .types = F32, .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.mrope", .operands = ops_rope_multi, .build_tg = tg_rope_multi_, .build_ggml = gg_rope_multi_, .param = TG_ROPE_MROPE, .types = F32 | KD_TYPE_BIT(TG_TYPE_F16), .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.imrope", .operands = ops_rope_multi, .build_tg = tg_rope_multi_, .build_ggml = gg_rope_multi_, .param = TG_ROPE_IMROPE, .types = F32, .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "rope.vision", .operands = ops_rope_multi, .build_tg = tg_rope_multi_, .build_ggml = gg_rope_multi_, .param = TG_ROPE_VISION, .types = F32, .layouts = ROWS_CONTIGUOUS, .inplace = true, .max_nmse = NMSE_DEFAULT},
    {.name = "get_rows", .operands = ops_get_rows, .build_tg = tg_get_rows_, .build_ggml = gg_get_rows_, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ROWS_CONTIGUOUS, .max_nmse = EXACT},
    {.name = "set_rows", .operands = ops_set_rows, .build_tg = tg_set_rows_, .build_ggml = gg_set_rows_, .types = FLOATS, .layouts = ROWS_CONTIGUOUS, .max_nmse = EXACT},
    {.name = "cpy.from_f32", .operands = ops_cpy, .build_tg = tg_cpy_, .build_ggml = gg_cpy_, .param = 0, .types = FLOATS, .layouts = ALL, .max_nmse = EXACT},
    {.name = "cpy.to_f32", .operands = ops_cpy, .build_tg = tg_cpy_, .build_ggml = gg_cpy_, .param = 1, .types = FLOATS, .layouts = ALL, .max_nmse = EXACT},
    {.name = "cont", .operands = ops_one, .build_tg = tg_cont_, .build_ggml = gg_cont_, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ALL, .max_nmse = EXACT},
    {.name = "dup", .operands = ops_one, .build_tg = tg_dup_, .build_ggml = gg_dup_, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ALL, .max_nmse = EXACT},
    {.name = "concat.0", .operands = ops_concat, .build_tg = tg_concat_, .build_ggml = gg_concat_, .param = 0, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ALL, .max_nmse = EXACT},
    {.name = "concat.1", .operands = ops_concat, .build_tg = tg_concat_, .build_ggml = gg_concat_, .param = 1, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ALL, .max_nmse = EXACT},
    {.name = "concat.2", .operands = ops_concat, .build_tg = tg_concat_, .build_ggml = gg_concat_, .param = 2, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ALL, .max_nmse = EXACT},
    {.name = "concat.3", .operands = ops_concat, .build_tg = tg_concat_, .build_ggml = gg_concat_, .param = 3, .types = FLOATS | KD_TYPE_BIT(TG_TYPE_I32), .layouts = ALL, .max_nmse = EXACT},
    {.name = "sum_rows", .operands = ops_one, .build_tg = tg_sum_rows_, .build_ggml = gg_sum_rows_, .types = F32, .layouts = ALL, .max_nmse = NMSE_DEFAULT},
    {.name = "mul_mat", .operands = ops_mul_mat, .build_tg = tg_mul_mat_, .build_ggml = gg_mul_mat_, .types = FLOATS, .layouts = ALL, .max_nmse = NMSE_MATMUL},
    {.name = "flash_attn_ext", .operands = ops_flash_attn, .build_tg = tg_flash_attn_, .build_ggml = gg_flash_attn_, .f = {0.25f, 0.0f}, .types = F32 | KD_TYPE_BIT(TG_TYPE_F16), .layouts = ROWS_CONTIGUOUS, .max_nmse = NMSE_MATMUL},
    {.name = "flash_attn_ext.softcap", .operands = ops_flash_attn, .build_tg = tg_flash_attn_, .build_ggml = gg_flash_attn_, .f = {0.25f, 30.0f}, .types = KD_TYPE_BIT(TG_TYPE_F16), .layouts = KD_LAYOUT_BIT(KD_CONTIGUOUS), .max_nmse = NMSE_MATMUL},
};
const int kd_table_size = (int)(sizeof kd_table / sizeof kd_table[0]);

/* Op constructors: shape checks, result tensors and source slots with ggml's
 * semantics (so graphs built here match `.tg` dumps of ggml graphs).  Every
 * constructor returns NULL with a message on invalid arguments, and passes a
 * NULL source through as NULL. */
#include "tg.h"
#include "tg-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define REQUIRE_SRC(x) \
    do {               \
        if (!(x)) return NULL; \
    } while (0)

/* The finished result, or NULL when it breaks a rule of its op (op_rules.c):
 * the rules ggml's constructors assert, as a status instead of an abort.  A
 * refused result leaves ctx, so static allocation gives it no memory. */
static struct tg_tensor *validated(struct tg_context *ctx, struct tg_tensor *t) {
    if (!t || tg_op_validate(t) == TG_OK) return t;
    tg_context_discard(ctx, t);
    return NULL;
}

/* "'name' f32 [64, 8, 1, 1]": an operand as the messages name it; the shape
 * says what is wrong when the tensor has no name yet. */
static const char *operand_text(const struct tg_tensor *t, char *out, size_t size) {
    if (!t) return "no tensor";
    snprintf(out, size, "'%s' %s [%lld, %lld, %lld, %lld]", t->name, tg_type_name(t->type), (long long)t->ne[0],
             (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    return out;
}

static struct tg_tensor *reject(enum tg_op op, const struct tg_tensor *a, const char *why) {
    char at[TG_MAX_NAME + 128];
    tg_fail(TG_ERR_INVALID, "%s of %s: %s", tg_op_name(op), operand_text(a, at, sizeof at), why);
    return NULL;
}

/* For rules about two operands: names both with their shapes. */
static struct tg_tensor *reject_pair(enum tg_op op, const struct tg_tensor *a, const struct tg_tensor *b,
                                     const char *why) {
    char at[TG_MAX_NAME + 128], bt[TG_MAX_NAME + 128];
    tg_fail(TG_ERR_INVALID, "%s of %s and %s: %s", tg_op_name(op), operand_text(a, at, sizeof at),
            operand_text(b, bt, sizeof bt), why);
    return NULL;
}

static struct tg_tensor *new_result(struct tg_context *ctx, enum tg_op op, enum tg_type type, const int64_t ne[4]) {
    struct tg_tensor *t = tg_new_tensor(ctx, type, 4, ne);
    if (!t) return NULL;
    t->op = op;
    char index[12];
    tg_name_join(t, tg_op_name(op), "-", tg_int_text(index, tg_context_n_tensors(ctx) - 1), (const char *)NULL);
    return t;
}

static struct tg_tensor *new_like(struct tg_context *ctx, enum tg_op op, const struct tg_tensor *a) {
    return new_result(ctx, op, a->type, a->ne);
}

static struct tg_tensor *new_view_of(struct tg_context *ctx, enum tg_op op, struct tg_tensor *a, const int64_t ne[4],
                                     const size_t nb[4], size_t offset) {
    struct tg_tensor *t = tg_new_view_internal(ctx, a, a->type, ne, nb, offset);
    if (!t) return NULL;
    t->op = op;
    tg_name_join(t, a->name, " (", tg_op_name(op), ")", (const char *)NULL);
    return t;
}

/* ---- element-wise ---------------------------------------------------------- */

static struct tg_tensor *binary_op(struct tg_context *ctx, enum tg_op op, struct tg_tensor *a, struct tg_tensor *b) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if (!tg_can_repeat(b, a)) return reject_pair(op, a, b, "second operand's shape does not divide the first's (broadcast)");
    struct tg_tensor *t = new_like(ctx, op, a);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

struct tg_tensor *tg_add(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) { return validated(ctx, binary_op(ctx, TG_OP_ADD, a, b)); }
struct tg_tensor *tg_sub(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) { return validated(ctx, binary_op(ctx, TG_OP_SUB, a, b)); }
struct tg_tensor *tg_mul(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) { return validated(ctx, binary_op(ctx, TG_OP_MUL, a, b)); }
struct tg_tensor *tg_div(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) { return validated(ctx, binary_op(ctx, TG_OP_DIV, a, b)); }

struct tg_tensor *tg_add1(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if (tg_nelements(b) != 1) return reject_pair(TG_OP_ADD1, a, b, "second operand must have exactly one element");
    return validated(ctx, binary_op(ctx, TG_OP_ADD1, a, b));
}

static struct tg_tensor *unary_like(struct tg_context *ctx, enum tg_op op, struct tg_tensor *a) {
    REQUIRE_SRC(a);
    struct tg_tensor *t = new_like(ctx, op, a);
    if (t) t->src[0] = a;
    return t;
}

struct tg_tensor *tg_scale_bias(struct tg_context *ctx, struct tg_tensor *a, float s, float bias) {
    struct tg_tensor *t = unary_like(ctx, TG_OP_SCALE, a);
    if (t) {
        tg_set_op_param_f32(t, 0, s);
        tg_set_op_param_f32(t, 1, bias);
    }
    return validated(ctx, t);
}

struct tg_tensor *tg_scale(struct tg_context *ctx, struct tg_tensor *a, float s) { return validated(ctx, tg_scale_bias(ctx, a, s, 0.0f)); }
struct tg_tensor *tg_sqr(struct tg_context *ctx, struct tg_tensor *a) { return validated(ctx, unary_like(ctx, TG_OP_SQR, a)); }
struct tg_tensor *tg_sqrt(struct tg_context *ctx, struct tg_tensor *a) { return validated(ctx, unary_like(ctx, TG_OP_SQRT, a)); }
struct tg_tensor *tg_log(struct tg_context *ctx, struct tg_tensor *a) { return validated(ctx, unary_like(ctx, TG_OP_LOG, a)); }

struct tg_tensor *tg_fill(struct tg_context *ctx, struct tg_tensor *a, float v) {
    struct tg_tensor *t = unary_like(ctx, TG_OP_FILL, a);
    if (t) tg_set_op_param_f32(t, 0, v);
    return validated(ctx, t);
}

struct tg_tensor *tg_unary(struct tg_context *ctx, struct tg_tensor *a, enum tg_unary_op op) {
    REQUIRE_SRC(a);
    if ((unsigned)op >= TG_UNARY_COUNT) return reject(TG_OP_UNARY, a, "unknown unary sub-op");
    struct tg_tensor *t = unary_like(ctx, TG_OP_UNARY, a);
    if (t) tg_set_op_param_i32(t, 0, (int32_t)op);
    return validated(ctx, t);
}

static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); } /* as ggml's constructor */

struct tg_tensor *tg_xielu(struct tg_context *ctx, struct tg_tensor *a, float alpha_n, float alpha_p, float beta,
                           float eps) {
    struct tg_tensor *t = tg_unary(ctx, a, TG_UNARY_XIELU);
    if (!t) return NULL;
    tg_set_op_param_f32(t, 1, beta + softplus(alpha_n));
    tg_set_op_param_f32(t, 2, softplus(alpha_p));
    tg_set_op_param_f32(t, 3, beta);
    tg_set_op_param_f32(t, 4, eps);
    return t;
}

struct tg_tensor *tg_glu(struct tg_context *ctx, struct tg_tensor *a, enum tg_glu_op op, bool swapped) {
    REQUIRE_SRC(a);
    if ((unsigned)op >= TG_GLU_COUNT) return reject(TG_OP_GLU, a, "unknown glu sub-op");
    if (a->ne[0] % 2 != 0) return reject(TG_OP_GLU, a, "fused glu needs an even ne0 (two halves)");
    const int64_t ne[4] = {a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
    struct tg_tensor *t = new_result(ctx, TG_OP_GLU, a->type, ne);
    if (!t) return NULL;
    t->src[0] = a;
    tg_set_op_param_i32(t, 0, (int32_t)op);
    tg_set_op_param_i32(t, 1, swapped ? 1 : 0);
    return validated(ctx, t);
}

struct tg_tensor *tg_glu_split(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, enum tg_glu_op op) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if ((unsigned)op >= TG_GLU_COUNT) return reject(TG_OP_GLU, a, "unknown glu sub-op");
    if (!tg_are_same_shape(a, b) || a->type != b->type) return reject(TG_OP_GLU, a, "split glu needs two tensors of the same type and shape");
    struct tg_tensor *t = new_like(ctx, TG_OP_GLU, a);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    tg_set_op_param_i32(t, 0, (int32_t)op);
    return validated(ctx, t);
}

struct tg_tensor *tg_swiglu_oai(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, float alpha, float limit) {
    struct tg_tensor *t = b ? tg_glu_split(ctx, a, b, TG_GLU_SWIGLU_OAI) : tg_glu(ctx, a, TG_GLU_SWIGLU_OAI, false);
    if (t) {
        tg_set_op_param_f32(t, 2, alpha);
        tg_set_op_param_f32(t, 3, limit);
    }
    return validated(ctx, t);
}

static struct tg_tensor *norm_op(struct tg_context *ctx, enum tg_op op, struct tg_tensor *a, float eps) {
    struct tg_tensor *t = unary_like(ctx, op, a);
    if (t) tg_set_op_param_f32(t, 0, eps);
    return t;
}

struct tg_tensor *tg_rms_norm(struct tg_context *ctx, struct tg_tensor *a, float eps) { return validated(ctx, norm_op(ctx, TG_OP_RMS_NORM, a, eps)); }
struct tg_tensor *tg_norm(struct tg_context *ctx, struct tg_tensor *a, float eps) { return validated(ctx, norm_op(ctx, TG_OP_NORM, a, eps)); }

struct tg_tensor *tg_soft_max(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *mask, float scale,
                              float max_bias) {
    REQUIRE_SRC(a);
    if (mask) {
        if (mask->type != TG_TYPE_F32 && mask->type != TG_TYPE_F16) return reject_pair(TG_OP_SOFT_MAX, a, mask, "mask must be f32 or f16");
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || a->ne[2] % mask->ne[2] != 0 ||
            a->ne[3] % mask->ne[3] != 0) {
            return reject_pair(TG_OP_SOFT_MAX, a, mask, "mask shape must be [ne0, >= ne1] and divide dims 2-3");
        }
    }
    struct tg_tensor *t = unary_like(ctx, TG_OP_SOFT_MAX, a);
    if (!t) return NULL;
    t->src[1] = mask;
    tg_set_op_param_f32(t, 0, scale);
    tg_set_op_param_f32(t, 1, max_bias);
    return validated(ctx, t);
}

enum tg_status tg_add_sinks(struct tg_tensor *result, struct tg_tensor *sinks) {
    if (!result || !sinks) return tg_fail(TG_ERR_INVALID, "tg_add_sinks: NULL tensor");
    const int slot = result->op == TG_OP_SOFT_MAX ? 2 : result->op == TG_OP_FLASH_ATTN_EXT ? 4 : -1;
    if (slot < 0) return tg_fail(TG_ERR_INVALID, "sinks of '%s': only soft_max and flash_attn_ext take sinks", result->name);
    const int64_t heads = result->op == TG_OP_SOFT_MAX ? result->ne[2] : result->ne[1];
    if (sinks->type != TG_TYPE_F32 || sinks->ne[0] < heads) {
        return tg_fail(TG_ERR_INVALID, "sinks of '%s': need an f32 vector of at least %lld heads", result->name, (long long)heads);
    }
    result->src[slot] = sinks;
    return TG_OK;
}

struct tg_tensor *tg_rope(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos, int n_dims, int mode,
                          int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                          float beta_fast, float beta_slow) {
    return validated(ctx, tg_rope_ext(ctx, a, pos, NULL, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                       beta_fast, beta_slow));
}

/* The node every rope constructor makes; sections NULL: none (zeros). */
static struct tg_tensor *rope_node(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos,
                                   struct tg_tensor *factors, int n_dims, const int *sections, int mode, int n_ctx_orig,
                                   float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                   float beta_fast, float beta_slow) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(pos);
    if (factors && (factors->type != TG_TYPE_F32 || factors->ne[0] < n_dims / 2)) {
        return reject(TG_OP_ROPE, a, "frequency factors must be an f32 vector of at least n_dims/2 entries");
    }
    const int64_t per_token = mode & TG_ROPE_MROPE ? 4 : 1;
    if (pos->type != TG_TYPE_I32 || pos->ne[0] != per_token * a->ne[2] || tg_nelements(pos) != pos->ne[0]) {
        return reject(TG_OP_ROPE, a,
                      per_token == 1 ? "positions must be an i32 vector of ne2 entries"
                                     : "positions must be an i32 vector of 4 x ne2 entries (time, height, width, extra)");
    }
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) return reject(TG_OP_ROPE, a, "n_dims must be even and <= ne0");
    struct tg_tensor *t = unary_like(ctx, TG_OP_ROPE, a);
    if (!t) return NULL;
    t->src[1] = pos;
    t->src[2] = factors;
    tg_set_op_param_i32(t, 1, n_dims);
    tg_set_op_param_i32(t, 2, mode);
    tg_set_op_param_i32(t, 4, n_ctx_orig);
    tg_set_op_param_f32(t, 5, freq_base);
    tg_set_op_param_f32(t, 6, freq_scale);
    tg_set_op_param_f32(t, 7, ext_factor);
    tg_set_op_param_f32(t, 8, attn_factor);
    tg_set_op_param_f32(t, 9, beta_fast);
    tg_set_op_param_f32(t, 10, beta_slow);
    for (int k = 0; sections && k < 4; k++) tg_set_op_param_i32(t, 11 + k, sections[k]);
    return validated(ctx, t);
}

struct tg_tensor *tg_rope_ext(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos, struct tg_tensor *factors,
                              int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                              float attn_factor, float beta_fast, float beta_slow) {
    if (mode != TG_ROPE_NORMAL && mode != TG_ROPE_NEOX) {
        return reject(TG_OP_ROPE, a, "mode must be 0 (normal) or 2 (neox); the multimodal modes are tg_rope_multi's");
    }
    return rope_node(ctx, a, pos, factors, n_dims, NULL, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                     attn_factor, beta_fast, beta_slow);
}

struct tg_tensor *tg_rope_multi(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos,
                                struct tg_tensor *factors, int n_dims, const int sections[4], int mode, int n_ctx_orig,
                                float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                float beta_slow) {
    if (mode != TG_ROPE_MROPE && mode != TG_ROPE_IMROPE && mode != TG_ROPE_VISION) {
        return reject(TG_OP_ROPE, a, "mode must be 8 (mrope), 40 (imrope) or 24 (vision)");
    }
    if (!sections) return reject(TG_OP_ROPE, a, "the sections are needed (pairs per position)");
    int total = 0;
    for (int k = 0; k < 4; k++) {
        if (sections[k] < 0 || sections[k] > INT32_MAX / 4) return reject(TG_OP_ROPE, a, "a section is negative or too large");
        total += sections[k];
    }
    if (total - sections[3] == 0) return reject(TG_OP_ROPE, a, "the first three sections are all 0: one needs pairs");
    if (a && mode == TG_ROPE_VISION && 2 * (int64_t)n_dims != a->ne[0]) {
        return reject(TG_OP_ROPE, a, "vision rotates every dim: n_dims must be ne0 / 2");
    }
    if (a && total > a->ne[0]) return reject(TG_OP_ROPE, a, "the sections hold more pairs than ne0");
    return rope_node(ctx, a, pos, factors, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                     attn_factor, beta_fast, beta_slow);
}

enum tg_status tg_rope_set_offset(struct tg_tensor *rope, int n_offs) {
    if (!rope || rope->op != TG_OP_ROPE)
        return tg_fail(TG_ERR_INVALID, "tg_rope_set_offset: %s is not a rope node", rope ? rope->name : "NULL");
    const int n_dims = rope->op_params[1], mode = rope->op_params[2];
    const int64_t ne0 = rope->src[0] ? rope->src[0]->ne[0] : rope->ne[0];
    if (mode == TG_ROPE_VISION)
        return tg_fail(TG_ERR_INVALID, "rope '%s': vision rotates every dim, it takes no offset", rope->name);
    if (n_offs < 0 || n_offs % 2 != 0 || n_offs > ne0 - n_dims) {
        return tg_fail(TG_ERR_INVALID, "rope '%s': offset %d: it must be even, from 0 to ne0 - n_dims = %lld", rope->name,
                       n_offs, (long long)(ne0 - n_dims));
    }
    tg_set_op_param_i32(rope, 15, n_offs);
    return TG_OK;
}

/* ---- matrix and row ops -------------------------------------------------------- */

enum tg_status tg_mul_mat_set_hint(struct tg_tensor *mul_mat, enum tg_op_hint hint) {
    if (!mul_mat || mul_mat->op != TG_OP_MUL_MAT)
        return tg_fail(TG_ERR_INVALID, "tg_mul_mat_set_hint: %s is not a mul_mat node", mul_mat ? mul_mat->name : "NULL");
    if (hint != TG_HINT_NONE && hint != TG_HINT_SRC0_IS_HADAMARD)
        return tg_fail(TG_ERR_INVALID, "mul_mat '%s': hint %d is not one of ggml's (0 none, 1 source 0 is Hadamard)",
                       mul_mat->name, (int)hint);
    tg_set_op_param_i32(mul_mat, 1, (int32_t)hint);
    return TG_OK;
}

struct tg_tensor *tg_mul_mat(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if (a->ne[0] != b->ne[0]) return reject_pair(TG_OP_MUL_MAT, a, b, "inner dimensions (ne0) differ");
    if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return reject_pair(TG_OP_MUL_MAT, a, b, "dims 2-3 of b must be multiples of a's");
    if (a->nb[0] > a->nb[1]) return reject(TG_OP_MUL_MAT, a, "first operand must not be transposed");
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    struct tg_tensor *t = new_result(ctx, TG_OP_MUL_MAT, TG_TYPE_F32, ne);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    return validated(ctx, t);
}

struct tg_tensor *tg_get_rows(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *rows) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(rows);
    if (rows->type != TG_TYPE_I32 && rows->type != TG_TYPE_I64) return reject(TG_OP_GET_ROWS, a, "row indices must be i32 or i64");
    if (a->ne[2] != rows->ne[1] || rows->ne[3] != 1) return reject(TG_OP_GET_ROWS, a, "indices must be [n, a.ne2, a.ne3?]");
    const int64_t ne[4] = {a->ne[0], rows->ne[0], rows->ne[1], rows->ne[2]};
    struct tg_tensor *t = new_result(ctx, TG_OP_GET_ROWS, a->type == TG_TYPE_I32 ? TG_TYPE_I32 : TG_TYPE_F32, ne);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = rows;
    return validated(ctx, t);
}

struct tg_tensor *tg_set_rows(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, struct tg_tensor *rows) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    REQUIRE_SRC(rows);
    if (rows->type != TG_TYPE_I32 && rows->type != TG_TYPE_I64) return reject(TG_OP_SET_ROWS, a, "row indices must be i32 or i64");
    if (b->type != TG_TYPE_F32 && b->type != TG_TYPE_F16)
        return reject(TG_OP_SET_ROWS, a, "new rows must be f32 or f16");
    if (a->ne[0] != b->ne[0] || b->ne[1] != rows->ne[0] || b->ne[2] % rows->ne[1] != 0 ||
        b->ne[3] % rows->ne[2] != 0 || rows->ne[3] != 1 || a->ne[2] != b->ne[2] || a->ne[3] != b->ne[3]) {
        return reject(TG_OP_SET_ROWS, a, "shapes must be a [n, m, k, l], b [n, r, k, l], indices [r, ...]");
    }
    struct tg_tensor *t = new_view_of(ctx, TG_OP_SET_ROWS, a, a->ne, a->nb, 0);
    if (!t) return NULL;
    /* ggml's slot order: new rows, indices, destination */
    t->src[0] = b;
    t->src[1] = rows;
    t->src[2] = a;
    return validated(ctx, t);
}

struct tg_tensor *tg_cpy(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if (tg_nelements(a) != tg_nelements(b)) return reject_pair(TG_OP_CPY, a, b, "source and destination element counts differ");
    struct tg_tensor *t = tg_new_view_internal(ctx, b, b->type, b->ne, b->nb, 0);
    if (!t) return NULL;
    t->op = TG_OP_CPY;
    tg_name_join(t, b->name, " (copy of ", a->name, ")", (const char *)NULL);
    t->src[0] = a;
    t->src[1] = b;
    return validated(ctx, t);
}

static struct tg_tensor *contiguous_copy(struct tg_context *ctx, enum tg_op op, struct tg_tensor *a) {
    REQUIRE_SRC(a);
    struct tg_tensor *t = new_like(ctx, op, a);
    if (t) t->src[0] = a;
    return t;
}

struct tg_tensor *tg_cont(struct tg_context *ctx, struct tg_tensor *a) { return validated(ctx, contiguous_copy(ctx, TG_OP_CONT, a)); }
struct tg_tensor *tg_dup(struct tg_context *ctx, struct tg_tensor *a) { return validated(ctx, contiguous_copy(ctx, TG_OP_DUP, a)); }

struct tg_tensor *tg_cast(struct tg_context *ctx, struct tg_tensor *a, enum tg_type type) {
    REQUIRE_SRC(a);
    struct tg_tensor *t = new_result(ctx, TG_OP_CPY, type, a->ne);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = t; /* ggml's cast: the tensor is its own destination */
    return validated(ctx, t);
}

struct tg_tensor *tg_diag_mask_inf(struct tg_context *ctx, struct tg_tensor *a, int n_past) {
    struct tg_tensor *t = unary_like(ctx, TG_OP_DIAG_MASK_INF, a);
    if (t) tg_set_op_param_i32(t, 0, n_past);
    return validated(ctx, t);
}

struct tg_tensor *tg_concat(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, int dim) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if (dim < 0 || dim >= TG_MAX_DIMS) return reject(TG_OP_CONCAT, a, "dim must be 0..3");
    if (a->type != b->type) return reject_pair(TG_OP_CONCAT, a, b, "operands must have the same type");
    int64_t ne[4];
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (i != dim && a->ne[i] != b->ne[i]) return reject_pair(TG_OP_CONCAT, a, b, "shapes differ outside the concat dim");
        ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    struct tg_tensor *t = new_result(ctx, TG_OP_CONCAT, a->type, ne);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    tg_set_op_param_i32(t, 0, dim);
    return validated(ctx, t);
}

struct tg_tensor *tg_sum_rows(struct tg_context *ctx, struct tg_tensor *a) {
    REQUIRE_SRC(a);
    const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    struct tg_tensor *t = new_result(ctx, TG_OP_SUM_ROWS, a->type, ne);
    if (t) t->src[0] = a;
    return validated(ctx, t);
}

struct tg_tensor *tg_im2col(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, int s0, int s1, int p0,
                            int p1, int d0, int d1, bool is_2d, enum tg_type dst_type) {
    REQUIRE_SRC(a);
    REQUIRE_SRC(b);
    if (is_2d ? a->ne[2] != b->ne[2] : (a->ne[1] != b->ne[1] || b->ne[3] != 1)) {
        return reject(TG_OP_IM2COL, a, "input channels of kernel and input differ");
    }
    if (s0 < 1 || d0 < 1 || p0 < 0 || (is_2d && (s1 < 1 || d1 < 1 || p1 < 0))) {
        return reject(TG_OP_IM2COL, a, "strides and dilations must be >= 1, paddings >= 0");
    }
    /* overflow-safe (a padding near INT_MAX doubles past int): -1, refused below, where the size leaves int64 */
    const int64_t OW = tg_conv_output_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = is_2d ? tg_conv_output_size(b->ne[1], a->ne[1], s1, p1, d1) : 1;
    if (OW <= 0 || OH <= 0) return reject(TG_OP_IM2COL, a, "the input is smaller than the kernel");
    const int64_t ne[4] = {is_2d ? a->ne[0] * a->ne[1] * a->ne[2] : a->ne[0] * a->ne[1], OW, is_2d ? OH : b->ne[2],
                           is_2d ? b->ne[3] : 1};
    struct tg_tensor *t = new_result(ctx, TG_OP_IM2COL, dst_type, ne);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2d ? 1 : 0};
    for (int i = 0; i < 7; i++) tg_set_op_param_i32(t, i, params[i]);
    return validated(ctx, t);
}

/* ---- views ------------------------------------------------------------------------ */

static struct tg_tensor *reshape(struct tg_context *ctx, struct tg_tensor *a, const int64_t ne[4]) {
    REQUIRE_SRC(a);
    if (!tg_is_contiguous(a)) return reject(TG_OP_RESHAPE, a, "only contiguous tensors can be reshaped (use tg_cont first)");
    int64_t count = 1;
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (ne[i] <= 0 || __builtin_mul_overflow(count, ne[i], &count))
            return reject(TG_OP_RESHAPE, a, "a dimension is below 1 or their product overflows");
    }
    if (count != tg_nelements(a)) return reject(TG_OP_RESHAPE, a, "element count changes");
    struct tg_tensor *t = new_view_of(ctx, TG_OP_RESHAPE, a, ne, NULL, 0);
    if (t) t->src[0] = a;
    return t;
}

struct tg_tensor *tg_reshape_1d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0) {
    const int64_t ne[4] = {ne0, 1, 1, 1};
    return validated(ctx, reshape(ctx, a, ne));
}
struct tg_tensor *tg_reshape_2d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1) {
    const int64_t ne[4] = {ne0, ne1, 1, 1};
    return validated(ctx, reshape(ctx, a, ne));
}
struct tg_tensor *tg_reshape_3d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    return validated(ctx, reshape(ctx, a, ne));
}
struct tg_tensor *tg_reshape_4d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return validated(ctx, reshape(ctx, a, ne));
}

static struct tg_tensor *view_nd(struct tg_context *ctx, struct tg_tensor *a, const int64_t ne[4], const size_t nb[4],
                                 size_t offset) {
    REQUIRE_SRC(a);
    struct tg_tensor *t = new_view_of(ctx, TG_OP_VIEW, a, ne, nb, offset);
    if (!t) return NULL;
    t->src[0] = a;
    /* the offset, as ggml records it, for tools that print params */
    uint64_t off = offset;
    memcpy(t->op_params, &off, sizeof off);
    return t;
}

struct tg_tensor *tg_view_1d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, size_t offset) {
    REQUIRE_SRC(a);
    const int64_t ne[4] = {ne0, 1, 1, 1};
    /* ggml's strides for a 1-d view: the row's size past dim 0 (blocks, not elements, for the block types) */
    const size_t row = tg_row_size(a->type, ne0);
    const size_t nb[4] = {tg_type_size(a->type), row, row, row};
    return validated(ctx, view_nd(ctx, a, ne, nb, offset));
}

struct tg_tensor *tg_view_2d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                             size_t offset) {
    REQUIRE_SRC(a);
    const int64_t ne[4] = {ne0, ne1, 1, 1};
    const size_t nb[4] = {tg_type_size(a->type), nb1, nb1 * (size_t)ne1, nb1 * (size_t)ne1};
    return validated(ctx, view_nd(ctx, a, ne, nb, offset));
}

struct tg_tensor *tg_view_3d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             size_t nb1, size_t nb2, size_t offset) {
    REQUIRE_SRC(a);
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    const size_t nb[4] = {tg_type_size(a->type), nb1, nb2, nb2 * (size_t)ne2};
    return validated(ctx, view_nd(ctx, a, ne, nb, offset));
}

struct tg_tensor *tg_view_4d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    REQUIRE_SRC(a);
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t nb[4] = {tg_type_size(a->type), nb1, nb2, nb3};
    return validated(ctx, view_nd(ctx, a, ne, nb, offset));
}

static struct tg_tensor *permute_op(struct tg_context *ctx, enum tg_op op, struct tg_tensor *a, const int axes[4]) {
    REQUIRE_SRC(a);
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] > 3 || (seen & (1 << axes[i]))) return reject(op, a, "axes must be a permutation of 0..3");
        seen |= 1 << axes[i];
    }
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[axes[i]] = a->ne[i];
        nb[axes[i]] = a->nb[i];
    }
    struct tg_tensor *t = new_view_of(ctx, op, a, ne, nb, 0);
    if (!t) return NULL;
    t->src[0] = a;
    for (int i = 0; i < 4; i++) tg_set_op_param_i32(t, i, axes[i]);
    return t;
}

struct tg_tensor *tg_permute(struct tg_context *ctx, struct tg_tensor *a, int ax0, int ax1, int ax2, int ax3) {
    const int axes[4] = {ax0, ax1, ax2, ax3};
    return validated(ctx, permute_op(ctx, TG_OP_PERMUTE, a, axes));
}

struct tg_tensor *tg_transpose(struct tg_context *ctx, struct tg_tensor *a) {
    const int axes[4] = {1, 0, 2, 3};
    return validated(ctx, permute_op(ctx, TG_OP_TRANSPOSE, a, axes));
}

/* ---- attention ---------------------------------------------------------------------- */

struct tg_tensor *tg_flash_attn_ext(struct tg_context *ctx, struct tg_tensor *q, struct tg_tensor *k,
                                    struct tg_tensor *v, struct tg_tensor *mask, float scale, float max_bias,
                                    float logit_softcap) {
    REQUIRE_SRC(q);
    REQUIRE_SRC(k);
    REQUIRE_SRC(v);
    if (q->ne[0] != k->ne[0] || k->ne[1] != v->ne[1]) return reject(TG_OP_FLASH_ATTN_EXT, q, "q/k head size or k/v lengths differ");
    if (q->ne[2] % k->ne[2] != 0 || k->ne[2] != v->ne[2] || q->ne[3] != k->ne[3]) {
        return reject(TG_OP_FLASH_ATTN_EXT, q, "heads of q must be a multiple of k's (GQA), k and v heads equal");
    }
    if (mask && (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1])) {
        return reject(TG_OP_FLASH_ATTN_EXT, q, "mask must be [n_kv, >= n_q]");
    }
    const int64_t ne[4] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    struct tg_tensor *t = new_result(ctx, TG_OP_FLASH_ATTN_EXT, TG_TYPE_F32, ne);
    if (!t) return NULL;
    t->src[0] = q;
    t->src[1] = k;
    t->src[2] = v;
    t->src[3] = mask;
    tg_set_op_param_f32(t, 0, scale);
    tg_set_op_param_f32(t, 1, max_bias);
    tg_set_op_param_f32(t, 2, logit_softcap);
    return validated(ctx, t);
}

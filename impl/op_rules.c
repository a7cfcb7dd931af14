/* What makes a node valid, op by op: the rules ggml's constructors assert
 * (ggml.c) and the result each of them makes (type, shape, strides, which
 * source's memory a view result shares).  The `.tg` reader checks every
 * node line against them and the op constructors every result, so a graph
 * ggml could not have built is refused with the rule it breaks, never
 * computed.  Ops without rules here (ggml has many this project does not
 * compute) are held to the rules every node shares. */
#include "tg-impl.h"

#include <stdarg.h>
#include <stdio.h>

static bool broken(char *why, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static bool broken(char *why, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return false;
}

#define RULE(cond, ...)                                      \
    do {                                                     \
        if (!(cond)) return broken(why, size, __VA_ARGS__); \
    } while (0)

#define NE(t) (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]
#define NB(t) (t)->nb[0], (t)->nb[1], (t)->nb[2], (t)->nb[3]

static const struct tg_tensor *root_of(const struct tg_tensor *t) { return t->view_src ? t->view_src : t; }
static size_t offset_of(const struct tg_tensor *t) { return t->view_src ? t->view_offs : 0; }

static bool same_ne(const int64_t *a, const int64_t *b) {
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* Rows packed (ggml_is_contiguous_rows): elements of a row adjacent; a
 * one-element row has no stride to check (tg_is_contiguous says why only
 * for ne0 = 1). */
static bool rows_packed(const struct tg_tensor *t) { return t->nb[0] == tg_type_size(t->type) || t->ne[0] == 1; }

/* A result ggml makes with ggml_view_tensor(of): of's shape, strides and memory. */
static bool is_view_of(const struct tg_tensor *t, const struct tg_tensor *of, const char *whose, char *why, size_t size) {
    RULE(t->view_src == root_of(of) && t->view_offs == offset_of(of),
         "the result is a view of %s (view=%s at its offset)", whose, whose);
    RULE(t->type == of->type && same_ne(t->ne, of->ne) && memcmp(t->nb, of->nb, sizeof t->nb) == 0,
         "the result has %s's type, shape and strides (%s [%lld, %lld, %lld, %lld] nb %zu,%zu,%zu,%zu)", whose,
         tg_type_name(of->type), NE(of), NB(of));
    return true;
}

/* A result of the same type and shape as a: a new tensor, or (an in-place
 * variant) a view of a. */
static bool like(const struct tg_tensor *t, const struct tg_tensor *a, char *why, size_t size) {
    if (t->view_src) return is_view_of(t, a, "source 0", why, size);
    RULE(t->type == a->type, "the result has source 0's type (%s)", tg_type_name(a->type));
    RULE(same_ne(t->ne, a->ne), "the result has source 0's shape [%lld, %lld, %lld, %lld]", NE(a));
    return true;
}

static bool result(const struct tg_tensor *t, enum tg_type type, const int64_t ne[4], char *why, size_t size) {
    RULE(t->type == type, "the result is %s", tg_type_name(type));
    RULE(same_ne(t->ne, ne), "the result is [%lld, %lld, %lld, %lld]", (long long)ne[0], (long long)ne[1],
         (long long)ne[2], (long long)ne[3]);
    return true;
}

/* ggml's output size, (in + 2p - d(k - 1) - 1) / s + 1, for s, d > 0 and
 * k >= 1, without overflow: -1 where a term leaves int64 (a kernel or input
 * of ~2^62 elements), which the rules refuse as "no output". */
int64_t tg_conv_output_size(int64_t in, int64_t k, int s, int p, int d) {
    if (k - 1 > (INT64_MAX - 1) / d) return -1;
    const int64_t span = (int64_t)d * (k - 1) + 1; /* the dilated kernel */
    const int64_t pad = 2 * (int64_t)p;
    if (pad > 0 && in > INT64_MAX - pad) return -1;
    const int64_t padded = in + pad;
    if (padded < 0 && span > INT64_MAX + padded) return -1; /* padded - span below -INT64_MAX */
    return (padded - span) / s + 1;
}

static bool view_rules(const struct tg_tensor *t, const struct tg_tensor *a, char *why, size_t size) {
    RULE(t->view_src == root_of(a), "a %s is a view of its source's memory (view= names source 0 or its root)",
         tg_op_name(t->op));
    RULE(t->type == a->type, "a %s keeps its source's type (%s)", tg_op_name(t->op), tg_type_name(a->type));
    switch (t->op) {
    case TG_OP_RESHAPE:
        RULE(tg_is_contiguous(a), "only a contiguous tensor can be reshaped");
        RULE(tg_nelements(t) == tg_nelements(a), "a reshape keeps the element count (%lld)", (long long)tg_nelements(a));
        RULE(tg_is_contiguous(t), "a reshape's strides are contiguous");
        RULE(t->view_offs == offset_of(a), "a reshape starts where its source does (offset %zu)", offset_of(a));
        return true;
    case TG_OP_VIEW:
        RULE(t->nb[0] == tg_type_size(t->type), "a view's elements (blocks) are adjacent: nb0 = %zu",
             tg_type_size(t->type));
        return true;
    case TG_OP_TRANSPOSE:
    case TG_OP_PERMUTE: {
        int axes[4] = {1, 0, 2, 3}, seen = 0;
        if (t->op == TG_OP_PERMUTE) {
            for (int i = 0; i < 4; i++) axes[i] = t->op_params[i];
        }
        for (int i = 0; i < 4; i++) {
            RULE(axes[i] >= 0 && axes[i] < 4 && !(seen & (1 << axes[i])), "the axes (params) are a permutation of 0..3");
            seen |= 1 << axes[i];
        }
        for (int i = 0; i < 4; i++) {
            RULE(t->ne[axes[i]] == a->ne[i] && t->nb[axes[i]] == a->nb[i],
                 "dimension %d of the source goes to dimension %d with its size and stride", i, axes[i]);
        }
        RULE(t->view_offs == offset_of(a), "a %s starts where its source does (offset %zu)", tg_op_name(t->op),
             offset_of(a));
        return true;
    }
    default:
        return true;
    }
}

static bool op_rules(const struct tg_tensor *t, char *why, size_t size) {
    const struct tg_tensor *a = t->src[0], *b = t->src[1], *c = t->src[2];
    switch (t->op) {
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV:
        RULE(a && b, "needs sources 0 and 1");
        RULE(tg_can_repeat(b, a), "source 1 [%lld, %lld, %lld, %lld] repeats into source 0 [%lld, %lld, %lld, %lld] "
             "(each of its dimensions divides source 0's)", NE(b), NE(a));
        return like(t, a, why, size);
    case TG_OP_ADD1:
        RULE(a && b && tg_nelements(b) == 1, "source 1 is a single element");
        return like(t, a, why, size);
    case TG_OP_SCALE: case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_FILL: case TG_OP_NORM:
    case TG_OP_RMS_NORM: case TG_OP_DIAG_MASK_INF: case TG_OP_DIAG_MASK_ZERO:
        RULE(a, "needs source 0");
        return like(t, a, why, size);
    case TG_OP_UNARY:
        RULE(a && rows_packed(a), "source 0's rows are packed (nb0 = %zu)", a ? tg_type_size(a->type) : 0);
        RULE((unsigned)t->op_params[0] < TG_UNARY_COUNT, "params word 0 is a unary op (0..%d)", TG_UNARY_COUNT - 1);
        return like(t, a, why, size);
    case TG_OP_GLU: {
        RULE(a && rows_packed(a), "source 0's rows are packed");
        RULE((unsigned)t->op_params[0] < TG_GLU_COUNT, "params word 0 is a glu op (0..%d)", TG_GLU_COUNT - 1);
        if (b) {
            RULE(rows_packed(b) && b->type == a->type && same_ne(a->ne, b->ne),
                 "split form: source 1 has source 0's type and shape, rows packed");
            return result(t, a->type, a->ne, why, size);
        }
        RULE(a->ne[0] % 2 == 0, "fused form: source 0's ne0 (%lld) holds two halves", (long long)a->ne[0]);
        const int64_t ne[4] = {a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
        return result(t, a->type, ne, why, size);
    }
    case TG_OP_SOFT_MAX:
        RULE(a && tg_is_contiguous(a), "source 0 is contiguous");
        if (b) {
            RULE(b->type == TG_TYPE_F32 || b->type == TG_TYPE_F16, "the mask (source 1) is f32 or f16");
            RULE(tg_is_contiguous(b), "the mask is contiguous");
            RULE(b->ne[0] == a->ne[0] && b->ne[1] >= a->ne[1], "the mask is [ne0 = %lld, >= %lld rows]",
                 (long long)a->ne[0], (long long)a->ne[1]);
            RULE(a->ne[2] % b->ne[2] == 0 && a->ne[3] % b->ne[3] == 0, "the mask's dims 2-3 divide source 0's");
        }
        RULE(!c || (c->type == TG_TYPE_F32 && c->ne[0] >= a->ne[2]), "sinks (source 2) are f32, one per head");
        RULE(b || !(tg_get_op_param_f32(t, 1) > 0.0f), "max_bias (params word 1) above 0 needs a mask (source 1)");
        return like(t, a, why, size);
    case TG_OP_ROPE: {
        RULE(a && b, "needs sources 0 and 1");
        const int mode = t->op_params[2];
        RULE((mode & 1) == 0, "mode %d: bit 0 is no longer a rope mode", mode);
        RULE(b->type == TG_TYPE_I32 && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1, "positions (source 1) are an i32 vector");
        if (mode & TG_ROPE_MROPE)
            RULE(b->ne[0] == 4 * a->ne[2], "multimodal mode %d: four positions per token (ne0 of source 1 = 4 x %lld)",
                 mode, (long long)a->ne[2]);
        else
            RULE(b->ne[0] == a->ne[2], "one position per token (ne0 %lld of source 1 = ne2 of source 0)",
                 (long long)a->ne[2]);
        RULE(t->op_params[15] >= 0 && (mode != TG_ROPE_VISION || t->op_params[15] == 0),
             "offset %d (op param 15): not below 0, and 0 for vision", t->op_params[15]);
        RULE(!c || (c->type == TG_TYPE_F32 && c->ne[0] >= t->op_params[1] / 2),
             "frequency factors (source 2) are f32, at least n_dims/2 of them");
        return like(t, a, why, size);
    }
    case TG_OP_MUL_MAT: {
        RULE(a && b, "needs sources 0 and 1");
        RULE(a->ne[0] == b->ne[0], "the shared dimension: ne0 of source 0 (%lld) = ne0 of source 1 (%lld)",
             (long long)a->ne[0], (long long)b->ne[0]);
        RULE(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, "source 0's dims 2-3 broadcast over source 1's");
        RULE(a->nb[0] <= a->nb[1], "source 0 is not transposed (nb0 %zu <= nb1 %zu)", a->nb[0], a->nb[1]);
        const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
        return result(t, TG_TYPE_F32, ne, why, size);
    }
    case TG_OP_GET_ROWS: {
        RULE(a && b, "needs sources 0 and 1");
        RULE(b->type == TG_TYPE_I32, "row indices (source 1) are i32");
        RULE(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1, "indices are [n, ne2, ne3] of source 0");
        const int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[1], b->ne[2]};
        return result(t, a->type == TG_TYPE_I32 ? TG_TYPE_I32 : TG_TYPE_F32, ne, why, size);
    }
    case TG_OP_SET_ROWS: /* ggml's slots: rows, indices, destination */
        RULE(a && b && c, "needs sources 0 (rows), 1 (indices) and 2 (destination)");
        RULE(a->type == TG_TYPE_F32 || a->type == TG_TYPE_F16, "the rows (source 0) are f32 or f16");
        RULE(b->type == TG_TYPE_I32 || b->type == TG_TYPE_I64, "the indices (source 1) are i32 or i64");
        RULE(c->ne[0] == a->ne[0] && c->ne[2] == a->ne[2] && c->ne[3] == a->ne[3],
             "rows and destination agree in ne0, ne2, ne3");
        RULE(a->ne[1] == b->ne[0] && a->ne[2] % b->ne[1] == 0 && a->ne[3] % b->ne[2] == 0 && b->ne[3] == 1,
             "one index per row, broadcast over dims 2-3");
        RULE(rows_packed(a) && rows_packed(c), "rows and destination have packed rows");
        return is_view_of(t, c, "the destination (source 2)", why, size);
    case TG_OP_CPY:
        RULE(a && b, "needs sources 0 and 1");
        RULE(tg_nelements(a) == tg_nelements(b), "source and destination have the same element count (%lld vs %lld)",
             (long long)tg_nelements(a), (long long)tg_nelements(b));
        if (b == t) return result(t, t->type, a->ne, why, size); /* ggml_cast: a new tensor, its own destination */
        /* a copy within one tensor's memory is undefined (ggml's kernels memcpy, in threads) */
        RULE(root_of(a) != root_of(b) || offset_of(a) + tg_nbytes(a) <= offset_of(b) ||
                 offset_of(b) + tg_nbytes(b) <= offset_of(a),
             "source and destination do not overlap (both in '%s', bytes %zu..%zu and %zu..%zu): copy through a new "
             "tensor",
             root_of(a)->name, offset_of(a), offset_of(a) + tg_nbytes(a), offset_of(b), offset_of(b) + tg_nbytes(b));
        return is_view_of(t, b, "the destination (source 1)", why, size);
    case TG_OP_DUP: case TG_OP_CONT:
        RULE(a, "needs source 0");
        if (t->op == TG_OP_DUP && t->view_src) return true; /* ggml_dup_inplace: held to source 0 by tg_op_rules_hold */
        RULE(!t->view_src, "%s makes a new tensor", tg_op_name(t->op));
        RULE(t->type == a->type && tg_nelements(t) == tg_nelements(a), "the result has source 0's type and element count");
        return true;
    case TG_OP_CONCAT: {
        RULE(a && b, "needs sources 0 and 1");
        const int dim = t->op_params[0];
        RULE(dim >= 0 && dim < 4 && a->type == b->type, "dim (params) is 0..3 and both sources have one type");
        int64_t ne[4];
        for (int d = 0; d < 4; d++) {
            RULE(d == dim || a->ne[d] == b->ne[d], "the sources agree outside dim %d", dim);
            ne[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
        }
        return result(t, a->type, ne, why, size);
    }
    case TG_OP_SUM_ROWS: {
        RULE(a, "needs source 0");
        const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
        return result(t, a->type, ne, why, size);
    }
    case TG_OP_FLASH_ATTN_EXT: {
        const struct tg_tensor *mask = t->src[3], *sinks = t->src[4];
        RULE(a && b && c, "needs q, k and v (sources 0-2)");
        RULE(b->ne[0] == a->ne[0] && a->ne[2] % b->ne[2] == 0 && a->ne[3] % b->ne[3] == 0,
             "k's rows are q's length and its heads divide q's");
        RULE(a->ne[3] == b->ne[3] && a->ne[3] == c->ne[3], "q, k and v have the same ne3");
        if (mask) {
            RULE(mask->type == TG_TYPE_F16 && tg_is_contiguous(mask), "the mask (source 3) is contiguous f16");
            RULE(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0, "the mask's dims 2-3 divide q's");
        }
        RULE(!sinks || (sinks->type == TG_TYPE_F32 && sinks->ne[0] >= a->ne[2]), "sinks (source 4) are f32, one per head");
        RULE(mask || !(tg_get_op_param_f32(t, 1) > 0.0f), "max_bias (params word 1) above 0 needs a mask (source 3)");
        const int64_t ne[4] = {c->ne[0], a->ne[2], a->ne[1], a->ne[3]};
        return result(t, TG_TYPE_F32, ne, why, size);
    }
    case TG_OP_IM2COL: {
        RULE(a && b, "needs sources 0 (kernel) and 1 (input)");
        const int32_t *p = t->op_params;
        const bool is_2d = p[6] == 1;
        RULE(is_2d ? a->ne[2] == b->ne[2] : (a->ne[1] == b->ne[1] && b->ne[3] == 1),
             "kernel and input have the same channels");
        RULE(p[0] > 0 && p[4] > 0 && (!is_2d || (p[1] > 0 && p[5] > 0)), "strides and dilations (params) are positive");
        const int64_t OW = tg_conv_output_size(b->ne[0], a->ne[0], p[0], p[2], p[4]);
        const int64_t OH = is_2d ? tg_conv_output_size(b->ne[1], a->ne[1], p[1], p[3], p[5]) : 1;
        RULE(OW > 0 && OH > 0, "the input is at least the (dilated) kernel's size");
        const int64_t ne[4] = {is_2d ? a->ne[0] * a->ne[1] * a->ne[2] : a->ne[0] * a->ne[1], OW, is_2d ? OH : b->ne[2],
                               is_2d ? b->ne[3] : 1};
        RULE(same_ne(t->ne, ne), "the result is [%lld, %lld, %lld, %lld]", (long long)ne[0], (long long)ne[1],
             (long long)ne[2], (long long)ne[3]);
        return true;
    }
    default:
        return true;
    }
}

/* The ops whose ggml constructor may return a view of an input
 * (ggml_view_tensor: every in-place variant, ggml_clamp always, leaky_relu's
 * flag, the optimizer steps, the custom maps): of source 0, or of cpy's
 * destination (1) and set_rows' (2).  Not the allocator's list of ops that may
 * reuse a source's memory (tg_op_can_inplace): ggml_gallocr's is shorter. */
static bool may_be_view(enum tg_op op) {
    switch (op) {
    case TG_OP_CPY: case TG_OP_SET_ROWS: case TG_OP_DUP: case TG_OP_ACC: case TG_OP_SIN: case TG_OP_COS:
    case TG_OP_NORM: case TG_OP_GROUP_NORM: case TG_OP_L2_NORM: case TG_OP_SET: case TG_OP_CLAMP:
    case TG_OP_LEAKY_RELU: case TG_OP_ADD_REL_POS: case TG_OP_MAP_CUSTOM1: case TG_OP_MAP_CUSTOM2:
    case TG_OP_MAP_CUSTOM3: case TG_OP_CUSTOM: case TG_OP_OPT_STEP_ADAMW: case TG_OP_OPT_STEP_SGD:
        return true;
    default:
        return tg_op_can_inplace(op);
    }
}

bool tg_op_rules_hold(const struct tg_tensor *t, char *why, size_t size) {
    for (int k = 0; k < TG_MAX_SRC; k++) {
        RULE(t->src[k] != t || (t->op == TG_OP_CPY && k == 1),
             "source %d is the node itself (only cpy's destination, slot 1, may be: ggml_cast)", k);
    }
    if (t->op == TG_OP_NONE) return true;
    if (tg_op_is_view(t->op)) {
        RULE(t->src[0], "a %s needs source 0", tg_op_name(t->op));
        return view_rules(t, t->src[0], why, size);
    }
    RULE(t->view_src || tg_is_contiguous(t),
         "a result that is not a view is contiguous (nb %zu,%zu,%zu,%zu; ggml allocates op results packed)", NB(t));
    RULE(!t->view_src || may_be_view(t->op), "%s makes a new tensor: it cannot be a view", tg_op_name(t->op));
    if (t->view_src && t->op != TG_OP_CPY && t->op != TG_OP_SET_ROWS) {
        RULE(t->src[0], "an in-place %s needs source 0", tg_op_name(t->op));
        if (!is_view_of(t, t->src[0], "source 0", why, size)) return false;
    }
    return op_rules(t, why, size);
}

enum tg_status tg_op_validate(const struct tg_tensor *t) {
    char why[256];
    if (!t) return tg_fail(TG_ERR_INVALID, "tg_op_validate: NULL tensor");
    if (tg_op_rules_hold(t, why, sizeof why)) return TG_OK;
    return tg_fail(TG_ERR_INVALID, "%s '%s' breaks a rule of its op: %s", tg_op_name(t->op), t->name, why);
}

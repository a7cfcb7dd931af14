/* Element-wise kernels: binary ops with ggml broadcasting, unary ops, scale,
 * fill, glu, diag_mask_inf.  Every element is read before its result is
 * written, so dst may alias src0 (in-place reuse). */
#include "cpu-kernels.h"

/* ggml's tails: 0 at or below -10, x at or above 10 */
static float gelu(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float c = 0.7978845608028654f; /* sqrt(2/pi): the tanh approximation */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

static float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static float gelu_quick(float x) { return x / (1.0f + expf(-1.702f * x)); }

/* xielu: params 1-4 as ggml_xielu stores them (alpha_n already beta +
 * softplus of the given alpha_n, alpha_p its softplus) */
static float xielu(const struct tg_tensor *dst, float x) {
    const float alpha_n = tg_get_op_param_f32(dst, 1), alpha_p = tg_get_op_param_f32(dst, 2);
    const float beta = tg_get_op_param_f32(dst, 3), eps = tg_get_op_param_f32(dst, 4);
    if (x > 0.0f) return alpha_p * x * x + beta * x;
    return (expm1f(fminf(x, eps)) - x) * alpha_n + beta * x;
}

static float unary(const struct tg_tensor *dst, float x) {
    switch ((enum tg_unary_op)dst->op_params[0]) {
    case TG_UNARY_ABS: return fabsf(x);
    case TG_UNARY_SGN: return (float)((x > 0.0f) - (x < 0.0f));
    case TG_UNARY_NEG: return -x;
    case TG_UNARY_STEP: return x > 0.0f ? 1.0f : 0.0f;
    case TG_UNARY_TANH: return tanhf(x);
    case TG_UNARY_ELU: return x > 0.0f ? x : expm1f(x);
    case TG_UNARY_RELU: return x > 0.0f ? x : 0.0f;
    case TG_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case TG_UNARY_GELU: return gelu(x);
    case TG_UNARY_GELU_QUICK: return gelu_quick(x);
    case TG_UNARY_SILU: return x / (1.0f + expf(-x));
    case TG_UNARY_HARDSWISH: return x * fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
    case TG_UNARY_HARDSIGMOID: return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
    case TG_UNARY_EXP: return expf(x);
    case TG_UNARY_EXPM1: return expm1f(x);
    case TG_UNARY_SOFTPLUS: return x > 20.0f ? x : logf(1.0f + expf(x));
    case TG_UNARY_GELU_ERF: return gelu_erf(x);
    case TG_UNARY_XIELU: return xielu(dst, x);
    case TG_UNARY_FLOOR: return floorf(x);
    case TG_UNARY_CEIL: return ceilf(x);
    case TG_UNARY_ROUND: return roundf(x);
    case TG_UNARY_TRUNC: return truncf(x);
    default: return NAN;
    }
}

/* activation(x) * g; swiglu_oai clamps both halves and gates with (g + 1) */
static float glu(const struct tg_tensor *dst, float x, float g) {
    switch ((enum tg_glu_op)dst->op_params[0]) {
    /* as ggml's: 0 where the activation is 0, whatever the gate (inf or NaN included) */
    case TG_GLU_REGLU: return x > 0.0f ? x * g : 0.0f;
    case TG_GLU_GEGLU: return x <= -10.0f ? 0.0f : gelu(x) * g;
    case TG_GLU_SWIGLU: return x / (1.0f + expf(-x)) * g;
    case TG_GLU_SWIGLU_OAI: {
        const float alpha = tg_get_op_param_f32(dst, 2), limit = tg_get_op_param_f32(dst, 3);
        /* std::min and std::clamp as ggml: a NaN stays NaN (fminf would drop it) */
        x = limit < x ? limit : x;
        g = g < -limit ? -limit : limit < g ? limit : g;
        return x / (1.0f + expf(-alpha * x)) * (g + 1.0f);
    }
    case TG_GLU_GEGLU_ERF: return gelu_erf(x) * g;
    case TG_GLU_GEGLU_QUICK: return gelu_quick(x) * g;
    default: return NAN;
    }
}

static float binary(enum tg_op op, float a, float b) {
    switch (op) {
    case TG_OP_ADD: case TG_OP_ADD1: return a + b;
    case TG_OP_SUB: return a - b;
    case TG_OP_MUL: return a * b;
    case TG_OP_DIV: return a / b;
    default: return NAN;
    }
}

static float one(const struct tg_tensor *dst, const struct tg_tensor *a, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float x = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
    switch (dst->op) {
    case TG_OP_SCALE: return x * tg_get_op_param_f32(dst, 0) + tg_get_op_param_f32(dst, 1);
    case TG_OP_SQR: return x * x;
    case TG_OP_SQRT: return sqrtf(x);
    case TG_OP_LOG: return logf(x);
    case TG_OP_FILL: return tg_get_op_param_f32(dst, 0);
    case TG_OP_UNARY: return unary(dst, x);
    case TG_OP_DIAG_MASK_INF: return i0 > dst->op_params[0] + i1 ? -INFINITY : x;
    default: return NAN;
    }
}

enum tg_status cpu_op_elementwise(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    int64_t r0, r1;
    cpu_rows(tg_nrows(dst), x->ith, x->nth, &r0, &r1);
    const bool is_binary = dst->op == TG_OP_ADD || dst->op == TG_OP_SUB || dst->op == TG_OP_MUL ||
                           dst->op == TG_OP_DIV || dst->op == TG_OP_ADD1;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, dst, &i1, &i2, &i3);
        if (is_binary) {
            /* b broadcast: its row once per row, and a wrapping column counter
             * instead of a division per element (same elements, same order) */
            const int64_t b1 = i1 % b->ne[1], b2 = i2 % b->ne[2], b3 = i3 % b->ne[3];
            int64_t b0 = 0;
            for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                const float u = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
                const float w = cpu_load(cpu_elem(b, b0, b1, b2, b3), b->type);
                cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, binary(dst->op, u, w));
                if (++b0 == b->ne[0]) b0 = 0;
            }
            continue;
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            float v;
            switch (dst->op) {
            case TG_OP_GLU: {
                float in, g;
                if (b) {
                    in = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
                    g = cpu_load(cpu_elem(b, i0, i1, i2, i3), b->type);
                } else {
                    int64_t n = dst->ne[0];
                    bool swapped = dst->op_params[1] != 0;
                    in = cpu_load(cpu_elem(a, i0 + (swapped ? n : 0), i1, i2, i3), a->type);
                    g = cpu_load(cpu_elem(a, i0 + (swapped ? 0 : n), i1, i2, i3), a->type);
                }
                v = glu(dst, in, g);
                break;
            }
            default:
                v = one(dst, a, i0, i1, i2, i3);
            }
            cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, v);
        }
    }
    return TG_OK;
}

bool cpu_supports_elementwise(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a || !cpu_is_float(dst->type) || !cpu_is_float(a->type)) return false;
    switch (dst->op) {
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV:
        return b && cpu_is_float(b->type) && tg_can_repeat(b, a) && tg_are_same_shape(a, dst);
    case TG_OP_ADD1:
        return b && cpu_is_float(b->type) && tg_nelements(b) == 1 && tg_are_same_shape(a, dst);
    case TG_OP_GLU:
        if ((unsigned)dst->op_params[0] >= TG_GLU_COUNT) return false;
        if (b) return cpu_is_float(b->type) && tg_are_same_shape(a, b) && tg_are_same_shape(a, dst);
        return a->ne[0] == 2 * dst->ne[0] && a->ne[1] == dst->ne[1] && a->ne[2] == dst->ne[2] && a->ne[3] == dst->ne[3];
    case TG_OP_UNARY:
        return (unsigned)dst->op_params[0] < TG_UNARY_COUNT && tg_are_same_shape(a, dst);
    case TG_OP_SCALE: case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_FILL: case TG_OP_DIAG_MASK_INF:
        return tg_are_same_shape(a, dst);
    default:
        return false;
    }
}

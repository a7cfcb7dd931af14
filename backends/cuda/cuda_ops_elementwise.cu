/* Element-wise kernels: broadcasting binary ops, scale/sqr/sqrt/log/fill, the
 * unary sub-ops, glu (fused and split), diag_mask_inf and concat.  Every kernel
 * walks the destination's elements and addresses each operand through its own
 * byte strides; a thread reads its element before writing it, so dst may alias
 * any source of its own layout (in-place reuse may pick src0 or src1). */
#include "cuda_internal.cuh"

#include <math.h>

enum elementwise_kind {
    EW_ADD, EW_SUB, EW_MUL, EW_DIV,
    EW_SCALE, EW_SQR, EW_SQRT, EW_LOG, EW_FILL,
    EW_UNARY_BASE /* + tg_unary_op */
};

static __device__ __forceinline__ float gelu_tanh(float x) {
    if (x <= -10.0f) return 0.0f; /* ggml's tails, as the CPU's */
    if (x >= 10.0f) return x;
    const float sqrt_2_over_pi = 0.79788456080286535588f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
}

static __device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static __device__ __forceinline__ float gelu_quick(float x) { return x * (1.0f / (1.0f + expf(-1.702f * x))); }

static __device__ float apply_unary(int op, float x) {
    switch (op) {
    case TG_UNARY_ABS: return fabsf(x);
    case TG_UNARY_SGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case TG_UNARY_NEG: return -x;
    case TG_UNARY_STEP: return x > 0.0f ? 1.0f : 0.0f;
    case TG_UNARY_TANH: return tanhf(x);
    case TG_UNARY_ELU: return x > 0.0f ? x : expm1f(x);
    case TG_UNARY_RELU: return x > 0.0f ? x : 0.0f;
    case TG_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case TG_UNARY_GELU: return gelu_tanh(x);
    case TG_UNARY_GELU_QUICK: return gelu_quick(x);
    case TG_UNARY_SILU: return silu(x);
    case TG_UNARY_HARDSWISH: return x * fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
    case TG_UNARY_HARDSIGMOID: return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
    case TG_UNARY_EXP: return expf(x);
    case TG_UNARY_EXPM1: return expm1f(x);
    case TG_UNARY_SOFTPLUS: return x > 20.0f ? x : logf(1.0f + expf(x));
    case TG_UNARY_GELU_ERF: return gelu_erf(x);
    case TG_UNARY_FLOOR: return floorf(x);
    case TG_UNARY_CEIL: return ceilf(x);
    case TG_UNARY_ROUND: return roundf(x);
    case TG_UNARY_TRUNC: return truncf(x);
    default: return x;
    }
}

/* activation(x) * g; swiglu_oai clamps both (limit) and gates with g + 1 */
static __device__ __forceinline__ float apply_glu(int op, float x, float g, float alpha, float limit) {
    switch (op) {
    /* as the CPU (and ggml): 0 where the activation is 0, whatever the gate */
    case TG_GLU_REGLU: return x > 0.0f ? x * g : 0.0f;
    case TG_GLU_GEGLU: return x <= -10.0f ? 0.0f : gelu_tanh(x) * g;
    case TG_GLU_SWIGLU: return silu(x) * g;
    case TG_GLU_SWIGLU_OAI:
        /* std::min and std::clamp as ggml: a NaN stays NaN (fminf would drop it) */
        x = limit < x ? limit : x;
        g = g < -limit ? -limit : limit < g ? limit : g;
        return x / (1.0f + expf(-alpha * x)) * (g + 1.0f);
    case TG_GLU_GEGLU_ERF: return gelu_erf(x) * g;
    case TG_GLU_GEGLU_QUICK: return gelu_quick(x) * g;
    default: return x;
    }
}

/* b broadcasts over a: b's coordinate is a's modulo b's extent. */
static __global__ void binary_kernel(tg_cuda_view dst, tg_cuda_view a, tg_cuda_view b, int kind, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        float x = tg_cuda_load(a.data + tg_cuda_offset(a, c[0], c[1], c[2], c[3]), a.type);
        float y = tg_cuda_load(b.data + tg_cuda_offset(b, c[0] % b.ne[0], c[1] % b.ne[1], c[2] % b.ne[2], c[3] % b.ne[3]),
                               b.type);
        float r;
        switch (kind) {
        case EW_ADD: r = x + y; break;
        case EW_SUB: r = x - y; break;
        case EW_MUL: r = x * y; break;
        default: r = x / y; break;
        }
        tg_cuda_store(dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]), dst.type, r);
    }
}

static __global__ void map_kernel(tg_cuda_view dst, tg_cuda_view a, int kind, float p0, float p1, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        float x = kind == EW_FILL ? 0.0f : tg_cuda_load(a.data + tg_cuda_offset(a, c[0], c[1], c[2], c[3]), a.type);
        float r;
        switch (kind) {
        case EW_SCALE: r = x * p0 + p1; break;
        case EW_SQR: r = x * x; break;
        case EW_SQRT: r = sqrtf(x); break;
        case EW_LOG: r = logf(x); break;
        case EW_FILL: r = p0; break;
        default: r = apply_unary(kind - EW_UNARY_BASE, x); break;
        }
        tg_cuda_store(dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]), dst.type, r);
    }
}

/* Fused glu reads both halves of a's row (a_off/b_off select which half gates);
 * split glu reads a and b at the same coordinates (offsets 0). */
static __global__ void glu_kernel(tg_cuda_view dst, tg_cuda_view a, tg_cuda_view b, int64_t a_off, int64_t b_off, int op,
                                  float alpha, float limit, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        float x = tg_cuda_load(a.data + tg_cuda_offset(a, c[0] + a_off, c[1], c[2], c[3]), a.type);
        float g = tg_cuda_load(b.data + tg_cuda_offset(b, c[0] + b_off, c[1], c[2], c[3]), b.type);
        tg_cuda_store(dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]), dst.type, apply_glu(op, x, g, alpha, limit));
    }
}

static __global__ void diag_mask_inf_kernel(tg_cuda_view dst, tg_cuda_view a, int n_past, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        float x = tg_cuda_load(a.data + tg_cuda_offset(a, c[0], c[1], c[2], c[3]), a.type);
        if (c[0] > n_past + c[1]) x = -INFINITY;
        tg_cuda_store(dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]), dst.type, x);
    }
}

/* Element copies keep the bits of same-typed operands (i32 included). */
static __global__ void concat_kernel(tg_cuda_view dst, tg_cuda_view a, tg_cuda_view b, int dim, int64_t es, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        const char *src;
        if (c[dim] < a.ne[dim]) {
            src = a.data + tg_cuda_offset(a, c[0], c[1], c[2], c[3]);
        } else {
            c[dim] -= a.ne[dim];
            src = b.data + tg_cuda_offset(b, c[0], c[1], c[2], c[3]);
            c[dim] += a.ne[dim];
        }
        char *out = dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]);
        for (int64_t k = 0; k < es; k++) out[k] = src[k];
    }
}

/* ---- launchers and the exact support rules ------------------------------------------ */

bool tg_cuda_supports_elementwise(const struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0];
    const struct tg_tensor *b = node->src[1];
    switch (node->op) {
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
    case TG_OP_ADD1:
        return a && b && tg_cuda_is_float_type(a->type) && tg_cuda_is_float_type(b->type) &&
               node->type == a->type && tg_are_same_shape(node, a) && tg_can_repeat(b, a) &&
               (node->op != TG_OP_ADD1 || tg_nelements(b) == 1); /* add1: a scalar, as on the CPU */
    case TG_OP_UNARY:
        if (tg_get_op_param_i32(node, 0) < 0 || tg_get_op_param_i32(node, 0) >= TG_UNARY_COUNT ||
            tg_get_op_param_i32(node, 0) == TG_UNARY_XIELU) {
            return false;
        }
        return a && tg_cuda_is_float_type(a->type) && node->type == a->type && tg_are_same_shape(node, a);
    case TG_OP_SCALE:
    case TG_OP_SQR:
    case TG_OP_SQRT:
    case TG_OP_LOG:
    case TG_OP_FILL:
    case TG_OP_DIAG_MASK_INF:
        return a && tg_cuda_is_float_type(a->type) && node->type == a->type && tg_are_same_shape(node, a);
    case TG_OP_GLU: {
        const int32_t op = tg_get_op_param_i32(node, 0);
        if (!a || op < 0 || op >= TG_GLU_COUNT || !tg_cuda_is_float_type(a->type) || node->type != a->type) return false;
        if (b) return b->type == a->type && tg_are_same_shape(a, b) && tg_are_same_shape(node, a);
        return a->ne[0] == 2 * node->ne[0] && a->ne[1] == node->ne[1] && a->ne[2] == node->ne[2] &&
               a->ne[3] == node->ne[3];
    }
    case TG_OP_CONCAT: {
        const int32_t dim = tg_get_op_param_i32(node, 0);
        if (!a || !b || dim < 0 || dim > 3) return false;
        if (a->type != b->type || node->type != a->type) return false;
        if (a->type != TG_TYPE_F32 && a->type != TG_TYPE_F16 && a->type != TG_TYPE_BF16 && a->type != TG_TYPE_I32) return false;
        for (int i = 0; i < 4; i++) {
            const int64_t want = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
            if (node->ne[i] != want || (i != dim && b->ne[i] != a->ne[i])) return false;
        }
        return true;
    }
    default:
        return false;
    }
}

enum tg_status tg_cuda_op_elementwise(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    const int threads = 256;
    const int64_t n = tg_nelements(node);
    if (n == 0) return TG_OK;
    const unsigned blocks = tg_cuda_blocks_for(n, threads);
    tg_cuda_view dst = tg_cuda_view_of(node);
    tg_cuda_view a = tg_cuda_view_of(node->src[0]);
    cudaStream_t s = ctx->stream;
    switch (node->op) {
    case TG_OP_ADD:
    case TG_OP_ADD1:
        binary_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_cuda_view_of(node->src[1]), EW_ADD, n);
        break;
    case TG_OP_SUB: binary_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_cuda_view_of(node->src[1]), EW_SUB, n); break;
    case TG_OP_MUL: binary_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_cuda_view_of(node->src[1]), EW_MUL, n); break;
    case TG_OP_DIV: binary_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_cuda_view_of(node->src[1]), EW_DIV, n); break;
    case TG_OP_SCALE:
        map_kernel<<<blocks, threads, 0, s>>>(dst, a, EW_SCALE, tg_get_op_param_f32(node, 0), tg_get_op_param_f32(node, 1), n);
        break;
    case TG_OP_SQR: map_kernel<<<blocks, threads, 0, s>>>(dst, a, EW_SQR, 0.0f, 0.0f, n); break;
    case TG_OP_SQRT: map_kernel<<<blocks, threads, 0, s>>>(dst, a, EW_SQRT, 0.0f, 0.0f, n); break;
    case TG_OP_LOG: map_kernel<<<blocks, threads, 0, s>>>(dst, a, EW_LOG, 0.0f, 0.0f, n); break;
    case TG_OP_FILL: map_kernel<<<blocks, threads, 0, s>>>(dst, a, EW_FILL, tg_get_op_param_f32(node, 0), 0.0f, n); break;
    case TG_OP_UNARY:
        map_kernel<<<blocks, threads, 0, s>>>(dst, a, EW_UNARY_BASE + tg_get_op_param_i32(node, 0), 0.0f, 0.0f, n);
        break;
    case TG_OP_DIAG_MASK_INF:
        diag_mask_inf_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_get_op_param_i32(node, 0), n);
        break;
    case TG_OP_GLU: {
        const int op = tg_get_op_param_i32(node, 0);
        const float alpha = tg_get_op_param_f32(node, 2), limit = tg_get_op_param_f32(node, 3);
        if (node->src[1]) {
            glu_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_cuda_view_of(node->src[1]), 0, 0, op, alpha, limit, n);
        } else {
            const bool swapped = tg_get_op_param_i32(node, 1) != 0;
            const int64_t half_width = node->ne[0];
            glu_kernel<<<blocks, threads, 0, s>>>(dst, a, a, swapped ? half_width : 0, swapped ? 0 : half_width, op, alpha,
                                                  limit, n);
        }
        break;
    }
    case TG_OP_CONCAT:
        concat_kernel<<<blocks, threads, 0, s>>>(dst, a, tg_cuda_view_of(node->src[1]), tg_get_op_param_i32(node, 0),
                                                  (int64_t)tg_type_size(node->type), n);
        break;
    default:
        return tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s': op %s has no CUDA element-wise kernel", node->name,
                       tg_op_name(node->op));
    }
    return tg_cuda_check_launch(node, tg_op_name(node->op));
}

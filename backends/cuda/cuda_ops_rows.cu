/* Row kernels: rms_norm, norm, soft_max (scale, mask, ALiBi, sinks), sum_rows
 * and rope (normal/neox with YaRN and frequency factors).  One block per row for the reductions; every read of
 * a row happens before the barrier that ends its last reduction, and each
 * output element is written by the thread that read it, so dst may alias any
 * source of its own layout (src0, or soft_max's unbroadcast mask).  Rope: the
 * thread of a rotated pair reads both elements before writing them. */
#include "cuda_internal.cuh"

#define ROW_THREADS 256

/* Row r of a tensor with ne[1..3] rows. */
static __device__ __forceinline__ void row_coords(int64_t r, const int64_t ne[4], int64_t *i1, int64_t *i2, int64_t *i3) {
    *i1 = r % ne[1];
    r /= ne[1];
    *i2 = r % ne[2];
    *i3 = r / ne[2];
}

enum row_norm_kind { ROW_RMS_NORM, ROW_NORM };

static __global__ void norm_kernel(tg_cuda_view dst, tg_cuda_view a, int kind, float eps) {
    __shared__ float shared[32];
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, a.ne, &i1, &i2, &i3);
    const char *x = a.data + tg_cuda_offset(a, 0, i1, i2, i3);
    char *y = dst.data + tg_cuda_offset(dst, 0, i1, i2, i3);
    const int64_t n = a.ne[0];
    float mean = 0.0f;
    if (kind == ROW_NORM) {
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += tg_cuda_load(x + i * a.nb[0], a.type);
        mean = tg_cuda_block_sum(s, shared) / (float)n;
    }
    float s2 = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = tg_cuda_load(x + i * a.nb[0], a.type) - mean;
        s2 += v * v;
    }
    const float scale = rsqrtf(tg_cuda_block_sum(s2, shared) / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = tg_cuda_load(x + i * a.nb[0], a.type) - mean;
        tg_cuda_store(y + i * dst.nb[0], dst.type, v * scale);
    }
}

static __global__ void sum_rows_kernel(tg_cuda_view dst, tg_cuda_view a) {
    __shared__ float shared[32];
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, a.ne, &i1, &i2, &i3);
    const char *x = a.data + tg_cuda_offset(a, 0, i1, i2, i3);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) s += tg_cuda_load(x + i * a.nb[0], a.type);
    s = tg_cuda_block_sum(s, shared);
    if (threadIdx.x == 0) tg_cuda_store(dst.data + tg_cuda_offset(dst, 0, i1, i2, i3), dst.type, s);
}

static __global__ void soft_max_kernel(tg_cuda_view dst, tg_cuda_view a, tg_cuda_view mask, bool has_mask,
                                       tg_cuda_view sinks, bool has_sinks, float scale, float max_bias) {
    __shared__ float shared[32];
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, a.ne, &i1, &i2, &i3);
    const char *x = a.data + tg_cuda_offset(a, 0, i1, i2, i3);
    char *y = dst.data + tg_cuda_offset(dst, 0, i1, i2, i3);
    const char *m = has_mask ? mask.data + tg_cuda_offset(mask, 0, i1, i2 % mask.ne[2], i3 % mask.ne[3]) : NULL;
    const float slope = tg_cuda_alibi_slope(max_bias, i2, a.ne[2]);
    const int64_t n = a.ne[0];
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = tg_cuda_load(x + i * a.nb[0], a.type) * scale;
        if (m) v += slope * tg_cuda_load(m + i * mask.nb[0], mask.type);
        mx = fmaxf(mx, v);
    }
    mx = tg_cuda_block_max(mx, shared);
    /* a sink (one logit per head) joins the normalisation, not the output */
    const float sink = has_sinks ? tg_cuda_load(sinks.data + i2 * sinks.nb[0], sinks.type) : -INFINITY;
    mx = fmaxf(mx, sink);
    if (mx == -INFINITY) {
        /* every entry masked: zeros, as the CPU (not exp(-inf - -inf) = NaN);
         * mx is the same in every thread, so the whole block returns here */
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) tg_cuda_store(y + i * dst.nb[0], dst.type, 0.0f);
        return;
    }
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = tg_cuda_load(x + i * a.nb[0], a.type) * scale;
        if (m) v += slope * tg_cuda_load(m + i * mask.nb[0], mask.type);
        sum += expf(v - mx);
    }
    sum = tg_cuda_block_sum(sum, shared);
    if (has_sinks) sum += expf(sink - mx);
    const float inv = sum > 0.0f ? 1.0f / sum : sum == 0.0f ? 0.0f : NAN; /* NaN sum: all NaN, as the CPU */
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = tg_cuda_load(x + i * a.nb[0], a.type) * scale;
        if (m) v += slope * tg_cuda_load(m + i * mask.nb[0], mask.type);
        tg_cuda_store(y + i * dst.nb[0], dst.type, expf(v - mx) * inv);
    }
}

struct rope_params {
    int n_dims;
    bool neox;
    float freq_scale, ext_factor, attn_factor;
    float theta_scale;
    float corr_low, corr_high;
};

/* YaRN: blend interpolated and extrapolated angles by a ramp over dimension
 * pairs, and scale the magnitude when extrapolating. */
static __device__ void rope_yarn(float theta_extrap, const rope_params &p, int64_t pair, float *c, float *s) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        const float y = ((float)pair - p.corr_low) / fmaxf(0.001f, p.corr_high - p.corr_low);
        const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p.ext_factor;
        theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
    }
    *c = cosf(theta) * mscale;
    *s = sinf(theta) * mscale;
}

/* One thread per element slot of a row: the first slot of each rotated pair
 * rotates both, slots past n_dims copy, second slots idle. */
static __global__ void rope_kernel(tg_cuda_view dst, tg_cuda_view a, tg_cuda_view pos, tg_cuda_view factors,
                                   bool has_factors, rope_params p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, a.ne, c);
        const int64_t i0 = c[0];
        const char *row = a.data + tg_cuda_offset(a, 0, c[1], c[2], c[3]);
        char *out = dst.data + tg_cuda_offset(dst, 0, c[1], c[2], c[3]);
        if (i0 >= p.n_dims) {
            tg_cuda_store(out + i0 * dst.nb[0], dst.type, tg_cuda_load(row + i0 * a.nb[0], a.type));
            continue;
        }
        const int64_t half = p.n_dims / 2;
        int64_t pair, j0, j1;
        if (p.neox) {
            if (i0 >= half) continue;
            pair = i0;
            j0 = i0;
            j1 = i0 + half;
        } else {
            if (i0 % 2 != 0) continue;
            pair = i0 / 2;
            j0 = i0;
            j1 = i0 + 1;
        }
        /* the CPU's (and ggml's) angle: pos times theta_scale, pair times
         * over, by repeated multiplication; divided by the pair's factor */
        float theta = (float)*(const int32_t *)(pos.data + c[2] * pos.nb[0]);
        for (int64_t k = 0; k < pair; k++) theta *= p.theta_scale;
        if (has_factors) theta /= tg_cuda_load(factors.data + pair * factors.nb[0], factors.type);
        float cs, sn;
        rope_yarn(theta, p, pair, &cs, &sn);
        const float x0 = tg_cuda_load(row + j0 * a.nb[0], a.type);
        const float x1 = tg_cuda_load(row + j1 * a.nb[0], a.type);
        tg_cuda_store(out + j0 * dst.nb[0], dst.type, x0 * cs - x1 * sn);
        tg_cuda_store(out + j1 * dst.nb[0], dst.type, x0 * sn + x1 * cs);
    }
}

/* The dimension (in pairs) where rotations of n_rot turns over the original
 * context begin, for the YaRN ramp. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* ---- launchers and support rules -------------------------------------------------------- */

bool tg_cuda_supports_rows(const struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0];
    if (!a || !tg_cuda_is_float_type(a->type)) return false;
    /* one block per row: more rows than the grid holds are the CPU's (tg_cuda_op_rows refuses them) */
    if (a->ne[1] * a->ne[2] * a->ne[3] > 0x7fffffffLL) return false;
    switch (node->op) {
    case TG_OP_RMS_NORM:
    case TG_OP_NORM:
        return node->type == a->type && tg_are_same_shape(node, a);
    case TG_OP_SUM_ROWS:
        return node->type == a->type && node->ne[0] == 1 && node->ne[1] == a->ne[1] && node->ne[2] == a->ne[2] &&
               node->ne[3] == a->ne[3];
    case TG_OP_SOFT_MAX: {
        const struct tg_tensor *m = node->src[1];
        const struct tg_tensor *sinks = node->src[2];
        if (sinks && (sinks->type != TG_TYPE_F32 || sinks->ne[0] < a->ne[2])) return false;
        if (node->type != a->type || !tg_are_same_shape(node, a)) return false;
        if (!m) return true;
        return (m->type == TG_TYPE_F32 || m->type == TG_TYPE_F16) && m->ne[0] == a->ne[0] && m->ne[1] >= a->ne[1] &&
               a->ne[2] % m->ne[2] == 0 && a->ne[3] % m->ne[3] == 0;
    }
    case TG_OP_ROPE: {
        const struct tg_tensor *pos = node->src[1];
        const int n_dims = tg_get_op_param_i32(node, 1);
        const int mode = tg_get_op_param_i32(node, 2);
        const struct tg_tensor *factors = node->src[2];
        if (factors && (factors->type != TG_TYPE_F32 || factors->ne[0] < n_dims / 2)) return false;
        return node->type == a->type && tg_are_same_shape(node, a) && pos && pos->type == TG_TYPE_I32 &&
               pos->ne[0] >= a->ne[2] && n_dims > 0 && n_dims % 2 == 0 &&
               n_dims <= a->ne[0] && (mode == TG_ROPE_NORMAL || mode == TG_ROPE_NEOX) &&
               tg_get_op_param_i32(node, 15) == 0; /* an offset (tg_rope_set_offset): the CPU's */
    }
    default:
        return false;
    }
}

enum tg_status tg_cuda_op_rows(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0];
    const int64_t n_rows = a->ne[1] * a->ne[2] * a->ne[3];
    if (n_rows == 0 || a->ne[0] == 0) return TG_OK;
    if (n_rows > 0x7fffffffLL) {
        return tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s': %lld rows exceed the CUDA grid", node->name, (long long)n_rows);
    }
    tg_cuda_view dst = tg_cuda_view_of(node);
    tg_cuda_view av = tg_cuda_view_of(a);
    cudaStream_t s = ctx->stream;
    switch (node->op) {
    case TG_OP_RMS_NORM:
        norm_kernel<<<(unsigned)n_rows, ROW_THREADS, 0, s>>>(dst, av, ROW_RMS_NORM, tg_get_op_param_f32(node, 0));
        break;
    case TG_OP_NORM:
        norm_kernel<<<(unsigned)n_rows, ROW_THREADS, 0, s>>>(dst, av, ROW_NORM, tg_get_op_param_f32(node, 0));
        break;
    case TG_OP_SUM_ROWS: sum_rows_kernel<<<(unsigned)n_rows, ROW_THREADS, 0, s>>>(dst, av); break;
    case TG_OP_SOFT_MAX: {
        const struct tg_tensor *m = node->src[1], *sinks = node->src[2];
        tg_cuda_view mv = m ? tg_cuda_view_of(m) : av, sv = sinks ? tg_cuda_view_of(sinks) : av;
        soft_max_kernel<<<(unsigned)n_rows, ROW_THREADS, 0, s>>>(dst, av, mv, m != NULL, sv, sinks != NULL,
                                                                 tg_get_op_param_f32(node, 0), tg_get_op_param_f32(node, 1));
        break;
    }
    case TG_OP_ROPE: {
        rope_params p;
        p.n_dims = tg_get_op_param_i32(node, 1);
        p.neox = (tg_get_op_param_i32(node, 2) & TG_ROPE_NEOX) != 0;
        const int n_ctx_orig = tg_get_op_param_i32(node, 4);
        const float freq_base = tg_get_op_param_f32(node, 5);
        p.freq_scale = tg_get_op_param_f32(node, 6);
        p.ext_factor = tg_get_op_param_f32(node, 7);
        p.attn_factor = tg_get_op_param_f32(node, 8);
        const float beta_fast = tg_get_op_param_f32(node, 9);
        const float beta_slow = tg_get_op_param_f32(node, 10);
        p.theta_scale = powf(freq_base, -2.0f / (float)p.n_dims);
        const float lo = floorf(yarn_corr_dim(p.n_dims, n_ctx_orig, beta_fast, freq_base));
        const float hi = ceilf(yarn_corr_dim(p.n_dims, n_ctx_orig, beta_slow, freq_base));
        p.corr_low = fmaxf(0.0f, lo);
        p.corr_high = fminf((float)(p.n_dims - 1), hi);
        const int64_t n = tg_nelements(a);
        const struct tg_tensor *factors = node->src[2];
        rope_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, s>>>(dst, av, tg_cuda_view_of(node->src[1]),
                                                               factors ? tg_cuda_view_of(factors) : av, factors != NULL, p, n);
        break;
    }
    default:
        return tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s': op %s has no CUDA row kernel", node->name,
                       tg_op_name(node->op));
    }
    return tg_cuda_check_launch(node, tg_op_name(node->op));
}

/* Row-wise kernels: norms, soft_max, rope, get_rows, set_rows, copies,
 * concat, sum_rows.  Norms, soft_max and rope read a whole row (or pair)
 * before writing it, so dst may alias src0. */
#include "cpu-kernels.h"

#include <stdlib.h>

static void norm_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3) {
    const float eps = tg_get_op_param_f32(dst, 0);
    const int64_t n = a->ne[0];
    double sum = 0.0, sum2 = 0.0;
    for (int64_t i0 = 0; i0 < n; i0++) {
        double x = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
        sum += x;
        sum2 += x * x;
    }
    double mean = dst->op == TG_OP_NORM ? sum / (double)n : 0.0;
    double var = sum2 / (double)n - mean * mean;
    float scale = (float)(1.0 / sqrt(var + eps));
    for (int64_t i0 = 0; i0 < n; i0++) {
        float x = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
        cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, (x - (float)mean) * scale);
    }
}

static float alibi_slope(float max_bias, int64_t head, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= n_head) n_log2 *= 2;
    float m0 = powf(2.0f, -max_bias / (float)n_log2);
    float m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n_log2);
    return head < n_log2 ? powf(m0, (float)(head + 1)) : powf(m1, (float)(2 * (head - n_log2) + 1));
}

static void soft_max_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3,
                         float *row) {
    const struct tg_tensor *mask = dst->src[1];
    const float scale = tg_get_op_param_f32(dst, 0);
    const float slope = alibi_slope(tg_get_op_param_f32(dst, 1), i2, a->ne[2]);
    const int64_t n = a->ne[0];
    float max = -INFINITY;
    for (int64_t i0 = 0; i0 < n; i0++) {
        float x = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type) * scale;
        if (mask) x += slope * cpu_load(cpu_elem(mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]), mask->type);
        row[i0] = x;
        if (x > max) max = x;
    }
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < n; i0++) {
        row[i0] = max == -INFINITY ? 0.0f : expf(row[i0] - max);
        sum += row[i0];
    }
    float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t i0 = 0; i0 < n; i0++) cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, row[i0] * inv);
}

/* YaRN: the dimension range over which extrapolation ramps to interpolation. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static float yarn_ramp(float low, float high, int64_t i0) {
    const int64_t pair = i0 / 2; /* rope rotates dimension pairs */
    float y = ((float)pair - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static void rope_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3) {
    const int n_dims = dst->op_params[1], mode = dst->op_params[2], n_ctx_orig = dst->op_params[4];
    const float base = tg_get_op_param_f32(dst, 5), freq_scale = tg_get_op_param_f32(dst, 6);
    const float ext = tg_get_op_param_f32(dst, 7), attn = tg_get_op_param_f32(dst, 8);
    const float beta_fast = tg_get_op_param_f32(dst, 9), beta_slow = tg_get_op_param_f32(dst, 10);
    float low = floorf(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, base));
    float high = ceilf(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, base));
    low = fmaxf(0.0f, low);
    high = fminf((float)(n_dims - 1), high);
    const float pos = (float)cpu_index(dst->src[1], i2, 0, 0);
    const float theta_scale = powf(base, -2.0f / (float)n_dims);
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const int64_t pair = i0 / 2;
        float theta_extrap = pos * powf(theta_scale, (float)pair);
        float theta_interp = freq_scale * theta_extrap;
        float theta = theta_interp, mscale = attn;
        if (ext != 0.0f) {
            float mix = yarn_ramp(low, high, i0) * ext;
            theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
        }
        float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
        int64_t j0 = mode == TG_ROPE_NEOX ? i0 / 2 : i0;
        int64_t j1 = mode == TG_ROPE_NEOX ? i0 / 2 + n_dims / 2 : i0 + 1;
        float x0 = cpu_load(cpu_elem(a, j0, i1, i2, i3), a->type);
        float x1 = cpu_load(cpu_elem(a, j1, i1, i2, i3), a->type);
        cpu_store(cpu_elem(dst, j0, i1, i2, i3), dst->type, x0 * c - x1 * s);
        cpu_store(cpu_elem(dst, j1, i1, i2, i3), dst->type, x0 * s + x1 * c);
    }
    for (int64_t i0 = n_dims; i0 < a->ne[0]; i0++) {
        cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type));
    }
}

/* One element of size bytes: fixed sizes the compiler copies inline, rather
 * than a memcpy call per element. */
static inline void copy_element(void *dst, const void *src, size_t size) {
    switch (size) {
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, size); break;
    }
}

/* The row-major position of element e of t. */
static void unravel_element(int64_t e, const struct tg_tensor *t, int64_t i[4]) {
    i[0] = e % t->ne[0];
    cpu_unravel(e / t->ne[0], t, &i[1], &i[2], &i[3]);
}

/* Advances a row-major position over shape ne by one element. */
static inline void next_element(int64_t i[4], const int64_t ne[4]) {
    if (++i[0] < ne[0]) return;
    i[0] = 0;
    if (++i[1] < ne[1]) return;
    i[1] = 0;
    if (++i[2] < ne[2]) return;
    i[2] = 0;
    i[3]++;
}

/* Copies in logical (row-major) element order between any shapes with the same
 * element count, converting types.  Positions advance by counting: no
 * division per element. */
static void copy_elements(struct tg_tensor *dst, const struct tg_tensor *src, int ith, int nth) {
    int64_t n = tg_nelements(src), e0, e1;
    cpu_rows(n, ith, nth, &e0, &e1);
    if (e0 >= e1) return;
    int64_t s[4], d[4];
    unravel_element(e0, src, s);
    unravel_element(e0, dst, d);
    const bool same_type = src->type == dst->type;
    const size_t size = tg_type_size(src->type);
    for (int64_t e = e0; e < e1; e++) {
        const void *sp = cpu_elem(src, s[0], s[1], s[2], s[3]);
        void *dp = cpu_elem(dst, d[0], d[1], d[2], d[3]);
        if (same_type) copy_element(dp, sp, size);
        else cpu_store(dp, dst->type, cpu_load(sp, src->type));
        next_element(s, src->ne);
        next_element(d, dst->ne);
    }
}

enum tg_status cpu_op_rows(struct tg_tensor *dst, int ith, int nth) {
    const struct tg_tensor *a = dst->src[0];
    int64_t r0, r1;
    switch (dst->op) {
    case TG_OP_CPY: case TG_OP_DUP: case TG_OP_CONT:
        copy_elements(dst, a, ith, nth);
        return TG_OK;
    case TG_OP_SET_ROWS: {
        /* one thread, in row order: repeated indices end with the last row, every run */
        if (ith != 0) return TG_OK;
        (void)nth;
        const struct tg_tensor *idx = dst->src[1];
        r0 = 0;
        r1 = tg_nrows(a);
        for (int64_t r = r0; r < r1; r++) {
            int64_t i1, i2, i3;
            cpu_unravel(r, a, &i1, &i2, &i3);
            int64_t row = cpu_index(idx, i1, i2 % idx->ne[1], i3 % idx->ne[2]);
            if (row < 0 || row >= dst->ne[1]) continue; /* out-of-range indices write nothing */
            for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                cpu_store(cpu_elem(dst, i0, row, i2, i3), dst->type, cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type));
            }
        }
        return TG_OK;
    }
    default:
        break;
    }
    float *scratch = dst->op == TG_OP_SOFT_MAX ? malloc((size_t)a->ne[0] * sizeof *scratch) : NULL;
    if (dst->op == TG_OP_SOFT_MAX && !scratch) return tg_fail(TG_ERR_ALLOC, "soft_max '%s': out of memory", dst->name);
    cpu_rows(tg_nrows(dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, dst, &i1, &i2, &i3);
        switch (dst->op) {
        case TG_OP_RMS_NORM: case TG_OP_NORM: norm_row(dst, a, i1, i2, i3); break;
        case TG_OP_SOFT_MAX: soft_max_row(dst, a, i1, i2, i3, scratch); break;
        case TG_OP_ROPE: rope_row(dst, a, i1, i2, i3); break;
        case TG_OP_GET_ROWS: {
            int64_t row = cpu_index(dst->src[1], i1, i2, i3);
            const bool in_range = row >= 0 && row < a->ne[1];
            const size_t size = tg_type_size(dst->type);
            for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                void *out = cpu_elem(dst, i0, i1, i2, i3);
                if (in_range && a->type == dst->type) {
                    /* i32 rows keep every bit (a float round trip loses those above 2^24) */
                    copy_element(out, cpu_elem(a, i0, row, i2, i3), size);
                } else {
                    cpu_store(out, dst->type, in_range ? cpu_load(cpu_elem(a, i0, row, i2, i3), a->type) : 0.0f);
                }
            }
            break;
        }
        case TG_OP_SUM_ROWS: {
            double sum = 0.0;
            for (int64_t i0 = 0; i0 < a->ne[0]; i0++) sum += cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
            cpu_store(cpu_elem(dst, 0, i1, i2, i3), dst->type, (float)sum);
            break;
        }
        case TG_OP_CONCAT: {
            const struct tg_tensor *b = dst->src[1];
            int dim = dst->op_params[0];
            const size_t size = tg_type_size(dst->type);
            for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                int64_t idx[4] = {i0, i1, i2, i3};
                const struct tg_tensor *from = a;
                if (idx[dim] >= a->ne[dim]) {
                    idx[dim] -= a->ne[dim];
                    from = b;
                }
                const void *sp = cpu_elem(from, idx[0], idx[1], idx[2], idx[3]);
                copy_element(cpu_elem(dst, i0, i1, i2, i3), sp, size);
            }
            break;
        }
        default:
            break;
        }
    }
    free(scratch);
    return TG_OK;
}

static bool is_index(enum tg_type t) { return t == TG_TYPE_I32 || t == TG_TYPE_I64; }

bool cpu_supports_rows(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a) return false;
    switch (dst->op) {
    case TG_OP_CPY: case TG_OP_DUP: case TG_OP_CONT:
        if (tg_nelements(a) != tg_nelements(dst)) return false;
        return (cpu_is_float(a->type) && cpu_is_float(dst->type)) || (a->type == TG_TYPE_I32 && dst->type == TG_TYPE_I32);
    case TG_OP_SET_ROWS:
        return a->type == TG_TYPE_F32 && b && is_index(b->type) && cpu_is_float(dst->type) && a->ne[0] == dst->ne[0] &&
               b->ne[0] == a->ne[1] && a->ne[2] % b->ne[1] == 0 && a->ne[3] % b->ne[2] == 0 &&
               a->ne[2] == dst->ne[2] && a->ne[3] == dst->ne[3];
    case TG_OP_RMS_NORM: case TG_OP_NORM:
        return a->type == TG_TYPE_F32 && dst->type == TG_TYPE_F32 && tg_are_same_shape(a, dst);
    case TG_OP_SOFT_MAX:
        if (dst->src[2] || a->type != TG_TYPE_F32 || dst->type != TG_TYPE_F32 || !tg_are_same_shape(a, dst)) return false;
        return !b || ((b->type == TG_TYPE_F32 || b->type == TG_TYPE_F16) && b->ne[0] == a->ne[0] && b->ne[1] >= a->ne[1] &&
                      a->ne[2] % b->ne[2] == 0 && a->ne[3] % b->ne[3] == 0);
    case TG_OP_ROPE: {
        int n_dims = dst->op_params[1], mode = dst->op_params[2];
        return (a->type == TG_TYPE_F32 || a->type == TG_TYPE_F16) && dst->type == a->type && tg_are_same_shape(a, dst) &&
               b && b->type == TG_TYPE_I32 && b->ne[0] >= a->ne[2] && !dst->src[2] && n_dims > 0 && n_dims % 2 == 0 &&
               n_dims <= a->ne[0] && (mode == TG_ROPE_NORMAL || mode == TG_ROPE_NEOX);
    }
    case TG_OP_GET_ROWS:
        return b && is_index(b->type) && (cpu_is_float(a->type) || a->type == TG_TYPE_I32) &&
               (dst->type == TG_TYPE_F32 || (a->type == TG_TYPE_I32 && dst->type == TG_TYPE_I32)) &&
               dst->ne[0] == a->ne[0] && dst->ne[1] == b->ne[0] && a->ne[2] == b->ne[1] && dst->ne[2] == b->ne[1];
    case TG_OP_SUM_ROWS:
        return a->type == TG_TYPE_F32 && dst->type == TG_TYPE_F32 && dst->ne[0] == 1 && dst->ne[1] == a->ne[1];
    case TG_OP_CONCAT: {
        int dim = dst->op_params[0];
        if (!b || dim < 0 || dim > 3 || a->type != dst->type || b->type != dst->type) return false;
        if (!cpu_is_float(dst->type) && dst->type != TG_TYPE_I32) return false;
        for (int d = 0; d < 4; d++) {
            int64_t want = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
            if (dst->ne[d] != want || (d != dim && b->ne[d] != a->ne[d])) return false;
        }
        return true;
    }
    default:
        return false;
    }
}

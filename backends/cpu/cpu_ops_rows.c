/* Row-wise kernels: norms, soft_max, rope (cpu_ops_rope.c), concat,
 * sum_rows.  Norms, soft_max and rope read a whole row (or pair) before
 * writing it, so dst may alias src0. */
#include "cpu-kernels.h"

/* norm: (x - mean) / sqrt(var + eps), the variance taken around the mean
 * (a second pass: no cancellation when the mean is large); rms_norm: x /
 * sqrt(mean(x^2) + eps).  Sums in double, as ggml's. */
static void norm_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3) {
    const float eps = tg_get_op_param_f32(dst, 0);
    const int64_t n = a->ne[0];
    double mean = 0.0;
    if (dst->op == TG_OP_NORM) {
        for (int64_t i0 = 0; i0 < n; i0++) mean += cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
        mean /= (double)n;
    }
    double sum2 = 0.0;
    for (int64_t i0 = 0; i0 < n; i0++) {
        const double v = (double)cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type) - mean;
        sum2 += v * v;
    }
    const float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
    for (int64_t i0 = 0; i0 < n; i0++) {
        const float x = cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type);
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

/* softmax(scale * x + slope * mask) over a row; the mask's row is the
 * row's index (the mask may have more rows), its dims 2-3 broadcast; a sink
 * (src[2], one logit per head) joins the normalisation but not the output. */
static void soft_max_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3,
                         float *row) {
    const struct tg_tensor *mask = dst->src[1], *sinks = dst->src[2];
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
    const float sink = sinks ? cpu_load(cpu_elem(sinks, i2, 0, 0, 0), sinks->type) : -INFINITY;
    if (sink > max) max = sink;
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < n; i0++) {
        row[i0] = max == -INFINITY ? 0.0f : cpu_exp_term(row[i0] - max);
        sum += row[i0];
    }
    if (sinks && max != -INFINITY) sum += cpu_exp_term(sink - max);
    /* a row fully masked (-inf, no sink) sums to 0 and gives zeros where ggml
     * gives NaN (docs/upstream.md, deliberate: CUDA gives zeros too); a NaN or
     * +inf logit makes the sum NaN, and the whole row NaN, as in ggml */
    const float inv = sum > 0.0 ? (float)(1.0 / sum) : sum == 0.0 ? 0.0f : NAN;
    for (int64_t i0 = 0; i0 < n; i0++) cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, row[i0] * inv);
}

enum tg_status cpu_op_rows(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *a = dst->src[0];
    float *scratch = x->own; /* soft_max's row (cpu_work_rows) */
    int64_t r0, r1;
    cpu_rows(tg_nrows(dst), x->ith, x->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, dst, &i1, &i2, &i3);
        switch (dst->op) {
        case TG_OP_RMS_NORM: case TG_OP_NORM: norm_row(dst, a, i1, i2, i3); break;
        case TG_OP_SOFT_MAX: soft_max_row(dst, a, i1, i2, i3, scratch); break;
        case TG_OP_ROPE: cpu_rope_row(dst, a, i1, i2, i3); break;
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
                memcpy(cpu_elem(dst, i0, i1, i2, i3), cpu_elem(from, idx[0], idx[1], idx[2], idx[3]), size);
            }
            break;
        }
        default:
            break;
        }
    }
    return TG_OK;
}

struct cpu_work cpu_work_rows(const struct tg_tensor *dst) {
    const size_t row = dst->op == TG_OP_SOFT_MAX && dst->src[0] ? (size_t)dst->src[0]->ne[0] * sizeof(float) : 0;
    return (struct cpu_work){0, row};
}

bool cpu_supports_rows(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1], *c = dst->src[2];
    if (!a) return false;
    switch (dst->op) {
    case TG_OP_RMS_NORM: case TG_OP_NORM:
        return a->type == TG_TYPE_F32 && dst->type == TG_TYPE_F32 && tg_are_same_shape(a, dst);
    case TG_OP_SOFT_MAX:
        if (a->type != TG_TYPE_F32 || dst->type != TG_TYPE_F32 || !tg_are_same_shape(a, dst)) return false;
        if (c && (c->type != TG_TYPE_F32 || c->ne[0] < a->ne[2])) return false;
        return !b || ((b->type == TG_TYPE_F32 || b->type == TG_TYPE_F16) && b->ne[0] == a->ne[0] && b->ne[1] >= a->ne[1] &&
                      a->ne[2] % b->ne[2] == 0 && a->ne[3] % b->ne[3] == 0);
    case TG_OP_ROPE: return cpu_supports_rope(dst);
    case TG_OP_SUM_ROWS:
        return a->type == TG_TYPE_F32 && dst->type == TG_TYPE_F32 && dst->ne[0] == 1 && dst->ne[1] == a->ne[1] &&
               dst->ne[2] == a->ne[2] && dst->ne[3] == a->ne[3];
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

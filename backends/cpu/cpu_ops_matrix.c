/* mul_mat and flash attention.  Sums are accumulated in double, in a fixed
 * order, so results do not depend on the thread count. */
#include "cpu-kernels.h"

#include <stdlib.h>

static enum tg_status mul_mat(struct tg_tensor *dst, int ith, int nth) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t K = a->ne[0];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    int64_t r0, r1;
    cpu_rows(tg_nrows(dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, dst, &i1, &i2, &i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            double sum = 0.0;
            for (int64_t k = 0; k < K; k++) {
                float x = cpu_load(cpu_elem(a, k, i0, i2 / r2, i3 / r3), a->type);
                float y = cpu_load(cpu_elem(b, k, i1, i2, i3), b->type);
                sum += (double)x * (double)y;
            }
            cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, (float)sum);
        }
    }
    return TG_OK;
}

/* dst[:, head, query, batch] = softmax_j(scale * q.k_j (+ softcap) + slope * mask[j, query]) v_j */
static enum tg_status flash_attn(struct tg_tensor *dst, int ith, int nth) {
    const struct tg_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    const float scale = tg_get_op_param_f32(dst, 0), max_bias = tg_get_op_param_f32(dst, 1);
    const float softcap = tg_get_op_param_f32(dst, 2);
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1], n_q = q->ne[1], H = q->ne[2];
    const int64_t gqa = H / k->ne[2];
    double *w = malloc((size_t)n_kv * sizeof *w);
    double *acc = malloc((size_t)Dv * sizeof *acc);
    if (!w || !acc) {
        free(w);
        free(acc);
        return tg_fail(TG_ERR_ALLOC, "flash_attn_ext '%s': out of memory", dst->name);
    }
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= H) n_log2 *= 2;
    int64_t r0, r1;
    cpu_rows(n_q * H * q->ne[3], ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t iq1 = r % n_q, iq2 = (r / n_q) % H, iq3 = r / (n_q * H);
        int64_t ik2 = iq2 / gqa;
        float slope = 1.0f;
        if (max_bias > 0.0f) {
            float m0 = powf(2.0f, -max_bias / (float)n_log2), m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n_log2);
            slope = iq2 < n_log2 ? powf(m0, (float)(iq2 + 1)) : powf(m1, (float)(2 * (iq2 - n_log2) + 1));
        }
        double max = -INFINITY;
        for (int64_t j = 0; j < n_kv; j++) {
            double s = 0.0;
            for (int64_t d = 0; d < D; d++) {
                s += (double)cpu_load(cpu_elem(q, d, iq1, iq2, iq3), q->type) *
                     (double)cpu_load(cpu_elem(k, d, j, ik2, iq3), k->type);
            }
            s *= scale;
            if (softcap != 0.0f) s = softcap * tanh(s / softcap);
            if (mask) s += slope * cpu_load(cpu_elem(mask, j, iq1, 0, 0), mask->type);
            w[j] = s;
            if (s > max) max = s;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < n_kv; j++) {
            w[j] = max == -INFINITY ? 0.0 : exp(w[j] - max);
            sum += w[j];
        }
        for (int64_t d = 0; d < Dv; d++) acc[d] = 0.0;
        for (int64_t j = 0; j < n_kv; j++) {
            if (w[j] == 0.0) continue;
            for (int64_t d = 0; d < Dv; d++) acc[d] += w[j] * cpu_load(cpu_elem(v, d, j, ik2, iq3), v->type);
        }
        for (int64_t d = 0; d < Dv; d++) {
            cpu_store(cpu_elem(dst, d, iq2, iq1, iq3), dst->type, sum > 0.0 ? (float)(acc[d] / sum) : 0.0f);
        }
    }
    free(w);
    free(acc);
    return TG_OK;
}

enum tg_status cpu_op_matrix(struct tg_tensor *dst, int ith, int nth) {
    return dst->op == TG_OP_MUL_MAT ? mul_mat(dst, ith, nth) : flash_attn(dst, ith, nth);
}

bool cpu_supports_matrix(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (dst->op == TG_OP_MUL_MAT) {
        return a && b && cpu_is_float(a->type) && b->type == TG_TYPE_F32 && dst->type == TG_TYPE_F32 &&
               a->ne[0] == b->ne[0] && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && dst->ne[0] == a->ne[1] &&
               dst->ne[1] == b->ne[1] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3];
    }
    if (dst->op == TG_OP_FLASH_ATTN_EXT) {
        const struct tg_tensor *q = a, *k = b, *v = dst->src[2], *mask = dst->src[3];
        if (!q || !k || !v || dst->src[4] || q->type != TG_TYPE_F32 || dst->type != TG_TYPE_F32) return false;
        if (!cpu_is_float(k->type) || !cpu_is_float(v->type)) return false;
        if (mask && (!cpu_is_float(mask->type) || mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1])) return false;
        return q->ne[0] == k->ne[0] && k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2] && q->ne[2] % k->ne[2] == 0 &&
               dst->ne[0] == v->ne[0] && dst->ne[1] == q->ne[2] && dst->ne[2] == q->ne[1];
    }
    return false;
}

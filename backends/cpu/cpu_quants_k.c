/* The k-quants (256-element super-blocks): q4_k and q6_k to and from f32, and
 * the q8_K activation format of their dot products.
 *
 * Quantizing picks each sub-block's scale by weighted least squares over a
 * few candidate grids (values of large magnitude weigh more), then quantizes
 * the sub-block scales against one super-block scale, and finally the
 * values against the stored (fp16-rounded) scales, so what is decoded is
 * what was fitted. */
#include "cpu-quants.h"

#include <math.h>

/* Round to nearest, ties to even (the default rounding mode's). */
static inline int nearest(float x) { return (int)lrintf(x); }
static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- q4_k ---------------------------------------------------------------------- */

/* Fits x[n] ~ s * L + b with L in [0, nmax] and b <= 0; returns s, sets *b. */
static float fit_asymmetric(const float *x, const float *w, int n, int nmax, float *b) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    *b = lo;
    if (hi <= lo) return 0.0f;
    float best_s = (hi - lo) / (float)nmax, best_err = INFINITY;
    for (int step = -10; step <= 10; step++) {
        const float iscale = ((float)nmax + 0.1f * (float)step) / (hi - lo);
        float sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
        int L[CPU_QK_K / 8];
        for (int i = 0; i < n; i++) {
            L[i] = clamp_int(nearest(iscale * (x[i] - lo)), 0, nmax);
            sw += w[i];
            sl += w[i] * (float)L[i];
            sll += w[i] * (float)(L[i] * L[i]);
            sx += w[i] * x[i];
            slx += w[i] * (float)L[i] * x[i];
        }
        const float det = sw * sll - sl * sl;
        if (!(det > 0.0f)) continue;
        float s = (sw * slx - sl * sx) / det, off = (sll * sx - sl * slx) / det;
        if (off > 0.0f) { /* the format needs b <= 0: refit the scale alone */
            off = 0.0f;
            s = slx / sll;
        }
        if (!(s > 0.0f)) continue;
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            const float e = s * (float)L[i] + off - x[i];
            err += w[i] * e * e;
        }
        if (err < best_err) {
            best_err = err;
            best_s = s;
            *b = off;
        }
    }
    return best_s;
}

static void q4_k_from(const float *x, struct blk_q4_k *y) {
    float scale[8], neg_min[8], w[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum2 = 0.0f;
        for (int i = 0; i < 32; i++) sum2 += xs[i] * xs[i];
        const float av = sqrtf(sum2 / 32.0f);
        for (int i = 0; i < 32; i++) w[i] = av + fabsf(xs[i]);
        float b;
        scale[j] = fit_asymmetric(xs, w, 32, 15, &b);
        neg_min[j] = -b;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, neg_min[j]);
    }
    const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0.0f ? clamp_int(nearest(scale[j] / d), 0, 63) : 0);
        m[j] = (uint8_t)(dmin > 0.0f ? clamp_int(nearest(neg_min[j] / dmin), 0, 63) : 0);
    }
    /* 6-bit pairs: sub-blocks 0-3 in the low bits of bytes 0-7, 4-7 in
     * nibbles of bytes 8-11 with their top two bits above those of 0-3 */
    for (int j = 0; j < 4; j++) {
        y->scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        y->scales[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        y->scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
    y->d = tg_fp32_to_fp16(d);
    y->dmin = tg_fp32_to_fp16(dmin);
    const float dd = cpu_half_to_float(y->d), dm = cpu_half_to_float(y->dmin);
    uint8_t L[CPU_QK_K];
    for (int j = 0; j < 8; j++) {
        const float step = dd * (float)sc[j], off = dm * (float)m[j];
        for (int i = 0; i < 32; i++) {
            L[32 * j + i] = (uint8_t)(step > 0.0f ? clamp_int(nearest((x[32 * j + i] + off) / step), 0, 15) : 0);
        }
    }
    for (int c = 0; c < 4; c++) {
        for (int i = 0; i < 32; i++) y->qs[32 * c + i] = (uint8_t)(L[64 * c + i] | (L[64 * c + 32 + i] << 4));
    }
}

static void q4_k_to(const struct blk_q4_k *x, float *y) {
    const float d = cpu_half_to_float(x->d), dmin = cpu_half_to_float(x->dmin);
    int sc[8], m[8];
    cpu_q4_k_scales(x->scales, sc, m);
    for (int c = 0; c < 4; c++) {
        const float d0 = d * (float)sc[2 * c], o0 = dmin * (float)m[2 * c];
        const float d1 = d * (float)sc[2 * c + 1], o1 = dmin * (float)m[2 * c + 1];
        for (int i = 0; i < 32; i++) {
            y[64 * c + i] = d0 * (float)(x->qs[32 * c + i] & 0xF) - o0;
            y[64 * c + 32 + i] = d1 * (float)(x->qs[32 * c + i] >> 4) - o1;
        }
    }
}

/* ---- q6_k ---------------------------------------------------------------------- */

/* Fits x[n] ~ s * L with L in [-nmax, nmax - 1]; the signed largest value
 * maps near -nmax (the format's one extra negative level). */
static float fit_symmetric(const float *x, int n, int nmax) {
    float amax = 0.0f, vmax = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            vmax = x[i];
        }
    }
    if (amax == 0.0f) return 0.0f;
    float best_s = vmax / -(float)nmax, best_err = INFINITY;
    for (int step = -9; step <= 9; step++) {
        const float iscale = -((float)nmax + 0.1f * (float)step) / vmax;
        float sxl = 0, sll = 0;
        int L[16];
        for (int i = 0; i < n; i++) {
            L[i] = clamp_int(nearest(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sxl += w * x[i] * (float)L[i];
            sll += w * (float)(L[i] * L[i]);
        }
        if (!(sll > 0.0f)) continue;
        const float s = sxl / sll;
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            const float e = x[i] - s * (float)L[i];
            err += x[i] * x[i] * e * e;
        }
        if (err < best_err) {
            best_err = err;
            best_s = s;
        }
    }
    return best_s;
}

static void q6_k_from(const float *x, struct blk_q6_k *y) {
    float scale[16], max_scale = 0.0f, amax = 0.0f;
    for (int g = 0; g < 16; g++) {
        scale[g] = fit_symmetric(x + 16 * g, 16, 32);
        if (fabsf(scale[g]) > amax) {
            amax = fabsf(scale[g]);
            max_scale = scale[g];
        }
    }
    int8_t L[CPU_QK_K];
    if (amax == 0.0f) {
        memset(y, 0, sizeof *y);
        memset(L, 0, sizeof L);
    } else {
        const float iscale = -128.0f / max_scale;
        y->d = tg_fp32_to_fp16(1.0f / iscale);
        const float d = cpu_half_to_float(y->d);
        for (int g = 0; g < 16; g++) {
            y->scales[g] = (int8_t)clamp_int(nearest(iscale * scale[g]), -128, 127);
            const float step = d * (float)y->scales[g];
            for (int i = 0; i < 16; i++) {
                L[16 * g + i] = (int8_t)(step != 0.0f ? clamp_int(nearest(x[16 * g + i] / step), -32, 31) : 0);
            }
        }
    }
    /* each half of 128: element l, l+32, l+64, l+96 share ql[l], ql[l+32], qh[l] */
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
        const int8_t *q = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            const int q0 = q[l] + 32, q1 = q[l + 32] + 32, q2 = q[l + 64] + 32, q3 = q[l + 96] + 32;
            ql[l] = (uint8_t)((q0 & 0xF) | ((q2 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            qh[l] = (uint8_t)((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
        }
    }
}

static void q6_k_to(const struct blk_q6_k *x, float *y) {
    const float d = cpu_half_to_float(x->d);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        const int8_t *sc = x->scales + 8 * h;
        float *out = y + 128 * h;
        for (int l = 0; l < 32; l++) {
            const int g = l / 16;
            const int q0 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
            const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            out[l] = d * (float)sc[g] * (float)q0;
            out[l + 32] = d * (float)sc[g + 2] * (float)q1;
            out[l + 64] = d * (float)sc[g + 4] * (float)q2;
            out[l + 96] = d * (float)sc[g + 6] * (float)q3;
        }
    }
}

/* ---- q8_K: the activations of q4_k and q6_k dot products ---------------------------- */

void cpu_q8_k_from_f32(const float *src, struct blk_q8_k *dst, int64_t n) {
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        const float *x = src + b * CPU_QK_K;
        struct blk_q8_k *y = dst + b;
        float amax = 0.0f, vmax = 0.0f;
        for (int i = 0; i < CPU_QK_K; i++) {
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                vmax = x[i];
            }
        }
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        const float iscale = -127.0f / vmax;
        for (int i = 0; i < CPU_QK_K; i++) {
            const int v = nearest(iscale * x[i]);
            y->qs[i] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += y->qs[16 * g + i];
            y->bsums[g] = (int16_t)sum;
        }
        y->d = 1.0f / iscale;
    }
}

/* ---- entry points ------------------------------------------------------------------ */

void cpu_to_f32_k(enum tg_type type, const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        if (type == TG_TYPE_Q4_K) q4_k_to((const struct blk_q4_k *)src + b, dst + b * CPU_QK_K);
        else if (type == TG_TYPE_Q6_K) q6_k_to((const struct blk_q6_k *)src + b, dst + b * CPU_QK_K);
    }
}

void cpu_from_f32_k(enum tg_type type, const float *src, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        if (type == TG_TYPE_Q4_K) q4_k_from(src + b * CPU_QK_K, (struct blk_q4_k *)dst + b);
        else if (type == TG_TYPE_Q6_K) q6_k_from(src + b * CPU_QK_K, (struct blk_q6_k *)dst + b);
    }
}

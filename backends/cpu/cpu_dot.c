/* Dot products of a weight row with an activation row in the weight type's
 * activation format (cpu-quants.h), ggml's semantics: the quantized pairs
 * multiply integers, block by block, and only the block results are scaled
 * and summed in f32.
 *
 * The order of every float operation is fixed here (integer sums are exact
 * in any order; float sums run over blocks in order, or over 32 lanes
 * combined in a fixed tree), so a result depends neither on the thread count
 * nor on the SIMD path: cpu_dot_x86.c computes the same bits faster. */
#include "cpu-quants.h"

static inline float unhalf(uint16_t h) { return cpu_half_to_float(h); }

/* ---- float rows: element i goes to lane i % 32 --------------------------------------- */

#define LANES 32

static inline float lanes_sum(float acc[LANES]) {
    for (int w = LANES / 2; w > 0; w /= 2) {
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    }
    return acc[0];
}

#define FLOAT_DOT(name, elem_t, load)                                          \
    static float name(int64_t n, const void *vx, const void *vy) {             \
        const elem_t *x = vx, *y = vy;                                          \
        float acc[LANES] = {0};                                                 \
        int64_t i = 0;                                                          \
        for (; i + LANES <= n; i += LANES) {                                    \
            for (int j = 0; j < LANES; j++) acc[j] += load(x[i + j]) * load(y[i + j]); \
        }                                                                       \
        for (int j = 0; i + j < n; j++) acc[j] += load(x[i + j]) * load(y[i + j]); \
        return lanes_sum(acc);                                                  \
    }

static inline float as_is(float f) { return f; }
FLOAT_DOT(dot_f32, float, as_is)
FLOAT_DOT(dot_f16, uint16_t, unhalf)
FLOAT_DOT(dot_bf16, uint16_t, tg_bf16_to_fp32)

/* ---- 32-element blocks against q8_0 / q8_1 ------------------------------------------ */

/* q4_0 and q8_0 sum in eight lanes: lane l adds block b's products of
 * elements 4l..4l+3, times the block's scales (what one AVX2 register holds
 * per block), and the lanes meet in a fixed tree at the end. */
static inline float lanes8_sum(float acc[8]) {
    for (int w = 4; w > 0; w /= 2) {
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    }
    return acc[0];
}

static float dot_q4_0(int64_t n, const void *vx, const void *vy) {
    const struct blk_q4_0 *x = vx;
    const struct blk_q8_0 *y = vy;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((x[b].qs[j] & 0xF) - 8);
            q[j + 16] = (int8_t)((x[b].qs[j] >> 4) - 8);
        }
        const float d = unhalf(x[b].d) * unhalf(y[b].d);
        for (int l = 0; l < 8; l++) {
            int s = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++) s += q[k] * y[b].qs[k];
            acc[l] += (float)s * d;
        }
    }
    return lanes8_sum(acc);
}

static float dot_q4_1(int64_t n, const void *vx, const void *vy) {
    const struct blk_q4_1 *x = vx;
    const struct blk_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += (x[b].qs[j] & 0xF) * y[b].qs[j] + (x[b].qs[j] >> 4) * y[b].qs[j + 16];
        sum += (unhalf(x[b].d) * unhalf(y[b].d)) * (float)isum + unhalf(x[b].m) * unhalf(y[b].s);
    }
    return sum;
}

/* The 5-bit values of a q5 block, offset removed (for q5_0) or not (q5_1). */
static inline void q5_values(const uint8_t qs[16], const uint8_t qh4[4], int offset, int8_t q[32]) {
    uint32_t qh;
    memcpy(&qh, qh4, sizeof qh);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - offset);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - offset);
    }
}

static float dot_q5_0(int64_t n, const void *vx, const void *vy) {
    const struct blk_q5_0 *x = vx;
    const struct blk_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        int8_t q[32];
        q5_values(x[b].qs, x[b].qh, 16, q);
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += q[j] * y[b].qs[j];
        sum += (float)isum * (unhalf(x[b].d) * unhalf(y[b].d));
    }
    return sum;
}

static float dot_q5_1(int64_t n, const void *vx, const void *vy) {
    const struct blk_q5_1 *x = vx;
    const struct blk_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        int8_t q[32];
        q5_values(x[b].qs, x[b].qh, 0, q);
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += q[j] * y[b].qs[j];
        sum += (unhalf(x[b].d) * unhalf(y[b].d)) * (float)isum + unhalf(x[b].m) * unhalf(y[b].s);
    }
    return sum;
}

static float dot_q8_0(int64_t n, const void *vx, const void *vy) {
    const struct blk_q8_0 *x = vx, *y = vy;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        const float d = unhalf(x[b].d) * unhalf(y[b].d);
        for (int l = 0; l < 8; l++) {
            int s = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++) s += x[b].qs[k] * y[b].qs[k];
            acc[l] += (float)s * d;
        }
    }
    return lanes8_sum(acc);
}

/* ---- k-quants against q8_K ---------------------------------------------------------- */

static float dot_q4_k(int64_t n, const void *vx, const void *vy) {
    const struct blk_q4_k *x = vx;
    const struct blk_q8_k *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        int sc[8], m[8];
        cpu_q4_k_scales(x[b].scales, sc, m);
        int isum = 0, msum = 0;
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = x[b].qs + 32 * c;
            const int8_t *a = y[b].qs + 64 * c;
            int lo = 0, hi = 0;
            for (int i = 0; i < 32; i++) {
                lo += (q[i] & 0xF) * a[i];
                hi += (q[i] >> 4) * a[i + 32];
            }
            isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
        }
        for (int j = 0; j < 8; j++) msum += m[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        const float d = y[b].d * unhalf(x[b].d), dmin = y[b].d * unhalf(x[b].dmin);
        sum += d * (float)isum - dmin * (float)msum;
    }
    return sum;
}

static float dot_q6_k(int64_t n, const void *vx, const void *vy) {
    const struct blk_q6_k *x = vx;
    const struct blk_q8_k *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        int8_t q[CPU_QK_K];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
            int8_t *o = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                o[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int gsum = 0;
            for (int i = 0; i < 16; i++) gsum += q[16 * g + i] * y[b].qs[16 * g + i];
            isum += x[b].scales[g] * gsum;
        }
        sum += (y[b].d * unhalf(x[b].d)) * (float)isum;
    }
    return sum;
}

cpu_dot_fn cpu_dot_generic(enum tg_type w) {
    switch (w) {
    case TG_TYPE_F32: return dot_f32;
    case TG_TYPE_F16: return dot_f16;
    case TG_TYPE_BF16: return dot_bf16;
    case TG_TYPE_Q4_0: return dot_q4_0;
    case TG_TYPE_Q4_1: return dot_q4_1;
    case TG_TYPE_Q5_0: return dot_q5_0;
    case TG_TYPE_Q5_1: return dot_q5_1;
    case TG_TYPE_Q8_0: return dot_q8_0;
    case TG_TYPE_Q4_K: return dot_q4_k;
    case TG_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}

cpu_dot_fn cpu_dot_for(enum tg_type w) {
    cpu_dot_fn fast = cpu_dot_x86(w);
    return fast ? fast : cpu_dot_generic(w);
}

/* Conversions between f32 and every element type: plain types, and the
 * 32-element block formats (q4_0, q4_1, q5_0, q5_1, q8_0, q8_1) with ggml's
 * reference rounding.  The k-quants live in cpu_quants_k.c. */
#include "cpu-quants.h"

#include <float.h>
#include <math.h>

static inline uint16_t half(float f) { return tg_fp32_to_fp16(f); }

/* ggml's reference encoders round by truncating v + 0.5 (v + 8.5, v + 16.5
 * for the signed formats): the same rule, bit for bit.  v is NaN where the
 * input is (or inf * 0 where the block holds an infinity), and can be
 * infinite where the scale's inverse overflows (a block of values near
 * FLT_MIN); converting those is undefined, so they give 0: the byte ggml's
 * own conversion leaves on x86 (INT_MIN, whose low bits it stores). */
static inline int truncated(float v) { return fabsf(v) < 1e9f ? (int)truncf(v) : 0; }
static inline float unhalf(uint16_t h) { return cpu_half_to_float(h); }

/* The value whose magnitude is largest (the first such), and that magnitude. */
static float signed_absmax(const float *x, int n, float *amax) {
    float best = 0.0f, mag = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > mag) {
            mag = fabsf(x[j]);
            best = x[j];
        }
    }
    *amax = mag;
    return best;
}

static void min_max(const float *x, int n, float *lo, float *hi) {
    *lo = FLT_MAX;
    *hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *lo) *lo = x[j];
        if (x[j] > *hi) *hi = x[j];
    }
}

/* ---- q4_0 / q5_0: symmetric, the largest-magnitude value maps to -8 / -16 ------ */

static void q4_0_from(const float *x, struct blk_q4_0 *y) {
    float amax;
    const float d = signed_absmax(x, CPU_QK, &amax) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = half(d);
    for (int j = 0; j < 16; j++) {
        int lo = truncated(x[j] * id + 8.5f), hi = truncated(x[j + 16] * id + 8.5f);
        lo = lo < 15 ? lo : 15;
        hi = hi < 15 ? hi : 15;
        y->qs[j] = (uint8_t)(lo | (hi << 4));
    }
}

static void q4_0_to(const struct blk_q4_0 *x, float *y) {
    const float d = unhalf(x->d);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((x->qs[j] & 0xF) - 8) * d;
        y[j + 16] = (float)((x->qs[j] >> 4) - 8) * d;
    }
}

static void q5_0_from(const float *x, struct blk_q5_0 *y) {
    float amax;
    const float d = signed_absmax(x, CPU_QK, &amax) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = half(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int lo = truncated(x[j] * id + 16.5f), hi = truncated(x[j + 16] * id + 16.5f);
        lo = lo < 31 ? lo : 31;
        hi = hi < 31 ? hi : 31;
        y->qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
        qh |= (uint32_t)(lo >> 4) << j;
        qh |= (uint32_t)(hi >> 4) << (j + 16);
    }
    memcpy(y->qh, &qh, sizeof qh);
}

static void q5_0_to(const struct blk_q5_0 *x, float *y) {
    const float d = unhalf(x->d);
    uint32_t qh;
    memcpy(&qh, x->qh, sizeof qh);
    for (int j = 0; j < 16; j++) {
        int lo = (x->qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
        int hi = (x->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

/* ---- q4_1 / q5_1: min and step over the block's range ----------------------------- */

static void q4_1_from(const float *x, struct blk_q4_1 *y) {
    float lo, hi;
    min_max(x, CPU_QK, &lo, &hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = half(d);
    y->m = half(lo);
    for (int j = 0; j < 16; j++) {
        int a = truncated((x[j] - lo) * id + 0.5f), b = truncated((x[j + 16] - lo) * id + 0.5f);
        a = a < 15 ? a : 15;
        b = b < 15 ? b : 15;
        y->qs[j] = (uint8_t)(a | (b << 4));
    }
}

static void q4_1_to(const struct blk_q4_1 *x, float *y) {
    const float d = unhalf(x->d), m = unhalf(x->m);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(x->qs[j] & 0xF) * d + m;
        y[j + 16] = (float)(x->qs[j] >> 4) * d + m;
    }
}

static void q5_1_from(const float *x, struct blk_q5_1 *y) {
    float lo, hi;
    min_max(x, CPU_QK, &lo, &hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = half(d);
    y->m = half(lo);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const unsigned a = (unsigned)truncated((x[j] - lo) * id + 0.5f), b = (unsigned)truncated((x[j + 16] - lo) * id + 0.5f);
        y->qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
        qh |= ((a >> 4) & 1u) << j;
        qh |= ((b >> 4) & 1u) << (j + 16);
    }
    memcpy(y->qh, &qh, sizeof qh);
}

static void q5_1_to(const struct blk_q5_1 *x, float *y) {
    const float d = unhalf(x->d), m = unhalf(x->m);
    uint32_t qh;
    memcpy(&qh, x->qh, sizeof qh);
    for (int j = 0; j < 16; j++) {
        int lo = (x->qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
        int hi = (x->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)lo * d + m;
        y[j + 16] = (float)hi * d + m;
    }
}

/* ---- q8_0 / q8_1: symmetric over [-127, 127], rounded half to even --------------- */

/* v to the nearest integer, ties to even; NaN (a NaN input, or inf * 0) is
 * 0 and beyond +-127 (an infinite 127 / amax for a block of values near
 * FLT_MIN, whose d is 0 in fp16 anyway) the end: defined for every input. */
static inline int8_t q8_round(float v) {
    if (v != v) return 0;
    if (v >= 127.0f) return 127;
    if (v <= -127.0f) return -127;
    return (int8_t)lrintf(v);
}

/* As ggml's CPU backend computes it on x86 (quantize_row_q8_0 / _q8_1 with
 * AVX or AVX2, what its users run): x * (127 / amax) rounded ties to even.
 * ggml's scalar reference (its other CPUs) multiplies by 1 / (amax / 127)
 * and rounds ties away from zero: docs/upstream.md. */
static float q8_block(const float *x, int8_t *qs) {
    float amax;
    (void)signed_absmax(x, CPU_QK, &amax);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < CPU_QK; j++) qs[j] = q8_round(x[j] * id);
    return amax / 127.0f;
}

static void q8_0_from(const float *x, struct blk_q8_0 *y) { y->d = half(q8_block(x, y->qs)); }

static void q8_1_from(const float *x, struct blk_q8_1 *y) {
    const float d = q8_block(x, y->qs);
    int sum = 0;
    for (int j = 0; j < CPU_QK; j++) sum += y->qs[j];
    y->d = half(d);
    y->s = half((float)sum * d);
}

static void q8_0_to(const struct blk_q8_0 *x, float *y) {
    const float d = unhalf(x->d);
    for (int j = 0; j < CPU_QK; j++) y[j] = (float)x->qs[j] * d;
}

/* ---- every type ------------------------------------------------------------------ */

#define EACH_BLOCK(fn, qsrc) for (int64_t b = 0; b < n / CPU_QK; b++) fn((qsrc) + b, dst + b * CPU_QK)
#define EACH_BLOCK_FROM(BLK, fn) \
    for (int64_t b = 0; b < n / CPU_QK; b++) fn(src + b * CPU_QK, (struct BLK *)dst + b)

void cpu_to_f32(enum tg_type type, const void *src, float *dst, int64_t n) {
    cpu_f16_to_f32_fn fast_to;
    cpu_f32_to_f16_fn fast_from;
    switch (type) {
    case TG_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof *dst); break;
    case TG_TYPE_F16:
        if (cpu_f16_rows_x86(&fast_to, &fast_from)) fast_to(src, dst, n);
        else for (int64_t i = 0; i < n; i++) dst[i] = unhalf(((const uint16_t *)src)[i]);
        break;
    case TG_TYPE_BF16: for (int64_t i = 0; i < n; i++) dst[i] = tg_bf16_to_fp32(((const uint16_t *)src)[i]); break;
    case TG_TYPE_I32: for (int64_t i = 0; i < n; i++) dst[i] = (float)((const int32_t *)src)[i]; break;
    case TG_TYPE_I64: for (int64_t i = 0; i < n; i++) dst[i] = (float)((const int64_t *)src)[i]; break;
    case TG_TYPE_I8: for (int64_t i = 0; i < n; i++) dst[i] = (float)((const int8_t *)src)[i]; break;
    case TG_TYPE_Q4_0: EACH_BLOCK(q4_0_to, (const struct blk_q4_0 *)src); break;
    case TG_TYPE_Q4_1: EACH_BLOCK(q4_1_to, (const struct blk_q4_1 *)src); break;
    case TG_TYPE_Q5_0: EACH_BLOCK(q5_0_to, (const struct blk_q5_0 *)src); break;
    case TG_TYPE_Q5_1: EACH_BLOCK(q5_1_to, (const struct blk_q5_1 *)src); break;
    case TG_TYPE_Q8_0: EACH_BLOCK(q8_0_to, (const struct blk_q8_0 *)src); break;
    default: cpu_to_f32_k(type, src, dst, n); break;
    }
}

void cpu_from_f32(enum tg_type type, const float *src, void *dst, int64_t n) {
    cpu_f16_to_f32_fn fast_to;
    cpu_f32_to_f16_fn fast_from;
    switch (type) {
    case TG_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof *src); break;
    case TG_TYPE_F16:
        if (cpu_f16_rows_x86(&fast_to, &fast_from)) fast_from(src, dst, n);
        else for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = half(src[i]);
        break;
    case TG_TYPE_BF16: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = tg_fp32_to_bf16(src[i]); break;
    case TG_TYPE_I32: for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = cpu_f32_to_i32(src[i]); break;
    case TG_TYPE_I64: for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = cpu_f32_to_i64(src[i]); break;
    case TG_TYPE_I8: for (int64_t i = 0; i < n; i++) ((int8_t *)dst)[i] = cpu_f32_to_i8(src[i]); break;
    case TG_TYPE_Q4_0: EACH_BLOCK_FROM(blk_q4_0, q4_0_from); break;
    case TG_TYPE_Q4_1: EACH_BLOCK_FROM(blk_q4_1, q4_1_from); break;
    case TG_TYPE_Q5_0: EACH_BLOCK_FROM(blk_q5_0, q5_0_from); break;
    case TG_TYPE_Q5_1: EACH_BLOCK_FROM(blk_q5_1, q5_1_from); break;
    case TG_TYPE_Q8_0: EACH_BLOCK_FROM(blk_q8_0, q8_0_from); break;
    default: cpu_from_f32_k(type, src, dst, n); break;
    }
}

/* ---- activation formats ----------------------------------------------------------- */

enum cpu_act cpu_act_of(enum tg_type w) {
    switch (w) {
    case TG_TYPE_F32: return CPU_ACT_F32;
    case TG_TYPE_F16: return CPU_ACT_F16;
    case TG_TYPE_BF16: return CPU_ACT_BF16;
    case TG_TYPE_Q4_0: case TG_TYPE_Q5_0: case TG_TYPE_Q8_0: return CPU_ACT_Q8_0;
    case TG_TYPE_Q4_1: case TG_TYPE_Q5_1: return CPU_ACT_Q8_1;
    case TG_TYPE_Q4_K: case TG_TYPE_Q6_K: return CPU_ACT_Q8_K;
    default: return CPU_ACT_NONE;
    }
}

enum tg_type cpu_act_type(enum cpu_act a) {
    switch (a) {
    case CPU_ACT_F32: return TG_TYPE_F32;
    case CPU_ACT_F16: return TG_TYPE_F16;
    case CPU_ACT_BF16: return TG_TYPE_BF16;
    case CPU_ACT_Q8_0: return TG_TYPE_Q8_0;
    default: return TG_TYPE_COUNT;
    }
}

int64_t cpu_act_block(enum cpu_act a) {
    switch (a) {
    case CPU_ACT_Q8_0: case CPU_ACT_Q8_1: return CPU_QK;
    case CPU_ACT_Q8_K: return CPU_QK_K;
    default: return 1;
    }
}

size_t cpu_act_row_size(enum cpu_act a, int64_t n) {
    switch (a) {
    case CPU_ACT_F32: return (size_t)n * 4;
    case CPU_ACT_F16: case CPU_ACT_BF16: return (size_t)n * 2;
    case CPU_ACT_Q8_0: return (size_t)(n / CPU_QK) * sizeof(struct blk_q8_0);
    case CPU_ACT_Q8_1: return (size_t)(n / CPU_QK) * sizeof(struct blk_q8_1);
    case CPU_ACT_Q8_K: return (size_t)(n / CPU_QK_K) * sizeof(struct blk_q8_k);
    default: return 0;
    }
}

void cpu_act_from_f32(enum cpu_act a, const float *src, void *dst, int64_t n) {
    switch (a) {
    case CPU_ACT_Q8_1: EACH_BLOCK_FROM(blk_q8_1, q8_1_from); break;
    case CPU_ACT_Q8_K: cpu_q8_k_from_f32(src, dst, n); break;
    case CPU_ACT_NONE: break;
    default: cpu_from_f32(cpu_act_type(a), src, dst, n); break;
    }
}

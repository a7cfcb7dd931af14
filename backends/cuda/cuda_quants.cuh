/* The quantized block formats on the device: decoding one element of a row
 * of any quantized type, and encoding a block of 32 values (q4_0, q4_1,
 * q5_0, q5_1, q8_0) with the CPU's rounding step for step (explicit _rn
 * arithmetic: no fused multiply-add), so the bytes equal the CPU's.  The
 * layouts are ggml's (backends/cpu/cpu-quants.h describes each). */
#ifndef TG_CUDA_QUANTS_CUH
#define TG_CUDA_QUANTS_CUH

#include "cuda_internal.cuh"

static __device__ __forceinline__ float tg_cuda_half_at(const char *p) {
    unsigned short h = (unsigned short)((unsigned char)p[0] | ((unsigned char)p[1] << 8));
    return __half2float(__ushort_as_half(h));
}

static __device__ __forceinline__ void tg_cuda_put_half(char *p, float v) {
    const unsigned short h = __half_as_ushort(__float2half_rn(v));
    p[0] = (char)(h & 0xFF);
    p[1] = (char)(h >> 8);
}

static __device__ __forceinline__ uint32_t tg_cuda_u32_at(const char *p) {
    return (uint32_t)(unsigned char)p[0] | ((uint32_t)(unsigned char)p[1] << 8) | ((uint32_t)(unsigned char)p[2] << 16) |
           ((uint32_t)(unsigned char)p[3] << 24);
}

/* Element i of a row of quantized type (the row starts at its first block). */
static __device__ float tg_cuda_dequant(const char *row, int type, int64_t i) {
    const unsigned char *u;
    switch (type) {
    case TG_TYPE_Q4_0: {
        const char *b = row + (i / 32) * 18;
        const int j = (int)(i % 32);
        u = (const unsigned char *)b + 2;
        const int q = j < 16 ? (u[j] & 0xF) : (u[j - 16] >> 4);
        return (float)(q - 8) * tg_cuda_half_at(b);
    }
    case TG_TYPE_Q4_1: {
        const char *b = row + (i / 32) * 20;
        const int j = (int)(i % 32);
        u = (const unsigned char *)b + 4;
        const int q = j < 16 ? (u[j] & 0xF) : (u[j - 16] >> 4);
        return __fadd_rn(__fmul_rn((float)q, tg_cuda_half_at(b)), tg_cuda_half_at(b + 2));
    }
    case TG_TYPE_Q5_0:
    case TG_TYPE_Q5_1: {
        const bool with_min = type == TG_TYPE_Q5_1;
        const char *b = row + (i / 32) * (with_min ? 24 : 22);
        const int j = (int)(i % 32);
        const uint32_t qh = tg_cuda_u32_at(b + (with_min ? 4 : 2));
        u = (const unsigned char *)b + (with_min ? 8 : 6);
        const int lo = j < 16 ? (u[j] & 0xF) : (u[j - 16] >> 4);
        const int q = lo | (int)(((qh >> j) & 1u) << 4);
        if (!with_min) return (float)(q - 16) * tg_cuda_half_at(b);
        return __fadd_rn(__fmul_rn((float)q, tg_cuda_half_at(b)), tg_cuda_half_at(b + 2));
    }
    case TG_TYPE_Q8_0: {
        const char *b = row + (i / 32) * 34;
        return (float)(signed char)b[2 + i % 32] * tg_cuda_half_at(b);
    }
    case TG_TYPE_Q4_K: {
        const char *b = row + (i / 256) * 144;
        const int e = (int)(i % 256), j = e / 32, c = e / 64, l = e % 32;
        u = (const unsigned char *)b + 4; /* 12 scale bytes */
        int sc, m;
        if (j < 4) {
            sc = u[j] & 63;
            m = u[j + 4] & 63;
        } else {
            sc = (u[j + 4] & 0xF) | ((u[j - 4] >> 6) << 4);
            m = (u[j + 4] >> 4) | ((u[j] >> 6) << 4);
        }
        const unsigned char qb = (unsigned char)b[16 + 32 * c + l];
        const int q = (e % 64) < 32 ? (qb & 0xF) : (qb >> 4);
        const float d = __fmul_rn(tg_cuda_half_at(b), (float)sc), off = __fmul_rn(tg_cuda_half_at(b + 2), (float)m);
        return __fsub_rn(__fmul_rn(d, (float)q), off);
    }
    case TG_TYPE_Q6_K: {
        const char *b = row + (i / 256) * 210;
        const int e = (int)(i % 256), h = e / 128, r = (e % 128) / 32, l = e % 32;
        const unsigned char lo_byte = (unsigned char)b[64 * h + l + 32 * (r & 1)];
        const int lo = (r >> 1) ? lo_byte >> 4 : lo_byte & 0xF;
        const int hi = ((unsigned char)b[128 + 32 * h + l] >> (2 * r)) & 3;
        const float d = tg_cuda_half_at(b + 208);
        return __fmul_rn(__fmul_rn(d, (float)(signed char)b[192 + e / 16]), (float)((lo | hi << 4) - 32));
    }
    default:
        return 0.0f;
    }
}

/* Types the device encodes (cpy and set_rows into them). */
static inline bool tg_cuda_can_encode(enum tg_type t) {
    return t == TG_TYPE_Q4_0 || t == TG_TYPE_Q4_1 || t == TG_TYPE_Q5_0 || t == TG_TYPE_Q5_1 || t == TG_TYPE_Q8_0;
}

/* Encodes x[32] into the block at out (a type tg_cuda_can_encode accepts). */
static __device__ void tg_cuda_quantize_block(int type, const float *x, char *out) {
    if (type == TG_TYPE_Q8_0) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = __fdiv_rn(amax, 127.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        tg_cuda_put_half(out, d);
        for (int j = 0; j < 32; j++) out[2 + j] = (char)(signed char)roundf(__fmul_rn(x[j], id));
        return;
    }
    const bool with_min = type == TG_TYPE_Q4_1 || type == TG_TYPE_Q5_1;
    const bool five = type == TG_TYPE_Q5_0 || type == TG_TYPE_Q5_1;
    float d, base = 0.0f;
    if (with_min) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < 32; j++) {
            lo = fminf(lo, x[j]);
            hi = fmaxf(hi, x[j]);
        }
        d = __fdiv_rn(__fsub_rn(hi, lo), five ? 31.0f : 15.0f);
        base = lo;
        tg_cuda_put_half(out + 2, lo);
    } else {
        float amax = 0.0f, vmax = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                vmax = x[j];
            }
        }
        d = __fdiv_rn(vmax, five ? -16.0f : -8.0f);
    }
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    tg_cuda_put_half(out, d);
    const float add = with_min ? 0.5f : (five ? 16.5f : 8.5f);
    const int top = five ? 31 : 15;
    char *qs = out + (with_min ? 4 : 2) + (five ? 4 : 0);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const float v0 = __fadd_rn(__fmul_rn(with_min ? __fsub_rn(x[j], base) : x[j], id), add);
        const float v1 = __fadd_rn(__fmul_rn(with_min ? __fsub_rn(x[j + 16], base) : x[j + 16], id), add);
        int a = with_min && five ? (int)(unsigned char)v0 : (int)(signed char)v0;
        int b = with_min && five ? (int)(unsigned char)v1 : (int)(signed char)v1;
        if (!(with_min && five)) {
            a = a < top ? a : top;
            b = b < top ? b : top;
        }
        qs[j] = (char)((a & 0xF) | ((b & 0xF) << 4));
        qh |= (uint32_t)((a >> 4) & 1) << j;
        qh |= (uint32_t)((b >> 4) & 1) << (j + 16);
    }
    if (five) {
        char *h = out + (with_min ? 4 : 2);
        for (int k = 0; k < 4; k++) h[k] = (char)((qh >> (8 * k)) & 0xFF);
    }
}

#endif

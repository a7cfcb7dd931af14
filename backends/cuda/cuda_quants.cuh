/* The quantized block formats on the device: decoding one element of a row
 * of any quantized type (explicit _rn arithmetic: no fused multiply-add, so
 * the values equal the CPU's).  The layouts are ggml's
 * (backends/cpu/cpu-quants.h describes each). */
#ifndef TG_CUDA_QUANTS_CUH
#define TG_CUDA_QUANTS_CUH

#include "cuda_internal.cuh"

static __device__ __forceinline__ float tg_cuda_half_at(const char *p) {
    unsigned short h = (unsigned short)((unsigned char)p[0] | ((unsigned char)p[1] << 8));
    return __half2float(__ushort_as_half(h));
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

#endif

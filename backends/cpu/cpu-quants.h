/* Element formats of the CPU backend: ggml's quantized block layouts (byte for
 * byte, so weights written by ggml load unchanged), every type's conversion
 * to and from f32, and the activation formats that mul_mat converts its
 * second operand into before the dot products (ggml's vec_dot_type: q8_0 for
 * q4_0/q5_0/q8_0 weights, q8_1 for q4_1/q5_1, q8_K for the k-quants, the
 * weight's own type for f32/f16/bf16). */
#ifndef TG_CPU_QUANTS_H
#define TG_CPU_QUANTS_H

#include "tg.h"

#include <stdint.h>
#include <string.h>

#define CPU_QK 32    /* elements per block of q4_0 ... q8_1 */
#define CPU_QK_K 256 /* elements per super-block of q4_k, q6_k, q8_K */

/* d, m, s: fp16 bit patterns.  A value is d * q (+ m) per block. */
struct blk_q4_0 { uint16_t d; uint8_t qs[16]; };                  /* q in [-8, 7], two per byte */
struct blk_q4_1 { uint16_t d, m; uint8_t qs[16]; };               /* q in [0, 15] */
struct blk_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };   /* q in [-16, 15], 5th bits in qh */
struct blk_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct blk_q8_0 { uint16_t d; int8_t qs[32]; };
struct blk_q8_1 { uint16_t d, s; int8_t qs[32]; };                /* s = d * sum(qs) */
/* 8 sub-blocks of 32: value = d * sc_j * q - dmin * m_j, sc_j and m_j 6 bits each. */
struct blk_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
/* 16 sub-blocks of 16: value = d * sc_j * (q - 32), q 6 bits (4 in ql, 2 in qh). */
struct blk_q6_k { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
/* Activations for the k-quants: value = d * q; bsums: sums of 16 q's. */
struct blk_q8_k { float d; int8_t qs[256]; int16_t bsums[16]; };

/* The 6-bit scale and min of q4_k's 8 sub-blocks, from its 12 bytes:
 * sub-blocks 0-3 in the low bits of bytes 0-7, 4-7 in the nibbles of bytes
 * 8-11 with their top two bits above those of 0-3. */
static inline void cpu_q4_k_scales(const uint8_t s[12], int sc[8], int m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0xF) | ((s[j] >> 6) << 4);
        m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
}

/* fp16 bits to f32 without branches (exact for every number; a NaN stays a
 * NaN, signalling ones come back quiet as from F16C): the per-block scale
 * decode of the dot products. */
static inline float cpu_half_to_float(uint16_t h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w; /* exponent and mantissa, sign shifted out */
    /* normal (and inf/nan): move the fields into f32 place, rebias by 2^-112 */
    uint32_t bits = (two_w >> 4) + (0xE0u << 23);
    float normal;
    memcpy(&normal, &bits, sizeof normal);
    normal *= 0x1.0p-112f;
    /* subnormal: the mantissa as the low bits of 0.5's pattern, minus 0.5 */
    bits = (two_w >> 17) | (126u << 23);
    float subnormal;
    memcpy(&subnormal, &bits, sizeof subnormal);
    subnormal -= 0.5f;
    uint32_t out;
    const float mag = two_w < (1u << 27) ? subnormal : normal;
    memcpy(&out, &mag, sizeof out);
    out |= sign;
    float f;
    memcpy(&f, &out, sizeof f);
    return f;
}

/* Float to integer, defined for every input: C leaves a value outside the
 * target's range (and NaN) undefined; these give what x86's truncating
 * conversion gives, the lowest value (INT32_MIN, INT64_MIN), which is what
 * ggml's CPU gives there; i8 keeps the low byte of the i32. */
static inline int32_t cpu_f32_to_i32(float v) {
    return v >= -2147483648.0f && v < 2147483648.0f ? (int32_t)v : INT32_MIN;
}
static inline int64_t cpu_f32_to_i64(float v) {
    return v >= -9223372036854775808.0f && v < 9223372036854775808.0f ? (int64_t)v : INT64_MIN;
}
static inline int8_t cpu_f32_to_i8(float v) { return (int8_t)(uint8_t)((uint32_t)cpu_f32_to_i32(v) & 0xffu); }

/* n contiguous elements (a multiple of the block size) of type to f32 and back.
 * From f32: ggml's reference rounding for the 32-element types; the k-quants
 * fit scales by least squares (same format, ggml's error or lower). */
void cpu_to_f32(enum tg_type type, const void *src, float *dst, int64_t n);
void cpu_from_f32(enum tg_type type, const float *src, void *dst, int64_t n);
/* The k-quant part of the two (cpu_quants_k.c), and q8_K from f32. */
void cpu_to_f32_k(enum tg_type type, const void *src, float *dst, int64_t n);
void cpu_from_f32_k(enum tg_type type, const float *src, void *dst, int64_t n);
void cpu_q8_k_from_f32(const float *src, struct blk_q8_k *dst, int64_t n);
/* The block (or element) of type that holds element i of a row starting at row. */
static inline const void *cpu_block_of(enum tg_type type, const void *row, int64_t i) {
    return (const uint8_t *)row + (size_t)(i / tg_blck_size(type)) * tg_type_size(type);
}

/* ---- activation formats and dot products ---------------------------------- */

enum cpu_act { CPU_ACT_F32, CPU_ACT_F16, CPU_ACT_BF16, CPU_ACT_Q8_0, CPU_ACT_Q8_1, CPU_ACT_Q8_K, CPU_ACT_NONE };

/* The format mul_mat converts the second operand into for weights of type w
 * (CPU_ACT_NONE: no dot product for w). */
enum cpu_act cpu_act_of(enum tg_type w);
/* The tg type whose bytes an activation row is, where one exists (f32, f16,
 * bf16, q8_0), else TG_TYPE_COUNT: a source already in it is used as is. */
enum tg_type cpu_act_type(enum cpu_act a);
size_t cpu_act_row_size(enum cpu_act a, int64_t n);
int64_t cpu_act_block(enum cpu_act a);
void cpu_act_from_f32(enum cpu_act a, const float *src, void *dst, int64_t n);

/* Dot product of a weight row of type w and an activation row in cpu_act_of(w)
 * (whose q8 values lie in [-127, 127], as cpu_act_from_f32 writes them), n
 * elements.  Integer sums within a block are exact; float sums run in an
 * order fixed by cpu_dot.c, so the result depends on neither the thread
 * count nor the SIMD path. */
typedef float (*cpu_dot_fn)(int64_t n, const void *wrow, const void *arow);
/* The fastest path for w on this CPU; NULL when w has no dot product. */
cpu_dot_fn cpu_dot_for(enum tg_type w);
/* The portable path (tests hold the fast paths to its bits). */
cpu_dot_fn cpu_dot_generic(enum tg_type w);
/* The x86 AVX2 path (cpu_dot_x86.c), NULL where w has none or the CPU lacks AVX2/F16C. */
cpu_dot_fn cpu_dot_x86(enum tg_type w);
/* F16C row conversions (the bits of cpu_half_to_float / tg_fp32_to_fp16);
 * false where the CPU has none.  cpu_to_f32 and cpu_from_f32 use them. */
typedef void (*cpu_f16_to_f32_fn)(const void *src, float *dst, int64_t n);
typedef void (*cpu_f32_to_f16_fn)(const float *src, void *dst, int64_t n);
bool cpu_f16_rows_x86(cpu_f16_to_f32_fn *to_f32, cpu_f32_to_f16_fn *from_f32);

#endif

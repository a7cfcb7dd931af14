/* Element types: names, block sizes, and the fp16/bf16 conversions. */
#include "tg-impl.h"

#include <string.h>

const struct tg_type_traits tg_type_traits_table[TG_TYPE_COUNT] = {
    [TG_TYPE_F32] = {"f32", 1, 4, false},    [TG_TYPE_F16] = {"f16", 1, 2, false},
    [TG_TYPE_BF16] = {"bf16", 1, 2, false},  [TG_TYPE_I32] = {"i32", 1, 4, false},
    [TG_TYPE_I64] = {"i64", 1, 8, false},    [TG_TYPE_I8] = {"i8", 1, 1, false},
    [TG_TYPE_Q4_0] = {"q4_0", 32, 18, true}, [TG_TYPE_Q4_1] = {"q4_1", 32, 20, true},
    [TG_TYPE_Q5_0] = {"q5_0", 32, 22, true}, [TG_TYPE_Q5_1] = {"q5_1", 32, 24, true},
    [TG_TYPE_Q8_0] = {"q8_0", 32, 34, true}, [TG_TYPE_Q4_K] = {"q4_k", 256, 144, true},
    [TG_TYPE_Q6_K] = {"q6_k", 256, 210, true},
};

const char *tg_type_name(enum tg_type t) {
    return (unsigned)t < TG_TYPE_COUNT ? tg_type_traits_table[t].name : "?";
}

enum tg_type tg_type_from_name(const char *name) {
    for (int t = 0; t < TG_TYPE_COUNT; t++) {
        if (strcmp(tg_type_traits_table[t].name, name) == 0) return (enum tg_type)t;
    }
    return TG_TYPE_COUNT;
}

size_t tg_type_size(enum tg_type t) { return (unsigned)t < TG_TYPE_COUNT ? tg_type_traits_table[t].block_bytes : 0; }
int64_t tg_blck_size(enum tg_type t) { return (unsigned)t < TG_TYPE_COUNT ? tg_type_traits_table[t].block_elems : 1; }
bool tg_type_is_quantized(enum tg_type t) { return (unsigned)t < TG_TYPE_COUNT && tg_type_traits_table[t].quantized; }

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t tg_fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xffu) { /* inf or nan: keep nan quiet */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    }
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (e <= 0) {
        /* subnormal half (or zero): shift the implicit-one mantissa into place */
        if (e < -10) return sign;
        uint32_t m = mant | 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into exp: correct */
    return (uint16_t)(sign | half);
}

float tg_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) return bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return bits_f32(sign);
        /* subnormal: value = mant * 2^-24 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t tg_fp32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float tg_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* AVX2 paths of the hot dot products (f32, f16, q4_0, q8_0, q4_k, q6_k) and
 * of fp16 row conversion, chosen at run time when the CPU has AVX2 and F16C.  Each computes the bits
 * of its portable twin in cpu_dot.c: integer block sums (exact in any
 * order), then the same float operations in the same order (no fused
 * multiply-add: products and sums round separately, as there). */
#include "cpu-quants.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

#define AVX2 __attribute__((target("avx2,f16c")))

static inline float unhalf(uint16_t h) { return cpu_half_to_float(h); }

AVX2 static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Eight int32 partial sums of x[i] * y[i] over 32 int8 pairs (x in
 * [-128, 127], y in [-127, 127]: the pair sums of maddubs cannot saturate). */
AVX2 static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* ---- float rows: four vectors of eight lanes are cpu_dot.c's 32 lanes ----------------- */

AVX2 static inline __m256 load_f32(const float *p) { return _mm256_loadu_ps(p); }
AVX2 static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* cpu_dot.c's tree over 32 lanes, step for step: lanes j += j + 16, then
 * j += j + 8, j += j + 4, j += j + 2, j += j + 1. */
AVX2 static inline float lanes_sum(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

#define FLOAT_DOT_AVX2(name, elem_t, load, load1)                                        \
    AVX2 static float name(int64_t n, const void *vx, const void *vy) {                  \
        const elem_t *x = vx, *y = vy;                                                    \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                       \
        int64_t i = 0;                                                                    \
        for (; i + 32 <= n; i += 32) {                                                    \
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(load(x + i), load(y + i)));              \
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(load(x + i + 8), load(y + i + 8)));      \
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(load(x + i + 16), load(y + i + 16)));    \
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(load(x + i + 24), load(y + i + 24)));    \
        }                                                                                 \
        if (i < n) { /* the tail, into lanes 0.. as there */                              \
            float acc[32];                                                                \
            _mm256_storeu_ps(acc, a0);                                                    \
            _mm256_storeu_ps(acc + 8, a1);                                                \
            _mm256_storeu_ps(acc + 16, a2);                                               \
            _mm256_storeu_ps(acc + 24, a3);                                               \
            for (int j = 0; i + j < n; j++) acc[j] += load1(x[i + j]) * load1(y[i + j]);  \
            a0 = _mm256_loadu_ps(acc);                                                    \
            a1 = _mm256_loadu_ps(acc + 8);                                                \
            a2 = _mm256_loadu_ps(acc + 16);                                               \
            a3 = _mm256_loadu_ps(acc + 24);                                               \
        }                                                                                 \
        return lanes_sum(a0, a1, a2, a3);                                                 \
    }

static inline float as_is(float f) { return f; }
FLOAT_DOT_AVX2(dot_f32, float, load_f32, as_is)
FLOAT_DOT_AVX2(dot_f16, uint16_t, load_f16, unhalf)

/* ---- quantized rows ------------------------------------------------------------------- */

/* cpu_dot.c's eight lanes: a block's int32 partial sums (lane l: elements
 * 4l..4l+3, as maddubs + madd leave them) times its scales, added per lane. */
AVX2 static inline float lanes8_sum(__m256 acc) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX2 static float dot_q4_0(int64_t n, const void *vx, const void *vy) {
    const struct blk_q4_0 *x = vx;
    const struct blk_q8_0 *y = vy;
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), _mm_and_si128(raw, low4));
        q = _mm256_sub_epi8(q, eight);
        const __m256i sums = dot_i8(q, _mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m256 d = _mm256_set1_ps(unhalf(x[b].d) * unhalf(y[b].d));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d));
    }
    return lanes8_sum(acc);
}

AVX2 static float dot_q8_0(int64_t n, const void *vx, const void *vy) {
    const struct blk_q8_0 *x = vx, *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / CPU_QK; b++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const __m256i sums = dot_i8(q, _mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m256 d = _mm256_set1_ps(unhalf(x[b].d) * unhalf(y[b].d));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d));
    }
    return lanes8_sum(acc);
}

/* Sixteen int16 lanes: the first eight weighted by s0, the last eight by s1. */
AVX2 static inline __m256i two_scales(int s0, int s1) {
    return _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
}

AVX2 static float dot_q4_k(int64_t n, const void *vx, const void *vy) {
    const struct blk_q4_k *x = vx;
    const struct blk_q8_k *y = vy;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        int sc[8], m[8];
        cpu_q4_k_scales(x[b].scales, sc, m);
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
            const __m256i ylo = _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c));
            const __m256i yhi = _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c + 32));
            /* weights are 0..15: unsigned as maddubs wants them */
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16((short)sc[2 * c])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16((short)sc[2 * c + 1])));
        }
        const int isum = hsum_i32(acc);
        int msum = 0;
        for (int j = 0; j < 8; j++) msum += m[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        const float d = y[b].d * unhalf(x[b].d), dmin = y[b].d * unhalf(x[b].dmin);
        sum += d * (float)isum - dmin * (float)msum;
    }
    return sum;
}

AVX2 static float dot_q6_k(int64_t n, const void *vx, const void *vy) {
    const struct blk_q6_k *x = vx;
    const struct blk_q8_k *y = vy;
    const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03), bias = _mm256_set1_epi8(32);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / CPU_QK_K; b++) {
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
            const int8_t *sc = x[b].scales + 8 * h, *a = y[b].qs + 128 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_slli_epi16(_mm256_and_si256(hb, low2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), low2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), low2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), low2), 4));
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_sub_epi8(q[k], bias);
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(a + 32 * k));
                const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yv, v));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, two_scales(sc[2 * k], sc[2 * k + 1])));
            }
        }
        sum += (y[b].d * unhalf(x[b].d)) * (float)hsum_i32(acc);
    }
    return sum;
}

/* ---- fp16 rows (F16C): the conversions' bits, eight at a time ------------------------ */

AVX2 static void f16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) dst[i] = cpu_half_to_float(h[i]);
}

AVX2 static void f32_to_f16(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) h[i] = tg_fp32_to_fp16(src[i]);
}

/* AVX2 (with the OS's support, as the runtime checks it) and F16C (CPUID
 * leaf 1, ECX bit 29: some compilers' builtin does not know the name).
 * Asked once: CPUID is slow (a trap under a hypervisor), and row
 * conversions ask per row. */
static bool has_avx2_f16c(void) {
    static atomic_int known = -1; /* racing first callers store the same answer */
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
        atomic_store_explicit(&known, v, memory_order_relaxed);
    }
    return v != 0;
}

bool cpu_f16_rows_x86(cpu_f16_to_f32_fn *to_f32, cpu_f32_to_f16_fn *from_f32) {
    if (!has_avx2_f16c()) return false;
    *to_f32 = f16_to_f32;
    *from_f32 = f32_to_f16;
    return true;
}

cpu_dot_fn cpu_dot_x86(enum tg_type w) {
    if (!has_avx2_f16c()) return NULL;
    switch (w) {
    case TG_TYPE_F32: return dot_f32;
    case TG_TYPE_F16: return dot_f16;
    case TG_TYPE_Q4_0: return dot_q4_0;
    case TG_TYPE_Q8_0: return dot_q8_0;
    case TG_TYPE_Q4_K: return dot_q4_k;
    case TG_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}

#else

cpu_dot_fn cpu_dot_x86(enum tg_type w) {
    (void)w;
    return NULL;
}

bool cpu_f16_rows_x86(cpu_f16_to_f32_fn *to_f32, cpu_f32_to_f16_fn *from_f32) {
    (void)to_f32;
    (void)from_f32;
    return false;
}

#endif

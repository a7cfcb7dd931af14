/* The quantized formats of the CPU backend against values derived by hand
 * from ggml's block layouts (written out here per element, independently of
 * the kernels' loops), exact round trips of values on each format's grid,
 * hand-computed dot products, the fp16 decode against the reference
 * conversion for all 65536 inputs, and every fast (SIMD) dot product against
 * the portable one, bit for bit. */
#include "cpu/cpu-quants.h"
#include "tg_test.h"
#include "tg_test_rng.h"

static uint16_t h(float f) { return tg_fp32_to_fp16(f); }

/* ---- decoding hand-built blocks ---------------------------------------------------------- */

static void check_decode(const char *what, enum tg_type type, const void *block, const float *want, int n) {
    float got[CPU_QK_K];
    cpu_to_f32(type, block, got, n);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += got[i] != want[i];
    CHECK_MSG(bad == 0, "%s: %d of %d values differ from the hand-derived ones", what, bad, n);
}

static void test_decode_32(void) {
    float want[32];
    /* q4_0: nibble j low = element j, high = element j + 16, value (q - 8) * d */
    struct blk_q4_0 a = {.d = h(0.5f)};
    for (int j = 0; j < 16; j++) a.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    for (int j = 0; j < 16; j++) {
        want[j] = (float)(j - 8) * 0.5f;
        want[j + 16] = (float)(7 - j) * 0.5f;
    }
    check_decode("q4_0", TG_TYPE_Q4_0, &a, want, 32);

    /* q4_1: q * d + m */
    struct blk_q4_1 b = {.d = h(0.25f), .m = h(-1.0f)};
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)((j % 4) | ((j / 4) << 4));
    for (int j = 0; j < 16; j++) {
        want[j] = (float)(j % 4) * 0.25f - 1.0f;
        want[j + 16] = (float)(j / 4) * 0.25f - 1.0f;
    }
    check_decode("q4_1", TG_TYPE_Q4_1, &b, want, 32);

    /* q5_0: bit j of the little-endian qh word is element j's 5th bit; (q - 16) * d */
    struct blk_q5_0 c = {.d = h(2.0f), .qh = {0x01, 0x80, 0x00, 0xF0}};
    for (int j = 0; j < 16; j++) c.qs[j] = (uint8_t)(0xF0 | (j & 0xF));
    const uint32_t qh = 0xF0008001u;
    for (int j = 0; j < 16; j++) {
        want[j] = (float)((int)((j & 0xF) | (((qh >> j) & 1) << 4)) - 16) * 2.0f;
        want[j + 16] = (float)((int)(0xF | (((qh >> (j + 16)) & 1) << 4)) - 16) * 2.0f;
    }
    /* by hand: element 0 has its high bit (q 16 -> 0), element 15 too (q 31 -> 30), 28..31 too (q 31 -> 30) */
    CHECK(want[0] == 0.0f && want[15] == 30.0f && want[1] == -30.0f && want[16] == -2.0f && want[31] == 30.0f);
    check_decode("q5_0", TG_TYPE_Q5_0, &c, want, 32);

    /* q5_1: q * d + m, same bit layout */
    struct blk_q5_1 d5 = {.d = h(1.0f), .m = h(0.5f), .qh = {0xFF, 0xFF, 0xFF, 0xFF}};
    for (int j = 0; j < 16; j++) d5.qs[j] = (uint8_t)(j | (j << 4));
    for (int j = 0; j < 16; j++) want[j] = want[j + 16] = (float)(16 + j) + 0.5f;
    check_decode("q5_1", TG_TYPE_Q5_1, &d5, want, 32);

    /* q8_0: q * d */
    struct blk_q8_0 e = {.d = h(0.125f)};
    for (int j = 0; j < 32; j++) e.qs[j] = (int8_t)(j * 8 - 127);
    for (int j = 0; j < 32; j++) want[j] = (float)(j * 8 - 127) * 0.125f;
    check_decode("q8_0", TG_TYPE_Q8_0, &e, want, 32);
}

static void test_decode_k(void) {
    static float want[CPU_QK_K];
    /* q4_k: sub-block j (32 elements) has 6-bit scale sc_j and min m_j:
     * j < 4: sc = scales[j] & 63, m = scales[j + 4] & 63;
     * j >= 4: sc = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4,
     *         m  = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4.
     * Element 64c + i (i < 32) is the low nibble of qs[32c + i], 64c + 32 + i the high. */
    struct blk_q4_k k4 = {.d = h(0.5f), .dmin = h(0.25f)};
    const int sc[8] = {1, 2, 3, 63, 17, 40, 5, 33}, mn[8] = {0, 1, 62, 4, 20, 7, 48, 9};
    for (int j = 0; j < 4; j++) {
        k4.scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        k4.scales[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        k4.scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int i = 0; i < 128; i++) k4.qs[i] = (uint8_t)(i * 37 + 11);
    for (int e = 0; e < CPU_QK_K; e++) {
        const int c = e / 64, i = e % 32, high = (e % 64) >= 32, j = e / 32;
        const int q = high ? k4.qs[32 * c + i] >> 4 : k4.qs[32 * c + i] & 15;
        want[e] = 0.5f * (float)sc[j] * (float)q - 0.25f * (float)mn[j];
    }
    check_decode("q4_k", TG_TYPE_Q4_K, &k4, want, CPU_QK_K);

    /* q6_k: element e of half hh = e / 128, quarter r = (e % 128) / 32, l = e % 32:
     * low 4 bits from ql[64hh + l + 32 (r & 1)], the nibble r >> 1; high 2 bits
     * from qh[32hh + l] at bit 2r; value d * scales[e / 16] * (q - 32). */
    struct blk_q6_k k6 = {.d = h(0.125f)};
    for (int i = 0; i < 128; i++) k6.ql[i] = (uint8_t)(i * 29 + 3);
    for (int i = 0; i < 64; i++) k6.qh[i] = (uint8_t)(i * 53 + 7);
    for (int g = 0; g < 16; g++) k6.scales[g] = (int8_t)(g * 17 - 128);
    for (int e = 0; e < CPU_QK_K; e++) {
        const int hh = e / 128, r = (e % 128) / 32, l = e % 32;
        const uint8_t lo_byte = k6.ql[64 * hh + l + 32 * (r & 1)];
        const int lo = (r >> 1) ? lo_byte >> 4 : lo_byte & 15;
        const int hi = (k6.qh[32 * hh + l] >> (2 * r)) & 3;
        want[e] = 0.125f * (float)k6.scales[e / 16] * (float)((lo | hi << 4) - 32);
    }
    check_decode("q6_k", TG_TYPE_Q6_K, &k6, want, CPU_QK_K);
}

/* ---- encoding -------------------------------------------------------------------------- */

/* Values on a format's grid (d a power of two, the extreme present) encode
 * to exactly those values; for q4_0 also to the hand-derived bytes. */
static void test_encode_grid(void) {
    float x[32], y[32];
    for (int j = 0; j < 32; j++) x[j] = (float)((j * 5) % 16 - 8) * 2.0f; /* q4_0: -16 present, d = 2 */
    struct blk_q4_0 a;
    cpu_from_f32(TG_TYPE_Q4_0, x, &a, 32);
    CHECK(a.d == h(2.0f));
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += a.qs[j] != (uint8_t)(((j * 5) % 16) | ((((j + 16) * 5) % 16) << 4));
    CHECK_MSG(bad == 0, "q4_0 bytes: %d differ", bad);
    const enum tg_type types[] = {TG_TYPE_Q4_0, TG_TYPE_Q4_1, TG_TYPE_Q5_0, TG_TYPE_Q5_1, TG_TYPE_Q8_0};
    const int levels[] = {16, 16, 32, 32, 255};
    for (int t = 0; t < 5; t++) {
        const int n = levels[t];
        for (int j = 0; j < 32; j++) {
            int q = (j * 7) % n;
            if (j == 0) q = 0;     /* the negative extreme */
            if (j == 1) q = n - 1; /* and the positive one */
            x[j] = t == 4 ? (float)(q - 127) * 0.5f : t % 2 == 1 ? (float)q * 0.25f - 3.0f : (float)(q - n / 2) * 0.5f;
        }
        if (t == 0 || t == 2) x[1] = 0.0f; /* symmetric types: the largest magnitude must be the negative end */
        uint8_t blk[64];
        cpu_from_f32(types[t], x, blk, 32);
        cpu_to_f32(types[t], blk, y, 32);
        bad = 0;
        for (int j = 0; j < 32; j++) bad += y[j] != x[j];
        CHECK_MSG(bad == 0, "%s grid round trip: %d of 32 differ", tg_type_name(types[t]), bad);
    }
}

/* q8_0 and q8_1 round ties to even, as ggml's CPU backend does on x86
 * (AVX, _mm256_round_ps): amax 127 makes the scale 1 and every x.5 a tie.
 * By hand: 0.5 -> 0, -0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2, 3.5 -> 4
 * (half away from zero gave 1, -1, 2, 3, -3, 4). */
static void test_encode_q8_ties(void) {
    const float v[8] = {127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.5f, 100.0f};
    const int8_t want[8] = {127, 0, 0, 2, 2, -2, 4, 100};
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = v[j % 8];
    struct blk_q8_0 q;
    cpu_from_f32(TG_TYPE_Q8_0, x, &q, 32);
    struct blk_q8_1 a;
    cpu_act_from_f32(CPU_ACT_Q8_1, x, &a, 32);
    int bad = 0, sum = 0;
    for (int j = 0; j < 32; j++) {
        bad += q.qs[j] != want[j % 8] || a.qs[j] != want[j % 8];
        sum += want[j % 8];
    }
    CHECK_MSG(bad == 0 && q.d == h(1.0f) && a.d == h(1.0f), "q8 ties: %d of 64 values differ, d %04x %04x", bad,
              (unsigned)q.d, (unsigned)a.d);
    CHECK_MSG(a.s == h((float)sum), "q8_1 s %04x, want %04x (d * %d)", (unsigned)a.s, (unsigned)h((float)sum), sum);
}

/* Values whose conversion to an integer would be undefined encode to stated
 * bytes: a NaN element (q4_0 ... q8_0) takes code 0 and leaves the scale
 * to the others; a block of values near FLT_MIN, whose inverse scale
 * overflows to infinity (q4_0: d = -1.25e-39 is 0 in fp16), takes code 0
 * throughout (the byte ggml's x86 conversion leaves).  With clang's
 * -fsanitize=undefined (float-cast-overflow) the old (int)truncf(NaN) stops
 * this test. */
static void test_encode_undefined(void) {
    float x[32], x0[32], y[32], y0[32];
    for (int j = 0; j < 32; j++) x[j] = x0[j] = (float)(j - 16) * 0.25f; /* -4 at 0 sets every scale */
    x[5] = NAN;
    x0[5] = 0.0f;
    const enum tg_type types[] = {TG_TYPE_Q4_0, TG_TYPE_Q4_1, TG_TYPE_Q5_0, TG_TYPE_Q5_1, TG_TYPE_Q8_0};
    /* code 0 by hand: q4_0 (0 - 8) * 0.5, q4_1 m = -4, q5_0 (0 - 16) * 0.25, q5_1 m = -4, q8_0 0 */
    const float code0[] = {-4.0f, -4.0f, -4.0f, -4.0f, 0.0f};
    for (int t = 0; t < 5; t++) {
        uint8_t blk[64];
        cpu_from_f32(types[t], x, blk, 32);
        cpu_to_f32(types[t], blk, y, 32);
        cpu_from_f32(types[t], x0, blk, 32);
        cpu_to_f32(types[t], blk, y0, 32);
        CHECK_MSG(y[5] == code0[t], "%s: NaN encoded as %g, want %g (code 0)", tg_type_name(types[t]), (double)y[5],
                  (double)code0[t]);
        int bad = 0; /* the others as with 0 in the NaN's place */
        for (int j = 0; j < 32; j++) bad += j != 5 && y[j] != y0[j];
        CHECK_MSG(bad == 0, "%s: %d values changed beside a NaN", tg_type_name(types[t]), bad);
    }
    for (int j = 0; j < 32; j++) x[j] = j % 2 ? 1e-38f : 0.0f;
    struct blk_q4_0 q;
    cpu_from_f32(TG_TYPE_Q4_0, x, &q, 32);
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += q.qs[j] != 0;
    CHECK_MSG(bad == 0 && q.d == h(-1e-38f / 8.0f), "q4_0 of values near FLT_MIN: %d bytes not 0, d %04x", bad, (unsigned)q.d);
}

/* Normalised squared error of the k-quants on smooth and on noisy data is
 * what a 4-/6-bit format allows (ggml's own encoder: about 2e-3 and 1e-4). */
static void test_encode_k(void) {
    static float x[4 * CPU_QK_K], y[4 * CPU_QK_K];
    static uint8_t blocks[4 * sizeof(struct blk_q4_k) + 4 * sizeof(struct blk_q6_k)];
    rng_state = 7;
    for (int i = 0; i < 4 * CPU_QK_K; i++) x[i] = sinf((float)i * 0.05f) + rng_uniform(-0.15f, 0.15f);
    const enum tg_type types[] = {TG_TYPE_Q4_K, TG_TYPE_Q6_K};
    const double bound[] = {4e-3, 2e-4};
    for (int t = 0; t < 2; t++) {
        cpu_from_f32(types[t], x, blocks, 4 * CPU_QK_K);
        cpu_to_f32(types[t], blocks, y, 4 * CPU_QK_K);
        double num = 0, den = 0;
        for (int i = 0; i < 4 * CPU_QK_K; i++) {
            num += (double)(y[i] - x[i]) * (y[i] - x[i]);
            den += (double)x[i] * x[i];
        }
        CHECK_MSG(num / den < bound[t], "%s: nmse %g above %g", tg_type_name(types[t]), num / den, bound[t]);
    }
    /* zeros stay zeros (no division by a zero scale) */
    for (int i = 0; i < CPU_QK_K; i++) x[i] = 0.0f;
    for (int t = 0; t < 2; t++) {
        cpu_from_f32(types[t], x, blocks, CPU_QK_K);
        cpu_to_f32(types[t], blocks, y, CPU_QK_K);
        int bad = 0;
        for (int i = 0; i < CPU_QK_K; i++) bad += y[i] != 0.0f;
        CHECK_MSG(bad == 0, "%s of zeros: %d nonzero", tg_type_name(types[t]), bad);
    }
}

/* ---- dot products ------------------------------------------------------------------------ */

static void test_dot_by_hand(void) {
    /* q8_0 . q8_0 over one block: sum q_x q_y = sum j * (j - 16) for j < 32
     * = 10416 - 16 * 496 = 2480; times d_x d_y = 0.5 * 0.25 */
    struct blk_q8_0 x = {.d = h(0.5f)}, y = {.d = h(0.25f)};
    for (int j = 0; j < 32; j++) {
        x.qs[j] = (int8_t)j;
        y.qs[j] = (int8_t)(j - 16);
    }
    CHECK(cpu_dot_for(TG_TYPE_Q8_0)(32, &x, &y) == 2480.0f * 0.125f);
    CHECK(cpu_dot_generic(TG_TYPE_Q8_0)(32, &x, &y) == 2480.0f * 0.125f);
    /* q4_0 with every nibble 9 (value +1 d) against y = 1..32: d_x d_y * 528 */
    struct blk_q4_0 w = {.d = h(2.0f)};
    memset(w.qs, 0x99, sizeof w.qs);
    for (int j = 0; j < 32; j++) y.qs[j] = (int8_t)(j + 1);
    CHECK(cpu_dot_for(TG_TYPE_Q4_0)(32, &w, &y) == 528.0f * 2.0f * 0.25f);
    /* f16 rows of 40 (a tail after 32): sum of i * 0.5 = 0.5 * 780 */
    uint16_t a[40], b[40];
    for (int i = 0; i < 40; i++) {
        a[i] = h((float)i);
        b[i] = h(0.5f);
    }
    CHECK(cpu_dot_for(TG_TYPE_F16)(40, a, b) == 390.0f);
    /* q6_k with q = 33 (value +1) everywhere, scales 2, d 0.5, against q8_K
     * ones with d 0.25: 256 * 2 * 0.5 * 0.25 */
    static struct blk_q6_k k6;
    static struct blk_q8_k y8;
    memset(k6.ql, 0x11, sizeof k6.ql); /* low bits 1 */
    memset(k6.qh, 0xAA, sizeof k6.qh); /* high bits 2 -> q = 33 */
    memset(k6.scales, 2, sizeof k6.scales);
    k6.d = h(0.5f);
    memset(y8.qs, 1, sizeof y8.qs);
    for (int g = 0; g < 16; g++) y8.bsums[g] = 16;
    y8.d = 0.25f;
    CHECK(cpu_dot_for(TG_TYPE_Q6_K)(CPU_QK_K, &k6, &y8) == 64.0f);
    CHECK(cpu_dot_generic(TG_TYPE_Q6_K)(CPU_QK_K, &k6, &y8) == 64.0f);
}

/* Every type's fast path gives the portable path's bits, on random rows. */
static void test_fast_paths_exact(void) {
    const int n = 3 * CPU_QK_K + 0; /* a multiple of every block size, three k-blocks */
    static float xs[3 * CPU_QK_K], ys[3 * CPU_QK_K];
    static uint8_t w[3 * CPU_QK_K * 4], a[3 * CPU_QK_K * 4];
    rng_state = 11;
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < n; i++) {
            xs[i] = rng_uniform(-0.5f, 0.5f) * (float)(1 + rep);
            ys[i] = rng_uniform(-0.5f, 0.5f);
        }
        for (int t = 0; t < TG_TYPE_COUNT; t++) {
            const enum cpu_act act = cpu_act_of((enum tg_type)t);
            if (act == CPU_ACT_NONE) continue;
            cpu_from_f32((enum tg_type)t, xs, w, n);
            cpu_act_from_f32(act, ys, a, n);
            const float fast = cpu_dot_for((enum tg_type)t)(n, w, a), slow = cpu_dot_generic((enum tg_type)t)(n, w, a);
            CHECK_MSG(memcmp(&fast, &slow, sizeof fast) == 0, "%s: fast %.9g vs portable %.9g",
                      tg_type_name((enum tg_type)t), fast, slow);
        }
    }
}

static void test_half_decode(void) {
    int bad = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        const float fast = cpu_half_to_float((uint16_t)u), ref = tg_fp16_to_fp32((uint16_t)u);
        /* a signalling NaN comes back quiet (as from F16C): still a NaN */
        bad += memcmp(&fast, &ref, sizeof fast) != 0 && !(isnan(fast) && isnan(ref));
    }
    CHECK_MSG(bad == 0, "fp16 decode: %d of 65536 inputs differ from tg_fp16_to_fp32", bad);
}

/* The F16C row conversions give the portable conversions' bits: every fp16
 * value decoded, and floats around every fp16 value (ties, denormals,
 * overflow) encoded. */
static void test_fast_f16_rows(void) {
    cpu_f16_to_f32_fn to_f32;
    cpu_f32_to_f16_fn from_f32;
    if (!cpu_f16_rows_x86(&to_f32, &from_f32)) {
        printf("no F16C here: the portable row conversions are the only ones\n");
        return;
    }
    static uint16_t h[65536], back[65536 * 4];
    static float f[65536], x[65536 * 4];
    for (uint32_t u = 0; u < 65536; u++) h[u] = (uint16_t)u;
    to_f32(h, f, 65536);
    int bad = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        const float ref = tg_fp16_to_fp32((uint16_t)u);
        bad += memcmp(&f[u], &ref, 4) != 0 && !(isnan(f[u]) && isnan(ref));
    }
    CHECK_MSG(bad == 0, "F16C decode: %d of 65536 differ", bad);
    rng_state = 5;
    for (int i = 0; i < 65536 * 4; i++) {
        const float base = tg_fp16_to_fp32((uint16_t)(i / 4));
        uint32_t bits;
        memcpy(&bits, &base, 4);
        bits += (uint32_t)(i % 4 == 0 ? 0 : i % 4 == 1 ? 0x1000 : i % 4 == 2 ? 0xFFF : rng_next() & 0x1FFF);
        memcpy(&x[i], &bits, 4);
    }
    from_f32(x, back, 65536 * 4);
    bad = 0;
    for (int i = 0; i < 65536 * 4; i++) {
        const uint16_t ref = tg_fp32_to_fp16(x[i]);
        bad += back[i] != ref && !(isnan(x[i]));
    }
    CHECK_MSG(bad == 0, "F16C encode: %d of %d differ", bad, 65536 * 4);
}

int main(void) {
    test_fast_f16_rows();
    test_decode_32();
    test_decode_k();
    test_encode_grid();
    test_encode_q8_ties();
    test_encode_undefined();
    test_encode_k();
    test_dot_by_hand();
    test_fast_paths_exact();
    test_half_decode();
    return tg_test_finish();
}

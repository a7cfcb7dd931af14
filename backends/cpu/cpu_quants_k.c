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

/* ---- shared by q4_k and q6_k ------------------------------------------------------ */

/* A sub-block's fit x ~ s * L + b.  Up to MAX_FITS of them are kept: the best
 * and those as good to within float resolution.  A constant sub-block fits
 * exactly with every level (all 1.843: 15 steps of c/15 or 14 of c/14), and
 * which one survives the fp16 rounding of the super-block scale is luck: the
 * super-block search below tries them all. */
#define MAX_FITS 4
struct fit {
    float s, b;
};

/* Adds (s, b) to fits[*n] if it ties with the best error so far or beats it
 * (dropping those it beats); the first of equals stays first, as in ggml. */
static void keep_fit(struct fit *fits, double *errs, int *n, float s, float b, double err, double tie) {
    if (*n > 0 && err < errs[0] - tie) *n = 0;
    else if (*n > 0 && !(err <= errs[0] + tie)) return;
    for (int k = 0; k < *n; k++) {
        if (fits[k].s == s && fits[k].b == b) return;
    }
    if (*n == MAX_FITS) return;
    if (*n > 0 && err < errs[0]) { /* ahead of the earlier ties: it is the best */
        fits[*n] = fits[0];
        errs[*n] = errs[0];
        fits[0] = (struct fit){s, b};
        errs[0] = err;
    } else {
        fits[*n] = (struct fit){s, b};
        errs[*n] = err;
    }
    (*n)++;
}

/* The fp16 values next to h away from zero (dir 1) and towards it (dir -1),
 * or h itself at the ends (zero, the largest finite value). */
static uint16_t half_step(uint16_t h, int dir) {
    const unsigned mag = h & 0x7FFFu;
    if (dir < 0) return mag == 0 ? h : (uint16_t)(h - 1);
    return mag >= 0x7BFFu ? h : (uint16_t)(h + 1);
}

/* Adds the fp16 rounding of v and its two neighbours to set[*n] (distinct). */
static void add_half_candidates(uint16_t *set, int *n, float v) {
    const uint16_t h = tg_fp32_to_fp16(v);
    const uint16_t c[3] = {h, half_step(h, -1), half_step(h, 1)};
    for (int i = 0; i < 3; i++) {
        bool seen = false;
        for (int k = 0; k < *n; k++) seen |= set[k] == c[i];
        if (!seen) set[(*n)++] = c[i];
    }
}

/* ---- q4_k ---------------------------------------------------------------------- */

/* Fits x[n] ~ s * L + b with L in [0, nmax] and b <= 0 by weighted least
 * squares over a few grids; returns the number of fits in fits[].  Sums in
 * double, and a system whose levels are (nearly) all one value is singular:
 * in float its determinant is rounding noise, whose "solution" decoded a
 * constant 1.219 as -0.125.  The plain grid over [min(0, x), max] is the
 * first candidate, so a constant keeps its exact fit: max / nmax, b 0. */
static int fit_asymmetric(const float *x, const float *w, int n, int nmax, struct fit *fits) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    fits[0] = (struct fit){0.0f, lo};
    if (!(hi > lo)) return 1; /* all equal (and <= 0): b alone is exact */
    double errs[MAX_FITS], energy = 0.0;
    for (int i = 0; i < n; i++) energy += w[i] * (double)x[i] * x[i];
    const double tie = 1e-10 * energy; /* below float resolution */
    int nfits = 0;
    for (int step = -11; step <= 10; step++) { /* -11: the plain grid */
        const float iscale = step < -10 ? (float)nmax / (hi - lo) : ((float)nmax + 0.1f * (float)step) / (hi - lo);
        int L[CPU_QK_K / 8];
        double sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
        for (int i = 0; i < n; i++) {
            L[i] = clamp_int(nearest(iscale * (x[i] - lo)), 0, nmax);
            sw += w[i];
            sl += w[i] * L[i];
            sll += w[i] * L[i] * L[i];
            sx += w[i] * x[i];
            slx += w[i] * L[i] * x[i];
        }
        if (!(sll > 0.0)) continue;
        const double det = sw * sll - sl * sl;
        double sc = 1.0 / iscale, off = lo;
        if (step < -10) {
            /* the grid itself */
        } else if (det > 1e-9 * sw * sll) {
            sc = (sw * slx - sl * sx) / det;
            off = (sll * sx - sl * slx) / det;
        } else { /* one level: only the scale is determined */
            sc = slx / sll;
            off = 0.0;
        }
        if (off > 0.0) { /* the format needs b <= 0: refit the scale alone */
            off = 0.0;
            sc = slx / sll;
        }
        if (!(sc > 0.0)) continue;
        double err = 0.0;
        for (int i = 0; i < n; i++) {
            const double e = (double)(float)sc * L[i] + (float)off - x[i];
            err += w[i] * e * e;
        }
        keep_fit(fits, errs, &nfits, (float)sc, (float)off, err, tie);
    }
    if (nfits == 0) nfits = 1; /* no grid fitted (NaN input): b = lo */
    return nfits;
}

/* Squared error of sub-block x[32] decoded with step d * sc and offset
 * dmin * m, each value at its nearest level (as the final encoding). */
static double q4_k_sub_error(const float *x, float d, float dmin, int sc, int m) {
    const float step = d * (float)sc, off = dmin * (float)m;
    double err = 0.0;
    for (int i = 0; i < 32; i++) {
        const int L = step > 0.0f ? clamp_int(nearest((x[i] + off) / step), 0, 15) : 0;
        const double e = (double)(step * (float)L - off) - x[i];
        err += e * e;
    }
    return err;
}

/* Sub-block j of a q4_k block for super-block scales d and dmin: the 6-bit
 * scale and min among those nearest the fits' (and one either side), the
 * pair whose decoding is closest to x[32]; returns its squared error. */
static double q4_k_sub_best(const float *x, const struct fit *fits, int nfits, float d, float dmin, uint8_t *sc_out,
                            uint8_t *m_out) {
    double best = INFINITY;
    bool have = false;
    for (int k = 0; k < nfits; k++) {
        const int sc0 = d > 0.0f ? nearest(fits[k].s / d) : 0, m0 = dmin > 0.0f ? nearest(-fits[k].b / dmin) : 0;
        for (int a = -1; a <= 1; a++) {
            for (int c = -1; c <= 1; c++) {
                const int sc = clamp_int(sc0 + a, 0, 63), m = clamp_int(m0 + c, 0, 63);
                const double err = q4_k_sub_error(x, d, dmin, sc, m);
                if (!have || err < best) { /* the first always: a NaN error compares false */
                    have = true;
                    best = err;
                    *sc_out = (uint8_t)sc;
                    *m_out = (uint8_t)m;
                }
            }
        }
    }
    return best;
}

/* One way to store a q4_k block's scales, and its squared error. */
struct q4_k_choice {
    uint16_t d, dmin;
    uint8_t sc[8], m[8];
    double err;
};

/* The choice for super-block scales d16 and dmin16, each sub-block at its
 * best scale and min near its fits'. */
static struct q4_k_choice q4_k_choose(const float *x, struct fit (*fits)[MAX_FITS], const int *nfits, uint16_t d16,
                                      uint16_t dmin16) {
    struct q4_k_choice c = {.d = d16, .dmin = dmin16};
    const float d = cpu_half_to_float(d16), dmin = cpu_half_to_float(dmin16);
    for (int j = 0; j < 8; j++) c.err += q4_k_sub_best(x + 32 * j, fits[j], nfits[j], d, dmin, &c.sc[j], &c.m[j]);
    return c;
}

/* The scales and mins are stored as 6-bit multiples of the fp16 super-block
 * scales d and dmin, whose rounding can cost more than the fit gained (all
 * 1.843 came back 4e-4 off): d is tried at the fp16 rounding from each
 * tied fit of the sub-block that sets it and at their neighbours, then dmin
 * likewise with the best d; the choice whose decoding is closest to x is kept. */
static void q4_k_from(const float *x, struct blk_q4_k *y) {
    struct fit fits[8][MAX_FITS];
    int nfits[8], js = 0, jm = 0;
    float w[32];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum2 = 0.0f;
        for (int i = 0; i < 32; i++) sum2 += xs[i] * xs[i];
        const float av = sqrtf(sum2 / 32.0f);
        for (int i = 0; i < 32; i++) w[i] = av + fabsf(xs[i]);
        nfits[j] = fit_asymmetric(xs, w, 32, 15, fits[j]);
        if (fits[j][0].s > fits[js][0].s) js = j;
        if (-fits[j][0].b > -fits[jm][0].b) jm = j;
    }
    /* the search: d with dmin at its first rounding, then dmin */
    uint16_t set[3 * MAX_FITS];
    int n = 0;
    for (int k = 0; k < nfits[js]; k++) add_half_candidates(set, &n, fmaxf(fits[js][k].s, 0.0f) / 63.0f);
    uint16_t dmin16 = tg_fp32_to_fp16(fmaxf(-fits[jm][0].b, 0.0f) / 63.0f);
    struct q4_k_choice found = {.err = INFINITY};
    for (int a = 0; a < n; a++) {
        const struct q4_k_choice c = q4_k_choose(x, fits, nfits, set[a], dmin16);
        if (a == 0 || c.err < found.err) found = c; /* the first always: a NaN error compares false */
    }
    n = 0;
    for (int k = 0; k < nfits[jm]; k++) add_half_candidates(set, &n, fmaxf(-fits[jm][k].b, 0.0f) / 63.0f);
    for (int a = 0; a < n; a++) {
        const struct q4_k_choice c = q4_k_choose(x, fits, nfits, found.d, set[a]);
        if (c.err < found.err) found = c;
    }
    y->d = found.d;
    y->dmin = found.dmin;
    const uint8_t *sc = found.sc, *m = found.m;
    /* 6-bit pairs: sub-blocks 0-3 in the low bits of bytes 0-7, 4-7 in
     * nibbles of bytes 8-11 with their top two bits above those of 0-3 */
    for (int j = 0; j < 4; j++) {
        y->scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        y->scales[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        y->scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
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

/* Fits x[n] ~ s * L with L in [-nmax, nmax - 1] (weights x^2, sums in
 * double); the signed largest value maps near -nmax (the format's one extra
 * negative level).  Returns the number of fits in fits[] (b 0): the grid at
 * -nmax exactly first, as in ggml, then ties and better ones. */
static int fit_symmetric(const float *x, int n, int nmax, struct fit *fits) {
    float amax = 0.0f, vmax = 0.0f;
    double energy = 0.0;
    for (int i = 0; i < n; i++) {
        energy += (double)x[i] * x[i] * x[i] * x[i];
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            vmax = x[i];
        }
    }
    fits[0] = (struct fit){0.0f, 0.0f};
    if (amax == 0.0f) return 1;
    const double tie = 1e-10 * energy; /* below float resolution */
    double errs[MAX_FITS];
    int nfits = 0;
    for (int k = 0; k < 19; k++) {
        const int step = k == 0 ? 0 : k <= 9 ? k - 10 : k - 9; /* 0, then -9..-1, 1..9 */
        const float iscale = -((float)nmax + 0.1f * (float)step) / vmax;
        double sxl = 0, sll = 0;
        int L[16];
        for (int i = 0; i < n; i++) {
            L[i] = clamp_int(nearest(iscale * x[i]), -nmax, nmax - 1);
            const double w = (double)x[i] * x[i];
            sxl += w * x[i] * L[i];
            sll += w * L[i] * L[i];
        }
        if (!(sll > 0.0)) continue;
        const float s = (float)(sxl / sll);
        double err = 0.0;
        for (int i = 0; i < n; i++) {
            const double e = x[i] - (double)s * L[i];
            err += (double)x[i] * x[i] * e * e;
        }
        keep_fit(fits, errs, &nfits, s, 0.0f, err, tie);
    }
    if (nfits == 0) nfits = 1;
    return nfits;
}

/* Sub-block g of a q6_k block for super-block scale d: the 8-bit scale
 * among those nearest the fits' (and one either side) whose decoding is
 * closest to x[16]; returns its squared error. */
static double q6_k_sub_best(const float *x, const struct fit *fits, int nfits, float d, int8_t *sc_out) {
    double best = INFINITY;
    bool have = false;
    for (int k = 0; k < nfits; k++) {
        const int sc0 = d != 0.0f ? clamp_int(nearest(fits[k].s / d), -129, 128) : 0;
        for (int a = -1; a <= 1; a++) {
            const int sc = clamp_int(sc0 + a, -128, 127);
            const float step = d * (float)sc;
            double err = 0.0;
            for (int i = 0; i < 16; i++) {
                const int L = step != 0.0f ? clamp_int(nearest(x[i] / step), -32, 31) : 0;
                const double e = (double)(step * (float)L) - x[i];
                err += e * e;
            }
            if (!have || err < best) { /* the first always: a NaN error compares false */
                have = true;
                best = err;
                *sc_out = (int8_t)sc;
            }
        }
    }
    return best;
}

/* The largest sub-block scale maps to -128 of the fp16 super-block scale,
 * whose rounding can cost more than the fit gained (all 0.01: d is an fp16
 * subnormal, 0.7% off): d is tried from each tied fit of that sub-block and
 * at its neighbours, and the one whose decoding is closest to x kept. */
static void q6_k_from(const float *x, struct blk_q6_k *y) {
    struct fit fits[16][MAX_FITS];
    int nfits[16], gmax = 0;
    for (int g = 0; g < 16; g++) {
        nfits[g] = fit_symmetric(x + 16 * g, 16, 32, fits[g]);
        if (fabsf(fits[g][0].s) > fabsf(fits[gmax][0].s)) gmax = g;
    }
    uint16_t dset[3 * MAX_FITS];
    int nd = 0;
    if (fits[gmax][0].s == 0.0f) dset[nd++] = 0; /* all zero */
    else for (int k = 0; k < nfits[gmax]; k++) add_half_candidates(dset, &nd, fits[gmax][k].s / -128.0f);
    double best = INFINITY;
    bool have = false;
    for (int a = 0; a < nd; a++) {
        const float d = cpu_half_to_float(dset[a]);
        int8_t tsc[16];
        double err = 0.0;
        for (int g = 0; g < 16; g++) err += q6_k_sub_best(x + 16 * g, fits[g], nfits[g], d, &tsc[g]);
        if (!have || err < best) {
            have = true;
            best = err;
            y->d = dset[a];
            memcpy(y->scales, tsc, sizeof tsc);
        }
    }
    const float d = cpu_half_to_float(y->d);
    int8_t L[CPU_QK_K];
    for (int g = 0; g < 16; g++) {
        const float step = d * (float)y->scales[g];
        for (int i = 0; i < 16; i++) {
            L[16 * g + i] = (int8_t)(step != 0.0f ? clamp_int(nearest(x[16 * g + i] / step), -32, 31) : 0);
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

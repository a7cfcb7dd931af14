/* The op-by-shape-by-type grid (test-backend-ops style) that holds a backend
 * against the CPU, shared by test_cuda_ops and the backend conformance
 * harness (op_grid.h says what each case checks). */
#include "op_grid.h"

#include "cpu/cpu-quants.h"
#include "tg_test.h"
#include "tg_test_rng.h"

#include <stdint.h>

#define GUARD_BYTES 1024
#define MAX_BINDINGS 16

static const char *const kind_names[K_COUNT] = {
    "binary", "add1", "scale", "sqr", "sqrt", "log", "fill", "unary", "diag_mask_inf", "rms_norm", "norm",
    "soft_max", "rope", "glu", "glu_split", "sum_rows", "concat", "cpy", "cont", "dup", "get_rows", "set_rows",
    "mul_mat", "flash_attn_ext", "im2col"};

/* The op each kind builds (binary: add stands for sub/mul/div, same rules). */
static const enum tg_op kind_ops[K_COUNT] = {
    TG_OP_ADD, TG_OP_ADD1, TG_OP_SCALE, TG_OP_SQR, TG_OP_SQRT, TG_OP_LOG, TG_OP_FILL, TG_OP_UNARY,
    TG_OP_DIAG_MASK_INF, TG_OP_RMS_NORM, TG_OP_NORM, TG_OP_SOFT_MAX, TG_OP_ROPE, TG_OP_GLU, TG_OP_GLU,
    TG_OP_SUM_ROWS, TG_OP_CONCAT, TG_OP_CPY, TG_OP_CONT, TG_OP_DUP, TG_OP_GET_ROWS, TG_OP_SET_ROWS,
    TG_OP_MUL_MAT, TG_OP_FLASH_ATTN_EXT, TG_OP_IM2COL};

static const char *const binary_names[4] = {"add", "sub", "mul", "div"};
static const char *const unary_names[TG_UNARY_COUNT] = {
    "abs", "sgn", "neg", "step", "tanh", "elu", "relu", "sigmoid", "gelu", "gelu_quick", "silu", "hardswish",
    "hardsigmoid", "exp", "expm1", "softplus", "gelu_erf", "xielu", "floor", "ceil", "round", "trunc"};
static const char *const glu_names[TG_GLU_COUNT] = {"reglu", "geglu", "swiglu", "swiglu_oai", "geglu_erf", "geglu_quick"};

static const char *const layout_names[L_COUNT] = {"contiguous", "transposed", "permuted"};

/* ---- deterministic inputs (rng: tg_test_rng.h) ------------------------------------ */

/* A tensor of type t whose shape is ne, in the requested layout: a leaf, or a
 * transposed / permuted view of a leaf (the leaf is what gets memory). */
static struct tg_tensor *make_input(struct tg_context *ctx, enum tg_type t, const int64_t ne[4], enum layout layout) {
    if (layout == L_TRANSPOSED) return tg_transpose(ctx, tg_new_tensor_4d(ctx, t, ne[1], ne[0], ne[2], ne[3]));
    if (layout == L_PERMUTED) return tg_permute(ctx, tg_new_tensor_4d(ctx, t, ne[0], ne[2], ne[1], ne[3]), 0, 2, 1, 3);
    return tg_new_tensor_4d(ctx, t, ne[0], ne[1], ne[2], ne[3]);
}

/* Index leafs are tagged by name, "idx MODE RANGE", for the filler:
 *   d: distinct values below RANGE within each run of ne0 (a permutation prefix)
 *   r: values drawn with replacement below RANGE (repeats: set_rows order)
 *   o: like d, but the first of each run is RANGE + 3 and the second -1 */
static struct tg_tensor *make_indices(struct tg_context *ctx, enum tg_type type, int64_t n, int64_t ne1, int64_t ne2,
                                      char mode, int64_t range) {
    struct tg_tensor *t = tg_new_tensor_3d(ctx, type, n, ne1, ne2);
    if (t) tg_format_name(t, "idx %c %lld", mode, (long long)range);
    return t;
}

/* Masks tagged "mask causal": -inf above the shifted diagonal, and all of row 1
 * when there are at least 3 rows (a fully masked row must give zeros). */
static struct tg_tensor *make_causal_mask(struct tg_context *ctx, enum tg_type type, const int64_t ne[4]) {
    struct tg_tensor *t = tg_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    if (t) tg_set_name(t, "mask causal");
    return t;
}

static struct tg_tensor *build_case(struct tg_context *ctx, const struct op_case *c) {
    const int64_t *ne = c->ne;
    switch (c->kind) {
    case K_BINARY: {
        struct tg_tensor *a = make_input(ctx, c->type, ne, c->layout), *b;
        if (c->sub2 == 0) {
            b = make_input(ctx, c->type2, ne, c->layout);
        } else {
            /* sub2 bit i: b has extent 1 along dim i (broadcast) */
            int64_t bne[4];
            for (int i = 0; i < 4; i++) bne[i] = (c->sub2 >> i) & 1 ? 1 : ne[i];
            b = tg_new_tensor_4d(ctx, c->type2, bne[0], bne[1], bne[2], bne[3]);
        }
        switch (c->sub) {
        case 0: return tg_add(ctx, a, b);
        case 1: return tg_sub(ctx, a, b);
        case 2: return tg_mul(ctx, a, b);
        default: return tg_div(ctx, a, b);
        }
    }
    case K_ADD1: return tg_add1(ctx, make_input(ctx, c->type, ne, c->layout), tg_new_tensor_1d(ctx, c->type2, 1));
    case K_SCALE: return tg_scale_bias(ctx, make_input(ctx, c->type, ne, c->layout), c->f0, c->f1);
    case K_SQR: return tg_sqr(ctx, make_input(ctx, c->type, ne, c->layout));
    case K_SQRT: return tg_sqrt(ctx, make_input(ctx, c->type, ne, c->layout));
    case K_LOG: return tg_log(ctx, make_input(ctx, c->type, ne, c->layout));
    case K_FILL: return tg_fill(ctx, make_input(ctx, c->type, ne, c->layout), c->f0);
    case K_UNARY: return tg_unary(ctx, make_input(ctx, c->type, ne, c->layout), (enum tg_unary_op)c->sub);
    case K_DIAG_MASK_INF: return tg_diag_mask_inf(ctx, make_input(ctx, c->type, ne, c->layout), c->sub);
    case K_RMS_NORM: return tg_rms_norm(ctx, make_input(ctx, c->type, ne, c->layout), 1e-5f);
    case K_NORM: return tg_norm(ctx, make_input(ctx, c->type, ne, c->layout), 1e-5f);
    case K_SOFT_MAX: {
        /* sub2: 0 no mask; 1 f32 [ne0, ne1 + 3] with ALiBi (f0); 2 causal f16
         * [ne0, ne1, 1, ne3] broadcast over dim 2; 3 causal f32 of a's shape */
        struct tg_tensor *a = make_input(ctx, c->type, ne, c->layout), *mask = NULL;
        if (c->sub2 == 1) mask = tg_new_tensor_2d(ctx, TG_TYPE_F32, ne[0], ne[1] + 3);
        if (c->sub2 == 2) mask = make_causal_mask(ctx, TG_TYPE_F16, (const int64_t[4]){ne[0], ne[1], 1, ne[3]});
        if (c->sub2 == 3 || c->sub2 == 4) mask = make_causal_mask(ctx, TG_TYPE_F32, ne);
        struct tg_tensor *r = tg_soft_max(ctx, a, mask, 0.7f, c->f0);
        /* sub2 4: with attention sinks, one logit per head */
        if (r && c->sub2 == 4) CHECK_OK(tg_add_sinks(r, tg_new_tensor_1d(ctx, TG_TYPE_F32, ne[2])));
        return r;
    }
    case K_ROPE: {
        /* sub: mode; sub2: n_dims = ne0 / sub2; f1: YaRN ext_factor (with freq_scale 0.25);
         * f0 != 0: frequency factors (a leaf named "factors": values in [1, 4)) */
        struct tg_tensor *pos = make_indices(ctx, TG_TYPE_I32, ne[2], 1, 1, 'd', ne[2] + 1000);
        struct tg_tensor *factors = NULL;
        if (c->f0 != 0.0f) {
            factors = tg_new_tensor_1d(ctx, TG_TYPE_F32, ne[0] / c->sub2 / 2);
            if (factors) tg_set_name(factors, "factors");
        }
        return tg_rope_ext(ctx, make_input(ctx, c->type, ne, c->layout), pos, factors, (int)(ne[0] / c->sub2), c->sub,
                           512, 10000.0f, c->f1 != 0.0f ? 0.25f : 1.0f, c->f1, 1.0f, 32.0f, 1.0f);
    }
    case K_GLU:
        if (c->sub == TG_GLU_SWIGLU_OAI) return tg_swiglu_oai(ctx, make_input(ctx, c->type, ne, c->layout), NULL, 1.702f, 0.8f);
        return tg_glu(ctx, make_input(ctx, c->type, ne, c->layout), (enum tg_glu_op)c->sub, c->sub2 != 0);
    case K_GLU_SPLIT: {
        struct tg_tensor *a = make_input(ctx, c->type, ne, c->layout);
        struct tg_tensor *b = tg_new_tensor_4d(ctx, c->type, ne[0], ne[1], ne[2], ne[3]);
        if (c->sub == TG_GLU_SWIGLU_OAI) return tg_swiglu_oai(ctx, a, b, 1.702f, 0.8f);
        return tg_glu_split(ctx, a, b, (enum tg_glu_op)c->sub);
    }
    case K_SUM_ROWS: return tg_sum_rows(ctx, make_input(ctx, c->type, ne, c->layout));
    case K_CONCAT: {
        int64_t bne[4] = {ne[0], ne[1], ne[2], ne[3]};
        bne[c->sub] += 2;
        return tg_concat(ctx, make_input(ctx, c->type, ne, c->layout), make_input(ctx, c->type, bne, L_CONTIGUOUS),
                         c->sub);
    }
    case K_CPY: {
        /* sub 0: into a contiguous tensor of another shape (ne0 and ne1 swapped);
         * sub 1: into a transposed view (a strided destination, like a V cache) */
        struct tg_tensor *dst = c->sub == 0 ? tg_new_tensor_4d(ctx, c->type2, ne[1], ne[0], ne[2], ne[3])
                                            : make_input(ctx, c->type2, ne, L_TRANSPOSED);
        return tg_cpy(ctx, make_input(ctx, c->type, ne, c->layout), dst);
    }
    case K_CONT: return tg_cont(ctx, make_input(ctx, c->type, ne, c->layout));
    case K_DUP: return tg_dup(ctx, make_input(ctx, c->type, ne, c->layout));
    case K_GET_ROWS: {
        /* sub rows per (ne2, ne3); sub2: 0 distinct, 1 out of range, 3 repeats
         * (i32: ggml's get_rows takes no other index type) */
        static const char modes[4] = {'d', 'o', 'd', 'r'};
        struct tg_tensor *rows = make_indices(ctx, TG_TYPE_I32, c->sub, ne[2], ne[3], modes[c->sub2], ne[1]);
        return tg_get_rows(ctx, make_input(ctx, c->type, ne, c->layout), rows);
    }
    case K_SET_ROWS: {
        /* sub new rows per slice into a destination of shape ne; sub2: 0 distinct
         * i32 broadcast over slices, 1 repeats (the last one wins), 2 out of
         * range, 3 distinct per slice, 4 i64 */
        const int64_t rne[4] = {ne[0], c->sub, ne[2], ne[3]};
        struct tg_tensor *src = make_input(ctx, TG_TYPE_F32, rne, c->layout);
        struct tg_tensor *dst = tg_new_tensor_4d(ctx, c->type2, ne[0], ne[1], ne[2], ne[3]);
        struct tg_tensor *idx;
        switch (c->sub2) {
        case 1: idx = make_indices(ctx, TG_TYPE_I32, c->sub, 1, 1, 'r', ne[1] < 2 ? ne[1] : 2); break;
        case 2: idx = make_indices(ctx, TG_TYPE_I32, c->sub, 1, 1, 'o', ne[1]); break;
        case 3: idx = make_indices(ctx, TG_TYPE_I32, c->sub, ne[2], ne[3], 'd', ne[1]); break;
        case 4: idx = make_indices(ctx, TG_TYPE_I64, c->sub, 1, 1, 'd', ne[1]); break;
        default: idx = make_indices(ctx, TG_TYPE_I32, c->sub, 1, 1, 'd', ne[1]); break;
        }
        return tg_set_rows(ctx, dst, src, idx);
    }
    case K_MUL_MAT: {
        /* weights [K, M, ne2, ne3] of type; activations [K, N = sub, ne2 * r2 (sub2), ne3] of type2.
         * Weights are never transposed (ggml's rule, the constructor refuses). */
        const int64_t bne[4] = {ne[0], c->sub, ne[2] * c->sub2, ne[3]};
        const enum layout wl = c->layout == L_TRANSPOSED ? L_CONTIGUOUS : c->layout;
        return tg_mul_mat(ctx, make_input(ctx, c->type, ne, wl), make_input(ctx, c->type2, bne, c->layout));
    }
    case K_FLASH_ATTN: {
        /* q [D, n_q, H, B] = ne; k, v [D (v: D/2 with bit 2), n_kv = sub, H_kv, B] of type2;
         * sub2 bit 0: causal f16 mask [n_kv, n_q + 2]; bit 1: H_kv = H / 2 (GQA) */
        const int64_t n_kv = c->sub, h_kv = (c->sub2 & 2) ? ne[2] / 2 : ne[2];
        const int64_t kne[4] = {ne[0], n_kv, h_kv, ne[3]};
        const int64_t vne[4] = {(c->sub2 & 4) ? ne[0] / 2 : ne[0], n_kv, h_kv, ne[3]};
        struct tg_tensor *mask = NULL;
        if (c->sub2 & 1) mask = make_causal_mask(ctx, TG_TYPE_F16, (const int64_t[4]){n_kv, ne[1] + 2, 1, 1});
        struct tg_tensor *k = make_input(ctx, c->type2, kne, c->layout), *v = make_input(ctx, c->type2, vne, c->layout);
        /* bit 4 (contiguous only): the last two keys hidden from every row, their K and V rows NaN, as an
         * unwritten KV-cache slot may be: they must not reach the result */
        if (c->sub2 & 16) {
            mask = tg_new_tensor_4d(ctx, TG_TYPE_F16, n_kv, ne[1] + 2, 1, 1);
            if (mask) tg_set_name(mask, "mask tail");
            if (k) tg_set_name(k, "kv nan tail");
            if (v) tg_set_name(v, "kv nan tail");
        }
        struct tg_tensor *r = tg_flash_attn_ext(ctx, make_input(ctx, c->type, ne, c->layout), k, v, mask,
                                                1.0f / sqrtf((float)ne[0]), c->f0, c->f1);
        /* bit 3: attention sinks */
        if (r && (c->sub2 & 8)) CHECK_OK(tg_add_sinks(r, tg_new_tensor_1d(ctx, TG_TYPE_F32, ne[2])));
        return r;
    }
    case K_IM2COL: {
        /* the input ne = [IW, IH or IC, IC or N, N]; sub: kernel width (and
         * height in 2-D); sub2: 1 for 2-D; f0: stride, f1: padding; type2: result */
        const bool is_2d = c->sub2 == 1;
        const int64_t kne[4] = {c->sub, is_2d ? c->sub : ne[1], is_2d ? ne[2] : 4, is_2d ? 4 : 1};
        struct tg_tensor *kernel = tg_new_tensor_4d(ctx, TG_TYPE_F16, kne[0], kne[1], kne[2], kne[3]);
        const int s0 = (int)c->f0, p0 = (int)c->f1;
        return tg_im2col(ctx, kernel, make_input(ctx, c->type, ne, c->layout), s0, is_2d ? s0 : 0, p0, is_2d ? p0 : 0, 1,
                         is_2d ? 1 : 0, is_2d, c->type2);
    }
    case K_COUNT: break;
    }
    return NULL;
}

static void put_float(uint8_t *p, enum tg_type type, float x) {
    switch (type) {
    case TG_TYPE_F32: memcpy(p, &x, 4); break;
    case TG_TYPE_F16: { uint16_t h = tg_fp32_to_fp16(x); memcpy(p, &h, 2); break; }
    case TG_TYPE_BF16: { uint16_t h = tg_fp32_to_bf16(x); memcpy(p, &h, 2); break; }
    default: break;
    }
}

static void put_index(uint8_t *p, enum tg_type type, int64_t v) {
    if (type == TG_TYPE_I64) {
        memcpy(p, &v, 8);
    } else {
        const int32_t w = (int32_t)v;
        memcpy(p, &w, 4);
    }
}

/* The mode and range of an index leaf's "idx MODE RANGE" name (RANGE > 0). */
static bool index_tag(const char *name, char *mode, int64_t *range) {
    if (strncmp(name, "idx ", 4) != 0 || name[4] == '\0' || name[5] != ' ') return false;
    char *end = NULL;
    *mode = name[4];
    *range = strtoll(name + 6, &end, 10);
    return end != name + 6 && *end == '\0' && *range > 0;
}

/* Fills a contiguous leaf from the case's random stream (scratch holds its bytes). */
static void fill_leaf(struct tg_tensor *t, const struct op_case *c, uint8_t *scratch) {
    const int64_t n = tg_nelements(t);
    const size_t es = tg_type_size(t->type);
    char mode = 0;
    int64_t range = 0;
    if (index_tag(t->name, &mode, &range)) {
        const int64_t group = t->ne[0];
        int64_t *pool = malloc((size_t)range * sizeof *pool);
        for (int64_t g0 = 0; g0 < n; g0 += group) {
            for (int64_t i = 0; i < range; i++) pool[i] = i;
            for (int64_t i = 0; i < group; i++) {
                int64_t v = 0;
                if (mode == 'r') {
                    v = (int64_t)(rng_next() % (uint64_t)range);
                } else if (i >= range) {
                    CHECK_MSG(false, "%s: %lld distinct indices below %lld", c->label, (long long)group,
                              (long long)range);
                } else {
                    /* a partial Fisher-Yates shuffle: distinct values */
                    const int64_t j = i + (int64_t)(rng_next() % (uint64_t)(range - i));
                    v = pool[j];
                    pool[j] = pool[i];
                    pool[i] = v;
                    if (mode == 'o' && i == 0) v = range + 3;
                    if (mode == 'o' && i == 1) v = -1;
                }
                put_index(scratch + (g0 + i) * (int64_t)es, t->type, v);
            }
        }
        free(pool);
    } else if (strcmp(t->name, "factors") == 0) {
        for (int64_t i = 0; i < n; i++) put_float(scratch + i * (int64_t)es, t->type, rng_uniform(1.0f, 4.0f));
    } else if (tg_type_is_quantized(t->type)) {
        /* random values encoded by the CPU's encoder, row by row */
        float *row = malloc((size_t)t->ne[0] * sizeof *row);
        const size_t row_bytes = (size_t)(t->ne[0] / tg_blck_size(t->type)) * es;
        for (int64_t r = 0; r < n / t->ne[0]; r++) {
            for (int64_t i = 0; i < t->ne[0]; i++) row[i] = rng_uniform(c->lo, c->hi);
            cpu_from_f32(t->type, row, scratch + (size_t)r * row_bytes, t->ne[0]);
        }
        free(row);
    } else if (strcmp(t->name, "mask tail") == 0 || strcmp(t->name, "kv nan tail") == 0) {
        /* the last two columns of the mask -inf; the last two key rows of K and V NaN */
        const bool mask = t->name[0] == 'm';
        for (int64_t i = 0; i < n; i++) {
            const int64_t col = mask ? i % t->ne[0] : (i / t->ne[0]) % t->ne[1], cols = mask ? t->ne[0] : t->ne[1];
            const float hidden = mask ? -INFINITY : NAN;
            put_float(scratch + i * (int64_t)es, t->type, col >= cols - 2 ? hidden : rng_uniform(c->lo, c->hi));
        }
    } else if (strcmp(t->name, "mask causal") == 0) {
        int64_t k = 0;
        for (int64_t r = 0; r < n / t->ne[0]; r++) {
            const int64_t i1 = r % t->ne[1];
            for (int64_t i0 = 0; i0 < t->ne[0]; i0++, k++) {
                const bool masked = i0 > i1 + 1 || (i1 == 1 && t->ne[1] >= 3);
                put_float(scratch + k * (int64_t)es, t->type, masked ? -INFINITY : rng_uniform(c->lo, c->hi));
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (t->type == TG_TYPE_I32) {
                const int32_t v = (int32_t)rng_next(); /* every bit pattern: copies must keep them all */
                memcpy(scratch + i * 4, &v, 4);
            } else {
                put_float(scratch + i * (int64_t)es, t->type, rng_uniform(c->lo, c->hi));
            }
        }
    }
    CHECK_OK(tg_tensor_set(t, scratch, 0, tg_nbytes(t)));
}

/* Every element of t in logical order, as doubles (exact for f32/f16/bf16/i32;
 * quantized rows decoded by the CPU's decoder, the same for both sides). */
static double *read_elements(const struct tg_tensor *t) {
    const size_t bytes = tg_nbytes(t);
    uint8_t *raw = malloc(bytes ? bytes : 1);
    double *out = malloc((size_t)(tg_nelements(t) ? tg_nelements(t) : 1) * sizeof *out);
    CHECK_OK(tg_tensor_get(t, raw, 0, bytes));
    int64_t k = 0;
    if (tg_type_is_quantized(t->type)) {
        float *row = malloc((size_t)t->ne[0] * sizeof *row);
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                    cpu_to_f32(t->type, raw + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], row, t->ne[0]);
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) out[k++] = row[i0];
                }
        free(row);
        free(raw);
        return out;
    }
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const uint8_t *p = raw + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    double v = 0.0;
                    uint16_t h;
                    switch (t->type) {
                    case TG_TYPE_F32: { float f; memcpy(&f, p, 4); v = f; break; }
                    case TG_TYPE_F16: memcpy(&h, p, 2); v = tg_fp16_to_fp32(h); break;
                    case TG_TYPE_BF16: memcpy(&h, p, 2); v = tg_bf16_to_fp32(h); break;
                    case TG_TYPE_I32: { int32_t x; memcpy(&x, p, 4); v = x; break; }
                    default: v = NAN; break;
                    }
                    out[k++] = v;
                }
    free(raw);
    return out;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct run_result {
    bool supported;            /* false: the backend's supports_op refused a node */
    enum tg_status status;     /* of graph_compute */
    char error[200];           /* its message */
    double *values;
    int64_t n;
    int guard_errors;          /* sentinel bytes that changed */
};

/* Builds the case, binds every tensor with sentinel guards into one buffer of
 * the backend, fills the inputs from seed, computes, and reads the result and
 * the guards.  Harness failures (binding, transfers) are CHECKs; the backend's
 * own behaviour is reported in the result for the caller to judge. */
static struct run_result run_case(tg_backend *be, const struct op_case *c, bool allow_inplace, uint64_t seed) {
    struct run_result r;
    memset(&r, 0, sizeof r);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_context *gctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    tg_buffer *buf = NULL;
    struct tg_tensor *out = build_case(ctx, c);
    CHECK_MSG(out != NULL, "%s: constructor failed: %s", c->label, tg_last_error());
    if (!out) goto done;
    CHECK_OK(tg_graph_build_forward_expand(g, out));
    for (int i = 0; i < g->n_nodes; i++) {
        /* views are no work (graph_compute skips them), so a backend is asked only about the ops it computes */
        if (!tg_op_is_view(g->nodes[i]->op) && !tg_backend_supports_op(be, g->nodes[i])) goto done;
    }
    r.supported = true;
    /* in place: the result takes the memory of the chosen source, which must be
     * a tensor of its own with the result's layout (the allocator's rule) */
    struct tg_tensor *share = NULL;
    if (allow_inplace && c->inplace != IP_NONE) {
        struct tg_tensor *s = out->src[c->inplace == IP_SRC0 ? 0 : 1];
        const bool eligible = s && !s->view_src && !out->view_src && tg_op_can_inplace(out->op) &&
                              tg_are_same_layout(out, s);
        CHECK_MSG(eligible, "%s: the grid asks for in-place over a source that cannot take it", c->label);
        if (eligible) share = s;
    }
    tg_buffer_type *buft = tg_backend_get_default_buffer_type(be);
    const size_t align = tg_buft_get_alignment(buft) > 256 ? tg_buft_get_alignment(buft) : 256;
    size_t offs[MAX_BINDINGS], total = GUARD_BYTES;
    struct tg_tensor *owned[MAX_BINDINGS];
    int n_owned = 0;
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t; t = tg_context_next_tensor(ctx, t)) {
        if (t->view_src || t == (share ? out : NULL)) continue;
        CHECK_MSG(n_owned < MAX_BINDINGS, "%s: more than %d tensors", c->label, MAX_BINDINGS);
        if (n_owned == MAX_BINDINGS) goto done;
        total = align_up(total, align);
        offs[n_owned] = total;
        owned[n_owned++] = t;
        total = align_up(total + tg_nbytes(t), align) + GUARD_BYTES;
    }
    /* binding reserves a tensor's allocation size, which may pass its bytes
     * (a padded type): room for that past the last guard */
    struct tg_tensor *probe = tg_new_tensor_1d(gctx, TG_TYPE_I8, (int64_t)total);
    buf = tg_buft_alloc_buffer(buft, probe ? tg_buft_get_alloc_size(buft, probe) : total);
    CHECK_MSG(buf != NULL, "%s: buffer of %zu bytes: %s", c->label, total, tg_last_error());
    if (!buf) goto done;
    tg_buffer_clear(buf, SENTINEL);
    uint8_t *base = tg_buffer_get_base(buf);
    /* guard tensors cover every gap: before the first tensor, between, after the last */
    struct tg_tensor *guards[MAX_BINDINGS + 1];
    size_t prev_end = 0;
    for (int i = 0; i <= n_owned; i++) {
        const size_t end = i < n_owned ? offs[i] : total;
        guards[i] = tg_new_tensor_1d(gctx, TG_TYPE_I8, (int64_t)(end - prev_end));
        CHECK_OK(tg_tensor_bind(guards[i], buf, base + prev_end));
        if (i < n_owned) {
            CHECK_OK(tg_tensor_bind(owned[i], buf, base + offs[i]));
            prev_end = offs[i] + tg_nbytes(owned[i]);
        }
    }
    if (share) CHECK_OK(tg_tensor_bind(out, buf, share->data));
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t; t = tg_context_next_tensor(ctx, t)) {
        if (t->view_src) CHECK_OK(tg_tensor_view_bind(t));
    }
    /* leafs in creation order from the same stream: both backends see the same inputs */
    rng_state = seed;
    uint8_t *scratch = malloc(total);
    for (int i = 0; i < n_owned; i++) {
        if (owned[i]->op == TG_OP_NONE) fill_leaf(owned[i], c, scratch);
    }
    free(scratch);
    tg_clear_error();
    r.status = tg_backend_graph_compute(be, g);
    snprintf(r.error, sizeof r.error, "%s", tg_last_error());
    tg_backend_synchronize(be);
    r.values = read_elements(out);
    r.n = tg_nelements(out);
    for (int i = 0; i <= n_owned; i++) {
        const size_t n = tg_nbytes(guards[i]);
        uint8_t *bytes = malloc(n ? n : 1);
        CHECK_OK(tg_tensor_get(guards[i], bytes, 0, n));
        for (size_t k = 0; k < n; k++) r.guard_errors += bytes[k] != SENTINEL;
        free(bytes);
    }
done:
    tg_buffer_free(buf);
    tg_graph_free(g);
    tg_context_free(gctx);
    tg_context_free(ctx);
    return r;
}

/* ---- comparison ----------------------------------------------------------------------- */

/* A NaN on either side counts; infinities must agree exactly; NMSE over the rest. */
struct diff diff_values(const double *want, const double *got, int64_t n) {
    struct diff d;
    memset(&d, 0, sizeof d);
    double err = 0.0, ref = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double x = want[i], y = got[i];
        if (isnan(x) || isnan(y)) {
            d.nan++;
            continue;
        }
        if (isinf(x) || isinf(y)) {
            d.inf_mismatch += x != y;
            continue;
        }
        d.differ += x != y;
        err += (x - y) * (x - y);
        ref += x * x;
    }
    d.nmse = ref > 0.0 ? err / ref : err;
    return d;
}


struct verdict compare_on(tg_backend *ref, tg_backend *test, const struct op_case *c, uint64_t seed) {
    struct verdict v;
    memset(&v, 0, sizeof v);
    struct run_result want = run_case(ref, c, false, seed);
    v.reference_ran = want.supported;
    if (!want.supported) return v;
    struct run_result got = run_case(test, c, true, seed);
    if (want.status != TG_OK || want.guard_errors) v.bad |= BAD_REFERENCE;
    if (!got.supported) {
        v.bad |= BAD_UNSUPPORTED;
    } else {
        v.guard_errors = got.guard_errors;
        if (got.guard_errors) v.bad |= BAD_GUARD;
    }
    if (got.supported && got.status != TG_OK) {
        v.bad |= BAD_COMPUTE; /* no values to judge */
    } else if (got.supported) {
        v.d = diff_values(want.values, got.values, want.n);
        if (v.d.nan) v.bad |= BAD_NAN;
        if (v.d.inf_mismatch) v.bad |= BAD_INF;
        if (c->max_nmse < 0 ? v.d.differ != 0 : v.d.nmse > c->max_nmse) v.bad |= c->max_nmse < 0 ? BAD_EXACT : BAD_NMSE;
    }
    snprintf(v.why, sizeof v.why, "%s%s%s: NMSE %.3g (bound %.3g), %d NaN, %d infinities differ, %d values differ, %d "
             "guard bytes written%s%s",
             v.bad & BAD_UNSUPPORTED ? "the CPU computes it but the backend refuses it; " : "",
             v.bad & BAD_REFERENCE ? "the CPU reference failed; " : "", c->label, v.d.nmse, c->max_nmse, v.d.nan,
             v.d.inf_mismatch, v.d.differ, v.guard_errors, v.bad & BAD_COMPUTE ? "; compute failed: " : "",
             v.bad & BAD_COMPUTE ? got.error : "");
    free(want.values);
    free(got.values);
    return v;
}

/* ---- the grid --------------------------------------------------------------------------- */

struct op_case base_case(enum case_kind kind, const int64_t ne[4]) {
    struct op_case c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    memcpy(c.ne, ne, sizeof c.ne);
    c.type = TG_TYPE_F32;
    c.type2 = TG_TYPE_F32;
    c.lo = -1.0f;
    c.hi = 1.0f;
    c.max_nmse = 1e-7;
    return c;
}

/* Name of the op a case checks, for the table: sub-ops spelled out, and the
 * types where kernels differ by type (one row per type or type pair). */
static void row_name(const struct op_case *c, char *out, size_t n) {
    const char *t1 = tg_type_name(c->type), *t2 = tg_type_name(c->type2);
    switch (c->kind) {
    case K_BINARY: snprintf(out, n, "%s", binary_names[c->sub]); break;
    case K_UNARY: snprintf(out, n, "unary:%s", unary_names[c->sub]); break;
    case K_GLU: case K_GLU_SPLIT: snprintf(out, n, "%s:%s", kind_names[c->kind], glu_names[c->sub]); break;
    case K_GET_ROWS: case K_MUL_MAT: snprintf(out, n, "%s:%s", kind_names[c->kind], t1); break;
    case K_CPY: snprintf(out, n, "cpy:%s->%s", t1, t2); break;
    case K_SET_ROWS: snprintf(out, n, "set_rows:f32->%s", t2); break;
    case K_FLASH_ATTN: snprintf(out, n, "flash_attn_ext:k/v %s", t2); break;
    case K_IM2COL: snprintf(out, n, "im2col:%s", t2); break;
    default: snprintf(out, n, "%s", kind_names[c->kind]); break;
    }
}

void finish_label(struct op_case *c) {
    char name[48];
    row_name(c, name, sizeof name);
    snprintf(c->label, sizeof c->label, "%s %s->%s sub=%d/%d f=%g/%g ne=[%lld,%lld,%lld,%lld] %s%s", name,
             tg_type_name(c->type), tg_type_name(c->type2), c->sub, c->sub2, c->f0, c->f1, (long long)c->ne[0],
             (long long)c->ne[1], (long long)c->ne[2], (long long)c->ne[3], layout_names[c->layout],
             c->inplace == IP_SRC0 ? " in-place(src0)" : c->inplace == IP_SRC1 ? " in-place(src1)" : "");
}


/* Adds c in every layout; in-place variants (contiguous only: the allocator
 * shares only tensors of their own, never views) when the op can run in place:
 * over src0 always, over src1 when src1_same_layout. */
/* The layouts ggml accepts for a kind: packed rows for unary, glu and
 * set_rows' new rows (its constructors, op_rules.c) and for flash
 * attention's q, k, v (its CPU kernel); a contiguous soft_max input. */
static unsigned accepted_layouts(enum case_kind kind) {
    switch (kind) {
    case K_UNARY: case K_GLU: case K_GLU_SPLIT: case K_SET_ROWS: case K_FLASH_ATTN:
        return (1u << L_CONTIGUOUS) | (1u << L_PERMUTED);
    case K_SOFT_MAX: return 1u << L_CONTIGUOUS;
    default: return (1u << L_COUNT) - 1;
    }
}

static void add_layouts_in(struct grid *gr, struct op_case c, bool src1_same_layout, unsigned layouts) {
    layouts &= accepted_layouts(c.kind);
    for (int l = 0; l < L_COUNT; l++) {
        if (!(layouts & (1u << l))) continue;
        for (int ip = IP_NONE; ip <= IP_SRC1; ip++) {
            if (ip != IP_NONE && (l != L_CONTIGUOUS || !tg_op_can_inplace(kind_ops[c.kind]))) continue;
            if (ip == IP_SRC1 && !src1_same_layout) continue;
            if (gr->n == MAX_CASES) return;
            c.layout = (enum layout)l;
            c.inplace = (enum inplace)ip;
            finish_label(&c);
            gr->cases[gr->n++] = c;
        }
    }
}

static void add_layouts(struct grid *gr, struct op_case c, bool src1_same_layout) {
    add_layouts_in(gr, c, src1_same_layout, (1u << L_COUNT) - 1);
}

/* Quantized operands hold whole blocks in their rows: never transposed. */
#define ROWS_PACKED ((1u << L_CONTIGUOUS) | (1u << L_PERMUTED))

static const enum tg_type quant_types[] = {TG_TYPE_Q4_0, TG_TYPE_Q4_1, TG_TYPE_Q5_0, TG_TYPE_Q5_1,
                                           TG_TYPE_Q8_0, TG_TYPE_Q4_K, TG_TYPE_Q6_K};
#define N_QUANT ((int)(sizeof quant_types / sizeof quant_types[0]))

/* Every quantized type: get_rows from it, cpy out of it, mul_mat with weights
 * of it; data movement exact, mul_mat within its bound.  Copies into a
 * quantized type are refused by the device (test_cuda_backend checks it). */
static void build_quant_grid(struct grid *gr) {
    struct op_case c;
    for (int t = 0; t < N_QUANT; t++) {
        const enum tg_type q = quant_types[t];
        const bool k_quant = tg_blck_size(q) == 256;
        const int64_t rows_ne[4] = {k_quant ? 256 : 64, 6, 2, 1};
        for (int mode = 0; mode < 2; mode++) {
            c = base_case(K_GET_ROWS, rows_ne);
            c.type = q;
            c.sub = 5;
            c.sub2 = mode;
            c.max_nmse = -1;
            add_layouts_in(gr, c, false, ROWS_PACKED);
        }
        const int64_t copy_ne[4] = {k_quant ? 256 : 64, 32, 2, 1}; /* cpy sub 0 swaps ne0, ne1 */
        c = base_case(K_CPY, copy_ne);
        c.type = q;
        c.type2 = TG_TYPE_F32;
        c.max_nmse = -1;
        add_layouts_in(gr, c, false, ROWS_PACKED);
        const int64_t same_ne[4] = {256, 256, 1, 1};
        c = base_case(K_CPY, same_ne);
        c.type = c.type2 = q;
        c.max_nmse = -1;
        add_layouts_in(gr, c, false, 1u << L_CONTIGUOUS);
        static const int64_t mm_ne[][4] = {{256, 16, 1, 1}, {512, 33, 2, 1}};
        for (int s = 0; s < 2; s++) {
            for (int n_cols = 1; n_cols <= 17; n_cols += 16) {
                c = base_case(K_MUL_MAT, mm_ne[s]);
                c.type = q;
                c.sub = n_cols;
                c.sub2 = s + 1;
                c.max_nmse = 5e-4;
                add_layouts_in(gr, c, false, ROWS_PACKED);
            }
        }
    }
    /* im2col: 1-D (kernel 3, stride 1 pad 1; stride 2 pad 0) and 2-D, f32 and f16 results */
    static const int64_t im_ne[][4] = {{50, 8, 2, 1}, {31, 8, 1, 1}, {12, 10, 4, 2}};
    for (int v = 0; v < 3; v++) {
        for (int out = 0; out < 2; out++) {
            c = base_case(K_IM2COL, im_ne[v]);
            c.type2 = out ? TG_TYPE_F16 : TG_TYPE_F32;
            c.sub = 3;
            c.sub2 = v == 2;
            c.f0 = v == 1 ? 2.0f : (v == 2 ? 2.0f : 1.0f);
            c.f1 = v == 1 ? 0.0f : 1.0f;
            c.max_nmse = -1;
            add_layouts(gr, c, false);
        }
    }
}

static const int64_t shapes[][4] = {{7, 3, 2, 1}, {32, 5, 3, 2}, {1, 1, 1, 1}, {300, 4, 1, 1}, {1000, 2, 2, 1}};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

void build_grid(struct grid *gr) {
    struct op_case c;
    for (int si = 0; si < N_SHAPES; si++) {
        const int64_t *ne = shapes[si];
        /* element-wise, with broadcasting b (sub2 bits) and mixed types */
        for (int op = 0; op < 4; op++) {
            for (int bcast = 0; bcast < 16; bcast += 5) {
                c = base_case(K_BINARY, ne);
                c.sub = op;
                c.sub2 = bcast;
                if (op == 3) c.lo = 0.5f, c.hi = 2.0f;
                add_layouts(gr, c, bcast == 0);
            }
            static const enum tg_type types[][2] = {{TG_TYPE_F16, TG_TYPE_F32}, {TG_TYPE_F16, TG_TYPE_F16},
                                                    {TG_TYPE_BF16, TG_TYPE_F32}};
            for (int t = 0; t < 3; t++) {
                c = base_case(K_BINARY, ne);
                c.sub = op;
                c.type = types[t][0];
                c.type2 = types[t][1];
                if (op == 3) c.lo = 0.5f, c.hi = 2.0f;
                add_layouts(gr, c, c.type == c.type2);
            }
        }
        add_layouts(gr, base_case(K_ADD1, ne), false);
        c = base_case(K_SCALE, ne);
        c.f0 = 0.37f;
        c.f1 = -0.5f;
        add_layouts(gr, c, false);
        add_layouts(gr, base_case(K_SQR, ne), false);
        c = base_case(K_SQRT, ne);
        c.lo = 0.1f, c.hi = 3.0f;
        add_layouts(gr, c, false);
        c.kind = K_LOG;
        add_layouts(gr, c, false);
        c = base_case(K_FILL, ne);
        c.f0 = 1.25f;
        add_layouts(gr, c, false);
        for (int u = 0; u < TG_UNARY_COUNT; u++) {
            if (u == TG_UNARY_XIELU) continue; /* parameterized: no CUDA kernel (the CPU takes it) */
            c = base_case(K_UNARY, ne);
            c.sub = u;
            c.lo = -3.0f, c.hi = 3.0f;
            add_layouts(gr, c, false);
        }
        c = base_case(K_UNARY, ne);
        c.sub = TG_UNARY_SILU;
        c.type = c.type2 = TG_TYPE_F16;
        add_layouts(gr, c, false);
        c = base_case(K_DIAG_MASK_INF, ne);
        c.sub = 1;
        add_layouts(gr, c, false);
        /* rows */
        add_layouts(gr, base_case(K_RMS_NORM, ne), false);
        add_layouts(gr, base_case(K_NORM, ne), false);
        for (int m = 0; m < 5; m++) {
            c = base_case(K_SOFT_MAX, ne);
            c.sub2 = m;
            c.f0 = m == 1 ? 8.0f : 0.0f;
            add_layouts(gr, c, m == 3);
        }
        if (ne[0] % 2 == 0) {
            for (int mode = 0; mode <= 2; mode += 2) {
                for (int yarn = 0; yarn < 3; yarn++) {
                    for (int t = 0; t < 2; t++) {
                        c = base_case(K_ROPE, ne);
                        c.sub = mode;
                        c.sub2 = ne[0] % 4 == 0 ? 2 : 1; /* partial rotation where it fits */
                        c.f1 = yarn == 1 ? 1.0f : 0.0f;
                        c.f0 = yarn == 2 ? 1.0f : 0.0f; /* frequency factors */
                        c.type = c.type2 = t ? TG_TYPE_F16 : TG_TYPE_F32;
                        add_layouts(gr, c, false);
                    }
                }
            }
            for (int g = 0; g < TG_GLU_COUNT; g++) {
                for (int sw = 0; sw < 2; sw++) {
                    c = base_case(K_GLU, ne);
                    c.sub = g;
                    c.sub2 = sw;
                    add_layouts(gr, c, false);
                }
            }
        }
        for (int g = 0; g < TG_GLU_COUNT; g++) {
            c = base_case(K_GLU_SPLIT, ne);
            c.sub = g;
            add_layouts(gr, c, false);
        }
        add_layouts(gr, base_case(K_SUM_ROWS, ne), false);
        /* data movement: exact */
        for (int d = 0; d < 4; d++) {
            for (int t = 0; t < 2; t++) {
                c = base_case(K_CONCAT, ne);
                c.sub = d;
                c.type = c.type2 = t ? TG_TYPE_I32 : TG_TYPE_F32;
                c.max_nmse = -1;
                add_layouts(gr, c, false);
            }
        }
        static const enum tg_type copy_types[][2] = {
            {TG_TYPE_F32, TG_TYPE_F32}, {TG_TYPE_F32, TG_TYPE_F16},  {TG_TYPE_F16, TG_TYPE_F32},
            {TG_TYPE_F32, TG_TYPE_BF16}, {TG_TYPE_BF16, TG_TYPE_F32}, {TG_TYPE_I32, TG_TYPE_I32},
            {TG_TYPE_F16, TG_TYPE_F16}, {TG_TYPE_F16, TG_TYPE_BF16}};
        for (size_t t = 0; t < sizeof copy_types / sizeof copy_types[0]; t++) {
            for (int dst_kind = 0; dst_kind < 2; dst_kind++) {
                c = base_case(K_CPY, ne);
                c.type = copy_types[t][0];
                c.type2 = copy_types[t][1];
                c.sub = dst_kind;
                c.max_nmse = -1;
                add_layouts(gr, c, false);
            }
        }
        static const enum tg_type cont_types[] = {TG_TYPE_F32, TG_TYPE_F16, TG_TYPE_I32};
        for (int t = 0; t < 3; t++) {
            c = base_case(K_CONT, ne);
            c.type = c.type2 = cont_types[t];
            c.max_nmse = -1;
            add_layouts(gr, c, false);
        }
        c = base_case(K_DUP, ne);
        c.max_nmse = -1;
        add_layouts(gr, c, false);
        static const enum tg_type row_types[] = {TG_TYPE_F32, TG_TYPE_F16, TG_TYPE_BF16, TG_TYPE_I32};
        for (int t = 0; t < 4; t++) {
            for (int mode = 0; mode < 4; mode++) {
                if ((t > 0 && mode > 0) || mode == 2) continue; /* index modes once, on f32 */
                c = base_case(K_GET_ROWS, ne);
                c.type = row_types[t];
                c.type2 = t == 3 ? TG_TYPE_I32 : TG_TYPE_F32;
                c.sub = (int)(ne[1] + 1); /* more rows than the source has: repeats are legal here */
                if (mode != 3) c.sub = (int)(ne[1] > 1 ? ne[1] - 1 : 1);
                if (mode == 1 && ne[1] < 2) continue; /* no room for an in-range row next to the bad ones */
                c.sub2 = mode;
                c.max_nmse = -1;
                add_layouts(gr, c, false);
            }
        }
        for (int t = 0; t < 3; t++) {
            for (int mode = 0; mode < 5; mode++) {
                if (t > 0 && mode > 0) continue;
                c = base_case(K_SET_ROWS, ne);
                c.type2 = t == 0 ? TG_TYPE_F32 : (t == 1 ? TG_TYPE_F16 : TG_TYPE_BF16);
                c.sub = (int)(ne[1] > 1 ? ne[1] / 2 + 1 : 1);
                if (mode == 1) c.sub = (int)(ne[1] + 2); /* more new rows than destination rows: repeats */
                if (mode == 2 && ne[1] < 3) continue;
                c.sub2 = mode;
                c.max_nmse = -1;
                add_layouts(gr, c, false);
            }
        }
    }
    /* mul_mat: f32/f16/bf16 weights, several N, broadcast over dim 2 */
    static const int64_t mm_shapes[][4] = {{64, 16, 1, 1}, {33, 7, 2, 1}, {256, 48, 3, 2}, {1, 1, 1, 1}};
    for (size_t s = 0; s < sizeof mm_shapes / sizeof mm_shapes[0]; s++) {
        for (int wt = 0; wt < 3; wt++) {
            for (int n_cols = 1; n_cols <= 33; n_cols += 16) {
                for (int r2 = 1; r2 <= 2; r2++) {
                    if (wt == 2 && (n_cols != 17 || r2 != 2)) continue; /* bf16 once per shape */
                    c = base_case(K_MUL_MAT, mm_shapes[s]);
                    c.type = wt == 0 ? TG_TYPE_F32 : (wt == 1 ? TG_TYPE_F16 : TG_TYPE_BF16);
                    c.sub = n_cols;
                    c.sub2 = r2;
                    c.max_nmse = 5e-4;
                    add_layouts(gr, c, false);
                }
            }
        }
    }
    /* flash attention: head sizes, masks, GQA, Dv != D, ALiBi and softcap */
    static const int64_t fa_shapes[][4] = {{64, 1, 4, 1}, {64, 7, 4, 2}, {128, 32, 2, 1}, {40, 3, 8, 1}};
    for (size_t s = 0; s < sizeof fa_shapes / sizeof fa_shapes[0]; s++) {
        for (int variant = 0; variant < 10; variant++) {
            for (int kv_type = 0; kv_type < 2; kv_type++) {
                if (kv_type == 1 && variant != 3) continue; /* f32 k/v once per shape */
                if (variant == 8) continue;                 /* 9: sinks with the mask of bit 0 */
                c = base_case(K_FLASH_ATTN, fa_shapes[s]);
                c.type2 = kv_type ? TG_TYPE_F32 : TG_TYPE_F16;
                c.sub = s == 2 ? 256 : 67;
                c.sub2 = variant;
                c.f0 = variant == 5 ? 8.0f : 0.0f; /* ALiBi (with the mask of bit 0) */
                c.f1 = variant == 6 ? 20.0f : 0.0f; /* softcap */
                c.max_nmse = 5e-4;
                add_layouts(gr, c, false);
            }
        }
        c = base_case(K_FLASH_ATTN, fa_shapes[s]);
        c.type2 = TG_TYPE_F16;
        c.sub = s == 2 ? 256 : 67;
        c.sub2 = 16;
        c.max_nmse = 5e-4;
        add_layouts_in(gr, c, false, 1u << L_CONTIGUOUS);
    }
    build_quant_grid(gr);
}

/* ---- running the grid and the table -------------------------------------------------------- */

struct table_row {
    char name[48];
    int cases, by_layout[L_COUNT], inplace_src0, inplace_src1, failed;
    double bound, max_nmse;
};

static struct table_row rows[256];
static int n_rows;

static struct table_row *row_for(const struct op_case *c) {
    char name[48];
    row_name(c, name, sizeof name);
    for (int i = 0; i < n_rows; i++) {
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    }
    if (n_rows == (int)(sizeof rows / sizeof rows[0])) return &rows[n_rows - 1];
    struct table_row *r = &rows[n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->bound = c->max_nmse;
    return r;
}

static void print_table(const char *backend) {
    printf("== per-op max NMSE (%s vs CPU) ==\n", backend);
    printf("%-28s %6s %6s %6s %6s %6s %6s %8s %10s %s\n", "op", "cases", "contig", "transp", "permut", "ip:s0",
           "ip:s1", "bound", "max NMSE", "failed");
    for (int i = 0; i < n_rows; i++) {
        const struct table_row *r = &rows[i];
        char bound[16];
        if (r->bound < 0) snprintf(bound, sizeof bound, "exact");
        else snprintf(bound, sizeof bound, "%.0e", r->bound);
        printf("%-28s %6d %6d %6d %6d %6d %6d %8s %10.3g %d\n", r->name, r->cases, r->by_layout[L_CONTIGUOUS],
               r->by_layout[L_TRANSPOSED], r->by_layout[L_PERMUTED], r->inplace_src0, r->inplace_src1, bound,
               r->max_nmse, r->failed);
    }
    printf("== end of table ==\n");
}

/* Compares every case of the grid on test against the CPU (see op_grid.h). */
struct grid_totals run_grid(tg_backend *cpu, tg_backend *test, bool refusals_fail) {
    struct grid_totals tot = {0};
    struct grid gr = {malloc(MAX_CASES * sizeof(struct op_case)), 0};
    if (!gr.cases) {
        tot.failed++;
        fprintf(stderr, "op grid: out of host memory for the cases\n");
        return tot;
    }
    build_grid(&gr);
    CHECK(gr.n > 0 && gr.n < MAX_CASES);
    n_rows = 0;
    int inplace = 0;
    for (int i = 0; i < gr.n; i++) {
        const struct op_case *c = &gr.cases[i];
        const struct verdict v = compare_on(cpu, test, c, (uint64_t)i + 1);
        if (!v.reference_ran) {
            /* every case is meant for the CPU: one it refuses checks nothing */
            tot.cpu_refused++;
            tot.failed++;
            fprintf(stderr, "op grid: %s: the CPU does not compute this case (fix the grid)\n", c->label);
            continue;
        }
        if (v.bad == BAD_UNSUPPORTED && !refusals_fail) {
            tot.refused++; /* not claimed by the backend: nothing to judge */
            continue;
        }
        if (v.bad != 0) {
            tot.failed++;
            if (tot.failed <= 20) fprintf(stderr, "op grid: %s: %s\n", tg_backend_name(test), v.why);
        }
        struct table_row *r = row_for(c);
        r->cases++;
        r->by_layout[c->layout]++;
        r->inplace_src0 += c->inplace == IP_SRC0;
        r->inplace_src1 += c->inplace == IP_SRC1;
        r->failed += v.bad != 0;
        if (v.d.nmse > r->max_nmse) r->max_nmse = v.d.nmse;
        inplace += c->inplace != IP_NONE;
        tot.compared++;
    }
    if (tot.failed > 20) fprintf(stderr, "op grid: ... %d failing cases in all\n", tot.failed);
    print_table(tg_backend_name(test));
    printf("%d cases compared (%d in place), %d not claimed by the backend, %d not computed by the CPU\n",
           tot.compared, inplace, tot.refused, tot.cpu_refused);
    free(gr.cases);
    return tot;
}

int op_grid_harness_failures(void) { return tg_test_failed_; }

/* CUDA vs CPU, op by op (test-backend-ops style): each case builds a one-op
 * graph twice from the same description, binds every tensor inside a buffer of
 * the backend with 1 KiB of sentinel bytes around it, fills the inputs with the
 * same random data, computes, and compares the outputs: NMSE within the op's
 * bound (exact for data movement), no NaN, infinities at the same places, and
 * every sentinel byte untouched.  Inputs come in contiguous, transposed and
 * permuted layouts, and in-place-capable ops also run with dst over src0.
 * Skips (exit 77) without a CUDA device. */
#include "tg_test.h"

#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg.h"

#include <stdint.h>

#define GUARD_BYTES 1024
#define SENTINEL 0xA5
#define MAX_BINDINGS 64

enum case_kind {
    K_BINARY, K_ADD1, K_SCALE, K_SQR, K_SQRT, K_LOG, K_FILL, K_UNARY, K_GLU, K_GLU_SPLIT,
    K_RMS_NORM, K_NORM, K_SOFT_MAX, K_ROPE, K_MUL_MAT, K_GET_ROWS, K_SET_ROWS, K_CPY, K_CONT,
    K_DUP, K_DIAG_MASK_INF, K_CONCAT, K_SUM_ROWS
};

enum layout { L_CONTIGUOUS, L_TRANSPOSED, L_PERMUTED };

struct op_case {
    enum case_kind kind;
    int64_t ne[4];
    enum layout layout; /* of the first operand */
    bool inplace;       /* on CUDA, bind the result over src0 */
    enum tg_type type;  /* first operand's type */
    enum tg_type type2; /* second operand / destination type where the op has one */
    int sub;            /* binary op, unary/glu sub-op, dim, rope mode, ... */
    int sub2;           /* glu swapped, rope n_dims divisor, mask kind, broadcast pattern */
    float f0, f1;       /* scale/bias, fill value, max_bias, ext_factor */
    float lo, hi;       /* range of float inputs */
    double max_nmse;    /* negative: exact */
    char label[160];
};

/* Set by the checker self-test: run_case then corrupts one guard byte. */
static bool inject_guard_fault;

/* ---- deterministic inputs -------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi) { return lo + (hi - lo) * (float)((rng_next() >> 11) * (1.0 / 9007199254740992.0)); }

/* A leaf of type t whose view has shape ne in the requested layout. */
static struct tg_tensor *make_input(struct tg_context *ctx, enum tg_type t, const int64_t ne[4], enum layout layout) {
    if (layout == L_TRANSPOSED) {
        struct tg_tensor *leaf = tg_new_tensor_4d(ctx, t, ne[1], ne[0], ne[2], ne[3]);
        return tg_transpose(ctx, leaf);
    }
    if (layout == L_PERMUTED) {
        struct tg_tensor *leaf = tg_new_tensor_4d(ctx, t, ne[0], ne[2], ne[1], ne[3]);
        return tg_permute(ctx, leaf, 0, 2, 1, 3);
    }
    return tg_new_tensor_4d(ctx, t, ne[0], ne[1], ne[2], ne[3]);
}

/* Index leafs [n, ne1, ne2] are tagged by name so the filler gives each group
 * of n valid, distinct values (distinct: set_rows must not race on a row). */
static struct tg_tensor *make_indices(struct tg_context *ctx, int64_t n, int64_t ne1, int64_t ne2, int64_t range) {
    struct tg_tensor *t = tg_new_tensor_3d(ctx, TG_TYPE_I32, n, ne1, ne2);
    if (t) tg_format_name(t, "indices<%lld", (long long)range);
    return t;
}

static struct tg_tensor *build_case(struct tg_context *ctx, const struct op_case *c) {
    const int64_t *ne = c->ne;
    struct tg_tensor *a = make_input(ctx, c->type, ne, c->layout);
    switch (c->kind) {
    case K_BINARY: {
        /* sub2 bit i: b is broadcast (extent 1) along dim i */
        int64_t nb_[4];
        for (int i = 0; i < 4; i++) nb_[i] = (c->sub2 >> i) & 1 ? 1 : ne[i];
        struct tg_tensor *b = tg_new_tensor_4d(ctx, c->type2, nb_[0], nb_[1], nb_[2], nb_[3]);
        switch (c->sub) {
        case 0: return tg_add(ctx, a, b);
        case 1: return tg_sub(ctx, a, b);
        case 2: return tg_mul(ctx, a, b);
        default: return tg_div(ctx, a, b);
        }
    }
    case K_ADD1: return tg_add1(ctx, a, tg_new_tensor_1d(ctx, c->type, 1));
    case K_SCALE: return tg_scale_bias(ctx, a, c->f0, c->f1);
    case K_SQR: return tg_sqr(ctx, a);
    case K_SQRT: return tg_sqrt(ctx, a);
    case K_LOG: return tg_log(ctx, a);
    case K_FILL: return tg_fill(ctx, a, c->f0);
    case K_UNARY: return tg_unary(ctx, a, (enum tg_unary_op)c->sub);
    case K_GLU: return tg_glu(ctx, a, (enum tg_glu_op)c->sub, c->sub2 != 0);
    case K_GLU_SPLIT: return tg_glu_split(ctx, a, tg_new_tensor_4d(ctx, c->type, ne[0], ne[1], ne[2], ne[3]), (enum tg_glu_op)c->sub);
    case K_RMS_NORM: return tg_rms_norm(ctx, a, 1e-5f);
    case K_NORM: return tg_norm(ctx, a, 1e-5f);
    case K_SOFT_MAX: {
        struct tg_tensor *mask = NULL;
        if (c->sub2 == 1) mask = tg_new_tensor_2d(ctx, c->type2, ne[0], ne[1] + 3);
        if (c->sub2 == 2) mask = tg_new_tensor_4d(ctx, c->type2, ne[0], ne[1], 1, ne[3]);
        return tg_soft_max(ctx, a, mask, 0.7f, c->f0);
    }
    case K_ROPE: {
        const int n_dims = (int)(ne[0] / c->sub2);
        return tg_rope(ctx, a, make_indices(ctx, ne[2], 1, 1, 4 * ne[2] + 5), n_dims, c->sub, 512, 10000.0f,
                       c->f1 != 0.0f ? 0.25f : 1.0f, c->f1, 1.0f, 32.0f, 1.0f);
    }
    case K_MUL_MAT: {
        /* a: [K, M, ne2, ne3] weights; b: [K, N, ne2*r2, ne3] with sub = N, sub2 = r2 */
        const int64_t nb_[4] = {ne[0], c->sub, ne[2] * c->sub2, ne[3]};
        struct tg_tensor *b = make_input(ctx, c->type2, nb_, c->layout);
        struct tg_tensor *w = tg_new_tensor_4d(ctx, c->type, ne[0], ne[1], ne[2], ne[3]);
        (void)a;
        return tg_mul_mat(ctx, w, b);
    }
    case K_GET_ROWS: return tg_get_rows(ctx, a, make_indices(ctx, c->sub, ne[2], ne[3], ne[1]));
    case K_SET_ROWS: {
        struct tg_tensor *dst = tg_new_tensor_4d(ctx, c->type2, ne[0], ne[1], ne[2], ne[3]);
        struct tg_tensor *rows = tg_new_tensor_4d(ctx, TG_TYPE_F32, ne[0], c->sub, ne[2], ne[3]);
        (void)a;
        return tg_set_rows(ctx, dst, rows, make_indices(ctx, c->sub, 1, 1, ne[1]));
    }
    case K_CPY: {
        /* the destination: same count, its own shape (ne0 and ne1 swapped) */
        struct tg_tensor *b = tg_new_tensor_4d(ctx, c->type2, ne[1], ne[0], ne[2], ne[3]);
        return tg_cpy(ctx, a, b);
    }
    case K_CONT: return tg_cont(ctx, a);
    case K_DUP: return tg_dup(ctx, a);
    case K_DIAG_MASK_INF: return tg_diag_mask_inf(ctx, a, c->sub);
    case K_CONCAT: {
        int64_t nb_[4] = {ne[0], ne[1], ne[2], ne[3]};
        nb_[c->sub] = ne[c->sub] + 2;
        return tg_concat(ctx, a, make_input(ctx, c->type, nb_, L_CONTIGUOUS), c->sub);
    }
    case K_SUM_ROWS: return tg_sum_rows(ctx, a);
    }
    return NULL;
}

static void fill_leaf(struct tg_tensor *t, const struct op_case *c, uint8_t *scratch) {
    const int64_t n = tg_nelements(t);
    long long range = 0;
    if (sscanf(t->name, "indices<%lld", &range) == 1 && t->type == TG_TYPE_I32) {
        /* distinct values: a shuffled prefix of 0..range-1 */
        int32_t *v = (int32_t *)scratch;
        int32_t *pool = malloc((size_t)range * sizeof *pool);
        const int64_t group = t->ne[0];
        for (int64_t g0 = 0; g0 < n; g0 += group) {
            for (long long i = 0; i < range; i++) pool[i] = (int32_t)i;
            for (int64_t i = 0; i < group; i++) {
                const long long j = i + (long long)(rng_next() % (uint64_t)(range - i));
                const int32_t tmp = pool[i];
                pool[i] = pool[j];
                pool[j] = tmp;
                v[g0 + i] = pool[i];
            }
        }
        free(pool);
        CHECK_OK(tg_tensor_set(t, v, 0, (size_t)n * sizeof *v));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const float x = rng_uniform(c->lo, c->hi);
        switch (t->type) {
        case TG_TYPE_F32: ((float *)scratch)[i] = x; break;
        case TG_TYPE_F16: ((uint16_t *)scratch)[i] = tg_fp32_to_fp16(x); break;
        case TG_TYPE_BF16: ((uint16_t *)scratch)[i] = tg_fp32_to_bf16(x); break;
        case TG_TYPE_I32: ((int32_t *)scratch)[i] = (int32_t)(x * 100.0f); break;
        default: break;
        }
    }
    CHECK_OK(tg_tensor_set(t, scratch, 0, tg_nbytes(t)));
}

/* Every element of t as a double (exact for f32/f16/bf16/i32). */
static double *read_elements(const struct tg_tensor *t) {
    const size_t bytes = tg_nbytes(t);
    uint8_t *raw = malloc(bytes ? bytes : 1);
    double *out = malloc((size_t)(tg_nelements(t) ? tg_nelements(t) : 1) * sizeof *out);
    CHECK_OK(tg_tensor_get(t, raw, 0, bytes));
    int64_t k = 0;
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
                    default: break;
                    }
                    out[k++] = v;
                }
    free(raw);
    return out;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct run_result {
    bool ran;         /* false: the backend does not support the graph */
    double *values;
    int64_t n;
    int guard_errors; /* sentinel bytes that changed */
};

/* Build, bind with guards, fill, compute on one backend, read the output. */
static struct run_result run_case(tg_backend *be, const struct op_case *c, bool inplace, uint64_t seed) {
    struct run_result r = {0};
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_context *gctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    struct tg_tensor *out = build_case(ctx, c);
    CHECK_MSG(out != NULL, "%s: constructor failed: %s", c->label, tg_last_error());
    if (!out) goto done;
    CHECK_OK(tg_graph_build_forward_expand(g, out));
    for (int i = 0; i < g->n_nodes; i++) {
        if (!tg_backend_supports_op(be, g->nodes[i])) goto done;
    }
    /* inplace: the result takes src0's memory when the layouts agree */
    struct tg_tensor *share = NULL;
    if (inplace && out->src[0] && !out->view_src && !out->src[0]->view_src && tg_are_same_layout(out, out->src[0])) {
        share = out->src[0];
    }
    tg_buffer_type *buft = tg_backend_get_default_buffer_type(be);
    const size_t align = tg_buft_get_alignment(buft) > 256 ? tg_buft_get_alignment(buft) : 256;
    size_t offs[MAX_BINDINGS], total = GUARD_BYTES;
    struct tg_tensor *owned[MAX_BINDINGS];
    int n_owned = 0;
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t; t = tg_context_next_tensor(ctx, t)) {
        if (t->view_src || t == share || n_owned == MAX_BINDINGS) continue;
        total = align_up(total, align);
        offs[n_owned] = total;
        owned[n_owned++] = t;
        total += tg_nbytes(t) + GUARD_BYTES;
    }
    tg_buffer *buf = tg_buft_alloc_buffer(buft, total);
    CHECK_MSG(buf != NULL, "%s: buffer of %zu bytes: %s", c->label, total, tg_last_error());
    if (!buf) goto done;
    tg_buffer_clear(buf, SENTINEL);
    uint8_t *base = tg_buffer_get_base(buf);
    /* guard tensors over every gap: before the first tensor, between, after the last */
    struct tg_tensor *guards[MAX_BINDINGS + 1];
    size_t prev_end = 0;
    for (int i = 0; i <= n_owned; i++) {
        const size_t start = prev_end, end = i < n_owned ? offs[i] : total;
        guards[i] = tg_new_tensor_1d(gctx, TG_TYPE_I8, (int64_t)(end - start));
        CHECK_OK(tg_tensor_bind(guards[i], buf, base + start));
        if (i < n_owned) {
            CHECK_OK(tg_tensor_bind(owned[i], buf, base + offs[i]));
            prev_end = offs[i] + tg_nbytes(owned[i]);
        }
    }
    if (share) CHECK_OK(tg_tensor_bind(out, buf, share->data));
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t; t = tg_context_next_tensor(ctx, t)) {
        if (t->view_src) CHECK_OK(tg_tensor_view_bind(t));
    }
    rng_state = seed;
    uint8_t *scratch = malloc(total);
    for (int i = 0; i < n_owned; i++) {
        if (owned[i]->op == TG_OP_NONE) fill_leaf(owned[i], c, scratch);
    }
    free(scratch);
    CHECK_MSG(tg_backend_graph_compute(be, g) == TG_OK, "%s on %s: %s", c->label, tg_backend_name(be), tg_last_error());
    tg_backend_synchronize(be);
    if (inject_guard_fault) {
        /* a stray write just past the last owned tensor's bytes */
        const uint8_t stray = (uint8_t)~SENTINEL;
        CHECK_OK(tg_tensor_set(guards[n_owned], &stray, 0, 1));
    }
    r.ran = true;
    r.values = read_elements(out);
    r.n = tg_nelements(out);
    for (int i = 0; i <= n_owned; i++) {
        const size_t n = tg_nbytes(guards[i]);
        uint8_t *bytes = malloc(n ? n : 1);
        CHECK_OK(tg_tensor_get(guards[i], bytes, 0, n));
        for (size_t k = 0; k < n; k++) r.guard_errors += bytes[k] != SENTINEL;
        free(bytes);
    }
    tg_buffer_free(buf);
done:
    tg_graph_free(g);
    tg_context_free(gctx);
    tg_context_free(ctx);
    return r;
}

/* ---- comparison ----------------------------------------------------------------------- */

static double worst_nmse[32];
static int n_compared, n_cpu_unsupported;

struct diff {
    double nmse;
    int nan, inf_mismatch, differ;
};

/* NaN anywhere counts; infinities must agree exactly; NMSE over the rest. */
static struct diff diff_values(const double *want, const double *got, int64_t n) {
    struct diff d = {0};
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

static bool diff_ok(struct diff d, double max_nmse) {
    return d.nan == 0 && d.inf_mismatch == 0 && (max_nmse < 0 ? d.differ == 0 : d.nmse <= max_nmse);
}

static void compare_case(tg_backend *cpu, tg_backend *cuda, const struct op_case *c, uint64_t seed) {
    struct run_result want = run_case(cpu, c, false, seed);
    if (!want.ran) {
        n_cpu_unsupported++;
        return;
    }
    struct run_result got = run_case(cuda, c, c->inplace, seed);
    CHECK_MSG(got.ran, "%s: the CPU computes it but CUDA's supports_op refuses", c->label);
    CHECK_MSG(want.guard_errors == 0, "%s: CPU wrote %d sentinel bytes", c->label, want.guard_errors);
    if (got.ran) {
        CHECK_MSG(got.guard_errors == 0, "%s: CUDA wrote %d sentinel bytes outside the tensors", c->label, got.guard_errors);
        const struct diff d = diff_values(want.values, got.values, want.n);
        CHECK_MSG(diff_ok(d, c->max_nmse), "%s: NMSE %.3g (bound %.3g), %d NaN, %d infinities differ, %d of %lld values differ",
                  c->label, d.nmse, c->max_nmse, d.nan, d.inf_mismatch, d.differ, (long long)want.n);
        if (d.nmse > worst_nmse[c->kind]) worst_nmse[c->kind] = d.nmse;
        n_compared++;
    }
    free(want.values);
    free(got.values);
}

/* The checks must fire on the faults they exist for: a perturbed value, a NaN,
 * a misplaced infinity, a one-ulp change in an exact op, a written guard byte. */
static void self_test_checkers(tg_backend *cpu) {
    double want[4] = {1.0, -2.0, INFINITY, 0.5};
    double got[4] = {1.0, -2.0, INFINITY, 0.5};
    CHECK(diff_ok(diff_values(want, got, 4), -1));
    got[1] = -2.001;
    CHECK(!diff_ok(diff_values(want, got, 4), 1e-7));
    CHECK(diff_ok(diff_values(want, got, 4), 1e-6));
    got[1] = nextafter(-2.0, 0.0);
    CHECK(!diff_ok(diff_values(want, got, 4), -1));
    got[1] = -2.0;
    got[2] = -INFINITY;
    CHECK(!diff_ok(diff_values(want, got, 4), 1.0));
    got[2] = INFINITY;
    got[0] = NAN;
    CHECK(!diff_ok(diff_values(want, got, 4), 1.0));

    /* the same case twice on the CPU agrees exactly and leaves the guards alone */
    struct op_case c;
    memset(&c, 0, sizeof c);
    c.kind = K_BINARY;
    c.ne[0] = 9, c.ne[1] = 4, c.ne[2] = 2, c.ne[3] = 1;
    c.type = c.type2 = TG_TYPE_F32;
    c.sub2 = 5;
    c.lo = -1.0f, c.hi = 1.0f;
    snprintf(c.label, sizeof c.label, "self-test add");
    struct run_result a = run_case(cpu, &c, false, 99);
    struct run_result b = run_case(cpu, &c, false, 99);
    CHECK(a.ran && b.ran && a.guard_errors == 0 && b.guard_errors == 0);
    if (a.ran && b.ran) CHECK(diff_ok(diff_values(a.values, b.values, a.n), -1));
    free(a.values);
    free(b.values);
    /* a kernel writing one byte past its tensor is caught */
    inject_guard_fault = true;
    struct run_result f = run_case(cpu, &c, false, 99);
    inject_guard_fault = false;
    CHECK(f.ran && f.guard_errors == 1);
    free(f.values);
}

/* ---- the grid --------------------------------------------------------------------------- */

static const int64_t shapes[][4] = {{7, 3, 2, 1}, {32, 5, 3, 2}, {1, 1, 1, 1}, {300, 4, 1, 1}, {1000, 2, 2, 1}};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static struct op_case base_case(enum case_kind kind, const int64_t ne[4]) {
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

static void run_grid(tg_backend *cpu, tg_backend *cuda) {
    static const char *kind_names[] = {"binary", "add1", "scale", "sqr", "sqrt", "log", "fill", "unary", "glu",
                                       "glu_split", "rms_norm", "norm", "soft_max", "rope", "mul_mat", "get_rows",
                                       "set_rows", "cpy", "cont", "dup", "diag_mask_inf", "concat", "sum_rows"};
    uint64_t seed = 1;
    struct op_case cases[64];
    for (int si = 0; si < N_SHAPES; si++) {
        const int64_t *ne = shapes[si];
        for (int layout = 0; layout < 3; layout++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                if (inplace && layout != L_CONTIGUOUS) continue;
                int n = 0;
                for (int op = 0; op < 4; op++) {
                    for (int bcast = 0; bcast < 16; bcast += 5) {
                        struct op_case c = base_case(K_BINARY, ne);
                        c.sub = op;
                        c.sub2 = bcast;
                        if (op == 3) c.lo = 0.5f, c.hi = 2.0f;
                        cases[n++] = c;
                    }
                }
                cases[n++] = base_case(K_ADD1, ne);
                struct op_case c = base_case(K_SCALE, ne);
                c.f0 = 0.37f;
                c.f1 = -0.5f;
                cases[n++] = c;
                cases[n++] = base_case(K_SQR, ne);
                c = base_case(K_SQRT, ne);
                c.lo = 0.1f, c.hi = 3.0f;
                cases[n++] = c;
                c.kind = K_LOG;
                cases[n++] = c;
                c = base_case(K_FILL, ne);
                c.f0 = 1.25f;
                cases[n++] = c;
                for (int u = 0; u < TG_UNARY_COUNT; u++) {
                    c = base_case(K_UNARY, ne);
                    c.sub = u;
                    c.lo = -3.0f, c.hi = 3.0f;
                    cases[n++] = c;
                }
                cases[n++] = base_case(K_RMS_NORM, ne);
                cases[n++] = base_case(K_NORM, ne);
                for (int m = 0; m < 3; m++) {
                    c = base_case(K_SOFT_MAX, ne);
                    c.sub2 = m;
                    c.type2 = m == 2 ? TG_TYPE_F16 : TG_TYPE_F32;
                    c.f0 = m == 1 ? 8.0f : 0.0f;
                    cases[n++] = c;
                }
                c = base_case(K_DIAG_MASK_INF, ne);
                c.sub = 1;
                cases[n++] = c;
                if (ne[0] % 2 == 0) {
                    for (int mode = 0; mode <= 2; mode += 2) {
                        for (int yarn = 0; yarn < 2; yarn++) {
                            c = base_case(K_ROPE, ne);
                            c.sub = mode;
                            c.sub2 = ne[0] % 4 == 0 ? 2 : 1;
                            c.f1 = yarn ? 1.0f : 0.0f;
                            cases[n++] = c;
                        }
                    }
                }
                for (int k = 0; k < n; k++) {
                    cases[k].layout = (enum layout)layout;
                    cases[k].inplace = inplace; /* every op of this group may run in place */
                    snprintf(cases[k].label, sizeof cases[k].label, "%s sub=%d/%d ne=[%lld,%lld,%lld,%lld] layout=%d%s",
                             kind_names[cases[k].kind], cases[k].sub, cases[k].sub2, (long long)ne[0], (long long)ne[1],
                             (long long)ne[2], (long long)ne[3], layout, inplace ? " inplace" : "");
                    compare_case(cpu, cuda, &cases[k], seed++);
                }
            }
        }
        /* ops that are never in place */
        for (int layout = 0; layout < 3; layout++) {
            int n = 0;
            struct op_case c;
            if (ne[0] % 2 == 0) {
                for (int g = 0; g < TG_GLU_COUNT; g++) {
                    for (int sw = 0; sw < 2; sw++) {
                        c = base_case(K_GLU, ne);
                        c.sub = g;
                        c.sub2 = sw;
                        cases[n++] = c;
                    }
                }
            }
            for (int g = 0; g < TG_GLU_COUNT; g++) {
                c = base_case(K_GLU_SPLIT, ne);
                c.sub = g;
                cases[n++] = c;
            }
            cases[n++] = base_case(K_SUM_ROWS, ne);
            for (int d = 0; d < 4; d++) {
                c = base_case(K_CONCAT, ne);
                c.sub = d;
                c.max_nmse = -1;
                cases[n++] = c;
            }
            static const enum tg_type copy_types[][2] = {{TG_TYPE_F32, TG_TYPE_F32}, {TG_TYPE_F32, TG_TYPE_F16},
                                                         {TG_TYPE_F16, TG_TYPE_F32}, {TG_TYPE_F32, TG_TYPE_BF16},
                                                         {TG_TYPE_BF16, TG_TYPE_F32}, {TG_TYPE_I32, TG_TYPE_I32},
                                                         {TG_TYPE_I32, TG_TYPE_F32}, {TG_TYPE_F16, TG_TYPE_F16}};
            for (size_t t = 0; t < sizeof copy_types / sizeof copy_types[0]; t++) {
                c = base_case(K_CPY, ne);
                c.type = copy_types[t][0];
                c.type2 = copy_types[t][1];
                c.max_nmse = -1;
                cases[n++] = c;
            }
            c = base_case(K_CONT, ne);
            c.max_nmse = -1;
            cases[n++] = c;
            c.type = TG_TYPE_F16;
            cases[n++] = c;
            c = base_case(K_DUP, ne);
            c.max_nmse = -1;
            cases[n++] = c;
            for (int t = 0; t < 3; t++) {
                c = base_case(K_GET_ROWS, ne);
                c.type = t == 0 ? TG_TYPE_F32 : (t == 1 ? TG_TYPE_F16 : TG_TYPE_I32);
                c.sub = (int)(ne[1] > 1 ? ne[1] - 1 : 1);
                c.max_nmse = -1;
                cases[n++] = c;
            }
            for (int t = 0; t < 2; t++) {
                c = base_case(K_SET_ROWS, ne);
                c.type2 = t == 0 ? TG_TYPE_F32 : TG_TYPE_F16;
                c.sub = (int)(ne[1] > 1 ? ne[1] / 2 : 1);
                c.max_nmse = -1;
                cases[n++] = c;
            }
            for (int k = 0; k < n; k++) {
                cases[k].layout = (enum layout)layout;
                snprintf(cases[k].label, sizeof cases[k].label, "%s sub=%d/%d %s->%s ne=[%lld,%lld,%lld,%lld] layout=%d",
                         kind_names[cases[k].kind], cases[k].sub, cases[k].sub2, tg_type_name(cases[k].type),
                         tg_type_name(cases[k].type2), (long long)ne[0], (long long)ne[1], (long long)ne[2],
                         (long long)ne[3], layout);
                compare_case(cpu, cuda, &cases[k], seed++);
            }
        }
    }
    /* mul_mat: f32 and f16 weights, several N, broadcast over dim 2, b contiguous or permuted */
    static const int64_t mm_shapes[][4] = {{64, 16, 1, 1}, {33, 7, 2, 1}, {256, 48, 3, 2}, {1, 1, 1, 1}};
    for (size_t s = 0; s < sizeof mm_shapes / sizeof mm_shapes[0]; s++) {
        for (int wt = 0; wt < 2; wt++) {
            for (int n_cols = 1; n_cols <= 33; n_cols += 16) {
                for (int r2 = 1; r2 <= 2; r2++) {
                    for (int layout = 0; layout < 3; layout++) {
                        struct op_case c = base_case(K_MUL_MAT, mm_shapes[s]);
                        c.type = wt ? TG_TYPE_F16 : TG_TYPE_F32;
                        c.sub = n_cols;
                        c.sub2 = r2;
                        c.layout = (enum layout)layout;
                        c.max_nmse = 5e-4;
                        snprintf(c.label, sizeof c.label, "mul_mat %s K=%lld M=%lld N=%d r2=%d layout=%d",
                                 tg_type_name(c.type), (long long)c.ne[0], (long long)c.ne[1], n_cols, r2, layout);
                        compare_case(cpu, cuda, &c, seed++);
                    }
                }
            }
        }
    }
    printf("%d cases compared, %d not computed by the CPU\n", n_compared, n_cpu_unsupported);
    printf("%-14s %s\n", "op", "max NMSE");
    for (size_t k = 0; k < sizeof kind_names / sizeof kind_names[0]; k++) printf("%-14s %.3g\n", kind_names[k], worst_nmse[k]);
}

int main(void) {
    tg_backend *cpu = tg_backend_cpu_new();
    CHECK(cpu != NULL);
    if (cpu) self_test_checkers(cpu);
    if (tg_cuda_device_count() == 0) {
        tg_backend_free(cpu);
        printf("no CUDA device: skipping (%d checker self-test checks passed, %d failed)\n", tg_test_passed_,
               tg_test_failed_);
        return tg_test_failed_ ? 1 : 77;
    }
    tg_backend *cuda = tg_backend_cuda_new(0);
    CHECK_MSG(cuda != NULL, "%s", tg_last_error());
    if (cpu && cuda) {
        /* supports_op must be exact: a quantized matmul is refused up front */
        struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
        struct tg_tensor *q = tg_new_tensor_2d(ctx, TG_TYPE_Q4_0, 64, 4);
        struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 2);
        struct tg_tensor *mm = tg_mul_mat(ctx, q, x);
        CHECK(mm != NULL && !tg_backend_supports_op(cuda, mm));
        tg_context_free(ctx);
        run_grid(cpu, cuda);
        CHECK(n_compared > 100);
    }
    tg_backend_free(cuda);
    tg_backend_free(cpu);
    return tg_test_finish();
}

/* Every CPU kernel against a straightforward reference written here (double
 * precision, logical indices through tg_get_f32_nd), on contiguous inputs and
 * on permuted (transposed view) inputs, in place where the op allows, with 1
 * and 3 threads. */
#include "tg-alloc.h"
#include "tg-cpu.h"
#include "tg_test.h"

#include <math.h>

#define MEM (32u << 20)

static struct tg_context *ctx;
static unsigned rng = 12345;

static float frand(float lo, float hi) {
    rng = rng * 1103515245u + 12345u;
    return lo + (hi - lo) * (float)((rng >> 8) & 0xffff) / 65536.0f;
}

static void fill(struct tg_tensor *t, float lo, float hi) {
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) tg_set_f32_nd(t, i0, i1, i2, i3, frand(lo, hi));
}

/* A [n0, n1, n2, n3] input: contiguous, or a transposed view of a [n1, n0, ...]
 * tensor (so its nb[0] > nb[1]: non-contiguous). */
static struct tg_tensor *input(enum tg_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3, bool permuted,
                               float lo, float hi) {
    struct tg_tensor *t;
    if (permuted) {
        struct tg_tensor *base = tg_new_tensor_4d(ctx, type, n1, n0, n2, n3);
        t = tg_permute(ctx, base, 1, 0, 2, 3);
    } else {
        t = tg_new_tensor_4d(ctx, type, n0, n1, n2, n3);
    }
    fill(t, lo, hi);
    return t;
}

/* The same with packed rows (ggml requires them for unary, glu, set_rows):
 * dims 1 and 2 swapped, a view of a [n0, n2, n1, n3] tensor. */
static struct tg_tensor *input_rows(enum tg_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3, bool permuted,
                                    float lo, float hi) {
    if (!permuted) return input(type, n0, n1, n2, n3, false, lo, hi);
    struct tg_tensor *t = tg_permute(ctx, tg_new_tensor_4d(ctx, type, n0, n2, n1, n3), 0, 2, 1, 3);
    fill(t, lo, hi);
    return t;
}

typedef double (*ref_fn)(const struct tg_tensor *out, int64_t i0, int64_t i1, int64_t i2, int64_t i3);

static int run_case(const char *what, struct tg_tensor *out, ref_fn ref, double tol, int nth) {
    CHECK_MSG(out != NULL, "%s: the constructor refused: %s", what, tg_last_error());
    if (!out) return 1;
    struct tg_graph *g = tg_graph_new(64);
    CHECK_OK(tg_graph_build_forward_expand(g, out));
    enum tg_status st = tg_cpu_compute_graph(g, nth);
    CHECK_MSG(st == TG_OK, "%s: compute: %s", what, tg_last_error());
    int bad = 0;
    double worst = 0;
    for (int64_t i3 = 0; i3 < out->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < out->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < out->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < out->ne[0]; i0++) {
                    double want = ref(out, i0, i1, i2, i3), got = tg_get_f32_nd(out, i0, i1, i2, i3);
                    double err = fabs(got - want) / fmax(1.0, fabs(want));
                    if (isinf(want) && got == want) err = 0;
                    if (!(err <= tol)) bad++;
                    if (err > worst || isnan(err)) worst = err;
                }
    CHECK_MSG(bad == 0, "%s (%d threads): %d elements off, worst relative error %g", what, nth, bad, worst);
    tg_graph_free(g);
    return bad;
}

static double get(const struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return tg_get_f32_nd(t, i0, i1, i2, i3);
}

/* ---- references ---------------------------------------------------------------------- */

static double ref_binary(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *a = o->src[0], *b = o->src[1];
    double x = get(a, i0, i1, i2, i3), y = get(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
    switch (o->op) {
    case TG_OP_ADD: case TG_OP_ADD1: return x + y;
    case TG_OP_SUB: return x - y;
    case TG_OP_MUL: return x * y;
    default: return x / y;
    }
}

static double silu(double x) { return x / (1 + exp(-x)); }
static double gelu(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

static double ref_unary_value(int op, double x) {
    switch (op) {
    case TG_UNARY_ABS: return fabs(x);
    case TG_UNARY_SGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case TG_UNARY_NEG: return -x;
    case TG_UNARY_STEP: return x > 0 ? 1 : 0;
    case TG_UNARY_TANH: return tanh(x);
    case TG_UNARY_ELU: return x > 0 ? x : exp(x) - 1;
    case TG_UNARY_RELU: return x > 0 ? x : 0;
    case TG_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case TG_UNARY_GELU: return gelu(x);
    case TG_UNARY_GELU_QUICK: return x / (1 + exp(-1.702 * x));
    case TG_UNARY_SILU: return silu(x);
    case TG_UNARY_HARDSWISH: return x * fmin(1, fmax(0, (x + 3) / 6));
    case TG_UNARY_HARDSIGMOID: return fmin(1, fmax(0, (x + 3) / 6));
    case TG_UNARY_EXPM1: return exp(x) - 1;
    case TG_UNARY_SOFTPLUS: return x > 20 ? x : log(1 + exp(x));
    case TG_UNARY_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case TG_UNARY_FLOOR: return floor(x);
    case TG_UNARY_CEIL: return ceil(x);
    case TG_UNARY_ROUND: return round(x);
    case TG_UNARY_TRUNC: return trunc(x);
    default: return exp(x);
    }
}

static double ref_one(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    double x = get(o->src[0], i0, i1, i2, i3);
    switch (o->op) {
    case TG_OP_SCALE: return x * tg_get_op_param_f32(o, 0) + tg_get_op_param_f32(o, 1);
    case TG_OP_SQR: return x * x;
    case TG_OP_SQRT: return sqrt(x);
    case TG_OP_LOG: return log(x);
    case TG_OP_FILL: return tg_get_op_param_f32(o, 0);
    case TG_OP_DIAG_MASK_INF: return i0 > o->op_params[0] + i1 ? -INFINITY : x;
    default:
        if (o->op_params[0] == TG_UNARY_XIELU) { /* the formula ggml_xielu documents, its params as stored */
            const double an = tg_get_op_param_f32(o, 1), ap = tg_get_op_param_f32(o, 2);
            const double beta = tg_get_op_param_f32(o, 3), eps = tg_get_op_param_f32(o, 4);
            return x > 0 ? ap * x * x + beta * x : (exp(fmin(x, eps)) - 1 - x) * an + beta * x;
        }
        return ref_unary_value(o->op_params[0], x);
    }
}

static double glu_value(const struct tg_tensor *o, double x, double g) {
    switch (o->op_params[0]) {
    case TG_GLU_REGLU: return (x > 0 ? x : 0) * g;
    case TG_GLU_GEGLU: return gelu(x) * g;
    case TG_GLU_SWIGLU: return silu(x) * g;
    case TG_GLU_SWIGLU_OAI: {
        double alpha = tg_get_op_param_f32(o, 2), limit = tg_get_op_param_f32(o, 3);
        x = fmin(x, limit);
        g = fmin(fmax(g, -limit), limit);
        return x / (1 + exp(-alpha * x)) * (g + 1);
    }
    case TG_GLU_GEGLU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0))) * g;
    default: return x / (1 + exp(-1.702 * x)) * g; /* geglu_quick */
    }
}

static double ref_glu(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *a = o->src[0], *b = o->src[1];
    if (b) return glu_value(o, get(a, i0, i1, i2, i3), get(b, i0, i1, i2, i3));
    int64_t n = o->ne[0];
    bool sw = o->op_params[1];
    return glu_value(o, get(a, i0 + (sw ? n : 0), i1, i2, i3), get(a, i0 + (sw ? 0 : n), i1, i2, i3));
}

static double ref_norm(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *a = o->src[0];
    double sum = 0, sum2 = 0;
    for (int64_t k = 0; k < a->ne[0]; k++) {
        double v = get(a, k, i1, i2, i3);
        sum += v;
        sum2 += v * v;
    }
    double n = (double)a->ne[0], eps = tg_get_op_param_f32(o, 0);
    if (o->op == TG_OP_RMS_NORM) return get(a, i0, i1, i2, i3) / sqrt(sum2 / n + eps);
    double mean = sum / n;
    return (get(a, i0, i1, i2, i3) - mean) / sqrt(sum2 / n - mean * mean + eps);
}

static double ref_soft_max(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *a = o->src[0], *m = o->src[1];
    double scale = tg_get_op_param_f32(o, 0), max_bias = tg_get_op_param_f32(o, 1);
    double slope = 1;
    if (max_bias > 0) {
        int64_t n_log2 = 1;
        while (n_log2 * 2 <= a->ne[2]) n_log2 *= 2;
        double m0 = pow(2, -max_bias / n_log2), m1 = pow(2, -max_bias / 2 / n_log2);
        slope = i2 < n_log2 ? pow(m0, i2 + 1) : pow(m1, 2 * (i2 - n_log2) + 1);
    }
    double mx = -INFINITY, sum = 0, mine = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k = 0; k < a->ne[0]; k++) {
            double v = get(a, k, i1, i2, i3) * scale + (m ? slope * get(m, k, i1, i2 % m->ne[2], i3 % m->ne[3]) : 0);
            if (pass == 0) mx = fmax(mx, v);
            else {
                sum += exp(v - mx);
                if (k == i0) mine = exp(v - mx);
            }
        }
    }
    return mine / sum;
}

/* rope, every mode, from ggml's documented layout (ggml.h): which pair k
 * dim i0 is in, its partner, which of the token's positions it turns by
 * and from which pair its angle counts; the angle pos * base^(-2 e / n_dims)
 * in double (ext_factor 0 here). */
static double ref_rope(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *a = o->src[0];
    const int n_dims = o->op_params[1], mode = o->op_params[2], offs = o->op_params[15];
    const bool vision = mode == TG_ROPE_VISION, multi = (mode & TG_ROPE_MROPE) != 0;
    int64_t k, j0, j1;
    if (vision) { /* every dim: pairs (k, k + n_dims) */
        k = i0 % n_dims;
        j0 = k;
        j1 = k + n_dims;
    } else if (i0 < offs || i0 >= offs + n_dims) {
        return get(a, i0, i1, i2, i3);
    } else if (mode == TG_ROPE_NORMAL) { /* adjacent pairs */
        k = (i0 - offs) / 2;
        j0 = offs + 2 * k;
        j1 = j0 + 1;
    } else { /* neox and the multimodal modes: halves */
        k = (i0 - offs) % (n_dims / 2);
        j0 = offs + k;
        j1 = j0 + n_dims / 2;
    }
    int which = 0;
    int64_t from = 0; /* the pair the angle counts from */
    if (multi) {
        const int *sec = &o->op_params[11];
        const int start[4] = {0, sec[0], sec[0] + sec[1], sec[0] + sec[1] + sec[2]};
        const int total = start[3] + sec[3];
        const int s = (int)(k % total);
        if (mode == TG_ROPE_IMROPE) /* t, h, w interleaved while each lasts, then extra */
            which = s % 3 == 1 && s < 3 * sec[1] ? 1 : s % 3 == 2 && s < 3 * sec[2] ? 2 : s % 3 == 0 && s < 3 * sec[0] ? 0 : 3;
        else
            which = s < start[1] ? 0 : s < start[2] ? 1 : s < start[3] ? 2 : 3;
        /* vision restarts a position's angle where its section starts, unless
         * an earlier position's section starts there too */
        bool restarts = vision;
        for (int q = 0; q < which; q++) restarts = restarts && start[q] != start[which];
        if (restarts) from = k - (s - start[which]);
    }
    const double base = tg_get_op_param_f32(o, 5), fs = tg_get_op_param_f32(o, 6), attn = tg_get_op_param_f32(o, 8);
    const double pos = tg_get_f32_nd(o->src[1], i2 + which * a->ne[2], 0, 0, 0);
    const double factor = o->src[2] ? tg_get_f32_nd(o->src[2], k, 0, 0, 0) : 1.0;
    const double theta = fs * pos * pow(base, -2.0 * (double)(k - from) / n_dims) / factor;
    const double x0 = get(a, j0, i1, i2, i3), x1 = get(a, j1, i1, i2, i3);
    const double c = cos(theta) * attn, sn = sin(theta) * attn;
    return i0 == j0 ? x0 * c - x1 * sn : x0 * sn + x1 * c;
}

/* v rounded to type t: ggml converts mul_mat's b (and flash attention's q)
 * to an f16/bf16 weight's own type before the products */
static double rounded_to(enum tg_type t, double v) {
    if (t == TG_TYPE_F16) return tg_fp16_to_fp32(tg_fp32_to_fp16((float)v));
    if (t == TG_TYPE_BF16) return tg_bf16_to_fp32(tg_fp32_to_bf16((float)v));
    return v;
}

static double ref_mul_mat(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *a = o->src[0], *b = o->src[1];
    double sum = 0;
    for (int64_t k = 0; k < a->ne[0]; k++) {
        sum += get(a, k, i0, i2 / (b->ne[2] / a->ne[2]), i3 / (b->ne[3] / a->ne[3])) *
               rounded_to(a->type, get(b, k, i1, i2, i3));
    }
    return sum;
}

/* mul_mat with the Hadamard hint: b's row times the normalised Sylvester
 * Hadamard matrix, H[i][j] = (-1)^popcount(i & j) / sqrt(n); a is not read */
static double ref_hadamard(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tg_tensor *b = o->src[1];
    double sum = 0;
    for (int64_t j = 0; j < b->ne[0]; j++) {
        int parity = 0;
        for (int64_t m = i0 & j; m; m >>= 1) parity ^= (int)(m & 1);
        sum += (parity ? -1.0 : 1.0) * get(b, j, i1, i2, i3);
    }
    return sum / sqrt((double)b->ne[0]);
}

static double ref_get_rows(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int64_t row = (int64_t)tg_get_f32_nd(o->src[1], i1, i2, i3, 0);
    return get(o->src[0], i0, row, i2, i3);
}

static const struct tg_tensor *copy_src;
static double ref_copy(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    /* logical element e of the destination is logical element e of the source */
    int64_t e = ((i3 * o->ne[2] + i2) * o->ne[1] + i1) * o->ne[0] + i0;
    const struct tg_tensor *s = copy_src;
    int64_t s0 = e % s->ne[0], r = e / s->ne[0];
    int64_t s1 = r % s->ne[1];
    r /= s->ne[1];
    double v = get(s, s0, s1, r % s->ne[2], r / s->ne[2]);
    if (o->type == TG_TYPE_F16) v = tg_fp16_to_fp32(tg_fp32_to_fp16((float)v));
    if (o->type == TG_TYPE_BF16) v = tg_bf16_to_fp32(tg_fp32_to_bf16((float)v));
    return v;
}

static double ref_copy_of_a(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return get(o->src[0], i0, i1, i2, i3);
}

static double ref_concat(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int dim = o->op_params[0];
    int64_t idx[4] = {i0, i1, i2, i3};
    const struct tg_tensor *from = o->src[0];
    if (idx[dim] >= from->ne[dim]) {
        idx[dim] -= from->ne[dim];
        from = o->src[1];
    }
    return get(from, idx[0], idx[1], idx[2], idx[3]);
}

static double ref_sum_rows(const struct tg_tensor *o, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    (void)i0;
    double s = 0;
    for (int64_t k = 0; k < o->src[0]->ne[0]; k++) s += get(o->src[0], k, i1, i2, i3);
    return s;
}

static double ref_flash(const struct tg_tensor *o, int64_t d, int64_t h, int64_t q, int64_t b) {
    const struct tg_tensor *Q = o->src[0], *K = o->src[1], *V = o->src[2], *M = o->src[3];
    double scale = tg_get_op_param_f32(o, 0);
    int64_t kh = h / (Q->ne[2] / K->ne[2]);
    double mx = -INFINITY, sum = 0, acc = 0;
    double *w = malloc((size_t)K->ne[1] * sizeof *w);
    for (int64_t j = 0; j < K->ne[1]; j++) {
        w[j] = M ? get(M, j, q, 0, 0) : 0;
        if (w[j] == -INFINITY) continue; /* a hidden key is not read (ggml's rule) */
        double s = 0;
        for (int64_t k = 0; k < Q->ne[0]; k++) s += rounded_to(K->type, get(Q, k, q, h, b)) * get(K, k, j, kh, b);
        w[j] += s * scale;
        mx = fmax(mx, w[j]);
    }
    for (int64_t j = 0; j < K->ne[1]; j++) {
        if (w[j] == -INFINITY) continue;
        double e = exp(w[j] - mx);
        sum += e;
        acc += e * get(V, d, j, kh, b);
    }
    free(w);
    return acc / sum;
}

/* ---- cases ---------------------------------------------------------------------------- */

static void both_threads(const char *what, struct tg_tensor *out, ref_fn ref, double tol) {
    run_case(what, out, ref, tol, 1);
    run_case(what, out, ref, tol, 3);
}

/* Runs an in-place-capable op with its result bound to src0's memory. */
static void in_place(const char *what, struct tg_tensor *out, ref_fn ref, double tol) {
    struct tg_tensor *a = out->src[0];
    if (!tg_are_same_layout(out, a)) return;
    /* the reference reads src0, which the in-place run overwrites: keep a copy */
    struct tg_tensor *keep = tg_dup_tensor(ctx, a);
    for (int64_t i = 0; i < tg_nelements(a); i++) ((float *)keep->data)[i] = 0;
    memcpy(keep->data, a->data, tg_nbytes(a));
    struct tg_tensor shadow = *out;
    shadow.src[0] = keep;
    void *own = out->data;
    out->data = a->data;
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_node(g, out));
    CHECK_OK(tg_cpu_compute_graph(g, 2));
    shadow.data = out->data;
    int bad = 0;
    for (int64_t i1 = 0; i1 < out->ne[1] * out->ne[2] * out->ne[3]; i1++)
        for (int64_t i0 = 0; i0 < out->ne[0]; i0++) {
            int64_t j1 = i1 % out->ne[1], j2 = (i1 / out->ne[1]) % out->ne[2], j3 = i1 / (out->ne[1] * out->ne[2]);
            double want = ref(&shadow, i0, j1, j2, j3), got = tg_get_f32_nd(out, i0, j1, j2, j3);
            double err = fabs(got - want) / fmax(1.0, fabs(want));
            if (isinf(want) && got == want) err = 0;
            bad += !(err <= tol);
        }
    CHECK_MSG(bad == 0, "%s in place: %d elements off", what, bad);
    out->data = own;
    tg_graph_free(g);
}

static void test_elementwise(bool perm) {
    const enum tg_op ops[] = {TG_OP_ADD, TG_OP_SUB, TG_OP_MUL, TG_OP_DIV};
    for (int k = 0; k < 4; k++) {
        struct tg_tensor *a = input(TG_TYPE_F32, 12, 7, 3, 2, perm, 0.5f, 2.0f);
        struct tg_tensor *bs[3] = {input(TG_TYPE_F32, 12, 7, 3, 2, false, 0.5f, 2.0f),
                                   input(TG_TYPE_F32, 12, 1, 3, 1, false, 0.5f, 2.0f), /* broadcast */
                                   input(TG_TYPE_F32, 1, 7, 1, 2, perm, 0.5f, 2.0f)};
        for (int j = 0; j < 3; j++) {
            struct tg_tensor *o = k == 0 ? tg_add(ctx, a, bs[j]) : k == 1 ? tg_sub(ctx, a, bs[j])
                                 : k == 2 ? tg_mul(ctx, a, bs[j]) : tg_div(ctx, a, bs[j]);
            char what[64];
            snprintf(what, sizeof what, "%s b%d%s", tg_op_name(ops[k]), j, perm ? " permuted" : "");
            both_threads(what, o, ref_binary, 1e-6);
            if (!perm) in_place(what, o, ref_binary, 1e-6);
        }
    }
    struct tg_tensor *a = input(TG_TYPE_F32, 9, 5, 2, 1, perm, 0.5f, 2.0f);
    both_threads("add1", tg_add1(ctx, a, input(TG_TYPE_F32, 1, 1, 1, 1, false, 1, 2)), ref_binary, 1e-6);
    struct tg_tensor *outs[] = {tg_scale_bias(ctx, a, 0.75f, 0.25f), tg_sqr(ctx, a), tg_sqrt(ctx, a), tg_log(ctx, a),
                                tg_fill(ctx, a, 3.5f), tg_diag_mask_inf(ctx, a, 2)};
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
        both_threads(tg_op_name(outs[k]->op), outs[k], ref_one, 1e-6);
        if (!perm) in_place(tg_op_name(outs[k]->op), outs[k], ref_one, 1e-6);
    }
    struct tg_tensor *signed_in = input_rows(TG_TYPE_F32, 9, 5, 2, 1, perm, -3.0f, 3.0f);
    for (int u = 0; u < TG_UNARY_COUNT; u++) {
        char what[32];
        snprintf(what, sizeof what, "unary %d%s", u, perm ? " permuted" : "");
        struct tg_tensor *o = u == TG_UNARY_XIELU ? tg_xielu(ctx, signed_in, 0.8f, 0.8f, 0.5f, -1e-6f)
                                                  : tg_unary(ctx, signed_in, (enum tg_unary_op)u);
        both_threads(what, o, ref_one, 1e-5);
        if (!perm) in_place(what, o, ref_one, 1e-5);
    }
    for (int op = 0; op < TG_GLU_COUNT; op++) {
        struct tg_tensor *x = input_rows(TG_TYPE_F32, 16, 4, 2, 1, perm, -2.0f, 2.0f);
        struct tg_tensor *y = input(TG_TYPE_F32, 16, 4, 2, 1, false, -2.0f, 2.0f);
        both_threads("glu split", tg_glu_split(ctx, x, y, (enum tg_glu_op)op), ref_glu, 1e-5);
        both_threads("glu fused", tg_glu(ctx, x, (enum tg_glu_op)op, false), ref_glu, 1e-5);
        both_threads("glu fused swapped", tg_glu(ctx, x, (enum tg_glu_op)op, true), ref_glu, 1e-5);
    }
    struct tg_tensor *h = input(TG_TYPE_F16, 10, 3, 2, 1, perm, -1.0f, 1.0f);
    both_threads("scale f16", tg_scale(ctx, h, 2.0f), ref_one, 1e-3);
}

static void test_rows(bool perm) {
    struct tg_tensor *a = input(TG_TYPE_F32, 32, 6, 3, 1, perm, -2.0f, 2.0f);
    struct tg_tensor *o = tg_rms_norm(ctx, a, 1e-5f);
    both_threads("rms_norm", o, ref_norm, 1e-5);
    if (!perm) in_place("rms_norm", o, ref_norm, 1e-5);
    both_threads("norm", tg_norm(ctx, a, 1e-5f), ref_norm, 1e-5);
    struct tg_tensor *m32 = input(TG_TYPE_F32, 32, 8, 1, 1, false, -1.0f, 0.0f);
    struct tg_tensor *m16 = input(TG_TYPE_F16, 32, 6, 1, 1, false, -1.0f, 0.0f);
    /* soft_max: ggml wants a contiguous input */
    struct tg_tensor *sa = perm ? tg_cont(ctx, a) : a;
    if (perm) run_case("cont for soft_max", sa, ref_copy_of_a, 0, 1);
    both_threads("soft_max", tg_soft_max(ctx, sa, NULL, 0.5f, 0.0f), ref_soft_max, 1e-5);
    o = tg_soft_max(ctx, sa, m32, 0.7f, 0.0f);
    both_threads("soft_max mask f32", o, ref_soft_max, 1e-5);
    if (!perm) in_place("soft_max", o, ref_soft_max, 1e-5);
    both_threads("soft_max mask f16 alibi", tg_soft_max(ctx, sa, m16, 1.0f, 8.0f), ref_soft_max, 1e-5);
    struct tg_tensor *pos = tg_new_tensor_1d(ctx, TG_TYPE_I32, 5);
    for (int i = 0; i < 5; i++) ((int32_t *)pos->data)[i] = 3 * i + 1;
    struct tg_tensor *x = input(TG_TYPE_F32, 16, 4, 5, 1, perm, -1.0f, 1.0f);
    for (int mode = 0; mode <= 2; mode += 2) {
        o = tg_rope(ctx, x, pos, 12, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        both_threads(mode ? "rope neox" : "rope normal", o, ref_rope, 1e-4);
        if (!perm) in_place("rope", o, ref_rope, 1e-4);
        o = tg_rope(ctx, x, pos, mode ? 8 : 10, mode, 0, 10000.0f, 0.5f, 0.0f, 1.0f, 32.0f, 1.0f);
        CHECK_OK(tg_rope_set_offset(o, mode ? 6 : 4));
        both_threads(mode ? "rope neox, offset 6" : "rope normal, offset 4", o, ref_rope, 1e-4);
    }
    /* the multimodal modes: four positions per token (time, height, width, extra) */
    struct tg_tensor *pos4 = tg_new_tensor_1d(ctx, TG_TYPE_I32, 4 * 5);
    for (int i = 0; i < 4 * 5; i++) ((int32_t *)pos4->data)[i] = (7 * i + 3) % 23;
    struct tg_tensor *factors = input(TG_TYPE_F32, 8, 1, 1, 1, false, 1.0f, 3.0f);
    const struct {
        const char *name;
        int mode, n_dims, sections[4], offset;
        bool factors;
    } multi[] = {
        {"rope mrope", TG_ROPE_MROPE, 12, {2, 2, 1, 0}, 0, false},
        {"rope mrope, 4 sections, offset 2, factors", TG_ROPE_MROPE, 14, {3, 1, 1, 1}, 2, true},
        {"rope imrope", TG_ROPE_IMROPE, 16, {3, 3, 2, 0}, 0, false},
        {"rope vision", TG_ROPE_VISION, 8, {3, 1, 0, 0}, 0, true},
        {"rope vision, empty first section", TG_ROPE_VISION, 8, {0, 3, 1, 0}, 0, false},
    };
    for (size_t v = 0; v < sizeof multi / sizeof multi[0]; v++) {
        o = tg_rope_multi(ctx, x, pos4, multi[v].factors ? factors : NULL, multi[v].n_dims, multi[v].sections,
                          multi[v].mode, 0, 10000.0f, 1.0f, 0.0f, 0.75f, 32.0f, 1.0f);
        CHECK_MSG(o != NULL, "%s: %s", multi[v].name, tg_last_error());
        if (!o) continue;
        if (multi[v].offset) CHECK_OK(tg_rope_set_offset(o, multi[v].offset));
        both_threads(multi[v].name, o, ref_rope, 1e-4);
        if (!perm) in_place(multi[v].name, o, ref_rope, 1e-4);
    }
    struct tg_tensor *table = input(TG_TYPE_F16, 8, 10, 2, 1, perm, -1.0f, 1.0f);
    struct tg_tensor *rows = tg_new_tensor_2d(ctx, TG_TYPE_I32, 4, 2);
    for (int i = 0; i < 8; i++) ((int32_t *)rows->data)[i] = (i * 7) % 10;
    both_threads("get_rows", tg_get_rows(ctx, table, rows), ref_get_rows, 0);
    struct tg_tensor *big = input(TG_TYPE_F32, 6, 5, 4, 1, perm, -1.0f, 1.0f);
    both_threads("sum_rows", tg_sum_rows(ctx, big), ref_sum_rows, 1e-6);
    for (int dim = 0; dim < 3; dim++) {
        int64_t ne[3] = {6, 5, 4};
        ne[dim] = 3;
        struct tg_tensor *other = input(TG_TYPE_F32, ne[0], ne[1], ne[2], 1, false, -1.0f, 1.0f);
        char what[32];
        snprintf(what, sizeof what, "concat dim %d", dim);
        both_threads(what, tg_concat(ctx, big, other, dim), ref_concat, 0);
    }
    /* copies between types and layouts */
    copy_src = big;
    both_threads("cont", tg_cont(ctx, big), ref_copy, 0);
    both_threads("dup", tg_dup(ctx, big), ref_copy, 0);
    both_threads("cast f16", tg_cast(ctx, big, TG_TYPE_F16), ref_copy, 0);
    struct tg_tensor *dst = input(TG_TYPE_BF16, 120, 1, 1, 1, false, 0, 0);
    both_threads("cpy to bf16 flat", tg_cpy(ctx, big, dst), ref_copy, 0);
    struct tg_tensor *tdst = tg_transpose(ctx, tg_new_tensor_2d(ctx, TG_TYPE_F32, 20, 6));
    struct tg_tensor *src2 = input(TG_TYPE_F32, 6, 20, 1, 1, perm, -1.0f, 1.0f);
    copy_src = src2;
    both_threads("cpy into transposed view", tg_cpy(ctx, src2, tdst), ref_copy, 0);
}

static void test_set_rows(bool perm) {
    struct tg_tensor *cache = tg_new_tensor_2d(ctx, TG_TYPE_F16, 8, 10);
    memset(cache->data, 0, tg_nbytes(cache));
    struct tg_tensor *vals = input_rows(TG_TYPE_F32, 8, 3, 2, 1, perm, -1.0f, 1.0f);
    vals = tg_view_2d(ctx, vals, 8, 3, vals->nb[1], 0); /* the first of the two (packed rows, strided when permuted) */
    struct tg_tensor *idx = tg_new_tensor_1d(ctx, TG_TYPE_I64, 3);
    int64_t at[3] = {7, 2, 5};
    memcpy(idx->data, at, sizeof at);
    struct tg_tensor *o = tg_set_rows(ctx, cache, vals, idx);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, o));
    CHECK_OK(tg_cpu_compute_graph(g, 2));
    int bad = 0;
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < 8; i++) {
            double want = 0;
            for (int k = 0; k < 3; k++) {
                if (at[k] == r) want = tg_fp16_to_fp32(tg_fp32_to_fp16(tg_get_f32_nd(vals, i, k, 0, 0)));
            }
            bad += tg_get_f32_nd(cache, i, r, 0, 0) != want;
        }
    CHECK_MSG(bad == 0, "set_rows%s: %d elements off", perm ? " permuted" : "", bad);
    tg_graph_free(g);
}

/* f16 rows one element wide with a 4-byte stride (a transposed [2, 1] f16:
 * ggml_is_contiguous_rows holds for a one-element row): the kernel reads them
 * as f16, not as the f32 rows a 4-byte stride would suggest. */
static void test_set_rows_f16_column(void) {
    struct tg_tensor *cache = tg_new_tensor_2d(ctx, TG_TYPE_F32, 1, 4);
    memset(cache->data, 0, tg_nbytes(cache));
    struct tg_tensor *base = tg_new_tensor_2d(ctx, TG_TYPE_F16, 2, 1);
    fill(base, -1.0f, 1.0f);
    struct tg_tensor *vals = tg_transpose(ctx, base); /* [1, 2], nb0 = 4 */
    struct tg_tensor *idx = tg_new_tensor_1d(ctx, TG_TYPE_I32, 2);
    const int32_t at[2] = {3, 1};
    memcpy(idx->data, at, sizeof at);
    struct tg_tensor *o = tg_set_rows(ctx, cache, vals, idx);
    CHECK_MSG(o != NULL, "set_rows of f16 one-element rows refused: %s", tg_last_error());
    if (!o) return;
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, o));
    CHECK_OK(tg_cpu_compute_graph(g, 1));
    int bad = 0;
    for (int k = 0; k < 2; k++) bad += tg_get_f32_nd(cache, 0, at[k], 0, 0) != tg_get_f32_nd(base, k, 0, 0, 0);
    bad += tg_get_f32_nd(cache, 0, 0, 0, 0) != 0.0f || tg_get_f32_nd(cache, 0, 2, 0, 0) != 0.0f;
    CHECK_MSG(bad == 0, "set_rows of f16 one-element rows: %d rows off", bad);
    tg_graph_free(g);
}

static void test_matrix(bool perm) {
    struct tg_tensor *w = input(TG_TYPE_F32, 24, 10, 2, 1, false, -1.0f, 1.0f);
    struct tg_tensor *x = input(TG_TYPE_F32, 24, 7, 4, 1, perm, -1.0f, 1.0f); /* broadcast 2 -> 4 */
    both_threads("mul_mat f32", tg_mul_mat(ctx, w, x), ref_mul_mat, 1e-5);
    struct tg_tensor *wh = input(TG_TYPE_F16, 24, 10, 1, 1, false, -1.0f, 1.0f);
    both_threads("mul_mat f16", tg_mul_mat(ctx, wh, x), ref_mul_mat, 1e-5);
    struct tg_tensor *wb = input(TG_TYPE_BF16, 24, 10, 1, 1, false, -1.0f, 1.0f);
    both_threads("mul_mat bf16", tg_mul_mat(ctx, wb, x), ref_mul_mat, 1e-5);
    /* the Hadamard hint: source 0 is not read (here it is not even a Hadamard matrix) */
    if (!perm) {
        struct tg_tensor *hb = input(TG_TYPE_F32, 32, 5, 3, 1, false, -1.0f, 1.0f);
        struct tg_tensor *hm = tg_mul_mat(ctx, input(TG_TYPE_F32, 32, 32, 1, 1, false, -1.0f, 1.0f), hb);
        CHECK_OK(tg_mul_mat_set_hint(hm, TG_HINT_SRC0_IS_HADAMARD));
        both_threads("mul_mat hadamard hint", hm, ref_hadamard, 1e-5);
        struct tg_tensor *plain = tg_mul_mat(ctx, input(TG_TYPE_F32, 32, 32, 1, 1, false, -1.0f, 1.0f), hb);
        CHECK_OK(tg_mul_mat_set_hint(plain, TG_HINT_NONE));
        both_threads("mul_mat hint none", plain, ref_mul_mat, 1e-5);
        CHECK_STATUS(tg_mul_mat_set_hint(plain, (enum tg_op_hint)2), TG_ERR_INVALID);
        CHECK_STATUS(tg_mul_mat_set_hint(hb, TG_HINT_SRC0_IS_HADAMARD), TG_ERR_INVALID);
        /* refused where ggml's transform would not fit: a not square, or n not a power of two */
        struct tg_tensor *wide = tg_mul_mat(ctx, tg_new_tensor_2d(ctx, TG_TYPE_F32, 32, 16), hb);
        CHECK_OK(tg_mul_mat_set_hint(wide, TG_HINT_SRC0_IS_HADAMARD));
        CHECK(!tg_cpu_supports_op(wide));
        struct tg_tensor *x24 = input(TG_TYPE_F32, 24, 2, 1, 1, false, -1.0f, 1.0f);
        struct tg_tensor *odd = tg_mul_mat(ctx, tg_new_tensor_2d(ctx, TG_TYPE_F32, 24, 24), x24);
        CHECK_OK(tg_mul_mat_set_hint(odd, TG_HINT_SRC0_IS_HADAMARD));
        CHECK(!tg_cpu_supports_op(odd));
    }
    struct tg_tensor *q = input(TG_TYPE_F32, 16, 3, 4, 1, perm, -1.0f, 1.0f);
    struct tg_tensor *k = input(TG_TYPE_F16, 16, 9, 2, 1, false, -1.0f, 1.0f);
    struct tg_tensor *v = input(TG_TYPE_F16, 16, 9, 2, 1, false, -1.0f, 1.0f);
    struct tg_tensor *mask = input(TG_TYPE_F16, 9, 4, 1, 1, false, -2.0f, 0.0f);
    both_threads("flash_attn_ext", tg_flash_attn_ext(ctx, q, k, v, mask, 0.25f, 0.0f, 0.0f), ref_flash, 1e-5);
    both_threads("flash_attn_ext no mask", tg_flash_attn_ext(ctx, q, k, v, NULL, 0.25f, 0.0f, 0.0f), ref_flash, 1e-5);
    /* keys the mask hides hold NaN in K and V, as unwritten KV-cache slots may: never read */
    struct tg_tensor *kn = input(TG_TYPE_F16, 16, 9, 2, 1, false, -1.0f, 1.0f);
    struct tg_tensor *vn = input(TG_TYPE_F16, 16, 9, 2, 1, false, -1.0f, 1.0f);
    struct tg_tensor *tail = input(TG_TYPE_F16, 9, 4, 1, 1, false, -2.0f, 0.0f);
    for (int64_t j = 7; j < 9; j++) {
        for (int64_t h = 0; h < 2; h++)
            for (int64_t d = 0; d < 16; d++) {
                tg_set_f32_nd(kn, d, j, h, 0, NAN);
                tg_set_f32_nd(vn, d, j, h, 0, NAN);
            }
        for (int64_t r = 0; r < 4; r++) tg_set_f32_nd(tail, j, r, 0, 0, -INFINITY);
    }
    both_threads("flash_attn_ext hidden NaN keys", tg_flash_attn_ext(ctx, q, kn, vn, tail, 0.25f, 0.0f, 0.0f), ref_flash,
                 1e-5);
}

/* Float to integer where C leaves it undefined (out of range, NaN): the
 * lowest value, what x86's conversion (and so ggml's CPU there) gives; i8
 * the low byte; in range it truncates toward zero. */
static void test_float_to_int(void) {
    const float in[8] = {3e9f, -3e9f, NAN, INFINITY, 1.5f, -2.7f, -2147483648.0f, 300.0f};
    const int32_t want32[8] = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, 1, -2, INT32_MIN, 300};
    const int8_t want8[8] = {0, 0, 0, 0, 1, -2, 0, 44};
    struct tg_tensor *src = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    for (int i = 0; i < 8; i++) ((float *)src->data)[i] = in[i];
    struct tg_tensor *i32 = tg_cpy(ctx, src, tg_new_tensor_1d(ctx, TG_TYPE_I32, 8));
    struct tg_tensor *i8 = tg_cpy(ctx, src, tg_new_tensor_1d(ctx, TG_TYPE_I8, 8));
    CHECK(i32 && i8);
    if (!i32 || !i8) return;
    CHECK_OK(tg_cpu_compute_node(i32, 0, 1));
    const bool computed = tg_cpu_supports_op(i8) && tg_cpu_compute_node(i8, 0, 1) == TG_OK;
    for (int i = 0; i < 8; i++) {
        CHECK_MSG(((int32_t *)i32->data)[i] == want32[i], "f32 %g to i32: %d, want %d", (double)in[i],
                  ((int32_t *)i32->data)[i], want32[i]);
        if (computed)
            CHECK_MSG(((int8_t *)i8->data)[i] == want8[i], "f32 %g to i8: %d, want %d", (double)in[i],
                      ((int8_t *)i8->data)[i], want8[i]);
    }
}

/* gelu's tails and reglu's and geglu's zeros as ggml's CPU has them
 * (vec.h): gelu +0 at or below -10 (the formula gives -0 there) and x at or
 * above 10; where the activation is 0 the gated result is 0 whatever the
 * gate (the formula's 0 x inf is NaN). */
static void test_activation_edges(void) {
    const float x[4] = {-12.0f, -10.0f, 10.0f, 30.0f};
    struct tg_tensor *in = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    for (int i = 0; i < 4; i++) ((float *)in->data)[i] = x[i];
    struct tg_tensor *g = tg_unary(ctx, in, TG_UNARY_GELU);
    CHECK_OK(tg_cpu_compute_node(g, 0, 1));
    const float want[4] = {0.0f, 0.0f, 10.0f, 30.0f};
    for (int i = 0; i < 4; i++) /* +0 at the low tail, as ggml's, not the formula's -0 */
        CHECK_MSG(((float *)g->data)[i] == want[i] && !signbit(((float *)g->data)[i]), "gelu(%g) = %g, want %g",
                  (double)x[i], (double)((float *)g->data)[i], (double)want[i]);
    struct tg_tensor *act = tg_new_tensor_1d(ctx, TG_TYPE_F32, 2), *gate = tg_new_tensor_1d(ctx, TG_TYPE_F32, 2);
    ((float *)act->data)[0] = -1.0f, ((float *)act->data)[1] = -11.0f;
    ((float *)gate->data)[0] = INFINITY, ((float *)gate->data)[1] = NAN;
    const enum tg_glu_op ops[2] = {TG_GLU_REGLU, TG_GLU_GEGLU};
    for (int k = 0; k < 2; k++) {
        struct tg_tensor *r = tg_glu_split(ctx, act, gate, ops[k]);
        CHECK_OK(tg_cpu_compute_node(r, 0, 1));
        CHECK_MSG(((float *)r->data)[k] == 0.0f, "glu %d of %g gated by %g: %g, want 0", (int)ops[k],
                  (double)((float *)act->data)[k], (double)((float *)gate->data)[k], (double)((float *)r->data)[k]);
    }
}

/* Non-finite inputs where ggml propagates NaN: swiglu_oai clamps with
 * std::min / std::clamp, which keep a NaN (fminf drops it, and gave
 * 10.5 and -5.07 here); a soft_max row with +inf or NaN sums to NaN and is
 * NaN throughout (it gave 0 beside the NaN).  A fully masked row is the one
 * deliberate difference (docs/upstream.md): zeros, where ggml gives NaN. */
static void test_nonfinite_rows(void) {
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 2), *g = tg_new_tensor_1d(ctx, TG_TYPE_F32, 2);
    ((float *)x->data)[0] = NAN, ((float *)x->data)[1] = 1.0f;
    ((float *)g->data)[0] = 0.5f, ((float *)g->data)[1] = NAN;
    struct tg_tensor *r = tg_swiglu_oai(ctx, x, g, 1.702f, 7.0f);
    CHECK_OK(tg_cpu_compute_node(r, 0, 1));
    for (int i = 0; i < 2; i++)
        CHECK_MSG(isnan(((float *)r->data)[i]), "swiglu_oai [%d] of a NaN operand: %g, want NaN", i,
                  (double)((float *)r->data)[i]);
    const float rows[3][4] = {{1.0f, INFINITY, 2.0f, 3.0f}, {1.0f, NAN, 2.0f, 3.0f},
                              {-INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    struct tg_tensor *a = tg_new_tensor_2d(ctx, TG_TYPE_F32, 4, 3);
    memcpy(a->data, rows, sizeof rows);
    struct tg_tensor *sm = tg_soft_max(ctx, a, NULL, 1.0f, 0.0f);
    CHECK_OK(tg_cpu_compute_node(sm, 0, 1));
    for (int i = 0; i < 8; i++)
        CHECK_MSG(isnan(((float *)sm->data)[i]), "soft_max of a row with %g: [%d] = %g, want NaN", (double)rows[i / 4][1],
                  i % 4, (double)((float *)sm->data)[i]);
    for (int i = 8; i < 12; i++)
        CHECK_MSG(((float *)sm->data)[i] == 0.0f, "soft_max of a fully masked row: [%d] = %g, want 0", i % 4,
                  (double)((float *)sm->data)[i]);
}

/* A node flagged TG_FLAG_NO_COMPUTE is in the graph but not computed (ggml's
 * nodes without GGML_TENSOR_FLAG_COMPUTE): its copy into a tensor leaves
 * that tensor as it was; the node after it still runs. */
static void test_no_compute(void) {
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4), *state = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    for (int i = 0; i < 4; i++) ((float *)a->data)[i] = (float)(i + 1), ((float *)state->data)[i] = 0.0f;
    struct tg_tensor *copy = tg_cpy(ctx, tg_scale(ctx, a, 3.0f), state), *kept = tg_scale(ctx, a, 2.0f);
    struct tg_graph *g = tg_graph_new(16);
    CHECK(copy && kept && g);
    if (!copy || !kept || !g) return;
    CHECK_OK(tg_graph_build_forward_expand(g, copy));
    CHECK_OK(tg_graph_build_forward_expand(g, kept));
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] != kept) g->nodes[i]->flags |= TG_FLAG_NO_COMPUTE;
    CHECK_OK(tg_cpu_compute_graph(g, 2));
    CHECK_MSG(((float *)state->data)[3] == 0.0f && ((float *)kept->data)[3] == 8.0f, "state[3] %g (want 0), kept[3] %g (want 8)",
              (double)((float *)state->data)[3], (double)((float *)kept->data)[3]);
    tg_graph_free(g);
}

/* A quantized weight whose rows are not packed blocks (dims permuted so that
 * a row steps over whole rows of the base) has no kernel: mul_mat used to
 * accept it and multiply by an uninitialised scratch row.  Swapping dims 1
 * and 2 keeps rows packed and stays supported. */
static void test_quantized_weight_layout(void) {
    struct tg_tensor *w = tg_new_tensor_4d(ctx, TG_TYPE_Q4_0, 32, 2, 32, 2);
    struct tg_tensor *strided = tg_permute(ctx, w, 3, 2, 0, 1); /* [32, 2, 2, 32], nb0 36: one block per 36 bytes */
    struct tg_tensor *x = tg_new_tensor_4d(ctx, TG_TYPE_F32, 32, 3, 2, 32);
    struct tg_tensor *mm = strided && x ? tg_mul_mat(ctx, strided, x) : NULL;
    CHECK_MSG(mm != NULL, "constructor: %s", tg_last_error());
    if (mm) {
        CHECK_MSG(!tg_cpu_supports_op(mm), "mul_mat accepts a q4_0 weight with nb0 %zu (blocks not packed)", strided->nb[0]);
        CHECK_STATUS(tg_cpu_compute_node(mm, 0, 1), TG_ERR_UNSUPPORTED);
    }
    struct tg_tensor *packed = tg_permute(ctx, w, 0, 2, 1, 3);
    struct tg_tensor *y = tg_new_tensor_4d(ctx, TG_TYPE_F32, 32, 3, 2, 2);
    CHECK(packed && y && tg_cpu_supports_op(tg_mul_mat(ctx, packed, y)));
}

/* im2col's output size with a padding above 2^30: 2 * p0 leaves int (the
 * rules compute it in int64); the CPU's check overflowed (UB, and a refusal
 * of a valid node where it wrapped).  Input [0 1 2 3], kernel width 1,
 * stride p0 + 1: output positions 0 and 2 in the padding, 1 at x[1]. */
static void test_im2col_large_padding(void) {
    struct tg_tensor *k = tg_new_tensor_2d(ctx, TG_TYPE_F32, 1, 1);
    struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 4, 1);
    for (int i = 0; i < 4; i++) ((float *)x->data)[i] = (float)i + 10.0f;
    const int p0 = 1 << 30;
    struct tg_tensor *c = tg_im2col(ctx, k, x, p0 + 1, 0, p0, 0, 1, 0, false, TG_TYPE_F32);
    CHECK_MSG(c && c->ne[0] == 1 && c->ne[1] == 3, "constructor: %s", c ? "wrong shape" : tg_last_error());
    if (!c) return;
    CHECK(tg_cpu_supports_op(c));
    CHECK_OK(tg_cpu_compute_node(c, 0, 1));
    const float *got = c->data;
    CHECK_MSG(got[0] == 0.0f && got[1] == 11.0f && got[2] == 0.0f, "im2col [%g, %g, %g], want [0, 11, 0]", (double)got[0],
              (double)got[1], (double)got[2]);
}

/* A node bound to memory whose source is not: a refusal naming the source,
 * not a null dereference in the kernel; and no buffer over a NULL pointer. */
static void test_unbound_source(void) {
    struct tg_context *meta = tg_context_new((struct tg_context_params){.mem_size = 1 << 16, .no_alloc = true});
    struct tg_tensor *in = tg_new_tensor_1d(meta, TG_TYPE_F32, 8);
    tg_set_name(in, "unbound_input");
    struct tg_tensor *out = tg_scale(meta, in, 2.0f);
    tg_buffer *buf = tg_buft_alloc_buffer(tg_cpu_buffer_type(), 4096);
    struct tg_tallocr talloc = tg_tallocr_new(buf);
    CHECK_OK(tg_tallocr_alloc(&talloc, out)); /* the result only */
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, out));
    CHECK_STATUS(tg_cpu_compute_graph(g, 2), TG_ERR_INVALID);
    CHECK_ERR_HAS("unbound_input");
    CHECK_STATUS(tg_cpu_compute_node(out, 0, 1), TG_ERR_INVALID);
    CHECK_ERR_HAS("unbound_input");
    tg_graph_free(g);
    tg_buffer_free(buf);
    tg_context_free(meta);

    CHECK(tg_cpu_buffer_from_ptr(NULL, 64) == NULL);
    CHECK_ERR_HAS("NULL");
    tg_buffer *empty = tg_cpu_buffer_from_ptr(NULL, 0); /* an empty buffer needs no memory */
    CHECK(empty != NULL);
    tg_buffer_free(empty);
}

/* tg_tensor_copy between overlapping views of one CPU tensor copies the
 * source's bytes as they were (memcpy there was undefined: ASan stops at it). */
static void test_overlapping_copy(void) {
    struct tg_context *meta = tg_context_new((struct tg_context_params){.mem_size = 1 << 16, .no_alloc = true});
    struct tg_tensor *t = tg_new_tensor_1d(meta, TG_TYPE_F32, 8);
    enum tg_status st;
    tg_buffer *buf = tg_alloc_ctx_tensors(meta, tg_cpu_buffer_type(), &st);
    CHECK(buf != NULL);
    if (!buf) return;
    float v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    CHECK_OK(tg_tensor_set(t, v, 0, sizeof v));
    CHECK_OK(tg_tensor_copy(tg_view_1d(meta, t, 6, 0), tg_view_1d(meta, t, 6, 2 * sizeof(float))));
    CHECK_OK(tg_tensor_get(t, v, 0, sizeof v));
    for (int i = 2; i < 8; i++) CHECK_MSG(v[i] == (float)(i - 2), "t[%d] = %g, want %d", i, (double)v[i], i - 2);
    tg_buffer_free(buf);
    tg_context_free(meta);
}

static void test_support(void) {
    struct tg_tensor *q = tg_new_tensor_2d(ctx, TG_TYPE_Q4_0, 64, 4);
    struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 2);
    CHECK(tg_cpu_supports_op(tg_mul_mat(ctx, q, x)));
    /* ggml's rule: b is f32 or already the weights' activation type (q8_0 here) */
    CHECK(!tg_cpu_supports_op(tg_mul_mat(ctx, q, tg_new_tensor_2d(ctx, TG_TYPE_F16, 64, 2))));
    CHECK(tg_cpu_supports_op(tg_mul_mat(ctx, q, tg_new_tensor_2d(ctx, TG_TYPE_Q8_0, 64, 2))));
    CHECK(tg_cpu_supports_op(tg_unary(ctx, x, TG_UNARY_XIELU)));
    struct tg_tensor *conv = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4);
    conv->op = TG_OP_CONV_2D;
    CHECK(!tg_cpu_supports_op(conv));
    CHECK_STATUS(tg_cpu_compute_node(conv, 0, 1), TG_ERR_UNSUPPORTED);
    CHECK(tg_cpu_supports_op(tg_add(ctx, x, x)));
    tg_backend *cpu = tg_backend_cpu_new();
    CHECK(!tg_backend_supports_op(cpu, conv));
    tg_backend_cpu_set_plan_only(cpu, true);
    CHECK(tg_backend_supports_op(cpu, conv)); /* plans, but ... */
    struct tg_graph *g = tg_graph_new(4);
    CHECK_OK(tg_graph_add_node(g, conv));
    CHECK_STATUS(tg_backend_graph_compute(cpu, g), TG_ERR_UNSUPPORTED); /* ... refuses to compute */
    tg_graph_free(g);
    tg_backend_free(cpu);
}

/* A node flagged TG_FLAG_NO_COMPUTE is in the graph but never computed, so
 * the CPU backend does not ask it for memory (ggml's CPU skips it alike). */
static void test_no_compute_node_skipped(void) {
    struct tg_context *arena = tg_context_new((struct tg_context_params){.mem_size = 4096});
    struct tg_context *meta = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(arena, TG_TYPE_F32, 8);
    struct tg_tensor *skipped = tg_scale(meta, x, 2.0f); /* no memory */
    skipped->flags |= TG_FLAG_NO_COMPUTE;
    struct tg_tensor *y = tg_scale(arena, x, 3.0f);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_node(g, skipped));
    CHECK_OK(tg_graph_add_node(g, y));
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_OK(tg_tensor_set(x, ones, 0, sizeof ones));
    tg_backend *cpu = tg_backend_cpu_new();
    CHECK_OK(tg_backend_graph_compute(cpu, g));
    CHECK(tg_get_f32_nd(y, 7, 0, 0, 0) == 3.0f);
    tg_backend_free(cpu);
    tg_graph_free(g);
    tg_context_free(meta);
    tg_context_free(arena);
}

int main(void) {
    test_no_compute_node_skipped();
    ctx = tg_context_new((struct tg_context_params){.mem_size = MEM});
    for (int perm = 0; perm < 2; perm++) {
        test_elementwise(perm);
        test_rows(perm);
        test_set_rows(perm);
        test_matrix(perm);
    }
    test_set_rows_f16_column();
    test_support();
    test_float_to_int();
    test_activation_edges();
    test_nonfinite_rows();
    test_no_compute();
    test_quantized_weight_layout();
    test_im2col_large_padding();
    test_unbound_source();
    test_overlapping_copy();
    printf("context used %zu bytes\n", tg_context_used_mem(ctx));
    tg_context_free(ctx);
    return tg_test_finish();
}

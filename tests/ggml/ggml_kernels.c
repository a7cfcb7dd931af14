/* Running one variant of the kernel differential (see tg-ggml-kernels.h):
 * the same operand bytes on both sides, ggml's CPU backend as the reference,
 * tgsched's CPU kernels out of place or in place, element by element. */
#include "tg-ggml-kernels.h"

#include "ggml-cpu.h"
#include "tg-cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kd_fault_src1_as_contiguous;

static const char *const layout_names[KD_LAYOUT_COUNT] = {"contiguous", "transposed", "permuted"};

/* ---- operand values -------------------------------------------------------------------- */

static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float random_value(uint64_t *state, const struct kd_operand *o) {
    double u = (double)(next_random(state) >> 11) / (double)(1ull << 53);
    switch (o->fill) {
    case KD_POSITIVE: return (float)(0.5 + u);
    case KD_INDEX: return (float)(int64_t)(u * (double)o->limit);
    case KD_MASK: return (float)-u;
    case KD_ANY: break;
    }
    return (float)(2.0 * u - 1.0);
}

/* The memory shape of an operand: its base before the transpose or permute. */
static void base_shape(const struct kd_operand *o, int64_t base[4]) {
    switch (o->layout) {
    case KD_TRANSPOSED: base[0] = o->ne[1], base[1] = o->ne[0], base[2] = o->ne[2], base[3] = o->ne[3]; break;
    case KD_PERMUTED: base[0] = o->ne[0], base[1] = o->ne[2], base[2] = o->ne[1], base[3] = o->ne[3]; break;
    default: memcpy(base, o->ne, sizeof o->ne);
    }
}

static void store_value(void *p, enum tg_type type, float v) {
    switch (type) {
    case TG_TYPE_F32: memcpy(p, &v, 4); break;
    case TG_TYPE_F16: { uint16_t h = tg_fp32_to_fp16(v); memcpy(p, &h, 2); break; }
    case TG_TYPE_BF16: { uint16_t h = tg_fp32_to_bf16(v); memcpy(p, &h, 2); break; }
    case TG_TYPE_I32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    default: break;
    }
}

static double load_value(const void *p, enum tg_type type) {
    switch (type) {
    case TG_TYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case TG_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return tg_fp16_to_fp32(h); }
    case TG_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return tg_bf16_to_fp32(h); }
    case TG_TYPE_I32: { int32_t i; memcpy(&i, p, 4); return i; }
    default: return NAN;
    }
}

/* The bytes of each operand's base, contiguous, the same for both sides. */
static void *make_bytes(const struct kd_operand *o, uint64_t *state, size_t *size) {
    int64_t base[4];
    base_shape(o, base);
    int64_t n = base[0] * base[1] * base[2] * base[3];
    size_t es = tg_type_size(o->type);
    uint8_t *bytes = malloc((size_t)n * es + 1);
    for (int64_t i = 0; bytes && i < n; i++) store_value(bytes + (size_t)i * es, o->type, random_value(state, o));
    *size = (size_t)n * es;
    return bytes;
}

/* ---- the two sides --------------------------------------------------------------------- */

struct side_tg {
    struct tg_context *ctx;
    struct tg_graph *graph;
    tg_buffer *buffer;
    struct tg_tensor *base[KD_MAX_OPERANDS], *operand[KD_MAX_OPERANDS], *dst;
};

struct side_ggml {
    struct ggml_context *ctx;
    struct ggml_cgraph *graph;
    struct ggml_tensor *base[KD_MAX_OPERANDS], *operand[KD_MAX_OPERANDS], *dst;
    const struct kd_entry *e;
    enum tg_type type;
    int n_operands;
    bool built, computed;
};

static struct tg_tensor *tg_layout(struct tg_context *ctx, struct tg_tensor *base, enum kd_layout l) {
    if (l == KD_TRANSPOSED) return tg_transpose(ctx, base);
    if (l == KD_PERMUTED) return tg_permute(ctx, base, 0, 2, 1, 3);
    return base;
}

static struct ggml_tensor *ggml_layout(struct ggml_context *ctx, struct ggml_tensor *base, enum kd_layout l) {
    if (l == KD_TRANSPOSED) return ggml_transpose(ctx, base);
    if (l == KD_PERMUTED) return ggml_permute(ctx, base, 0, 2, 1, 3);
    return base;
}

static size_t align_up(size_t x) { return (x + 63) / 64 * 64; }

/* tgsched: bases and the result in one CPU buffer (the result over the first
 * operand when in place), views bound to their roots, bases filled. */
static enum kd_outcome build_tg(struct side_tg *s, const struct kd_entry *e, const struct kd_setup *su,
                                enum tg_type type, bool inplace, void *const *bytes, const size_t *sizes) {
    s->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    s->graph = tg_graph_new(64);
    if (!s->ctx || !s->graph) return KD_TG_REFUSED;
    for (int i = 0; i < su->n; i++) {
        int64_t ne[4];
        base_shape(&su->op[i], ne);
        s->base[i] = tg_new_tensor_4d(s->ctx, su->op[i].type, ne[0], ne[1], ne[2], ne[3]);
        s->operand[i] = s->base[i] ? tg_layout(s->ctx, s->base[i], su->op[i].layout) : NULL;
        if (!s->operand[i]) return KD_TG_REFUSED;
    }
    s->dst = e->build_tg(s->ctx, s->operand, e, type);
    if (!s->dst || tg_graph_build_forward_expand(s->graph, s->dst) != TG_OK || !tg_cpu_supports_op(s->dst)) {
        return KD_TG_REFUSED;
    }
    bool shares = inplace && !s->dst->view_src;
    if (shares && (s->operand[0] != s->base[0] || !tg_are_same_layout(s->dst, s->base[0]))) return KD_NO_VARIANT;
    size_t total = 0;
    for (int i = 0; i < su->n; i++) total += align_up(sizes[i]);
    if (!s->dst->view_src && !shares) total += align_up(tg_nbytes(s->dst));
    s->buffer = tg_buft_alloc_buffer(tg_cpu_buffer_type(), total);
    if (!s->buffer) return KD_TG_REFUSED;
    char *at = tg_buffer_get_base(s->buffer);
    for (int i = 0; i < su->n; i++) {
        if (tg_tensor_bind(s->base[i], s->buffer, at) != TG_OK) return KD_TG_REFUSED;
        at += align_up(sizes[i]);
    }
    if (!s->dst->view_src && tg_tensor_bind(s->dst, s->buffer, shares ? s->base[0]->data : at) != TG_OK) {
        return KD_TG_REFUSED;
    }
    for (int i = 0; i < s->graph->n_nodes; i++) {
        struct tg_tensor *n = s->graph->nodes[i];
        if (n->view_src && !n->buffer && tg_tensor_view_bind(n) != TG_OK) return KD_TG_REFUSED;
    }
    for (int i = 0; i < su->n; i++) {
        if (tg_tensor_set(s->base[i], bytes[i], 0, sizes[i]) != TG_OK) return KD_TG_REFUSED;
    }
    return KD_COMPARED;
}

static void contiguous_strides(const struct tg_tensor *t, size_t nb[4]) {
    nb[0] = tg_type_size(t->type);
    nb[1] = nb[0] * (size_t)(t->ne[0] / tg_blck_size(t->type));
    for (int d = 2; d < 4; d++) nb[d] = nb[d - 1] * (size_t)t->ne[d - 1];
}

static enum kd_outcome compute_tg(struct side_tg *s, int n_threads) {
    struct tg_tensor *b = s->dst->src[1];
    size_t saved[4];
    bool faulty = kd_fault_src1_as_contiguous && b && !tg_is_contiguous(b);
    if (faulty) {
        memcpy(saved, b->nb, sizeof saved);
        contiguous_strides(b, b->nb);
    }
    enum tg_status st = tg_cpu_compute_graph(s->graph, n_threads);
    if (faulty) memcpy(b->nb, saved, sizeof saved);
    return st == TG_OK ? KD_COMPARED : KD_TG_REFUSED;
}

static void free_tg(struct side_tg *s) {
    tg_graph_free(s->graph);
    tg_buffer_free(s->buffer);
    tg_context_free(s->ctx);
}

/* ggml's constructors and compute assert on what they cannot do: each runs caught. */
static void build_ggml_caught(void *user) {
    struct side_ggml *s = user;
    s->dst = s->e->build_ggml(s->ctx, s->operand, s->e, s->type);
    if (!s->dst) return;
    s->graph = ggml_new_graph(s->ctx);
    ggml_build_forward_expand(s->graph, s->dst);
    s->built = true;
}

static void compute_ggml_caught(void *user) {
    struct side_ggml *s = user;
    struct ggml_cplan plan = ggml_graph_plan(s->graph, 1, NULL);
    void *work = plan.work_size ? malloc(plan.work_size) : NULL;
    plan.work_data = work;
    plan.use_ref = true; /* ggml's reference kernels, as test-backend-ops holds backends to */
    s->computed = (!plan.work_size || work) && ggml_graph_compute(s->graph, &plan) == GGML_STATUS_SUCCESS;
    free(work);
}

static ggml_backend_t reference_backend(void) {
    static ggml_backend_t cpu;
    if (!cpu) cpu = ggml_backend_cpu_init();
    return cpu;
}

static enum kd_outcome run_ggml(struct side_ggml *s, const struct kd_setup *su, void *const *bytes, const size_t *sizes,
                                bool *aborted) {
    size_t total = 0;
    for (int i = 0; i < su->n; i++) total += 2 * align_up(sizes[i]);
    struct ggml_init_params params = {.mem_size = total + 256 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20),
                                      .mem_buffer = NULL, .no_alloc = false};
    s->ctx = ggml_init(params);
    if (!s->ctx) return KD_GGML_REFUSED;
    for (int i = 0; i < su->n; i++) {
        int64_t ne[4];
        base_shape(&su->op[i], ne);
        s->base[i] = ggml_new_tensor(s->ctx, tg_ggml_type(su->op[i].type), 4, ne);
        memcpy(s->base[i]->data, bytes[i], sizes[i]);
        s->operand[i] = ggml_layout(s->ctx, s->base[i], su->op[i].layout);
    }
    s->n_operands = su->n;
    char why[300];
    if (!tg_ggml_catch(build_ggml_caught, s, why, sizeof why) || !s->built) return KD_GGML_REFUSED;
    if (!ggml_backend_supports_op(reference_backend(), s->dst)) return KD_GGML_REFUSED;
    *aborted = !tg_ggml_catch(compute_ggml_caught, s, why, sizeof why);
    if (*aborted && getenv("TG_GGML_VERBOSE")) fprintf(stderr, "ggml aborted computing it: %s\n", why);
    return s->computed ? KD_COMPARED : KD_GGML_REFUSED;
}

/* ---- comparing -------------------------------------------------------------------------- */

static void compare(const struct side_tg *a, const struct side_ggml *b, struct kd_result *res) {
    const struct tg_tensor *t = a->dst;
    const struct ggml_tensor *g = b->dst;
    for (int d = 0; d < 4; d++) {
        if (t->ne[d] != g->ne[d] || tg_ggml_type(t->type) != g->type) {
            res->n_differ = -1;
            snprintf(res->what + strlen(res->what), sizeof res->what - strlen(res->what), ": shapes or types differ");
            return;
        }
    }
    size_t es = tg_type_size(t->type);
    double err = 0, norm = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const char *p = (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    const char *q = (const char *)g->data + i0 * g->nb[0] + i1 * g->nb[1] + i2 * g->nb[2] + i3 * g->nb[3];
                    double x = load_value(p, t->type), y = load_value(q, t->type);
                    res->n_elements++;
                    res->n_differ += memcmp(p, q, es) != 0;
                    if (!isfinite(x) || !isfinite(y)) {
                        if (!(x == y || (isnan(x) && isnan(y)))) res->nonfinite_mismatch = true;
                        continue;
                    }
                    err += (x - y) * (x - y);
                    norm += y * y;
                }
    res->nmse = norm > 0 ? err / norm : err;
}

enum tg_status kd_run(const struct kd_entry *e, int variant, enum tg_type type, enum kd_layout layout, bool inplace,
                      int n_threads, uint64_t seed, struct kd_result *res) {
    memset(res, 0, sizeof *res);
    struct kd_setup su;
    memset(&su, 0, sizeof su);
    if (!e->operands(e, variant, type, layout, &su) || (inplace && !e->inplace)) {
        res->outcome = KD_NO_VARIANT;
        return TG_OK;
    }
    int len = snprintf(res->what, sizeof res->what, "%s %s %s", e->name, tg_type_name(type), layout_names[layout]);
    for (int i = 0; i < su.n; i++) {
        len += snprintf(res->what + len, sizeof res->what - (size_t)len, "%s[%lld,%lld,%lld,%lld]%s", i ? " " : " (",
                        (long long)su.op[i].ne[0], (long long)su.op[i].ne[1], (long long)su.op[i].ne[2],
                        (long long)su.op[i].ne[3], su.op[i].layout != KD_CONTIGUOUS ? "*" : "");
    }
    snprintf(res->what + len, sizeof res->what - (size_t)len, ")%s", inplace ? " in place" : "");

    void *bytes[KD_MAX_OPERANDS] = {0};
    size_t sizes[KD_MAX_OPERANDS] = {0};
    uint64_t state = seed;
    enum tg_status st = TG_OK;
    for (int i = 0; i < su.n; i++) {
        bytes[i] = make_bytes(&su.op[i], &state, &sizes[i]);
        if (!bytes[i]) st = tg_fail(TG_ERR_ALLOC, "kernel differential: out of host memory");
    }
    struct side_tg a = {0};
    struct side_ggml b = {.e = e, .type = type};
    if (st == TG_OK) {
        res->outcome = run_ggml(&b, &su, bytes, sizes, &res->ggml_aborted);
        if (res->outcome == KD_COMPARED) res->outcome = build_tg(&a, e, &su, type, inplace, bytes, sizes);
        if (res->outcome == KD_COMPARED) res->outcome = compute_tg(&a, n_threads);
        if (res->outcome == KD_COMPARED) {
            compare(&a, &b, res);
            res->passed = res->n_differ >= 0 && !res->nonfinite_mismatch &&
                          (e->max_nmse == 0 ? res->n_differ == 0 : res->nmse <= e->max_nmse);
        }
    }
    free_tg(&a);
    if (b.ctx) ggml_free(b.ctx);
    for (int i = 0; i < su.n; i++) free(bytes[i]);
    return st;
}

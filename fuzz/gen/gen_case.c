/* Decoding a random case from bytes (see tg-gen.h).  Every choice reads one or
 * two bytes; exhausted input reads zeros, which decodes to a small valid case. */
#include "tg-gen.h"
#include "tg-cpu.h"
#include "tg-io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 256
#define MAX_CREATED 4096

struct reader {
    const uint8_t *p;
    size_t n, pos;
};

static unsigned next_byte(struct reader *r) { return r->pos < r->n ? r->p[r->pos++] : 0; }
static unsigned pick(struct reader *r, unsigned n) { return n ? next_byte(r) % n : 0; }
static bool chance(struct reader *r, unsigned one_in) { return pick(r, one_in) == 0; }

struct builder {
    struct reader r;
    struct tg_gen_case *c;
    struct tg_gen_options opts;
    struct tg_tensor *pool[POOL_MAX];
    int n_pool;
    struct tg_tensor *created[MAX_CREATED]; /* everything, in creation order */
    int n_created;
    struct tg_tensor *external[MAX_CREATED];
    int n_external;
    long long macs_left; /* computable cases: multiply-adds their mul_mats may still cost */
};

/* "t<index>" without printf: every case names hundreds of tensors, and a
 * formatted name cost about as much as making the tensor. */
static void name_by_index(struct tg_tensor *t, int index) {
    char digits[12];
    int n = 0;
    do {
        digits[n++] = (char)('0' + index % 10);
        index /= 10;
    } while (index > 0);
    t->name[0] = 't';
    for (int k = 0; k < n; k++) t->name[1 + k] = digits[n - 1 - k];
    t->name[1 + n] = '\0';
}

/* Op results can outgrow the leaf cap (a mul_mat of two operands with many
 * rows is their outer product, and chains of them grow geometrically): one
 * over four times the cap is dropped as a rejected op is, and in computable
 * cases each mul_mat's multiply-adds come out of a per-case budget, so no
 * case computes for seconds (fuzz_exec once timed out on 16 MB products). */
static bool affordable(struct builder *b, const struct tg_tensor *t) {
    if (tg_nbytes(t) > 4 * b->opts.max_tensor_bytes) return false;
    if (b->opts.computable && t->op == TG_OP_MUL_MAT && t->src[0]) {
        const long long macs = (long long)tg_nelements(t) * t->src[0]->ne[0];
        if (macs > b->macs_left) return false;
        b->macs_left -= macs;
    }
    return true;
}

static struct tg_tensor *keep(struct builder *b, struct tg_tensor *t) {
    if (!t || b->n_created == MAX_CREATED || !affordable(b, t)) return NULL;
    name_by_index(t, b->n_created);
    b->created[b->n_created++] = t;
    if (b->n_pool < POOL_MAX) b->pool[b->n_pool++] = t;
    else b->pool[pick(&b->r, POOL_MAX)] = t;
    return t;
}

/* ---- shapes ------------------------------------------------------------------------ */

static int64_t small_dim(struct builder *b) {
    static const int64_t dims[] = {1, 2, 3, 4, 5, 7, 8, 16, 32, 64};
    return dims[pick(&b->r, sizeof dims / sizeof dims[0])];
}

static int64_t any_dim(struct builder *b) {
    if (chance(&b->r, 12)) {
        static const int64_t big[] = {128, 256, 512, 1024};
        return big[pick(&b->r, 4)];
    }
    return small_dim(b);
}

/* A shape of 1-4 dims whose byte size stays under the cap for `type`. */
static void random_shape(struct builder *b, enum tg_type type, int64_t ne[4]) {
    int n_dims = 1 + (int)pick(&b->r, 4);
    for (int i = 0; i < 4; i++) ne[i] = i < n_dims ? any_dim(b) : 1;
    size_t limit = b->opts.max_tensor_bytes / tg_type_size(type);
    for (int i = 3; i >= 0; i--) {
        while (ne[i] > 1 && (size_t)(ne[0] * ne[1] * ne[2] * ne[3]) > limit) ne[i] /= 2;
    }
}

static struct tg_tensor *new_leaf(struct builder *b, enum tg_type type, const int64_t ne[4]) {
    struct tg_tensor *t = tg_new_tensor_4d(b->c->ctx, type, ne[0], ne[1], ne[2], ne[3]);
    if (!t || !keep(b, t)) return NULL;
    if (chance(&b->r, 4)) tg_set_input(t);
    if (chance(&b->r, 6) && b->n_external < MAX_CREATED) b->external[b->n_external++] = t;
    return t;
}

static struct tg_tensor *new_random_leaf(struct builder *b) {
    int64_t ne[4];
    enum tg_type type = TG_TYPE_F32;
    if (!b->opts.computable && chance(&b->r, 5)) type = chance(&b->r, 2) ? TG_TYPE_F16 : TG_TYPE_BF16;
    random_shape(b, type, ne);
    return new_leaf(b, type, ne);
}

/* Row indices (i32) for get_rows/set_rows, or positions for rope. */
static struct tg_tensor *new_index_leaf(struct builder *b, int64_t n) {
    int64_t ne[4] = {n, 1, 1, 1};
    struct tg_tensor *t = new_leaf(b, TG_TYPE_I32, ne);
    if (t) tg_set_input(t);
    return t;
}

/* An operand: often the newest tensor (chains), otherwise any; f32 preferred. */
static struct tg_tensor *operand(struct builder *b) {
    if (b->n_pool == 0) return new_random_leaf(b);
    for (int tries = 0; tries < 4; tries++) {
        struct tg_tensor *t = chance(&b->r, 2) ? b->pool[b->n_pool - 1] : b->pool[pick(&b->r, (unsigned)b->n_pool)];
        if (t->type == TG_TYPE_F32) return t;
    }
    return new_random_leaf(b);
}

/* A second operand that broadcasts over a. */
static struct tg_tensor *broadcast_partner(struct builder *b, struct tg_tensor *a) {
    switch (pick(&b->r, 4)) {
    case 0: return a;
    case 1: {
        int64_t ne[4];
        for (int i = 0; i < 4; i++) ne[i] = chance(&b->r, 2) ? a->ne[i] : 1;
        return new_leaf(b, TG_TYPE_F32, ne);
    }
    case 2: return new_leaf(b, TG_TYPE_F32, a->ne);
    default: {
        struct tg_tensor *other = operand(b);
        return tg_can_repeat(other, a) ? other : new_leaf(b, TG_TYPE_F32, a->ne);
    }
    }
}

/* ---- op steps ---------------------------------------------------------------------- */

static const enum tg_unary_op safe_unary[] = {TG_UNARY_ABS, TG_UNARY_NEG, TG_UNARY_RELU, TG_UNARY_TANH,
                                              TG_UNARY_SIGMOID, TG_UNARY_GELU, TG_UNARY_SILU, TG_UNARY_SGN};

static struct tg_tensor *inplace_capable_step(struct builder *b, struct tg_tensor *a) {
    struct tg_context *ctx = b->c->ctx;
    switch (pick(&b->r, 7)) {
    case 0: return tg_scale(ctx, a, 0.5f + (float)pick(&b->r, 8) * 0.25f);
    case 1: return tg_unary(ctx, a, safe_unary[pick(&b->r, sizeof safe_unary / sizeof safe_unary[0])]);
    case 2: return tg_sqr(ctx, a);
    case 3: return tg_rms_norm(ctx, a, 1e-5f);
    case 4: return tg_soft_max(ctx, a, NULL, 1.0f, 0.0f);
    case 5: return tg_add(ctx, a, broadcast_partner(b, a));
    default: return tg_mul(ctx, a, broadcast_partner(b, a));
    }
}

static struct tg_tensor *view_step(struct builder *b, struct tg_tensor *a) {
    struct tg_context *ctx = b->c->ctx;
    int64_t n = tg_nelements(a);
    switch (pick(&b->r, 6)) {
    case 0: return tg_reshape_1d(ctx, a, n);
    case 1: {
        int64_t ne0 = a->ne[0] * (chance(&b->r, 2) ? a->ne[1] : 1);
        return ne0 > 0 ? tg_reshape_2d(ctx, a, ne0, n / ne0) : NULL;
    }
    case 2: {
        static const int perms[][4] = {{1, 0, 2, 3}, {0, 2, 1, 3}, {2, 0, 1, 3}, {0, 1, 3, 2}, {3, 2, 1, 0}};
        const int *p = perms[pick(&b->r, 5)];
        return tg_permute(ctx, a, p[0], p[1], p[2], p[3]);
    }
    case 3: return tg_transpose(ctx, a);
    case 4: {
        if (!tg_is_contiguous(a) || n < 1) return NULL;
        int64_t len = 1 + (int64_t)pick(&b->r, 256) * n / 256;
        if (len > n) len = n;
        int64_t start = (int64_t)pick(&b->r, 256) * (n - len) / 256;
        return tg_view_1d(ctx, a, len, (size_t)start * tg_type_size(a->type));
    }
    default: {
        /* Every other row: a strided view. */
        if (a->ne[1] < 2) return NULL;
        return tg_view_2d(ctx, a, a->ne[0], a->ne[1] / 2, a->nb[1] * 2, chance(&b->r, 2) ? 0 : a->nb[1]);
    }
    }
}

/* With none_views, one view in three as ggml_view_tensor leaves it: op none
 * and no source, so the graph lists it as a leaf and nothing but its view
 * root ties it to the tensor it reads (the draw is made only with the option,
 * so the other options' cases stay as they were). */
static struct tg_tensor *none_view(struct builder *b, struct tg_tensor *v) {
    if (!v || !b->opts.none_views || !chance(&b->r, 3)) return v;
    v->op = TG_OP_NONE;
    memset(v->src, 0, sizeof v->src);
    memset(v->op_params, 0, sizeof v->op_params);
    return v;
}

static struct tg_tensor *copy_into_view_step(struct builder *b, struct tg_tensor *a) {
    struct tg_context *ctx = b->c->ctx;
    int64_t n = tg_nelements(a);
    struct tg_tensor *big = operand(b);
    struct tg_tensor *dst;
    if (big != a && tg_is_contiguous(big) && tg_nelements(big) >= n && chance(&b->r, 2)) {
        int64_t room = tg_nelements(big) - n;
        int64_t start = room ? (int64_t)pick(&b->r, 256) * room / 256 : 0;
        dst = tg_view_1d(ctx, big, n, (size_t)start * tg_type_size(big->type));
        if (dst) keep(b, dst);
    } else {
        int64_t ne[4] = {a->ne[0], a->ne[1], a->ne[2], a->ne[3]};
        dst = new_leaf(b, TG_TYPE_F32, ne);
    }
    return dst ? tg_cpy(ctx, a, dst) : NULL;
}

static struct tg_tensor *set_rows_step(struct builder *b, struct tg_tensor *a) {
    if (a->ne[1] >= 2 && chance(&b->r, 3)) {
        /* rows written into a view: the upper half of a (a KV-cache window) */
        struct tg_tensor *half = tg_view_2d(b->c->ctx, a, a->ne[0], a->ne[1] / 2, a->nb[1], (size_t)(a->ne[1] / 2) * a->nb[1]);
        if (half) a = keep(b, half);
    }
    if (!a || a->ne[1] < 1) return NULL;
    int64_t n = 1 + (int64_t)pick(&b->r, (unsigned)(a->ne[1] < 8 ? a->ne[1] : 8));
    int64_t ne[4] = {a->ne[0], n, a->ne[2], a->ne[3]};
    struct tg_tensor *rows_new = chance(&b->r, 2) ? new_leaf(b, TG_TYPE_F32, ne) : NULL;
    if (!rows_new) {
        struct tg_tensor *src = new_leaf(b, TG_TYPE_F32, ne);
        rows_new = src ? keep(b, tg_scale(b->c->ctx, src, 2.0f)) : NULL;
    }
    struct tg_tensor *idx = new_index_leaf(b, n);
    return tg_set_rows(b->c->ctx, a, rows_new, idx);
}

static struct tg_tensor *mul_mat_step(struct builder *b, struct tg_tensor *a) {
    struct tg_context *ctx = b->c->ctx;
    if (!b->opts.computable && chance(&b->r, 4)) {
        /* A quantized weight: planning only. */
        static const enum tg_type qt[] = {TG_TYPE_Q4_0, TG_TYPE_Q8_0, TG_TYPE_Q4_K, TG_TYPE_Q6_K};
        int64_t wne[4] = {256, small_dim(b), 1, 1};
        a = new_leaf(b, qt[pick(&b->r, 4)], wne);
        if (!a) return NULL;
    }
    int64_t k = a->ne[0], m = a->ne[1];
    int64_t nn = small_dim(b);
    if (k * m * nn > (1 << 20)) return NULL; /* keeps the reference kernels fast */
    int64_t ne[4] = {k, nn, a->ne[2], a->ne[3]};
    struct tg_tensor *rhs = new_leaf(b, TG_TYPE_F32, ne);
    return tg_mul_mat(ctx, a, rhs);
}

static struct tg_tensor *rope_step(struct builder *b, struct tg_tensor *a) {
    if (a->ne[0] < 2) return NULL;
    struct tg_tensor *pos = new_index_leaf(b, a->ne[2]);
    int n_dims = (int)(a->ne[0] & ~(int64_t)1);
    int mode = chance(&b->r, 2) ? TG_ROPE_NORMAL : TG_ROPE_NEOX;
    return tg_rope(b->c->ctx, a, pos, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
}

/* An output flag as ggml_set_output sets it: on a view, its root is flagged
 * too (ggml frees the root of a view flagged alone); raw_output_flags flags
 * the tensor only. */
static void set_output(struct builder *b, struct tg_tensor *t) {
    tg_set_output(t);
    if (t->view_src && !b->opts.raw_output_flags) tg_set_output(t->view_src);
}

static void mark_output(struct builder *b) {
    if (b->n_pool == 0) return;
    struct tg_tensor *t = b->pool[pick(&b->r, (unsigned)b->n_pool)];
    if (t->op != TG_OP_NONE) set_output(b, t);
}

static void decode_step(struct builder *b) {
    struct tg_context *ctx = b->c->ctx;
    unsigned what = pick(&b->r, 24);
    if (what == 0) {
        new_random_leaf(b);
        return;
    }
    if (what == 1) {
        mark_output(b);
        return;
    }
    struct tg_tensor *a = operand(b);
    if (!a) return;
    struct tg_tensor *r = NULL;
    switch (what) {
    case 2: case 3: case 4: r = inplace_capable_step(b, a); break;
    case 5: { /* an in-place chain */
        int len = 2 + (int)pick(&b->r, 3);
        for (int i = 0; i < len && a; i++) a = keep(b, inplace_capable_step(b, a));
        return;
    }
    case 6: { /* fan-out then fan-in: a diamond */
        struct tg_tensor *left = keep(b, inplace_capable_step(b, a));
        struct tg_tensor *right = keep(b, tg_scale(ctx, a, 1.5f));
        r = left && right ? tg_add(ctx, left, right) : NULL;
        break;
    }
    case 7: case 8: r = none_view(b, view_step(b, a)); break;
    case 9: r = copy_into_view_step(b, a); break;
    case 10: r = set_rows_step(b, a); break;
    case 11: {
        struct tg_tensor *other = chance(&b->r, 2) ? keep(b, tg_scale(ctx, a, 3.0f)) : new_leaf(b, TG_TYPE_F32, a->ne);
        r = other ? tg_concat(ctx, a, other, (int)pick(&b->r, 4)) : NULL;
        break;
    }
    case 12: {
        struct tg_tensor *idx = new_index_leaf(b, small_dim(b));
        r = idx ? tg_get_rows(ctx, a, idx) : NULL;
        break;
    }
    case 13: case 14: r = mul_mat_step(b, a); break;
    case 15: r = tg_sum_rows(ctx, a); break;
    case 16: r = chance(&b->r, 2) ? tg_cont(ctx, a) : tg_dup(ctx, a); break;
    case 17: r = chance(&b->r, 2) ? tg_glu(ctx, a, TG_GLU_SWIGLU, chance(&b->r, 2))
                                 : tg_glu_split(ctx, a, broadcast_partner(b, a), TG_GLU_GEGLU); break;
    case 18: r = tg_diag_mask_inf(ctx, a, (int)pick(&b->r, 4)); break;
    case 19: r = rope_step(b, a); break;
    case 20: {
        struct tg_tensor *mask = NULL;
        if (chance(&b->r, 2)) {
            int64_t ne[4] = {a->ne[0], a->ne[1], 1, 1};
            mask = new_leaf(b, TG_TYPE_F32, ne);
        }
        r = tg_soft_max(ctx, a, mask, 0.125f, 0.0f);
        break;
    }
    case 21: r = chance(&b->r, 2) ? tg_sqrt(ctx, a) : tg_log(ctx, a); break;
    case 22: r = tg_norm(ctx, a, 1e-5f); break;
    default: { /* an output view in the middle */
        r = view_step(b, a);
        if (keep(b, r)) set_output(b, r);
        return;
    }
    }
    keep(b, r);
}

/* ---- buffer setup ---------------------------------------------------------------------- */

static void decode_buffers(struct builder *b) {
    struct tg_gen_case *c = b->c;
    c->n_ids = 1 + (int)pick(&b->r, TG_GEN_MAX_IDS);
    c->n_bufts = 1 + (int)pick(&b->r, (unsigned)c->n_ids);
    static const enum tg_op padded_ops[] = {TG_OP_MUL_MAT, TG_OP_ADD, TG_OP_SCALE, TG_OP_UNARY};
    for (int i = 0; i < c->n_bufts; i++) {
        size_t align = (size_t)16 << pick(&b->r, 6); /* 16 .. 512 */
        size_t max_size = 0;
        if (chance(&b->r, 3)) max_size = (size_t)4096 << pick(&b->r, 9); /* 4 KB .. 1 MB: forces chunks */
        enum tg_op padded = TG_OP_COUNT;
        size_t pad = 0;
        if (chance(&b->r, 4)) {
            padded = padded_ops[pick(&b->r, 4)];
            pad = 1 + pick(&b->r, 200);
        }
        char name[32];
        snprintf(name, sizeof name, "gen%d", i);
        tg_gen_buft_init(&c->bufts_storage[i], name, align, max_size, padded, pad);
        if (b->opts.address_only) tg_gen_buft_make_address_only(&c->bufts_storage[i]);
    }
    for (int id = 0; id < c->n_ids; id++) {
        int type = id < c->n_bufts ? id : (int)pick(&b->r, (unsigned)c->n_bufts);
        c->bufts[id] = &c->bufts_storage[type].buft;
    }
}

/* Pre-allocates the tensors of list, in order, in one weights buffer of the case. */
static enum tg_status bind_externals(struct tg_gen_case *c, struct tg_tensor *const *list, int n, bool address_only) {
    size_t total = 0;
    const size_t align = 64;
    for (int i = 0; i < n; i++) total += (tg_nbytes(list[i]) + align - 1) / align * align;
    if (total == 0) return TG_OK;
    tg_gen_buft_init(&c->external_buft, "gen-external", align, 0, TG_OP_COUNT, 0);
    if (address_only) tg_gen_buft_make_address_only(&c->external_buft);
    c->external_buffer = tg_buft_alloc_buffer(&c->external_buft.buft, total);
    if (!c->external_buffer) return TG_ERR_ALLOC;
    tg_buffer_set_usage(c->external_buffer, TG_BUFFER_USAGE_WEIGHTS);
    char *base = tg_buffer_get_base(c->external_buffer);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        enum tg_status st = tg_tensor_bind(list[i], c->external_buffer, base + off);
        if (st != TG_OK) return st;
        off += (tg_nbytes(list[i]) + align - 1) / align * align;
        c->n_external++;
    }
    return TG_OK;
}

static enum tg_status decode_buffer_ids(struct builder *b) {
    struct tg_gen_case *c = b->c;
    struct tg_graph *g = c->graph;
    c->node_ids = calloc((size_t)g->n_nodes + 1, sizeof *c->node_ids);
    c->leaf_ids = calloc((size_t)g->n_leafs + 1, sizeof *c->leaf_ids);
    if (!c->node_ids || !c->leaf_ids) return TG_ERR_ALLOC;
    int current = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (chance(&b->r, 4)) current = (int)pick(&b->r, (unsigned)c->n_ids);
        c->node_ids[i] = current;
    }
    for (int j = 0; j < g->n_leafs; j++) c->leaf_ids[j] = (int)pick(&b->r, (unsigned)c->n_ids);
    return TG_OK;
}

/* ---- public -------------------------------------------------------------------------- */

struct tg_gen_options tg_gen_default_options(void) {
    return (struct tg_gen_options){.max_ops = 40, .max_tensor_bytes = (size_t)4 << 20, .computable = false};
}

struct tg_gen_options tg_gen_target_options(const char *target) {
    struct tg_gen_options o = tg_gen_default_options();
    if (strcmp(target, "alloc") == 0) {
        o.max_tensor_bytes = 1u << 20;
        o.address_only = true; /* planned and checked, never computed: no memory behind the buffers */
    } else if (strcmp(target, "exec") == 0 || strcmp(target, "sched") == 0) {
        o.computable = true;
        o.max_tensor_bytes = 1u << 12; /* overlaps and misplacements show in 4 KB as well as in MBs */
        o.none_views = true; /* views as ggml_view_tensor makes them, computed too */
    }
    return o;
}

void tg_gen_case_free(struct tg_gen_case *c) {
    if (!c) return;
    tg_graph_free(c->graph);
    tg_context_free(c->ctx);
    tg_buffer_free(c->external_buffer);
    free(c->context_memory);
    free(c->node_ids);
    free(c->leaf_ids);
    free(c->sched.node_pins);
    free(c);
}

enum tg_status tg_gen_case_from_bytes(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                      struct tg_gen_case **out) {
    *out = NULL;
    /* Not zeroed: the builder's arrays (tens of KB) are only read below their counts. */
    struct builder *b = malloc(sizeof *b);
    struct tg_gen_case *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return tg_fail(TG_ERR_ALLOC, "generator: out of host memory");
    }
    b->r = (struct reader){data, size, 0};
    b->c = c;
    b->n_pool = b->n_created = b->n_external = 0;
    b->opts = opts ? *opts : tg_gen_default_options();
    if (b->opts.max_ops <= 0) b->opts.max_ops = 40;
    if (b->opts.max_tensor_bytes < 64) b->opts.max_tensor_bytes = 64;
    b->macs_left = 256 * (long long)(b->opts.max_tensor_bytes / sizeof(float)); /* 256K for 4 KB tensors */
    c->sched.n_copies = 1;

    enum tg_status st = TG_OK;
    decode_buffers(b);
    c->ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    if (!c->ctx) st = TG_ERR_ALLOC;
    int n_ops = st == TG_OK ? 1 + (int)(((next_byte(&b->r) << 8) | next_byte(&b->r)) % (unsigned)b->opts.max_ops) : 0;
    for (int i = 0; i < n_ops; i++) decode_step(b);
    if (st == TG_OK && b->n_created == 0) new_random_leaf(b);

    if (st == TG_OK) {
        c->graph = tg_graph_new(2 * b->n_created + 16);
        if (!c->graph) st = TG_ERR_ALLOC;
    }
    for (int i = 0; st == TG_OK && i < b->n_created; i++) st = tg_graph_build_forward_expand(c->graph, b->created[i]);
    if (st == TG_OK) st = bind_externals(c, b->external, b->n_external, b->opts.address_only);
    /* views hold their root in view_src (never a view): any order binds them */
    for (int i = 0; st == TG_OK && b->opts.bound_views && i < b->n_created; i++) {
        struct tg_tensor *t = b->created[i];
        if (t->view_src && t->view_src->buffer && !t->buffer) st = tg_tensor_view_bind(t);
    }
    if (st == TG_OK) st = decode_buffer_ids(b);
    free(b);
    if (st != TG_OK) {
        tg_gen_case_free(c);
        return tg_fail(st, "generator: could not build the case (%s): %s", tg_status_name(st), tg_last_error());
    }
    *out = c;
    return TG_OK;
}

void tg_gen_seed_bytes(uint64_t seed, uint8_t *out, size_t n) {
    uint64_t state = seed;
    for (size_t i = 0; i < n; i += 8) {
        /* splitmix64 */
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        for (size_t k = 0; k < 8 && i + k < n; k++) out[i + k] = (uint8_t)(z >> (8 * k));
    }
}

enum tg_status tg_gen_case_from_seed(uint64_t seed, const struct tg_gen_options *opts, struct tg_gen_case **out) {
    uint8_t bytes[TG_GEN_SEED_BYTES];
    tg_gen_seed_bytes(seed, bytes, sizeof bytes);
    enum tg_status st = tg_gen_case_from_bytes(bytes, sizeof bytes, opts, out);
    if (st == TG_OK) (*out)->seed = seed;
    return st;
}

int tg_gen_case_n_tensors(const struct tg_gen_case *c) { return c->graph->n_nodes + c->graph->n_leafs; }

/* The case's buffer types and ids as the `.tg` format states them. */
static void alloc_setup_of(const struct tg_gen_case *c, struct tg_io_alloc_setup *a) {
    memset(a, 0, sizeof *a);
    a->n_bufts = c->n_bufts;
    for (int i = 0; i < c->n_bufts; i++) {
        const struct tg_gen_buft *bt = &c->bufts_storage[i];
        snprintf(a->bufts[i].name, sizeof a->bufts[i].name, "%s", bt->name);
        a->bufts[i].alignment = bt->alignment;
        a->bufts[i].max_size = bt->max_size;
        a->bufts[i].pad_op = bt->pad_bytes ? bt->padded_op : TG_OP_COUNT;
        a->bufts[i].pad_bytes = bt->pad_bytes;
    }
    a->n_ids = c->n_ids;
    for (int id = 0; id < c->n_ids; id++) a->buft_of_id[id] = (int)((const struct tg_gen_buft *)c->bufts[id] - c->bufts_storage);
}

char *tg_gen_case_to_text(const struct tg_gen_case *c) {
    struct tg_io_alloc_setup setup;
    alloc_setup_of(c, &setup);
    size_t graph_len = 0;
    char *graph_text = tg_graph_write_alloc_mem(c->graph, &setup, c->node_ids, c->leaf_ids, &graph_len);
    char head[400];
    int head_len = snprintf(head, sizeof head, "# tggen case, seed %llu\n", (unsigned long long)c->seed);
    if (!graph_text) {
        head_len += snprintf(head + head_len, sizeof head - (size_t)head_len, "# (case text unavailable: %.300s)\n",
                             tg_last_error());
    }
    char *out = malloc((size_t)head_len + graph_len + 1);
    if (out) {
        memcpy(out, head, (size_t)head_len);
        if (graph_text) memcpy(out + head_len, graph_text, graph_len);
        out[(size_t)head_len + graph_len] = '\0';
    }
    free(graph_text);
    return out;
}

enum tg_status tg_gen_case_from_text(const char *text, size_t len, const char *name, bool address_only,
                                     struct tg_gen_case **out) {
    *out = NULL;
    struct tg_file *f = NULL;
    enum tg_status st = tg_file_parse(text, len, name, &f);
    if (st != TG_OK) return st;
    const struct tg_io_alloc_setup *a = &f->alloc;
    if (a->n_ids == 0 || a->n_ids > TG_GEN_MAX_IDS || a->n_bufts > TG_GEN_MAX_BUFTS) {
        tg_file_free(f);
        return tg_fail(TG_ERR_INVALID, "%s: a generated case states 1..%d buffer ids over 1..%d buffer types ('buft' "
                       "and 'buffers' lines); this file has %d ids and %d types", name, TG_GEN_MAX_IDS,
                       TG_GEN_MAX_BUFTS, a->n_ids, a->n_bufts);
    }
    struct tg_gen_case *c = calloc(1, sizeof *c);
    struct tg_tensor **externals = calloc((size_t)f->n_tensors + 1, sizeof *externals);
    if (c) {
        c->node_ids = calloc((size_t)f->graph->n_nodes + 1, sizeof *c->node_ids);
        c->leaf_ids = calloc((size_t)f->graph->n_leafs + 1, sizeof *c->leaf_ids);
    }
    if (!c || !externals || !c->node_ids || !c->leaf_ids) {
        free(externals);
        tg_gen_case_free(c);
        tg_file_free(f);
        return tg_fail(TG_ERR_ALLOC, "%s: out of host memory for the case", name);
    }
    c->sched.n_copies = 1;
    c->n_bufts = a->n_bufts;
    for (int i = 0; i < a->n_bufts; i++) {
        const struct tg_io_buft *bt = &a->bufts[i];
        tg_gen_buft_init(&c->bufts_storage[i], bt->name, bt->alignment, bt->max_size, bt->pad_op, bt->pad_bytes);
        if (address_only) tg_gen_buft_make_address_only(&c->bufts_storage[i]);
    }
    c->n_ids = a->n_ids;
    for (int id = 0; id < a->n_ids; id++) c->bufts[id] = &c->bufts_storage[a->buft_of_id[id]].buft;
    /* the case takes the file's tensors and graph */
    c->ctx = f->ctx;
    c->graph = f->graph;
    f->ctx = NULL;
    f->graph = NULL;
    int n_nodes = 0, n_leafs = 0, n_ext = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *r = &f->tensors[i];
        if (r->is_leaf) c->leaf_ids[n_leafs++] = r->buffer_id;
        else c->node_ids[n_nodes++] = r->buffer_id;
        if (r->placement != TG_PLACE_NONE && !r->tensor->view_src) externals[n_ext++] = r->tensor;
    }
    tg_file_free(f);
    st = bind_externals(c, externals, n_ext, address_only);
    for (int i = 0; st == TG_OK && i < c->graph->n_nodes + c->graph->n_leafs; i++) {
        struct tg_tensor *t = i < c->graph->n_leafs ? c->graph->leafs[i] : c->graph->nodes[i - c->graph->n_leafs];
        if (t->view_src && t->view_src->buffer && !t->buffer) st = tg_tensor_view_bind(t);
    }
    free(externals);
    if (st != TG_OK) {
        tg_gen_case_free(c);
        return tg_fail(st, "%s: could not pre-allocate the case's weights: %s", name, tg_last_error());
    }
    *out = c;
    return TG_OK;
}

bool tg_gen_case_rewire_edge(struct tg_gen_case *c, uint64_t salt) {
    struct tg_graph *g = c->graph;
    for (int tries = 0; tries < 64 && g->n_nodes > 2; tries++) {
        int i = 2 + (int)((salt * 2654435761u + (uint64_t)tries * 40503u) % (uint64_t)(g->n_nodes - 2));
        struct tg_tensor *node = g->nodes[i];
        struct tg_tensor *old = node->src[0];
        if (node->view_src || !old) continue;
        for (int j = i - 1; j >= 0; j--) {
            struct tg_tensor *cand = g->nodes[j];
            if (cand != old && !cand->view_src && cand->type == old->type && tg_are_same_layout(cand, old)) {
                node->src[0] = cand;
                return true;
            }
        }
    }
    return false;
}

bool tg_gen_graph_cpu_computable(const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_NONE && !tg_op_is_view(t->op) && !tg_cpu_supports_op(t)) return false;
    }
    return true;
}

bool tg_gen_node_is_result(const struct tg_graph *g, int i) {
    const struct tg_tensor *t = g->nodes[i];
    if (t->flags & TG_FLAG_OUTPUT) return true;
    if (tg_op_is_view(t->op)) return false;
    /* read through a view too: an op-none view (a leaf) has no source, only
     * its root, and the root's memory is free once the view's readers are done */
    for (int j = i + 1; j < g->n_nodes; j++)
        for (int k = 0; k < TG_MAX_SRC; k++) {
            const struct tg_tensor *s = g->nodes[j]->src[k];
            if (s && (s == t || s->view_src == t)) return false;
        }
    return true;
}

void *tg_gen_tensor_bytes(const struct tg_tensor *t) {
    size_t n = tg_nbytes(t);
    void *v = malloc(n ? n : 1);
    if (v && tg_tensor_get(t, v, 0, n) != TG_OK) {
        free(v);
        v = NULL;
    }
    return v;
}

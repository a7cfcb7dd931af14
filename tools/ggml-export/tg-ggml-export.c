/* tg-ggml-export: a ggml graph as tgsched `.tg` text (see tg-ggml-export.h).
 * Self-contained: ggml's headers and the C library only, so it compiles into
 * any ggml or llama.cpp program. */
#include "tg-ggml-export.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml's own leaf order needs the graph's struct (ggml/src/ggml-impl.h);
 * without it (or with TG_EXPORT_NO_GGML_IMPL defined), leafs are listed in
 * the order the nodes first read them. */
#if defined(__has_include) && !defined(TG_EXPORT_NO_GGML_IMPL)
#if __has_include("ggml-impl.h")
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include "ggml-impl.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#define TG_EXPORT_GGML_LEAFS 1
#endif
#endif

/* also compiles as C++, for programs that build every file so */
#ifdef __cplusplus
#define TG_THREAD_LOCAL thread_local
#else
#define TG_THREAD_LOCAL _Thread_local
#endif

static TG_THREAD_LOCAL char export_error[512];

const char *tg_ggml_export_error(void) { return export_error; }

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(export_error, sizeof export_error, fmt, ap);
    va_end(ap);
}

/* ---- growable text ------------------------------------------------------------------------ */

struct text {
    char *s;
    size_t len, cap;
    bool failed;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(struct text *t, const char *fmt, ...) {
    if (t->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = true;
        return;
    }
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *s = (char *)realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* ---- the tensors, in the order they are written ------------------------------------------- */

/* GGML_TENSOR_FLAG_COMPUTE, by value: ggml before it lacks the name.  ggml's
 * CPU computes a node only when it carries it (ggml-cpu.c, ggml_graph_compute_thread):
 * nodes without it (ggml_build_forward_order, the branches
 * ggml_build_forward_select leaves out) are written `nocompute`. */
#define EXPORT_FLAG_COMPUTE 16
/* the scheduler's most backends (GGML_SCHED_MAX_BACKENDS; the format's too) */
#define GGML_SCHED_EXPORT_MAX_BACKENDS 16

/* ASCII only: the output must not depend on the C locale. */
static bool ascii_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

struct copy_map {
    struct ggml_tensor *copy;
    struct ggml_tensor *original;
};

struct table {
    struct ggml_tensor **order; /* leafs, then nodes */
    int n, n_leafs, cap;
    size_t mask;                /* pointer -> position */
    struct ggml_tensor **keys;
    int *pos;
    struct copy_map *copies;    /* the scheduler's copies of split inputs, mapped exactly */
    int n_copies;
};

static size_t slot_of(const struct table *tb, const struct ggml_tensor *t) {
    uint64_t x = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ull;
    size_t h = (size_t)(x >> 20) & tb->mask;
    while (tb->keys[h] && tb->keys[h] != t) h = (h + 1) & tb->mask;
    return h;
}

static int position_of(const struct table *tb, const struct ggml_tensor *t) {
    size_t h = slot_of(tb, t);
    return tb->keys[h] ? tb->pos[h] : -1;
}

static void add(struct table *tb, struct ggml_tensor *t) {
    size_t h = slot_of(tb, t);
    if (tb->keys[h] || tb->n == tb->cap) return;
    tb->keys[h] = t;
    tb->pos[h] = tb->n;
    tb->order[tb->n++] = t;
}

/* A leaf, after the tensor it views (ggml_view_tensor makes leafs that view another). */
static void add_leaf(struct table *tb, struct ggml_tensor *t) {
    if (!t || position_of(tb, t) >= 0) return;
    if (t->view_src && t->view_src != t) add_leaf(tb, t->view_src);
    add(tb, t);
}

/* The graph's tensor a scheduler's copy stands for, or t itself. */
static struct ggml_tensor *as_written(const struct table *tb, struct ggml_tensor *t) {
    if (!t) return t;
    for (int i = 0; i < tb->n_copies; i++)
        if (tb->copies[i].copy == t) return tb->copies[i].original;
    return t;
}

static bool is_copy(const struct table *tb, const struct ggml_tensor *t) {
    for (int i = 0; i < tb->n_copies; i++)
        if (tb->copies[i].copy == t) return true;
    return false;
}

/* Whether name is "BACKEND#...#DIGITS" (or its first 63 characters) for one of the scheduler's backends:
 * the name ggml_backend_sched_split_graph gives the copy of a split input. */
static bool copy_named(ggml_backend_sched_t sched, const char *name) {
    int n = ggml_backend_sched_get_n_backends(sched);
    for (int b = 0; b < n; b++) {
        const char *bn = ggml_backend_name(ggml_backend_sched_get_backend(sched, b));
        size_t l = strlen(bn);
        if (strncmp(name, bn, l) == 0 && name[l] == '#') return true; /* the rest may be cut at GGML_MAX_NAME */
    }
    return false;
}

static bool same_layout(const struct ggml_tensor *a, const struct ggml_tensor *b) {
    if (a->type != b->type) return false;
    for (int d = 0; d < GGML_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d] || a->nb[d] != b->nb[d]) return false;
    return true;
}

static int by_address(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const struct copy_map *)a)->copy, y = (uintptr_t)((const struct copy_map *)b)->copy;
    return x < y ? -1 : x > y;
}

/* The copies the scheduler put in place of split inputs, mapped to their
 * originals by identity.  ggml_backend_sched_split_graph (ggml-backend.cpp,
 * one copy per input: n_copies 1) makes in its own context, tensor after
 * tensor (no_alloc: each ggml_tensor_overhead() bytes apart), first the
 * copies, in the order of its splits' inputs, then one view per input
 * (`input_dep`: ggml_view_tensor of the input, src[0] the input) in the same order.  The copies
 * the graph reads are all of them; when they lie back to back, the k-th
 * view names the k-th copy's original.  Each is checked (a view of a tensor
 * of the copy's layout); if any check fails nothing is mapped this way. */
static void map_copies_exactly(struct table *tb) {
    if (tb->n_copies == 0) return;
    qsort(tb->copies, (size_t)tb->n_copies, sizeof *tb->copies, by_address);
    const size_t stride = ggml_tensor_overhead();
    const char *base = (const char *)tb->copies[0].copy;
    for (int k = 0; k < tb->n_copies; k++)
        if ((const char *)tb->copies[k].copy != base + (size_t)k * stride) return;
    for (int k = 0; k < tb->n_copies; k++) {
        const struct ggml_tensor *dep = (const struct ggml_tensor *)(const void *)(base + (size_t)(tb->n_copies + k) * stride);
        const struct ggml_tensor *in = dep->src[0];
        if (dep->op != GGML_OP_NONE || !in || !dep->view_src ||
            dep->view_src != (in->view_src ? in->view_src : in) || !same_layout(in, tb->copies[k].copy))
            return;
    }
    for (int k = 0; k < tb->n_copies; k++) {
        const struct ggml_tensor *dep = (const struct ggml_tensor *)(const void *)(base + (size_t)(tb->n_copies + k) * stride);
        tb->copies[k].original = dep->src[0];
    }
}

/* Without the exact map (several copies per input: pipeline parallelism):
 * the tensor whose copy's name ggml would spell so, with its layout; refused
 * when several could be. */
static bool map_copy_by_name(struct table *tb, struct copy_map *m, ggml_backend_sched_t sched, struct ggml_cgraph *g) {
    int n_b = ggml_backend_sched_get_n_backends(sched), n_c = ggml_backend_sched_get_n_copies(sched);
    struct ggml_tensor *found = NULL;
    int n_found = 0;
    char name[4 * GGML_MAX_NAME];
    for (int i = 0; i < tb->n; i++) {
        struct ggml_tensor *o = tb->order[i];
        if (is_copy(tb, o) || !same_layout(o, m->copy)) continue;
        bool match = false;
        for (int b = 0; b < n_b && !match; b++) {
            for (int c = 0; c < n_c && !match; c++) {
                /* ggml_format_name: the name cut at GGML_MAX_NAME - 1 characters */
                snprintf(name, sizeof name, "%s#%s#%d", ggml_backend_name(ggml_backend_sched_get_backend(sched, b)), o->name, c);
                name[GGML_MAX_NAME - 1] = '\0';
                match = strcmp(name, m->copy->name) == 0;
            }
        }
        if (match && o != found) {
            if (n_found++ == 0) found = o;
        }
    }
    if (n_found == 0) {
        /* not listed yet (a leaf only the copy reads): ggml's own look-up by the name */
        const char *h1 = strchr(m->copy->name, '#'), *h2 = strrchr(m->copy->name, '#');
        if (h1 && h2 > h1 && (size_t)(h2 - h1) < GGML_MAX_NAME) {
            char orig[GGML_MAX_NAME];
            memcpy(orig, h1 + 1, (size_t)(h2 - h1 - 1));
            orig[h2 - h1 - 1] = '\0';
            struct ggml_tensor *o = ggml_graph_get_tensor(g, orig);
            if (o && same_layout(o, m->copy)) found = o, n_found = 1;
        }
    }
    if (n_found > 1) {
        fail("the scheduler's copy '%s' may stand for %d tensors of the graph named '%s' with its type and shape: give them "
             "distinct names (ggml_set_name) to export", m->copy->name, n_found, found->name);
        return false;
    }
    m->original = found;
    return true;
}

/* Collects every source that is the scheduler's copy (not listed, named as
 * ggml names copies), then maps them. */
static bool map_copies(struct table *tb, struct ggml_cgraph *g, ggml_backend_sched_t sched, bool leafs_known) {
    if (!sched) return true;
    int n_nodes = ggml_graph_n_nodes(g), cap = 0;
    for (int i = 0; i < n_nodes; i++) {
        struct ggml_tensor *t = ggml_graph_node(g, i);
        for (int k = 0; k < GGML_MAX_SRC; k++) {
            struct ggml_tensor *s = t->src[k];
            if (!s || (leafs_known && position_of(tb, s) >= 0) || is_copy(tb, s) || !copy_named(sched, s->name)) continue;
            if (!leafs_known && position_of(tb, s) >= 0) continue;
            if (tb->n_copies == cap) {
                cap = cap ? cap * 2 : 16;
                struct copy_map *c = (struct copy_map *)realloc(tb->copies, (size_t)cap * sizeof *c);
                if (!c) {
                    fail("out of memory");
                    return false;
                }
                tb->copies = c;
            }
            tb->copies[tb->n_copies].copy = s;
            tb->copies[tb->n_copies++].original = NULL;
        }
    }
    if (ggml_backend_sched_get_n_copies(sched) == 1) map_copies_exactly(tb);
    for (int i = 0; i < tb->n_copies; i++)
        if (!tb->copies[i].original && !map_copy_by_name(tb, &tb->copies[i], sched, g)) return false;
    /* a copy-like name that is not a copy after all stands for itself */
    for (int i = 0; i < tb->n_copies; i++)
        if (!tb->copies[i].original) tb->copies[i].original = tb->copies[i].copy;
    return true;
}

#ifdef TG_EXPORT_GGML_LEAFS
static int known_leafs(const struct ggml_cgraph *g) { return g->n_leafs; }

/* ggml's leaf list (a view leaf after its root), then its nodes. */
static bool list_tensors(struct table *tb, struct ggml_cgraph *g, ggml_backend_sched_t sched) {
    for (int j = 0; j < g->n_leafs; j++) add_leaf(tb, g->leafs[j]);
    tb->n_leafs = tb->n;
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) add(tb, ggml_graph_node(g, i));
    return map_copies(tb, g, sched, true);
}
#else
/* The head of ggml's graph struct (ggml/src/ggml-impl.h), read only where it
 * agrees with what ggml's public API says of the graph: the leafs no node
 * reads (a graph of one leaf) are found nowhere else. */
struct export_cgraph_head {
    int size, n_nodes, n_leafs;
    struct ggml_tensor **nodes, **grads, **grad_accs, **leafs;
};

static const struct export_cgraph_head *graph_head(struct ggml_cgraph *g) {
    const struct export_cgraph_head *h = (const struct export_cgraph_head *)(const void *)g;
    int n_nodes = ggml_graph_n_nodes(g);
    if (h->size != ggml_graph_size(g) || h->n_nodes != n_nodes || h->n_leafs < 0 || (h->n_leafs > 0 && !h->leafs) ||
        (h->size > 0 && h->n_leafs > h->size))
        return NULL;
    for (int i = 0; i < n_nodes; i++)
        if (!h->nodes || h->nodes[i] != ggml_graph_node(g, i)) return NULL;
    return h;
}

static int known_leafs(struct ggml_cgraph *g) {
    const struct export_cgraph_head *h = graph_head(g);
    return h ? h->n_leafs : 0;
}

/* Without the leaf list: every source that is not a node, in the order the
 * nodes first read it (the original of a scheduler's copy in its place),
 * then the leafs no node reads, then the nodes. */
static bool list_tensors(struct table *tb, struct ggml_cgraph *g, ggml_backend_sched_t sched) {
    int n_nodes = ggml_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; i++) add(tb, ggml_graph_node(g, i));
    if (!map_copies(tb, g, sched, false)) return false;
    for (int i = 0; i < n_nodes; i++) {
        struct ggml_tensor *t = ggml_graph_node(g, i);
        for (int k = 0; k <= GGML_MAX_SRC; k++) {
            struct ggml_tensor *s = as_written(tb, k < GGML_MAX_SRC ? t->src[k] : t->view_src);
            if (s && position_of(tb, s) < 0) add_leaf(tb, s);
        }
    }
    const struct export_cgraph_head *h = graph_head(g);
    for (int j = 0; h && j < h->n_leafs; j++) add_leaf(tb, h->leafs[j]);
    /* leafs go first: list them again in that order */
    int n = tb->n, n_leafs = n - n_nodes;
    struct ggml_tensor **listed = (struct ggml_tensor **)malloc((size_t)n * sizeof *listed + 1);
    if (!listed) {
        fail("out of memory");
        return false;
    }
    memcpy(listed, tb->order + n_nodes, (size_t)n_leafs * sizeof *listed);
    memcpy(listed + n_leafs, tb->order, (size_t)n_nodes * sizeof *listed);
    memset(tb->keys, 0, (tb->mask + 1) * sizeof *tb->keys);
    tb->n = 0;
    for (int i = 0; i < n; i++) add(tb, listed[i]);
    free(listed);
    tb->n_leafs = n_leafs;
    return true;
}
#endif

static bool table_build(struct table *tb, struct ggml_cgraph *g, ggml_backend_sched_t sched) {
    int n_nodes = ggml_graph_n_nodes(g);
    tb->cap = 2 * known_leafs(g) + n_nodes * (2 * GGML_MAX_SRC + 4) + 16;
    size_t size = 16;
    while (size < (size_t)tb->cap * 2) size *= 2;
    tb->mask = size - 1;
    tb->order = (struct ggml_tensor **)calloc((size_t)tb->cap, sizeof *tb->order);
    tb->keys = (struct ggml_tensor **)calloc(size, sizeof *tb->keys);
    tb->pos = (int *)calloc(size, sizeof *tb->pos);
    if (!tb->order || !tb->keys || !tb->pos) {
        fail("out of memory");
        return false;
    }
    return list_tensors(tb, g, sched);
}

static void table_free(struct table *tb) {
    free(tb->copies);
    free(tb->order);
    free(tb->keys);
    free(tb->pos);
}

/* ---- one tensor line ------------------------------------------------------------------------ */

static void lower(char *out, size_t size, const char *in) {
    size_t i = 0;
    for (; in[i] && i + 1 < size; i++) out[i] = ascii_lower(in[i]);
    out[i] = '\0';
}

/* The ops the format knows (docs/graph-format.md: ggml's lower-case names, tgsched's TG_OP_LIST). */
static bool op_known(const char *name) {
    static const char *const known[] = {
        "none", "dup", "add", "add_id", "add1", "acc", "sub", "mul", "div", "sqr", "sqrt", "log", "sin", "cos",
        "sum", "sum_rows", "cumsum", "mean", "argmax", "count_equal", "repeat", "repeat_back", "concat",
        "silu_back", "norm", "rms_norm", "rms_norm_back", "group_norm", "l2_norm", "mul_mat", "mul_mat_id",
        "out_prod", "scale", "set", "cpy", "cont", "reshape", "view", "permute", "transpose", "get_rows",
        "get_rows_back", "set_rows", "diag", "diag_mask_inf", "diag_mask_zero", "soft_max", "soft_max_back",
        "rope", "rope_back", "clamp", "conv_transpose_1d", "im2col", "im2col_back", "conv_2d", "conv_2d_dw",
        "conv_transpose_2d", "pool_1d", "pool_2d", "pool_2d_back", "upscale", "pad", "pad_reflect_1d", "roll",
        "arange", "timestep_embedding", "argsort", "leaky_relu", "tri", "fill", "flash_attn_ext",
        "flash_attn_back", "ssm_conv", "ssm_scan", "win_part", "win_unpart", "get_rel_pos", "add_rel_pos",
        "rwkv_wkv6", "gated_linear_attn", "rwkv_wkv7", "unary", "map_custom1", "map_custom2", "map_custom3",
        "custom", "cross_entropy_loss", "cross_entropy_loss_back", "opt_step_adamw", "opt_step_sgd", "glu"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i]) == 0) return true;
    return false;
}

/* The types the format knows (docs/graph-format.md). */
static bool type_known(const char *name) {
    static const char *const known[] = {"f32", "f16", "bf16", "i32", "i64", "i8", "q4_0",
                                        "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q6_k"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i]) == 0) return true;
    return false;
}

static bool contiguous(const struct ggml_tensor *t) {
    size_t nb = ggml_type_size(t->type);
    if (t->nb[0] != nb) return false;
    nb = ggml_row_size(t->type, t->ne[0]);
    for (int d = 1; d < GGML_MAX_DIMS; d++) {
        if (t->nb[d] != nb) return false;
        nb *= (size_t)t->ne[d];
    }
    return true;
}

/* Index of the scheduler backend holding buffer type buft: the one whose
 * default it is, else the first that can use it, else the last. */
static int backend_of_buft(ggml_backend_sched_t sched, ggml_backend_buffer_type_t buft) {
    int n = ggml_backend_sched_get_n_backends(sched);
    for (int b = 0; b < n; b++)
        if (ggml_backend_get_default_buffer_type(ggml_backend_sched_get_backend(sched, b)) == buft) return b;
    for (int b = 0; b < n; b++)
        if (ggml_backend_supports_buft(ggml_backend_sched_get_backend(sched, b), buft)) return b;
    return n - 1;
}

/* The `.tg` spelling of a backend's name: [a-z0-9_.-], at most 31 characters
 * (tg_ggml_export_mem refuses two backends spelled alike). */
static void backend_name(ggml_backend_t backend, char *out, size_t size) {
    size_t i = 0;
    for (const char *c = ggml_backend_name(backend); *c && i + 1 < size; c++, i++) {
        out[i] = ascii_alnum(*c) || *c == '_' || *c == '-' || *c == '.' ? ascii_lower(*c) : '_';
    }
    out[i] = '\0';
}

static bool write_tensor(struct text *out, const struct table *tb, int i, const struct tg_ggml_export_options *o) {
    struct ggml_tensor *t = tb->order[i];
    char type[16], op[32];
    lower(type, sizeof type, ggml_type_name(t->type));
    lower(op, sizeof op, ggml_op_name(t->op));
    if (!type_known(type)) {
        fail("tensor '%s': type %s has no .tg spelling (the format knows f32 f16 bf16 i32 i64 i8 q4_0 q4_1 q5_0 "
             "q5_1 q8_0 q4_k q6_k)", t->name, ggml_type_name(t->type));
        return false;
    }
    bool leaf = i < tb->n_leafs;
    if (!leaf && !op_known(op)) {
        fail("tensor '%s': op %s has no .tg spelling (the format knows ggml's ops up to glu, docs/graph-format.md)", t->name,
             ggml_op_name(t->op));
        return false;
    }
    put(out, "%s %d %s %lld %lld %lld %lld %s", leaf ? "leaf" : "node", i, type, (long long)t->ne[0], (long long)t->ne[1],
        (long long)t->ne[2], (long long)t->ne[3], leaf ? "none" : op);
    int n_src = 0;
    for (int k = 0; k < GGML_MAX_SRC; k++)
        if (t->src[k]) n_src = k + 1;
    for (int k = 0; !leaf && k < n_src; k++) {
        struct ggml_tensor *s = as_written(tb, t->src[k]);
        int p = s ? position_of(tb, s) : -1;
        if (s && (p < 0 || p > i)) {
            fail("tensor '%s': its source '%s' is neither a node nor a leaf of the graph written before it", t->name, s->name);
            return false;
        }
        put(out, "%s", k ? "," : " src=");
        if (s) put(out, "%d", p);
        else put(out, "-");
    }
    if (t->view_src) {
        int p = position_of(tb, t->view_src);
        if (p < 0 || p >= i) {
            fail("tensor '%s': its view source '%s' is not written before it", t->name, t->view_src->name);
            return false;
        }
        put(out, " view=%d:%zu", p, t->view_offs);
    }
    if (!contiguous(t)) put(out, " nb=%zu,%zu,%zu,%zu", t->nb[0], t->nb[1], t->nb[2], t->nb[3]);
    int n_params = 0;
    for (int w = 0; w < (int)(GGML_MAX_OP_PARAMS / sizeof(int32_t)); w++)
        if (t->op_params[w]) n_params = w + 1;
    for (int w = 0; !leaf && w < n_params; w++) {
        uint32_t v = (uint32_t)t->op_params[w];
        put(out, w ? (v < 65536 ? ",%u" : ",0x%x") : (v < 65536 ? " params=%u" : " params=0x%x"), v);
    }
    static const struct {
        int bit;
        const char *name;
    } flags[] = {{GGML_TENSOR_FLAG_INPUT, "input"}, {GGML_TENSOR_FLAG_OUTPUT, "output"},
                 {GGML_TENSOR_FLAG_PARAM, "param"}, {GGML_TENSOR_FLAG_LOSS, "loss"}};
    const char *sep = " flags=";
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        if (t->flags & flags[f].bit) {
            put(out, "%s%s", sep, flags[f].name);
            sep = ",";
        }
    }
    if (!leaf && t->op != GGML_OP_NONE && !(t->flags & EXPORT_FLAG_COMPUTE))
        put(out, "%snocompute", sep);
    /* memory that exists before planning (not a compute buffer, not a view's) */
    ggml_backend_buffer_t buf = t->buffer;
    bool pre = !t->view_src && (t->data || buf) && !(buf && ggml_backend_buffer_get_usage(buf) == GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    if (pre) {
        bool weights = buf && ggml_backend_buffer_get_usage(buf) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
        put(out, " buf=%s", weights ? "weights" : "data");
        int n = o->sched ? ggml_backend_sched_get_n_backends(o->sched) : 1;
        int b = o->sched && buf ? backend_of_buft(o->sched, ggml_backend_buffer_get_type(buf)) : n - 1;
        if (b != n - 1) {
            char name[32];
            backend_name(ggml_backend_sched_get_backend(o->sched, b), name, sizeof name);
            put(out, "@%s", name);
        }
    }
    ggml_backend_t chosen = o->sched ? ggml_backend_sched_get_tensor_backend(o->sched, t) : NULL;
    if (chosen) {
        char name[32];
        backend_name(chosen, name, sizeof name);
        put(out, " %s=%s", o->pin_assignment && !pre && !t->view_src ? "backend" : "x-ggml-backend", name);
    }
    if (t->name[0]) {
        put(out, " name=");
        for (const char *c = t->name; *c; c++) {
            bool ok = ascii_alnum(*c) || *c == '_' || *c == '.' || *c == '#' || *c == ':' || *c == '-';
            put(out, "%c", ok ? *c : '_');
        }
    }
    put(out, "\n");
    return true;
}

/* ---- the file ---------------------------------------------------------------------------- */

char *tg_ggml_export_mem(struct ggml_cgraph *graph, const struct tg_ggml_export_options *opts, size_t *len) {
    export_error[0] = '\0';
    struct tg_ggml_export_options none;
    memset(&none, 0, sizeof none);
    const struct tg_ggml_export_options *o = opts ? opts : &none;
    struct table tb;
    struct text out;
    memset(&tb, 0, sizeof tb);
    memset(&out, 0, sizeof out);
    bool ok = graph && table_build(&tb, graph, o->sched);
    if (!graph) fail("no graph");
    put(&out, "tgraph 1\n");
    if (ok && o->sched) {
        int n = ggml_backend_sched_get_n_backends(o->sched);
        char names[GGML_SCHED_EXPORT_MAX_BACKENDS][32];
        if (n > GGML_SCHED_EXPORT_MAX_BACKENDS) {
            fail("the scheduler has %d backends: the format holds %d", n, GGML_SCHED_EXPORT_MAX_BACKENDS);
            ok = false;
        }
        put(&out, "backends ");
        for (int b = 0; ok && b < n && b < GGML_SCHED_EXPORT_MAX_BACKENDS; b++) {
            backend_name(ggml_backend_sched_get_backend(o->sched, b), names[b], sizeof names[b]);
            for (int a = 0; ok && a < b; a++) {
                if (strcmp(names[a], names[b]) == 0) {
                    fail("backends '%s' and '%s' are both spelled '%s' in .tg (names keep [a-z0-9_.-], 31 characters)",
                         ggml_backend_name(ggml_backend_sched_get_backend(o->sched, a)),
                         ggml_backend_name(ggml_backend_sched_get_backend(o->sched, b)), names[b]);
                    ok = false;
                }
            }
            put(&out, "%s%s", b ? "," : "", names[b]);
        }
        put(&out, "\n");
    }
    put(&out, "meta source=ggml %s\n", ggml_version());
#ifndef TG_EXPORT_GGML_LEAFS
    put(&out, "meta leaf_order=first_use\n");
#endif
    for (const char *m = o->meta; ok && m && *m;) {
        const char *nl = strchr(m, '\n');
        size_t n = nl ? (size_t)(nl - m) : strlen(m);
        const char *eq = (const char *)memchr(m, '=', n);
        if (n && (!eq || eq == m)) {
            fail("meta line '%.*s' is not KEY=VALUE", (int)(n > 200 ? 200 : n), m);
            ok = false;
        }
        if (n) put(&out, "meta %.*s\n", (int)n, m);
        m += n + (nl ? 1 : 0);
    }
    for (int i = 0; ok && i < tb.n; i++) ok = write_tensor(&out, &tb, i, o);
    table_free(&tb);
    if (ok && out.failed) {
        fail("out of memory");
        ok = false;
    }
    if (!ok) {
        free(out.s);
        return NULL;
    }
    if (len) *len = out.len;
    return out.s;
}

int tg_ggml_export(struct ggml_cgraph *graph, const char *path, const struct tg_ggml_export_options *opts) {
    size_t len = 0;
    char *text = tg_ggml_export_mem(graph, opts, &len);
    if (!text) return -1;
    errno = 0;
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(text, 1, len, fp) == len;
    int err = ok ? 0 : errno;
    if (fp && fclose(fp) != 0) {
        if (ok) err = errno;
        ok = false;
    }
    free(text);
    if (!ok) {
        fail("cannot write '%s': %s", path, err ? strerror(err) : "write failed");
        return -1;
    }
    return 0;
}

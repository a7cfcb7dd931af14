/* tg-ggml-export: a ggml graph as tgsched `.tg` text (see tg-ggml-export.h).
 * Self-contained: ggml's headers and the C library only, so it compiles into
 * any ggml or llama.cpp program. */
#include "tg-ggml-export.h"

#include <ctype.h>
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

/* GGML_TENSOR_FLAG_COMPUTE, by value: ggml before it lacks the name.  A
 * graph whose nodes carry it marks the nodes it computes; those without it
 * are written `nocompute` (ggml_build_forward_select's other branches). */
#define EXPORT_FLAG_COMPUTE 16

struct table {
    bool compute_marked;        /* some node carries EXPORT_FLAG_COMPUTE */
    struct ggml_tensor **order; /* leafs, then nodes */
    int n, n_leafs, cap;
    size_t mask;                /* pointer -> position */
    struct ggml_tensor **keys;
    int *pos;
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

/* A copy the scheduler made of a split input ("BACKEND#NAME#COPY"), or a
 * tensor outside the graph: the graph's tensor it stands for, or NULL.
 * Names repeat in ggml graphs (every reshape is "__reshaped_"), so the
 * tensor copied must also have the copy's type and shape. */
static struct ggml_tensor *as_written(const struct table *tb, struct ggml_tensor *t) {
    if (!t || position_of(tb, t) >= 0) return t;
    const char *h1 = strchr(t->name, '#'), *h2 = h1 ? strchr(h1 + 1, '#') : NULL;
    if (!h2) return t;
    for (int i = 0; i < tb->n; i++) {
        const struct ggml_tensor *o = tb->order[i];
        if (strlen(o->name) == (size_t)(h2 - h1 - 1) && strncmp(o->name, h1 + 1, (size_t)(h2 - h1 - 1)) == 0 &&
            o->type == t->type && ggml_are_same_shape(o, t))
            return tb->order[i];
    }
    return t;
}

#ifdef TG_EXPORT_GGML_LEAFS
static int known_leafs(const struct ggml_cgraph *g) { return g->n_leafs; }

/* ggml's leaf list, then its nodes. */
static bool list_tensors(struct table *tb, struct ggml_cgraph *g) {
    for (int j = 0; j < g->n_leafs; j++) add(tb, g->leafs[j]);
    tb->n_leafs = tb->n;
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) add(tb, ggml_graph_node(g, i));
    return true;
}
#else
static int known_leafs(const struct ggml_cgraph *g) {
    (void)g;
    return 0;
}

/* Without the leaf list: every source that is not a node, in the order the
 * nodes first read it, then the nodes. */
static bool list_tensors(struct table *tb, struct ggml_cgraph *g) {
    int n_nodes = ggml_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; i++) add(tb, ggml_graph_node(g, i));
    for (int i = 0; i < n_nodes; i++) {
        struct ggml_tensor *t = ggml_graph_node(g, i);
        for (int k = 0; k <= GGML_MAX_SRC; k++) {
            struct ggml_tensor *s = k < GGML_MAX_SRC ? t->src[k] : t->view_src;
            if (s && !strchr(s->name, '#')) add(tb, s); /* not the scheduler's copies */
        }
    }
    /* leafs go first: list them again in that order */
    int n = tb->n, n_leafs = n - n_nodes;
    struct ggml_tensor **listed = (struct ggml_tensor **)malloc((size_t)n * sizeof *listed + 1);
    if (!listed) return false;
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

static bool table_build(struct table *tb, struct ggml_cgraph *g) {
    int n_nodes = ggml_graph_n_nodes(g);
    tb->cap = known_leafs(g) + n_nodes * (GGML_MAX_SRC + 2) + 16;
    size_t size = 16;
    while (size < (size_t)tb->cap * 2) size *= 2;
    tb->mask = size - 1;
    tb->order = (struct ggml_tensor **)calloc((size_t)tb->cap, sizeof *tb->order);
    tb->keys = (struct ggml_tensor **)calloc(size, sizeof *tb->keys);
    tb->pos = (int *)calloc(size, sizeof *tb->pos);
    for (int i = 0; i < n_nodes; i++) tb->compute_marked |= (ggml_graph_node(g, i)->flags & EXPORT_FLAG_COMPUTE) != 0;
    return tb->order && tb->keys && tb->pos && list_tensors(tb, g);
}

static void table_free(struct table *tb) {
    free(tb->order);
    free(tb->keys);
    free(tb->pos);
}

/* ---- one tensor line ------------------------------------------------------------------------ */

static void lower(char *out, size_t size, const char *in) {
    size_t i = 0;
    for (; in[i] && i + 1 < size; i++) out[i] = (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
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

static void backend_name(ggml_backend_t backend, char *out, size_t size) {
    size_t i = 0;
    for (const char *c = ggml_backend_name(backend); *c && i + 1 < size; c++, i++) {
        out[i] = isalnum((unsigned char)*c) || *c == '_' || *c == '-' || *c == '.' ? (char)tolower((unsigned char)*c) : '_';
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
    if (!leaf && tb->compute_marked && t->op != GGML_OP_NONE && !(t->flags & EXPORT_FLAG_COMPUTE))
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
            bool ok = isalnum((unsigned char)*c) || *c == '_' || *c == '.' || *c == '#' || *c == ':' || *c == '-';
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
    bool ok = graph && table_build(&tb, graph);
    if (!ok) fail(graph ? "out of memory" : "no graph");
    put(&out, "tgraph 1\n");
    if (ok && o->sched) {
        int n = ggml_backend_sched_get_n_backends(o->sched);
        put(&out, "backends ");
        for (int b = 0; b < n; b++) {
            char name[32];
            backend_name(ggml_backend_sched_get_backend(o->sched, b), name, sizeof name);
            put(&out, "%s%s", b ? "," : "", name);
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
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(text, 1, len, fp) == len;
    if (fp && fclose(fp) != 0) ok = false;
    free(text);
    if (!ok) {
        fail("cannot write '%s'", path);
        return -1;
    }
    return 0;
}

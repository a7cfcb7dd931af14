/* A tgsched graph as a ggml graph (see tg-ggml.h): tensors made with ggml's
 * constructor and given tgsched's fields, the graph's lists and visited set
 * filled in tgsched's order, pre-allocated tensors bound in ggml buffers.
 * Also the type/op maps (by name: tgsched spells both as ggml does) and the
 * catching of ggml's aborts. */
#include "tg-ggml.h"

#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <ctype.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- aborts and the log --------------------------------------------------------------- */

static _Thread_local jmp_buf *abort_target;
static _Thread_local char abort_message[400];

static void on_ggml_abort(const char *message) {
    snprintf(abort_message, sizeof abort_message, "%s", message);
    if (abort_target) longjmp(*abort_target, 1);
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

void tg_ggml_quiet_log(void) {
    if (!getenv("TG_GGML_VERBOSE")) ggml_log_set(quiet, NULL);
}

bool tg_ggml_catch(void (*fn)(void *user), void *user, char *message, size_t message_size) {
    jmp_buf here;
    jmp_buf *outer = abort_target;
    ggml_abort_callback_t previous = ggml_set_abort_callback(on_ggml_abort);
    volatile bool ok = true;
    if (setjmp(here) == 0) {
        abort_target = &here;
        fn(user);
    } else {
        ok = false;
        if (message && message_size) snprintf(message, message_size, "%s", abort_message);
    }
    abort_target = outer;
    ggml_set_abort_callback(previous);
    return ok;
}

/* ---- types and ops ------------------------------------------------------------------------ */

static bool same_name_ignoring_case(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    }
    return *a == *b;
}

enum ggml_type tg_ggml_type(enum tg_type type) {
    const char *name = tg_type_name(type);
    for (int t = 0; name && t < GGML_TYPE_COUNT; t++) {
        const char *g = ggml_type_name((enum ggml_type)t);
        if (g && same_name_ignoring_case(g, name)) return (enum ggml_type)t;
    }
    return GGML_TYPE_COUNT;
}

enum ggml_op tg_ggml_op(enum tg_op op) {
    const char *name = tg_op_name(op);
    for (int o = 0; name && o < GGML_OP_COUNT; o++) {
        if (same_name_ignoring_case(ggml_op_name((enum ggml_op)o), name)) return (enum ggml_op)o;
    }
    return GGML_OP_COUNT;
}

/* ---- the tensor map -------------------------------------------------------------------- */

static int compare_pointers(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

static int map_find(const struct tg_ggml_graph *gg, const struct tg_tensor *t) {
    int lo = 0, hi = gg->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (gg->from[mid] == t) return mid;
        if ((uintptr_t)gg->from[mid] < (uintptr_t)t) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

struct ggml_tensor *tg_ggml_lookup(const struct tg_ggml_graph *gg, const struct tg_tensor *t) {
    int i = t ? map_find(gg, t) : -1;
    return i >= 0 ? gg->to[i] : NULL;
}

/* Every tensor the graph reaches (nodes, leafs, their sources and view roots), sorted. */
static enum tg_status collect_tensors(const struct tg_graph *g, struct tg_ggml_graph *gg) {
    int cap = 2 * (g->n_nodes + g->n_leafs) + 16, n = 0;
    const struct tg_tensor **list = malloc((size_t)cap * sizeof *list);
    if (!list) return tg_fail(TG_ERR_ALLOC, "import: out of host memory");
    for (int i = 0; i < g->n_leafs; i++) list[n++] = g->leafs[i];
    for (int i = 0; i < g->n_nodes; i++) list[n++] = g->nodes[i];
    /* sources and roots: a worklist over what was added (duplicates removed below) */
    for (int at = 0; at < n; at++) {
        const struct tg_tensor *t = list[at];
        for (int k = 0; k <= TG_MAX_SRC; k++) {
            const struct tg_tensor *s = k < TG_MAX_SRC ? t->src[k] : t->view_src;
            if (!s) continue;
            bool known = false;
            for (int j = 0; j < n && !known; j++) known = list[j] == s; /* graphs here are small */
            if (known) continue;
            if (n == cap) {
                const struct tg_tensor **grown = realloc(list, (size_t)(cap *= 2) * sizeof *list);
                if (!grown) {
                    free(list);
                    return tg_fail(TG_ERR_ALLOC, "import: out of host memory");
                }
                list = grown;
            }
            list[n++] = s;
        }
    }
    qsort(list, (size_t)n, sizeof *list, compare_pointers);
    gg->from = list;
    gg->n_tensors = n;
    gg->to = calloc((size_t)n, sizeof *gg->to);
    return gg->to ? TG_OK : tg_fail(TG_ERR_ALLOC, "import: out of host memory");
}

/* ---- tensors -------------------------------------------------------------------------- */

/* Memory its context owns (data, no buffer): a no_alloc context's tensor in ggml. */
static bool in_context_memory(const struct tg_tensor *t) { return !t->view_src && t->data && !t->buffer; }

static enum tg_status make_tensor(struct tg_ggml_graph *gg, const struct tg_tensor *t, struct ggml_tensor **out) {
    enum ggml_type type = tg_ggml_type(t->type);
    enum ggml_op op = tg_ggml_op(t->op);
    if (type == GGML_TYPE_COUNT) return tg_fail(TG_ERR_UNSUPPORTED, "import: ggml has no type '%s' (tensor '%s')", tg_type_name(t->type), t->name);
    if (op == GGML_OP_COUNT) return tg_fail(TG_ERR_UNSUPPORTED, "import: ggml has no op '%s' (tensor '%s')", tg_op_name(t->op), t->name);
    if (in_context_memory(t) && !tg_is_contiguous(t)) { /* ggml's context gives a tensor its packed size */
        return tg_fail(TG_ERR_UNSUPPORTED, "import: '%s' is in context memory but not contiguous", t->name);
    }
    const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    struct ggml_tensor *x = ggml_new_tensor(in_context_memory(t) ? gg->owned : gg->ctx, type, 4, ne);
    for (int d = 0; d < 4; d++) x->nb[d] = t->nb[d];
    if (in_context_memory(t)) memcpy(x->data, t->data, tg_nbytes(t)); /* the same bytes, for kernels that read them */
    x->op = op;
    memcpy(x->op_params, t->op_params, sizeof t->op_params);
    ggml_set_name(x, t->name);
    *out = x;
    return TG_OK;
}

/* Sources, views and flags, once every tensor exists. */
static void link_tensor(struct tg_ggml_graph *gg, const struct tg_tensor *t, const struct tg_ggml_import_options *o) {
    struct ggml_tensor *x = tg_ggml_lookup(gg, t);
    for (int k = 0; k < TG_MAX_SRC && k < GGML_MAX_SRC; k++) x->src[k] = tg_ggml_lookup(gg, t->src[k]);
    x->view_src = tg_ggml_lookup(gg, t->view_src);
    x->view_offs = t->view_offs;
    int32_t flags = t->flags & (TG_FLAG_INPUT | TG_FLAG_PARAM | TG_FLAG_LOSS); /* same bits in ggml */
    x->flags |= flags;
    if (t->flags & TG_FLAG_OUTPUT) {
        if (o->raw_output_flags) x->flags |= GGML_TENSOR_FLAG_OUTPUT;
        else ggml_set_output(x);
    }
}

/* ---- pre-allocated tensors ---------------------------------------------------------------- */

static bool is_external_root(const struct tg_tensor *t) { return !t->view_src && t->buffer; }

static enum ggml_backend_buffer_usage usage_of(const struct tg_tensor *t) {
    return t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_WEIGHTS ? GGML_BACKEND_BUFFER_USAGE_WEIGHTS
                                                                                  : GGML_BACKEND_BUFFER_USAGE_ANY;
}

static ggml_backend_buffer_type_t external_buft(const struct tg_tensor *t, const struct tg_ggml_import_options *o) {
    ggml_backend_buffer_type_t b = o->external_buft ? o->external_buft(t, o->user) : NULL;
    return b ? b : ggml_backend_cpu_buffer_type();
}

/* Roots of one buffer type and usage go into one buffer, in map order. */
static enum tg_status bind_group(struct tg_ggml_graph *gg, ggml_backend_buffer_type_t buft,
                                 enum ggml_backend_buffer_usage usage, const struct tg_ggml_import_options *o) {
    size_t align = ggml_backend_buft_get_alignment(buft), total = 0;
    for (int i = 0; i < gg->n_tensors; i++) {
        const struct tg_tensor *t = gg->from[i];
        if (!is_external_root(t) || external_buft(t, o) != buft || usage_of(t) != usage) continue;
        total = GGML_PAD(total, align) + ggml_backend_buft_get_alloc_size(buft, gg->to[i]);
    }
    if (total == 0) return TG_OK;
    if (gg->n_buffers == TG_GGML_MAX_EXTERNAL_BUFFERS) return tg_fail(TG_ERR_INVALID, "import: too many external buffers");
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, total);
    if (!buf) return tg_fail(TG_ERR_ALLOC, "import: ggml could not allocate %zu bytes of '%s'", total, ggml_backend_buft_name(buft));
    ggml_backend_buffer_set_usage(buf, usage);
    gg->buffers[gg->n_buffers++] = buf;
    char *base = ggml_backend_buffer_get_base(buf);
    size_t off = 0;
    for (int i = 0; i < gg->n_tensors; i++) {
        const struct tg_tensor *t = gg->from[i];
        if (!is_external_root(t) || external_buft(t, o) != buft || usage_of(t) != usage) continue;
        off = GGML_PAD(off, align);
        if (ggml_backend_tensor_alloc(buf, gg->to[i], base + off) != GGML_STATUS_SUCCESS) {
            return tg_fail(TG_ERR_ALLOC, "import: ggml could not bind '%s'", t->name);
        }
        off += ggml_backend_buft_get_alloc_size(buft, gg->to[i]);
    }
    return TG_OK;
}

/* A root the caller shares: bound in place, in one ggml buffer per tgsched buffer. */
static enum tg_status bind_shared(struct tg_ggml_graph *gg, int i) {
    const struct tg_tensor *t = gg->from[i];
    ggml_backend_buffer_t buf = NULL;
    for (int k = 0; k < gg->n_buffers && !buf; k++) {
        if (gg->laid_over[k] == t->buffer) buf = gg->buffers[k];
    }
    if (!buf) {
        if (gg->n_buffers == TG_GGML_MAX_EXTERNAL_BUFFERS) return tg_fail(TG_ERR_INVALID, "import: too many external buffers");
        buf = ggml_backend_cpu_buffer_from_ptr(tg_buffer_get_base(t->buffer), tg_buffer_get_size(t->buffer));
        if (!buf) return tg_fail(TG_ERR_ALLOC, "import: ggml could not lay a buffer over '%s''s memory", t->name);
        ggml_backend_buffer_set_usage(buf, usage_of(t));
        gg->laid_over[gg->n_buffers] = t->buffer;
        gg->buffers[gg->n_buffers++] = buf;
    }
    if (ggml_backend_tensor_alloc(buf, gg->to[i], t->data) != GGML_STATUS_SUCCESS) {
        return tg_fail(TG_ERR_ALLOC, "import: ggml could not bind '%s' in place", t->name);
    }
    return TG_OK;
}

static enum tg_status bind_externals(struct tg_ggml_graph *gg, const struct tg_ggml_import_options *o) {
    enum tg_status st = TG_OK;
    for (int i = 0; i < gg->n_tensors && st == TG_OK && o->share_memory; i++) {
        const struct tg_tensor *t = gg->from[i];
        if (is_external_root(t) && tg_buffer_is_host(t->buffer) && o->share_memory(t, o->user)) st = bind_shared(gg, i);
    }
    for (int i = 0; i < gg->n_tensors && st == TG_OK; i++) {
        const struct tg_tensor *t = gg->from[i];
        if (!is_external_root(t) || gg->to[i]->buffer) continue;
        st = bind_group(gg, external_buft(t, o), usage_of(t), o);
    }
    /* views of them hold the address, as ggml's view constructors set it */
    for (int i = 0; i < gg->n_tensors && st == TG_OK; i++) {
        struct ggml_tensor *x = gg->to[i];
        if (x->view_src && x->view_src->data && !x->data) x->data = (char *)x->view_src->data + x->view_offs;
    }
    return st;
}

/* ---- the graph -------------------------------------------------------------------------- */

static void add_to_graph(struct ggml_cgraph *cg, struct ggml_tensor *x, bool node) {
    if (node) cg->nodes[cg->n_nodes++] = x;
    else cg->leafs[cg->n_leafs++] = x;
    size_t at = ggml_hash_insert(&cg->visited_hash_set, x);
    cg->use_counts[at] = 0;
}

enum tg_status tg_ggml_import(const struct tg_graph *g, const struct tg_ggml_import_options *opts,
                              struct tg_ggml_graph *out) {
    struct tg_ggml_import_options none = {0};
    const struct tg_ggml_import_options *o = opts ? opts : &none;
    memset(out, 0, sizeof *out);
    enum tg_status st = collect_tensors(g, out);
    int size = g->n_nodes > g->n_leafs ? g->n_nodes : g->n_leafs;
    if (size < 1) size = 1;
    if (st == TG_OK) {
        struct ggml_init_params params = {
            .mem_size = (size_t)out->n_tensors * ggml_tensor_overhead() + ggml_graph_overhead_custom((size_t)size, false),
            .mem_buffer = NULL,
            .no_alloc = true,
        };
        out->ctx = ggml_init(params);
        if (!out->ctx) st = tg_fail(TG_ERR_ALLOC, "import: ggml_init failed");
    }
    size_t owned = 0;
    for (int i = 0; i < out->n_tensors; i++) {
        const struct tg_tensor *t = out->from[i];
        if (in_context_memory(t)) owned += ggml_tensor_overhead() + GGML_PAD(tg_nbytes(t), GGML_MEM_ALIGN);
    }
    if (st == TG_OK && owned) {
        out->owned = ggml_init((struct ggml_init_params){.mem_size = owned, .mem_buffer = NULL, .no_alloc = false});
        if (!out->owned) st = tg_fail(TG_ERR_ALLOC, "import: ggml_init of the owning context failed");
    }
    for (int i = 0; st == TG_OK && i < out->n_tensors; i++) st = make_tensor(out, out->from[i], &out->to[i]);
    for (int i = 0; st == TG_OK && i < out->n_tensors; i++) link_tensor(out, out->from[i], o);
    if (st == TG_OK) st = bind_externals(out, o);
    if (st == TG_OK) {
        struct ggml_cgraph *cg = ggml_new_graph_custom(out->ctx, (size_t)size, false);
        for (int j = 0; j < g->n_leafs; j++) add_to_graph(cg, tg_ggml_lookup(out, g->leafs[j]), false);
        for (int i = 0; i < g->n_nodes; i++) {
            struct ggml_tensor *x = tg_ggml_lookup(out, g->nodes[i]);
            if (x->op != GGML_OP_NONE && !(g->nodes[i]->flags & TG_FLAG_NO_COMPUTE)) x->flags |= GGML_TENSOR_FLAG_COMPUTE;
            add_to_graph(cg, x, true);
        }
        for (int i = 0; i < cg->n_nodes; i++) {
            for (int k = 0; k < GGML_MAX_SRC; k++) {
                size_t at = cg->nodes[i]->src[k] ? ggml_hash_find(&cg->visited_hash_set, cg->nodes[i]->src[k]) : GGML_HASHSET_FULL;
                if (at != GGML_HASHSET_FULL && ggml_bitset_get(cg->visited_hash_set.used, at)) cg->use_counts[at]++;
            }
        }
        out->graph = cg;
    }
    if (st != TG_OK) tg_ggml_graph_free(out);
    return st;
}

void tg_ggml_graph_free(struct tg_ggml_graph *gg) {
    for (int i = 0; i < gg->n_buffers; i++) ggml_backend_buffer_free(gg->buffers[i]);
    if (gg->ctx) ggml_free(gg->ctx);
    if (gg->owned) ggml_free(gg->owned);
    free((void *)gg->from);
    free(gg->to);
    memset(gg, 0, sizeof *gg);
}

char *tg_ggml_read_text(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *s = NULL;
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    if (n >= 0 && fseek(fp, 0, SEEK_SET) == 0) s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(fp);
    if (s) s[n] = '\0', *len = (size_t)n;
    return s;
}

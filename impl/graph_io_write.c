/* The `.tg` writer: canonical text for a loaded file or any graph.
 *
 * Canonical means one spelling per graph: keys in a fixed order (src, view, nb,
 * params, flags, buf, bufid, backend, name), nb= only when the strides are not the
 * contiguous ones, params= up to the last non-zero word (decimal below 65536,
 * hex above, as the corpus is written), names limited to [A-Za-z0-9_.#:-].
 * Reading the output back gives the same graph, and writing that again gives
 * the same bytes.  The writer refuses graphs it could not write re-readably
 * (a reference to a tensor that is not written before it; a backend or buffer
 * type name the reader would refuse or mistake for another; a meta entry that
 * would not read back as one meta line). */
#include "graph_io-parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable text ---------------------------------------------------------- */

struct text {
    char *s;
    size_t len, cap;
    bool failed;
};

static void text_printf(struct text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void text_printf(struct text *t, const char *fmt, ...) {
    if (t->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->s && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap - t->len <= (size_t)n) cap *= 2;
        char *bigger = realloc(t->s, cap);
        if (!bigger) {
            t->failed = true;
            return;
        }
        t->s = bigger;
        t->cap = cap;
    }
}

/* ---- tensor -> line position ------------------------------------------------- */

struct position_map {
    size_t mask;
    const struct tg_tensor **keys;
    int *positions;
};

static size_t mix_pointer(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return (size_t)x;
}

static bool position_map_init(struct position_map *m, int n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    m->mask = cap - 1;
    m->keys = calloc(cap, sizeof *m->keys);
    m->positions = calloc(cap, sizeof *m->positions);
    return m->keys && m->positions;
}

static void position_map_free(struct position_map *m) {
    free(m->keys);
    free(m->positions);
}

/* False when t is already there (written twice). */
static bool position_map_put(struct position_map *m, const struct tg_tensor *t, int position) {
    size_t h = mix_pointer(t) & m->mask;
    while (m->keys[h]) {
        if (m->keys[h] == t) return false;
        h = (h + 1) & m->mask;
    }
    m->keys[h] = t;
    m->positions[h] = position;
    return true;
}

static int position_map_get(const struct position_map *m, const struct tg_tensor *t) {
    size_t h = mix_pointer(t) & m->mask;
    while (m->keys[h]) {
        if (m->keys[h] == t) return m->positions[h];
        h = (h + 1) & m->mask;
    }
    return -1;
}

/* ---- one tensor line ----------------------------------------------------------- */

static const char *display_name(const struct tg_tensor *t) { return t->name[0] ? t->name : "(unnamed)"; }

static bool name_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '#' || c == ':' || c == '-';
}

static bool strides_are_contiguous(const struct tg_tensor *t) {
    size_t nb = tg_type_size(t->type);
    if (t->nb[0] != nb) return false;
    nb *= (size_t)(t->ne[0] / tg_blck_size(t->type));
    for (int i = 1; i < TG_MAX_DIMS; i++) {
        if (t->nb[i] != nb) return false;
        nb *= (size_t)t->ne[i];
    }
    return true;
}

static void write_word(struct text *out, uint32_t w) {
    if (w < 65536) text_printf(out, "%u", (unsigned)w);
    else text_printf(out, "0x%x", (unsigned)w);
}

/* The position of a referenced tensor, which must be written before the line at
 * `self_position` (a source may also be the tensor itself). */
static enum tg_status reference(const struct position_map *m, const struct tg_file_tensor *records,
                                const struct tg_tensor *from, const struct tg_tensor *ref, int self_position,
                                bool allow_self, const char *what, int64_t *id) {
    int pos = position_map_get(m, ref);
    if (pos < 0 || pos > self_position || (pos == self_position && !allow_self)) {
        return tg_fail(TG_ERR_INVALID, "cannot write tensor '%s': its %s '%s' is %s, so a reader could not "
                       "resolve it (add it to the graph first)", display_name(from), what, display_name(ref),
                       pos < 0 ? "not part of the written graph" : "written after it");
    }
    *id = records[pos].id;
    return TG_OK;
}

static enum tg_status write_tensor(struct text *out, const struct position_map *m, const struct tg_file_tensor *records,
                                   int position, const struct tg_file *f, const struct tg_io_alloc_setup *setup) {
    const struct tg_file_tensor *rec = &records[position];
    const struct tg_tensor *t = rec->tensor;
    if (!t) return tg_fail(TG_ERR_INVALID, "cannot write a graph with a NULL tensor"); /* write_records refused it */
    if ((unsigned)t->type >= TG_TYPE_COUNT || (unsigned)t->op >= TG_OP_COUNT) {
        return tg_fail(TG_ERR_INVALID, "cannot write tensor '%s': invalid type or op", display_name(t));
    }
    int n_src = 0;
    for (int i = 0; i < TG_MAX_SRC; i++) {
        if (t->src[i]) n_src = i + 1;
    }
    if (rec->is_leaf && (t->op != TG_OP_NONE || n_src > 0)) {
        return tg_fail(TG_ERR_INVALID, "cannot write tensor '%s' as a leaf: it has op '%s' and %d sources (a leaf "
                       "has op none and no sources)", display_name(t), tg_op_name(t->op), n_src);
    }
    if (tg_op_is_view(t->op) && !t->view_src) {
        return tg_fail(TG_ERR_INVALID, "cannot write tensor '%s': op '%s' makes a view but it has no view source",
                       display_name(t), tg_op_name(t->op));
    }
    text_printf(out, "%s %lld %s %lld %lld %lld %lld %s", rec->is_leaf ? "leaf" : "node", (long long)rec->id,
                tg_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                (long long)t->ne[3], tg_op_name(t->op));

    if (n_src > 0) {
        text_printf(out, " src=");
        for (int i = 0; i < n_src; i++) {
            if (i) text_printf(out, ",");
            if (!t->src[i]) {
                text_printf(out, "-");
                continue;
            }
            int64_t id = 0;
            enum tg_status st = reference(m, records, t, t->src[i], position, true, "source", &id);
            if (st != TG_OK) return st;
            text_printf(out, "%lld", (long long)id);
        }
    }
    if (t->view_src) {
        int64_t id = 0;
        enum tg_status st = reference(m, records, t, t->view_src, position, false, "view source", &id);
        if (st != TG_OK) return st;
        text_printf(out, " view=%lld:%zu", (long long)id, t->view_offs);
    }
    if (!strides_are_contiguous(t)) {
        text_printf(out, " nb=%zu,%zu,%zu,%zu", t->nb[0], t->nb[1], t->nb[2], t->nb[3]);
    }
    int n_params = 0;
    for (int i = 0; i < TG_MAX_OP_PARAMS; i++) {
        if (t->op_params[i] != 0) n_params = i + 1;
    }
    if (n_params > 0) {
        text_printf(out, " params=");
        for (int i = 0; i < n_params; i++) {
            if (i) text_printf(out, ",");
            write_word(out, (uint32_t)t->op_params[i]);
        }
    }
    if (t->flags & (TG_FLAG_INPUT | TG_FLAG_OUTPUT | TG_FLAG_PARAM | TG_FLAG_LOSS | TG_FLAG_NO_COMPUTE)) {
        static const struct {
            int32_t bit;
            const char *name;
        } flags[] = {{TG_FLAG_INPUT, "input"},
                     {TG_FLAG_OUTPUT, "output"},
                     {TG_FLAG_PARAM, "param"},
                     {TG_FLAG_LOSS, "loss"},
                     {TG_FLAG_NO_COMPUTE, "nocompute"}};
        const char *sep = " flags=";
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
            if (t->flags & flags[i].bit) {
                text_printf(out, "%s%s", sep, flags[i].name);
                sep = ",";
            }
        }
    }
    /* A view's memory is its root's, so only roots carry a placement. */
    if (!t->view_src && rec->placement != TG_PLACE_NONE) {
        text_printf(out, " buf=%s", rec->placement == TG_PLACE_WEIGHTS ? "weights" : "data");
        /* The default (last) backend is left implicit, as the corpus writes it. */
        if (f && rec->placement_backend >= 0 && rec->placement_backend != f->n_backends - 1) {
            text_printf(out, "@%s", f->backend_names[rec->placement_backend]);
        }
    }
    if (setup && setup->n_ids > 0 && rec->buffer_id != 0) {
        if (rec->buffer_id < 0 || rec->buffer_id >= setup->n_ids) {
            return tg_fail(TG_ERR_INVALID, "cannot write tensor '%s': buffer id %d is not one of the %d buffer ids",
                           display_name(t), rec->buffer_id, setup->n_ids);
        }
        text_printf(out, " bufid=%d", rec->buffer_id);
    }
    if (f && rec->pinned_backend >= 0) text_printf(out, " backend=%s", f->backend_names[rec->pinned_backend]);
    if (t->name[0]) {
        char name[TG_MAX_NAME];
        size_t n = strnlen(t->name, TG_MAX_NAME - 1);
        for (size_t i = 0; i < n; i++) name[i] = name_char_ok(t->name[i]) ? t->name[i] : '_';
        name[n] = '\0';
        text_printf(out, " name=%s", name);
    }
    text_printf(out, "\n");
    return TG_OK;
}

/* ---- header lines ------------------------------------------------------------- */

static bool header_name_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

/* A backend or buffer type name as the reader takes it back: 1 to size - 1
 * characters of [A-Za-z0-9_.-], ended by a NUL inside its array. */
static enum tg_status check_header_name(const char *what, int i, const char *name, size_t size) {
    size_t len = strnlen(name, size);
    if (len == size) {
        return tg_fail(TG_ERR_INVALID, "cannot write %s %d ('%.*s...'): its name has no NUL within its %zu bytes "
                       "(names have at most %zu characters)", what, i, (int)(size - 1), name, size, size - 1);
    }
    if (len == 0) return tg_fail(TG_ERR_INVALID, "cannot write %s %d: its name is empty", what, i);
    for (size_t c = 0; c < len; c++) {
        if (!header_name_char_ok(name[c])) {
            return tg_fail(TG_ERR_INVALID, "cannot write %s %d ('%s'): its name has a character outside "
                           "[A-Za-z0-9_.-], which the reader would refuse (rename it)", what, i, name);
        }
    }
    return TG_OK;
}

/* Lines name backends and buffer types by name, so a repeat reads back as an error. */
static enum tg_status check_unique_name(const char *what, int i, const char *name, const char *earlier, int j) {
    if (strcmp(earlier, name) != 0) return TG_OK;
    return tg_fail(TG_ERR_INVALID, "cannot write %ss %d and %d: both are named '%s', and the file refers to them by "
                   "name (rename one)", what, j, i, name);
}

/* A meta entry reads back as itself only as one line of KEY=VALUE with a key
 * without blanks and nothing the reader trims at either end. */
static enum tg_status check_meta(int i, const char *m) {
    if (!m) return tg_fail(TG_ERR_INVALID, "cannot write meta entry %d: it is NULL", i);
    size_t len = strlen(m);
    const char *eq = strchr(m, '=');
    if (!eq || eq == m) {
        return tg_fail(TG_ERR_INVALID, "cannot write meta entry %d ('%.*s'): it needs KEY=VALUE", i, TOKEN_SHOWN, m);
    }
    if (strchr(m, '\n')) {
        return tg_fail(TG_ERR_INVALID, "cannot write meta entry %d ('%.*s'): it contains a newline, which would end "
                       "the meta line and start another (keep a meta entry to one line)", i,
                       (int)strcspn(m, "\n") > TOKEN_SHOWN ? TOKEN_SHOWN : (int)strcspn(m, "\n"), m);
    }
    for (const char *c = m; c < eq; c++) {
        if (io_is_blank(*c)) {
            return tg_fail(TG_ERR_INVALID, "cannot write meta entry %d ('%.*s'): its key contains a blank", i,
                           TOKEN_SHOWN, m);
        }
    }
    if (io_is_blank(m[len - 1])) {
        return tg_fail(TG_ERR_INVALID, "cannot write meta entry %d ('%.*s'): it ends in a blank, which the reader "
                       "would drop", i, TOKEN_SHOWN, m);
    }
    if (len > IO_MAX_LINE - strlen("meta ")) {
        return tg_fail(TG_ERR_INVALID, "cannot write meta entry %d ('%.*s...'): %zu bytes is longer than a line may "
                       "be (%zu)", i, TOKEN_SHOWN, m, len, IO_MAX_LINE);
    }
    return TG_OK;
}

/* The `backends` and `meta` lines of a file. */
static enum tg_status write_file_header(struct text *out, const struct tg_file *f) {
    for (int b = 0; b < f->n_backends; b++) {
        enum tg_status st = check_header_name("backend", b, f->backend_names[b], sizeof f->backend_names[b]);
        for (int j = 0; st == TG_OK && j < b; j++) {
            st = check_unique_name("backend", b, f->backend_names[b], f->backend_names[j], j);
        }
        if (st != TG_OK) return st;
    }
    if (f->n_meta < 0 || (f->n_meta > 0 && !f->meta)) {
        return tg_fail(TG_ERR_INVALID, "cannot write %d meta entries from %s", f->n_meta,
                       f->meta ? "a negative count" : "a NULL list");
    }
    for (int i = 0; i < f->n_meta; i++) {
        enum tg_status st = check_meta(i, f->meta[i]);
        if (st != TG_OK) return st;
    }
    bool only_cpu = f->n_backends == 1 && strcmp(f->backend_names[0], "cpu") == 0;
    if (!only_cpu) {
        text_printf(out, "backends ");
        for (int b = 0; b < f->n_backends; b++) text_printf(out, "%s%s", b ? "," : "", f->backend_names[b]);
        text_printf(out, "\n");
    }
    for (int i = 0; i < f->n_meta; i++) text_printf(out, "meta %s\n", f->meta[i]);
    return TG_OK;
}

/* The `buft` and `buffers` header lines of an allocator setup. */
static enum tg_status write_alloc_setup(struct text *out, const struct tg_io_alloc_setup *a) {
    if (a->n_bufts < 0 || a->n_bufts > TG_IO_MAX_BUFTS || a->n_ids < 0 || a->n_ids > TG_IO_MAX_BUFFER_IDS) {
        return tg_fail(TG_ERR_INVALID, "cannot write an allocator setup of %d buffer types and %d buffer ids (at most "
                       "%d and %d)", a->n_bufts, a->n_ids, TG_IO_MAX_BUFTS, TG_IO_MAX_BUFFER_IDS);
    }
    /* Names first, so that no message below prints a name without its NUL. */
    for (int i = 0; i < a->n_bufts; i++) {
        enum tg_status st = check_header_name("buffer type", i, a->bufts[i].name, sizeof a->bufts[i].name);
        for (int j = 0; st == TG_OK && j < i; j++) {
            st = check_unique_name("buffer type", i, a->bufts[i].name, a->bufts[j].name, j);
        }
        if (st != TG_OK) return st;
    }
    for (int i = 0; i < a->n_bufts; i++) {
        const struct tg_io_buft *b = &a->bufts[i];
        if (b->alignment == 0 || (b->alignment & (b->alignment - 1))) {
            return tg_fail(TG_ERR_INVALID, "cannot write buffer type %d ('%s'): its alignment %zu is not a power of "
                           "two", i, b->name, b->alignment);
        }
        text_printf(out, "buft %s align=%zu", b->name, b->alignment);
        if (b->max_size) text_printf(out, " max=%zu", b->max_size);
        if (b->pad_op < TG_OP_COUNT && b->pad_bytes) text_printf(out, " pad=%s:%zu", tg_op_name(b->pad_op), b->pad_bytes);
        text_printf(out, "\n");
    }
    if (a->n_ids > 0) {
        text_printf(out, "buffers ");
        for (int i = 0; i < a->n_ids; i++) {
            if (a->buft_of_id[i] < 0 || a->buft_of_id[i] >= a->n_bufts) {
                return tg_fail(TG_ERR_INVALID, "cannot write buffer id %d: its buffer type %d is not declared", i,
                               a->buft_of_id[i]);
            }
            text_printf(out, "%s%s", i ? "," : "", a->bufts[a->buft_of_id[i]].name);
        }
        text_printf(out, "\n");
    }
    return TG_OK;
}

/* Writes records in order; f is NULL for plain graphs (single "cpu" backend);
 * setup, when not NULL, adds the allocator's buffer types and ids. */
static enum tg_status write_records(const struct tg_file_tensor *records, int n, const struct tg_file *f,
                                    const struct tg_io_alloc_setup *setup, char **text, size_t *len) {
    *text = NULL;
    struct position_map m;
    struct text out = {0};
    enum tg_status st = TG_OK;
    if (!position_map_init(&m, n)) st = tg_fail(TG_ERR_ALLOC, "out of host memory writing a graph");
    for (int i = 0; st == TG_OK && i < n; i++) {
        if (!records[i].tensor) st = tg_fail(TG_ERR_INVALID, "cannot write a graph with a NULL tensor");
        else if (!position_map_put(&m, records[i].tensor, i)) {
            st = tg_fail(TG_ERR_INVALID, "cannot write tensor '%s': it appears twice in the graph",
                         display_name(records[i].tensor));
        }
    }
    if (st == TG_OK) {
        text_printf(&out, "tgraph 1\n");
        if (f) st = write_file_header(&out, f);
        if (st == TG_OK && setup) st = write_alloc_setup(&out, setup);
    }
    for (int i = 0; st == TG_OK && i < n; i++) {
        if (f) {
            int b = records[i].placement_backend, pin = records[i].pinned_backend;
            if (b >= f->n_backends || pin >= f->n_backends) {
                st = tg_fail(TG_ERR_INVALID, "cannot write tensor '%s': backend index out of the file's %d backends",
                             display_name(records[i].tensor), f->n_backends);
                break;
            }
        }
        st = write_tensor(&out, &m, records, i, f, setup);
    }
    if (st == TG_OK && out.failed) st = tg_fail(TG_ERR_ALLOC, "out of host memory writing a graph");
    position_map_free(&m);
    if (st != TG_OK) {
        free(out.s);
        return st;
    }
    if (len) *len = out.len;
    *text = out.s;
    return TG_OK;
}

static enum tg_status write_file_text(const struct tg_file *f, char **text, size_t *len) {
    *text = NULL;
    if (!f) return tg_fail(TG_ERR_INVALID, "cannot write a NULL file");
    if (f->n_backends < 1 || f->n_backends > TG_IO_MAX_BACKENDS) {
        return tg_fail(TG_ERR_INVALID, "cannot write a file with %d backends (1..%d allowed)", f->n_backends,
                       TG_IO_MAX_BACKENDS);
    }
    return write_records(f->tensors, f->n_tensors, f, &f->alloc, text, len);
}

char *tg_file_write_mem(const struct tg_file *f, size_t *len) {
    char *text;
    write_file_text(f, &text, len);
    return text;
}

/* Placement of a plain graph's tensor, from the memory it is already bound to. */
static enum tg_placement placement_from_memory(const struct tg_tensor *t) {
    if (t->view_src) return TG_PLACE_NONE;
    if (t->buffer) {
        switch (tg_buffer_get_usage(t->buffer)) {
        case TG_BUFFER_USAGE_WEIGHTS: return TG_PLACE_WEIGHTS;
        case TG_BUFFER_USAGE_ANY: return TG_PLACE_DATA;
        case TG_BUFFER_USAGE_COMPUTE: return TG_PLACE_NONE;
        }
        return TG_PLACE_NONE;
    }
    return t->data ? TG_PLACE_DATA : TG_PLACE_NONE;
}

/* Whether every tensor t refers to has a line already (its own line may
 * name itself as a source). */
static bool references_written(const struct position_map *written, const struct tg_tensor *t) {
    if (!t) return true;
    if (t->view_src && position_map_get(written, t->view_src) < 0) return false;
    for (int k = 0; k < TG_MAX_SRC; k++) {
        if (t->src[k] && t->src[k] != t && position_map_get(written, t->src[k]) < 0) return false;
    }
    return true;
}

static enum tg_status write_graph_text(const struct tg_graph *g, const struct tg_io_alloc_setup *setup,
                                       const int *node_ids, const int *leaf_ids, char **text, size_t *len) {
    *text = NULL;
    if (!g) return tg_fail(TG_ERR_INVALID, "cannot write a NULL graph");
    int n = g->n_leafs + g->n_nodes;
    struct tg_file_tensor *records = calloc(n > 0 ? (size_t)n : 1, sizeof *records);
    struct position_map written = {0};
    bool *leaf_written = calloc(g->n_leafs > 0 ? (size_t)g->n_leafs : 1, sizeof *leaf_written);
    if (!records || !leaf_written || !position_map_init(&written, n)) {
        free(records);
        free(leaf_written);
        position_map_free(&written);
        return tg_fail(TG_ERR_ALLOC, "out of host memory writing a graph");
    }
    /* Leaf lines first, as far as they go: a leaf that is a view of a node
     * (ggml_view_tensor of a computed tensor) waits for that node's line.
     * Leafs keep their order and nodes theirs, the graph's two lists, unless
     * neither list's next line can be written: then the first later leaf
     * that can goes ahead (ggml lists the view of ggml_add(ggml_view_tensor(y),
     * y) before y's sources).  What no order resolves is refused by
     * write_records. */
    int next_leaf = 0, next_node = 0;
    for (int i = 0; i < n; i++) {
        while (next_leaf < g->n_leafs && leaf_written[next_leaf]) next_leaf++;
        bool leaf = next_leaf < g->n_leafs &&
                    (next_node == g->n_nodes || references_written(&written, g->leafs[next_leaf]));
        int k = next_leaf;
        if (!leaf && next_leaf < g->n_leafs && !references_written(&written, g->nodes[next_node])) {
            for (int j = next_leaf + 1; j < g->n_leafs && !leaf; j++) {
                if (leaf_written[j] || !references_written(&written, g->leafs[j])) continue;
                leaf = true;
                k = j;
            }
        }
        if (leaf) leaf_written[k] = true;
        else k = next_node++;
        struct tg_file_tensor *r = &records[i];
        r->tensor = leaf ? g->leafs[k] : g->nodes[k];
        if (r->tensor) position_map_put(&written, r->tensor, i); /* a tensor listed twice: refused below */
        r->id = i;
        r->is_leaf = leaf;
        r->placement = r->tensor ? placement_from_memory(r->tensor) : TG_PLACE_NONE;
        r->placement_backend = -1;
        r->pinned_backend = -1;
        const int *ids = leaf ? leaf_ids : node_ids;
        r->buffer_id = ids ? ids[k] : 0;
    }
    free(leaf_written);
    position_map_free(&written);
    enum tg_status st = write_records(records, n, NULL, setup, text, len);
    free(records);
    return st;
}

char *tg_graph_write_mem(const struct tg_graph *g, size_t *len) {
    char *text;
    write_graph_text(g, NULL, NULL, NULL, &text, len);
    return text;
}

char *tg_graph_write_alloc_mem(const struct tg_graph *g, const struct tg_io_alloc_setup *setup, const int *node_ids,
                               const int *leaf_ids, size_t *len) {
    char *text;
    write_graph_text(g, setup, node_ids, leaf_ids, &text, len);
    return text;
}

/* Writes and frees text. */
static enum tg_status write_text_file(const char *path, char *text, size_t len) {
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        enum tg_status st = tg_fail(TG_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
        free(text);
        return st;
    }
    size_t put = fwrite(text, 1, len, fp);
    int write_errno = errno;
    bool ok = put == len && fflush(fp) == 0;
    if (!ok) write_errno = errno;
    ok = (fclose(fp) == 0) && ok;
    free(text);
    if (!ok) return tg_fail(TG_ERR_IO, "cannot write '%s': %s", path, strerror(write_errno ? write_errno : errno));
    return TG_OK;
}

enum tg_status tg_file_write(const char *path, const struct tg_file *f) {
    if (!path) return tg_fail(TG_ERR_INVALID, "tg_file_write: NULL path");
    char *text;
    size_t len = 0;
    enum tg_status st = write_file_text(f, &text, &len);
    return st == TG_OK ? write_text_file(path, text, len) : st;
}

enum tg_status tg_graph_write(const char *path, const struct tg_graph *g) {
    if (!path) return tg_fail(TG_ERR_INVALID, "tg_graph_write: NULL path");
    char *text;
    size_t len = 0;
    enum tg_status st = write_graph_text(g, NULL, NULL, NULL, &text, &len);
    return st == TG_OK ? write_text_file(path, text, len) : st;
}

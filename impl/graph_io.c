/* The `.tg` reader: parses graph text (docs/graph-format.md) into a no_alloc
 * context and a graph, keeping the file's ids, placements, pins and meta lines.
 * Every malformed input is rejected with "NAME:LINE: sentence"; on failure
 * everything built so far is freed, so callers never see a partial graph. */
#include "graph_io-parse.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tensor -> record lookup (tg_file_find) ----------------------------------- */

struct tg_file_index {
    size_t mask;
    const struct tg_tensor **keys;
    int *values;
};

static size_t pointer_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static void file_index_free(struct tg_file_index *ix) {
    if (!ix) return;
    free(ix->keys);
    free(ix->values);
    free(ix);
}

static struct tg_file_index *file_index_build(const struct tg_file *f) {
    struct tg_file_index *ix = calloc(1, sizeof *ix);
    if (!ix) return NULL;
    size_t cap = 16;
    while (cap < (size_t)f->n_tensors * 2) cap *= 2;
    ix->mask = cap - 1;
    ix->keys = calloc(cap, sizeof *ix->keys);
    ix->values = calloc(cap, sizeof *ix->values);
    if (!ix->keys || !ix->values) {
        file_index_free(ix);
        return NULL;
    }
    for (int i = 0; i < f->n_tensors; i++) {
        size_t h = pointer_hash(f->tensors[i].tensor) & ix->mask;
        while (ix->keys[h]) h = (h + 1) & ix->mask;
        ix->keys[h] = f->tensors[i].tensor;
        ix->values[h] = i;
    }
    return ix;
}

const struct tg_file_tensor *tg_file_find(const struct tg_file *f, const struct tg_tensor *t) {
    if (!f || !t) return NULL;
    if (!f->index) {
        for (int i = 0; i < f->n_tensors; i++) {
            if (f->tensors[i].tensor == t) return &f->tensors[i];
        }
        return NULL;
    }
    size_t h = pointer_hash(t) & f->index->mask;
    while (f->index->keys[h]) {
        if (f->index->keys[h] == t) return &f->tensors[f->index->values[h]];
        h = (h + 1) & f->index->mask;
    }
    return NULL;
}

void tg_file_free(struct tg_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_buffers; i++) tg_buffer_free(f->buffers[i]);
    free(f->buffers);
    tg_graph_free(f->graph);
    tg_context_free(f->ctx);
    for (int i = 0; i < f->n_meta; i++) free(f->meta[i]);
    free(f->meta);
    free(f->tensors);
    file_index_free(f->index);
    free(f);
}

/* ---- file id -> record position (ids need not be dense) ------------------------ */

static bool id_map_init(struct id_map *m, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    m->mask = cap - 1;
    m->ids = calloc(cap, sizeof *m->ids);
    m->slots = calloc(cap, sizeof *m->slots);
    return m->ids && m->slots;
}

static void id_map_free(struct id_map *m) {
    free(m->ids);
    free(m->slots);
}

static size_t id_hash(int64_t id) {
    return pointer_hash((const void *)(uintptr_t)(uint64_t)id); // NOLINT(performance-no-int-to-ptr): the id is only hashed
}

/* Record index of id, or -1. */
static int id_map_get(const struct id_map *m, int64_t id) {
    size_t h = id_hash(id) & m->mask;
    while (m->slots[h]) {
        if (m->ids[h] == id) return m->slots[h] - 1;
        h = (h + 1) & m->mask;
    }
    return -1;
}

/* The map is sized for every line of the file, so it never fills. */
static void id_map_put(struct id_map *m, int64_t id, int index) {
    size_t h = id_hash(id) & m->mask;
    while (m->slots[h]) h = (h + 1) & m->mask;
    m->ids[h] = id;
    m->slots[h] = index + 1;
}

/* ---- sizes ----------------------------------------------------------------------- */

/* The format's byte size rule, false on size_t overflow. */
static bool checked_nbytes(enum tg_type type, const int64_t ne[4], const size_t nb[4], size_t *out) {
    int64_t blck = tg_blck_size(type);
    size_t total;
    int first = 0;
    if (blck == 1) {
        total = tg_type_size(type);
    } else {
        if (__builtin_mul_overflow((size_t)(ne[0] / blck), nb[0], &total)) return false;
        first = 1;
    }
    for (int i = first; i < TG_MAX_DIMS; i++) {
        size_t term;
        if (__builtin_mul_overflow((size_t)(ne[i] - 1), nb[i], &term)) return false;
        if (__builtin_add_overflow(total, term, &total)) return false;
    }
    *out = total;
    return true;
}

/* Contiguous strides, false when the total size overflows size_t. */
static bool checked_contiguous_strides(enum tg_type type, const int64_t ne[4], size_t nb[4]) {
    nb[0] = tg_type_size(type);
    if (__builtin_mul_overflow(nb[0], (size_t)(ne[0] / tg_blck_size(type)), &nb[1])) return false;
    for (int i = 2; i < TG_MAX_DIMS; i++) {
        if (__builtin_mul_overflow(nb[i - 1], (size_t)ne[i - 1], &nb[i])) return false;
    }
    size_t total;
    return !__builtin_mul_overflow(nb[3], (size_t)ne[3], &total);
}

/* ---- tensor lines ------------------------------------------------------------------ */

/* "tensor ID 'NAME'" of a tensor already read, for messages: an unnamed tensor
 * is known only by its id. */
static void describe_record(const struct tg_file *f, const struct tg_tensor *t, char *out, size_t size) {
    long long id = -1;
    for (int i = 0; i < f->n_tensors; i++) {
        if (f->tensors[i].tensor == t) id = (long long)f->tensors[i].id;
    }
    if (t->name[0]) snprintf(out, size, "tensor %lld '%s'", id, t->name);
    else snprintf(out, size, "tensor %lld (unnamed)", id);
}

/* Everything the keys of one tensor line say. */
struct tensor_keys {
    bool has_src, has_view, has_nb, has_flags, has_buf, has_bufid, has_backend, has_params, has_name;
    int n_src;
    int src[TG_MAX_SRC]; /* record index; -1 empty slot; -2 the tensor itself */
    int view_of;         /* record index */
    size_t view_offs;
    size_t nb[4];
    int32_t flags;
    enum tg_placement placement;
    int placement_backend;
    int pinned_backend;
    int buffer_id;
    int n_params;
    uint32_t params[TG_MAX_OP_PARAMS];
    struct token name;
};

#define SRC_EMPTY (-1)
#define SRC_SELF (-2)

static enum tg_status lookup_reference(struct parser *p, struct token t, int64_t self_id, const char *what,
                                       int *out) {
    uint64_t id;
    enum number_result r = io_parse_decimal(t, INT64_MAX, &id);
    if (r != NUMBER_OK) {
        return io_line_fail(p, "%s '%.*s' is not a tensor id (a non-negative integer)", what, TOK(t));
    }
    if ((int64_t)id == self_id) {
        *out = SRC_SELF;
        return TG_OK;
    }
    int index = id_map_get(&p->ids, (int64_t)id);
    if (index < 0) {
        return io_line_fail(p, "%s %llu is not defined on an earlier line (every referenced tensor must be defined "
                         "before the line that uses it)", what, (unsigned long long)id);
    }
    *out = index;
    return TG_OK;
}

static enum tg_status parse_src(struct parser *p, struct token value, int64_t self_id, struct tensor_keys *k) {
    struct token items[TG_MAX_SRC + 1];
    int n = io_split_commas(value, items, TG_MAX_SRC);
    if (n > TG_MAX_SRC) return io_line_fail(p, "src= lists more than %d sources (the maximum per tensor)", TG_MAX_SRC);
    for (int i = 0; i < n; i++) {
        if (io_token_is(items[i], "-")) {
            if (i == n - 1) {
                return io_line_fail(p, "src= ends with an empty slot '-': '-' only marks an empty slot before a "
                                 "later source");
            }
            k->src[i] = SRC_EMPTY;
            continue;
        }
        enum tg_status st = lookup_reference(p, items[i], self_id, "source", &k->src[i]);
        if (st != TG_OK) return st;
    }
    k->n_src = n;
    return TG_OK;
}

static enum tg_status parse_view(struct parser *p, struct token value, int64_t self_id, struct tensor_keys *k) {
    const char *colon = memchr(value.s, ':', (size_t)value.len);
    if (!colon) return io_line_fail(p, "view= needs ID:OFFSET (e.g. view=12:0), got '%.*s'", TOK(value));
    struct token id = {value.s, (int)(colon - value.s)};
    struct token offs = {colon + 1, (int)(value.s + value.len - colon - 1)};
    enum tg_status st = lookup_reference(p, id, self_id, "view source", &k->view_of);
    if (st != TG_OK) return st;
    if (k->view_of == SRC_SELF) return io_line_fail(p, "view= names the tensor itself: a view needs another tensor");
    uint64_t v;
    enum number_result r = io_parse_decimal(offs, SIZE_MAX, &v);
    if (r == NUMBER_OVERFLOW) return io_line_fail(p, "view offset '%.*s' overflows size_t", TOK(offs));
    if (r != NUMBER_OK) return io_line_fail(p, "view offset '%.*s' is not a non-negative integer", TOK(offs));
    k->view_offs = (size_t)v;
    return TG_OK;
}

static enum tg_status parse_nb(struct parser *p, struct token value, struct tensor_keys *k) {
    struct token items[5];
    int n = io_split_commas(value, items, 4);
    if (n != 4) return io_line_fail(p, "nb= needs exactly 4 strides in bytes (nb=B0,B1,B2,B3)");
    for (int i = 0; i < 4; i++) {
        uint64_t v;
        enum number_result r = io_parse_decimal(items[i], SIZE_MAX, &v);
        if (r == NUMBER_OVERFLOW) return io_line_fail(p, "stride nb%d '%.*s' overflows size_t", i, TOK(items[i]));
        if (r != NUMBER_OK) return io_line_fail(p, "stride nb%d '%.*s' is not a non-negative integer", i, TOK(items[i]));
        k->nb[i] = (size_t)v;
    }
    return TG_OK;
}

static enum tg_status parse_flags(struct parser *p, struct token value, struct tensor_keys *k) {
    static const struct {
        const char *name;
        int32_t bit;
    } known[] = {{"input", TG_FLAG_INPUT},
                 {"output", TG_FLAG_OUTPUT},
                 {"param", TG_FLAG_PARAM},
                 {"loss", TG_FLAG_LOSS},
                 {"nocompute", TG_FLAG_NO_COMPUTE}};
    struct token items[9];
    int n = io_split_commas(value, items, 8);
    if (n > 8) return io_line_fail(p, "flags= lists too many flags (known: input, output, param, loss, nocompute)");
    for (int i = 0; i < n; i++) {
        int32_t bit = 0;
        for (size_t j = 0; j < sizeof known / sizeof known[0]; j++) {
            if (io_token_is(items[i], known[j].name)) bit = known[j].bit;
        }
        if (!bit) return io_line_fail(p, "unknown flag '%.*s' (known: input, output, param, loss, nocompute)", TOK(items[i]));
        k->flags |= bit;
    }
    return TG_OK;
}

static enum tg_status resolve_backend(struct parser *p, struct token name, const char *key, int *out) {
    int b = io_find_backend(p->f, name);
    if (b < 0) {
        if (!p->seen_backends) {
            return io_line_fail(p, "%s names backend '%.*s', which is not in the backends line (without one, the only "
                             "backend is cpu: add e.g. 'backends %.*s,cpu' after the header)", key, TOK(name), TOK(name));
        }
        char list[TG_IO_MAX_BACKENDS * 34];
        io_backend_list_text(p->f, list, sizeof list);
        return io_line_fail(p, "%s names backend '%.*s', which is not in the backends line (%s)", key, TOK(name), list);
    }
    *out = b;
    return TG_OK;
}

static enum tg_status parse_buf(struct parser *p, struct token value, struct tensor_keys *k) {
    const char *at = memchr(value.s, '@', (size_t)value.len);
    struct token kind = {value.s, at ? (int)(at - value.s) : value.len};
    if (io_token_is(kind, "weights")) {
        k->placement = TG_PLACE_WEIGHTS;
    } else if (io_token_is(kind, "data")) {
        k->placement = TG_PLACE_DATA;
    } else {
        return io_line_fail(p, "buf= must be weights[@BACKEND] or data[@BACKEND], got '%.*s'", TOK(value));
    }
    k->placement_backend = p->f->n_backends - 1;
    if (!at) return TG_OK;
    struct token backend = {at + 1, (int)(value.s + value.len - at - 1)};
    if (backend.len == 0) {
        return io_line_fail(p, "buf=%.*s has no backend name after '@' (write buf=%.*s@BACKEND, or leave out '@' for "
                         "the last backend)", TOK(value), TOK(kind));
    }
    return resolve_backend(p, backend, "buf=", &k->placement_backend);
}

static enum tg_status parse_params(struct parser *p, struct token value, struct tensor_keys *k) {
    struct token items[TG_MAX_OP_PARAMS + 1];
    int n = io_split_commas(value, items, TG_MAX_OP_PARAMS);
    if (n > TG_MAX_OP_PARAMS) return io_line_fail(p, "params= has more than %d words", TG_MAX_OP_PARAMS);
    for (int i = 0; i < n; i++) {
        enum number_result r = io_parse_word(items[i], &k->params[i]);
        if (r == NUMBER_OVERFLOW) return io_line_fail(p, "params word %d '%.*s' does not fit in 32 bits", i, TOK(items[i]));
        if (r != NUMBER_OK) {
            return io_line_fail(p, "params word %d '%.*s' is not a number (decimal or 0x hex)", i, TOK(items[i]));
        }
    }
    k->n_params = n;
    return TG_OK;
}

static enum tg_status parse_bufid(struct parser *p, struct token value, struct tensor_keys *k) {
    const struct tg_io_alloc_setup *a = &p->f->alloc;
    if (a->n_ids == 0) {
        return io_line_fail(p, "bufid= needs a 'buffers' header line listing the allocator's buffer ids");
    }
    uint64_t v;
    if (io_parse_decimal(value, INT32_MAX, &v) != NUMBER_OK || v >= (uint64_t)a->n_ids) {
        return io_line_fail(p, "bufid=%.*s is not a buffer id of the 'buffers' line (0..%d)", TOK(value), a->n_ids - 1);
    }
    k->buffer_id = (int)v;
    return TG_OK;
}

static enum tg_status parse_key(struct parser *p, struct token tok, int64_t self_id, struct tensor_keys *k) {
    const char *eq = memchr(tok.s, '=', (size_t)tok.len);
    if (!eq) return io_line_fail(p, "'%.*s' is not a key=value pair", TOK(tok));
    struct token key = {tok.s, (int)(eq - tok.s)};
    struct token value = {eq + 1, (int)(tok.s + tok.len - eq - 1)};
    if (key.len >= 2 && key.s[0] == 'x' && key.s[1] == '-') return TG_OK; /* extension keys are ignored */
    if (value.len == 0 && !io_token_is(key, "name")) return io_line_fail(p, "key '%.*s' has an empty value", TOK(key));
    enum tg_status st;
    if (io_token_is(key, "src")) {
        if ((st = io_once(p, &k->has_src, key)) != TG_OK) return st;
        return parse_src(p, value, self_id, k);
    }
    if (io_token_is(key, "view")) {
        if ((st = io_once(p, &k->has_view, key)) != TG_OK) return st;
        return parse_view(p, value, self_id, k);
    }
    if (io_token_is(key, "nb")) {
        if ((st = io_once(p, &k->has_nb, key)) != TG_OK) return st;
        return parse_nb(p, value, k);
    }
    if (io_token_is(key, "flags")) {
        if ((st = io_once(p, &k->has_flags, key)) != TG_OK) return st;
        return parse_flags(p, value, k);
    }
    if (io_token_is(key, "buf")) {
        if ((st = io_once(p, &k->has_buf, key)) != TG_OK) return st;
        return parse_buf(p, value, k);
    }
    if (io_token_is(key, "bufid")) {
        if ((st = io_once(p, &k->has_bufid, key)) != TG_OK) return st;
        return parse_bufid(p, value, k);
    }
    if (io_token_is(key, "backend")) {
        if ((st = io_once(p, &k->has_backend, key)) != TG_OK) return st;
        return resolve_backend(p, value, "backend=", &k->pinned_backend);
    }
    if (io_token_is(key, "params")) {
        if ((st = io_once(p, &k->has_params, key)) != TG_OK) return st;
        return parse_params(p, value, k);
    }
    if (io_token_is(key, "name")) {
        if ((st = io_once(p, &k->has_name, key)) != TG_OK) return st;
        if (value.len >= TG_MAX_NAME) {
            return io_line_fail(p, "name '%.*s...' is longer than %d characters", TOK(value), TG_MAX_NAME - 1);
        }
        k->name = value;
        return TG_OK;
    }
    return io_line_fail(p, "unknown key '%.*s' (known: src, view, nb, flags, buf, bufid, backend, params, name; keys "
                     "starting with x- are ignored)", TOK(key));
}

static enum tg_status parse_dimension(struct parser *p, struct token t, int i, int64_t *out) {
    if (t.len > 0 && t.s[0] == '-') {
        return io_line_fail(p, "dimension ne%d is '%.*s': every dimension must be >= 1", i, TOK(t));
    }
    uint64_t v;
    enum number_result r = io_parse_decimal(t, INT64_MAX, &v);
    if (r == NUMBER_OVERFLOW) return io_line_fail(p, "dimension ne%d '%.*s' overflows a 64-bit integer", i, TOK(t));
    if (r != NUMBER_OK) return io_line_fail(p, "dimension ne%d '%.*s' is not an integer", i, TOK(t));
    if (v == 0) return io_line_fail(p, "dimension ne%d is 0: every dimension must be >= 1", i);
    *out = (int64_t)v;
    return TG_OK;
}

static void type_list_text(char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int t = 0; t < TG_TYPE_COUNT && used < size; t++) {
        int n = snprintf(out + used, size - used, "%s%s", t ? ", " : "", tg_type_name((enum tg_type)t));
        if (n < 0) break;
        used += (size_t)n;
    }
}

static enum tg_status parse_tensor_line(struct parser *p, struct token kind, const char *pos, const char *end) {
    struct tg_file *f = p->f;
    bool is_leaf = io_token_is(kind, "leaf");
    if (!p->seen_tensor) {
        p->seen_tensor = true;
        if (f->n_backends == 0) {
            strcpy(f->backend_names[0], "cpu");
            f->n_backends = 1;
        }
    }
    struct token field[7];
    static const char *const field_names[7] = {"ID", "TYPE", "NE0", "NE1", "NE2", "NE3", "OP"};
    for (int i = 0; i < 7; i++) {
        if (!io_next_token(&pos, end, &field[i])) {
            return io_line_fail(p, "tensor line ends before its %s field (expected: KIND ID TYPE NE0 NE1 NE2 NE3 OP "
                             "[key=value ...])", field_names[i]);
        }
    }
    uint64_t id;
    enum number_result r = io_parse_decimal(field[0], INT64_MAX, &id);
    if (r == NUMBER_OVERFLOW) return io_line_fail(p, "id '%.*s' is too large (ids must fit in 63 bits)", TOK(field[0]));
    if (r != NUMBER_OK) return io_line_fail(p, "id '%.*s' is not a non-negative integer", TOK(field[0]));
    int previous = id_map_get(&p->ids, (int64_t)id);
    if (previous >= 0) {
        return io_line_fail(p, "duplicate id %llu: already defined on line %d", (unsigned long long)id,
                         p->def_lines[previous]);
    }

    char type_name[16];
    enum tg_type type = TG_TYPE_COUNT;
    if (field[1].len < (int)sizeof type_name) {
        memcpy(type_name, field[1].s, (size_t)field[1].len);
        type_name[field[1].len] = '\0';
        type = tg_type_from_name(type_name);
    }
    if (type == TG_TYPE_COUNT) {
        char list[256];
        type_list_text(list, sizeof list);
        return io_line_fail(p, "unknown type '%.*s' (known: %s)", TOK(field[1]), list);
    }

    int64_t ne[4];
    for (int i = 0; i < 4; i++) {
        enum tg_status st = parse_dimension(p, field[2 + i], i, &ne[i]);
        if (st != TG_OK) return st;
    }
    if (ne[0] % tg_blck_size(type) != 0) {
        return io_line_fail(p, "ne0 = %lld is not a multiple of %s's block size %lld", (long long)ne[0],
                         tg_type_name(type), (long long)tg_blck_size(type));
    }
    /* The library counts elements in int64_t (tg_nelements, the op rules): a
     * count past INT64_MAX would overflow there even when the bytes fit. */
    int64_t n_elements = 1;
    for (int i = 0; i < 4; i++) {
        if (__builtin_mul_overflow(n_elements, ne[i], &n_elements)) {
            return io_line_fail(p, "tensor of %s [%lld, %lld, %lld, %lld] has more elements than a signed 64-bit "
                             "integer holds: NE0 * NE1 * NE2 * NE3 must be at most %lld", tg_type_name(type),
                             (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                             (long long)INT64_MAX);
        }
    }

    char op_name[40];
    enum tg_op op = TG_OP_COUNT;
    if (field[6].len < (int)sizeof op_name) {
        memcpy(op_name, field[6].s, (size_t)field[6].len);
        op_name[field[6].len] = '\0';
        op = tg_op_from_name(op_name);
    }
    if (op == TG_OP_COUNT) return io_line_fail(p, "unknown op '%.*s' (ops use ggml's lower-case names)", TOK(field[6]));
    if (is_leaf && op != TG_OP_NONE) {
        return io_line_fail(p, "a leaf has op '%s': leafs have op none (write computed tensors as 'node' lines)",
                         tg_op_name(op));
    }

    struct tensor_keys k;
    memset(&k, 0, sizeof k);
    k.pinned_backend = -1;
    struct token tok;
    while (io_next_token(&pos, end, &tok)) {
        enum tg_status st = parse_key(p, tok, (int64_t)id, &k);
        if (st != TG_OK) return st;
    }

    if (is_leaf && k.has_src) return io_line_fail(p, "a leaf has src=: leafs have no sources (op none)");
    if (tg_op_is_view(op) && !k.has_view) {
        return io_line_fail(p, "op '%s' makes a view and needs view=ID:OFFSET", tg_op_name(op));
    }
    if (k.has_view && k.has_buf) {
        return io_line_fail(p, "a view cannot have buf=: its memory is its source's");
    }

    size_t nb[4];
    if (k.has_nb) {
        memcpy(nb, k.nb, sizeof nb);
    } else if (!checked_contiguous_strides(type, ne, nb)) {
        return io_line_fail(p, "tensor of %s [%lld, %lld, %lld, %lld] is too large: its size overflows size_t",
                         tg_type_name(type), (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
    }
    size_t bytes;
    if (!checked_nbytes(type, ne, nb, &bytes)) {
        return io_line_fail(p, "tensor of %s [%lld, %lld, %lld, %lld] with these strides is too large: its size "
                         "overflows size_t", tg_type_name(type), (long long)ne[0], (long long)ne[1],
                         (long long)ne[2], (long long)ne[3]);
    }

    /* Views always point at the root tensor (as ggml keeps view_src), offsets added up. */
    struct tg_tensor *view_root = NULL;
    size_t view_offs = 0;
    if (k.has_view) {
        struct tg_tensor *target = f->tensors[k.view_of].tensor;
        view_root = target->view_src ? target->view_src : target;
        view_offs = k.view_offs;
        if (target->view_src && __builtin_add_overflow(view_offs, target->view_offs, &view_offs)) {
            return io_line_fail(p, "view offset overflows size_t");
        }
        size_t root_bytes = tg_nbytes(view_root);
        if (view_offs > root_bytes || bytes > root_bytes - view_offs) {
            char root_text[TG_MAX_NAME + 48];
            describe_record(f, view_root, root_text, sizeof root_text);
            if (view_root == target) {
                return io_line_fail(p, "view of %zu bytes at offset %zu falls outside its source, %s, of %zu bytes",
                                 bytes, view_offs, root_text, root_bytes);
            }
            /* A view of a view is checked against the root that owns the memory, as ggml does. */
            char target_text[TG_MAX_NAME + 48];
            describe_record(f, target, target_text, sizeof target_text);
            return io_line_fail(p, "view of %zu bytes at offset %zu (%zu into %s, itself a view at offset %zu) falls "
                             "outside the memory of its root, %s, of %zu bytes", bytes, view_offs, k.view_offs,
                             target_text, target->view_offs, root_text, root_bytes);
        }
    }

    struct tg_tensor *t = tg_new_tensor_raw(f->ctx, type, ne, nb);
    if (!t) {
        /* The type, dimensions and size were checked above as tg_new_tensor_raw
         * checks them, so what is left is its metadata allocation. */
        char why[512];
        snprintf(why, sizeof why, "%s", tg_last_error());
        return io_line_fail_status(p, TG_ERR_ALLOC, "cannot create the tensor: %s", why);
    }
    t->op = op;
    t->flags = k.flags;
    for (int i = 0; i < k.n_params; i++) t->op_params[i] = (int32_t)k.params[i];
    for (int i = 0; i < k.n_src; i++) {
        if (k.src[i] == SRC_SELF) t->src[i] = t;
        else if (k.src[i] >= 0) t->src[i] = f->tensors[k.src[i]].tensor;
    }
    t->view_src = view_root;
    t->view_offs = view_offs;
    if (k.has_name) {
        memcpy(t->name, k.name.s, (size_t)k.name.len);
        t->name[k.name.len] = '\0';
    }
    char rule[256];
    if (!is_leaf && !tg_op_rules_hold(t, rule, sizeof rule)) {
        return io_line_fail(p, "node %llu '%s' (op %s) breaks a rule of its op: %s", (unsigned long long)id, t->name,
                         tg_op_name(op), rule);
    }

    enum tg_status st = is_leaf ? tg_graph_add_leaf(f->graph, t) : tg_graph_add_node(f->graph, t);
    if (st != TG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_last_error());
        return io_line_fail_status(p, st, "cannot add the tensor to the graph: %s", why);
    }
    struct tg_file_tensor *rec = &f->tensors[f->n_tensors];
    rec->tensor = t;
    rec->id = (int64_t)id;
    rec->is_leaf = is_leaf;
    rec->placement = k.placement;
    rec->placement_backend = k.has_buf ? k.placement_backend : f->n_backends - 1;
    rec->pinned_backend = k.pinned_backend;
    rec->buffer_id = k.buffer_id;
    p->def_lines[f->n_tensors] = p->line;
    id_map_put(&p->ids, (int64_t)id, f->n_tensors);
    f->n_tensors++;
    return TG_OK;
}

/* ---- lines ----------------------------------------------------------------------------- */

static enum tg_status parse_line(struct parser *p, const char *pos, const char *end) {
    struct token first;
    const char *cursor = pos;
    if (!io_next_token(&cursor, end, &first)) return TG_OK; /* blank */
    if (first.s[0] == '#') return TG_OK;                 /* comment */
    if (!p->seen_header) {
        if (!io_token_is(first, "tgraph")) {
            return io_line_fail(p, "missing header: the first line must be 'tgraph 1', got '%.*s'", TOK(first));
        }
        struct token version, extra;
        if (!io_next_token(&cursor, end, &version)) return io_line_fail(p, "header 'tgraph' lacks its version (expected 'tgraph 1')");
        if (!io_token_is(version, "1")) {
            return io_line_fail(p, "unsupported format version '%.*s' (this reader reads 'tgraph 1')", TOK(version));
        }
        if (io_next_token(&cursor, end, &extra)) return io_line_fail(p, "unexpected '%.*s' after 'tgraph 1'", TOK(extra));
        p->seen_header = true;
        return TG_OK;
    }
    if (io_token_is(first, "tgraph")) return io_line_fail(p, "a second 'tgraph' header line");
    if (io_token_is(first, "backends")) return io_parse_backends_line(p, cursor, end);
    if (io_token_is(first, "meta")) return io_parse_meta_line(p, cursor, end);
    if (io_token_is(first, "buft")) return io_parse_buft_line(p, cursor, end);
    if (io_token_is(first, "buffers")) return io_parse_buffers_line(p, cursor, end);
    if (io_token_is(first, "leaf") || io_token_is(first, "node")) return parse_tensor_line(p, first, cursor, end);
    return io_line_fail(p, "unknown line kind '%.*s' (expected leaf, node, backends, meta, buft or buffers)", TOK(first));
}

static enum tg_status parse_all(struct parser *p, const char *text, size_t len) {
    const char *pos = text, *end = text + len;
    p->line = 0;
    static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
    if (len >= sizeof bom && memcmp(text, bom, sizeof bom) == 0) {
        p->line = 1; /* invisible in an editor, so say what it is rather than quote it */
        return io_line_fail(p, "the file starts with a UTF-8 byte-order mark (bytes EF BB BF): save it without one; "
                         "the first line must be 'tgraph 1'");
    }
    while (pos < end) {
        /* Search no further than the longest line allowed: a huge line is refused
         * at that cost, and every token of a line fits in an int. */
        size_t left = (size_t)(end - pos);
        const char *nl = memchr(pos, '\n', left < IO_MAX_LINE + 1 ? left : IO_MAX_LINE + 1);
        const char *line_end = nl ? nl : end;
        p->line++;
        if ((size_t)(line_end - pos) > IO_MAX_LINE) {
            return io_line_fail(p, "line is longer than %zu bytes, the most a .tg line may hold (is this a .tg "
                             "file?)", IO_MAX_LINE);
        }
        if (memchr(pos, '\0', (size_t)(line_end - pos))) return io_line_fail(p, "line contains a NUL byte (not a text file?)");
        enum tg_status st = parse_line(p, pos, line_end);
        if (st != TG_OK) return st;
        pos = nl ? nl + 1 : end;
    }
    if (!p->seen_header) {
        p->line = p->line ? p->line : 1;
        return io_line_fail(p, "missing header: the file has no 'tgraph 1' line (empty or only comments)");
    }
    if (p->f->n_backends == 0) {
        strcpy(p->f->backend_names[0], "cpu");
        p->f->n_backends = 1;
    }
    return TG_OK;
}

enum tg_status tg_file_parse(const char *text, size_t len, const char *name, struct tg_file **out) {
    if (!out) return tg_fail(TG_ERR_INVALID, "tg_file_parse needs a place for the result");
    *out = NULL;
    if (!text && len > 0) return tg_fail(TG_ERR_INVALID, "tg_file_parse: NULL text");
    struct parser p;
    memset(&p, 0, sizeof p);
    p.name = name ? name : "<memory>";

    size_t n_lines = 1;
    for (const char *c = text, *e = text + len; c && c < e; c++) {
        c = memchr(c, '\n', (size_t)(e - c));
        if (!c) break;
        n_lines++;
    }
    if (n_lines > INT_MAX / 8) return tg_fail(TG_ERR_INVALID, "%s: too many lines (%zu)", p.name, n_lines);
    p.capacity = (int)n_lines;

    struct tg_file *f = calloc(1, sizeof *f);
    p.f = f;
    enum tg_status st = TG_ERR_ALLOC;
    if (f) {
        f->ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
        f->graph = tg_graph_new(p.capacity);
        f->tensors = calloc((size_t)p.capacity, sizeof *f->tensors);
        f->meta = calloc((size_t)p.capacity, sizeof *f->meta);
        p.def_lines = calloc((size_t)p.capacity, sizeof *p.def_lines);
        if (f->ctx && f->graph && f->tensors && f->meta && p.def_lines && id_map_init(&p.ids, n_lines)) {
            st = parse_all(&p, text, len);
        } else {
            tg_fail(TG_ERR_ALLOC, "%s: out of host memory for a graph of up to %zu lines", p.name, n_lines);
        }
    } else {
        tg_fail(TG_ERR_ALLOC, "%s: out of host memory", p.name);
    }
    if (st == TG_OK) {
        f->index = file_index_build(f);
        if (!f->index) st = tg_fail(TG_ERR_ALLOC, "%s: out of host memory for the tensor index", p.name);
    }
    id_map_free(&p.ids);
    free(p.def_lines);
    if (st != TG_OK) {
        tg_file_free(f);
        return st;
    }
    *out = f;
    return TG_OK;
}

struct tg_file *tg_file_read_mem(const char *text, size_t len, const char *name) {
    struct tg_file *f = NULL;
    return tg_file_parse(text, len, name, &f) == TG_OK ? f : NULL;
}

enum tg_status tg_file_load(const char *path, struct tg_file **out) {
    if (!out) return tg_fail(TG_ERR_INVALID, "tg_file_load needs a place for the result");
    *out = NULL;
    if (!path) return tg_fail(TG_ERR_INVALID, "tg_file_load: NULL path");
    FILE *fp = fopen(path, "rb");
    if (!fp) return tg_fail(TG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    if (!text) {
        fclose(fp);
        return tg_fail(TG_ERR_ALLOC, "cannot read '%s': out of host memory", path);
    }
    enum tg_status st = TG_OK;
    for (;;) {
        if (len == cap) {
            char *bigger = cap <= SIZE_MAX / 2 ? realloc(text, cap * 2) : NULL;
            if (!bigger) break;
            text = bigger;
            cap *= 2;
        }
        size_t got = fread(text + len, 1, cap - len, fp);
        len += got;
        if (got == 0) break;
    }
    if (len == cap) {
        st = tg_fail(TG_ERR_ALLOC, "cannot read '%s': out of host memory", path);
    } else if (ferror(fp)) {
        st = tg_fail(TG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    }
    fclose(fp);
    if (st == TG_OK) st = tg_file_parse(text, len, path, out);
    free(text);
    return st;
}

struct tg_file *tg_file_read(const char *path) {
    struct tg_file *f = NULL;
    return tg_file_load(path, &f) == TG_OK ? f : NULL;
}

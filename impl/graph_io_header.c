/* The `.tg` reader's header lines, before the tensors: `backends`, `meta`,
 * and the graph allocator's setup (`buft`, `buffers`). */
#include "graph_io-parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool backend_name_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

int io_find_backend(const struct tg_file *f, struct token t) {
    for (int i = 0; i < f->n_backends; i++) {
        if (io_token_is(t, f->backend_names[i])) return i;
    }
    return -1;
}

void io_backend_list_text(const struct tg_file *f, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < f->n_backends && used < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", f->backend_names[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

enum tg_status io_parse_backends_line(struct parser *p, const char *pos, const char *end) {
    if (p->seen_tensor) {
        return io_line_fail(p, "the 'backends' line must come before the first tensor line (it is a header line)");
    }
    if (p->seen_backends) return io_line_fail(p, "a second 'backends' line: give all backends on one line");
    struct token list, extra;
    if (!io_next_token(&pos, end, &list)) {
        return io_line_fail(p, "'backends' needs a comma-separated list of names, e.g. 'backends gpu0,cpu'");
    }
    if (io_next_token(&pos, end, &extra)) {
        return io_line_fail(p, "unexpected '%.*s' after the backend list: names are separated by commas, not spaces",
                         TOK(extra));
    }
    struct token names[TG_IO_MAX_BACKENDS + 1];
    int n = io_split_commas(list, names, TG_IO_MAX_BACKENDS);
    if (n > TG_IO_MAX_BACKENDS) return io_line_fail(p, "more than %d backends listed", TG_IO_MAX_BACKENDS);
    struct tg_file *f = p->f;
    for (int i = 0; i < n; i++) {
        if (names[i].len == 0) return io_line_fail(p, "empty backend name in the 'backends' list");
        if (names[i].len >= (int)sizeof f->backend_names[0]) {
            return io_line_fail(p, "backend name '%.*s' is longer than %d characters", TOK(names[i]),
                             (int)sizeof f->backend_names[0] - 1);
        }
        for (int k = 0; k < names[i].len; k++) {
            if (!backend_name_char_ok(names[i].s[k])) {
                return io_line_fail(p, "backend name '%.*s' has a character outside [A-Za-z0-9_.-]", TOK(names[i]));
            }
        }
        if (io_find_backend(f, names[i]) >= 0) return io_line_fail(p, "backend '%.*s' is listed twice", TOK(names[i]));
        memcpy(f->backend_names[i], names[i].s, (size_t)names[i].len);
        f->backend_names[i][names[i].len] = '\0';
        f->n_backends = i + 1;
    }
    p->seen_backends = true;
    return TG_OK;
}

enum tg_status io_parse_meta_line(struct parser *p, const char *pos, const char *end) {
    if (p->seen_tensor) return io_line_fail(p, "'meta' lines are header lines and must come before the first tensor line");
    while (pos < end && io_is_blank(*pos)) pos++;
    while (end > pos && io_is_blank(end[-1])) end--;
    const char *eq = memchr(pos, '=', (size_t)(end - pos));
    if (!eq || eq == pos) return io_line_fail(p, "'meta' needs KEY=VALUE (e.g. 'meta n_ctx=512')");
    for (const char *c = pos; c < eq; c++) {
        if (io_is_blank(*c)) return io_line_fail(p, "meta key '%.*s' contains a space", (int)(eq - pos) > TOKEN_SHOWN ? TOKEN_SHOWN : (int)(eq - pos), pos);
    }
    char *text = malloc((size_t)(end - pos) + 1);
    if (!text) return tg_fail(TG_ERR_ALLOC, "%s:%d: out of host memory for a meta line", p->name, p->line);
    memcpy(text, pos, (size_t)(end - pos));
    text[end - pos] = '\0';
    p->f->meta[p->f->n_meta++] = text;
    return TG_OK;
}

/* ---- the allocator setup: `buft` and `buffers` lines -------------------------------- */

int io_find_buft(const struct tg_file *f, struct token t) {
    for (int i = 0; i < f->alloc.n_bufts; i++) {
        if (io_token_is(t, f->alloc.bufts[i].name)) return i;
    }
    return -1;
}

static enum tg_status parse_size_value(struct parser *p, struct token key, struct token value, size_t *out) {
    if (value.len == 0) return io_line_fail(p, "%.*s= has no value (a number of bytes)", TOK(key));
    uint64_t v;
    enum number_result r = io_parse_decimal(value, SIZE_MAX, &v);
    if (r == NUMBER_OVERFLOW) return io_line_fail(p, "%.*s=%.*s overflows size_t", TOK(key), TOK(value));
    if (r != NUMBER_OK) return io_line_fail(p, "%.*s=%.*s is not a non-negative integer", TOK(key), TOK(value));
    *out = (size_t)v;
    return TG_OK;
}

/* pad=OP:N: tensors of op OP need N bytes more than their size (an op-dependent
 * get_alloc_size, as Metal has). */
static enum tg_status parse_buft_pad(struct parser *p, struct token value, struct tg_io_buft *b) {
    const char *colon = memchr(value.s, ':', (size_t)value.len);
    if (!colon) return io_line_fail(p, "pad= needs OP:BYTES (e.g. pad=mul_mat:64), got '%.*s'", TOK(value));
    char op_name[40];
    int op_len = (int)(colon - value.s);
    if (op_len <= 0 || op_len >= (int)sizeof op_name) return io_line_fail(p, "pad= names no op: '%.*s'", TOK(value));
    memcpy(op_name, value.s, (size_t)op_len);
    op_name[op_len] = '\0';
    b->pad_op = tg_op_from_name(op_name);
    if (b->pad_op == TG_OP_COUNT) return io_line_fail(p, "pad= names unknown op '%s' (ops use ggml's lower-case names)", op_name);
    struct token bytes = {colon + 1, (int)(value.s + value.len - colon - 1)};
    /* The messages quote the whole value: the byte count alone may be empty. */
    if (bytes.len == 0) return io_line_fail(p, "pad=%.*s has no byte count after ':' (e.g. pad=mul_mat:64)", TOK(value));
    uint64_t v;
    enum number_result r = io_parse_decimal(bytes, SIZE_MAX, &v);
    if (r == NUMBER_OVERFLOW) return io_line_fail(p, "pad=%.*s: the byte count overflows size_t", TOK(value));
    if (r != NUMBER_OK) {
        return io_line_fail(p, "pad=%.*s: the byte count '%.*s' is not a non-negative integer", TOK(value), TOK(bytes));
    }
    b->pad_bytes = (size_t)v;
    return TG_OK;
}

/* buft NAME align=N [max=N] [pad=OP:N] */
enum tg_status io_parse_buft_line(struct parser *p, const char *pos, const char *end) {
    struct tg_file *f = p->f;
    if (p->seen_tensor) return io_line_fail(p, "'buft' lines are header lines and must come before the first tensor line");
    if (f->alloc.n_ids > 0) return io_line_fail(p, "'buft' lines must come before the 'buffers' line that names them");
    struct token name;
    if (!io_next_token(&pos, end, &name)) return io_line_fail(p, "'buft' needs a name and align=N (e.g. 'buft gpu align=256')");
    if (f->alloc.n_bufts == TG_IO_MAX_BUFTS) return io_line_fail(p, "more than %d 'buft' lines", TG_IO_MAX_BUFTS);
    if (name.len >= (int)sizeof f->alloc.bufts[0].name) {
        return io_line_fail(p, "buffer type name '%.*s' is longer than %d characters", TOK(name),
                         (int)sizeof f->alloc.bufts[0].name - 1);
    }
    for (int k = 0; k < name.len; k++) {
        if (!backend_name_char_ok(name.s[k])) {
            return io_line_fail(p, "buffer type name '%.*s' has a character outside [A-Za-z0-9_.-]", TOK(name));
        }
    }
    if (io_find_buft(f, name) >= 0) return io_line_fail(p, "buffer type '%.*s' is declared twice", TOK(name));
    struct tg_io_buft b = {.pad_op = TG_OP_COUNT};
    memcpy(b.name, name.s, (size_t)name.len);
    bool seen_align = false, seen_max = false, seen_pad = false;
    struct token tok;
    while (io_next_token(&pos, end, &tok)) {
        const char *eq = memchr(tok.s, '=', (size_t)tok.len);
        if (!eq) return io_line_fail(p, "'%.*s' is not a key=value pair (buft keys: align, max, pad)", TOK(tok));
        struct token key = {tok.s, (int)(eq - tok.s)};
        struct token value = {eq + 1, (int)(tok.s + tok.len - eq - 1)};
        enum tg_status st;
        if (io_token_is(key, "align")) {
            if ((st = io_once(p, &seen_align, key)) != TG_OK || (st = parse_size_value(p, key, value, &b.alignment)) != TG_OK) {
                return st;
            }
            if (b.alignment == 0 || (b.alignment & (b.alignment - 1))) {
                return io_line_fail(p, "align=%zu is not a power of two", b.alignment);
            }
        } else if (io_token_is(key, "max")) {
            if ((st = io_once(p, &seen_max, key)) != TG_OK || (st = parse_size_value(p, key, value, &b.max_size)) != TG_OK) {
                return st;
            }
        } else if (io_token_is(key, "pad")) {
            if ((st = io_once(p, &seen_pad, key)) != TG_OK || (st = parse_buft_pad(p, value, &b)) != TG_OK) return st;
        } else {
            return io_line_fail(p, "unknown buft key '%.*s' (known: align, max, pad)", TOK(key));
        }
    }
    if (!seen_align) return io_line_fail(p, "buffer type '%s' needs align=N (its alignment in bytes)", b.name);
    f->alloc.bufts[f->alloc.n_bufts++] = b;
    return TG_OK;
}

/* buffers NAME[,NAME...]: the graph allocator's buffer ids, each a buft. */
enum tg_status io_parse_buffers_line(struct parser *p, const char *pos, const char *end) {
    struct tg_file *f = p->f;
    if (p->seen_tensor) return io_line_fail(p, "the 'buffers' line is a header line and must come before the first tensor line");
    if (f->alloc.n_ids > 0) return io_line_fail(p, "a second 'buffers' line: give all buffer ids on one line");
    struct token list, extra;
    if (!io_next_token(&pos, end, &list)) {
        return io_line_fail(p, "'buffers' needs a comma-separated list of buft names, one per buffer id");
    }
    if (io_next_token(&pos, end, &extra)) {
        return io_line_fail(p, "unexpected '%.*s' after the buffers list: names are separated by commas", TOK(extra));
    }
    struct token names[TG_IO_MAX_BUFFER_IDS + 1];
    int n = io_split_commas(list, names, TG_IO_MAX_BUFFER_IDS);
    if (n > TG_IO_MAX_BUFFER_IDS) return io_line_fail(p, "more than %d buffer ids", TG_IO_MAX_BUFFER_IDS);
    for (int i = 0; i < n; i++) {
        int b = io_find_buft(f, names[i]);
        if (b < 0) {
            return io_line_fail(p, "buffer id %d names buffer type '%.*s', which no earlier 'buft' line declares", i,
                             TOK(names[i]));
        }
        f->alloc.buft_of_id[i] = b;
    }
    f->alloc.n_ids = n;
    return TG_OK;
}

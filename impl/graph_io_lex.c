/* The `.tg` reader's lexing: line messages, the tokens of a line, numbers
 * and comma lists (graph_io-parse.h). */
#include "graph_io-parse.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum tg_status line_fail_v(const struct parser *p, enum tg_status status, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 0)))
#endif
    ;

static enum tg_status line_fail_v(const struct parser *p, enum tg_status status, const char *fmt, va_list ap) {
    char sentence[768];
    vsnprintf(sentence, sizeof sentence, fmt, ap);
    return tg_fail(status, "%s:%d: %s", p->name, p->line, sentence);
}

enum tg_status io_line_fail(const struct parser *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum tg_status st = line_fail_v(p, TG_ERR_INVALID, fmt, ap);
    va_end(ap);
    return st;
}

enum tg_status io_line_fail_status(const struct parser *p, enum tg_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum tg_status st = line_fail_v(p, status, fmt, ap);
    va_end(ap);
    return st;
}

bool io_token_is(struct token t, const char *word) {
    size_t n = strlen(word);
    return (size_t)t.len == n && memcmp(t.s, word, n) == 0;
}

bool io_is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Next whitespace-separated token of [*pos, end); false at the end of the line. */
bool io_next_token(const char **pos, const char *end, struct token *out) {
    const char *p = *pos;
    while (p < end && io_is_blank(*p)) p++;
    if (p == end) {
        *pos = p;
        return false;
    }
    const char *start = p;
    while (p < end && !io_is_blank(*p)) p++;
    out->s = start;
    out->len = (int)(p - start);
    *pos = p;
    return true;
}

/* ---- numbers -------------------------------------------------------------------- */

/* Unsigned decimal, digits only, at most `max`. */
enum number_result io_parse_decimal(struct token t, uint64_t max, uint64_t *out) {
    if (t.len == 0) return NUMBER_BAD;
    uint64_t v = 0;
    for (int i = 0; i < t.len; i++) {
        if (t.s[i] < '0' || t.s[i] > '9') return NUMBER_BAD;
        if (v > (max - (uint64_t)(t.s[i] - '0')) / 10) return NUMBER_OVERFLOW;
        v = v * 10 + (uint64_t)(t.s[i] - '0');
    }
    *out = v;
    return NUMBER_OK;
}

/* A params= word: decimal (optionally negative, as an int32) or 0x hex. */
enum number_result io_parse_word(struct token t, uint32_t *out) {
    if (t.len > 2 && t.s[0] == '0' && (t.s[1] == 'x' || t.s[1] == 'X')) {
        uint64_t v = 0;
        for (int i = 2; i < t.len; i++) {
            char c = t.s[i];
            int d;
            if (c >= '0' && c <= '9') d = c - '0';
            else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            else return NUMBER_BAD;
            v = v * 16 + (uint64_t)d;
            if (v > UINT32_MAX) return NUMBER_OVERFLOW;
        }
        *out = (uint32_t)v;
        return NUMBER_OK;
    }
    if (t.len > 1 && t.s[0] == '-') {
        uint64_t v;
        struct token digits = {t.s + 1, t.len - 1};
        enum number_result r = io_parse_decimal(digits, (uint64_t)INT32_MAX + 1, &v);
        if (r == NUMBER_OK) *out = (uint32_t)(0 - (uint32_t)v);
        return r;
    }
    uint64_t v;
    enum number_result r = io_parse_decimal(t, UINT32_MAX, &v);
    if (r == NUMBER_OK) *out = (uint32_t)v;
    return r;
}

/* Split a comma list: returns the number of items (stops at max + 1). */
int io_split_commas(struct token t, struct token *items, int max) {
    int n = 0;
    const char *p = t.s, *end = t.s + t.len;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (n == max) return max + 1;
        items[n].s = p;
        items[n].len = (int)(stop - p);
        n++;
        if (!comma) return n;
        p = comma + 1;
    }
}


enum tg_status io_once(struct parser *p, bool *seen, struct token key) {
    if (*seen) return io_line_fail(p, "key '%.*s' is given twice", TOK(key));
    *seen = true;
    return TG_OK;
}

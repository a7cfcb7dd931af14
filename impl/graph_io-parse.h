/* Shared by the `.tg` reader's files (not public): the parser's state, the
 * tokens of a line and their numbers (graph_io_lex.c), and the header lines
 * before the tensors (graph_io_header.c); graph_io.c reads the tensor lines. */
#ifndef TG_GRAPH_IO_PARSE_H
#define TG_GRAPH_IO_PARSE_H

#include "tg-impl.h"
#include "tg-io.h"

/* File id -> record position (ids need not be dense). */
struct id_map {
    size_t mask;
    int64_t *ids;
    int *slots; /* record index + 1; 0 = empty */
};

struct parser {
    const char *name;
    int line;
    struct tg_file *f;
    struct id_map ids;
    int *def_lines; /* line of each record, for duplicate-id messages */
    int capacity;   /* records and meta entries: at most one per line */
    bool seen_header;
    bool seen_backends;
    bool seen_tensor;
};

/* The longest line the reader takes (the corpus's longest is under 200 bytes).
 * Bounding lines keeps every token's length within an int, which the tokens
 * and messages use, whatever the size of the text. */
#define IO_MAX_LINE ((size_t)1 << 20)

/* "NAME:LINE: sentence" as the thread's error; returns TG_ERR_INVALID. */
enum tg_status io_line_fail(const struct parser *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The same with another status (TG_ERR_ALLOC when host memory ran out). */
enum tg_status io_line_fail_status(const struct parser *p, enum tg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A token of the line; quoted in messages, cut short so garbage stays readable.
 * len fits in an int because no line is longer than IO_MAX_LINE. */
struct token {
    const char *s;
    int len;
};

#define TOKEN_SHOWN 48
#define TOK(t) ((t).len > TOKEN_SHOWN ? TOKEN_SHOWN : (t).len), (t).s

bool io_token_is(struct token t, const char *word);
bool io_is_blank(char c);
/* Next whitespace-separated token of [*pos, end); false at the end of the line. */
bool io_next_token(const char **pos, const char *end, struct token *out);
/* Marks a key as seen; a key given twice is almost certainly an editing mistake. */
enum tg_status io_once(struct parser *p, bool *seen, struct token key);

enum number_result { NUMBER_OK, NUMBER_BAD, NUMBER_OVERFLOW };

/* Unsigned decimal, digits only, at most `max`. */
enum number_result io_parse_decimal(struct token t, uint64_t max, uint64_t *out);
/* A params= word: decimal (optionally negative, as an int32) or 0x hex. */
enum number_result io_parse_word(struct token t, uint32_t *out);
/* Split a comma list: returns the number of items (stops at max + 1). */
int io_split_commas(struct token t, struct token *items, int max);

/* Header lines: `backends`, `meta`, and the allocator setup (`buft`, `buffers`). */
enum tg_status io_parse_backends_line(struct parser *p, const char *pos, const char *end);
enum tg_status io_parse_meta_line(struct parser *p, const char *pos, const char *end);
enum tg_status io_parse_buft_line(struct parser *p, const char *pos, const char *end);
enum tg_status io_parse_buffers_line(struct parser *p, const char *pos, const char *end);
/* Index of a declared backend / buffer type named t, or -1. */
int io_find_backend(const struct tg_file *f, struct token t);
int io_find_buft(const struct tg_file *f, struct token t);
/* The declared backends' names, for messages. */
void io_backend_list_text(const struct tg_file *f, char *out, size_t size);

#endif

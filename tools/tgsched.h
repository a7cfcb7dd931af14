/* The `tgsched` command: shared declarations of its verbs.
 *
 * A verb is `int cmd_<verb>(int argc, char **argv)` with argv[0] the verb's
 * name, defined in tools/cmd_<verb>.c; tools/tgsched.c lists the verbs and
 * shows only those linked into this build, so adding a verb is adding its
 * file (and its row in the table when it is a new name). */
#ifndef TGSCHED_TOOL_H
#define TGSCHED_TOOL_H

#include "tg-io.h"

#include <stdbool.h>
#include <stdio.h>

enum tgsched_exit {
    TGSCHED_EXIT_OK = 0,
    TGSCHED_EXIT_FAILED = 1,    /* the verb ran and found a problem (a checker fired, a result differs) */
    TGSCHED_EXIT_BAD_INPUT = 2, /* unreadable or malformed input, or bad arguments */
    TGSCHED_EXIT_RESOURCE = 3,  /* memory or a device buffer could not be had, a device failed, or an
                                 * output could not be written */
};

int cmd_info(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* The exit status for a failed library call: TG_ERR_ALLOC (host memory, a
 * buffer larger than the device allows) and TG_ERR_DEVICE (a driver call
 * failed) are resource failures, the rest bad input. */
int tgsched_exit_for(enum tg_status st);

/* ---- output: text, or exactly one JSON document per call (docs/json.md) ----
 * main() sets the verb and the mode before the verb parses its arguments, so
 * that even a usage error is a JSON document under --json. */
void tgsched_output_init(const char *verb, bool json);
bool tgsched_json_mode(void);
const char *tgsched_verb(void);

/* Reports a failure: "tgsched VERB: message" on stderr, and under --json the
 * error document on stdout (unless one was printed already).  Returns
 * exit_code, for `return tgsched_fail(...)`. */
int tgsched_fail(int exit_code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Like tgsched_fail(BAD_INPUT), followed by a pointer to `tgsched VERB --help`. */
int tgsched_usage_error(const char *verb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Progress on stderr ("tgsched VERB: ..."), text mode only. */
void tgsched_progress(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Notes: what a user should know about a result that is not an error (a
 * backend that got no work and why).  Printed with the summary; "notes" in
 * JSON. */
void tgsched_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int tgsched_n_notes(void);
const char *tgsched_note_text(int i);

/* The frame of the one JSON document: open prints {"tgsched":1,"verb":"V",
 * and the verb prints its fields, each followed by a comma; close prints the
 * notes, the exit code and its status word, and the closing brace. */
void tgsched_json_open(FILE *out);
void tgsched_json_close(FILE *out, int exit_code);

/* Loads a `.tg` file; on failure reports the reader's message (tgsched_fail)
 * and returns NULL with *exit_code set. */
struct tg_file *tgsched_load(const char *path, int *exit_code);

/* JSON string literal (quotes and escapes) of s, or of its first n bytes.
 * Bytes that are not UTF-8 come out as \u00XX, so every document is valid
 * UTF-8 whatever the names in a file hold. */
void tgsched_json_string(FILE *out, const char *s);
void tgsched_json_string_n(FILE *out, const char *s, size_t n);

/* Bytes of the well-formed UTF-8 character at s, of at most avail bytes (1
 * for ASCII, 2..4), or 0 when s does not start one (a stray or truncated
 * byte, an overlong form, a surrogate, past U+10FFFF). */
size_t tgsched_utf8_length(const char *s, size_t avail);

/* An output file that is written whole or not at all: the text goes to a
 * temporary file beside the target, renamed over it only once every byte is
 * out, so a failed write (a full disk) keeps what the target held.  A target
 * that exists and is no plain file (a link such as /dev/stdout, a device, a
 * pipe, a file with several names) is written in place. */
struct tgsched_output_file {
    FILE *f;
    char *temp; /* NULL: writing the target itself */
    const char *path;
};
/* Opens it; false (errno set) when no file can be made. */
bool tgsched_output_open(struct tgsched_output_file *o, const char *path);
/* Closes it and puts it in place; false (errno set) when a write, the close
 * or the rename failed: the temporary file is then removed. */
bool tgsched_output_commit(struct tgsched_output_file *o);

/* "41.50 MiB", "2.00 KiB", "96 B": sizes for people. */
void tgsched_format_bytes(char *out, size_t n, size_t bytes);

/* --threads: asked (> 0), else every online core (1..64). */
int tgsched_threads(int asked);

/* A decimal number of digits only (no sign, no blanks: strtoull alone takes
 * " -5" as 2^64 - 5), up to ULLONG_MAX; false otherwise. */
bool tgsched_parse_u64(const char *text, unsigned long long *value);

#endif

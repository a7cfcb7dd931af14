/* The `tgsched` command: shared declarations of its verbs.
 *
 * A verb is `int cmd_<verb>(int argc, char **argv)` with argv[0] the verb's
 * name, defined in tools/cmd_<verb>.c; tools/tgsched.c lists the verbs and
 * shows only those linked into this build, so adding a verb is adding its
 * file (and its row in the table when it is a new name). */
#ifndef TGSCHED_TOOL_H
#define TGSCHED_TOOL_H

#include "tg-io.h"

#include <stdio.h>

enum tgsched_exit {
    TGSCHED_EXIT_OK = 0,
    TGSCHED_EXIT_FAILED = 1, /* the verb ran and found a problem (a checker fired, a result differs) */
    TGSCHED_EXIT_BAD_INPUT = 2, /* unreadable or malformed input, or bad arguments */
};

int cmd_info(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* Loads a `.tg` file; on failure prints "tgsched: <reader's message>" to stderr
 * and returns NULL (the verb then exits with TGSCHED_EXIT_BAD_INPUT). */
struct tg_file *tgsched_load(const char *path);

/* Prints "tgsched VERB: message" and a pointer to `tgsched VERB --help`;
 * returns TGSCHED_EXIT_BAD_INPUT for `return tgsched_usage_error(...)`. */
int tgsched_usage_error(const char *verb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* JSON string literal (quotes and escapes) of s. */
void tgsched_json_string(FILE *out, const char *s);

#endif

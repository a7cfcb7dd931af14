/* `tgsched`: the command-line front end.  Dispatches to verbs (tools/cmd_*.c).
 *
 * The verbs are declared weak here, so a build holds exactly the verbs whose
 * files exist: a missing one is simply not offered (no stub is needed while a
 * verb is being written). */
#include "tgsched.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#pragma weak cmd_info
#pragma weak cmd_plan
#pragma weak cmd_check
#pragma weak cmd_run

struct verb {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct verb verbs[] = {
    {"info", cmd_info, "counts, op histogram, memory by kind, ops this build cannot compute"},
    {"plan", cmd_plan, "assign backends and plan memory; print the plan and its memory map"},
    {"check", cmd_check, "plan and verify the plan with the oracle's checkers"},
    {"run", cmd_run, "compute the graph on this build's backends"},
};

#define N_VERBS ((int)(sizeof verbs / sizeof verbs[0]))

static void print_help(FILE *out) {
    fprintf(out, "usage: tgsched VERB [options] FILE.tg\n"
                 "       tgsched VERB --help\n\n"
                 "tgsched loads tensor graphs in the .tg text format (docs/graph-format.md) and\n"
                 "schedules and plans their memory like ggml's backend scheduler.\n\n"
                 "verbs:\n");
    for (int i = 0; i < N_VERBS; i++) {
        if (verbs[i].fn) fprintf(out, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
    }
    fprintf(out, "\nexit status: 0 success, 1 the verb found a problem, 2 bad input or arguments\n");
}

struct tg_file *tgsched_load(const char *path) {
    struct tg_file *f = NULL;
    if (tg_file_load(path, &f) != TG_OK) fprintf(stderr, "tgsched: %s\n", tg_last_error());
    return f;
}

int tgsched_usage_error(const char *verb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tgsched %s: ", verb);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'tgsched %s --help')\n", verb);
    return TGSCHED_EXIT_BAD_INPUT;
}

void tgsched_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
        else if (*c < 0x20) fprintf(out, "\\u%04x", *c);
        else fputc(*c, out);
    }
    fputc('"', out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return TGSCHED_EXIT_BAD_INPUT;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return TGSCHED_EXIT_OK;
    }
    for (int i = 0; i < N_VERBS; i++) {
        if (verbs[i].fn && strcmp(argv[1], verbs[i].name) == 0) return verbs[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "tgsched: unknown verb '%s'\n\n", argv[1]);
    print_help(stderr);
    return TGSCHED_EXIT_BAD_INPUT;
}

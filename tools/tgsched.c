/* `tgsched`: the command-line front end.  Dispatches to verbs (tools/cmd_*.c).
 *
 * The verbs are declared weak here, so a build holds exactly the verbs whose
 * files exist: a missing one is simply not offered (no stub is needed while a
 * verb is being written). */
#include "tgsched.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    fprintf(out, "\nWith --json every verb prints exactly one JSON document on stdout, errors\n"
                 "included (schema: docs/json.md).\n"
                 "\nexit status: 0 success, 1 the verb found a problem, 2 bad input or arguments,\n"
                 "             3 out of resources or a device failed (host memory, a device buffer,\n"
                 "             a driver error, writing an output)\n");
}

/* ---- output state: one verb per process ---- */

#define MAX_NOTES 16

static struct {
    const char *verb;
    bool json;
    bool document_printed;
    int n_notes;
    char *notes[MAX_NOTES];
} out_state = {"", false, false, 0, {0}};

void tgsched_output_init(const char *verb, bool json) {
    out_state.verb = verb;
    out_state.json = json;
}

bool tgsched_json_mode(void) { return out_state.json; }
const char *tgsched_verb(void) { return out_state.verb; }

int tgsched_exit_for(enum tg_status st) {
    return st == TG_ERR_ALLOC || st == TG_ERR_DEVICE ? TGSCHED_EXIT_RESOURCE : TGSCHED_EXIT_BAD_INPUT;
}

static const char *exit_word(int exit_code) {
    switch (exit_code) {
    case TGSCHED_EXIT_OK: return "ok";
    case TGSCHED_EXIT_FAILED: return "failed";
    case TGSCHED_EXIT_BAD_INPUT: return "bad_input";
    case TGSCHED_EXIT_RESOURCE: return "resource";
    default: return "unknown";
    }
}

void tgsched_json_open(FILE *out) {
    out_state.document_printed = true;
    fputs("{\"tgsched\":1,\"verb\":", out);
    tgsched_json_string(out, out_state.verb);
    fputc(',', out);
}

void tgsched_json_close(FILE *out, int exit_code) {
    fputs("\"notes\":[", out);
    for (int i = 0; i < out_state.n_notes; i++) {
        if (i) fputc(',', out);
        tgsched_json_string(out, out_state.notes[i]);
    }
    fprintf(out, "],\"exit_code\":%d,\"status\":\"%s\"}\n", exit_code, exit_word(exit_code));
}

static int vfail(int exit_code, const char *fmt, va_list ap, const char *hint) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "tgsched%s%s: %s\n", *out_state.verb ? " " : "", out_state.verb, msg);
    if (hint) fputs(hint, stderr);
    if (out_state.json && !out_state.document_printed) {
        tgsched_json_open(stdout);
        fputs("\"error\":", stdout);
        tgsched_json_string(stdout, msg);
        fputc(',', stdout);
        tgsched_json_close(stdout, exit_code);
    }
    return exit_code;
}

int tgsched_fail(int exit_code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(exit_code, fmt, ap, NULL);
    va_end(ap);
    return exit_code;
}

int tgsched_usage_error(const char *verb, const char *fmt, ...) {
    char hint[96];
    snprintf(hint, sizeof hint, "(see 'tgsched %s --help')\n", verb);
    va_list ap;
    va_start(ap, fmt);
    vfail(TGSCHED_EXIT_BAD_INPUT, fmt, ap, hint);
    va_end(ap);
    return TGSCHED_EXIT_BAD_INPUT;
}

void tgsched_progress(const char *fmt, ...) {
    if (out_state.json) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tgsched %s: ", out_state.verb);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void tgsched_note(const char *fmt, ...) {
    if (out_state.n_notes == MAX_NOTES) return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char *copy = malloc(strlen(text) + 1);
    if (!copy) return;
    strcpy(copy, text);
    out_state.notes[out_state.n_notes++] = copy;
}

int tgsched_n_notes(void) { return out_state.n_notes; }
const char *tgsched_note_text(int i) { return i >= 0 && i < out_state.n_notes ? out_state.notes[i] : ""; }

static void free_notes(void) {
    for (int i = 0; i < out_state.n_notes; i++) free(out_state.notes[i]);
    out_state.n_notes = 0;
}

struct tg_file *tgsched_load(const char *path, int *exit_code) {
    struct tg_file *f = NULL;
    enum tg_status st = tg_file_load(path, &f);
    if (st != TG_OK) *exit_code = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
    return f;
}

size_t tgsched_utf8_length(const char *s, size_t avail) {
    const unsigned char *c = (const unsigned char *)s;
    if (avail == 0) return 0;
    if (c[0] < 0x80) return 1;
    /* the second byte's range rules out overlong forms, surrogates and code
     * points past U+10FFFF (RFC 3629's table) */
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c[0] >= 0xc2 && c[0] <= 0xdf) {
        n = 2;
    } else if (c[0] >= 0xe0 && c[0] <= 0xef) {
        n = 3;
        if (c[0] == 0xe0) lo = 0xa0;
        if (c[0] == 0xed) hi = 0x9f;
    } else if (c[0] >= 0xf0 && c[0] <= 0xf4) {
        n = 4;
        if (c[0] == 0xf0) lo = 0x90;
        if (c[0] == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (avail < n || c[1] < lo || c[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if (c[k] < 0x80 || c[k] > 0xbf) return 0;
    return n;
}

void tgsched_json_string_n(FILE *out, const char *s, size_t n) {
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        const size_t len = tgsched_utf8_length(s + i, n - i);
        /* a byte that is not UTF-8 as the code point of the same number:
         * valid JSON that still tells such names apart */
        if (len == 0) fprintf(out, "\\u%04x", c);
        else if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fwrite(s + i, 1, len, out);
        i += len ? len : 1;
    }
    fputc('"', out);
}

void tgsched_json_string(FILE *out, const char *s) { tgsched_json_string_n(out, s, strlen(s)); }

bool tgsched_output_open(struct tgsched_output_file *o, const char *path) {
    *o = (struct tgsched_output_file){NULL, NULL, path};
    /* Only a plain file (or none yet) is replaced by renaming: renaming over
     * a link would replace the link (/dev/stdout is one, and the file
     * behind it may be the shell's redirection, still open), over a device
     * or pipe would replace the device, and over a file with more names
     * would split them.  Those are written in place, as before. */
    struct stat st;
    if (lstat(path, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_nlink > 1)) {
        o->f = fopen(path, "w");
        return o->f != NULL;
    }
    const size_t size = strlen(path) + 32;
    o->temp = malloc(size);
    if (!o->temp) return false;
    /* "x": never another run's temporary file; fopen keeps the umask's mode */
    for (int attempt = 0; attempt < 100 && !o->f; attempt++) {
        snprintf(o->temp, size, "%s.tmp%ld-%d", path, (long)getpid(), attempt);
        o->f = fopen(o->temp, "wx");
        if (!o->f && errno != EEXIST) break;
    }
    if (!o->f) {
        const int e = errno;
        free(o->temp);
        o->temp = NULL;
        errno = e;
    }
    return o->f != NULL;
}

bool tgsched_output_commit(struct tgsched_output_file *o) {
    const bool write_failed = ferror(o->f) != 0;
    int e = errno; /* the failed write's, unless the close fails too (flushing the rest) */
    const bool close_failed = fclose(o->f) != 0;
    if (close_failed) e = errno;
    o->f = NULL;
    bool ok = !write_failed && !close_failed;
    if (!ok && e == 0) e = EIO;
    if (ok && o->temp && rename(o->temp, o->path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok && o->temp) remove(o->temp);
    free(o->temp);
    o->temp = NULL;
    errno = e;
    return ok;
}

void tgsched_format_bytes(char *out, size_t n, size_t bytes) {
    if (bytes >= ((size_t)1 << 30)) snprintf(out, n, "%.2f GiB", (double)bytes / (double)((size_t)1 << 30));
    else if (bytes >= ((size_t)1 << 20)) snprintf(out, n, "%.2f MiB", (double)bytes / (double)((size_t)1 << 20));
    else if (bytes >= 1024) snprintf(out, n, "%.2f KiB", (double)bytes / 1024.0);
    else snprintf(out, n, "%zu B", bytes);
}

/* From argv[1]: `tgsched --json` (no verb) still answers with a document. */
static bool wants_json(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) return true;
    }
    return false;
}

/* stdout is buffered, so a full disk or a closed descriptor often shows only
 * here: a report that was not delivered must not exit as if it were.  A
 * verb that failed already keeps its own status (bad input says more); a
 * result of 0 or 1 that could not be printed becomes a failed write. */
static int finish(int rc) {
    const bool failed = fflush(stdout) != 0 || ferror(stdout);
    if (failed) {
        fprintf(stderr, "tgsched%s%s: cannot write the output: %s\n", *out_state.verb ? " " : "", out_state.verb,
                strerror(errno ? errno : EIO));
        if (rc == TGSCHED_EXIT_OK || rc == TGSCHED_EXIT_FAILED) rc = TGSCHED_EXIT_RESOURCE;
    }
    free_notes();
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return TGSCHED_EXIT_BAD_INPUT;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return finish(TGSCHED_EXIT_OK);
    }
    for (int i = 0; i < N_VERBS; i++) {
        if (verbs[i].fn && strcmp(argv[1], verbs[i].name) == 0) {
            tgsched_output_init(verbs[i].name, wants_json(argc, argv));
            return finish(verbs[i].fn(argc - 1, argv + 1));
        }
    }
    tgsched_output_init("", wants_json(argc, argv));
    if (argv[1][0] == '-')
        tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "'%s' where the verb goes: tgsched VERB [options] FILE.tg", argv[1]);
    else tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "unknown verb '%s'", argv[1]);
    if (!out_state.json) {
        fputc('\n', stderr);
        print_help(stderr);
    }
    return finish(TGSCHED_EXIT_BAD_INPUT);
}

int tgsched_threads(int asked) {
    if (asked > 0) return asked;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : online > 64 ? 64 : (int)online;
}

bool tgsched_parse_u64(const char *text, unsigned long long *value) {
    if (text[0] < '0' || text[0] > '9') return false;
    char *end = NULL;
    errno = 0;
    *value = strtoull(text, &end, 10);
    return errno == 0 && *end == '\0';
}

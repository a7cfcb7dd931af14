/* What the plan, check and run verbs share: load a `.tg` file, build the
 * backends (from --backends or the file's `backends` line), bind the
 * pre-allocated tensors, apply the file's pins, schedule and plan. */
#ifndef TG_PLAN_SESSION_H
#define TG_PLAN_SESSION_H

#include "backend_spec.h"
#include "tg-oracle.h"
#include "tg-io.h"
#include "tg-sched.h"

#include <stdio.h>

struct session_options {
    const char *path;
    const char *backends_spec; /* NULL: the file's backends line */
    enum tg_plan_policy policy;
    int n_copies;              /* 1 or TG_SCHED_MAX_COPIES (pipeline parallel) */
    bool reserve_only;         /* weights reserve address space only (plan/check) */
    bool json;
    const char *svg_path;
    const char *layers_backend; /* --layers-on B:N: weights of layers < N live on backend B */
    int layers_count;
    bool snapshot;             /* take an oracle snapshot before planning (check) */
    uint64_t seed;             /* run: input values */
};

struct session {
    struct session_options opt;
    struct tg_file *file;
    struct backend_set backends;
    tg_backend *file_backends[TG_IO_MAX_BACKENDS]; /* file backend index -> backend */
    tg_sched *sched;
    struct tg_oracle_snapshot snap; /* pre-allocated tensors before planning */
    bool have_snap;
};

/* Parses the options common to plan/check/run; returns -1 when all were
 * consumed and a file named, else the exit code to return (help or error). */
int session_parse_args(const char *verb, int argc, char **argv, struct session_options *opt,
                       void (*help)(FILE *out));
/* Loads, builds, schedules and plans; the returned status is printed by the
 * caller (it is TG_OK or the failure with tg_last_error()). */
enum tg_status session_open(struct session *s, const struct session_options *opt);
void session_close(struct session *s);

/* Report printing, shared by plan and check. */
void session_print_plan(const struct session *s, FILE *out);
void session_print_plan_json(const struct session *s, FILE *out);
/* Memory map of the scheduled graph copy as SVG (allocator lower bounds drawn). */
enum tg_status session_write_svg(const struct session *s, const char *path);

#endif

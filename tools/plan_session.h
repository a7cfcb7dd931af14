/* What the plan, check and run verbs share: load a `.tg` file, build the
 * backends (from --backends or the file's `backends` line), bind the
 * pre-allocated tensors, apply the file's pins, schedule and plan. */
#ifndef TG_PLAN_SESSION_H
#define TG_PLAN_SESSION_H

#include "backend_spec.h"
#include "plan_map.h"
#include "tg-oracle.h"
#include "tg-io.h"
#include "tg-sched.h"

#include <stdio.h>

/* The options a user gave (session_options.given), so that a verb that uses
 * only some of them can refuse the rest by name instead of ignoring them. */
enum session_option {
    SESSION_OPT_JSON = 1u << 0,
    SESSION_OPT_NODES = 1u << 1,
    SESSION_OPT_BACKENDS = 1u << 2,
    SESSION_OPT_PLAN = 1u << 3,
    SESSION_OPT_N_COPIES = 1u << 4,
    SESSION_OPT_LAYERS_ON = 1u << 5,
    SESSION_OPT_SEED = 1u << 6,
    SESSION_OPT_THREADS = 1u << 7,
    SESSION_OPT_SVG = 1u << 8,
};

struct session_options {
    const char *path;
    char *text;                /* the graph file's bytes, read once: a pipe can be read only once */
    size_t text_len;
    unsigned given;            /* enum session_option bits of the options on the command line */
    const char *backends_spec; /* NULL: the file's backends line */
    enum tg_plan_policy policy;
    int n_copies;              /* 1 or TG_SCHED_MAX_COPIES (pipeline parallel) */
    bool reserve_only;         /* weights reserve address space only (plan/check) */
    bool json;
    bool list_nodes;           /* --nodes: the per-node listing with its legend (plan/check) */
    const char *svg_path;      /* plan/check */
    char layers_backend[32];   /* --layers-on B:N: weights of layers < N live on backend B ("" without it) */
    int layers_count;
    bool snapshot;             /* take an oracle snapshot before planning (check) */
    uint64_t seed;             /* run: input values */
    int threads;               /* run: CPU threads (0: every online core) */
};

struct session {
    struct session_options opt;
    struct tg_file *file;
    struct backend_set backends;
    tg_backend *file_backends[TG_IO_MAX_BACKENDS]; /* file backend index -> backend */
    tg_sched *sched;
    tg_buffer_type *bufts[SPEC_MAX_BACKENDS]; /* the scheduler's, per backend (its plans' and its checks') */
    struct tg_oracle_snapshot snap; /* pre-allocated tensors before planning */
    bool have_snap;
    int n_layers;                   /* layers named by the weights (blk.N.*), 0 when none */
    struct plan_map map;            /* memory map of the scheduled graph (plan/check) */
    bool have_map;
};

/* Parses the options of plan/check/run and reads the graph file; returns -1
 * when all were consumed and the file read (free it with
 * session_options_free), else the exit code to return (help or error). */
int session_parse_args(const char *verb, int argc, char **argv, struct session_options *opt,
                       void (*help)(FILE *out));
void session_options_free(struct session_options *opt);
/* The name of one enum session_option bit ("--svg"), for messages. */
const char *session_option_name(unsigned bit);
/* Parses the file read by session_parse_args (every verb reads the bytes it
 * holds, never the path again). */
enum tg_status session_parse_file(const struct session_options *opt, struct tg_file **out);
/* The options plan, check and run share, for their help texts. */
void session_print_common_help(FILE *out);
/* Loads, builds, schedules and plans (and, when reserve_only, builds the
 * memory map).  On failure the status carries tg_last_error(); the caller
 * reports it with tgsched_fail(tgsched_exit_for(st), ...). */
enum tg_status session_open(struct session *s, const struct session_options *opt);
void session_close(struct session *s);

/* ---- reports (tools/plan_report.c) ---- */
/* The summary of plan and check: what was scheduled where, where the memory
 * went and what that means; the per-node listing only with --nodes. */
void session_print_plan(const struct session *s, FILE *out);
/* After the summary (and check's verdict): the per-node listing with --nodes,
 * else a line saying what more there is. */
void session_print_tail(const struct session *s, FILE *out);
/* The plan's fields of the JSON document (each followed by a comma). */
void session_print_plan_json(const struct session *s, FILE *out);
/* Memory map of the scheduled graph as SVG. */
enum tg_status session_write_svg(const struct session *s, const char *path);

#endif

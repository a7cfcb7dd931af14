/* `tgsched check`: plan like `plan`, then run every oracle checker over the
 * result: the scheduler's (every node on a backend that supports it,
 * pre-allocated tensors not moved, pins honoured, cross-backend sources read
 * through copies made in their split, input limits) and the allocator's over
 * the scheduler's graph copy (no live overlap, legal in-place sharing, bounds,
 * alignment, outputs kept, views inside their roots). */
#include "plan_alloc.h"
#include "plan_intervals.h"
#include "plan_session.h"
#include "tg-oracle-sched.h"
#include "tgsched.h"

#include <stdlib.h>
#include <string.h>

static void check_help(FILE *out) {
    fprintf(out, "usage: tgsched check FILE.tg [options]\n\n"
                 "Plans the graph like `tgsched plan`, prints the same summary, then checks the plan\n"
                 "with every checker of the oracle (an independent reimplementation of the rules).\n"
                 "A MiniMalloc CSV file (FILE.csv) is planned by the interval planner and judged by the\n"
                 "oracle's interval checker: see `tgsched check FILE.csv --help`.\n\n");
    session_print_common_help(out);
    fprintf(out, "  --nodes            also list every node with its backend and reason (see plan)\n"
                 "  --svg OUT.svg      draw the memory map\n\n"
                 "exit status: 0 no violation; 1 violations (each printed with the tensors and the\n"
                 "rule); 2 bad input or arguments; 3 out of resources\n");
}

static void print_line(const char *text, void *user) { fputs(text, (FILE *)user); }

/* The pins the file asked for, as backend ids of the scheduler (NULL when out of memory). */
static struct tg_oracle_sched_pin *file_pins(const struct session *s, int *n_pins) {
    struct tg_oracle_sched_pin *pins = calloc((size_t)s->file->n_tensors + 1, sizeof *pins);
    *n_pins = 0;
    for (int i = 0; pins && i < s->file->n_tensors; i++) {
        const struct tg_file_tensor *ft = &s->file->tensors[i];
        if (ft->pinned_backend < 0) continue;
        pins[(*n_pins)++] = (struct tg_oracle_sched_pin){
            ft->tensor, tg_sched_get_backend_id(s->sched, s->file_backends[ft->pinned_backend])};
    }
    return pins;
}

static void print_verdict_json(const struct tg_oracle_sched_report *rep) {
    printf("\"check\":{\"checked_nodes\":%d,\"violations\":[", rep->n_checked_nodes);
    for (int i = 0; i < rep->n; i++) {
        printf("%s{\"rule\":\"%s\",\"tensor\":", i ? "," : "", tg_oracle_sched_rule_name(rep->items[i].rule));
        if (rep->items[i].tensor) tgsched_json_string(stdout, rep->items[i].tensor->name);
        else fputs("null", stdout);
        fputs(",\"message\":", stdout);
        tgsched_json_string(stdout, rep->items[i].message);
        putchar('}');
    }
    printf("]},");
}

static void print_verdict_text(const struct tg_oracle_sched_report *rep) {
    if (rep->n == 0) {
        printf("check     0 violations in %d computed nodes (views compute nothing): every node on a backend\n"
               "          that supports it, pins and pre-allocated tensors kept, inputs from other backends\n"
               "          read through copies, no two live tensors overlap, in-place reuse legal, outputs\n"
               "          kept, views inside their roots.  The plan is legal.\n",
               rep->n_checked_nodes);
        return;
    }
    printf("check     %d violation%s in %d computed nodes: the plan is NOT legal\n", rep->n, rep->n == 1 ? "" : "s",
           rep->n_checked_nodes);
    tg_set_log(print_line, stdout);
    tg_oracle_sched_report_print(rep, 200);
    tg_set_log(NULL, NULL);
}

static int check_graph(const struct session_options *opt) {
    if (plan_alloc_is_case(opt)) return plan_alloc_run(opt, true);
    tgsched_progress("loading and scheduling %s", opt->path);
    struct session s;
    enum tg_status st = session_open(&s, opt);
    int rc;
    if (st != TG_OK) {
        rc = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
        session_close(&s);
        return rc;
    }
    tgsched_progress("running the checkers");
    int n_pins = 0;
    struct tg_oracle_sched_pin *pins = file_pins(&s, &n_pins);
    struct tg_oracle_sched_report rep = {0};
    /* judged by the buffer types planned with (ggml's CPU one with --plan ggml) */
    st = pins ? tg_oracle_sched_check(s.sched, &s.snap, s.bufts, pins, n_pins, &rep)
              : tg_fail(TG_ERR_ALLOC, "out of host memory for the pins");
    free(pins);
    if (st != TG_OK) {
        rc = tgsched_fail(tgsched_exit_for(st), "the checkers could not run: %s", tg_last_error());
        session_close(&s);
        return rc;
    }
    rc = rep.n ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK;
    if (opt->svg_path) {
        st = session_write_svg(&s, opt->svg_path);
        if (st != TG_OK) rc = tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s", tg_last_error());
        else tgsched_progress("memory map written to %s", opt->svg_path);
    }
    if (rc != TGSCHED_EXIT_RESOURCE) {
        if (opt->json) {
            tgsched_json_open(stdout);
            session_print_plan_json(&s, stdout);
            print_verdict_json(&rep);
            tgsched_json_close(stdout, rc);
        } else {
            session_print_plan(&s, stdout);
            print_verdict_text(&rep);
            session_print_tail(&s, stdout);
        }
    }
    tg_oracle_sched_report_free(&rep);
    session_close(&s);
    return rc;
}

int cmd_check(int argc, char **argv) {
    if (plan_intervals_path(argc, argv)) return plan_intervals_run(argc, argv, true);
    struct session_options opt;
    int rc = session_parse_args("check", argc, argv, &opt, check_help);
    if (rc >= 0) return rc;
    opt.reserve_only = true;
    opt.snapshot = true;
    rc = check_graph(&opt);
    session_options_free(&opt);
    return rc;
}

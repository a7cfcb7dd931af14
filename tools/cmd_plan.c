/* `tgsched plan`: schedule and plan a graph; print a summary (splits and
 * their inputs, per backend the compute buffer, its lower bound and the step
 * where it is fullest), each node's backend and reason with --nodes, the
 * memory map as SVG with --svg. */
#include "plan_alloc.h"
#include "plan_intervals.h"
#include "plan_session.h"
#include "tgsched.h"

#include <string.h>

static void plan_help(FILE *out) {
    fprintf(out, "usage: tgsched plan FILE.tg [options]\n\n"
                 "Schedules the graph on the backends and plans its memory; prints what runs where,\n"
                 "how large each compute buffer is against the least any plan could use, and which\n"
                 "tensors fill it at its fullest step.  A file with `buft` and `buffers` lines (a\n"
                 "generated allocator case, corpus/upstream) is planned by the graph allocator alone,\n"
                 "with its buffer types and buffer ids; only --plan and --json apply to it.  A\n"
                 "MiniMalloc CSV file (FILE.csv) is planned by the interval planner: see\n"
                 "`tgsched plan FILE.csv --help`.  A .tg FILE may be a pipe (/dev/stdin).\n\n");
    session_print_common_help(out);
    fprintf(out, "  --nodes            also list every node: step, backend, the reason it is there, op,\n"
                 "                     name, with a legend of the reasons\n"
                 "  --svg OUT.svg      draw the memory map: tensors as boxes over steps and offsets\n\n"
                 "exit status: 0 planned; 2 bad input or arguments; 3 out of resources\n");
}

static int plan_graph(const struct session_options *opt) {
    if (plan_alloc_is_case(opt)) return plan_alloc_run(opt, false);
    tgsched_progress("loading and scheduling %s", opt->path);
    struct session s;
    enum tg_status st = session_open(&s, opt);
    int rc;
    if (st != TG_OK) {
        rc = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
        session_close(&s);
        return rc;
    }
    rc = TGSCHED_EXIT_OK;
    if (opt->svg_path) {
        st = session_write_svg(&s, opt->svg_path);
        if (st != TG_OK) rc = tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s", tg_last_error());
        else tgsched_progress("memory map written to %s", opt->svg_path);
    }
    if (rc == TGSCHED_EXIT_OK) {
        if (opt->json) {
            tgsched_json_open(stdout);
            session_print_plan_json(&s, stdout);
            tgsched_json_close(stdout, rc);
        } else {
            session_print_plan(&s, stdout);
            session_print_tail(&s, stdout);
        }
    }
    session_close(&s);
    return rc;
}

int cmd_plan(int argc, char **argv) {
    if (plan_intervals_path(argc, argv)) return plan_intervals_run(argc, argv, false);
    struct session_options opt;
    int rc = session_parse_args("plan", argc, argv, &opt, plan_help);
    if (rc >= 0) return rc;
    opt.reserve_only = true;
    rc = plan_graph(&opt);
    session_options_free(&opt);
    return rc;
}

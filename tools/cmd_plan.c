/* `tgsched plan`: schedule and plan a graph; print splits with their inputs,
 * each node's backend and the pass that decided it, and per buffer the size,
 * peak, lower bound and ratio; optionally the memory map as SVG. */
#include "plan_session.h"
#include "tgsched.h"

#include <string.h>

static void plan_help(FILE *out) {
    fprintf(out, "usage: tgsched plan FILE.tg [--backends SPEC] [--plan ggml|best] [--n-copies N]\n"
                 "                    [--svg OUT.svg] [--json]\n\n"
                 "Schedules the graph on the backends (default: the file's `backends` line, sim\n"
                 "devices for all but the last, which is the CPU) and plans its memory.\n"
                 "SPEC: cpu | sim:NAME[:ops=all|OP+OP][:align=N][:pad=N][:max=N][:offload=N][:host][:sync],\n"
                 "comma-separated in priority order, cpu last; e.g. sim:gpu0:ops=all,cpu\n");
}

int cmd_plan(int argc, char **argv) {
    struct session_options opt;
    int rc = session_parse_args("plan", argc, argv, &opt, plan_help);
    if (rc >= 0) return rc;
    opt.reserve_only = true;
    if (!opt.json) fprintf(stderr, "tgsched plan: loading and scheduling %s\n", opt.path);
    struct session s;
    enum tg_status st = session_open(&s, &opt);
    if (st != TG_OK) {
        fprintf(stderr, "tgsched plan: %s\n", tg_last_error());
        session_close(&s);
        return TGSCHED_EXIT_BAD_INPUT;
    }
    if (opt.json) session_print_plan_json(&s, stdout);
    else session_print_plan(&s, stdout);
    if (opt.svg_path) {
        st = session_write_svg(&s, opt.svg_path);
        if (st != TG_OK) fprintf(stderr, "tgsched plan: %s\n", tg_last_error());
        else if (!opt.json) fprintf(stderr, "tgsched plan: memory map written to %s\n", opt.svg_path);
    }
    session_close(&s);
    return st == TG_OK ? TGSCHED_EXIT_OK : TGSCHED_EXIT_BAD_INPUT;
}

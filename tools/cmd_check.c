/* `tgsched check`: plan like `plan`, then run every oracle checker over the
 * result: the scheduler's (every node on a backend that supports it,
 * pre-allocated tensors not moved, pins honoured, cross-backend sources read
 * through copies made in their split, input limits) and the allocator's over
 * the scheduler's graph copy (no live overlap, legal in-place sharing, bounds,
 * alignment, outputs kept, views inside their roots). */
#include "plan_session.h"
#include "tg-oracle-sched.h"
#include "tgsched.h"

#include <stdlib.h>
#include <string.h>

static void check_help(FILE *out) {
    fprintf(out, "usage: tgsched check FILE.tg [--backends SPEC] [--plan ggml|best] [--n-copies N]\n"
                 "                     [--svg OUT.svg] [--json]\n\n"
                 "Plans the graph like `tgsched plan`, prints the plan, then checks it with every\n"
                 "oracle checker.  Exit 0: no violation; 1: violations (each printed with the\n"
                 "tensors and the rule); 2: bad input.\n");
}

static void print_line(const char *text, void *user) { fputs(text, (FILE *)user); }

int cmd_check(int argc, char **argv) {
    struct session_options opt;
    int rc = session_parse_args("check", argc, argv, &opt, check_help);
    if (rc >= 0) return rc;
    opt.reserve_only = true;
    opt.snapshot = true;
    if (!opt.json) fprintf(stderr, "tgsched check: loading and scheduling %s\n", opt.path);
    struct session s;
    enum tg_status st = session_open(&s, &opt);
    if (st != TG_OK) {
        fprintf(stderr, "tgsched check: %s\n", tg_last_error());
        session_close(&s);
        return TGSCHED_EXIT_BAD_INPUT;
    }
    /* the pins the file asked for, as backend ids of the scheduler */
    struct tg_oracle_sched_pin *pins = calloc((size_t)s.file->n_tensors + 1, sizeof *pins);
    int n_pins = 0;
    for (int i = 0; pins && i < s.file->n_tensors; i++) {
        const struct tg_file_tensor *ft = &s.file->tensors[i];
        if (ft->pinned_backend < 0) continue;
        pins[n_pins++] = (struct tg_oracle_sched_pin){
            ft->tensor, tg_sched_get_backend_id(s.sched, s.file_backends[ft->pinned_backend])};
    }
    if (!opt.json) fprintf(stderr, "tgsched check: running the checkers\n");
    struct tg_oracle_sched_report rep = {0};
    st = tg_oracle_sched_check(s.sched, &s.snap, NULL, pins, n_pins, &rep);
    free(pins);
    if (st != TG_OK) {
        fprintf(stderr, "tgsched check: the checkers could not run: %s\n", tg_last_error());
        session_close(&s);
        return TGSCHED_EXIT_BAD_INPUT;
    }
    if (opt.json) {
        /* the plan object, then the verdict */
        session_print_plan_json(&s, stdout);
        printf("{\"checked_nodes\":%d,\"violations\":[", rep.n_checked_nodes);
        for (int i = 0; i < rep.n; i++) {
            printf("%s{\"rule\":\"%s\",\"message\":", i ? "," : "", tg_oracle_sched_rule_name(rep.items[i].rule));
            tgsched_json_string(stdout, rep.items[i].message);
            putchar('}');
        }
        printf("]}\n");
    } else {
        session_print_plan(&s, stdout);
        printf("\ncheck: %d nodes checked, %d violations\n", rep.n_checked_nodes, rep.n);
        if (rep.n) {
            tg_set_log(print_line, stdout);
            tg_oracle_sched_report_print(&rep, 200);
            tg_set_log(NULL, NULL);
        }
    }
    if (opt.svg_path) {
        st = session_write_svg(&s, opt.svg_path);
        if (st != TG_OK) fprintf(stderr, "tgsched check: %s\n", tg_last_error());
        else if (!opt.json) fprintf(stderr, "tgsched check: memory map written to %s\n", opt.svg_path);
    }
    int violations = rep.n;
    tg_oracle_sched_report_free(&rep);
    session_close(&s);
    if (st != TG_OK) return TGSCHED_EXIT_BAD_INPUT;
    return violations ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK;
}

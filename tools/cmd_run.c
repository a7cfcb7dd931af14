/* `tgsched run`: compute the graph on the chosen backends with random op-safe
 * inputs, compute it again on the CPU with the oracle's naive plan (nothing
 * reused) from the same inputs, and compare every output. */
#include "plan_session.h"
#include "tgsched.h"

#include "tg-cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void run_help(FILE *out) {
    fprintf(out, "usage: tgsched run FILE.tg [--backends SPEC] [--plan ggml|best] [--n-copies N] [--seed N]\n"
                 "                   [--json]\n\n"
                 "Computes the graph on the backends (as `tgsched plan` chooses them) with random\n"
                 "inputs from op-safe ranges, and on the CPU with the naive plan; reports the max\n"
                 "error per output.  Exit 0: all outputs match (NMSE <= 1e-7, NaN/Inf identical);\n"
                 "1: a mismatch; 2: bad input, or ops this build cannot compute.\n");
}

/* Host copy of t's bytes viewed through t's strides. */
static bool read_host(const struct tg_tensor *t, struct tg_tensor *view, void **mem) {
    size_t n = tg_nbytes(t);
    *mem = malloc(n ? n : 1);
    if (!*mem || tg_tensor_get(t, *mem, 0, n) != TG_OK) return false;
    *view = *t;
    view->data = *mem;
    view->buffer = NULL;
    return true;
}

struct error_stats {
    double max_abs, nmse;
    bool nonfinite_mismatch;
};

static struct error_stats compare(const struct tg_tensor *got, const struct tg_tensor *want) {
    struct error_stats e = {0};
    double num = 0.0, den = 0.0;
    for (int64_t i3 = 0; i3 < want->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < want->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < want->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < want->ne[0]; i0++) {
                    double a = tg_get_f32_nd(got, i0, i1, i2, i3), b = tg_get_f32_nd(want, i0, i1, i2, i3);
                    if (!isfinite(a) || !isfinite(b)) {
                        bool same = (isnan(a) && isnan(b)) || a == b;
                        e.nonfinite_mismatch |= !same;
                        continue;
                    }
                    double d = fabs(a - b);
                    if (d > e.max_abs) e.max_abs = d;
                    num += d * d;
                    den += b * b;
                }
    e.nmse = den > 0.0 ? num / den : num;
    return e;
}

static int unsupported_ops(const struct tg_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!tg_cpu_supports_op(g->nodes[i])) {
            if (n < 5) {
                const struct tg_tensor *t = g->nodes[i];
                fprintf(stderr, "tgsched run: node %d '%s' (op %s, type %s%s%s) has no kernel in this build\n", i,
                        t->name, tg_op_name(t->op), tg_type_name(t->type), t->src[0] ? ", src0 " : "",
                        t->src[0] ? tg_type_name(t->src[0]->type) : "");
            }
            n++;
        }
    }
    return n;
}

/* The reference: the same file on CPU memory, every tensor in its own block. */
static enum tg_status build_reference(const char *path, struct tg_file **out, tg_backend *cpu,
                                      struct tg_oracle_naive *naive) {
    enum tg_status st = tg_file_load(path, out);
    if (st != TG_OK) return st;
    struct tg_file *f = *out;
    tg_backend *cpus[TG_IO_MAX_BACKENDS];
    for (int i = 0; i < f->n_backends; i++) cpus[i] = cpu;
    st = tg_file_bind_external(f, cpus, f->n_backends, false);
    if (st != TG_OK) return st;
    struct tg_oracle_snapshot snap;
    st = tg_oracle_snapshot_take(f->graph, &snap);
    if (st != TG_OK) return st;
    struct tg_oracle_liveness lv;
    st = tg_oracle_liveness_build(f->graph, &snap, NULL, NULL, &lv);
    if (st == TG_OK) {
        tg_buffer_type *buft = tg_cpu_buffer_type();
        st = tg_oracle_naive_alloc(f->graph, &lv, &buft, 1, naive);
        tg_oracle_liveness_free(&lv);
    }
    tg_oracle_snapshot_free(&snap);
    return st;
}

/* Gives the real graph the reference's input values (leafs and inputs). */
static enum tg_status copy_inputs(struct tg_graph *real, const struct tg_graph *ref) {
    for (int j = 0; j < real->n_leafs; j++) {
        const struct tg_tensor *from = ref->leafs[j];
        if (!from->data || real->leafs[j]->view_src) continue;
        enum tg_status st = tg_tensor_set(real->leafs[j], from->data, 0, tg_nbytes(from));
        if (st != TG_OK) return st;
    }
    for (int i = 0; i < real->n_nodes; i++) {
        if (!(real->nodes[i]->flags & TG_FLAG_INPUT) || real->nodes[i]->view_src) continue;
        enum tg_status st = tg_tensor_set(real->nodes[i], ref->nodes[i]->data, 0, tg_nbytes(ref->nodes[i]));
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

int cmd_run(int argc, char **argv) {
    struct session_options opt;
    int rc = session_parse_args("run", argc, argv, &opt, run_help);
    if (rc >= 0) return rc;
    opt.reserve_only = false;
    if (!opt.json) fprintf(stderr, "tgsched run: loading and scheduling %s\n", opt.path);
    struct session s;
    struct tg_file *ref = NULL;
    struct tg_oracle_naive naive = {0};
    tg_backend *cpu = tg_backend_cpu_new();
    rc = TGSCHED_EXIT_BAD_INPUT;
    enum tg_status st = session_open(&s, &opt);
    if (st != TG_OK) goto fail;
    if (unsupported_ops(s.file->graph) > 0) {
        fprintf(stderr, "tgsched run: cannot compute this graph here (plan and check it instead)\n");
        goto done;
    }
    if (!opt.json) fprintf(stderr, "tgsched run: building the naive-plan reference on the CPU\n");
    st = build_reference(opt.path, &ref, cpu, &naive);
    if (st == TG_OK) st = tg_oracle_fill_inputs(ref->graph, opt.seed);
    if (st == TG_OK) st = copy_inputs(s.file->graph, ref->graph);
    if (st != TG_OK) goto fail;
    if (!opt.json) fprintf(stderr, "tgsched run: computing %d nodes on %d backends\n", s.file->graph->n_nodes, s.backends.n);
    st = tg_sched_graph_compute(s.sched, s.file->graph);
    if (st == TG_OK) {
        if (!opt.json) fprintf(stderr, "tgsched run: computing the reference\n");
        st = tg_cpu_compute_graph(ref->graph, 1);
    }
    if (st != TG_OK) goto fail;
    int n_out = 0, n_bad = 0;
    if (opt.json) printf("{\"file\":\"%s\",\"outputs\":[", opt.path);
    for (int i = 0; i < s.file->graph->n_nodes; i++) {
        const struct tg_tensor *t = s.file->graph->nodes[i];
        bool last = i == s.file->graph->n_nodes - 1;
        if (!(t->flags & TG_FLAG_OUTPUT) && !last) continue;
        struct tg_tensor view;
        void *mem = NULL;
        if (!read_host(t, &view, &mem)) {
            free(mem);
            goto fail;
        }
        struct error_stats e = compare(&view, ref->graph->nodes[i]);
        free(mem);
        bool bad = e.nonfinite_mismatch || e.nmse > 1e-7;
        n_bad += bad;
        if (opt.json) {
            printf("%s{\"name\":", n_out ? "," : "");
            tgsched_json_string(stdout, t->name);
            printf(",\"max_abs_error\":%g,\"nmse\":%g,\"match\":%s}", e.max_abs, e.nmse, bad ? "false" : "true");
        } else {
            printf("output %-24s max |error| %-12g nmse %-12g %s\n", t->name, e.max_abs, e.nmse, bad ? "MISMATCH" : "ok");
        }
        n_out++;
    }
    if (opt.json) printf("],\"mismatches\":%d}\n", n_bad);
    else printf("%d outputs compared, %d mismatches (%d splits on %d backends)\n", n_out, n_bad,
                tg_sched_get_n_splits(s.sched), s.backends.n);
    rc = n_bad ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK;
    goto done;
fail:
    fprintf(stderr, "tgsched run: %s\n", tg_last_error());
done:
    session_close(&s);
    tg_oracle_naive_free(&naive);
    tg_file_free(ref);
    tg_backend_free(cpu);
    return rc;
}

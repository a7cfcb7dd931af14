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
    fprintf(out, "usage: tgsched run FILE.tg [options]\n\n"
                 "Computes the graph on the backends (as `tgsched plan` chooses them) with random\n"
                 "inputs from op-safe ranges, and on the CPU with the naive plan; reports the max\n"
                 "error per output.\n\n");
    session_print_common_help(out);
    fprintf(out, "  --seed N           the inputs' random values (default 1)\n\n"
                 "exit status: 0 all outputs match (NMSE <= 1e-7, NaN/Inf identical); 1 a mismatch;\n"
                 "2 bad input, or ops this build cannot compute; 3 out of resources\n");
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

struct output_result {
    const char *name;
    struct error_stats e;
    bool bad;
};

static void print_results(const struct session *s, const struct output_result *res, int n_out, int n_bad) {
    if (tgsched_json_mode()) {
        tgsched_json_open(stdout);
        fputs("\"file\":", stdout);
        tgsched_json_string(stdout, s->opt.path);
        printf(",\"n_splits\":%d,\"n_backends\":%d,\"outputs\":[", tg_sched_get_n_splits(s->sched), s->backends.n);
        for (int i = 0; i < n_out; i++) {
            printf("%s{\"name\":", i ? "," : "");
            tgsched_json_string(stdout, res[i].name);
            printf(",\"max_abs_error\":%g,\"nmse\":%g,\"match\":%s}", res[i].e.max_abs, res[i].e.nmse,
                   res[i].bad ? "false" : "true");
        }
        printf("],\"mismatches\":%d,", n_bad);
        tgsched_json_close(stdout, n_bad ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK);
        return;
    }
    for (int i = 0; i < tgsched_n_notes(); i++) printf("note: %s\n", tgsched_note_text(i));
    for (int i = 0; i < n_out; i++) {
        printf("output %-24s max |error| %-12g nmse %-12g %s\n", res[i].name, res[i].e.max_abs, res[i].e.nmse,
               res[i].bad ? "MISMATCH" : "ok");
    }
    printf("%d outputs compared, %d mismatches (%d splits on %d backends)\n", n_out, n_bad,
           tg_sched_get_n_splits(s->sched), s->backends.n);
}

int cmd_run(int argc, char **argv) {
    struct session_options opt;
    int rc = session_parse_args("run", argc, argv, &opt, run_help);
    if (rc >= 0) return rc;
    opt.reserve_only = false;
    tgsched_progress("loading and scheduling %s", opt.path);
    struct session s;
    struct tg_file *ref = NULL;
    struct tg_oracle_naive naive = {0};
    struct output_result *res = NULL;
    tg_backend *cpu = tg_backend_cpu_new();
    rc = TGSCHED_EXIT_BAD_INPUT;
    enum tg_status st = session_open(&s, &opt);
    if (st != TG_OK) goto fail;
    if (unsupported_ops(s.file->graph) > 0) {
        rc = tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "cannot compute this graph here (plan and check it instead)");
        goto done;
    }
    tgsched_progress("building the naive-plan reference on the CPU");
    st = build_reference(opt.path, &ref, cpu, &naive);
    if (st == TG_OK) st = tg_oracle_fill_inputs(ref->graph, opt.seed);
    if (st == TG_OK) st = copy_inputs(s.file->graph, ref->graph);
    if (st != TG_OK) goto fail;
    tgsched_progress("computing %d nodes on %d backends", s.file->graph->n_nodes, s.backends.n);
    st = tg_sched_graph_compute(s.sched, s.file->graph);
    if (st == TG_OK) {
        tgsched_progress("computing the reference");
        st = tg_cpu_compute_graph(ref->graph, 1);
    }
    if (st != TG_OK) goto fail;
    res = calloc((size_t)s.file->graph->n_nodes + 1, sizeof *res);
    if (!res) {
        st = tg_fail(TG_ERR_ALLOC, "out of host memory for the results");
        goto fail;
    }
    int n_out = 0, n_bad = 0;
    for (int i = 0; i < s.file->graph->n_nodes; i++) {
        const struct tg_tensor *t = s.file->graph->nodes[i];
        bool last = i == s.file->graph->n_nodes - 1;
        if (!(t->flags & TG_FLAG_OUTPUT) && !last) continue;
        struct tg_tensor view;
        void *mem = NULL;
        if (!read_host(t, &view, &mem)) {
            free(mem);
            st = mem ? TG_ERR_INVALID : tg_fail(TG_ERR_ALLOC, "out of host memory reading '%s'", t->name);
            goto fail;
        }
        struct error_stats e = compare(&view, ref->graph->nodes[i]);
        free(mem);
        bool bad = e.nonfinite_mismatch || e.nmse > 1e-7;
        n_bad += bad;
        res[n_out++] = (struct output_result){t->name, e, bad};
    }
    print_results(&s, res, n_out, n_bad);
    rc = n_bad ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK;
    goto done;
fail:
    rc = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
done:
    free(res);
    session_close(&s);
    tg_oracle_naive_free(&naive);
    tg_file_free(ref);
    tg_backend_free(cpu);
    return rc;
}

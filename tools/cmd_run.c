/* `tgsched run`: compute the graph on the chosen backends with random op-safe
 * inputs, compute it again on the CPU with the oracle's naive plan (nothing
 * reused) from the same inputs, and compare every output. */
#include "plan_session.h"
#include "tgsched.h"

#include "tg-cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Outputs of a graph split across backends whose kernels round differently
 * (a GPU's) may differ from the CPU's by what a whole model compounds from
 * ggml's per-op bound (5e-4 for mul_mat): judged against this NMSE. */
#define MODEL_NMSE 1e-3

static void run_help(FILE *out) {
    fprintf(out, "usage: tgsched run FILE.tg [options]\n\n"
                 "Computes the graph on the backends (as `tgsched plan` chooses them) with random\n"
                 "inputs from op-safe ranges (weights at a trained model's scale), and again on\n"
                 "the CPU alone with the oracle's naive plan (no memory reused); reports each\n"
                 "output's error and both times.  On the CPU alone the two must agree bit for\n"
                 "bit (the same kernels: any difference is memory the plan shared wrongly);\n"
                 "split across other backends, within NMSE %g (NaN/Inf identical).\n\n", MODEL_NMSE);
    session_print_common_help(out);
    fprintf(out, "  --seed N           the inputs' random values (default 1)\n"
                 "  --threads N        CPU threads (default: every online core)\n\n"
                 "exit status: 0 all outputs match; 1 a mismatch; 2 bad input, or a node this\n"
                 "build has no CPU kernel for (named with its op, types and layout); 3 out of\n"
                 "resources\n");
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    double max_abs, nmse, rms; /* rms: of the reference's values (a degenerate all-zero run shows) */
    bool nonfinite_mismatch;
    int64_t nonfinite; /* NaN/Inf in the reference: a weak comparison there */
    bool identical;    /* every byte */
};

static struct error_stats compare(const struct tg_tensor *got, const struct tg_tensor *want) {
    struct error_stats e = {0};
    int64_t n = 0;
    e.identical = tg_nbytes(got) == tg_nbytes(want) && memcmp(got->data, want->data, tg_nbytes(got)) == 0;
    double num = 0.0, den = 0.0;
    for (int64_t i3 = 0; i3 < want->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < want->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < want->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < want->ne[0]; i0++) {
                    double a = tg_get_f32_nd(got, i0, i1, i2, i3), b = tg_get_f32_nd(want, i0, i1, i2, i3);
                    e.nonfinite += !isfinite(b);
                    if (!isfinite(a) || !isfinite(b)) {
                        bool same = (isnan(a) && isnan(b)) || a == b;
                        e.nonfinite_mismatch |= !same;
                        continue;
                    }
                    double d = fabs(a - b);
                    if (d > e.max_abs) e.max_abs = d;
                    num += d * d;
                    den += b * b;
                    n++;
                }
    e.nmse = den > 0.0 ? num / den : num;
    e.rms = n > 0 ? sqrt(den / (double)n) : 0.0;
    return e;
}

/* Names the nodes no CPU kernel computes (the first five), before any
 * scheduling: their op, their type and every source's type and layout. */
static int uncomputable_nodes(const struct session_options *opt, int *exit_code) {
    const char *path = opt->path;
    struct tg_file *f = NULL;
    enum tg_status st = session_parse_file(opt, &f);
    if (st != TG_OK) {
        *exit_code = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
        return -1;
    }
    int n = 0;
    for (int i = 0; i < f->graph->n_nodes; i++) {
        const struct tg_tensor *t = f->graph->nodes[i];
        if (tg_cpu_supports_op(t)) continue;
        if (n++ < 5) {
            char what[640];
            tg_cpu_describe_node(t, what, sizeof what);
            tgsched_note("%s: node %d %s has no CPU kernel for this op with these types and layout", path, i, what);
        }
    }
    tg_file_free(f);
    return n;
}

static bool all_cpu(const struct session *s) {
    for (int i = 0; i < s->backends.n; i++) {
        if (!tg_backend_is_cpu(s->backends.backends[i])) return false;
    }
    return true;
}

/* Weights the real run holds in host memory are read by the reference in
 * place (a 7B model's 3.6 GiB once, not twice): each such record is bound
 * to its twin's memory and taken out of the file's own placement.  They are
 * read-only, and the reference computes first, before the real run could
 * write anywhere. */
static enum tg_status share_host_weights(struct tg_file *ref, const struct tg_file *real) {
    for (int i = 0; i < ref->n_tensors && i < real->n_tensors; i++) {
        struct tg_file_tensor *r = &ref->tensors[i];
        const struct tg_tensor *twin = real->tensors[i].tensor;
        if (r->placement != TG_PLACE_WEIGHTS || r->tensor->view_src || !twin->buffer || !tg_buffer_is_host(twin->buffer)) {
            continue;
        }
        enum tg_status st = tg_tensor_bind(r->tensor, twin->buffer, twin->data);
        if (st != TG_OK) return st;
        r->placement = TG_PLACE_NONE;
    }
    return TG_OK;
}

/* The reference: the same file on CPU memory, every tensor in its own block. */
static enum tg_status build_reference(const struct session_options *opt, const struct tg_file *real,
                                      struct tg_file **out, tg_backend *cpu, struct tg_oracle_naive *naive) {
    enum tg_status st = session_parse_file(opt, out);
    if (st == TG_OK) st = share_host_weights(*out, real);
    if (st != TG_OK) return st;
    struct tg_file *f = *out;
    tg_backend *cpus[TG_IO_MAX_BACKENDS];
    for (int i = 0; i < f->n_backends; i++) cpus[i] = cpu;
    st = tg_file_bind_external(f, cpus, f->n_backends, false);
    if (st != TG_OK) return st;
    return tg_oracle_naive_alloc_one_type(f->graph, tg_cpu_buffer_type(), naive);
}

struct output_result {
    const char *name;
    struct error_stats e;
    bool bad;
};

struct run_times {
    double real, reference;
    int threads;
    bool exact; /* the CPU alone: judged bit for bit */
};

static void print_results(const struct session *s, const struct output_result *res, int n_out, int n_bad,
                          const struct run_times *t) {
    if (tgsched_json_mode()) {
        tgsched_json_open(stdout);
        fputs("\"file\":", stdout);
        tgsched_json_string(stdout, s->opt.path);
        printf(",\"n_splits\":%d,\"n_backends\":%d,\"threads\":%d,\"seconds\":%.6f,\"reference_seconds\":%.6f,"
               "\"compared\":\"%s\",\"outputs\":[",
               tg_sched_get_n_splits(s->sched), s->backends.n, t->threads, t->real, t->reference,
               t->exact ? "bits" : "nmse");
        for (int i = 0; i < n_out; i++) {
            printf("%s{\"name\":", i ? "," : "");
            tgsched_json_string(stdout, res[i].name);
            printf(",\"rms\":%g,\"max_abs_error\":%g,\"nmse\":%g,\"identical\":%s,\"nonfinite\":%lld,\"match\":%s}",
                   res[i].e.rms, res[i].e.max_abs, res[i].e.nmse, res[i].e.identical ? "true" : "false",
                   (long long)res[i].e.nonfinite, res[i].bad ? "false" : "true");
        }
        printf("],\"mismatches\":%d,", n_bad);
        tgsched_json_close(stdout, n_bad ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK);
        return;
    }
    for (int i = 0; i < tgsched_n_notes(); i++) printf("note: %s\n", tgsched_note_text(i));
    for (int i = 0; i < n_out; i++) {
        const struct error_stats *e = &res[i].e;
        printf("output %-24s rms %-10.4g max |error| %-12g nmse %-12g %s", res[i].name, e->rms, e->max_abs, e->nmse,
               res[i].bad ? "MISMATCH" : e->identical ? "ok (bit-identical)" : "ok (within the model bound)");
        if (e->nonfinite) printf(" (%lld values NaN or infinite in the reference)", (long long)e->nonfinite);
        printf("\n");
    }
    const int n_splits = tg_sched_get_n_splits(s->sched), n_backends = s->backends.n;
    printf("%d output%s compared, %d mismatch%s (%d split%s on %d backend%s)\n", n_out, n_out == 1 ? "" : "s", n_bad,
           n_bad == 1 ? "" : "es", n_splits, n_splits == 1 ? "" : "s", n_backends, n_backends == 1 ? "" : "s");
    printf("compared: the scheduler's plan on %s vs the naive plan on the CPU alone, %s\n",
           t->exact ? "the CPU" : "these backends", t->exact ? "bit for bit" : "within the model NMSE bound");
    printf("time: %.3f s on %d backend%s, %.3f s for the reference (%d CPU thread%s)\n", t->real, n_backends,
           n_backends == 1 ? "" : "s", t->reference, t->threads, t->threads == 1 ? "" : "s");
}

static int run_graph(const struct session_options *opt) {
    int rc = TGSCHED_EXIT_BAD_INPUT;
    tgsched_progress("loading and scheduling %s", opt->path);
    const int uncomputable = uncomputable_nodes(opt, &rc);
    if (uncomputable < 0) return rc;
    if (uncomputable > 0) {
        for (int i = 0; i < tgsched_n_notes() && !tgsched_json_mode(); i++) {
            fprintf(stderr, "tgsched run: %s\n", tgsched_note_text(i));
        }
        return tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "%d node%s cannot be computed in this build (plan and check the "
                            "graph instead)", uncomputable, uncomputable == 1 ? "" : "s");
    }
    struct session s;
    struct tg_file *ref = NULL;
    struct tg_oracle_naive naive = {0};
    struct output_result *res = NULL;
    tg_backend *cpu = tg_backend_cpu_new();
    rc = TGSCHED_EXIT_BAD_INPUT;
    enum tg_status st = session_open(&s, opt);
    if (st != TG_OK) goto fail;
    struct run_times times = {.threads = tgsched_threads(opt->threads), .exact = all_cpu(&s)};
    for (int i = 0; i < s.backends.n; i++) tg_backend_cpu_set_n_threads(s.backends.backends[i], times.threads);
    tgsched_progress("building the naive-plan reference on the CPU");
    st = build_reference(opt, s.file, &ref, cpu, &naive);
    if (st == TG_OK) st = tg_oracle_fill_model_inputs(ref->graph, opt->seed);
    if (st == TG_OK) st = tg_oracle_copy_inputs(s.file->graph, ref->graph);
    if (st != TG_OK) goto fail;
    tgsched_progress("computing the reference");
    double t0 = seconds_now();
    st = tg_cpu_compute_graph(ref->graph, times.threads);
    times.reference = seconds_now() - t0;
    if (st == TG_OK) {
        tgsched_progress("computing %d node%s on %d backend%s", s.file->graph->n_nodes,
                         s.file->graph->n_nodes == 1 ? "" : "s", s.backends.n, s.backends.n == 1 ? "" : "s");
        t0 = seconds_now();
        st = tg_sched_graph_compute(s.sched, s.file->graph);
        times.real = seconds_now() - t0;
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
        /* the same kernels everywhere: equal bits; a device's own kernels: the model bound */
        bool bad = times.exact ? !e.identical : e.nonfinite_mismatch || e.nmse > MODEL_NMSE;
        n_bad += bad;
        res[n_out++] = (struct output_result){t->name, e, bad};
    }
    print_results(&s, res, n_out, n_bad, &times);
    rc = n_bad ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK;
    goto done;
fail:
    rc = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
done:
    free(res);
    tg_oracle_naive_free(&naive);
    tg_file_free(ref); /* before the session: it may read the session's weights */
    session_close(&s);
    tg_backend_free(cpu);
    return rc;
}

int cmd_run(int argc, char **argv) {
    struct session_options opt;
    int rc = session_parse_args("run", argc, argv, &opt, run_help);
    if (rc >= 0) return rc;
    opt.reserve_only = false;
    rc = run_graph(&opt);
    session_options_free(&opt);
    return rc;
}

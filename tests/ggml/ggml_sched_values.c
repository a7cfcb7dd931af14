/* Values through both schedulers (see tg-ggml-sched.h): the reference on the
 * CPU alone, ggml_backend_sched over the test backends with ggml's CPU
 * kernels (in a child: ggml may assert or crash), tg_sched over sims that
 * compute. */
#include "tg-ggml-sched.h"

#include "ggml-cpu.h"
#include "tg-cpu.h"
#include "tg-oracle.h"
#include "tg_test_child.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct tg_tensor *slot_tensor(const struct tg_graph *g, int u) {
    return u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
}

/* Whether slot u is fed: a leaf, or a node flagged input. */
static bool feedable(const struct tg_graph *g, int u) {
    return u >= g->n_nodes || (g->nodes[u]->flags & TG_FLAG_INPUT);
}

void tg_ggml_sched_values_free(struct tg_ggml_sched_values *v) {
    if (v->fed) {
        int n = v->ref.c ? v->ref.c->graph->n_nodes + v->ref.c->graph->n_leafs : 0;
        for (int u = 0; u < n; u++) free(v->fed[u]);
    }
    free(v->fed);
    tg_gallocr_free(v->ga);
    tg_ggml_sched_case_free(&v->ref);
    memset(v, 0, sizeof *v);
}

enum tg_status tg_ggml_sched_values_make(const uint8_t *bytes, size_t n, uint64_t seed, struct tg_ggml_sched_values *v) {
    memset(v, 0, sizeof *v);
    enum tg_status st = tg_ggml_sched_case_from_bytes(bytes, n, &v->ref);
    if (st != TG_OK) return st;
    struct tg_graph *g = v->ref.c->graph;
    if (!tg_gen_graph_cpu_computable(g) || g->n_nodes == 0) return TG_OK;
    int slots = g->n_nodes + g->n_leafs;
    v->fed = calloc((size_t)slots, sizeof *v->fed);
    v->ga = tg_gallocr_new(tg_cpu_buffer_type());
    if (!v->fed || !v->ga) return tg_fail(TG_ERR_ALLOC, "values: out of host memory");
    if ((st = tg_gallocr_alloc_graph(v->ga, g)) != TG_OK || (st = tg_oracle_fill_inputs(g, seed)) != TG_OK) return st;
    /* the bytes as fed, before computing writes into any of them (set_rows into a leaf) */
    for (int u = 0; u < slots; u++) {
        const struct tg_tensor *t = slot_tensor(g, u);
        if (!feedable(g, u) || t->view_src || !t->data) continue;
        v->fed[u] = malloc(tg_nbytes(t));
        if (!v->fed[u]) return tg_fail(TG_ERR_ALLOC, "values: out of host memory");
        memcpy(v->fed[u], t->data, tg_nbytes(t)); /* the CPU's memory, or memory its context owns */
    }
    if ((st = tg_cpu_compute_graph(g, 1)) != TG_OK) return st;
    v->ready = true;
    return TG_OK;
}

/* ---- comparing ------------------------------------------------------------------------------ */

/* got and want, each through its own strides (quantized rows decoded by
 * ggml's to_float); *nmse: INFINITY where a NaN or Inf is not the other's. */
static bool same_bits(enum ggml_type type, const int64_t ne[4], const char *got, const size_t *got_nb, const char *want,
                      const size_t *want_nb, double *nmse) {
    bool equal = true, blocks = ggml_is_quantized(type), nonfinite = false;
    size_t es = ggml_type_size(type), row = ggml_row_size(type, ne[0]);
    float *a = blocks ? malloc((size_t)ne[0] * sizeof *a) : NULL, *b = blocks ? malloc((size_t)ne[0] * sizeof *b) : NULL;
    double err = 0.0, norm = 0.0;
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++) {
                const char *p = got + i1 * got_nb[1] + i2 * got_nb[2] + i3 * got_nb[3];
                const char *q = want + i1 * want_nb[1] + i2 * want_nb[2] + i3 * want_nb[3];
                int64_t n0 = ne[0];
                if (blocks) {
                    equal &= memcmp(p, q, row) == 0;
                    if (!a || !b) continue;
                    ggml_get_type_traits(type)->to_float(p, a, ne[0]);
                    ggml_get_type_traits(type)->to_float(q, b, ne[0]);
                }
                for (int64_t i0 = 0; i0 < n0; i0++) {
                    double x, y;
                    if (blocks) {
                        x = a ? a[i0] : 0.0, y = b ? b[i0] : 0.0;
                    } else {
                        const char *px = p + i0 * got_nb[0], *py = q + i0 * want_nb[0];
                        equal &= memcmp(px, py, es) == 0;
                        x = tg_ggml_element(type, px), y = tg_ggml_element(type, py);
                    }
                    if (!isfinite(x) || !isfinite(y)) {
                        nonfinite |= !(x == y || (isnan(x) && isnan(y)));
                        continue;
                    }
                    err += (x - y) * (x - y);
                    norm += y * y;
                }
            }
    free(a);
    free(b);
    *nmse = nonfinite ? INFINITY : norm > 0.0 ? err / norm : err;
    return equal;
}

/* ggml's rope (and rope_back, the same kernel) of rows of an odd width (not
 * vision mode) copies the unrotated rest two elements at a time, one past
 * each row (cpu-rope-odd-width): whether such a write of a node of graph
 * other than x lands in x's bytes. */
static bool rope_spills_into(struct ggml_cgraph *graph, const struct ggml_tensor *x) {
    const char *lo = x->data, *hi = lo + ggml_nbytes(x);
    for (int i = 0; i < ggml_graph_n_nodes(graph); i++) {
        const struct ggml_tensor *r = ggml_graph_node(graph, i);
        if (r == x || (r->op != GGML_OP_ROPE && r->op != GGML_OP_ROPE_BACK) || r->ne[0] % 2 == 0 || !r->data) continue;
        if (((const int32_t *)r->op_params)[2] == GGML_ROPE_TYPE_VISION) continue;
        for (int64_t i3 = 0; i3 < r->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < r->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < r->ne[1]; i1++) {
                    const char *at = (const char *)r->data + i3 * r->nb[3] + i2 * r->nb[2] + i1 * r->nb[1] + r->ne[0] * r->nb[0];
                    if (at >= lo && at < hi) return true;
                }
    }
    return false;
}

/* One result node: its bytes at data with ggml's layout against the
 * reference's; spilled: ggml's rope wrote into them (rope_spills_into). */
static void judge(struct tg_ggml_value_result *out, int i, enum ggml_type type, const int64_t ne[4], const void *data,
                  const size_t *nb, const struct tg_tensor *want, const struct ggml_tensor *alone, bool spilled) {
    double nmse = 0.0, unused;
    out->compared++;
    if (same_bits(type, ne, data, nb, want->data, want->nb, &nmse)) {
        out->exact++;
    } else if (nmse <= TG_GGML_VALUE_NMSE) {
        out->close++;
        out->worst_close = nmse > out->worst_close ? nmse : out->worst_close;
    } else if (alone && alone->data &&
               (same_bits(type, ne, data, nb, alone->data, alone->nb, &unused) ||
                (same_bits(type, ne, alone->data, alone->nb, want->data, want->nb, &unused), unused > TG_GGML_VALUE_NMSE))) {
        /* ggml on its CPU alone gets it too, or is as far off: its kernels or
         * its allocator, not its schedule across backends.  Far off with
         * bytes that change from run to run: a kernel handed a layout ggml's
         * constructors refuse (the import makes it), scale reading past its
         * source (docs/upstream.md, cpu-scale-size1-stride) */
        out->as_alone++;
        if (getenv("TG_GGML_VERBOSE"))
            fprintf(stderr, "  node %d '%s' (%s %s): NMSE %.3g against the cpu alone, as ggml's cpu alone\n", i, want->name,
                    tg_op_name(want->op), tg_type_name(want->type), nmse);
    } else if (spilled) {
        out->rope_spill++;
        if (getenv("TG_GGML_VERBOSE"))
            fprintf(stderr, "  node %d '%s' (%s %s): NMSE %.3g against the cpu alone, where ggml's rope wrote past a row\n", i,
                    want->name, tg_op_name(want->op), tg_type_name(want->type), nmse);
    } else {
        if (!out->wrong++) out->first_wrong = i;
        if (getenv("TG_GGML_VERBOSE"))
            fprintf(stderr, "  node %d '%s' (%s %s): NMSE %.3g against the cpu alone\n", i, want->name, tg_op_name(want->op),
                    tg_type_name(want->type), nmse);
    }
}

/* ---- ggml's side, in a child ---------------------------------------------------------------- */

static struct tg_ggml_value_result *child_out;

static void child_abort(const char *message) {
    if (child_out) {
        child_out->aborted = true;
        snprintf(child_out->message, sizeof child_out->message, "%s", message);
    }
}

/* ggml_backend_sched over the side's test backends with kernels: allocated,
 * fed, computed.  False with the reason in out->message. */
static bool compute_side(struct tg_ggml_sched_side *side, const struct tg_ggml_sched_case *k, const struct tg_ggml_sched_values *v,
                         ggml_backend_t cpu, struct tg_ggml_value_result *out) {
    if (tg_ggml_sched_side_open(side, k) != TG_OK || !side->sched) {
        snprintf(out->message, sizeof out->message, "ggml's side: %s", tg_last_error());
        return false;
    }
    for (int b = 0; b < k->n_backends; b++) side->tb[b].kernels = cpu;
    if (!ggml_backend_sched_alloc_graph(side->sched, side->gg.graph)) {
        snprintf(out->message, sizeof out->message, "ggml_backend_sched_alloc_graph failed");
        return false;
    }
    const struct tg_graph *g = k->c->graph, *rg = v->ref.c->graph;
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        struct ggml_tensor *x = v->fed[u] ? tg_ggml_lookup(&side->gg, slot_tensor(g, u)) : NULL;
        /* every buffer here is host memory: written as a host caller's set would */
        if (x && !x->view_src && x->data && ggml_nbytes(x) == tg_nbytes(slot_tensor(rg, u))) memcpy(x->data, v->fed[u], ggml_nbytes(x));
        else if (v->fed[u] && getenv("TG_GGML_VERBOSE"))
            fprintf(stderr, "  slot %d '%s' not fed: %p view %d data %p\n", u, slot_tensor(g, u)->name, (void *)x,
                    x && x->view_src, x ? x->data : NULL);
    }
    if (ggml_backend_sched_graph_compute(side->sched, side->gg.graph) != GGML_STATUS_SUCCESS) {
        snprintf(out->message, sizeof out->message, "ggml_backend_sched_graph_compute failed");
        return false;
    }
    return true;
}

struct values_job {
    const struct tg_ggml_sched_case *k;
    const struct tg_ggml_sched_values *v;
    struct tg_ggml_value_result *out; /* shared with the parent */
};

static void ggml_values_child(const void *arg) {
    const struct values_job *job = arg;
    const struct tg_ggml_sched_case *k = job->k;
    const struct tg_ggml_sched_values *v = job->v;
    struct tg_ggml_value_result *out = job->out;
    child_out = out;
    ggml_set_abort_callback(child_abort);
    static struct tg_ggml_sched_side side, alone_side;
    ggml_backend_t cpu = ggml_backend_cpu_init();
    if (!cpu) return;
    ggml_backend_cpu_set_n_threads(cpu, 1);
    if (!compute_side(&side, k, v, cpu, out)) return;
    out->ran = true;
    for (int b = 0; b < k->n_backends; b++) out->foreign += side.tb[b].foreign;
    const struct tg_graph *g = k->c->graph, *rg = v->ref.c->graph;
    /* ggml on its CPU alone (every weight in host memory, one backend): a
     * result that equals it bit for bit is ggml's kernels or allocator, not
     * the schedule across backends */
    struct tg_ggml_sched_case one = *k;
    one.n_backends = 1;
    one.placement = calloc((size_t)g->n_leafs + 1, sizeof *one.placement);
    for (int j = 0; one.placement && j < g->n_leafs; j++) one.placement[j] = -1;
    struct tg_ggml_value_result unused = {0};
    const struct tg_ggml_sched_side *alone = one.placement && compute_side(&alone_side, &one, v, cpu, &unused) ? &alone_side : NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!tg_gen_node_is_result(rg, i)) continue;
        const struct ggml_tensor *x = tg_ggml_lookup(&side.gg, g->nodes[i]);
        if (!x->data) {
            if (!out->wrong++) out->first_wrong = i; /* a result ggml never gave memory */
            out->compared++;
            continue;
        }
        judge(out, i, x->type, x->ne, x->data, x->nb, rg->nodes[i], alone ? tg_ggml_lookup(&alone->gg, g->nodes[i]) : NULL,
              rope_spills_into(side.gg.graph, x));
    }
    /* the process ends here */
}

enum tg_status tg_ggml_values_in_ggml(const struct tg_ggml_sched_case *k, const struct tg_ggml_sched_values *v,
                                      struct tg_ggml_value_result *out) {
    memset(out, 0, sizeof *out);
    out->first_wrong = -1;
    out->no_reference = !v->ready;
    if (!v->ready) return TG_OK;
    struct tg_ggml_value_result *shared = tg_test_shared_new(sizeof *shared);
    if (!shared) return tg_fail(TG_ERR_ALLOC, "no shared memory for the child's result");
    memcpy(shared, out, sizeof *out);
    struct values_job job = {k, v, shared};
    struct tg_child_read child = tg_test_fork(ggml_values_child, &job, false);
    memcpy(out, shared, sizeof *out);
    tg_test_shared_free(shared, sizeof *shared);
    if (!child.started) return tg_fail(TG_ERR_ALLOC, "fork failed");
    if (tg_child_signal(&child) && !out->aborted) {
        out->aborted = true;
        out->signal = tg_child_signal(&child);
        snprintf(out->message, sizeof out->message, "ggml's child ended by signal %d", out->signal);
    }
    if (out->aborted) out->ran = false;
    return TG_OK;
}

/* ---- tgsched's side --------------------------------------------------------------------------- */

enum tg_status tg_ggml_values_in_tgsched(const uint8_t *bytes, size_t n, const struct tg_ggml_sched_values *v,
                                         enum tg_sched_fault fault, struct tg_ggml_value_result *out) {
    memset(out, 0, sizeof *out);
    out->first_wrong = -1;
    out->no_reference = !v->ready;
    if (!v->ready) return TG_OK;
    struct tg_ggml_sched_case k;
    enum tg_status st = tg_ggml_sched_case_from_bytes(bytes, n, &k);
    tg_sched *s = st == TG_OK ? tg_ggml_tgsched_open(&k, false) : NULL;
    if (!s) {
        snprintf(out->message, sizeof out->message, "tgsched's side: %s", tg_last_error());
        tg_ggml_sched_case_free(&k);
        return TG_OK;
    }
    tg_sched_set_fault(s, fault);
    struct tg_graph *g = k.c->graph;
    const struct tg_graph *rg = v->ref.c->graph;
    if (tg_sched_alloc_graph(s, g) != TG_OK) {
        snprintf(out->message, sizeof out->message, "%s", tg_last_error());
    } else {
        for (int u = 0; u < g->n_nodes + g->n_leafs && st == TG_OK; u++) {
            struct tg_tensor *t = (struct tg_tensor *)slot_tensor(g, u);
            if (!v->fed[u] || t->view_src || !t->data || tg_nbytes(t) != tg_nbytes(slot_tensor(rg, u))) continue;
            if (!t->buffer) memcpy(t->data, v->fed[u], tg_nbytes(t)); /* memory its context owns */
            else st = tg_tensor_set(t, v->fed[u], 0, tg_nbytes(t));
        }
        if (st == TG_OK && tg_sched_graph_compute(s, g) == TG_OK) {
            out->ran = true;
            for (int i = 0; i < g->n_nodes; i++) {
                if (!tg_gen_node_is_result(rg, i)) continue;
                const struct tg_tensor *t = g->nodes[i];
                const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
                /* through the backend (a sim's memory), or memory its context owns */
                void *got = t->buffer ? tg_gen_tensor_bytes(t) : NULL;
                const void *at = t->buffer ? got : t->data;
                if (at) judge(out, i, tg_ggml_type(t->type), ne, at, t->nb, rg->nodes[i], NULL, false);
                if (!at) { /* no memory to read */
                    out->compared++;
                    if (!out->wrong++) out->first_wrong = i;
                }
                free(got);
            }
        } else {
            snprintf(out->message, sizeof out->message, "compute: %s", tg_last_error());
        }
    }
    tg_sched_free(s);
    tg_ggml_sched_case_free(&k);
    return TG_OK;
}

/* Fuzz target for CUDA vs CPU: a computable decoded case is computed on the
 * CPU alone (the reference) and, decoded again from the same bytes, scheduled
 * on the first CUDA device plus the CPU from the same inputs; every output and
 * every node nobody reads must agree within its bound: the model-level bound
 * (normalized mean squared error 2e-3), or, for a result that float rounding
 * alone moves further, a multiple of how far it moves in two reference runs
 * with rounding noise (gen_rounding.c); NaN and infinities in the same places
 * unless the noise moves them too.  The
 * reference's leafs and inputs are saved before it computes (compute may reuse
 * their memory in place) and written into the scheduled graph wherever the
 * scheduler put them: the oracle's filler writes host memory only, so filling
 * the scheduled graph with it would leave GPU-resident leafs unset.  Without a
 * GPU (tg_cuda_device_count() == 0) every input returns at once, so the target
 * builds and replays anywhere. */
#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-gen.h"
#include "tg-sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* t's bytes in host memory, and a view of t over them (for element access). */
static void *host_copy(const struct tg_tensor *t, struct tg_tensor *view) {
    size_t n = tg_nbytes(t);
    void *host = malloc(n ? n : 1);
    if (!host || tg_tensor_get(t, host, 0, n) != TG_OK) abort();
    *view = *t;
    view->data = host;
    return host;
}

/* Saved bytes of every non-view leaf and input-flagged node (NULL elsewhere). */
struct saved {
    void **leafs, **inputs;
};

static void saved_free(struct saved *s, const struct tg_graph *g) {
    for (int j = 0; s->leafs && j < g->n_leafs; j++) free(s->leafs[j]);
    for (int i = 0; s->inputs && i < g->n_nodes; i++) free(s->inputs[i]);
    free(s->leafs);
    free(s->inputs);
}

static void *save(const struct tg_tensor *t) {
    struct tg_tensor view;
    return host_copy(t, &view);
}

static void put(const void *bytes, struct tg_tensor *t) {
    if (bytes && tg_tensor_set(t, bytes, 0, tg_nbytes(t)) != TG_OK) {
        fprintf(stderr, "fuzz_cuda: setting '%s': %s\n", t->name, tg_last_error());
        abort();
    }
}

/* Per node of the reference: the largest NMSE two noisy reference runs give
 * against the clean one, and whether the noise moved a NaN or an infinity. */
struct rounding_noise {
    double *nmse;
    bool *moves_nonfinite;
};

#define NOISY_RUNS 2

static bool rounding_noise_measure(struct rounding_noise *noise, const uint8_t *data, size_t size,
                                   const struct tg_gen_options *opts, struct tg_graph *rg, const struct saved *in) {
    noise->nmse = calloc((size_t)rg->n_nodes + 1, sizeof(double));
    noise->moves_nonfinite = calloc((size_t)rg->n_nodes + 1, sizeof(bool));
    if (!noise->nmse || !noise->moves_nonfinite) return false;
    for (int run = 0; run < NOISY_RUNS; run++) {
        struct tg_gen_case *nc = NULL;
        if (tg_gen_case_from_bytes(data, size, opts, &nc) != TG_OK) return false;
        struct tg_graph *ng = nc->graph;
        tg_gallocr *ga = tg_gallocr_new(tg_cpu_buffer_type());
        bool ok = ga && tg_gallocr_alloc_graph(ga, ng) == TG_OK;
        for (int j = 0; ok && j < ng->n_leafs; j++) put(in->leafs[j], ng->leafs[j]);
        for (int i = 0; ok && i < ng->n_nodes; i++) put(in->inputs[i], ng->nodes[i]);
        ok = ok && tg_gen_compute_with_rounding_noise(ng, 0x6e015eull + (uint64_t)run) == TG_OK;
        for (int i = 0; ok && i < ng->n_nodes; i++) {
            if (!tg_gen_node_is_result(rg, i)) continue;
            struct tg_tensor noisy_view, want_view;
            void *noisy = host_copy(ng->nodes[i], &noisy_view), *want = host_copy(rg->nodes[i], &want_view);
            bool moved = false;
            double e = tg_gen_nmse(&noisy_view, &want_view, &moved);
            free(noisy);
            free(want);
            if (e > noise->nmse[i] || isnan(e)) noise->nmse[i] = e;
            noise->moves_nonfinite[i] |= moved;
        }
        tg_gallocr_free(ga);
        tg_gen_case_free(nc);
        if (!ok) return false;
    }
    return true;
}

static void rounding_noise_free(struct rounding_noise *noise) {
    free(noise->nmse);
    free(noise->moves_nonfinite);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* one CUDA backend per process: creating cuBLAS per input would dominate */
    static int devices = -1;
    static tg_backend *cuda, *cpu;
    if (devices < 0) {
        devices = tg_cuda_device_count();
        if (devices == 0 && !tg_cuda_absence_is_expected()) {
            fprintf(stderr, "fuzz_cuda: CUDA is installed but unusable: %s\n", tg_cuda_unavailable_reason());
            abort();
        }
        if (devices > 0) {
            cuda = tg_backend_cuda_new(0);
            cpu = tg_backend_cpu_new();
            if (!cuda || !cpu) {
                fprintf(stderr, "fuzz_cuda: backends: %s\n", tg_last_error());
                abort();
            }
        }
    }
    if (devices == 0) return 0;
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    struct tg_gen_case *ref = NULL, *c = NULL;
    if (tg_gen_case_from_bytes(data, size, &opts, &ref) != TG_OK) return 0;
    if (tg_gen_case_from_bytes(data, size, &opts, &c) != TG_OK) {
        tg_gen_case_free(ref);
        return 0;
    }
    struct tg_graph *rg = ref->graph, *g = c->graph;
    struct saved in = {calloc((size_t)rg->n_leafs + 1, sizeof(void *)), calloc((size_t)rg->n_nodes + 1, sizeof(void *))};
    tg_gallocr *ga = tg_gallocr_new(tg_cpu_buffer_type());
    tg_backend *both[2] = {cuda, cpu};
    tg_sched *s = tg_sched_new(both, NULL, 2, (size_t)(g->n_nodes + g->n_leafs) * 2 + 16, false, true);
    bool ran = s && in.leafs && in.inputs && tg_gen_graph_cpu_computable(rg) &&
               tg_gallocr_alloc_graph(ga, rg) == TG_OK && tg_oracle_fill_inputs(rg, 1) == TG_OK;
    for (int j = 0; ran && j < rg->n_leafs; j++) {
        if (!rg->leafs[j]->view_src) in.leafs[j] = save(rg->leafs[j]);
    }
    for (int i = 0; ran && i < rg->n_nodes; i++) {
        if ((rg->nodes[i]->flags & TG_FLAG_INPUT) && !rg->nodes[i]->view_src) in.inputs[i] = save(rg->nodes[i]);
    }
    ran = ran && tg_cpu_compute_graph(rg, 1) == TG_OK;
    struct rounding_noise noise = {0};
    ran = ran && rounding_noise_measure(&noise, data, size, &opts, rg, &in);
    ran = ran && tg_sched_alloc_graph(s, g) == TG_OK;
    for (int j = 0; ran && j < g->n_leafs; j++) {
        if (!g->leafs[j]->view_src && g->leafs[j]->data) put(in.leafs[j], g->leafs[j]);
    }
    for (int i = 0; ran && i < g->n_nodes; i++) {
        if ((g->nodes[i]->flags & TG_FLAG_INPUT) && !g->nodes[i]->view_src) put(in.inputs[i], g->nodes[i]);
    }
    if (ran && tg_sched_graph_compute(s, g) != TG_OK) {
        fprintf(stderr, "fuzz_cuda: compute failed: %s\n", tg_last_error());
        abort();
    }
    for (int i = 0; ran && i < g->n_nodes; i++) {
        /* judged on the reference: the scheduled graph's sources point at the scheduler's copies */
        if (!tg_gen_node_is_result(rg, i)) continue;
        struct tg_tensor got_view, want_view;
        void *got = host_copy(g->nodes[i], &got_view), *want = host_copy(rg->nodes[i], &want_view);
        bool bad_nonfinite = false;
        double e = tg_gen_nmse(&got_view, &want_view, &bad_nonfinite);
        free(got);
        free(want);
        double bound = tg_gen_result_bound(noise.nmse[i]);
        bad_nonfinite &= !noise.moves_nonfinite[i];
        if (bad_nonfinite || e > bound) {
            fprintf(stderr,
                    "fuzz_cuda: node %d '%s' (%s) differs from the CPU (nmse %g, bound %g: rounding noise alone "
                    "gives %g%s)\n",
                    i, g->nodes[i]->name, tg_op_name(g->nodes[i]->op), e, bound, noise.nmse[i],
                    bad_nonfinite ? ", NaN/inf mismatch" : "");
            abort();
        }
    }
    rounding_noise_free(&noise);
    tg_sched_free(s); /* first: it gives the graph its sources back */
    tg_gallocr_free(ga);
    saved_free(&in, rg);
    tg_gen_case_free(c);
    tg_gen_case_free(ref);
    return 0;
}

/* Fuzz target for CUDA vs CPU: a computable decoded case is scheduled on the
 * first CUDA device plus the CPU and compared with a CPU-only run within the
 * model-level bound (normalized mean squared error 2e-3 per output; NaN and
 * infinities must match).  Without a GPU (tg_cuda_device_count() == 0) every
 * input returns at once, so the target builds and replays anywhere. */
#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-gen.h"
#include "tg-sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double nmse(const struct tg_tensor *got_view, const struct tg_tensor *want, bool *nonfinite_mismatch) {
    double num = 0, den = 0;
    for (int64_t i3 = 0; i3 < want->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < want->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < want->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < want->ne[0]; i0++) {
                    double a = tg_get_f32_nd(got_view, i0, i1, i2, i3), b = tg_get_f32_nd(want, i0, i1, i2, i3);
                    if (!isfinite(a) || !isfinite(b)) {
                        *nonfinite_mismatch |= !((isnan(a) && isnan(b)) || a == b);
                        continue;
                    }
                    num += (a - b) * (a - b);
                    den += b * b;
                }
    return den > 0 ? num / den : num;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int devices = -1;
    if (devices < 0) devices = tg_cuda_device_count();
    if (devices == 0) return 0;
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    struct tg_gen_case *ref = NULL, *c = NULL;
    if (tg_gen_case_from_bytes(data, size, &opts, &ref) != TG_OK) return 0;
    if (tg_gen_case_from_bytes(data, size, &opts, &c) != TG_OK) {
        tg_gen_case_free(ref);
        return 0;
    }
    tg_gallocr *ga = tg_gallocr_new(tg_cpu_buffer_type());
    tg_backend *cuda = tg_backend_cuda_new(0), *cpu = tg_backend_cpu_new();
    tg_backend *both[2] = {cuda, cpu};
    tg_sched *s = cuda ? tg_sched_new(both, NULL, 2, (size_t)(c->graph->n_nodes + c->graph->n_leafs) * 2 + 16, false, true) : NULL;
    bool ran = s && tg_gallocr_alloc_graph(ga, ref->graph) == TG_OK && tg_sched_alloc_graph(s, c->graph) == TG_OK &&
               tg_oracle_fill_inputs(ref->graph, 1) == TG_OK && tg_oracle_fill_inputs(c->graph, 1) == TG_OK &&
               tg_cpu_compute_graph(ref->graph, 1) == TG_OK;
    if (ran && tg_sched_graph_compute(s, c->graph) != TG_OK) {
        fprintf(stderr, "fuzz_cuda: compute failed: %s\n", tg_last_error());
        abort();
    }
    for (int i = 0; ran && i < c->graph->n_nodes; i++) {
        const struct tg_tensor *t = c->graph->nodes[i];
        if (!(t->flags & TG_FLAG_OUTPUT)) continue;
        size_t n = tg_nbytes(t);
        void *host = malloc(n ? n : 1);
        if (!host || tg_tensor_get(t, host, 0, n) != TG_OK) abort();
        struct tg_tensor view = *t;
        view.data = host;
        bool bad_nonfinite = false;
        double e = nmse(&view, ref->graph->nodes[i], &bad_nonfinite);
        free(host);
        if (bad_nonfinite || e > 2e-3) {
            fprintf(stderr, "fuzz_cuda: output '%s' differs from the CPU (nmse %g)\n", t->name, e);
            abort();
        }
    }
    tg_sched_free(s);
    tg_backend_free(cuda);
    tg_backend_free(cpu);
    tg_gallocr_free(ga);
    tg_gen_case_free(c);
    tg_gen_case_free(ref);
    return 0;
}

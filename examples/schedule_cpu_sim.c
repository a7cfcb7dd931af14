/* A library example: build a small graph (a gated MLP), put its weights on a
 * simulated device, let the scheduler split it between that device and the
 * CPU, compute, and compare with a CPU-only run.  Exit 0 when they match.
 *
 *   y = down * (silu(gate * x) * (up * x)) + x */
#include <tgsched/tg-alloc.h>
#include <tgsched/tg-cpu.h>
#include <tgsched/tg-sched.h>
#include <tgsched/tg-sim.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 64, F = 128, T = 4 };

struct mlp {
    struct tg_context *weights_ctx, *ctx;
    tg_buffer *weights;
    struct tg_tensor *gate, *up, *down, *x, *y;
    struct tg_graph *graph;
};

static float value(unsigned i) { return (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f; }

static void fill(struct tg_tensor *t, unsigned seed) {
    int64_t n = tg_nelements(t);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = value(seed + (unsigned)i) * 0.2f;
    if (tg_tensor_set(t, v, 0, (size_t)n * sizeof *v) != TG_OK) {
        fprintf(stderr, "%s\n", tg_last_error());
        exit(1);
    }
    free(v);
}

/* The weights live in a buffer of `where`, marked as weights so the scheduler
 * runs the matrix products there. */
static int mlp_build(struct mlp *m, tg_backend *where) {
    memset(m, 0, sizeof *m);
    m->weights_ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    m->gate = tg_new_tensor_2d(m->weights_ctx, TG_TYPE_F32, D, F);
    m->up = tg_new_tensor_2d(m->weights_ctx, TG_TYPE_F32, D, F);
    m->down = tg_new_tensor_2d(m->weights_ctx, TG_TYPE_F32, F, D);
    enum tg_status st;
    m->weights = tg_alloc_ctx_tensors_for_backend(m->weights_ctx, where, &st);
    if (!m->weights) {
        fprintf(stderr, "weights: %s\n", tg_last_error());
        return 1;
    }
    tg_buffer_set_usage(m->weights, TG_BUFFER_USAGE_WEIGHTS);
    fill(m->gate, 1);
    fill(m->up, 2);
    fill(m->down, 3);

    m->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    m->x = tg_new_tensor_2d(m->ctx, TG_TYPE_F32, D, T);
    tg_set_name(m->x, "x");
    tg_set_input(m->x);
    struct tg_tensor *g = tg_unary(m->ctx, tg_mul_mat(m->ctx, m->gate, m->x), TG_UNARY_SILU);
    struct tg_tensor *h = tg_mul(m->ctx, g, tg_mul_mat(m->ctx, m->up, m->x));
    m->y = tg_add(m->ctx, tg_mul_mat(m->ctx, m->down, h), m->x);
    tg_set_name(m->y, "y");
    tg_set_output(m->y);
    m->graph = tg_graph_new(64);
    return tg_graph_build_forward_expand(m->graph, m->y) == TG_OK ? 0 : 1;
}

static void mlp_free(struct mlp *m) {
    tg_graph_free(m->graph);
    tg_buffer_free(m->weights);
    tg_context_free(m->ctx);
    tg_context_free(m->weights_ctx);
}

/* Schedules, computes and returns y (malloc'ed), or NULL. */
static float *run(tg_backend **backends, int n, struct mlp *m, int *n_splits) {
    tg_sched *s = tg_sched_new(backends, NULL, n, 256, false, true);
    float *out = NULL;
    if (!s || tg_sched_alloc_graph(s, m->graph) != TG_OK) goto done;
    fill(m->x, 7); /* inputs are set after allocation binds them */
    if (tg_sched_graph_compute(s, m->graph) != TG_OK) goto done;
    *n_splits = tg_sched_get_n_splits(s);
    out = malloc(tg_nbytes(m->y));
    if (out && tg_tensor_get(m->y, out, 0, tg_nbytes(m->y)) != TG_OK) {
        free(out);
        out = NULL;
    }
done:
    if (!out) fprintf(stderr, "schedule: %s\n", tg_last_error());
    tg_sched_free(s);
    return out;
}

int main(void) {
    tg_backend *cpu = tg_backend_cpu_new();
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "gpu0";
    p.supported_ops[TG_OP_MUL_MAT] = true; /* a device that only multiplies matrices */
    p.supported_ops_all = false;
    tg_backend *gpu = tg_backend_sim_new(&p);

    struct mlp on_cpu, on_gpu;
    int rc = mlp_build(&on_cpu, cpu) | mlp_build(&on_gpu, gpu);
    tg_backend *both[2] = {gpu, cpu};
    int splits_cpu = 0, splits_gpu = 0;
    float *want = rc ? NULL : run(&cpu, 1, &on_cpu, &splits_cpu);
    float *got = rc ? NULL : run(both, 2, &on_gpu, &splits_gpu);
    if (!want || !got) {
        rc = 1;
    } else {
        bool same = memcmp(want, got, tg_nbytes(on_cpu.y)) == 0;
        printf("CPU only: %d split; gpu0 (mul_mat only) + CPU: %d splits; y[0] = %f; results %s\n", splits_cpu,
               splits_gpu, (double)got[0], same ? "identical" : "DIFFER");
        rc = same ? 0 : 1;
    }
    free(want);
    free(got);
    mlp_free(&on_cpu);
    mlp_free(&on_gpu);
    tg_backend_free(gpu);
    tg_backend_free(cpu);
    return rc;
}

/* Time one evaluation of a corpus graph (default: the tiny LLaMA prefill) on
 * CUDA + CPU vs the CPU alone, through the scheduler, with random weights.
 * Usage: cuda_llama_step [graph.tg] [repetitions].  Graphs with quantized
 * weights cannot be computed (no quantized kernels) and are reported as such. */
#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-io.h"
#include "tg-sched.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fill_random(struct tg_tensor *t, unsigned *seed, int64_t index_range) {
    const size_t bytes = tg_nbytes(t);
    uint8_t *buf = calloc(1, bytes ? bytes : 1);
    const int64_t n = tg_nelements(t);
    for (int64_t i = 0; i < n; i++) {
        const float x = (float)rand_r(seed) / (float)RAND_MAX * 0.2f - 0.1f;
        if (t->type == TG_TYPE_F32) ((float *)buf)[i] = x;
        else if (t->type == TG_TYPE_F16) ((uint16_t *)buf)[i] = tg_fp32_to_fp16(x);
        else if (t->type == TG_TYPE_I32) ((int32_t *)buf)[i] = (int32_t)(i % (index_range > 0 ? index_range : 1));
    }
    tg_tensor_set(t, buf, 0, bytes);
    free(buf);
}

static int64_t index_range(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *n = g->nodes[i];
        if (n->op == TG_OP_GET_ROWS && n->src[1] == t) return n->src[0]->ne[1];
        if (n->op == TG_OP_SET_ROWS && n->src[1] == t) return n->src[2]->ne[1];
    }
    return 128;
}

/* Mean milliseconds per evaluation, or a negative value when it cannot run. */
static double time_graph(const char *path, tg_backend **backends, int n_backends, tg_backend *weights_backend, int reps) {
    struct tg_file *f = tg_file_read(path);
    if (!f) {
        fprintf(stderr, "%s\n", tg_last_error());
        return -1.0;
    }
    double ms = -1.0;
    /* every pre-allocated tensor (weights, KV cache) lives on weights_backend */
    tg_backend *homes[TG_IO_MAX_BACKENDS];
    for (int i = 0; i < TG_IO_MAX_BACKENDS; i++) homes[i] = weights_backend;
    if (tg_file_bind_external(f, homes, f->n_backends, false) != TG_OK) {
        fprintf(stderr, "bind: %s\n", tg_last_error());
        tg_file_free(f);
        return -1.0;
    }
    unsigned seed = 1;
    for (int i = 0; i < f->n_tensors; i++) {
        if (f->tensors[i].placement != TG_PLACE_NONE) fill_random(f->tensors[i].tensor, &seed, 0);
    }
    tg_sched *sched = tg_sched_new(backends, NULL, n_backends, 8192, false, true);
    if (sched && tg_sched_alloc_graph(sched, f->graph) == TG_OK) {
        for (int r = -1; r < reps; r++) {
            if (r == 0) ms = now_ms();
            for (int i = 0; i < f->n_tensors; i++) {
                struct tg_tensor *t = f->tensors[i].tensor;
                if (f->tensors[i].is_leaf && (t->flags & TG_FLAG_INPUT)) fill_random(t, &seed, index_range(f->graph, t));
            }
            if (tg_sched_graph_compute(sched, f->graph) != TG_OK) {
                fprintf(stderr, "compute: %s\n", tg_last_error());
                ms = -1.0;
                break;
            }
        }
        if (ms >= 0) ms = (now_ms() - ms) / reps;
    } else {
        fprintf(stderr, "schedule: %s\n", tg_last_error());
    }
    tg_sched_free(sched);
    tg_file_free(f);
    return ms;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "corpus/graphs/llama-tiny-prefill32.tg";
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    tg_backend *cpu = tg_backend_cpu_new();
    tg_backend *cpu_only[1] = {cpu};
    printf("%s\n", path);
    printf("  CPU only      : %8.3f ms\n", time_graph(path, cpu_only, 1, cpu, reps));
    if (tg_cuda_device_count() > 0) {
        tg_backend *cuda = tg_backend_cuda_new(0);
        tg_backend *both[2] = {cuda, cpu};
        printf("  CUDA + CPU    : %8.3f ms (weights on the GPU)\n", time_graph(path, both, 2, cuda, reps));
        tg_backend_free(cuda);
    } else {
        printf("  CUDA          : no device\n");
    }
    tg_backend_free(cpu);
    return 0;
}

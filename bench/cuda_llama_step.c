/* Time one step of the LLaMA corpus graphs on CUDA + CPU (every weight and
 * the KV cache on the GPU) vs the CPU alone (every core), through the
 * scheduler, with random weights and the same inputs on both sides.
 *
 *   cuda_llama_step [--reps N] [--threads T] [graph.tg ...]
 *
 * Default graphs: the tiny LLaMA (corpus/graphs/llama-tiny-prefill32.tg, the
 * corpus's only tiny graph: one step of 32 tokens) and the small one
 * (corpus/graphs/tinyllama-1.1b-decode.tg: one decode token at n_past 1023).
 * Neither backend has quantized kernels, so quantized weights are replaced by
 * f16 weights of the same shape (said in the output).  Each row gives the mean
 * milliseconds of one step (setting its inputs and computing) after a warm-up
 * step, and the NMSE of the GPU's
 * final result against the CPU's (a sanity check, not a test).  Without a GPU
 * it prints so and times the CPU for graphs of at most 256 MB of weights only,
 * then exits 0. */
#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-io.h"
#include "tg-sched.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CPU_ONLY_MAX_WEIGHT_BYTES ((size_t)256 << 20)
#define CPU_SECONDS_BUDGET 10.0

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Quantized weights become f16 of the same shape (no quantized kernels); a
 * weight some view reads keeps its type and the graph is reported as not
 * computable.  Returns how many were replaced, -1 when one could not be. */
static int replace_quantized_weights(struct tg_file *f) {
    int replaced = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (f->tensors[i].placement == TG_PLACE_NONE || !tg_type_is_quantized(t->type)) continue;
        for (int j = 0; j < f->n_tensors; j++) {
            if (f->tensors[j].tensor->view_src == t) return -1;
        }
        t->type = TG_TYPE_F16;
        t->nb[0] = 2;
        for (int d = 1; d < 4; d++) t->nb[d] = t->nb[d - 1] * (size_t)t->ne[d - 1];
        replaced++;
    }
    return replaced;
}

static size_t weight_bytes(const struct tg_file *f) {
    size_t total = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        if (f->tensors[i].placement == TG_PLACE_WEIGHTS) total += tg_nbytes(f->tensors[i].tensor);
    }
    return total;
}

/* Random f16/f32 contents from a tiled block of random values (a 1.1B-weight
 * model would take minutes element by element). */
/* Host-side setup that must succeed: stop with the library's message. */
static void must_set(struct tg_tensor *t, const void *bytes, size_t n) {
    if (tg_tensor_set(t, bytes, 0, n) != TG_OK) {
        fprintf(stderr, "cuda_llama_step: %s\n", tg_last_error());
        exit(1);
    }
}

static void fill_weights(struct tg_file *f) {
    enum { BLOCK = 1 << 16 };
    static float block[BLOCK];
    rng_state = 12345;
    for (int k = 0; k < BLOCK; k++) block[k] = (float)((double)(rng_next() >> 11) / 9007199254740992.0 * 0.2 - 0.1);
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (f->tensors[i].placement == TG_PLACE_NONE) continue;
        const int64_t n = tg_nelements(t);
        const size_t es = tg_type_size(t->type);
        uint8_t *bytes = malloc((size_t)(n ? n : 1) * es);
        if (!bytes) continue;
        const int64_t shift = (int64_t)(rng_next() % BLOCK);
        for (int64_t k = 0; k < n; k++) {
            const float x = t->ne[1] == 1 ? 1.0f + block[(k + shift) % BLOCK] : block[(k + shift) % BLOCK];
            if (t->type == TG_TYPE_F32) {
                memcpy(bytes + k * 4, &x, 4);
            } else if (t->type == TG_TYPE_F16) {
                const uint16_t h = tg_fp32_to_fp16(x);
                memcpy(bytes + k * 2, &h, 2);
            }
        }
        must_set(t, bytes, (size_t)n * es);
        free(bytes);
    }
}

/* Index inputs stay below the rows of the get_rows/set_rows that read them;
 * the mask lets every position be seen.  Ranges are read before scheduling
 * (the scheduler points consumers at its copies). */
static int64_t *plan_index_ranges(const struct tg_file *f) {
    int64_t *range = calloc((size_t)f->n_tensors + 1, sizeof *range);
    for (int i = 0; range && i < f->n_tensors; i++) {
        const struct tg_tensor *t = f->tensors[i].tensor;
        for (int k = 0; k < f->graph->n_nodes; k++) {
            const struct tg_tensor *n = f->graph->nodes[k];
            if (n->op == TG_OP_GET_ROWS && n->src[1] == t) range[i] = n->src[0]->ne[1];
            if (n->op == TG_OP_SET_ROWS && n->src[1] == t) range[i] = n->src[2]->ne[1];
        }
    }
    return range;
}

static void fill_inputs(struct tg_file *f, const int64_t *range) {
    rng_state = 777;
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (!f->tensors[i].is_leaf || !(t->flags & TG_FLAG_INPUT)) continue;
        const int64_t n = tg_nelements(t);
        uint8_t *bytes = calloc((size_t)(n ? n : 1), 8);
        if (!bytes) continue;
        for (int64_t k = 0; k < n; k++) {
            if (t->type == TG_TYPE_I32) {
                const int32_t v = (int32_t)(range[i] > 0 ? k % range[i] : k % 128);
                memcpy(bytes + k * 4, &v, 4);
            } else if (t->type == TG_TYPE_F32) {
                const float x = strcmp(t->name, "kq_mask") == 0 ? 0.0f : (float)(rng_next() % 1000) / 1000.0f;
                memcpy(bytes + k * 4, &x, 4);
            } else if (t->type == TG_TYPE_F16) {
                const uint16_t h = tg_fp32_to_fp16(0.0f);
                memcpy(bytes + k * 2, &h, 2);
            }
        }
        must_set(t, bytes, tg_nbytes(t));
        free(bytes);
    }
}

struct timing {
    double ms;      /* mean per step; < 0 when it could not run */
    int reps;
    int splits;
    float *result;  /* the last node's values (f32), for the CPU/GPU sanity check */
    int64_t n_result;
};

/* Every pre-allocated tensor on `home`, compute with `backends`. */
static struct timing time_graph(const char *path, tg_backend **backends, int n_backends, tg_backend *home, int reps,
                                double budget_s) {
    struct timing tm = {-1.0, 0, 0, NULL, 0};
    struct tg_file *f = tg_file_read(path);
    if (!f) {
        fprintf(stderr, "%s\n", tg_last_error());
        return tm;
    }
    if (replace_quantized_weights(f) < 0) {
        fprintf(stderr, "%s: a quantized weight is read through a view: not computable here\n", path);
        tg_file_free(f);
        return tm;
    }
    tg_backend *homes[TG_IO_MAX_BACKENDS];
    for (int i = 0; i < TG_IO_MAX_BACKENDS; i++) homes[i] = home;
    if (tg_file_bind_external(f, homes, f->n_backends, false) != TG_OK) {
        fprintf(stderr, "bind: %s\n", tg_last_error());
        tg_file_free(f);
        return tm;
    }
    fill_weights(f);
    int64_t *range = plan_index_ranges(f);
    tg_sched *sched = tg_sched_new(backends, NULL, n_backends, 16384, false, true);
    struct tg_tensor *result = tg_graph_node(f->graph, -1);
    if (sched && range && tg_sched_alloc_graph(sched, f->graph) == TG_OK) {
        tm.splits = tg_sched_get_n_splits(sched);
        /* the warm-up step also sizes the number of timed steps to the budget;
         * every step sets its inputs, as llama.cpp does (the plan reuses their
         * memory once they are read) */
        double t0 = now_ms();
        fill_inputs(f, range);
        enum tg_status st = tg_sched_graph_compute(sched, f->graph);
        const double warm = now_ms() - t0;
        if (budget_s > 0 && warm > 0) {
            const int fit = (int)(budget_s * 1e3 / warm);
            if (fit < reps) reps = fit < 1 ? 1 : fit;
        }
        t0 = now_ms();
        for (int r = 0; r < reps && st == TG_OK; r++) {
            fill_inputs(f, range);
            st = tg_sched_graph_compute(sched, f->graph);
        }
        if (st == TG_OK) {
            tm.ms = (now_ms() - t0) / reps;
            tm.reps = reps;
            tm.n_result = tg_nelements(result);
            tm.result = malloc((size_t)tm.n_result * sizeof *tm.result);
            if (result->type != TG_TYPE_F32 || !tm.result ||
                tg_tensor_get(result, tm.result, 0, (size_t)tm.n_result * sizeof *tm.result) != TG_OK) {
                free(tm.result);
                tm.result = NULL;
            }
        } else {
            fprintf(stderr, "compute: %s\n", tg_last_error());
        }
    } else {
        fprintf(stderr, "schedule: %s\n", tg_last_error());
    }
    tg_sched_free(sched);
    free(range);
    tg_file_free(f);
    return tm;
}

static double nmse(const float *want, const float *got, int64_t n) {
    double err = 0.0, ref = 0.0;
    for (int64_t i = 0; i < n; i++) {
        err += ((double)want[i] - got[i]) * ((double)want[i] - got[i]);
        ref += (double)want[i] * want[i];
    }
    return ref > 0.0 ? err / ref : err;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int main(int argc, char **argv) {
    int reps = 20;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    const char *paths[16];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = strtol(argv[++i], NULL, 10);
        } else if (argv[i][0] == '-' || n_paths == 16) {
            fprintf(stderr, "usage: %s [--reps N] [--threads T] [graph.tg ...]\n", argv[0]);
            return 2;
        } else {
            paths[n_paths++] = argv[i];
        }
    }
    if (n_paths == 0) {
        paths[n_paths++] = "corpus/graphs/llama-tiny-prefill32.tg";
        paths[n_paths++] = "corpus/graphs/tinyllama-1.1b-decode.tg";
    }
    if (reps < 1) reps = 1;
    if (threads < 1) threads = 1;
    const bool have_gpu = tg_cuda_device_count() > 0;
    if (!have_gpu && !tg_cuda_absence_is_expected()) {
        fprintf(stderr, "cuda_llama_step: CUDA is installed but unusable: %s\n", tg_cuda_unavailable_reason());
        return 1;
    }
    tg_backend *cpu = tg_backend_cpu_new();
    tg_backend_cpu_set_n_threads(cpu, (int)threads);
    tg_backend *cuda = have_gpu ? tg_backend_cuda_new(0) : NULL;
    if (have_gpu && !cuda) fprintf(stderr, "CUDA backend: %s\n", tg_last_error());
    printf("one step per graph: mean ms after a warm-up step (CPU: %ld threads; CUDA + CPU: weights and KV cache on "
           "the GPU)\n",
           threads);
    printf("%-34s %10s %12s %12s %8s %12s\n", "graph", "weights", "CPU ms", "CUDA ms", "speedup", "NMSE gpu/cpu");
    int failed = 0;
    for (int p = 0; p < n_paths; p++) {
        struct tg_file *f = tg_file_read(paths[p]);
        if (!f) {
            printf("%-34s %s\n", base_name(paths[p]), tg_last_error());
            failed++;
            continue;
        }
        const int replaced = replace_quantized_weights(f);
        const size_t wbytes = weight_bytes(f);
        tg_file_free(f);
        struct timing c = {-1.0, 0, 0, NULL, 0}, g = {-1.0, 0, 0, NULL, 0};
        const bool time_cpu = have_gpu || wbytes <= CPU_ONLY_MAX_WEIGHT_BYTES;
        if (time_cpu) {
            tg_backend *cpu_only[1] = {cpu};
            c = time_graph(paths[p], cpu_only, 1, cpu, reps, CPU_SECONDS_BUDGET);
            failed += c.ms < 0;
        }
        if (cuda) {
            tg_backend *both[2] = {cuda, cpu};
            g = time_graph(paths[p], both, 2, cuda, reps, 0.0);
            failed += g.ms < 0;
        }
        char cpu_ms[32], gpu_ms[32], speedup[16] = "-", check[16] = "-";
        if (c.ms >= 0) snprintf(cpu_ms, sizeof cpu_ms, "%.3f (%d)", c.ms, c.reps);
        else snprintf(cpu_ms, sizeof cpu_ms, "%s", time_cpu ? "failed" : "skipped");
        if (g.ms >= 0) snprintf(gpu_ms, sizeof gpu_ms, "%.3f (%d)", g.ms, g.reps);
        else snprintf(gpu_ms, sizeof gpu_ms, "%s", cuda ? "failed" : "no GPU");
        if (c.ms > 0 && g.ms > 0) snprintf(speedup, sizeof speedup, "%.1fx", c.ms / g.ms);
        if (c.result && g.result && c.n_result == g.n_result) {
            snprintf(check, sizeof check, "%.2g", nmse(c.result, g.result, c.n_result));
        }
        printf("%-34s %8.1fMB %12s %12s %8s %12s%s\n", base_name(paths[p]), (double)wbytes / 1048576.0, cpu_ms, gpu_ms,
               speedup, check, replaced > 0 ? "  (quantized weights replaced by f16)" : "");
        free(c.result);
        free(g.result);
    }
    if (!have_gpu) {
        printf("no CUDA device: GPU timings skipped (CPU timed only for graphs up to %zu MB of weights)\n",
               CPU_ONLY_MAX_WEIGHT_BYTES >> 20);
    }
    tg_backend_free(cuda);
    tg_backend_free(cpu);
    return failed ? 1 : 0;
}

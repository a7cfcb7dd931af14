/* The CPU backend's dot products per weight type: a 4096 x 4096 matrix times
 * one activation row (a decode step's mul_mat), on one thread, the path this
 * CPU takes (AVX2 where there is one) against the portable one; GMAC/s,
 * weight GB/s, and the fast/portable ratio.  The two paths give the same
 * bits (checked here too).  usage: bench_dot [--reps N] */
#include "cpu/cpu-quants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Median seconds of reps passes over the matrix; *out the last pass's sum. */
static double time_pass(cpu_dot_fn dot, const uint8_t *w, size_t row_bytes, const void *act, int K, int M, int reps,
                        float *out) {
    double best[64];
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        float s = 0.0f;
        for (int i = 0; i < M; i++) s += dot(K, w + (size_t)i * row_bytes, act);
        best[r] = now() - t0;
        *out = s;
    }
    for (int i = 1; i < reps; i++) { /* insertion sort, reps is small */
        const double v = best[i];
        int j = i;
        for (; j > 0 && best[j - 1] > v; j--) best[j] = best[j - 1];
        best[j] = v;
    }
    return best[reps / 2];
}

int main(int argc, char **argv) {
    int reps = 5;
    if (argc == 3 && strcmp(argv[1], "--reps") == 0) reps = atoi(argv[2]);
    if (reps < 1 || reps > 64) reps = 5;
    const int K = 4096, M = 4096;
    float *x = malloc(sizeof(float) * (size_t)K * M), *y = malloc(sizeof(float) * K);
    uint64_t state = 26;
    for (size_t i = 0; i < (size_t)K * M; i++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(state >> 40) / (float)(1 << 24) - 0.5f;
    }
    for (int i = 0; i < K; i++) y[i] = x[i * 7 % K];
    printf("%-6s %12s %12s %10s %10s %8s %s\n", "type", "GMAC/s", "portable", "GB/s", "ratio", "", "same bits");
    for (int t = 0; t < TG_TYPE_COUNT; t++) {
        const enum tg_type type = (enum tg_type)t;
        const enum cpu_act act = cpu_act_of(type);
        if (act == CPU_ACT_NONE) continue;
        const size_t row_bytes = (size_t)(K / tg_blck_size(type)) * tg_type_size(type);
        uint8_t *w = malloc(row_bytes * M);
        void *a = malloc(cpu_act_row_size(act, K));
        for (int r = 0; r < M; r++) cpu_from_f32(type, x + (size_t)r * K, w + (size_t)r * row_bytes, K);
        cpu_act_from_f32(act, y, a, K);
        float fast_sum = 0.0f, slow_sum = 0.0f;
        const double fast = time_pass(cpu_dot_for(type), w, row_bytes, a, K, M, reps, &fast_sum);
        const double slow = time_pass(cpu_dot_generic(type), w, row_bytes, a, K, M, reps, &slow_sum);
        const double macs = (double)K * M;
        printf("%-6s %12.2f %12.2f %10.2f %10.2f %8s %s\n", tg_type_name(type), macs / fast * 1e-9, macs / slow * 1e-9,
               (double)(row_bytes * M) / fast * 1e-9, slow / fast, "",
               memcmp(&fast_sum, &slow_sum, sizeof fast_sum) == 0 ? "yes" : "NO");
        free(w);
        free(a);
    }
    free(x);
    free(y);
    return 0;
}

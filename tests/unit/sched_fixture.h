/* Shared helpers of the scheduler tests: backends, weights in a buffer of a
 * chosen backend and usage, deterministic inputs, reading results. */
#ifndef SCHED_FIXTURE_H
#define SCHED_FIXTURE_H

#include "tg-cpu.h"
#include "tg-sched.h"
#include "tg-sim.h"
#include "tg_test.h"

static inline tg_backend *fx_sim(const char *name, bool all_ops, const enum tg_op *ops, int n_ops) {
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = name;
    p.supported_ops_all = all_ops;
    for (int i = 0; i < n_ops; i++) p.supported_ops[ops[i]] = true;
    return tg_backend_sim_new(&p);
}

/* Allocates every unbound tensor of ctx in backend's buffer type, with usage. */
static inline tg_buffer *fx_alloc(struct tg_context *ctx, tg_backend *backend, enum tg_buffer_usage usage) {
    enum tg_status st;
    tg_buffer *buf = tg_alloc_ctx_tensors_for_backend(ctx, backend, &st);
    if (buf) tg_buffer_set_usage(buf, usage);
    return buf;
}

/* Deterministic values in [-1, 1) (f32 tensors). */
static inline void fx_fill(struct tg_tensor *t, unsigned seed) {
    int64_t n = tg_nelements(t);
    float *v = malloc((size_t)n * sizeof *v);
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = (float)(x % 2000) / 1000.0f - 1.0f;
    }
    CHECK_OK(tg_tensor_set(t, v, 0, (size_t)n * sizeof *v));
    free(v);
}

static inline float *fx_read(const struct tg_tensor *t) {
    size_t n = tg_nbytes(t);
    float *v = malloc(n);
    if (tg_tensor_get(t, v, 0, n) != TG_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static inline bool fx_same_bits(const float *a, const float *b, int64_t n) {
    return a && b && memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

#endif

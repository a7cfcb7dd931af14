/* Helpers shared by the CPU kernel files: typed element access through byte
 * strides (every kernel indexes with nb[], never assumes contiguity) and row
 * partitioning between threads. */
#ifndef TG_CPU_KERNELS_H
#define TG_CPU_KERNELS_H

#include "cpu-quants.h"
#include "tg-cpu.h"

#include <math.h>
#include <string.h>

/* Per-element helpers: always inlined, also in instrumented builds (fuzzing,
 * sanitizers), where the inliner otherwise keeps them as calls per element. */
#define CPU_ELEMENT_HELPER static inline __attribute__((always_inline))

CPU_ELEMENT_HELPER void *cpu_elem(const struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (uint8_t *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

/* One element of a non-quantized type (quantized types go through whole
 * blocks: cpu-quants.h). */
CPU_ELEMENT_HELPER float cpu_load(const void *p, enum tg_type type) {
    switch (type) {
    case TG_TYPE_F32: { float f; memcpy(&f, p, sizeof f); return f; }
    case TG_TYPE_F16: { uint16_t h; memcpy(&h, p, sizeof h); return cpu_half_to_float(h); }
    case TG_TYPE_BF16: { uint16_t h; memcpy(&h, p, sizeof h); return tg_bf16_to_fp32(h); }
    case TG_TYPE_I32: { int32_t i; memcpy(&i, p, sizeof i); return (float)i; }
    case TG_TYPE_I64: { int64_t i; memcpy(&i, p, sizeof i); return (float)i; }
    case TG_TYPE_I8: { int8_t i; memcpy(&i, p, sizeof i); return (float)i; }
    default: return NAN;
    }
}

CPU_ELEMENT_HELPER void cpu_store(void *p, enum tg_type type, float v) {
    switch (type) {
    case TG_TYPE_F32: memcpy(p, &v, sizeof v); break;
    case TG_TYPE_F16: { uint16_t h = tg_fp32_to_fp16(v); memcpy(p, &h, sizeof h); break; }
    case TG_TYPE_BF16: { uint16_t h = tg_fp32_to_bf16(v); memcpy(p, &h, sizeof h); break; }
    case TG_TYPE_I32: { int32_t i = cpu_f32_to_i32(v); memcpy(p, &i, sizeof i); break; }
    case TG_TYPE_I64: { int64_t i = cpu_f32_to_i64(v); memcpy(p, &i, sizeof i); break; }
    case TG_TYPE_I8: { int8_t i = cpu_f32_to_i8(v); memcpy(p, &i, sizeof i); break; }
    default: break;
    }
}

CPU_ELEMENT_HELPER int64_t cpu_index(const struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
    const void *p = cpu_elem(t, i0, i1, i2, 0);
    if (t->type == TG_TYPE_I64) { int64_t v; memcpy(&v, p, sizeof v); return v; }
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* expf of a softmax term (d <= 0): below -104 expf is 0 in float, reached
 * through libm's slow underflow path; the 0 is given directly. */
static inline float cpu_exp_term(float d) { return d < -104.0f ? 0.0f : expf(d); }

/* Rows [*r0, *r1) of n for thread ith of nth. */
static inline void cpu_rows(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t per = (n + nth - 1) / nth;
    *r0 = per * ith < n ? per * ith : n;
    *r1 = *r0 + per < n ? *r0 + per : n;
}

static inline void cpu_unravel(int64_t r, const struct tg_tensor *t, int64_t *i1, int64_t *i2, int64_t *i3) {
    *i3 = r / (t->ne[1] * t->ne[2]);
    *i2 = (r - *i3 * t->ne[1] * t->ne[2]) / t->ne[1];
    *i1 = r - *i3 * t->ne[1] * t->ne[2] - *i2 * t->ne[1];
}

static inline bool cpu_is_float(enum tg_type t) {
    return t == TG_TYPE_F32 || t == TG_TYPE_F16 || t == TG_TYPE_BF16;
}

/* Scratch memory a node needs: one block shared by the node's threads and
 * one per thread (bytes), allocated once per graph compute. */
struct cpu_work {
    size_t shared, per_thread;
};

/* What a kernel gets besides its node: its share of the work, its scratch,
 * and a barrier across the node's threads.  sync is NULL when the thread
 * computes alone (tg_cpu_compute_node): a kernel then does the shared
 * preparation itself, into its own `shared` block. */
struct cpu_exec {
    int ith, nth;
    void *shared;
    void *own;
    void (*sync)(void *arg);
    void *sync_arg;
};

/* Every thread of the node waits here until all arrived (no-op alone). */
static inline void cpu_sync(const struct cpu_exec *x) {
    if (x->sync) x->sync(x->sync_arg);
}

/* Kernel families (cpu_ops_*.c): compute, exact support check, scratch. */
enum tg_status cpu_op_elementwise(struct tg_tensor *dst, const struct cpu_exec *x);
bool cpu_supports_elementwise(const struct tg_tensor *dst);
enum tg_status cpu_op_rows(struct tg_tensor *dst, const struct cpu_exec *x);
bool cpu_supports_rows(const struct tg_tensor *dst);
struct cpu_work cpu_work_rows(const struct tg_tensor *dst);
void cpu_rope_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3);
bool cpu_supports_rope(const struct tg_tensor *dst);
enum tg_status cpu_op_copy(struct tg_tensor *dst, const struct cpu_exec *x);
bool cpu_supports_copy(const struct tg_tensor *dst);
struct cpu_work cpu_work_copy(const struct tg_tensor *dst);
enum tg_status cpu_op_matrix(struct tg_tensor *dst, const struct cpu_exec *x);
bool cpu_supports_matrix(const struct tg_tensor *dst);
struct cpu_work cpu_work_matrix(const struct tg_tensor *dst);
enum tg_status cpu_op_conv(struct tg_tensor *dst, const struct cpu_exec *x);
bool cpu_supports_conv(const struct tg_tensor *dst);

#endif

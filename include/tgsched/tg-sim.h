/* tgsched simulated discrete device (design.md section 6).
 *
 * Device memory is reserved PROT_NONE and opened only inside the device's own
 * copy and compute calls, so a host dereference faults.  Work is queued to a
 * worker thread; events order it.  Kernels are the CPU's, so results match the
 * CPU bit for bit. */
#ifndef TG_SIM_H
#define TG_SIM_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tg_sim_params {
    const char *name;       /* "sim0" when NULL */
    size_t alignment;       /* power of two; 0: 256 */
    size_t alloc_pad;       /* extra bytes per tensor in get_alloc_size (0: none) */
    size_t max_buffer_size; /* 0: unlimited */
    /* Supported ops; all computable ops when supported_ops_all is true. */
    bool supported_ops_all;
    bool supported_ops[TG_OP_COUNT];
    /* offload_op: claim ops with weights in host memory when the batch
     * (ne[1] of the op) is at least this; 0 never offloads. */
    int64_t offload_min_batch;
    bool share_host_buffer_type; /* a BLAS-like backend: uses the CPU buffer type */
    bool synchronous;            /* no worker thread (debugging) */
    bool plan_only;              /* supports_op ignores kernel availability; compute refuses (see tg-cpu.h) */
};

void tg_sim_params_default(struct tg_sim_params *p); /* all ops, alignment 256 */
tg_backend *tg_backend_sim_new(const struct tg_sim_params *params);
bool tg_backend_is_sim(tg_backend *backend);
tg_buffer_type *tg_sim_buffer_type(tg_backend *backend);

#ifdef __cplusplus
}
#endif
#endif

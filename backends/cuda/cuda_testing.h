/* Hooks for the CUDA backend's own tests (not part of the public API): they
 * reach failure paths a healthy device never takes. */
#ifndef TG_CUDA_TESTING_H
#define TG_CUDA_TESTING_H

#include "tg-backend.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Records a failure of a status-less call on the device, as if a CUDA call
 * had returned cuda_error (a cudaError_t value). */
void tg_cuda_testing_note_failure(int device, int cuda_error, const char *what);
/* Scratch memory through cudaMallocAsync (true, where supported) or the
 * cudaMalloc fallback of devices without memory pools (false). */
void tg_cuda_testing_use_memory_pools(tg_backend *backend, bool use);
/* Flash attention's scratch per launch (0: the default), so that a small
 * graph takes the path of a long prefill: its rows in several launches. */
void tg_cuda_testing_set_attn_scratch_limit(tg_backend *backend, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif

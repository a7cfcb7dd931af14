/* tgsched CUDA backend: device and pinned-host buffer types, a stream per
 * backend, cudaEvents, kernels for every op the CPU computes, cuBLAS mul_mat.
 * Available when built with TG_CUDA; otherwise tg_cuda_device_count() is 0. */
#ifndef TG_CUDA_H
#define TG_CUDA_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int tg_cuda_device_count(void); /* 0 without CUDA or without a GPU */
/* Why tg_cuda_device_count() is 0 (NULL when it is not): no CUDA build, no
 * driver, no device, or a fault such as a driver older than the runtime. */
const char *tg_cuda_unavailable_reason(void);
/* True when nothing is there to use (no CUDA build, no driver installed, no
 * device): a GPU test may skip.  False when a driver or device is there but
 * unusable: that is a fault to report, never a skip. */
bool tg_cuda_absence_is_expected(void);
tg_backend *tg_backend_cuda_new(int device);
bool tg_backend_is_cuda(tg_backend *backend);
tg_buffer_type *tg_cuda_buffer_type(int device);
tg_buffer_type *tg_cuda_host_buffer_type(void);
/* offload_op claims ops with host weights when batch >= this (default 32). */
void tg_backend_cuda_set_offload_min_batch(tg_backend *backend, int64_t min_batch);

#ifdef __cplusplus
}
#endif
#endif

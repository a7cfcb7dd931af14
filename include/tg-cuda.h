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

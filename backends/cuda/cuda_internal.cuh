/* Shared between the CUDA backend's translation units (not public): the
 * per-backend state, a by-value description of a tensor's memory that kernels
 * index with byte strides, and the op launchers. */
#ifndef TG_CUDA_INTERNAL_CUH
#define TG_CUDA_INTERNAL_CUH

#include "tg-cuda.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#define TG_CUDA_ALIGNMENT 256
#define TG_CUDA_DEFAULT_MIN_BATCH 32
/* flash attention's score rows per launch: 256 MiB (a 32K-token prefill of 32 heads
 * against 32K keys would need 128 GiB in one launch) */
#define TG_CUDA_ATTN_SCRATCH_LIMIT ((size_t)256 << 20)
#define TG_CUDA_MAX_DEVICES 16

struct tg_cuda_backend_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    int64_t offload_min_batch;
    bool memory_pools; /* stream-ordered allocation (cudaMallocAsync) works on this device */
    size_t attn_scratch_limit; /* flash attention's score rows, bytes per launch (one row at least) */
    char name[32];
};

/* Calls whose callers get no status (a buffer's set/get/memset, a
 * synchronize, an event) keep their first failure per device here, with
 * CUDA's error string; tg_last_error() has it at once, and the device's
 * backend returns it from its next graph compute, as CUDA's own sticky errors
 * surface at the next call.  Returns whether err was a failure. */
bool tg_cuda_note_failure(int device, cudaError_t err, const char *what, const char *tensor);
/* TG_OK, or the failure noted since the last call (TG_ERR_DEVICE), cleared. */
enum tg_status tg_cuda_take_failure(int device);

/* Scratch memory on the stream: stream-ordered where the device has memory
 * pools, else cudaMalloc (and a synchronize before cudaFree).  Failures are
 * returned with the tensor named and leave no stale error for the next launch. */
enum tg_status tg_cuda_scratch_alloc(tg_cuda_backend_ctx *ctx, void **ptr, size_t bytes, const struct tg_tensor *node,
                                     const char *what);
void tg_cuda_scratch_free(tg_cuda_backend_ctx *ctx, void *ptr);

/* A tensor as kernels see it: address, type, shape and byte strides.  Passed by
 * value so every kernel indexes with the real strides (never assumes contiguity). */
struct tg_cuda_view {
    char *data;
    int type;
    int64_t ne[4];
    int64_t nb[4];
};

static inline tg_cuda_view tg_cuda_view_of(const struct tg_tensor *t) {
    tg_cuda_view v;
    v.data = (char *)t->data;
    v.type = (int)t->type;
    for (int i = 0; i < 4; i++) {
        v.ne[i] = t->ne[i];
        v.nb[i] = (int64_t)t->nb[i];
    }
    return v;
}

/* Element access by type; types outside f32/f16/bf16/i32/i64 never reach a
 * kernel because supports_op refuses them. */
static __device__ __forceinline__ float tg_cuda_load(const char *p, int type) {
    switch (type) {
    case TG_TYPE_F32: return *(const float *)p;
    case TG_TYPE_F16: return __half2float(*(const __half *)p);
    case TG_TYPE_BF16: return __bfloat162float(*(const __nv_bfloat16 *)p);
    case TG_TYPE_I32: return (float)*(const int32_t *)p;
    case TG_TYPE_I64: return (float)*(const int64_t *)p;
    default: return 0.0f;
    }
}

static __device__ __forceinline__ void tg_cuda_store(char *p, int type, float v) {
    switch (type) {
    case TG_TYPE_F32: *(float *)p = v; break;
    /* NaN keeps its sign and payload, made quiet, as the CPU converts it (impl/types.c);
     * CUDA's conversions return one canonical NaN */
    case TG_TYPE_F16:
        if (isnan(v)) {
            const uint32_t x = __float_as_uint(v);
            *(uint16_t *)p = (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x & 0x7fffffu) >> 13));
        } else {
            *(__half *)p = __float2half_rn(v);
        }
        break;
    case TG_TYPE_BF16:
        if (isnan(v)) *(uint16_t *)p = (uint16_t)((__float_as_uint(v) >> 16) | 0x40u);
        else *(__nv_bfloat16 *)p = __float2bfloat16_rn(v);
        break;
    /* out of range and NaN: the lowest value, as the CPU defines it (cpu-quants.h), not CUDA's saturation */
    case TG_TYPE_I32: *(int32_t *)p = v >= -2147483648.0f && v < 2147483648.0f ? (int32_t)v : INT32_MIN; break;
    case TG_TYPE_I64:
        *(int64_t *)p = v >= -9223372036854775808.0f && v < 9223372036854775808.0f ? (int64_t)v : INT64_MIN;
        break;
    default: break;
    }
}

/* Byte offset of the element at (i0..i3). */
static __device__ __forceinline__ int64_t tg_cuda_offset(const tg_cuda_view &v, int64_t i0, int64_t i1, int64_t i2,
                                                         int64_t i3) {
    return i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

/* Splits a flat row-major index over ne into coordinates. */
static __device__ __forceinline__ void tg_cuda_unravel(int64_t i, const int64_t ne[4], int64_t c[4]) {
    c[0] = i % ne[0];
    i /= ne[0];
    c[1] = i % ne[1];
    i /= ne[1];
    c[2] = i % ne[2];
    c[3] = i / ne[2];
}

/* Block-wide reductions for kernels that give one block to one row (blockDim a
 * multiple of 32, at most 1024); every thread gets the result.  The leading
 * barrier lets a block reduce twice with the same shared array, and the
 * barriers also make the block's earlier global writes visible to all of it. */
static __device__ __forceinline__ float tg_cuda_block_sum(float v, float *shared32) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? shared32[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float tg_cuda_block_max(float v, float *shared32) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? shared32[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* ALiBi slope of head h of n_head (soft_max and flash attention, as the CPU):
 * m0^(h+1) for the first power-of-two heads, then m1^(2(h - n_log2) + 1);
 * max_bias <= 0 disables it (slope 1). */
static __device__ __forceinline__ float tg_cuda_alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= n_head) n_log2 *= 2;
    const float m0 = powf(2.0f, -max_bias / (float)n_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n_log2);
    return h < n_log2 ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n_log2) + 1));
}

static inline bool tg_cuda_is_float_type(enum tg_type t) {
    return t == TG_TYPE_F32 || t == TG_TYPE_F16 || t == TG_TYPE_BF16;
}

/* Grid size for a grid-stride loop over n items. */
static inline unsigned tg_cuda_blocks_for(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b > 65535LL * 8) b = 65535LL * 8;
    if (b < 1) b = 1;
    return (unsigned)b;
}

/* Device buffers (cuda_buffer.cu): whether buf is one, and its device (-1 if not). */
bool tg_cuda_buffer_is_device(const tg_buffer *buf);
int tg_cuda_buffer_device(const tg_buffer *buf);

/* Reports the last launch error as a failure naming the node. */
enum tg_status tg_cuda_check_launch(const struct tg_tensor *node, const char *what);

/* Op launchers (cuda_ops_*.cu): queue the node's kernel on the backend stream. */
enum tg_status tg_cuda_op_elementwise(tg_cuda_backend_ctx *ctx, struct tg_tensor *node);
bool tg_cuda_supports_elementwise(const struct tg_tensor *node);
enum tg_status tg_cuda_op_rows(tg_cuda_backend_ctx *ctx, struct tg_tensor *node);
bool tg_cuda_supports_rows(const struct tg_tensor *node);
enum tg_status tg_cuda_op_copy(tg_cuda_backend_ctx *ctx, struct tg_tensor *node);
bool tg_cuda_supports_copy(const struct tg_tensor *node);
enum tg_status tg_cuda_op_mul_mat(tg_cuda_backend_ctx *ctx, struct tg_tensor *node);
bool tg_cuda_supports_mul_mat(const struct tg_tensor *node);
enum tg_status tg_cuda_op_flash_attn(tg_cuda_backend_ctx *ctx, struct tg_tensor *node);
bool tg_cuda_supports_flash_attn(const struct tg_tensor *node);
enum tg_status tg_cuda_op_conv(tg_cuda_backend_ctx *ctx, struct tg_tensor *node);
bool tg_cuda_supports_conv(const struct tg_tensor *node);

/* Copies src (any strides, f32/f16/bf16/i32, or quantized with packed rows:
 * decoded) into a contiguous dst of dst_type at dst_data: used by mul_mat to
 * make contiguous operands. */
enum tg_status tg_cuda_convert_to_contiguous(cudaStream_t stream, const struct tg_tensor *src, void *dst_data,
                                             enum tg_type dst_type);

#endif

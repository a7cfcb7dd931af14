/* The CUDA backend: one per device, each with its own (blocking) stream and
 * cuBLAS handle; asynchronous set/get and copies on that stream; cudaEvents;
 * exact supports_op (the kernels' own support rules); the offload policy
 * (ops on host weights come here when their batch is large enough to pay for
 * the transfer); graph compute queues one kernel per node and returns without
 * waiting (synchronize waits). */
#include "cuda_internal.cuh"
#include "cuda_testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_backend {
    tg_backend base; /* first: the tg_backend pointer is the struct's */
    tg_cuda_backend_ctx ctx;
    cudaEvent_t copy_done; /* orders async copies out of this backend's stream */
};

static tg_cuda_backend_ctx *ctx_of(tg_backend *backend) { return &((struct cuda_backend *)backend)->ctx; }

enum tg_status tg_cuda_check_launch(const struct tg_tensor *node, const char *what) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return TG_OK;
    return tg_fail(TG_ERR_DEVICE, "tensor '%s': CUDA %s failed: %s", node ? node->name : "", what,
                   cudaGetErrorString(err));
}

enum tg_status tg_cuda_scratch_alloc(tg_cuda_backend_ctx *ctx, void **ptr, size_t bytes, const struct tg_tensor *node,
                                     const char *what) {
    if (bytes == 0) bytes = 1;
    cudaError_t err = ctx->memory_pools ? cudaMallocAsync(ptr, bytes, ctx->stream) : cudaMalloc(ptr, bytes);
    if (err == cudaSuccess) return TG_OK;
    cudaGetLastError(); /* else the next launch's check would report this failure as its own */
    *ptr = NULL;
    return tg_fail(TG_ERR_ALLOC, "tensor '%s': no device memory for %s (%zu bytes): %s", node->name, what, bytes,
                   cudaGetErrorString(err));
}

void tg_cuda_scratch_free(tg_cuda_backend_ctx *ctx, void *ptr) {
    if (!ptr) return;
    if (ctx->memory_pools) {
        tg_cuda_note_failure(ctx->device, cudaFreeAsync(ptr, ctx->stream), "cudaFreeAsync", NULL);
    } else {
        /* without stream-ordered frees, the kernels reading ptr must finish first */
        tg_cuda_note_failure(ctx->device, cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize", NULL);
        tg_cuda_note_failure(ctx->device, cudaFree(ptr), "cudaFree", NULL);
    }
}

static const char *cuda_get_name(tg_backend *backend) { return ctx_of(backend)->name; }

bool tg_backend_is_cuda(tg_backend *backend) { return backend && backend->iface.get_name == cuda_get_name; }

static void cuda_free(tg_backend *backend) {
    struct cuda_backend *cb = (struct cuda_backend *)backend;
    cudaSetDevice(cb->ctx.device);
    tg_cuda_note_failure(cb->ctx.device, cudaStreamSynchronize(cb->ctx.stream), "cudaStreamSynchronize (free)", NULL);
    cudaEventDestroy(cb->copy_done);
    cublasDestroy(cb->ctx.cublas);
    cudaStreamDestroy(cb->ctx.stream);
    free(cb);
}

static tg_buffer_type *cuda_get_default_buffer_type(tg_backend *backend) {
    return tg_cuda_buffer_type(ctx_of(backend)->device);
}

static bool on_this_device(tg_cuda_backend_ctx *ctx, const struct tg_tensor *t) {
    return t->buffer && tg_cuda_buffer_device(t->buffer) == ctx->device;
}

static void cuda_set_tensor_async(tg_backend *backend, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    tg_cuda_backend_ctx *ctx = ctx_of(backend);
    if (!on_this_device(ctx, t)) {
        /* not ours: finish queued work that may read it, then copy synchronously */
        cudaSetDevice(ctx->device);
        tg_cuda_note_failure(ctx->device, cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize", t->name);
        /* a void entry point, as ggml's: a failure leaves its message in tg_last_error() */
        enum tg_status st = tg_tensor_set(t, data, offset, size);
        (void)st;
        return;
    }
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device,
                         cudaMemcpyAsync((char *)t->data + offset, data, size, cudaMemcpyHostToDevice, ctx->stream),
                         "cudaMemcpyAsync (set)", t->name);
}

static void cuda_get_tensor_async(tg_backend *backend, const struct tg_tensor *t, void *data, size_t offset,
                                  size_t size) {
    tg_cuda_backend_ctx *ctx = ctx_of(backend);
    if (!on_this_device(ctx, t)) {
        cudaSetDevice(ctx->device);
        tg_cuda_note_failure(ctx->device, cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize", t->name);
        enum tg_status st = tg_tensor_get(t, data, offset, size); /* void entry point: see set_tensor_async */
        (void)st;
        return;
    }
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device,
                         cudaMemcpyAsync(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost, ctx->stream),
                         "cudaMemcpyAsync (get)", t->name);
}

static bool is_pinned_host(const tg_buffer *buf) { return buf && buf->buft == tg_cuda_host_buffer_type(); }

/* Device->device (same or peer device): the copy runs on the source stream so
 * later work there cannot overwrite the source early, and the destination
 * stream waits for it.  Host->device runs on the destination stream once the
 * source backend has finished writing the source. */
static bool cuda_cpy_tensor_async(tg_backend *backend_src, tg_backend *backend_dst, const struct tg_tensor *src,
                                  struct tg_tensor *dst) {
    tg_cuda_backend_ctx *dctx = ctx_of(backend_dst);
    if (!on_this_device(dctx, dst)) return false;
    const size_t n = tg_nbytes(src);
    if (n != tg_nbytes(dst)) return false;
    if (tg_backend_is_cuda(backend_src) && on_this_device(ctx_of(backend_src), src)) {
        struct cuda_backend *sb = (struct cuda_backend *)backend_src;
        cudaSetDevice(sb->ctx.device);
        cudaError_t err;
        if (sb->ctx.device == dctx->device) {
            err = cudaMemcpyAsync(dst->data, src->data, n, cudaMemcpyDeviceToDevice, sb->ctx.stream);
        } else {
            err = cudaMemcpyPeerAsync(dst->data, dctx->device, src->data, sb->ctx.device, n, sb->ctx.stream);
        }
        if (tg_cuda_note_failure(sb->ctx.device, err, "cudaMemcpyAsync (device copy)", dst->name)) return false;
        if (backend_src != backend_dst) {
            if (tg_cuda_note_failure(sb->ctx.device, cudaEventRecord(sb->copy_done, sb->ctx.stream), "cudaEventRecord",
                                     dst->name))
                return false;
            cudaSetDevice(dctx->device);
            if (tg_cuda_note_failure(dctx->device, cudaStreamWaitEvent(dctx->stream, sb->copy_done, 0),
                                     "cudaStreamWaitEvent", dst->name))
                return false;
        }
        return true;
    }
    if (src->buffer && tg_buffer_is_host(src->buffer)) {
        /* the host-side producer must be done before the DMA reads the source */
        tg_backend_synchronize(backend_src);
        cudaSetDevice(dctx->device);
        if (tg_cuda_note_failure(dctx->device,
                                 cudaMemcpyAsync(dst->data, src->data, n, cudaMemcpyHostToDevice, dctx->stream),
                                 "cudaMemcpyAsync (host to device)", dst->name))
            return false;
        /* pinned memory is read by DMA later: the CPU may reuse it once we return */
        if (is_pinned_host(src->buffer)) {
            return !tg_cuda_note_failure(dctx->device, cudaStreamSynchronize(dctx->stream), "cudaStreamSynchronize",
                                         dst->name);
        }
        return true;
    }
    return false;
}

static void cuda_synchronize(tg_backend *backend) {
    tg_cuda_backend_ctx *ctx = ctx_of(backend);
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device, cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize", NULL);
}

/* What a synchronize noted (a failed launch, copy or free on the stream), taken for the caller. */
static enum tg_status cuda_take_failure(tg_backend *backend) { return tg_cuda_take_failure(ctx_of(backend)->device); }

/* ---- ops --------------------------------------------------------------------------- */

static bool op_is_noop(enum tg_op op) { return op == TG_OP_NONE || tg_op_is_view(op); }

static bool cuda_supports_op(tg_backend *backend, const struct tg_tensor *op) {
    (void)backend;
    switch (op->op) {
    case TG_OP_NONE:
    case TG_OP_VIEW:
    case TG_OP_RESHAPE:
    case TG_OP_PERMUTE:
    case TG_OP_TRANSPOSE:
        return true;
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
    case TG_OP_ADD1:
    case TG_OP_SCALE:
    case TG_OP_SQR:
    case TG_OP_SQRT:
    case TG_OP_LOG:
    case TG_OP_FILL:
    case TG_OP_UNARY:
    case TG_OP_GLU:
    case TG_OP_DIAG_MASK_INF:
    case TG_OP_CONCAT:
        return tg_cuda_supports_elementwise(op);
    case TG_OP_RMS_NORM:
    case TG_OP_NORM:
    case TG_OP_SOFT_MAX:
    case TG_OP_ROPE:
    case TG_OP_SUM_ROWS:
        return tg_cuda_supports_rows(op);
    case TG_OP_CPY:
    case TG_OP_CONT:
    case TG_OP_DUP:
    case TG_OP_GET_ROWS:
    case TG_OP_SET_ROWS:
        return tg_cuda_supports_copy(op);
    case TG_OP_MUL_MAT:
        return tg_cuda_supports_mul_mat(op);
    case TG_OP_FLASH_ATTN_EXT:
        return tg_cuda_supports_flash_attn(op);
    case TG_OP_IM2COL:
        return tg_cuda_supports_conv(op);
    default:
        return false;
    }
}

static bool cuda_supports_buft(tg_backend *backend, tg_buffer_type *buft) {
    return buft == tg_cuda_buffer_type(ctx_of(backend)->device);
}

/* Worth moving host weights to the device only for a large enough batch
 * (ne[1] of the result); get_rows reads one row per token, never worth it. */
static bool cuda_offload_op(tg_backend *backend, const struct tg_tensor *op) {
    return op->op != TG_OP_GET_ROWS && op->ne[1] >= ctx_of(backend)->offload_min_batch;
}

static enum tg_status check_operands(tg_cuda_backend_ctx *ctx, const struct tg_tensor *node) {
    if (!on_this_device(ctx, node)) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' (%s) is not in a %s buffer: the CUDA backend computes only on its own "
                       "device memory (allocate it with tg_cuda_buffer_type(%d) or schedule with tg_sched)",
                       node->name, tg_op_name(node->op), ctx->name, ctx->device);
    }
    for (int i = 0; i < TG_MAX_SRC; i++) {
        const struct tg_tensor *s = node->src[i];
        if (s && !on_this_device(ctx, s)) {
            return tg_fail(TG_ERR_INVALID, "tensor '%s': source %d '%s' is not in a %s buffer (copy it to the device "
                           "first, as tg_sched does)", node->name, i, s->name, ctx->name);
        }
    }
    return TG_OK;
}

static enum tg_status compute_node(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    switch (node->op) {
    case TG_OP_RMS_NORM:
    case TG_OP_NORM:
    case TG_OP_SOFT_MAX:
    case TG_OP_ROPE:
    case TG_OP_SUM_ROWS:
        return tg_cuda_op_rows(ctx, node);
    case TG_OP_CPY:
    case TG_OP_CONT:
    case TG_OP_DUP:
    case TG_OP_GET_ROWS:
    case TG_OP_SET_ROWS:
        return tg_cuda_op_copy(ctx, node);
    case TG_OP_MUL_MAT:
        return tg_cuda_op_mul_mat(ctx, node);
    case TG_OP_FLASH_ATTN_EXT:
        return tg_cuda_op_flash_attn(ctx, node);
    case TG_OP_IM2COL:
        return tg_cuda_op_conv(ctx, node);
    default:
        return tg_cuda_op_elementwise(ctx, node);
    }
}

static enum tg_status cuda_graph_compute(tg_backend *backend, struct tg_graph *graph) {
    tg_cuda_backend_ctx *ctx = ctx_of(backend);
    cudaSetDevice(ctx->device);
    enum tg_status failed_before = tg_cuda_take_failure(ctx->device);
    if (failed_before != TG_OK) return failed_before;
    for (int i = 0; i < graph->n_nodes; i++) {
        struct tg_tensor *node = graph->nodes[i];
        if (op_is_noop(node->op) || (node->flags & TG_FLAG_NO_COMPUTE)) continue; /* as the CPU */
        if (!cuda_supports_op(backend, node)) {
            return tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s': the CUDA backend has no kernel for op %s with these "
                           "types/shapes (check tg_backend_supports_op first)", node->name, tg_op_name(node->op));
        }
        enum tg_status st = check_operands(ctx, node);
        if (st == TG_OK) st = tg_tensor_check_access(node);
        if (st == TG_OK) st = compute_node(ctx, node);
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* ---- events --------------------------------------------------------------------------- */

static tg_event *cuda_event_new(tg_backend *backend) {
    tg_event *ev = (tg_event *)calloc(1, sizeof *ev);
    if (!ev) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a CUDA event");
        return NULL;
    }
    cudaEvent_t e;
    cudaSetDevice(ctx_of(backend)->device);
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        cudaGetLastError();
        free(ev);
        tg_fail(TG_ERR_DEVICE, "%s: cudaEventCreate failed: %s", ctx_of(backend)->name, cudaGetErrorString(err));
        return NULL;
    }
    ev->backend = backend;
    ev->context = (void *)e;
    return ev;
}

static void cuda_event_free(tg_event *event) {
    cudaEventDestroy((cudaEvent_t)event->context);
    free(event);
}

static void cuda_event_record(tg_event *event, tg_backend *backend) {
    tg_cuda_backend_ctx *ctx = ctx_of(backend);
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device, cudaEventRecord((cudaEvent_t)event->context, ctx->stream), "cudaEventRecord", NULL);
}

static void cuda_event_wait(tg_backend *backend, tg_event *event) {
    if (!tg_backend_is_cuda(event->backend)) {
        /* another backend's event: the host waits for it */
        tg_event_synchronize(event);
        return;
    }
    tg_cuda_backend_ctx *ctx = ctx_of(backend);
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device, cudaStreamWaitEvent(ctx->stream, (cudaEvent_t)event->context, 0),
                         "cudaStreamWaitEvent", NULL);
}

static void cuda_event_synchronize(tg_event *event) {
    tg_cuda_note_failure(ctx_of(event->backend)->device, cudaEventSynchronize((cudaEvent_t)event->context),
                         "cudaEventSynchronize", NULL);
}

/* ---- construction ------------------------------------------------------------------------ */

tg_backend *tg_backend_cuda_new(int device) {
    const int n = tg_cuda_device_count();
    if (device < 0 || device >= n) {
        tg_fail(TG_ERR_INVALID, "CUDA device %d does not exist (%d devices found)", device, n);
        return NULL;
    }
    struct cuda_backend *cb = (struct cuda_backend *)calloc(1, sizeof *cb);
    if (!cb) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a CUDA backend");
        return NULL;
    }
    cb->ctx.device = device;
    cb->ctx.offload_min_batch = TG_CUDA_DEFAULT_MIN_BATCH;
    cb->ctx.attn_scratch_limit = TG_CUDA_ATTN_SCRATCH_LIMIT;
    snprintf(cb->ctx.name, sizeof cb->ctx.name, "CUDA%d", device);
    cudaError_t err = cudaSetDevice(device);
    int pools = 0;
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    cb->ctx.memory_pools = pools != 0;
    if (err != cudaSuccess) {
        cudaGetLastError();
        free(cb);
        tg_fail(TG_ERR_DEVICE, "CUDA%d: cannot use the device: %s (%s)", device, cudaGetErrorString(err),
                cudaGetErrorName(err));
        return NULL;
    }
    err = cudaStreamCreate(&cb->ctx.stream);
    if (err != cudaSuccess) {
        cudaGetLastError();
        free(cb);
        tg_fail(TG_ERR_DEVICE, "CUDA%d: cudaStreamCreate failed: %s (%s)", device, cudaGetErrorString(err),
                cudaGetErrorName(err));
        return NULL;
    }
    err = cudaEventCreateWithFlags(&cb->copy_done, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        cudaGetLastError();
        cudaStreamDestroy(cb->ctx.stream);
        free(cb);
        tg_fail(TG_ERR_DEVICE, "CUDA%d: cudaEventCreate failed: %s (%s)", device, cudaGetErrorString(err),
                cudaGetErrorName(err));
        return NULL;
    }
    cublasStatus_t cs = cublasCreate(&cb->ctx.cublas);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        cudaGetLastError();
        cudaEventDestroy(cb->copy_done);
        cudaStreamDestroy(cb->ctx.stream);
        free(cb);
        tg_fail(TG_ERR_DEVICE, "CUDA%d: cublasCreate failed: %s", device, cublasGetStatusString(cs));
        return NULL;
    }
    cublasSetStream(cb->ctx.cublas, cb->ctx.stream);

    struct tg_backend_iface *f = &cb->base.iface;
    f->get_name = cuda_get_name;
    f->free = cuda_free;
    f->get_default_buffer_type = cuda_get_default_buffer_type;
    f->set_tensor_async = cuda_set_tensor_async;
    f->get_tensor_async = cuda_get_tensor_async;
    f->cpy_tensor_async = cuda_cpy_tensor_async;
    f->synchronize = cuda_synchronize;
    f->graph_compute = cuda_graph_compute;
    f->supports_op = cuda_supports_op;
    f->supports_buft = cuda_supports_buft;
    f->offload_op = cuda_offload_op;
    f->event_new = cuda_event_new;
    f->event_free = cuda_event_free;
    f->event_record = cuda_event_record;
    f->event_wait = cuda_event_wait;
    f->event_synchronize = cuda_event_synchronize;
    f->take_failure = cuda_take_failure;
    cb->base.context = &cb->ctx;
    return &cb->base;
}

void tg_backend_cuda_set_offload_min_batch(tg_backend *backend, int64_t min_batch) {
    if (tg_backend_is_cuda(backend)) ctx_of(backend)->offload_min_batch = min_batch;
}

/* ---- test hooks (cuda_testing.h) ------------------------------------------------------- */

void tg_cuda_testing_note_failure(int device, int cuda_error, const char *what) {
    tg_cuda_note_failure(device, (cudaError_t)cuda_error, what, NULL);
}

void tg_cuda_testing_set_attn_scratch_limit(tg_backend *backend, size_t bytes) {
    ctx_of(backend)->attn_scratch_limit = bytes ? bytes : TG_CUDA_ATTN_SCRATCH_LIMIT;
}

void tg_cuda_testing_use_memory_pools(tg_backend *backend, bool use) {
    int pools = 0;
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ctx_of(backend)->device);
    ctx_of(backend)->memory_pools = use && pools;
}

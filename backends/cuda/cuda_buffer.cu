/* CUDA buffer types: device memory per device (cudaMalloc, 256-byte alignment,
 * max size = the device's memory) and pinned host memory (cudaMallocHost, host
 * visible, so the CPU backend computes on it and transfers run at full speed).
 * Synchronous transfers use the legacy default stream, which orders itself
 * with the backends' (blocking) streams. */
#include "cuda_internal.cuh"
#include "tg-cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Address handed out for empty buffers: non-NULL so bound tensors look bound. */
#define EMPTY_BUFFER_BASE ((void *)(uintptr_t)TG_CUDA_ALIGNMENT)

struct device_buffer_type_ctx {
    int device;
    char name[32];
    size_t max_size;
};

struct device_buffer_ctx {
    int device;
    void *base;
};

static struct device_buffer_type_ctx device_buft_ctx[TG_CUDA_MAX_DEVICES];
static tg_buffer_type device_buft[TG_CUDA_MAX_DEVICES];
static bool device_buft_ready[TG_CUDA_MAX_DEVICES];

/* ---- is CUDA there: device count, and why not ---------------------------------- */

static char unavailable_reason[256];
static bool absence_expected;

int tg_cuda_device_count(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess && n > 0) return n < TG_CUDA_MAX_DEVICES ? n : TG_CUDA_MAX_DEVICES;
    cudaGetLastError(); /* the runtime keeps the failure for the next call otherwise */
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver); /* 0 when no driver is installed */
    cudaRuntimeGetVersion(&runtime);
    if (driver == 0) {
        absence_expected = true;
        snprintf(unavailable_reason, sizeof unavailable_reason, "no CUDA driver is installed");
    } else if (err == cudaSuccess || err == cudaErrorNoDevice) {
        absence_expected = true;
        snprintf(unavailable_reason, sizeof unavailable_reason, "no CUDA device (driver %d.%d)", driver / 1000,
                 driver % 1000 / 10);
    } else {
        absence_expected = false;
        snprintf(unavailable_reason, sizeof unavailable_reason,
                 "%s (%s; driver %d.%d, runtime %d.%d): update the driver or build with a matching CUDA Toolkit",
                 cudaGetErrorString(err), cudaGetErrorName(err), driver / 1000, driver % 1000 / 10, runtime / 1000,
                 runtime % 1000 / 10);
    }
    return 0;
}

const char *tg_cuda_unavailable_reason(void) { return tg_cuda_device_count() > 0 ? NULL : unavailable_reason; }

bool tg_cuda_absence_is_expected(void) { return tg_cuda_device_count() > 0 || absence_expected; }

/* ---- failures of calls that return no status ------------------------------------ */

static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;
static char failure_message[TG_CUDA_MAX_DEVICES][320];

bool tg_cuda_note_failure(int device, cudaError_t err, const char *what, const char *tensor) {
    if (err == cudaSuccess) return false;
    cudaGetLastError(); /* not sticky for the runtime: the next launch must not inherit it */
    char msg[320];
    snprintf(msg, sizeof msg, "CUDA%d: %s%s%s%s failed: %s (%s)", device, what, tensor ? " of tensor '" : "",
             tensor ? tensor : "", tensor ? "'" : "", cudaGetErrorString(err), cudaGetErrorName(err));
    tg_fail(TG_ERR_DEVICE, "%s", msg);
    if (device < 0 || device >= TG_CUDA_MAX_DEVICES) return true;
    pthread_mutex_lock(&failure_lock);
    if (failure_message[device][0] == '\0') memcpy(failure_message[device], msg, sizeof msg);
    pthread_mutex_unlock(&failure_lock);
    return true;
}

enum tg_status tg_cuda_take_failure(int device) {
    if (device < 0 || device >= TG_CUDA_MAX_DEVICES) return TG_OK;
    char msg[320];
    pthread_mutex_lock(&failure_lock);
    memcpy(msg, failure_message[device], sizeof msg);
    failure_message[device][0] = '\0';
    pthread_mutex_unlock(&failure_lock);
    if (msg[0] == '\0') return TG_OK;
    return tg_fail(TG_ERR_DEVICE, "an earlier call failed: %s", msg);
}

/* ---- device buffers ------------------------------------------------------------ */

static void device_free_buffer(tg_buffer *buf) {
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)buf->context;
    if (ctx->base != EMPTY_BUFFER_BASE) {
        cudaSetDevice(ctx->device);
        cudaFree(ctx->base);
    }
    free(ctx);
}

static void *device_get_base(tg_buffer *buf) { return ((struct device_buffer_ctx *)buf->context)->base; }

static void device_memset_tensor(tg_buffer *buf, struct tg_tensor *t, uint8_t value, size_t offset, size_t size) {
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)buf->context;
    cudaSetDevice(ctx->device);
    if (tg_cuda_note_failure(ctx->device, cudaMemset((char *)t->data + offset, value, size), "cudaMemset", t->name)) return;
    tg_cuda_note_failure(ctx->device, cudaStreamSynchronize(0), "cudaStreamSynchronize after cudaMemset", t->name);
}

static void device_set_tensor(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)buf->context;
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device, cudaMemcpy((char *)t->data + offset, data, size, cudaMemcpyHostToDevice),
                         "cudaMemcpy (set)", t->name);
}

static void device_get_tensor(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)buf->context;
    cudaSetDevice(ctx->device);
    tg_cuda_note_failure(ctx->device, cudaMemcpy(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost),
                         "cudaMemcpy (get)", t->name);
}

/* From another device buffer or any host buffer: unified addressing lets one
 * cudaMemcpyDefault cover device-device, peer and host-device copies. */
static bool device_cpy_tensor(tg_buffer *buf, const struct tg_tensor *src, struct tg_tensor *dst) {
    if (!src->buffer || !(tg_cuda_buffer_is_device(src->buffer) || tg_buffer_is_host(src->buffer))) return false;
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)buf->context;
    cudaSetDevice(ctx->device);
    return !tg_cuda_note_failure(ctx->device, cudaMemcpy(dst->data, src->data, tg_nbytes(src), cudaMemcpyDefault),
                                 "cudaMemcpy (copy)", dst->name);
}

static void device_clear(tg_buffer *buf, uint8_t value) {
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)buf->context;
    if (ctx->base == EMPTY_BUFFER_BASE) return;
    cudaSetDevice(ctx->device);
    if (tg_cuda_note_failure(ctx->device, cudaMemset(ctx->base, value, buf->size), "cudaMemset (clear)", NULL)) return;
    tg_cuda_note_failure(ctx->device, cudaStreamSynchronize(0), "cudaStreamSynchronize after clearing a buffer", NULL);
}

static const char *device_buft_name(tg_buffer_type *buft) {
    return ((struct device_buffer_type_ctx *)buft->context)->name;
}

static tg_buffer *device_alloc_buffer(tg_buffer_type *buft, size_t size) {
    struct device_buffer_type_ctx *tctx = (struct device_buffer_type_ctx *)buft->context;
    struct device_buffer_ctx *ctx = (struct device_buffer_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a CUDA buffer object");
        return NULL;
    }
    ctx->device = tctx->device;
    ctx->base = EMPTY_BUFFER_BASE;
    if (size > 0) {
        cudaSetDevice(tctx->device);
        cudaError_t err = cudaMalloc(&ctx->base, size);
        if (err != cudaSuccess) {
            cudaGetLastError();
            free(ctx);
            tg_fail(TG_ERR_ALLOC, "%s: cudaMalloc of %zu bytes failed (%s): use a smaller graph or offload less",
                    tctx->name, size, cudaGetErrorString(err));
            return NULL;
        }
    }
    struct tg_buffer_iface iface;
    memset(&iface, 0, sizeof iface);
    iface.free_buffer = device_free_buffer;
    iface.get_base = device_get_base;
    iface.memset_tensor = device_memset_tensor;
    iface.set_tensor = device_set_tensor;
    iface.get_tensor = device_get_tensor;
    iface.cpy_tensor = device_cpy_tensor;
    iface.clear = device_clear;
    tg_buffer *buf = tg_buffer_init(buft, iface, ctx, size);
    if (!buf) {
        if (ctx->base != EMPTY_BUFFER_BASE) cudaFree(ctx->base);
        free(ctx);
    }
    return buf;
}

static size_t device_buft_alignment(tg_buffer_type *buft) {
    (void)buft;
    return TG_CUDA_ALIGNMENT;
}

static size_t device_buft_max_size(tg_buffer_type *buft) {
    return ((struct device_buffer_type_ctx *)buft->context)->max_size;
}

bool tg_cuda_buffer_is_device(const tg_buffer *buf) {
    return buf && buf->buft && buf->buft->iface.alloc_buffer == device_alloc_buffer;
}

int tg_cuda_buffer_device(const tg_buffer *buf) {
    return tg_cuda_buffer_is_device(buf) ? ((struct device_buffer_ctx *)buf->context)->device : -1;
}

tg_buffer_type *tg_cuda_buffer_type(int device) {
    if (device < 0 || device >= tg_cuda_device_count()) {
        tg_fail(TG_ERR_INVALID, "CUDA device %d does not exist (%d devices found)", device, tg_cuda_device_count());
        return NULL;
    }
    if (!device_buft_ready[device]) {
        struct device_buffer_type_ctx *c = &device_buft_ctx[device];
        c->device = device;
        snprintf(c->name, sizeof c->name, "CUDA%d", device);
        cudaDeviceProp prop;
        c->max_size = cudaGetDeviceProperties(&prop, device) == cudaSuccess ? prop.totalGlobalMem : SIZE_MAX;
        tg_buffer_type *b = &device_buft[device];
        memset(b, 0, sizeof *b);
        b->iface.get_name = device_buft_name;
        b->iface.alloc_buffer = device_alloc_buffer;
        b->iface.get_alignment = device_buft_alignment;
        b->iface.get_max_size = device_buft_max_size;
        b->context = c;
        device_buft_ready[device] = true;
    }
    return &device_buft[device];
}

/* ---- pinned host buffers ---------------------------------------------------------- */

static void host_free_buffer(tg_buffer *buf) {
    if (buf->context != EMPTY_BUFFER_BASE) cudaFreeHost(buf->context);
}

static void *host_get_base(tg_buffer *buf) { return buf->context; }

static void host_memset_tensor(tg_buffer *buf, struct tg_tensor *t, uint8_t value, size_t offset, size_t size) {
    (void)buf;
    memset((char *)t->data + offset, value, size);
}

static void host_set_tensor(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy((char *)t->data + offset, data, size);
}

static void host_get_tensor(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy(data, (const char *)t->data + offset, size);
}

static bool host_cpy_tensor(tg_buffer *buf, const struct tg_tensor *src, struct tg_tensor *dst) {
    (void)buf;
    if (!src->buffer || tg_buffer_is_host(src->buffer)) {
        memcpy(dst->data, src->data, tg_nbytes(src));
        return true;
    }
    if (tg_cuda_buffer_is_device(src->buffer)) {
        const int device = tg_cuda_buffer_device(src->buffer);
        cudaSetDevice(device);
        return !tg_cuda_note_failure(device, cudaMemcpy(dst->data, src->data, tg_nbytes(src), cudaMemcpyDeviceToHost),
                                     "cudaMemcpy (copy to host)", dst->name);
    }
    return false;
}

static void host_clear(tg_buffer *buf, uint8_t value) {
    if (buf->context != EMPTY_BUFFER_BASE) memset(buf->context, value, buf->size);
}

static const char *host_buft_name(tg_buffer_type *buft) {
    (void)buft;
    return "CUDA_Host";
}

static tg_buffer *host_alloc_buffer(tg_buffer_type *buft, size_t size) {
    void *base = EMPTY_BUFFER_BASE;
    if (size > 0) {
        cudaError_t err = cudaMallocHost(&base, size);
        if (err != cudaSuccess) {
            cudaGetLastError();
            tg_fail(TG_ERR_ALLOC, "CUDA_Host: cudaMallocHost of %zu bytes failed (%s): use the CPU buffer type instead",
                    size, cudaGetErrorString(err));
            return NULL;
        }
    }
    struct tg_buffer_iface iface;
    memset(&iface, 0, sizeof iface);
    iface.free_buffer = host_free_buffer;
    iface.get_base = host_get_base;
    iface.memset_tensor = host_memset_tensor;
    iface.set_tensor = host_set_tensor;
    iface.get_tensor = host_get_tensor;
    iface.cpy_tensor = host_cpy_tensor;
    iface.clear = host_clear;
    tg_buffer *buf = tg_buffer_init(buft, iface, base, size);
    if (!buf && base != EMPTY_BUFFER_BASE) cudaFreeHost(base);
    return buf;
}

static size_t host_buft_alignment(tg_buffer_type *buft) {
    (void)buft;
    return TG_CPU_ALIGNMENT;
}

static bool host_buft_is_host(tg_buffer_type *buft) {
    (void)buft;
    return true;
}

tg_buffer_type *tg_cuda_host_buffer_type(void) {
    static tg_buffer_type host_buft;
    static bool ready;
    if (!ready) {
        memset(&host_buft, 0, sizeof host_buft);
        host_buft.iface.get_name = host_buft_name;
        host_buft.iface.alloc_buffer = host_alloc_buffer;
        host_buft.iface.get_alignment = host_buft_alignment;
        host_buft.iface.is_host = host_buft_is_host;
        ready = true;
    }
    return &host_buft;
}

/* The generic side of the backend interface: dispatch through the iface
 * tables with defaults for optional entries, multi-buffers, binding, and the
 * checked tensor data access every caller goes through. */
#include "tg-backend.h"
#include "tg-host-observe.h"
#include "tg-impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- observers of the host's own accesses (tg-host-observe.h) ---------------------- */

static tg_host_access_fn host_access_fn; /* atomic */
static tg_host_free_fn host_free_fn;     /* atomic */

void tg_host_observe(tg_host_access_fn access, tg_host_free_fn free_fn) {
    __atomic_store_n(&host_free_fn, free_fn, __ATOMIC_RELEASE);
    __atomic_store_n(&host_access_fn, access, __ATOMIC_RELEASE);
}

/* verb of t's bytes [dst or src, +size) by the host (src NULL: a fill). */
static void observe(const char *verb, const struct tg_tensor *t, void *dst, const char *dst_name, const void *src,
                    const char *src_name, size_t size) {
    tg_host_access_fn f = __atomic_load_n(&host_access_fn, __ATOMIC_ACQUIRE);
    if (!f) return;
    char what[TG_MAX_NAME + 48];
    snprintf(what, sizeof what, "%s of '%s' on the host", verb, t->name);
    f(dst, dst_name, src, src_name, size, what);
}

/* ---- buffer types ------------------------------------------------------------ */

const char *tg_buft_name(tg_buffer_type *buft) { return buft ? buft->iface.get_name(buft) : "(none)"; }

tg_buffer *tg_buft_alloc_buffer(tg_buffer_type *buft, size_t size) {
    if (!buft) {
        tg_fail(TG_ERR_INVALID, "alloc_buffer: no buffer type given");
        return NULL;
    }
    return buft->iface.alloc_buffer(buft, size);
}

size_t tg_buft_get_alignment(tg_buffer_type *buft) { return buft->iface.get_alignment(buft); }

size_t tg_buft_get_max_size(tg_buffer_type *buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

/* A buffer type may ask for more bytes than the tensor holds, never fewer: a
 * smaller answer (a padding that wrapped around) would let the planner
 * overlap the tensor's own bytes with a neighbour's. */
size_t tg_buft_get_alloc_size(tg_buffer_type *buft, const struct tg_tensor *t) {
    const size_t bytes = tg_nbytes(t);
    if (!buft || !buft->iface.get_alloc_size) return bytes;
    const size_t size = buft->iface.get_alloc_size(buft, t);
    return size > bytes ? size : bytes;
}

bool tg_buft_is_host(tg_buffer_type *buft) { return buft && buft->iface.is_host && buft->iface.is_host(buft); }

/* ---- buffers ------------------------------------------------------------------- */

/* A host buffer itself (a multi-buffer's parts are told one by one). */
static bool plain_host_buffer(tg_buffer *buf) { return tg_buffer_is_host(buf) && !tg_buffer_is_multi(buf); }

tg_buffer *tg_buffer_init(tg_buffer_type *buft, struct tg_buffer_iface iface, void *context, size_t size) {
    tg_buffer *buf = calloc(1, sizeof *buf);
    if (!buf) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a buffer object");
        return NULL;
    }
    buf->iface = iface;
    buf->buft = buft;
    buf->context = context;
    buf->size = size;
    buf->usage = TG_BUFFER_USAGE_ANY;
    buf->generation = 1;
    return buf;
}

void tg_buffer_free(tg_buffer *buf) {
    if (!buf) return;
    tg_host_free_fn f = __atomic_load_n(&host_free_fn, __ATOMIC_ACQUIRE);
    if (f && plain_host_buffer(buf)) f(tg_buffer_get_base(buf), buf->size);
    if (buf->iface.free_buffer) buf->iface.free_buffer(buf);
    free(buf);
}

void *tg_buffer_get_base(tg_buffer *buf) { return buf->iface.get_base ? buf->iface.get_base(buf) : NULL; }
size_t tg_buffer_get_size(tg_buffer *buf) { return buf->size; }
tg_buffer_type *tg_buffer_get_type(tg_buffer *buf) { return buf->buft; }

enum tg_status tg_buffer_init_tensor_hook(tg_buffer *buf, struct tg_tensor *t) {
    tg_clear_error(); /* what is left after the hook is its own reason */
    const enum tg_status st = buf->iface.init_tensor(buf, t);
    if (st == TG_OK) return TG_OK;
    char why[256]; /* copied: tg_fail writes where tg_last_error points */
    snprintf(why, sizeof why, "%s", tg_last_error()[0] ? tg_last_error() : "it gave no reason");
    return tg_fail(st, "tensor '%s': the init_tensor hook of its buffer (type '%s') failed: %s", t->name,
                   tg_buft_name(buf->buft), why);
}
size_t tg_buffer_get_alignment(tg_buffer *buf) { return tg_buft_get_alignment(buf->buft); }
size_t tg_buffer_get_alloc_size(tg_buffer *buf, const struct tg_tensor *t) { return tg_buft_get_alloc_size(buf->buft, t); }
bool tg_buffer_is_host(tg_buffer *buf) { return tg_buft_is_host(buf->buft); }

void tg_buffer_clear(tg_buffer *buf, uint8_t value) {
    if (buf->size > 0 && buf->iface.clear) {
        tg_host_access_fn f = __atomic_load_n(&host_access_fn, __ATOMIC_ACQUIRE);
        if (f && plain_host_buffer(buf)) {
            f(tg_buffer_get_base(buf), "(the whole buffer)", NULL, NULL, buf->size, "clear of a buffer on the host");
        }
        buf->iface.clear(buf, value);
    }
}

void tg_buffer_reset(tg_buffer *buf) {
    if (buf->iface.reset) buf->iface.reset(buf);
}

/* ---- multi-buffers ------------------------------------------------------------- */

struct multi_buffer {
    tg_buffer **parts;
    int n_parts;
};

static void multi_free(tg_buffer *buf) {
    struct multi_buffer *m = buf->context;
    for (int i = 0; i < m->n_parts; i++) tg_buffer_free(m->parts[i]);
    free(m->parts);
    free(m);
}

static void *multi_get_base(tg_buffer *buf) {
    struct multi_buffer *m = buf->context;
    return m->n_parts ? tg_buffer_get_base(m->parts[0]) : NULL;
}

static void multi_clear(tg_buffer *buf, uint8_t value) {
    struct multi_buffer *m = buf->context;
    for (int i = 0; i < m->n_parts; i++) tg_buffer_clear(m->parts[i], value);
}

static void multi_reset(tg_buffer *buf) {
    struct multi_buffer *m = buf->context;
    for (int i = 0; i < m->n_parts; i++) tg_buffer_reset(m->parts[i]);
}

tg_buffer *tg_multi_buffer_new(tg_buffer **parts, int n_parts) {
    if (n_parts <= 0) {
        tg_fail(TG_ERR_INVALID, "multi-buffer needs at least one part");
        return NULL;
    }
    struct multi_buffer *m = calloc(1, sizeof *m);
    tg_buffer **copy = calloc((size_t)n_parts, sizeof *copy);
    if (!m || !copy) {
        free(m);
        free(copy);
        tg_fail(TG_ERR_ALLOC, "out of host memory for a multi-buffer");
        return NULL;
    }
    size_t total = 0;
    for (int i = 0; i < n_parts; i++) {
        copy[i] = parts[i];
        total += parts[i]->size;
    }
    m->parts = copy;
    m->n_parts = n_parts;
    struct tg_buffer_iface iface = {
        .free_buffer = multi_free, .get_base = multi_get_base, .clear = multi_clear, .reset = multi_reset,
    };
    tg_buffer *buf = tg_buffer_init(parts[0]->buft, iface, m, total);
    if (!buf) {
        free(copy);
        free(m);
    }
    return buf;
}

bool tg_buffer_is_multi(tg_buffer *buf) { return buf && buf->iface.free_buffer == multi_free; }

void tg_buffer_set_usage(tg_buffer *buf, enum tg_buffer_usage usage) {
    buf->usage = usage;
    if (tg_buffer_is_multi(buf)) {
        struct multi_buffer *m = buf->context;
        for (int i = 0; i < m->n_parts; i++) m->parts[i]->usage = usage;
    }
}

enum tg_buffer_usage tg_buffer_get_usage(tg_buffer *buf) { return buf->usage; }

void tg_buffer_begin_plan(tg_buffer *buf) {
    buf->generation++;
    if (tg_buffer_is_multi(buf)) {
        struct multi_buffer *m = buf->context;
        for (int i = 0; i < m->n_parts; i++) m->parts[i]->generation++;
    }
}

/* ---- binding ---------------------------------------------------------------------- */

static bool addr_in(tg_buffer *buf, const void *addr, size_t size) {
    uintptr_t base = (uintptr_t)tg_buffer_get_base(buf);
    uintptr_t a = (uintptr_t)addr;
    return a >= base && a - base <= buf->size && size <= buf->size - (a - base);
}

enum tg_status tg_tensor_bind(struct tg_tensor *t, tg_buffer *buf, void *addr) {
    if (!t || !buf) return tg_fail(TG_ERR_INVALID, "tg_tensor_bind needs a tensor and a buffer");
    if (t->view_src) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' is a view: bind its root '%s' and use tg_tensor_view_bind",
                       t->name, t->view_src->name);
    }
    if (tg_buffer_is_multi(buf)) {
        struct multi_buffer *m = buf->context;
        for (int i = 0; i < m->n_parts; i++) {
            if (addr_in(m->parts[i], addr, 0) && (uintptr_t)addr < (uintptr_t)tg_buffer_get_base(m->parts[i]) + m->parts[i]->size) {
                return tg_tensor_bind(t, m->parts[i], addr);
            }
        }
        return tg_fail(TG_ERR_INVALID, "tensor '%s': address is in no part of the multi-buffer", t->name);
    }
    size_t size = tg_buffer_get_alloc_size(buf, t);
    if (!addr_in(buf, addr, size)) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' (%zu bytes) at offset %td does not fit in buffer of %zu bytes",
                       t->name, size, (uint8_t *)addr - (uint8_t *)tg_buffer_get_base(buf), buf->size);
    }
    return tg_tensor_bind_placed(t, buf, addr);
}

enum tg_status tg_tensor_view_bind(struct tg_tensor *t) {
    struct tg_tensor *root = t ? t->view_src : NULL;
    if (!root) return tg_fail(TG_ERR_INVALID, "tg_tensor_view_bind: '%s' is not a view", t ? t->name : "");
    if (!root->data) {
        return tg_fail(TG_ERR_INVALID, "view '%s': its root '%s' has no memory yet (bind the root first)", t->name,
                       root->name);
    }
    /* the constructor's rule again: view_offs may have changed since */
    const size_t bytes = tg_nbytes(t), root_bytes = tg_nbytes(root);
    if (t->view_offs > root_bytes || bytes > root_bytes - t->view_offs) {
        return tg_fail(TG_ERR_INVALID, "view '%s' of '%s' at offset %zu with %zu bytes lies outside its %zu bytes",
                       t->name, root->name, t->view_offs, bytes, root_bytes);
    }
    return tg_tensor_view_bind_placed(t);
}

/* ---- checked tensor data access ------------------------------------------------------ */

static bool is_host_tensor(const struct tg_tensor *t) { return !t->buffer || tg_buffer_is_host(t->buffer); }

static enum tg_status check_one(const struct tg_tensor *t, const struct tg_tensor *who) {
    if (!t->data && !t->buffer) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' has no memory yet: graph tensors are bound by "
                       "tg_gallocr_alloc_graph or tg_sched_alloc_graph, weights and inputs by "
                       "tg_alloc_ctx_tensors (or create them in a context without no_alloc)", who->name);
    }
    if (t->buffer && t->bind_generation != t->buffer->generation) {
        return tg_fail(TG_ERR_STALE, "tensor '%s' is stale: its memory in a buffer of type '%s' was handed to "
                       "other tensors since it was bound (a later graph planned by tg_gallocr_alloc_graph/"
                       "tg_sched_alloc_graph, or tg_buffer_begin_plan). Read results before allocating the next "
                       "graph, or copy them into a buffer you own", who->name, tg_buft_name(t->buffer->buft));
    }
    return TG_OK;
}

enum tg_status tg_tensor_check_access(const struct tg_tensor *t) {
    if (!t) return tg_fail(TG_ERR_INVALID, "NULL tensor");
    enum tg_status st = check_one(t, t);
    if (st == TG_OK && t->view_src) st = check_one(t->view_src, t);
    return st;
}

static enum tg_status check_range(const struct tg_tensor *t, size_t offset, size_t size, const char *what) {
    size_t n = tg_nbytes(t);
    if (offset > n || size > n - offset) {
        return tg_fail(TG_ERR_INVALID, "%s of tensor '%s': range [%zu, +%zu) is outside its %zu bytes", what,
                       t->name, offset, size, n);
    }
    /* the shape was checked against the buffer at bind time only: a tensor
     * grown since would reach past its buffer */
    if (t->buffer && size > 0 && !addr_in(t->buffer, (const uint8_t *)t->data + offset, size)) {
        return tg_fail(TG_ERR_INVALID, "%s of tensor '%s': range [%zu, +%zu) lies outside its buffer of %zu bytes "
                       "(its shape or memory changed after it was bound): allocate it again", what, t->name,
                       offset, size, t->buffer->size);
    }
    return TG_OK;
}

/* The caller's side of a copy: size bytes at data (NULL is fine only for 0 bytes). */
static enum tg_status check_host_side(const struct tg_tensor *t, const void *data, size_t size, const char *what) {
    if (!data && size > 0) {
        return tg_fail(TG_ERR_INVALID, "%s of tensor '%s': the host pointer is NULL for %zu bytes (pass the "
                       "memory to copy %s, or size 0)", what, t->name, size, strcmp(what, "get") == 0 ? "into" : "from");
    }
    return TG_OK;
}

enum tg_status tg_tensor_set(struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    enum tg_status st = tg_tensor_check_access(t);
    if (st == TG_OK) st = check_range(t, offset, size, "set");
    if (st == TG_OK) st = check_host_side(t, data, size, "set");
    if (st != TG_OK || size == 0) return st;
    if (is_host_tensor(t)) observe("set", t, (uint8_t *)t->data + offset, t->name, data, "host memory", size);
    if (t->buffer) {
        t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
    } else {
        memcpy((uint8_t *)t->data + offset, data, size);
    }
    return TG_OK;
}

enum tg_status tg_tensor_get(const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    enum tg_status st = tg_tensor_check_access(t);
    if (st == TG_OK) st = check_range(t, offset, size, "get");
    if (st == TG_OK) st = check_host_side(t, data, size, "get");
    if (st != TG_OK || size == 0) return st;
    if (is_host_tensor(t)) observe("get", t, data, "host memory", (const uint8_t *)t->data + offset, t->name, size);
    if (t->buffer) {
        t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
    } else {
        memcpy(data, (const uint8_t *)t->data + offset, size);
    }
    return TG_OK;
}

enum tg_status tg_tensor_memset(struct tg_tensor *t, uint8_t value, size_t offset, size_t size) {
    enum tg_status st = tg_tensor_check_access(t);
    if (st == TG_OK) st = check_range(t, offset, size, "memset");
    if (st != TG_OK || size == 0) return st;
    if (is_host_tensor(t)) observe("memset", t, (uint8_t *)t->data + offset, t->name, NULL, NULL, size);
    if (t->buffer && t->buffer->iface.memset_tensor) {
        t->buffer->iface.memset_tensor(t->buffer, t, value, offset, size);
    } else if (!t->buffer || tg_buffer_is_host(t->buffer)) {
        memset((uint8_t *)t->data + offset, value, size);
    } else {
        return tg_fail(TG_ERR_UNSUPPORTED, "memset of tensor '%s': its buffer type '%s' has no memset", t->name,
                       tg_buft_name(t->buffer->buft));
    }
    return TG_OK;
}

enum tg_status tg_tensor_copy(const struct tg_tensor *src, struct tg_tensor *dst) {
    enum tg_status st = tg_tensor_check_access(src);
    if (st == TG_OK) st = tg_tensor_check_access(dst);
    if (st != TG_OK) return st;
    size_t n = tg_nbytes(src);
    if (n != tg_nbytes(dst)) {
        return tg_fail(TG_ERR_INVALID, "copy '%s' -> '%s': sizes differ (%zu vs %zu bytes)", src->name, dst->name, n,
                       tg_nbytes(dst));
    }
    if (src == dst || src->data == dst->data) return TG_OK;
    if (dst->buffer && dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst)) {
        /* told once: the fallbacks below tell their own set or get */
        if (is_host_tensor(dst) && is_host_tensor(src)) observe("copy", dst, dst->data, dst->name, src->data, src->name, n);
        return TG_OK;
    }
    if (is_host_tensor(src)) return tg_tensor_set(dst, src->data, 0, n);
    if (is_host_tensor(dst)) return tg_tensor_get(src, dst->data, 0, n);
    void *staging = malloc(n ? n : 1);
    if (!staging) return tg_fail(TG_ERR_ALLOC, "copy '%s' -> '%s': out of host memory for staging", src->name, dst->name);
    st = tg_tensor_get(src, staging, 0, n);
    if (st == TG_OK) st = tg_tensor_set(dst, staging, 0, n);
    free(staging);
    return st;
}

/* ---- backends ------------------------------------------------------------------------ */

const char *tg_backend_name(tg_backend *backend) { return backend ? backend->iface.get_name(backend) : "(none)"; }

void tg_backend_free(tg_backend *backend) {
    if (backend && backend->iface.free) backend->iface.free(backend);
}

tg_buffer_type *tg_backend_get_default_buffer_type(tg_backend *backend) {
    return backend->iface.get_default_buffer_type(backend);
}

tg_buffer *tg_backend_alloc_buffer(tg_backend *backend, size_t size) {
    return tg_buft_alloc_buffer(tg_backend_get_default_buffer_type(backend), size);
}

size_t tg_backend_get_alignment(tg_backend *backend) {
    return tg_buft_get_alignment(tg_backend_get_default_buffer_type(backend));
}

void tg_backend_tensor_set_async(tg_backend *backend, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    if (backend->iface.set_tensor_async && tg_tensor_check_access(t) == TG_OK &&
        check_range(t, offset, size, "set_async") == TG_OK && check_host_side(t, data, size, "set") == TG_OK) {
        backend->iface.set_tensor_async(backend, t, data, offset, size);
    } else {
        /* a void entry point, as ggml's: a failure leaves its message in tg_last_error() */
        enum tg_status st = tg_tensor_set(t, data, offset, size);
        (void)st;
    }
}

void tg_backend_tensor_get_async(tg_backend *backend, const struct tg_tensor *t, void *data, size_t offset,
                                 size_t size) {
    if (backend->iface.get_tensor_async && tg_tensor_check_access(t) == TG_OK &&
        check_range(t, offset, size, "get_async") == TG_OK && check_host_side(t, data, size, "get") == TG_OK) {
        backend->iface.get_tensor_async(backend, t, data, offset, size);
    } else {
        enum tg_status st = tg_tensor_get(t, data, offset, size); /* void entry point: see set_async */
        (void)st;
    }
}

enum tg_status tg_backend_tensor_copy_async(tg_backend *backend_src, tg_backend *backend_dst,
                                            const struct tg_tensor *src, struct tg_tensor *dst) {
    if (!backend_src || !backend_dst) {
        return tg_fail(TG_ERR_INVALID, "copy_async '%s' -> '%s': no %s backend given (NULL)", src ? src->name : "",
                       dst ? dst->name : "", backend_src ? "destination" : "source");
    }
    /* tg_tensor_copy's checks, before a backend queues anything */
    enum tg_status st = tg_tensor_check_access(src);
    if (st == TG_OK) st = tg_tensor_check_access(dst);
    if (st != TG_OK) return st;
    if (tg_nbytes(src) != tg_nbytes(dst)) {
        return tg_fail(TG_ERR_INVALID, "copy_async '%s' -> '%s': sizes differ (%zu vs %zu bytes)", src->name,
                       dst->name, tg_nbytes(src), tg_nbytes(dst));
    }
    if (backend_dst->iface.cpy_tensor_async && backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst)) {
        return TG_OK;
    }
    tg_backend_synchronize(backend_src);
    tg_backend_synchronize(backend_dst);
    return tg_tensor_copy(src, dst);
}

void tg_backend_synchronize(tg_backend *backend) {
    if (backend->iface.synchronize) backend->iface.synchronize(backend);
}

enum tg_status tg_backend_take_failure(tg_backend *backend) {
    return backend && backend->iface.take_failure ? backend->iface.take_failure(backend) : TG_OK;
}

enum tg_status tg_backend_graph_compute(tg_backend *backend, struct tg_graph *graph) {
    if (!backend || !graph) {
        return tg_fail(TG_ERR_INVALID, "tg_backend_graph_compute: no %s given (NULL)", backend ? "graph" : "backend");
    }
    enum tg_status st = tg_graph_check_allocated(graph);
    return st == TG_OK ? backend->iface.graph_compute(backend, graph) : st;
}

bool tg_backend_supports_op(tg_backend *backend, const struct tg_tensor *op) {
    return backend->iface.supports_op(backend, op);
}

bool tg_backend_supports_buft(tg_backend *backend, tg_buffer_type *buft) {
    return backend->iface.supports_buft(backend, buft);
}

bool tg_backend_offload_op(tg_backend *backend, const struct tg_tensor *op) {
    return backend->iface.offload_op && backend->iface.offload_op(backend, op);
}

tg_event *tg_event_new(tg_backend *backend) {
    return backend && backend->iface.event_new ? backend->iface.event_new(backend) : NULL;
}

void tg_event_free(tg_event *event) {
    if (event && event->backend->iface.event_free) event->backend->iface.event_free(event);
}

/* Void entry points, as ggml's: a refusal leaves its message in tg_last_error(). */
void tg_event_record(tg_event *event, tg_backend *backend) {
    if (!event) return; /* a backend without events made none: nothing to record */
    if (!backend) {
        tg_fail(TG_ERR_INVALID, "tg_event_record: no backend given (NULL) for the event of '%s'; not recorded",
                tg_backend_name(event->backend));
        return;
    }
    if (!backend->iface.event_record) return;
    /* an event's context is its own kind's (a sim's, a watch's, CUDA's): another kind would misread it */
    if (event->backend->iface.event_record != backend->iface.event_record) {
        tg_fail(TG_ERR_INVALID, "tg_event_record: the event was made by backend '%s' and cannot be recorded on "
                "'%s', a backend of another kind (a watch and the backend it wraps count as two kinds); "
                "record it on a backend of its kind, or make one with tg_event_new('%s')", tg_backend_name(event->backend),
                tg_backend_name(backend), tg_backend_name(backend));
        return;
    }
    backend->iface.event_record(event, backend);
}

void tg_event_wait(tg_backend *backend, tg_event *event) {
    if (!event) return;
    if (!backend) {
        tg_fail(TG_ERR_INVALID, "tg_event_wait: no backend given (NULL) to wait for the event of '%s'",
                tg_backend_name(event->backend));
        return;
    }
    if (backend->iface.event_wait) backend->iface.event_wait(backend, event);
    else tg_event_synchronize(event); /* a backend without events runs on the host: the host waits */
}

void tg_event_synchronize(tg_event *event) {
    if (event && event->backend->iface.event_synchronize) event->backend->iface.event_synchronize(event);
}

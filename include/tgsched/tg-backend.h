/* tgsched backend interface: buffer types, buffers, backends, events.
 *
 * A buffer type says how to allocate memory of one kind (alignment, max size,
 * padded size per tensor).  A buffer is one allocation; tensors are bound to it
 * at an address.  A backend computes graphs whose tensors live in buffers it can
 * use.  Backend authors fill the *_iface tables; users call the tg_* functions.
 *
 * Tensor data access (tg_tensor_set/get/memset/copy) checks binding, bounds, the host pointer and
 * staleness and fails with a message naming the tensor. */
#ifndef TG_BACKEND_H
#define TG_BACKEND_H

#include "tg.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_buffer_type tg_buffer_type;
typedef struct tg_buffer tg_buffer;
typedef struct tg_backend tg_backend;
typedef struct tg_event tg_event;

enum tg_buffer_usage {
    TG_BUFFER_USAGE_ANY = 0,
    TG_BUFFER_USAGE_WEIGHTS = 1, /* steers the scheduler: ops follow weights */
    TG_BUFFER_USAGE_COMPUTE = 2, /* owned by a graph allocator; plans rebind it */
};

/* ---- interface tables (for backend authors) ------------------------------- */

struct tg_buffer_type_iface {
    const char *(*get_name)(tg_buffer_type *buft);
    /* NULL with tg_fail() set on failure.  size 0 is legal (empty buffer). */
    tg_buffer *(*alloc_buffer)(tg_buffer_type *buft, size_t size);
    size_t (*get_alignment)(tg_buffer_type *buft);
    size_t (*get_max_size)(tg_buffer_type *buft);                          /* NULL: SIZE_MAX */
    /* NULL: tg_nbytes.  Never fewer bytes than tg_nbytes: tg_buft_get_alloc_size
     * answers at least that whatever this returns (ggml asserts it). */
    size_t (*get_alloc_size)(tg_buffer_type *buft, const struct tg_tensor *t);
    bool (*is_host)(tg_buffer_type *buft);                                 /* NULL: false */
};

struct tg_buffer_type {
    struct tg_buffer_type_iface iface;
    tg_backend *owner; /* backend this type belongs to, may be NULL */
    void *context;
};

struct tg_buffer_iface {
    void (*free_buffer)(tg_buffer *buf); /* frees the context; tg_buffer_free frees the struct */
    void *(*get_base)(tg_buffer *buf);
    enum tg_status (*init_tensor)(tg_buffer *buf, struct tg_tensor *t); /* optional */
    void (*memset_tensor)(tg_buffer *buf, struct tg_tensor *t, uint8_t value, size_t offset, size_t size);
    void (*set_tensor)(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor)(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t offset, size_t size);
    /* Copy src (in any buffer) into dst (in this buffer); false if not possible. Optional. */
    bool (*cpy_tensor)(tg_buffer *buf, const struct tg_tensor *src, struct tg_tensor *dst);
    void (*clear)(tg_buffer *buf, uint8_t value);
    void (*reset)(tg_buffer *buf); /* optional: forget per-tensor state */
};

struct tg_buffer {
    struct tg_buffer_iface iface;
    tg_buffer_type *buft;
    void *context;
    size_t size;
    enum tg_buffer_usage usage;
    /* Bumped by tg_buffer_begin_plan(): every tensor bound before is stale. */
    uint64_t generation;
};

struct tg_backend_iface {
    const char *(*get_name)(tg_backend *backend);
    void (*free)(tg_backend *backend);
    tg_buffer_type *(*get_default_buffer_type)(tg_backend *backend);
    /* Asynchronous tensor access, optional (NULL: synchronous fallback). */
    void (*set_tensor_async)(tg_backend *backend, struct tg_tensor *t, const void *data, size_t offset, size_t size);
    void (*get_tensor_async)(tg_backend *backend, const struct tg_tensor *t, void *data, size_t offset, size_t size);
    /* Copy src into dst (in backend_dst's memory), called on backend_dst; false
     * if not possible. Optional.  As CUDA's: a source in device memory is
     * copied on backend_src's queue (after the work queued there, before any
     * queued later) and backend_dst's queue waits for the copy; a source in
     * host memory is read once backend_src has finished writing it, and
     * written on backend_dst's queue. */
    bool (*cpy_tensor_async)(tg_backend *backend_src, tg_backend *backend_dst, const struct tg_tensor *src,
                             struct tg_tensor *dst);
    void (*synchronize)(tg_backend *backend); /* optional */
    /* May return before the work is done; takes what it needs of the graph's
     * tensors at the call (the caller may change or free them right after).
     * Compute none of these nodes of the graph (the scheduler passes a
     * split, its nodes without leafs): views and TG_OP_NONE (no work), and
     * nodes flagged TG_FLAG_NO_COMPUTE (planned, never computed). */
    enum tg_status (*graph_compute)(tg_backend *backend, struct tg_graph *graph);
    bool (*supports_op)(tg_backend *backend, const struct tg_tensor *op);
    bool (*supports_buft)(tg_backend *backend, tg_buffer_type *buft);
    /* The backend wants to run op even though its weights live in host memory. Optional. */
    bool (*offload_op)(tg_backend *backend, const struct tg_tensor *op);
    /* Events, optional (all NULL when the backend is synchronous). */
    tg_event *(*event_new)(tg_backend *backend);
    void (*event_free)(tg_event *event);
    void (*event_record)(tg_event *event, tg_backend *backend);
    void (*event_wait)(tg_backend *backend, tg_event *event);
    void (*event_synchronize)(tg_event *event);
    /* The first failure of queued work since the last take (a tg_fail: its
     * message in tg_last_error()), forgotten once taken; TG_OK when none.
     * Optional: a backend whose queued work can fail after graph_compute
     * returned also returns that failure from its next graph_compute. */
    enum tg_status (*take_failure)(tg_backend *backend);
};

struct tg_backend {
    struct tg_backend_iface iface;
    void *context;
};

struct tg_event {
    tg_backend *backend;
    void *context;
};

/* ---- buffer types ---------------------------------------------------------- */

const char *tg_buft_name(tg_buffer_type *buft);
tg_buffer *tg_buft_alloc_buffer(tg_buffer_type *buft, size_t size);
size_t tg_buft_get_alignment(tg_buffer_type *buft);
size_t tg_buft_get_max_size(tg_buffer_type *buft);
size_t tg_buft_get_alloc_size(tg_buffer_type *buft, const struct tg_tensor *t);
bool tg_buft_is_host(tg_buffer_type *buft);

/* ---- buffers --------------------------------------------------------------- */

/* For backend authors: fills a new buffer object (caller frees with tg_buffer_free). */
tg_buffer *tg_buffer_init(tg_buffer_type *buft, struct tg_buffer_iface iface, void *context, size_t size);
void tg_buffer_free(tg_buffer *buf); /* NULL is fine */
void *tg_buffer_get_base(tg_buffer *buf);
size_t tg_buffer_get_size(tg_buffer *buf);
tg_buffer_type *tg_buffer_get_type(tg_buffer *buf);
size_t tg_buffer_get_alignment(tg_buffer *buf);
size_t tg_buffer_get_alloc_size(tg_buffer *buf, const struct tg_tensor *t);
bool tg_buffer_is_host(tg_buffer *buf);
void tg_buffer_clear(tg_buffer *buf, uint8_t value);
void tg_buffer_reset(tg_buffer *buf);
void tg_buffer_set_usage(tg_buffer *buf, enum tg_buffer_usage usage);
enum tg_buffer_usage tg_buffer_get_usage(tg_buffer *buf);
/* A new plan is about to be bound: tensors bound earlier become stale. */
void tg_buffer_begin_plan(tg_buffer *buf);

/* A buffer made of several buffers (static allocation split at a max size).
 * Takes ownership of the parts; usage applies to all of them. */
tg_buffer *tg_multi_buffer_new(tg_buffer **parts, int n_parts);
bool tg_buffer_is_multi(tg_buffer *buf);

/* Binds t (not a view) at addr inside buf: checks the range (alignment is the
 * planner's job and the oracle's check).  For a multi-buffer, binds to the part
 * that holds addr. */
TG_NODISCARD enum tg_status tg_tensor_bind(struct tg_tensor *t, tg_buffer *buf, void *addr);
/* Binds a view to its root's buffer (root must be bound). */
TG_NODISCARD enum tg_status tg_tensor_view_bind(struct tg_tensor *t);

/* ---- tensor data ------------------------------------------------------------
 * All fail (status + message naming the tensor) when the tensor is unbound
 * (saying which call binds it), stale, the range is outside the tensor, or the
 * host pointer is NULL for a non-empty range. */
TG_NODISCARD enum tg_status tg_tensor_set(struct tg_tensor *t, const void *data, size_t offset, size_t size);
TG_NODISCARD enum tg_status tg_tensor_get(const struct tg_tensor *t, void *data, size_t offset, size_t size);
TG_NODISCARD enum tg_status tg_tensor_memset(struct tg_tensor *t, uint8_t value, size_t offset, size_t size);
/* Copy src into dst (same layout, any buffers). */
TG_NODISCARD enum tg_status tg_tensor_copy(const struct tg_tensor *src, struct tg_tensor *dst);
/* TG_OK when t is bound and not stale, otherwise the failure (with message). */
TG_NODISCARD enum tg_status tg_tensor_check_access(const struct tg_tensor *t);

/* ---- backends ---------------------------------------------------------------- */

const char *tg_backend_name(tg_backend *backend);
void tg_backend_free(tg_backend *backend); /* NULL is fine */
tg_buffer_type *tg_backend_get_default_buffer_type(tg_backend *backend);
tg_buffer *tg_backend_alloc_buffer(tg_backend *backend, size_t size);
size_t tg_backend_get_alignment(tg_backend *backend);
void tg_backend_tensor_set_async(tg_backend *backend, struct tg_tensor *t, const void *data, size_t offset, size_t size);
void tg_backend_tensor_get_async(tg_backend *backend, const struct tg_tensor *t, void *data, size_t offset, size_t size);
/* Copy between backends: async when possible, else synchronize both and copy. */
TG_NODISCARD enum tg_status tg_backend_tensor_copy_async(tg_backend *backend_src, tg_backend *backend_dst,
                                            const struct tg_tensor *src, struct tg_tensor *dst);
void tg_backend_synchronize(tg_backend *backend);
/* After a synchronize: the first failure of the work it waited for (see
 * take_failure), which the backend then no longer returns from its next
 * compute; TG_OK when none, or when the backend keeps none. */
TG_NODISCARD enum tg_status tg_backend_take_failure(tg_backend *backend);
/* A graph tg_gallocr_alloc_graph allocated is refused (TG_ERR_INVALID, naming
 * the tensor) once changed since in anything but the contents of memory, and
 * (TG_ERR_STALE) once its memory was planned for a later graph: allocate it
 * again (docs/allocator.md). */
TG_NODISCARD enum tg_status tg_backend_graph_compute(tg_backend *backend, struct tg_graph *graph);
bool tg_backend_supports_op(tg_backend *backend, const struct tg_tensor *op);
bool tg_backend_supports_buft(tg_backend *backend, tg_buffer_type *buft);
bool tg_backend_offload_op(tg_backend *backend, const struct tg_tensor *op);

tg_event *tg_event_new(tg_backend *backend); /* NULL when the backend has no events */
void tg_event_free(tg_event *event);
void tg_event_record(tg_event *event, tg_backend *backend);
void tg_event_wait(tg_backend *backend, tg_event *event);
void tg_event_synchronize(tg_event *event);

/* ---- static allocation ----------------------------------------------------------
 * Allocates every tensor of ctx that has no data and is not a view into buffers
 * of buft, starting a new buffer where the next tensor would pass the type's
 * max size (a tensor larger than the max gets a buffer of its own); views are
 * bound to their roots.  Returns a (multi-)buffer, or NULL: with *status TG_OK
 * when nothing needed memory, else the failure. */
tg_buffer *tg_alloc_ctx_tensors(struct tg_context *ctx, tg_buffer_type *buft, enum tg_status *status);
tg_buffer *tg_alloc_ctx_tensors_for_backend(struct tg_context *ctx, tg_backend *backend, enum tg_status *status);

#ifdef __cplusplus
}
#endif
#endif

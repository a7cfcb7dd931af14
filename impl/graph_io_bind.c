/* Binding a loaded file's pre-allocated tensors (buf=weights / buf=data).
 *
 * Per backend and placement kind, the roots of that placement are laid out one
 * after the other at the buffer type's alignment, in buffers no larger than the
 * type's max size; views of them are then bound to their roots.  With
 * reserve_only the memory is address space reserved with PROT_NONE and
 * MAP_NORESERVE, so a 7B graph's 4 GB of weights costs no RAM: the buffer keeps
 * the backend's buffer type (the scheduler sees weights "on" that backend),
 * only the memory behind it is ours, and its data calls fail loudly. */
#include "tg-io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- reserved address space --------------------------------------------------- */

struct reserved_memory {
    void *base;
    size_t size;
};

static void reserved_free(tg_buffer *buf) {
    struct reserved_memory *r = buf->context;
    munmap(r->base, r->size);
    free(r);
}

static void *reserved_base(tg_buffer *buf) { return ((struct reserved_memory *)buf->context)->base; }

/* The buffer interface cannot return a status from data calls, so the refusal
 * is recorded as the thread's last error and logged; the memory is never touched. */
static void refuse_data_access(const char *what, const struct tg_tensor *t) {
    tg_fail(TG_ERR_UNSUPPORTED, "%s of tensor '%s': it lives in reserved address space (tg_file_bind_external "
            "with reserve_only), which has no memory behind it; bind without reserve_only to read or write data",
            what, t ? t->name : "");
    tg_logf("tgsched: %s\n", tg_last_error());
}

static void reserved_memset(tg_buffer *buf, struct tg_tensor *t, uint8_t value, size_t offset, size_t size) {
    (void)buf, (void)value, (void)offset, (void)size;
    refuse_data_access("memset", t);
}

static void reserved_set(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    (void)buf, (void)data, (void)offset, (void)size;
    refuse_data_access("set", t);
}

static void reserved_get(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    (void)buf, (void)offset;
    memset(data, 0, size); /* the caller gets defined bytes, never stale host memory */
    refuse_data_access("get", t);
}

/* Claims the copy so no fallback writes into the reserved pages. */
static bool reserved_cpy(tg_buffer *buf, const struct tg_tensor *src, struct tg_tensor *dst) {
    (void)buf, (void)src;
    refuse_data_access("copy into", dst);
    return true;
}

static void reserved_clear(tg_buffer *buf, uint8_t value) {
    (void)buf, (void)value;
    refuse_data_access("clear", NULL);
}

static tg_buffer *reserved_buffer_new(tg_buffer_type *buft, size_t size) {
    struct reserved_memory *r = malloc(sizeof *r);
    if (!r) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a reserved buffer");
        return NULL;
    }
    r->size = size;
    r->base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r->base == MAP_FAILED) {
        int err = errno;
        free(r);
        tg_fail(TG_ERR_ALLOC, "cannot reserve %zu bytes of address space: %s", size, strerror(err));
        return NULL;
    }
    struct tg_buffer_iface iface = {
        .free_buffer = reserved_free,
        .get_base = reserved_base,
        .memset_tensor = reserved_memset,
        .set_tensor = reserved_set,
        .get_tensor = reserved_get,
        .cpy_tensor = reserved_cpy,
        .clear = reserved_clear,
    };
    tg_buffer *buf = tg_buffer_init(buft, iface, r, size);
    if (!buf) {
        munmap(r->base, r->size);
        free(r);
    }
    return buf;
}

/* ---- layout --------------------------------------------------------------------- */

static bool add_buffer(struct tg_file *f, tg_buffer *buf) {
    tg_buffer **more = realloc(f->buffers, (size_t)(f->n_buffers + 1) * sizeof *more);
    if (!more) return false;
    f->buffers = more;
    f->buffers[f->n_buffers++] = buf;
    return true;
}

static bool is_root_of(const struct tg_file_tensor *r, int backend, enum tg_placement placement) {
    return r->placement == placement && r->placement_backend == backend && !r->tensor->view_src;
}

static size_t align_up(size_t x, size_t alignment) { return (x + alignment - 1) / alignment * alignment; }

/* Allocates one buffer for the records [first, last] that have this placement and
 * binds them, in file order. */
static enum tg_status bind_group(struct tg_file *f, tg_buffer_type *buft, int backend, enum tg_placement placement,
                                 int first, int last, size_t size, bool reserve_only) {
    tg_buffer *buf = reserve_only ? reserved_buffer_new(buft, size) : tg_buft_alloc_buffer(buft, size);
    if (!buf) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_last_error());
        return tg_fail(TG_ERR_ALLOC, "cannot allocate %zu bytes of %s for backend '%s' (buffer type '%s'): %s",
                       size, placement == TG_PLACE_WEIGHTS ? "weights" : "data", f->backend_names[backend],
                       tg_buft_name(buft), why);
    }
    if (!add_buffer(f, buf)) {
        tg_buffer_free(buf);
        return tg_fail(TG_ERR_ALLOC, "out of host memory for the file's buffer list");
    }
    tg_buffer_set_usage(buf, placement == TG_PLACE_WEIGHTS ? TG_BUFFER_USAGE_WEIGHTS : TG_BUFFER_USAGE_ANY);
    size_t alignment = tg_buft_get_alignment(buft);
    size_t offset = 0;
    uint8_t *base = tg_buffer_get_base(buf);
    for (int i = first; i <= last; i++) {
        struct tg_file_tensor *r = &f->tensors[i];
        if (!is_root_of(r, backend, placement)) continue;
        offset = align_up(offset, alignment);
        enum tg_status st = tg_tensor_bind(r->tensor, buf, base + offset);
        if (st != TG_OK) return st;
        offset += tg_buft_get_alloc_size(buft, r->tensor);
    }
    return TG_OK;
}

/* Lays out all roots of one placement on one backend, starting a new buffer where
 * the next tensor would pass the type's max size. */
static enum tg_status bind_placement(struct tg_file *f, tg_buffer_type *buft, int backend,
                                     enum tg_placement placement, bool reserve_only) {
    size_t alignment = tg_buft_get_alignment(buft);
    size_t max_size = tg_buft_get_max_size(buft);
    if (alignment == 0) alignment = 1;
    int first = -1, last = -1;
    size_t size = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *r = &f->tensors[i];
        if (!is_root_of(r, backend, placement)) continue;
        size_t bytes = tg_buft_get_alloc_size(buft, r->tensor);
        size_t start = align_up(size, alignment);
        bool overflow = start < size || start + bytes < start;
        if (first >= 0 && (overflow || start + bytes > max_size)) {
            enum tg_status st = bind_group(f, buft, backend, placement, first, last, size, reserve_only);
            if (st != TG_OK) return st;
            /* the next group starts at offset 0 */
            // NOLINTBEGIN(clang-analyzer-deadcode.DeadStores)
            first = -1;
            size = 0;
            start = 0;
            // NOLINTEND(clang-analyzer-deadcode.DeadStores)
        }
        if (first < 0) first = i;
        last = i;
        size = start + bytes;
    }
    if (first < 0) return TG_OK;
    return bind_group(f, buft, backend, placement, first, last, size, reserve_only);
}

enum tg_status tg_file_bind_external(struct tg_file *f, tg_backend **backends, int n_backends, bool reserve_only) {
    if (!f) return tg_fail(TG_ERR_INVALID, "tg_file_bind_external: NULL file");
    if (!backends || n_backends < 1 || !backends[n_backends - 1]) {
        return tg_fail(TG_ERR_INVALID, "tg_file_bind_external needs at least one backend, the last one not NULL "
                       "(it serves every backend name without its own entry)");
    }
    if (f->n_buffers > 0) {
        return tg_fail(TG_ERR_INVALID, "tg_file_bind_external: the file's tensors are already bound (call it once "
                       "per loaded file)");
    }
    enum tg_status st = TG_OK;
    for (int b = 0; b < f->n_backends && st == TG_OK; b++) {
        tg_backend *backend = b < n_backends && backends[b] ? backends[b] : backends[n_backends - 1];
        tg_buffer_type *buft = tg_backend_get_default_buffer_type(backend);
        if (!buft) {
            st = tg_fail(TG_ERR_INVALID, "backend '%s' (for '%s') has no default buffer type", tg_backend_name(backend),
                         f->backend_names[b]);
            break;
        }
        st = bind_placement(f, buft, b, TG_PLACE_WEIGHTS, reserve_only);
        if (st == TG_OK) st = bind_placement(f, buft, b, TG_PLACE_DATA, reserve_only);
    }
    for (int i = 0; i < f->n_tensors && st == TG_OK; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (t->view_src && t->view_src->buffer && !t->buffer) st = tg_tensor_view_bind(t);
    }
    if (st != TG_OK) {
        /* Leave the file as it was: unbound, no buffers. */
        for (int i = 0; i < f->n_tensors; i++) {
            struct tg_tensor *t = f->tensors[i].tensor;
            for (int k = 0; k < f->n_buffers; k++) {
                if (t->buffer == f->buffers[k] || (t->view_src && t->view_src->buffer == f->buffers[k])) {
                    t->buffer = NULL;
                    t->data = NULL;
                    t->bind_generation = 0;
                }
            }
        }
        for (int k = 0; k < f->n_buffers; k++) tg_buffer_free(f->buffers[k]);
        free(f->buffers);
        f->buffers = NULL;
        f->n_buffers = 0;
    }
    return st;
}

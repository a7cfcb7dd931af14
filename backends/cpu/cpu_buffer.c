/* Host buffers: aligned heap memory (64 bytes by default, any power of two on
 * request) and buffers over caller memory. */
#include "tg-cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct host_buft {
    tg_buffer_type buft; /* first member */
    size_t alignment;
    char name[32];
};

struct host_mem {
    void *base;
    bool owned;
};

static void host_free(tg_buffer *buf) {
    struct host_mem *m = buf->context;
    if (m->owned) free(m->base);
    free(m);
}

static void *host_base(tg_buffer *buf) { return ((struct host_mem *)buf->context)->base; }

static void host_memset(tg_buffer *buf, struct tg_tensor *t, uint8_t v, size_t off, size_t n) {
    (void)buf;
    memset((uint8_t *)t->data + off, v, n);
}

static void host_set(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t off, size_t n) {
    (void)buf;
    memcpy((uint8_t *)t->data + off, data, n);
}

static void host_get(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t off, size_t n) {
    (void)buf;
    memcpy(data, (const uint8_t *)t->data + off, n);
}

static bool host_cpy(tg_buffer *buf, const struct tg_tensor *src, struct tg_tensor *dst) {
    (void)buf;
    if (!src->buffer || !tg_buffer_is_host(src->buffer)) return false;
    memmove(dst->data, src->data, tg_nbytes(src)); /* two views of one tensor may overlap */
    return true;
}

static void host_clear(tg_buffer *buf, uint8_t v) { memset(host_base(buf), v, buf->size); }

static const struct tg_buffer_iface host_iface = {
    .free_buffer = host_free, .get_base = host_base, .memset_tensor = host_memset, .set_tensor = host_set,
    .get_tensor = host_get, .cpy_tensor = host_cpy, .clear = host_clear,
};

static const char *host_name(tg_buffer_type *b) { return ((struct host_buft *)b)->name; }
static size_t host_alignment(tg_buffer_type *b) { return ((struct host_buft *)b)->alignment; }
static bool host_is_host(tg_buffer_type *b) { (void)b; return true; }

/* Buffers of megabytes (weights, KV caches) ask for 2 MiB pages: a first
 * touch then faults once per 2 MiB instead of once per 4 KiB, which on a
 * virtual machine is most of the time it takes to fill gigabytes. */
#define HUGE_PAGE ((size_t)2 << 20)

static tg_buffer *host_alloc(tg_buffer_type *b, size_t size) {
    size_t align = host_alignment(b);
    if (size >= 2 * HUGE_PAGE && align < HUGE_PAGE) align = HUGE_PAGE;
    if (size > SIZE_MAX - (align - 1)) {
        tg_fail(TG_ERR_ALLOC, "CPU buffer of %zu bytes: more than the address space holds", size);
        return NULL;
    }
    size_t rounded = (size + align - 1) / align * align;
    struct host_mem *m = calloc(1, sizeof *m);
    void *base = m ? aligned_alloc(align, rounded ? rounded : align) : NULL;
#ifdef MADV_HUGEPAGE
    if (base && align == HUGE_PAGE) madvise(base, rounded, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
    if (!base) {
        free(m);
        tg_fail(TG_ERR_ALLOC, "out of host memory: CPU buffer of %zu bytes", size);
        return NULL;
    }
    m->base = base;
    m->owned = true;
    tg_buffer *buf = tg_buffer_init(b, host_iface, m, size);
    if (!buf) {
        free(base);
        free(m);
    }
    return buf;
}

#define MAX_ALIGNED_TYPES 16
static struct host_buft host_types[MAX_ALIGNED_TYPES];
static int n_host_types;
static pthread_mutex_t host_types_lock = PTHREAD_MUTEX_INITIALIZER;

tg_buffer_type *tg_cpu_buffer_type_aligned(size_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) || alignment < sizeof(void *)) {
        tg_fail(TG_ERR_INVALID, "CPU buffer type: alignment %zu must be a power of two >= %zu", alignment, sizeof(void *));
        return NULL;
    }
    pthread_mutex_lock(&host_types_lock);
    tg_buffer_type *found = NULL;
    for (int i = 0; i < n_host_types && !found; i++) {
        if (host_types[i].alignment == alignment) found = &host_types[i].buft;
    }
    if (!found && n_host_types < MAX_ALIGNED_TYPES) {
        struct host_buft *h = &host_types[n_host_types++];
        h->alignment = alignment;
        if (alignment == TG_CPU_ALIGNMENT) snprintf(h->name, sizeof h->name, "CPU");
        else snprintf(h->name, sizeof h->name, "CPU_align%zu", alignment);
        h->buft.iface = (struct tg_buffer_type_iface){
            .get_name = host_name, .alloc_buffer = host_alloc, .get_alignment = host_alignment, .is_host = host_is_host};
        found = &h->buft;
    }
    pthread_mutex_unlock(&host_types_lock);
    if (!found) tg_fail(TG_ERR_INVALID, "CPU buffer type: too many distinct alignments requested");
    return found;
}

tg_buffer_type *tg_cpu_buffer_type(void) { return tg_cpu_buffer_type_aligned(TG_CPU_ALIGNMENT); }

tg_buffer *tg_cpu_buffer_from_ptr(void *ptr, size_t size) {
    if (!ptr && size > 0) { /* its tensors would be bound at null addresses */
        tg_fail(TG_ERR_INVALID, "CPU buffer over caller memory: the pointer is NULL for %zu bytes", size);
        return NULL;
    }
    struct host_mem *m = calloc(1, sizeof *m);
    if (!m) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a buffer object");
        return NULL;
    }
    m->base = ptr;
    m->owned = false;
    tg_buffer *buf = tg_buffer_init(tg_cpu_buffer_type(), host_iface, m, size);
    if (!buf) free(m);
    return buf;
}

/* Host buffer types with the knobs the planner must honour: alignment, max
 * buffer size (chunking) and an op whose tensors need extra bytes. */
#include "tg-gen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct tg_gen_buft *gen_buft_of(tg_buffer_type *b) { return (struct tg_gen_buft *)b; }

static const char *gen_buft_name(tg_buffer_type *b) { return gen_buft_of(b)->name; }
static size_t gen_buft_alignment(tg_buffer_type *b) { return gen_buft_of(b)->alignment; }
static size_t gen_buft_max_size(tg_buffer_type *b) {
    return gen_buft_of(b)->max_size ? gen_buft_of(b)->max_size : SIZE_MAX;
}
static bool gen_buft_is_host(tg_buffer_type *b) {
    (void)b;
    return true;
}
static size_t gen_buft_alloc_size(tg_buffer_type *b, const struct tg_tensor *t) {
    struct tg_gen_buft *g = gen_buft_of(b);
    const size_t bytes = tg_nbytes(t), pad = t->op == g->padded_op ? g->pad_bytes : 0;
    return bytes > SIZE_MAX - pad ? SIZE_MAX : bytes + pad; /* too large for any buffer: said when reserved */
}

static void gen_buffer_free(tg_buffer *b) { free(b->context); }
static void *gen_buffer_base(tg_buffer *b) { return b->context; }
static void gen_buffer_set(tg_buffer *b, struct tg_tensor *t, const void *data, size_t off, size_t n) {
    (void)b;
    memcpy((char *)t->data + off, data, n);
}
static void gen_buffer_get(tg_buffer *b, const struct tg_tensor *t, void *data, size_t off, size_t n) {
    (void)b;
    memcpy(data, (const char *)t->data + off, n);
}
static void gen_buffer_memset(tg_buffer *b, struct tg_tensor *t, uint8_t v, size_t off, size_t n) {
    (void)b;
    memset((char *)t->data + off, v, n);
}
static void gen_buffer_clear(tg_buffer *b, uint8_t v) { memset(b->context, v, b->size); }

/* ---- logging init_tensor and reset hooks ------------------------------------------- */

static void hook_log_add(tg_buffer *buf, const struct tg_tensor *t) {
    struct tg_gen_hook_log *log = gen_buft_of(buf->buft)->hooks;
    if (!log) return;
    if (log->n == log->cap) {
        int cap = log->cap ? log->cap * 2 : 64;
        struct tg_gen_hook_event *grown = realloc(log->events, (size_t)cap * sizeof *grown);
        if (!grown) {
            log->overflow = true;
            return;
        }
        log->events = grown;
        log->cap = cap;
    }
    log->events[log->n++] = (struct tg_gen_hook_event){buf, t, t ? t->data : NULL};
}

static enum tg_status hook_init_tensor(tg_buffer *buf, struct tg_tensor *t) {
    hook_log_add(buf, t);
    return TG_OK;
}

static void hook_reset(tg_buffer *buf) { hook_log_add(buf, NULL); }

static void install_hooks(tg_buffer *buf, const struct tg_gen_buft *b) {
    if (!b->hooks) return;
    buf->iface.init_tensor = hook_init_tensor;
    buf->iface.reset = hook_reset;
}

void tg_gen_buft_log_hooks(struct tg_gen_buft *b, struct tg_gen_hook_log *log, tg_buffer *buf) {
    b->hooks = log;
    if (buf) install_hooks(buf, b);
}

void tg_gen_hook_log_free(struct tg_gen_hook_log *log) {
    free(log->events);
    memset(log, 0, sizeof *log);
}

/* ---- address-only buffers: the planner's view of a big device ---------------------- */

struct address_only_memory {
    void *base;
    size_t mapped; /* 0: carved from the shared reservation */
};

/* Address-only buffers are carved in turn from one reservation of address
 * space per process, which starts over when none is live, instead of an
 * mmap and a munmap each: under AFL++ those two calls (a case binds two or
 * three buffers) were about 4% of fuzz_alloc's time.  Every buffer is
 * followed by at least a page of the reservation that no buffer uses, so an
 * access past its end still faults; a buffer larger than what is left, or a
 * process that cannot reserve the space (sanitizers with small address
 * layouts), gets a mapping of its own as before. */
#define ADDRESS_RESERVATION_BYTES ((size_t)1 << 33) /* 8 GiB of address space, no memory */
#define ADDRESS_GUARD_BYTES ((size_t)4096)
static struct {
    pthread_mutex_t lock;
    char *base; /* NULL until first used; MAP_FAILED when refused */
    size_t used;
    int live;
} address_reservation = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* Address space without memory behind it: any access faults. */
static void *map_address_space(size_t bytes) {
    return mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

/* An aligned range of the reservation, or NULL (then the caller maps its own). */
static void *address_reservation_take(size_t size, size_t align) {
    void *at = NULL;
    pthread_mutex_lock(&address_reservation.lock);
    if (!address_reservation.base)
        address_reservation.base = map_address_space(ADDRESS_RESERVATION_BYTES);
    if (address_reservation.base != MAP_FAILED) {
        const uintptr_t base = (uintptr_t)address_reservation.base;
        const size_t start = ((base + address_reservation.used + align - 1) / align * align) - base;
        if (start <= ADDRESS_RESERVATION_BYTES && size <= ADDRESS_RESERVATION_BYTES - start &&
            ADDRESS_GUARD_BYTES <= ADDRESS_RESERVATION_BYTES - start - size) {
            at = address_reservation.base + start;
            address_reservation.used = start + size + ADDRESS_GUARD_BYTES;
            address_reservation.live++;
        }
    }
    pthread_mutex_unlock(&address_reservation.lock);
    return at;
}

static void address_reservation_give_back(void) {
    pthread_mutex_lock(&address_reservation.lock);
    if (--address_reservation.live == 0) address_reservation.used = 0;
    pthread_mutex_unlock(&address_reservation.lock);
}

static void address_only_memory_free(struct address_only_memory *m) {
    if (m->mapped) munmap(m->base, m->mapped);
    else address_reservation_give_back();
    free(m);
}

static void address_only_free(tg_buffer *b) { address_only_memory_free(b->context); }
static void *address_only_base(tg_buffer *b) { return ((struct address_only_memory *)b->context)->base; }
static void address_only_refuse(const struct tg_tensor *t) {
    tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s' lives in an address-only buffer (planning only): its data cannot be "
            "read or written", t ? t->name : "");
}
static void address_only_set(tg_buffer *b, struct tg_tensor *t, const void *d, size_t o, size_t n) {
    (void)b, (void)d, (void)o, (void)n;
    address_only_refuse(t);
}
static void address_only_get(tg_buffer *b, const struct tg_tensor *t, void *d, size_t o, size_t n) {
    (void)b, (void)o;
    memset(d, 0, n);
    address_only_refuse(t);
}
static void address_only_memset(tg_buffer *b, struct tg_tensor *t, uint8_t v, size_t o, size_t n) {
    (void)b, (void)v, (void)o, (void)n;
    address_only_refuse(t);
}
static void address_only_clear(tg_buffer *b, uint8_t v) { (void)b, (void)v; }

static tg_buffer *address_only_alloc(tg_buffer_type *b, size_t size) {
    struct address_only_memory *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    size_t align = gen_buft_of(b)->alignment;
    m->base = address_reservation_take(size ? size : 1, align > 1 ? align : 1);
    if (!m->base) {
        /* mmap is page aligned; alignments beyond a page are not used by the generator */
        m->mapped = size ? size + align : align;
        m->base = map_address_space(m->mapped);
        if (m->base == MAP_FAILED) {
            free(m);
            tg_fail(TG_ERR_ALLOC, "buffer type '%s': cannot reserve %zu bytes of address space", gen_buft_of(b)->name,
                    size);
            return NULL;
        }
    }
    struct tg_buffer_iface iface = {
        .free_buffer = address_only_free,
        .get_base = address_only_base,
        .memset_tensor = address_only_memset,
        .set_tensor = address_only_set,
        .get_tensor = address_only_get,
        .clear = address_only_clear,
    };
    tg_buffer *buf = tg_buffer_init(b, iface, m, size);
    if (!buf) address_only_memory_free(m);
    else install_hooks(buf, gen_buft_of(b));
    return buf;
}

static tg_buffer *gen_buft_alloc(tg_buffer_type *b, size_t size) {
    if (gen_buft_of(b)->address_only) return address_only_alloc(b, size);
    size_t align = gen_buft_of(b)->alignment;
    if (align < sizeof(void *)) align = sizeof(void *);
    void *mem = NULL;
    /* Rounded up so that aligned_alloc-style rules hold; zeroed so that bytes a
     * plan never writes read the same in every run. */
    size_t bytes = size ? (size + align - 1) / align * align : align;
    if (posix_memalign(&mem, align, bytes) != 0) {
        tg_fail(TG_ERR_ALLOC, "buffer type '%s': cannot allocate %zu bytes", gen_buft_of(b)->name, size);
        return NULL;
    }
    memset(mem, 0, bytes);
    struct tg_buffer_iface iface = {
        .free_buffer = gen_buffer_free,
        .get_base = gen_buffer_base,
        .memset_tensor = gen_buffer_memset,
        .set_tensor = gen_buffer_set,
        .get_tensor = gen_buffer_get,
        .clear = gen_buffer_clear,
    };
    tg_buffer *buf = tg_buffer_init(b, iface, mem, size);
    if (!buf) free(mem);
    else install_hooks(buf, gen_buft_of(b));
    return buf;
}

void tg_gen_buft_init(struct tg_gen_buft *b, const char *name, size_t alignment, size_t max_size,
                      enum tg_op padded_op, size_t pad_bytes) {
    memset(b, 0, sizeof *b);
    b->buft.iface = (struct tg_buffer_type_iface){
        .get_name = gen_buft_name,
        .alloc_buffer = gen_buft_alloc,
        .get_alignment = gen_buft_alignment,
        .get_max_size = gen_buft_max_size,
        .get_alloc_size = gen_buft_alloc_size,
        .is_host = gen_buft_is_host,
    };
    b->buft.context = b;
    b->alignment = alignment ? alignment : 1;
    b->max_size = max_size;
    b->padded_op = padded_op;
    b->pad_bytes = pad_bytes;
    snprintf(b->name, sizeof b->name, "%s", name);
}

void tg_gen_buft_make_address_only(struct tg_gen_buft *b) {
    b->address_only = true;
    b->buft.iface.is_host = NULL; /* no host access */
}

void tg_gen_buft_init_address_only(struct tg_gen_buft *b, const char *name, size_t alignment) {
    tg_gen_buft_init(b, name, alignment, 0, TG_OP_COUNT, 0);
    tg_gen_buft_make_address_only(b);
}

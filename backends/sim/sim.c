/* A simulated discrete device (docs/testing.md, "The race detector").
 *
 * Its memory is guarded: only the device's own work opens it (its worker
 * while it runs queued items, closing it again when the queue runs empty or
 * before it blocks on an event; a synchronous access or another queue's copy
 * while it makes that access), so any other host dereference of device memory
 * faults.  (Closing after every item cost more than the items themselves.)
 * The guard is mprotect (PROT_NONE when closed, a SIGSEGV on access); in ASan
 * builds buffers up to POISON_GUARD_MAX are guarded by ASan poisoning instead
 * (a use-after-poison report on access): each mprotect is a TLB shootdown to
 * every core running one of our threads, which was most of fuzz_sched's time,
 * while poisoning writes shadow memory only, one byte per 8, so large buffers
 * keep mprotect.
 *
 * The semantics are those of a CUDA device with one stream (tg-sim.h): graph
 * computes, async sets and gets, copies and event records and waits are items
 * of the device's queue; synchronous tensor access happens at once on the
 * calling thread, ordered with nothing queued.  Every access is also told to
 * the race detector when it is issued (sim_race.c).  Kernels are the CPU's, so
 * results equal the CPU bit for bit. */
#include "sim-impl.h"

#include "tg-cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif
#ifdef SIM_ASAN
#include <sanitizer/asan_interface.h>
#define POISON_GUARD_MAX ((size_t)16 << 20)
#else
#define POISON_GUARD_MAX ((size_t)0) /* never: no ASan to report the access */
#endif

struct sim_buffer {
    void *base;
    size_t mapped;
    struct sim_buffer *next_open; /* the device's list of mappings */
    bool open;                    /* accessible now (under the device's mem_lock) */
    bool poison_guard;            /* guarded by ASan poisoning, else by mprotect */
};

struct sim_device {
    int refs; /* atomic: the backend, each buffer and event (any of them may be freed last) */
    struct tg_sim_params params;
    char name[32];
    tg_buffer_type buft;
    tg_backend backend;
    struct sim_queue queue;
    pthread_mutex_t mem_lock;   /* the mapping list and its protection */
    struct sim_buffer *buffers; /* mappings to open while an item runs */
    int n_buffers_made;
    /* The first failure of a queued compute, kept (under error_lock) until a
     * graph_compute or tg_sim_synchronize returns it. */
    pthread_mutex_t error_lock;
    enum tg_status error;
    char error_msg[512];
    enum tg_status inject; /* atomic; tests: the next queued compute fails so on the worker */
    tg_sim_race *race;
    int agent; /* this queue in race */
    struct sim_device *next_sharing; /* in the list of host-sharing devices under a detector */
};

/* The logical (race detector) and physical (marks) sides of an event. */
struct sim_event {
    pthread_mutex_t lock; /* latest */
    struct sim_mark *latest;
    tg_sim_race *race;
    struct sim_race_event logical;
};

static struct sim_device *dev_of_backend(tg_backend *b) { return b->context; }
static struct sim_device *dev_of_buft(tg_buffer_type *t) { return t->context; }

static void device_ref(struct sim_device *d) { __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED); }
static void device_unref(struct sim_device *d);

struct sim_queue *sim_device_queue(struct sim_device *d) { return &d->queue; }

/* ---- device memory ------------------------------------------------------------------- */

static void guard_open(struct sim_buffer *b) {
#ifdef SIM_ASAN
    if (b->poison_guard) {
        ASAN_UNPOISON_MEMORY_REGION(b->base, b->mapped);
        return;
    }
#endif
    mprotect(b->base, b->mapped, PROT_READ | PROT_WRITE);
}

static void guard_close(struct sim_buffer *b) {
#ifdef SIM_ASAN
    if (b->poison_guard) {
        ASAN_POISON_MEMORY_REGION(b->base, b->mapped);
        return;
    }
#endif
    mprotect(b->base, b->mapped, PROT_NONE);
}

/* Under mem_lock: opens every mapping (a compute may touch any). */
static void open_all(struct sim_device *d) {
    if (d->params.share_host_buffer_type) return;
    for (struct sim_buffer *b = d->buffers; b; b = b->next_open) {
        if (!b->open) guard_open(b);
        b->open = true;
    }
}

/* Under mem_lock: opens the mapping holding at; returns it when this call opened it. */
static struct sim_buffer *open_at(struct sim_device *d, const void *at) {
    for (struct sim_buffer *b = d->buffers; b; b = b->next_open) {
        if ((const uint8_t *)at >= (uint8_t *)b->base && (const uint8_t *)at < (uint8_t *)b->base + b->mapped) {
            if (b->open) return NULL;
            guard_open(b);
            b->open = true;
            return b;
        }
    }
    return NULL;
}

static void close_memory(struct sim_device *d) {
    for (struct sim_buffer *b = d->buffers; b; b = b->next_open) {
        if (b->open) guard_close(b);
        b->open = false;
    }
}

void sim_device_idle(struct sim_device *d) {
    pthread_mutex_lock(&d->mem_lock);
    close_memory(d);
    pthread_mutex_unlock(&d->mem_lock);
}

/* What a copy or fill opened on a device that is not the runner's is closed again. */
static void close_opened(struct sim_device *runner, struct sim_device *d, struct sim_buffer *opened) {
    if (opened && d != runner) {
        guard_close(opened);
        opened->open = false;
    }
}

void sim_device_copy(struct sim_device *runner, struct sim_device *dst_dev, void *dst, struct sim_device *src_dev,
                     const void *src, size_t size) {
    if (dst_dev == src_dev) src_dev = NULL; /* one device: one lock */
    /* two devices: locks in address order, so two copies in opposite directions cannot deadlock */
    struct sim_device *first = dst_dev, *second = src_dev;
    if (first && second && (uintptr_t)second < (uintptr_t)first) {
        first = src_dev;
        second = dst_dev;
    }
    if (!first) {
        first = second;
        second = NULL;
    }
    if (first) pthread_mutex_lock(&first->mem_lock);
    if (second) pthread_mutex_lock(&second->mem_lock);
    struct sim_buffer *opened_dst = dst_dev ? open_at(dst_dev, dst) : NULL;
    struct sim_buffer *opened_src = src_dev ? open_at(src_dev, src) : NULL;
    memmove(dst, src, size); /* two views of one tensor may overlap */
    close_opened(runner, src_dev, opened_src);
    close_opened(runner, dst_dev, opened_dst);
    if (second) pthread_mutex_unlock(&second->mem_lock);
    if (first) pthread_mutex_unlock(&first->mem_lock);
}

static void device_fill(struct sim_device *d, void *dst, uint8_t value, size_t size) {
    pthread_mutex_lock(&d->mem_lock);
    struct sim_buffer *opened = open_at(d, dst);
    memset(dst, value, size);
    close_opened(NULL, d, opened);
    pthread_mutex_unlock(&d->mem_lock);
}

/* A queued compute failed on the worker: the first failure is kept, with its
 * node and reason (the worker's message), for the next call that can return it. */
static void note_failure(struct sim_device *d, const struct tg_tensor *node, enum tg_status st, const char *why) {
    pthread_mutex_lock(&d->error_lock);
    if (d->error == TG_OK) {
        d->error = st;
        snprintf(d->error_msg, sizeof d->error_msg, "node '%s' (op %s): %s", node->name, tg_op_name(node->op), why);
    }
    pthread_mutex_unlock(&d->error_lock);
}

/* The kept failure (TG_OK: none), as a tg_fail of the caller's thread; take clears it. */
static enum tg_status report_failure(struct sim_device *d, bool take) {
    pthread_mutex_lock(&d->error_lock);
    enum tg_status st = d->error;
    if (st != TG_OK) tg_fail(st, "sim device '%s': a queued compute failed: %s", d->name, d->error_msg);
    if (take) d->error = TG_OK;
    pthread_mutex_unlock(&d->error_lock);
    return st;
}

void sim_device_run_item(struct sim_device *d, struct sim_item *it) {
    if (it->kind == SIM_ITEM_COPY) {
        sim_device_copy(d, it->dst_dev, it->dst, it->src_dev, it->src, it->size);
        return;
    }
    enum tg_status inject = __atomic_exchange_n(&d->inject, TG_OK, __ATOMIC_RELAXED);
    pthread_mutex_lock(&d->mem_lock);
    open_all(d);
    for (int i = 0; i < it->n_nodes; i++) {
        /* an injected failure takes the first kernel's place, so that it takes a kernel failure's path */
        enum tg_status st = i == 0 && inject != TG_OK
                                ? tg_fail(inject, "injected failure (sim_device_fail_next_compute)")
                                : tg_cpu_compute_node(&it->nodes[i], 0, 1);
        if (st != TG_OK) note_failure(d, &it->nodes[i], st, tg_last_error()); /* the worker's own message */
    }
    pthread_mutex_unlock(&d->mem_lock);
}

/* The sim device whose guarded memory t lives in, or NULL (host memory, another backend's). */
static struct sim_device *guarded_owner(const struct tg_tensor *t);

/* ---- what the race detector is told ----------------------------------------------------- */

static struct sim_race_access range_of(const void *p, size_t size, bool write, const char *tensor, const char *op) {
    return (struct sim_race_access){(uintptr_t)p, (uintptr_t)p + size, write, tensor, op};
}

/* Both sides of a transfer issued on d's queue (queue true) or made by the host now. */
static void tell_transfer(struct sim_device *d, bool queue, const void *dst, const char *dst_name, const void *src,
                          const char *src_name, size_t size, const char *what) {
    if (!d->race) return;
    char op[160];
    snprintf(op, sizeof op, "%s on %s", what, queue ? d->name : "the host");
    struct sim_race_access acc[2] = {range_of(src, size, false, src_name, op), range_of(dst, size, true, dst_name, op)};
    if (queue) sim_race_issue(d->race, d->agent, acc, 2);
    else sim_race_host(d->race, acc, 2);
}

/* ---- buffers -------------------------------------------------------------------------- */

static void sim_buffer_free(tg_buffer *buf) {
    struct sim_device *d = dev_of_buft(buf->buft);
    struct sim_buffer *sb = buf->context;
    if (d->race) {
        /* as cudaFree: the owner's queue is waited for; any other queue must be done already */
        sim_race_host_wait_queue(d->race, d->agent);
        sim_race_memory_free(d->race, sb->base, buf->size);
    }
    sim_queue_drain(d);
    pthread_mutex_lock(&d->mem_lock);
    for (struct sim_buffer **p = &d->buffers; *p; p = &(*p)->next_open) {
        if (*p == sb) {
            *p = sb->next_open;
            break;
        }
    }
    pthread_mutex_unlock(&d->mem_lock);
    if (sb->poison_guard) guard_open(sb); /* the address range may be mapped again by anyone */
    munmap(sb->base, sb->mapped);
    free(sb);
    device_unref(d); /* the buffer's reference: the device may have been freed before it */
}

static void *sim_buffer_base(tg_buffer *buf) { return ((struct sim_buffer *)buf->context)->base; }

/* Synchronous access: at once, on the calling thread, ordered with nothing queued. */
static void sim_set_tensor(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    struct sim_device *d = dev_of_buft(buf->buft);
    uint8_t *dst = (uint8_t *)t->data + offset;
    char what[TG_MAX_NAME + 32];
    snprintf(what, sizeof what, "set of '%s'", t->name);
    tell_transfer(d, false, dst, t->name, data, "host memory", size, what);
    sim_device_copy(NULL, d, dst, NULL, data, size);
}

static void sim_get_tensor(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    struct sim_device *d = dev_of_buft(buf->buft);
    const uint8_t *src = (const uint8_t *)t->data + offset;
    char what[TG_MAX_NAME + 32];
    snprintf(what, sizeof what, "get of '%s'", t->name);
    tell_transfer(d, false, data, "host memory", src, t->name, size, what);
    sim_device_copy(NULL, NULL, data, d, src, size);
}

static void fill(struct sim_device *d, void *dst, uint8_t value, size_t size, const char *tensor) {
    if (d->race) {
        char op[TG_MAX_NAME + 48];
        snprintf(op, sizeof op, "memset of '%s' on the host", tensor);
        struct sim_race_access acc = range_of(dst, size, true, tensor, op);
        sim_race_host(d->race, &acc, 1);
    }
    device_fill(d, dst, value, size);
}

static void sim_memset_tensor(tg_buffer *buf, struct tg_tensor *t, uint8_t value, size_t offset, size_t size) {
    fill(dev_of_buft(buf->buft), (uint8_t *)t->data + offset, value, size, t->name);
}

static void sim_clear(tg_buffer *buf, uint8_t value) {
    fill(dev_of_buft(buf->buft), sim_buffer_base(buf), value, buf->size, "(the whole buffer)");
}

static tg_buffer *sim_alloc_buffer(tg_buffer_type *buft, size_t size) {
    struct sim_device *d = dev_of_buft(buft);
    if (d->params.max_buffer_size && size > d->params.max_buffer_size) {
        tg_fail(TG_ERR_ALLOC, "sim device '%s': buffer of %zu bytes exceeds its max buffer size %zu", d->name, size,
                d->params.max_buffer_size);
        return NULL;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - (page - 1)) {
        tg_fail(TG_ERR_ALLOC, "sim device '%s': buffer of %zu bytes is more than the address space holds", d->name, size);
        return NULL;
    }
    size_t mapped = size ? (size + page - 1) / page * page : page;
    struct sim_buffer *sb = calloc(1, sizeof *sb);
    const bool poison_guard = mapped <= POISON_GUARD_MAX;
    void *base = mmap(NULL, mapped, poison_guard ? PROT_READ | PROT_WRITE : PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!sb || base == MAP_FAILED) {
        free(sb);
        if (base != MAP_FAILED) munmap(base, mapped);
        tg_fail(TG_ERR_ALLOC, "sim device '%s': cannot map %zu bytes of device memory", d->name, size);
        return NULL;
    }
    sb->base = base;
    sb->mapped = mapped;
    sb->poison_guard = poison_guard;
    if (poison_guard) guard_close(sb);
    struct tg_buffer_iface iface = {
        .free_buffer = sim_buffer_free, .get_base = sim_buffer_base, .set_tensor = sim_set_tensor,
        .get_tensor = sim_get_tensor, .memset_tensor = sim_memset_tensor, .clear = sim_clear,
    };
    tg_buffer *buf = tg_buffer_init(buft, iface, sb, size);
    if (!buf) {
        if (poison_guard) guard_open(sb);
        munmap(base, mapped);
        free(sb);
        return NULL;
    }
    device_ref(d);
    pthread_mutex_lock(&d->mem_lock);
    sb->next_open = d->buffers;
    d->buffers = sb;
    int k = d->n_buffers_made++;
    pthread_mutex_unlock(&d->mem_lock);
    if (d->race) {
        char name[48];
        snprintf(name, sizeof name, "%s buffer #%d", d->name, k);
        sim_race_memory_add(d->race, base, size, name);
    }
    return buf;
}

static const char *sim_buft_name(tg_buffer_type *buft) { return dev_of_buft(buft)->name; }
static size_t sim_buft_alignment(tg_buffer_type *buft) { return dev_of_buft(buft)->params.alignment; }

static size_t sim_buft_max_size(tg_buffer_type *buft) {
    size_t m = dev_of_buft(buft)->params.max_buffer_size;
    return m ? m : SIZE_MAX;
}

static size_t sim_buft_alloc_size(tg_buffer_type *buft, const struct tg_tensor *t) {
    const size_t bytes = tg_nbytes(t), pad = dev_of_buft(buft)->params.alloc_pad;
    return bytes > SIZE_MAX - pad ? SIZE_MAX : bytes + pad; /* too large for any buffer: said when reserved */
}

static struct sim_device *guarded_owner(const struct tg_tensor *t) {
    const tg_buffer *buf = t->buffer;
    return buf && buf->buft->iface.alloc_buffer == sim_alloc_buffer ? dev_of_buft(buf->buft) : NULL;
}

/* ---- backend ---------------------------------------------------------------------------- */

static const char *sim_name(tg_backend *b) { return dev_of_backend(b)->name; }

static tg_buffer_type *sim_default_buft(tg_backend *b) {
    struct sim_device *d = dev_of_backend(b);
    return d->params.share_host_buffer_type ? tg_cpu_buffer_type() : &d->buft;
}

/* ---- host memory under the detector ------------------------------------------------------
 * A device sharing the host's buffer type computes on host memory from its
 * worker, so the host's own synchronous access to host buffers (tg_tensor_set,
 * get, memset, copy, clear, free: impl/backend.c, which never asks a backend)
 * races with it.  Those accesses are told to the detectors of such devices;
 * with none, the host path costs one load. */

static pthread_mutex_t sharing_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_device *sharing; /* host-sharing devices with a detector */
static int n_sharing;              /* atomic: the list's length, read without the lock */
static _Thread_local bool host_quiet; /* the watch tells this access itself, by its own name */

void sim_host_observer_quiet(bool quiet) { host_quiet = quiet; }

/* Under sharing_lock: the detectors of the sharing devices, each once. */
static int sharing_races(tg_sim_race **out, int cap) {
    int n = 0;
    for (struct sim_device *d = sharing; d; d = d->next_sharing) {
        int k = 0;
        while (k < n && out[k] != d->race) k++;
        if (k == n && n < cap) out[n++] = d->race;
    }
    return n;
}

static void host_access(void *dst, const char *dst_name, const void *src, const char *src_name, size_t size,
                        const char *what) {
    if (host_quiet || __atomic_load_n(&n_sharing, __ATOMIC_ACQUIRE) == 0) return;
    struct sim_race_access acc[2];
    int n = 0;
    if (src) acc[n++] = range_of(src, size, false, src_name, what);
    acc[n++] = range_of(dst, size, true, dst_name, what);
    tg_sim_race *races[SIM_RACE_MAX_AGENTS];
    pthread_mutex_lock(&sharing_lock);
    int nr = sharing_races(races, SIM_RACE_MAX_AGENTS);
    for (int i = 0; i < nr; i++) sim_race_host(races[i], acc, n);
    pthread_mutex_unlock(&sharing_lock);
}

/* As free(): nothing waits, so work not ordered before is a race (reported);
 * the devices are then drained so that the run reports instead of crashing. */
static void host_free(const void *base, size_t size) {
    if (__atomic_load_n(&n_sharing, __ATOMIC_ACQUIRE) == 0) return;
    tg_sim_race *races[SIM_RACE_MAX_AGENTS];
    pthread_mutex_lock(&sharing_lock);
    int nr = sharing_races(races, SIM_RACE_MAX_AGENTS);
    for (int i = 0; i < nr; i++) sim_race_memory_free(races[i], base, size);
    for (struct sim_device *d = sharing; d; d = d->next_sharing) sim_queue_drain(d);
    pthread_mutex_unlock(&sharing_lock);
}

/* The observers are set and cleared under the list's lock, with its length. */
static void sharing_add(struct sim_device *d) {
    pthread_mutex_lock(&sharing_lock);
    d->next_sharing = sharing;
    sharing = d;
    __atomic_add_fetch(&n_sharing, 1, __ATOMIC_RELEASE);
    tg_host_observe(host_access, host_free);
    pthread_mutex_unlock(&sharing_lock);
}

static void sharing_remove(struct sim_device *d) {
    pthread_mutex_lock(&sharing_lock);
    for (struct sim_device **p = &sharing; *p; p = &(*p)->next_sharing) {
        if (*p == d) {
            *p = d->next_sharing;
            /* the last one: the host's accesses go back to costing one load */
            if (__atomic_sub_fetch(&n_sharing, 1, __ATOMIC_RELEASE) == 0) tg_host_observe(NULL, NULL);
            break;
        }
    }
    pthread_mutex_unlock(&sharing_lock);
}

/* The backend is freed: no work can be issued any more, but buffers and
 * events made by it may outlive it (as in ggml, any order): they keep the
 * device (its memory list, queue counters and backend struct) until the last goes. */
static void sim_free(tg_backend *b) {
    struct sim_device *d = dev_of_backend(b);
    if (d->race) sim_race_queue_free(d->race, d->agent);
    sharing_remove(d);
    sim_queue_stop(&d->queue); /* the worker runs what is queued, then ends */
    device_unref(d);
}

static void device_unref(struct sim_device *d) {
    if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    sim_queue_destroy(&d->queue);
    pthread_mutex_destroy(&d->mem_lock);
    pthread_mutex_destroy(&d->error_lock);
    if (d->race) sim_race_unref(d->race);
    free(d);
}

static bool owns_memory_of(struct sim_device *d, const struct tg_tensor *t) {
    return t->buffer && t->buffer->buft == sim_default_buft(&d->backend);
}

/* Memory the item's queue opens on a device: NULL for host memory (and a
 * device sharing the host's buffer type has no other). */
static struct sim_device *memory_device(struct sim_device *d) { return d->params.share_host_buffer_type ? NULL : d; }

/* Without host memory for the item, the copy is made now on the host, once
 * every queue whose memory it touches has run empty: later than queued, and
 * ordered after all the work queued before it, so every order the item would
 * keep still holds (and the race detector, told of the item on queue_dev, saw
 * no more than this order gives).  Nothing to report: the copy is done. */
static void push_copy(struct sim_device *queue_dev, void *dst, struct sim_device *dst_dev, const void *src,
                      struct sim_device *src_dev, size_t size, void *owned) {
    struct sim_item *it = sim_item_new(SIM_ITEM_COPY);
    if (!it) {
        sim_queue_drain(queue_dev);
        if (dst_dev) sim_queue_drain(dst_dev);
        if (src_dev) sim_queue_drain(src_dev);
        sim_device_copy(NULL, dst_dev, dst, src_dev, src, size);
        free(owned);
        return;
    }
    it->dst = dst;
    it->src = src;
    it->size = size;
    it->dst_dev = dst_dev;
    it->src_dev = src_dev;
    it->owned = owned;
    sim_queue_push(queue_dev, it);
}

static void sim_set_async(tg_backend *b, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    struct sim_device *d = dev_of_backend(b);
    if (!owns_memory_of(d, t)) {
        /* not this device's memory: the checked copy.  This entry point is void, as
         * ggml's: a failure leaves its message in tg_last_error(). */
        enum tg_status st = tg_tensor_set(t, data, offset, size);
        (void)st;
        return;
    }
    uint8_t *dst = (uint8_t *)t->data + offset;
    char what[TG_MAX_NAME + 32];
    snprintf(what, sizeof what, "async set of '%s'", t->name);
    tell_transfer(d, true, dst, t->name, data, "host memory", size, what);
    push_copy(d, dst, memory_device(d), data, NULL, size, NULL);
}

static void sim_get_async(tg_backend *b, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    struct sim_device *d = dev_of_backend(b);
    if (!owns_memory_of(d, t)) {
        enum tg_status st = tg_tensor_get(t, data, offset, size); /* void entry point: see sim_set_async */
        (void)st;
        return;
    }
    const uint8_t *src = (const uint8_t *)t->data + offset;
    char what[TG_MAX_NAME + 32];
    snprintf(what, sizeof what, "async get of '%s'", t->name);
    tell_transfer(d, true, data, "host memory", src, t->name, size, what);
    push_copy(d, data, NULL, src, memory_device(d), size, NULL);
}

/* from's queue reaches a mark before to's queue goes on (a copy's hand-over). */
static void hand_over(struct sim_device *from, struct sim_device *to) {
    if (from->race && from->race == to->race) {
        struct sim_race_event e = {0};
        sim_race_record(from->race, from->agent, &e);
        sim_race_wait(to->race, to->agent, &e);
    }
    struct sim_mark *m = sim_mark_new();
    struct sim_item *rec = sim_item_new(SIM_ITEM_RECORD), *wait = sim_item_new(SIM_ITEM_WAIT);
    if (!m || !rec || !wait) {
        /* without host memory for them: the host waits for from's queue
         * instead, so whatever to's queue is given next comes after it */
        sim_mark_unref(m);
        free(rec);
        free(wait);
        sim_queue_drain(from);
        return;
    }
    sim_mark_ref(m);
    rec->mark = m;
    wait->mark = m;
    sim_queue_push(from, rec);
    sim_queue_push(to, wait);
}

/* As CUDA's: a source in host memory is read now, after its producer
 * (backend_src) has finished, and written on the destination's queue; a
 * source in device memory is copied on backend_src's queue (so later work
 * there cannot overwrite it early), and the destination's queue waits for the
 * copy.  Whatever the source's memory, the copy runs where the caller says
 * its source is: a wrong backend_src makes a wrong queue. */
static bool sim_cpy_async(tg_backend *backend_src, tg_backend *backend_dst, const struct tg_tensor *src,
                          struct tg_tensor *dst) {
    struct sim_device *dd = dev_of_backend(backend_dst);
    const size_t n = tg_nbytes(src);
    if (dd->params.share_host_buffer_type || !owns_memory_of(dd, dst) || n != tg_nbytes(dst)) return false;
    char what[2 * TG_MAX_NAME + 32];
    snprintf(what, sizeof what, "copy '%s' -> '%s'", src->name, dst->name);
    if (!src->buffer || tg_buffer_is_host(src->buffer)) {
        tg_backend_synchronize(backend_src);
        void *staged = malloc(n ? n : 1);
        if (!staged) return false;
        if (dd->race) {
            char op[sizeof what + 48];
            snprintf(op, sizeof op, "%s, staged by the host", what);
            struct sim_race_access read = range_of(src->data, n, false, src->name, op);
            sim_race_host(dd->race, &read, 1);
            snprintf(op, sizeof op, "%s on %s", what, dd->name);
            struct sim_race_access write = range_of(dst->data, n, true, dst->name, op);
            sim_race_issue(dd->race, dd->agent, &write, 1);
        }
        memcpy(staged, src->data, n);
        push_copy(dd, dst->data, dd, staged, NULL, n, staged);
        return true;
    }
    struct sim_device *owner = guarded_owner(src);
    if (!owner || !tg_backend_is_sim(backend_src)) return false;
    struct sim_device *qd = dev_of_backend(backend_src);
    if (qd->race) {
        char op[sizeof what + 48];
        snprintf(op, sizeof op, "%s on %s", what, qd->name);
        struct sim_race_access acc[2] = {range_of(src->data, n, false, src->name, op),
                                         range_of(dst->data, n, true, dst->name, op)};
        sim_race_issue(qd->race, qd->agent, acc, 2);
    }
    push_copy(qd, dst->data, dd, src->data, owner, n, NULL);
    if (qd != dd) hand_over(qd, dd);
    return true;
}

/* A failure of the work waited for is left in tg_last_error() (this entry
 * point is void) and kept for the next compute; tg_sim_synchronize returns it. */
static void sim_synchronize(tg_backend *b) {
    struct sim_device *d = dev_of_backend(b);
    if (d->race) sim_race_host_wait_queue(d->race, d->agent);
    sim_queue_drain(d);
    (void)report_failure(d, false);
}

enum tg_status tg_sim_synchronize(tg_backend *backend) {
    tg_backend *inner = tg_sim_watch_inner(backend);
    if (!tg_backend_is_sim(inner)) {
        return tg_fail(TG_ERR_INVALID, "tg_sim_synchronize: backend '%s' is not a sim device (use "
                       "tg_backend_synchronize)", tg_backend_name(backend));
    }
    tg_backend_synchronize(backend);
    return report_failure(dev_of_backend(inner), true);
}

static enum tg_status sim_take_failure(tg_backend *b) { return report_failure(dev_of_backend(b), true); }

void sim_device_fail_next_compute(tg_backend *backend, enum tg_status st) {
    __atomic_store_n(&dev_of_backend(tg_sim_watch_inner(backend))->inject, st, __ATOMIC_RELAXED);
}

static bool sim_supports_op(tg_backend *b, const struct tg_tensor *op) {
    struct sim_device *d = dev_of_backend(b);
    if (op->op == TG_OP_NONE || tg_op_is_view(op->op)) return true;
    if (!d->params.supported_ops_all && !d->params.supported_ops[op->op]) return false;
    return d->params.plan_only || tg_cpu_supports_op(op);
}

static bool computed(const struct tg_tensor *n) {
    return n->op != TG_OP_NONE && !tg_op_is_view(n->op) && !(n->flags & TG_FLAG_NO_COMPUTE);
}

/* Kernels read the nodes when the item runs, the caller may change or free
 * them as soon as we return (a GPU takes a kernel's arguments at launch):
 * the item gets copies, nodes first, their sources after. */
static struct tg_tensor *snapshot(const struct tg_graph *g, int *n_nodes) {
    int n = 0, total = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!computed(g->nodes[i])) continue;
        n++;
        total++;
        for (int k = 0; k < TG_MAX_SRC; k++) total += g->nodes[i]->src[k] != NULL;
    }
    struct tg_tensor *copies = malloc((size_t)(total ? total : 1) * sizeof *copies);
    if (!copies) return NULL;
    int at = n;
    n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!computed(g->nodes[i])) continue;
        struct tg_tensor *c = &copies[n++];
        *c = *g->nodes[i];
        for (int k = 0; k < TG_MAX_SRC; k++) {
            if (!c->src[k]) continue;
            copies[at] = *c->src[k];
            c->src[k] = &copies[at++];
        }
    }
    *n_nodes = n;
    return copies;
}

/* false (nothing told) without host memory to tell it */
static bool tell_compute(struct sim_device *d, const struct tg_tensor *nodes, int n) {
    const struct tg_tensor **list = malloc((size_t)(n ? n : 1) * sizeof *list);
    if (!list) return false;
    for (int i = 0; i < n; i++) list[i] = &nodes[i];
    const bool told = sim_race_compute(d->race, d->agent, list, n, d->name);
    free(list);
    return told;
}

/* Memory d's kernels can reach: its own buffers; host memory only when it
 * shares the host's buffer type (a BLAS-like device).  A discrete device
 * handed host or another device's memory must refuse, not compute: a real
 * one would fault, and computing would hide a missing copy of a split input. */
static bool reaches(struct sim_device *d, const struct tg_tensor *t) {
    if (!t->buffer) return d->params.share_host_buffer_type; /* a context's own memory is the host's */
    tg_buffer_type *bt = t->buffer->buft;
    return bt == sim_default_buft(&d->backend) || (d->params.share_host_buffer_type && tg_buft_is_host(bt));
}

static const char *buft_of(const struct tg_tensor *t) {
    return t->buffer ? tg_buft_name(t->buffer->buft) : "(none: the host memory of its context)";
}

/* What can be refused at the call is, so that the call itself fails (a queued
 * failure could only be reported later, without its node). */
static enum tg_status check_graph(struct sim_device *d, const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *n = g->nodes[i];
        if (!computed(n)) continue;
        if (!sim_supports_op(&d->backend, n) || !tg_cpu_supports_op(n)) {
            return tg_fail(TG_ERR_UNSUPPORTED, "sim device '%s' cannot compute node '%s' (op %s)", d->name, n->name,
                           tg_op_name(n->op));
        }
        if (!n->data) { /* the CPU backend's words */
            return tg_fail(TG_ERR_INVALID, "sim device '%s': node %d '%s' has no memory (allocate the graph first)",
                           d->name, i, n->name);
        }
        if (!reaches(d, n)) {
            return tg_fail(TG_ERR_INVALID, "sim device '%s' cannot compute node %d '%s' (op %s): it lives in a buffer of "
                           "type '%s', which the device cannot reach; allocate it in the device's buffer type '%s'",
                           d->name, i, n->name, tg_op_name(n->op), buft_of(n), tg_buft_name(sim_default_buft(&d->backend)));
        }
        for (int k = 0; k < TG_MAX_SRC; k++) {
            const struct tg_tensor *s = n->src[k];
            if (!s || tg_nbytes(s) == 0) continue; /* nothing read */
            if (!s->data) {
                return tg_fail(TG_ERR_INVALID, "sim device '%s': node %d '%s' reads source '%s', which has no memory "
                               "(allocate the graph first; weights and inputs with tg_alloc_ctx_tensors)", d->name, i,
                               n->name, s->name);
            }
            if (!reaches(d, s)) {
                return tg_fail(TG_ERR_INVALID, "sim device '%s' cannot compute node %d '%s' (op %s): its source '%s' "
                               "lives in a buffer of type '%s', which the device cannot reach (a discrete device "
                               "computes on its own memory only): copy it into a tensor of buffer type '%s' first, "
                               "as the scheduler does for a split's inputs", d->name, i, n->name, tg_op_name(n->op),
                               s->name, buft_of(s), tg_buft_name(sim_default_buft(&d->backend)));
            }
        }
    }
    return TG_OK;
}

static enum tg_status sim_graph_compute(tg_backend *b, struct tg_graph *g) {
    struct sim_device *d = dev_of_backend(b);
    if (!g) return tg_fail(TG_ERR_INVALID, "sim device '%s': graph_compute was given no graph (NULL)", d->name);
    enum tg_status st = check_graph(d, g);
    if (st != TG_OK) return st;
    st = report_failure(d, true);
    if (st != TG_OK) return st;
    if (d->race && sim_race_out_of_memory(d->race)) {
        /* a run the detector could not follow in full must not pass */
        return tg_fail(TG_ERR_ALLOC, "sim device '%s': the race detector ran out of host memory, so this run "
                       "cannot be checked: %s", d->name, tg_sim_race_report(d->race));
    }
    if (d->race && tg_sim_race_count(d->race) > 0) {
        return tg_fail(TG_ERR_DEVICE, "sim device '%s': the race detector found %d race(s); the first:\n%s", d->name,
                       tg_sim_race_count(d->race), tg_sim_race_report(d->race));
    }
    struct sim_item *it = sim_item_new(SIM_ITEM_COMPUTE);
    if (it) it->nodes = snapshot(g, &it->n_nodes);
    /* nothing is queued nor told to the detector: the call can be made again */
    if (!it || !it->nodes || (d->race && !tell_compute(d, it->nodes, it->n_nodes))) {
        if (it) free(it->nodes);
        free(it);
        return tg_fail(TG_ERR_ALLOC, "sim device '%s': out of host memory queueing a graph", d->name);
    }
    sim_queue_push(d, it);
    /* a synchronous device has run it: its failure is this call's */
    return d->queue.synchronous ? report_failure(d, true) : TG_OK;
}

static bool sim_supports_buft(tg_backend *b, tg_buffer_type *buft) { return buft == sim_default_buft(b); }

static bool sim_offload_op(tg_backend *b, const struct tg_tensor *op) {
    struct sim_device *d = dev_of_backend(b);
    return d->params.offload_min_batch > 0 && op->ne[1] >= d->params.offload_min_batch;
}

/* ---- events -------------------------------------------------------------------------------- */

static tg_event *sim_event_new(tg_backend *b) {
    tg_event *e = calloc(1, sizeof *e);
    struct sim_event *se = calloc(1, sizeof *se);
    if (!e || !se) {
        free(e);
        free(se);
        tg_fail(TG_ERR_ALLOC, "out of host memory for a sim event");
        return NULL;
    }
    pthread_mutex_init(&se->lock, NULL);
    se->race = dev_of_backend(b)->race;
    device_ref(dev_of_backend(b)); /* e->backend stays valid if the backend is freed first */
    e->backend = b;
    e->context = se;
    return e;
}

static void sim_event_free(tg_event *e) {
    struct sim_event *se = e->context;
    struct sim_device *d = dev_of_backend(e->backend);
    sim_mark_unref(se->latest); /* waits issued on it hold their own references */
    pthread_mutex_destroy(&se->lock);
    free(se);
    free(e);
    device_unref(d);
}

static struct sim_mark *latest_mark(struct sim_event *se) {
    pthread_mutex_lock(&se->lock);
    struct sim_mark *m = se->latest;
    if (m) sim_mark_ref(m);
    pthread_mutex_unlock(&se->lock);
    return m;
}

static void sim_event_record(tg_event *e, tg_backend *b) {
    if (!tg_backend_is_sim(e->backend)) { /* its context is no sim_event (tg_event_record refuses this first) */
        tg_fail(TG_ERR_INVALID, "sim device '%s': event of backend '%s' is not a sim event; not recorded",
                tg_backend_name(b), tg_backend_name(e->backend));
        return;
    }
    struct sim_device *d = dev_of_backend(b);
    struct sim_event *se = e->context;
    if (d->race && d->race == se->race) sim_race_record(d->race, d->agent, &se->logical);
    struct sim_mark *m = sim_mark_new();
    struct sim_item *it = sim_item_new(SIM_ITEM_RECORD);
    if (!m || !it) {
        /* without host memory for them: the host waits for the queue, and the
         * record is one already reached, which is what it would be by now */
        sim_mark_unref(m);
        free(it);
        sim_queue_drain(d);
        m = &sim_mark_reached;
    } else {
        it->mark = m;
    }
    sim_mark_ref(m); /* one for the event, one for the item (the reached mark: the event's alone) */
    pthread_mutex_lock(&se->lock);
    struct sim_mark *old = se->latest;
    se->latest = m;
    pthread_mutex_unlock(&se->lock);
    sim_mark_unref(old);
    if (m != &sim_mark_reached) sim_queue_push(d, it);
}

static void sim_event_wait(tg_backend *b, tg_event *e) {
    if (!tg_backend_is_sim(e->backend)) {
        tg_event_synchronize(e); /* another backend's event: the host waits for it */
        return;
    }
    struct sim_device *d = dev_of_backend(b);
    struct sim_event *se = e->context;
    if (d->race && d->race == se->race) sim_race_wait(d->race, d->agent, &se->logical);
    struct sim_mark *m = latest_mark(se);
    if (!m) return; /* never recorded: nothing to wait for, as in CUDA */
    struct sim_item *it = sim_item_new(SIM_ITEM_WAIT);
    if (!it) {
        /* without host memory for the item the host waits for the record
         * itself: d's later work is issued after it.  The record was issued
         * before (as was all it waits for), so the host cannot wait for
         * itself. */
        sim_mark_wait(m);
        sim_mark_unref(m);
        return;
    }
    it->mark = m;
    sim_queue_push(d, it);
}

static void sim_event_synchronize(tg_event *e) {
    struct sim_event *se = e->context;
    if (se->race) sim_race_host_wait_event(se->race, &se->logical);
    struct sim_mark *m = latest_mark(se);
    if (!m) return;
    sim_mark_wait(m);
    sim_mark_unref(m);
}

/* ---- creation -------------------------------------------------------------------------------- */

void tg_sim_params_default(struct tg_sim_params *p) {
    memset(p, 0, sizeof *p);
    p->alignment = 256;
    p->supported_ops_all = true;
}

static int sim_counter;

tg_backend *tg_backend_sim_new(const struct tg_sim_params *params) {
    struct tg_sim_params p;
    if (params) p = *params;
    else tg_sim_params_default(&p);
    if (p.alignment == 0) p.alignment = 256;
    if (p.alignment & (p.alignment - 1)) {
        tg_fail(TG_ERR_INVALID, "sim device: alignment %zu is not a power of two", p.alignment);
        return NULL;
    }
    struct sim_device *d = calloc(1, sizeof *d);
    if (!d) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a sim device");
        return NULL;
    }
    d->params = p;
    if (p.name) snprintf(d->name, sizeof d->name, "%s", p.name);
    else snprintf(d->name, sizeof d->name, "sim%d", __atomic_fetch_add(&sim_counter, 1, __ATOMIC_RELAXED));
    d->params.name = d->name;
    d->buft = (tg_buffer_type){
        .iface = {.get_name = sim_buft_name, .alloc_buffer = sim_alloc_buffer, .get_alignment = sim_buft_alignment,
                  .get_max_size = sim_buft_max_size, .get_alloc_size = sim_buft_alloc_size},
        .owner = &d->backend,
        .context = d,
    };
    d->backend = (tg_backend){
        .iface = {.get_name = sim_name, .free = sim_free, .get_default_buffer_type = sim_default_buft,
                  .set_tensor_async = sim_set_async, .get_tensor_async = sim_get_async,
                  .cpy_tensor_async = sim_cpy_async, .synchronize = sim_synchronize,
                  .graph_compute = sim_graph_compute, .supports_op = sim_supports_op,
                  .supports_buft = sim_supports_buft, .offload_op = sim_offload_op, .event_new = sim_event_new,
                  .event_free = sim_event_free, .event_record = sim_event_record, .event_wait = sim_event_wait,
                  .event_synchronize = sim_event_synchronize, .take_failure = sim_take_failure},
        .context = d,
    };
    d->refs = 1;
    d->error = TG_OK;
    d->race = p.race;
    d->agent = p.race ? sim_race_queue_new(p.race, d->name) : -1;
    if (p.race && d->agent < 0) {
        free(d);
        return NULL;
    }
    pthread_mutex_init(&d->mem_lock, NULL);
    pthread_mutex_init(&d->error_lock, NULL);
    /* each device its own jitter sequence, one seed for the run */
    uint64_t jitter_seed = p.jitter_seed ? p.jitter_seed ^ (uint64_t)(d->agent + 1) * 0x9E3779B97F4A7C15ull ^ d->name[0] : 0;
    if (sim_queue_start(d, &d->queue, p.synchronous, jitter_seed) != TG_OK) {
        sim_queue_destroy(&d->queue);
        pthread_mutex_destroy(&d->mem_lock);
        pthread_mutex_destroy(&d->error_lock);
        free(d);
        return NULL;
    }
    if (p.race) sim_race_ref(p.race); /* the detector may be freed before the device's buffers */
    if (p.race && p.share_host_buffer_type) sharing_add(d);
    return &d->backend;
}

bool tg_backend_is_sim(tg_backend *backend) { return backend && backend->iface.get_name == sim_name; }

tg_buffer_type *tg_sim_buffer_type(tg_backend *backend) {
    return tg_backend_is_sim(backend) ? sim_default_buft(backend) : NULL;
}

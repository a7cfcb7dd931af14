/* A simulated discrete device (design.md section 6).
 *
 * Its memory is guarded: only the device's worker thread opens it while it
 * executes queued items, and closes it again when the queue runs empty (or
 * before it blocks on another device's event), so any host dereference of
 * device memory faults once the device is idle.  (Closing after every item
 * cost more than the items themselves.)  The guard is mprotect (PROT_NONE when
 * closed, a SIGSEGV on access); in ASan builds buffers up to POISON_GUARD_MAX
 * are guarded by ASan poisoning instead (a use-after-poison report on access):
 * each mprotect is a TLB shootdown to every core running one of our threads,
 * which was most of fuzz_sched's time, while poisoning writes shadow memory
 * only, one byte per 8, so large buffers keep mprotect.  Every access
 * (set, get, memset, copies, compute) is an item on the device's queue; the
 * synchronous calls enqueue and wait.  Events mark points in the queue.
 * Kernels are the CPU's, so results equal the CPU bit for bit. */
#include "tg-sim.h"

#include "tg-cpu.h"

#include <pthread.h>
#include <stdint.h>
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

enum item_kind { ITEM_SET, ITEM_GET, ITEM_MEMSET, ITEM_COMPUTE, ITEM_RECORD, ITEM_WAIT };

struct sim_event_state {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int pending; /* records queued but not reached */
};

struct item {
    enum item_kind kind;
    void *dst;
    const void *src;
    size_t size;
    uint8_t value;
    struct tg_tensor **nodes; /* ITEM_COMPUTE: owned copy of the node list */
    int n_nodes;
    struct sim_event_state *event;
    struct item *next;
};

struct sim_buffer {
    void *base;
    size_t mapped;
    struct sim_buffer *next_open; /* the device's list of mappings */
    bool open;                    /* accessible now (under the device's mem_lock) */
    bool poison_guard;            /* guarded by ASan poisoning, else by mprotect */
};

struct sim_device {
    struct tg_sim_params params;
    char name[32];
    tg_buffer_type buft;
    tg_backend backend;
    pthread_mutex_t lock;     /* the queue */
    pthread_mutex_t mem_lock; /* the mapping list and its protection */
    pthread_cond_t has_work, idle;
    struct item *head, *tail;
    int busy;
    bool stop;
    pthread_t worker;
    struct sim_buffer *buffers; /* mappings to open while an item runs */
    enum tg_status error;       /* first compute failure, reported by graph_compute */
};

static struct sim_device *dev_of_backend(tg_backend *b) { return b->context; }
static struct sim_device *dev_of_buft(tg_buffer_type *t) { return t->context; }

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

/* All under mem_lock.  at: the one device address an item touches (a copy,
 * a memset), NULL for every mapping (a compute may touch any). */
static void open_memory(struct sim_device *d, const void *at) {
    if (d->params.share_host_buffer_type) return;
    for (struct sim_buffer *b = d->buffers; b; b = b->next_open) {
        bool wanted = !at || ((const uint8_t *)at >= (uint8_t *)b->base && (const uint8_t *)at < (uint8_t *)b->base + b->mapped);
        if (wanted && !b->open) guard_open(b);
        b->open = b->open || wanted;
    }
}

static void close_memory(struct sim_device *d) {
    for (struct sim_buffer *b = d->buffers; b; b = b->next_open) {
        if (b->open) guard_close(b);
        b->open = false;
    }
}

static void close_memory_locking(struct sim_device *d) {
    pthread_mutex_lock(&d->mem_lock);
    close_memory(d);
    pthread_mutex_unlock(&d->mem_lock);
}

static void run_item(struct sim_device *d, struct item *it) {
    bool touches_memory = it->kind != ITEM_RECORD && it->kind != ITEM_WAIT;
    if (touches_memory) {
        pthread_mutex_lock(&d->mem_lock);
        open_memory(d, it->kind == ITEM_COMPUTE ? NULL : it->kind == ITEM_GET ? it->src : it->dst);
    } else if (it->kind == ITEM_WAIT) {
        close_memory_locking(d); /* it may block for long */
    }
    switch (it->kind) {
    case ITEM_SET: /* host -> device */
    case ITEM_GET: /* device -> host */
        memcpy(it->dst, it->src, it->size);
        break;
    case ITEM_MEMSET: memset(it->dst, it->value, it->size); break;
    case ITEM_COMPUTE:
        for (int i = 0; i < it->n_nodes; i++) {
            struct tg_tensor *n = it->nodes[i];
            if (n->op == TG_OP_NONE || tg_op_is_view(n->op)) continue;
            enum tg_status st = tg_cpu_compute_node(n, 0, 1);
            if (st != TG_OK && d->error == TG_OK) d->error = st;
        }
        break;
    case ITEM_RECORD:
        pthread_mutex_lock(&it->event->lock);
        it->event->pending--;
        pthread_cond_broadcast(&it->event->done);
        pthread_mutex_unlock(&it->event->lock);
        break;
    case ITEM_WAIT:
        pthread_mutex_lock(&it->event->lock);
        while (it->event->pending > 0) pthread_cond_wait(&it->event->done, &it->event->lock);
        pthread_mutex_unlock(&it->event->lock);
        break;
    }
    if (touches_memory) pthread_mutex_unlock(&d->mem_lock);
    free(it->nodes);
    free(it);
}

static void *worker_main(void *arg) {
    struct sim_device *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->head && !d->stop) pthread_cond_wait(&d->has_work, &d->lock);
        if (!d->head && d->stop) break;
        struct item *it = d->head;
        d->head = it->next;
        if (!d->head) d->tail = NULL;
        d->busy++;
        pthread_mutex_unlock(&d->lock);
        run_item(d, it);
        pthread_mutex_lock(&d->lock);
        if (!d->head) close_memory_locking(d); /* before anyone hears the device is idle */
        d->busy--;
        if (!d->head && !d->busy) pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static void enqueue(struct sim_device *d, struct item *it) {
    if (d->params.synchronous) {
        run_item(d, it);
        close_memory_locking(d);
        return;
    }
    pthread_mutex_lock(&d->lock);
    it->next = NULL;
    if (d->tail) d->tail->next = it;
    else d->head = it;
    d->tail = it;
    pthread_cond_signal(&d->has_work);
    pthread_mutex_unlock(&d->lock);
}

static void drain(struct sim_device *d) {
    if (d->params.synchronous) return;
    pthread_mutex_lock(&d->lock);
    while (d->head || d->busy) pthread_cond_wait(&d->idle, &d->lock);
    pthread_mutex_unlock(&d->lock);
}

/* A caller that waits for its item anyway runs it itself when the device is
 * idle: the same order and protection, without two thread switches. */
static void run_and_wait(struct sim_device *d, struct item *it) {
    if (d->params.synchronous) {
        enqueue(d, it);
        return;
    }
    pthread_mutex_lock(&d->lock);
    bool idle = !d->head && !d->busy;
    if (idle) d->busy++;
    pthread_mutex_unlock(&d->lock);
    if (!idle) {
        enqueue(d, it);
        drain(d);
        return;
    }
    run_item(d, it);
    pthread_mutex_lock(&d->lock);
    if (!d->head) close_memory_locking(d);
    d->busy--;
    if (!d->head && !d->busy) pthread_cond_broadcast(&d->idle);
    pthread_mutex_unlock(&d->lock);
}

static struct item *new_item(enum item_kind kind) {
    struct item *it = calloc(1, sizeof *it);
    if (!it) {
        fprintf(stderr, "sim device: out of host memory for a queue item\n");
        abort(); /* an internal invariant of the simulator: no way to report from a void iface call */
    }
    it->kind = kind;
    return it;
}

static void queue_copy(struct sim_device *d, enum item_kind kind, void *dst, const void *src, size_t size, bool wait) {
    struct item *it = new_item(kind);
    it->dst = dst;
    it->src = src;
    it->size = size;
    if (wait) run_and_wait(d, it);
    else enqueue(d, it);
}

/* ---- buffers -------------------------------------------------------------------------- */

static void sim_buffer_free(tg_buffer *buf) {
    struct sim_device *d = dev_of_buft(buf->buft);
    struct sim_buffer *sb = buf->context;
    drain(d);
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
}

static void *sim_buffer_base(tg_buffer *buf) { return ((struct sim_buffer *)buf->context)->base; }

static void sim_set_tensor(tg_buffer *buf, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    queue_copy(dev_of_buft(buf->buft), ITEM_SET, (uint8_t *)t->data + offset, data, size, true);
}

static void sim_get_tensor(tg_buffer *buf, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    queue_copy(dev_of_buft(buf->buft), ITEM_GET, data, (const uint8_t *)t->data + offset, size, true);
}

static void sim_memset_tensor(tg_buffer *buf, struct tg_tensor *t, uint8_t value, size_t offset, size_t size) {
    struct item *it = new_item(ITEM_MEMSET);
    it->dst = (uint8_t *)t->data + offset;
    it->size = size;
    it->value = value;
    run_and_wait(dev_of_buft(buf->buft), it);
}

static void sim_clear(tg_buffer *buf, uint8_t value) {
    struct item *it = new_item(ITEM_MEMSET);
    it->dst = sim_buffer_base(buf);
    it->size = buf->size;
    it->value = value;
    run_and_wait(dev_of_buft(buf->buft), it);
}

static tg_buffer *sim_alloc_buffer(tg_buffer_type *buft, size_t size) {
    struct sim_device *d = dev_of_buft(buft);
    if (d->params.max_buffer_size && size > d->params.max_buffer_size) {
        tg_fail(TG_ERR_ALLOC, "sim device '%s': buffer of %zu bytes exceeds its max buffer size %zu", d->name, size,
                d->params.max_buffer_size);
        return NULL;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
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
    pthread_mutex_lock(&d->mem_lock);
    sb->next_open = d->buffers;
    d->buffers = sb;
    pthread_mutex_unlock(&d->mem_lock);
    return buf;
}

static const char *sim_buft_name(tg_buffer_type *buft) { return dev_of_buft(buft)->name; }
static size_t sim_buft_alignment(tg_buffer_type *buft) { return dev_of_buft(buft)->params.alignment; }

static size_t sim_buft_max_size(tg_buffer_type *buft) {
    size_t m = dev_of_buft(buft)->params.max_buffer_size;
    return m ? m : SIZE_MAX;
}

static size_t sim_buft_alloc_size(tg_buffer_type *buft, const struct tg_tensor *t) {
    return tg_nbytes(t) + dev_of_buft(buft)->params.alloc_pad;
}

/* ---- backend ---------------------------------------------------------------------------- */

static const char *sim_name(tg_backend *b) { return dev_of_backend(b)->name; }

static tg_buffer_type *sim_default_buft(tg_backend *b) {
    struct sim_device *d = dev_of_backend(b);
    return d->params.share_host_buffer_type ? tg_cpu_buffer_type() : &d->buft;
}

static void sim_free(tg_backend *b) {
    struct sim_device *d = dev_of_backend(b);
    if (!d->params.synchronous) {
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        pthread_cond_signal(&d->has_work);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->worker, NULL);
    }
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->mem_lock);
    pthread_cond_destroy(&d->has_work);
    pthread_cond_destroy(&d->idle);
    free(d);
}

static bool owns_memory_of(struct sim_device *d, const struct tg_tensor *t) {
    return t->buffer && t->buffer->buft == sim_default_buft(&d->backend);
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
    queue_copy(d, ITEM_SET, (uint8_t *)t->data + offset, data, size, false);
}

static void sim_get_async(tg_backend *b, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    struct sim_device *d = dev_of_backend(b);
    if (!owns_memory_of(d, t)) {
        enum tg_status st = tg_tensor_get(t, data, offset, size); /* void entry point: see sim_set_async */
        (void)st;
        return;
    }
    queue_copy(d, ITEM_GET, data, (const uint8_t *)t->data + offset, size, false);
}

static void sim_synchronize(tg_backend *b) { drain(dev_of_backend(b)); }

static bool sim_supports_op(tg_backend *b, const struct tg_tensor *op) {
    struct sim_device *d = dev_of_backend(b);
    if (op->op == TG_OP_NONE || tg_op_is_view(op->op)) return true;
    if (!d->params.supported_ops_all && !d->params.supported_ops[op->op]) return false;
    return d->params.plan_only || tg_cpu_supports_op(op);
}

static enum tg_status sim_graph_compute(tg_backend *b, struct tg_graph *g) {
    struct sim_device *d = dev_of_backend(b);
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *n = g->nodes[i];
        if (n->op == TG_OP_NONE || tg_op_is_view(n->op)) continue;
        if (!sim_supports_op(b, n) || !tg_cpu_supports_op(n)) {
            return tg_fail(TG_ERR_UNSUPPORTED, "sim device '%s' cannot compute node '%s' (op %s)", d->name, n->name,
                           tg_op_name(n->op));
        }
    }
    if (d->error != TG_OK) {
        enum tg_status st = d->error;
        d->error = TG_OK;
        return tg_fail(st, "sim device '%s': an earlier queued compute failed", d->name);
    }
    struct item *it = new_item(ITEM_COMPUTE);
    it->nodes = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *it->nodes);
    if (!it->nodes) {
        free(it);
        return tg_fail(TG_ERR_ALLOC, "sim device '%s': out of host memory queueing a graph", d->name);
    }
    memcpy(it->nodes, g->nodes, (size_t)g->n_nodes * sizeof *it->nodes);
    it->n_nodes = g->n_nodes;
    enqueue(d, it);
    return TG_OK;
}

static bool sim_supports_buft(tg_backend *b, tg_buffer_type *buft) { return buft == sim_default_buft(b); }

static bool sim_offload_op(tg_backend *b, const struct tg_tensor *op) {
    struct sim_device *d = dev_of_backend(b);
    return d->params.offload_min_batch > 0 && op->ne[1] >= d->params.offload_min_batch;
}

static tg_event *sim_event_new(tg_backend *b) {
    tg_event *e = calloc(1, sizeof *e);
    struct sim_event_state *st = calloc(1, sizeof *st);
    if (!e || !st) {
        free(e);
        free(st);
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->done, NULL);
    e->backend = b;
    e->context = st;
    return e;
}

static void sim_event_free(tg_event *e) {
    struct sim_event_state *st = e->context;
    drain(dev_of_backend(e->backend));
    pthread_mutex_destroy(&st->lock);
    pthread_cond_destroy(&st->done);
    free(st);
    free(e);
}

static void sim_event_record(tg_event *e, tg_backend *b) {
    struct sim_event_state *st = e->context;
    pthread_mutex_lock(&st->lock);
    st->pending++;
    pthread_mutex_unlock(&st->lock);
    struct item *it = new_item(ITEM_RECORD);
    it->event = st;
    enqueue(dev_of_backend(b), it);
}

static void sim_event_wait(tg_backend *b, tg_event *e) {
    struct item *it = new_item(ITEM_WAIT);
    it->event = e->context;
    enqueue(dev_of_backend(b), it);
}

static void sim_event_synchronize(tg_event *e) {
    struct sim_event_state *st = e->context;
    pthread_mutex_lock(&st->lock);
    while (st->pending > 0) pthread_cond_wait(&st->done, &st->lock);
    pthread_mutex_unlock(&st->lock);
}

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
                  .synchronize = sim_synchronize, .graph_compute = sim_graph_compute,
                  .supports_op = sim_supports_op, .supports_buft = sim_supports_buft,
                  .offload_op = sim_offload_op, .event_new = sim_event_new, .event_free = sim_event_free,
                  .event_record = sim_event_record, .event_wait = sim_event_wait,
                  .event_synchronize = sim_event_synchronize},
        .context = d,
    };
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->mem_lock, NULL);
    pthread_cond_init(&d->has_work, NULL);
    pthread_cond_init(&d->idle, NULL);
    d->error = TG_OK;
    if (!p.synchronous && pthread_create(&d->worker, NULL, worker_main, d) != 0) {
        free(d);
        tg_fail(TG_ERR_ALLOC, "sim device: cannot start its worker thread");
        return NULL;
    }
    return &d->backend;
}

bool tg_backend_is_sim(tg_backend *backend) { return backend && backend->iface.get_name == sim_name; }

tg_buffer_type *tg_sim_buffer_type(tg_backend *backend) {
    return tg_backend_is_sim(backend) ? sim_default_buft(backend) : NULL;
}

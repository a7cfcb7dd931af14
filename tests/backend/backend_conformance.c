/* The conformance harness (conformance.h) run on the project's backends and on
 * a small host backend written the way a backend author would (its own host
 * buffer type, mul_mat only) -- once correct and once per deliberate defect,
 * each of which the harness must catch:
 *
 *   backend_conformance cpu | sim | cuda | host-mul-mat | host-queued | external
 *   backend_conformance BROKEN --expect-failure PART
 *
 * host-queued is host-mul-mat with its async set/get, compute and events
 * deferred to a queue.  BROKEN is one of its variants with a one-line defect
 * (enum defect lists them; tests.cmake names the part that must catch each).
 * With --expect-failure only PART (buffers, ops, graphs, async) runs, and the
 * exit status is 0 only when it failed: the harness caught the defect.
 * cuda exits 77 without a GPU.  external is the backend configured with
 * -DTG_CONFORMANCE_BACKEND (docs/backends.md). */
#include "conformance.h"

#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a host backend as a backend author writes it -------------------------------------------- */

/* Its variants: correct, or with one defect (one line of the backend, marked
 * "the defect"), synchronous or queued (async set/get, compute and events
 * deferred to a queue that synchronize and event_synchronize run). */
enum defect {
    D_NONE,
    D_STRIDES,          /* ops: mul_mat reads its operands as if contiguous */
    D_CLAIMS_NONE,      /* ops: supports_op wants an f16 result, which mul_mat never has */
    D_CLAIMS_BROADCAST, /* graphs: supports_op claims mul_mat only when it broadcasts over dim 2 (as the grid's
                         * batched cases do), never for the models' plain ones: no node is ever given it */
    D_ALLOC_SIZE,       /* buffers: get_alloc_size ignores dims 2 and 3 */
    D_SET_OFFSET,       /* buffers: set_tensor ignores the offset */
    D_GET_OFFSET,       /* buffers: get_tensor ignores the offset */
    D_MEMSET_OFFSET,    /* buffers: memset_tensor ignores the offset */
    D_CLEAR_LAST,       /* buffers: clear leaves the last byte */
    D_BASE_HEADER,      /* buffers: get_base points past a 16-byte header, off the alignment */
    D_ALIGN_ZERO,       /* buffers: get_alignment 0 ("no requirement") */
    D_NO_EMPTY,         /* buffers: alloc_buffer refuses 0 bytes */
    D_ALLOC_CAP,        /* buffers: alloc_buffer refuses more than 2 KiB, get_max_size says no limit */
    D_TWIN_TYPE,        /* buffers: its buffers name a twin of the type that made them */
    D_INIT_VIEW,        /* buffers: init_tensor fails on views */
    D_GET_ASYNC_OFFSET, /* buffers: get_tensor_async ignores the offset */
    D_INVERTED,         /* buffers: memory holds each byte inverted (its own format), yet is_host says the host,
                         * the CPU's copy among it, may read it directly: set and get agree, a direct read not */
    D_SKIP_LAST,        /* graphs: graph_compute skips the graph's last node */
    D_FIRST_ONLY,       /* graphs: graph_compute stops after the first node it computes */
    D_TAKE_FAILURE,     /* async: take_failure reports a failure after clean work */
    D_SYNC_FORGETS,     /* async: synchronize leaves the last queued item undone */
    D_EVENT_COMPUTE,    /* async: event_record marks the last compute, not transfers issued after it */
    D_EVENT_TRANSFER,   /* async: event_record marks the last transfer, not computes issued after it */
};

/* Deferred work: a transfer of bytes, or one mul_mat with a snapshot of its
 * tensors (graph_compute takes what it needs at the call). */
struct hb_item {
    bool is_mul_mat;
    void *to;
    const void *from;
    size_t size;
    struct tg_tensor dst, a, b;
};

struct host_be {
    tg_backend base; /* first: the tg_backend pointer is the struct's */
    tg_buffer_type buft, twin;
    enum defect defect;
    bool queued;
    struct hb_item *q; /* pending items, oldest first */
    int n_q, cap_q;
    uint64_t issued, done, last_compute, last_transfer; /* items counted since the start */
    int n_computed, n_failed;
};

static struct host_be *host_of_buft(tg_buffer_type *t) { return t->context; }
static enum defect defect_of(tg_buffer *b) { return host_of_buft(b->buft)->defect; }

static const char *hb_buft_name(tg_buffer_type *t) { (void)t; return "test-host"; }
static size_t hb_alignment(tg_buffer_type *t) {
    return host_of_buft(t)->defect == D_ALIGN_ZERO ? 0 : 64; /* the defect */
}
static bool hb_is_host(tg_buffer_type *t) { (void)t; return true; }
static size_t hb_alloc_size(tg_buffer_type *t, const struct tg_tensor *x) {
    if (host_of_buft(t)->defect == D_ALLOC_SIZE) {
        /* the defect: a size from the first two dimensions only */
        return (size_t)(x->ne[0] / tg_blck_size(x->type)) * tg_type_size(x->type) * (size_t)x->ne[1];
    }
    return tg_nbytes(x);
}
static void hb_free(tg_buffer *b) { free(b->context); }
static void *hb_base(tg_buffer *b) {
    return (char *)b->context + (defect_of(b) == D_BASE_HEADER ? 16 : 0); /* the defect */
}
static enum tg_status hb_init_tensor(tg_buffer *b, struct tg_tensor *t) {
    if (defect_of(b) == D_INIT_VIEW && t->view_src) return tg_fail(TG_ERR_UNSUPPORTED, "views"); /* the defect */
    return TG_OK;
}
/* A byte as the buffer's memory holds it, and back (its own inverse). */
static uint8_t hb_stored(tg_buffer *b, uint8_t v) {
    return defect_of(b) == D_INVERTED ? (uint8_t)~v : v; /* the defect */
}
static void hb_store(tg_buffer *b, uint8_t *p, size_t n) {
    for (size_t i = 0; defect_of(b) == D_INVERTED && i < n; i++) p[i] = hb_stored(b, p[i]);
}
static void hb_set(tg_buffer *b, struct tg_tensor *t, const void *d, size_t o, size_t n) {
    if (defect_of(b) == D_SET_OFFSET) o = 0; /* the defect */
    memcpy((char *)t->data + o, d, n);
    hb_store(b, (uint8_t *)t->data + o, n);
}
static void hb_get(tg_buffer *b, const struct tg_tensor *t, void *d, size_t o, size_t n) {
    if (defect_of(b) == D_GET_OFFSET) o = 0; /* the defect */
    memcpy(d, (const char *)t->data + o, n);
    hb_store(b, d, n);
}
static void hb_memset(tg_buffer *b, struct tg_tensor *t, uint8_t v, size_t o, size_t n) {
    if (defect_of(b) == D_MEMSET_OFFSET) o = 0; /* the defect */
    memset((char *)t->data + o, hb_stored(b, v), n);
}
static void hb_clear(tg_buffer *b, uint8_t v) {
    memset(b->context, hb_stored(b, v), b->size - (defect_of(b) == D_CLEAR_LAST && b->size)); /* the defect */
}
static tg_buffer *hb_alloc(tg_buffer_type *t, size_t size) {
    const enum defect d = host_of_buft(t)->defect;
    /* the defects: refusals of sizes the type says it can allocate */
    if ((d == D_NO_EMPTY && size == 0) || (d == D_ALLOC_CAP && size > 2048)) {
        tg_fail(TG_ERR_ALLOC, "test-host: no buffer of %zu bytes", size);
        return NULL;
    }
    void *mem = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    if (!mem) {
        tg_fail(TG_ERR_ALLOC, "test-host: out of host memory for %zu bytes", size);
        return NULL;
    }
    /* defined bytes: a broken variant that leaves some unwritten is caught
     * by their value, under MemorySanitizer too */
    memset(mem, 0, (size + 63) / 64 * 64 + 64);
    struct tg_buffer_iface iface = {.free_buffer = hb_free, .get_base = hb_base, .init_tensor = hb_init_tensor,
                                    .memset_tensor = hb_memset, .set_tensor = hb_set, .get_tensor = hb_get,
                                    .clear = hb_clear};
    tg_buffer *b = tg_buffer_init(d == D_TWIN_TYPE ? &host_of_buft(t)->twin : t, iface, mem, size); /* the defect */
    if (!b) free(mem);
    return b;
}

static struct host_be *host_of(tg_backend *b) { return (struct host_be *)b; }
static const char *hb_name(tg_backend *b) { (void)b; return "host-mul-mat"; }
static tg_buffer_type *hb_default_buft(tg_backend *b) { return &host_of(b)->buft; }
static bool hb_supports_buft(tg_backend *b, tg_buffer_type *t) { (void)b; return tg_buft_is_host(t); }
static bool hb_supports_op(tg_backend *b, const struct tg_tensor *op) {
    const enum defect d = host_of(b)->defect;
    return op->op == TG_OP_MUL_MAT && op->src[0]->type == TG_TYPE_F32 && op->src[1]->type == TG_TYPE_F32 &&
           op->type == (d == D_CLAIMS_NONE ? TG_TYPE_F16 : TG_TYPE_F32) && /* the defect */
           (d != D_CLAIMS_BROADCAST || op->src[1]->ne[2] > op->src[0]->ne[2]); /* the defect */
}

/* dst[i1, i0] = sum_k a[k, i0] * b[k, i1], broadcasting a over dims 2 and 3. */
static void hb_mul_mat(const struct tg_tensor *dst, const struct tg_tensor *a, const struct tg_tensor *b,
                       bool ignore_strides) {
    const int64_t K = a->ne[0];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    const int64_t a2 = i2 / (b->ne[2] / a->ne[2]), a3 = i3 / (b->ne[3] / a->ne[3]);
                    double sum = 0;
                    for (int64_t k = 0; k < K; k++) {
                        size_t ao, bo;
                        if (ignore_strides) { /* the defect: offsets of packed operands */
                            ao = (size_t)(((a3 * a->ne[2] + a2) * a->ne[1] + i0) * K + k) * 4;
                            bo = (size_t)(((i3 * b->ne[2] + i2) * b->ne[1] + i1) * K + k) * 4;
                        } else {
                            ao = (size_t)(k * a->nb[0] + i0 * a->nb[1] + a2 * a->nb[2] + a3 * a->nb[3]);
                            bo = (size_t)(k * b->nb[0] + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3]);
                        }
                        float x, y;
                        memcpy(&x, (const char *)a->data + ao, 4);
                        memcpy(&y, (const char *)b->data + bo, 4);
                        sum += (double)x * y;
                    }
                    const float r = (float)sum;
                    memcpy((char *)dst->data + i0 * dst->nb[0] + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3],
                           &r, 4);
                }
}

static void hb_run(struct host_be *h, const struct hb_item *it) {
    if (it->is_mul_mat) hb_mul_mat(&it->dst, &it->a, &it->b, h->defect == D_STRIDES);
    else memcpy(it->to, it->from, it->size);
}

/* Runs the queued items up to the one issued as number upto. */
static void hb_drain(struct host_be *h, uint64_t upto) {
    int k = 0;
    for (; k < h->n_q && h->done < upto; k++, h->done++) hb_run(h, &h->q[k]);
    if (k == 0) return; /* h->q may be NULL */
    memmove(h->q, h->q + k, (size_t)(h->n_q - k) * sizeof *h->q);
    h->n_q -= k;
}

/* Runs it now (synchronous), or queues it; false when out of memory. */
static bool hb_issue(struct host_be *h, const struct hb_item *it) {
    if (!h->queued) {
        hb_run(h, it);
        h->issued++;
        h->done++;
    } else {
        if (h->n_q == h->cap_q) {
            const int cap = h->cap_q ? 2 * h->cap_q : 16;
            struct hb_item *q = realloc(h->q, (size_t)cap * sizeof *q);
            if (!q) return false;
            h->q = q;
            h->cap_q = cap;
        }
        h->q[h->n_q++] = *it;
        h->issued++;
    }
    if (it->is_mul_mat) h->last_compute = h->issued;
    else h->last_transfer = h->issued;
    return true;
}

static void hb_backend_free(tg_backend *b) {
    struct host_be *h = host_of(b);
    hb_drain(h, h->issued);
    free(h->q);
    free(h);
}

static enum tg_status hb_compute(tg_backend *be, struct tg_graph *g) {
    struct host_be *h = host_of(be);
    const int n_nodes = g->n_nodes - (h->defect == D_SKIP_LAST); /* the defect */
    for (int i = 0; i < n_nodes; i++) {
        struct tg_tensor *n = g->nodes[i];
        /* views, op-none and no-compute nodes are no work (tg-backend.h) */
        if (tg_op_is_view(n->op) || n->op == TG_OP_NONE || (n->flags & TG_FLAG_NO_COMPUTE)) continue;
        if (!hb_supports_op(be, n)) return tg_fail(TG_ERR_UNSUPPORTED, "host-mul-mat: node '%s' is not mul_mat", n->name);
        const struct hb_item it = {.is_mul_mat = true, .dst = *n, .a = *n->src[0], .b = *n->src[1]};
        if (!hb_issue(h, &it)) return tg_fail(TG_ERR_ALLOC, "host-mul-mat: out of host memory");
        h->n_computed++;
        if (h->defect == D_FIRST_ONLY) break; /* the defect */
    }
    return TG_OK;
}

/* No kernel of it fails once issued: a failure to report would be counted in n_failed. */
static enum tg_status hb_take_failure(tg_backend *be) {
    struct host_be *h = host_of(be);
    const int failed = h->defect == D_TAKE_FAILURE ? h->n_computed : h->n_failed; /* the defect */
    h->n_computed = h->n_failed = 0;
    return failed ? tg_fail(TG_ERR_DEVICE, "host-mul-mat: %d queued computes failed", failed) : TG_OK;
}

/* The queued variant's async entry points and events. */
static void hb_set_async(tg_backend *be, struct tg_tensor *t, const void *d, size_t o, size_t n) {
    const struct hb_item it = {.to = (char *)t->data + o, .from = d, .size = n};
    if (!hb_issue(host_of(be), &it)) memcpy(it.to, d, n); /* no room to queue: synchronous */
}
static void hb_get_async(tg_backend *be, const struct tg_tensor *t, void *d, size_t o, size_t n) {
    if (host_of(be)->defect == D_GET_ASYNC_OFFSET) o = 0; /* the defect */
    const struct hb_item it = {.to = d, .from = (const char *)t->data + o, .size = n};
    if (!hb_issue(host_of(be), &it)) {
        hb_drain(host_of(be), host_of(be)->issued);
        memcpy(d, it.from, n);
    }
}
static void hb_synchronize(tg_backend *be) {
    struct host_be *h = host_of(be);
    hb_drain(h, h->issued - (h->defect == D_SYNC_FORGETS && h->issued)); /* the defect */
}
static tg_event *hb_event_new(tg_backend *be) {
    tg_event *e = calloc(1, sizeof *e + sizeof(uint64_t));
    if (!e) return NULL;
    e->backend = be;
    e->context = e + 1;
    return e;
}
static void hb_event_free(tg_event *e) { free(e); }
static void hb_event_record(tg_event *e, tg_backend *be) {
    const struct host_be *h = host_of(be);
    const enum defect d = h->defect;
    /* the defects: a mark on one kind of work only */
    *(uint64_t *)e->context = d == D_EVENT_COMPUTE ? h->last_compute : d == D_EVENT_TRANSFER ? h->last_transfer
                                                                                             : h->issued;
    e->backend = be;
}
static void hb_event_synchronize(tg_event *e) { hb_drain(host_of(e->backend), *(uint64_t *)e->context); }
/* One in-order queue: waiting on its own event is no work; another's, the host waits. */
static void hb_event_wait(tg_backend *be, tg_event *e) {
    if (e->backend != be) tg_event_synchronize(e);
}

/* user: the defect, plus HOST_QUEUED for the queued variant */
#define HOST_QUEUED 0x100

static tg_backend *host_new(void *user) {
    struct host_be *h = calloc(1, sizeof *h);
    if (!h) {
        tg_fail(TG_ERR_ALLOC, "out of host memory");
        return NULL;
    }
    h->defect = (enum defect)((intptr_t)user & 0xff);
    h->queued = (intptr_t)user & HOST_QUEUED;
    h->buft = (tg_buffer_type){.iface = {.get_name = hb_buft_name, .alloc_buffer = hb_alloc,
                                         .get_alignment = hb_alignment, .get_alloc_size = hb_alloc_size,
                                         .is_host = hb_is_host},
                               .owner = &h->base, .context = h};
    h->twin = h->buft;
    h->base.iface = (struct tg_backend_iface){.get_name = hb_name, .free = hb_backend_free,
                                              .get_default_buffer_type = hb_default_buft, .graph_compute = hb_compute,
                                              .supports_op = hb_supports_op, .supports_buft = hb_supports_buft,
                                              .take_failure = hb_take_failure};
    if (h->queued) {
        h->base.iface.set_tensor_async = hb_set_async;
        h->base.iface.get_tensor_async = hb_get_async;
        h->base.iface.synchronize = hb_synchronize;
        h->base.iface.event_new = hb_event_new;
        h->base.iface.event_free = hb_event_free;
        h->base.iface.event_record = hb_event_record;
        h->base.iface.event_wait = hb_event_wait;
        h->base.iface.event_synchronize = hb_event_synchronize;
    }
    h->base.context = h;
    return &h->base;
}

/* ---- the project's backends --------------------------------------------------------------------- */

static tg_backend *cpu_new(void *user) { (void)user; return tg_backend_cpu_new(); }
static tg_backend *sim_new(void *user) {
    (void)user;
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "sim-under-test";
    p.alloc_pad = 32; /* padding in get_alloc_size, as a device may want */
    return tg_backend_sim_new(&p);
}
static tg_backend *cuda_new(void *user) { (void)user; return tg_backend_cuda_new(0); }

#ifdef TG_CONFORMANCE_FACTORY
/* A backend of the builder's own (cmake -DTG_CONFORMANCE_BACKEND=file.c -DTG_CONFORMANCE_FACTORY=function). */
tg_backend *TG_CONFORMANCE_FACTORY(void);
static tg_backend *external_new(void *user) { (void)user; return TG_CONFORMANCE_FACTORY(); }
#endif

int main(int argc, char **argv) {
    if (argc != 2 && !(argc == 4 && strcmp(argv[2], "--expect-failure") == 0)) {
        fprintf(stderr, "usage: %s cpu|sim|cuda|host-mul-mat|host-queued|host-DEFECT "
                        "[--expect-failure buffers|ops|graphs|async]\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    struct tg_conformance_target t = {.name = name};
    if (strcmp(name, "cpu") == 0) {
        t.new_backend = cpu_new;
    } else if (strcmp(name, "sim") == 0) {
        t.new_backend = sim_new;
#ifdef TG_CONFORMANCE_FACTORY
    } else if (strcmp(name, "external") == 0) {
        t.new_backend = external_new;
        t.graph_max_nmse = TG_CONFORMANCE_GRAPH_NMSE;
#endif
    } else if (strcmp(name, "cuda") == 0) {
        if (tg_cuda_device_count() <= 0) {
            printf("conformance cuda: skipped: %s\n", tg_cuda_unavailable_reason());
            return tg_cuda_absence_is_expected() ? 77 : 1;
        }
        t.new_backend = cuda_new;
        t.graph_max_nmse = 2e-3; /* its kernels are not the CPU's: the model-level bound */
    } else {
        static const struct { const char *name; intptr_t d; } hosts[] = {
            {"host-mul-mat", D_NONE},
            {"host-queued", D_NONE | HOST_QUEUED},
            {"host-strides", D_STRIDES},
            {"host-claims-none", D_CLAIMS_NONE},
            {"host-claims-broadcast", D_CLAIMS_BROADCAST},
            {"host-alloc-size", D_ALLOC_SIZE},
            {"host-set-offset", D_SET_OFFSET},
            {"host-get-offset", D_GET_OFFSET},
            {"host-memset-offset", D_MEMSET_OFFSET},
            {"host-clear-last", D_CLEAR_LAST},
            {"host-base-header", D_BASE_HEADER},
            {"host-align-zero", D_ALIGN_ZERO},
            {"host-no-empty", D_NO_EMPTY},
            {"host-alloc-cap", D_ALLOC_CAP},
            {"host-twin-type", D_TWIN_TYPE},
            {"host-init-view", D_INIT_VIEW},
            {"host-get-async-offset", D_GET_ASYNC_OFFSET | HOST_QUEUED},
            {"host-inverted", D_INVERTED},
            {"host-skip-last", D_SKIP_LAST},
            {"host-first-only", D_FIRST_ONLY},
            {"host-take-failure", D_TAKE_FAILURE},
            {"host-sync-forgets", D_SYNC_FORGETS | HOST_QUEUED},
            {"host-event-compute", D_EVENT_COMPUTE | HOST_QUEUED},
            {"host-event-transfer", D_EVENT_TRANSFER | HOST_QUEUED},
        };
        for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
            if (strcmp(name, hosts[i].name) == 0) {
                t.new_backend = host_new;
                t.user = (void *)hosts[i].d;
                /* its own kernel sums in double: close to the CPU's, not equal */
                t.graph_max_nmse = 1e-9;
            }
        }
    }
    if (!t.new_backend) {
        fprintf(stderr, "backend_conformance: unknown target '%s'\n", name);
        return 2;
    }
    if (argc == 2) return tg_conformance_run(&t) ? 1 : 0;
    static const char *const parts[4] = {"buffers", "ops", "graphs", "async"};
    for (int k = 0; k < 4; k++) {
        if (strcmp(argv[3], parts[k]) != 0) continue;
        t.skip = 15u & ~(1u << k); /* the part that must catch it, alone */
        const bool caught = tg_conformance_run(&t) & (1 << k);
        printf("backend_conformance: %s: the %s part %s\n", name, parts[k],
               caught ? "caught the defect, as it must" : "did NOT catch the defect");
        return caught ? 0 : 1;
    }
    fprintf(stderr, "backend_conformance: unknown part '%s'\n", argv[3]);
    return 2;
}

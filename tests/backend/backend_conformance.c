/* The conformance harness (conformance.h) run on the project's backends and on
 * a small host backend written the way a backend author would (its own host
 * buffer type, mul_mat only) -- once correct and once per deliberate defect,
 * each of which the harness must catch:
 *
 *   backend_conformance cpu | sim | cuda | host-mul-mat | external
 *   backend_conformance BROKEN --expect-failure PART
 *
 * BROKEN is host-strides (mul_mat reads its operands as if contiguous),
 * host-alloc-size (get_alloc_size ignores dims 2 and 3), host-set-offset
 * (set_tensor ignores the offset).  With --expect-failure only PART (buffers,
 * ops, graphs, async) runs, and the exit status is 0 only when it failed: the
 * harness caught the defect.
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

enum defect { D_NONE, D_STRIDES, D_ALLOC_SIZE, D_SET_OFFSET };

struct host_be {
    tg_backend base; /* first: the tg_backend pointer is the struct's */
    tg_buffer_type buft;
    enum defect defect;
};

static struct host_be *host_of_buft(tg_buffer_type *t) { return t->context; }

static const char *hb_buft_name(tg_buffer_type *t) { (void)t; return "test-host"; }
static size_t hb_alignment(tg_buffer_type *t) { (void)t; return 64; }
static bool hb_is_host(tg_buffer_type *t) { (void)t; return true; }
static size_t hb_alloc_size(tg_buffer_type *t, const struct tg_tensor *x) {
    if (host_of_buft(t)->defect == D_ALLOC_SIZE) {
        /* the defect: a size from the first two dimensions only */
        return (size_t)(x->ne[0] / tg_blck_size(x->type)) * tg_type_size(x->type) * (size_t)x->ne[1];
    }
    return tg_nbytes(x);
}
static void hb_free(tg_buffer *b) { free(b->context); }
static void *hb_base(tg_buffer *b) { return b->context; }
static void hb_set(tg_buffer *b, struct tg_tensor *t, const void *d, size_t o, size_t n) {
    if (host_of_buft(b->buft)->defect == D_SET_OFFSET) o = 0; /* the defect */
    memcpy((char *)t->data + o, d, n);
}
static void hb_get(tg_buffer *b, const struct tg_tensor *t, void *d, size_t o, size_t n) {
    (void)b;
    memcpy(d, (const char *)t->data + o, n);
}
static void hb_memset(tg_buffer *b, struct tg_tensor *t, uint8_t v, size_t o, size_t n) {
    (void)b;
    memset((char *)t->data + o, v, n);
}
static void hb_clear(tg_buffer *b, uint8_t v) { memset(b->context, v, b->size); }
static tg_buffer *hb_alloc(tg_buffer_type *t, size_t size) {
    void *mem = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    if (!mem) {
        tg_fail(TG_ERR_ALLOC, "test-host: out of host memory for %zu bytes", size);
        return NULL;
    }
    struct tg_buffer_iface iface = {.free_buffer = hb_free, .get_base = hb_base, .memset_tensor = hb_memset,
                                    .set_tensor = hb_set, .get_tensor = hb_get, .clear = hb_clear};
    tg_buffer *b = tg_buffer_init(t, iface, mem, size);
    if (!b) free(mem);
    return b;
}

static struct host_be *host_of(tg_backend *b) { return (struct host_be *)b; }
static const char *hb_name(tg_backend *b) { (void)b; return "host-mul-mat"; }
static void hb_backend_free(tg_backend *b) { free(host_of(b)); }
static tg_buffer_type *hb_default_buft(tg_backend *b) { return &host_of(b)->buft; }
static bool hb_supports_buft(tg_backend *b, tg_buffer_type *t) { (void)b; return tg_buft_is_host(t); }
static bool hb_supports_op(tg_backend *b, const struct tg_tensor *op) {
    (void)b;
    return op->op == TG_OP_MUL_MAT && op->src[0]->type == TG_TYPE_F32 && op->src[1]->type == TG_TYPE_F32 &&
           op->type == TG_TYPE_F32;
}

/* dst[i1, i0] = sum_k src0[k, i0] * src1[k, i1], broadcasting src0 over dims 2 and 3. */
static void hb_mul_mat(struct tg_tensor *dst, bool ignore_strides) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
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

static enum tg_status hb_compute(tg_backend *be, struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *n = g->nodes[i];
        /* views, op-none and no-compute nodes are no work (tg-backend.h) */
        if (tg_op_is_view(n->op) || n->op == TG_OP_NONE || (n->flags & TG_FLAG_NO_COMPUTE)) continue;
        if (!hb_supports_op(be, n)) return tg_fail(TG_ERR_UNSUPPORTED, "host-mul-mat: node '%s' is not mul_mat", n->name);
        hb_mul_mat(n, host_of(be)->defect == D_STRIDES);
    }
    return TG_OK;
}

static tg_backend *host_new(void *user) {
    struct host_be *h = calloc(1, sizeof *h);
    if (!h) {
        tg_fail(TG_ERR_ALLOC, "out of host memory");
        return NULL;
    }
    h->defect = (enum defect)(intptr_t)user;
    h->buft = (tg_buffer_type){.iface = {.get_name = hb_buft_name, .alloc_buffer = hb_alloc,
                                         .get_alignment = hb_alignment, .get_alloc_size = hb_alloc_size,
                                         .is_host = hb_is_host},
                               .owner = &h->base, .context = h};
    h->base.iface = (struct tg_backend_iface){.get_name = hb_name, .free = hb_backend_free,
                                              .get_default_buffer_type = hb_default_buft, .graph_compute = hb_compute,
                                              .supports_op = hb_supports_op, .supports_buft = hb_supports_buft};
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
        fprintf(stderr, "usage: %s cpu|sim|cuda|host-mul-mat|host-strides|host-alloc-size|host-set-offset "
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
        static const struct { const char *name; enum defect d; } hosts[] = {
            {"host-mul-mat", D_NONE}, {"host-strides", D_STRIDES}, {"host-alloc-size", D_ALLOC_SIZE},
            {"host-set-offset", D_SET_OFFSET}};
        for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
            if (strcmp(name, hosts[i].name) == 0) {
                t.new_backend = host_new;
                t.user = (void *)(intptr_t)hosts[i].d;
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

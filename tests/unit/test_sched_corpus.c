/* The scheduler on the corpus LLaMA graphs, as llama.cpp runs them with part of
 * the model offloaded: the weights and KV cache of the first half of the layers
 * on a device, the rest (and the embeddings, output and inputs) on the host.
 * Every scheduler checker must hold, and the split count must be the handful
 * that offloading half the layers implies (not one per node).  Backends plan
 * only (address-only buffers, nothing computed), so 7B graphs fit in memory. */
#include "tg-gen.h"
#include "tg-io.h"
#include "tg-oracle-sched.h"
#include "tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct plan_backend {
    tg_backend backend;
    struct tg_gen_buft buft;
    const struct tg_gen_buft *device_buft; /* host backend: the type it must not use */
    char name[16];
};

static struct plan_backend *pb_of(tg_backend *b) { return (struct plan_backend *)b->context; }
static const char *pb_name(tg_backend *b) { return pb_of(b)->name; }
static tg_buffer_type *pb_buft(tg_backend *b) { return &pb_of(b)->buft.buft; }
static bool pb_supports_buft(tg_backend *b, tg_buffer_type *buft) {
    struct plan_backend *p = pb_of(b);
    if (p->device_buft) return buft != &p->device_buft->buft; /* host: every type but the device's */
    return buft == &p->buft.buft;
}
static bool pb_supports_op(tg_backend *b, const struct tg_tensor *op) {
    (void)b;
    (void)op;
    return true;
}
static enum tg_status pb_compute(tg_backend *b, struct tg_graph *g) {
    (void)g;
    return tg_fail(TG_ERR_UNSUPPORTED, "backend '%s' only plans", pb_name(b));
}

/* The host backend's address-only type claims to be host memory, as the
 * scheduler requires of its last backend (nothing is read through it here). */
static bool claims_host(tg_buffer_type *buft) {
    (void)buft;
    return true;
}

static void pb_init(struct plan_backend *p, const char *name) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    tg_gen_buft_init_address_only(&p->buft, name, 256);
    p->backend.context = p;
    p->backend.iface.get_name = pb_name;
    p->backend.iface.get_default_buffer_type = pb_buft;
    p->backend.iface.supports_buft = pb_supports_buft;
    p->backend.iface.supports_op = pb_supports_op;
    p->backend.iface.graph_compute = pb_compute;
    p->buft.buft.owner = &p->backend;
}

/* Layer of a weight ("blk.N.") or cache tensor ("cache_k_lN"), -1 for others. */
static int layer_of(const char *name) {
    int layer;
    if (sscanf(name, "blk.%d.", &layer) == 1) return layer;
    if (sscanf(name, "cache_k_l%d", &layer) == 1 || sscanf(name, "cache_v_l%d", &layer) == 1) return layer;
    return -1;
}

static int meta_int(const struct tg_file *f, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < f->n_meta; i++)
        if (strncmp(f->meta[i], key, n) == 0 && f->meta[i][n] == '=') return atoi(f->meta[i] + n + 1);
    return -1;
}

/* Binds the pre-allocated leafs: layers below `half` on the device. */
static bool place(struct tg_file *f, struct plan_backend *dev, struct plan_backend *host, int half, tg_buffer **bufs) {
    size_t need[2][2] = {{0}}; /* [device?][usage weights?] */
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *ft = &f->tensors[i];
        if (ft->placement == TG_PLACE_NONE) continue;
        int l = layer_of(ft->tensor->name);
        need[l >= 0 && l < half][ft->placement == TG_PLACE_WEIGHTS] += tg_nbytes(ft->tensor) + 256;
    }
    size_t used[2][2] = {{0}};
    for (int d = 0; d < 2; d++) {
        for (int w = 0; w < 2; w++) {
            tg_buffer_type *bt = d ? &dev->buft.buft : &host->buft.buft;
            bufs[d * 2 + w] = tg_buft_alloc_buffer(bt, need[d][w] + 256);
            if (!bufs[d * 2 + w]) return false;
            tg_buffer_set_usage(bufs[d * 2 + w], w ? TG_BUFFER_USAGE_WEIGHTS : TG_BUFFER_USAGE_ANY);
        }
    }
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *ft = &f->tensors[i];
        if (ft->placement == TG_PLACE_NONE) continue;
        int l = layer_of(ft->tensor->name);
        int d = l >= 0 && l < half, w = ft->placement == TG_PLACE_WEIGHTS;
        tg_buffer *b = bufs[d * 2 + w];
        used[d][w] = (used[d][w] + 255) / 256 * 256;
        if (tg_tensor_bind(ft->tensor, b, (char *)tg_buffer_get_base(b) + used[d][w]) != TG_OK) return false;
        used[d][w] += tg_nbytes(ft->tensor);
    }
    return true;
}

static void run_graph(const char *path) {
    struct tg_file *f = NULL;
    enum tg_status st = tg_file_load(path, &f);
    CHECK_OK(st);
    if (st != TG_OK) return;
    struct plan_backend dev, host;
    pb_init(&dev, "dev");
    pb_init(&host, "host");
    host.device_buft = &dev.buft;
    host.buft.buft.iface.is_host = claims_host;
    tg_backend *backends[2] = {&dev.backend, &host.backend};
    int n_layer = meta_int(f, "n_layer");
    int half = n_layer > 0 ? n_layer / 2 : 0;
    tg_buffer *bufs[4] = {0};
    bool placed = place(f, &dev, &host, half, bufs);
    CHECK(placed);
    tg_sched *s = placed ? tg_sched_new(backends, NULL, 2, (size_t)f->graph->size + 16, false, false) : NULL;
    CHECK(s != NULL);
    if (!s) fprintf(stderr, "%s: %s\n", path, tg_last_error());
    struct tg_oracle_snapshot snap;
    if (s && tg_oracle_snapshot_take(f->graph, &snap) == TG_OK) {
        st = tg_sched_alloc_graph(s, f->graph);
        CHECK_OK(st);
        if (st == TG_OK) {
            struct tg_oracle_sched_report rep;
            CHECK_OK(tg_oracle_sched_check(s, &snap, NULL, NULL, 0, &rep));
            if (rep.n) tg_oracle_sched_report_print(&rep, 10);
            CHECK(rep.n == 0);
            int n_splits = tg_sched_get_n_splits(s);
            int n_inputs = 0;
            for (int i = 0; i < n_splits; i++) {
                struct tg_sched_split_info info;
                if (tg_sched_get_split_info(s, i, &info) == TG_OK) n_inputs += info.n_inputs;
            }
            printf("%-45s layers %2d, first %2d on dev: %d nodes, %d splits, %d split inputs, compute dev %zu "
                   "host %zu bytes\n", path, n_layer, half, f->graph->n_nodes, n_splits, n_inputs,
                   tg_sched_get_buffer_size(s, &dev.backend), tg_sched_get_buffer_size(s, &host.backend));
            /* embeddings on the host, the first half on dev, the rest on the host:
             * a few splits (inputs such as positions and masks may add some) */
            CHECK(n_splits >= 3);
            CHECK(n_splits <= 3 + 2 * n_layer);
            tg_oracle_sched_report_free(&rep);
        }
        tg_oracle_snapshot_free(&snap);
    }
    tg_sched_free(s);
    tg_file_free(f);
    for (int i = 0; i < 4; i++) tg_buffer_free(bufs[i]);
}

int main(void) {
    const char *graphs[] = {
        "corpus/graphs/llama-tiny-prefill32.tg",       "corpus/graphs/tinyllama-1.1b-decode.tg",
        "corpus/graphs/tinyllama-1.1b-prefill512.tg",  "corpus/graphs/llama-7b-decode-flash.tg",
        "corpus/graphs/llama-7b-prefill512-flash.tg",
    };
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) run_graph(graphs[i]);
    return tg_test_finish();
}

/* Scheduler properties over generated graphs (fuzz/gen) with 1-4 backends: 0-3
 * planning-only devices, each with a random supported-op set and a buffer type
 * no other backend may use (one may share the host type, like a BLAS backend),
 * then a host backend last; the case's weights moved to random backends; random
 * pins on backends that support the node.  For each case:
 *   - alloc succeeds, or fails with TG_ERR_UNSUPPORTED naming a node, or with
 *     TG_ERR_INVALID for random pins that cannot both hold (a pinned set_rows or
 *     cpy writing into a tensor pinned or pre-allocated where it cannot write);
 *   - no scheduler checker fires (oracle/tg-oracle-sched.h), allocator checkers
 *     on the graph copy included;
 *   - splits are a pure function of the graph: the same case scheduled on a
 *     scheduler that already planned another graph gives the same splits;
 *   - with pipeline copies (n_copies 4) the checkers hold too;
 *   - reserve then alloc of the same graph keeps the reserved buffer sizes.
 * Results equal to a CPU-only run (sim devices, pipeline copies) are in
 * prop_sched_compute.c.  TG_PROPS_CASES scales the number of seeds,
 * TG_PROPS_SEED moves the range. */
#include "tg-gen.h"
#include "tg-oracle-sched.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEVS 3

/* On by default since the view-result and view-pin bugs (B1, B2) were fixed;
 * TG_PROPS_STRICT=0 skips those case kinds again when bisecting. */
static bool strict;

struct plan_backend {
    tg_backend backend;
    struct tg_gen_buft buft;
    bool ops[TG_OP_COUNT];
    bool is_host_backend;  /* last backend: uses every host type that is not a device's own */
    bool shares_host_type; /* a device computing on the host backend's type */
    tg_buffer_type *host_buft;
    struct plan_backend *devs[MAX_DEVS];
    int n_devs;
    char name[16];
};

static struct plan_backend *pb_of(tg_backend *b) { return (struct plan_backend *)b->context; }
static const char *pb_name(tg_backend *b) { return pb_of(b)->name; }
static tg_buffer_type *pb_buft(tg_backend *b) {
    struct plan_backend *p = pb_of(b);
    return p->shares_host_type ? p->host_buft : &p->buft.buft;
}
static bool is_device_type(const struct plan_backend *host, tg_buffer_type *buft) {
    for (int i = 0; i < host->n_devs; i++)
        if (!host->devs[i]->shares_host_type && buft == &host->devs[i]->buft.buft) return true;
    return false;
}
static bool pb_supports_buft(tg_backend *b, tg_buffer_type *buft) {
    struct plan_backend *p = pb_of(b);
    if (p->is_host_backend) return buft == &p->buft.buft || (tg_buft_is_host(buft) && !is_device_type(p, buft));
    return buft == pb_buft(b);
}
static bool pb_supports_op(tg_backend *b, const struct tg_tensor *op) {
    return op->op == TG_OP_NONE || tg_op_is_view(op->op) || pb_of(b)->ops[op->op];
}
static enum tg_status pb_compute(tg_backend *b, struct tg_graph *g) {
    (void)g;
    return tg_fail(TG_ERR_UNSUPPORTED, "backend '%s' only plans", pb_name(b));
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct world {
    struct tg_gen_case *c;
    struct plan_backend pbs[MAX_DEVS + 1];
    tg_backend *backends[MAX_DEVS + 1];
    int n_backends;
    tg_buffer *dev_buffers[MAX_DEVS];
    struct tg_oracle_sched_pin pins[64];
    int n_pins;
};

static void pb_init(struct plan_backend *p, const char *name, size_t alignment) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    tg_gen_buft_init(&p->buft, name, alignment, 0, TG_OP_COUNT, 0);
    p->backend.context = p;
    p->backend.iface.get_name = pb_name;
    p->backend.iface.get_default_buffer_type = pb_buft;
    p->backend.iface.supports_buft = pb_supports_buft;
    p->backend.iface.supports_op = pb_supports_op;
    p->backend.iface.graph_compute = pb_compute;
    p->buft.buft.owner = &p->backend;
}

/* Moves each external (weights) leaf to a random backend's buffer. */
static enum tg_status place_weights(struct world *w, uint64_t *r) {
    struct tg_graph *g = w->c->graph;
    int target[512];
    int n_leafs = g->n_leafs < 512 ? g->n_leafs : 512;
    size_t need[MAX_DEVS] = {0};
    for (int j = 0; j < n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        target[j] = -1;
        if (t->view_src || t->buffer != w->c->external_buffer) continue;
        int b = (int)(rng_next(r) % (uint64_t)w->n_backends);
        if (b == w->n_backends - 1 || w->pbs[b].shares_host_type) continue; /* stays in host memory */
        target[j] = b;
        need[b] += tg_nbytes(t) + 512;
    }
    for (int b = 0; b < w->n_backends - 1; b++) {
        if (!need[b]) continue;
        w->dev_buffers[b] = tg_buft_alloc_buffer(&pb_of(w->backends[b])->buft.buft, need[b]);
        if (!w->dev_buffers[b]) return TG_ERR_ALLOC;
        tg_buffer_set_usage(w->dev_buffers[b], TG_BUFFER_USAGE_WEIGHTS);
    }
    size_t used[MAX_DEVS] = {0};
    for (int j = 0; j < n_leafs; j++) {
        int b = target[j];
        if (b < 0) continue;
        char *base = tg_buffer_get_base(w->dev_buffers[b]);
        size_t align = w->pbs[b].buft.alignment;
        used[b] = (used[b] + align - 1) / align * align;
        enum tg_status st = tg_tensor_bind(g->leafs[j], w->dev_buffers[b], base + used[b]);
        if (st != TG_OK) return st;
        used[b] += tg_nbytes(g->leafs[j]);
    }
    /* views bound before the move follow their roots */
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        if (!t->view_src || !t->view_src->data || !t->data) continue;
        enum tg_status st = tg_tensor_view_bind(t);
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* share: another world of the same seed whose backends (and buffer types) this
 * one uses, so one scheduler can plan both graphs. */
static enum tg_status world_init(struct world *w, uint64_t seed, const struct world *share) {
    memset(w, 0, sizeof *w);
    struct tg_gen_options opts = tg_gen_default_options();
    opts.max_ops = 30;
    enum tg_status st = tg_gen_case_from_seed(seed, &opts, &w->c);
    if (st != TG_OK) return st;
    uint64_t r = seed ^ 0x5eedull;
    int n_devs = (int)(rng_next(&r) % (MAX_DEVS + 1));
    w->n_backends = n_devs + 1;
    struct plan_backend *host = &w->pbs[n_devs];
    pb_init(host, "host", 32);
    host->is_host_backend = true;
    for (int i = 0; i < TG_OP_COUNT; i++) host->ops[i] = true;
    for (int d = 0; d < n_devs; d++) {
        char name[16];
        snprintf(name, sizeof name, "dev%d", d);
        pb_init(&w->pbs[d], name, (size_t)64 << (rng_next(&r) % 3));
        w->pbs[d].shares_host_type = rng_next(&r) % 4 == 0;
        w->pbs[d].host_buft = &host->buft.buft;
        for (int i = 0; i < TG_OP_COUNT; i++) w->pbs[d].ops[i] = rng_next(&r) % 10 < 7;
        host->devs[host->n_devs++] = &w->pbs[d];
    }
    for (int b = 0; b < w->n_backends; b++) w->backends[b] = share ? share->backends[b] : &w->pbs[b].backend;
    st = place_weights(w, &r);
    if (st != TG_OK) return st;
    /* pins on a few nodes, always to a backend that runs them */
    struct tg_graph *g = w->c->graph;
    for (int i = 0; i < g->n_nodes && w->n_pins < 64; i++) {
        struct tg_tensor *t = g->nodes[i];
        if (rng_next(&r) % 8 != 0) continue;
        int b = (int)(rng_next(&r) % (uint64_t)w->n_backends);
        /* known bug (reported): a pin on a view op moves the view away from its
         * root's memory and its readers get no copy; strict mode pins them too */
        if (tg_op_is_view(t->op) && !strict) continue;
        if (!pb_supports_op(w->backends[b], t)) continue;
        w->pins[w->n_pins++] = (struct tg_oracle_sched_pin){t, b};
    }
    return TG_OK;
}

static void world_free(struct world *w) {
    tg_gen_case_free(w->c);
    for (int b = 0; b < MAX_DEVS; b++) tg_buffer_free(w->dev_buffers[b]);
}

static tg_sched *new_sched(struct world *w, bool parallel) {
    tg_sched *s = tg_sched_new(w->backends, NULL, w->n_backends, (size_t)w->c->graph->size + 16, parallel, false);
    for (int i = 0; s && i < w->n_pins; i++) {
        tg_sched_set_tensor_backend(s, (struct tg_tensor *)w->pins[i].tensor, w->backends[w->pins[i].backend_id]);
    }
    return s;
}

struct split_sig {
    int n;
    int v[4 * 256];
};

static void split_signature(const tg_sched *s, struct split_sig *sig) {
    sig->n = 0;
    for (int i = 0; i < tg_sched_get_n_splits(s) && sig->n + 4 <= 4 * 256; i++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(s, i, &info) != TG_OK) break;
        sig->v[sig->n++] = info.backend_id;
        sig->v[sig->n++] = info.i_start;
        sig->v[sig->n++] = info.i_end;
        sig->v[sig->n++] = info.n_inputs;
    }
}

static int n_failures;
/* Cases that hit the known scheduler bug "a node whose result is a view (cpy,
 * set_rows) runs on a backend that cannot use the view's root" (reported to
 * the lead): counted and printed, failures only with TG_PROPS_STRICT=1. */
static int n_known_bug;
static long n_graphs_checked;
static int n_reserves_compared; /* seeds whose reserved sizes were compared with alloc's */

static bool is_known_bug(const struct tg_oracle_sched_report *rep) {
    /* its consequences (uncopied reads of that memory, a copy planned over it) come with it */
    return !strict && tg_oracle_sched_report_count(rep, TG_OSCHED_FOREIGN_RESULT) > 0;
}

static void fail_case(uint64_t seed, const char *what, const struct tg_oracle_sched_report *rep) {
    n_failures++;
    if (n_failures > 3 && !getenv("TG_PROPS_VERBOSE")) return; /* the first few tell the story */
    fprintf(stderr, "\n=== property '%s' failed for seed %llu (replay: TG_PROPS_SEED=%llu TG_PROPS_CASES=1)\n", what,
            (unsigned long long)seed, (unsigned long long)seed);
    if (rep) tg_oracle_sched_report_print(rep, 20);
}

/* Allocates w's graph with s (pins of w applied), runs the checkers, and
 * records the splits.  *planned: false when the case was refused as unsupported. */
static bool plan_and_check(uint64_t seed, tg_sched *s, struct world *w, const char *what, struct split_sig *sig,
                           bool *planned) {
    *planned = false;
    for (int i = 0; i < w->n_pins; i++)
        tg_sched_set_tensor_backend(s, (struct tg_tensor *)w->pins[i].tensor, w->backends[w->pins[i].backend_id]);
    struct tg_oracle_snapshot snap;
    if (tg_oracle_snapshot_take(w->c->graph, &snap) != TG_OK) {
        fail_case(seed, "snapshot", NULL);
        return false;
    }
    bool ok = true;
    enum tg_status st = tg_sched_alloc_graph(s, w->c->graph);
    bool conflicting_pins = st == TG_ERR_INVALID && strstr(tg_last_error(), "pin them to the same backend");
    if (st == TG_ERR_UNSUPPORTED || conflicting_pins) {
        if (!strstr(tg_last_error(), "'")) { /* the message must name the node */
            fail_case(seed, "unsupported names the node", NULL);
            ok = false;
        }
    } else if (st != TG_OK) {
        fprintf(stderr, "alloc: %s\n", tg_last_error());
        fail_case(seed, "alloc succeeds", NULL);
        ok = false;
    } else {
        *planned = true;
        struct tg_oracle_sched_report rep;
        n_graphs_checked++;
        if (tg_oracle_sched_check(s, &snap, NULL, w->pins, w->n_pins, &rep) != TG_OK) {
            fail_case(seed, "checker runs", NULL);
            ok = false;
        } else if (rep.n != 0 && is_known_bug(&rep)) {
            n_known_bug++;
            *planned = false; /* no further properties on this case */
        } else if (rep.n != 0) {
            fail_case(seed, what, &rep);
            ok = false;
        }
        tg_oracle_sched_report_free(&rep);
        if (sig) split_signature(s, sig);
    }
    tg_oracle_snapshot_free(&snap);
    return ok;
}

/* One seed: checkers on a fresh scheduler; the same splits on a used one;
 * pipeline copies; reserve then alloc keeps the reserved sizes. */
static bool check_seed(uint64_t seed, bool with_parallel, bool with_reserve, bool *planned) {
    struct world w1, w2, w3;
    memset(&w2, 0, sizeof w2);
    memset(&w3, 0, sizeof w3);
    bool ok = world_init(&w1, seed, NULL) == TG_OK;
    ok = ok && world_init(&w2, seed, &w1) == TG_OK && world_init(&w3, seed, &w1) == TG_OK;
    if (!ok) fail_case(seed, "case setup", NULL);
    tg_sched *s = ok ? new_sched(&w1, false) : NULL;
    struct split_sig fresh, used;
    if (s) {
        ok = plan_and_check(seed, s, &w1, "no checker fires", &fresh, planned);
        if (ok && *planned) {
            bool p2 = false, p3 = false;
            tg_sched_reset(s); /* w1 stays bound: w2 is a new decode of the same case */
            ok = plan_and_check(seed, s, &w2, "no checker fires (used scheduler)", NULL, &p2);
            tg_sched_reset(s);
            ok = ok && plan_and_check(seed, s, &w3, "no checker fires (third graph)", &used, &p3);
            if (ok && p2 && p3 && (fresh.n != used.n || memcmp(fresh.v, used.v, (size_t)fresh.n * sizeof(int)) != 0)) {
                fail_case(seed, "splits do not depend on history", NULL);
                ok = false;
            }
        }
        tg_sched_free(s);
    }
    world_free(&w2);
    world_free(&w3);
    if (ok && *planned && with_parallel) {
        struct world wp;
        memset(&wp, 0, sizeof wp);
        if (world_init(&wp, seed, &w1) == TG_OK) {
            tg_sched *sp = tg_sched_new(w1.backends, NULL, w1.n_backends, (size_t)wp.c->graph->size + 16, true, false);
            bool pp = false;
            ok = sp && plan_and_check(seed, sp, &wp, "no checker fires (n_copies 4)", NULL, &pp);
            if (sp && tg_sched_get_n_copies(sp) != TG_SCHED_MAX_COPIES) ok = false;
            tg_sched_free(sp);
        }
        world_free(&wp);
    }
    if (ok && *planned && with_reserve) {
        struct world wr, wa;
        memset(&wr, 0, sizeof wr);
        memset(&wa, 0, sizeof wa);
        if (world_init(&wr, seed, &w1) == TG_OK && world_init(&wa, seed, &w1) == TG_OK) {
            tg_sched *sr = tg_sched_new(w1.backends, NULL, w1.n_backends, (size_t)wr.c->graph->size + 16, false, false);
            for (int i = 0; sr && i < wr.n_pins; i++)
                tg_sched_set_tensor_backend(sr, (struct tg_tensor *)wr.pins[i].tensor, w1.backends[wr.pins[i].backend_id]);
            /* the same graph and pins were allocated above: a refused reserve is a
             * failure, not a case to pass over (the sizes below would go unchecked) */
            enum tg_status reserved_st = sr ? tg_sched_reserve(sr, wr.c->graph) : TG_ERR_ALLOC;
            if (reserved_st != TG_OK) {
                fprintf(stderr, "reserve: %s\n", tg_last_error());
                fail_case(seed, "reserve succeeds where alloc did", NULL);
                ok = false;
            } else {
                size_t reserved[MAX_DEVS + 1];
                for (int i = 0; i < w1.n_backends; i++) reserved[i] = tg_sched_get_buffer_size(sr, w1.backends[i]);
                tg_sched_reset(sr);
                bool pa = false;
                ok = plan_and_check(seed, sr, &wa, "no checker fires (after reserve)", NULL, &pa);
                n_reserves_compared += ok && pa;
                for (int i = 0; ok && pa && i < w1.n_backends; i++) {
                    if (tg_sched_get_buffer_size(sr, w1.backends[i]) != reserved[i]) {
                        fail_case(seed, "reserve then alloc keeps the reserved sizes", NULL);
                        ok = false;
                    }
                }
            }
            tg_sched_free(sr);
        }
        world_free(&wr);
        world_free(&wa);
    }
    world_free(&w1);
    return ok;
}

/* w's external leafs (weights) moved onto from's memory, as a graph rebuilt
 * for the next token reads the same weights. */
static bool share_weights(struct world *w, const struct world *from) {
    struct tg_graph *g = w->c->graph, *f = from->c->graph;
    if (g->n_leafs != f->n_leafs) return false;
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j], *src = f->leafs[j];
        if (t->view_src || !t->buffer || !src->buffer) continue;
        if (tg_tensor_bind(t, src->buffer, src->data) != TG_OK) return false;
    }
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        if (t->view_src && t->view_src->data && t->data && tg_tensor_view_bind(t) != TG_OK) return false;
    }
    w->n_pins = 0;
    return true;
}

static ptrdiff_t offset_in_buffer(const struct tg_tensor *t) {
    return t->buffer && t->data ? (char *)t->data - (char *)tg_buffer_get_base(t->buffer) : -1;
}

/* Schedule replay: a second decode of the case (same weights, no pins) on the
 * scheduler that just planned the first is replayed, and gives what the full
 * passes give on a third decode: backends and reasons per tensor, splits,
 * the graph copy, offsets.  *replayed counts the replays. */
static bool check_replay(uint64_t seed, int *replayed) {
    struct world a, b, c;
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    bool ok = world_init(&a, seed, NULL) == TG_OK && world_init(&b, seed, &a) == TG_OK &&
              world_init(&c, seed, &a) == TG_OK;
    a.n_pins = 0;
    ok = ok && share_weights(&b, &a) && share_weights(&c, &a);
    if (!ok) fail_case(seed, "replay case setup", NULL);
    tg_sched *s = ok ? new_sched(&a, false) : NULL;
    tg_sched *full = ok ? new_sched(&a, false) : NULL;
    if (full) tg_sched_set_replay(full, false);
    bool pa = false, pb = false, pc = false;
    struct split_sig sig_b, sig_c;
    if (s && full && plan_and_check(seed, s, &a, "no checker fires (first of a replay)", NULL, &pa) && pa) {
        tg_sched_reset(s);
        struct tg_graph *gb0 = b.c->graph;
        struct tg_tensor **srcs_before = malloc(((size_t)gb0->n_nodes + 1) * TG_MAX_SRC * sizeof *srcs_before);
        for (int i = 0; srcs_before && i < gb0->n_nodes; i++)
            memcpy(&srcs_before[(size_t)i * TG_MAX_SRC], gb0->nodes[i]->src, sizeof gb0->nodes[i]->src);
        ok = srcs_before && plan_and_check(seed, s, &b, "no checker fires (replayed schedule)", &sig_b, &pb) &&
             plan_and_check(seed, full, &c, "no checker fires (full passes)", &sig_c, &pc);
        if (ok && pb && pc) {
            *replayed += tg_sched_last_was_replay(s);
            if (tg_sched_last_was_replay(full)) ok = false;
            if (sig_b.n != sig_c.n || memcmp(sig_b.v, sig_c.v, (size_t)sig_b.n * sizeof(int)) != 0) ok = false;
            struct tg_graph *gb = b.c->graph, *gc = c.c->graph;
            for (int i = 0; ok && i < gb->n_nodes + gb->n_leafs; i++) {
                const struct tg_tensor *tb = i < gb->n_nodes ? gb->nodes[i] : gb->leafs[i - gb->n_nodes];
                const struct tg_tensor *tc = i < gc->n_nodes ? gc->nodes[i] : gc->leafs[i - gc->n_nodes];
                ok = tg_sched_get_tensor_backend_id(s, tb) == tg_sched_get_tensor_backend_id(full, tc) &&
                     tg_sched_get_tensor_reason(s, tb) == tg_sched_get_tensor_reason(full, tc) &&
                     offset_in_buffer(tb) == offset_in_buffer(tc);
            }
            const struct tg_graph *cb = tg_sched_get_graph_copy(s), *cc = tg_sched_get_graph_copy(full);
            ok = ok && cb && cc && cb->n_nodes == cc->n_nodes && cb->n_leafs == cc->n_leafs;
            for (int i = 0; ok && i < cb->n_nodes; i++) ok = strcmp(cb->nodes[i]->name, cc->nodes[i]->name) == 0;
            if (!ok) fail_case(seed, "a replayed schedule equals the full passes", NULL);
            /* reset gives the new graph its own sources back (not the first graph's) */
            tg_sched_reset(s);
            for (int i = 0; ok && i < gb0->n_nodes; i++)
                ok = memcmp(&srcs_before[(size_t)i * TG_MAX_SRC], gb0->nodes[i]->src, sizeof gb0->nodes[i]->src) == 0;
            if (!ok) fail_case(seed, "reset after a replay restores the graph's sources", NULL);
        }
        free(srcs_before);
    }
    tg_sched_free(s);
    tg_sched_free(full);
    world_free(&a);
    world_free(&b);
    world_free(&c);
    return ok;
}

/* With a fault injected, over random graphs, the checkers fire on some case
 * (a fault the generator never provokes would go unnoticed).  Returns the
 * number of seeds on which a checker fired. */
static int fault_detections(enum tg_sched_fault fault, uint64_t first, int n_seeds) {
    int fired = 0;
    for (int i = 0; i < n_seeds; i++) {
        struct world w;
        if (world_init(&w, first + (uint64_t)i, NULL) != TG_OK) {
            world_free(&w);
            continue;
        }
        tg_sched *s = new_sched(&w, false);
        struct tg_oracle_snapshot snap;
        if (s && tg_oracle_snapshot_take(w.c->graph, &snap) == TG_OK) {
            tg_sched_set_fault(s, fault);
            if (tg_sched_alloc_graph(s, w.c->graph) == TG_OK) {
                struct tg_oracle_sched_report rep;
                if (tg_oracle_sched_check(s, &snap, NULL, w.pins, w.n_pins, &rep) == TG_OK &&
                    rep.n > tg_oracle_sched_report_count(&rep, TG_OSCHED_FOREIGN_RESULT)) {
                    fired++;
                }
                tg_oracle_sched_report_free(&rep);
            }
            tg_oracle_snapshot_free(&snap);
        }
        tg_sched_free(s);
        world_free(&w);
    }
    return fired;
}

int main(void) {
    const char *env_cases = getenv("TG_PROPS_CASES");
    const char *env_seed = getenv("TG_PROPS_SEED");
    int n_cases = env_cases ? atoi(env_cases) : 300;
    strict = !getenv("TG_PROPS_STRICT") || atoi(getenv("TG_PROPS_STRICT")) != 0;
    uint64_t first = env_seed ? strtoull(env_seed, NULL, 10) : 1;
    int n_planned = 0;
    clock_t t0 = clock();
    for (int i = 0; i < n_cases; i++) {
        bool planned = false;
        CHECK(check_seed(first + (uint64_t)i, i % 3 == 0, i % 5 == 0, &planned));
        n_planned += planned;
    }
    int n_replayed = 0, n_replay_cases = n_cases < 300 ? n_cases : 300;
    for (int i = 0; i < n_replay_cases; i++) CHECK(check_replay(first + (uint64_t)i, &n_replayed));
    printf("prop_sched: %d of %d seeds replayed a schedule (second decode, same weights) equal to the full passes\n",
           n_replayed, n_replay_cases);
    if (n_replay_cases >= 50) CHECK(n_replayed > n_replay_cases / 4); /* else the property is vacuous */
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("prop_sched: %d seeds (%d planned and checked, %d refused as unsupported, %d hit the known "
           "view-result bug), %ld graphs checked, %.0f graphs/s\n",
           n_cases, n_planned, n_cases - n_planned - n_known_bug, n_known_bug, n_graphs_checked,
           secs > 0 ? (double)n_graphs_checked / secs : 0.0);
    /* move-preallocated cannot show on these graphs (views stay with their
     * roots in pass 4 anyway); the others must be caught on random graphs */
    const enum tg_sched_fault faults[] = {TG_SCHED_FAULT_SKIP_COPY, TG_SCHED_FAULT_IGNORE_PIN,
                                          TG_SCHED_FAULT_IGNORE_SUPPORT};
    for (int f = 0; f < 3; f++) {
        int n_seeds = n_cases < 200 ? n_cases : 200;
        int fired = fault_detections(faults[f], first, n_seeds);
        printf("prop_sched: fault %-15s caught on %d of %d seeds\n", tg_sched_fault_name(faults[f]), fired, n_seeds);
        if (n_seeds >= 50) CHECK(fired > 0);
    }
    if (n_failures) printf("prop_sched: %d failures\n", n_failures);
    CHECK(n_failures == 0);
    CHECK(n_planned > n_cases / 2);
    printf("prop_sched: %d seeds compared reserved sizes with alloc's\n", n_reserves_compared);
    if (n_cases >= 50) CHECK(n_reserves_compared > n_cases / 10); /* every fifth seed, most of them planned */
    return tg_test_finish();
}

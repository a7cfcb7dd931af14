/* Scheduled random graphs against the CPU alone (sched_compare.h): moved
 * here from prop_sched_compute, which uses it with sim devices. */
#include "sched_compare.h"

#include "tg-cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t sched_rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}


bool reference_run(struct reference *ref, uint64_t seed, const struct tg_gen_options *opts) {
    memset(ref, 0, sizeof *ref);
    if (tg_gen_case_from_seed(seed, opts, &ref->c) != TG_OK) return false;
    if (!tg_gen_graph_cpu_computable(ref->c->graph)) return false;
    struct tg_graph *g = ref->c->graph;
    ref->galloc = tg_gallocr_new(tg_cpu_buffer_type());
    if (!ref->galloc || tg_gallocr_alloc_graph(ref->galloc, g) != TG_OK || tg_oracle_fill_inputs(g, seed) != TG_OK)
        return false;
    ref->leaf_values = calloc((size_t)g->n_leafs + 1, sizeof *ref->leaf_values);
    ref->node_values = calloc((size_t)g->n_nodes + 1, sizeof *ref->node_values);
    if (!ref->leaf_values || !ref->node_values) return false;
    for (int j = 0; j < g->n_leafs; j++) {
        if (!g->leafs[j]->view_src && !(ref->leaf_values[j] = tg_gen_tensor_bytes(g->leafs[j]))) return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if ((g->nodes[i]->flags & TG_FLAG_INPUT) && !g->nodes[i]->view_src &&
            !(ref->node_values[i] = tg_gen_tensor_bytes(g->nodes[i])))
            return false;
    }
    return tg_cpu_compute_graph(g, 1) == TG_OK;
}

void reference_free(struct reference *ref) {
    for (int j = 0; ref->leaf_values && j < ref->c->graph->n_leafs; j++) free(ref->leaf_values[j]);
    for (int i = 0; ref->node_values && i < ref->c->graph->n_nodes; i++) free(ref->node_values[i]);
    free(ref->leaf_values);
    free(ref->node_values);
    tg_gallocr_free(ref->galloc);
    tg_gen_case_free(ref->c);
}


/* Writes saved reference values into b (any backend). */
static bool put_bytes(const void *values, struct tg_tensor *b) {
    return values && tg_tensor_set(b, values, 0, tg_nbytes(b)) == TG_OK;
}

/* Element i of a float tensor's bytes (f32, f16 or bf16). */
static float float_at(enum tg_type type, const void *bytes, size_t i) {
    if (type == TG_TYPE_F32) {
        float x;
        memcpy(&x, (const char *)bytes + 4 * i, 4);
        return x;
    }
    uint16_t h;
    memcpy(&h, (const char *)bytes + 2 * i, 2);
    return type == TG_TYPE_F16 ? tg_fp16_to_fp32(h) : tg_bf16_to_fp32(h);
}

/* got agrees with want (n bytes of t's type): bit for bit when max_nmse is 0
 * or t is not f32, f16 or bf16; otherwise NaNs and infinities at the same
 * places and the NMSE of the finite values within max_nmse. */
static bool bytes_agree(const struct tg_tensor *t, const void *want, const void *got, size_t n, double max_nmse) {
    const bool is_float = t->type == TG_TYPE_F32 || t->type == TG_TYPE_F16 || t->type == TG_TYPE_BF16;
    if (max_nmse <= 0.0 || !is_float) return memcmp(want, got, n) == 0;
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < n / tg_type_size(t->type); i++) {
        const float x = float_at(t->type, want, i), y = float_at(t->type, got, i);
        if (!isfinite(x) || !isfinite(y)) {
            if (!(isnan(x) && isnan(y)) && x != y) return false;
            continue;
        }
        err += ((double)x - y) * ((double)x - y);
        ref += (double)x * x;
    }
    return (ref > 0.0 ? err / ref : err) <= max_nmse;
}

/* a's bytes (CPU memory) agree with bytes. */
static bool same_bytes_as(const struct tg_tensor *a, const void *bytes, double max_nmse) {
    size_t n = tg_nbytes(a);
    void *x = malloc(n ? n : 1);
    bool same = x && tg_tensor_get(a, x, 0, n) == TG_OK && bytes_agree(a, x, bytes, n, max_nmse);
    free(x);
    return same;
}

static bool same_bytes(const struct tg_tensor *a, const struct tg_tensor *b, double max_nmse) {
    size_t n = tg_nbytes(a);
    void *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
    bool same = x && y && tg_tensor_get(a, x, 0, n) == TG_OK && tg_tensor_get(b, y, 0, n) == TG_OK &&
                bytes_agree(a, x, y, n, max_nmse);
    free(x);
    free(y);
    return same;
}

bool scheduled_init(struct scheduled *sc, const struct reference *ref, const struct setup *su, uint64_t seed,
                           const struct tg_gen_options *opts) {
    memset(sc, 0, sizeof *sc);
    if (tg_gen_case_from_seed(seed, opts, &sc->c) != TG_OK) return false;
    struct tg_graph *g = sc->c->graph;
    uint64_t r = seed ^ 0xfeedull;
    int target[512];
    size_t need[SC_MAX_BACKENDS] = {0};
    for (int j = 0; j < g->n_leafs && j < 512; j++) {
        struct tg_tensor *t = g->leafs[j];
        target[j] = -1;
        if (t->view_src || t->buffer != sc->c->external_buffer) continue;
        int b = (int)(sched_rng_next(&r) % (uint64_t)su->n_backends);
        if (b == su->n_backends - 1) continue;
        target[j] = b;
        need[b] += tg_buft_get_alloc_size(tg_backend_get_default_buffer_type(su->backends[b]), t) + 512;
    }
    for (int b = 0; b < su->n_backends - 1; b++) {
        if (!need[b]) continue;
        sc->moved[b] = tg_backend_alloc_buffer(su->backends[b], need[b]);
        if (!sc->moved[b]) return false;
        tg_buffer_set_usage(sc->moved[b], TG_BUFFER_USAGE_WEIGHTS);
    }
    size_t used[SC_MAX_BACKENDS] = {0};
    for (int j = 0; j < g->n_leafs && j < 512; j++) {
        int b = target[j];
        if (b < 0) continue;
        size_t align = tg_buffer_get_alignment(sc->moved[b]);
        used[b] = (used[b] + align - 1) / align * align;
        if (tg_tensor_bind(g->leafs[j], sc->moved[b], (char *)tg_buffer_get_base(sc->moved[b]) + used[b]) != TG_OK)
            return false;
        used[b] += tg_buffer_get_alloc_size(sc->moved[b], g->leafs[j]);
    }
    /* pre-allocated leafs get the reference's values now (wherever they live) */
    for (int j = 0; j < g->n_leafs; j++) {
        if (g->leafs[j]->data && !g->leafs[j]->view_src && !put_bytes(ref->leaf_values[j], g->leafs[j])) return false;
    }
    for (int i = 0; i < g->n_nodes && sc->n_pins < 64; i++) {
        struct tg_tensor *t = g->nodes[i];
        if (sched_rng_next(&r) % 8 != 0 || tg_op_is_view(t->op)) continue;
        int b = (int)(sched_rng_next(&r) % (uint64_t)su->n_backends);
        if (!tg_backend_supports_op(su->backends[b], t)) continue;
        sc->pins[sc->n_pins++] = (struct tg_oracle_sched_pin){t, b};
    }
    return true;
}

void scheduled_free(struct scheduled *sc) {
    tg_gen_case_free(sc->c);
    for (int b = 0; b < SC_MAX_BACKENDS; b++) tg_buffer_free(sc->moved[b]);
}


/* Pins, allocates sc with s and checks the schedule: OUT_SAME when it may be
 * computed (snap then holds the tensors that had memory before). */
static enum outcome schedule_checked(tg_sched *s, const struct setup *su, struct scheduled *sc,
                                     struct tg_oracle_snapshot *snap, char *why, size_t why_len) {
    struct tg_graph *g = sc->c->graph;
    for (int i = 0; i < sc->n_pins; i++)
        tg_sched_set_tensor_backend(s, (struct tg_tensor *)sc->pins[i].tensor, su->backends[sc->pins[i].backend_id]);
    if (tg_oracle_snapshot_take(g, snap) != TG_OK) return OUT_ERROR;
    enum tg_status st = tg_sched_alloc_graph(s, g);
    if (st != TG_OK) {
        if (st == TG_ERR_UNSUPPORTED || (st == TG_ERR_INVALID && strstr(tg_last_error(), "pin them to the same")))
            return OUT_SKIPPED; /* unsupported ops and random pins that cannot both hold are refused, not failures */
        snprintf(why, why_len, "alloc: %s", tg_last_error());
        return OUT_ERROR;
    }
    struct tg_oracle_sched_report rep = {0};
    bool clean = tg_oracle_sched_check(s, snap, NULL, sc->pins, sc->n_pins, &rep) == TG_OK && rep.n == 0;
    if (!clean) {
        /* a wrong schedule is a failure (and is not computed: the host could touch sim memory);
         * seed 296 found writers left behind by their moved root (test_sched_rules) */
        snprintf(why, why_len, "scheduler checker: %s", rep.n ? rep.items[0].message : tg_last_error());
    }
    tg_oracle_sched_report_free(&rep);
    return clean ? OUT_SAME : OUT_DIFFERENT;
}

/* Every leaf the plan bound (the filler writes all leafs) and every input from
 * ref, issued asynchronously on the queue of their memory (the values stay
 * alive for the seed). */
static bool set_values(const struct setup *su, struct scheduled *sc, const struct reference *ref,
                       const struct tg_oracle_snapshot *snap) {
    struct tg_graph *g = sc->c->graph;
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        if (t->view_src || tg_oracle_snapshot_find(snap, t)) continue;
        if (!ref->leaf_values[j]) return false;
        tg_gen_set_async(t, ref->leaf_values[j], su->backends[su->n_backends - 1]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *t = g->nodes[i];
        if (!(t->flags & TG_FLAG_INPUT) || t->view_src) continue;
        if (!ref->node_values[i]) return false;
        tg_gen_set_async(t, ref->node_values[i], su->backends[su->n_backends - 1]);
    }
    return true;
}

/* Allocates sc with s, checks the schedule, sets inputs from ref, computes, compares. */
enum outcome run_one(tg_sched *s, const struct setup *su, struct scheduled *sc, const struct reference *ref,
                            char *why, size_t why_len) {
    struct tg_graph *g = sc->c->graph, *rg = ref->c->graph;
    struct tg_oracle_snapshot snap;
    enum outcome out = schedule_checked(s, su, sc, &snap, why, why_len);
    if (out == OUT_SAME && !set_values(su, sc, ref, &snap)) out = OUT_ERROR;
    if (out == OUT_SAME && tg_sched_graph_compute(s, g) != TG_OK) {
        snprintf(why, why_len, "compute: %s", tg_last_error());
        out = OUT_ERROR;
    }
    for (int i = 0; i < g->n_nodes && out == OUT_SAME; i++) {
        /* judged on the reference: the scheduled graph's sources point at copies */
        if (tg_gen_node_is_result(rg, i) && !same_bytes(rg->nodes[i], g->nodes[i], su->max_nmse)) {
            snprintf(why, why_len, "node %d '%s' (op %s) differs from the CPU-only run%s", i, g->nodes[i]->name,
                     tg_op_name(g->nodes[i]->op), su->max_nmse > 0 ? " (beyond the NMSE bound)" : "");
            out = OUT_DIFFERENT;
        }
    }
    tg_oracle_snapshot_free(&snap);
    return out;
}


/* k back-to-back graphs through s (pipeline copies): each allocated, checked,
 * its values set and computed without waiting, its results fetched
 * asynchronously by the queue of their memory; then one synchronize, and
 * every graph's results compared.  Counts the graphs compared in *n_same. */
enum outcome run_pipelined(tg_sched *s, const struct setup *su, const struct reference *ref, uint64_t seed,
                                  const struct tg_gen_options *opts, int k, int *n_same, char *why, size_t why_len) {
    struct fetched runs[MAX_PIPELINE];
    memset(runs, 0, sizeof runs);
    struct tg_graph *rg = ref->c->graph;
    enum outcome out = OUT_SAME;
    for (int r = 0; r < k && out != OUT_ERROR && out != OUT_DIFFERENT; r++) {
        struct fetched *f = &runs[r];
        if (!scheduled_init(&f->sc, ref, su, seed, opts)) continue;
        tg_sched_reset(s); /* as llama.cpp does per batch: no synchronize */
        struct tg_oracle_snapshot snap;
        enum outcome o = schedule_checked(s, su, &f->sc, &snap, why, why_len);
        struct tg_graph *g = f->sc.c->graph;
        if (o == OUT_SAME && !set_values(su, &f->sc, ref, &snap)) o = OUT_ERROR;
        tg_oracle_snapshot_free(&snap);
        if (o == OUT_SAME && tg_sched_graph_compute_async(s, g) != TG_OK) {
            snprintf(why, why_len, "compute of graph %d: %s", r, tg_last_error());
            o = OUT_ERROR;
        }
        f->results = calloc((size_t)g->n_nodes + 1, sizeof *f->results);
        for (int i = 0; o == OUT_SAME && i < g->n_nodes; i++) {
            if (!tg_gen_node_is_result(rg, i)) continue;
            size_t n = tg_nbytes(g->nodes[i]);
            f->results[i] = malloc(n ? n : 1);
            /* host memory is read now: compute_async returned with the backends computing there done */
            tg_backend_tensor_get_async(tg_gen_memory_queue(g->nodes[i], su->backends[su->n_backends - 1]), g->nodes[i],
                                        f->results[i], 0, n);
        }
        f->computed = o == OUT_SAME;
        if (o != OUT_SAME) out = o;
    }
    tg_sched_synchronize(s);
    for (int r = 0; r < k; r++) {
        struct fetched *f = &runs[r];
        for (int i = 0; f->computed && out == OUT_SAME && i < rg->n_nodes; i++) {
            if (f->results[i] && !same_bytes_as(rg->nodes[i], f->results[i], su->max_nmse)) {
                snprintf(why, why_len, "graph %d of %d, node %d '%s' (op %s) differs from the CPU-only run%s", r, k, i,
                         rg->nodes[i]->name, tg_op_name(rg->nodes[i]->op),
                         su->max_nmse > 0 ? " (beyond the NMSE bound)" : "");
                out = OUT_DIFFERENT;
            }
        }
        *n_same += f->computed && out == OUT_SAME;
    }
    tg_sched_reset(s); /* before the graphs go */
    for (int r = 0; r < k; r++) {
        for (int i = 0; runs[r].results && i < runs[r].sc.c->graph->n_nodes; i++) free(runs[r].results[i]);
        free(runs[r].results);
        scheduled_free(&runs[r].sc);
    }
    return out;
}

/* Fuzz target for the scheduler: the first bytes decode a backend setup (the
 * CPU plus 0-3 sim devices with their op sets, alignments, alloc padding, host
 * sharing) and pins, the rest a computable graph (fuzz/gen).  The schedule
 * must pass every scheduler and allocator checker; then the graph is computed
 * and must equal a CPU-only run bit for bit, and again after reset + a second
 * alloc on the same scheduler.  Unsupported ops and conflicting pins are
 * refusals, not bugs. */
#include "tg-cpu.h"
#include "tg-gen.h"
#include "tg-oracle-sched.h"
#include "tg-sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETUP_BYTES 40
#define MAX_SIMS 3

struct reader {
    const uint8_t *p;
    size_t n, at;
};

static uint8_t next(struct reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

static int build_backends(struct reader *r, tg_backend **out) {
    int n_sims = next(r) % (MAX_SIMS + 1);
    for (int i = 0; i < n_sims; i++) {
        struct tg_sim_params p;
        tg_sim_params_default(&p);
        char name[16];
        snprintf(name, sizeof name, "sim%d", i);
        p.name = name;
        uint8_t b = next(r);
        p.alignment = (size_t)32 << (b % 4);
        p.alloc_pad = (b >> 2) & 1 ? 64 : 0;
        p.share_host_buffer_type = ((b >> 3) & 7) == 0;
        p.synchronous = (b >> 6) & 1;
        p.supported_ops_all = false;
        uint64_t mask = 0;
        for (int k = 0; k < 8; k++) mask = mask << 8 | next(r);
        for (int op = 0; op < TG_OP_COUNT; op++) p.supported_ops[op] = (mask >> (op % 64)) & 1;
        out[i] = tg_backend_sim_new(&p);
    }
    out[n_sims] = tg_backend_cpu_new();
    return n_sims + 1;
}

static void *save(const struct tg_tensor *t) {
    size_t n = tg_nbytes(t);
    void *v = malloc(n ? n : 1);
    if (v && tg_tensor_get(t, v, 0, n) != TG_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_sched: %s: %s\n", what, detail);
    abort();
}

/* Schedules, checks, computes the case on the given backends and compares with
 * the reference outputs; false when the scheduler refused the case. */
static bool run_scheduled(tg_sched *s, struct tg_gen_case *c, struct reader *pins, void **leaf_vals, void **node_vals,
                          void **want, int n_backends) {
    struct tg_graph *g = c->graph;
    int n_pins = next(pins) % 4;
    struct tg_oracle_sched_pin pin_list[4];
    for (int k = 0; k < n_pins; k++) {
        struct tg_tensor *t = g->nodes[next(pins) % g->n_nodes];
        int b = next(pins) % n_backends;
        tg_sched_set_tensor_backend(s, t, tg_sched_get_backend(s, b));
        for (int q = 0; q < k; q++) {
            if (pin_list[q].tensor == t) pin_list[q].backend_id = b; /* a later pin replaces an earlier one */
        }
        pin_list[k] = (struct tg_oracle_sched_pin){t, b};
    }
    struct tg_oracle_snapshot snap;
    if (tg_oracle_snapshot_take(g, &snap) != TG_OK) fail("snapshot", tg_last_error());
    enum tg_status st = tg_sched_alloc_graph(s, g);
    if (st != TG_OK) {
        tg_oracle_snapshot_free(&snap);
        if (st == TG_ERR_UNSUPPORTED || (st == TG_ERR_INVALID && strstr(tg_last_error(), "pin them"))) return false;
        if (st == TG_ERR_ALLOC) return false;
        fail("alloc", tg_last_error());
    }
    struct tg_oracle_sched_report rep = {0};
    if (tg_oracle_sched_check(s, &snap, NULL, pin_list, n_pins, &rep) != TG_OK) fail("checker", tg_last_error());
    if (rep.n) fail(tg_oracle_sched_rule_name(rep.items[0].rule), rep.items[0].message);
    tg_oracle_sched_report_free(&rep);
    tg_oracle_snapshot_free(&snap);
    for (int j = 0; j < g->n_leafs; j++) {
        if (leaf_vals[j] && tg_tensor_set(g->leafs[j], leaf_vals[j], 0, tg_nbytes(g->leafs[j])) != TG_OK)
            fail("set input", tg_last_error());
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (node_vals[i] && tg_tensor_set(g->nodes[i], node_vals[i], 0, tg_nbytes(g->nodes[i])) != TG_OK)
            fail("set input", tg_last_error());
    }
    if (tg_sched_graph_compute(s, g) != TG_OK) fail("compute", tg_last_error());
    for (int i = 0; i < g->n_nodes; i++) {
        if (!want[i]) continue;
        void *got = save(g->nodes[i]);
        if (!got || memcmp(got, want[i], tg_nbytes(g->nodes[i])) != 0) fail("result differs from the CPU-only run", g->nodes[i]->name);
        free(got);
    }
    return true;
}

static bool cpu_computable(const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_NONE && !tg_op_is_view(t->op) && !tg_cpu_supports_op(t)) return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct reader setup = {data, size < SETUP_BYTES ? size : SETUP_BYTES, 0};
    const uint8_t *rest = data + setup.n;
    size_t rest_n = size - setup.n;
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    opts.max_tensor_bytes = 1u << 16;
    struct tg_gen_case *ref = NULL, *c = NULL;
    if (tg_gen_case_from_bytes(rest, rest_n, &opts, &ref) != TG_OK) return 0;
    if (!cpu_computable(ref->graph) || ref->graph->n_nodes == 0 ||
        tg_gen_case_from_bytes(rest, rest_n, &opts, &c) != TG_OK) {
        tg_gen_case_free(ref);
        return 0;
    }
    /* the reference: CPU alone */
    struct tg_graph *rg = ref->graph;
    tg_gallocr *ga = tg_gallocr_new(tg_cpu_buffer_type());
    if (tg_gallocr_alloc_graph(ga, rg) != TG_OK || tg_oracle_fill_inputs(rg, 1) != TG_OK) fail("reference", tg_last_error());
    void **leaf_vals = calloc((size_t)rg->n_leafs + 1, sizeof *leaf_vals);
    void **node_vals = calloc((size_t)rg->n_nodes + 1, sizeof *node_vals);
    void **want = calloc((size_t)rg->n_nodes + 1, sizeof *want);
    for (int j = 0; j < rg->n_leafs; j++) {
        if (!rg->leafs[j]->view_src && rg->leafs[j]->data) leaf_vals[j] = save(rg->leafs[j]);
    }
    for (int i = 0; i < rg->n_nodes; i++) {
        if ((rg->nodes[i]->flags & TG_FLAG_INPUT) && !rg->nodes[i]->view_src) node_vals[i] = save(rg->nodes[i]);
    }
    if (tg_cpu_compute_graph(rg, 1) != TG_OK) fail("reference compute", tg_last_error());
    for (int i = 0; i < rg->n_nodes; i++) {
        if (rg->nodes[i]->flags & TG_FLAG_OUTPUT) want[i] = save(rg->nodes[i]);
    }
    /* the scheduled run, twice on one scheduler */
    tg_backend *backends[MAX_SIMS + 1];
    int n_backends = build_backends(&setup, backends);
    tg_sched *s = tg_sched_new(backends, NULL, n_backends, (size_t)(rg->n_nodes + rg->n_leafs) * 2 + 16,
                               next(&setup) & 1, next(&setup) & 1);
    if (!s) fail("tg_sched_new", tg_last_error());
    if (run_scheduled(s, c, &setup, leaf_vals, node_vals, want, n_backends)) {
        /* the next token: reset, and the same graph built afresh (as llama.cpp does) */
        tg_sched_reset(s);
        struct tg_gen_case *again = NULL;
        if (tg_gen_case_from_bytes(rest, rest_n, &opts, &again) == TG_OK) {
            run_scheduled(s, again, &setup, leaf_vals, node_vals, want, n_backends);
            tg_sched_reset(s); /* restores the sources of `again` before it is freed */
            tg_gen_case_free(again);
        }
    }
    tg_sched_free(s);
    for (int i = 0; i < n_backends; i++) tg_backend_free(backends[i]);
    for (int j = 0; j < rg->n_leafs; j++) free(leaf_vals[j]);
    for (int i = 0; i < rg->n_nodes; i++) {
        free(node_vals[i]);
        free(want[i]);
    }
    free(leaf_vals);
    free(node_vals);
    free(want);
    tg_gallocr_free(ga);
    tg_gen_case_free(c);
    tg_gen_case_free(ref);
    return 0;
}

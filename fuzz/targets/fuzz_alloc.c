/* Fuzz target for the graph allocator: the bytes decode (fuzz/gen) to buffer
 * types, buffer ids and a graph; it is planned and bound, then every oracle
 * checker judges the plan.  Any violation, or a planning failure, aborts with
 * the case printed.  The bound plan is then
 * replayed (alloc_graph again) and must still succeed without growing; that
 * second bind of the same tensors images the graph, and a third call must
 * find it unchanged and leave every tensor where it was (fuzzing builds also
 * run the general check on it, and abort if it disagrees).  A second decode
 * of the same bytes then gets what real runtimes hand the allocator
 * (tg_gen_runtime_check): init_tensor/reset hooks, a source outside the graph
 * that moves and loses its memory, views of weights moved between binds. */
#include "tg-gen.h"

#include <stdio.h>
#include <stdlib.h>

static void die(struct tg_gen_case *c, const char *what, const struct tg_oracle_report *rep) {
    fprintf(stderr, "fuzz_alloc: %s\n", what);
    if (rep) {
        for (int i = 0; i < rep->n && i < 10; i++) fprintf(stderr, "  [%s] %s\n", tg_oracle_rule_name(rep->items[i].rule), rep->items[i].message);
    }
    char *text = tg_gen_case_to_text(c);
    if (text) fprintf(stderr, "%s\n", text);
    free(text);
    abort();
}

static void *data_of_slot(const struct tg_graph *g, int u) {
    return u < g->n_nodes ? g->nodes[u]->data : g->leafs[u - g->n_nodes]->data;
}

/* The graph bound twice in a row, unchanged: the next call has nothing to do. */
static void check_unchanged_realloc(struct tg_gen_case *c, tg_gallocr *galloc) {
    const struct tg_graph *g = c->graph;
    int n_slots = g->n_nodes + g->n_leafs;
    void **where = malloc((size_t)n_slots * sizeof *where + 1);
    if (!where) return;
    for (int u = 0; u < n_slots; u++) where[u] = data_of_slot(g, u);
    struct tg_gallocr_stats before, after;
    tg_gallocr_get_stats(galloc, &before);
    if (tg_gallocr_alloc_graph(galloc, c->graph) != TG_OK) die(c, "a third bind of the same graph failed", NULL);
    tg_gallocr_get_stats(galloc, &after);
    /* imaged unless the plan refers outside the graph (then it is bound again) */
    if (before.n_images && after.n_allocs_unchanged != before.n_allocs_unchanged + 1) {
        die(c, "an imaged graph bound again unchanged was not found unchanged", NULL);
    }
    for (int u = 0; u < n_slots; u++) {
        if (data_of_slot(g, u) != where[u]) die(c, "a tensor moved when its unchanged graph was bound again", NULL);
    }
    free(where);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct tg_gen_options opts = tg_gen_target_options("alloc");
    struct tg_gen_case *c = NULL;
    if (tg_gen_case_from_bytes(data, size, &opts, &c) != TG_OK) return 0; /* out of host memory only */
    tg_gallocr *galloc = NULL;
    struct tg_gen_plan_result res;
    if (tg_gen_plan_and_check(c, TG_FAULT_NONE, &galloc, &res) != TG_OK) die(c, "the oracle could not run", NULL);
    /* the generated buffers have room for every case (a tensor past a maximum size gets a
     * buffer of its own): a failed plan is a failure, whatever its status */
    if (res.plan_status != TG_OK) die(c, tg_last_error(), NULL);
    if (res.report.n) die(c, "an oracle checker fired", &res.report);
    for (int id = 0; res.plan_status == TG_OK && id < c->n_ids; id++) {
        if (res.lower_bound[id] > res.buffer_size[id] || res.buffer_size[id] > res.naive_total[id]) {
            die(c, "lower bound <= buffer <= naive total does not hold", NULL);
        }
    }
    if (galloc && res.plan_status == TG_OK) {
        size_t before = 0, after = 0;
        for (int id = 0; id < c->n_ids; id++) before += tg_gallocr_get_buffer_size(galloc, id);
        if (tg_gallocr_alloc_graph(galloc, c->graph) != TG_OK) die(c, "replaying the plan failed", NULL);
        for (int id = 0; id < c->n_ids; id++) after += tg_gallocr_get_buffer_size(galloc, id);
        if (after != before) die(c, "replaying the plan grew a buffer", NULL);
        check_unchanged_realloc(c, galloc);
    }
    tg_gen_plan_result_free(&res);
    tg_gallocr_free(galloc);
    tg_gen_case_free(c);
    struct tg_gen_case *k = NULL;
    if (tg_gen_case_from_bytes(data, size, &opts, &k) != TG_OK) return 0;
    struct tg_gen_runtime_stats stats = {0};
    char why[400];
    if (!tg_gen_runtime_check(k, size, NULL, &stats, why, sizeof why)) die(k, why, NULL);
    tg_gen_case_free(k);
    return 0;
}

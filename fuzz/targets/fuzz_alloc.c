/* Fuzz target for the graph allocator: the bytes decode (fuzz/gen) to buffer
 * types, buffer ids and a graph; it is planned and bound, then every oracle
 * checker judges the plan.  Any violation, or a planning failure other than a
 * refused buffer, aborts with the case printed.  The bound plan is then
 * replayed (alloc_graph again) and must still succeed without growing. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct tg_gen_options opts = tg_gen_target_options("alloc");
    struct tg_gen_case *c = NULL;
    if (tg_gen_case_from_bytes(data, size, &opts, &c) != TG_OK) return 0; /* out of host memory only */
    tg_gallocr *galloc = NULL;
    struct tg_gen_plan_result res;
    if (tg_gen_plan_and_check(c, TG_FAULT_NONE, &galloc, &res) != TG_OK) die(c, "the oracle could not run", NULL);
    if (res.plan_status != TG_OK && res.plan_status != TG_ERR_ALLOC) die(c, tg_last_error(), NULL);
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
    }
    tg_gen_plan_result_free(&res);
    tg_gallocr_free(galloc);
    tg_gen_case_free(c);
    return 0;
}

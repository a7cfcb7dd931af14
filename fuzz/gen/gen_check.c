/* Plans a generated case with the real allocator and judges it with the oracle. */
#include "tg-gen.h"

#include <string.h>

void tg_gen_plan_result_free(struct tg_gen_plan_result *res) {
    if (res) tg_oracle_report_free(&res->report);
}

#define KEEP_DEFAULT_POLICY (-1)

static enum tg_status plan_and_check(struct tg_gen_case *c, enum tg_fault fault, int policy, tg_gallocr **galloc_out,
                                     struct tg_gen_plan_result *res) {
    memset(res, 0, sizeof *res);
    if (galloc_out) *galloc_out = NULL;
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    enum tg_status st = tg_oracle_snapshot_take(c->graph, &snap);
    if (st != TG_OK) return st;
    st = tg_oracle_liveness_build(c->graph, &snap, c->node_ids, c->leaf_ids, &lv);
    if (st != TG_OK) {
        tg_oracle_snapshot_free(&snap);
        return st;
    }
    st = tg_oracle_lower_bound(&lv, c->bufts, c->n_ids, res->lower_bound, res->naive_total);

    tg_gallocr *galloc = st == TG_OK ? tg_gallocr_new_n(c->bufts, c->n_ids) : NULL;
    if (st == TG_OK && !galloc) st = tg_fail(TG_ERR_ALLOC, "could not create the graph allocator");
    if (st == TG_OK) {
        tg_gallocr_set_fault(galloc, fault);
        if (policy != KEEP_DEFAULT_POLICY) tg_gallocr_set_policy(galloc, (enum tg_plan_policy)policy);
        res->plan_status = tg_gallocr_reserve_n(galloc, c->graph, c->node_ids, c->leaf_ids);
        if (res->plan_status == TG_OK) res->plan_status = tg_gallocr_alloc_graph(galloc, c->graph);
        for (int id = 0; id < c->n_ids; id++) res->buffer_size[id] = tg_gallocr_get_buffer_size(galloc, id);
        if (res->plan_status == TG_OK) st = tg_oracle_check(c->graph, &lv, &snap, c->bufts, c->n_ids, &res->report);
        res->n_tensors = lv.n;
    }
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    if (galloc_out && st == TG_OK) *galloc_out = galloc;
    else tg_gallocr_free(galloc);
    return st;
}

enum tg_status tg_gen_plan_and_check(struct tg_gen_case *c, enum tg_fault fault, tg_gallocr **galloc_out,
                                     struct tg_gen_plan_result *res) {
    return plan_and_check(c, fault, KEEP_DEFAULT_POLICY, galloc_out, res);
}

enum tg_status tg_gen_plan_and_check_policy(struct tg_gen_case *c, enum tg_fault fault, enum tg_plan_policy policy,
                                            tg_gallocr **galloc_out, struct tg_gen_plan_result *res) {
    return plan_and_check(c, fault, (int)policy, galloc_out, res);
}

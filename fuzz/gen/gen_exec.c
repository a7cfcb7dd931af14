/* Differential execution of one generated case: decode it twice from the same
 * bytes, plan one copy with the real allocator and the other with the oracle's
 * naive allocator, fill both with the same op-safe inputs, compute both on the
 * CPU, compare outputs bit for bit.  Shared by fuzz_exec and props/prop_exec. */
#include "tg-gen.h"

#include "tg-cpu.h"

#include <string.h>

static enum tg_status cpu_compute(struct tg_graph *g, void *user) {
    (void)user;
    return tg_cpu_compute_graph(g, 1);
}

static bool cpu_supports(const struct tg_tensor *node, void *user) {
    (void)user;
    return tg_cpu_supports_op(node);
}

enum tg_status tg_gen_exec_check(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                 enum tg_plan_policy policy, uint64_t fill_seed, struct tg_oracle_diff_result *res) {
    memset(res, 0, sizeof *res);
    struct tg_gen_case *real = NULL, *ref = NULL;
    tg_gallocr *galloc = NULL;
    struct tg_oracle_snapshot snap = {0};
    struct tg_oracle_liveness lv = {0};
    struct tg_oracle_naive naive = {0};
    bool have_snap = false, have_lv = false;
    enum tg_status st = tg_gen_case_from_bytes(data, size, opts, &real);
    if (st == TG_OK) st = tg_gen_case_from_bytes(data, size, opts, &ref);
    if (st != TG_OK) goto done;
    /* the real plan, with the case's buffer ids */
    galloc = tg_gallocr_new_n(real->bufts, real->n_ids);
    if (!galloc) {
        st = TG_ERR_ALLOC;
        goto done;
    }
    tg_gallocr_set_policy(galloc, policy);
    st = tg_gallocr_reserve_n(galloc, real->graph, real->node_ids, real->leaf_ids);
    if (st == TG_OK) st = tg_gallocr_alloc_graph(galloc, real->graph);
    if (st != TG_OK) goto done;
    /* the naive plan of the same graph */
    st = tg_oracle_snapshot_take(ref->graph, &snap);
    have_snap = st == TG_OK;
    if (st == TG_OK) st = tg_oracle_liveness_build(ref->graph, &snap, ref->node_ids, ref->leaf_ids, &lv);
    have_lv = have_snap && st == TG_OK;
    if (st == TG_OK) st = tg_oracle_naive_alloc(ref->graph, &lv, ref->bufts, ref->n_ids, &naive);
    if (st == TG_OK) st = tg_oracle_diff(real->graph, ref->graph, cpu_compute, cpu_supports, NULL, fill_seed, res);
done:
    if (have_lv) tg_oracle_liveness_free(&lv);
    if (have_snap) tg_oracle_snapshot_free(&snap);
    tg_oracle_naive_free(&naive);
    tg_gallocr_free(galloc);
    tg_gen_case_free(real);
    tg_gen_case_free(ref);
    return st;
}

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

/* The naive plan of ref's graph, then both graphs computed and compared into
 * res: the second half of every differential here. */
static enum tg_status compare_with_naive(struct tg_gen_case *real, struct tg_gen_case *ref, uint64_t fill_seed,
                                         struct tg_oracle_diff_result *res) {
    struct tg_oracle_snapshot snap = {0};
    struct tg_oracle_liveness lv = {0};
    struct tg_oracle_naive naive = {0};
    enum tg_status st = tg_oracle_snapshot_take(ref->graph, &snap);
    const bool have_snap = st == TG_OK;
    if (st == TG_OK) st = tg_oracle_liveness_build(ref->graph, &snap, ref->node_ids, ref->leaf_ids, &lv);
    const bool have_lv = have_snap && st == TG_OK;
    if (st == TG_OK) st = tg_oracle_naive_alloc(ref->graph, &lv, ref->bufts, ref->n_ids, &naive);
    if (st == TG_OK) st = tg_oracle_diff(real->graph, ref->graph, cpu_compute, cpu_supports, NULL, fill_seed, res);
    if (have_lv) tg_oracle_liveness_free(&lv);
    if (have_snap) tg_oracle_snapshot_free(&snap);
    tg_oracle_naive_free(&naive);
    return st;
}

enum tg_status tg_gen_exec_check(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                 enum tg_plan_policy policy, uint64_t fill_seed, struct tg_oracle_diff_result *res) {
    memset(res, 0, sizeof *res);
    struct tg_gen_case *real = NULL, *ref = NULL;
    tg_gallocr *galloc = NULL;
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
    st = compare_with_naive(real, ref, fill_seed, res);
done:
    tg_gallocr_free(galloc);
    tg_gen_case_free(real);
    tg_gen_case_free(ref);
    return st;
}

/* An outside tensor for k's node source, filled with values every op takes
 * (f32 in [0.5, 1), i32 0: a valid row), in a user buffer with room to move
 * it once.  NULL when host memory ran out. */
static struct tg_tensor *swap_in_outside(struct tg_gen_case *k, int node, int slot, struct tg_gen_buft *user_type,
                                         tg_buffer **user, size_t *span) {
    const struct tg_tensor *src = k->graph->nodes[node]->src[slot];
    struct tg_tensor *o = tg_new_tensor(k->ctx, src->type, TG_MAX_DIMS, src->ne);
    if (!o) return NULL;
    tg_set_name(o, "outside");
    const size_t bytes = tg_nbytes(o);
    *span = (bytes + 63) / 64 * 64;
    *user = tg_buft_alloc_buffer(&user_type->buft, 2 * *span);
    if (!*user || tg_tensor_bind(o, *user, tg_buffer_get_base(*user)) != TG_OK) return NULL;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        float f = 0.5f + (float)(i / 4 % 8) / 16.0f;
        int32_t zero = 0;
        memcpy((char *)o->data + i, o->type == TG_TYPE_F32 ? (const void *)&f : (const void *)&zero, 4);
    }
    k->graph->nodes[node]->src[slot] = o;
    return o;
}

enum tg_status tg_gen_exec_outside_check(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                         enum tg_plan_policy policy, uint64_t fill_seed, uint64_t salt,
                                         struct tg_oracle_diff_result *res) {
    memset(res, 0, sizeof *res);
    struct tg_gen_case *real = NULL, *ref = NULL;
    tg_gallocr *galloc = NULL;
    struct tg_gen_buft user_type;
    tg_gen_buft_init(&user_type, "user", 64, 0, TG_OP_COUNT, 0);
    tg_buffer *user_real = NULL, *user_ref = NULL;
    size_t span = 0;
    int node, slot;
    enum tg_status st = tg_gen_case_from_bytes(data, size, opts, &real);
    if (st == TG_OK) st = tg_gen_case_from_bytes(data, size, opts, &ref);
    if (st != TG_OK || !tg_gen_pick_outside_source(real->graph, salt, &node, &slot)) goto done;
    /* the same values in both: the swapped source's kind is op-safe in both */
    struct tg_tensor *o_real = swap_in_outside(real, node, slot, &user_type, &user_real, &span);
    struct tg_tensor *o_ref = swap_in_outside(ref, node, slot, &user_type, &user_ref, &span);
    if (!o_real || !o_ref) {
        st = TG_ERR_ALLOC;
        goto done;
    }
    galloc = tg_gallocr_new_n(real->bufts, real->n_ids);
    if (!galloc) {
        st = TG_ERR_ALLOC;
        goto done;
    }
    tg_gallocr_set_policy(galloc, policy);
    st = tg_gallocr_reserve_n(galloc, real->graph, real->node_ids, real->leaf_ids);
    if (st == TG_OK) st = tg_gallocr_alloc_graph(galloc, real->graph);
    if (st != TG_OK) goto done;
    /* the user moves it (a reload, an earlier graph's result copied on) and
     * poisons where it was; the replay must bind nothing to the old place */
    void *old_place = o_real->data;
    st = tg_tensor_bind(o_real, user_real, (char *)tg_buffer_get_base(user_real) + span);
    if (st != TG_OK) goto done;
    memcpy(o_real->data, old_place, tg_nbytes(o_real));
    memset(old_place, 0xff, tg_nbytes(o_real));
    st = tg_gallocr_alloc_graph(galloc, real->graph);
    if (st != TG_OK) goto done;
    st = compare_with_naive(real, ref, fill_seed, res);
done:
    tg_gallocr_free(galloc);
    tg_gen_case_free(real);
    tg_gen_case_free(ref);
    tg_buffer_free(user_real);
    tg_buffer_free(user_ref);
    return st;
}

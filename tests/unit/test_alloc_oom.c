/* Host memory running out inside the graph allocator, with both planners:
 * whichever allocation fails, in tg_gallocr_new, reserve, reserve_n,
 * reserve_n_size, alloc_graph (first bind, unchanged graph, replay of a
 * rebuilt graph, re-plan of a changed one) or free, the call says
 * TG_ERR_ALLOC (NULL for new), nothing leaks, and the allocator goes on:
 * the same call made again once memory is back succeeds and binds the plan
 * a fresh allocator makes.  tg_test_oom.h fails the k-th allocation for
 * every k (then a stride) and counts live blocks; without it (sanitizers)
 * the test is skipped. */
#include "tg_test_oom.h"

#include "test_alloc_buft.h"
#include "tg-oracle.h"
#include "tg_test.h"

#ifdef OOM_CAN_FAIL

#define MAX_NODES 128

/* A graph with in-place candidates, views, outputs and mixed sizes, so the
 * planners have free blocks to merge and intervals to search. */
struct built {
    struct tg_context *ctx;
    struct tg_graph *graph;
};

static struct built build(int n_extra) {
    struct built b;
    b.ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(b.ctx, TG_TYPE_F32, 64);
    tg_set_input(x);
    struct tg_tensor *a = tg_scale(b.ctx, x, 2.0f);
    struct tg_tensor *sq = tg_sqr(b.ctx, a);
    struct tg_tensor *sr = tg_sqrt(b.ctx, a);
    struct tg_tensor *cat = tg_concat(b.ctx, sq, sr, 0);
    tg_set_output(sq);
    struct tg_tensor *v = tg_view_1d(b.ctx, cat, 32, 16 * sizeof(float));
    struct tg_tensor *cur = tg_add(b.ctx, tg_scale(b.ctx, v, 0.5f), tg_view_1d(b.ctx, sr, 32, 0));
    struct tg_tensor *keep = cur;
    for (int i = 0; i < 24 + n_extra; i++) {
        struct tg_tensor *wide = tg_concat(b.ctx, cur, tg_sqr(b.ctx, cur), 0);
        struct tg_tensor *r = tg_reshape_2d(b.ctx, wide, cur->ne[0], 2);
        struct tg_tensor *s = tg_sum_rows(b.ctx, tg_transpose(b.ctx, r));
        cur = tg_add(b.ctx, tg_reshape_1d(b.ctx, tg_cont(b.ctx, s), cur->ne[0]), i % 3 == 0 ? keep : cur);
        if (i % 5 == 4) keep = cur;
        if (i % 7 == 6) tg_set_output(cur);
    }
    b.graph = tg_graph_new(MAX_NODES * 4);
    if (tg_graph_build_forward_expand(b.graph, cur) != TG_OK) abort();
    return b;
}

/* Forgets the bindings of an earlier scenario, whose buffers are freed: a
 * call that says TG_OK without binding shows as unbound, not as a dangling
 * buffer. */
static void unbind(struct built *b) {
    for (int i = 0; i < b->graph->n_nodes; i++) {
        b->graph->nodes[i]->data = NULL;
        b->graph->nodes[i]->buffer = NULL;
    }
    for (int i = 0; i < b->graph->n_leafs; i++) {
        b->graph->leafs[i]->data = NULL;
        b->graph->leafs[i]->buffer = NULL;
    }
}

static void built_free(struct built *b) {
    tg_graph_free(b->graph);
    tg_context_free(b->ctx);
}

/* Where each node of a graph was bound: offset in its buffer and which type. */
struct bound {
    int n;
    size_t offs[MAX_NODES * 4];
    tg_buffer_type *type[MAX_NODES * 4];
    size_t size[2];
};

static struct bound bound_of(const tg_gallocr *ga, const struct tg_graph *g) {
    struct bound r;
    memset(&r, 0, sizeof r);
    r.n = g->n_nodes;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (!t->buffer || !t->data) {
            r.offs[i] = SIZE_MAX;
            continue;
        }
        r.offs[i] = (size_t)((const char *)t->data - (const char *)tg_buffer_get_base(t->buffer));
        r.type[i] = tg_buffer_get_type(t->buffer);
    }
    r.size[0] = tg_gallocr_get_buffer_size(ga, 0);
    r.size[1] = tg_gallocr_get_buffer_size(ga, 1);
    return r;
}

static bool same_bound(const struct bound *a, const struct bound *b) {
    if (a->n != b->n || a->size[0] != b->size[0] || a->size[1] != b->size[1]) {
        fprintf(stderr, "nodes %d/%d, buffer sizes %zu %zu, want %zu %zu\n", a->n, b->n, a->size[0], a->size[1],
                b->size[0], b->size[1]);
        return false;
    }
    for (int i = 0; i < a->n; i++) {
        if (a->offs[i] != b->offs[i] || a->type[i] != b->type[i]) {
            fprintf(stderr, "node %d at offset %zu, want %zu\n", i, a->offs[i], b->offs[i]);
            return false;
        }
    }
    return true;
}

static struct test_buft buft_a, buft_b;
static struct built g1, g1_again, g3;
static struct tg_oracle_snapshot g3_snapshot;
static struct tg_oracle_liveness g3_liveness;
static int node_ids[MAX_NODES * 4], leaf_ids[MAX_NODES * 4];

/* What a fresh allocator binds, per step of the scenario. */
struct expected {
    struct bound first, replayed, replanned, multi;
    size_t sizes[2];
};

/* Counts the failures the scenarios met, and those each step absorbed. */
static int n_failed_calls, n_new_failed;

/* One call of the scenario: with memory back after a TG_ERR_ALLOC, the same
 * call again must succeed.  False when the planned failure did not fire in
 * it and the call failed anyway. */
#define STEP(call, what)                                                                                   \
    do {                                                                                                   \
        enum tg_status st_ = (call);                                                                       \
        if (st_ != TG_OK) {                                                                                \
            bool fired_ = oom_disarm();                                                                    \
            n_failed_calls++;                                                                              \
            CHECK_MSG(fired_ && st_ == TG_ERR_ALLOC, "k=%ld %s: %s without a failed allocation, or not " \
                      "TG_ERR_ALLOC: %s", k, what, tg_status_name(st_), tg_last_error());                  \
            CHECK_MSG(strstr(tg_last_error(), "memory") != NULL, "k=%ld %s: message '%s'", k, what,       \
                      tg_last_error());                                                                    \
            enum tg_status again_ = (call);                                                                \
            CHECK_MSG(again_ == TG_OK, "k=%ld %s again: %s: %s", k, what, tg_status_name(again_),          \
                      tg_last_error());                                                                    \
        }                                                                                                  \
    } while (0)

/* The single-buffer scenario: new, reserve, alloc, unchanged, replay of a
 * rebuilt graph, re-plan of a changed one, size-only reserve, free.  Returns
 * whether the k-th allocation happened. */
static bool scenario_one(enum tg_plan_policy policy, long k, const struct expected *want) {
    long live0 = oom_live();
    oom_fail_at(k);
    tg_gallocr *ga = tg_gallocr_new(&buft_a.buft);
    if (!ga) {
        bool fired = oom_disarm();
        n_new_failed++;
        CHECK_MSG(fired, "k=%ld: tg_gallocr_new failed with no allocation failed: %s", k, tg_last_error());
        CHECK_MSG(oom_live() == live0, "k=%ld: failed tg_gallocr_new leaks %ld blocks", k, oom_live() - live0);
        return true;
    }
    tg_gallocr_set_policy(ga, policy);
    STEP(tg_gallocr_reserve(ga, g1.graph), "reserve");
    STEP(tg_gallocr_alloc_graph(ga, g1.graph), "alloc_graph");
    struct bound got = bound_of(ga, g1.graph);
    CHECK_MSG(same_bound(&got, &want->first), "k=%ld policy %d: first bind differs from a fresh allocator's", k,
              (int)policy);
    STEP(tg_gallocr_alloc_graph(ga, g1.graph), "alloc_graph (unchanged)");
    STEP(tg_gallocr_alloc_graph(ga, g1_again.graph), "alloc_graph (replay)");
    got = bound_of(ga, g1_again.graph);
    CHECK_MSG(same_bound(&got, &want->replayed), "k=%ld policy %d: replayed bind differs", k, (int)policy);
    STEP(tg_gallocr_alloc_graph(ga, g3.graph), "alloc_graph (re-plan)");
    got = bound_of(ga, g3.graph);
    if (!same_bound(&got, &want->replanned)) {
        /* TG_PLAN_BEST keeps the online plan, or the best the offline
         * search had, when the search runs out of memory (alloc_plan.c,
         * replan_offline): another plan, but it must still be legal. */
        long left = oom_pause();
        CHECK_MSG(policy == TG_PLAN_BEST, "k=%ld policy %d: re-planned bind differs", k, (int)policy);
        tg_buffer_type *bufts[1] = {&buft_a.buft};
        struct tg_oracle_report rep = {0};
        CHECK_OK(tg_oracle_check(g3.graph, &g3_liveness, &g3_snapshot, bufts, 1, &rep));
        CHECK_MSG(rep.n == 0, "k=%ld: the plan kept after a failed search breaks %d rules", k, rep.n);
        tg_oracle_report_free(&rep);
        oom_resume(left);
    }
    struct tg_plan_report rep;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &rep));
    size_t sizes[1] = {0};
    STEP(tg_gallocr_reserve_n_size(ga, g1.graph, NULL, NULL, sizes), "reserve_n_size");
    CHECK_MSG(sizes[0] == want->first.size[0] || sizes[0] <= want->replanned.size[0], "k=%ld: size %zu", k,
              sizes[0]);
    tg_gallocr_free(ga);
    bool fired = oom_disarm();
    CHECK_MSG(oom_live() == live0, "k=%ld policy %d: %ld blocks leak", k, (int)policy, oom_live() - live0);
    return fired;
}

/* Two buffer types: reserve_n with ids, alloc_graph, replay, free. */
static bool scenario_multi(enum tg_plan_policy policy, long k, const struct expected *want) {
    tg_buffer_type *bufts[2] = {&buft_a.buft, &buft_b.buft};
    long live0 = oom_live();
    oom_fail_at(k);
    tg_gallocr *ga = tg_gallocr_new_n(bufts, 2);
    if (!ga) {
        bool fired = oom_disarm();
        CHECK_MSG(fired, "k=%ld: tg_gallocr_new_n failed with no allocation failed: %s", k, tg_last_error());
        CHECK_MSG(oom_live() == live0, "k=%ld: failed tg_gallocr_new_n leaks %ld blocks", k, oom_live() - live0);
        return true;
    }
    tg_gallocr_set_policy(ga, policy);
    STEP(tg_gallocr_reserve_n(ga, g1.graph, node_ids, leaf_ids), "reserve_n");
    STEP(tg_gallocr_alloc_graph(ga, g1.graph), "alloc_graph (two buffers)");
    STEP(tg_gallocr_alloc_graph(ga, g1_again.graph), "alloc_graph (two buffers, replay)");
    struct bound got = bound_of(ga, g1_again.graph);
    CHECK_MSG(same_bound(&got, &want->multi), "k=%ld policy %d: two-buffer bind differs", k, (int)policy);
    size_t sizes[2] = {0, 0};
    STEP(tg_gallocr_reserve_n_size(ga, g1.graph, node_ids, leaf_ids, sizes), "reserve_n_size (two buffers)");
    CHECK_MSG(sizes[0] == want->sizes[0] && sizes[1] == want->sizes[1], "k=%ld: sizes %zu %zu, want %zu %zu", k,
              sizes[0], sizes[1], want->sizes[0], want->sizes[1]);
    tg_gallocr_free(ga);
    bool fired = oom_disarm();
    CHECK_MSG(oom_live() == live0, "k=%ld policy %d (two buffers): %ld blocks leak", k, (int)policy,
              oom_live() - live0);
    return fired;
}

static struct expected expect(enum tg_plan_policy policy) {
    struct expected e;
    long k = -1;
    unbind(&g1);
    unbind(&g1_again);
    unbind(&g3);
    tg_gallocr *ga = tg_gallocr_new(&buft_a.buft);
    tg_gallocr_set_policy(ga, policy);
    STEP(tg_gallocr_reserve(ga, g1.graph), "reference reserve");
    STEP(tg_gallocr_alloc_graph(ga, g1.graph), "reference alloc");
    e.first = bound_of(ga, g1.graph);
    STEP(tg_gallocr_alloc_graph(ga, g1_again.graph), "reference replay");
    e.replayed = bound_of(ga, g1_again.graph);
    STEP(tg_gallocr_alloc_graph(ga, g3.graph), "reference re-plan");
    e.replanned = bound_of(ga, g3.graph);
    tg_gallocr_free(ga);

    unbind(&g1);
    unbind(&g1_again);
    tg_buffer_type *bufts[2] = {&buft_a.buft, &buft_b.buft};
    ga = tg_gallocr_new_n(bufts, 2);
    tg_gallocr_set_policy(ga, policy);
    STEP(tg_gallocr_reserve_n(ga, g1.graph, node_ids, leaf_ids), "reference reserve_n");
    STEP(tg_gallocr_alloc_graph(ga, g1_again.graph), "reference alloc (two buffers)");
    e.multi = bound_of(ga, g1_again.graph);
    STEP(tg_gallocr_reserve_n_size(ga, g1.graph, node_ids, leaf_ids, e.sizes), "reference reserve_n_size");
    tg_gallocr_free(ga);
    return e;
}

static long run_all(bool (*scenario)(enum tg_plan_policy, long, const struct expected *), enum tg_plan_policy policy,
                    const struct expected *want) {
    long k = 0;
    for (; k < 200000; k = oom_next_k(k, 3000)) {
        unbind(&g1);
        unbind(&g1_again);
        unbind(&g3);
        if (!scenario(policy, k, want)) break;
    }
    CHECK_MSG(k < 200000, "the scenario never ran out of allocations to fail");
    return k;
}
#endif

int main(void) {
#ifndef OOM_CAN_FAIL
    printf("skipped: this build's allocator cannot be replaced (a sanitizer owns it, or not glibc)\n");
    return 77;
#else
    if (!oom_injects()) return oom_skip_not_injecting();
    printf("allocator out of memory\n"); /* stdout's buffer is allocated before any count */
    test_buft_init(&buft_a, "oom_a", 32, 0);
    test_buft_init(&buft_b, "oom_b", 64, 0);
    g1 = build(0);
    g1_again = build(0);
    g3 = build(3);
    if (tg_oracle_snapshot_take(g3.graph, &g3_snapshot) != TG_OK ||
        tg_oracle_liveness_build(g3.graph, &g3_snapshot, NULL, NULL, &g3_liveness) != TG_OK) {
        return 1;
    }
    for (int i = 0; i < g1.graph->n_nodes; i++) node_ids[i] = i % 3 == 1;
    for (int i = 0; i < g1.graph->n_leafs; i++) leaf_ids[i] = 0;

    for (int p = 0; p < 2; p++) {
        enum tg_plan_policy policy = p ? TG_PLAN_BEST : TG_PLAN_GGML;
        struct expected want = expect(policy);
        long n1 = run_all(scenario_one, policy, &want);
        long n2 = run_all(scenario_multi, policy, &want);
        printf("policy %s: one buffer %ld allocations, two buffers %ld\n", p ? "best" : "ggml", n1, n2);
    }
    printf("%d calls failed and were retried, tg_gallocr_new failed %d times\n", n_failed_calls, n_new_failed);
    built_free(&g1);
    built_free(&g1_again);
    tg_oracle_liveness_free(&g3_liveness);
    tg_oracle_snapshot_free(&g3_snapshot);
    built_free(&g3);
    return tg_test_finish();
#endif
}

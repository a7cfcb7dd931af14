/* Hand-made graphs, one per allocator fault (tg-alloc.h): with the fault the
 * oracle reports the broken rule, without it the same graph is clean.  These
 * complement props/prop_faults.c (generated graphs) with small cases whose
 * failure can be read at a glance. */
#include "tg-gen.h"
#include "tg-oracle.h"
#include "tg_test.h"

#include <stdlib.h>

struct planned {
    struct tg_oracle_report rep;
    enum tg_status status;
};

static struct tg_gen_buft buft16;

static struct tg_tensor *named(struct tg_tensor *t, const char *name) {
    if (t) tg_set_name(t, name);
    return t;
}

/* Plans graph with one buffer of buft16 (fault injected) and checks it. */
static struct planned plan_and_check(struct tg_graph *graph, enum tg_fault fault) {
    struct planned p = {{0}, TG_OK};
    tg_buffer_type *bufts[1] = {&buft16.buft};
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    CHECK_OK(tg_oracle_snapshot_take(graph, &snap));
    CHECK_OK(tg_oracle_liveness_build(graph, &snap, NULL, NULL, &lv));
    tg_gallocr *galloc = tg_gallocr_new(bufts[0]);
    tg_gallocr_set_fault(galloc, fault);
    p.status = tg_gallocr_reserve(galloc, graph);
    if (p.status == TG_OK) p.status = tg_gallocr_alloc_graph(galloc, graph);
    if (p.status == TG_OK) CHECK_OK(tg_oracle_check(graph, &lv, &snap, bufts, 1, &p.rep));
    tg_gallocr_free(galloc);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    return p;
}

static bool has_inplace(const struct tg_oracle_report *rep, enum tg_oracle_inplace_reason why) {
    for (int i = 0; i < rep->n; i++) {
        if (rep->items[i].rule == TG_RULE_ILLEGAL_INPLACE && rep->items[i].inplace_reason == why) return true;
    }
    return false;
}

typedef struct tg_graph *(*build_fn)(struct tg_context *ctx);

/* Builds the graph twice (fresh tensors each time): once planned with the
 * fault, once without. */
static void run(const char *what, build_fn build, enum tg_fault fault, enum tg_oracle_rule rule,
                enum tg_oracle_inplace_reason reason) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_graph *g = build(ctx);
    struct planned bad = plan_and_check(g, fault);
    CHECK_MSG(bad.status == TG_OK, "%s: planning with the fault failed: %s", what, tg_last_error());
    bool fired = rule == TG_RULE_ILLEGAL_INPLACE ? has_inplace(&bad.rep, reason) : tg_oracle_report_count(&bad.rep, rule) > 0;
    CHECK_MSG(fired, "%s: fault '%s' did not raise '%s' (%d other findings)", what, tg_fault_name(fault),
              tg_oracle_rule_name(rule), bad.rep.n);
    if (!fired) tg_oracle_report_print(&bad.rep, 5);
    tg_oracle_report_free(&bad.rep);
    tg_graph_free(g);
    tg_context_free(ctx);

    ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    g = build(ctx);
    struct planned good = plan_and_check(g, TG_FAULT_NONE);
    CHECK_OK(good.status);
    CHECK_MSG(good.rep.n == 0, "%s: %d findings without the fault", what, good.rep.n);
    tg_oracle_report_print(&good.rep, 5);
    tg_oracle_report_free(&good.rep);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A graph with the given tensors expanded in this order (fixing the node order
 * the fault needs), the last one an output. */
static struct tg_graph *in_order(struct tg_tensor **ts, int n) {
    struct tg_graph *g = tg_graph_new(64);
    tg_set_output(ts[n - 1]);
    for (int i = 0; i < n; i++) CHECK_OK(tg_graph_build_forward_expand(g, ts[i]));
    return g;
}

static struct tg_graph *finish(struct tg_tensor *last) { return in_order(&last, 1); }

static struct tg_tensor *leaf(struct tg_context *ctx, const char *name, int64_t n) {
    return named(tg_new_tensor_1d(ctx, TG_TYPE_F32, n), name);
}

/* a has two consumers (b, c); the fault forgets one, so b takes a's memory in
 * place while c still has to read a. */
static struct tg_graph *build_two_consumers(struct tg_context *ctx) {
    struct tg_tensor *x = leaf(ctx, "x", 16), *x2 = leaf(ctx, "x2", 16);
    struct tg_tensor *a = named(tg_sqr(ctx, x), "a");
    struct tg_tensor *b = named(tg_scale(ctx, a, 2.0f), "b");
    struct tg_tensor *e = named(tg_cont(ctx, x2), "e");
    struct tg_tensor *c = named(tg_add(ctx, b, a), "c");
    return finish(named(tg_add(ctx, c, e), "out"));
}

/* y is an output in the middle; the fault lets z take its memory in place. */
static struct tg_graph *build_output_in_middle(struct tg_context *ctx) {
    struct tg_tensor *x = leaf(ctx, "x", 16);
    struct tg_tensor *y = named(tg_scale(ctx, x, 2.0f), "y");
    tg_set_output(y);
    struct tg_tensor *z = named(tg_sqr(ctx, y), "z");
    return finish(named(tg_cont(ctx, z), "out"));
}

/* soft_max's mask has the node's size in bytes but another shape; the fault
 * lets the node take the mask's memory. */
static struct tg_graph *build_mask_other_layout(struct tg_context *ctx) {
    struct tg_tensor *a = named(tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 4), "a");
    struct tg_tensor *m0 = named(tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 8), "m0");
    struct tg_tensor *mask = named(tg_scale(ctx, m0, 1.0f), "mask");
    struct tg_tensor *sm = named(tg_soft_max(ctx, a, mask, 1.0f, 0.0f), "sm");
    struct tg_tensor *keep_a = named(tg_add(ctx, sm, a), "keep_a"); /* a stays live: not a candidate */
    return finish(keep_a);
}

/* v views y and is read last; the fault frees y when its direct reader is done. */
static struct tg_graph *build_view_read_late(struct tg_context *ctx) {
    struct tg_tensor *x = leaf(ctx, "x", 16), *x2 = leaf(ctx, "x2", 16);
    struct tg_tensor *y = named(tg_cont(ctx, x), "y");
    struct tg_tensor *v = named(tg_reshape_2d(ctx, y, 8, 2), "v");
    struct tg_tensor *a = named(tg_sqr(ctx, y), "a");
    struct tg_tensor *e = named(tg_cont(ctx, x2), "e");
    struct tg_tensor *late = named(tg_scale(ctx, v, 3.0f), "late");
    struct tg_tensor *sum = named(tg_add(ctx, named(tg_reshape_1d(ctx, late, 16), "late1"), a), "sum");
    struct tg_tensor *order[] = {v, a, e, late, named(tg_add(ctx, sum, e), "out")};
    return in_order(order, 5);
}

/* a and b (64 bytes each, adjacent) are freed together; the off-by-one merge
 * makes their block 144 bytes and d (144 bytes) runs into c, still live. */
static struct tg_graph *build_adjacent_frees(struct tg_context *ctx) {
    struct tg_tensor *x = leaf(ctx, "x", 16), *x36 = leaf(ctx, "x36", 36);
    struct tg_tensor *a = named(tg_cont(ctx, x), "a");
    struct tg_tensor *b = named(tg_cont(ctx, x), "b");
    struct tg_tensor *c = named(tg_cont(ctx, x), "c");
    struct tg_tensor *s = named(tg_concat(ctx, a, b, 0), "s");
    struct tg_tensor *d = named(tg_cont(ctx, x36), "d");
    struct tg_tensor *cs = named(tg_add(ctx, c, c), "cs");
    struct tg_tensor *t = named(tg_sum_rows(ctx, s), "t");
    struct tg_tensor *u = named(tg_sum_rows(ctx, d), "u");
    struct tg_tensor *order[] = {a, b, c, s, d, cs, t, u,
                                 named(tg_add(ctx, named(tg_add(ctx, t, u), "tu"), named(tg_sum_rows(ctx, cs), "csr")), "out")};
    return in_order(order, 9);
}

/* 12-byte tensors with a 16-byte alignment. */
static struct tg_graph *build_odd_sizes(struct tg_context *ctx) {
    struct tg_tensor *x = leaf(ctx, "x", 3);
    struct tg_tensor *a = named(tg_cont(ctx, x), "a");
    struct tg_tensor *b = named(tg_cont(ctx, a), "b");
    return finish(named(tg_add(ctx, a, b), "out"));
}

/* Stale replay: plan a graph, then bind one with the same counts and sizes but
 * a changed edge (c reads a instead of b, so a must live longer). */
static struct tg_graph *build_edge(struct tg_context *ctx, bool changed) {
    struct tg_tensor *x = leaf(ctx, "x", 16);
    struct tg_tensor *a = named(tg_cont(ctx, x), "a");
    struct tg_tensor *b = named(tg_cont(ctx, a), "b");
    struct tg_tensor *e = named(tg_cont(ctx, x), "e");
    struct tg_tensor *c = named(tg_add(ctx, changed ? a : b, e), "c");
    struct tg_graph *g = tg_graph_new(64);
    tg_set_output(c);
    CHECK_OK(tg_graph_build_forward_expand(g, b)); /* same node order in both graphs */
    CHECK_OK(tg_graph_build_forward_expand(g, e));
    CHECK_OK(tg_graph_build_forward_expand(g, c));
    return g;
}

static void test_stale_replay(void) {
    for (int with_fault = 1; with_fault >= 0; with_fault--) {
        struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
        struct tg_graph *first = build_edge(ctx, false), *second = build_edge(ctx, true);
        tg_buffer_type *bufts[1] = {&buft16.buft};
        tg_gallocr *galloc = tg_gallocr_new(bufts[0]);
        if (with_fault) tg_gallocr_set_fault(galloc, TG_FAULT_STALE_REPLAY);
        CHECK_OK(tg_gallocr_reserve(galloc, first));
        struct tg_oracle_snapshot snap;
        struct tg_oracle_liveness lv;
        struct tg_oracle_report rep = {0};
        CHECK_OK(tg_oracle_snapshot_take(second, &snap));
        CHECK_OK(tg_oracle_liveness_build(second, &snap, NULL, NULL, &lv));
        CHECK_OK(tg_gallocr_alloc_graph(galloc, second)); /* one buffer: re-plans when it notices */
        CHECK_OK(tg_oracle_check(second, &lv, &snap, bufts, 1, &rep));
        if (with_fault) {
            CHECK_MSG(tg_oracle_report_count(&rep, TG_RULE_LIVE_OVERLAP) > 0, "stale replay not flagged (%d findings)", rep.n);
        } else {
            CHECK_MSG(rep.n == 0, "changed edge without the fault: %d findings", rep.n);
        }
        tg_oracle_report_print(&rep, 4);
        tg_oracle_report_free(&rep);
        tg_oracle_liveness_free(&lv);
        tg_oracle_snapshot_free(&snap);
        tg_gallocr_free(galloc);
        tg_graph_free(first);
        tg_graph_free(second);
        tg_context_free(ctx);
    }
}

/* No environment variable switches a fault on: with TG_FAULT set (the switch
 * of earlier versions) the plan is aligned and the oracle finds nothing. */
static void test_environment_switches_nothing(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_graph *g = build_odd_sizes(ctx);
    tg_buffer_type *bufts[1] = {&buft16.buft};
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    setenv("TG_FAULT", "ignore-alignment", 1);
    tg_gallocr *galloc = tg_gallocr_new(bufts[0]);
    unsetenv("TG_FAULT");
    CHECK_OK(tg_gallocr_reserve(galloc, g));
    CHECK_OK(tg_gallocr_alloc_graph(galloc, g));
    CHECK_OK(tg_oracle_check(g, &lv, &snap, bufts, 1, &rep));
    CHECK_MSG(rep.n == 0, "%d violations, the first: %s", rep.n, rep.n ? rep.items[0].message : "");
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_gallocr_free(galloc);
    tg_graph_free(g);
    tg_context_free(ctx);
}

int main(void) {
    tg_gen_buft_init(&buft16, "align16", 16, 0, TG_OP_COUNT, 0);
    run("two consumers", build_two_consumers, TG_FAULT_SKIP_CONSUMER_COUNT, TG_RULE_ILLEGAL_INPLACE,
        TG_INPLACE_NOT_LAST_CONSUMER);
    run("output in the middle", build_output_in_middle, TG_FAULT_IGNORE_OUTPUT_FLAG, TG_RULE_ILLEGAL_INPLACE,
        TG_INPLACE_SOURCE_PROTECTED);
    run("mask of another layout", build_mask_other_layout, TG_FAULT_INPLACE_IGNORE_LAYOUT, TG_RULE_ILLEGAL_INPLACE,
        TG_INPLACE_LAYOUT_DIFFERS);
    run("view read late", build_view_read_late, TG_FAULT_FREE_VIEW_ROOT, TG_RULE_ILLEGAL_INPLACE, TG_INPLACE_LIVE_VIEW);
    run("adjacent frees", build_adjacent_frees, TG_FAULT_MERGE_OFF_BY_ONE, TG_RULE_LIVE_OVERLAP, TG_INPLACE_OK);
    run("odd sizes", build_odd_sizes, TG_FAULT_IGNORE_ALIGNMENT, TG_RULE_MISALIGNED, TG_INPLACE_OK);
    test_stale_replay();
    test_environment_switches_nothing();
    return tg_test_finish();
}

/* Host memory running out while a graph is built (contexts, tensors, ops,
 * views, the graph and its expansion, a graph view) and while the oracle
 * looks at it (snapshot, liveness, lower bound, naive plan, check):
 * whichever allocation fails, a constructor returns NULL with
 * tg_last_error() saying "out of host memory", a call with a status says
 * TG_ERR_ALLOC (and succeeds when made again, the graph as it was), nothing
 * leaks once the objects are freed, and nothing crashes.  tg_test_oom.h
 * fails the k-th allocation; without it (sanitizers) the test is skipped. */
#include "tg_test_oom.h"

#include "tg-cpu.h"
#include "tg-oracle.h"
#include "tg_test.h"

#ifdef OOM_CAN_FAIL

/* Deeper than the expansion's inline stack (64 frames) and wider than its
 * inline pending set (128 tensors), with more tensors than a context's first
 * chunk of metadata. */
#define CHAIN 300

static int n_failed;

/* A pointer the build needs: NULL must be a failed allocation, said so. */
#define NEED(expr, what)                                                                                   \
    do {                                                                                                   \
        if (!(expr)) {                                                                                     \
            bool fired_ = oom_disarm();                                                                    \
            n_failed++;                                                                                    \
            CHECK_MSG(fired_, "k=%ld %s: NULL with no allocation failed: %s", k, what, tg_last_error());   \
            CHECK_MSG(strstr(tg_last_error(), "out of host memory") != NULL, "k=%ld %s: NULL, and the "    \
                      "message does not say memory ran out: %s", k, what, tg_last_error());               \
            goto done;                                                                                     \
        }                                                                                                  \
    } while (0)

/* A call with a status: TG_ERR_ALLOC when an allocation failed, then made again. */
#define STEP(call, what)                                                                                   \
    do {                                                                                                   \
        enum tg_status st_ = (call);                                                                       \
        if (st_ != TG_OK) {                                                                                \
            bool fired_ = oom_disarm();                                                                    \
            n_failed++;                                                                                    \
            CHECK_MSG(fired_ && st_ == TG_ERR_ALLOC, "k=%ld %s: %s without a failed allocation, or not "  \
                      "TG_ERR_ALLOC: %s", k, what, tg_status_name(st_), tg_last_error());                  \
            CHECK_ERR_HAS("memory");                                                                       \
            st_ = (call);                                                                                  \
            CHECK_MSG(st_ == TG_OK, "k=%ld %s again: %s: %s", k, what, tg_status_name(st_), tg_last_error()); \
            if (st_ != TG_OK) goto done;                                                                   \
        }                                                                                                  \
    } while (0)

/* Returns whether the planned failure happened. */
static bool scenario(long k) {
    long live0 = oom_live();
    struct tg_context *data = NULL, *ctx = NULL;
    struct tg_graph *g = NULL, *view = NULL;
    struct tg_oracle_snapshot snap = {0};
    struct tg_oracle_liveness lv = {0};
    struct tg_oracle_report rep = {0};
    struct tg_oracle_naive naive = {0};
    bool have_snap = false, have_lv = false, have_naive = false;
    oom_fail_at(k);

    NEED(data = tg_context_new((struct tg_context_params){.mem_size = 1 << 16}), "tg_context_new (data)");
    NEED(tg_new_tensor_2d(data, TG_TYPE_F32, 16, 16), "tg_new_tensor_2d (data)");
    NEED(ctx = tg_context_new((struct tg_context_params){.no_alloc = true}), "tg_context_new");
    struct tg_tensor *a, *b, *w, *pos, *rows, *cur;
    NEED(a = tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 8), "tensor a");
    NEED(b = tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 8), "tensor b");
    NEED(w = tg_new_tensor_2d(ctx, TG_TYPE_F32, 16, 16), "tensor w");
    NEED(pos = tg_new_tensor_1d(ctx, TG_TYPE_I32, 8), "tensor pos");
    NEED(rows = tg_new_tensor_1d(ctx, TG_TYPE_I32, 4), "tensor rows");
    tg_set_name(a, "a");
    tg_format_name(b, "b%d", 1);
    tg_set_input(a);
    tg_set_input(b);
    NEED(tg_dup_tensor(ctx, a), "tg_dup_tensor");
    NEED(cur = tg_mul_mat(ctx, w, a), "tg_mul_mat");
    NEED(cur = tg_add(ctx, cur, b), "tg_add");
    NEED(cur = tg_reshape_3d(ctx, cur, 16, 2, 4), "tg_reshape_3d");
    NEED(cur = tg_permute(ctx, cur, 0, 2, 1, 3), "tg_permute");
    NEED(cur = tg_cont(ctx, cur), "tg_cont");
    NEED(cur = tg_reshape_2d(ctx, cur, 16, 8), "tg_reshape_2d");
    NEED(cur = tg_soft_max(ctx, cur, NULL, 0.5f, 0.0f), "tg_soft_max");
    NEED(cur = tg_rms_norm(ctx, cur, 1e-5f), "tg_rms_norm");
    NEED(cur = tg_transpose(ctx, cur), "tg_transpose");
    NEED(cur = tg_cont(ctx, cur), "tg_cont (transposed)");
    NEED(cur = tg_view_2d(ctx, cur, 8, 16, cur->nb[1], 0), "tg_view_2d");
    NEED(cur = tg_concat(ctx, cur, cur, 0), "tg_concat");
    NEED(cur = tg_get_rows(ctx, cur, rows), "tg_get_rows");
    NEED(cur = tg_view_1d(ctx, cur, 16, 0), "tg_view_1d");
    NEED(cur = tg_cpy(ctx, cur, tg_view_1d(ctx, b, 16, 0)), "tg_cpy");
    (void)pos;
    for (int i = 0; i < CHAIN; i++) NEED(cur = tg_scale(ctx, tg_sqr(ctx, cur), 0.5f), "a chain link");
    tg_set_output(cur);
    NEED(g = tg_graph_new(4 * CHAIN), "tg_graph_new");
    STEP(tg_graph_build_forward_expand(g, cur), "tg_graph_build_forward_expand");
    NEED(view = tg_graph_view(g, 1, g->n_nodes - 1), "tg_graph_view");

    STEP(tg_oracle_snapshot_take(g, &snap), "tg_oracle_snapshot_take");
    have_snap = true;
    STEP(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv), "tg_oracle_liveness_build");
    have_lv = true;
    tg_buffer_type *bufts[1] = {tg_cpu_buffer_type()};
    size_t lower[1], naive_total[1];
    STEP(tg_oracle_lower_bound(&lv, bufts, 1, lower, naive_total), "tg_oracle_lower_bound");
    STEP(tg_oracle_naive_alloc(g, &lv, bufts, 1, &naive), "tg_oracle_naive_alloc");
    have_naive = true;
    STEP((tg_oracle_report_free(&rep), tg_oracle_check(g, &lv, &snap, bufts, 1, &rep)), "tg_oracle_check");
    {
        long left = oom_pause();
        CHECK_MSG(rep.n == 0, "k=%ld: the naive plan has %d violations", k, rep.n);
        oom_resume(left);
    }

    /* every node on one address: the check must find violations (many:
     * its list grows) or say it could not run, never pass the plan */
    {
        static void *saved[4 * CHAIN];
        for (int i = 0; i < g->n_nodes; i++) saved[i] = g->nodes[i]->data;
        for (int i = 0; i < g->n_nodes; i++)
            if (!g->nodes[i]->view_src) g->nodes[i]->data = g->nodes[0]->data;
        tg_oracle_report_free(&rep);
        enum tg_status st = tg_oracle_check(g, &lv, &snap, bufts, 1, &rep);
        for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->data = saved[i];
        CHECK_MSG(st == TG_ERR_ALLOC || (st == TG_OK && rep.n > 0),
                  "k=%ld: a plan with every node on one address: %s, %d violations", k, tg_status_name(st), rep.n);
        if (st == TG_ERR_ALLOC) CHECK_ERR_HAS("out of host memory");
    }

done:;
    bool fired = oom_disarm();
    tg_oracle_report_free(&rep);
    if (have_naive) tg_oracle_naive_free(&naive);
    if (have_lv) tg_oracle_liveness_free(&lv);
    if (have_snap) tg_oracle_snapshot_free(&snap);
    tg_graph_free(view);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_context_free(data);
    CHECK_MSG(oom_live() == live0, "k=%ld: %ld blocks leak", k, oom_live() - live0);
    return fired || n_failed < 0;
}
#endif

int main(void) {
#ifndef OOM_CAN_FAIL
    printf("skipped: this build's allocator cannot be replaced (a sanitizer owns it, or not glibc)\n");
    return 77;
#else
    if (!oom_injects()) return oom_skip_not_injecting();
    printf("graph construction and the oracle out of memory\n"); /* stdout's buffer is allocated before any count */
    scenario(-1); /* whole: what the process makes once (a thread's first error message) is made */
    long k = 0;
    for (; k < 100000 && scenario(k); k++) {}
    CHECK(k < 100000);
    printf("%ld allocations, %d failed calls\n", k, n_failed);
    return tg_test_finish();
#endif
}

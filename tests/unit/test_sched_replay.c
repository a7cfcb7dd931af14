/* Schedule replay (impl/sched_memo.c): a graph rebuilt with the same shape
 * is replayed, and a graph that differs in any recorded field is not.  Each
 * change below is made to a fresh build of the graph the scheduler last
 * scheduled in full; the control (no change) must replay.  A weight that
 * moves between tokens is replayed only where it stays in a buffer of the
 * same type and usage, and the schedule then equals a full schedule. */
#include "sched_fixture.h"
#include "tg-checks.h"
#include "tg_test_child.h"

/* out = add(mul(a, b), a) with a source gap: mul's slot 1 is empty and its
 * second operand sits in slot 2 (optional-operand ops leave such gaps), and
 * op params the scheduler must compare (add ignores them). */
struct net {
    struct tg_context *ctx;
    struct tg_tensor *a, *b, *outside, *prod, *out;
    struct tg_graph *graph;
};

static void net_build(struct net *n) {
    n->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    n->a = tg_new_tensor_1d(n->ctx, TG_TYPE_F32, 32);
    n->b = tg_new_tensor_1d(n->ctx, TG_TYPE_F32, 32);
    n->outside = tg_new_tensor_1d(n->ctx, TG_TYPE_F32, 32); /* in no graph: never stamped */
    tg_set_input(n->a);
    tg_set_input(n->b);
    n->prod = tg_mul(n->ctx, n->a, n->b);
    n->prod->src[2] = n->prod->src[1];
    n->prod->src[1] = NULL;
    n->out = tg_add(n->ctx, n->prod, n->a);
    n->out->op_params[0] = 3; /* recorded params in the first and the last lane */
    n->out->op_params[TG_MAX_OP_PARAMS - 1] = 5;
    tg_set_output(n->out);
    n->graph = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(n->graph, n->out));
}

static void net_free(struct net *n) {
    tg_graph_free(n->graph);
    tg_context_free(n->ctx);
}

enum change {
    C_NONE,
    C_PARAM_FIRST,   /* op param word 0 */
    C_PARAM_LAST,    /* op param word 15 (the last lane) */
    C_GAP_FILLED,    /* the empty slot 1 now holds a tensor outside the graph */
    C_SOURCE,        /* out adds b instead of a */
    C_SOURCE_DROPPED,/* out loses its second source */
    C_SHAPE,         /* prod keeps half the elements */
    C_COUNT
};

static const char *const change_names[C_COUNT] = {"none", "param-first", "param-last", "gap-filled",
                                                  "source", "source-dropped", "shape"};

static void apply(struct net *n, enum change c) {
    switch (c) {
    case C_NONE: break;
    case C_PARAM_FIRST: n->out->op_params[0] = 7; break;
    case C_PARAM_LAST: n->out->op_params[TG_MAX_OP_PARAMS - 1] = 7; break;
    case C_GAP_FILLED: n->prod->src[1] = n->outside; break;
    case C_SOURCE: n->out->src[1] = n->b; break;
    case C_SOURCE_DROPPED: n->out->src[1] = NULL; break;
    case C_SHAPE: n->prod->ne[0] = 16; break;
    case C_COUNT: break;
    }
}

static void test_changes_are_not_replayed(void) {
    tg_backend *cpu = tg_backend_cpu_new();
    tg_backend_cpu_set_plan_only(cpu, true);
    for (int c = 0; c < C_COUNT; c++) {
        tg_sched *s = tg_sched_new(&cpu, NULL, 1, 64, false, false);
        struct net first, second;
        net_build(&first);
        net_build(&second);
        CHECK_OK(tg_sched_alloc_graph(s, first.graph));
        CHECK(!tg_sched_last_was_replay(s));
        tg_sched_reset(s);
        apply(&second, (enum change)c);
        enum tg_status st = tg_sched_alloc_graph(s, second.graph);
        bool replayed = tg_sched_last_was_replay(s);
        CHECK_MSG(replayed == (c == C_NONE), "%s: %s", change_names[c], replayed ? "replayed" : "not replayed");
        if (c == C_NONE) CHECK_OK(st);
        tg_sched_reset(s);
        tg_sched_free(s);
        net_free(&first);
        net_free(&second);
    }
    tg_backend_free(cpu);
}

/* ---- weights that move between tokens ------------------------------------------------- */

/* out = mul_mat(w, x): the weights rule puts out where w lives. */
struct weighted {
    struct tg_context *wctx, *ctx;
    tg_buffer *weights;
    struct tg_tensor *w, *x, *out;
    struct tg_graph *graph;
};

static void weighted_build(struct weighted *n, tg_backend *w_backend, enum tg_buffer_usage usage) {
    n->wctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    n->w = tg_new_tensor_2d(n->wctx, TG_TYPE_F32, 32, 8);
    n->weights = fx_alloc(n->wctx, w_backend, usage);
    CHECK(n->weights != NULL);
    n->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    n->x = tg_new_tensor_2d(n->ctx, TG_TYPE_F32, 32, 4);
    tg_set_input(n->x);
    n->out = tg_mul_mat(n->ctx, n->w, n->x);
    tg_set_output(n->out);
    n->graph = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(n->graph, n->out));
}

static void weighted_free(struct weighted *n) {
    tg_graph_free(n->graph);
    tg_context_free(n->ctx);
    tg_buffer_free(n->weights);
    tg_context_free(n->wctx);
}

enum move {
    M_NONE,        /* w in a fresh buffer of the same type and usage: replayed */
    M_OTHER_TYPE,  /* w in a buffer of the CPU's type, usage still WEIGHTS */
    M_OTHER_USAGE, /* w in a buffer of the same type, usage ANY */
    M_COUNT
};
static const char *const move_names[M_COUNT] = {"none", "other buffer type", "other usage"};

struct outcome {
    bool replayed;
    int out_backend, n_splits;
};

/* Schedules the first token (w on the sim, usage WEIGHTS) in full, then the
 * second with w moved; and the second token on a scheduler without replay. */
static void run_move(enum move m, enum tg_sched_fault fault, struct outcome *got, struct outcome *full) {
    tg_backend *cpu = tg_backend_cpu_new();
    tg_backend *sim = fx_sim("sim0", true, NULL, 0);
    tg_backend *backends[2] = {sim, cpu};
    tg_sched *s = tg_sched_new(backends, NULL, 2, 64, false, false);
    tg_sched *reference = tg_sched_new(backends, NULL, 2, 64, false, false);
    tg_sched_set_replay(reference, false);
    if (fault != TG_SCHED_FAULT_NONE) tg_sched_set_fault(s, fault);
    struct weighted first, second, again;
    weighted_build(&first, sim, TG_BUFFER_USAGE_WEIGHTS);
    tg_backend *w_backend = m == M_OTHER_TYPE ? cpu : sim;
    enum tg_buffer_usage usage = m == M_OTHER_USAGE ? TG_BUFFER_USAGE_ANY : TG_BUFFER_USAGE_WEIGHTS;
    weighted_build(&second, w_backend, usage);
    weighted_build(&again, w_backend, usage);
    CHECK_OK(tg_sched_alloc_graph(s, first.graph));
    CHECK(tg_sched_get_tensor_backend_id(s, first.out) == 0); /* the weights rule: on the sim */
    tg_sched_reset(s);
    CHECK_OK(tg_sched_alloc_graph(s, second.graph));
    *got = (struct outcome){tg_sched_last_was_replay(s), tg_sched_get_tensor_backend_id(s, second.out),
                            tg_sched_get_n_splits(s)};
    CHECK_OK(tg_sched_alloc_graph(reference, again.graph));
    *full = (struct outcome){false, tg_sched_get_tensor_backend_id(reference, again.out),
                             tg_sched_get_n_splits(reference)};
    tg_sched_free(s);
    tg_sched_free(reference);
    weighted_free(&first);
    weighted_free(&second);
    weighted_free(&again);
    tg_backend_free(sim);
    tg_backend_free(cpu);
}

static void test_moved_weights(void) {
    for (int m = 0; m < M_COUNT; m++) {
        struct outcome got, full;
        run_move((enum move)m, TG_SCHED_FAULT_NONE, &got, &full);
        CHECK_MSG(got.replayed == (m == M_NONE), "%s: %s", move_names[m], got.replayed ? "replayed" : "not replayed");
        CHECK_MSG(got.out_backend == full.out_backend && got.n_splits == full.n_splits,
                  "%s: out on backend %d in %d splits, a full schedule says %d in %d", move_names[m], got.out_backend,
                  got.n_splits, full.out_backend, full.n_splits);
    }
    CHECK(true);
}

/* memo-usage-only is a memo that compares the usage of a weight's buffer and
 * not its type: it replays the move to another buffer type, and the
 * comparison above sees the difference (the test can fail).  Where TG_CHECKS
 * is on, the replay cross-check aborts first. */
static void replay_with_usage_only(const void *unused) {
    (void)unused;
    struct outcome got, full;
    run_move(M_OTHER_TYPE, TG_SCHED_FAULT_MEMO_USAGE_ONLY, &got, &full);
    CHECK(got.replayed);
    CHECK_MSG(got.out_backend != full.out_backend, "out on backend %d either way", got.out_backend);
}

static void test_usage_only_memo_is_caught(void) {
#if TG_CHECKS
    struct tg_child_read child = tg_test_run_in_child(replay_with_usage_only, NULL);
    CHECK_MSG(tg_child_aborted(&child, "schedule replay differs from a full schedule"), "child status %d, stderr: %s",
              child.status, child.report);
#else
    replay_with_usage_only(NULL);
#endif
}

int main(void) {
    test_changes_are_not_replayed();
    test_moved_weights();
    test_usage_only_memo_is_caught();
    return tg_test_finish();
}

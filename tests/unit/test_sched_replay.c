/* Schedule replay (impl/sched_memo.c): a graph rebuilt with the same shape
 * is replayed, and a graph that differs in any recorded field is not.  Each
 * change below is made to a fresh build of the graph the scheduler last
 * scheduled in full; the control (no change) must replay. */
#include "sched_fixture.h"

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

int main(void) {
    test_changes_are_not_replayed();
    return tg_test_finish();
}

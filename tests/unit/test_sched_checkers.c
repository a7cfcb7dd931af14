/* Scheduler checkers (oracle/tg-oracle-sched.h): a clean schedule has no
 * violation, and each TG_SCHED_FAULT makes exactly the checker built for it fire;
 * the checkers no fault reaches (wrong split, foreign result, pre-allocated
 * moved) fire on a schedule altered by hand after scheduling.
 *
 * The backends here only plan (nothing is computed): a "dev" backend whose
 * buffer type no other backend may use and which lacks some ops, and a host
 * backend last.  So the test needs neither the CPU kernels nor the sim device. */
#include "sched-impl.h"
#include "tg-cpu.h"
#include "tg-gen.h"
#include "tg-oracle-sched.h"
#include "tg_test.h"

#include <string.h>

struct fake_backend {
    tg_backend backend;
    struct tg_gen_buft buft;
    bool ops[TG_OP_COUNT];
    bool refuses_views; /* answers no for ops that compute nothing (the scheduler must not ask) */
    char name[16];
};

static struct fake_backend *fake_of(tg_backend *b) { return (struct fake_backend *)b->context; }
static const char *fake_name(tg_backend *b) { return fake_of(b)->name; }
static tg_buffer_type *fake_buft(tg_backend *b) { return &fake_of(b)->buft.buft; }
static bool fake_supports_buft(tg_backend *b, tg_buffer_type *buft) { return buft == &fake_of(b)->buft.buft; }
static bool fake_supports_op(tg_backend *b, const struct tg_tensor *op) {
    if (op->op == TG_OP_NONE || tg_op_is_view(op->op)) return !fake_of(b)->refuses_views;
    return fake_of(b)->ops[op->op];
}
static enum tg_status fake_compute(tg_backend *b, struct tg_graph *g) {
    (void)g;
    return tg_fail(TG_ERR_UNSUPPORTED, "backend '%s' of the checker test only plans", fake_name(b));
}

static void fake_init(struct fake_backend *f, const char *name, size_t alignment, const enum tg_op *ops, int n_ops) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    tg_gen_buft_init(&f->buft, name, alignment, 0, TG_OP_COUNT, 0);
    f->backend.context = f;
    f->backend.iface.get_name = fake_name;
    f->backend.iface.get_default_buffer_type = fake_buft;
    f->backend.iface.supports_buft = fake_supports_buft;
    f->backend.iface.supports_op = fake_supports_op;
    f->backend.iface.graph_compute = fake_compute;
    f->buft.buft.owner = &f->backend;
    if (!ops) {
        for (int i = 0; i < TG_OP_COUNT; i++) f->ops[i] = true;
    }
    for (int i = 0; i < n_ops; i++) f->ops[ops[i]] = true;
}

/* dev (no scale) + host; weights w on dev, odd sizes so alignment matters. */
struct world {
    struct fake_backend dev, host;
    tg_backend *backends[2];
    struct tg_context *wctx, *ctx;
    tg_buffer *wbuf;
    struct tg_tensor *w, *w_spare, *x, *a, *b, *c, *d, *e;
    struct tg_tensor *chain_inputs[40];
    struct tg_graph *graph;
};

static const enum tg_op dev_ops[] = {TG_OP_MUL_MAT, TG_OP_ADD, TG_OP_MUL};

static bool world_init(struct world *wd, bool wide) {
    memset(wd, 0, sizeof *wd);
    fake_init(&wd->dev, "dev", 64, dev_ops, 3);
    fake_init(&wd->host, "host", 32, NULL, 0);
    wd->backends[0] = &wd->dev.backend;
    wd->backends[1] = &wd->host.backend;
    wd->wctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    wd->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    wd->w = tg_new_tensor_2d(wd->wctx, TG_TYPE_F32, 6, 5);
    tg_set_name(wd->w, "w");
    wd->w_spare = tg_new_tensor_2d(wd->wctx, TG_TYPE_F32, 6, 5);
    tg_set_name(wd->w_spare, "w_spare");
    enum tg_status st;
    wd->wbuf = tg_alloc_ctx_tensors(wd->wctx, &wd->dev.buft.buft, &st);
    if (!wd->wbuf) return false;
    tg_buffer_set_usage(wd->wbuf, TG_BUFFER_USAGE_WEIGHTS);

    wd->x = tg_new_tensor_2d(wd->ctx, TG_TYPE_F32, 6, 3);
    tg_set_name(wd->x, "x");
    tg_set_input(wd->x);
    wd->a = tg_mul_mat(wd->ctx, wd->w, wd->x); /* [5,3] on dev: weights */
    tg_set_name(wd->a, "a");
    wd->b = tg_scale(wd->ctx, wd->a, 2.0f); /* dev lacks scale: host, reads a through a copy */
    tg_set_name(wd->b, "b");
    wd->c = tg_add(wd->ctx, wd->b, wd->a);
    tg_set_name(wd->c, "c");
    struct tg_tensor *wv = tg_reshape_1d(wd->ctx, wd->w, 30); /* view of pre-allocated weights */
    tg_set_name(wv, "w_flat");
    wd->d = tg_scale(wd->ctx, wv, 0.5f); /* host reads the dev view through a copy */
    tg_set_name(wd->d, "d");
    struct tg_tensor *sum = tg_mul(wd->ctx, wd->c, wd->c);
    tg_set_name(sum, "sum");
    if (wide) {
        /* a dev chain reading 40 host inputs: the input limit must cut it */
        for (int i = 0; i < 40; i++) {
            struct tg_tensor *in = tg_new_tensor_2d(wd->ctx, TG_TYPE_F32, 5, 3);
            tg_format_name(in, "in%d", i);
            tg_set_input(in);
            wd->chain_inputs[i] = in;
            sum = tg_add(wd->ctx, sum, in);
            tg_format_name(sum, "chain%d", i);
        }
    }
    wd->e = sum;
    tg_set_output(wd->e);
    tg_set_output(wd->d);
    wd->graph = tg_graph_new(512);
    return tg_graph_build_forward_expand(wd->graph, wd->e) == TG_OK &&
           tg_graph_build_forward_expand(wd->graph, wd->d) == TG_OK;
}

static void world_free(struct world *wd) {
    tg_graph_free(wd->graph);
    tg_context_free(wd->ctx);
    tg_buffer_free(wd->wbuf);
    tg_context_free(wd->wctx);
}

/* Faults no TG_SCHED_FAULT makes, injected by hand after scheduling. */
enum injection {
    INJECT_NONE,
    INJECT_REBIND_WEIGHTS,    /* pre-allocated weights re-bound behind the scheduler's back */
    INJECT_REASSIGN_NODE,     /* b (computed in the host split) recorded on dev: in a split of another backend */
    INJECT_RESULT_ON_HOST,    /* a (computed on dev) re-bound into host memory, which dev cannot use */
    INJECT_REBIND_ALIAS,      /* weights re-bound at their address through another buffer object */
    INJECT_WEIGHTS_ON_HOST,   /* the weights leaf (dev memory) recorded on host, which cannot use it */
};

/* Schedules a fresh world with the fault and returns the checker's report. */
static bool run_case(enum tg_sched_fault fault, enum tg_fault alloc_fault, bool wide, enum injection inject,
                     struct tg_oracle_sched_report *rep, int *n_splits) {
    struct world wd;
    bool ok = world_init(&wd, wide);
    CHECK(ok);
    if (!ok) {
        world_free(&wd);
        return false;
    }
    tg_sched *s = tg_sched_new(wd.backends, NULL, 2, 512, false, false);
    CHECK(s != NULL);
    if (!s) {
        world_free(&wd);
        return false;
    }
    tg_sched_set_fault(s, fault);
    tg_gallocr_set_fault(tg_sched_get_gallocr(s), alloc_fault);
    struct tg_oracle_sched_pin pins[41];
    int n_pins = 0;
    tg_sched_set_tensor_backend(s, wd.c, &wd.host.backend); /* expansion alone would put c on dev */
    pins[n_pins++] = (struct tg_oracle_sched_pin){wd.c, 1};
    if (wide) {
        for (struct tg_tensor *t = wd.e; t && t->op == TG_OP_ADD && t != wd.c; t = t->src[0]) {
            tg_sched_set_tensor_backend(s, t, &wd.dev.backend);
            pins[n_pins++] = (struct tg_oracle_sched_pin){t, 0};
        }
    }
    struct tg_oracle_snapshot snap;
    CHECK_OK(tg_oracle_snapshot_take(wd.graph, &snap));
    enum tg_status st = tg_sched_alloc_graph(s, wd.graph);
    CHECK_OK(st);
    bool ran = false;
    tg_buffer *host_buf = NULL;
    if (st == TG_OK && inject == INJECT_REBIND_ALIAS) {
        host_buf = tg_cpu_buffer_from_ptr(tg_buffer_get_base(wd.wbuf), wd.wbuf->size);
        CHECK(host_buf != NULL);
        if (host_buf) CHECK_OK(tg_tensor_bind(wd.w, host_buf, wd.w->data));
    }
    if (st == TG_OK && inject == INJECT_WEIGHTS_ON_HOST) CHECK_OK(sched_rec_set(s, wd.w, 1, TG_REASON_USER_PIN));
    if (st == TG_OK && inject == INJECT_REBIND_WEIGHTS) CHECK_OK(tg_tensor_bind(wd.w, wd.wbuf, wd.w_spare->data));
    if (st == TG_OK && inject == INJECT_REASSIGN_NODE) {
        CHECK(tg_sched_get_tensor_backend_id(s, wd.b) == 1);
        CHECK_OK(sched_rec_set(s, wd.b, 0, TG_REASON_USER_PIN));
    }
    if (st == TG_OK && inject == INJECT_RESULT_ON_HOST) {
        CHECK(tg_sched_get_tensor_backend_id(s, wd.a) == 0);
        host_buf = tg_buft_alloc_buffer(&wd.host.buft.buft, tg_nbytes(wd.a));
        CHECK(host_buf != NULL);
        if (host_buf) CHECK_OK(tg_tensor_bind(wd.a, host_buf, tg_buffer_get_base(host_buf)));
    }
    if (st == TG_OK) {
        ran = tg_oracle_sched_check(s, &snap, NULL, pins, n_pins, rep) == TG_OK;
        CHECK(ran);
        *n_splits = tg_sched_get_n_splits(s);
    }
    tg_oracle_snapshot_free(&snap);
    tg_sched_free(s);
    tg_buffer_free(host_buf);
    world_free(&wd);
    return ran;
}

/* Hits of rule, and every other hit one of the allocator's (which sees a hand-moved tensor too). */
static void expect_with_alloc(const char *what, const struct tg_oracle_sched_report *rep, enum tg_oracle_sched_rule rule) {
    int hits = tg_oracle_sched_report_count(rep, rule), alloc = tg_oracle_sched_report_count(rep, TG_OSCHED_ALLOC);
    if (hits == 0 || hits + alloc != rep->n) {
        tg_logf("case %s: %d violations, %d of rule %s\n", what, rep->n, hits, tg_oracle_sched_rule_name(rule));
        tg_oracle_sched_report_print(rep, 10);
    }
    CHECK(hits > 0);
    CHECK(hits + alloc == rep->n);
}

/* Pipeline copies (n_copies 4): y (host input) is read by two dev splits,
 * each through copies of its own:
 *   a = mul_mat(w, x), a2 = add(a, y)  dev   (copies of x and y)
 *   b = scale(a2)                      host  (copies of a2)
 *   c = add(b, y), c3 = mul(c, y)      dev   (copies of b and y)
 * steal: c is made to read the first split's copy of y instead of its own,
 * the stale read ggml's one copy per (source, backend) gives.
 * second index: c3 is made to read a pipeline copy of y that no split reads:
 * each copy alone is one made for c's split, but the split reads y through
 * two copies (one copy index per graph). */
enum copy_fault {
    COPY_OWN,
    COPY_STEAL,
    COPY_SECOND_INDEX,
    COPY_ON_HOST,       /* c's copy of y recorded on host, not on c's split's backend */
    COPY_UNDECLARED,    /* y left out of the inputs c's split declares */
    COPY_NOT_LEAF,      /* pipeline: c's copy of y taken out of the graph copy's leafs */
    COPY_NO_DEPENDENCY, /* pipeline: the dependency view of y before c's split gone */
};

static bool run_copies_case(enum tg_fault alloc_fault, enum copy_fault fault, bool pipeline,
                            struct tg_oracle_sched_report *rep);

static bool run_pipeline_case(enum tg_fault alloc_fault, bool steal, struct tg_oracle_sched_report *rep) {
    return run_copies_case(alloc_fault, steal ? COPY_STEAL : COPY_OWN, true, rep);
}

static bool run_copies_case(enum tg_fault alloc_fault, enum copy_fault fault, bool pipeline,
                            struct tg_oracle_sched_report *rep) {
    struct world wd;
    bool ok = world_init(&wd, false);
    CHECK(ok);
    tg_sched *s = ok ? tg_sched_new(wd.backends, NULL, 2, 512, pipeline, false) : NULL;
    CHECK(s != NULL);
    if (!s) {
        world_free(&wd);
        return false;
    }
    struct tg_tensor *y = tg_new_tensor_2d(wd.ctx, TG_TYPE_F32, 5, 3);
    tg_set_name(y, "y");
    tg_set_input(y);
    struct tg_tensor *a2 = tg_add(wd.ctx, wd.a, y);
    tg_set_name(a2, "a2");
    struct tg_tensor *b = tg_scale(wd.ctx, a2, 2.0f);
    tg_set_name(b, "b2");
    struct tg_tensor *c = tg_add(wd.ctx, b, y);
    tg_set_name(c, "c2");
    struct tg_tensor *c3 = tg_mul(wd.ctx, c, y);
    tg_set_name(c3, "c3");
    tg_set_output(c3);
    struct tg_graph *g = tg_graph_new(64);
    CHECK_OK(tg_graph_build_forward_expand(g, c3));
    tg_gallocr_set_fault(tg_sched_get_gallocr(s), alloc_fault);
    tg_sched_set_tensor_backend(s, a2, &wd.dev.backend);
    tg_sched_set_tensor_backend(s, c, &wd.dev.backend);
    tg_sched_set_tensor_backend(s, c3, &wd.dev.backend);
    struct tg_oracle_snapshot snap;
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    enum tg_status st = tg_sched_alloc_graph(s, g);
    CHECK_OK(st);
    CHECK(tg_sched_get_n_copies(s) == (pipeline ? TG_SCHED_MAX_COPIES : 1));
    bool ran = false;
    if (st == TG_OK) {
        struct tg_tensor *first_copy = a2->src[1], *own_copy = c->src[1];
        CHECK(tg_sched_get_copy_source(s, first_copy) == y && tg_sched_get_copy_source(s, own_copy) == y);
        CHECK(first_copy != own_copy && c3->src[1] == own_copy);
        if (fault == COPY_STEAL) c->src[1] = first_copy; /* the scheduler puts its redirect back when freed */
        if (fault == COPY_SECOND_INDEX) {
            /* a pipeline copy of y that no node reads: another index of either split's copies */
            struct tg_graph *gc = tg_sched_get_graph_copy(s);
            struct tg_tensor *other = NULL;
            for (int i = 0; gc && i < gc->n_leafs && !other; i++) {
                struct tg_tensor *l = gc->leafs[i];
                if (l != first_copy && l != own_copy && tg_sched_get_copy_source(s, l) == y) other = l;
            }
            CHECK(other != NULL);
            if (other) c3->src[1] = other;
        }
        struct tg_graph *gc = tg_sched_get_graph_copy(s);
        int c_split = -1;
        for (int k = 0; k < tg_sched_get_n_splits(s); k++) {
            struct tg_sched_split_info info;
            CHECK_OK(tg_sched_get_split_info(s, k, &info));
            for (int i = info.i_start; i < info.i_end; i++)
                if (gc->nodes[i] == c) c_split = k;
        }
        CHECK(c_split >= 0);
        if (fault == COPY_ON_HOST) CHECK_OK(sched_rec_set(s, own_copy, 1, TG_REASON_SPLIT_COPY));
        struct sched_split *sp = c_split >= 0 ? &s->splits[c_split] : NULL;
        int y_at = -1;
        for (int k = 0; sp && k < sp->n_inputs; k++)
            if (sp->inputs[k] == y) y_at = k;
        CHECK(y_at >= 0);
        if (fault == COPY_UNDECLARED && y_at >= 0) sp->inputs[y_at] = wd.x; /* restored below */
        int leaf_at = -1;
        for (int i = 0; i < gc->n_leafs; i++)
            if (gc->leafs[i] == own_copy) leaf_at = i;
        CHECK(!pipeline || leaf_at >= 0);
        if (fault == COPY_NOT_LEAF && leaf_at >= 0) { /* the last leaf takes its place; restored below */
            gc->leafs[leaf_at] = gc->leafs[gc->n_leafs - 1];
            gc->n_leafs--;
        }
        struct tg_tensor *dep = NULL;
        for (int i = 0; sp && i < sp->c_start && i < gc->n_nodes; i++) {
            struct tg_tensor *t = gc->nodes[i];
            if (t->op == TG_OP_NONE && t->view_src && t->src[0] == y) dep = t; /* the last before the split */
        }
        CHECK(!pipeline || dep != NULL);
        if (fault == COPY_NO_DEPENDENCY && dep) dep->src[0] = wd.x; /* restored below */
        ran = tg_oracle_sched_check(s, &snap, NULL, NULL, 0, rep) == TG_OK;
        CHECK_MSG(ran, "fault %d: %s", (int)fault, tg_last_error());
        if (fault == COPY_UNDECLARED && y_at >= 0) sp->inputs[y_at] = y;
        if (fault == COPY_NOT_LEAF && leaf_at >= 0) {
            gc->leafs[gc->n_leafs++] = gc->leafs[leaf_at];
            gc->leafs[leaf_at] = own_copy;
        }
        if (fault == COPY_NO_DEPENDENCY && dep) dep->src[0] = y;
    }
    tg_oracle_snapshot_free(&snap);
    tg_sched_free(s);
    tg_graph_free(g);
    world_free(&wd);
    return ran;
}

/* Ops that compute nothing run anywhere, whatever a backend answers for
 * them: dev refusing views still holds the view of its weights. */
static void test_views_need_no_support(void) {
    struct world wd;
    bool ok = world_init(&wd, false);
    CHECK(ok);
    wd.dev.refuses_views = true;
    tg_sched *s = ok ? tg_sched_new(wd.backends, NULL, 2, 512, false, false) : NULL;
    CHECK(s != NULL);
    if (s) {
        struct tg_tensor *w_flat = wd.d->src[0];
        CHECK_OK(tg_sched_alloc_graph(s, wd.graph));
        CHECK_MSG(tg_sched_get_tensor_backend_id(s, w_flat) == 0, "w_flat on backend %d",
                  tg_sched_get_tensor_backend_id(s, w_flat));
        tg_sched_free(s);
    }
    world_free(&wd);
}

static void expect_only(const char *what, const struct tg_oracle_sched_report *rep, enum tg_oracle_sched_rule rule) {
    int hits = tg_oracle_sched_report_count(rep, rule);
    if (hits == 0 || hits != rep->n) {
        tg_logf("case %s: %d violations, %d of rule %s\n", what, rep->n, hits, tg_oracle_sched_rule_name(rule));
        tg_oracle_sched_report_print(rep, 10);
    }
    CHECK(hits > 0);
    CHECK(hits == rep->n);
}

int main(void) {
    struct tg_oracle_sched_report rep;
    int n_splits = 0;

    /* clean schedules: no violation, and the checker looked at the nodes */
    for (int wide = 0; wide < 2; wide++) {
        if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_NONE, wide, INJECT_NONE, &rep, &n_splits)) {
            if (rep.n) tg_oracle_sched_report_print(&rep, 10);
            CHECK(rep.n == 0);
            CHECK(rep.n_checked_nodes >= (wide ? 45 : 5));
            CHECK(n_splits >= (wide ? 4 : 3)); /* dev, host, dev (..., and the limit cut) */
            tg_oracle_sched_report_free(&rep);
        }
    }

    if (run_case(TG_SCHED_FAULT_SKIP_COPY, TG_FAULT_NONE, false, INJECT_NONE, &rep, &n_splits)) {
        expect_only("skip-copy", &rep, TG_OSCHED_MISSING_COPY);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_case(TG_SCHED_FAULT_IGNORE_PIN, TG_FAULT_NONE, false, INJECT_NONE, &rep, &n_splits)) {
        expect_only("ignore-pin", &rep, TG_OSCHED_PIN_IGNORED);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_case(TG_SCHED_FAULT_IGNORE_SUPPORT, TG_FAULT_NONE, false, INJECT_NONE, &rep, &n_splits)) {
        expect_only("ignore-support", &rep, TG_OSCHED_UNSUPPORTED);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_case(TG_SCHED_FAULT_NO_INPUT_LIMIT, TG_FAULT_NONE, true, INJECT_NONE, &rep, &n_splits)) {
        expect_only("no-input-limit", &rep, TG_OSCHED_INPUT_LIMIT);
        tg_oracle_sched_report_free(&rep);
    }
    /* TG_SCHED_FAULT_MOVE_PREALLOCATED leaves views of pre-allocated tensors to
     * pass 4, which still puts them with their root, so it cannot show this
     * checker; a re-bind after scheduling does. */
    if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_NONE, false, INJECT_REBIND_WEIGHTS, &rep, &n_splits)) {
        /* the allocator's external-moved checker sees it too */
        CHECK(tg_oracle_sched_report_count(&rep, TG_OSCHED_PREALLOC_MOVED) == 1);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_case(TG_SCHED_FAULT_MOVE_PREALLOCATED, TG_FAULT_NONE, false, INJECT_NONE, &rep, &n_splits)) {
        CHECK(tg_oracle_sched_report_count(&rep, TG_OSCHED_ALLOC) == 0);
        tg_oracle_sched_report_free(&rep);
    }
    /* the same address through another buffer object is a re-bind too (the
     * allocator's checker sees it as well) */
    if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_NONE, false, INJECT_REBIND_ALIAS, &rep, &n_splits)) {
        CHECK(tg_oracle_sched_report_count(&rep, TG_OSCHED_PREALLOC_MOVED) == 1);
        tg_oracle_sched_report_free(&rep);
    }
    /* weights on a backend that cannot use their buffer type */
    if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_NONE, false, INJECT_WEIGHTS_ON_HOST, &rep, &n_splits)) {
        CHECK(tg_oracle_sched_report_count(&rep, TG_OSCHED_PREALLOC_MOVED) >= 1);
        tg_oracle_sched_report_free(&rep);
    }
    /* a node computed in a split of another backend than its own */
    if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_NONE, false, INJECT_REASSIGN_NODE, &rep, &n_splits)) {
        expect_with_alloc("node in another backend's split", &rep, TG_OSCHED_WRONG_SPLIT);
        tg_oracle_sched_report_free(&rep);
    }
    /* a node whose result lives in memory its split's backend cannot use */
    if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_NONE, false, INJECT_RESULT_ON_HOST, &rep, &n_splits)) {
        expect_with_alloc("result in memory the backend cannot use", &rep, TG_OSCHED_FOREIGN_RESULT);
        tg_oracle_sched_report_free(&rep);
    }
    /* the allocator's checkers run on the graph copy: an allocator fault shows */
    if (run_case(TG_SCHED_FAULT_NONE, TG_FAULT_IGNORE_ALIGNMENT, false, INJECT_NONE, &rep, &n_splits)) {
        expect_only("alloc ignore-alignment", &rep, TG_OSCHED_ALLOC);
        tg_oracle_sched_report_free(&rep);
    }

    /* pipeline copies: the allocator's checkers run there too, over every
     * copy index, and a split must read its own copies */
    if (run_pipeline_case(TG_FAULT_NONE, false, &rep)) {
        if (rep.n) tg_oracle_sched_report_print(&rep, 10);
        CHECK(rep.n == 0);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_pipeline_case(TG_FAULT_IGNORE_ALIGNMENT, false, &rep)) {
        expect_only("pipeline alloc ignore-alignment", &rep, TG_OSCHED_ALLOC);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_pipeline_case(TG_FAULT_NONE, true, &rep)) {
        expect_only("pipeline copy of another split", &rep, TG_OSCHED_MISSING_COPY);
        tg_oracle_sched_report_free(&rep);
    }
    /* one copy per (source, split) without pipelining: the copy made before
     * an earlier split is not this split's, though it lies before it too */
    if (run_copies_case(TG_FAULT_NONE, COPY_OWN, false, &rep)) {
        if (rep.n) tg_oracle_sched_report_print(&rep, 10);
        CHECK(rep.n == 0);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_copies_case(TG_FAULT_NONE, COPY_STEAL, false, &rep)) {
        expect_with_alloc("copy of another split", &rep, TG_OSCHED_MISSING_COPY);
        tg_oracle_sched_report_free(&rep);
    }
    /* one copy per (source, split) with pipelining: two copy indices of y read in one split */
    if (run_copies_case(TG_FAULT_NONE, COPY_SECOND_INDEX, true, &rep)) {
        expect_with_alloc("two copies of one source in a split", &rep, TG_OSCHED_MISSING_COPY);
        tg_oracle_sched_report_free(&rep);
    }
    /* a copy the split reads must be on its backend, of an input it
     * declares, and (pipelined) a leaf with its dependency before the split */
    for (int pipeline = 0; pipeline < 2; pipeline++) {
        if (run_copies_case(TG_FAULT_NONE, COPY_ON_HOST, pipeline, &rep)) {
            expect_with_alloc("copy on another backend", &rep, TG_OSCHED_MISSING_COPY);
            tg_oracle_sched_report_free(&rep);
        }
        if (run_copies_case(TG_FAULT_NONE, COPY_UNDECLARED, pipeline, &rep)) {
            expect_with_alloc("copy of an undeclared input", &rep, TG_OSCHED_MISSING_COPY);
            tg_oracle_sched_report_free(&rep);
        }
    }
    if (run_copies_case(TG_FAULT_NONE, COPY_NOT_LEAF, true, &rep)) {
        expect_with_alloc("pipeline copy not a leaf", &rep, TG_OSCHED_MISSING_COPY);
        tg_oracle_sched_report_free(&rep);
    }
    if (run_copies_case(TG_FAULT_NONE, COPY_NO_DEPENDENCY, true, &rep)) {
        expect_with_alloc("pipeline copy without its dependency", &rep, TG_OSCHED_MISSING_COPY);
        tg_oracle_sched_report_free(&rep);
    }

    test_views_need_no_support();

    /* names round-trip, unknown names are rejected */
    for (int f = 0; f < TG_SCHED_FAULT_COUNT; f++) {
        CHECK((int)tg_sched_fault_from_name(tg_sched_fault_name((enum tg_sched_fault)f)) == f);
    }
    CHECK(tg_sched_fault_from_name("no-such-fault") == TG_SCHED_FAULT_COUNT);
    CHECK(strcmp(tg_oracle_sched_rule_name(TG_OSCHED_MISSING_COPY), "missing-copy") == 0);
    return tg_test_finish();
}

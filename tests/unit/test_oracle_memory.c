/* The oracle judges memory, not buffer objects: a plan's tensor may not sit
 * on a pre-allocated tensor (a weight read later), two buffer objects over
 * the same bytes do not hide an overlap, and a tensor is judged by the
 * buffer type its buffer id names (alignment, and that its buffer is of
 * that type), not by whatever buffer it landed in. */
#include "tg-cpu.h"
#include "tg-oracle.h"
#include "tg-sim.h"
#include "tg_test.h"

static struct tg_tensor *named(struct tg_tensor *t, const char *name) {
    tg_set_name(t, name);
    return t;
}

static void place(struct tg_tensor *t, tg_buffer *b, size_t offset) {
    CHECK_OK(tg_tensor_bind(t, b, (char *)tg_buffer_get_base(b) + offset));
}

static bool message_has(const struct tg_oracle_report *rep, enum tg_oracle_rule rule, const char *a, const char *b) {
    for (int i = 0; i < rep->n; i++) {
        const char *m = rep->items[i].message;
        if (rep->items[i].rule == rule && strstr(m, a) && (!b || strstr(m, b))) return true;
    }
    return false;
}

static void check(const struct tg_graph *g, const struct tg_oracle_liveness *lv, const struct tg_oracle_snapshot *snap,
                  tg_buffer_type **bufts, struct tg_oracle_report *rep) {
    tg_oracle_report_free(rep);
    CHECK_OK(tg_oracle_check(g, lv, snap, bufts, 1, rep));
}

/* S = scale(x), N = add(S, w), M = mul(N, w), O = scale(M): the weight w is
 * read at steps 1 and 2. */
static void test_owned_over_external(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    tg_buffer_type *bufts[1] = {bt};
    struct tg_context *wctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *w = named(tg_new_tensor_1d(wctx, TG_TYPE_F32, 16), "w");
    enum tg_status st;
    tg_buffer *wb = tg_alloc_ctx_tensors(wctx, bt, &st);
    CHECK_OK(st);
    tg_buffer_set_usage(wb, TG_BUFFER_USAGE_WEIGHTS);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    struct tg_tensor *x = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "x");
    struct tg_tensor *s = named(tg_scale(ctx, x, 2.0f), "S");
    struct tg_tensor *n = named(tg_add(ctx, s, w), "N");
    struct tg_tensor *m = named(tg_mul(ctx, n, w), "M");
    struct tg_tensor *o = named(tg_scale(ctx, m, 3.0f), "O");
    tg_set_output(o);
    CHECK_OK(tg_graph_build_forward_expand(g, o));
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    tg_buffer *b = tg_buft_alloc_buffer(bt, 4096);
    place(x, b, 0);
    place(s, b, 64);
    place(n, b, 128);
    place(m, b, 192);
    place(o, b, 256);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 0);

    /* S written over the weight (in the weights buffer, of the id's type) */
    CHECK_OK(tg_tensor_bind(s, wb, w->data));
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_LIVE_OVERLAP, "'S'", "'w' (pre-allocated)"));

    /* O after w's last read: still the weight the next run reads */
    place(s, b, 64);
    place(o, wb, 0);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_LIVE_OVERLAP, "'O'", "'w'"));

    /* S in a buffer of another type than its id's (CPU): flagged, though its
     * offset suits that buffer */
    place(o, b, 256);
    tg_buffer *b2 = tg_buft_alloc_buffer(tg_cpu_buffer_type_aligned(4096), 8192);
    place(s, b2, 4096);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_WRONG_BUFFER_TYPE, "'S'", "CPU_align4096"));

    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(b2);
    tg_buffer_free(b);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_buffer_free(wb);
    tg_context_free(wctx);
}

/* N = add(x, w), x and w leafs live together at step 0. */
static void test_alias_and_alignment_by_id(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    tg_buffer_type *bufts[1] = {bt};
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    struct tg_tensor *x = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "x");
    struct tg_tensor *w = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "w");
    struct tg_tensor *n = named(tg_add(ctx, x, w), "N");
    tg_set_output(n);
    CHECK_OK(tg_graph_build_forward_expand(g, n));
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    tg_buffer *b = tg_buft_alloc_buffer(bt, 4096);
    tg_buffer *alias = tg_cpu_buffer_from_ptr(tg_buffer_get_base(b), 4096); /* the same bytes, another object */
    place(x, b, 0);
    place(w, alias, 64);
    place(n, b, 128);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 0); /* another object, other bytes: legal */
    place(w, alias, 0);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_LIVE_OVERLAP, "'x'", "'w'") &&
          message_has(&rep, TG_RULE_LIVE_OVERLAP, "two buffer objects", NULL));

    /* x at offset 16 of a buffer aligned to 16 whose type is not x's id's
     * (CPU, 64): misaligned by its id's type, and in the wrong type */
    tg_buffer *b16 = tg_buft_alloc_buffer(tg_cpu_buffer_type_aligned(16), 4096);
    place(w, b, 64);
    place(x, b16, 16);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 2 && message_has(&rep, TG_RULE_MISALIGNED, "'x'", "alignment 64") &&
          message_has(&rep, TG_RULE_WRONG_BUFFER_TYPE, "'x'", "CPU_align16"));

    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(b16);
    tg_buffer_free(alias);
    tg_buffer_free(b);
    tg_graph_free(g);
    tg_context_free(ctx);
}

static tg_backend *sim_device(const char *name, size_t alignment, size_t alloc_pad) {
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = name;
    p.alignment = alignment;
    p.alloc_pad = alloc_pad;
    return tg_backend_sim_new(&p);
}

/* N = add(x, w) on a device: a tensor is judged by its id's buffer type's
 * name too (two devices' types alike in every rule are still two memories),
 * and it holds the bytes that type asks for it, padding included. */
static void test_judged_by_id_type(void) {
    tg_backend *gpu0 = sim_device("gpu0", 32, 0), *gpu1 = sim_device("gpu1", 32, 0);
    tg_backend *padded = sim_device("padded", 32, 32);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    struct tg_tensor *x = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "x");
    struct tg_tensor *w = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "w");
    struct tg_tensor *n = named(tg_add(ctx, x, w), "N");
    tg_set_output(n);
    CHECK_OK(tg_graph_build_forward_expand(g, n));
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));

    tg_buffer_type *bufts[1] = {tg_backend_get_default_buffer_type(gpu0)};
    tg_buffer *b0 = tg_buft_alloc_buffer(bufts[0], 4096), *b1 = tg_buft_alloc_buffer(tg_sim_buffer_type(gpu1), 4096);
    place(x, b0, 0);
    place(w, b0, 64);
    place(n, b0, 128);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 0);
    place(x, b1, 0); /* gpu1's memory, alike in alignment, size and host-ness */
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_WRONG_BUFFER_TYPE, "'x'", "gpu1"));

    /* padded asks 32 bytes more per tensor: x holds [0, 96), so w at 64 overlaps it */
    bufts[0] = tg_sim_buffer_type(padded);
    tg_buffer *bp = tg_buft_alloc_buffer(bufts[0], 4096);
    place(x, bp, 0);
    place(w, bp, 96);
    place(n, bp, 192);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 0);
    place(w, bp, 64);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_LIVE_OVERLAP, "'x' [0, 96)", "'w'"));

    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(bp);
    tg_buffer_free(b1);
    tg_buffer_free(b0);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_backend_free(padded);
    tg_backend_free(gpu1);
    tg_backend_free(gpu0);
}

/* V = view of S read by O: a view must be bound through its root's buffer
 * object, not another one over the same bytes (reads and writes go through
 * the buffer's functions), and a view with an address but no buffer while its
 * root has one is unbound. */
static void test_view_bound_through_root(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    tg_buffer_type *bufts[1] = {bt};
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    struct tg_tensor *x = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "x");
    struct tg_tensor *s = named(tg_scale(ctx, x, 2.0f), "S");
    struct tg_tensor *v = named(tg_view_1d(ctx, s, 8, 4 * sizeof(float)), "V");
    struct tg_tensor *o = named(tg_scale(ctx, v, 3.0f), "O");
    tg_set_output(o);
    CHECK_OK(tg_graph_build_forward_expand(g, o));
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    tg_buffer *b = tg_buft_alloc_buffer(bt, 4096);
    tg_buffer *alias = tg_cpu_buffer_from_ptr(tg_buffer_get_base(b), 4096);
    place(x, b, 0);
    place(s, b, 64);
    place(o, b, 128);
    CHECK_OK(tg_tensor_view_bind(v));
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 0);
    v->buffer = alias; /* the right address, through another buffer object */
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_VIEW_OUTSIDE_ROOT, "'V'", "not bound at its offset"));
    v->buffer = NULL;
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_UNBOUND, "'V'", "no memory"));
    v->buffer = b;

    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(alias);
    tg_buffer_free(b);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* S = scale(x), T = scale(S), P = scale(T) with P bound by the caller before
 * planning: P's memory is the caller's at every step, not only from P's own
 * step on, so x (dead after step 0) may not sit there either. */
static void test_preallocated_node_held_throughout(void) {
    tg_buffer_type *bt = tg_cpu_buffer_type();
    tg_buffer_type *bufts[1] = {bt};
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(64);
    struct tg_tensor *x = named(tg_new_tensor_1d(ctx, TG_TYPE_F32, 16), "x");
    struct tg_tensor *s = named(tg_scale(ctx, x, 2.0f), "S");
    struct tg_tensor *t = named(tg_scale(ctx, s, 2.0f), "T");
    struct tg_tensor *p = named(tg_scale(ctx, t, 2.0f), "P");
    tg_set_output(p);
    CHECK_OK(tg_graph_build_forward_expand(g, p));
    tg_buffer *user = tg_buft_alloc_buffer(bt, 4096);
    place(p, user, 0); /* before the snapshot: pre-allocated */
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    tg_buffer *b = tg_buft_alloc_buffer(bt, 4096);
    place(x, b, 0);
    place(s, b, 64);
    place(t, b, 128);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 0);
    place(x, user, 0);
    check(g, &lv, &snap, bufts, &rep);
    CHECK(rep.n == 1 && message_has(&rep, TG_RULE_LIVE_OVERLAP, "'x'", "'P' (pre-allocated)"));

    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(b);
    tg_buffer_free(user);
    tg_graph_free(g);
    tg_context_free(ctx);
}

int main(void) {
    test_owned_over_external();
    test_alias_and_alignment_by_id();
    test_judged_by_id_type();
    test_view_bound_through_root();
    test_preallocated_node_held_throughout();
    return tg_test_finish();
}

/* The oracle judges memory, not buffer objects: a plan's tensor may not sit
 * on a pre-allocated tensor (a weight read later), two buffer objects over
 * the same bytes do not hide an overlap, and a tensor is judged by the
 * buffer type its buffer id names (alignment, and that its buffer is of
 * that type), not by whatever buffer it landed in. */
#include "tg-cpu.h"
#include "tg-oracle.h"
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

int main(void) {
    test_owned_over_external();
    test_alias_and_alignment_by_id();
    return tg_test_finish();
}

/* Graph allocator: hand-derived ggml offsets, liveness and in-place rules,
 * replay versus re-plan, and one regression test per rule of docs/allocator.md. */
#include "test_alloc_buft.h"
#include "tg-impl.h" /* tg_graph_lists_rewritten */
#include "tg_test.h"

static struct tg_graph *graph_of(struct tg_tensor *out) {
    struct tg_graph *g = tg_graph_new(2048);
    CHECK_OK(tg_graph_build_forward_expand(g, out));
    return g;
}

/* Seed 002: a * b with 1-element inputs, alignment 32.  Leafs first: a at 0,
 * b at 32; the product is a's last consumer with a's layout, so it takes a. */
static void test_seed002_offsets(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *a = test_f32(ctx, "a", 1, true);
    struct tg_tensor *b = test_f32(ctx, "b", 1, true);
    struct tg_tensor *c = test_named(tg_mul(ctx, a, b), "c");
    struct tg_graph *g = graph_of(c);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml offsets */
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(test_offset(a) == 0 && test_offset(b) == 32 && test_offset(c) == 0);
    CHECK(tg_gallocr_get_buffer_size(ga, 0) == 64);
    struct tg_plan_report r;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &r));
    CHECK(r.peak == 64 && r.lower_bound == 64 && r.n_chunks == 1 && r.n_tensors == 3);
    CHECK(tg_gallocr_get_policy(ga) == TG_PLAN_GGML);
    tg_gallocr_set_policy(ga, TG_PLAN_BEST);
    CHECK(tg_gallocr_get_policy(ga) == TG_PLAN_BEST);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* ggml probe4 / llama.cpp #28448: same counts and sizes, different edges. */
static void build_probe4(struct tg_context *ctx, struct tg_tensor **x, struct tg_tensor **y, struct tg_graph **g1,
                         struct tg_graph **g2, struct tg_tensor **n0, struct tg_tensor **n1) {
    *x = test_f32(ctx, "x", 16, true);
    *y = test_f32(ctx, "y", 16, true);
    struct tg_tensor *c0 = tg_add(ctx, *x, *y);
    struct tg_tensor *c1 = tg_add(ctx, c0, *y);
    *g1 = graph_of(tg_add(ctx, c1, *y));
    *n0 = test_named(tg_add(ctx, *x, *y), "n0");
    *n1 = test_named(tg_add(ctx, *x, *y), "n1");
    *g2 = graph_of(tg_add(ctx, *n0, *n1));
}

static void test_edges_change_replans(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x, *y, *n0, *n1;
    struct tg_graph *g1, *g2;
    build_probe4(ctx, &x, &y, &g1, &g2, &n0, &n1);
    CHECK(g1->n_nodes == g2->n_nodes && g1->n_leafs == g2->n_leafs);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml offsets */
    CHECK_OK(tg_gallocr_alloc_graph(ga, g1));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g2));
    /* n0 is live with x, y and n1; n1 may take x in place */
    CHECK(!test_overlap(n0, x) && !test_overlap(n0, y) && !test_overlap(n0, n1) && !test_overlap(x, y));
    CHECK(test_offset(x) == 0 && test_offset(y) == 64 && test_offset(n0) == 128 && test_offset(n1) == 0);
    tg_gallocr_free(ga);
    tg_graph_free(g1);
    tg_graph_free(g2);
    tg_context_free(ctx);
}

/* H1: a size-only reserve allocates nothing, so alloc_graph must refuse. */
static void test_size_only_reserve(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_graph *g = graph_of(tg_sqr(ctx, tg_cont(ctx, x)));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml sizes */
    size_t size = 0;
    CHECK_OK(tg_gallocr_reserve_n_size(ga, g, NULL, NULL, &size));
    CHECK(size == 128 && tb.n_allocs == 0 && tg_gallocr_get_buffer_size(ga, 0) == 0);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_NEEDS_RESERVE);
    CHECK_ERR_HAS("tg_gallocr_reserve");
    CHECK(x->data == NULL && x->buffer == NULL);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK(tg_gallocr_get_buffer_size(ga, 0) == size);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(x->buffer != NULL);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* H2: a failed buffer allocation is returned, leaves no half state, and the
 * allocator recovers once memory is there. */
static void test_failed_allocation(void) {
    struct test_buft ta, tb2;
    test_buft_init(&ta, "host-a", 32, 0);
    test_buft_init(&tb2, "host-b", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_graph *g = graph_of(tg_sqr(ctx, tg_cont(ctx, x)));

    tg_gallocr *ga = tg_gallocr_new(&ta.buft);

    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml sizes */
    ta.fail_allocs = 1;
    CHECK_STATUS(tg_gallocr_reserve(ga, g), TG_ERR_ALLOC);
    CHECK_ERR_HAS("failure on demand");
    CHECK(x->buffer == NULL);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g)); /* one buffer: re-plans and allocates again */
    CHECK(x->buffer != NULL && tg_gallocr_get_buffer_size(ga, 0) == 128);
    tg_gallocr_free(ga);

    struct tg_context *ctx2 = test_ctx();
    struct tg_tensor *x2 = test_f32(ctx2, "x2", 16, true);
    struct tg_graph *g2 = graph_of(tg_sqr(ctx2, tg_cont(ctx2, x2)));
    tg_buffer_type *two[2] = {&ta.buft, &tb2.buft};
    ga = tg_gallocr_new_n(two, 2);
    int node_ids[2] = {1, 1}, leaf_ids[1] = {0};
    tb2.fail_allocs = 1;
    CHECK_STATUS(tg_gallocr_reserve_n(ga, g2, node_ids, leaf_ids), TG_ERR_ALLOC);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g2), TG_ERR_NEEDS_RESERVE); /* never binds into nothing */
    CHECK(x2->buffer == NULL);
    CHECK_OK(tg_gallocr_reserve_n(ga, g2, node_ids, leaf_ids));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g2));
    CHECK(x2->buffer && x2->buffer->buft == &ta.buft && g2->nodes[1]->buffer->buft == &tb2.buft);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_graph_free(g2);
    tg_context_free(ctx);
    tg_context_free(ctx2);
}

/* H6: the node asks for buffer 1; its source in buffer 0 is not reused. */
static void test_inplace_other_buffer_id(void) {
    struct test_buft ta, tb2;
    test_buft_init(&ta, "host-a", 32, 0);
    test_buft_init(&tb2, "host-b", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *s = test_named(tg_scale(ctx, x, 2.0f), "s");
    struct tg_graph *g = graph_of(s);
    tg_buffer_type *two[2] = {&ta.buft, &tb2.buft};
    tg_gallocr *ga = tg_gallocr_new_n(two, 2);
    int node_ids[1] = {1}, leaf_ids[1] = {0};
    CHECK_OK(tg_gallocr_reserve_n(ga, g, node_ids, leaf_ids));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(x->buffer->buft == &ta.buft && s->buffer->buft == &tb2.buft);
    /* the same graph in one buffer id does run in place */
    int same_ids[1] = {0};
    CHECK_OK(tg_gallocr_reserve_n(ga, g, same_ids, leaf_ids));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(s->data == x->data);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* H7: only the view carries the output flag; its root must survive. */
static void test_output_view_protects_root(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *a = test_named(tg_scale(ctx, x, 2.0f), "a");
    struct tg_tensor *v = test_named(tg_view_1d(ctx, a, 16, 0), "v");
    v->flags |= TG_FLAG_OUTPUT; /* raw flag on the view only */
    struct tg_tensor *w = test_named(tg_cont(ctx, v), "w");
    struct tg_tensor *e = test_named(tg_cont(ctx, w), "e");
    struct tg_graph *g = graph_of(e);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(v->data == a->data);
    CHECK(!test_overlap(e, a) && !test_overlap(w, a));
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* ggml#475: a live view of a blocks in-place reuse of a, and keeps a alive. */
static void test_live_view_blocks_inplace(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *in = test_f32(ctx, "in", 16, true);
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *y = test_f32(ctx, "y", 16, true);
    struct tg_tensor *a = test_named(tg_scale(ctx, in, 2.0f), "a");
    struct tg_tensor *b = test_named(tg_view_1d(ctx, a, 16, 0), "b");
    struct tg_tensor *c = test_named(tg_add(ctx, a, x), "c");
    struct tg_tensor *d = test_named(tg_mul(ctx, b, y), "d");
    struct tg_graph *g = tg_graph_new(64);
    CHECK_OK(tg_graph_build_forward_expand(g, b));
    CHECK_OK(tg_graph_build_forward_expand(g, c));
    CHECK_OK(tg_graph_build_forward_expand(g, d));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(a->data == in->data); /* a itself ran in place on its input */
    CHECK(b->data == a->data && !test_overlap(c, a) && !test_overlap(d, a));
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A view with op none (ggml_view_tensor's kind, listed as a leaf) is read
 * after its root's last direct consumer: the root must stay until that read
 * (corpus/upstream/alloc-none-view-read.tg). */
static void test_none_view_holds_root(void) {
    for (int policy = TG_PLAN_GGML; policy <= TG_PLAN_BEST; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "host32", 32, 0);
        struct tg_context *ctx = test_ctx();
        struct tg_tensor *r = test_f32(ctx, "r", 64, false);
        struct tg_tensor *lv = test_named(tg_view_1d(ctx, r, 64, 0), "lv");
        lv->op = TG_OP_NONE; /* as ggml_view_tensor leaves it */
        lv->src[0] = NULL;
        struct tg_tensor *a = test_named(tg_sqr(ctx, r), "a");
        struct tg_tensor *b = test_named(tg_sqr(ctx, a), "b");
        struct tg_tensor *c = test_named(tg_add(ctx, lv, b), "c");
        struct tg_tensor *d = test_named(tg_cont(ctx, c), "d");
        tg_set_output(d);
        struct tg_graph *g = tg_graph_new(16);
        CHECK_OK(tg_graph_add_leaf(g, r));
        CHECK_OK(tg_graph_add_leaf(g, lv));
        CHECK_OK(tg_graph_add_node(g, a));
        CHECK_OK(tg_graph_add_node(g, b));
        CHECK_OK(tg_graph_add_node(g, c));
        CHECK_OK(tg_graph_add_node(g, d));
        tg_gallocr *ga = tg_gallocr_new(&tb.buft);
        tg_gallocr_set_policy(ga, (enum tg_plan_policy)policy);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        CHECK_MSG(lv->data == r->data && !test_overlap(a, r) && !test_overlap(b, r), "policy %d", policy);
        tg_gallocr_free(ga);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

/* A writer that is itself a view of r (set_rows) writes through lv, an
 * op-none view of r: lv's last read ends there, but w, which e reads
 * later, still lives in r's memory (ggml frees r there:
 * alloc-none-view-release), so u gets other memory. */
static void test_none_view_write_holds_root(void) {
    for (int policy = TG_PLAN_GGML; policy <= TG_PLAN_BEST; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "host32", 32, 0);
        struct tg_context *ctx = test_ctx();
        struct tg_tensor *x = test_f32(ctx, "x", 64, true);
        struct tg_tensor *row = test_f32(ctx, "row", 16, true);
        struct tg_tensor *idx = test_named(tg_new_tensor_1d(ctx, TG_TYPE_I32, 1), "idx");
        tg_set_input(idx);
        struct tg_tensor *r = test_named(tg_sqr(ctx, x), "r");
        struct tg_tensor *lv = test_named(tg_view_2d(ctx, r, 16, 4, 16 * sizeof(float), 0), "lv");
        lv->op = TG_OP_NONE; /* as ggml_view_tensor leaves it */
        lv->src[0] = NULL;
        struct tg_tensor *w = test_named(tg_set_rows(ctx, lv, tg_reshape_2d(ctx, row, 16, 1), idx), "w");
        struct tg_tensor *u = test_named(tg_cont(ctx, x), "u");
        struct tg_tensor *e = test_named(tg_add(ctx, tg_reshape_1d(ctx, w, 64), u), "e");
        tg_set_output(e);
        struct tg_graph *g = tg_graph_new(32);
        CHECK_OK(tg_graph_build_forward_expand(g, r)); /* r, then the rest: nothing reads r itself */
        CHECK_OK(tg_graph_build_forward_expand(g, e));
        tg_gallocr *ga = tg_gallocr_new(&tb.buft);
        tg_gallocr_set_policy(ga, (enum tg_plan_policy)policy);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        CHECK_MSG(w->data == r->data && !test_overlap(u, r), "policy %d", policy);
        tg_gallocr_free(ga);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

/* An input-flagged node is given memory before any node runs (its value is
 * set before the compute), so it shares no bytes with tensors freed before
 * its step: here x (after a) and a (after b). */
static void test_input_node_placed_first(void) {
    for (int policy = TG_PLAN_GGML; policy <= TG_PLAN_BEST; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "host32", 32, 0);
        struct tg_context *ctx = test_ctx();
        struct tg_tensor *x = test_f32(ctx, "x", 64, true);
        struct tg_tensor *a = test_named(tg_cont(ctx, x), "a");
        struct tg_tensor *b = test_named(tg_cont(ctx, a), "b");
        struct tg_tensor *c = test_named(tg_cont(ctx, b), "c");
        tg_set_input(c);
        tg_set_output(c);
        struct tg_graph *g = tg_graph_new(16);
        CHECK_OK(tg_graph_build_forward_expand(g, c));
        tg_gallocr *ga = tg_gallocr_new(&tb.buft);
        tg_gallocr_set_policy(ga, (enum tg_plan_policy)policy);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        CHECK_MSG(!test_overlap(c, x) && !test_overlap(c, a) && !test_overlap(c, b), "policy %d", policy);
        tg_gallocr_free(ga);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

/* An input-flagged node whose op can run in place (alloc-input-inplace in
 * docs/upstream.md): ggml gives it a leaf's memory while it still counts the
 * leaf's consumers, so the values set in the input overwrite the leaf before
 * `early` reads it.  Inputs are placed before anything runs, never in place. */
static void test_input_node_never_in_place(void) {
    for (int policy = TG_PLAN_GGML; policy <= TG_PLAN_BEST; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "host32", 32, 0);
        struct tg_context *ctx = test_ctx();
        struct tg_tensor *b = test_f32(ctx, "b", 64, false);
        struct tg_tensor *w = test_f32(ctx, "w", 64, false);
        struct tg_tensor *c1 = test_named(tg_sqr(ctx, b), "c1");
        struct tg_tensor *c2 = test_named(tg_cont(ctx, c1), "c2");
        struct tg_tensor *early = test_named(tg_sqr(ctx, w), "early");
        struct tg_tensor *inp = test_named(tg_scale(ctx, w, 0.5f), "inp");
        tg_set_input(inp);
        struct tg_tensor *sum = test_named(tg_add(ctx, early, inp), "sum");
        struct tg_tensor *out = test_named(tg_add(ctx, c2, sum), "out");
        tg_set_output(out);
        struct tg_graph *g = tg_graph_new(16);
        CHECK_OK(tg_graph_add_leaf(g, b));
        CHECK_OK(tg_graph_add_leaf(g, w));
        struct tg_tensor *order[] = {c1, c2, early, inp, sum, out};
        for (int i = 0; i < 6; i++) CHECK_OK(tg_graph_add_node(g, order[i]));
        tg_gallocr *ga = tg_gallocr_new(&tb.buft);
        tg_gallocr_set_policy(ga, (enum tg_plan_policy)policy);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        CHECK_MSG(!test_overlap(inp, w) && !test_overlap(inp, b) && !test_overlap(w, c1) && !test_overlap(w, c2),
                  "policy %d", policy);
        tg_gallocr_free(ga);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

/* A computed root read only through an op-none view stays to the end, as in
 * ggml (alloc_plan.c's has_readers): nothing after the read lands on it. */
static void test_none_view_only_read_keeps_root(void) {
    for (int policy = TG_PLAN_GGML; policy <= TG_PLAN_BEST; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "host32", 32, 0);
        struct tg_context *ctx = test_ctx();
        struct tg_tensor *x = test_f32(ctx, "x", 64, true);
        struct tg_tensor *r = test_named(tg_sqr(ctx, x), "r");
        struct tg_tensor *lv = test_named(tg_view_1d(ctx, r, 64, 0), "lv");
        lv->op = TG_OP_NONE; /* as ggml_view_tensor leaves it */
        lv->src[0] = NULL;
        struct tg_tensor *c = test_named(tg_sqr(ctx, lv), "c");
        struct tg_tensor *e = test_named(tg_cont(ctx, c), "e"); /* not in place: new memory */
        struct tg_tensor *f = test_named(tg_cont(ctx, e), "f");
        tg_set_output(f);
        struct tg_graph *g = tg_graph_new(16);
        CHECK_OK(tg_graph_add_leaf(g, x));
        CHECK_OK(tg_graph_add_leaf(g, lv));
        CHECK_OK(tg_graph_add_node(g, r));
        CHECK_OK(tg_graph_add_node(g, c));
        CHECK_OK(tg_graph_add_node(g, e));
        CHECK_OK(tg_graph_add_node(g, f));
        tg_gallocr *ga = tg_gallocr_new(&tb.buft);
        tg_gallocr_set_policy(ga, (enum tg_plan_policy)policy);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        CHECK_MSG(lv->data == r->data && !test_overlap(e, r) && !test_overlap(f, r), "policy %d", policy);
        tg_gallocr_free(ga);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

/* The buffer for: r = sqr(x) read by a = sqr(r), then by c = add(.., a)
 * directly or (through_view) through an op-none view of r; e, f and g after
 * c.  Either way r's bytes are free once c has read them. */
static size_t none_view_read_plan_size(enum tg_plan_policy policy, bool through_view) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 64, true);
    struct tg_tensor *r = test_named(tg_sqr(ctx, x), "r");
    struct tg_tensor *lv = test_named(tg_view_1d(ctx, r, 64, 0), "lv");
    lv->op = TG_OP_NONE; /* as ggml_view_tensor leaves it */
    lv->src[0] = NULL;
    struct tg_tensor *a = test_named(tg_sqr(ctx, r), "a");
    struct tg_tensor *c = test_named(tg_add(ctx, through_view ? lv : r, a), "c");
    struct tg_tensor *e = test_named(tg_add(ctx, c, c), "e");
    struct tg_tensor *f = test_named(tg_add(ctx, e, e), "f");
    struct tg_tensor *out = test_named(tg_add(ctx, f, f), "g");
    tg_set_output(out);
    struct tg_graph *g = tg_graph_new(16);
    CHECK_OK(tg_graph_add_leaf(g, x));
    CHECK_OK(tg_graph_add_node(g, r));
    CHECK_OK(tg_graph_add_node(g, a));
    if (through_view) CHECK_OK(tg_graph_add_leaf(g, lv));
    CHECK_OK(tg_graph_add_node(g, c));
    CHECK_OK(tg_graph_add_node(g, e));
    CHECK_OK(tg_graph_add_node(g, f));
    CHECK_OK(tg_graph_add_node(g, out));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, policy);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    const size_t size = tg_gallocr_get_buffer_size(ga, 0);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
    return size;
}

/* A root whose direct readers ran before its read through an op-none view
 * goes with that read, as it would with the read made directly (it used to
 * stay to the end: 768 bytes instead of 512). */
static void test_none_view_read_frees_root(void) {
    for (int policy = TG_PLAN_GGML; policy <= TG_PLAN_BEST; policy++) {
        const size_t direct = none_view_read_plan_size((enum tg_plan_policy)policy, false);
        const size_t viewed = none_view_read_plan_size((enum tg_plan_policy)policy, true);
        CHECK_MSG(viewed == direct && direct == 512, "policy %d: %zu bytes through the view, %zu directly", policy,
                  viewed, direct);
    }
}

/* More than 256 free blocks at once (ggml aborts "out of free blocks"). */
static void test_many_holes_graph(void) {
    enum { N = 600 };
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 8, true);
    tg_set_output(x); /* keeps x's block so the holes stay apart */
    struct tg_tensor *t[N], *c[N / 2];
    struct tg_graph *g = tg_graph_new(2048);
    for (int i = 0; i < N; i++) {
        t[i] = tg_cont(ctx, x);
        tg_format_name(t[i], "t%d", i);
        CHECK_OK(tg_graph_build_forward_expand(g, t[i]));
    }
    /* each even tensor dies into a concat twice its size: holes never merge or refill */
    for (int j = 0; j < N / 2; j++) {
        c[j] = tg_concat(ctx, t[2 * j], t[2 * j], 0);
        CHECK_OK(tg_graph_build_forward_expand(g, c[j]));
    }
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml peak */
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    struct tg_plan_report r;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &r));
    CHECK_MSG(r.peak == 32 + (size_t)N * 32 + (size_t)(N / 2) * 64, "peak %zu", r.peak);
    /* most live just after the last concat: x, t598, the odd t, every concat */
    CHECK_MSG(r.lower_bound == 32 + 301 * 32 + (size_t)(N / 2) * 64, "lower bound %zu", r.lower_bound);
    bool disjoint = true;
    for (int j = 0; j < N / 2; j++) {
        for (int i = 1; i < N; i += 2) disjoint = disjoint && !test_overlap(c[j], t[i]);
    }
    CHECK(disjoint);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Op-dependent alloc size: the in-place child is smaller than its parent, so
 * the parent's surplus tail goes back to the free list. */
static void test_parent_larger_than_child(void) {
    struct test_buft tb;
    test_buft_init(&tb, "padded", 32, 0);
    tb.padded_op = TG_OP_SCALE;
    tb.pad_bytes = 64;
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);       /* 64 bytes at 0 */
    struct tg_tensor *a = test_named(tg_scale(ctx, x, 2.0f), "a"); /* 128 bytes at 64 */
    struct tg_tensor *b = test_named(tg_sqr(ctx, a), "b");    /* 64 bytes in place at 64 */
    struct tg_tensor *c = test_named(tg_concat(ctx, b, b, 0), "c"); /* 128, from the returned tail */
    struct tg_graph *g = graph_of(c);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml offsets */
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(test_offset(x) == 0 && test_offset(a) == 64 && b->data == a->data && test_offset(c) == 128);
    CHECK(tg_gallocr_get_buffer_size(ga, 0) == 256); /* 320 if the tail were kept */
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* x -> a = 2x -> b = 3a -> c = a + b: a and b are live together at c. */
static enum tg_status plan_scales(struct test_buft *tb, int policy, bool *a_b_apart) {
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 64, true);
    struct tg_tensor *a = test_named(tg_scale(ctx, x, 2.0f), "a");
    struct tg_tensor *b = test_named(tg_scale(ctx, a, 3.0f), "b");
    struct tg_graph *g = graph_of(test_named(tg_add(ctx, a, b), "c"));
    CHECK(tg_buft_get_alloc_size(&tb->buft, a) >= tg_nbytes(a));
    tg_gallocr *ga = tg_gallocr_new(&tb->buft);
    tg_gallocr_set_policy(ga, policy ? TG_PLAN_BEST : TG_PLAN_GGML);
    const enum tg_status st = tg_gallocr_alloc_graph(ga, g);
    *a_b_apart = st == TG_OK && !test_overlap(a, b);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
    return st;
}

/* A buffer type whose answer is fewer bytes than the tensor (a padding that
 * wrapped around) still gets the tensor's own bytes: a and b do not share
 * memory.  A padding that takes a size past the address space is refused,
 * naming the tensor, instead of wrapping to a few bytes. */
static void test_alloc_size_wraps(void) {
    for (int policy = 0; policy < 2; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "wrapped", 32, 0);
        tb.padded_op = TG_OP_SCALE;
        tb.pad_bytes = (size_t)0 - 256; /* a scale result "needs" 256 bytes fewer: none */
        bool apart = false;
        CHECK_OK(plan_scales(&tb, policy, &apart));
        CHECK(apart);
        tb.pad_bytes = SIZE_MAX - 256 - 10; /* 256 bytes and this: SIZE_MAX - 10, past it once rounded to 32 */
        CHECK(plan_scales(&tb, policy, &apart) == TG_ERR_ALLOC);
        CHECK(strstr(tg_last_error(), "tensor 'a' needs more bytes than any buffer can hold") != NULL);
    }
}

/* External leafs and views of them keep their memory; nothing runs in place on them. */
static void test_external_tensors_untouched(void) {
    struct test_buft tb, wt;
    test_buft_init(&tb, "compute", 32, 0);
    test_buft_init(&wt, "weights", 32, 0);
    struct tg_context *wctx = test_ctx();
    struct tg_tensor *w = test_f32(wctx, "w", 16, false);
    enum tg_status st;
    tg_buffer *wbuf = tg_alloc_ctx_tensors(wctx, &wt.buft, &st);
    CHECK(wbuf && st == TG_OK);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *wv = test_named(tg_view_1d(ctx, w, 8, 32), "wv");
    void *w_data = w->data, *wv_data = wv->data;
    CHECK(wv_data == (char *)w_data + 32);
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *s = test_named(tg_scale(ctx, w, 3.0f), "s");
    struct tg_tensor *v2 = test_named(tg_scale(ctx, wv, 2.0f), "v2");
    struct tg_tensor *out = tg_add(ctx, tg_add(ctx, s, x), tg_concat(ctx, v2, v2, 0));
    struct tg_graph *g = graph_of(out);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(w->data == w_data && w->buffer == wbuf && wv->data == wv_data && wv->buffer == wbuf);
    CHECK(s->buffer != wbuf && v2->buffer != wbuf && x->buffer != wbuf);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g)); /* replay keeps them too */
    CHECK(w->data == w_data && wv->data == wv_data);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_buffer_free(wbuf);
    tg_context_free(wctx);
}

/* A window view of a tensor the plan does not own (a KV cache's), moved to
 * the next window each token, is bound at its new offset: it stayed at the
 * first, and every token read the first window.  Moved past its root, the
 * plan is refused, naming the view. */
static void test_external_view_moves(void) {
    struct test_buft tb, kt;
    test_buft_init(&tb, "compute", 32, 0);
    test_buft_init(&kt, "cache", 32, 0);
    struct tg_context *kctx = test_ctx();
    struct tg_tensor *kv = test_f32(kctx, "kv", 64, false);
    enum tg_status st;
    tg_buffer *kbuf = tg_alloc_ctx_tensors(kctx, &kt.buft, &st);
    CHECK(kbuf && st == TG_OK);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *win = test_named(tg_view_1d(ctx, kv, 16, 0), "win");
    struct tg_graph *g = graph_of(test_named(tg_scale(ctx, win, 2.0f), "y"));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    for (int token = 0; token < 4; token++) {
        win->view_offs = (size_t)token * 16 * sizeof(float);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g));
        CHECK(win->data == (char *)kv->data + win->view_offs && win->buffer == kbuf);
    }
    win->view_offs = 64 * sizeof(float); /* the window past the cache's end */
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("view 'win' of 'kv' at offset 256 with 64 bytes lies outside its 256 bytes");
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_buffer_free(kbuf);
    tg_context_free(kctx);
}

/* A view the graph reads without listing it is bound by no plan: refused
 * when its root is planned here (its memory moves) or when it is not at its
 * offset of its root; it crashed the CPU backend with no memory. */
static void test_unlisted_views(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *b = test_named(tg_scale(ctx, x, 2.0f), "b");
    struct tg_tensor *v = test_named(tg_view_1d(ctx, b, 8, 0), "v");
    struct tg_tensor *y = test_named(tg_scale(ctx, v, 3.0f), "y");
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, x));
    CHECK_OK(tg_graph_add_node(g, b));
    CHECK_OK(tg_graph_add_node(g, y)); /* v left out */
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("view 'v' of 'b' is read by the graph but not listed in it");
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Nodes written into the lists directly (tg_graph_lists_rewritten), one of
 * them twice: the allocator refuses the graph, naming the tensor, where it
 * planned the tensor twice (the second computation landing on memory given
 * to another tensor since). */
static void test_listed_twice(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *b = test_named(tg_sqr(ctx, x), "b");
    struct tg_tensor *c = test_named(tg_scale(ctx, b, 2.0f), "c");
    struct tg_tensor *z = test_named(tg_add(ctx, c, c), "z");
    struct tg_graph *g = graph_of(z); /* b, c, z */
    CHECK(g->n_nodes == 3);
    g->nodes[2] = b; /* b, c, b */
    g->nodes[g->n_nodes++] = z;
    tg_graph_lists_rewritten(g);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("tensor 'b' is listed twice in the graph");
    g->nodes[2] = x; /* a leaf listed as a node too */
    tg_graph_lists_rewritten(g);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("tensor 'x' is listed twice in the graph");
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A node listed before a source it reads computed with that source's
 * memory before it was written (a wrong result, no error): refused. */
static void test_source_listed_later(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *a = test_named(tg_scale(ctx, x, 2.0f), "a");
    struct tg_tensor *b = test_named(tg_add(ctx, a, x), "b");
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(g, x));
    CHECK_OK(tg_graph_add_node(g, b));
    CHECK_OK(tg_graph_add_node(g, a));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("node 'b' reads 'a', which the graph lists after it");
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* The same leaf is planned, then external, then planned again. */
static void test_external_toggle(void) {
    struct test_buft tb, ext;
    test_buft_init(&tb, "compute", 32, 0);
    test_buft_init(&ext, "external", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *y = test_named(tg_sqr(ctx, x), "y");
    struct tg_graph *g = graph_of(tg_cont(ctx, y));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    tg_buffer *mine = x->buffer;
    CHECK(mine && y->data == x->data); /* in place on the planned input */

    tg_buffer *own = tg_buft_alloc_buffer(&ext.buft, 64);
    CHECK_OK(tg_tensor_bind(x, own, tg_buffer_get_base(own)));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(x->buffer == own && x->data == tg_buffer_get_base(own) && y->buffer != own);

    x->data = NULL;
    x->buffer = NULL;
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(x->buffer != NULL && x->buffer != own && y->data == x->data);
    tg_gallocr_free(ga);
    tg_buffer_free(own);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Ids 0 and 1 share a buffer type, hence one address space and one buffer. */
static void test_shared_buffer_types(void) {
    struct test_buft ta, tb2;
    test_buft_init(&ta, "shared", 32, 0);
    test_buft_init(&tb2, "other", 64, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_tensor *a = test_named(tg_cont(ctx, x), "a");
    struct tg_tensor *b = test_named(tg_scale(ctx, a, 2.0f), "b");
    struct tg_tensor *c = test_named(tg_cont(ctx, b), "c");
    struct tg_graph *g = graph_of(c);
    tg_buffer_type *three[3] = {&ta.buft, &ta.buft, &tb2.buft};
    tg_gallocr *ga = tg_gallocr_new_n(three, 3);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml offsets */
    int node_ids[3] = {0, 1, 2}, leaf_ids[1] = {0};
    size_t sizes[3] = {9, 9, 9};
    CHECK_OK(tg_gallocr_reserve_n_size(ga, g, node_ids, leaf_ids, sizes));
    CHECK_MSG(sizes[0] == 128 && sizes[1] == 0 && sizes[2] == 64, "%zu %zu %zu", sizes[0], sizes[1], sizes[2]);
    CHECK_OK(tg_gallocr_reserve_n(ga, g, node_ids, leaf_ids));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(x->buffer == a->buffer && a->buffer == b->buffer && c->buffer->buft == &tb2.buft);
    CHECK(b->data != a->data && test_offset(b) == 0); /* no in-place across ids; b takes x's hole */
    CHECK(tg_gallocr_get_buffer_size(ga, 0) == 128 && tg_gallocr_get_buffer_size(ga, 1) == 0);
    struct tg_plan_report r0, r1;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &r0));
    CHECK_OK(tg_gallocr_get_report(ga, 1, &r1));
    CHECK(r0.peak == 128 && r0.n_tensors == 2 && r1.peak == 0 && r1.n_tensors == 1);
    CHECK(ta.n_allocs == 1);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* A max size splits memory into chunk buffers; an oversize tensor gets its own. */
static void test_chunks_and_oversize(void) {
    struct test_buft tb;
    test_buft_init(&tb, "small", 32, 256);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 32, true);    /* 128 */
    struct tg_tensor *a = tg_cont(ctx, x);                 /* 128 */
    struct tg_tensor *b = tg_cont(ctx, x);                 /* 128: chunk 1 */
    struct tg_tensor *big = tg_concat(ctx, tg_concat(ctx, a, b, 0), tg_concat(ctx, a, b, 0), 0); /* 512 */
    struct tg_graph *g = graph_of(big);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML); /* hand-derived ggml offsets */
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    bool within = true;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *t = g->nodes[i];
        within = within && (tg_nbytes(t) > 256 || tg_buffer_get_size(t->buffer) <= 256);
        within = within && test_offset(t) + tg_nbytes(t) <= tg_buffer_get_size(t->buffer);
    }
    CHECK(within);
    CHECK(big->buffer != a->buffer && big->buffer != b->buffer && test_offset(big) == 0);
    CHECK(tg_buffer_get_size(big->buffer) == 512);
    struct tg_plan_report r;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &r));
    CHECK_MSG(r.n_chunks >= 3 && r.peak == tg_gallocr_get_buffer_size(ga, 0), "%d chunks, peak %zu", r.n_chunks, r.peak);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

static void test_alignment_everywhere(void) {
    struct test_buft tb;
    test_buft_init(&tb, "align128", 128, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 3, true);
    struct tg_tensor *y = test_f32(ctx, "y", 5, true);
    struct tg_tensor *t = tg_concat(ctx, x, y, 0);
    t = tg_concat(ctx, tg_cont(ctx, t), tg_sqr(ctx, x), 0);
    t = tg_concat(ctx, t, tg_concat(ctx, y, t, 0), 0);
    struct tg_graph *g = graph_of(t);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    bool aligned = true;
    for (int i = 0; i < g->n_nodes; i++) aligned = aligned && test_offset(g->nodes[i]) % 128 == 0;
    for (int i = 0; i < g->n_leafs; i++) aligned = aligned && test_offset(g->leafs[i]) % 128 == 0;
    CHECK(aligned);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* Seed 000: one allocator serves a vision graph, then a language graph. */
static void test_seed000_two_graphs(void) {
    struct test_buft tb, own;
    test_buft_init(&tb, "compute", 32, 0);
    test_buft_init(&own, "own", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *img = test_f32(ctx, "img", 16, true);
    struct tg_tensor *emb = test_named(tg_scale(ctx, tg_sqr(ctx, img), 0.5f), "image_embeddings");
    tg_set_output(emb);
    struct tg_graph *vision = graph_of(emb);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, vision));
    float v[16] = {1, 2, 3, 4};
    CHECK_OK(tg_tensor_set(emb, v, 0, sizeof v)); /* stands in for the computed result */

    /* the language graph takes the embeddings as a leaf */
    struct tg_tensor *tok = test_f32(ctx, "tokens", 16, true);
    struct tg_tensor *h = test_named(tg_add(ctx, tok, emb), "h");
    struct tg_graph *lang = tg_graph_new(64);
    CHECK_OK(tg_graph_add_leaf(lang, tok));
    CHECK_OK(tg_graph_add_leaf(lang, emb));
    CHECK_OK(tg_graph_add_node(lang, h));
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, lang), TG_ERR_STALE);
    CHECK_ERR_HAS("image_embeddings");
    CHECK_ERR_HAS("copy it");
    float back[16] = {0};
    CHECK_OK(tg_tensor_get(emb, back, 0, sizeof back)); /* the refusal overwrote nothing */
    CHECK(back[3] == 4);

    /* the fix: copy into memory the caller owns, use the copy */
    struct tg_context *keep = test_ctx();
    struct tg_tensor *emb_copy = test_f32(keep, "emb_copy", 16, false);
    enum tg_status st;
    tg_buffer *kept = tg_alloc_ctx_tensors(keep, &own.buft, &st);
    CHECK_OK(tg_tensor_copy(emb, emb_copy));
    struct tg_tensor *h2 = tg_add(ctx, tok, emb_copy);
    struct tg_graph *lang2 = tg_graph_new(64);
    CHECK_OK(tg_graph_add_leaf(lang2, tok));
    CHECK_OK(tg_graph_add_leaf(lang2, emb_copy));
    CHECK_OK(tg_graph_add_node(lang2, h2));
    CHECK_OK(tg_gallocr_alloc_graph(ga, lang2));
    CHECK_STATUS(tg_tensor_get(emb, back, 0, sizeof back), TG_ERR_STALE);
    CHECK_ERR_HAS("image_embeddings");
    CHECK_STATUS(tg_tensor_set(img, v, 0, sizeof v), TG_ERR_STALE);
    CHECK_OK(tg_tensor_get(emb_copy, back, 0, sizeof back));
    CHECK(back[3] == 4);
    CHECK_OK(tg_tensor_set(tok, v, 0, sizeof v));

    /* the vision graph again: planned afresh, usable again */
    CHECK_OK(tg_gallocr_alloc_graph(ga, vision));
    CHECK_OK(tg_tensor_set(img, v, 0, sizeof v));
    tg_gallocr_free(ga);
    tg_graph_free(vision);
    tg_graph_free(lang);
    tg_graph_free(lang2);
    tg_buffer_free(kept);
    tg_context_free(keep);
    tg_context_free(ctx);
}

/* The same, through the stamped replay: a graph of the same shape whose leaf
 * is the last replayed graph's result.  The replay check learns that from the
 * leaf's stamp (not a hash of the last graph) and must still refuse. */
static void test_result_as_leaf_on_replay(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    /* leafs computed elsewhere (op scale), so the two graphs' signatures agree */
    struct tg_tensor *x = test_f32(ctx, "x", 16, false);
    struct tg_tensor *w = tg_scale(ctx, x, 1.0f);
    struct tg_tensor *y = tg_sqr(ctx, w);
    struct tg_tensor *z = test_named(tg_scale(ctx, y, 0.5f), "first_result");
    struct tg_graph *first = tg_graph_new(16);
    CHECK_OK(tg_graph_add_leaf(first, w));
    CHECK_OK(tg_graph_add_node(first, y));
    CHECK_OK(tg_graph_add_node(first, z));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    for (int i = 0; i < 3; i++) CHECK_OK(tg_gallocr_alloc_graph(ga, first)); /* planned, then replayed */
    void *z_data = z->data;
    struct tg_tensor *y2 = tg_sqr(ctx, z);
    struct tg_tensor *z2 = tg_scale(ctx, y2, 0.5f);
    struct tg_graph *second = tg_graph_new(16);
    CHECK_OK(tg_graph_add_leaf(second, z));
    CHECK_OK(tg_graph_add_node(second, y2));
    CHECK_OK(tg_graph_add_node(second, z2));
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, second), TG_ERR_STALE);
    CHECK_ERR_HAS("first_result");
    CHECK(z->data == z_data);
    CHECK_OK(tg_gallocr_alloc_graph(ga, first)); /* the first graph replays as before */
    tg_gallocr_free(ga);
    tg_graph_free(first);
    tg_graph_free(second);
    tg_context_free(ctx);
}

/* A bigger graph later grows the buffer: tensors of the old buffer are stale,
 * not dangling. */
static void test_growth_makes_old_tensors_stale(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_graph *small = graph_of(tg_sqr(ctx, x));
    struct tg_tensor *y = test_f32(ctx, "y", 1024, true);
    struct tg_graph *large = graph_of(tg_cont(ctx, tg_sqr(ctx, y)));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, small));
    CHECK_OK(tg_gallocr_alloc_graph(ga, large));
    CHECK(tb.n_allocs == 2);
    float v[4];
    CHECK_STATUS(tg_tensor_get(x, v, 0, sizeof v), TG_ERR_STALE);
    tg_gallocr_free(ga);
    tg_graph_free(small);
    tg_graph_free(large);
    tg_context_free(ctx);
}

static struct tg_graph *mlp_graph(struct tg_context *ctx, int64_t n, struct tg_tensor **x_out) {
    struct tg_tensor *x = test_f32(ctx, "x", n, true);
    struct tg_tensor *w = test_f32(ctx, "w", n, true);
    struct tg_tensor *h = tg_mul(ctx, tg_cont(ctx, x), w);
    struct tg_tensor *r = tg_add(ctx, tg_sqr(ctx, h), tg_sqrt(ctx, h));
    struct tg_tensor *o = tg_concat(ctx, r, tg_scale(ctx, r, 2.0f), 0);
    tg_set_output(o);
    if (x_out) *x_out = x;
    return graph_of(o);
}

static void offsets_of(const struct tg_graph *g, size_t *out) {
    for (int i = 0; i < g->n_nodes; i++) out[i] = g->nodes[i]->data ? test_offset(g->nodes[i]) : SIZE_MAX;
    for (int j = 0; j < g->n_leafs; j++) out[g->n_nodes + j] = test_offset(g->leafs[j]);
}

static void test_determinism_and_replay(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_graph *g1 = mlp_graph(ctx, 64, NULL);
    struct tg_graph *g2 = mlp_graph(ctx, 64, NULL);
    size_t o1[64], o2[64], o3[64];
    CHECK(g1->n_nodes + g1->n_leafs <= 64);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr *gb = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_alloc_graph(ga, g1));
    CHECK_OK(tg_gallocr_alloc_graph(gb, g2));
    offsets_of(g1, o1);
    offsets_of(g2, o2);
    CHECK(memcmp(o1, o2, sizeof(size_t) * (size_t)(g1->n_nodes + g1->n_leafs)) == 0);
    /* replay of the same graph: same addresses, no new buffer */
    int allocs = tb.n_allocs;
    CHECK_OK(tg_gallocr_alloc_graph(ga, g1));
    offsets_of(g1, o3);
    CHECK(memcmp(o1, o3, sizeof(size_t) * (size_t)(g1->n_nodes + g1->n_leafs)) == 0 && tb.n_allocs == allocs);
    tg_gallocr_free(ga);
    tg_gallocr_free(gb);
    tg_graph_free(g1);
    tg_graph_free(g2);
    tg_context_free(ctx);
}

/* The planning pass trusts a tensor's plan_hint only after checking that the
 * slot it names holds that tensor.  Out-of-range hints make every lookup a
 * hash lookup: the reference plan.  Hints of other tensors in the same table,
 * hints of 0 and hints another allocator's table left must give it too. */
static void scramble_hints(struct tg_graph *g, int how) {
    int n = g->n_nodes + g->n_leafs;
    uint64_t first = g->nodes[0]->private_.plan_hint;
    for (int u = 0; u < n; u++) {
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        struct tg_tensor *next = u + 1 < g->n_nodes ? g->nodes[u + 1] : u + 1 < n ? g->leafs[u + 1 - g->n_nodes] : NULL;
        if (how == 0) t->private_.plan_hint = next ? next->private_.plan_hint : first; /* a slot the table uses, for another tensor */
        if (how == 1) t->private_.plan_hint = UINT64_MAX - (uint64_t)u;      /* out of range */
        if (how == 2) t->private_.plan_hint = 0;
    }
}

static void plan_offsets(tg_gallocr *ga, struct tg_graph *g, size_t *out) {
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    offsets_of(g, out);
}

static void test_wrong_plan_hints(void) {
    for (int policy = 0; policy < 2; policy++) {
        struct test_buft tb;
        test_buft_init(&tb, "compute", 32, 0);
        struct tg_context *ctx = test_ctx();
        struct tg_graph *g = mlp_graph(ctx, 64, NULL);
        const size_t n_bytes = sizeof(size_t) * (size_t)(g->n_nodes + g->n_leafs);
        CHECK(g->n_nodes + g->n_leafs <= 64);
        tg_gallocr *gallocs[2] = {tg_gallocr_new(&tb.buft), tg_gallocr_new(&tb.buft)};
        for (int a = 0; a < 2; a++) {
            tg_gallocr *ga = gallocs[a];
            tg_gallocr_set_policy(ga, policy ? TG_PLAN_BEST : TG_PLAN_GGML);
            size_t first[64], want[64], got[64];
            plan_offsets(ga, g, first); /* the second allocator sees the first one's hints */
            scramble_hints(g, 1);
            plan_offsets(ga, g, want);
            CHECK_MSG(memcmp(first, want, n_bytes) == 0, "policy %d, allocator %d: hints as left", policy, a);
            for (int how = 0; how < 3; how += 2) {
                scramble_hints(g, how);
                plan_offsets(ga, g, got);
                CHECK_MSG(memcmp(want, got, n_bytes) == 0, "policy %d, allocator %d: hints %d", policy, a, how);
            }
        }
        tg_gallocr_free(gallocs[0]);
        tg_gallocr_free(gallocs[1]);
        tg_graph_free(g);
        tg_context_free(ctx);
    }
}

/* A graph whose sources are mostly tensors it does not list (views of an
 * allocated weight, as a hand-built graph or a scheduler's copy has them):
 * the allocator's tensor table, sized for the listed tensors, must grow
 * while the pass runs.  The plan must be the one made for the same graph
 * with those sources listed as leafs (table big enough from the start),
 * under both policies, with hints left stale or scrambled. */
static void test_table_grows_for_outside_sources(void) {
    enum { N_NODES = 64, N_VIEWS = 2 * N_NODES };
    struct test_buft tb, wt;
    test_buft_init(&tb, "compute", 32, 0);
    test_buft_init(&wt, "weights", 32, 0);
    struct tg_context *wctx = test_ctx();
    struct tg_tensor *w = test_f32(wctx, "w", 8 * N_VIEWS, false);
    enum tg_status st;
    tg_buffer *wbuf = tg_alloc_ctx_tensors(wctx, &wt.buft, &st);
    CHECK(wbuf && st == TG_OK);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *views[N_VIEWS];
    for (int v = 0; v < N_VIEWS; v++) views[v] = tg_view_1d(ctx, w, 8, (size_t)v * 8 * sizeof(float));
    struct tg_graph *bare = tg_graph_new(4 * N_VIEWS), *listed = tg_graph_new(4 * N_VIEWS);
    for (int v = 0; v < N_VIEWS; v++) CHECK_OK(tg_graph_add_leaf(listed, views[v]));
    for (int i = 0; i < N_NODES; i++) {
        struct tg_tensor *sum = tg_add(ctx, views[2 * i], views[2 * i + 1]);
        if (i % 8 == 7) tg_set_output(sum);
        CHECK_OK(tg_graph_add_node(bare, sum));
        CHECK_OK(tg_graph_add_node(listed, sum));
    }
    CHECK(bare->n_leafs == 0 && N_VIEWS + 1 > bare->n_nodes + 16); /* more outside tensors than the table starts for */
    const int n_nodes = bare->n_nodes;
    size_t *want = malloc(sizeof *want * (size_t)n_nodes), *got = malloc(sizeof *got * (size_t)n_nodes);
    CHECK(want && got);
    /* every allocator lives to the end: the tensors keep pointing into the
     * buffers of the one that bound them last */
    tg_gallocr *keep[2 * 9];
    int n_keep = 0;
    for (int policy = 0; policy < 2; policy++) {
        tg_gallocr *ga = keep[n_keep++] = tg_gallocr_new(&tb.buft);
        tg_gallocr_set_policy(ga, policy ? TG_PLAN_BEST : TG_PLAN_GGML);
        CHECK_OK(tg_gallocr_reserve(ga, listed));
        CHECK_OK(tg_gallocr_alloc_graph(ga, listed));
        for (int i = 0; i < n_nodes; i++) want[i] = test_offset(bare->nodes[i]);
        for (int how = -1; how < 3; how++) {
            if (how >= 0) {
                const uint64_t hint = how == 1 ? UINT64_MAX : 0;
                for (int v = 0; v < N_VIEWS; v++) views[v]->private_.plan_hint = how == 0 ? (uint64_t)v : hint;
                for (int i = 0; i < n_nodes; i++) bare->nodes[i]->private_.plan_hint = (uint64_t)(n_nodes - i);
            }
            ga = keep[n_keep++] = tg_gallocr_new(&tb.buft);
            tg_gallocr_set_policy(ga, policy ? TG_PLAN_BEST : TG_PLAN_GGML);
            CHECK_OK(tg_gallocr_reserve(ga, bare));
            CHECK_OK(tg_gallocr_alloc_graph(ga, bare));
            for (int i = 0; i < n_nodes; i++) got[i] = test_offset(bare->nodes[i]);
            CHECK_MSG(memcmp(want, got, sizeof *want * (size_t)n_nodes) == 0, "policy %d, hints %d", policy, how);
            for (int v = 0; v < N_VIEWS; v++) {
                CHECK(views[v]->buffer == wbuf && views[v]->data == (char *)w->data + (size_t)v * 8 * sizeof(float));
            }
            /* Another allocator's pass leaves every hint naming its own
             * table: ga finds the tensors through its grown table alone, and
             * its recorded plan still replays, unchanged. */
            tg_gallocr *other = keep[n_keep++] = tg_gallocr_new(&tb.buft);
            CHECK_OK(tg_gallocr_reserve(other, bare));
            struct tg_gallocr_stats before, after;
            tg_gallocr_get_stats(ga, &before);
            CHECK_OK(tg_gallocr_alloc_graph(ga, bare));
            tg_gallocr_get_stats(ga, &after);
            CHECK_MSG(after.n_plans == before.n_plans, "policy %d, hints %d: planned again", policy, how);
            for (int i = 0; i < n_nodes; i++) CHECK(test_offset(bare->nodes[i]) == want[i]);
        }
    }
    for (int k = 0; k < n_keep; k++) tg_gallocr_free(keep[k]);
    free(want);
    free(got);
    tg_graph_free(bare);
    tg_graph_free(listed);
    tg_context_free(ctx);
    tg_buffer_free(wbuf);
    tg_context_free(wctx);
}

/* Replay with a source whose shape changed but whose size did not: the
 * node's same-layout bit for it flips, so the recorded in-place reuse is no
 * longer legal and the replay must re-plan rather than trust the record. */
static void test_replay_layout_flip(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *a = test_f32(ctx, "a", 8, true);
    struct tg_tensor *b = test_f32(ctx, "b", 8, true);
    struct tg_tensor *c = test_named(tg_add(ctx, a, b), "c");
    struct tg_graph *g = graph_of(c);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    tg_gallocr_set_policy(ga, TG_PLAN_GGML);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK(c->data == a->data); /* in place on its first source */
    CHECK_OK(tg_gallocr_alloc_graph(ga, g)); /* unchanged: replayed */
    CHECK(c->data == a->data);
    /* a becomes 4 x 2 (same bytes): c no longer has its layout */
    a->ne[0] = 4;
    a->ne[1] = 2;
    a->nb[1] = 4 * sizeof(float);
    a->nb[2] = a->nb[3] = 8 * sizeof(float);
    CHECK(!tg_are_same_layout(c, a) && tg_are_same_layout(c, b));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    CHECK_MSG(!test_overlap(c, a), "c still shares a's memory after a's layout changed");
    CHECK(c->data == b->data); /* now in place on b */
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_context_free(ctx);
}

/* reserve(worst case) then a smaller graph of the same structure: replayed, no growth. */
static void test_worst_case_reserve(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_graph *worst = mlp_graph(ctx, 256, NULL);
    struct tg_graph *small = mlp_graph(ctx, 40, NULL);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_reserve(ga, worst));
    size_t size = tg_gallocr_get_buffer_size(ga, 0);
    struct tg_plan_report before, after;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &before));
    CHECK_OK(tg_gallocr_alloc_graph(ga, worst));
    size_t ow[64], os[64];
    offsets_of(worst, ow);
    CHECK_OK(tg_gallocr_alloc_graph(ga, small));
    offsets_of(small, os);
    CHECK(memcmp(ow, os, sizeof(size_t) * (size_t)(worst->n_nodes + worst->n_leafs)) == 0); /* the recorded plan */
    CHECK(tg_gallocr_get_buffer_size(ga, 0) == size && tb.n_allocs == 1);
    CHECK_OK(tg_gallocr_get_report(ga, 0, &after));
    CHECK(after.peak == before.peak);
    /* buffers never shrink: reserving the small graph keeps the large buffer */
    CHECK_OK(tg_gallocr_reserve(ga, small));
    CHECK(tg_gallocr_get_buffer_size(ga, 0) == size && tb.n_allocs == 1);
    CHECK_OK(tg_gallocr_get_report(ga, 0, &after));
    CHECK(after.peak < before.peak);
    tg_gallocr_free(ga);
    tg_graph_free(worst);
    tg_graph_free(small);
    tg_context_free(ctx);
}

/* The same structure with one tensor grown and another shrunk, totals
 * equal (llama.cpp#16383, upstream's test_reallocation: 24 + 16 bytes, then
 * 20 + 20, chunks of 32): the grown tensor no longer fits its recorded slot,
 * so the graph is planned again, in one buffer and in chunks alike. */
static void grown_graph(struct tg_context *ctx, int64_t na, int64_t nb, struct tg_tensor **t) {
    t[0] = test_f32(ctx, "a", na, true);
    t[1] = test_f32(ctx, "b", nb, true);
    t[2] = test_named(tg_cont(ctx, t[0]), "x");
    t[3] = test_named(tg_cont(ctx, t[1]), "y");
    for (int i = 0; i < 4; i++) tg_set_output(t[i]); /* all live to the end: none may share a byte */
}

static void test_grown_tensor_is_planned_again(void) {
    for (int chunked = 0; chunked < 2; chunked++) {
        struct test_buft tb;
        test_buft_init(&tb, "compute", 4, chunked ? 32 : 0);
        struct tg_context *ctx = test_ctx();
        struct tg_tensor *t1[4], *t2[4];
        grown_graph(ctx, 6, 4, t1);
        grown_graph(ctx, 5, 5, t2);
        struct tg_graph *g1 = tg_graph_new(16), *g2 = tg_graph_new(16);
        CHECK_OK(tg_graph_build_forward_expand(g1, t1[2]));
        CHECK_OK(tg_graph_build_forward_expand(g1, t1[3]));
        CHECK_OK(tg_graph_build_forward_expand(g2, t2[2]));
        CHECK_OK(tg_graph_build_forward_expand(g2, t2[3]));
        tg_gallocr *ga = tg_gallocr_new(&tb.buft);
        CHECK_OK(tg_gallocr_alloc_graph(ga, g1));
        CHECK_OK(tg_gallocr_alloc_graph(ga, g2));
        for (int i = 0; i < 4; i++) {
            for (int j = i + 1; j < 4; j++) {
                CHECK_MSG(!test_overlap(t2[i], t2[j]), "chunked %d: '%s' overlaps '%s'", chunked, t2[i]->name,
                          t2[j]->name);
            }
        }
        tg_gallocr_free(ga);
        tg_graph_free(g1);
        tg_graph_free(g2);
        tg_context_free(ctx);
    }
}

/* A graph with no nodes and no leafs (a .tg file with only its header) plans
 * and binds: nothing, with no arithmetic on tables that were never needed
 * (UBSan's pointer-overflow check runs this in the sanitizer build). */
static void test_empty_graph(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_graph *g = tg_graph_new(8);
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    for (int k = 0; k < 3; k++) CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    struct tg_plan_report r;
    CHECK_OK(tg_gallocr_get_report(ga, 0, &r));
    CHECK(r.peak == 0 && r.n_tensors == 0 && tg_gallocr_get_buffer_size(ga, 0) == 0);
    tg_gallocr_free(ga);
    tg_graph_free(g);
}

/* Bad input fails with a message instead of aborting. */
static void test_bad_input(void) {
    struct test_buft tb;
    test_buft_init(&tb, "compute", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *x = test_f32(ctx, "x", 16, true);
    struct tg_graph *g = graph_of(tg_sqr(ctx, x));
    tg_gallocr *ga = tg_gallocr_new(&tb.buft);
    struct tg_plan_report r;
    CHECK_STATUS(tg_gallocr_get_report(ga, 0, &r), TG_ERR_INVALID);
    int bad_ids[1] = {3};
    CHECK_STATUS(tg_gallocr_reserve_n(ga, g, bad_ids, NULL), TG_ERR_INVALID);
    CHECK_ERR_HAS("buffer id 3");
    CHECK(tg_gallocr_new_n(NULL, 0) == NULL);
    /* a source that is not in the graph and has no memory */
    struct tg_tensor *stray = test_f32(ctx, "stray", 16, false);
    struct tg_tensor *n = tg_add(ctx, x, stray);
    struct tg_graph *partial = tg_graph_new(8);
    CHECK_OK(tg_graph_add_leaf(partial, x));
    CHECK_OK(tg_graph_add_node(partial, n));
    CHECK_STATUS(tg_gallocr_alloc_graph(ga, partial), TG_ERR_INVALID);
    CHECK_ERR_HAS("stray");
    CHECK(tg_fault_from_name("merge-off-by-one") == TG_FAULT_MERGE_OFF_BY_ONE);
    CHECK(tg_fault_from_name("nonsense") == TG_FAULT_COUNT);
    CHECK(strcmp(tg_fault_name(TG_FAULT_STALE_REPLAY), "stale-replay") == 0);
    tg_gallocr_free(ga);
    tg_graph_free(g);
    tg_graph_free(partial);
    tg_context_free(ctx);
}

int main(void) {
    test_empty_graph();
    test_seed002_offsets();
    test_edges_change_replans();
    test_size_only_reserve();
    test_failed_allocation();
    test_inplace_other_buffer_id();
    test_output_view_protects_root();
    test_live_view_blocks_inplace();
    test_none_view_holds_root();
    test_none_view_write_holds_root();
    test_none_view_read_frees_root();
    test_none_view_only_read_keeps_root();
    test_input_node_placed_first();
    test_input_node_never_in_place();
    test_many_holes_graph();
    test_parent_larger_than_child();
    test_alloc_size_wraps();
    test_external_tensors_untouched();
    test_external_toggle();
    test_external_view_moves();
    test_unlisted_views();
    test_listed_twice();
    test_source_listed_later();
    test_shared_buffer_types();
    test_chunks_and_oversize();
    test_alignment_everywhere();
    test_seed000_two_graphs();
    test_growth_makes_old_tensors_stale();
    test_determinism_and_replay();
    test_wrong_plan_hints();
    test_replay_layout_flip();
    test_worst_case_reserve();
    test_grown_tensor_is_planned_again();
    test_bad_input();
    test_result_as_leaf_on_replay();
    test_table_grows_for_outside_sources();
    return tg_test_finish();
}

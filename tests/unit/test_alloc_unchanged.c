/* Re-allocation of the graph bound last, unchanged (impl/alloc.c, "re-
 * allocation of the graph bound last"): once the same tensors come back, the
 * graph is imaged after its bind and later calls that find it as bound do
 * nothing.  Every change the replay check would see must end that: each
 * mutation below is applied to a graph in that state and to an identical
 * graph whose allocator never imaged it, and both must come out the same
 * (status, re-plans, where every tensor is). */
#include "alloc-vouched.h"
#include "test_token_graph.h"

enum { WIDTH = 64 };

/* The token graph, and host memory an input or weight may be handed
 * instead of its own. */
struct net {
    struct test_token_graph tg;
    float host[WIDTH];
    tg_buffer *own; /* memory of act's own (M_NODE_USAGE), or NULL */
};

static void net_build(struct net *n, tg_buffer_type *weights_buft) {
    memset(n, 0, sizeof *n);
    test_token_graph_build(&n->tg, weights_buft, WIDTH);
}

/* A compute and a weights buffer type, and a net with its weights in the latter. */
static void net_open(struct test_buft *compute, struct test_buft *weights, struct net *n) {
    test_buft_init(compute, "compute", 32, 0);
    test_buft_init(weights, "weights", 32, 0);
    net_build(n, &weights->buft);
}

static void net_free(struct net *n) {
    test_token_graph_free(&n->tg);
    tg_buffer_free(n->own);
}

static struct tg_tensor *slot(const struct tg_graph *g, int u) {
    return u < g->n_leafs ? g->leafs[u] : g->nodes[u - g->n_leafs];
}

/* Where slot u's tensor is: its offset in ga's buffer, -1 without memory,
 * -2 in memory of its own. */
static long long where(tg_gallocr *ga, const struct tg_tensor *t) {
    if (!t->data) return -1;
    return t->buffer && tg_gallocr_owns_buffer(ga, t->buffer) ? (long long)test_offset(t) : -2;
}

/* An allocator of compute's type with g reserved and bound `binds` times. */
static tg_gallocr *bound_allocator(struct test_buft *compute, struct tg_graph *g, int binds) {
    tg_gallocr *ga = tg_gallocr_new(&compute->buft);
    CHECK_OK(tg_gallocr_reserve(ga, g));
    for (int k = 0; k < binds; k++) CHECK_OK(tg_gallocr_alloc_graph(ga, g));
    return ga;
}

static struct tg_gallocr_stats stats_of(const tg_gallocr *ga) {
    struct tg_gallocr_stats s;
    tg_gallocr_get_stats(ga, &s);
    return s;
}

/* ---- the fast path is taken, and leaves a usable graph ---------------------------------- */

static void test_unchanged_graph_is_left_as_bound(void) {
    struct test_buft compute, weights;
    struct net n;
    net_open(&compute, &weights, &n);
    /* the first bind, then the same tensors again: bound, then imaged */
    tg_gallocr *ga = bound_allocator(&compute, n.tg.graph, 2);
    struct tg_gallocr_stats s = stats_of(ga);
    CHECK(s.n_plans == 1 && s.n_allocs == 2 && s.n_allocs_replayed == 2 && s.n_allocs_unchanged == 0 &&
          s.n_images == 1);
    long long before[64];
    int n_slots = n.tg.graph->n_leafs + n.tg.graph->n_nodes;
    CHECK(n_slots <= 64);
    for (int u = 0; u < n_slots; u++) before[u] = where(ga, slot(n.tg.graph, u));
    uint64_t token = tg_gallocr_bind_token(ga);
    for (int k = 0; k < 5; k++) CHECK_OK(tg_gallocr_alloc_graph(ga, n.tg.graph));
    s = stats_of(ga);
    CHECK(s.n_plans == 1 && s.n_allocs == 7 && s.n_allocs_unchanged == 5 && s.n_images == 1);
    CHECK(tg_gallocr_bind_token(ga) == token); /* nothing was bound again */
    for (int u = 0; u < n_slots; u++) CHECK(where(ga, slot(n.tg.graph, u)) == before[u]);
    /* the tensors are valid: data goes in and comes back */
    float in[WIDTH], back[WIDTH];
    for (int i = 0; i < WIDTH; i++) in[i] = (float)i;
    CHECK_OK(tg_tensor_set(n.tg.x, in, 0, sizeof in));
    CHECK_OK(tg_tensor_get(n.tg.x, back, 0, sizeof back));
    CHECK(memcmp(in, back, sizeof in) == 0);
    CHECK_OK(tg_tensor_check_access(n.tg.out));
    CHECK_OK(tg_tensor_check_access(n.tg.view));
    /* a new plan drops the image; the counters go on */
    CHECK_OK(tg_gallocr_reserve(ga, n.tg.graph));
    CHECK_OK(tg_gallocr_alloc_graph(ga, n.tg.graph));
    s = stats_of(ga);
    CHECK(s.n_plans == 2 && s.n_allocs == 8 && s.n_allocs_unchanged == 5);
    tg_gallocr_get_stats(NULL, &s);
    CHECK(s.n_allocs == 0 && s.n_plans == 0);
    tg_gallocr_free(ga);
    net_free(&n);
}

/* A view the caller made of an output after the bind keeps its memory while
 * the graph is found unchanged; a bind of the changed graph makes it stale. */
static void test_views_made_since_the_bind(void) {
    struct test_buft compute, weights;
    struct net n;
    net_open(&compute, &weights, &n);
    tg_gallocr *ga = bound_allocator(&compute, n.tg.graph, 2); /* imaged */
    struct tg_tensor *first = tg_view_1d(n.tg.ctx, n.tg.out, 4, 0);
    CHECK(first != NULL);
    CHECK_OK(tg_tensor_view_bind(first));
    CHECK_OK(tg_gallocr_alloc_graph(ga, n.tg.graph));
    CHECK(stats_of(ga).n_allocs_unchanged == 1);
    CHECK_OK(tg_tensor_check_access(first));
    n.tg.out->ne[0] = WIDTH / 2; /* a change: bound again */
    CHECK_OK(tg_gallocr_alloc_graph(ga, n.tg.graph));
    CHECK(stats_of(ga).n_allocs_unchanged == 1);
    CHECK_STATUS(tg_tensor_check_access(first), TG_ERR_STALE);
    CHECK_OK(tg_tensor_check_access(n.tg.out));
    tg_gallocr_free(ga);
    net_free(&n);
}

/* ---- every change is seen ----------------------------------------------------------------- */

enum mutation {
    M_NONE,          /* control: the same values written back */
    M_SHAPE,         /* out keeps fewer elements (its plan still fits) */
    M_GROW,          /* out needs more bytes than planned */
    M_STRIDES,       /* sum's strides describe another layout of the same bytes */
    M_TYPE,          /* act becomes f16 */
    M_OP,            /* scaled becomes a sqr */
    M_FLAGS,         /* act becomes an output */
    M_SOURCE,        /* out adds sum instead of w */
    M_EXTRA_SOURCE,  /* act gains a second source */
    M_VIEW_OFFSET,   /* the view moves inside its root */
    M_VIEW_ROOT,     /* the view's root becomes scaled */
    M_INPUT_MEMORY,  /* x arrives with host memory of the caller's */
    M_CLEARED,       /* the caller unbinds sum */
    M_NODE_ORDER,    /* two independent nodes trade places in the list */
    M_OTHER_TENSOR,  /* a leaf slot holds another tensor of the same shape */
    M_BOUND_ELSEWHERE, /* another allocator bound the graph in between */
    M_STRAY_OFFSET,  /* out, not a view, gets a view offset */
    M_SIZE_RULE,     /* the buffer type now pads every add: out needs more than planned */
    M_MOVED,         /* the caller moves sum's data inside the same buffer */
    M_REBUFFERED,    /* x names the weights' buffer, at the same address */
    M_GENERATION,    /* sum's bind generation is no longer its buffer's */
    M_TWIN,          /* half's slot holds a copy of it, every field the same */
    M_NODE_USAGE,    /* act has memory of its own from the start; its buffer becomes a compute buffer */
    M_COUNT
};

static const char *const mutation_names[M_COUNT] = {
    "none", "shape", "grow", "strides", "type", "op", "flags", "source", "extra-source", "view-offset",
    "view-root", "input-memory", "cleared", "node-order", "other-tensor", "bound-elsewhere", "stray-offset",
    "size-rule", "moved", "rebuffered", "generation", "twin", "node-usage"};

static int node_index(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] == t) return i;
    }
    return -1;
}

static void mutate(struct net *n, enum mutation m, struct test_buft *compute, struct tg_tensor *spare,
                   tg_gallocr **other) {
    switch (m) {
    case M_NONE: n->tg.out->ne[0] = n->tg.out->ne[0]; break;
    case M_SHAPE: n->tg.out->ne[0] = WIDTH / 2; break;
    case M_GROW:
        n->tg.out->ne[1] = 2;
        n->tg.out->nb[2] = n->tg.out->nb[3] = 2 * n->tg.out->nb[1];
        break;
    case M_STRIDES:
        n->tg.sum->ne[0] = WIDTH / 2;
        n->tg.sum->ne[1] = 2;
        n->tg.sum->nb[1] = (WIDTH / 2) * sizeof(float);
        break;
    case M_TYPE:
        n->tg.act->type = TG_TYPE_F16;
        n->tg.act->nb[0] = 2;
        for (int d = 1; d < TG_MAX_DIMS; d++) n->tg.act->nb[d] = n->tg.act->nb[d - 1] * (size_t)n->tg.act->ne[d - 1];
        break;
    case M_OP: n->tg.scaled->op = TG_OP_SQR; break;
    case M_FLAGS: tg_set_output(n->tg.act); break;
    case M_SOURCE: n->tg.out->src[1] = n->tg.sum; break;
    case M_EXTRA_SOURCE: n->tg.act->src[1] = n->tg.w; break;
    case M_VIEW_OFFSET: n->tg.view->view_offs = 4 * sizeof(float); break;
    case M_VIEW_ROOT: n->tg.view->view_src = n->tg.scaled; break;
    case M_INPUT_MEMORY: n->tg.x->data = n->host; n->tg.x->buffer = NULL; break;
    case M_CLEARED: n->tg.sum->data = NULL; n->tg.sum->buffer = NULL; break;
    case M_NODE_ORDER: {
        /* half (copy of the view) and scaled both only need sum */
        int a = node_index(n->tg.graph, n->tg.half), b = node_index(n->tg.graph, n->tg.scaled);
        CHECK(a >= 0 && b >= 0);
        struct tg_tensor *t = n->tg.graph->nodes[a];
        n->tg.graph->nodes[a] = n->tg.graph->nodes[b];
        n->tg.graph->nodes[b] = t;
        break;
    }
    case M_OTHER_TENSOR:
        for (int j = 0; j < n->tg.graph->n_leafs; j++) {
            if (n->tg.graph->leafs[j] == n->tg.x) n->tg.graph->leafs[j] = spare;
        }
        if (n->tg.sum->src[0] == n->tg.x) n->tg.sum->src[0] = spare;
        break;
    case M_BOUND_ELSEWHERE:
        *other = tg_gallocr_new(&compute->buft);
        CHECK_OK(tg_gallocr_alloc_graph(*other, n->tg.graph));
        break;
    case M_STRAY_OFFSET: n->tg.out->view_offs = 16; break;
    case M_SIZE_RULE:
        compute->padded_op = TG_OP_ADD;
        compute->pad_bytes = 4096;
        break;
    case M_MOVED: n->tg.sum->data = (char *)n->tg.sum->data + 32; break;
    case M_REBUFFERED: n->tg.x->buffer = n->tg.weights; break;
    case M_GENERATION: n->tg.sum->bind_generation = 0; break;
    case M_TWIN: {
        *spare = *n->tg.half;
        int i = node_index(n->tg.graph, n->tg.half);
        CHECK(i >= 0);
        n->tg.graph->nodes[i] = spare;
        break;
    }
    case M_NODE_USAGE: tg_buffer_set_usage(n->own, TG_BUFFER_USAGE_COMPUTE); break;
    case M_COUNT: break;
    }
}

struct outcome {
    enum tg_status status;
    uint64_t plans;          /* plans made by the call */
    long long where[64];
};

/* Reserves n's graph, binds it `binds` times, mutates it, binds it once more. */
static struct outcome run(struct net *n, struct test_buft *compute, int binds, enum mutation m,
                          struct tg_gallocr_stats *after) {
    struct outcome o;
    memset(&o, 0, sizeof o);
    struct tg_tensor *spare = test_f32(n->tg.ctx, "spare", WIDTH, true);
    if (m == M_NODE_USAGE) {
        n->own = tg_buft_alloc_buffer(n->tg.weights->buft, tg_nbytes(n->tg.act));
        CHECK(n->own != NULL);
        CHECK_OK(tg_tensor_bind(n->tg.act, n->own, tg_buffer_get_base(n->own)));
    }
    tg_gallocr *ga = bound_allocator(compute, n->tg.graph, binds), *other = NULL;
    struct tg_gallocr_stats before = stats_of(ga);
    mutate(n, m, compute, spare, &other);
    o.status = tg_gallocr_alloc_graph(ga, n->tg.graph);
    compute->padded_op = TG_OP_COUNT; /* M_SIZE_RULE's change ends with the run */
    compute->pad_bytes = 0;
    *after = stats_of(ga);
    o.plans = after->n_plans - before.n_plans;
    after->n_allocs_unchanged -= before.n_allocs_unchanged;
    int n_slots = n->tg.graph->n_leafs + n->tg.graph->n_nodes;
    CHECK(n_slots <= 64);
    for (int u = 0; u < n_slots; u++) o.where[u] = where(ga, slot(n->tg.graph, u));
    tg_gallocr_free(ga);
    tg_gallocr_free(other);
    return o;
}

static void test_every_change_is_seen(void) {
    struct test_buft compute, weights;
    test_buft_init(&compute, "compute", 32, 0);
    test_buft_init(&weights, "weights", 32, 0);
    for (int m = 0; m < M_COUNT; m++) {
        struct net imaged, reference;
        net_build(&imaged, &weights.buft);
        net_build(&reference, &weights.buft);
        struct tg_gallocr_stats si, sr;
        /* three binds: the second images the graph, the third finds it unchanged */
        struct outcome a = run(&imaged, &compute, 3, (enum mutation)m, &si);
        CHECK_MSG(si.n_images == 1, "%s: %llu images", mutation_names[m], (unsigned long long)si.n_images);
        /* one bind: not imaged before the mutation */
        struct outcome b = run(&reference, &compute, 1, (enum mutation)m, &sr);
        CHECK_MSG(sr.n_allocs_unchanged == 0, "%s: the reference found its graph unchanged", mutation_names[m]);
        bool unchanged_expected = m == M_NONE;
        CHECK_MSG((si.n_allocs_unchanged == 1) == unchanged_expected, "%s: the change was %s", mutation_names[m],
                  unchanged_expected ? "not recognised as none" : "missed");
        CHECK_MSG(a.status == b.status, "%s: status %s, reference %s", mutation_names[m], tg_status_name(a.status),
                  tg_status_name(b.status));
        CHECK_MSG(a.plans == b.plans, "%s: %llu plans, reference %llu", mutation_names[m],
                  (unsigned long long)a.plans, (unsigned long long)b.plans);
        int n_slots = imaged.tg.graph->n_leafs + imaged.tg.graph->n_nodes;
        for (int u = 0; u < n_slots; u++) {
            CHECK_MSG(a.where[u] == b.where[u], "%s: slot %d ('%s') at %lld, reference %lld", mutation_names[m], u,
                      slot(imaged.tg.graph, u)->name, a.where[u], b.where[u]);
        }
        if (m == M_INPUT_MEMORY) CHECK(imaged.tg.x->data == (void *)imaged.host);
        net_free(&imaged);
        net_free(&reference);
    }
}

/* ---- when no image is taken, and what imaging costs ---------------------------------------- */

/* A graph that changes every token but still fits its plan (the same
 * tensors, the weight's memory alternating between two places) is imaged
 * after 1, 2, 4, 8, ... binds of it, not every time. */
static void test_changing_graph_is_rarely_imaged(void) {
    struct test_buft compute, weights;
    struct net n;
    net_open(&compute, &weights, &n);
    tg_gallocr *ga = bound_allocator(&compute, n.tg.graph, 0);
    void *w_data = n.tg.w->data;
    for (int k = 0; k < 64; k++) {
        n.tg.w->data = k % 2 ? (void *)n.host : w_data;
        n.tg.w->buffer = k % 2 ? NULL : n.tg.weights;
        CHECK_OK(tg_gallocr_alloc_graph(ga, n.tg.graph));
    }
    n.tg.w->data = w_data;
    n.tg.w->buffer = n.tg.weights;
    struct tg_gallocr_stats s = stats_of(ga);
    CHECK_MSG(s.n_images <= 7 && s.n_images >= 2, "%llu images in 64 binds", (unsigned long long)s.n_images);
    CHECK(s.n_allocs == 64 && s.n_allocs_unchanged == 0 && s.n_plans == 1);
    tg_gallocr_free(ga);
    net_free(&n);
}

/* A source outside the graph brings memory no slot accounts for: the graph
 * is never imaged, and taking that memory away is still seen. */
static void test_outside_source_is_never_imaged(void) {
    struct test_buft compute, weights;
    struct net n;
    net_open(&compute, &weights, &n);
    struct tg_graph *g = tg_graph_new(64); /* n's graph without the leaf w */
    for (int j = 0; j < n.tg.graph->n_leafs; j++) {
        if (n.tg.graph->leafs[j] != n.tg.w) CHECK_OK(tg_graph_add_leaf(g, n.tg.graph->leafs[j]));
    }
    for (int i = 0; i < n.tg.graph->n_nodes; i++) CHECK_OK(tg_graph_add_node(g, n.tg.graph->nodes[i]));
    tg_gallocr *ga = bound_allocator(&compute, g, 4);
    struct tg_gallocr_stats s = stats_of(ga);
    CHECK(s.n_images == 0 && s.n_allocs_unchanged == 0 && s.n_allocs == 4);
    void *w_data = n.tg.w->data;
    n.tg.w->data = NULL;
    n.tg.w->buffer = NULL;
    CHECK(tg_gallocr_alloc_graph(ga, g) != TG_OK || tg_gallocr_owns_buffer(ga, n.tg.w->buffer));
    n.tg.w->data = w_data;
    n.tg.w->buffer = n.tg.weights;
    tg_gallocr_free(ga);
    tg_graph_free(g);
    net_free(&n);
}

/* Buffers whose init_tensor hook a bind calls: binding again is not a
 * no-op there, so no image is taken and every call binds. */
static int n_init_calls; /* init_tensor calls so far */
static enum tg_status counting_init(tg_buffer *buf, struct tg_tensor *t) {
    (void)buf;
    (void)t;
    n_init_calls++;
    return TG_OK;
}
static tg_buffer *hooked_alloc(tg_buffer_type *b, size_t size) {
    tg_buffer *buf = test_buft_alloc(b, size);
    if (buf) buf->iface.init_tensor = counting_init;
    return buf;
}

static void test_hooked_buffers_bind_every_time(void) {
    struct test_buft compute, weights;
    struct net n;
    net_open(&compute, &weights, &n);
    compute.buft.iface.alloc_buffer = hooked_alloc;
    tg_gallocr *ga = bound_allocator(&compute, n.tg.graph, 1);
    int per_bind = n_init_calls;
    CHECK(per_bind > 0);
    for (int k = 0; k < 4; k++) CHECK_OK(tg_gallocr_alloc_graph(ga, n.tg.graph));
    struct tg_gallocr_stats s = stats_of(ga);
    CHECK(s.n_images == 0 && s.n_allocs_unchanged == 0 && s.n_allocs_replayed == 5);
    CHECK_MSG(n_init_calls == 5 * per_bind, "%d init_tensor calls, %d per bind", n_init_calls, per_bind);
    tg_gallocr_free(ga);
    net_free(&n);
}

/* A hook that refuses without a word: the allocator names the tensor and
 * the buffer type, so the status comes with a message a user can act on. */
static enum tg_status silent_refusing_init(tg_buffer *buf, struct tg_tensor *t) {
    (void)buf;
    (void)t;
    return TG_ERR_DEVICE;
}
static tg_buffer *refusing_alloc(tg_buffer_type *b, size_t size) {
    tg_buffer *buf = test_buft_alloc(b, size);
    if (buf) buf->iface.init_tensor = silent_refusing_init;
    return buf;
}

static void test_failing_hook_is_named(void) {
    struct test_buft compute, weights;
    struct net n;
    net_open(&compute, &weights, &n);
    compute.buft.iface.alloc_buffer = refusing_alloc;
    tg_gallocr *ga = tg_gallocr_new(&compute.buft);
    CHECK(ga != NULL);
    tg_fail(TG_ERR_INVALID, "an older, unrelated message");
    const enum tg_status st = tg_gallocr_alloc_graph(ga, n.tg.graph);
    CHECK_MSG(st == TG_ERR_DEVICE, "status %s", tg_status_name(st));
    CHECK_MSG(strstr(tg_last_error(), "init_tensor hook") && strstr(tg_last_error(), "gave no reason") &&
                  !strstr(tg_last_error(), "older"),
              "message: %s", tg_last_error());
    tg_gallocr_free(ga);
    net_free(&n);
}

int main(void) {
    test_unchanged_graph_is_left_as_bound();
    test_views_made_since_the_bind();
    test_every_change_is_seen();
    test_changing_graph_is_rarely_imaged();
    test_outside_source_is_never_imaged();
    test_hooked_buffers_bind_every_time();
    test_failing_hook_is_named();
    return tg_test_finish();
}

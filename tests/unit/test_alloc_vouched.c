/* The allocator's replay for a graph the scheduler vouches for
 * (impl/alloc-vouched.h): it binds like the checked replay, still checks
 * memory, ignores a token that no longer names its last bind, and builds
 * with assertions (and fuzzing builds) abort when the caller vouches for a
 * graph its plan does not fit. */
#define _POSIX_C_SOURCE 200809L
#include "alloc-vouched.h"
#include "test_token_graph.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every node and leaf of b sits where the same slot of a sits. */
static bool same_offsets(const struct test_token_graph *a, const struct test_token_graph *b) {
    if (a->graph->n_nodes != b->graph->n_nodes || a->graph->n_leafs != b->graph->n_leafs) return false;
    for (int i = 0; i < a->graph->n_nodes; i++) {
        const struct tg_tensor *u = a->graph->nodes[i], *v = b->graph->nodes[i];
        if (u->buffer != v->buffer || test_offset(u) != test_offset(v)) return false;
    }
    return b->x->buffer == a->x->buffer && test_offset(b->x) == test_offset(a->x);
}

/* Two buffer types, an allocator, and a first graph bound by the checked
 * path under token. */
struct fixture {
    struct test_buft compute, weights;
    struct test_token_graph first;
    tg_gallocr *ga;
    uint64_t token;
};

static void fixture_open(struct fixture *f) {
    test_buft_init(&f->compute, "compute", 32, 0);
    test_buft_init(&f->weights, "weights", 32, 0);
    test_token_graph_build(&f->first, &f->weights.buft, 64);
    f->ga = tg_gallocr_new(&f->compute.buft);
    CHECK(tg_gallocr_bind_token(f->ga) == 0);
    CHECK_OK(tg_gallocr_reserve(f->ga, f->first.graph));
    CHECK(tg_gallocr_bind_token(f->ga) == 0); /* a plan, no bind yet */
    CHECK_OK(tg_gallocr_alloc_graph(f->ga, f->first.graph));
    f->token = tg_gallocr_bind_token(f->ga);
    CHECK(f->token != 0);
}

static void fixture_close(struct fixture *f) {
    tg_gallocr_free(f->ga);
    test_token_graph_free(&f->first);
}

static void test_binds_like_the_checked_replay(void) {
    struct fixture f;
    fixture_open(&f);
    struct test_token_graph next;
    test_token_graph_build(&next, &f.weights.buft, 64);
    const void *w_data = next.w->data;
    CHECK_OK(tg_gallocr_alloc_graph_vouched(f.ga, next.graph, f.token));
    CHECK(same_offsets(&f.first, &next));
    CHECK(next.w->data == w_data); /* the weight keeps its own memory */
    CHECK(next.view->data == next.sum->data); /* the view follows its root */
    uint64_t next_token = tg_gallocr_bind_token(f.ga);
    CHECK(next_token != 0 && next_token != f.token);
    /* the first graph's memory went to the next: its tensors are stale */
    CHECK_STATUS(tg_tensor_check_access(f.first.out), TG_ERR_STALE);

    /* a new plan ends every token */
    CHECK_OK(tg_gallocr_reserve(f.ga, next.graph));
    CHECK(tg_gallocr_bind_token(f.ga) == 0);
    test_token_graph_free(&next);
    fixture_close(&f);
}

/* A token that names an older bind is not trusted: the general path runs and
 * re-plans a graph of other shapes instead of binding the old plan. */
static void test_stale_token_takes_the_checked_path(void) {
    struct fixture f;
    fixture_open(&f);
    struct test_token_graph second, wider;
    test_token_graph_build(&second, &f.weights.buft, 64);
    test_token_graph_build(&wider, &f.weights.buft, 4096);
    CHECK_OK(tg_gallocr_alloc_graph(f.ga, second.graph));
    size_t small = tg_gallocr_get_buffer_size(f.ga, 0);
    CHECK_OK(tg_gallocr_alloc_graph_vouched(f.ga, wider.graph, f.token));
    CHECK(tg_gallocr_get_buffer_size(f.ga, 0) > small); /* re-planned for the wider shapes */
    CHECK(tg_gallocr_owns_buffer(f.ga, wider.out->buffer) &&
          test_offset(wider.out) + tg_nbytes(wider.out) <= tg_gallocr_get_buffer_size(f.ga, 0));
    CHECK(!test_overlap(wider.out, wider.half) && !test_overlap(wider.out, wider.w));
    /* token 0 and a fault switch are never trusted either */
    CHECK_OK(tg_gallocr_alloc_graph_vouched(f.ga, f.first.graph, 0));
    tg_gallocr_set_fault(f.ga, TG_FAULT_STALE_REPLAY);
    CHECK(tg_gallocr_bind_token(f.ga) == 0);
    test_token_graph_free(&second);
    test_token_graph_free(&wider);
    fixture_close(&f);
}

/* What the scheduler cannot see is still checked: an input that arrives
 * with memory of its own is not bound into the compute buffer. */
static void test_memory_is_still_checked(void) {
    struct fixture f;
    fixture_open(&f);
    struct test_token_graph next;
    test_token_graph_build(&next, &f.weights.buft, 64);
    float own[64];
    next.x->data = own; /* host memory of the caller's, no buffer */
    CHECK_OK(tg_gallocr_alloc_graph_vouched(f.ga, next.graph, f.token));
    CHECK(next.x->data == (void *)own && next.x->buffer == NULL);
    CHECK(next.sum->buffer != NULL && tg_gallocr_owns_buffer(f.ga, next.sum->buffer));
    test_token_graph_free(&next);
    fixture_close(&f);
}

/* A leaf of the next graph that is a result of the last bind (its memory
 * is the plan's): the stamp-free check of a vouched graph asks the last
 * bind's node list, and must refuse it as the checked path does, naming it. */
static void test_leaf_that_was_a_result(void) {
    enum tg_status status[2];
    for (int vouched = 0; vouched < 2; vouched++) {
        struct fixture f;
        fixture_open(&f);
        struct test_token_graph next;
        test_token_graph_build(&next, &f.weights.buft, 64);
        /* first.out takes x's place: same type, shape and flags, so the
         * structure is still the one bound under the token */
        f.first.out->flags = next.x->flags;
        for (int j = 0; j < next.graph->n_leafs; j++) {
            if (next.graph->leafs[j] == next.x) next.graph->leafs[j] = f.first.out;
        }
        next.sum->src[0] = f.first.out;
        status[vouched] = vouched ? tg_gallocr_alloc_graph_vouched(f.ga, next.graph, f.token)
                                  : tg_gallocr_alloc_graph(f.ga, next.graph);
        CHECK_MSG(status[vouched] == TG_ERR_STALE, "%s path: %s", vouched ? "vouched" : "checked",
                  tg_status_name(status[vouched]));
        CHECK_ERR_HAS("'out'");
        test_token_graph_free(&next);
        fixture_close(&f);
    }
}

/* Vouching for a graph the plan does not fit is a bug of the caller's: with
 * assertions on (or in a fuzzing build), the allocator runs the general check
 * too and aborts. */
static void test_false_vouch_aborts_with_assertions(void) {
#if !TG_ALLOC_CHECKS_VOUCHED
    printf("assertions off (NDEBUG): the false-vouch abort is checked in Debug and fuzzing builds\n");
#else
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct fixture f;
        fixture_open(&f);
        struct test_token_graph wide;
        test_token_graph_build(&wide, &f.weights.buft, 4096);
        (void)tg_gallocr_alloc_graph_vouched(f.ga, wide.graph, f.token);
        _exit(0); /* not reached when the check fires */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %d", status);
#endif
}

int main(void) {
    test_binds_like_the_checked_replay();
    test_stale_token_takes_the_checked_path();
    test_memory_is_still_checked();
    test_leaf_that_was_a_result();
    test_false_vouch_aborts_with_assertions();
    return tg_test_finish();
}

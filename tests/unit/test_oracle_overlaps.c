/* The oracle's overlap sweep (oracle/overlaps.c) against the definition, and
 * the allocator checker's pair count on a plan that reuses one address for a
 * whole chain: it judges the pairs that share a step, not every pair that
 * shares a byte (which made the check quadratic: 20,000 pairs here instead of
 * 200 million). */
#include "tg-cpu.h"
#include "tg-oracle-overlaps.h"
#include "tg-oracle.h"
#include "tg_test.h"
#include "tg_test_rng.h"

#define N_RANDOM 300

static bool brute[N_RANDOM][N_RANDOM], seen[N_RANDOM][N_RANDOM];
static const struct tg_oracle_block *current;
static int n_calls, misordered, stop_after;

static bool record(void *user, int i, int j) {
    (void)user;
    const struct tg_oracle_block *a = &current[i], *b = &current[j];
    /* i before j in (space, begin, index) order */
    if ((uintptr_t)a->space > (uintptr_t)b->space || (a->space == b->space && (a->begin > b->begin || (a->begin == b->begin && i > j)))) {
        misordered++;
    }
    seen[i < j ? i : j][i < j ? j : i] = true;
    return ++n_calls != stop_after;
}

static void random_case(uint64_t seed, int n, int n_spaces, uintptr_t span, int steps) {
    struct tg_oracle_block blocks[N_RANDOM];
    static const char spaces[4] = {0};
    rng_state = seed;
    for (int i = 0; i < n; i++) {
        uintptr_t begin = (uintptr_t)(rng_next() % span), size = 1 + (uintptr_t)(rng_next() % (span / 4 + 1));
        int first = (int)(rng_next() % (uint64_t)steps), len = (int)(rng_next() % 4 == 0 ? rng_next() % (uint64_t)steps : rng_next() % 3);
        blocks[i] = (struct tg_oracle_block){&spaces[rng_next() % (uint64_t)n_spaces], begin, begin + size, first, first + len};
    }
    memset(brute, 0, sizeof brute);
    memset(seen, 0, sizeof seen);
    int n_brute = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            const struct tg_oracle_block *a = &blocks[i], *b = &blocks[j];
            brute[i][j] = a->space == b->space && a->begin < b->end && b->begin < a->end && a->first <= b->last &&
                          b->first <= a->last;
            n_brute += brute[i][j];
        }
    }
    current = blocks;
    n_calls = misordered = 0;
    stop_after = -1;
    CHECK(tg_oracle_for_each_overlap(blocks, n, record, NULL));
    CHECK_MSG(n_calls == n_brute, "seed %llu: %d pairs reported, %d overlap", (unsigned long long)seed, n_calls, n_brute);
    CHECK(misordered == 0);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) wrong += brute[i][j] != seen[i][j];
    }
    CHECK_MSG(wrong == 0, "seed %llu: %d pairs differ from the definition", (unsigned long long)seed, wrong);
    /* a callback returning false stops the sweep */
    if (n_brute > 3) {
        n_calls = 0;
        stop_after = 3;
        CHECK(tg_oracle_for_each_overlap(blocks, n, record, NULL));
        CHECK(n_calls == 3);
    }
}

/* A chain x -> n0 -> n1 -> ... with every tensor at offset 0: each node
 * overlaps in bytes with all others, in steps only with its neighbours. */
static void chain_pair_count(int n) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_graph *g = tg_graph_new(n + 8);
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    tg_set_input(x);
    struct tg_tensor *t = x;
    for (int i = 0; i < n; i++) t = tg_scale(ctx, t, 2.0f);
    tg_set_output(t);
    CHECK_OK(tg_graph_build_forward_expand(g, t));
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    CHECK_OK(tg_oracle_snapshot_take(g, &snap));
    CHECK_OK(tg_oracle_liveness_build(g, &snap, NULL, NULL, &lv));
    tg_buffer_type *buft = tg_cpu_buffer_type();
    tg_buffer *buf = tg_buft_alloc_buffer(buft, 1024);
    tg_buffer_set_usage(buf, TG_BUFFER_USAGE_COMPUTE);
    CHECK_OK(tg_tensor_bind(x, buf, tg_buffer_get_base(buf)));
    for (int i = 0; i < g->n_nodes; i++) CHECK_OK(tg_tensor_bind(g->nodes[i], buf, tg_buffer_get_base(buf)));
    struct tg_oracle_report rep;
    CHECK_OK(tg_oracle_check(g, &lv, &snap, &buft, 1, &rep));
    /* the input and the output are kept to the end, so they meet every node */
    CHECK_MSG(rep.n_pairs_judged <= 3LL * n, "%lld pairs judged for a %d-node chain", rep.n_pairs_judged, n);
    CHECK(rep.n_pairs_judged >= n - 1); /* every neighbour pair is judged */
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(buf);
    tg_graph_free(g);
    tg_context_free(ctx);
}

int main(void) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
        random_case(seed, N_RANDOM, 1 + (int)(seed % 3), seed % 2 ? 64 : 4096, seed % 4 ? 40 : 300);
    }
    random_case(99, 1, 1, 64, 10);
    random_case(100, 2, 1, 64, 10);
    chain_pair_count(20000);
    return tg_test_finish();
}

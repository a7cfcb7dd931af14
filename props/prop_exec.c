/* Property: the real plan computes the same bits as the naive plan.  For each
 * seed, the generated case (computable ops only) is planned by the allocator
 * (both policies) and by the oracle's naive allocator, computed on the CPU from
 * the same op-safe inputs, and every output and graph sink compared bit for bit;
 * then again with a node source swapped for a tensor outside the graph that
 * moves between the plan and its replay (tg_gen_exec_outside_check).
 * TG_PROPS_CASES scales the seeds, TG_PROPS_SEED moves the range. */
#include "tg-gen.h"
#include "tg_test.h"

#include <stdlib.h>
#include <time.h>

int main(void) {
    int n_cases = getenv("TG_PROPS_CASES") ? atoi(getenv("TG_PROPS_CASES")) : 1000;
    uint64_t first = getenv("TG_PROPS_SEED") ? strtoull(getenv("TG_PROPS_SEED"), NULL, 10) : 1;
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    opts.max_tensor_bytes = 1u << 18; /* the reference kernels are plain loops: keep each graph quick */
    int n_computed = 0, n_compared = 0, n_failures = 0, n_outside = 0;
    clock_t t0 = clock();
    for (int i = 0; i < n_cases; i++) {
        uint64_t seed = first + (uint64_t)i;
        uint8_t bytes[TG_GEN_SEED_BYTES];
        tg_gen_seed_bytes(seed, bytes, sizeof bytes);
        for (int p = 0; p < 2; p++) {
            enum tg_plan_policy policy = p ? TG_PLAN_BEST : TG_PLAN_GGML;
            struct tg_oracle_diff_result res;
            enum tg_status st = tg_gen_exec_check(bytes, sizeof bytes, &opts, policy, seed, &res);
            bool ok = st == TG_OK && res.n_mismatched == 0;
            CHECK_MSG(ok, "seed %llu (%s): %s (replay: TG_PROPS_SEED=%llu TG_PROPS_CASES=1)",
                      (unsigned long long)seed, p ? "best" : "ggml", st != TG_OK ? tg_last_error() : res.message,
                      (unsigned long long)seed);
            n_failures += !ok;
            n_computed += res.computed;
            n_compared += res.n_compared;
            st = tg_gen_exec_outside_check(bytes, sizeof bytes, &opts, policy, seed, seed, &res);
            ok = st == TG_OK && res.n_mismatched == 0;
            CHECK_MSG(ok, "seed %llu (%s), a source outside the graph moved: %s (replay: TG_PROPS_SEED=%llu "
                      "TG_PROPS_CASES=1)", (unsigned long long)seed, p ? "best" : "ggml",
                      st != TG_OK ? tg_last_error() : res.message, (unsigned long long)seed);
            n_failures += !ok;
            n_outside += res.computed;
        }
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("prop_exec: %d seeds x 2 policies, %d computed (the rest have ops without CPU kernels), %d outputs "
           "compared bit for bit, %d computed with a source outside the graph moved before a replay, %d failures, "
           "%.1f graphs/s\n", n_cases, n_computed, n_compared, n_outside, n_failures,
           secs > 0 ? 2 * n_cases / secs : 0.0);
    CHECK(n_computed > n_cases / 2 && n_outside > n_cases / 2); /* the property must actually run */
    return tg_test_finish();
}

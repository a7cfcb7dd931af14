/* Property: scheduler call sequences (fuzz/gen/gen_sched.c, the decoder
 * fuzz_sched uses, fed with seeded bytes): for each seed, a backend setup with
 * weights on random backends and up to 12 calls (compute, alloc, reset, reserve,
 * pins, set/get, the graph rebuilt, a second graph, an edge moved, a size
 * changed).  Every allocation passes the scheduler checkers, every compute is
 * bit-identical to the CPU alone (computes run back to back, results fetched
 * asynchronously), set/get round-trips, reserve is never undersized,
 * allocating an allocated graph is refused, reserve_size agrees with the
 * reserve after it, and the sim race detector finds nothing; op offload,
 * views of weights bound before scheduling and reserve_size must each have
 * run, and so must graphs reading a tensor they do not list (flags bit 4),
 * computed and moved by a reset.  A failing seed is
 * the fuzz input `tg_gen_seed_bytes(seed)`: `tg-fuzz-decode --target sched
 * --seed N` prints it.  TG_PROPS_CASES scales the seeds, TG_PROPS_SEED moves them. */
#include "tg-gen.h"
#include "tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void) {
    int n_cases = getenv("TG_PROPS_CASES") ? atoi(getenv("TG_PROPS_CASES")) : 400;
    uint64_t first = getenv("TG_PROPS_SEED") ? strtoull(getenv("TG_PROPS_SEED"), NULL, 10) : 1;
    struct tg_gen_sched_stats total = {0};
    int n_failures = 0, n_outside = 0, n_outside_failures = 0;
    clock_t t0 = clock();
    for (int i = 0; i < n_cases; i++) {
        uint64_t seed = first + (uint64_t)i;
        uint8_t bytes[TG_GEN_SEED_BYTES];
        tg_gen_seed_bytes(seed, bytes, sizeof bytes);
        struct tg_gen_sched_stats st;
        char failure[600];
        enum tg_status status = tg_gen_sched_run(bytes, sizeof bytes, &st, failure, sizeof failure);
        CHECK_MSG(status == TG_OK, "seed %llu: %s (replay: TG_PROPS_SEED=%llu TG_PROPS_CASES=1; read it: "
                  "tg-fuzz-decode --target sched --seed %llu)", (unsigned long long)seed,
                  status == TG_ERR_INVALID ? failure : tg_last_error(), (unsigned long long)seed,
                  (unsigned long long)seed);
        n_failures += status != TG_OK;
        n_outside += st.outside_builds > 0;
        n_outside_failures += st.outside_builds > 0 && status != TG_OK;
        for (int k = 0; k < TG_GEN_SCHED_CALL_COUNT; k++) total.calls[k] += st.calls[k];
        total.allocs += st.allocs;
        total.replays += st.replays;
        total.refusals += st.refusals;
        total.computes_compared += st.computes_compared;
        total.computes_back_to_back += st.computes_back_to_back;
        total.set_gets += st.set_gets;
        total.offloads += st.offloads;
        total.sizes_measured += st.sizes_measured;
        total.views_bound += st.views_bound;
        total.windows_moved += st.windows_moved;
        total.outside_builds += st.outside_builds;
        total.outside_computes += st.outside_computes;
        total.outside_moved += st.outside_moved;
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("prop_sched_calls: %d seeds, %d failures, %.1f seeds/s\n  calls run:", n_cases, n_failures,
           secs > 0 ? n_cases / secs : 0.0);
    for (int k = 0; k < TG_GEN_SCHED_CALL_COUNT; k++)
        printf(" %s %d", tg_gen_sched_call_name((enum tg_gen_sched_call)k), total.calls[k]);
    printf("\n  %d allocations judged by the checkers (%d replayed), %d refusals, %d computes bit-identical to the "
           "CPU (%d issued back to back), %d set/get round trips, all race-free under the sim race detector\n",
           total.allocs, total.replays, total.refusals, total.computes_compared, total.computes_back_to_back,
           total.set_gets);
    printf("  %d nodes offloaded from the CPU to a sim (op offload), %d reserves measured first by reserve_size, "
           "%d views of weights bound before scheduling, %d windows of weights moved by a token\n", total.offloads,
           total.sizes_measured, total.views_bound, total.windows_moved);
    printf("  %d seeds (%d failed) ran again with a source outside the graph: %d builds, %d of their computes "
           "compared, %d outside tensors moved by a reset\n", n_outside, n_outside_failures, total.outside_builds,
           total.outside_computes, total.outside_moved);
    /* the property must actually exercise what it claims */
    for (int k = 0; k < TG_GEN_SCHED_CALL_COUNT && n_cases >= 100; k++)
        CHECK_MSG(total.calls[k] > 0, "call kind %s never ran", tg_gen_sched_call_name((enum tg_gen_sched_call)k));
    if (n_cases >= 100) {
        CHECK(total.computes_compared > n_cases / 4);
        CHECK(total.computes_back_to_back > 0);
        CHECK(total.replays > 0);
        CHECK(total.set_gets > 0);
        CHECK(total.sizes_measured > 0);
        CHECK(total.views_bound > 0);
        CHECK(total.outside_computes > 0);
        CHECK(total.outside_moved > 0);
    }
    if (n_cases >= 300) { /* a few in a hundred seeds each: a hundred may have none */
        CHECK(total.offloads > 0);
        CHECK(total.windows_moved > 0);
    }
    return tg_test_finish();
}

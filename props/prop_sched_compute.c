/* Scheduler compute properties over generated computable graphs: the CPU plus
 * 0-3 sim devices (random supported ops, alignment, alloc padding, one maybe
 * sharing the host buffer type), weights moved to random backends, random pins
 * on non-view nodes.  For each case:
 *   - the schedule passes every scheduler checker (a case that does not fails,
 *     uncomputed: a wrong schedule could make the host touch sim memory);
 *   - outputs are bit-identical to the same graph computed on the CPU alone;
 *   - with pipeline copies (n_copies 2 to 4), n_copies + 2 consecutive graphs
 *     through one scheduler, computed back to back as llama.cpp does (inputs
 *     set and results fetched asynchronously, one synchronize at the end), are
 *     bit-identical too;
 *   - and all of it runs clean under the sim devices' race detector (the CPU
 *     watched as the host), with jittered queues.
 * The running and comparing is tests/backend/sched_compare.c, shared with the
 * backend conformance harness.
 * TG_PROPS_CASES scales the number of seeds, TG_PROPS_SEED moves the range. */
#include "backend/sched_compare.h"
#include "tg-cpu.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIMS 3 /* SC_MAX_BACKENDS holds them and the CPU */

static void setup_init(struct setup *su, uint64_t seed) {
    memset(su, 0, sizeof *su); /* max_nmse 0: bit for bit */
    uint64_t r = seed ^ 0xc0ffeeull;
    su->race = tg_sim_race_new();
    int n_sims = (int)(sched_rng_next(&r) % (MAX_SIMS + 1));
    for (int i = 0; i < n_sims; i++) {
        struct tg_sim_params p;
        tg_sim_params_default(&p);
        char name[16];
        snprintf(name, sizeof name, "sim%d", i);
        p.name = name;
        p.alignment = (size_t)64 << (sched_rng_next(&r) % 3);
        p.alloc_pad = sched_rng_next(&r) % 2 ? 64 : 0;
        p.share_host_buffer_type = sched_rng_next(&r) % 5 == 0;
        p.supported_ops_all = false;
        for (int op = 0; op < TG_OP_COUNT; op++) p.supported_ops[op] = sched_rng_next(&r) % 10 < 7;
        p.race = su->race;
        p.jitter_seed = seed + 1;
        su->backends[i] = tg_backend_sim_new(&p);
    }
    su->backends[n_sims] = tg_sim_watch_new(tg_backend_cpu_new(), su->race, NULL);
    su->n_backends = n_sims + 1;
}

static void setup_free(struct setup *su) {
    for (int i = 0; i < su->n_backends; i++) tg_backend_free(su->backends[i]);
    tg_sim_race_free(su->race);
}

static int n_failures;

static void fail(uint64_t seed, const char *what, const char *why) {
    n_failures++;
    if (n_failures <= 3)
        fprintf(stderr, "=== %s failed for seed %llu (replay: TG_PROPS_SEED=%llu TG_PROPS_CASES=1): %s\n", what,
                (unsigned long long)seed, (unsigned long long)seed, why);
}

int main(void) {
    const char *env_cases = getenv("TG_PROPS_CASES");
    const char *env_seed = getenv("TG_PROPS_SEED");
    int n_cases = env_cases ? atoi(env_cases) : 300;
    uint64_t first = env_seed ? strtoull(env_seed, NULL, 10) : 1;
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    opts.max_ops = 24;
    opts.max_tensor_bytes = (size_t)256 << 10;
    int n_compared = 0, n_skipped = 0, n_pipeline = 0;
    clock_t t0 = clock();
    for (int i = 0; i < n_cases; i++) {
        uint64_t seed = first + (uint64_t)i;
        struct reference ref;
        if (!reference_run(&ref, seed, &opts)) {
            n_skipped++;
            reference_free(&ref);
            continue;
        }
        struct setup su;
        setup_init(&su, seed);
        char why[400] = "";
        /* one graph, no pipeline copies */
        struct scheduled sc;
        tg_sched *s = tg_sched_new(su.backends, NULL, su.n_backends, (size_t)ref.c->graph->size + 16, false, false);
        CHECK(s != NULL);
        if (s && scheduled_init(&sc, &ref, &su, seed, &opts)) {
            enum outcome o = run_one(s, &su, &sc, &ref, why, sizeof why);
            if (o == OUT_SAME) n_compared++;
            else if (o == OUT_SKIPPED) n_skipped++;
            else fail(seed, "bit-identical to the CPU", why);
        }
        /* the scheduler first: freeing it gives the graph its sources back */
        tg_sched_free(s);
        scheduled_free(&sc);
        /* consecutive graphs through one pipelined scheduler, back to back */
        if (i % 2 == 0) {
            tg_sched *sp = tg_sched_new(su.backends, NULL, su.n_backends, (size_t)ref.c->graph->size + 16, true, false);
            int n_copies = 2 + (int)(seed % 3);
            CHECK(sp != NULL && tg_sched_set_n_copies(sp, n_copies) == TG_OK);
            enum outcome o = run_pipelined(sp, &su, &ref, seed, &opts, n_copies + 2, &n_pipeline, why, sizeof why);
            if (o == OUT_DIFFERENT || o == OUT_ERROR) fail(seed, "pipeline bit-identical to the CPU", why);
            tg_sched_free(sp);
        }
        if (tg_sim_race_count(su.race) > 0) fail(seed, "race-free under the sim race detector", tg_sim_race_report(su.race));
        setup_free(&su);
        reference_free(&ref);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("prop_sched_compute: %d seeds: %d graphs bit-identical, %d pipelined graphs (back to back, n_copies 2-4) "
           "bit-identical, all race-free under the detector, %d skipped (no CPU kernel, or unsupported), %.1f seeds/s\n",
           n_cases, n_compared, n_pipeline, n_skipped, secs > 0 ? n_cases / secs : 0.0);
    CHECK(n_failures == 0);
    CHECK(n_compared > 0 && n_pipeline > 0);
    return tg_test_finish();
}

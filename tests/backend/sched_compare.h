/* Random computable graphs scheduled over several backends and compared with
 * the same graph computed on the CPU alone: the machinery of
 * prop_sched_compute, shared with the backend conformance harness.  Graphs
 * come from the case generator (fuzz/gen); weights move to random backends,
 * random non-view nodes are pinned to random backends that support them;
 * every schedule passes the scheduler checkers before it is computed. */
#ifndef TG_TEST_SCHED_COMPARE_H
#define TG_TEST_SCHED_COMPARE_H

#include "tg-gen.h"
#include "tg-oracle-sched.h"
#include "tg-sched.h"
#include "tg-sim.h"

#include <stdbool.h>
#include <stdint.h>

#define SC_MAX_BACKENDS 4
#define MAX_PIPELINE (TG_SCHED_MAX_COPIES + 2)

/* The backends a scheduler gets: any, the last the CPU (the host). */
struct setup {
    tg_backend *backends[SC_MAX_BACKENDS];
    int n_backends;
    tg_sim_race *race;
    double max_nmse; /* results against the CPU-only run: 0 bit for bit, else float NMSE within it */
};

/* The reference: the case on the CPU alone, inputs from the oracle's filler. */
struct reference {
    struct tg_gen_case *c;
    tg_gallocr *galloc;
    /* filled values, saved before compute reuses the memory of leafs and inputs */
    void **leaf_values;
    void **node_values; /* input-flagged nodes only */
};

/* A decode of the case with its weights moved to random backends, unbound otherwise. */
struct scheduled {
    struct tg_gen_case *c;
    tg_buffer *moved[SC_MAX_BACKENDS];
    struct tg_oracle_sched_pin pins[64];
    int n_pins;
};

enum outcome { OUT_SKIPPED, OUT_SAME, OUT_DIFFERENT, OUT_ERROR };

/* One graph of a pipelined run: its results, fetched asynchronously. */
struct fetched {
    struct scheduled sc;
    bool computed;
    void **results; /* per node of the graph, NULL: not a result */
};

uint64_t sched_rng_next(uint64_t *s); /* splitmix64 */
/* The case of seed on the CPU alone; false when it has none or is not CPU-computable. */
bool reference_run(struct reference *ref, uint64_t seed, const struct tg_gen_options *opts);
void reference_free(struct reference *ref);
/* The same case again, its weights moved to random backends of su, random pins. */
bool scheduled_init(struct scheduled *sc, const struct reference *ref, const struct setup *su, uint64_t seed,
                    const struct tg_gen_options *opts);
void scheduled_free(struct scheduled *sc);
/* Allocates sc with s, checks the schedule, sets inputs from ref, computes,
 * compares every result with ref's (why says what differs). */
enum outcome run_one(tg_sched *s, const struct setup *su, struct scheduled *sc, const struct reference *ref,
                     char *why, size_t why_len);
/* k back-to-back graphs through s (pipeline copies), inputs set and results
 * fetched asynchronously, one synchronize, then compared; *n_same counts the
 * graphs that agreed. */
enum outcome run_pipelined(tg_sched *s, const struct setup *su, const struct reference *ref, uint64_t seed,
                           const struct tg_gen_options *opts, int k, int *n_same, char *why, size_t why_len);

#endif

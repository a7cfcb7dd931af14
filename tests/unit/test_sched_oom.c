/* Host memory running out inside the scheduler: whichever allocation fails
 * in tg_sched_new, reserve, alloc_graph, graph_compute (a first schedule, a
 * replayed one of a rebuilt graph), reset or free, the call says
 * TG_ERR_ALLOC (NULL for new), nothing leaks, and the scheduler goes on: the
 * same call made again once memory is back succeeds and computes what a
 * scheduler that never ran short computes.  With the CPU alone, and beside a
 * simulated device (asynchronous with events, synchronous, and under the race
 * detector, whose CPU is watched): the device's void entry points (async
 * copies, event records and waits, hand-overs) fall back to waiting on the
 * host, and a detector that ran short fails the run with TG_ERR_ALLOC rather
 * than pass it unchecked.  tg_test_oom.h fails the k-th allocation; without
 * it (sanitizers) the test is skipped. */
#include "tg_test_oom.h"

#include "sched_fixture.h"
#include "sim/sim-impl.h"

#ifdef OOM_CAN_FAIL

#define LEN 64

/* A weight in the device's memory: the muls that read it run there. */
static struct tg_tensor *weight;

struct net {
    struct tg_context *ctx;
    struct tg_tensor *a, *b, *out;
    struct tg_graph *graph;
};

/* out = sum of a chain that crosses the two backends several times. */
static void net_build(struct net *n) {
    n->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    n->a = tg_new_tensor_1d(n->ctx, TG_TYPE_F32, LEN);
    n->b = tg_new_tensor_1d(n->ctx, TG_TYPE_F32, LEN);
    tg_set_input(n->a);
    tg_set_input(n->b);
    struct tg_tensor *cur = n->a;
    for (int i = 0; i < 6; i++) {
        cur = tg_mul(n->ctx, weight, tg_mul(n->ctx, cur, n->b)); /* the device */
        cur = tg_add(n->ctx, cur, n->a);     /* the CPU */
        cur = tg_scale(n->ctx, cur, 0.5f);   /* the CPU */
    }
    n->out = cur;
    tg_set_output(n->out);
    n->graph = tg_graph_new(64);
    if (tg_graph_build_forward_expand(n->graph, n->out) != TG_OK) abort();
}

static void net_free(struct net *n) {
    tg_graph_free(n->graph);
    tg_context_free(n->ctx);
}

enum mode { CPU_ALONE, SIM_ASYNC, SIM_SYNCHRONOUS, SIM_RACE, N_MODES };
static const char *const mode_names[N_MODES] = {"the CPU alone", "an asynchronous sim device (parallel, events)",
                                                "a synchronous sim device", "a sim device under the race detector"};

/* The backends of one run, made and freed outside the count (fresh for each
 * k: a detector that ran short stays so). */
static enum mode mode;
static tg_backend *backends[2];
static int first_backend; /* 1: the CPU alone */
static tg_sim_race *race;
static struct tg_context *weights;
static tg_buffer *weight_buf;
static float want[LEN];
static int n_failed_calls, n_unchecked_runs;

static void backends_new(void) {
    long left = oom_pause();
    first_backend = mode == CPU_ALONE ? 1 : 0;
    race = mode == SIM_RACE ? tg_sim_race_new() : NULL;
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "dev";
    p.supported_ops_all = false;
    p.supported_ops[TG_OP_MUL] = true;
    p.synchronous = mode == SIM_SYNCHRONOUS;
    p.race = race;
    p.jitter_seed = mode == SIM_ASYNC ? 11 : 0;
    backends[0] = tg_backend_sim_new(&p);
    tg_backend *cpu = tg_backend_cpu_new();
    tg_backend_cpu_set_n_threads(cpu, 1);
    backends[1] = race ? tg_sim_watch_new(cpu, race, NULL) : cpu;
    weight_buf = fx_alloc(weights, backends[first_backend], TG_BUFFER_USAGE_WEIGHTS);
    if (!backends[0] || !backends[1] || !weight_buf) abort();
    fx_fill(weight, 3);
    oom_resume(left);
}

static void backends_free(void) {
    long left = oom_pause();
    tg_buffer_free(weight_buf);
    weight->data = NULL; /* bound afresh with the next backends */
    weight->buffer = NULL;
    tg_backend_free(backends[0]);
    tg_backend_free(backends[1]);
    tg_sim_race_free(race);
    oom_resume(left);
}

/* The detector ran short: the run is failed (TG_ERR_ALLOC) from then on, not checked. */
static bool run_unchecked(void) { return race && sim_race_out_of_memory(race); }

static void fill(struct net *n) {
    float a[LEN], b[LEN];
    for (int i = 0; i < LEN; i++) {
        a[i] = (float)i / 8.0f - 3.0f;
        b[i] = 1.0f - (float)(i % 5) / 4.0f;
    }
    CHECK_OK(tg_tensor_set(n->a, a, 0, sizeof a));
    CHECK_OK(tg_tensor_set(n->b, b, 0, sizeof b));
}

/* The inputs to set again before a compute is retried (NULL: not a compute).
 * A compute cut short may have run splits whose nodes reuse the memory of
 * inputs already read (as after one that succeeds): the caller sets them again. */
static struct net *inputs_of_step;

#define STEP(call, what)                                                                                   \
    do {                                                                                                   \
        enum tg_status st_ = (call);                                                                       \
        if (getenv("OOM_TRACE")) fprintf(stderr, "k=%ld %s: %s\n", k, what, tg_status_name(st_));        \
        if (st_ != TG_OK) {                                                                                \
            bool fired_ = oom_disarm();                                                                    \
            n_failed_calls++;                                                                              \
            CHECK_MSG((fired_ || run_unchecked()) && st_ == TG_ERR_ALLOC, "k=%ld %s: %s without a failed " \
                      "allocation, or not TG_ERR_ALLOC: %s", k, what, tg_status_name(st_), tg_last_error()); \
            CHECK_ERR_HAS("memory");                                                                       \
            if (run_unchecked()) break; /* no retry can pass: every compute says so */                     \
            if (inputs_of_step) {                                                                          \
                long left_ = oom_pause();                                                                  \
                fill(inputs_of_step);                                                                      \
                oom_resume(left_);                                                                         \
            }                                                                                              \
            enum tg_status again_ = (call);                                                                \
            CHECK_MSG(again_ == TG_OK, "k=%ld %s again: %s: %s", k, what, tg_status_name(again_),          \
                      tg_last_error());                                                                    \
        }                                                                                                  \
    } while (0)

static void check_out(struct net *n, long k, const char *what) {
    if (run_unchecked()) return; /* a compute refused: the output is stale */
    long left = oom_pause();
    float got[LEN];
    CHECK_OK(tg_tensor_get(n->out, got, 0, sizeof got));
    CHECK_MSG(memcmp(got, want, sizeof got) == 0, "k=%ld %s: wrong result", k, what);
    oom_resume(left);
}

/* Graphs are built and filled outside the count: their contexts are the
 * subject of another test. */
static bool scenario(long k, struct net *first, struct net *second) {
    long live0 = oom_live();
    backends_new();
    oom_fail_at(k);
    tg_sched *s = tg_sched_new(backends + first_backend, NULL, 2 - first_backend, 64, mode == SIM_ASYNC, false);
    if (!s) {
        bool fired = oom_disarm();
        CHECK_MSG(fired, "k=%ld: tg_sched_new failed with no allocation failed: %s", k, tg_last_error());
        backends_free();
        CHECK_MSG(oom_live() == live0, "k=%ld: failed tg_sched_new leaks %ld blocks", k, oom_live() - live0);
        return true;
    }
    STEP(tg_sched_reserve(s, first->graph), "reserve");
    STEP(tg_sched_alloc_graph(s, first->graph), "alloc_graph");
    long left = oom_pause();
    fill(first);
    oom_resume(left);
    inputs_of_step = first;
    STEP(tg_sched_graph_compute(s, first->graph), "graph_compute");
    inputs_of_step = NULL;
    check_out(first, k, "first");
    tg_sched_reset(s);
    /* the rebuilt graph: a replay of the schedule */
    STEP(tg_sched_alloc_graph(s, second->graph), "alloc_graph (replay)");
    left = oom_pause();
    fill(second);
    oom_resume(left);
    inputs_of_step = second;
    STEP(tg_sched_graph_compute(s, second->graph), "graph_compute (replay)");
    inputs_of_step = NULL;
    check_out(second, k, "replayed");
    tg_sched_reset(s);
    /* the first graph again: scheduled in full after the reset */
    STEP(tg_sched_alloc_graph(s, first->graph), "alloc_graph (again)");
    left = oom_pause();
    fill(first);
    oom_resume(left);
    inputs_of_step = first;
    STEP(tg_sched_graph_compute(s, first->graph), "graph_compute (again)");
    inputs_of_step = NULL;
    check_out(first, k, "again");
    tg_sched_free(s);
    bool fired = oom_disarm();
    if (race) {
        /* a race-free run: no race, or the detector ran short and says so */
        const bool short_of_memory = run_unchecked();
        n_unchecked_runs += short_of_memory;
        CHECK_MSG(tg_sim_race_count(race) == (short_of_memory ? 1 : 0), "k=%ld: %d race(s): %s", k,
                  tg_sim_race_count(race), tg_sim_race_report(race));
        CHECK(!short_of_memory || strstr(tg_sim_race_report(race), "out of host memory"));
    }
    backends_free();
    CHECK_MSG(oom_live() == live0, "k=%ld: %ld blocks leak", k, oom_live() - live0);
    return fired;
}

/* Forgets the bindings into the compute buffers of a scheduler now freed. */
static void unbind(struct net *n) {
    for (int i = 0; i < n->graph->n_nodes; i++) n->graph->nodes[i]->data = NULL, n->graph->nodes[i]->buffer = NULL;
    for (int i = 0; i < n->graph->n_leafs; i++) {
        if (n->graph->leafs[i] == weight) continue; /* in a buffer of its own */
        n->graph->leafs[i]->data = NULL;
        n->graph->leafs[i]->buffer = NULL;
    }
}
#endif

int main(void) {
#ifndef OOM_CAN_FAIL
    printf("skipped: this build's allocator cannot be replaced (a sanitizer owns it, or not glibc)\n");
    return 77;
#else
    if (!oom_injects()) return oom_skip_not_injecting();
    printf("scheduler out of memory\n"); /* stdout's buffer is allocated before any count */
    weights = tg_context_new((struct tg_context_params){.no_alloc = true});
    weight = tg_new_tensor_1d(weights, TG_TYPE_F32, LEN);
    struct net first, second;
    net_build(&first);
    net_build(&second);
    /* the modes past the first, or only the one OOM_MODE names */
    const char *only = getenv("OOM_MODE");
    for (int m = 0; m < N_MODES; m++) {
        if (only && atoi(only) != m) continue;
        mode = (enum mode)m;
        n_failed_calls = n_unchecked_runs = 0;
        unbind(&first);
        backends_new();
        tg_sched *s = tg_sched_new(backends + first_backend, NULL, 2 - first_backend, 64, mode == SIM_ASYNC, false);
        CHECK_OK(tg_sched_alloc_graph(s, first.graph));
        fill(&first);
        CHECK_OK(tg_sched_graph_compute(s, first.graph));
        CHECK_OK(tg_tensor_get(first.out, want, 0, sizeof want));
        CHECK(tg_sched_get_n_splits(s) >= (mode == CPU_ALONE ? 1 : 2));
        tg_sched_free(s);
        backends_free();

        long k = 0;
        for (; k < 200000; k = oom_next_k(k, 3000)) {
            unbind(&first);
            unbind(&second);
            if (!scenario(k, &first, &second)) break;
        }
        CHECK(k < 200000);
        printf("%s: %ld allocations, %d calls failed, %d runs the detector could not check\n", mode_names[m], k,
               n_failed_calls, n_unchecked_runs);
    }
    unbind(&first);
    unbind(&second);
    net_free(&first);
    net_free(&second);
    tg_context_free(weights);
    return tg_test_finish();
#endif
}

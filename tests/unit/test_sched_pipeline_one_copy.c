/* A scheduler with events but one copy per split input (made with parallel,
 * then tg_sched_set_n_copies(s, 1); or given 2 copies and then 1 again) runs
 * graphs back to back as docs/scheduler.md describes: reset, pin, alloc, set
 * inputs, compute_async, fetch the outputs asynchronously, no synchronize
 * between graphs.  With one copy a split input's copy is a planned node that
 * shares memory with other tensors of its backend, so the event recorded
 * after a split does not cover work queued on that backend later (a copy
 * from it to the next split's backend, the caller's async get): the host
 * once wrote the next graph's input over a tensor the previous graph's copy
 * was still reading.  Every configuration runs under the sim devices' race
 * detector (no race may be found) and again without it, with jitter, and
 * each graph's outputs must equal, bit for bit, those of a synchronous
 * scheduler (no parallel, tg_sched_graph_compute). */
#include "sched_fixture.h"

#define N_TOKENS 10
#define N_ELEMS 4096

/* a = scale(x) on g0 and c = a + a on g1 (the last split reads g0), x an
 * input: the host sets x's copy on g0 while g0 may still copy the previous
 * a (the same memory) to g1.  Three splits adds d = c * a back on g0, so g0
 * reads g1 too.  Device source: x is filled once in a buffer of g0, each
 * token scales it by its own factor, and c = a / 2 in place of a's copy on
 * g1: g0 copies the next a there while g1 may still be reading the previous
 * c for the caller's async get. */
enum shape { SHAPE_TWO_SPLITS, SHAPE_THREE_SPLITS, SHAPE_DEVICE_SOURCE, SHAPE_COUNT };
static const char *const shape_names[SHAPE_COUNT] = {"two splits", "three splits", "device source"};

struct config {
    const char *name;
    bool parallel;
    int n_copies[2]; /* set in this order (0: not set) */
};

struct token_graph {
    struct tg_context *ctx;
    struct tg_graph *g;
    struct tg_tensor *x, *a, *outs[2];
    int n_outs;
};

/* device_x: the source x of SHAPE_DEVICE_SOURCE, else NULL. */
static struct token_graph build(enum shape shape, int token, struct tg_tensor *device_x) {
    struct token_graph t = {0};
    t.ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    if (device_x) {
        t.x = device_x;
    } else {
        t.x = tg_new_tensor_1d(t.ctx, TG_TYPE_F32, N_ELEMS);
        tg_set_name(t.x, "x");
        tg_set_input(t.x);
    }
    struct tg_tensor *a = t.a = tg_scale(t.ctx, t.x, device_x ? (float)(token + 2) : 2.0f);
    tg_set_name(a, "a");
    /* scale computes in place: c takes the memory of a's copy */
    struct tg_tensor *c = device_x ? tg_scale(t.ctx, a, 0.5f) : tg_add(t.ctx, a, a);
    tg_set_name(c, "c");
    tg_set_output(c);
    t.outs[t.n_outs++] = c;
    if (shape == SHAPE_THREE_SPLITS) {
        struct tg_tensor *d = tg_mul(t.ctx, c, a);
        tg_set_name(d, "d");
        tg_set_output(d);
        t.outs[t.n_outs++] = d;
    }
    t.g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(t.g, t.outs[t.n_outs - 1]));
    return t;
}

static void pin(tg_sched *s, struct token_graph *t, tg_backend *g0, tg_backend *g1) {
    tg_sched_set_tensor_backend(s, t->a, g0);
    tg_sched_set_tensor_backend(s, t->outs[0], g1);                     /* c */
    if (t->n_outs == 2) tg_sched_set_tensor_backend(s, t->outs[1], g0); /* d */
}

static void drop(struct token_graph *t) {
    tg_graph_free(t->g);
    tg_context_free(t->ctx);
}

typedef float outputs[N_TOKENS][2][N_ELEMS];

/* Runs the tokens on s and puts their outputs in out: synchronously
 * (tg_sched_graph_compute, then reads), or back to back (compute_async, async
 * gets, one synchronize at the end).  A token that fails stops the run. */
static void run_tokens(tg_sched *s, enum shape shape, tg_backend *g0, tg_backend *g1, bool synchronous, outputs out,
                       const char *what) {
    memset(out, 0xff, sizeof(outputs)); /* NaN: a token never fetched differs */
    tg_backend *out_backend[2] = {g1, g0};
    struct tg_context *xctx = NULL;
    tg_buffer *xbuf = NULL;
    struct tg_tensor *device_x = NULL;
    if (shape == SHAPE_DEVICE_SOURCE) {
        xctx = tg_context_new((struct tg_context_params){.no_alloc = true});
        device_x = tg_new_tensor_1d(xctx, TG_TYPE_F32, N_ELEMS);
        tg_set_name(device_x, "x");
        xbuf = fx_alloc(xctx, g0, TG_BUFFER_USAGE_WEIGHTS);
        CHECK(xbuf != NULL);
        if (xbuf) fx_fill(device_x, 7);
    }
    for (int k = 0; s && (xbuf || !device_x) && k < N_TOKENS; k++) {
        struct token_graph t = build(shape, k, device_x);
        tg_sched_reset(s);
        pin(s, &t, g0, g1);
        enum tg_status st = tg_sched_alloc_graph(s, t.g);
        CHECK_MSG(st == TG_OK, "%s: alloc of token %d: %s", what, k, tg_last_error());
        if (st == TG_OK) {
            if (!device_x) fx_fill(t.x, (unsigned)k + 1);
            st = synchronous ? tg_sched_graph_compute(s, t.g) : tg_sched_graph_compute_async(s, t.g);
            CHECK_MSG(st == TG_OK, "%s: compute of token %d: %s", what, k, tg_last_error());
        }
        for (int o = 0; st == TG_OK && o < t.n_outs; o++) {
            if (synchronous) CHECK_OK(tg_tensor_get(t.outs[o], out[k][o], 0, sizeof out[k][o]));
            else tg_backend_tensor_get_async(out_backend[o], t.outs[o], out[k][o], 0, sizeof out[k][o]);
        }
        tg_sched_reset(s);
        drop(&t);
        if (st != TG_OK) break;
    }
    if (s) tg_sched_synchronize(s);
    tg_buffer_free(xbuf);
    tg_context_free(xctx);
}

static int n_outputs(enum shape shape) { return shape == SHAPE_THREE_SPLITS ? 2 : 1; }

/* What a synchronous scheduler (no parallel) computes. */
static void reference(enum shape shape, outputs ref) {
    tg_backend *g0 = fx_sim("g0", true, NULL, 0), *g1 = fx_sim("g1", true, NULL, 0), *cpu = tg_backend_cpu_new();
    tg_backend *backends[3] = {g0, g1, cpu};
    tg_sched *s = tg_sched_new(backends, NULL, 3, 64, false, false);
    CHECK(s != NULL);
    run_tokens(s, shape, g0, g1, true, ref, "reference");
    for (int k = 0; k < N_TOKENS; k++) {
        for (int o = 0; o < n_outputs(shape); o++) CHECK(ref[k][o][0] == ref[k][o][0]); /* computed */
    }
    tg_sched_free(s);
    tg_backend_free(g0);
    tg_backend_free(g1);
    tg_backend_free(cpu);
}

/* cfg's scheduler runs the tokens back to back: every token's outputs equal
 * ref's, and with the race detector no access races. */
static void check_config(const struct config *cfg, enum shape shape, bool with_race, uint64_t seed,
                         const outputs ref) {
    char what[160];
    snprintf(what, sizeof what, "%s, %s, %s, seed %llu", cfg->name, shape_names[shape],
             with_race ? "race detector" : "no detector", (unsigned long long)seed);
    tg_sim_race *race = with_race ? tg_sim_race_new() : NULL;
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.race = race;
    p.jitter_seed = seed;
    p.name = "g0";
    tg_backend *g0 = tg_backend_sim_new(&p);
    p.name = "g1";
    p.jitter_seed = seed * 3 + 1;
    tg_backend *g1 = tg_backend_sim_new(&p);
    tg_backend *cpu = race ? tg_sim_watch_new(tg_backend_cpu_new(), race, NULL) : tg_backend_cpu_new();
    tg_backend *backends[3] = {g0, g1, cpu};
    tg_sched *s = tg_sched_new(backends, NULL, 3, 64, cfg->parallel, false);
    CHECK(s != NULL);
    for (int i = 0; s && i < 2 && cfg->n_copies[i]; i++) CHECK_OK(tg_sched_set_n_copies(s, cfg->n_copies[i]));

    static outputs out;
    run_tokens(s, shape, g0, g1, false, out, what);
    int wrong = 0;
    for (int k = 0; k < N_TOKENS; k++) {
        bool same = true;
        for (int o = 0; o < n_outputs(shape); o++) same = same && fx_same_bits(out[k][o], ref[k][o], N_ELEMS);
        wrong += !same;
    }
    CHECK_MSG(wrong == 0, "%s: %d of %d tokens differ from the synchronous scheduler", what, wrong, N_TOKENS);
    if (race) {
        CHECK_MSG(tg_sim_race_count(race) == 0, "%s: %d race(s): %s", what, tg_sim_race_count(race),
                  tg_sim_race_report(race));
    }
    tg_sched_free(s);
    tg_backend_free(g0);
    tg_backend_free(g1);
    tg_backend_free(cpu);
    tg_sim_race_free(race);
}

int main(void) {
    static const struct config configs[] = {
        {"parallel, 1 copy", true, {1, 0}},
        {"no parallel, 2 copies then 1", false, {2, 1}},
        {"parallel, 4 copies then 1", true, {4, 1}},
        /* the paths the fix leaves alone */
        {"no parallel", false, {0, 0}},
        {"parallel, 2 copies", true, {2, 0}},
        {"parallel", true, {0, 0}},
    };
    static outputs ref;
    for (int sh = 0; sh < SHAPE_COUNT; sh++) {
        reference((enum shape)sh, ref);
        for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
            for (uint64_t seed = 1; seed <= 3; seed++) {
                check_config(&configs[c], (enum shape)sh, true, seed, ref);
                check_config(&configs[c], (enum shape)sh, false, seed, ref);
            }
        }
    }
    return tg_test_finish();
}

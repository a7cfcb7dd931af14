/* Self-tests of the sim race detector against the scheduler: every place the
 * scheduler orders work (an event record, a wait, a synchronize, the queue a
 * split-input copy is issued on: impl/sched-sync.h) is left out in turn with
 * the test-only tg_sched_testing_drop, and a scenario that needs it must then
 * be reported as a race; with nothing left out every scenario runs clean and
 * computes the values derived by hand.
 *
 * Scenarios: small graphs rebuilt per token and computed back to back
 * (compute_async, results fetched asynchronously, one synchronize at the end)
 * on sim devices with memory of their own (sim0, sim1), a sim sharing the
 * host's buffer type (shared), and the CPU watched as the host.  The devices
 * run synchronously, then again on jittered worker threads: the detector
 * judges the order work is issued in, never timing, so both give the same
 * report, word for word.  (Not under ThreadSanitizer: with a wait left out,
 * the worker threads really race, which it would stop at.) */
#include "sched-sync.h"
#include "tg-cpu.h"
#include "tg-gen.h"
#include "tg-sched.h"
#include "tg-sim.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdio.h>

#define N 1024 /* elements of the first shape's tensors; the second has N / 2 */
#define MAX_TOKENS 8

enum shape {
    ONE_DEVICE,   /* out = x * w0 on sim0 */
    TWO_DEVICES,  /* a = x * w0 on sim0, out = a + w1 on sim1 */
    TWO_SWAPPED,  /* the same, half the size, operands swapped: a new plan */
    SHARED_FIRST, /* a = x * x on shared, out = a + a on the host */
    SHARED_LAST,  /* a = x + x on the host, out = a * a on shared */
    DEVICE_INPUT, /* TWO_DEVICES with x pinned to sim0 and set synchronously (as ggml's tensor_set) */
};

enum mode {
    ASYNC,     /* compute_async, results fetched asynchronously */
    SYNC_READ, /* graph_compute, then a synchronous read of the result */
    CALLBACK,  /* graph_compute with an eval callback reading every node */
};

struct scenario {
    const char *name;
    enum shape first, second; /* the shape of the first n_first tokens, then of the rest */
    int n_first, n_tokens;
    int n_copies; /* 1: no pipeline copies (no events) */
    enum mode mode;
    bool reserve_second; /* tg_sched_reserve with the second shape before its first token */
};

/* ---- the rig -------------------------------------------------------------------------------- */

struct rig {
    tg_sim_race *race;
    tg_backend *sim0, *sim1, *shared, *host;
    tg_backend *backends[4];
    int n_backends;
    struct tg_context *ctx0, *ctx1;
    struct tg_tensor *w0, *w1, *w0h, *w1h; /* w0 on sim0, w1 on sim1; halves for the second shape */
    tg_buffer *buf0, *buf1;
};

static float w0_at(int64_t i) { return 1.0f + (float)(i % 7); }
static float w1_at(int64_t i) { return 100.0f + (float)(i % 7); }
static float x_at(int token, int64_t i) { return (float)token + (float)(i % 5); }

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static bool with_workers; /* the devices run on worker threads, jittered */

static tg_backend *sim(const char *name, tg_sim_race *race, bool shares_host) {
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = name;
    p.race = race;
    p.synchronous = !with_workers;
    p.jitter_seed = with_workers ? 29 : 0;
    p.share_host_buffer_type = shares_host;
    return tg_backend_sim_new(&p);
}

static void fill(struct tg_tensor *t, float (*at)(int64_t)) {
    int64_t n = tg_nelements(t);
    float v[N];
    for (int64_t i = 0; i < n; i++) v[i] = at(i);
    CHECK_OK(tg_tensor_set(t, v, 0, (size_t)n * sizeof *v));
}

static tg_buffer *weights(struct tg_context *ctx, tg_backend *b) {
    enum tg_status st;
    tg_buffer *buf = tg_alloc_ctx_tensors_for_backend(ctx, b, &st);
    CHECK(buf != NULL);
    if (buf) tg_buffer_set_usage(buf, TG_BUFFER_USAGE_WEIGHTS);
    return buf;
}

static void rig_init(struct rig *r) {
    memset(r, 0, sizeof *r);
    r->race = tg_sim_race_new();
    r->backends[r->n_backends++] = r->sim0 = sim("sim0", r->race, false);
    r->backends[r->n_backends++] = r->sim1 = sim("sim1", r->race, false);
    r->backends[r->n_backends++] = r->shared = sim("shared", r->race, true);
    r->backends[r->n_backends++] = r->host = tg_sim_watch_new(tg_backend_cpu_new(), r->race, NULL);
    r->ctx0 = tg_context_new((struct tg_context_params){.no_alloc = true});
    r->ctx1 = tg_context_new((struct tg_context_params){.no_alloc = true});
    r->w0 = tg_new_tensor_1d(r->ctx0, TG_TYPE_F32, N);
    r->w0h = tg_new_tensor_1d(r->ctx0, TG_TYPE_F32, N / 2);
    r->w1 = tg_new_tensor_1d(r->ctx1, TG_TYPE_F32, N);
    r->w1h = tg_new_tensor_1d(r->ctx1, TG_TYPE_F32, N / 2);
    r->buf0 = weights(r->ctx0, r->sim0);
    r->buf1 = weights(r->ctx1, r->sim1);
    fill(r->w0, w0_at);
    fill(r->w0h, w0_at);
    fill(r->w1, w1_at);
    fill(r->w1h, w1_at);
}

static void rig_free(struct rig *r) {
    tg_buffer_free(r->buf0);
    tg_buffer_free(r->buf1);
    tg_context_free(r->ctx0);
    tg_context_free(r->ctx1);
    for (int i = 0; i < r->n_backends; i++) tg_backend_free(r->backends[i]);
    tg_sim_race_free(r->race);
}

/* ---- tokens --------------------------------------------------------------------------------- */

struct token {
    struct tg_context *ctx;
    struct tg_graph *g;
    struct tg_tensor *x, *a, *out;
    tg_backend *pin_x, *pin_a, *pin_out; /* NULL: the scheduler decides */
    int64_t n;
    float want[N], got[N], x_values[N];
};

static void token_build(struct token *t, const struct rig *r, enum shape shape, int token) {
    memset(t, 0, sizeof *t);
    t->n = shape == TWO_SWAPPED ? N / 2 : N;
    t->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    t->x = tg_new_tensor_1d(t->ctx, TG_TYPE_F32, t->n);
    tg_set_name(t->x, "x");
    tg_set_input(t->x);
    switch (shape) {
    case ONE_DEVICE: t->out = tg_mul(t->ctx, t->x, r->w0); break;
    case DEVICE_INPUT: t->pin_x = r->sim0; /* fall through */
    case TWO_DEVICES:
        t->a = tg_mul(t->ctx, t->x, r->w0);
        t->out = tg_add(t->ctx, t->a, r->w1);
        break;
    case TWO_SWAPPED:
        t->a = tg_mul(t->ctx, r->w0h, t->x);
        t->out = tg_add(t->ctx, r->w1h, t->a);
        break;
    case SHARED_FIRST:
        t->a = tg_mul(t->ctx, t->x, t->x);
        t->out = tg_add(t->ctx, t->a, t->a);
        t->pin_a = r->shared;
        t->pin_out = r->host;
        break;
    case SHARED_LAST:
        t->a = tg_add(t->ctx, t->x, t->x);
        t->out = tg_mul(t->ctx, t->a, t->a);
        t->pin_a = r->host;
        t->pin_out = r->shared;
        break;
    }
    if (t->a) tg_set_name(t->a, "a");
    tg_set_name(t->out, "out");
    tg_set_output(t->out);
    t->g = tg_graph_new(16);
    CHECK_OK(tg_graph_build_forward_expand(t->g, t->out));
    for (int64_t i = 0; i < t->n; i++) {
        float x = t->x_values[i] = x_at(token, i);
        switch (shape) {
        case ONE_DEVICE: t->want[i] = x * w0_at(i); break;
        case TWO_DEVICES:
        case DEVICE_INPUT:
        case TWO_SWAPPED: t->want[i] = x * w0_at(i) + w1_at(i); break;
        case SHARED_FIRST: t->want[i] = 2.0f * x * x; break;
        case SHARED_LAST: t->want[i] = 4.0f * x * x; break;
        }
    }
}

static void token_free(struct token *t) {
    tg_graph_free(t->g);
    tg_context_free(t->ctx);
}

/* The eval callback of CALLBACK: reads every node it is shown. */
static bool read_node(struct tg_tensor *t, bool ask, void *user) {
    (void)user;
    if (ask) return true;
    float v[N];
    return tg_tensor_get(t, v, 0, tg_nbytes(t)) == TG_OK;
}

/* Runs the scenario with site left out (TG_SCHED_SYNC_COUNT: nothing); the
 * races found, and in *values_ok whether every computed token got its values. */
static int run(const struct scenario *sc, enum tg_sched_sync_site site, bool *values_ok, char *report, size_t len) {
    struct rig r;
    rig_init(&r);
    tg_sched *s = tg_sched_new(r.backends, NULL, r.n_backends, 64, sc->n_copies > 1, false);
    CHECK(s != NULL && tg_sched_set_n_copies(s, sc->n_copies) == TG_OK);
    tg_sched_testing_drop(s, site);
    if (sc->mode == CALLBACK) tg_sched_set_eval_callback(s, read_node, NULL);
    static struct token tokens[MAX_TOKENS];
    struct token measure;
    int n_built = 0, n_computed = 0;
    bool failed = false, measured = false;
    for (int k = 0; k < sc->n_tokens && !failed; k++) {
        enum shape shape = k < sc->n_first ? sc->first : sc->second;
        if (k == sc->n_first && sc->reserve_second) {
            token_build(&measure, &r, shape, 0);
            measured = true;
            CHECK_OK(tg_sched_reserve(s, measure.g));
        }
        struct token *t = &tokens[n_built++];
        token_build(t, &r, shape, k);
        tg_sched_reset(s); /* as llama.cpp does per batch: no synchronize */
        if (t->pin_x) tg_sched_set_tensor_backend(s, t->x, t->pin_x);
        if (t->pin_a) tg_sched_set_tensor_backend(s, t->a, t->pin_a);
        if (t->pin_out) tg_sched_set_tensor_backend(s, t->out, t->pin_out);
        CHECK_OK(tg_sched_alloc_graph(s, t->g));
        if (t->pin_x) CHECK_OK(tg_tensor_set(t->x, t->x_values, 0, tg_nbytes(t->x)));
        else tg_gen_set_async(t->x, t->x_values, r.host);
        enum tg_status st = sc->mode == ASYNC ? tg_sched_graph_compute_async(s, t->g) : tg_sched_graph_compute(s, t->g);
        if (st != TG_OK) {
            failed = true; /* a race found earlier fails the sim devices' computes */
            break;
        }
        if (sc->mode == ASYNC) tg_backend_tensor_get_async(tg_gen_memory_queue(t->out, r.host), t->out, t->got, 0, tg_nbytes(t->out));
        else CHECK_OK(tg_tensor_get(t->out, t->got, 0, tg_nbytes(t->out)));
        n_computed++;
    }
    tg_sched_synchronize(s);
    int races = tg_sim_race_count(r.race);
    *values_ok = true; /* judged only without a race: a race leaves the values undefined */
    for (int k = 0; races == 0 && k < n_computed; k++)
        *values_ok = *values_ok && memcmp(tokens[k].got, tokens[k].want, (size_t)tokens[k].n * sizeof(float)) == 0;
    snprintf(report, len, "%s", tg_sim_race_report(r.race));
    tg_sched_free(s);
    for (int k = 0; k < n_built; k++) token_free(&tokens[k]);
    if (measured) token_free(&measure);
    rig_free(&r);
    return races;
}

/* ---- the checks ------------------------------------------------------------------------------ */

static const struct scenario scenarios[] = {
    {"one device, 2 copies", ONE_DEVICE, ONE_DEVICE, 4, 4, 2, ASYNC, false},
    {"one device, no copies", ONE_DEVICE, ONE_DEVICE, 3, 3, 1, ASYNC, false},
    {"two devices, 2 copies", TWO_DEVICES, TWO_DEVICES, 4, 4, 2, ASYNC, false},
    {"two devices, 4 copies", TWO_DEVICES, TWO_DEVICES, 6, 6, 4, ASYNC, false},
    {"two devices, no copies", TWO_DEVICES, TWO_DEVICES, 3, 3, 1, ASYNC, false},
    {"shared first, 2 copies", SHARED_FIRST, SHARED_FIRST, 3, 3, 2, ASYNC, false},
    {"shared first, no copies", SHARED_FIRST, SHARED_FIRST, 3, 3, 1, ASYNC, false},
    {"shared last, 2 copies", SHARED_LAST, SHARED_LAST, 3, 3, 2, ASYNC, false},
    {"shared last, no copies", SHARED_LAST, SHARED_LAST, 3, 3, 1, ASYNC, false},
    {"re-planned after 2 tokens", TWO_DEVICES, TWO_SWAPPED, 2, 4, 2, ASYNC, false},
    {"re-planned after 3 tokens", TWO_DEVICES, TWO_SWAPPED, 3, 5, 2, ASYNC, false},
    {"reserved after 2 tokens", TWO_DEVICES, TWO_SWAPPED, 2, 4, 2, ASYNC, true},
    {"reserved after 3 tokens", TWO_DEVICES, TWO_SWAPPED, 3, 5, 2, ASYNC, true},
    {"one device, read after compute", ONE_DEVICE, ONE_DEVICE, 2, 2, 2, SYNC_READ, false},
    {"one device, eval callback", ONE_DEVICE, ONE_DEVICE, 2, 2, 1, CALLBACK, false},
    {"input on a device, 2 copies", DEVICE_INPUT, DEVICE_INPUT, 3, 3, 2, ASYNC, false},
    {"input on a device, no copies", DEVICE_INPUT, DEVICE_INPUT, 3, 3, 1, ASYNC, false},
};
#define N_SCENARIOS ((int)(sizeof scenarios / sizeof scenarios[0]))

/* Host addresses differ from run to run: "0x..." becomes "0x?". */
static void without_addresses(char *s) {
    char *out = s;
    for (const char *in = s; *in;) {
        if (in[0] == '0' && in[1] == 'x' && ((in[2] >= '0' && in[2] <= '9') || (in[2] >= 'a' && in[2] <= 'f'))) {
            for (in += 2; (*in >= '0' && *in <= '9') || (*in >= 'a' && *in <= 'f');) in++;
            memcpy(out, "0x?", 3); /* at least three characters were read */
            out += 3;
        } else {
            *out++ = *in++;
        }
    }
    *out = '\0';
}

/* Each scenario with site left out: the names of those reported, and the first report. */
static int caught_by(enum tg_sched_sync_site site, char *names, size_t names_len, char *first, size_t first_len) {
    int caught = 0;
    names[0] = first[0] = '\0';
    for (int i = 0; i < N_SCENARIOS; i++) {
        bool values_ok;
        char report[1600];
        if (run(&scenarios[i], site, &values_ok, report, sizeof report) == 0) continue;
        if (!caught++) {
            snprintf(first, first_len, "%s", report);
            without_addresses(first);
        }
        size_t at = strlen(names);
        snprintf(names + at, names_len - at, "%s'%s'", at ? ", " : "", scenarios[i].name);
    }
    return caught;
}

int main(void) {
    /* with nothing left out: clean, right values, on the host thread and on workers */
    for (int workers = 0; workers < 2; workers++) {
        with_workers = workers;
        for (int i = 0; i < N_SCENARIOS; i++) {
            bool values_ok;
            char report[1600];
            int races = run(&scenarios[i], TG_SCHED_SYNC_COUNT, &values_ok, report, sizeof report);
            CHECK_MSG(races == 0, "scenario '%s' races with nothing left out: %s", scenarios[i].name, report);
            CHECK_MSG(values_ok, "scenario '%s' computed wrong values%s", scenarios[i].name, workers ? " on workers" : "");
        }
    }
    /* each site left out: some scenario must be reported */
    for (int site = 0; site < TG_SCHED_SYNC_COUNT; site++) {
        const char *name = tg_sched_sync_site_name((enum tg_sched_sync_site)site);
        char names[512], first[1600];
        with_workers = false;
        int caught = caught_by((enum tg_sched_sync_site)site, names, sizeof names, first, sizeof first);
        CHECK_MSG(caught > 0, "leaving out '%s' is caught by no scenario", name);
        printf("%-13s caught by %s\n%s\n", name, names, first);
#ifndef UNDER_TSAN
        char names_workers[512], first_workers[1600];
        with_workers = true;
        caught_by((enum tg_sched_sync_site)site, names_workers, sizeof names_workers, first_workers, sizeof first_workers);
        CHECK_MSG(strcmp(names, names_workers) == 0 && strcmp(first, first_workers) == 0,
                  "leaving out '%s': the verdict on worker threads differs: %s\n%s", name, names_workers, first_workers);
#endif
    }
    return tg_test_finish();
}

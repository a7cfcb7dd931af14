/* Host memory running out inside the simulated device: its void entry
 * points (async set and get, a copy between two devices with its hand-over,
 * event record and wait) cannot report, so without memory for a queue item
 * they wait on the host instead, keeping every order the item would have
 * kept; graph_compute says TG_ERR_ALLOC and queues nothing; a race detector
 * or trace that ran short fails the run (TG_ERR_ALLOC, a race of its own, a
 * trace text that says so) rather than pass it unchecked.  Whichever
 * allocation fails: no abort, nothing leaks, and the result is right (a
 * compute refused is made again).  tg_test_oom.h fails the k-th allocation;
 * without it (sanitizers) the test is skipped. */
#include "tg_test_oom.h"

#include "sched_fixture.h"
#include "sim/sim-impl.h"

#ifdef OOM_CAN_FAIL

#define LEN 256

enum mode { ASYNC, SYNCHRONOUS, RACE, N_MODES };
static const char *const mode_names[N_MODES] = {"asynchronous devices", "synchronous devices",
                                                "asynchronous devices, race detector and trace"};

struct rig {
    tg_sim_race *race;
    tg_sim_trace *trace;
    tg_backend *a, *b;
    struct tg_context *ctx_a, *ctx_b;
    struct tg_tensor *x, *y, *z, *w; /* x, y on a; z, w on b */
    tg_buffer *buf_a, *buf_b;
    struct tg_graph *on_a, *on_b; /* y = x * x on a, w = z + z on b */
    tg_event *done_a;
};

/* Made and freed outside the count. */
static void rig_new(struct rig *r, enum mode mode) {
    long left = oom_pause();
    *r = (struct rig){0};
    r->race = mode == RACE ? tg_sim_race_new() : NULL;
    r->trace = mode == RACE ? tg_sim_trace_new() : NULL;
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.synchronous = mode == SYNCHRONOUS;
    p.race = r->race;
    p.jitter_seed = mode == SYNCHRONOUS ? 0 : 5;
    p.name = "A";
    tg_backend *a = tg_backend_sim_new(&p);
    p.name = "B";
    tg_backend *b = tg_backend_sim_new(&p);
    r->a = r->trace ? tg_sim_watch_new(a, r->race, r->trace) : a;
    r->b = r->trace ? tg_sim_watch_new(b, r->race, r->trace) : b;
    r->ctx_a = tg_context_new((struct tg_context_params){.no_alloc = true});
    r->x = tg_new_tensor_1d(r->ctx_a, TG_TYPE_F32, LEN);
    r->y = tg_mul(r->ctx_a, r->x, r->x);
    r->buf_a = tg_alloc_ctx_tensors_for_backend(r->ctx_a, r->a, NULL);
    r->ctx_b = tg_context_new((struct tg_context_params){.no_alloc = true});
    r->z = tg_new_tensor_1d(r->ctx_b, TG_TYPE_F32, LEN);
    r->w = tg_add(r->ctx_b, r->z, r->z);
    r->buf_b = tg_alloc_ctx_tensors_for_backend(r->ctx_b, r->b, NULL);
    r->on_a = tg_graph_new(8);
    r->on_b = tg_graph_new(8);
    r->done_a = tg_event_new(r->a);
    if (!a || !b || !r->buf_a || !r->buf_b || !r->done_a || tg_graph_build_forward_expand(r->on_a, r->y) != TG_OK ||
        tg_graph_build_forward_expand(r->on_b, r->w) != TG_OK)
        abort();
    oom_resume(left);
}

static void rig_free(struct rig *r) {
    long left = oom_pause();
    tg_event_free(r->done_a);
    tg_graph_free(r->on_a);
    tg_graph_free(r->on_b);
    tg_buffer_free(r->buf_a);
    tg_buffer_free(r->buf_b);
    tg_context_free(r->ctx_a);
    tg_context_free(r->ctx_b);
    tg_backend_free(r->a);
    tg_backend_free(r->b);
    tg_sim_race_free(r->race);
    tg_sim_trace_free(r->trace);
    oom_resume(left);
}

static bool warming_up;

static bool detector_short(const struct rig *r) { return r->race && sim_race_out_of_memory(r->race); }

/* A compute: TG_OK, or TG_ERR_ALLOC and made again (unless the detector ran
 * short: then every compute says so, and the run is over). */
static bool compute(const struct rig *r, tg_backend *on, struct tg_graph *g, long k, const char *what) {
    enum tg_status st = tg_backend_graph_compute(on, g);
    if (st == TG_OK) return true;
    CHECK_MSG(st == TG_ERR_ALLOC, "k=%ld %s: %s: %s", k, what, tg_status_name(st), tg_last_error());
    CHECK_ERR_HAS("out of host memory");
    if (detector_short(r)) return false;
    st = tg_backend_graph_compute(on, g);
    CHECK_MSG(st == TG_OK, "k=%ld %s again: %s: %s", k, what, tg_status_name(st), tg_last_error());
    return st == TG_OK;
}

/* host -> x on a; y = x * x on a; b waits for a; y -> z (a's queue, handed
 * over to b); w = z + z on b; w -> host.  Returns whether the allocation
 * failed. */
static bool run(enum mode mode, long k, const float *in, const float *want) {
    long live0 = oom_live();
    struct rig r;
    rig_new(&r, mode);
    float out[LEN];
    memset(out, 0, sizeof out);
    oom_fail_at(k);
    tg_backend_tensor_set_async(r.a, r.x, in, 0, sizeof out);
    bool whole = compute(&r, r.a, r.on_a, k, "compute on A");
    tg_event_record(r.done_a, r.a);
    tg_event_wait(r.b, r.done_a);
    enum tg_status st = tg_backend_tensor_copy_async(r.a, r.b, r.y, r.z);
    CHECK_MSG(st == TG_OK, "k=%ld copy: %s: %s", k, tg_status_name(st), tg_last_error());
    whole = whole && compute(&r, r.b, r.on_b, k, "compute on B");
    tg_backend_tensor_get_async(r.b, r.w, out, 0, sizeof out);
    tg_backend_synchronize(r.b);
    bool fired = oom_disarm();
    CHECK_OK(tg_sim_synchronize(r.a));
    CHECK_OK(tg_sim_synchronize(r.b));
    if (detector_short(&r)) {
        /* the run fails: a race of its own that names the cause */
        CHECK_MSG(tg_sim_race_count(r.race) == 1 && strstr(tg_sim_race_report(r.race), "out of host memory"),
                  "k=%ld: a detector short of memory: %d race(s): %s", k, tg_sim_race_count(r.race),
                  tg_sim_race_report(r.race));
    } else {
        CHECK_MSG(whole && memcmp(out, want, sizeof out) == 0, "k=%ld: wrong result", k);
        if (r.race) CHECK_MSG(tg_sim_race_count(r.race) == 0, "k=%ld: %s", k, tg_sim_race_report(r.race));
    }
    if (r.trace && !detector_short(&r)) {
        /* all the calls, or a text that says some are missing: never a protocol cut short */
        const char *text = tg_sim_trace_text(r.trace);
        CHECK_MSG(strstr(text, "out of host memory") || (strstr(text, "compute b0") && strstr(text, "compute b1")),
                  "k=%ld: trace cut short:\n%s", k, text);
    }
    rig_free(&r);
    CHECK_MSG(warming_up || oom_live() == live0, "%s, k=%ld: %ld blocks leak", mode_names[mode], k, oom_live() - live0);
    return fired;
}
#endif

int main(void) {
#ifndef OOM_CAN_FAIL
    printf("skipped: this build's allocator cannot be replaced (a sanitizer owns it, or not glibc)\n");
    return 77;
#else
    if (!oom_injects()) return oom_skip_not_injecting();
    printf("sim device out of memory\n"); /* stdout's buffer is allocated before any count */
    float in[LEN], want[LEN];
    for (int i = 0; i < LEN; i++) {
        in[i] = (float)(i % 17) / 4.0f - 2.0f;
        want[i] = in[i] * in[i] + in[i] * in[i];
    }
    /* a whole run first: what the process makes once (a thread's first error message) is made */
    warming_up = true;
    run(ASYNC, -1, in, want);
    warming_up = false;
    for (int m = 0; m < N_MODES; m++) {
        long k = 0;
        for (; k < 100000 && run((enum mode)m, k, in, want); k++) {}
        CHECK(k < 100000);
        printf("%s: %ld allocations\n", mode_names[m], k);
    }
    return tg_test_finish();
#endif
}

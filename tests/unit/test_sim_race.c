/* The sim devices' race detector on hand-built sequences, each with the
 * verdict derived by hand from the rules (tg-sim.h): racy ones must be
 * reported, naming both operations and tensors, race-free ones must not.
 * First the detector alone on made-up addresses (clocks, events, byte
 * ranges), then real devices (queues, copies, events, host access, frees). */
#include "sched_fixture.h"
#include "sim/sim-impl.h"

#include <stdint.h>

/* ---- the detector alone --------------------------------------------------------------- */

static struct sim_race_access rw(uintptr_t lo, uintptr_t hi, bool write, const char *tensor) {
    return (struct sim_race_access){lo, hi, write, tensor, write ? "writing" : "reading"};
}

static void issue(tg_sim_race *r, int q, uintptr_t lo, uintptr_t hi, bool write, const char *tensor) {
    struct sim_race_access a = rw(lo, hi, write, tensor);
    sim_race_issue(r, q, &a, 1);
}

static void host(tg_sim_race *r, uintptr_t lo, uintptr_t hi, bool write, const char *tensor) {
    struct sim_race_access a = rw(lo, hi, write, tensor);
    sim_race_host(r, &a, 1);
}

#define EXPECT_RACES(r, n, what) CHECK_MSG(tg_sim_race_count(r) == (n), "%s: %d race(s), want %d; %s", what, \
                                           tg_sim_race_count(r), n, tg_sim_race_report(r))

/* Two queues and the host on made-up addresses 1000.. : each step's verdict
 * follows from which edges exist. */
static void test_clocks(void) {
    tg_sim_race *r = tg_sim_race_new();
    int q1 = sim_race_queue_new(r, "q1"), q2 = sim_race_queue_new(r, "q2");
    issue(r, q1, 1000, 1100, true, "a");
    issue(r, q1, 1050, 1060, false, "a"); /* same queue: ordered */
    EXPECT_RACES(r, 0, "queue order");
    issue(r, q2, 1090, 1100, false, "a"); /* q2 has seen nothing of q1 */
    EXPECT_RACES(r, 1, "read after an unordered write");
    CHECK(strstr(tg_sim_race_report(r), "q1: writing (tensor 'a')") && strstr(tg_sim_race_report(r), "q2: reading"));
    CHECK(strstr(tg_sim_race_report(r), "a read of bytes whose last write is not ordered before it"));
    tg_sim_race_free(r);

    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    q2 = sim_race_queue_new(r, "q2");
    struct sim_race_event e = {0};
    issue(r, q1, 1000, 1100, true, "a");
    sim_race_record(r, q1, &e);
    sim_race_wait(r, q2, &e);
    issue(r, q2, 1000, 1100, false, "a"); /* event edge */
    EXPECT_RACES(r, 0, "event edge");
    issue(r, q1, 1000, 1010, true, "a"); /* q1 has not seen q2's read */
    EXPECT_RACES(r, 1, "write over a read");
    CHECK(strstr(tg_sim_race_report(r), "a write over bytes still being read"));
    CHECK(strstr(tg_sim_race_report(r), "q1 has seen q2 only up to"));
    tg_sim_race_free(r);

    /* a wait names the record its event had when issued; a later record is not waited for */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    q2 = sim_race_queue_new(r, "q2");
    e = (struct sim_race_event){0};
    sim_race_record(r, q1, &e);
    issue(r, q1, 2000, 2040, true, "b");
    sim_race_wait(r, q2, &e);
    sim_race_record(r, q1, &e);
    issue(r, q2, 2000, 2040, false, "b");
    EXPECT_RACES(r, 1, "wait before the record that covers the write");
    tg_sim_race_free(r);

    /* a wait on an event never recorded orders nothing */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    q2 = sim_race_queue_new(r, "q2");
    e = (struct sim_race_event){0};
    issue(r, q1, 2000, 2040, true, "b");
    sim_race_wait(r, q2, &e);
    issue(r, q2, 2000, 2040, false, "b");
    EXPECT_RACES(r, 1, "wait on an event never recorded");
    tg_sim_race_free(r);

    /* transitivity: q1 -> q2 by an event, q2 -> q3 by another; the host issues
     * after waiting for q3 */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    q2 = sim_race_queue_new(r, "q2");
    int q3 = sim_race_queue_new(r, "q3");
    struct sim_race_event e1 = {0}, e2 = {0};
    issue(r, q1, 3000, 3100, true, "c");
    sim_race_record(r, q1, &e1);
    sim_race_wait(r, q2, &e1);
    sim_race_record(r, q2, &e2);
    sim_race_wait(r, q3, &e2);
    issue(r, q3, 3000, 3100, false, "c");
    sim_race_host_wait_queue(r, q3);
    host(r, 3000, 3100, true, "c");
    EXPECT_RACES(r, 0, "transitive edges");
    tg_sim_race_free(r);

    /* the host's own order: an item issued after a host write is ordered after it;
     * a host write after issuing an item is not ordered after the item */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    host(r, 4000, 4100, true, "d");
    issue(r, q1, 4000, 4100, false, "d");
    EXPECT_RACES(r, 0, "host write, then an item reading it");
    host(r, 4000, 4100, true, "d");
    EXPECT_RACES(r, 1, "host write over bytes an issued item reads");
    CHECK(strstr(tg_sim_race_report(r), "first:  q1: reading (tensor 'd')") &&
          strstr(tg_sim_race_report(r), "second: the host: writing"));
    tg_sim_race_free(r);
}

/* Byte ranges: only overlapping bytes conflict, whatever the segments. */
/* Host threads handing work over by pthread_join: the detector cannot see
 * the join, so without the caller's release/acquire the hand-over is a race;
 * with them it is ordered, but what the first thread does after its release
 * is not handed over. */
struct handover_job {
    tg_sim_race *r;
    bool annotate, write_after;
};

static void *handover_worker(void *arg) {
    struct handover_job *j = arg;
    host(j->r, 3000, 3100, true, "h");
    if (j->annotate) tg_sim_race_host_release(j->r, j);
    if (j->write_after) host(j->r, 3200, 3300, true, "late");
    return NULL;
}

static int handover_races(bool annotate, bool write_after, const void *acquire_key) {
    tg_sim_race *r = tg_sim_race_new();
    struct handover_job j = {r, annotate, write_after};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, handover_worker, &j) == 0);
    pthread_join(t, NULL);
    tg_sim_race_host_acquire(r, acquire_key ? acquire_key : &j);
    host(r, 3000, 3100, false, "h");
    host(r, 3200, 3300, false, "late");
    int n = tg_sim_race_count(r);
    tg_sim_race_free(r);
    return n;
}

static void test_host_handover(void) {
    CHECK_MSG(handover_races(false, false, NULL) == 1, "a join the detector is not told of is a race");
    CHECK_MSG(handover_races(true, false, NULL) == 0, "release and acquire order the hand-over");
    CHECK_MSG(handover_races(true, true, NULL) == 1, "a write after the release is not handed over");
    int other_key;
    CHECK_MSG(handover_races(true, false, &other_key) == 1, "an acquire of another key orders nothing");
}

static void test_ranges(void) {
    tg_sim_race *r = tg_sim_race_new();
    int q1 = sim_race_queue_new(r, "q1"), q2 = sim_race_queue_new(r, "q2");
    issue(r, q1, 100, 200, true, "x");
    sim_race_host_wait_queue(r, q1);
    issue(r, q2, 190, 210, false, "x"); /* ordered after the write (through the host) */
    EXPECT_RACES(r, 0, "write, host wait, read");
    issue(r, q1, 210, 300, true, "y"); /* adjacent, not overlapping q2's read */
    issue(r, q1, 150, 190, true, "x"); /* overlaps the write only (same queue) */
    EXPECT_RACES(r, 0, "adjacent and own ranges");
    issue(r, q1, 205, 215, true, "y"); /* overlaps q2's read of 190..210 at 205..209 */
    EXPECT_RACES(r, 1, "one overlapping byte range");
    tg_sim_race_free(r);

    /* two readers: a write must follow both */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    q2 = sim_race_queue_new(r, "q2");
    host(r, 500, 600, true, "z");
    issue(r, q1, 500, 600, false, "z");
    issue(r, q2, 550, 560, false, "z");
    sim_race_host_wait_queue(r, q1);
    host(r, 500, 540, true, "z"); /* only q1 read these bytes */
    EXPECT_RACES(r, 0, "write after the one reader of its bytes");
    host(r, 500, 600, true, "z");
    EXPECT_RACES(r, 1, "write while q2 still reads");
    CHECK(strstr(tg_sim_race_report(r), "first:  q2: reading"));
    tg_sim_race_free(r);

    /* two writers without order */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    q2 = sim_race_queue_new(r, "q2");
    issue(r, q1, 700, 800, true, "w");
    issue(r, q2, 790, 900, true, "w2");
    EXPECT_RACES(r, 1, "two unordered writes");
    CHECK(strstr(tg_sim_race_report(r), "a write over bytes whose last write is not ordered before it"));
    tg_sim_race_free(r);

    /* freeing memory another queue still writes */
    r = tg_sim_race_new();
    q1 = sim_race_queue_new(r, "q1");
    sim_race_memory_add(r, (void *)(uintptr_t)1000, 100, "dev buffer");
    issue(r, q1, 1010, 1020, true, "v");
    sim_race_memory_free(r, (void *)(uintptr_t)1000, 100);
    EXPECT_RACES(r, 1, "free during a write");
    CHECK(strstr(tg_sim_race_report(r), "dev buffer, bytes 10..19"));
    tg_sim_race_free(r);
}

/* ---- real devices ------------------------------------------------------------------------------- */

struct rig {
    tg_sim_race *race;
    tg_backend *a, *b;
    struct tg_context *ctx, *ctx_b;
    struct tg_tensor *x, *y, *yb, *z; /* y = x + x on a; yb on b; z = yb * yb on b */
    struct tg_graph *ga, *gb;
    tg_buffer *buf_a, *buf_b;
    float host[256];
};

static tg_backend *device(const char *name, tg_sim_race *race, bool synchronous) {
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = name;
    p.race = race;
    p.synchronous = synchronous;
    p.jitter_seed = synchronous ? 0 : 7;
    return tg_backend_sim_new(&p);
}

static void rig_init(struct rig *g, bool synchronous) {
    memset(g, 0, sizeof *g);
    g->race = tg_sim_race_new();
    g->a = device("devA", g->race, synchronous);
    g->b = device("devB", g->race, synchronous);
    g->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_context *cb = g->ctx_b = tg_context_new((struct tg_context_params){.no_alloc = true});
    g->x = tg_new_tensor_1d(g->ctx, TG_TYPE_F32, 256);
    tg_set_name(g->x, "x");
    g->y = tg_add(g->ctx, g->x, g->x);
    tg_set_name(g->y, "y");
    g->yb = tg_new_tensor_1d(cb, TG_TYPE_F32, 256);
    tg_set_name(g->yb, "yb");
    g->z = tg_mul(cb, g->yb, g->yb);
    tg_set_name(g->z, "z");
    g->ga = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g->ga, g->y));
    g->gb = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g->gb, g->z));
    g->buf_a = fx_alloc(g->ctx, g->a, TG_BUFFER_USAGE_ANY);
    g->buf_b = fx_alloc(cb, g->b, TG_BUFFER_USAGE_ANY);
    for (int i = 0; i < 256; i++) g->host[i] = (float)i;
}

static void rig_free(struct rig *g) {
    tg_backend_synchronize(g->a);
    tg_backend_synchronize(g->b);
    tg_buffer_free(g->buf_a);
    tg_buffer_free(g->buf_b);
    tg_graph_free(g->ga);
    tg_graph_free(g->gb);
    tg_context_free(g->ctx);
    tg_context_free(g->ctx_b);
    tg_backend_free(g->a);
    tg_backend_free(g->b);
    tg_sim_race_free(g->race);
}

static int rig_races(struct rig *g) { return tg_sim_race_count(g->race); }

/* set x, y = x + x on a, copy y -> yb (a's queue, b waits), z = yb * yb on b,
 * synchronize b, read z: every step ordered; the result checks the data too. */
static void test_devices_race_free(bool synchronous) {
    struct rig g;
    rig_init(&g, synchronous);
    tg_backend_tensor_set_async(g.a, g.x, g.host, 0, sizeof g.host);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.b, g.y, g.yb));
    CHECK_OK(tg_backend_graph_compute(g.b, g.gb));
    tg_backend_synchronize(g.b);
    float out[256];
    CHECK_OK(tg_tensor_get(g.z, out, 0, sizeof out));
    CHECK(out[3] == 36.0f && out[255] == 510.0f * 510.0f);
    CHECK_MSG(rig_races(&g) == 0, "%s", tg_sim_race_report(g.race));
    /* x is read by a's compute (done: a's queue ran before the copy that b waited for) */
    tg_backend_synchronize(g.a);
    CHECK_OK(tg_tensor_set(g.x, g.host, 0, sizeof g.host));
    CHECK_MSG(rig_races(&g) == 0, "%s", tg_sim_race_report(g.race));
    rig_free(&g);
}

static void test_devices_racy(void) {
    struct rig g;
    /* a host read of a result nothing waited for */
    rig_init(&g, true);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    float out[256];
    CHECK_OK(tg_tensor_get(g.y, out, 0, sizeof out));
    CHECK(rig_races(&g) == 1);
    CHECK(strstr(tg_sim_race_report(g.race), "compute of node 'y' (op add) on devA (tensor 'y')") &&
          strstr(tg_sim_race_report(g.race), "get of 'y' on the host"));
    /* and the run fails */
    CHECK_STATUS(tg_backend_graph_compute(g.b, g.gb), TG_ERR_DEVICE);
    CHECK_ERR_HAS("the race detector found");
    rig_free(&g);

    /* an event synchronize before the read orders it */
    rig_init(&g, true);
    tg_event *e = tg_event_new(g.a);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    tg_event_record(e, g.a);
    tg_event_synchronize(e);
    CHECK_OK(tg_tensor_get(g.y, out, 0, sizeof out));
    CHECK(rig_races(&g) == 0);
    tg_event_free(e);
    rig_free(&g);

    /* a copy into yb while b still reads it: b's compute before, nothing from b to a */
    rig_init(&g, true);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.b, g.y, g.yb));
    CHECK_OK(tg_backend_graph_compute(g.b, g.gb));
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.b, g.y, g.yb));
    CHECK(rig_races(&g) == 1);
    CHECK(strstr(tg_sim_race_report(g.race), "a write over bytes still being read") &&
          strstr(tg_sim_race_report(g.race), "first:  devB: compute of node 'z' (op mul) on devB (tensor 'yb')") &&
          strstr(tg_sim_race_report(g.race), "second: devA: copy 'y' -> 'yb' on devA (tensor 'yb')"));
    rig_free(&g);

    /* the same with b's event waited on a: ordered */
    rig_init(&g, true);
    e = tg_event_new(g.b);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.b, g.y, g.yb));
    CHECK_OK(tg_backend_graph_compute(g.b, g.gb));
    tg_event_record(e, g.b);
    tg_event_wait(g.a, e);
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.b, g.y, g.yb));
    CHECK(rig_races(&g) == 0);
    tg_event_free(e);
    rig_free(&g);

    /* the copy issued on b's queue (b named as its source): a's next write of y is
     * not ordered after b's read of it */
    rig_init(&g, true);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    tg_backend_synchronize(g.a);
    CHECK_OK(tg_backend_tensor_copy_async(g.b, g.b, g.y, g.yb));
    CHECK(rig_races(&g) == 0);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    CHECK(rig_races(&g) == 1);
    CHECK(strstr(tg_sim_race_report(g.race), "first:  devB: copy 'y' -> 'yb' on devB (tensor 'y')"));
    rig_free(&g);

    /* an async get into host memory, the host reading that memory before a synchronize */
    rig_init(&g, true);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    tg_backend_tensor_get_async(g.a, g.y, out, 0, sizeof out);
    CHECK(rig_races(&g) == 0);
    CHECK_OK(tg_tensor_set(g.yb, out, 0, sizeof out)); /* reads out (yb: nobody else touches it) */
    CHECK(rig_races(&g) == 1);
    CHECK(strstr(tg_sim_race_report(g.race), "async get of 'y' on devA (tensor 'host memory')"));
    rig_free(&g);

    /* a copy into b's memory is waited for by b's queue, so freeing b's buffer
     * (which waits for b) is ordered after it; a copy out of b's memory issued on
     * a's queue (a named as the source's backend) is not */
    rig_init(&g, true);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.b, g.y, g.yb));
    CHECK_OK(tg_backend_tensor_copy_async(g.a, g.a, g.yb, g.y));
    tg_buffer_free(g.buf_b);
    g.buf_b = NULL;
    CHECK_MSG(rig_races(&g) == 1, "%d: %s", rig_races(&g), tg_sim_race_report(g.race));
    CHECK(strstr(tg_sim_race_report(g.race), "a buffer freed while it is still being read") &&
          strstr(tg_sim_race_report(g.race), "devB buffer #0"));
    rig_free(&g);
}

/* A sim sharing the host's buffer type computes on CPU buffers: the host's
 * synchronous get, set, memset, clear and free of that memory are judged as
 * they are for a discrete sim's.  Synchronous devices: the verdict is the
 * issue order's, and no real access goes wrong meanwhile. */
struct shared_rig {
    tg_sim_race *race;
    tg_backend *blas, *cpu;
    struct tg_context *ctx;
    struct tg_tensor *x, *y;
    struct tg_graph *g;
    tg_buffer *buf;
    float in[64], out[64];
};

static void shared_rig_init(struct shared_rig *s) {
    memset(s, 0, sizeof *s);
    s->race = tg_sim_race_new();
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "blas";
    p.race = s->race;
    p.share_host_buffer_type = true;
    p.synchronous = true;
    s->blas = tg_backend_sim_new(&p);
    s->cpu = tg_backend_cpu_new();
    s->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    s->x = tg_new_tensor_1d(s->ctx, TG_TYPE_F32, 64);
    tg_set_name(s->x, "x");
    s->y = tg_add(s->ctx, s->x, s->x);
    tg_set_name(s->y, "y");
    s->g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(s->g, s->y));
    s->buf = fx_alloc(s->ctx, s->blas, TG_BUFFER_USAGE_ANY);
    CHECK(s->buf && tg_buffer_is_host(s->buf));
    for (int i = 0; i < 64; i++) s->in[i] = (float)i;
    CHECK_OK(tg_tensor_set(s->x, s->in, 0, sizeof s->in));
}

static void shared_rig_free(struct shared_rig *s) {
    tg_backend_synchronize(s->blas);
    tg_buffer_free(s->buf);
    tg_graph_free(s->g);
    tg_context_free(s->ctx);
    tg_backend_free(s->blas);
    tg_backend_free(s->cpu);
    tg_sim_race_free(s->race);
}

static void test_host_shared_memory(void) {
    struct shared_rig s;
    /* ordered: synchronize, then read and overwrite */
    shared_rig_init(&s);
    CHECK_OK(tg_backend_graph_compute(s.blas, s.g));
    tg_backend_synchronize(s.blas);
    CHECK_OK(tg_tensor_get(s.y, s.out, 0, sizeof s.out));
    CHECK_OK(tg_tensor_set(s.x, s.in, 0, sizeof s.in));
    CHECK(s.out[5] == 10.0f);
    EXPECT_RACES(s.race, 0, "host access after a synchronize");
    shared_rig_free(&s);

    /* a get of the result nothing waited for */
    shared_rig_init(&s);
    CHECK_OK(tg_backend_graph_compute(s.blas, s.g));
    CHECK_OK(tg_tensor_get(s.y, s.out, 0, sizeof s.out));
    EXPECT_RACES(s.race, 1, "host get of a result still being computed");
    CHECK(strstr(tg_sim_race_report(s.race), "first:  blas: compute of node 'y' (op add) on blas (tensor 'y')") &&
          strstr(tg_sim_race_report(s.race), "second: the host: get of 'y' on the host (tensor 'y')"));
    shared_rig_free(&s);

    /* a set, a memset, a clear over what the compute still reads */
    for (int how = 0; how < 3; how++) {
        shared_rig_init(&s);
        CHECK_OK(tg_backend_graph_compute(s.blas, s.g));
        if (how == 0) CHECK_OK(tg_tensor_set(s.x, s.in, 0, sizeof s.in));
        if (how == 1) CHECK_OK(tg_tensor_memset(s.x, 0, 0, 16));
        if (how == 2) tg_buffer_clear(s.buf, 0);
        EXPECT_RACES(s.race, 1, "host write over bytes a compute still reads");
        CHECK(strstr(tg_sim_race_report(s.race), "a write over bytes still being read"));
        shared_rig_free(&s);
    }

    /* a copy from a context's own memory over what the compute still reads:
     * one write, one race (the buffer's copy refuses a source without a
     * buffer, and the set it falls back to was told a second time) */
    shared_rig_init(&s);
    struct tg_context *own = tg_context_new((struct tg_context_params){.mem_size = 1 << 12});
    struct tg_tensor *src = tg_new_tensor_1d(own, TG_TYPE_F32, 64);
    CHECK_OK(tg_backend_graph_compute(s.blas, s.g));
    CHECK_OK(tg_tensor_copy(src, s.x));
    EXPECT_RACES(s.race, 1, "host copy over bytes a compute still reads");
    tg_context_free(own);
    shared_rig_free(&s);

    /* the buffer freed while the compute may still read it: reported, not a crash */
    shared_rig_init(&s);
    CHECK_OK(tg_backend_graph_compute(s.blas, s.g));
    tg_buffer_free(s.buf);
    s.buf = NULL;
    EXPECT_RACES(s.race, 2, "host buffer freed under a compute (x read, y written)");
    CHECK(strstr(tg_sim_race_report(s.race), "a buffer freed while") &&
          strstr(tg_sim_race_report(s.race), "second: the host: free of the buffer"));
    shared_rig_free(&s);

}

/* A BLAS-like sim watched (for a trace): its computes stay its queue's, not
 * the host's.  y = x + x on the watched sim after an event of another sim
 * that wrote x: ordered, no race (the watch once told the compute as the
 * host's at issue time: 2 races). */
static void test_watched_blas_sim(void) {
    struct shared_rig s;
    shared_rig_init(&s);
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "blas2";
    p.race = s.race;
    p.share_host_buffer_type = true;
    tg_backend *raw = tg_backend_sim_new(&p);
    tg_backend *watched = tg_sim_watch_new(raw, s.race, NULL);
    struct tg_graph *first = tg_graph_new(8);
    struct tg_tensor *w = tg_scale(s.ctx, s.x, 1.0f); /* first writes w in place of nothing: its own node */
    CHECK_OK(tg_graph_build_forward_expand(first, w));
    tg_buffer *wbuf = fx_alloc(s.ctx, s.blas, TG_BUFFER_USAGE_ANY);
    tg_event *e = tg_event_new(s.blas);
    CHECK_OK(tg_backend_graph_compute(s.blas, first));
    tg_event_record(e, s.blas);
    tg_event_wait(watched, e);
    struct tg_graph *second = tg_graph_new(8);
    struct tg_tensor *v = tg_mul(s.ctx, w, w);
    CHECK_OK(tg_graph_add_node(second, v));
    tg_buffer *vbuf = fx_alloc(s.ctx, s.blas, TG_BUFFER_USAGE_ANY);
    CHECK_OK(tg_backend_graph_compute(watched, second));
    tg_backend_synchronize(watched);
    EXPECT_RACES(s.race, 0, "a watched BLAS-like sim ordered by an event");
    tg_event_free(e);
    tg_graph_free(first);
    tg_graph_free(second);
    tg_buffer_free(wbuf);
    tg_buffer_free(vbuf);
    tg_backend_free(watched);
    shared_rig_free(&s);
}

/* The CPU backend has no events: told to wait for a sim's event, the host waits. */
static void test_cpu_waits_for_event(void) {
    struct rig g;
    rig_init(&g, false);
    tg_backend *cpu = tg_backend_cpu_new();
    tg_event *e = tg_event_new(g.a);
    tg_backend_tensor_set_async(g.a, g.x, g.host, 0, sizeof g.host);
    CHECK_OK(tg_backend_graph_compute(g.a, g.ga));
    tg_event_record(e, g.a);
    tg_event_wait(cpu, e);
    float out[256];
    CHECK_OK(tg_tensor_get(g.y, out, 0, sizeof out));
    CHECK(out[3] == 6.0f);
    EXPECT_RACES(g.race, 0, "the CPU waiting for a sim's event, then the host reading");
    tg_event_free(e);
    tg_backend_free(cpu);
    rig_free(&g);
}

/* A scheduler with a BLAS-like sim (asynchronous, computing in host memory
 * the CPU backend uses too): graph_compute_async waits for it before it
 * returns, so the caller may read the result and write the next inputs at
 * once without a race. */
static void test_sched_waits_for_shared_memory(void) {
    tg_sim_race *race = tg_sim_race_new();
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "blas";
    p.race = race;
    p.share_host_buffer_type = true;
    p.supported_ops_all = true;
    tg_backend *blas = tg_backend_sim_new(&p), *cpu = tg_backend_cpu_new();
    tg_backend *both[2] = {blas, cpu};
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 64);
    tg_set_input(x);
    struct tg_tensor *y = tg_scale(ctx, tg_sqr(ctx, x), 2.0f);
    tg_set_name(y, "y");
    tg_set_output(y);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    tg_sched *s = tg_sched_new(both, NULL, 2, 16, false, false);
    CHECK_OK(tg_sched_alloc_graph(s, g));
    CHECK_MSG(tg_sched_get_tensor_backend(s, y) == blas, "y on '%s'", tg_backend_name(tg_sched_get_tensor_backend(s, y)));
    float in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (float)i;
    for (int round = 0; round < 2; round++) {
        CHECK_OK(tg_tensor_set(x, in, 0, sizeof in));
        CHECK_OK(tg_sched_graph_compute_async(s, g));
        CHECK_OK(tg_tensor_get(y, out, 0, sizeof out));
        CHECK(out[3] == 18.0f);
    }
    EXPECT_RACES(race, 0, "reading the result and writing the inputs after graph_compute_async");
    tg_sched_free(s);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_backend_free(blas);
    tg_backend_free(cpu);
    tg_sim_race_free(race);
}

/* A copy to a device from host memory a BLAS-like sim is still writing:
 * the copy reads its source once its producer (backend_src) is done, so
 * the host's read of y is ordered after the compute that writes it. */
static void test_copy_waits_for_host_source(void) {
    struct shared_rig s;
    shared_rig_init(&s);
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "gpu";
    p.race = s.race;
    tg_backend *gpu = tg_backend_sim_new(&p);
    tg_backend *blas_async = NULL;
    tg_sim_params_default(&p);
    p.name = "blas-async";
    p.race = s.race;
    p.share_host_buffer_type = true;
    blas_async = tg_backend_sim_new(&p);
    struct tg_context *dctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *dst = tg_new_tensor_1d(dctx, TG_TYPE_F32, 64);
    tg_buffer *dbuf = fx_alloc(dctx, gpu, TG_BUFFER_USAGE_ANY);
    CHECK_OK(tg_backend_graph_compute(blas_async, s.g));
    CHECK_OK(tg_backend_tensor_copy_async(blas_async, gpu, s.y, dst));
    tg_backend_synchronize(gpu);
    CHECK_OK(tg_tensor_get(dst, s.out, 0, sizeof s.out));
    CHECK(s.out[5] == 10.0f);
    EXPECT_RACES(s.race, 0, "a copy from host memory its producer is still writing");
    tg_buffer_free(dbuf);
    tg_context_free(dctx);
    tg_backend_free(gpu);
    tg_backend_free(blas_async);
    shared_rig_free(&s);
}

int main(void) {
    test_copy_waits_for_host_source();
    test_sched_waits_for_shared_memory();
    test_host_shared_memory();
    test_cpu_waits_for_event();
    test_watched_blas_sim();
    test_clocks();
    test_host_handover();
    test_ranges();
    test_devices_race_free(true);
    test_devices_race_free(false);
    test_devices_racy();
    return tg_test_finish();
}

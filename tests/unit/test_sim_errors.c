/* The sim device refusing what a real device could not do, with a message
 * naming what is wrong and a status the caller can check: computing on memory
 * it cannot reach, graphs without memory (at the call, and a failure on the
 * worker returned later with its node), unchecked or overlapping copies,
 * mixed events, NULL arguments; and freeing a device before its buffers and
 * events.  Each test fails (or crashes under ASan) on the code before its fix. */
#include "sched_fixture.h"
#include "sim/sim-impl.h"

static struct tg_context *new_ctx(void) { return tg_context_new((struct tg_context_params){.no_alloc = true}); }

static tg_backend *sim(const char *name, bool synchronous, bool shares_host, tg_sim_race *race) {
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = name;
    p.synchronous = synchronous;
    p.share_host_buffer_type = shares_host;
    p.race = race;
    return tg_backend_sim_new(&p);
}

/* y = x + x on a discrete sim with x in host memory or another sim's: refused
 * before anything is queued, naming the node, the source and its buffer type;
 * a sim sharing the host's buffer type computes on host memory. */
static void test_unreachable_memory(void) {
    tg_backend *a = sim("simA", false, false, NULL), *b = sim("simB", false, false, NULL);
    tg_backend *blas = sim("blas", false, true, NULL), *cpu = tg_backend_cpu_new();
    tg_backend *homes[] = {cpu, b};
    const char *home_names[] = {tg_buft_name(tg_cpu_buffer_type()), "simB"};
    for (int h = 0; h < 2; h++) {
        struct tg_context *cx = new_ctx(), *cy = new_ctx();
        struct tg_tensor *x = tg_new_tensor_1d(cx, TG_TYPE_F32, 64);
        tg_set_name(x, "x");
        struct tg_tensor *y = tg_add(cy, x, x);
        tg_set_name(y, "y");
        tg_buffer *bx = fx_alloc(cx, homes[h], TG_BUFFER_USAGE_ANY), *by = fx_alloc(cy, a, TG_BUFFER_USAGE_ANY);
        fx_fill(x, 1);
        struct tg_graph *g = tg_graph_new(8);
        CHECK_OK(tg_graph_build_forward_expand(g, y));
        CHECK_STATUS(tg_backend_graph_compute(a, g), TG_ERR_INVALID);
        CHECK_ERR_HAS("node 0 'y'");
        CHECK_ERR_HAS("source 'x'");
        char want[64];
        snprintf(want, sizeof want, "buffer of type '%s'", home_names[h]);
        CHECK_ERR_HAS(want);
        tg_backend_synchronize(a);
        tg_graph_free(g);
        tg_buffer_free(bx);
        tg_buffer_free(by);
        tg_context_free(cx);
        tg_context_free(cy);
    }
    /* a source in a context's own memory (no buffer): host memory too */
    {
        struct tg_context *own = tg_context_new((struct tg_context_params){.mem_size = 1024}), *cy = new_ctx();
        struct tg_tensor *x = tg_new_tensor_1d(own, TG_TYPE_F32, 64);
        tg_set_name(x, "x");
        struct tg_tensor *y = tg_add(cy, x, x);
        tg_set_name(y, "y");
        tg_buffer *by = fx_alloc(cy, a, TG_BUFFER_USAGE_ANY);
        struct tg_graph *g = tg_graph_new(8);
        CHECK_OK(tg_graph_build_forward_expand(g, y));
        CHECK_STATUS(tg_backend_graph_compute(a, g), TG_ERR_INVALID);
        CHECK_ERR_HAS("source 'x'");
        tg_backend_synchronize(a);
        tg_graph_free(g);
        tg_buffer_free(by);
        tg_context_free(own);
        tg_context_free(cy);
    }
    /* the node itself in host memory */
    struct tg_context *c = new_ctx();
    struct tg_tensor *x = tg_new_tensor_1d(c, TG_TYPE_F32, 64);
    struct tg_tensor *y = tg_mul(c, x, x);
    tg_set_name(y, "y");
    tg_buffer *buf = fx_alloc(c, cpu, TG_BUFFER_USAGE_ANY);
    fx_fill(x, 2);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    CHECK_STATUS(tg_backend_graph_compute(a, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("node 0 'y' (op mul): it lives in a buffer of type");
    /* a BLAS-like sim: host memory is its own */
    CHECK_OK(tg_backend_graph_compute(blas, g));
    tg_backend_synchronize(blas);
    float *vx = fx_read(x), *vy = fx_read(y);
    CHECK(vx && vy && vy[5] == vx[5] * vx[5]);
    free(vx);
    free(vy);
    tg_graph_free(g);
    tg_buffer_free(buf);
    tg_context_free(c);
    tg_backend_free(a);
    tg_backend_free(b);
    tg_backend_free(blas);
    tg_backend_free(cpu);
}

/* A graph without memory fails the call (queued or synchronous) with the CPU
 * backend's words; a failure only the worker can meet is kept with its node
 * and returned by tg_sim_synchronize, or by the next compute. */
static void test_compute_failures(void) {
    for (int synchronous = 0; synchronous < 2; synchronous++) {
        tg_backend *a = sim("A", synchronous, false, NULL);
        struct tg_context *c = new_ctx();
        struct tg_tensor *x = tg_new_tensor_1d(c, TG_TYPE_F32, 256);
        struct tg_tensor *y = tg_add(c, x, x);
        tg_set_name(y, "y");
        struct tg_graph *g = tg_graph_new(8);
        CHECK_OK(tg_graph_build_forward_expand(g, y));
        CHECK_STATUS(tg_backend_graph_compute(a, g), TG_ERR_INVALID);
        CHECK_ERR_HAS("sim device 'A': node 0 'y' has no memory (allocate the graph first)");
        tg_buffer *buf = fx_alloc(c, a, TG_BUFFER_USAGE_ANY);
        fx_fill(x, 3);
        CHECK_OK(tg_backend_graph_compute(a, g));
        CHECK_OK(tg_sim_synchronize(a));

        /* the worker fails: returned by tg_sim_synchronize (once), with the node */
        sim_device_fail_next_compute(a, TG_ERR_ALLOC);
        enum tg_status st = tg_backend_graph_compute(a, g);
        CHECK(synchronous ? st == TG_ERR_ALLOC : st == TG_OK);
        if (!synchronous) {
            CHECK_STATUS(tg_sim_synchronize(a), TG_ERR_ALLOC);
        }
        CHECK_ERR_HAS("sim device 'A': a queued compute failed: node 'y' (op add)");
        CHECK_OK(tg_sim_synchronize(a));
        CHECK_OK(tg_backend_graph_compute(a, g));
        /* a plain synchronize leaves the message; the next compute returns it */
        sim_device_fail_next_compute(a, TG_ERR_DEVICE);
        st = tg_backend_graph_compute(a, g);
        if (!synchronous) {
            CHECK_OK(st);
            tg_clear_error(); /* the message must come from this synchronize */
            tg_backend_synchronize(a);
            CHECK_ERR_HAS("node 'y' (op add)");
            CHECK_STATUS(tg_backend_graph_compute(a, g), TG_ERR_DEVICE);
            CHECK_ERR_HAS("a queued compute failed: node 'y'");
        }
        CHECK_OK(tg_backend_graph_compute(a, g));
        CHECK_OK(tg_sim_synchronize(a));
        /* taken after a plain synchronize (as the scheduler does): said once, then gone */
        sim_device_fail_next_compute(a, TG_ERR_DEVICE);
        st = tg_backend_graph_compute(a, g);
        tg_backend_synchronize(a);
        if (!synchronous) {
            CHECK_OK(st);
            CHECK_STATUS(tg_backend_take_failure(a), TG_ERR_DEVICE);
            CHECK_ERR_HAS("a queued compute failed: node 'y' (op add): injected failure");
        }
        CHECK_OK(tg_backend_take_failure(a));
        CHECK_OK(tg_backend_graph_compute(a, g));
        CHECK_OK(tg_sim_synchronize(a));
        tg_graph_free(g);
        tg_buffer_free(buf);
        tg_context_free(c);
        tg_backend_free(a);
    }
    CHECK_STATUS(tg_backend_graph_compute(NULL, NULL), TG_ERR_INVALID);
    tg_backend *a = sim("A", true, false, NULL);
    CHECK_STATUS(tg_backend_graph_compute(a, NULL), TG_ERR_INVALID);
    CHECK_ERR_HAS("no graph given");
    tg_backend_free(a);
    tg_backend *cpu = tg_backend_cpu_new();
    CHECK_STATUS(tg_sim_synchronize(cpu), TG_ERR_INVALID);
    tg_backend_free(cpu);
}

/* tg_backend_take_failure through a watch reaches the sim's kept failure;
 * backends that keep none (the CPU, a watch of it) have nothing to take. */
static void test_take_failure_through_watch(void) {
    tg_backend *w = tg_sim_watch_new(sim("A", false, false, NULL), NULL, NULL);
    tg_backend *cpu = tg_sim_watch_new(tg_backend_cpu_new(), NULL, NULL);
    struct tg_context *c = new_ctx();
    struct tg_tensor *x = tg_new_tensor_1d(c, TG_TYPE_F32, 64);
    struct tg_tensor *y = tg_add(c, x, x);
    tg_set_name(y, "y");
    tg_buffer *buf = fx_alloc(c, w, TG_BUFFER_USAGE_ANY);
    fx_fill(x, 4);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    sim_device_fail_next_compute(w, TG_ERR_ALLOC);
    CHECK_OK(tg_backend_graph_compute(w, g));
    tg_backend_synchronize(w);
    CHECK_STATUS(tg_backend_take_failure(w), TG_ERR_ALLOC);
    CHECK_ERR_HAS("node 'y' (op add): injected failure");
    CHECK_OK(tg_backend_take_failure(w));
    CHECK_OK(tg_backend_graph_compute(w, g));
    CHECK_OK(tg_sim_synchronize(w));
    CHECK_OK(tg_backend_take_failure(cpu));
    CHECK_OK(tg_backend_take_failure(NULL));
    tg_graph_free(g);
    tg_buffer_free(buf);
    tg_context_free(c);
    tg_backend_free(w);
    tg_backend_free(cpu);
}

/* The backend (raw or watched) freed before its buffers and events, and the
 * detector before them all: any order, as ggml allows. */
static void test_free_order(void) {
    for (int watched = 0; watched < 2; watched++) {
        tg_sim_race *race = tg_sim_race_new();
        tg_backend *raw = sim("A", false, false, race);
        tg_backend *a = watched ? tg_sim_watch_new(raw, race, NULL) : raw;
        tg_buffer *buf = tg_backend_alloc_buffer(a, 4096);
        tg_event *e = tg_event_new(a);
        CHECK(buf && e);
        tg_event_record(e, a);
        tg_backend_free(a);
        tg_sim_race_free(race);
        tg_event_synchronize(e);
        tg_event_free(e);
        tg_buffer_clear(buf, 0);
        tg_buffer_free(buf);
    }
}

/* A watch keeps its detector and its trace: a watched CPU computing after
 * the detector was freed, a watch's event synchronized after the watch and
 * the trace were freed (both were uses after free). */
static void test_watch_keeps_race_and_trace(void) {
    tg_sim_race *race = tg_sim_race_new();
    tg_backend *w = tg_sim_watch_new(tg_backend_cpu_new(), race, NULL);
    struct tg_context *c = new_ctx();
    struct tg_tensor *x = tg_new_tensor_1d(c, TG_TYPE_F32, 64);
    struct tg_tensor *y = tg_add(c, x, x);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    tg_buffer *buf = tg_alloc_ctx_tensors_for_backend(c, w, NULL);
    CHECK(buf != NULL);
    CHECK_OK(tg_tensor_memset(x, 0, 0, tg_nbytes(x)));
    tg_sim_race_free(race);
    CHECK_OK(tg_backend_graph_compute(w, g));
    tg_buffer_free(buf);
    tg_graph_free(g);
    tg_context_free(c);
    tg_backend_free(w);

    tg_sim_trace *trace = tg_sim_trace_new();
    tg_backend *tw = tg_sim_watch_new(sim("simT", true, false, NULL), NULL, trace);
    tg_event *e = tg_event_new(tw);
    tg_event_record(e, tw);
    tg_backend_free(tw);
    tg_sim_trace_free(trace);
    tg_event_synchronize(e);
    tg_event_free(e);
}

/* A watch's event on the raw sim, a raw sim's on a watch: refused by name. */
static void test_mixed_events(void) {
    tg_sim_race *race = tg_sim_race_new();
    tg_backend *a = sim("simA", true, false, race);
    tg_backend *w = tg_sim_watch_new(sim("simB", true, false, race), race, NULL);
    tg_event *we = tg_event_new(w), *ae = tg_event_new(a);
    tg_clear_error();
    tg_event_record(we, a);
    CHECK_ERR_HAS("made by backend 'simB' and cannot be recorded on 'simA'");
    tg_clear_error();
    tg_event_record(ae, w);
    CHECK_ERR_HAS("made by backend 'simA' and cannot be recorded on 'simB'");
    tg_clear_error();
    tg_event_record(ae, NULL);
    CHECK_ERR_HAS("tg_event_record: no backend given");
    tg_event_record(ae, a); /* the right kinds still record */
    tg_event_record(we, w);
    tg_event_synchronize(ae);
    tg_event_synchronize(we);
    CHECK(tg_sim_race_count(race) == 0);
    tg_event_free(we);
    tg_event_free(ae);
    tg_backend_free(w);
    tg_backend_free(a);
    tg_sim_race_free(race);
}

/* copy_async makes tg_tensor_copy's checks; overlapping views copy as memmove. */
static void test_copies(void) {
    tg_backend *a = sim("simA", true, false, NULL), *cpu = tg_backend_cpu_new();
    struct tg_context *c = new_ctx(), *cs = new_ctx();
    struct tg_tensor *dst = tg_new_tensor_1d(c, TG_TYPE_F32, 256);
    tg_set_name(dst, "dst");
    struct tg_tensor *v0 = tg_view_1d(c, dst, 128, 0), *v1 = tg_view_1d(c, dst, 128, 64 * sizeof(float));
    struct tg_tensor *src = tg_new_tensor_1d(cs, TG_TYPE_F32, 256);
    tg_set_name(src, "src");
    tg_buffer *b = fx_alloc(c, a, TG_BUFFER_USAGE_ANY);
    CHECK_STATUS(tg_backend_tensor_copy_async(cpu, a, src, dst), TG_ERR_INVALID);
    CHECK_ERR_HAS("tensor 'src' has no memory yet");
    float h[256];
    for (int i = 0; i < 256; i++) h[i] = (float)i;
    CHECK_OK(tg_tensor_set(dst, h, 0, sizeof h));
    CHECK_OK(tg_backend_tensor_copy_async(a, a, v0, v1)); /* dst[64..191] = dst[0..127] */
    CHECK_OK(tg_backend_tensor_copy_async(a, a, dst, dst));
    tg_backend_synchronize(a);
    float out[256];
    CHECK_OK(tg_tensor_get(dst, out, 0, sizeof out));
    CHECK(out[63] == 63 && out[64] == 0 && out[130] == 66 && out[191] == 127 && out[192] == 192);
    tg_buffer *bs = fx_alloc(cs, cpu, TG_BUFFER_USAGE_ANY);
    tg_buffer_begin_plan(b);
    CHECK_STATUS(tg_backend_tensor_copy_async(cpu, a, src, dst), TG_ERR_STALE);
    CHECK_ERR_HAS("tensor 'dst' is stale");
    tg_backend_synchronize(a);
    tg_buffer_free(bs);
    tg_buffer_free(b);
    tg_context_free(c);
    tg_context_free(cs);
    tg_backend_free(a);
    tg_backend_free(cpu);
}

/* The other way round: the CPU backend given a node or a source in a
 * discrete device's memory refuses it, naming both and the buffer type
 * (it used to dereference the device address: a crash, or garbage). */
static void test_cpu_refuses_device_memory(void) {
    tg_backend *dev = sim("simA", true, false, NULL), *cpu = tg_backend_cpu_new();
    for (int node_on_device = 0; node_on_device < 2; node_on_device++) {
        struct tg_context *cx = new_ctx(), *cy = new_ctx();
        struct tg_tensor *x = tg_new_tensor_1d(cx, TG_TYPE_F32, 64);
        tg_set_name(x, "x");
        struct tg_tensor *y = tg_add(cy, x, x);
        tg_set_name(y, "y");
        tg_buffer *bx = fx_alloc(cx, node_on_device ? cpu : dev, TG_BUFFER_USAGE_ANY);
        tg_buffer *by = fx_alloc(cy, node_on_device ? dev : cpu, TG_BUFFER_USAGE_ANY);
        fx_fill(x, 1);
        struct tg_graph *g = tg_graph_new(8);
        CHECK_OK(tg_graph_build_forward_expand(g, y));
        CHECK_STATUS(tg_backend_graph_compute(cpu, g), TG_ERR_INVALID);
        CHECK_ERR_HAS(node_on_device ? "CPU backend: node 0 'y' is in a buffer of type 'simA', which is not host memory"
                                     : "CPU backend: source 'x' of node 0 'y' is in a buffer of type 'simA'");
        tg_graph_free(g);
        tg_buffer_free(bx);
        tg_buffer_free(by);
        tg_context_free(cx);
        tg_context_free(cy);
    }
    /* any source slot: the second operand on the device */
    struct tg_context *ch = new_ctx(), *cd = new_ctx();
    struct tg_tensor *h = tg_new_tensor_1d(ch, TG_TYPE_F32, 64), *d = tg_new_tensor_1d(cd, TG_TYPE_F32, 64);
    tg_set_name(d, "d");
    struct tg_tensor *y = tg_mul(ch, h, d);
    tg_set_name(y, "y");
    tg_buffer *bh = fx_alloc(ch, cpu, TG_BUFFER_USAGE_ANY), *bd = fx_alloc(cd, dev, TG_BUFFER_USAGE_ANY);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    CHECK_STATUS(tg_backend_graph_compute(cpu, g), TG_ERR_INVALID);
    CHECK_ERR_HAS("CPU backend: source 'd' of node 0 'y' is in a buffer of type 'simA'");
    tg_graph_free(g);
    tg_buffer_free(bh);
    tg_buffer_free(bd);
    tg_context_free(ch);
    tg_context_free(cd);
    tg_backend_free(dev);
    tg_backend_free(cpu);
}

int main(void) {
    test_unreachable_memory();
    test_cpu_refuses_device_memory();
    test_compute_failures();
    test_take_failure_through_watch();
    test_free_order();
    test_watch_keeps_race_and_trace();
    test_mixed_events();
    test_copies();
    return tg_test_finish();
}

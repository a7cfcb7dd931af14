/* The simulated device: its memory faults on host access, it honours its
 * alignment / padding / max size, its queue and events order work, and it
 * computes the same bits as the CPU. */
#include "sched_fixture.h"
#include "tg_test_child.h"

static struct tg_context *new_ctx(void) { return tg_context_new((struct tg_context_params){.no_alloc = true}); }

/* A host read of addr must die of the fault (SIGSEGV or SIGBUS under the
 * mprotect guard) or of ASan's use-after-poison report (the guard of small
 * buffers in ASan builds). */
static void expect_host_read_faults(const void *addr, const char *what) {
    struct tg_child_read r = tg_test_read_in_child(addr);
    CHECK_MSG(tg_child_faulted(&r) || tg_child_reported(&r, "use-after-poison"),
              "host dereference of %s sim memory was not caught (status %d)", what, r.status);
}

/* Host reads of device memory must crash, for a small buffer and for one above
 * the size where ASan builds switch from poisoning to mprotect. */
static void test_host_access_faults(void) {
    tg_backend *gpu = fx_sim("gpu0", true, NULL, 0);
    struct tg_context *ctx = new_ctx();
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    tg_buffer *buf = fx_alloc(ctx, gpu, TG_BUFFER_USAGE_ANY);
    CHECK(buf && t->data);
    float v[16] = {1, 2, 3};
    CHECK_OK(tg_tensor_set(t, v, 0, sizeof v)); /* through the device: fine */
    expect_host_read_faults(t->data, "small");
    float back[16];
    CHECK_OK(tg_tensor_get(t, back, 0, sizeof back));
    CHECK(back[0] == 1 && back[2] == 3);
    struct tg_context *big_ctx = new_ctx();
    struct tg_tensor *big = tg_new_tensor_1d(big_ctx, TG_TYPE_F32, (int64_t)5 << 20); /* 20 MiB */
    tg_buffer *big_buf = fx_alloc(big_ctx, gpu, TG_BUFFER_USAGE_ANY);
    CHECK(big_buf && big->data);
    CHECK_OK(tg_tensor_set(big, v, 4096, sizeof v));
    expect_host_read_faults((const float *)big->data + 1024, "large");
    CHECK_OK(tg_tensor_get(big, back, 4096, sizeof back));
    CHECK(back[1] == 2);
    tg_buffer_free(big_buf);
    tg_context_free(big_ctx);
    tg_buffer_free(buf);
    tg_context_free(ctx);
    tg_backend_free(gpu);
}

static void test_buffer_type_settings(void) {
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.name = "odd";
    p.alignment = 512;
    p.alloc_pad = 100;
    p.max_buffer_size = 4096;
    tg_backend *gpu = tg_backend_sim_new(&p);
    tg_buffer_type *bt = tg_backend_get_default_buffer_type(gpu);
    CHECK(tg_buft_get_alignment(bt) == 512 && tg_buft_get_max_size(bt) == 4096 && !tg_buft_is_host(bt));
    CHECK(strcmp(tg_buft_name(bt), "odd") == 0);
    struct tg_context *ctx = new_ctx();
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 10);
    CHECK(tg_buft_get_alloc_size(bt, t) == 140);
    CHECK(tg_buft_alloc_buffer(bt, 8192) == NULL);
    CHECK_ERR_HAS("max buffer size");
    struct tg_sim_params bad = p;
    bad.alignment = 48;
    CHECK(tg_backend_sim_new(&bad) == NULL);
    tg_context_free(ctx);
    tg_backend_free(gpu);
}

/* Async sets, a compute, an event, async gets: the event orders the host read. */
static void test_queue_and_events(void) {
    tg_backend *gpu = fx_sim("gpu0", true, NULL, 0);
    tg_backend *cpu = tg_backend_cpu_new();
    struct tg_context *ctx = new_ctx();
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 1024);
    struct tg_tensor *b = tg_new_tensor_1d(ctx, TG_TYPE_F32, 1024);
    struct tg_tensor *c = tg_add(ctx, tg_mul(ctx, a, b), a);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, c));
    struct tg_context *hctx = new_ctx();
    struct tg_tensor *ha = tg_dup_tensor(hctx, a), *hb = tg_dup_tensor(hctx, b);
    struct tg_tensor *hc = tg_add(hctx, tg_mul(hctx, ha, hb), ha);
    struct tg_graph *hg = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(hg, hc));
    tg_buffer *dev = fx_alloc(ctx, gpu, TG_BUFFER_USAGE_ANY);
    tg_buffer *host = fx_alloc(hctx, cpu, TG_BUFFER_USAGE_ANY);
    fx_fill(ha, 11);
    fx_fill(hb, 12);
    float *va = fx_read(ha), *vb = fx_read(hb);
    tg_backend_tensor_set_async(gpu, a, va, 0, tg_nbytes(a));
    tg_backend_tensor_set_async(gpu, b, vb, 0, tg_nbytes(b));
    CHECK_OK(tg_backend_graph_compute(gpu, g));
    tg_event *e = tg_event_new(gpu);
    CHECK(e != NULL);
    tg_event_record(e, gpu);
    float *out = calloc(1024, sizeof *out);
    tg_backend_tensor_get_async(gpu, c, out, 0, tg_nbytes(c));
    tg_event_synchronize(e);
    tg_backend_synchronize(gpu);
    /* async calls past a tensor's end are refused before anything is queued */
    tg_clear_error();
    tg_backend_tensor_set_async(gpu, a, va, tg_nbytes(a), 16);
    CHECK_ERR_HAS("set of tensor");
    CHECK_ERR_HAS("is outside its 4096 bytes");
    tg_clear_error();
    float spill[4] = {0};
    tg_backend_tensor_get_async(gpu, c, spill, tg_nbytes(c) - 8, 16);
    CHECK_ERR_HAS("is outside its 4096 bytes");
    tg_backend_synchronize(gpu);
    CHECK_OK(tg_backend_graph_compute(cpu, hg));
    float *want = fx_read(hc);
    CHECK_MSG(fx_same_bits(want, out, 1024), "sim and CPU differ");
    tg_event_free(e);
    free(va);
    free(vb);
    free(out);
    free(want);
    tg_buffer_free(dev);
    tg_buffer_free(host);
    tg_graph_free(g);
    tg_graph_free(hg);
    tg_context_free(ctx);
    tg_context_free(hctx);
    tg_backend_free(cpu);
    tg_backend_free(gpu);
}

static void test_supported_ops(void) {
    enum tg_op ops[] = {TG_OP_MUL_MAT, TG_OP_ADD};
    tg_backend *gpu = fx_sim("gpu0", false, ops, 2);
    struct tg_context *ctx = new_ctx();
    struct tg_tensor *a = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 8);
    CHECK(tg_backend_supports_op(gpu, tg_mul_mat(ctx, a, a)));
    CHECK(tg_backend_supports_op(gpu, tg_add(ctx, a, a)));
    CHECK(!tg_backend_supports_op(gpu, tg_mul(ctx, a, a)));
    struct tg_tensor *q = tg_new_tensor_2d(ctx, TG_TYPE_Q4_0, 64, 8);
    struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 2);
    CHECK(tg_backend_supports_op(gpu, tg_mul_mat(ctx, q, x))); /* the CPU's kernels */
    struct tg_tensor *h = tg_new_tensor_2d(ctx, TG_TYPE_F16, 64, 2);
    CHECK(!tg_backend_supports_op(gpu, tg_mul_mat(ctx, q, h))); /* nor has the CPU this one */
    /* offload_op claims a batch (ne[1]) of at least offload_min_batch, and nothing with 0 */
    CHECK(!tg_backend_offload_op(gpu, tg_mul_mat(ctx, a, a)));
    struct tg_sim_params p;
    tg_sim_params_default(&p);
    p.supported_ops_all = true;
    p.offload_min_batch = 8;
    tg_backend *offloading = tg_backend_sim_new(&p);
    struct tg_tensor *x7 = tg_new_tensor_2d(ctx, TG_TYPE_F32, 8, 7);
    CHECK(tg_backend_offload_op(offloading, tg_mul_mat(ctx, a, a)));
    CHECK(!tg_backend_offload_op(offloading, tg_mul_mat(ctx, a, x7)));
    tg_backend_free(offloading);
    tg_context_free(ctx);
    tg_backend_free(gpu);
}

/* Device memory is open to the host only while the device's worker runs an
 * item: after a queued compute and a synchronize a host read faults again. */
static void test_memory_closed_after_queue(void) {
    tg_backend *gpu = fx_sim("gpu0", true, NULL, 0);
    struct tg_context *ctx = new_ctx();
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    struct tg_tensor *y = tg_scale(ctx, x, 2.0f);
    struct tg_graph *g = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g, y));
    tg_buffer *buf = fx_alloc(ctx, gpu, TG_BUFFER_USAGE_ANY);
    CHECK(buf && y->data);
    float v[16] = {1, 2, 3};
    CHECK_OK(tg_tensor_set(x, v, 0, sizeof v));
    CHECK_OK(tg_backend_graph_compute(gpu, g));
    tg_backend_synchronize(gpu);
    expect_host_read_faults(y->data, "computed");
    float back[16];
    CHECK_OK(tg_tensor_get(y, back, 0, sizeof back));
    CHECK(back[2] == 6.0f);
    tg_buffer_free(buf);
    tg_graph_free(g);
    tg_context_free(ctx);
    tg_backend_free(gpu);
}

int main(void) {
    test_memory_closed_after_queue();
    test_host_access_faults();
    test_buffer_type_settings();
    test_queue_and_events();
    test_supported_ops();
    return tg_test_finish();
}

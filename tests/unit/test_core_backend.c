/* Backend interface: binding, checked tensor access (unbound, stale, range),
 * multi-buffers, copies.  Uses a small host buffer type of its own. */
#include "tg-backend.h"
#include "tg_test.h"

static const char *host_name(tg_buffer_type *b) { (void)b; return "test-host"; }
static size_t host_align(tg_buffer_type *b) { (void)b; return 32; }
static bool host_is_host(tg_buffer_type *b) { (void)b; return true; }
static void host_free(tg_buffer *b) { free(b->context); }
static void *host_base(tg_buffer *b) { return b->context; }
static void host_set(tg_buffer *b, struct tg_tensor *t, const void *d, size_t o, size_t n) { (void)b; memcpy((char *)t->data + o, d, n); }
static void host_get(tg_buffer *b, const struct tg_tensor *t, void *d, size_t o, size_t n) { (void)b; memcpy(d, (const char *)t->data + o, n); }
static void host_clear(tg_buffer *b, uint8_t v) { memset(b->context, v, b->size); }
static tg_buffer *host_alloc(tg_buffer_type *buft, size_t size) {
    void *mem = calloc(1, size ? size : 1);
    struct tg_buffer_iface iface = {.free_buffer = host_free, .get_base = host_base, .set_tensor = host_set,
                                    .get_tensor = host_get, .clear = host_clear};
    return tg_buffer_init(buft, iface, mem, size);
}
static tg_buffer_type host_type = {
    .iface = {.get_name = host_name, .alloc_buffer = host_alloc, .get_alignment = host_align, .is_host = host_is_host}};
/* The same buffers said to be device memory: the library may not touch them from the host. */
static const char *device_name(tg_buffer_type *b) { (void)b; return "test-device"; }
static tg_buffer_type device_type = {.iface = {.get_name = device_name, .alloc_buffer = host_alloc, .get_alignment = host_align}};

int main(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    struct tg_tensor *b = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    tg_set_name(a, "weights_a");
    float v[16] = {1, 2, 3}, out_of_range[1];
    /* seed 003: setting an unbound tensor fails with a message naming it and the binding call */
    CHECK_STATUS(tg_tensor_set(a, v, 0, sizeof v), TG_ERR_INVALID);
    CHECK_ERR_HAS("weights_a");
    CHECK_ERR_HAS("tg_alloc_ctx_tensors");

    tg_buffer *buf = tg_buft_alloc_buffer(&host_type, 128);
    CHECK(buf && tg_buffer_get_size(buf) == 128 && tg_buffer_is_host(buf));
    char *base = tg_buffer_get_base(buf);
    CHECK_OK(tg_tensor_bind(a, buf, base));
    CHECK_STATUS(tg_tensor_bind(b, buf, base + 96), TG_ERR_INVALID); /* 64 bytes at 96 > 128 */
    CHECK_STATUS(tg_tensor_bind(b, buf, base + 200), TG_ERR_INVALID); /* past the end: no room, none wraps */
    CHECK_ERR_HAS("does not fit in buffer of 128 bytes");
    CHECK_OK(tg_tensor_bind(b, buf, base + 64));
    CHECK_OK(tg_tensor_set(a, v, 0, sizeof v));
    CHECK_STATUS(tg_tensor_set(a, v, 8, sizeof v), TG_ERR_INVALID); /* out of range */
    CHECK_ERR_HAS("outside");
    CHECK_STATUS(tg_tensor_get(a, out_of_range, 65, 0), TG_ERR_INVALID); /* past the end, even for 0 bytes */
    CHECK_ERR_HAS("range [65, +0) is outside its 64 bytes");
    CHECK_OK(tg_tensor_copy(a, b));
    float out[16] = {0};
    CHECK_OK(tg_tensor_get(b, out, 0, sizeof out));
    CHECK(out[0] == 1 && out[2] == 3);
    CHECK_OK(tg_tensor_memset(b, 0, 0, 64));
    CHECK_OK(tg_tensor_get(b, out, 0, sizeof out));
    CHECK(out[0] == 0);
    /* a tensor grown after binding would reach past its buffer: its bytes
     * fit its new shape but not the 64 bytes left after it */
    float grown[32] = {0};
    b->ne[0] = 32;
    b->nb[1] = b->nb[2] = b->nb[3] = 32 * sizeof(float);
    CHECK_STATUS(tg_tensor_set(b, grown, 0, sizeof grown), TG_ERR_INVALID);
    CHECK_ERR_HAS("lies outside its buffer of 128 bytes");
    CHECK_STATUS(tg_tensor_get(b, grown, 64, 64), TG_ERR_INVALID);
    CHECK_STATUS(tg_tensor_memset(b, 0, 0, sizeof grown), TG_ERR_INVALID);
    CHECK_OK(tg_tensor_get(b, grown, 0, 64)); /* what lies in the buffer stays reachable */
    /* zero bytes inside the tensor's range reach no memory (tg-backend.h fails
     * only a range outside the tensor): fine even where its grown part lies
     * past the buffer's end, at 96 and at its very end */
    CHECK_OK(tg_tensor_set(b, NULL, 96, 0));
    CHECK_OK(tg_tensor_get(b, NULL, 128, 0));
    CHECK_OK(tg_tensor_memset(b, 0, 128, 0));
    b->ne[0] = 16;
    b->nb[1] = b->nb[2] = b->nb[3] = 16 * sizeof(float);

    /* a view binds to its root's memory */
    struct tg_tensor *view = tg_view_1d(ctx, a, 4, 8);
    CHECK(view && view->data == base + 8 && view->buffer == buf); /* created after binding */
    struct tg_context *ctx2 = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *c = tg_new_tensor_1d(ctx2, TG_TYPE_F32, 4);
    struct tg_tensor *cv = tg_view_1d(ctx2, c, 2, 4);
    CHECK_STATUS(tg_tensor_view_bind(cv), TG_ERR_INVALID);
    CHECK_OK(tg_tensor_bind(c, buf, base + 64));
    CHECK_OK(tg_tensor_view_bind(cv));
    CHECK(cv->data == base + 68);
    /* tensors of different sizes are not copied (into c's 16 bytes from a's 64) */
    CHECK_STATUS(tg_tensor_copy(a, c), TG_ERR_INVALID);
    CHECK_ERR_HAS("sizes differ (64 vs 16 bytes)");

    /* a new plan makes earlier bindings stale */
    tg_buffer_set_usage(buf, TG_BUFFER_USAGE_COMPUTE);
    tg_buffer_begin_plan(buf);
    CHECK_STATUS(tg_tensor_get(a, out, 0, 4), TG_ERR_STALE);
    CHECK_ERR_HAS("weights_a");
    CHECK_ERR_HAS("tg_buffer_begin_plan");
    CHECK_STATUS(tg_tensor_get(cv, out, 0, 4), TG_ERR_STALE);
    CHECK_OK(tg_tensor_bind(a, buf, base)); /* rebinding makes it current */
    CHECK_OK(tg_tensor_get(a, out, 0, 4));
    /* a view is read through its root: a root bound again elsewhere and then
     * planned over is stale through a view still current in the first buffer */
    struct tg_tensor *r = tg_new_tensor_1d(ctx2, TG_TYPE_F32, 4);
    struct tg_tensor *rv = tg_view_1d(ctx2, r, 2, 4);
    tg_buffer *first = tg_buft_alloc_buffer(&host_type, 64), *second = tg_buft_alloc_buffer(&host_type, 64);
    CHECK_OK(tg_tensor_bind(r, first, tg_buffer_get_base(first)));
    CHECK_OK(tg_tensor_view_bind(rv));
    CHECK_OK(tg_tensor_bind(r, second, tg_buffer_get_base(second)));
    tg_buffer_begin_plan(second);
    CHECK_STATUS(tg_tensor_get(rv, out, 0, 8), TG_ERR_STALE);
    tg_buffer_free(first);
    tg_buffer_free(second);
    /* device memory without a memset hook is not memset from the host */
    tg_buffer *device = tg_buft_alloc_buffer(&device_type, 64);
    CHECK_OK(tg_tensor_bind(r, device, tg_buffer_get_base(device)));
    CHECK_STATUS(tg_tensor_memset(r, 0, 0, 16), TG_ERR_UNSUPPORTED);
    CHECK_ERR_HAS("its buffer type 'test-device' has no memset");
    tg_buffer_free(device);

    /* multi-buffer: binding goes to the part holding the address */
    tg_buffer *parts[2] = {tg_buft_alloc_buffer(&host_type, 64), tg_buft_alloc_buffer(&host_type, 64)};
    tg_buffer *multi = tg_multi_buffer_new(parts, 2);
    CHECK(multi && tg_buffer_is_multi(multi) && tg_buffer_get_size(multi) == 128);
    tg_buffer_set_usage(multi, TG_BUFFER_USAGE_WEIGHTS);
    CHECK(parts[1]->usage == TG_BUFFER_USAGE_WEIGHTS);
    CHECK_OK(tg_tensor_bind(c, multi, (char *)tg_buffer_get_base(parts[1]) + 16));
    CHECK(c->buffer == parts[1]);
    CHECK_OK(tg_tensor_set(c, v, 0, 16));
    tg_buffer_begin_plan(multi); /* a new plan of the whole makes its parts' bindings stale */
    CHECK_STATUS(tg_tensor_get(c, out, 0, 16), TG_ERR_STALE);
    tg_buffer_free(multi);
    tg_buffer_free(buf);
    tg_context_free(ctx2);
    tg_context_free(ctx);
    return tg_test_finish();
}

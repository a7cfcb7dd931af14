/* Checked tensor access with bad host-side arguments: a NULL host pointer for a
 * non-empty range fails with a status and a message naming the tensor, on a
 * tensor bound in the real CPU backend's buffer (whose set/get copy blindly),
 * through the synchronous and the async entry points. */
#include "tg-cpu.h"
#include "tg_test.h"

int main(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    tg_set_name(t, "bound_t");
    tg_buffer *buf = tg_buft_alloc_buffer(tg_cpu_buffer_type(), 256);
    CHECK(buf != NULL);
    CHECK_OK(tg_tensor_bind(t, buf, tg_buffer_get_base(buf)));

    CHECK_STATUS(tg_tensor_set(t, NULL, 0, 16), TG_ERR_INVALID);
    CHECK_ERR_HAS("bound_t");
    CHECK_ERR_HAS("NULL");
    CHECK_STATUS(tg_tensor_get(t, NULL, 4, 8), TG_ERR_INVALID);
    CHECK_ERR_HAS("bound_t");
    /* zero bytes need no memory */
    CHECK_OK(tg_tensor_set(t, NULL, 0, 0));
    CHECK_OK(tg_tensor_get(t, NULL, 64, 0));
    /* a NULL tensor is refused before anything is read */
    CHECK_STATUS(tg_tensor_set(NULL, "x", 0, 1), TG_ERR_INVALID);

    /* the async entry points fall back to the checked copy and leave the tensor intact */
    float v[16];
    for (int i = 0; i < 16; i++) v[i] = (float)i;
    CHECK_OK(tg_tensor_set(t, v, 0, sizeof v));
    tg_backend *cpu = tg_backend_cpu_new();
    tg_backend_tensor_set_async(cpu, t, NULL, 0, sizeof v);
    tg_backend_tensor_get_async(cpu, t, NULL, 0, sizeof v);
    tg_backend_synchronize(cpu);
    float out[16] = {0};
    CHECK_OK(tg_tensor_get(t, out, 0, sizeof out));
    CHECK(out[15] == 15.0f);
    /* an async copy between tensors of different sizes is refused before any backend queues it */
    struct tg_tensor *half = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    tg_set_name(half, "half");
    CHECK_OK(tg_tensor_bind(half, buf, (char *)tg_buffer_get_base(buf) + 128));
    CHECK_STATUS(tg_backend_tensor_copy_async(cpu, cpu, t, half), TG_ERR_INVALID);
    CHECK_ERR_HAS("copy_async 'bound_t' -> 'half': sizes differ (64 vs 32 bytes)");

    tg_backend_free(cpu);
    tg_buffer_free(buf);
    tg_context_free(ctx);
    return tg_test_finish();
}

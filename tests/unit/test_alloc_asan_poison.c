/* In ASan builds the graph allocator poisons the parts of its compute buffers
 * that no tensor of the current plan owns: a late read through a tensor of an
 * earlier graph is reported instead of silently returning reused bytes.  The
 * read happens in a child process, which must die with ASan's use-after-poison
 * report.  Without ASan there is nothing to show: skipped (exit 77). */
#include "tg-alloc.h"
#include "tg-cpu.h"
#include "tg_test.h"

#include "tg_test_child.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

int main(void) {
#ifndef HAVE_ASAN
    printf("not an ASan build: skipped\n");
    return 77;
#else
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    tg_gallocr *ga = tg_gallocr_new(tg_cpu_buffer_type());
    /* graph 1: a big intermediate, then a small result */
    struct tg_tensor *x = tg_new_tensor_1d(ctx, TG_TYPE_F32, 4096);
    tg_set_input(x);
    struct tg_tensor *big = tg_scale(ctx, tg_sqr(ctx, x), 2.0f);
    tg_set_output(big);
    struct tg_graph *g1 = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g1, big));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g1));
    float v[4] = {1, 2, 3, 4};
    CHECK_OK(tg_tensor_set(big, v, 0, sizeof v)); /* live tensor: fine */
    /* graph 2: tiny; big's bytes now belong to no tensor */
    struct tg_tensor *y = tg_new_tensor_1d(ctx, TG_TYPE_F32, 8);
    tg_set_input(y);
    struct tg_tensor *small = tg_scale(ctx, y, 3.0f);
    tg_set_output(small);
    struct tg_graph *g2 = tg_graph_new(8);
    CHECK_OK(tg_graph_build_forward_expand(g2, small));
    CHECK_OK(tg_gallocr_alloc_graph(ga, g2));
    CHECK_STATUS(tg_tensor_get(big, v, 0, sizeof v), TG_ERR_STALE); /* the checked path says stale */
    /* a kernel that kept the old pointer: reads the middle of big's old block */
    struct tg_child_read late = tg_test_read_in_child((const float *)big->data + 2048);
    CHECK_MSG(late.started && !(WIFEXITED(late.status) && WEXITSTATUS(late.status) == 0), "the late read was not caught");
    CHECK_MSG(tg_child_reported(&late, "use-after-poison"), "no use-after-poison report: %.300s", late.report);
    /* a read of the current plan's tensor is fine */
    float w[8] = {0};
    CHECK_OK(tg_tensor_get(small, w, 0, sizeof w));
    tg_gallocr_free(ga);
    tg_graph_free(g1);
    tg_graph_free(g2);
    tg_context_free(ctx);
    return tg_test_finish();
#endif
}

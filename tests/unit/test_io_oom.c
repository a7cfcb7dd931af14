/* Host memory running out while a `.tg` text is parsed is TG_ERR_ALLOC (as
 * tg-io.h promises), whichever allocation fails, never TG_ERR_INVALID: the
 * text itself is fine, and nothing allocated before the failure is left
 * behind.  The test fails the k-th allocation for every k (tg_test_oom.h);
 * sanitizers that own the allocator rule that out, and there the test is
 * skipped. */
#include <stdio.h>
#include <string.h>

#include "tg-io.h"
#include "tg_test.h"
#include "tg_test_oom.h"

int main(void) {
#ifndef OOM_CAN_FAIL
    printf("skipped: this build's allocator cannot be replaced (a sanitizer owns it, or not glibc)\n");
    return 77;
#else
    if (!oom_injects()) return oom_skip_not_injecting();
    /* Enough tensors for the context's metadata to take several chunks, so that
     * failures fall inside the tensor lines too, not only in the set-up. */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return 1;
    fprintf(m, "tgraph 1\nbackends gpu,cpu\nmeta a=1\n");
    for (int i = 0; i < 300; i++) fprintf(m, "leaf %d f32 4 1 1 1 none name=t%d\n", i, i);
    fprintf(m, "node 300 f32 4 1 1 1 add src=0,1 name=sum\n");
    fclose(m);

    int failures = 0, tensor_line_failures = 0;
    bool finished = false;
    for (long k = 0; k < 10000 && !finished; k++) {
        struct tg_file *f = (struct tg_file *)1;
        tg_clear_error();
        const long live_before = oom_live();
        oom_fail_at(k);
        enum tg_status st = tg_file_parse(text, len, "oom.tg", &f);
        const bool injected = oom_disarm();
        if (!injected) {
            /* Fewer than k + 1 allocations: every one has been failed once. */
            CHECK_OK(st);
            finished = true;
        } else if (st == TG_OK) {
            CHECK_MSG(0, "allocation %ld failed and the parse still succeeded", k);
        } else {
            failures++;
            CHECK_MSG(st == TG_ERR_ALLOC, "allocation %ld failed: status %s, want TG_ERR_ALLOC: %s", k,
                      tg_status_name(st), tg_last_error());
            CHECK(f == NULL);
            CHECK(strstr(tg_last_error(), "out of host memory") != NULL);
            const char *e = tg_last_error();
            if (strncmp(e, "oom.tg:", 7) == 0 && e[7] >= '0' && e[7] <= '9') tensor_line_failures++;
        }
        tg_file_free(st == TG_OK ? f : NULL);
        CHECK_MSG(oom_live() == live_before, "allocation %ld failed: %ld blocks leaked", k, oom_live() - live_before);
    }
    CHECK(finished);
    CHECK_MSG(tensor_line_failures > 0, "no failure fell on a line (%d failures in all)", failures);
    printf("%d allocations failed one at a time, %d of them on a line\n", failures, tensor_line_failures);
    free(text);
    return tg_test_finish();
#endif
}

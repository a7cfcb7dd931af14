/* The CUDA tests' one question before they start: is a device there to test? */
#ifndef TG_CUDA_TEST_H
#define TG_CUDA_TEST_H

#include "tg-cuda.h"
#include "tg_test.h"

/* Whether a CUDA device is there to test.  A driver or device that is there
 * but unusable (a driver older than the runtime, say) is a failure, recorded
 * here, never a skip. */
#define TG_TEST_CUDA_PRESENT() tg_test_cuda_present_(__FILE__, __LINE__)
static inline int tg_test_cuda_present_(const char *file, int line) {
    if (tg_cuda_device_count() > 0) return 1;
    if (!tg_cuda_absence_is_expected()) {
        tg_test_failed_++;
        fprintf(stderr, "%s:%d: CHECK failed: CUDA is installed but unusable: %s\n", file, line,
                tg_cuda_unavailable_reason());
    } else {
        printf("%s\n", tg_cuda_unavailable_reason());
    }
    return 0;
}

#endif

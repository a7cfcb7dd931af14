/* Built when TG_CUDA is off: the CUDA entry points exist and report no device,
 * so callers and tests need no #ifdefs (CUDA tests skip with exit 77). */
#include "tg-cuda.h"
#include "cuda_testing.h"

/* With TG_CUDA the glob also compiles this file next to the real backend. */
#ifndef TG_HAVE_CUDA

int tg_cuda_device_count(void) { return 0; }
const char *tg_cuda_unavailable_reason(void) { return "this build has no CUDA backend (configure with -DTG_CUDA=ON)"; }
bool tg_cuda_absence_is_expected(void) { return true; }

tg_backend *tg_backend_cuda_new(int device) {
    tg_fail(TG_ERR_UNSUPPORTED, "CUDA device %d requested, but this build has no CUDA backend "
            "(configure with -DTG_CUDA=ON on a machine with nvcc)", device);
    return NULL;
}

bool tg_backend_is_cuda(tg_backend *backend) { (void)backend; return false; }
tg_buffer_type *tg_cuda_buffer_type(int device) { (void)device; return NULL; }
tg_buffer_type *tg_cuda_host_buffer_type(void) { return NULL; }
void tg_backend_cuda_set_offload_min_batch(tg_backend *backend, int64_t min_batch) {
    (void)backend;
    (void)min_batch;
}

void tg_cuda_testing_note_failure(int device, int cuda_error, const char *what) {
    (void)device;
    (void)cuda_error;
    (void)what;
}
void tg_cuda_testing_set_attn_scratch_limit(tg_backend *backend, size_t bytes) {
    (void)backend;
    (void)bytes;
}

void tg_cuda_testing_use_memory_pools(tg_backend *backend, bool use) {
    (void)backend;
    (void)use;
}

#endif /* TG_HAVE_CUDA */

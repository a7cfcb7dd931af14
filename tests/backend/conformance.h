/* Backend conformance: holds a backend written against tg-backend.h to the
 * contract the allocator and the scheduler rely on (docs/backends.md).
 *
 * tg_conformance_run makes the backend with the target's factory and runs four
 * parts, each against the CPU backend as the reference (the CPU's kernels are
 * held against ggml's in tests/ggml, not here):
 *   buffers  the buffer type and buffer interface: names, alignment of the
 *            base and of every bound tensor, get_alloc_size (the hook itself)
 *            never under tg_nbytes, is_host the same on the type and its
 *            buffers, empty buffers, clear, set/get/memset at offsets (and
 *            nothing outside the range touched), views, the init_tensor hook,
 *            static allocation, async set/get and copies to and from the CPU;
 *   ops      every case of the op grid (tests/backend/op_grid.h) the backend
 *            claims in supports_op, against the CPU within the op's bound,
 *            with sentinel bytes around every tensor; cases it refuses are
 *            counted, not judged; claiming none of them fails;
 *   graphs   random computable graphs (the generator of prop_sched_compute)
 *            scheduled over {backend, CPU} and {backend, sim device, CPU},
 *            weights moved and nodes pinned at random, every schedule checked
 *            by the scheduler checkers, results compared with the CPU alone
 *            (bit for bit, or within graph_max_nmse), also pipelined, under
 *            the sim race detector (which sees the backend's accesses when it
 *            computes on host memory on the calling thread);
 *   async    queue order of async set/compute/get, synchronize, events
 *            (record, wait on the CPU, synchronize) when the backend has them,
 *            take_failure after clean work.
 * What it cannot check is in docs/backends.md. */
#ifndef TG_CONFORMANCE_H
#define TG_CONFORMANCE_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parts, as bits of tg_conformance_run's result and of skip. */
enum {
    TG_CONFORMANCE_BUFFERS = 1,
    TG_CONFORMANCE_OPS = 2,
    TG_CONFORMANCE_GRAPHS = 4,
    TG_CONFORMANCE_ASYNC = 8,
};

struct tg_conformance_target {
    const char *name;
    /* A fresh backend under test (the harness frees it); NULL with tg_fail set
     * when it cannot be made.  Called once per part, and more for graphs. */
    tg_backend *(*new_backend)(void *user);
    void *user;
    /* The buffer type the buffers part checks; NULL: the backend's default
     * (the other parts always use the default). */
    tg_buffer_type *(*buffer_type)(tg_backend *backend, void *user);
    /* Random graphs against the CPU alone: 0 bit for bit (a backend using the
     * CPU's kernels), else the NMSE each float result may have (CUDA: 2e-3). */
    double graph_max_nmse;
    int graph_seeds; /* 0: 60 */
    unsigned skip;   /* parts not to run */
};

/* Runs the parts, printing one line per part ("conformance NAME: PART: ok" or
 * "FAILED" with the first failures on stderr).  Returns the parts that failed
 * (0: the backend conforms). */
int tg_conformance_run(const struct tg_conformance_target *target);

#ifdef __cplusplus
}
#endif
#endif

/* tgsched simulated discrete device (docs/testing.md, "The race detector").
 *
 * Device memory is reserved PROT_NONE and opened only inside the device's own
 * copy and compute calls, so a host dereference faults.  Kernels are the
 * CPU's, so results match the CPU bit for bit.
 *
 * It behaves as a CUDA device with one stream.  graph_compute, the async
 * set/get, copies (cpy_tensor_async) and event records and waits are items of
 * the device's in-order queue, run by its worker thread; the call returns at
 * once (a compute takes its nodes' description with it).  Async sets and gets
 * read and write the caller's host memory when the item runs.  A copy from a
 * source in host memory first synchronizes the source's backend and reads the
 * source at the call, then writes on the destination's queue; a copy from
 * device memory runs on the source backend's queue, and the destination's
 * queue waits for it.  A wait waits for the record its event had when the
 * wait was issued (none: nothing to wait for).  Synchronous access
 * (tg_tensor_set/get/memset, buffer clear) happens at once on the calling
 * thread, ordered with nothing queued: synchronize first.  Without host
 * memory for a queue item, these void calls wait on the host instead (the
 * queues the item would follow run empty first, or the record it would wait
 * for is reached), which keeps every order the item would have kept.
 *
 * With a race detector (tg_sim_race) every such access is judged when it is
 * issued: a read of bytes whose last write is not ordered before it, a write
 * over bytes still being read or written without order, and a buffer freed
 * while other queues' work on it is not ordered before, are races.  The first
 * is reported (tensor names, both operations, the missing edge) and every
 * later graph_compute of a device using the detector fails with it.  The
 * verdict depends on the order work is issued in, not on timing; a jitter
 * seed makes the worker threads interleave differently, to shake out wrong
 * results as well. */
#ifndef TG_SIM_H
#define TG_SIM_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A happens-before race detector over the sim devices' queues and the host
 * threads (backends/sim/sim_race.c).  The devices using it keep it (until
 * they, their buffers and events are freed): it may be freed in any order. */
typedef struct tg_sim_race tg_sim_race;
tg_sim_race *tg_sim_race_new(void);
void tg_sim_race_free(tg_sim_race *race);
/* Races found so far.  A detector that ran out of host memory counts one
 * more, whose report says so (an access went unchecked: the run cannot pass),
 * and the devices' graph_compute then says TG_ERR_ALLOC. */
int tg_sim_race_count(tg_sim_race *race);
const char *tg_sim_race_report(tg_sim_race *race); /* the first race, "" when none */
/* Host threads the caller orders itself (pthread_join, a mutex, a condition
 * variable) are unordered to the detector, which sees only the devices'
 * edges.  Tell it: the thread handing over calls release with a key (any
 * address) after its work, the thread taking over calls acquire with the
 * same key after the hand-over; what the first did before its release then
 * comes before what the second does after its acquire.  An acquire of a key
 * never released orders nothing. */
void tg_sim_race_host_release(tg_sim_race *race, const void *key);
void tg_sim_race_host_acquire(tg_sim_race *race, const void *key);

struct tg_sim_params {
    const char *name;       /* "sim0" when NULL */
    size_t alignment;       /* power of two; 0: 256 */
    size_t alloc_pad;       /* extra bytes per tensor in get_alloc_size (0: none) */
    size_t max_buffer_size; /* 0: unlimited */
    /* Supported ops; all computable ops when supported_ops_all is true. */
    bool supported_ops_all;
    bool supported_ops[TG_OP_COUNT];
    /* offload_op: claim ops with weights in host memory when the batch
     * (ne[1] of the op) is at least this; 0 never offloads. */
    int64_t offload_min_batch;
    bool share_host_buffer_type; /* a BLAS-like backend: uses the CPU buffer type */
    bool synchronous;            /* no worker thread (debugging) */
    bool plan_only;              /* supports_op ignores kernel availability; compute refuses (see tg-cpu.h) */
    tg_sim_race *race;           /* judges every access (shared by the devices it judges); NULL: none */
    uint64_t jitter_seed;        /* nonzero: queued items are delayed at random (this seed), reordering queues */
};

void tg_sim_params_default(struct tg_sim_params *p); /* all ops, alignment 256 */
tg_backend *tg_backend_sim_new(const struct tg_sim_params *params);
bool tg_backend_is_sim(tg_backend *backend);
tg_buffer_type *tg_sim_buffer_type(tg_backend *backend);
/* tg_backend_synchronize, returning the first failure of a queued compute
 * since the last call that returned one (its node and reason in
 * tg_last_error()); backend may be a watch of a sim.  The plain synchronize
 * leaves that message in tg_last_error() and the next graph_compute returns
 * it.  What can be refused when a compute is issued (an unsupported op, a
 * node or source without memory, memory the device cannot reach) fails that
 * call.  A device (or watch) may be freed before its buffers and events. */
TG_NODISCARD enum tg_status tg_sim_synchronize(tg_backend *backend);

/* ---- the watch: another backend as the race detector and the protocol trace see it ----
 * Wraps inner (and owns it: freeing the watch frees inner) and forwards every
 * call.  With race, a backend computing on host memory (the CPU) tells the
 * detector what its computes read and write, as the host thread's accesses,
 * and its async set/get become host accesses done at once.  With trace, every
 * call that orders work (compute, copy, event record/wait/synchronize,
 * synchronize, async set/get) is appended to the trace, backends named by the
 * order their watches were made and events by their backend and the order the
 * trace first names them (since it was cleared): the protocol a scheduler
 * issued, comparable across backends (a CUDA run against a sim run of the
 * same schedule). */
typedef struct tg_sim_trace tg_sim_trace;
tg_sim_trace *tg_sim_trace_new(void);
void tg_sim_trace_free(tg_sim_trace *trace);
/* One line per call; a trace that ran out of host memory (a call went
 * unrecorded) is one line saying so instead, until cleared. */
const char *tg_sim_trace_text(tg_sim_trace *trace);
void tg_sim_trace_clear(tg_sim_trace *trace);       /* forgets the calls, keeps the names */
tg_backend *tg_sim_watch_new(tg_backend *inner, tg_sim_race *race, tg_sim_trace *trace);
bool tg_backend_is_sim_watch(tg_backend *backend);
tg_backend *tg_sim_watch_inner(tg_backend *backend); /* the wrapped backend, or backend itself */

#ifdef __cplusplus
}
#endif
#endif

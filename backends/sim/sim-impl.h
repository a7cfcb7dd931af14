/* The simulated device's parts (internal): the device and its memory
 * (sim.c), its queue and events (sim_queue.c), the happens-before race
 * detector (sim_race.c) and the watch wrapper (sim_watch.c). */
#ifndef TG_SIM_IMPL_H
#define TG_SIM_IMPL_H

#include "tg-host-observe.h"
#include "tg-sim.h"

#include <pthread.h>
#include <stdint.h>

/* ---- the race detector (sim_race.c) ---------------------------------------------------
 * Judges the order in which work is issued, never the timing: every call
 * below is made by a host thread when it issues the work, so the verdict is
 * the same however the worker threads happen to run.  Agents are the
 * devices' queues and the host threads; each has a vector clock. */

#define SIM_RACE_MAX_AGENTS 64

struct sim_race_clock {
    uint32_t at[SIM_RACE_MAX_AGENTS];
};

/* The logical side of an event: the clock of its latest record. */
struct sim_race_event {
    struct sim_race_clock clock;
    bool recorded;
};

/* One memory access of an item: bytes [lo, hi), what touches them. */
struct sim_race_access {
    uintptr_t lo, hi;
    bool write;
    const char *tensor; /* the tensor the bytes belong to ("host memory" for a plain host array) */
    const char *op;     /* the operation, e.g. "compute of node 'x' (op add)" */
};

/* Devices hold a reference to their detector (the user's is tg_sim_race_free). */
void sim_race_ref(tg_sim_race *r);
void sim_race_unref(tg_sim_race *r);
/* A new queue agent named name; -1 (with tg_fail) when the detector is full. */
int sim_race_queue_new(tg_sim_race *r, const char *name);
/* The queue is gone: the calling host thread has waited for all its work. */
void sim_race_queue_free(tg_sim_race *r, int queue);
/* The calling host thread issues an item on queue: its accesses happen after
 * everything the host thread did so far and after earlier items of queue. */
void sim_race_issue(tg_sim_race *r, int queue, const struct sim_race_access *acc, int n);
/* The calling host thread accesses memory itself, now. */
void sim_race_host(tg_sim_race *r, const struct sim_race_access *acc, int n);
/* An event recorded on queue (issued by the calling host thread). */
void sim_race_record(tg_sim_race *r, int queue, struct sim_race_event *e);
/* queue waits for e's latest record (issued by the calling host thread). */
void sim_race_wait(tg_sim_race *r, int queue, const struct sim_race_event *e);
/* The calling host thread waits for e's latest record. */
void sim_race_host_wait_event(tg_sim_race *r, const struct sim_race_event *e);
/* The calling host thread waits for everything issued on queue so far. */
void sim_race_host_wait_queue(tg_sim_race *r, int queue);
/* Computing nodes (each reads its sources and writes itself) on device:
 * issued on queue, or done by the calling host thread (queue -1). */
bool sim_race_compute(tg_sim_race *r, int queue, const struct tg_tensor *const *nodes, int n, const char *device);
/* Host memory ran out inside the detector: some access went unchecked (and
 * counts as a race, so that the run fails).  sim_race_compute says false
 * instead, having told nothing, when it cannot start. */
bool sim_race_out_of_memory(tg_sim_race *r);
/* Names the memory [base, base + size) in reports (a sim buffer). */
void sim_race_memory_add(tg_sim_race *r, const void *base, size_t size, const char *name);
/* The memory is freed by the calling host thread: every access to it must be
 * ordered before (else a race is reported); then it is forgotten. */
void sim_race_memory_free(tg_sim_race *r, const void *base, size_t size);

/* ---- the queue (sim_queue.c) -----------------------------------------------------------
 * One in-order queue per device, run by a worker thread (or inline when the
 * device is synchronous).  Marks are records of events: a wait blocks until
 * the mark it names is reached, as a CUDA stream waits for the record an
 * event had when the wait was issued. */

struct sim_device;

struct sim_mark {
    pthread_mutex_t lock;
    pthread_cond_t reached_cond;
    bool reached;
    int refs; /* atomic */
};

struct sim_mark *sim_mark_new(void);
void sim_mark_ref(struct sim_mark *m);
void sim_mark_unref(struct sim_mark *m);
void sim_mark_wait(struct sim_mark *m);
/* A mark reached from the start, never freed (its own reference is never
 * dropped): an event recorded without memory for a mark of its own, once
 * the work before the record is done. */
extern struct sim_mark sim_mark_reached;

enum sim_item_kind { SIM_ITEM_COPY, SIM_ITEM_COMPUTE, SIM_ITEM_RECORD, SIM_ITEM_WAIT };

struct sim_item {
    enum sim_item_kind kind;
    /* SIM_ITEM_COPY: size bytes from src to dst; each side is memory of a
     * device (opened there) or host memory (NULL device). */
    void *dst;
    const void *src;
    size_t size;
    struct sim_device *dst_dev, *src_dev;
    void *owned; /* freed after the item (a staging copy of host data) */
    /* SIM_ITEM_COMPUTE: owned snapshots of the nodes (sources point into it) */
    struct tg_tensor *nodes;
    int n_nodes;
    struct sim_mark *mark; /* SIM_ITEM_RECORD, SIM_ITEM_WAIT */
    struct sim_item *next;
};

struct sim_queue {
    pthread_mutex_t lock;
    pthread_cond_t has_work, idle;
    struct sim_item *head, *tail;
    int busy;
    int peer_pending; /* items of other queues that touch this device's memory */
    bool stop, synchronous, started;
    uint64_t jitter; /* PRNG state; 0: no jitter */
    pthread_t worker;
};

/* Starts the queue of d (a worker thread unless synchronous). */
enum tg_status sim_queue_start(struct sim_device *d, struct sim_queue *q, bool synchronous, uint64_t jitter_seed);
/* Runs what is queued and ends the worker; the queue can still be drained
 * (other queues' copies into the device's memory) until sim_queue_destroy. */
void sim_queue_stop(struct sim_queue *q);
void sim_queue_destroy(struct sim_queue *q);
/* Issues it on d's queue (takes ownership).  An item of another device's
 * queue that touches d's memory is counted in d's peer_pending until done. */
void sim_queue_push(struct sim_device *d, struct sim_item *it);
/* Waits until d's queue is empty and no other queue's item touches its memory. */
void sim_queue_drain(struct sim_device *d);
/* NULL without host memory (no message: each caller has its own fallback). */
struct sim_item *sim_item_new(enum sim_item_kind kind);

/* ---- the device (sim.c), as the queue sees it ------------------------------------------ */

struct sim_queue *sim_device_queue(struct sim_device *d);
/* Runs one item on d's worker (or inline): opens the memory it touches. */
void sim_device_run_item(struct sim_device *d, struct sim_item *it);
/* The queue of d ran empty: close its memory before anyone hears it is idle. */
void sim_device_idle(struct sim_device *d);
/* Copies size bytes between device and host memory from any thread: each
 * device side is opened under that device's lock (and closed again unless
 * runner, the device whose worker calls, keeps it open until idle). */
void sim_device_copy(struct sim_device *runner, struct sim_device *dst_dev, void *dst, struct sim_device *src_dev,
                     const void *src, size_t size);

/* For tests of the path a failure on the worker takes (none of the CPU
 * kernels' failures can be provoked at will): the first node of the next
 * compute queued on sim (or a watch of it) fails on the worker with st in its
 * kernel's place, and is reported as a failed kernel is; the later nodes run. */
void sim_device_fail_next_compute(tg_backend *sim, enum tg_status st);

/* ---- the host's own accesses to host memory ---------------------------------------------
 * The sim observes them for its host-sharing devices under a detector
 * (impl/tg-host-observe.h). */
/* The calling thread's next host accesses are told by the caller itself (the
 * watch, by its own names): the observer keeps quiet until called with false. */
void sim_host_observer_quiet(bool quiet);

#endif

/* Every place the scheduler orders work on its backends (an event record, a
 * wait, a synchronize) and the queue it issues a split-input copy on, by name,
 * so that a self-test can drop any one of them and show that the sim devices'
 * race detector catches it (props/prop_sched_race_faults.c).
 *
 * Test-only: nothing but tg_sched_testing_drop (sched_sync.c) sets a drop, and
 * no environment variable does; a scheduler nobody told to drop anything issues
 * every call. */
#ifndef TG_SCHED_SYNC_H
#define TG_SCHED_SYNC_H

#include "tg-sched.h"

enum tg_sched_sync_site {
    TG_SCHED_SYNC_SPLIT_RECORD,   /* compute: a split's event recorded after it */
    TG_SCHED_SYNC_PREV_EVENT,     /* compute: the host waits for the previous split's event (another backend) */
    TG_SCHED_SYNC_PREV_BACKEND,   /* compute: ... or for that backend, without events */
    TG_SCHED_SYNC_INPUT_EVENT,    /* copy_inputs: the host waits for the copy slot's last user before a user input */
    TG_SCHED_SYNC_INPUT_BACKEND,  /* copy_inputs: ... or for the split's backend, without events */
    TG_SCHED_SYNC_COPY_EVENT,     /* copy_inputs: the copy's queue (the source's) waits for the slot's last user */
    TG_SCHED_SYNC_COPY_BACKEND,   /* copy_inputs: ... or the host waits for the split's backend, without events */
    TG_SCHED_SYNC_COPY_QUEUE,     /* copy_inputs: a copy issued on its source's queue (dropped: the split's) */
    TG_SCHED_SYNC_NEXT_GRAPH,     /* forget_graph: backends sharing memory finish before the next graph */
    TG_SCHED_SYNC_INPUT_DEVICE,   /* alloc: a device holding a user input finishes before the caller sets it */
    TG_SCHED_SYNC_REPLAN,         /* alloc: every backend finishes before memory is planned again */
    TG_SCHED_SYNC_RESERVE,        /* reserve: every backend finishes before the buffers are reserved again */
    TG_SCHED_SYNC_CALLBACK,       /* compute with an eval callback: the split's part finishes before the callback */
    TG_SCHED_SYNC_COMPUTE_END,    /* graph_compute: every backend finishes before it returns */
    TG_SCHED_SYNC_COUNT
};

const char *tg_sched_sync_site_name(enum tg_sched_sync_site site);
/* Test-only: the scheduler leaves out every call of site from now on
 * (TG_SCHED_SYNC_COUNT: none again). */
void tg_sched_testing_drop(tg_sched *s, enum tg_sched_sync_site site);

#endif

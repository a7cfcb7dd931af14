/* The scheduler's ordering calls, each named by its site (sched-sync.h), and
 * the test-only switch that drops one. */
#include "sched-impl.h"
#include "sched-sync.h"

static const char *const site_names[TG_SCHED_SYNC_COUNT] = {
    "split-record", "prev-event", "prev-backend", "input-event", "input-backend", "copy-event", "copy-backend",
    "copy-queue",   "next-graph", "input-device", "replan",      "reserve",       "callback",     "compute-end",
};

const char *tg_sched_sync_site_name(enum tg_sched_sync_site site) {
    return (unsigned)site < TG_SCHED_SYNC_COUNT ? site_names[site] : "?";
}

void tg_sched_testing_drop(tg_sched *s, enum tg_sched_sync_site site) {
    if (s) s->dropped_site = (unsigned)site < TG_SCHED_SYNC_COUNT ? (int)site + 1 : 0;
}

static bool issued(const tg_sched *s, enum tg_sched_sync_site site) { return s->dropped_site != (int)site + 1; }

void sched_record(const tg_sched *s, enum tg_sched_sync_site site, tg_event *e, tg_backend *b) {
    if (issued(s, site)) tg_event_record(e, b);
}

void sched_wait(const tg_sched *s, enum tg_sched_sync_site site, tg_backend *b, tg_event *e) {
    if (issued(s, site)) tg_event_wait(b, e);
}

void sched_wait_event(const tg_sched *s, enum tg_sched_sync_site site, tg_event *e) {
    if (issued(s, site)) tg_event_synchronize(e);
}

void sched_wait_backend(const tg_sched *s, enum tg_sched_sync_site site, tg_backend *b) {
    if (issued(s, site)) tg_backend_synchronize(b);
}

void sched_wait_all(const tg_sched *s, enum tg_sched_sync_site site) {
    for (int b = 0; issued(s, site) && b < s->n_backends; b++) tg_backend_synchronize(s->backends[b]);
}

tg_backend *sched_copy_queue(const tg_sched *s, int source_backend, int split_backend) {
    return s->backends[issued(s, TG_SCHED_SYNC_COPY_QUEUE) ? source_backend : split_backend];
}

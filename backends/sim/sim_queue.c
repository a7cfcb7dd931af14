/* A sim device's queue: items run in order on the device's worker thread
 * (inline, at once, for a synchronous device), with a seeded jitter that
 * delays some items so that the queues of several devices interleave in
 * every way their events allow.  Marks are the records of events. */
#include "sim-impl.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* ---- marks ------------------------------------------------------------------------------ */

struct sim_mark *sim_mark_new(void) {
    struct sim_mark *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->reached_cond, NULL);
    m->refs = 1;
    return m;
}

void sim_mark_ref(struct sim_mark *m) { __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED); }

void sim_mark_unref(struct sim_mark *m) {
    if (!m || __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->reached_cond);
    free(m);
}

static void mark_reach(struct sim_mark *m) {
    pthread_mutex_lock(&m->lock);
    m->reached = true;
    pthread_cond_broadcast(&m->reached_cond);
    pthread_mutex_unlock(&m->lock);
}

void sim_mark_wait(struct sim_mark *m) {
    pthread_mutex_lock(&m->lock);
    while (!m->reached) pthread_cond_wait(&m->reached_cond, &m->lock);
    pthread_mutex_unlock(&m->lock);
}

/* ---- items -------------------------------------------------------------------------------- */

struct sim_mark sim_mark_reached = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, true, 1};

struct sim_item *sim_item_new(enum sim_item_kind kind) {
    struct sim_item *it = calloc(1, sizeof *it);
    if (it) it->kind = kind;
    return it;
}

/* The devices other than the queue's own whose memory the item touches. */
static void peers_of(struct sim_device *d, const struct sim_item *it, struct sim_device *out[2]) {
    out[0] = it->kind == SIM_ITEM_COPY && it->dst_dev && it->dst_dev != d ? it->dst_dev : NULL;
    out[1] = it->kind == SIM_ITEM_COPY && it->src_dev && it->src_dev != d && it->src_dev != out[0] ? it->src_dev : NULL;
}

static void peer_count(struct sim_device *peer, int delta) {
    struct sim_queue *q = sim_device_queue(peer);
    pthread_mutex_lock(&q->lock);
    q->peer_pending += delta;
    if (!q->head && !q->busy && !q->peer_pending) pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->lock);
}

static void run_and_free(struct sim_device *d, struct sim_item *it) {
    struct sim_device *peers[2];
    peers_of(d, it, peers);
    switch (it->kind) {
    case SIM_ITEM_COPY:
    case SIM_ITEM_COMPUTE: sim_device_run_item(d, it); break;
    case SIM_ITEM_RECORD: mark_reach(it->mark); break;
    case SIM_ITEM_WAIT:
        sim_device_idle(d); /* it may block for long: no memory stays open meanwhile */
        sim_mark_wait(it->mark);
        break;
    }
    for (int k = 0; k < 2; k++) {
        if (peers[k]) peer_count(peers[k], -1);
    }
    sim_mark_unref(it->mark);
    free(it->owned);
    free(it->nodes);
    free(it);
}

/* ---- jitter ---------------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Before an item: a yield for one in four, a sleep of 20-80 us for one in
 * sixteen, so queues overtake each other wherever no event orders them. */
static void jitter(struct sim_queue *q) {
    if (!q->jitter) return;
    uint64_t x = splitmix(&q->jitter);
    if ((x & 15) == 0) {
        struct timespec ts = {0, (long)(20000 + (x >> 8) % 60000)};
        nanosleep(&ts, NULL);
    } else if ((x & 3) == 0) {
        sched_yield();
    }
}

/* ---- the worker ------------------------------------------------------------------------------- */

static void *worker_main(void *arg) {
    struct sim_device *d = arg;
    struct sim_queue *q = sim_device_queue(d);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->has_work, &q->lock);
        if (!q->head && q->stop) break;
        struct sim_item *it = q->head;
        q->head = it->next;
        if (!q->head) q->tail = NULL;
        q->busy++;
        pthread_mutex_unlock(&q->lock);
        jitter(q);
        run_and_free(d, it);
        pthread_mutex_lock(&q->lock);
        if (!q->head) sim_device_idle(d); /* before anyone hears the device is idle */
        q->busy--;
        if (!q->head && !q->busy && !q->peer_pending) pthread_cond_broadcast(&q->idle);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

enum tg_status sim_queue_start(struct sim_device *d, struct sim_queue *q, bool synchronous, uint64_t jitter_seed) {
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->has_work, NULL);
    pthread_cond_init(&q->idle, NULL);
    q->synchronous = synchronous;
    q->jitter = jitter_seed ? jitter_seed | 1 : 0;
    if (!synchronous) {
        if (pthread_create(&q->worker, NULL, worker_main, d) != 0)
            return tg_fail(TG_ERR_ALLOC, "sim device: cannot start its worker thread");
        q->started = true;
    }
    return TG_OK;
}

void sim_queue_stop(struct sim_queue *q) {
    if (q->started) {
        pthread_mutex_lock(&q->lock);
        q->stop = true;
        pthread_cond_signal(&q->has_work);
        pthread_mutex_unlock(&q->lock);
        pthread_join(q->worker, NULL);
        q->started = false;
    }
}

void sim_queue_destroy(struct sim_queue *q) {
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->has_work);
    pthread_cond_destroy(&q->idle);
}

void sim_queue_push(struct sim_device *d, struct sim_item *it) {
    struct sim_queue *q = sim_device_queue(d);
    struct sim_device *peers[2];
    peers_of(d, it, peers);
    for (int k = 0; k < 2; k++) {
        if (peers[k]) peer_count(peers[k], +1);
    }
    if (q->synchronous) {
        run_and_free(d, it);
        sim_device_idle(d);
        return;
    }
    pthread_mutex_lock(&q->lock);
    it->next = NULL;
    if (q->tail) q->tail->next = it;
    else q->head = it;
    q->tail = it;
    pthread_cond_signal(&q->has_work);
    pthread_mutex_unlock(&q->lock);
}

void sim_queue_drain(struct sim_device *d) {
    struct sim_queue *q = sim_device_queue(d);
    pthread_mutex_lock(&q->lock);
    while (q->head || q->busy || q->peer_pending) pthread_cond_wait(&q->idle, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

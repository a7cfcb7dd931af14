/* The sim devices' race detector: happens-before over the devices' queues and
 * the host threads, in the spirit of ThreadSanitizer and of CUDA's
 * compute-sanitizer racecheck.
 *
 * Every agent (a queue, a host thread) has a vector clock; its own entry
 * numbers its operations.  Edges: a host thread issuing an item on a queue
 * (the item comes after everything the thread did), queue order, an event
 * recorded on one queue and waited for on another (or on the host), and the
 * host waiting for a queue.  Shadow memory keeps, per byte range, the last
 * write and the reads since (one per agent, those ordered before a later read
 * of the same range dropped).  An access is a race when a conflicting earlier
 * access (a write before a read or a write; a read before a write) is not
 * ordered before it: the report names both operations, their tensors and the
 * missing edge, and the run fails.
 *
 * Every call comes from the host thread that issues the work, in the order it
 * is issued; the verdict is a function of that order alone, never of how the
 * worker threads happen to run. */
#include "sim-impl.h"
#include "tg-impl.h" /* tg_grow_array */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One access, shared by the shadow segments it covers. */
struct access_rec {
    int refs;
    int agent;
    uint32_t epoch;
    bool write;
    char tensor[TG_MAX_NAME];
    char op[160];
};

/* Bytes [lo, hi) with one history. */
struct segment {
    uintptr_t lo, hi;
    struct access_rec *write;  /* the last write, NULL: none seen */
    struct access_rec **reads; /* since the last write, at most one per agent */
    int n_reads;
};

struct agent {
    bool used, host;
    pthread_t thread;
    char name[48];
    struct sim_race_clock clock;
};

struct named_memory {
    uintptr_t lo, hi;
    char name[48];
};

/* A hand-over between host threads the caller synchronizes itself (a join,
 * a lock): what the releasing threads had done, by key. */
struct handover {
    const void *key;
    struct sim_race_clock clock;
};

struct tg_sim_race {
    int refs; /* atomic: the user's and each device's */
    pthread_mutex_t lock;
    struct agent agents[SIM_RACE_MAX_AGENTS];
    int n_agents, n_hosts;
    struct handover *handovers;
    int n_handovers, cap_handovers;
    struct segment *segs; /* sorted by address, disjoint */
    int n_segs, cap_segs;
    struct named_memory *mems;
    int n_mems, cap_mems;
    int n_races;
    bool out_of_memory; /* some access went unchecked: counted as a race, so that the run fails */
    char first[1536];
};

/* ---- records ------------------------------------------------------------------------------ */

static void rec_unref(struct access_rec *a) {
    if (a && --a->refs == 0) free(a);
}

static struct access_rec *rec_ref(struct access_rec *a) {
    if (a) a->refs++;
    return a;
}


/* ---- agents and clocks -------------------------------------------------------------------- */

static void join(struct sim_race_clock *into, const struct sim_race_clock *from) {
    for (int i = 0; i < SIM_RACE_MAX_AGENTS; i++) {
        if (from->at[i] > into->at[i]) into->at[i] = from->at[i];
    }
}

/* from's operations so far come before to's from now on. */
static void release(tg_sim_race *r, int from, int to) {
    if (from < 0 || to < 0) return;
    join(&r->agents[to].clock, &r->agents[from].clock);
    r->agents[from].clock.at[from]++;
}

static void note_race(tg_sim_race *r, const char *fmt, ...) {
    if (r->n_races++ > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first, sizeof r->first, fmt, ap);
    va_end(ap);
}

/* Under the lock: host memory ran out and a history or an edge is missing.
 * The shadow stays well formed (each caller leaves it as it was, or with a
 * history forgotten), but a race may now go unseen: the run is failed with
 * a race of its own, which names the cause, and the devices say
 * TG_ERR_ALLOC (a check that could not be made is no pass). */
static void lost_memory(tg_sim_race *r) {
    if (r->out_of_memory) return;
    r->out_of_memory = true;
    note_race(r, "sim race detector: out of host memory; accesses from then on are not all checked, so the run "
              "cannot pass");
}

static int agent_new(tg_sim_race *r, bool host, const char *name) {
    if (r->n_agents == SIM_RACE_MAX_AGENTS) return -1;
    int i = r->n_agents++;
    struct agent *a = &r->agents[i];
    memset(a, 0, sizeof *a);
    a->used = true;
    a->host = host;
    if (host) a->thread = pthread_self();
    snprintf(a->name, sizeof a->name, "%s", name);
    a->clock.at[i] = 1;
    return i;
}

/* The calling thread's agent (made at its first call). */
static int host_agent(tg_sim_race *r) {
    pthread_t self = pthread_self();
    for (int i = 0; i < r->n_agents; i++) {
        if (r->agents[i].host && pthread_equal(r->agents[i].thread, self)) return i;
    }
    char name[32];
    snprintf(name, sizeof name, r->n_hosts ? "host thread %d" : "the host", r->n_hosts + 1);
    int i = agent_new(r, true, name);
    if (i < 0) note_race(r, "sim race detector: more than %d queues and host threads; nothing is checked "
                         "for host thread '%s'", SIM_RACE_MAX_AGENTS, name);
    else r->n_hosts++;
    return i;
}

/* ---- shadow memory ------------------------------------------------------------------------- */

/* Index of the first segment ending after x. */
static int seg_after(const tg_sim_race *r, uintptr_t x) {
    int lo = 0, hi = r->n_segs;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (r->segs[mid].hi <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* false (nothing changed) without host memory */
static bool seg_insert(tg_sim_race *r, int at, struct segment s) {
    if (!tg_grow_array((void **)&r->segs, &r->cap_segs, r->n_segs + 1, sizeof *r->segs)) {
        lost_memory(r);
        return false;
    }
    memmove(&r->segs[at + 1], &r->segs[at], (size_t)(r->n_segs - at) * sizeof *r->segs);
    r->segs[at] = s;
    r->n_segs++;
    return true;
}

static void seg_clear_reads(struct segment *s) {
    for (int k = 0; k < s->n_reads; k++) rec_unref(s->reads[k]);
    free(s->reads);
    s->reads = NULL;
    s->n_reads = 0;
}

static void seg_remove(tg_sim_race *r, int at, int n) {
    if (n == 0) return;
    for (int i = at; i < at + n; i++) {
        rec_unref(r->segs[i].write);
        seg_clear_reads(&r->segs[i]);
    }
    memmove(&r->segs[at], &r->segs[at + n], (size_t)(r->n_segs - at - n) * sizeof *r->segs);
    r->n_segs -= n;
}

/* A segment boundary at x; false (none made) without host memory. */
static bool split_at(tg_sim_race *r, uintptr_t x) {
    int i = seg_after(r, x);
    if (i == r->n_segs || r->segs[i].lo >= x) return true;
    struct segment right = r->segs[i];
    right.lo = x;
    if (right.n_reads) {
        right.reads = malloc((size_t)right.n_reads * sizeof *right.reads);
        if (!right.reads) {
            lost_memory(r); /* no boundary: the segment keeps its history whole */
            return false;
        }
    }
    if (!seg_insert(r, i + 1, right)) {
        free(right.reads);
        return false;
    }
    rec_ref(right.write);
    for (int k = 0; k < right.n_reads; k++) right.reads[k] = rec_ref(r->segs[i].reads[k]);
    r->segs[i].hi = x;
    return true;
}

/* Segments tile [lo, hi) exactly (but for gaps left without host memory);
 * returns the index of the first, -1 when a boundary could not be made. */
static int cover(tg_sim_race *r, uintptr_t lo, uintptr_t hi) {
    if (!split_at(r, lo) || !split_at(r, hi)) return -1;
    int first = seg_after(r, lo), i = first;
    for (uintptr_t at = lo; at < hi;) {
        if (i < r->n_segs && r->segs[i].lo == at) {
            at = r->segs[i++].hi;
            continue;
        }
        uintptr_t end = i < r->n_segs && r->segs[i].lo < hi ? r->segs[i].lo : hi;
        if (seg_insert(r, i, (struct segment){.lo = at, .hi = end})) i++; /* else the gap keeps no history */
        at = end;
    }
    return first;
}

static bool same_history(const struct segment *a, const struct segment *b) {
    if (a->hi != b->lo || a->write != b->write || a->n_reads != b->n_reads) return false;
    for (int k = 0; k < a->n_reads; k++) {
        if (a->reads[k] != b->reads[k]) return false;
    }
    return true;
}

/* Merges neighbours with one history in segments [from, to]. */
static void merge(tg_sim_race *r, int from, int to) {
    if (from < 0) from = 0;
    for (int i = to < r->n_segs - 1 ? to : r->n_segs - 2; i >= from; i--) {
        if (!same_history(&r->segs[i], &r->segs[i + 1])) continue;
        r->segs[i].hi = r->segs[i + 1].hi;
        seg_remove(r, i + 1, 1);
    }
}

/* ---- reports ----------------------------------------------------------------------------------- */

static void describe_memory(const tg_sim_race *r, uintptr_t lo, uintptr_t hi, char *out, size_t n) {
    for (int i = 0; i < r->n_mems; i++) {
        const struct named_memory *m = &r->mems[i];
        if (lo >= m->lo && lo < m->hi) {
            snprintf(out, n, "%s, bytes %zu..%zu", m->name, (size_t)(lo - m->lo), (size_t)(hi - m->lo) - 1);
            return;
        }
    }
    snprintf(out, n, "host memory at 0x%zx, %zu bytes", (size_t)lo, (size_t)(hi - lo));
}

static void report(tg_sim_race *r, const struct access_rec *first, int agent, const struct sim_race_access *second,
                   const struct segment *s, const char *kind) {
    if (r->n_races > 0) {
        r->n_races++;
        return;
    }
    const struct agent *u = &r->agents[first->agent], *a = &r->agents[agent];
    char where[128];
    describe_memory(r, s->lo, s->hi, where, sizeof where);
    const char *hint = u->host ? "issue the second only after the first on one host thread, or hand over through "
                                 "an event or a synchronize"
                               : "record an event on the first's queue after it and wait for it before the second "
                                 "(on the second's queue, or on the host), or synchronize the first's queue";
    note_race(r,
              "sim race: %s (%s)\n"
              "  first:  %s: %s (tensor '%s'), its operation #%u\n"
              "  second: %s: %s (tensor '%s'), its operation #%u\n"
              "  missing edge: nothing orders %s's operation #%u before %s's operation #%u (%s has seen %s only up "
              "to #%u): %s",
              kind, where, u->name, first->op, first->tensor, first->epoch, a->name, second->op, second->tensor,
              a->clock.at[agent], u->name, first->epoch, a->name, a->clock.at[agent], a->name, u->name,
              a->clock.at[first->agent], hint);
}

/* ---- accesses ---------------------------------------------------------------------------------- */

static bool ordered_before(const struct access_rec *p, const struct sim_race_clock *c) {
    return p->epoch <= c->at[p->agent];
}

static void access_one(tg_sim_race *r, int agent, const struct sim_race_access *acc) {
    if (agent < 0 || acc->hi <= acc->lo) return;
    const struct sim_race_clock *c = &r->agents[agent].clock;
    struct access_rec *rec = calloc(1, sizeof *rec);
    if (!rec) {
        lost_memory(r);
        return;
    }
    rec->agent = agent;
    rec->epoch = c->at[agent];
    rec->write = acc->write;
    snprintf(rec->tensor, sizeof rec->tensor, "%s", acc->tensor ? acc->tensor : "");
    snprintf(rec->op, sizeof rec->op, "%s", acc->op ? acc->op : "");
    rec->refs = 1;
    int first = cover(r, acc->lo, acc->hi), last = first;
    if (first < 0) { /* the access goes unchecked (and the run fails) */
        rec_unref(rec);
        return;
    }
    bool reported = false;
    for (int i = first; i < r->n_segs && r->segs[i].lo < acc->hi; i++) {
        struct segment *s = &r->segs[i];
        last = i;
        if (!reported && s->write && !ordered_before(s->write, c)) {
            report(r, s->write, agent, acc, s,
                   acc->write ? "a write over bytes whose last write is not ordered before it"
                              : "a read of bytes whose last write is not ordered before it");
            reported = true;
        }
        for (int k = 0; acc->write && !reported && k < s->n_reads; k++) {
            if (!ordered_before(s->reads[k], c)) {
                report(r, s->reads[k], agent, acc, s, "a write over bytes still being read");
                reported = true;
            }
        }
        if (acc->write) {
            rec_unref(s->write);
            s->write = rec_ref(rec);
            seg_clear_reads(s);
            continue;
        }
        /* reads ordered before this one are implied by it: a later write ordered
         * after this read is ordered after them too */
        int kept = 0;
        for (int k = 0; k < s->n_reads; k++) {
            if (ordered_before(s->reads[k], c)) rec_unref(s->reads[k]);
            else s->reads[kept++] = s->reads[k];
        }
        struct access_rec **grown = realloc(s->reads, (size_t)(kept + 1) * sizeof *s->reads);
        if (grown) {
            s->reads = grown;
            s->reads[kept++] = rec_ref(rec);
        } else {
            lost_memory(r); /* this read is forgotten */
        }
        s->n_reads = kept;
    }
    rec_unref(rec);
    merge(r, first - 1, last);
}

/* ---- the interface ------------------------------------------------------------------------------ */

tg_sim_race *tg_sim_race_new(void) {
    tg_sim_race *r = calloc(1, sizeof *r);
    if (!r) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a sim race detector");
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    r->refs = 1;
    return r;
}

void sim_race_ref(tg_sim_race *r) { __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED); }

void tg_sim_race_free(tg_sim_race *r) { sim_race_unref(r); }

void sim_race_unref(tg_sim_race *r) {
    if (!r || __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    seg_remove(r, 0, r->n_segs);
    free(r->segs);
    free(r->mems);
    free(r->handovers);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

bool sim_race_out_of_memory(tg_sim_race *r) {
    pthread_mutex_lock(&r->lock);
    const bool lost = r->out_of_memory;
    pthread_mutex_unlock(&r->lock);
    return lost;
}

int tg_sim_race_count(tg_sim_race *r) {
    pthread_mutex_lock(&r->lock);
    int n = r->n_races;
    pthread_mutex_unlock(&r->lock);
    return n;
}

const char *tg_sim_race_report(tg_sim_race *r) {
    pthread_mutex_lock(&r->lock);
    const char *s = r->first; /* written once, at the first race */
    pthread_mutex_unlock(&r->lock);
    return s;
}

static struct handover *handover_of(tg_sim_race *r, const void *key, bool add) {
    for (int i = 0; i < r->n_handovers; i++) {
        if (r->handovers[i].key == key) return &r->handovers[i];
    }
    if (!add) return NULL;
    if (!tg_grow_array((void **)&r->handovers, &r->cap_handovers, r->n_handovers + 1, sizeof *r->handovers)) {
        lost_memory(r); /* an edge missing: a race seen where there is none */
        return NULL;
    }
    struct handover *h = &r->handovers[r->n_handovers++];
    memset(h, 0, sizeof *h);
    h->key = key;
    return h;
}

void tg_sim_race_host_release(tg_sim_race *r, const void *key) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    int h = host_agent(r);
    struct handover *to = h >= 0 ? handover_of(r, key, true) : NULL;
    if (to) {
        join(&to->clock, &r->agents[h].clock);
        r->agents[h].clock.at[h]++; /* what the thread does next is not handed over */
    }
    pthread_mutex_unlock(&r->lock);
}

void tg_sim_race_host_acquire(tg_sim_race *r, const void *key) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    int h = host_agent(r);
    const struct handover *from = handover_of(r, key, false);
    if (h >= 0 && from) join(&r->agents[h].clock, &from->clock);
    pthread_mutex_unlock(&r->lock);
}

int sim_race_queue_new(tg_sim_race *r, const char *name) {
    pthread_mutex_lock(&r->lock);
    int q = agent_new(r, false, name);
    pthread_mutex_unlock(&r->lock);
    if (q < 0) tg_fail(TG_ERR_ALLOC, "sim race detector: more than %d queues and host threads", SIM_RACE_MAX_AGENTS);
    return q;
}

void sim_race_queue_free(tg_sim_race *r, int queue) {
    sim_race_host_wait_queue(r, queue); /* slots are not reused: its accesses stay named */
}

void sim_race_issue(tg_sim_race *r, int queue, const struct sim_race_access *acc, int n) {
    pthread_mutex_lock(&r->lock);
    release(r, host_agent(r), queue);
    for (int i = 0; queue >= 0 && i < n; i++) access_one(r, queue, &acc[i]);
    if (queue >= 0) r->agents[queue].clock.at[queue]++;
    pthread_mutex_unlock(&r->lock);
}

void sim_race_host(tg_sim_race *r, const struct sim_race_access *acc, int n) {
    pthread_mutex_lock(&r->lock);
    int h = host_agent(r);
    for (int i = 0; h >= 0 && i < n; i++) access_one(r, h, &acc[i]);
    if (h >= 0) r->agents[h].clock.at[h]++;
    pthread_mutex_unlock(&r->lock);
}

void sim_race_record(tg_sim_race *r, int queue, struct sim_race_event *e) {
    pthread_mutex_lock(&r->lock);
    if (queue >= 0) {
        release(r, host_agent(r), queue);
        e->clock = r->agents[queue].clock;
        e->recorded = true;
        r->agents[queue].clock.at[queue]++;
    }
    pthread_mutex_unlock(&r->lock);
}

void sim_race_wait(tg_sim_race *r, int queue, const struct sim_race_event *e) {
    pthread_mutex_lock(&r->lock);
    if (queue >= 0) {
        release(r, host_agent(r), queue);
        if (e->recorded) join(&r->agents[queue].clock, &e->clock);
    }
    pthread_mutex_unlock(&r->lock);
}

void sim_race_host_wait_event(tg_sim_race *r, const struct sim_race_event *e) {
    pthread_mutex_lock(&r->lock);
    int h = host_agent(r);
    if (h >= 0 && e->recorded) join(&r->agents[h].clock, &e->clock);
    pthread_mutex_unlock(&r->lock);
}

void sim_race_host_wait_queue(tg_sim_race *r, int queue) {
    pthread_mutex_lock(&r->lock);
    release(r, queue, host_agent(r));
    pthread_mutex_unlock(&r->lock);
}

bool sim_race_compute(tg_sim_race *r, int queue, const struct tg_tensor *const *nodes, int n, const char *device) {
    struct sim_race_access *acc = malloc((size_t)(n ? n : 1) * (TG_MAX_SRC + 1) * sizeof *acc);
    char(*ops)[TG_MAX_NAME + 64] = malloc((size_t)(n ? n : 1) * sizeof *ops);
    if (!acc || !ops) {
        free(acc);
        free(ops);
        return false;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        const struct tg_tensor *t = nodes[i];
        if (t->op == TG_OP_NONE || tg_op_is_view(t->op)) continue; /* not computed */
        snprintf(ops[i], sizeof ops[i], "compute of node '%s' (op %s) on %s", t->name, tg_op_name(t->op), device);
        for (int s = 0; s < TG_MAX_SRC; s++) {
            const struct tg_tensor *src = t->src[s];
            if (src && src->data) {
                acc[k++] = (struct sim_race_access){(uintptr_t)src->data, (uintptr_t)src->data + tg_nbytes(src), false,
                                                    src->name, ops[i]};
            }
        }
        if (t->data) acc[k++] = (struct sim_race_access){(uintptr_t)t->data, (uintptr_t)t->data + tg_nbytes(t), true,
                                                         t->name, ops[i]};
    }
    if (queue >= 0) sim_race_issue(r, queue, acc, k);
    else sim_race_host(r, acc, k);
    free(acc);
    free(ops);
    return true;
}

void sim_race_memory_add(tg_sim_race *r, const void *base, size_t size, const char *name) {
    pthread_mutex_lock(&r->lock);
    if (!tg_grow_array((void **)&r->mems, &r->cap_mems, r->n_mems + 1, sizeof *r->mems)) {
        /* names only make reports readable: the memory goes unnamed, nothing unchecked */
        pthread_mutex_unlock(&r->lock);
        return;
    }
    struct named_memory *m = &r->mems[r->n_mems++];
    m->lo = (uintptr_t)base;
    m->hi = (uintptr_t)base + size;
    snprintf(m->name, sizeof m->name, "%s", name);
    pthread_mutex_unlock(&r->lock);
}

void sim_race_memory_free(tg_sim_race *r, const void *base, size_t size) {
    const uintptr_t lo = (uintptr_t)base, hi = lo + size;
    pthread_mutex_lock(&r->lock);
    int h = host_agent(r);
    const struct sim_race_access freeing = {lo, hi, true, "(the whole buffer)", "free of the buffer"};
    int first = seg_after(r, lo), n = 0;
    for (int i = first; h >= 0 && i < r->n_segs && r->segs[i].lo < hi; i++, n++) {
        const struct segment *s = &r->segs[i];
        const struct sim_race_clock *c = &r->agents[h].clock;
        if (s->write && !ordered_before(s->write, c)) {
            report(r, s->write, h, &freeing, s, "a buffer freed while a write to it is not ordered before");
        }
        for (int k = 0; k < s->n_reads; k++) {
            if (!ordered_before(s->reads[k], c))
                report(r, s->reads[k], h, &freeing, s, "a buffer freed while it is still being read");
        }
    }
    /* without host memory for the boundaries the segments reaching past the
     * buffer are forgotten whole: histories lost, and the run fails */
    (void)split_at(r, lo);
    (void)split_at(r, hi);
    first = seg_after(r, lo);
    for (n = 0; first + n < r->n_segs && r->segs[first + n].lo < hi; n++) {}
    seg_remove(r, first, n);
    for (int i = 0; i < r->n_mems; i++) {
        if (r->mems[i].lo == lo) {
            r->mems[i] = r->mems[--r->n_mems];
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

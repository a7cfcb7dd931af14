/* The watch: a backend wrapped so that the race detector sees what it does on
 * the host, and a trace records the protocol issued to it (tg-sim.h). */
#include "sim-impl.h"
#include "tg-impl.h" /* tg_grow_array */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tg_sim_trace {
    int refs; /* atomic: the user's and each watch's (whose events may outlive the user's) */
    pthread_mutex_t lock;
    char *text;
    size_t n, cap;
    int n_backends;
    uint64_t n_events_made; /* ids of events: never reused */
    uint64_t *named;        /* event ids in the order the text first names them */
    int n_named, cap_named;
    bool out_of_memory; /* a line or a name was lost: the text says so instead of a protocol cut short */
};

struct watch {
    int refs; /* atomic: the backend and each of its events (which may be freed after it) */
    tg_backend backend;
    tg_backend *inner;
    tg_sim_race *race;
    tg_sim_trace *trace;
    int index; /* in the trace */
    bool host;    /* inner computes on the calling thread, in host memory (the CPU) */
};

struct watch_event {
    tg_event *inner;
    int owner;   /* the index of its backend */
    uint64_t id; /* in the trace */
};

/* ---- the trace ----------------------------------------------------------------------------- */

tg_sim_trace *tg_sim_trace_new(void) {
    tg_sim_trace *t = calloc(1, sizeof *t);
    if (!t) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a trace");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->refs = 1;
    return t;
}

static void trace_unref(tg_sim_trace *t) {
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_destroy(&t->lock);
    free(t->text);
    free(t->named);
    free(t);
}

void tg_sim_trace_free(tg_sim_trace *t) { trace_unref(t); }

/* A protocol cut short would compare wrongly (equal to another cut as
 * short, or a difference blamed on the scheduler): a trace that lost a line
 * is this text alone, which no protocol equals. */
static const char trace_lost[] = "sim trace: out of host memory; calls went unrecorded, no protocol to compare\n";

const char *tg_sim_trace_text(tg_sim_trace *t) {
    pthread_mutex_lock(&t->lock);
    const char *text = t->out_of_memory ? trace_lost : t->text ? t->text : "";
    pthread_mutex_unlock(&t->lock);
    return text;
}

void tg_sim_trace_clear(tg_sim_trace *t) {
    pthread_mutex_lock(&t->lock);
    t->n = 0;
    if (t->text) t->text[0] = '\0';
    t->n_named = 0;
    t->out_of_memory = false; /* nothing recorded is left to be missing */
    pthread_mutex_unlock(&t->lock);
}

/* An event's name in the text: its backend, and the order the text first
 * names it in, so that runs of different backends (or with other events made
 * before) name their events alike. */
static void event_name(tg_sim_trace *t, const struct watch_event *we, char *out, size_t len) {
    pthread_mutex_lock(&t->lock);
    int k = 0;
    while (k < t->n_named && t->named[k] != we->id) k++;
    if (k == t->n_named) {
        if (!tg_grow_array((void **)&t->named, &t->cap_named, t->n_named + 1, sizeof *t->named)) {
            t->out_of_memory = true; /* the name is unknown: see trace_lost */
            pthread_mutex_unlock(&t->lock);
            snprintf(out, len, "e?(b%d)", we->owner);
            return;
        }
        t->named[t->n_named++] = we->id;
    }
    pthread_mutex_unlock(&t->lock);
    snprintf(out, len, "e%d(b%d)", k, we->owner);
}

static void trace_line(tg_sim_trace *t, const char *fmt, ...) {
    if (!t) return;
    char line[3 * TG_MAX_NAME + 64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    size_t len = strlen(line);
    line[len++] = '\n';
    pthread_mutex_lock(&t->lock);
    if (t->n + len + 1 > t->cap) {
        size_t cap = (t->cap ? t->cap * 2 : 4096) + len;
        char *grown = realloc(t->text, cap);
        if (!grown) {
            t->out_of_memory = true; /* see trace_lost */
            pthread_mutex_unlock(&t->lock);
            return;
        }
        t->text = grown;
        t->cap = cap;
    }
    memcpy(t->text + t->n, line, len);
    t->n += len;
    t->text[t->n] = '\0';
    pthread_mutex_unlock(&t->lock);
}

/* ---- the wrapper ------------------------------------------------------------------------------- */

static struct watch *watch_of(tg_backend *b) { return b->context; }

static const char *watch_name(tg_backend *b) { return tg_backend_name(watch_of(b)->inner); }

bool tg_backend_is_sim_watch(tg_backend *b) { return b && b->iface.get_name == watch_name; }

tg_backend *tg_sim_watch_inner(tg_backend *b) { return tg_backend_is_sim_watch(b) ? watch_of(b)->inner : b; }

/* A backend's name in w's trace: its index when it is watched into the same trace. */
static int trace_index(const struct watch *w, tg_backend *b) {
    return tg_backend_is_sim_watch(b) && watch_of(b)->trace == w->trace ? watch_of(b)->index : -1;
}

/* The last of the watch and its events: the detector and the trace it held go too. */
static void watch_unref(struct watch *w) {
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (w->race) sim_race_unref(w->race);
    trace_unref(w->trace);
    free(w);
}

static void watch_free(tg_backend *b) {
    struct watch *w = watch_of(b);
    tg_backend_free(w->inner); /* a sim keeps itself for its events and buffers */
    w->inner = NULL;
    watch_unref(w);
}

static tg_buffer_type *watch_default_buft(tg_backend *b) {
    return tg_backend_get_default_buffer_type(watch_of(b)->inner);
}

static bool in_host_memory(const struct tg_tensor *t) { return !t->buffer || tg_buffer_is_host(t->buffer); }

/* The host's own transfer, told to the detector. */
static void tell_host_transfer(struct watch *w, const void *dst, const char *dst_name, const void *src,
                               const char *src_name, size_t size, const char *what) {
    if (!w->race) return;
    struct sim_race_access acc[2] = {
        {(uintptr_t)src, (uintptr_t)src + size, false, src_name, what},
        {(uintptr_t)dst, (uintptr_t)dst + size, true, dst_name, what},
    };
    sim_race_host(w->race, acc, 2);
}

static void watch_set_async(tg_backend *b, struct tg_tensor *t, const void *data, size_t offset, size_t size) {
    struct watch *w = watch_of(b);
    trace_line(w->trace, "set-async b%d '%s'", w->index, t->name);
    if (w->host && in_host_memory(t)) {
        char what[TG_MAX_NAME + 48];
        snprintf(what, sizeof what, "async set of '%s' on the host", t->name);
        tell_host_transfer(w, (uint8_t *)t->data + offset, t->name, data, "host memory", size, what);
        sim_host_observer_quiet(true); /* told above, by its own name */
        enum tg_status st = tg_tensor_set(t, data, offset, size); /* void entry point: a failure stays in tg_last_error() */
        sim_host_observer_quiet(false);
        (void)st;
        return;
    }
    tg_backend_tensor_set_async(w->inner, t, data, offset, size);
}

static void watch_get_async(tg_backend *b, const struct tg_tensor *t, void *data, size_t offset, size_t size) {
    struct watch *w = watch_of(b);
    trace_line(w->trace, "get-async b%d '%s'", w->index, t->name);
    if (w->host && in_host_memory(t)) {
        char what[TG_MAX_NAME + 48];
        snprintf(what, sizeof what, "async get of '%s' on the host", t->name);
        tell_host_transfer(w, data, "host memory", (const uint8_t *)t->data + offset, t->name, size, what);
        sim_host_observer_quiet(true);
        enum tg_status st = tg_tensor_get(t, data, offset, size); /* void entry point: see watch_set_async */
        sim_host_observer_quiet(false);
        (void)st;
        return;
    }
    tg_backend_tensor_get_async(w->inner, t, data, offset, size);
}

static bool watch_cpy_async(tg_backend *backend_src, tg_backend *backend_dst, const struct tg_tensor *src,
                            struct tg_tensor *dst) {
    struct watch *w = watch_of(backend_dst);
    tg_backend *inner_src = tg_sim_watch_inner(backend_src);
    bool done = w->inner->iface.cpy_tensor_async(inner_src, w->inner, src, dst);
    trace_line(w->trace, "copy b%d -> b%d '%s' -> '%s'%s", trace_index(w, backend_src), w->index, src->name,
               dst->name, done ? "" : " refused");
    return done;
}

static void watch_synchronize(tg_backend *b) {
    struct watch *w = watch_of(b);
    trace_line(w->trace, "sync b%d", w->index);
    tg_backend_synchronize(w->inner);
}

/* orders no work: not traced */
static enum tg_status watch_take_failure(tg_backend *b) { return tg_backend_take_failure(watch_of(b)->inner); }

static enum tg_status watch_graph_compute(tg_backend *b, struct tg_graph *g) {
    struct watch *w = watch_of(b);
    /* a compute the detector is not told of is not made (nor traced): the call can be made again */
    if (w->host && w->race && !sim_race_compute(w->race, -1, (const struct tg_tensor *const *)g->nodes, g->n_nodes,
                                                tg_backend_name(w->inner))) {
        return tg_fail(TG_ERR_ALLOC, "sim watch of '%s': out of host memory telling the race detector of a graph",
                       tg_backend_name(w->inner));
    }
    if (w->host && w->race && sim_race_out_of_memory(w->race)) {
        return tg_fail(TG_ERR_ALLOC, "sim watch of '%s': the race detector ran out of host memory, so this run "
                       "cannot be checked: %s", tg_backend_name(w->inner), tg_sim_race_report(w->race));
    }
    if (g->n_nodes > 0) {
        trace_line(w->trace, "compute b%d %d nodes '%s'..'%s'", w->index, g->n_nodes, g->nodes[0]->name,
                   g->nodes[g->n_nodes - 1]->name);
    }
    return tg_backend_graph_compute(w->inner, g);
}

static bool watch_supports_op(tg_backend *b, const struct tg_tensor *op) {
    return tg_backend_supports_op(watch_of(b)->inner, op);
}

static bool watch_supports_buft(tg_backend *b, tg_buffer_type *buft) {
    return tg_backend_supports_buft(watch_of(b)->inner, buft);
}

static bool watch_offload_op(tg_backend *b, const struct tg_tensor *op) {
    return tg_backend_offload_op(watch_of(b)->inner, op);
}

/* ---- events ------------------------------------------------------------------------------------ */

static tg_event *watch_event_new(tg_backend *b) {
    struct watch *w = watch_of(b);
    tg_event *inner = tg_event_new(w->inner);
    if (!inner) return NULL;
    tg_event *e = calloc(1, sizeof *e);
    struct watch_event *we = calloc(1, sizeof *we);
    if (!e || !we) {
        free(e);
        free(we);
        tg_event_free(inner);
        tg_fail(TG_ERR_ALLOC, "out of host memory for a watched event");
        return NULL;
    }
    *we = (struct watch_event){inner, w->index, 0};
    if (w->trace) {
        pthread_mutex_lock(&w->trace->lock);
        we->id = w->trace->n_events_made++;
        pthread_mutex_unlock(&w->trace->lock);
    }
    __atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED); /* e->backend stays valid if the watch is freed first */
    e->backend = b;
    e->context = we;
    return e;
}

static void watch_event_free(tg_event *e) {
    struct watch_event *we = e->context;
    struct watch *w = watch_of(e->backend);
    tg_event_free(we->inner);
    free(we);
    free(e);
    watch_unref(w);
}

/* "<verb> [b<backend>] e<event>(b<owner>)": backend -1 for the host. */
static void trace_event(tg_sim_trace *t, const char *verb, int backend, const struct watch_event *we) {
    if (!t) return;
    char name[48];
    event_name(t, we, name, sizeof name);
    if (backend < 0) trace_line(t, "%s %s", verb, name);
    else trace_line(t, "%s b%d %s", verb, backend, name);
}

static void watch_event_record(tg_event *e, tg_backend *b) {
    struct watch *w = watch_of(b);
    struct watch_event *we = e->context;
    trace_event(w->trace, "record", w->index, we);
    tg_event_record(we->inner, w->inner);
}

static void watch_event_wait(tg_backend *b, tg_event *e) {
    struct watch *w = watch_of(b);
    if (!tg_backend_is_sim_watch(e->backend)) {
        tg_event_wait(w->inner, e);
        return;
    }
    struct watch_event *we = e->context;
    trace_event(w->trace, "wait", w->index, we);
    tg_event_wait(w->inner, we->inner);
}

static void watch_event_synchronize(tg_event *e) {
    struct watch *w = watch_of(e->backend);
    struct watch_event *we = e->context;
    trace_event(w->trace, "event-sync", -1, we);
    tg_event_synchronize(we->inner);
}

tg_backend *tg_sim_watch_new(tg_backend *inner, tg_sim_race *race, tg_sim_trace *trace) {
    if (!inner) {
        tg_fail(TG_ERR_INVALID, "tg_sim_watch_new: no backend to watch");
        return NULL;
    }
    struct watch *w = calloc(1, sizeof *w);
    if (!w) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for a watch");
        return NULL;
    }
    w->refs = 1;
    w->inner = inner;
    w->race = race;
    w->trace = trace;
    /* kept while the watch or an event of it lives: either may be freed first */
    if (race) sim_race_ref(race);
    if (trace) __atomic_add_fetch(&trace->refs, 1, __ATOMIC_RELAXED);
    /* a sim (BLAS-like ones too, watched or not) has its own queue, told to
     * the detector by the sim itself; only a backend that runs on the calling
     * thread (the CPU) computes as the host */
    w->host = !tg_backend_is_sim(tg_sim_watch_inner(inner)) &&
              tg_buft_is_host(tg_backend_get_default_buffer_type(inner));
    if (trace) {
        pthread_mutex_lock(&trace->lock);
        w->index = trace->n_backends++;
        pthread_mutex_unlock(&trace->lock);
    }
    const struct tg_backend_iface *in = &inner->iface;
    /* the optional entries stay absent where inner's are: callers choose their fallbacks by them */
    w->backend = (tg_backend){
        .iface = {.get_name = watch_name, .free = watch_free, .get_default_buffer_type = watch_default_buft,
                  .set_tensor_async = watch_set_async, .get_tensor_async = watch_get_async,
                  .cpy_tensor_async = in->cpy_tensor_async ? watch_cpy_async : NULL,
                  .synchronize = watch_synchronize, .graph_compute = watch_graph_compute,
                  .supports_op = watch_supports_op, .supports_buft = watch_supports_buft,
                  .offload_op = in->offload_op ? watch_offload_op : NULL,
                  .event_new = in->event_new ? watch_event_new : NULL,
                  .event_free = in->event_new ? watch_event_free : NULL,
                  .event_record = in->event_new ? watch_event_record : NULL,
                  .event_wait = in->event_new ? watch_event_wait : NULL,
                  .event_synchronize = in->event_new ? watch_event_synchronize : NULL,
                  .take_failure = in->take_failure ? watch_take_failure : NULL},
        .context = w,
    };
    return &w->backend;
}

/* The backend scheduler: lifecycle, a schedule per graph (a replay of the
 * memo, else the full passes: assignment, splits, the graph copy),
 * allocation through one graph allocator over every backend's buffer type,
 * compute of the splits (docs/scheduler.md, "Compute"), and the introspection the tools
 * and checkers read.  sched-impl.h lists the other files. */
#include "sched-impl.h"
#include "alloc-vouched.h"
#include "tg-checks.h"
#include "tg-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fault_names[TG_SCHED_FAULT_COUNT] = {
    "none", "skip-copy", "ignore-pin", "ignore-support", "no-input-limit", "move-preallocated", "memo-usage-only",
};

const char *tg_sched_fault_name(enum tg_sched_fault f) {
    return (unsigned)f < TG_SCHED_FAULT_COUNT ? fault_names[f] : "?";
}

enum tg_sched_fault tg_sched_fault_from_name(const char *name) {
    for (int f = 0; name && f < TG_SCHED_FAULT_COUNT; f++) {
        if (strcmp(fault_names[f], name) == 0) return (enum tg_sched_fault)f;
    }
    return TG_SCHED_FAULT_COUNT;
}

void tg_sched_set_fault(tg_sched *s, enum tg_sched_fault fault) {
    if (!s || (unsigned)fault >= TG_SCHED_FAULT_COUNT) return;
    tg_fault_announce("scheduler", (int)fault, fault_names[fault]);
    s->fault = fault;
}

/* ---- lifecycle --------------------------------------------------------------------- */

/* b reads or writes memory another backend of s uses too. */
static bool shares_memory(const tg_sched *s, int b) {
    for (int o = 0; o < s->n_backends; o++) {
        if (o != b && (s->bufts[o] == s->bufts[b] || tg_backend_supports_buft(s->backends[b], s->bufts[o]))) return true;
    }
    return false;
}

/* Queued work is not waited for: backends take what they need of the graph
 * when work is issued (tg-backend.h), and its memory is ordered by queues and
 * events until a plan changes (alloc_splits, reserve). */
static void forget_graph(tg_sched *s) {
    sched_apply_redirects(s, -1); /* the user's graph gets its sources back */
    s->n_redirects = 0;
    if (s->is_scheduled) s->n_splits_last = s->n_splits;
    s->n_splits = 0;
    s->is_scheduled = false;
    s->is_alloc = false;
    s->user_graph = NULL;
    s->assigning = NULL;
    sched_records_clear(s->recs);
}

tg_sched *tg_sched_new(tg_backend **backends, tg_buffer_type **bufts, int n_backends, size_t graph_size, bool parallel,
                       bool op_offload) {
    if (!backends || n_backends < 1 || n_backends > TG_SCHED_MAX_BACKENDS) {
        tg_fail(TG_ERR_INVALID, "tg_sched_new: 1 to %d backends needed (got %d)", TG_SCHED_MAX_BACKENDS, n_backends);
        return NULL;
    }
    for (int i = 0; i < n_backends; i++) {
        if (!backends[i]) {
            tg_fail(TG_ERR_INVALID, "tg_sched_new: backend %d of %d is NULL (did creating it fail? see its message)", i,
                    n_backends);
            return NULL;
        }
    }
    /* a NULL entry (or no array) means the backend's default, for the last backend too */
    tg_buffer_type *last_buft = bufts && bufts[n_backends - 1] ? bufts[n_backends - 1]
                                                                 : tg_backend_get_default_buffer_type(backends[n_backends - 1]);
    if (!tg_buft_is_host(last_buft)) {
        tg_fail(TG_ERR_INVALID, "tg_sched_new: the last backend ('%s') must be the CPU (a host buffer type)",
                tg_backend_name(backends[n_backends - 1]));
        return NULL;
    }
    tg_sched *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->n_backends = n_backends;
    for (int i = 0; i < n_backends; i++) {
        s->backends[i] = backends[i];
        s->bufts[i] = bufts && bufts[i] ? bufts[i] : tg_backend_get_default_buffer_type(backends[i]);
        if (!tg_backend_supports_buft(backends[i], s->bufts[i])) {
            tg_fail(TG_ERR_INVALID, "tg_sched_new: backend '%s' cannot use buffer type '%s'", tg_backend_name(backends[i]),
                    tg_buft_name(s->bufts[i]));
            free(s);
            return NULL;
        }
    }
    s->op_offload = op_offload;
    s->graph_size = graph_size < 16 ? 16 : graph_size;
    s->n_copies = parallel ? TG_SCHED_MAX_COPIES : 1;
    /* nodes and leafs, and per split input (at most graph_size of them in
     * practice) a dependency view and its pipeline copies: graph_size bounds
     * the graph, as ggml's does, not what the scheduler adds to it */
    size_t table = s->graph_size * (3 + TG_SCHED_MAX_COPIES) + 64;
    s->recs = sched_records_new(table);
    bool pins_ok = tg_hash_init(&s->pins, s->graph_size * 2 + 16);
    s->pin_ids = pins_ok ? calloc(s->pins.size, sizeof *s->pin_ids) : NULL;
    if (!s->recs || !s->pin_ids) {
        tg_sched_free(s);
        goto oom;
    }
    s->galloc = tg_gallocr_new_n(s->bufts, n_backends);
    if (!s->galloc) {
        tg_sched_free(s);
        return NULL;
    }
    for (int b = 0; parallel && b < n_backends; b++) {
        for (int c = 0; c < s->n_copies; c++) s->events[b][c] = tg_event_new(backends[b]);
    }
    const char *dbg = getenv("TG_SCHED_DEBUG");
    s->debug = dbg ? (int)strtol(dbg, NULL, 10) : 0;
    return s;
oom:
    tg_fail(TG_ERR_ALLOC, "out of host memory creating a scheduler");
    return NULL;
}

void tg_sched_free(tg_sched *s) {
    if (!s) return;
    if (s->recs) forget_graph(s);
    if (s->shadow) {
        s->shadow->galloc = NULL; /* borrowed from s */
        tg_sched_free(s->shadow);
    }
    for (int b = 0; b < s->n_backends; b++) {
        for (int c = 0; c < TG_SCHED_MAX_COPIES; c++) tg_event_free(s->events[b][c]);
    }
    for (int i = 0; i < s->cap_splits; i++) {
        free(s->splits[i].inputs);
        free(s->splits[i].copies);
    }
    free(s->splits);
    free(s->redirects);
    tg_graph_free(s->copy);
    tg_context_free(s->ctx);
    free(s->node_ids);
    free(s->leaf_ids);
    free(s->prev_node_ids);
    free(s->prev_leaf_ids);
    tg_graph_print_free(&s->print);
    sched_records_free(s->recs);
    sched_memo_free(s->memo);
    tg_hash_free(&s->pins);
    free(s->pin_ids);
    tg_gallocr_free(s->galloc);
    free(s);
}

enum tg_status tg_sched_set_n_copies(tg_sched *s, int n_copies) {
    if (!s || n_copies < 1 || n_copies > TG_SCHED_MAX_COPIES) {
        return tg_fail(TG_ERR_INVALID, "tg_sched_set_n_copies: 1 to %d copies (got %d)", TG_SCHED_MAX_COPIES, n_copies);
    }
    sched_wait_all(s, TG_SCHED_SYNC_COUNT);
    forget_graph(s);
    sched_memo_forget(s);
    for (int b = 0; n_copies > 1 && b < s->n_backends; b++) {
        for (int c = 0; c < n_copies; c++) {
            if (!s->events[b][c]) s->events[b][c] = tg_event_new(s->backends[b]);
        }
    }
    s->n_copies = n_copies;
    s->cur_copy = s->next_copy = 0;
    s->prev_n_nodes = -1; /* the plan has the old number of copies */
    return TG_OK;
}

void tg_sched_reset(tg_sched *s) {
    if (!s) return;
    forget_graph(s);
    tg_hash_clear(&s->pins);
    s->has_pins = false;
    s->pin_problem[0] = '\0';
}

/* A pin that cannot be kept is said now (tg_last_error) and again by the
 * next schedule, which fails: the function returns nothing, as ggml's. */
static void refuse_pin(tg_sched *s, const char *why, const struct tg_tensor *t, const char *backend_name) {
    char problem[sizeof s->pin_problem];
    snprintf(problem, sizeof problem, "pin of '%.63s' to '%.40s': %.180s", t ? t->name : "(NULL)", backend_name, why);
    /* the schedule names the first refusal; each call names its own */
    if (!s->pin_problem[0]) memcpy(s->pin_problem, problem, sizeof problem);
    tg_fail(TG_ERR_INVALID, "tg_sched_set_tensor_backend: %s", problem);
}

void tg_sched_set_tensor_backend(tg_sched *s, struct tg_tensor *t, tg_backend *backend) {
    if (!s) return;
    int b = tg_sched_get_backend_id(s, backend);
    const char *backend_name = backend ? tg_backend_name(backend) : "(NULL)";
    if (!t) return refuse_pin(s, "no tensor", t, backend_name);
    if (b < 0) return refuse_pin(s, "not a backend of this scheduler", t, backend_name);
    size_t slot = tg_hash_insert(&s->pins, t);
    if (slot == TG_HASH_FULL) {
        return refuse_pin(s, "more pins than the scheduler holds (twice its graph_size): call tg_sched_reset "
                          "between graphs, which forgets the pins", t, backend_name);
    }
    s->pin_ids[slot] = b;
    s->has_pins = true; /* the next schedule takes the full passes (no memo replay with pins) */
}

tg_backend *tg_sched_get_tensor_backend(tg_sched *s, const struct tg_tensor *t) {
    int b = sched_rec_backend(s, t);
    if (b < 0 && s->has_pins) {
        size_t slot = tg_hash_find(&s->pins, t);
        if (slot != TG_HASH_FULL) b = s->pin_ids[slot];
    }
    return b >= 0 ? s->backends[b] : NULL;
}

void tg_sched_set_replay(tg_sched *s, bool enabled) {
    if (!s) return;
    s->no_replay = !enabled;
    if (!enabled) sched_memo_forget(s);
}

bool tg_sched_last_was_replay(const tg_sched *s) { return s && s->last_replayed; }

void tg_sched_set_eval_callback(tg_sched *s, tg_sched_eval_callback cb, void *user_data) {
    s->eval_cb = cb;
    s->eval_user = user_data;
}

/* ---- scheduling ----------------------------------------------------------------------- */

static void print_debug(const tg_sched *s) {
    for (int i = 0; i < s->n_splits; i++) {
        const struct sched_split *sp = &s->splits[i];
        tg_logf("## split #%d: %s, nodes %d..%d of the graph copy (%d..%d of the graph), %d inputs", i,
                tg_backend_name(s->backends[sp->backend_id]), sp->c_start, sp->c_end - 1, sp->i_start, sp->i_end - 1,
                sp->n_inputs);
        for (int k = 0; k < sp->n_inputs; k++) {
            tg_logf("%s[%s (%zu bytes) from %s]", k ? " " : ": ", sp->inputs[k]->name, tg_nbytes(sp->inputs[k]),
                    tg_backend_name(s->backends[sched_rec_backend(s, sp->inputs[k])]));
        }
        tg_logf("\n");
        if (s->debug < 2) continue;
        for (int n = sp->c_start; n < sp->c_end; n++) {
            const struct tg_tensor *t = s->copy->nodes[n];
            tg_logf("  node %4d %-24s %-14s on %-8s because %s\n", n, t->name, tg_op_name(t->op),
                    tg_backend_name(s->backends[sched_rec_backend(s, t)]), tg_sched_reason_name(sched_rec_reason(s, t)));
        }
    }
}

/* The scheduler the replay cross-check schedules in full with (TG_CHECKS
 * builds): s's backends, buffer types and settings, replay off, and s's
 * graph allocator, which decides what counts as pre-allocated. */
static tg_sched *shadow_of(tg_sched *s) {
    if (!s->shadow) {
        tg_sched *shadow = tg_sched_new(s->backends, s->bufts, s->n_backends, s->graph_size, s->n_copies > 1,
                                        s->op_offload);
        if (shadow) {
            tg_gallocr_free(shadow->galloc);
            shadow->galloc = s->galloc;
            shadow->no_replay = true;
            s->shadow = shadow;
        }
    }
    /* tg_sched_set_n_copies may have changed s's; the shadow never computes,
     * so it needs no events for them */
    if (s->shadow) s->shadow->n_copies = s->n_copies;
    return s->shadow;
}

/* A schedule's invariants: every tensor of g has a backend that can run it
 * or holds it, the splits cover the computed nodes in order, each on a
 * backend, and the graph copy has a buffer id per entry. */
static void assert_schedule(const tg_sched *s, const struct tg_graph *g) {
    if (!TG_CHECKS) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const int b = sched_rec_backend(s, g->nodes[i]);
        TG_ASSERT(b >= 0 && b < s->n_backends, "node %d '%s' has backend %d", i, g->nodes[i]->name, b);
    }
    for (int i = 0; i < s->n_splits; i++) {
        const struct sched_split *sp = &s->splits[i];
        TG_ASSERT(sp->backend_id >= 0 && sp->backend_id < s->n_backends && sp->i_start <= sp->i_end &&
                      sp->c_start <= sp->c_end && sp->c_end <= s->copy->n_nodes &&
                      (i == 0 || sp->i_start == s->splits[i - 1].i_end),
                  "split %d: backend %d, nodes %d..%d, copy %d..%d", i, sp->backend_id, sp->i_start, sp->i_end,
                  sp->c_start, sp->c_end);
    }
    TG_ASSERT(s->n_splits == 0 || s->splits[s->n_splits - 1].i_end == g->n_nodes, "the splits end at node %d of %d",
              s->splits[s->n_splits - 1].i_end, g->n_nodes);
    for (int e = 0; e < s->copy->n_nodes; e++) {
        TG_ASSERT(s->node_ids[e] >= 0 && s->node_ids[e] < s->n_backends, "copy node %d has buffer id %d", e,
                  s->node_ids[e]);
    }
}

static enum tg_status schedule(tg_sched *s, struct tg_graph *g) {
    if (s->pin_problem[0]) {
        return tg_fail(TG_ERR_INVALID, "a pin since the last tg_sched_reset could not be kept (%s)", s->pin_problem);
    }
    if ((size_t)g->n_nodes > s->graph_size || (size_t)g->n_leafs > s->graph_size) {
        return tg_fail(TG_ERR_INVALID, "graph of %d nodes and %d leafs exceeds the scheduler's graph_size %zu: "
                       "create the scheduler with a larger graph_size", g->n_nodes, g->n_leafs, s->graph_size);
    }
    forget_graph(s);
    uint64_t generation_before = sched_memo_generation(s);
    s->last_replayed = sched_memo_replay(s, g);
    if (TG_CHECKS && s->last_replayed) {
        tg_sched *full = shadow_of(s);
        /* without memory for the shadow the check is skipped: a missing
         * check is no reason to abort, and the replay itself is sound */
        if (full) sched_check_replay(s, full, g);
    }
    s->shape_generation = s->last_replayed ? generation_before : 0;
    if (!s->last_replayed) {
        sched_memo_forget(s); /* the passes below rewrite what it refers to */
        bool primed = sched_memo_prime(s, g);
        enum tg_status st = sched_assign_backends(s, g);
        if (st == TG_OK) st = sched_build_splits(s, g);
        if (st == TG_OK) st = sched_build_copy(s, g);
        if (st != TG_OK) {
            forget_graph(s);
            return st;
        }
        if (primed) sched_memo_record(s, g);
        /* recorded from this very graph: the memo's generation names its shape */
        uint64_t generation = sched_memo_generation(s);
        if (generation != generation_before) s->shape_generation = generation;
    }
    for (int i = 0; i < s->n_splits; i++) (void)sched_split_nodes(s, &s->splits[i]);
    assert_schedule(s, g);
    sched_apply_redirects(s, 0); /* plans are always made with copy 0 (see alloc_splits) */
    s->user_graph = g;
    s->is_scheduled = true;
    if (s->debug) print_debug(s);
    return TG_OK;
}

static bool ids_changed(const tg_sched *s) {
    const struct tg_graph *c = s->copy;
    if (c->n_nodes != s->prev_n_nodes || c->n_leafs != s->prev_n_leafs) return true;
    return memcmp(s->node_ids, s->prev_node_ids, (size_t)c->n_nodes * sizeof(int)) != 0 ||
           memcmp(s->leaf_ids, s->prev_leaf_ids, (size_t)c->n_leafs * sizeof(int)) != 0;
}

static void remember_ids(tg_sched *s) {
    memcpy(s->prev_node_ids, s->node_ids, (size_t)s->copy->n_nodes * sizeof(int));
    memcpy(s->prev_leaf_ids, s->leaf_ids, (size_t)s->copy->n_leafs * sizeof(int));
    s->prev_n_nodes = s->copy->n_nodes;
    s->prev_n_leafs = s->copy->n_leafs;
}

/* Binds the graph copy: replays the allocator's plan when the structure and the
 * assignments are unchanged, else plans again (reserve_n) and binds.  Plans are
 * made with every redirect on copy 0: the pipeline copies are protected leafs,
 * so which copy a node reads does not change the plan, and rotation never
 * forces a re-plan. */
static enum tg_status alloc_splits(tg_sched *s) {
    TG_ASSERT(s->is_scheduled && s->copy && s->ids_cap >= s->copy->n_nodes && s->ids_cap >= s->copy->n_leafs,
              "allocation needs a schedule with a buffer id per copy entry");
    enum tg_status st = TG_ERR_NEEDS_RESERVE;
    bool same_shape = s->shape_generation != 0 && s->shape_generation == s->vouch_generation;
    s->vouch_generation = 0;
    if (!ids_changed(s)) {
        st = same_shape ? tg_gallocr_alloc_graph_vouched(s->galloc, s->copy, s->vouch_token)
                        : tg_gallocr_alloc_graph(s->galloc, s->copy);
        if (st != TG_OK && st != TG_ERR_NEEDS_RESERVE) return st;
    }
    if (st != TG_OK) {
        sched_wait_all(s, TG_SCHED_SYNC_REPLAN); /* memory in use by queued work is about to be re-planned */
        st = tg_gallocr_reserve_n(s->galloc, s->copy, s->node_ids, s->leaf_ids);
        if (st == TG_OK) st = tg_gallocr_alloc_graph(s->galloc, s->copy);
        if (st != TG_OK) return st;
    }
    remember_ids(s);
    s->vouch_token = tg_gallocr_bind_token(s->galloc);
    s->vouch_generation = s->shape_generation;
    return TG_OK;
}

enum tg_status tg_sched_reserve(tg_sched *s, struct tg_graph *g) {
    tg_clear_error(); /* a success leaves no older failure behind */
    if (!s || !g) return tg_fail(TG_ERR_INVALID, "tg_sched_reserve needs a scheduler and a graph");
    sched_wait_all(s, TG_SCHED_SYNC_RESERVE); /* the buffers may be replaced, the next plan moves tensors */
    enum tg_status st = schedule(s, g);
    if (st == TG_OK) st = tg_gallocr_reserve_n(s->galloc, s->copy, s->node_ids, s->leaf_ids);
    if (st == TG_OK) remember_ids(s);
    forget_graph(s); /* the measure graph is not bound; pins stay */
    return st;
}

enum tg_status tg_sched_reserve_size(tg_sched *s, struct tg_graph *g, size_t *sizes) {
    tg_clear_error(); /* a success leaves no older failure behind */
    if (!s || !g || !sizes) return tg_fail(TG_ERR_INVALID, "tg_sched_reserve_size needs a scheduler, a graph and sizes");
    /* measures only: the next alloc plans again, and waits then (alloc_splits) */
    enum tg_status st = schedule(s, g);
    if (st == TG_OK) st = tg_gallocr_reserve_n_size(s->galloc, s->copy, s->node_ids, s->leaf_ids, sizes);
    s->prev_n_nodes = -1; /* nothing is allocated: the next alloc must reserve */
    forget_graph(s);
    return st;
}

/* The caller sets g's inputs next, maybe synchronously (as ggml's
 * tensor_set), while graphs computed before may still run: one held by a
 * device may take the memory an earlier graph's work there still uses (the
 * same plan places it alike).  ggml gives graph inputs pipeline copies of
 * their own; here that device finishes first.  Inputs in host memory need
 * nothing: their readers are done when compute_async returns. */
static void wait_input_devices(tg_sched *s, const struct tg_graph *g) {
    bool waited[TG_SCHED_MAX_BACKENDS] = {false};
    for (int list = 0; list < 2; list++) {
        struct tg_tensor *const *ts = list ? g->nodes : g->leafs;
        for (int i = 0, n = list ? g->n_nodes : g->n_leafs; i < n; i++) {
            if (!(ts[i]->flags & TG_FLAG_INPUT)) continue;
            int b = sched_rec_backend(s, ts[i]);
            if (b < 0 || waited[b] || tg_buft_is_host(s->bufts[b])) continue;
            waited[b] = true;
            sched_wait_backend(s, TG_SCHED_SYNC_INPUT_DEVICE, s->backends[b]);
        }
    }
}

enum tg_status tg_sched_alloc_graph(tg_sched *s, struct tg_graph *g) {
    tg_clear_error(); /* a success leaves no older failure behind */
    if (!s || !g) return tg_fail(TG_ERR_INVALID, "tg_sched_alloc_graph needs a scheduler and a graph");
    if (s->is_alloc && s->user_graph == g) {
        return tg_fail(TG_ERR_INVALID, "tg_sched_alloc_graph: this graph is already allocated; call tg_sched_reset "
                       "before allocating a graph again");
    }
    s->cur_copy = s->next_copy;
    s->next_copy = (s->next_copy + 1) % s->n_copies;
    enum tg_status st = schedule(s, g);
    if (st == TG_OK) st = alloc_splits(s);
    if (st != TG_OK) {
        forget_graph(s);
        return st;
    }
    sched_apply_redirects(s, s->cur_copy);
    st = tg_graph_print_take(&s->print, g); /* after the redirects: compute sees the graph so */
    if (st != TG_OK) {
        forget_graph(s);
        return st;
    }
    wait_input_devices(s, g);
    s->is_alloc = true;
    return TG_OK;
}

/* ---- compute --------------------------------------------------------------------------- */

/* Backend b's event for the copy slot in use, or NULL: then the host
 * synchronizes backends instead.  Only pipeline copies (n_copies > 1) use
 * events: each is a leaf with memory of its own that only its split reads, so
 * the split's event covers every use of it.  One copy is a planned node that
 * shares memory with other tensors of its backend, which work queued there
 * after the split's event (a copy from it to another backend, the caller's
 * async get) may still read: that is ordered only by synchronizing the
 * backend.  A scheduler made with parallel, or given more copies once, keeps
 * its events, so the number of copies decides (ggml has events only when
 * n_copies > 1). */
static tg_event *slot_event_of(const tg_sched *s, int b) {
    return s->n_copies > 1 ? s->events[b][s->cur_copy] : NULL;
}

/* A split input that could not be copied: which split, which input, then
 * the copy's own words (what is wrong with the tensor, what to do). */
static enum tg_status input_copy_failed(const tg_sched *s, int split, const struct tg_tensor *input,
                                        enum tg_status st) {
    char why[2048];
    snprintf(why, sizeof why, "%s", tg_last_error());
    const int from = sched_rec_backend(s, input);
    return tg_fail(st, "graph_compute: split %d of %d (on '%s'): its input '%s' (on '%s') could not be copied: %s",
                   split, s->n_splits, tg_backend_name(s->backends[s->splits[split].backend_id]), input->name,
                   from >= 0 ? tg_backend_name(s->backends[from]) : "?", why);
}

static enum tg_status copy_inputs(tg_sched *s, int split) {
    const struct sched_split *sp = &s->splits[split];
    tg_backend *dst_backend = s->backends[sp->backend_id];
    tg_event *slot_event = slot_event_of(s, sp->backend_id);
    for (int k = 0; k < sp->n_inputs; k++) {
        struct tg_tensor *input = sp->inputs[k];
        struct tg_tensor *copy = sp->copies[k * TG_SCHED_MAX_COPIES + s->cur_copy];
        enum tg_status st;
        if (input->flags & TG_FLAG_INPUT) {
            /* user inputs are copied now, so the caller may overwrite them right after */
            if (slot_event) sched_wait_event(s, TG_SCHED_SYNC_INPUT_EVENT, slot_event);
            else sched_wait_backend(s, TG_SCHED_SYNC_INPUT_BACKEND, dst_backend);
            st = tg_tensor_copy(input, copy);
        } else {
            /* a device-to-device copy runs on its source's queue (tg-backend.h):
             * that queue waits until the copy slot's last reader is done */
            tg_backend *queue = sched_copy_queue(s, sched_rec_backend(s, input), sp->backend_id);
            if (slot_event) sched_wait(s, TG_SCHED_SYNC_COPY_EVENT, queue, slot_event);
            else sched_wait_backend(s, TG_SCHED_SYNC_COPY_BACKEND, dst_backend);
            st = tg_backend_tensor_copy_async(queue, dst_backend, input, copy);
        }
        if (st != TG_OK) return input_copy_failed(s, split, input, st);
    }
    return TG_OK;
}

/* Computes a split's nodes, stopping where the eval callback wants to look. */
static enum tg_status compute_with_callback(tg_sched *s, struct sched_split *sp) {
    tg_backend *backend = s->backends[sp->backend_id];
    struct tg_graph *g = &sp->nodes;
    for (int j0 = 0; j0 < g->n_nodes;) {
        int j1 = j0;
        bool wanted = false;
        for (; j1 < g->n_nodes; j1++) {
            if (s->eval_cb(g->nodes[j1], true, s->eval_user)) {
                wanted = true;
                break;
            }
        }
        int end = wanted ? j1 + 1 : g->n_nodes;
        struct tg_graph *part = tg_graph_view(g, j0, end);
        if (!part) return TG_ERR_ALLOC;
        enum tg_status st = tg_backend_graph_compute(backend, part);
        tg_graph_free(part); /* backends copy what they queue */
        if (st != TG_OK) return st;
        sched_wait_backend(s, TG_SCHED_SYNC_CALLBACK, backend);
        /* the callback is about to read what this part computed: a part that failed on its queue stops here */
        st = tg_backend_take_failure(backend);
        if (st != TG_OK) return st;
        if (wanted && !s->eval_cb(g->nodes[j1], false, s->eval_user)) {
            return tg_fail(TG_ERR_ABORTED, "graph compute cancelled by the eval callback at node '%s'",
                           g->nodes[j1]->name);
        }
        j0 = end;
    }
    return TG_OK;
}

static enum tg_status compute_splits(tg_sched *s) {
    TG_ASSERT(s->is_alloc && s->n_splits >= 0 && s->cur_copy >= 0 && s->cur_copy < s->n_copies,
              "computing needs an allocated graph (copy %d of %d)", s->cur_copy, s->n_copies);
    int prev_backend = -1;
    for (int i = 0; i < s->n_splits; i++) {
        struct sched_split *sp = &s->splits[i];
        tg_backend *backend = s->backends[sp->backend_id];
        if (prev_backend >= 0 && prev_backend != sp->backend_id) {
            /* the plan reuses memory across splits (and backends may share a buffer
             * type): the previous backend must be done before this one writes.
             * Transitively every earlier split on another backend is then done. */
            tg_event *e = slot_event_of(s, prev_backend);
            if (e) sched_wait_event(s, TG_SCHED_SYNC_PREV_EVENT, e);
            else sched_wait_backend(s, TG_SCHED_SYNC_PREV_BACKEND, s->backends[prev_backend]);
        }
        enum tg_status st = copy_inputs(s, i);
        if (st != TG_OK) return st;
        st = s->eval_cb ? compute_with_callback(s, sp) : tg_backend_graph_compute(backend, &sp->nodes);
        if (st != TG_OK) return st;
        tg_event *done = slot_event_of(s, sp->backend_id);
        if (done) sched_record(s, TG_SCHED_SYNC_SPLIT_RECORD, done, backend);
        prev_backend = sp->backend_id;
    }
    return TG_OK;
}

enum tg_status tg_sched_graph_compute_async(tg_sched *s, struct tg_graph *g) {
    tg_clear_error(); /* a success leaves no older failure behind */
    if (!s || !g) return tg_fail(TG_ERR_INVALID, "graph_compute needs a scheduler and a graph");
    if (s->is_alloc && s->user_graph == g) {
        /* the splits and the plan are of the graph as allocated */
        static const struct tg_print_words words = {
            "graph_compute", "tg_sched_alloc_graph",
            "the schedule and the plan are of the graph as it was: call tg_sched_reset and allocate it again"};
        enum tg_status st = tg_graph_print_check(&s->print, g, &words);
        if (st != TG_OK) return st;
    }
    if (!s->is_alloc || s->user_graph != g) {
        if (s->is_alloc) tg_sched_synchronize(s);
        enum tg_status st = tg_sched_alloc_graph(s, g); /* keeps the pins */
        if (st != TG_OK) return st;
    }
    enum tg_status st = compute_splits(s);
    /* a backend computing on memory another backend uses too (a shared host
     * buffer type) finishes now: the caller may write the next graph's inputs,
     * or compute this one again, as soon as we return */
    for (int b = 0; b < s->n_backends; b++) {
        if (shares_memory(s, b)) sched_wait_backend(s, TG_SCHED_SYNC_NEXT_GRAPH, s->backends[b]);
    }
    return st;
}

static void finish(tg_sched *s, enum tg_sched_sync_site site) {
    sched_wait_all(s, site);
    if (!s->is_alloc) s->next_copy = 0;
}

/* Work that failed on a backend's queue is known only once it has run: its
 * failure is this compute's, taken from every backend so that none returns
 * it from a later compute.  The first failure is said, with its message. */
enum tg_status tg_sched_graph_compute(tg_sched *s, struct tg_graph *g) {
    enum tg_status st = tg_sched_graph_compute_async(s, g);
    if (!s) return st;
    char why[2048] = "";
    if (st != TG_OK) snprintf(why, sizeof why, "%s", tg_last_error()); /* the synchronize may leave another */
    finish(s, TG_SCHED_SYNC_COMPUTE_END);
    for (int b = 0; b < s->n_backends; b++) {
        enum tg_status queued = tg_backend_take_failure(s->backends[b]);
        if (queued != TG_OK && st == TG_OK) {
            st = queued;
            snprintf(why, sizeof why, "%s", tg_last_error());
        }
    }
    return st == TG_OK ? TG_OK : tg_fail(st, "%s", why);
}

void tg_sched_synchronize(tg_sched *s) { finish(s, TG_SCHED_SYNC_COUNT); /* the caller's: never dropped */ }

/* ---- introspection ------------------------------------------------------------------------ */

int tg_sched_get_n_backends(const tg_sched *s) { return s->n_backends; }
tg_backend *tg_sched_get_backend(const tg_sched *s, int i) { return i >= 0 && i < s->n_backends ? s->backends[i] : NULL; }

int tg_sched_get_backend_id(const tg_sched *s, const tg_backend *backend) {
    for (int b = 0; b < s->n_backends; b++) {
        if (s->backends[b] == backend) return b;
    }
    return -1;
}

int tg_sched_get_n_splits(const tg_sched *s) { return s->is_scheduled ? s->n_splits : s->n_splits_last; }
int tg_sched_get_n_copies(const tg_sched *s) { return s->n_copies; }

size_t tg_sched_get_buffer_size(const tg_sched *s, tg_backend *backend) {
    int b = tg_sched_get_backend_id(s, backend);
    return b < 0 ? 0 : tg_gallocr_get_buffer_size(s->galloc, b);
}

enum tg_status tg_sched_get_split_info(const tg_sched *s, int i, struct tg_sched_split_info *info) {
    if (i < 0 || i >= s->n_splits) return tg_fail(TG_ERR_INVALID, "split %d does not exist (%d splits)", i, s->n_splits);
    const struct sched_split *sp = &s->splits[i];
    info->backend_id = sp->backend_id;
    info->i_start = sp->c_start;
    info->i_end = sp->c_end;
    info->n_inputs = sp->n_inputs;
    info->inputs = sp->inputs;
    return TG_OK;
}

int tg_sched_get_tensor_backend_id(const tg_sched *s, const struct tg_tensor *t) { return sched_rec_backend(s, t); }

enum tg_sched_reason tg_sched_get_tensor_reason(const tg_sched *s, const struct tg_tensor *t) {
    return sched_rec_reason(s, t);
}

struct tg_graph *tg_sched_get_graph_copy(const tg_sched *s) { return s->is_scheduled ? s->copy : NULL; }

struct tg_tensor *tg_sched_get_copy_source(const tg_sched *s, const struct tg_tensor *t) { return sched_rec_copy_of(s, t); }

tg_gallocr *tg_sched_get_gallocr(const tg_sched *s) { return s->galloc; }

int tg_sched_get_tensor_buffer_id(const tg_sched *s, const struct tg_tensor *t) {
    /* views and pre-allocated tensors get no memory from the plan */
    if (!t || t->view_src || tg_sched_get_tensor_reason(s, t) == TG_REASON_PREALLOCATED) return -1;
    return sched_rec_backend(s, t);
}

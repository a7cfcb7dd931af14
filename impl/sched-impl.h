/* The scheduler's state and what its files share (internal).  The files
 * depend on each other in one direction, each on those above it:
 *   sched_records.c  per-tensor records of a schedule: backend, reason, copied source
 *   sched_tensor.c   what the passes ask of a tensor: its existing buffer, its buffer
 *                    type, whether a backend can use it or run its op
 *   sched_assign.c   backend assignment (docs/scheduler.md)
 *   sched_split.c    splits, split-input copies, the graph copy (5.2)
 *   sched_memo.c     schedule replay: a full schedule recorded, restated for a graph
 *                    of the same shape
 *   sched_check.c    the replay cross-check of Debug and fuzzing builds
 *   sched.c          lifecycle, the schedule and allocation per graph, compute (5.3),
 *                    introspection */
#ifndef TG_SCHED_IMPL_H
#define TG_SCHED_IMPL_H

#include "sched-sync.h"
#include "tg-hash.h"
#include "tg-impl.h"
#include "tg-sched.h"

struct sched_split {
    int backend_id;
    int i_start, i_end;  /* node range in the user's graph */
    int c_start, c_end;  /* the split's own nodes in the graph copy */
    int n_inputs, cap_inputs;
    struct tg_tensor **inputs; /* sources read through a copy on this split's backend */
    struct tg_tensor **copies; /* [input * TG_SCHED_MAX_COPIES + copy] */
    struct tg_graph nodes;     /* a view of the split's nodes of the graph copy (sched_split_nodes) */
};

/* A consumer's source pointed at a split-input copy while a graph is
 * scheduled; undone by reset so the user's graph is left as it was. */
struct sched_redirect {
    struct tg_tensor *node;
    int src_index; /* which of node's sources */
    struct tg_tensor *original;
    int split, input;
};

/* Per-tensor records of one schedule (sched_records.c). */
struct sched_records {
    uint64_t epoch; /* of the schedule being made; tensors' stamps name it */
    bool use_stamps;
    int n, cap;
    const struct tg_tensor **tensor;
    int *backend;
    unsigned char *reason; /* enum tg_sched_reason */
    struct tg_tensor **copy_of; /* a split-input copy's source */
    int n_indexed;              /* records already in the hash index */
    struct tg_hash_set index;   /* tensor -> slot, for lookups a stamp cannot answer */
    int *index_rec;             /* slot -> record */
};

struct sched_records *sched_records_new(size_t capacity);
void sched_records_free(struct sched_records *r);
/* Forgets every record and begins a new epoch. */
void sched_records_clear(struct sched_records *r);
/* The hash index's answer (sched_records_find when no stamp can answer). */
int sched_records_find_indexed(struct sched_records *r, const struct tg_tensor *t);
#define SCHED_REC_INDEX_BITS 24
#define SCHED_REC_MAX_STAMPED ((1 << SCHED_REC_INDEX_BITS) - 1)
extern uint64_t sched_epoch_counter; /* shared by all schedulers: epochs never repeat */
/* The record index t's stamp names in this epoch, or -1: no stamp of this
 * epoch (unrecorded, or a stamp lost to another scheduler).  A stamp of this
 * epoch is never wrong. */
static inline int sched_records_stamp_index(const struct sched_records *r, const struct tg_tensor *t) {
    uint64_t stamp = __atomic_load_n(&t->private_.sched_stamp, __ATOMIC_ACQUIRE);
    return stamp >> SCHED_REC_INDEX_BITS == r->epoch ? (int)(stamp & SCHED_REC_MAX_STAMPED) - 1 : -1;
}
/* Index of t's record, or -1.  Inline: every pass asks it of every node and source. */
static inline int sched_records_find(struct sched_records *r, const struct tg_tensor *t) {
    if (!t) return -1;
    if (r->use_stamps) {
        int i = sched_records_stamp_index(r, t);
        if (i >= 0 && i < r->n && r->tensor[i] == t) return i;
        /* the stamp of a recorded tensor can only be lost to a later epoch */
        if (__atomic_load_n(&sched_epoch_counter, __ATOMIC_SEQ_CST) == r->epoch) return -1;
    }
    return sched_records_find_indexed(r, t);
}
/* Makes t the tensor of record i (stamping t when stamps are on), leaving
 * the record's fields to the caller.  Inline: replay records every tensor of
 * the graph per token, and fills the fields of all at once. */
static inline void sched_records_place(struct sched_records *r, int i, const struct tg_tensor *t) {
    r->tensor[i] = t;
    if (r->use_stamps) {
        /* const only to the callers: the stamp is the library's field */
        struct tg_tensor *mut = (struct tg_tensor *)t;
        __atomic_store_n(&mut->private_.sched_stamp, r->epoch << SCHED_REC_INDEX_BITS | (uint64_t)(i + 1), __ATOMIC_RELEASE);
    }
}
/* Writes record i for t: no backend, reason or copied source yet. */
static inline void sched_records_put(struct sched_records *r, int i, const struct tg_tensor *t) {
    sched_records_place(r, i, t);
    r->backend[i] = -1;
    r->reason[i] = TG_REASON_NONE;
    r->copy_of[i] = NULL;
}
/* A new record for t (not yet recorded); -1 when full. */
static inline int sched_records_add(struct sched_records *r, const struct tg_tensor *t) {
    if (r->n == r->cap) return -1;
    int i = r->n++;
    sched_records_put(r, i, t);
    return i;
}
/* With stamps on and no records yet, makes records 0..n-1 for the caller to
 * fill with sched_records_put or _place in any order (all before any lookup); false
 * otherwise. */
static inline bool sched_records_open(struct sched_records *r, int n) {
    if (!r->use_stamps || r->n != 0 || n > r->cap) return false;
    r->n = n;
    return true;
}

struct tg_sched {
    int n_backends;
    tg_backend *backends[TG_SCHED_MAX_BACKENDS];
    tg_buffer_type *bufts[TG_SCHED_MAX_BACKENDS];
    tg_gallocr *galloc;
    bool op_offload;
    size_t graph_size;
    int n_copies, cur_copy, next_copy;
    tg_event *events[TG_SCHED_MAX_BACKENDS][TG_SCHED_MAX_COPIES];
    int debug; /* TG_SCHED_DEBUG */

    /* user pins: tensor -> backend id, until reset */
    struct tg_hash_set pins;
    int *pin_ids;

    /* per tensor of the scheduled graph (copies included) */
    struct sched_records *recs;

    struct tg_graph *user_graph;
    struct tg_graph_print print;    /* user_graph as allocated: compute checks it (graph_print.c) */
    struct tg_graph *assigning; /* the graph being scheduled (set during the passes) */
    struct tg_context *ctx;   /* split-input copies and dependency views */
    struct tg_graph *copy;    /* what the allocator plans and the splits compute */
    int *node_ids, *leaf_ids; /* buffer id (= backend id) per copy node / leaf */
    int *prev_node_ids, *prev_leaf_ids;
    int prev_n_nodes, prev_n_leafs, ids_cap;
    int n_splits_last; /* splits of the graph scheduled last, kept after reserve and reset (as ggml) */

    struct sched_split *splits;
    int n_splits, cap_splits;
    struct sched_redirect *redirects;
    int n_redirects, cap_redirects;

    struct sched_memo *memo;     /* the last full schedule, for replay (sched_memo.c) */
    struct tg_sched *shadow;     /* TG_CHECKS builds: schedules each replayed graph in full (sched.c) */
    int memo_skip, memo_backoff; /* full schedules not to record after failed replays */

    enum tg_sched_fault fault;
    int dropped_site; /* test-only: 1 + the ordering call left out (sched-sync.h), 0: none */
    bool has_pins;     /* any pin since the last reset: most schedules have none */
    /* why a pin since the last reset could not be kept ("": none): the next
     * schedule fails with it rather than run without the pin */
    char pin_problem[320];
    bool no_replay;    /* tg_sched_set_replay(s, false) */
    bool last_replayed;
    /* The graph copy just scheduled has the shape of memo generation
     * shape_generation (0: unknown).  vouch_token names the allocator's bind of
     * a copy of shape vouch_generation: while the two generations agree the
     * allocator may skip its structural check (alloc-vouched.h). */
    uint64_t shape_generation, vouch_generation, vouch_token;
    bool is_scheduled; /* assignments, splits and copy exist for user_graph */
    bool is_alloc;     /* the copy is bound */
    tg_sched_eval_callback eval_cb;
    void *eval_user;
};

/* ---- sched_records.c: a tensor's record ---- */
int sched_rec_backend(const tg_sched *s, const struct tg_tensor *t);                /* -1: no record */
enum tg_sched_reason sched_rec_reason(const tg_sched *s, const struct tg_tensor *t); /* TG_REASON_NONE: no record */
struct tg_tensor *sched_rec_copy_of(const tg_sched *s, const struct tg_tensor *t);   /* a split-input copy's source */
enum tg_status sched_rec_set(tg_sched *s, const struct tg_tensor *t, int backend_id, enum tg_sched_reason reason);

/* ---- sched_sync.c: the calls that order work, each at its site of
 * sched-sync.h, issued unless a self-test dropped that site ---- */
void sched_record(const tg_sched *s, enum tg_sched_sync_site site, tg_event *e, tg_backend *b);
void sched_wait(const tg_sched *s, enum tg_sched_sync_site site, tg_backend *b, tg_event *e); /* on b's queue */
void sched_wait_event(const tg_sched *s, enum tg_sched_sync_site site, tg_event *e);         /* the host waits */
void sched_wait_backend(const tg_sched *s, enum tg_sched_sync_site site, tg_backend *b);     /* the host waits */
void sched_wait_all(const tg_sched *s, enum tg_sched_sync_site site);
/* The backend a split-input copy is issued on: its source's. */
tg_backend *sched_copy_queue(const tg_sched *s, int source_backend, int split_backend);

/* ---- sched_tensor.c ---- */
bool sched_op_supported(const tg_sched *s, int backend_id, const struct tg_tensor *t);
bool sched_buffer_supported(const tg_sched *s, const struct tg_tensor *t, int backend_id);
/* The buffer t's (root's) memory is already in, or NULL where the allocator
 * plans it again (the allocator's rule, alloc_plan.c classify_one): a tensor
 * of the graph being scheduled still bound in a compute buffer from an
 * earlier plan, this scheduler's or another's, counts as unbound, except a
 * result of another plan that this graph lists as a leaf (an input computed
 * elsewhere: it keeps its memory, and its backend copies it where needed). */
tg_buffer *sched_existing_buffer(const tg_sched *s, const struct tg_tensor *t);
/* Whether t is one of g's leafs (a linear scan: only asked of results of
 * another plan, rare). */
bool sched_graph_lists_as_leaf(const struct tg_graph *g, const struct tg_tensor *t);
/* The same, inline, for a caller that may know t's root is a tensor of the
 * graph being scheduled (root_in_graph: the membership lookup is skipped). */
static inline tg_buffer *sched_existing_buffer_known(const tg_sched *s, const struct tg_tensor *t, bool root_in_graph) {
    const struct tg_tensor *root = t->view_src ? t->view_src : t;
    tg_buffer *buf = root->buffer;
    if (!buf || buf->usage != TG_BUFFER_USAGE_COMPUTE || !s->assigning) return buf;
    if (!root_in_graph && !tg_graph_contains(s->assigning, root)) return buf;
    if (root->op == TG_OP_NONE || tg_gallocr_owns_buffer(s->galloc, buf)) return NULL;
    return sched_graph_lists_as_leaf(s->assigning, root) ? buf : NULL;
}

/* Memory its context owns (data, no buffer; for a view, its root's): host
 * memory, which pass 1 gives the CPU.  No buffer says it, so the replay memo
 * records it beside the existing buffer. */
static inline bool sched_in_context_memory(const struct tg_tensor *t) {
    const struct tg_tensor *root = t->view_src ? t->view_src : t;
    return root->data && !root->buffer;
}

/* ---- sched_assign.c ---- */
enum tg_status sched_assign_backends(tg_sched *s, struct tg_graph *graph);

/* ---- sched_split.c ---- */
enum tg_status sched_build_splits(tg_sched *s, struct tg_graph *graph);
enum tg_status sched_build_copy(tg_sched *s, struct tg_graph *graph);
/* Points redirected sources at copy index c (or back at the originals when c < 0). */
void sched_apply_redirects(tg_sched *s, int c);
/* Room for n splits, for n inputs of split sp, for n redirects; the graph
 * copy and its buffer id arrays with room for n entries (a copy made anew
 * has empty lists, one kept keeps them). */
enum tg_status sched_reserve_splits(tg_sched *s, int n);
enum tg_status sched_reserve_split_inputs(struct sched_split *sp, int n);
enum tg_status sched_reserve_redirects(tg_sched *s, int n);
enum tg_status sched_reserve_copy(tg_sched *s, int n);
/* Split sp's nodes of the graph copy, as a graph to compute. */
struct tg_graph *sched_split_nodes(tg_sched *s, struct sched_split *sp);
/* Names of the scheduler's own tensors: split-input copy c of input on
 * backend_id, and the dependency view of input. */
void sched_name_copy(const tg_sched *s, struct tg_tensor *t, int backend_id, const struct tg_tensor *input, int c);
void sched_name_dependency(struct tg_tensor *t, const struct tg_tensor *input);

/* ---- sched_memo.c ---- */
struct sched_memo;
void sched_memo_free(struct sched_memo *memo);
void sched_memo_forget(tg_sched *s);
/* Records for g's tensors in graph order before the full passes (false: a
 * tensor is listed twice, no memo then). */
bool sched_memo_prime(tg_sched *s, const struct tg_graph *g);
/* After the full passes over g (primed): remember the schedule for replay. */
void sched_memo_record(tg_sched *s, const struct tg_graph *g);
/* Restates the remembered schedule for g when g matches it; false: the full
 * passes must run (the records are empty again). */
bool sched_memo_replay(tg_sched *s, struct tg_graph *g);
/* Names the shape of the graph the memo was recorded from; 0: no memo. */
uint64_t sched_memo_generation(const tg_sched *s);

/* ---- sched_check.c (run where TG_CHECKS is on) ---- */
/* Aborts when the replayed schedule of g in s differs from a full schedule
 * of g by full, a scheduler with s's backends, settings and allocator. */
void sched_check_replay(const tg_sched *s, tg_sched *full, struct tg_graph *g);

#endif

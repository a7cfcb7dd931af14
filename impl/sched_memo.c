/* Schedule replay: llama.cpp-style callers build a new graph of the same
 * shape every token, and every pass of a schedule (docs/scheduler.md, "Assignment", "Splits and copies") is a
 * function of what this file records per tensor of the graph:
 *   - its header (type, shape, strides, op, op params, flags),
 *   - which tensors of the graph its sources and view root are (by position),
 *   - whether it (its root) already lives in a buffer, and that buffer's type
 *     and usage (all the passes ask of a buffer; the weights of a graph
 *     loaded again may sit in another buffer of the same type), or in memory
 *     its context owns (no buffer, yet the CPU's),
 * together with the backends (fixed per scheduler) and the pins and fault
 * switch (a replay requires neither).  When every tensor of a new graph
 * matches, the schedule recorded from the last full passes is restated for
 * the new tensors instead of being derived again: the memo holds all of it
 * (backend and reason per tensor, the split-input copies and dependency
 * views, the splits, the redirected sources, the graph copy and its buffer
 * ids), so a replay depends on nothing the last full schedule left behind.
 * Anything else (a different shape, a source outside the graph, a tensor
 * listed twice, pins) takes the full passes, which then record for the
 * next graph.
 *
 * The memo's own tensors (split-input copies and dependency views) live in
 * the scheduler's context, which only full passes replace, after they
 * forgot the memo. */
#include "sched-impl.h"
#include "tg-checks.h"
#include "tg-impl.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REF_NONE (-1)    /* no source in this slot */
#define REF_OUTSIDE (-2) /* a tensor that is not a node or leaf of the graph */

/* Per graph tensor.  Its sources and op params vary in length and live in
 * the memo's pool, at pool_at: n_src stamp low words (stamp_low_of: where
 * each source is in the graph), then n_param_lanes
 * 16-byte lanes of op params (the rest are zero).  The record stays small:
 * the replay check reads one per tensor of every token's graph. */
#define PARAM_WORDS_PER_LANE ((int)(sizeof(tg_lanes) / sizeof(int32_t)))
#define PARAM_LANES (TG_MAX_OP_PARAMS / PARAM_WORDS_PER_LANE)
_Static_assert(TG_MAX_OP_PARAMS % PARAM_WORDS_PER_LANE == 0, "op params are whole lanes");
struct memo_tensor {
    enum tg_type type;
    enum tg_op op;
    int32_t flags;
    unsigned char n_src; /* 1 + the last source slot in use */
    unsigned char n_param_lanes;
    unsigned char usage; /* enum tg_buffer_usage of the existing buffer */
    bool context_memory; /* sched_in_context_memory: no buffer either way, yet another backend */
    int32_t view_src; /* stamp low word of the view root (stamp_low_of) */
    int pool_at;
    int64_t ne[TG_MAX_DIMS];
    size_t nb[TG_MAX_DIMS];
    size_t view_offs;
    tg_buffer_type *existing_buft; /* of sched_existing_buffer, NULL without one */
};

/* A split-input dependency or copy tensor of the scheduler's own context. */
struct memo_own {
    struct tg_tensor *t;
    int input; /* the graph tensor it depends on or copies */
    bool is_dependency;
    int backend;
    unsigned char reason;
};

/* A split: its backend, node ranges and inputs (first_input.. in the memo's
 * input and copy tables). */
struct memo_split {
    int backend_id, i_start, i_end, c_start, c_end;
    int n_inputs, first_input;
};

/* A redirected source: which node, which of its sources, which split input. */
struct memo_redirect {
    int node; /* graph position */
    int src_index, split, input;
};

/* Entries copy_at.. of the graph copy (nodes, then leafs) that are the graph
 * tensors at graph_at.. (nodes, then leafs), len of them, each range within
 * one list of its graph: replay copies a run as one block.  The copy of a
 * graph without splits is two runs. */
struct copy_run {
    int copy_at, graph_at, len;
};

/* An entry of the graph copy that is one of the scheduler's own tensors. */
struct copy_own {
    int copy_at;
    struct tg_tensor *t;
};

struct sched_memo {
    bool valid;
    uint64_t generation; /* bumped by every recording: names the recorded graph's shape */
    int n_nodes, n_leafs;
    struct memo_tensor *tensors; /* nodes, then leafs */
    int32_t *pool;               /* sources and op params of the tensors, in their order */
    int n_pool, cap_pool;
    int *backends;               /* per tensor, as the records hold them */
    unsigned char *reasons;
    int cap_tensors, cap_backends, cap_reasons;
    struct memo_own *own;
    int n_own, cap_own;
    struct memo_split *splits;
    int n_splits, cap_splits;
    int *inputs;                 /* graph position of each split input, splits in order */
    struct tg_tensor **copies;   /* [input * TG_SCHED_MAX_COPIES + copy] */
    int n_inputs, cap_inputs, cap_copies;
    struct memo_redirect *redirects;
    int n_redirects, cap_redirects;
    /* the graph copy: its counts, the runs of graph tensors, the own entries, the buffer ids */
    int copy_nodes, copy_leafs;
    struct copy_run *copy_runs;
    int n_copy_runs, cap_copy_runs;
    struct copy_own *copy_own;
    int n_copy_own, cap_copy_own;
    int *node_ids, *leaf_ids;
    int cap_node_ids, cap_leaf_ids;
};

static struct tg_tensor *tensor_at(const struct tg_graph *g, int u) {
    return u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
}

/* Graph position of t from its record (records of graph tensors are made
 * first, in graph order, while recording and replaying). */
static int ref_of(const tg_sched *s, const struct tg_tensor *t, int n_graph) {
    if (!t) return REF_NONE;
    int i = sched_records_find(s->recs, t);
    return i >= 0 && i < n_graph ? i : REF_OUTSIDE;
}

/* Lanes of op params up to the last nonzero one. */
static int param_lanes_in_use(const struct tg_tensor *t) {
    int last = -1;
    for (int k = 0; k < TG_MAX_OP_PARAMS; k++) {
        if (t->op_params[k]) last = k;
    }
    return (last + PARAM_WORDS_PER_LANE) / PARAM_WORDS_PER_LANE;
}

/* The low word of the stamp a source or view root at graph position ref
 * carries this epoch (its record index + 1), or -1 for an empty slot: the
 * replay check ORs it, sign-extended, into the epoch's high bits, which
 * gives all ones (the empty stand-in's stamp) whatever the epoch. */
static int32_t stamp_low_of(int ref) { return ref == REF_NONE ? -1 : ref + 1; }

/* m's record of t; false when the pool cannot grow.  *outside: a source or
 * the view root is not in the graph (the memo cannot be used then). */
static bool fill_tensor(tg_sched *s, struct memo_tensor *m, const struct tg_tensor *t, int n_graph, bool *outside) {
    struct sched_memo *memo = s->memo;
    memset(m, 0, sizeof *m);
    m->type = t->type;
    m->op = t->op;
    m->flags = t->flags;
    memcpy(m->ne, t->ne, sizeof m->ne);
    memcpy(m->nb, t->nb, sizeof m->nb);
    for (int k = 0; k < TG_MAX_SRC; k++) {
        if (t->src[k]) m->n_src = (unsigned char)(k + 1);
    }
    m->n_param_lanes = (unsigned char)param_lanes_in_use(t);
    int n_words = m->n_src + m->n_param_lanes * PARAM_WORDS_PER_LANE;
    /* one word to spare: the pool exists (no offsets from NULL) even where no tensor uses it */
    if (memo->n_pool > INT_MAX - 1 - n_words ||
        !tg_grow_array((void **)&memo->pool, &memo->cap_pool, memo->n_pool + n_words + 1, sizeof *memo->pool)) {
        return false;
    }
    m->pool_at = memo->n_pool;
    int32_t *w = memo->pool + memo->n_pool;
    *outside = false;
    for (int k = 0; k < m->n_src; k++) {
        const int ref = ref_of(s, t->src[k], n_graph);
        *outside |= ref == REF_OUTSIDE;
        *w++ = stamp_low_of(ref);
    }
    memcpy(w, t->op_params, (size_t)m->n_param_lanes * sizeof(tg_lanes));
    memo->n_pool += n_words;
    const int root = ref_of(s, t->view_src, n_graph);
    *outside |= root == REF_OUTSIDE;
    m->view_src = stamp_low_of(root);
    m->view_offs = t->view_offs;
    tg_buffer *existing = sched_existing_buffer(s, t);
    m->existing_buft = existing ? existing->buft : NULL;
    m->usage = (unsigned char)(existing ? tg_buffer_get_usage(existing) : TG_BUFFER_USAGE_ANY);
    m->context_memory = sched_in_context_memory(t);
    return true;
}

/* The replay check compares each source's and view root's stamp with the
 * one its recorded position implies (graph positions are record indexes,
 * stamped this epoch as the check goes).  An empty slot reads as the stand-in
 * below, whose stamp no tensor ever has; a tensor outside the graph (never
 * stamped this epoch) matches no position.  A memo holds no REF_OUTSIDE. */
#define STAMP_OF_EMPTY UINT64_MAX
static const struct tg_tensor empty_slot = {.private_.sched_stamp = STAMP_OF_EMPTY};

static inline uint64_t stamp_expected(uint64_t epoch_base, int32_t low) {
    _Static_assert(STAMP_OF_EMPTY == (uint64_t)(int64_t)-1, "an empty slot's low word, sign-extended, is its stamp");
    return epoch_base | (uint64_t)(int64_t)low;
}

static inline uint64_t slot_stamp(const struct tg_tensor *t) {
    return __atomic_load_n(&(t ? t : &empty_slot)->private_.sched_stamp, __ATOMIC_ACQUIRE);
}

static inline bool tensor_matches(const tg_sched *s, const struct memo_tensor *m, const struct tg_tensor *t,
                                  uint64_t epoch_base) {
    if (t->type != m->type || t->op != m->op || t->flags != m->flags || t->view_offs != m->view_offs) return false;
    /* shape, strides, op params and the empty source slots: one OR of lanes */
    const int32_t *pool = s->memo->pool + m->pool_at;
    const int32_t *params = pool + m->n_src;
    tg_lanes diff = tg_lanes_diff(t->ne, m->ne, sizeof m->ne) | tg_lanes_diff(t->nb, m->nb, sizeof m->nb) |
                    tg_sources_from(t, m->n_src);
#pragma GCC unroll 4
    for (int i = 0; i < PARAM_LANES; i++) {
        tg_lanes lane = tg_lanes_load(t->op_params + i * PARAM_WORDS_PER_LANE);
        if (i < m->n_param_lanes) lane ^= tg_lanes_load(params + i * PARAM_WORDS_PER_LANE);
        diff |= lane;
    }
    uint64_t refs = slot_stamp(t->view_src) ^ stamp_expected(epoch_base, m->view_src);
    for (int k = 0; k < m->n_src; k++) refs |= slot_stamp(t->src[k]) ^ stamp_expected(epoch_base, pool[k]);
    if ((refs | diff[0] | diff[1]) != 0) return false;
    if (sched_in_context_memory(t) != m->context_memory) return false;
    /* the view root's position is checked by now: it is in the graph */
    tg_buffer *existing = sched_existing_buffer_known(s, t, true);
    if (!existing) return !m->existing_buft;
    const bool same_type = existing->buft == m->existing_buft || s->fault == TG_SCHED_FAULT_MEMO_USAGE_ONLY;
    return same_type && existing->usage == m->usage;
}

void sched_memo_free(struct sched_memo *memo) {
    if (!memo) return;
    free(memo->tensors);
    free(memo->pool);
    free(memo->backends);
    free(memo->reasons);
    free(memo->own);
    free(memo->splits);
    free(memo->inputs);
    free(memo->copies);
    free(memo->redirects);
    free(memo->copy_runs);
    free(memo->copy_own);
    free(memo->node_ids);
    free(memo->leaf_ids);
    free(memo);
}

void sched_memo_forget(tg_sched *s) {
    if (s->memo) s->memo->valid = false;
}

uint64_t sched_memo_generation(const tg_sched *s) { return s->memo && s->memo->valid ? s->memo->generation : 0; }

/* Faults change what the passes decide, so a schedule made under one is not
 * replayed; memo-usage-only acts on the replay check alone. */
static bool replay_allowed(const tg_sched *s) {
    return (s->fault == TG_SCHED_FAULT_NONE || s->fault == TG_SCHED_FAULT_MEMO_USAGE_ONLY) && !s->has_pins &&
           !s->no_replay;
}

/* Records for the graph's tensors, in graph order, before any pass runs: a
 * record with no backend reads as "unassigned" to every pass, and the graph
 * position of a tensor becomes its record index.  false: a tensor is listed
 * twice (its position is ambiguous; no memo then). */
bool sched_memo_prime(tg_sched *s, const struct tg_graph *g) {
    int n_graph = g->n_nodes + g->n_leafs;
    for (int u = 0; u < n_graph; u++) {
        const struct tg_tensor *t = tensor_at(g, u);
        if (sched_records_find(s->recs, t) >= 0 || sched_records_add(s->recs, t) != u) return false;
    }
    return true;
}

/* Room in the memo's tables for a schedule of n_graph tensors, n_own own
 * tensors, the splits, inputs and redirects of s and a graph copy of
 * n_copy entries.  One entry to spare in each: they exist even for an empty
 * graph (memcpy takes no NULL). */
static bool size_memo(struct sched_memo *m, const tg_sched *s, int n_graph, int n_own, int n_inputs, int n_copy) {
    return tg_grow_array((void **)&m->tensors, &m->cap_tensors, n_graph + 1, sizeof *m->tensors) &&
           tg_grow_array((void **)&m->backends, &m->cap_backends, n_graph + 1, sizeof *m->backends) &&
           tg_grow_array((void **)&m->reasons, &m->cap_reasons, n_graph + 1, sizeof *m->reasons) &&
           tg_grow_array((void **)&m->own, &m->cap_own, n_own + 1, sizeof *m->own) &&
           tg_grow_array((void **)&m->splits, &m->cap_splits, s->n_splits + 1, sizeof *m->splits) &&
           tg_grow_array((void **)&m->inputs, &m->cap_inputs, n_inputs + 1, sizeof *m->inputs) &&
           tg_grow_array((void **)&m->copies, &m->cap_copies, (n_inputs + 1) * TG_SCHED_MAX_COPIES,
                         sizeof *m->copies) &&
           tg_grow_array((void **)&m->redirects, &m->cap_redirects, s->n_redirects + 1, sizeof *m->redirects) &&
           tg_grow_array((void **)&m->copy_runs, &m->cap_copy_runs, n_copy + 1, sizeof *m->copy_runs) &&
           tg_grow_array((void **)&m->copy_own, &m->cap_copy_own, n_copy + 1, sizeof *m->copy_own) &&
           tg_grow_array((void **)&m->node_ids, &m->cap_node_ids, s->copy->n_nodes + 1, sizeof *m->node_ids) &&
           tg_grow_array((void **)&m->leaf_ids, &m->cap_leaf_ids, s->copy->n_leafs + 1, sizeof *m->leaf_ids);
}

/* The splits, their inputs and copies, and the redirects of s; false when
 * one refers to a tensor outside the graph. */
static bool record_splits(struct sched_memo *m, const tg_sched *s, const struct tg_graph *g, int n_graph) {
    m->n_inputs = 0;
    for (int i = 0; i < s->n_splits; i++) {
        const struct sched_split *sp = &s->splits[i];
        m->splits[i] = (struct memo_split){sp->backend_id, sp->i_start, sp->i_end, sp->c_start, sp->c_end,
                                           sp->n_inputs, m->n_inputs};
        for (int k = 0; k < sp->n_inputs; k++) {
            const int ref = ref_of(s, sp->inputs[k], n_graph);
            if (ref < 0) return false;
            m->inputs[m->n_inputs] = ref;
            memcpy(&m->copies[(size_t)m->n_inputs * TG_SCHED_MAX_COPIES], &sp->copies[k * TG_SCHED_MAX_COPIES],
                   TG_SCHED_MAX_COPIES * sizeof *m->copies);
            m->n_inputs++;
        }
    }
    m->n_splits = s->n_splits;
    for (int i = 0; i < s->n_redirects; i++) {
        const struct sched_redirect *rd = &s->redirects[i];
        const int node = ref_of(s, rd->node, n_graph);
        if (node < 0 || node >= g->n_nodes) return false;
        m->redirects[i] = (struct memo_redirect){node, rd->src_index, rd->split, rd->input};
    }
    m->n_redirects = s->n_redirects;
    return true;
}

/* The graph copy of s: runs of graph tensors, own entries, buffer ids. */
static void record_copy(struct sched_memo *m, const tg_sched *s, const struct tg_graph *g, int n_graph) {
    const struct tg_graph *copy = s->copy;
    const int n_copy = copy->n_nodes + copy->n_leafs;
    m->n_copy_runs = 0;
    m->n_copy_own = 0;
    for (int e = 0; e < n_copy; e++) {
        const int ref = ref_of(s, tensor_at(copy, e), n_graph);
        if (ref < 0) { /* our own tensor */
            m->copy_own[m->n_copy_own++] = (struct copy_own){e, tensor_at(copy, e)};
            continue;
        }
        struct copy_run *last = m->n_copy_runs ? &m->copy_runs[m->n_copy_runs - 1] : NULL;
        if (last && last->copy_at + last->len == e && last->graph_at + last->len == ref &&
            (e < copy->n_nodes) == (last->copy_at < copy->n_nodes) &&
            (ref < g->n_nodes) == (last->graph_at < g->n_nodes)) {
            last->len++;
        } else {
            m->copy_runs[m->n_copy_runs++] = (struct copy_run){e, ref, 1};
        }
    }
    m->copy_nodes = copy->n_nodes;
    m->copy_leafs = copy->n_leafs;
    memcpy(m->node_ids, s->node_ids, (size_t)copy->n_nodes * sizeof *m->node_ids);
    memcpy(m->leaf_ids, s->leaf_ids, (size_t)copy->n_leafs * sizeof *m->leaf_ids);
}

/* After a full schedule of g (primed): remember it, unless it cannot be
 * restated for another graph (a source or view root outside the graph). */
void sched_memo_record(tg_sched *s, const struct tg_graph *g) {
    if (!replay_allowed(s)) return;
    if (s->memo_skip > 0) {
        s->memo_skip--;
        return;
    }
    if (!s->memo && !(s->memo = calloc(1, sizeof *s->memo))) return;
    struct sched_memo *m = s->memo;
    struct sched_records *r = s->recs;
    int n_graph = g->n_nodes + g->n_leafs;
    if (r->n < n_graph) return;
    for (int u = 0; u < n_graph; u++) {
        if (r->tensor[u] != tensor_at(g, u)) return;
    }
    int n_own = r->n - n_graph;
    int n_inputs = 0;
    for (int i = 0; i < s->n_splits; i++) n_inputs += s->splits[i].n_inputs;
    if (!size_memo(m, s, n_graph, n_own, n_inputs, s->copy->n_nodes + s->copy->n_leafs)) return;
    m->valid = false; /* until the recording is complete */
    m->n_pool = 0;
    for (int u = 0; u < n_graph; u++) {
        struct memo_tensor *mt = &m->tensors[u];
        bool outside;
        if (!fill_tensor(s, mt, tensor_at(g, u), n_graph, &outside) || outside) return;
        m->backends[u] = r->backend[u];
        m->reasons[u] = r->reason[u];
    }
    /* no graph tensor reaches outside the graph: every later record is a
     * split-input dependency (no copied source) or copy of ours */
    m->n_own = 0;
    for (int j = n_graph; j < r->n; j++) {
        struct tg_tensor *t = (struct tg_tensor *)r->tensor[j];
        struct memo_own *o = &m->own[m->n_own++];
        o->t = t;
        o->backend = r->backend[j];
        o->reason = r->reason[j];
        o->is_dependency = r->copy_of[j] == NULL;
        o->input = ref_of(s, o->is_dependency ? t->src[0] : r->copy_of[j], n_graph);
        if (o->input < 0) return;
    }
    if (!record_splits(m, s, g, n_graph)) return;
    record_copy(m, s, g, n_graph);
    m->n_nodes = g->n_nodes;
    m->n_leafs = g->n_leafs;
    m->generation++;
    m->valid = true;
}

static struct tg_tensor *root_of(struct tg_tensor *t) { return t->view_src ? t->view_src : t; }

/* Whether every tensor of g matches the memo, making g's records at graph
 * positions as the check goes: leafs first, then each node just before its
 * check, since its sources and view root come before it in a graph in
 * topological order (a later one reads as outside the graph: no replay).
 * A stamp of this epoch already on a tensor means it is listed twice. */
static bool graph_matches(tg_sched *s, const struct sched_memo *m, const struct tg_graph *g) {
    struct sched_records *r = s->recs;
    if (!sched_records_open(r, g->n_nodes + g->n_leafs)) return false;
    const uint64_t epoch_base = r->epoch << SCHED_REC_INDEX_BITS;
    for (int j = 0; j < g->n_leafs; j++) {
        if (sched_records_stamp_index(r, g->leafs[j]) >= 0) return false;
        sched_records_place(r, g->n_nodes + j, g->leafs[j]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (sched_records_stamp_index(r, g->nodes[i]) >= 0) return false;
        sched_records_place(r, i, g->nodes[i]);
        if (!tensor_matches(s, &m->tensors[i], g->nodes[i], epoch_base)) return false;
    }
    for (int j = 0; j < g->n_leafs; j++) {
        if (!tensor_matches(s, &m->tensors[g->n_nodes + j], g->leafs[j], epoch_base)) return false;
    }
    return true;
}

/* The records' fields, and the records of the scheduler's own tensors
 * (which follow their inputs to g's tensors). */
static bool restate_records(tg_sched *s, const struct sched_memo *m, const struct tg_graph *g) {
    struct sched_records *r = s->recs;
    const int n_graph = g->n_nodes + g->n_leafs;
    /* the placed records' fields, all at once (no pass read them yet) */
    memcpy(r->backend, m->backends, (size_t)n_graph * sizeof *r->backend);
    memcpy(r->reason, m->reasons, (size_t)n_graph * sizeof *r->reason);
    memset(r->copy_of, 0, (size_t)n_graph * sizeof *r->copy_of);
    for (int i = 0; i < m->n_own; i++) {
        const struct memo_own *o = &m->own[i];
        struct tg_tensor *input = tensor_at(g, o->input);
        int j = sched_records_add(r, o->t);
        if (j < 0) return false;
        r->backend[j] = o->backend;
        r->reason[j] = o->reason;
        if (o->is_dependency) {
            o->t->src[0] = input;
            o->t->view_src = root_of(input);
            sched_name_dependency(o->t, input);
        } else {
            r->copy_of[j] = input;
        }
    }
    return true;
}

/* The splits with g's tensors as inputs, and the redirects of g's nodes. */
static bool restate_splits(tg_sched *s, const struct sched_memo *m, const struct tg_graph *g) {
    if (sched_reserve_splits(s, m->n_splits) != TG_OK || sched_reserve_redirects(s, m->n_redirects) != TG_OK) {
        return false;
    }
    for (int i = 0; i < m->n_splits; i++) {
        const struct memo_split *ms = &m->splits[i];
        struct sched_split *sp = &s->splits[i];
        if (sched_reserve_split_inputs(sp, ms->n_inputs) != TG_OK) return false;
        sp->backend_id = ms->backend_id;
        sp->i_start = ms->i_start;
        sp->i_end = ms->i_end;
        sp->c_start = ms->c_start;
        sp->c_end = ms->c_end;
        sp->n_inputs = ms->n_inputs;
        for (int k = 0; k < ms->n_inputs; k++) {
            struct tg_tensor *input = tensor_at(g, m->inputs[ms->first_input + k]);
            struct tg_tensor *const *copies = &m->copies[(size_t)(ms->first_input + k) * TG_SCHED_MAX_COPIES];
            sp->inputs[k] = input;
            memcpy(&sp->copies[k * TG_SCHED_MAX_COPIES], copies, TG_SCHED_MAX_COPIES * sizeof *copies);
            for (int c = 0; c < s->n_copies; c++) sched_name_copy(s, copies[c], sp->backend_id, input, c);
        }
    }
    s->n_splits = m->n_splits;
    for (int i = 0; i < m->n_redirects; i++) {
        const struct memo_redirect *mr = &m->redirects[i];
        struct tg_tensor *node = g->nodes[mr->node];
        s->redirects[i] = (struct sched_redirect){node, mr->src_index, node->src[mr->src_index], mr->split, mr->input};
    }
    s->n_redirects = m->n_redirects;
    return true;
}

/* The graph copy, in the recorded order, with g's tensors in place of the
 * recorded graph's, and its buffer ids. */
static bool restate_copy(tg_sched *s, const struct sched_memo *m, const struct tg_graph *g) {
    const int size = m->copy_nodes > m->copy_leafs ? m->copy_nodes : m->copy_leafs;
    if (sched_reserve_copy(s, size + 1) != TG_OK) return false;
    struct tg_graph *copy = s->copy;
    copy->n_nodes = m->copy_nodes;
    copy->n_leafs = m->copy_leafs;
    for (int k = 0; k < m->n_copy_runs; k++) {
        const struct copy_run *run = &m->copy_runs[k];
        struct tg_tensor **to = run->copy_at < copy->n_nodes ? &copy->nodes[run->copy_at]
                                                              : &copy->leafs[run->copy_at - copy->n_nodes];
        struct tg_tensor *const *from = run->graph_at < g->n_nodes ? &g->nodes[run->graph_at]
                                                                    : &g->leafs[run->graph_at - g->n_nodes];
        memcpy(to, from, (size_t)run->len * sizeof *to);
    }
    for (int k = 0; k < m->n_copy_own; k++) {
        const struct copy_own *own = &m->copy_own[k];
        if (own->copy_at < copy->n_nodes) copy->nodes[own->copy_at] = own->t;
        else copy->leafs[own->copy_at - copy->n_nodes] = own->t;
    }
    tg_graph_lists_rewritten(copy);
    memcpy(s->node_ids, m->node_ids, (size_t)m->copy_nodes * sizeof *s->node_ids);
    memcpy(s->leaf_ids, m->leaf_ids, (size_t)m->copy_leafs * sizeof *s->leaf_ids);
    return true;
}

bool sched_memo_replay(tg_sched *s, struct tg_graph *g) {
    TG_ASSERT(!s->is_scheduled && s->n_splits == 0 && s->n_redirects == 0, "a replay starts from a forgotten graph");
    struct sched_memo *m = s->memo;
    if (!m || !m->valid || !replay_allowed(s)) return false;
    /* a graph that changes every token (a growing KV view) never replays:
     * recording it is then skipped for up to 64 schedules, so it costs those
     * graphs next to nothing, and a graph that settles replays again soon */
    s->memo_backoff = s->memo_backoff ? (s->memo_backoff < 64 ? s->memo_backoff * 2 : 64) : 1;
    s->memo_skip = s->memo_backoff;
    if (g->n_nodes != m->n_nodes || g->n_leafs != m->n_leafs) return false;
    s->assigning = g;
    if (graph_matches(s, m, g)) {
        s->memo_backoff = 0;
        s->memo_skip = 0;
        if (restate_records(s, m, g) && restate_splits(s, m, g) && restate_copy(s, m, g)) return true;
    }
    sched_records_clear(s->recs);
    s->n_splits = 0;
    s->n_redirects = 0;
    return false;
}

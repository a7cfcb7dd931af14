/* Splits (docs/scheduler.md, "Splits and copies") and the graph copy the allocator plans.
 *
 * A split is a maximal run of computed nodes on one backend.  A new split also
 * starts when a node would push the split past TG_SCHED_MAX_SPLIT_INPUTS, or
 * reads weights living where this backend cannot read while the split already
 * copies inputs (so the memory of earlier copies can be reused).  Both
 * decisions look only at this graph and its assignments: no history.
 *
 * Every source that lives on another backend whose buffer this split's backend
 * cannot use gets a copy on this backend, one per (source, split): a later
 * split never reuses an earlier split's copy, which could be stale. */
#include "sched-impl.h"
#include "tg-checks.h"
#include "tg-impl.h"

#include <stdlib.h>
#include <string.h>

static bool is_computed(const struct tg_tensor *t) { return t->op != TG_OP_NONE && !tg_op_is_view(t->op); }

static int find_input(const struct sched_split *sp, const struct tg_tensor *t) {
    for (int k = 0; k < sp->n_inputs; k++) {
        if (sp->inputs[k] == t) return k;
    }
    return -1;
}

static bool needs_copy(const tg_sched *s, const struct tg_tensor *src, int b) {
    return sched_rec_backend(s, src) != b && !sched_buffer_supported(s, src, b);
}

static bool is_weights(const tg_sched *s, const struct tg_tensor *t) {
    tg_buffer *buf = sched_existing_buffer(s, t);
    return buf && tg_buffer_get_usage(buf) == TG_BUFFER_USAGE_WEIGHTS;
}

/* Distinct sources of node that split sp (on backend b) would have to copy in
 * and does not copy yet; *foreign_weights tells whether one of them is weights. */
static int count_new_inputs(const tg_sched *s, const struct sched_split *sp, const struct tg_tensor *node, int b,
                            bool *foreign_weights) {
    int n = 0;
    *foreign_weights = false;
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *src = node->src[k];
        if (!src || src == node || !needs_copy(s, src, b)) continue;
        if (is_weights(s, src)) *foreign_weights = true;
        bool seen = find_input(sp, src) >= 0;
        for (int j = 0; j < k && !seen; j++) seen = node->src[j] == src;
        n += !seen;
    }
    return n;
}

/* The capacity for n elements: cap doubled (first when none yet) until n fit. */
static int doubled_capacity(int cap, int first, int n) {
    int c = cap ? cap * 2 : first;
    while (c < n) c *= 2;
    return c;
}

enum tg_status sched_reserve_splits(tg_sched *s, int n) {
    if (n <= s->cap_splits) return TG_OK;
    const int cap = doubled_capacity(s->cap_splits, 16, n);
    struct sched_split *grown = realloc(s->splits, (size_t)cap * sizeof *grown);
    if (!grown) return tg_fail(TG_ERR_ALLOC, "out of host memory for splits");
    memset(grown + s->cap_splits, 0, (size_t)(cap - s->cap_splits) * sizeof *grown);
    s->splits = grown;
    s->cap_splits = cap;
    return TG_OK;
}

enum tg_status sched_reserve_split_inputs(struct sched_split *sp, int n) {
    if (n <= sp->cap_inputs) return TG_OK;
    const int cap = doubled_capacity(sp->cap_inputs, 8, n);
    struct tg_tensor **in = realloc(sp->inputs, (size_t)cap * sizeof *in);
    if (in) sp->inputs = in;
    struct tg_tensor **cp = realloc(sp->copies, (size_t)cap * TG_SCHED_MAX_COPIES * sizeof *cp);
    if (cp) sp->copies = cp;
    if (!in || !cp) return tg_fail(TG_ERR_ALLOC, "out of host memory for split inputs");
    sp->cap_inputs = cap;
    return TG_OK;
}

enum tg_status sched_reserve_redirects(tg_sched *s, int n) {
    if (n <= s->cap_redirects) return TG_OK;
    const int cap = doubled_capacity(s->cap_redirects, 64, n);
    struct sched_redirect *grown = realloc(s->redirects, (size_t)cap * sizeof *grown);
    if (!grown) return tg_fail(TG_ERR_ALLOC, "out of host memory for split copies");
    s->redirects = grown;
    s->cap_redirects = cap;
    return TG_OK;
}

struct tg_graph *sched_split_nodes(tg_sched *s, struct sched_split *sp) {
    /* a view of the graph copy's node list (tg_graph_view without the allocation) */
    sp->nodes = (struct tg_graph){.size = sp->c_end - sp->c_start, .n_nodes = sp->c_end - sp->c_start,
                                  .nodes = s->copy->nodes + sp->c_start, .is_view = true};
    return &sp->nodes;
}

static enum tg_status push_split(tg_sched *s, int backend_id, int i_start) {
    enum tg_status st = sched_reserve_splits(s, s->n_splits + 1);
    if (st != TG_OK) return st;
    struct sched_split *sp = &s->splits[s->n_splits++];
    sp->backend_id = backend_id;
    sp->i_start = i_start;
    sp->i_end = i_start;
    sp->n_inputs = 0;
    return TG_OK;
}

static enum tg_status add_input(struct sched_split *sp, struct tg_tensor *src, int *index) {
    int k = find_input(sp, src);
    if (k < 0) {
        enum tg_status st = sched_reserve_split_inputs(sp, sp->n_inputs + 1);
        if (st != TG_OK) return st;
        k = sp->n_inputs++;
        sp->inputs[k] = src;
    }
    *index = k;
    return TG_OK;
}

static enum tg_status add_redirect(tg_sched *s, struct tg_tensor *node, int src_index, int split, int input) {
    enum tg_status st = sched_reserve_redirects(s, s->n_redirects + 1);
    if (st != TG_OK) return st;
    s->redirects[s->n_redirects++] = (struct sched_redirect){node, src_index, node->src[src_index], split, input};
    return TG_OK;
}

enum tg_status sched_build_splits(tg_sched *s, struct tg_graph *g) {
    s->n_splits = 0;
    s->n_redirects = 0;
    struct sched_split *sp = NULL;
    bool skipped = false;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *node = g->nodes[i];
        if (!is_computed(node)) continue;
        int b = sched_rec_backend(s, node);
        bool foreign_weights = false;
        int n_new = sp && sp->backend_id == b ? count_new_inputs(s, sp, node, b, &foreign_weights) : 0;
        bool over_limit = sp && sp->n_inputs + n_new > TG_SCHED_MAX_SPLIT_INPUTS && s->fault != TG_SCHED_FAULT_NO_INPUT_LIMIT;
        bool start = !sp || sp->backend_id != b || (sp->n_inputs > 0 && (foreign_weights || over_limit));
        if (start) {
            if (sp) sp->i_end = i;
            enum tg_status st = push_split(s, b, sp ? i : 0); /* leading views belong to the first split */
            if (st != TG_OK) return st;
            sp = &s->splits[s->n_splits - 1];
        }
        for (int k = 0; k < TG_MAX_SRC; k++) {
            struct tg_tensor *src = node->src[k];
            if (!src || src == node || !needs_copy(s, src, b)) continue;
            if (s->fault == TG_SCHED_FAULT_SKIP_COPY && !skipped) {
                skipped = true; /* fault: this source is read where it lives */
                continue;
            }
            int index = -1;
            enum tg_status st = add_input(sp, src, &index);
            if (st == TG_OK) st = add_redirect(s, node, k, s->n_splits - 1, index);
            if (st != TG_OK) return st;
        }
    }
    if (!sp && g->n_nodes > 0) {
        /* only views: one split on the CPU so they are still bound */
        enum tg_status st = push_split(s, s->n_backends - 1, 0);
        if (st != TG_OK) return st;
        sp = &s->splits[0];
    }
    if (sp) sp->i_end = g->n_nodes;
    return TG_OK;
}

/* ---- the graph copy ----------------------------------------------------------------- */

void sched_name_copy(const tg_sched *s, struct tg_tensor *t, int backend_id, const struct tg_tensor *input, int c) {
    char copy_index[12];
    tg_name_join(t, tg_backend_name(s->backends[backend_id]), "#", input->name, "#", tg_int_text(copy_index, c),
                 (const char *)NULL);
}

void sched_name_dependency(struct tg_tensor *t, const struct tg_tensor *input) {
    tg_name_join(t, "dep#", input->name, (const char *)NULL);
}

static struct tg_tensor *new_copy_tensor(tg_sched *s, struct tg_tensor *input, int b, int c) {
    struct tg_tensor *t = tg_new_tensor_raw(s->ctx, input->type, input->ne, input->nb);
    if (!t) return NULL;
    sched_name_copy(s, t, b, input, c);
    if (s->n_copies > 1) t->flags |= TG_FLAG_INPUT | TG_FLAG_OUTPUT; /* each copy keeps its own memory */
    return t;
}

/* An op-NONE view of input: the allocator counts it as a consumer (keeping
 * input alive until the copy at the split's start) but not as a live view. */
static struct tg_tensor *new_dependency(tg_sched *s, struct tg_tensor *input) {
    struct tg_tensor *t = tg_new_tensor_raw(s->ctx, input->type, input->ne, input->nb);
    if (!t) return NULL;
    t->view_src = input->view_src ? input->view_src : input;
    t->view_offs = input->view_src ? input->view_offs : 0;
    t->src[0] = input;
    sched_name_dependency(t, input);
    return t;
}

static enum tg_status ensure_ids(tg_sched *s, int n) {
    if (n <= s->ids_cap) return TG_OK;
    int *arrays[4] = {s->node_ids, s->leaf_ids, s->prev_node_ids, s->prev_leaf_ids};
    for (int a = 0; a < 4; a++) {
        int *grown = realloc(arrays[a], (size_t)n * sizeof *grown);
        if (!grown) return tg_fail(TG_ERR_ALLOC, "out of host memory for backend ids");
        if (a >= 2) memset(grown + s->ids_cap, 0xff, (size_t)(n - s->ids_cap) * sizeof *grown);
        arrays[a] = grown;
        if (a == 0) s->node_ids = grown;
        if (a == 1) s->leaf_ids = grown;
        if (a == 2) s->prev_node_ids = grown;
        if (a == 3) s->prev_leaf_ids = grown;
    }
    s->ids_cap = n;
    return TG_OK;
}

enum tg_status sched_reserve_copy(tg_sched *s, int n) {
    enum tg_status st = ensure_ids(s, n);
    if (st != TG_OK) return st;
    /* per token the copy is reused: a new graph's membership table is the
     * largest allocation of a schedule */
    if (!s->copy || s->copy->size < n) {
        tg_graph_free(s->copy);
        s->copy = tg_graph_new(n);
        if (!s->copy) return tg_fail(TG_ERR_ALLOC, "out of host memory for the scheduler's graph copy");
    }
    return TG_OK;
}

static enum tg_status append(tg_sched *s, struct tg_tensor *t, int b, bool leaf) {
    struct tg_graph *c = s->copy;
    enum tg_status st = leaf ? tg_graph_add_leaf(c, t) : tg_graph_add_node(c, t);
    if (st != TG_OK) return st;
    if (leaf) s->leaf_ids[c->n_leafs - 1] = b;
    else s->node_ids[c->n_nodes - 1] = b;
    return TG_OK;
}

enum tg_status sched_build_copy(tg_sched *s, struct tg_graph *g) {
    TG_ASSERT(s->n_splits == 0 || (s->splits[0].i_start >= 0 && s->splits[s->n_splits - 1].i_end == g->n_nodes),
              "the splits cover the graph's %d nodes", g->n_nodes);
    int total_inputs = 0;
    for (int i = 0; i < s->n_splits; i++) total_inputs += s->splits[i].n_inputs;
    int size = g->n_nodes + g->n_leafs + total_inputs * (2 + s->n_copies) + 1;
    enum tg_status st = sched_reserve_copy(s, size);
    if (st != TG_OK) return st;
    tg_graph_reset_lists(s->copy);
    /* the split-input copies and dependency views of the last schedule go
     * with their context (a memo that named them was forgotten first) */
    if (!s->ctx || tg_context_n_tensors(s->ctx) > 0) {
        tg_context_free(s->ctx);
        s->ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    }
    if (!s->ctx) return tg_fail(TG_ERR_ALLOC, "out of host memory for the scheduler's graph copy");

    for (int i = 0; i < s->n_splits && st == TG_OK; i++) {
        struct sched_split *sp = &s->splits[i];
        for (int k = 0; k < sp->n_inputs && st == TG_OK; k++) {
            struct tg_tensor *input = sp->inputs[k];
            struct tg_tensor *dep = new_dependency(s, input);
            if (!dep) return TG_ERR_ALLOC;
            st = sched_rec_set(s, dep, sched_rec_backend(s, input), TG_REASON_VIEW_SOURCE);
            if (st == TG_OK) st = append(s, dep, sched_rec_backend(s, input), false);
            for (int c = 0; c < s->n_copies && st == TG_OK; c++) {
                struct tg_tensor *cp = new_copy_tensor(s, input, sp->backend_id, c);
                if (!cp) return TG_ERR_ALLOC;
                sp->copies[k * TG_SCHED_MAX_COPIES + c] = cp;
                st = sched_rec_set(s, cp, sp->backend_id, TG_REASON_SPLIT_COPY);
                if (st == TG_OK) s->recs->copy_of[sched_records_find(s->recs, cp)] = input;
                /* one copy: a node allocated at the split's start and freed after its last reader */
                if (st == TG_OK && s->n_copies == 1) st = append(s, cp, sp->backend_id, false);
            }
        }
        sp->c_start = s->copy->n_nodes;
        for (int n = sp->i_start; n < sp->i_end && st == TG_OK; n++) {
            st = append(s, g->nodes[n], sched_rec_backend(s, g->nodes[n]), false);
        }
        sp->c_end = s->copy->n_nodes;
    }
    /* pipeline copies are held for the whole graph: leafs, before the user's */
    for (int i = 0; s->n_copies > 1 && i < s->n_splits && st == TG_OK; i++) {
        struct sched_split *sp = &s->splits[i];
        for (int k = 0; k < sp->n_inputs && st == TG_OK; k++) {
            for (int c = 0; c < s->n_copies && st == TG_OK; c++) {
                st = append(s, sp->copies[k * TG_SCHED_MAX_COPIES + c], sp->backend_id, true);
            }
        }
    }
    for (int j = 0; j < g->n_leafs && st == TG_OK; j++) st = append(s, g->leafs[j], sched_rec_backend(s, g->leafs[j]), true);
    return st;
}

void sched_apply_redirects(tg_sched *s, int c) {
    for (int r = 0; r < s->n_redirects; r++) {
        struct sched_redirect *rd = &s->redirects[r];
        rd->node->src[rd->src_index] = c < 0 ? rd->original
                                             : s->splits[rd->split].copies[rd->input * TG_SCHED_MAX_COPIES + c];
    }
}

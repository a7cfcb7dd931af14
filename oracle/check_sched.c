/* Scheduler checkers (oracle/tg-oracle-sched.h): judge the last allocated
 * schedule from the scheduler's public introspection and from where tensors
 * really live after binding. */
#include "tg-oracle-sched.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rule_names[TG_OSCHED_COUNT] = {
    "unsupported-op", "wrong-split", "preallocated-moved", "pin-ignored", "missing-copy", "input-limit",
    "foreign-result", "allocator",
};

const char *tg_oracle_sched_rule_name(enum tg_oracle_sched_rule r) {
    return (unsigned)r < TG_OSCHED_COUNT ? rule_names[r] : "?";
}

void tg_oracle_sched_report_free(struct tg_oracle_sched_report *rep) {
    if (!rep) return;
    free(rep->items);
    memset(rep, 0, sizeof *rep);
}

int tg_oracle_sched_report_count(const struct tg_oracle_sched_report *rep, enum tg_oracle_sched_rule rule) {
    int n = 0;
    for (int i = 0; i < rep->n; i++) n += rep->items[i].rule == rule;
    return n;
}

void tg_oracle_sched_report_print(const struct tg_oracle_sched_report *rep, int max_lines) {
    for (int i = 0; i < rep->n && i < max_lines; i++) {
        tg_logf("sched oracle: [%s] %s\n", tg_oracle_sched_rule_name(rep->items[i].rule), rep->items[i].message);
    }
    if (rep->n > max_lines) tg_logf("sched oracle: ... %d more\n", rep->n - max_lines);
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static bool add(struct tg_oracle_sched_report *rep, enum tg_oracle_sched_rule rule, const struct tg_tensor *t,
                const char *fmt, ...) {
    if (rep->n == rep->cap) {
        int cap = rep->cap ? rep->cap * 2 : 16;
        struct tg_oracle_sched_violation *grown = realloc(rep->items, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        rep->items = grown;
        rep->cap = cap;
    }
    struct tg_oracle_sched_violation *v = &rep->items[rep->n++];
    v->rule = rule;
    v->tensor = t;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
    return true;
}

static const struct tg_tensor *root_of(const struct tg_tensor *t) { return t->view_src ? t->view_src : t; }

/* Views and op-less tensors compute nothing, so any backend "runs" them. */
static bool is_computed(const struct tg_tensor *t) { return t->op != TG_OP_NONE && !tg_op_is_view(t->op); }

/* Whether backend can read t where it lives now.  Memory without a buffer is
 * context (host) memory, usable by backends whose buffer type is host. */
static bool can_use(tg_backend *backend, tg_buffer_type *backend_buft, const struct tg_tensor *t) {
    const struct tg_tensor *r = root_of(t);
    if (r->buffer) return tg_backend_supports_buft(backend, r->buffer->buft);
    return tg_buft_is_host(backend_buft);
}

struct ctx {
    const tg_sched *sched;
    const struct tg_oracle_snapshot *snap;
    tg_buffer_type *bufts[TG_SCHED_MAX_BACKENDS];
    int n_backends;
    struct tg_oracle_sched_report *rep;
    bool oom;
};

static void report(struct ctx *c, enum tg_oracle_sched_rule rule, const struct tg_tensor *t, const char *msg) {
    if (!add(c->rep, rule, t, "%s", msg)) c->oom = true;
}

/* Pre-allocated tensors keep their memory, and they and their views sit on a
 * backend that can use that memory. */
static void check_preallocated(struct ctx *c, const struct tg_graph *g) {
    char msg[360];
    for (int i = 0; i < c->snap->n; i++) {
        const struct tg_oracle_snapshot_entry *e = &c->snap->entries[i];
        if (e->tensor->data != e->data || e->tensor->buffer != e->buffer) {
            snprintf(msg, sizeof msg, "tensor '%s' had memory before scheduling and was re-bound (data %p -> %p)",
                     e->tensor->name, e->data, e->tensor->data);
            report(c, TG_OSCHED_PREALLOC_MOVED, e->tensor, msg);
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? g->n_leafs : g->n_nodes;
        for (int i = 0; i < n; i++) {
            const struct tg_tensor *t = pass ? g->leafs[i] : g->nodes[i];
            const struct tg_oracle_snapshot_entry *e = tg_oracle_snapshot_find(c->snap, root_of(t));
            int id = tg_sched_get_tensor_backend_id(c->sched, t);
            if (!e || !e->buffer || id < 0) continue;
            tg_backend *b = tg_sched_get_backend(c->sched, id);
            if (!tg_backend_supports_buft(b, e->buffer->buft)) {
                snprintf(msg, sizeof msg, "tensor '%s' lives in pre-allocated buffer type '%s' but is assigned to "
                         "backend '%s', which cannot use it", t->name, tg_buft_name(e->buffer->buft),
                         tg_backend_name(b));
                report(c, TG_OSCHED_PREALLOC_MOVED, t, msg);
            }
        }
    }
}

static void check_pins(struct ctx *c, const struct tg_oracle_sched_pin *pins, int n_pins) {
    char msg[360];
    for (int i = 0; i < n_pins; i++) {
        const struct tg_tensor *t = pins[i].tensor;
        if (!t || tg_oracle_snapshot_find(c->snap, root_of(t))) continue; /* memory decides, not the pin */
        if (tg_op_is_view(t->op)) continue; /* views compute nothing: they live with their root */
        int id = tg_sched_get_tensor_backend_id(c->sched, t);
        if (id >= 0 && id != pins[i].backend_id) {
            snprintf(msg, sizeof msg, "tensor '%s' was pinned to backend %d ('%s') but runs on %d ('%s')", t->name,
                     pins[i].backend_id, tg_backend_name(tg_sched_get_backend(c->sched, pins[i].backend_id)), id,
                     tg_backend_name(tg_sched_get_backend(c->sched, id)));
            report(c, TG_OSCHED_PIN_IGNORED, t, msg);
        }
    }
}

static bool is_input_of(const struct tg_sched_split_info *info, const struct tg_tensor *t) {
    for (int k = 0; k < info->n_inputs; k++)
        if (info->inputs[k] == t) return true;
    return false;
}

/* Index of t among the graph copy's nodes in [lo, hi), -1 when absent. */
static int node_index_in(const struct tg_graph *g, const struct tg_tensor *t, int lo, int hi) {
    for (int i = lo; i < hi; i++)
        if (g->nodes[i] == t) return i;
    return -1;
}

static bool is_leaf_of(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_leafs; i++)
        if (g->leafs[i] == t) return true;
    return false;
}

/* A dependency view of input in [lo, hi): the scheduler places one before
 * each split for each of its inputs (op none, reading the input). */
static bool has_dependency(const struct tg_graph *g, const struct tg_tensor *input, int lo, int hi) {
    for (int i = lo; i < hi && i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (t->op == TG_OP_NONE && t->view_src && t->src[0] == input) return true;
    }
    return false;
}

/* Whether copy is one made for the split [i_start, ...) that starts after prev_end.
 * One copy: a node between the previous split and this one.  Pipeline copies
 * are leafs (held for the whole graph), so their position says nothing: the
 * input's dependency view before the split must be there, and the copy must
 * not be one another split reads (a copy per (source, split), never shared:
 * a later split would read it stale). */
static bool copy_made_for_split(const struct tg_graph *g, int n_copies, const struct tg_tensor *copy,
                                const struct tg_tensor *orig, int prev_end, int i_start, int split,
                                const struct tg_tensor **owners, int *owner_split, int *n_owners) {
    if (n_copies <= 1) return node_index_in(g, copy, prev_end, i_start) >= 0;
    if (!is_leaf_of(g, copy) || !has_dependency(g, orig, prev_end, i_start)) return false;
    for (int j = 0; j < *n_owners; j++)
        if (owners[j] == copy) return owner_split[j] == split;
    owners[*n_owners] = copy;
    owner_split[(*n_owners)++] = split;
    return true;
}

/* Support, split membership, copies and the input limit, split by split. */
static void check_splits(struct ctx *c, const struct tg_graph *g) {
    char msg[360];
    int n_splits = tg_sched_get_n_splits(c->sched);
    int n_copies = tg_sched_get_n_copies(c->sched);
    int prev_end = 0, n_owners = 0;
    const size_t n_reads = (size_t)g->n_nodes * TG_MAX_SRC + 1;
    const struct tg_tensor **seen = malloc(n_reads * sizeof *seen);
    const struct tg_tensor **seen_copy = malloc(n_reads * sizeof *seen_copy);
    const struct tg_tensor **owners = malloc(n_reads * sizeof *owners);
    int *owner_split = malloc(n_reads * sizeof *owner_split);
    if (!seen || !seen_copy || !owners || !owner_split) {
        free(seen);
        free(seen_copy);
        free(owners);
        free(owner_split);
        c->oom = true;
        return;
    }
    for (int s = 0; s < n_splits; s++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(c->sched, s, &info) != TG_OK) break;
        tg_backend *b = tg_sched_get_backend(c->sched, info.backend_id);
        tg_buffer_type *bb = c->bufts[info.backend_id];
        int n_seen = 0;
        if (info.n_inputs > TG_SCHED_MAX_SPLIT_INPUTS) {
            snprintf(msg, sizeof msg, "split %d on '%s' declares %d inputs (limit %d)", s, tg_backend_name(b),
                     info.n_inputs, TG_SCHED_MAX_SPLIT_INPUTS);
            report(c, TG_OSCHED_INPUT_LIMIT, NULL, msg);
        }
        for (int i = info.i_start; i < info.i_end && i < g->n_nodes; i++) {
            const struct tg_tensor *node = g->nodes[i];
            if (!is_computed(node)) continue;
            c->rep->n_checked_nodes++;
            int id = tg_sched_get_tensor_backend_id(c->sched, node);
            if (id != info.backend_id) {
                snprintf(msg, sizeof msg, "node '%s' is assigned to backend %d but computed in split %d on '%s'",
                         node->name, id, s, tg_backend_name(b));
                report(c, TG_OSCHED_WRONG_SPLIT, node, msg);
            }
            if (!tg_backend_supports_op(b, node)) {
                snprintf(msg, sizeof msg, "node '%s' (op %s) runs on '%s', which does not support it", node->name,
                         tg_op_name(node->op), tg_backend_name(b));
                report(c, TG_OSCHED_UNSUPPORTED, node, msg);
            }
            if (!can_use(b, bb, node)) {
                const struct tg_tensor *r = root_of(node);
                snprintf(msg, sizeof msg, "node '%s' (op %s) runs on '%s' but its result lives in '%s' (buffer type "
                         "'%s'), which that backend cannot use", node->name, tg_op_name(node->op), tg_backend_name(b),
                         r->name, r->buffer ? tg_buft_name(r->buffer->buft) : "host context");
                report(c, TG_OSCHED_FOREIGN_RESULT, node, msg);
            }
            for (int k = 0; k < TG_MAX_SRC; k++) {
                const struct tg_tensor *src = node->src[k];
                if (!src) continue;
                const struct tg_tensor *orig = tg_sched_get_copy_source(c->sched, src);
                if (orig) {
                    bool ok = is_input_of(&info, orig) &&
                              tg_sched_get_tensor_backend_id(c->sched, src) == info.backend_id &&
                              copy_made_for_split(g, n_copies, src, orig, prev_end, info.i_start, s, owners,
                                                  owner_split, &n_owners);
                    if (!ok) {
                        snprintf(msg, sizeof msg, "node '%s' in split %d reads copy '%s' of '%s', which is not a "
                                 "copy made for this split", node->name, s, src->name, orig->name);
                        report(c, TG_OSCHED_MISSING_COPY, node, msg);
                    }
                    int at = -1;
                    for (int j = 0; j < n_seen && at < 0; j++)
                        if (seen[j] == orig) at = j;
                    if (at < 0) {
                        seen_copy[n_seen] = src;
                        seen[n_seen++] = orig;
                    } else if (seen_copy[at] != src) {
                        /* one copy per (source, split), and one copy index per graph */
                        snprintf(msg, sizeof msg, "node '%s' in split %d reads copy '%s' of '%s', but the split "
                                 "reads it through '%s' elsewhere", node->name, s, src->name, orig->name,
                                 seen_copy[at]->name);
                        report(c, TG_OSCHED_MISSING_COPY, node, msg);
                    }
                } else if (!can_use(b, bb, src)) {
                    const struct tg_tensor *r = root_of(src);
                    snprintf(msg, sizeof msg, "node '%s' in split %d on '%s' reads '%s' in buffer type '%s' "
                             "without a copy", node->name, s, tg_backend_name(b), src->name,
                             r->buffer ? tg_buft_name(r->buffer->buft) : "host context");
                    report(c, TG_OSCHED_MISSING_COPY, node, msg);
                }
            }
        }
        if (n_seen > TG_SCHED_MAX_SPLIT_INPUTS) {
            snprintf(msg, sizeof msg, "split %d on '%s' reads %d distinct copied inputs (limit %d)", s,
                     tg_backend_name(b), n_seen, TG_SCHED_MAX_SPLIT_INPUTS);
            report(c, TG_OSCHED_INPUT_LIMIT, NULL, msg);
        }
        prev_end = info.i_end;
    }
    free(seen);
    free(seen_copy);
    free(owners);
    free(owner_split);
}

/* A dependency node of the graph copy: an op-less view of a split input that
 * the scheduler places right before the input's copy, so the allocator keeps
 * the input alive until the copy reads it. */
static bool is_dependency(const tg_sched *s, const struct tg_graph *g, int i) {
    const struct tg_tensor *t = g->nodes[i];
    if (t->op != TG_OP_NONE || !t->view_src || !t->src[0] || i + 1 >= g->n_nodes) return false;
    return tg_sched_get_copy_source(s, g->nodes[i + 1]) == t->src[0];
}

/* With pipeline copies, node i as a dependency view (op none, of an input,
 * between the splits): *is_dep, and the copy of the input that the next
 * split reads (the copy index in use), NULL when none does. */
static struct tg_tensor *pipeline_copy_read(const tg_sched *s, const struct tg_graph *g, int i, bool *is_dep) {
    const struct tg_tensor *t = g->nodes[i], *input = t->src[0];
    *is_dep = false;
    if (t->op != TG_OP_NONE || !t->view_src || !input) return NULL;
    for (int k = 0, n = tg_sched_get_n_splits(s); k < n; k++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(s, k, &info) != TG_OK) return NULL;
        if (info.i_start <= i && i < info.i_end) return NULL; /* inside a split: not a dependency */
        if (info.i_start < i) continue;
        *is_dep = true;
        for (int j = info.i_start; j < info.i_end && j < g->n_nodes; j++) {
            for (int m = 0; m < TG_MAX_SRC; m++) {
                struct tg_tensor *src = g->nodes[j]->src[m];
                if (src && tg_sched_get_copy_source(s, src) == input) return src;
            }
        }
        return NULL;
    }
    return NULL;
}

static bool contains(struct tg_tensor *const *list, int n, const struct tg_tensor *t) {
    for (int i = 0; i < n; i++)
        if (list[i] == t) return true;
    return false;
}

/* The allocator's own checkers over the graph copy with the scheduler's ids.
 * The oracle knows liveness only through sources, so the graph it judges says
 * the same thing in those terms: each dependency node is left out and its copy
 * reads the input instead (restored afterwards).  Pipeline copies are leafs
 * held for the whole graph; the copy in use stands in for its dependency as a
 * node at the dependency's step, the other copies stay leafs, so every copy
 * index is checked against everything else. */
static enum tg_status check_allocation(struct ctx *c, const struct tg_graph *g) {
    const bool pipeline = tg_sched_get_n_copies(c->sched) > 1;
    struct tg_graph *view = tg_graph_new(g->n_nodes + g->n_leafs + 1);
    int *node_ids = malloc(((size_t)g->n_nodes + 1) * sizeof *node_ids);
    int *leaf_ids = malloc(((size_t)g->n_leafs + 1) * sizeof *leaf_ids);
    struct tg_tensor **patched = malloc(((size_t)g->n_nodes + 1) * sizeof *patched);
    struct tg_tensor **saved = malloc(((size_t)g->n_nodes + 1) * sizeof *saved);
    enum tg_status st = view && node_ids && leaf_ids && patched && saved
                            ? TG_OK
                            : tg_fail(TG_ERR_ALLOC, "sched oracle: out of host memory");
    int n_patched = 0, n_promoted = 0;
    for (int i = 0; i < g->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *t = g->nodes[i];
        struct tg_tensor *cp = NULL;
        bool is_dep = false;
        if (!pipeline && is_dependency(c->sched, g, i)) {
            cp = g->nodes[i + 1];
        } else if (pipeline) {
            cp = pipeline_copy_read(c->sched, g, i, &is_dep);
            if (cp && (cp->src[0] || contains(patched, n_patched, cp))) cp = NULL;
            if (cp) {
                /* promoted from leaf to node: at this step, reading the input */
                node_ids[view->n_nodes] = tg_sched_get_tensor_buffer_id(c->sched, cp);
                if (node_ids[view->n_nodes] < 0) node_ids[view->n_nodes] = c->n_backends - 1;
                st = tg_graph_add_node(view, cp);
                n_promoted++;
            }
        }
        /* a dependency with no copy to stand in is left out: the input may
         * then look dead early, which can hide an overlap but never invent one */
        if (is_dep && !cp) continue;
        if (cp) {
            patched[n_patched] = cp;
            saved[n_patched++] = cp->src[0];
            cp->src[0] = t->src[0];
            continue;
        }
        int id = tg_sched_get_tensor_buffer_id(c->sched, t);
        node_ids[view->n_nodes] = id < 0 ? c->n_backends - 1 : id;
        st = tg_graph_add_node(view, t);
    }
    for (int i = 0; i < g->n_leafs && st == TG_OK; i++) {
        if (n_promoted > 0 && contains(patched, n_patched, g->leafs[i])) continue;
        int id = tg_sched_get_tensor_buffer_id(c->sched, g->leafs[i]);
        leaf_ids[view->n_leafs] = id < 0 ? c->n_backends - 1 : id;
        st = tg_graph_add_leaf(view, g->leafs[i]);
    }
    struct tg_oracle_liveness lv;
    struct tg_oracle_report arep = {0};
    if (st == TG_OK) st = tg_oracle_liveness_build(view, c->snap, node_ids, leaf_ids, &lv);
    if (st == TG_OK) {
        st = tg_oracle_check(view, &lv, c->snap, c->bufts, c->n_backends, &arep);
        for (int i = 0; st == TG_OK && i < arep.n; i++) {
            char msg[360];
            snprintf(msg, sizeof msg, "graph copy: [%s] %s", tg_oracle_rule_name(arep.items[i].rule),
                     arep.items[i].message);
            report(c, TG_OSCHED_ALLOC, arep.items[i].a, msg);
        }
        tg_oracle_report_free(&arep);
        tg_oracle_liveness_free(&lv);
    }
    for (int i = n_patched - 1; i >= 0; i--) patched[i]->src[0] = saved[i];
    tg_graph_free(view);
    free(node_ids);
    free(leaf_ids);
    free(patched);
    free(saved);
    return st;
}

enum tg_status tg_oracle_sched_check(const tg_sched *sched, const struct tg_oracle_snapshot *snap,
                                     tg_buffer_type **bufts, const struct tg_oracle_sched_pin *pins, int n_pins,
                                     struct tg_oracle_sched_report *rep) {
    if (!sched || !snap || !rep) return tg_fail(TG_ERR_INVALID, "tg_oracle_sched_check needs a scheduler, a snapshot and a report");
    memset(rep, 0, sizeof *rep);
    const struct tg_graph *g = tg_sched_get_graph_copy(sched);
    if (!g) return tg_fail(TG_ERR_INVALID, "tg_oracle_sched_check: the scheduler holds no scheduled graph (call tg_sched_alloc_graph first)");
    struct ctx c = {.sched = sched, .snap = snap, .rep = rep, .n_backends = tg_sched_get_n_backends(sched)};
    for (int i = 0; i < c.n_backends; i++) {
        c.bufts[i] = bufts && bufts[i] ? bufts[i] : tg_backend_get_default_buffer_type(tg_sched_get_backend(sched, i));
    }
    check_preallocated(&c, g);
    check_pins(&c, pins, n_pins);
    check_splits(&c, g);
    enum tg_status st = check_allocation(&c, g);
    if (st == TG_OK && c.oom) st = tg_fail(TG_ERR_ALLOC, "sched oracle: out of host memory for the report");
    return st;
}

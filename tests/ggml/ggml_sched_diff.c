/* The scheduler differential (see tg-ggml-sched.h): ggml's schedule of a case
 * and tgsched's compared node by node and split by split, every difference
 * put in a class. */
#include "tg-ggml-sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tg_ggml_sched_class_name(enum tg_ggml_sched_class c) {
    static const char *const names[TG_GGML_SCHED_CLASS_COUNT] = {
        "same", "ggml abort: unassigned leaf", "both refuse", "copy reuse across splits", "pipeline input copies",
        "ggml writes elsewhere", "ggml view on first backend", "in-place across backends", "only views",
        "view of weights", "ggml abort: op-none view of a leaf", "op-none view read", "context memory without a backend",
        "op-none view placed late", "UNEXPLAINED"};
    return c < TG_GGML_SCHED_CLASS_COUNT ? names[c] : "?";
}

/* ---- comparing ------------------------------------------------------------------------------ */

static bool has_input(const struct tg_ggml_split *s, int u) {
    for (int i = 0; i < s->n_inputs; i++)
        if (s->inputs[i] == u) return true;
    return false;
}

static bool copied_before(const struct tg_ggml_schedule *p, int i, int backend, int u) {
    for (int j = 0; j < i; j++)
        if (p->splits[j].backend == backend && has_input(&p->splits[j], u)) return true;
    return false;
}

/* tgsched's schedule as ggml would make it if it read copies again: inputs
 * an earlier split on the same backend copied are not inputs, and a split
 * that had only such inputs does not end where a weight read elsewhere would
 * end a split with inputs (ggml counts none there).  False when nothing changed. */
static bool as_with_copy_reuse(const struct tg_ggml_schedule *p, struct tg_ggml_schedule *out) {
    *out = *p;
    out->n_splits = 0;
    bool changed = false;
    for (int i = 0; i < p->n_splits; i++) {
        const struct tg_ggml_split *s = &p->splits[i];
        struct tg_ggml_split *prev = out->n_splits ? &out->splits[out->n_splits - 1] : NULL;
        bool merge = prev && prev->backend == s->backend && prev->n_inputs == 0 && prev->i_end == s->i_start;
        struct tg_ggml_split *d = merge ? prev : &out->splits[out->n_splits++];
        if (!merge) {
            *d = *s;
            d->n_inputs = 0;
        }
        d->i_end = s->i_end;
        for (int k = 0; k < s->n_inputs; k++) {
            if (copied_before(p, i, s->backend, s->inputs[k])) changed = true;
            else if (!has_input(d, s->inputs[k])) d->inputs[d->n_inputs++] = s->inputs[k];
        }
        changed |= merge;
    }
    return changed;
}

static bool same_inputs(const struct tg_ggml_split *a, const struct tg_ggml_split *b) {
    if (a->n_inputs != b->n_inputs) return false;
    for (int i = 0; i < a->n_inputs; i++)
        if (!has_input(b, a->inputs[i])) return false;
    return true;
}

/* Whether a node reads a user input (ggml keeps pipeline copies of those). */
static bool reads_user_input(const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < TG_MAX_SRC; k++)
            if (g->nodes[i]->src[k] && (g->nodes[i]->src[k]->flags & TG_FLAG_INPUT)) return true;
    return false;
}

/* A node that writes into another tensor (a view with an op: set_rows, cpy)
 * that ggml ran on another backend than that tensor's: it writes a copy of
 * the tensor (the write is lost) or memory its backend cannot use.  tgsched
 * runs such a node where its destination lives, or refuses. */
static bool writes_elsewhere(const struct tg_graph *g, const struct tg_ggml_schedule *gp) {
    for (int u = 0; u < g->n_nodes; u++) {
        const struct tg_tensor *t = g->nodes[u];
        if (!t->view_src || tg_op_is_view(t->op) || t->op == TG_OP_NONE) continue;
        int root = tg_ggml_sched_slot(g, t->view_src);
        if (root >= 0 && gp->backend[u] != gp->backend[root]) return true;
    }
    return false;
}

/* The node tgsched refused because it writes its destination's memory and the
 * destination's backend cannot run it; -1 for another refusal. */
static int refused_writer(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *tp) {
    const struct tg_graph *g = k->c->graph;
    int i = -1;
    const char *at = strstr(tp->message, "node ");
    if (!strstr(tp->message, "must run there") || !at || sscanf(at, "node %d", &i) != 1) return -1;
    return i >= 0 && i < g->n_nodes && g->nodes[i]->view_src ? i : -1;
}

/* ggml ran that node on its destination's backend anyway (a view follows
 * its root, op or not), which does not have the op. */
static bool writes_without_op(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp, const struct tg_ggml_schedule *tp) {
    const struct tg_graph *g = k->c->graph;
    int i = refused_writer(k, tp);
    if (i < 0) return false;
    int b = gp->backend[i];
    if (b < 0 || b == k->n_backends - 1) return false; /* the CPU runs every op */
    return !k->dev[b].ops[g->nodes[i]->op];
}

/* ggml put a view op on another backend than its root (a root not assigned
 * yet when the view is met: the view takes the first backend with view ops). */
static bool view_off_root(const struct tg_graph *g, const struct tg_ggml_schedule *gp, int u) {
    if (u < 0 || u >= g->n_nodes || !tg_op_is_view(g->nodes[u]->op)) return false;
    int root = tg_ggml_sched_slot(g, g->nodes[u]->view_src);
    return root >= 0 && gp->backend[u] != gp->backend[root];
}

static bool reads_view_of_weights(const struct tg_ggml_sched_case *k, int u) {
    const struct tg_graph *g = k->c->graph;
    for (int j = 0; j < TG_MAX_SRC; j++) {
        const struct tg_tensor *s = g->nodes[u]->src[j];
        int root = s && s->view_src ? tg_ggml_sched_slot(g, s->view_src) : -1;
        if (root >= g->n_nodes && k->placement[root - g->n_nodes] >= 0) return true;
    }
    return false;
}

static bool any_reads_view_of_weights(const struct tg_ggml_sched_case *k) {
    for (int u = 0; u < k->c->graph->n_nodes; u++)
        if (reads_view_of_weights(k, u)) return true;
    return false;
}

static bool split_starts_at(const struct tg_ggml_schedule *p, int u) {
    for (int i = 0; i < p->n_splits; i++)
        if (p->splits[i].i_start == u) return true;
    return false;
}

/* The first source of node u that the weights rule takes for a weight: ggml's
 * (through_views false) sees a pre-allocated leaf only, tgsched's also a view
 * of one; -1 when none. */
static int first_weights_source(const struct tg_ggml_sched_case *k, int u, bool through_views) {
    const struct tg_graph *g = k->c->graph;
    for (int j = 0; j < TG_MAX_SRC; j++) {
        const struct tg_tensor *s = g->nodes[u]->src[j];
        if (!s || (s->view_src && !through_views)) continue;
        int root = tg_ggml_sched_slot(g, s->view_src ? s->view_src : s);
        if (root >= g->n_nodes && k->placement[root - g->n_nodes] >= 0) return j;
    }
    return -1;
}

/* A node reading a view of a pre-allocated weight that tgsched placed by the
 * weights rule, that ggml and tgsched put on different backends, where
 * tgsched starts a split and ggml does not, or whose weights rule looks at
 * another source in each (the view comes first: ggml's pass 1 places the node
 * by a later weight, tgsched's by the view's, and expansion differs from there):
 * ggml's weight checks look at the view's own buffer, which a view gets only
 * when the graph is allocated, so they do not see the weight (the rule that
 * ops go to their weights, and the one that ends a split reading weights from
 * elsewhere); tgsched's follow the view to its root. */
static bool reads_view_of_weights_elsewhere(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp, const struct tg_ggml_schedule *tp) {
    for (int u = 0; u < k->c->graph->n_nodes; u++) {
        if (!reads_view_of_weights(k, u)) continue;
        if (tp->weights_rule[u] || gp->backend[u] != tp->backend[u]) return true;
        if (first_weights_source(k, u, false) != first_weights_source(k, u, true)) return true;
        if (split_starts_at(tp, u) && !split_starts_at(gp, u)) return true;
    }
    return false;
}

/* No node computes anything: ggml's one split keeps the backend the split
 * had before (the study's stale split backend); tgsched's is the CPU. */
static bool only_views(const struct tg_graph *g) {
    for (int u = 0; u < g->n_nodes; u++)
        if (!tg_op_is_view(g->nodes[u]->op)) return false;
    return true;
}

static bool reads(const struct tg_tensor *node, const struct tg_tensor *t) {
    if (node->view_src == t) return true;
    for (int j = 0; j < TG_MAX_SRC; j++)
        if (node->src[j] == t) return true;
    return false;
}

/* Either a view ggml put off its root, or the first reader of a leaf without
 * memory is a view ggml put elsewhere than tgsched: in ggml such a view, met
 * before anything assigned its root, takes the first backend with view ops,
 * and the root follows a later consumer. */
static bool view_took_first_backend(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp, const struct tg_ggml_schedule *tp) {
    const struct tg_graph *g = k->c->graph;
    for (int u = 0; u < g->n_nodes; u++) {
        if (view_off_root(g, gp, u)) return true;
        const struct tg_tensor *v = g->nodes[u];
        if (!tg_op_is_view(v->op) || gp->backend[u] == tp->backend[u]) continue;
        int root = tg_ggml_sched_slot(g, v->view_src);
        if (root < g->n_nodes || k->placement[root - g->n_nodes] >= 0) continue; /* a leaf planned, not pre-allocated */
        bool first = true;
        for (int i = 0; i < u && first; i++) first = !reads(g->nodes[i], v->view_src);
        if (first) return true;
    }
    return false;
}

/* Whether a leaf lives in memory before scheduling (itself or its view root):
 * ggml's first pass gives it that memory's backend. */
static bool leaf_preallocated(const struct tg_ggml_sched_case *k, const struct tg_tensor *t) {
    const struct tg_graph *g = k->c->graph;
    int u = tg_ggml_sched_slot(g, t->view_src ? t->view_src : t);
    return u >= g->n_nodes && k->placement[u - g->n_nodes] >= 0;
}

/* Memory its context owns (data, no buffer; a view's root's). */
static bool in_context_memory(const struct tg_tensor *t) {
    const struct tg_tensor *root = t->view_src ? t->view_src : t;
    return root->data && !root->buffer;
}

/* The schedule gave a leaf in context memory (host memory no buffer names) a
 * device that cannot read host memory.  ggml does: ggml's first pass finds no buffer, so the
 * leaf takes its first reader's backend in pass 4, and that device reads the
 * host pointer as its own, with no copy (tgsched keeps it on the CPU and
 * copies it); or a reader elsewhere gets a copy of it, and compute aborts
 * reading the buffer it has not got (GGML_ASSERT(buffer)). */
static bool context_memory_off_host(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp) {
    const struct tg_graph *g = k->c->graph;
    int cpu = k->n_backends - 1;
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) { /* leafs and views of them */
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        int b = gp->backend[u];
        if (!in_context_memory(t) || b < 0 || b == cpu) continue;
        if (!k->dev[b].shares_host) return true;
    }
    return false;
}

static bool context_memory_copied(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp) {
    const struct tg_graph *g = k->c->graph;
    if (!gp->aborted || !strstr(gp->message, "GGML_ASSERT(buffer)")) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < TG_MAX_SRC; j++) {
            const struct tg_tensor *s = g->nodes[i]->src[j];
            int u = s ? tg_ggml_sched_slot(g, s) : -1;
            if (u >= 0 && in_context_memory(s) && gp->backend[u] != gp->backend[i]) return true;
        }
    }
    return false;
}

/* A node reading context memory that ggml and tgsched put on different
 * backends: with no backend until pass 4, the leaf has no buffer type in
 * ggml's pass 3 either, so a device sharing host memory cannot take its
 * reader (the upgrade needs every source usable there, an unassigned node
 * counts the sources usable) and the reader stays on the CPU; tgsched's leaf
 * is on the CPU from pass 1, in host memory that device reads. */
static bool context_memory_reader_moved(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp,
                                        const struct tg_ggml_schedule *tp) {
    const struct tg_graph *g = k->c->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        if (gp->backend[i] == tp->backend[i]) continue;
        for (int j = 0; j < TG_MAX_SRC; j++)
            if (g->nodes[i]->src[j] && in_context_memory(g->nodes[i]->src[j])) return true;
    }
    return false;
}

/* A node writes into context memory (cpy, set_rows into a view of such a
 * leaf): tgsched runs it on the CPU from pass 1, where that memory is; ggml's
 * pass 1 gives it no backend, and expansion from elsewhere places it and its
 * neighbours differently. */
static bool context_memory_written(const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (t->view_src && t->op != TG_OP_NONE && !tg_op_is_view(t->op) && in_context_memory(t)) return true;
    }
    return false;
}

/* What ggml's passes 1 and 4 do with op-none views (ggml_view_tensor's,
 * leafs) of leafs without memory. */
struct none_view_replay {
    bool unassigned; /* a computed node reads a source that never got a backend: ggml asserts */
    int late_root;   /* the root of a view read while the root had no backend, which a later
                      * reader rescued (the view then takes the root's backend); -1 when none */
};

/* ggml's passes 1 and 4 as far as they decide whether each tensor has a
 * backend at all, for a graph whose computed nodes all found one (any other
 * is refused earlier).  A leaf gets one from its memory or input flag, or
 * in pass 4 from the first node that reads it directly; an op-none view
 * takes its root's when a node reads it, and has none when that root has
 * none yet: a later reader of the view gives it the root's backend of then
 * (the root's first direct reader's), or none does and ggml asserts
 * (src_backend_id != -1). */
static struct none_view_replay replay_none_views(const struct tg_ggml_sched_case *k) {
    const struct tg_graph *g = k->c->graph;
    struct none_view_replay out = {false, -1};
    int n = g->n_nodes + g->n_leafs;
    bool *has = calloc((size_t)n + 1, sizeof *has);
    int *late = calloc((size_t)n + 1, sizeof *late); /* per view read while unassigned: its root + 1 */
    if (!has || !late) goto done;
    for (int u = 0; u < n; u++) {
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        if (u < g->n_nodes) has[u] = !tg_op_is_view(t->op) || (t->view_src && leaf_preallocated(k, t->view_src));
        else has[u] = (t->flags & TG_FLAG_INPUT) || leaf_preallocated(k, t);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *node = g->nodes[i];
        int root = node->view_src ? tg_ggml_sched_slot(g, node->view_src) : -1;
        bool cur = has[i] || (root >= 0 && has[root]);
        for (int j = 0; j < TG_MAX_SRC; j++) {
            int s = node->src[j] ? tg_ggml_sched_slot(g, node->src[j]) : -1;
            if (s < 0 || has[s]) continue;
            int sroot = node->src[j]->view_src ? tg_ggml_sched_slot(g, node->src[j]->view_src) : -1;
            has[s] = node->src[j]->view_src ? sroot >= 0 && has[sroot] : cur;
            if (!has[s] && sroot >= 0 && !late[s]) late[s] = sroot + 1;
        }
        has[i] = true; /* else the first backend with the op (a view op: any) */
    }
    for (int i = 0; i < g->n_nodes && !out.unassigned; i++) {
        if (tg_op_is_view(g->nodes[i]->op)) continue; /* pass 5 looks at computed nodes only */
        for (int j = 0; j < TG_MAX_SRC && !out.unassigned; j++) {
            int s = g->nodes[i]->src[j] ? tg_ggml_sched_slot(g, g->nodes[i]->src[j]) : -1;
            out.unassigned = s >= 0 && !has[s];
        }
    }
    for (int u = 0; u < n && out.late_root < 0; u++)
        if (late[u] && has[u]) out.late_root = late[u] - 1;
done:
    free(has);
    free(late);
    return out;
}

/* A node reads an op-none view (ggml_view_tensor's) of a root the plan
 * places (no memory before, no output flag): ggml's allocator counts no view
 * for it, so the root is freed at its last direct reader, before a later
 * read through the view, or, read last through the view, never
 * (alloc-none-view-read); tgsched holds it until that read. */
static bool reads_none_view_of_planned_root(const struct tg_ggml_sched_case *k) {
    const struct tg_graph *g = k->c->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < TG_MAX_SRC; j++) {
            const struct tg_tensor *s = g->nodes[i]->src[j];
            if (!s || !s->view_src || s->op != TG_OP_NONE) continue;
            if (!leaf_preallocated(k, s) && !in_context_memory(s) && !(s->view_src->flags & TG_FLAG_OUTPUT)) return true;
        }
    }
    return false;
}

/* An op-none view read before its root has a backend, rescued by a later
 * reader, whose root ggml and tgsched placed apart: ggml's root follows its
 * first direct reader, tgsched's the first reader of the root or its views. */
static bool none_view_rescued_elsewhere(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp,
                                        const struct tg_ggml_schedule *tp) {
    int root = replay_none_views(k).late_root;
    return root >= 0 && gp->backend[root] != tp->backend[root];
}

static void compare(const struct tg_ggml_schedule *gp, const struct tg_ggml_schedule *tp_own, int n_backends,
                    bool none_view_read, struct tg_ggml_sched_result *res) {
    res->n_splits_ggml = gp->n_splits;
    res->n_splits_tg = tp_own->n_splits;
    static struct tg_ggml_schedule reused; /* large: kept off the stack */
    bool reuse = as_with_copy_reuse(tp_own, &reused);
    const struct tg_ggml_schedule *tp = reuse ? &reused : tp_own;
    for (int i = 0; i < tp->n_nodes; i++) {
        if (gp->backend[i] == tp->backend[i]) continue;
        if (!res->nodes_differ++) {
            snprintf(res->detail, sizeof res->detail, "node %d: ggml backend %d, tgsched %d", i, gp->backend[i], tp->backend[i]);
        }
    }
    int n = gp->n_splits < tp->n_splits ? gp->n_splits : tp->n_splits;
    for (int i = 0; i < n; i++) {
        const struct tg_ggml_split *a = &gp->splits[i], *b = &tp->splits[i];
        if (a->backend != b->backend || a->i_start != b->i_start || a->i_end != b->i_end) {
            if (!res->splits_differ++ && !res->nodes_differ) {
                snprintf(res->detail, sizeof res->detail, "split %d: ggml backend %d nodes %d..%d, tgsched backend %d nodes %d..%d",
                         i, a->backend, a->i_start, a->i_end, b->backend, b->i_start, b->i_end);
            }
            continue;
        }
        if (same_inputs(a, b)) continue;
        if (!res->inputs_differ++ && !res->nodes_differ && !res->splits_differ) {
            snprintf(res->detail, sizeof res->detail, "split %d: %d inputs by ggml, %d by tgsched", i, a->n_inputs, b->n_inputs);
        }
    }
    if (gp->n_splits != tp->n_splits && !res->splits_differ++) {
        snprintf(res->detail, sizeof res->detail, "%d splits by ggml, %d by tgsched", gp->n_splits, tp->n_splits);
    }
    res->copies_differ = gp->n_copies != tp->n_copies;
    for (int b = 0; b < n_backends; b++) res->sizes_differ |= gp->sizes[b] != tp->sizes[b];
    if (res->sizes_differ && !res->nodes_differ && !res->splits_differ && !res->inputs_differ && !reuse) {
        for (int b = 0; b < n_backends; b++) {
            if (gp->sizes[b] != tp->sizes[b]) {
                snprintf(res->detail, sizeof res->detail, "backend %d: ggml buffer %zu bytes, tgsched %zu", b, gp->sizes[b], tp->sizes[b]);
                break;
            }
        }
    }
    if (reuse) res->classes |= 1u << TG_GGML_SCHED_COPY_REUSE;
    bool input_copies = gp->n_copies > 1 && res->user_inputs;
    if (input_copies && res->sizes_differ) res->classes |= 1u << TG_GGML_SCHED_INPUT_COPIES;
    if (gp->inplace_across && res->sizes_differ) res->classes |= 1u << TG_GGML_SCHED_INPLACE_ACROSS;
    if (none_view_read && res->sizes_differ) res->classes |= 1u << TG_GGML_SCHED_NONE_VIEW_READ;
    bool structure = res->nodes_differ || res->splits_differ || res->inputs_differ || res->copies_differ;
    /* sizes follow the copies, and the allocator's in-place and op-none view rules (test_ggml_alloc) */
    bool sizes_explained = reuse || input_copies || gp->inplace_across || none_view_read;
    if (structure || (res->sizes_differ && !sizes_explained)) res->classes |= 1u << TG_GGML_SCHED_UNEXPLAINED;
}

/* Where ggml did not schedule (an abort) or tgsched refused, the reason; where
 * both scheduled, the comparison, and for a difference the ggml behaviour it
 * follows from (each changes what comes after it, so the case is its). */
void tg_ggml_sched_classify(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *gp,
                            const struct tg_ggml_schedule *tp, struct tg_ggml_sched_result *res) {
    const struct tg_graph *g = k->c->graph;
    enum tg_ggml_sched_class c = TG_GGML_SCHED_UNEXPLAINED;
    if (tp->ran && context_memory_off_host(k, tp)) {
        /* whatever ggml did: a device cannot read host memory as its own */
        snprintf(res->detail, sizeof res->detail, "tgsched gave a leaf in context memory to a device without host memory");
    } else if (gp->aborted && strstr(gp->message, "buffer_id >= 0") && tp->ran) {
        c = TG_GGML_SCHED_UNASSIGNED_LEAF;
        snprintf(res->detail, sizeof res->detail, "ggml aborted: %s", gp->message);
    } else if (tp->ran && context_memory_copied(k, gp)) {
        c = TG_GGML_SCHED_CONTEXT_MEMORY;
        snprintf(res->detail, sizeof res->detail, "ggml aborted: %s", gp->message);
    } else if (gp->aborted && strstr(gp->message, "src_backend_id != -1") && tp->ran && replay_none_views(k).unassigned) {
        c = TG_GGML_SCHED_NONE_VIEW_UNASSIGNED;
        snprintf(res->detail, sizeof res->detail, "ggml aborted: %s", gp->message);
    } else if (gp->ran && tp->refused && (writes_elsewhere(g, gp) || writes_without_op(k, gp, tp))) {
        c = TG_GGML_SCHED_WRITE_ELSEWHERE;
        snprintf(res->detail, sizeof res->detail, "tgsched refused: %.300s", tp->message);
    } else if (gp->ran && tp->refused && refused_writer(k, tp) >= 0 && any_reads_view_of_weights(k)) {
        /* the destination followed weights seen through a view to a backend that cannot run the writer */
        c = TG_GGML_SCHED_VIEW_OF_WEIGHTS;
        snprintf(res->detail, sizeof res->detail, "tgsched refused: %.300s", tp->message);
    } else if (!gp->ran && tp->refused && (gp->aborted || gp->refused)) {
        c = TG_GGML_SCHED_BOTH_REFUSE;
        snprintf(res->detail, sizeof res->detail, "ggml: %.180s; tgsched: %.180s", gp->message, tp->message);
    } else if (!gp->ran || !tp->ran) {
        snprintf(res->detail, sizeof res->detail, "ggml %s: %.170s; tgsched %s: %.170s", gp->ran ? "ran" : "did not run",
                 gp->message, tp->ran ? "ran" : "did not run", tp->message);
    } else {
        res->user_inputs = reads_user_input(g);
        res->chunked = gp->chunked;
        compare(gp, tp, k->n_backends, reads_none_view_of_planned_root(k), res);
        res->compared = true;
        if (!((res->classes >> TG_GGML_SCHED_UNEXPLAINED) & 1)) return;
        res->classes &= ~(1u << TG_GGML_SCHED_UNEXPLAINED);
        res->compared = false;
        if (only_views(g)) c = TG_GGML_SCHED_ALL_VIEWS;
        else if (context_memory_off_host(k, gp) || context_memory_reader_moved(k, gp, tp) || context_memory_written(g)) {
            c = TG_GGML_SCHED_CONTEXT_MEMORY;
        }
        else if (reads_view_of_weights_elsewhere(k, gp, tp)) c = TG_GGML_SCHED_VIEW_OF_WEIGHTS;
        else if (view_took_first_backend(k, gp, tp)) c = TG_GGML_SCHED_VIEW_OFF_ROOT;
        else if (writes_elsewhere(g, gp)) c = TG_GGML_SCHED_WRITE_ELSEWHERE;
        else if (none_view_rescued_elsewhere(k, gp, tp)) c = TG_GGML_SCHED_NONE_VIEW_LATE;
    }
    res->classes |= 1u << c;
}

static enum tg_status compare_case(const uint8_t *bytes, size_t n, enum tg_sched_fault fault, uint64_t seed,
                                   struct tg_ggml_sched_result *res, struct tg_ggml_value_result *ggml_values,
                                   struct tg_ggml_value_result *tg_values) {
    memset(res, 0, sizeof *res);
    struct tg_ggml_sched_case k;
    enum tg_status st = tg_ggml_sched_case_from_bytes(bytes, n, &k);
    struct tg_ggml_schedule *gp = calloc(1, sizeof *gp), *tp = calloc(1, sizeof *tp);
    if (st == TG_OK && (!gp || !tp || k.c->graph->n_nodes + k.c->graph->n_leafs > TG_GGML_SCHED_MAX_TENSORS)) {
        st = tg_fail(TG_ERR_ALLOC, "sched differential: no room");
    }
    if (st == TG_OK) {
        res->n_backends = k.n_backends;
        res->n_nodes = k.c->graph->n_nodes;
        st = tg_ggml_schedule_in_ggml(&k, gp); /* first: tgsched's side moves the weights */
    }
    if (st == TG_OK && ggml_values) {
        /* values apart from the schedule: a kernel that crashes leaves the trace's comparison as it was */
        struct tg_ggml_sched_values v;
        st = tg_ggml_sched_values_make(bytes, n, seed, &v);
        if (st == TG_OK) st = tg_ggml_values_in_ggml(&k, &v, ggml_values);
        if (st == TG_OK) st = tg_ggml_values_in_tgsched(bytes, n, &v, fault, tg_values);
        tg_ggml_sched_values_free(&v);
    }
    if (st == TG_OK) st = tg_ggml_schedule_in_tgsched(&k, fault, tp);
    if (st == TG_OK) tg_ggml_sched_classify(&k, gp, tp, res);
    if (st == TG_OK && res->compared && !res->classes && ggml_values && ggml_values->wrong &&
        reads_none_view_of_planned_root(&k)) {
        /* the same schedules, and ggml's allocator frees a root an op-none view reads before that read, or
         * while another view of it lives (alloc-none-view-read, -release): the plans differ where the
         * sizes happen not to */
        res->classes |= 1u << TG_GGML_SCHED_NONE_VIEW_READ;
    }
    tg_ggml_sched_case_free(&k);
    free(gp);
    free(tp);
    return st;
}

enum tg_status tg_ggml_sched_compare(const uint8_t *bytes, size_t n, enum tg_sched_fault fault,
                                     struct tg_ggml_sched_result *res) {
    return compare_case(bytes, n, fault, 0, res, NULL, NULL);
}

enum tg_status tg_ggml_sched_compare_values(const uint8_t *bytes, size_t n, uint64_t seed, struct tg_ggml_sched_result *res,
                                            struct tg_ggml_value_result *ggml, struct tg_ggml_value_result *tgs) {
    return compare_case(bytes, n, TG_SCHED_FAULT_NONE, seed, res, ggml, tgs);
}

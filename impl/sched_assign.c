/* Backend assignment (docs/scheduler.md, "Assignment"): each pass decides only the nodes the
 * earlier passes left open, and records why, so `TG_SCHED_DEBUG` and
 * `tgsched plan` can say which rule placed a node. */
#include "sched-impl.h"
#include "tg-checks.h"

#include <stdlib.h>

static int cpu_id(const tg_sched *s) { return s->n_backends - 1; }

#define buffer_of(t) sched_existing_buffer(s, (t))

/* First backend that can use t's pre-allocated buffer and run op; -1 if none. */
static int backend_from_buffer(const tg_sched *s, const struct tg_tensor *t, const struct tg_tensor *op) {
    tg_buffer *buf = buffer_of(t);
    if (!buf) return -1;
    for (int b = 0; b < s->n_backends; b++) {
        if (tg_backend_supports_buft(s->backends[b], buf->buft) && sched_op_supported(s, b, op)) return b;
    }
    return -1;
}

static int pin_of(const tg_sched *s, const struct tg_tensor *t) {
    if (!s->has_pins) return -1;
    size_t slot = tg_hash_find(&s->pins, t);
    return slot == TG_HASH_FULL ? -1 : s->pin_ids[slot];
}

static bool weights_rule_applies(const struct tg_tensor *t) {
    /* rope reads its frequency factors and attention its KV: following those
     * "weights" would drag the op away from its activations */
    return t->op != TG_OP_ROPE && t->op != TG_OP_FLASH_ATTN_EXT;
}

/* Pass 1 for one tensor: pre-allocated, pin, input, weights. */
static enum tg_status assign_from_current(tg_sched *s, struct tg_tensor *t) {
    bool moved_view = s->fault == TG_SCHED_FAULT_MOVE_PREALLOCATED && t->view_src;
    if (buffer_of(t) && !moved_view) {
        int b = backend_from_buffer(s, t, t);
        if (b < 0) {
            return tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s' (op %s) is pre-allocated in a buffer of type '%s', but no "
                           "backend can both use that buffer and run the op", t->name, tg_op_name(t->op),
                           tg_buft_name(buffer_of(t)->buft));
        }
        return sched_rec_set(s, t, b, TG_REASON_PREALLOCATED);
    }
    if (moved_view) return TG_OK;
    /* memory its context owns (data, no buffer) is host memory the CPU reads:
     * left open, it would follow a consumer onto a device that cannot reach it */
    if (sched_in_context_memory(t)) return sched_rec_set(s, t, cpu_id(s), TG_REASON_PREALLOCATED);
    int pin = s->fault == TG_SCHED_FAULT_IGNORE_PIN ? -1 : pin_of(s, t);
    if (pin >= 0) return sched_rec_set(s, t, pin, TG_REASON_USER_PIN);
    if (t->flags & TG_FLAG_INPUT) return sched_rec_set(s, t, cpu_id(s), TG_REASON_INPUT_CPU);
    if (!weights_rule_applies(t)) return TG_OK;
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *src = t->src[k];
        if (!src || src == t || !buffer_of(src) || tg_buffer_get_usage(buffer_of(src)) != TG_BUFFER_USAGE_WEIGHTS) continue;
        int b = backend_from_buffer(s, src, t);
        if (s->op_offload && b == cpu_id(s) && tg_buffer_is_host(buffer_of(src))) {
            for (int o = 0; o < b; o++) {
                if (sched_op_supported(s, o, t) && tg_backend_offload_op(s->backends[o], t)) {
                    return sched_rec_set(s, t, o, TG_REASON_OFFLOAD);
                }
            }
        }
        if (b >= 0) return sched_rec_set(s, t, b, TG_REASON_WEIGHTS);
        return TG_OK; /* only the first weights source counts */
    }
    return TG_OK;
}

/* Pass 1 for a source or view root the graph does not list (a tensor the
 * caller put in a node's sources after building, or never built in): one
 * with memory is pre-allocated too.  Left open, fill-in would place it with
 * its consumer, whose backend may not reach that memory, and no split input
 * would copy it there. */
static enum tg_status assign_unlisted(tg_sched *s, struct tg_tensor *t) {
    if (!t || sched_rec_backend(s, t) >= 0 || !(buffer_of(t) || sched_in_context_memory(t))) return TG_OK;
    enum tg_status st = t->view_src ? assign_unlisted(s, t->view_src) : TG_OK;
    return st == TG_OK ? assign_from_current(s, t) : st;
}

/* Pass 2: one expansion sweep. */
static enum tg_status expand(tg_sched *s, struct tg_graph *g, bool forward, bool accelerators_only,
                             enum tg_sched_reason reason) {
    int cur = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        struct tg_tensor *node = g->nodes[forward ? n : g->n_nodes - 1 - n];
        if (tg_op_is_view(node->op)) continue;
        int id = sched_rec_backend(s, node);
        if (id >= 0) {
            cur = (accelerators_only && id == cpu_id(s)) ? -1 : id;
        } else if (cur >= 0 && (sched_op_supported(s, cur, node) || s->fault == TG_SCHED_FAULT_IGNORE_SUPPORT)) {
            enum tg_status st = sched_rec_set(s, node, cur, reason);
            if (st != TG_OK) return st;
        }
    }
    return TG_OK;
}

static bool all_sources_usable(const tg_sched *s, const struct tg_tensor *node, int b) {
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *src = node->src[k];
        if (src && src != node && !sched_buffer_supported(s, src, b)) return false;
    }
    return true;
}

/* Pass 3: open nodes go where most of their sources can be read; assigned
 * nodes move up to a higher-priority backend sharing their buffer type. */
static enum tg_status upgrade_and_best_inputs(tg_sched *s, struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *node = g->nodes[i];
        if (tg_op_is_view(node->op)) continue;
        int id = sched_rec_backend(s, node);
        enum tg_status st = TG_OK;
        if (id < 0) {
            int best = -1, best_count = -1;
            for (int b = 0; b < s->n_backends; b++) {
                if (!sched_op_supported(s, b, node)) continue;
                int count = 0;
                for (int k = 0; k < TG_MAX_SRC; k++) {
                    const struct tg_tensor *src = node->src[k];
                    if (!src || src == node) continue;
                    bool known = sched_rec_backend(s, src) >= 0 || (src->view_src && sched_rec_backend(s, src->view_src) >= 0);
                    if (known && sched_buffer_supported(s, src, b)) count++;
                }
                if (count > best_count) {
                    best = b;
                    best_count = count;
                }
            }
            if (best >= 0) st = sched_rec_set(s, node, best, TG_REASON_MOST_SOURCES);
        } else {
            enum tg_sched_reason why = sched_rec_reason(s, node);
            if (why == TG_REASON_USER_PIN || why == TG_REASON_PREALLOCATED) continue; /* honoured as given */
            for (int b = 0; b < id; b++) {
                if (s->bufts[b] == s->bufts[id] && sched_op_supported(s, b, node) && all_sources_usable(s, node, b)) {
                    st = sched_rec_set(s, node, b, TG_REASON_UPGRADE);
                    break;
                }
            }
        }
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* A node whose result is a view (view ops, and set_rows / cpy writing into
 * their destination) must run where its root's memory is usable.  View ops
 * compute nothing: they always follow their root (a pin on one is moot).  A
 * writer whose backend cannot use its root's memory, if unpinned, moves to
 * the root's backend, or else to the first backend that can use the root's
 * memory and runs it.  Failing that, a root that may move (not pre-allocated,
 * not its context's memory, not pinned) goes where it and every writer of it
 * can meet: the writer's backend (its pin) first, then the others in
 * priority order; the root moves at most once, so writers never thrash.  A
 * root moved so may strand writers and views decided before it, so a second
 * sweep moves those (the meeting place fits them by construction).  No
 * meeting place is an error naming the writer and what rules it out: the
 * root, or another writer. */
static bool writer_is_pinned(const tg_sched *s, const struct tg_tensor *w) {
    return sched_rec_reason(s, w) == TG_REASON_USER_PIN;
}

/* Whether writer w may stay where it is with its root on backend b: its
 * backend can use b's memory (and runs it, unless the user said so). */
static bool writer_stays(const tg_sched *s, const struct tg_tensor *w, int b) {
    int id = sched_rec_backend(s, w);
    return id >= 0 && tg_backend_supports_buft(s->backends[id], s->bufts[b]) &&
           (writer_is_pinned(s, w) || sched_op_supported(s, id, w));
}

/* Whether writer w can live with its root on backend b: it stays, or it
 * moves to b (unless pinned) and runs there. */
static bool writer_fits(const tg_sched *s, const struct tg_tensor *w, int b) {
    return writer_stays(s, w, b) || (!writer_is_pinned(s, w) && sched_op_supported(s, b, w));
}

/* Why root must keep its backend; NULL when it may move. */
static const char *root_fixed_why(const tg_sched *s, const struct tg_tensor *root) {
    if (buffer_of(root)) return "it is pre-allocated in a buffer";
    if (sched_in_context_memory(root)) return "its memory is its context's";
    if (sched_rec_reason(s, root) == TG_REASON_USER_PIN) return "it is pinned there";
    return NULL;
}

/* A writer of root in g (by position *at) that does not fit backend b, or
 * NULL: the first pinned one, else the first one, so that a pin that rules b
 * out is the one named.  A writer still open runs nowhere: fill_in refuses
 * it by name. */
static const struct tg_tensor *writer_ruling_out(const tg_sched *s, const struct tg_graph *g,
                                                 const struct tg_tensor *root, int b, int *at) {
    const struct tg_tensor *first = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (t->view_src == root && t->op != TG_OP_NONE && !tg_op_is_view(t->op) && sched_rec_backend(s, t) >= 0 &&
            !writer_fits(s, t, b)) {
            if (writer_is_pinned(s, t)) {
                *at = i;
                return t;
            }
            if (!first) {
                first = t;
                *at = i;
            }
        }
    }
    return first;
}

/* Where writer w's movable root and all the root's writers can meet, trying
 * `first` before the others in priority order; -1 if nowhere, and then
 * *blocker is the writer that ruled out a backend that runs the root's op
 * and fits w (NULL: no backend does both): a pinned writer if one ruled any
 * out (the pin is then why there is no place), else the first backend's. */
static int meeting_backend(const tg_sched *s, const struct tg_graph *g, const struct tg_tensor *w, int first,
                           const struct tg_tensor **blocker, int *blocker_at) {
    const struct tg_tensor *root = w->view_src;
    *blocker = NULL;
    for (int k = -1; k < s->n_backends; k++) {
        int b = k < 0 ? first : k;
        if (b < 0 || (k >= 0 && b == first)) continue;
        if (!sched_op_supported(s, b, root) || !writer_fits(s, w, b)) continue;
        int at = -1;
        const struct tg_tensor *out = writer_ruling_out(s, g, root, b, &at);
        if (!out) return b;
        if (!*blocker || (!writer_is_pinned(s, *blocker) && writer_is_pinned(s, out))) {
            *blocker = out;
            *blocker_at = at;
        }
    }
    return -1;
}

/* The error for writer w (node i) whose root and writers have no meeting
 * place: a pin that cannot hold is TG_ERR_INVALID, an op no backend there
 * runs TG_ERR_UNSUPPORTED. */
static enum tg_status no_meeting_place(const tg_sched *s, int i, const struct tg_tensor *w,
                                       const struct tg_tensor *blocker, int blocker_at) {
    const struct tg_tensor *root = w->view_src;
    const char *root_backend = tg_backend_name(s->backends[sched_rec_backend(s, root)]);
    const char *fixed = root_fixed_why(s, root);
    int id = sched_rec_backend(s, w);
    if (fixed && writer_is_pinned(s, w)) {
        return tg_fail(TG_ERR_INVALID, "node %d '%s' (op %s) is pinned to backend '%s' but writes into '%s', which "
                       "lives on '%s' where '%s' cannot use its memory, and '%s' cannot move (%s): pin them to the "
                       "same backend", i, w->name, tg_op_name(w->op), tg_backend_name(s->backends[id]), root->name,
                       root_backend, tg_backend_name(s->backends[id]), root->name, fixed);
    }
    if (fixed) {
        return tg_fail(TG_ERR_UNSUPPORTED, "node %d '%s' (op %s) writes into '%s', which lives on '%s'; no backend "
                       "that can use that memory runs the op, and '%s' cannot move: %s", i, w->name,
                       tg_op_name(w->op), root->name, root_backend, root->name, fixed);
    }
    if (!blocker && writer_is_pinned(s, w)) {
        return tg_fail(TG_ERR_INVALID, "node %d '%s' (op %s) is pinned to backend '%s' and writes into '%s' (op %s), "
                       "but no backend whose memory '%s' can use runs '%s': pin them to the same backend", i, w->name,
                       tg_op_name(w->op), tg_backend_name(s->backends[id]), root->name, tg_op_name(root->op),
                       tg_backend_name(s->backends[id]), root->name);
    }
    if (!blocker) {
        return tg_fail(TG_ERR_UNSUPPORTED, "node %d '%s' (op %s) writes into '%s' (op %s), but no backend of this "
                       "scheduler runs '%s' where '%s' can be run with it", i, w->name, tg_op_name(w->op), root->name,
                       tg_op_name(root->op), root->name, w->name);
    }
    bool pins = writer_is_pinned(s, w) || writer_is_pinned(s, blocker);
    return tg_fail(pins ? TG_ERR_INVALID : TG_ERR_UNSUPPORTED,
                   "node %d '%s' (op %s%s) and node %d '%s' (op %s%s) both write into '%s', but no backend of this "
                   "scheduler runs both with '%s'%s", i, w->name, tg_op_name(w->op),
                   writer_is_pinned(s, w) ? ", pinned" : "", blocker_at, blocker->name, tg_op_name(blocker->op),
                   writer_is_pinned(s, blocker) ? ", pinned" : "", root->name, root->name,
                   pins ? ": pin them to the same backend, one that runs both" : "");
}

/* The root's backend if it runs writer w, else the first backend that can
 * use the root's memory and runs w; -1 if none. */
static int backend_sharing_root(const tg_sched *s, const struct tg_tensor *w, int rid) {
    /* the fault keeps the old unchecked move, so the checkers see the unsupported op */
    if (s->fault == TG_SCHED_FAULT_IGNORE_SUPPORT || sched_op_supported(s, rid, w)) return rid;
    for (int b = 0; b < s->n_backends; b++) {
        if (sched_buffer_supported(s, w->view_src, b) && sched_op_supported(s, b, w)) return b;
    }
    return -1;
}

static enum tg_status follow_roots(tg_sched *s, struct tg_graph *g, bool may_move_roots) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *node = g->nodes[i];
        struct tg_tensor *root = node->view_src;
        if (!root) continue;
        if (s->fault == TG_SCHED_FAULT_MOVE_PREALLOCATED && buffer_of(root)) continue;
        int id = sched_rec_backend(s, node), rid = sched_rec_backend(s, root);
        enum tg_status st = TG_OK;
        bool is_view_op = tg_op_is_view(node->op) || node->op == TG_OP_NONE;
        if (rid < 0) {
            if (id >= 0 && !buffer_of(root)) st = sched_rec_set(s, root, id, TG_REASON_FOLLOW_CONSUMER);
        } else if (is_view_op) {
            if (id != rid) st = sched_rec_set(s, node, rid, TG_REASON_VIEW_SOURCE);
        } else if (id < 0 || !sched_buffer_supported(s, root, id)) {
            bool pinned = writer_is_pinned(s, node);
            int to = pinned ? -1 : backend_sharing_root(s, node, rid);
            if (!may_move_roots) {
                /* the second sweep: the meeting place fits every writer */
                if (pinned) {
                    return tg_fail(TG_ERR_INVALID, "node %d '%s' (op %s) is pinned to backend '%s' but writes into "
                                   "'%s', which lives on '%s' where '%s' cannot use its memory: pin them to the same "
                                   "backend", i, node->name, tg_op_name(node->op), tg_backend_name(s->backends[id]),
                                   root->name, tg_backend_name(s->backends[rid]), tg_backend_name(s->backends[id]));
                }
                st = sched_rec_set(s, node, rid, TG_REASON_VIEW_SOURCE);
            } else if (to >= 0) {
                st = sched_rec_set(s, node, to, TG_REASON_VIEW_SOURCE);
            } else {
                const struct tg_tensor *blocker = NULL;
                int blocker_at = -1;
                int meet = root_fixed_why(s, root) ? -1 : meeting_backend(s, g, node, id, &blocker, &blocker_at);
                if (meet < 0) return no_meeting_place(s, i, node, blocker, blocker_at);
                st = sched_rec_set(s, root, meet, TG_REASON_FOLLOW_CONSUMER);
                if (st == TG_OK && !writer_stays(s, node, meet)) st = sched_rec_set(s, node, meet, TG_REASON_VIEW_SOURCE);
            }
        }
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* Pass 4: every computed node must be on a backend that runs it; then views
 * follow their roots and leftover sources their consumers. */
static enum tg_status fill_in(tg_sched *s, struct tg_graph *g) {
    enum tg_status st = follow_roots(s, g, true);
    if (st == TG_OK) st = follow_roots(s, g, false);
    if (st != TG_OK) return st;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tg_tensor *node = g->nodes[i];
        if (tg_op_is_view(node->op) || node->op == TG_OP_NONE) continue;
        int id = sched_rec_backend(s, node);
        if (id < 0) {
            return tg_fail(TG_ERR_UNSUPPORTED, "node %d '%s' (op %s, type %s): no backend of this scheduler supports "
                           "it; add a backend that does (the CPU computes: %s)", i, node->name, tg_op_name(node->op),
                           tg_type_name(node->type),
                           tg_backend_supports_op(s->backends[cpu_id(s)], node) ? "yes" : "no, not this layout or type");
        }
        if (!sched_op_supported(s, id, node) && s->fault != TG_SCHED_FAULT_IGNORE_SUPPORT) {
            return tg_fail(TG_ERR_UNSUPPORTED, "node %d '%s' (op %s) is placed on backend '%s' (%s), which does not "
                           "support it%s: pin it to a backend that does, or give that backend the op",
                           i, node->name, tg_op_name(node->op), tg_backend_name(s->backends[id]),
                           tg_sched_reason_name(sched_rec_reason(s, node)),
                           node->view_src ? " (its result lives in the memory of its destination, so it must run "
                                            "there)" : "");
        }
    }
    for (int i = 0; i < g->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *node = g->nodes[i];
        int id = sched_rec_backend(s, node);
        if (id < 0) continue; /* views: below */
        for (int k = 0; k < TG_MAX_SRC && st == TG_OK; k++) {
            struct tg_tensor *src = node->src[k];
            if (!src || sched_rec_backend(s, src) >= 0) continue;
            if (src->view_src && sched_rec_backend(s, src->view_src) < 0) {
                st = sched_rec_set(s, src->view_src, id, TG_REASON_FOLLOW_CONSUMER);
            }
            if (st == TG_OK) {
                if (src->view_src) st = sched_rec_set(s, src, sched_rec_backend(s, src->view_src), TG_REASON_VIEW_SOURCE);
                else st = sched_rec_set(s, src, id, TG_REASON_FOLLOW_CONSUMER);
            }
        }
    }
    /* views whose consumers did not decide them, in node order */
    for (int i = 0; i < g->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *node = g->nodes[i];
        if (sched_rec_backend(s, node) >= 0) continue;
        int root = node->view_src ? sched_rec_backend(s, node->view_src) : -1;
        if (root < 0 && node->view_src) {
            st = sched_rec_set(s, node->view_src, cpu_id(s), TG_REASON_FOLLOW_CONSUMER);
            root = cpu_id(s);
        }
        if (st == TG_OK) st = sched_rec_set(s, node, root >= 0 ? root : cpu_id(s), TG_REASON_VIEW_SOURCE);
    }
    for (int j = 0; j < g->n_leafs && st == TG_OK; j++) {
        if (sched_rec_backend(s, g->leafs[j]) < 0) st = sched_rec_set(s, g->leafs[j], cpu_id(s), TG_REASON_FOLLOW_CONSUMER);
    }
    return st;
}

enum tg_status sched_assign_backends(tg_sched *s, struct tg_graph *g) {
    TG_ASSERT(!s->is_scheduled && s->n_splits == 0, "assignment starts from a forgotten graph");
    enum tg_status st = TG_OK;
    s->assigning = g;
    for (int j = 0; j < g->n_leafs && st == TG_OK; j++) st = assign_from_current(s, g->leafs[j]);
    for (int i = 0; i < g->n_nodes && st == TG_OK; i++) st = assign_from_current(s, g->nodes[i]);
    for (int i = 0; i < g->n_nodes && st == TG_OK; i++) {
        st = assign_unlisted(s, g->nodes[i]->view_src);
        for (int k = 0; k < TG_MAX_SRC && st == TG_OK; k++) st = assign_unlisted(s, g->nodes[i]->src[k]);
    }
    if (st == TG_OK) st = expand(s, g, true, true, TG_REASON_EXPAND_GPU_DOWN);
    if (st == TG_OK) st = expand(s, g, false, true, TG_REASON_EXPAND_GPU_UP);
    if (st == TG_OK) st = expand(s, g, true, false, TG_REASON_EXPAND_DOWN);
    if (st == TG_OK) st = expand(s, g, false, false, TG_REASON_EXPAND_UP);
    if (st == TG_OK) st = upgrade_and_best_inputs(s, g);
    if (st == TG_OK) st = fill_in(s, g);
    return st; /* s->assigning stays set: splits consult it too */
}

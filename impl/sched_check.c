/* The schedule replay cross-check of Debug and fuzzing builds (TG_CHECKS):
 * after every replay, a second scheduler (sched.c's shadow: the same
 * backends, buffer types and settings, the same graph allocator to ask which
 * buffers are the plan's, replay off) schedules the same graph with the full
 * passes, and the two must agree on everything a schedule is: backend and
 * reason per tensor, splits and their inputs, split-input copies,
 * redirects, and the graph copy with its buffer ids.  The first difference
 * aborts, named.
 *
 * The shadow never binds or computes and never points the graph's sources at
 * its copies; its records stamp the graph's tensors, which only sends the
 * scheduler's own later lookups to its hash index. */
#include "sched-impl.h"
#include "tg-checks.h"
#include "tg-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *backend_name(const tg_sched *s, int id) {
    return id >= 0 && id < s->n_backends ? tg_backend_name(s->backends[id]) : "none";
}

_Noreturn static void differs(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void differs(const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tg_internal_error(__FILE__, __LINE__, "schedule replay differs from a full schedule of the same graph: %s", what);
}

/* Same backend and reason for t in both schedules. */
static void compare_record(const tg_sched *s, const tg_sched *full, const struct tg_tensor *mine,
                           const struct tg_tensor *theirs, const char *what) {
    int b = sched_rec_backend(s, mine), fb = sched_rec_backend(full, theirs);
    enum tg_sched_reason r = sched_rec_reason(s, mine), fr = sched_rec_reason(full, theirs);
    if (b != fb || r != fr) {
        differs("%s '%s': replay says %s (%s), the full passes %s (%s)", what, mine->name, backend_name(s, b),
                tg_sched_reason_name(r), backend_name(s, fb), tg_sched_reason_name(fr));
    }
}

/* A tensor of the scheduler's own (a split-input copy or dependency view)
 * stands for the same thing in both schedules. */
static void compare_own(const tg_sched *s, const tg_sched *full, const struct tg_tensor *a, const struct tg_tensor *b,
                        const char *where) {
    const struct tg_tensor *copy_a = sched_rec_copy_of(s, a), *copy_b = sched_rec_copy_of(full, b);
    if (strcmp(a->name, b->name) != 0 || a->type != b->type || a->op != b->op || a->flags != b->flags ||
        memcmp(a->ne, b->ne, sizeof a->ne) != 0 || memcmp(a->nb, b->nb, sizeof a->nb) != 0 ||
        a->src[0] != b->src[0] || a->view_src != b->view_src || a->view_offs != b->view_offs || copy_a != copy_b) {
        differs("%s: the replay has '%s', the full passes '%s'", where, a->name, b->name);
    }
    compare_record(s, full, a, b, where);
}

static void compare_splits(const tg_sched *s, const tg_sched *full) {
    if (s->n_splits != full->n_splits) differs("%d splits, the full passes make %d", s->n_splits, full->n_splits);
    for (int i = 0; i < s->n_splits; i++) {
        const struct sched_split *a = &s->splits[i], *b = &full->splits[i];
        if (a->backend_id != b->backend_id || a->i_start != b->i_start || a->i_end != b->i_end ||
            a->c_start != b->c_start || a->c_end != b->c_end || a->n_inputs != b->n_inputs) {
            differs("split %d: replay %s nodes %d..%d (copy %d..%d) with %d inputs, the full passes %s nodes %d..%d "
                    "(copy %d..%d) with %d inputs", i, backend_name(s, a->backend_id), a->i_start, a->i_end,
                    a->c_start, a->c_end, a->n_inputs, backend_name(s, b->backend_id), b->i_start, b->i_end,
                    b->c_start, b->c_end, b->n_inputs);
        }
        for (int k = 0; k < a->n_inputs; k++) {
            if (a->inputs[k] != b->inputs[k]) {
                differs("split %d input %d: replay '%s', the full passes '%s'", i, k, a->inputs[k]->name,
                        b->inputs[k]->name);
            }
            for (int c = 0; c < s->n_copies; c++) {
                char where[64];
                snprintf(where, sizeof where, "split %d input %d copy %d", i, k, c);
                compare_own(s, full, a->copies[k * TG_SCHED_MAX_COPIES + c], b->copies[k * TG_SCHED_MAX_COPIES + c],
                            where);
            }
        }
    }
    if (s->n_redirects != full->n_redirects) {
        differs("%d redirected sources, the full passes %d", s->n_redirects, full->n_redirects);
    }
    for (int i = 0; i < s->n_redirects; i++) {
        const struct sched_redirect *a = &s->redirects[i], *b = &full->redirects[i];
        if (a->node != b->node || a->src_index != b->src_index || a->original != b->original || a->split != b->split ||
            a->input != b->input) {
            differs("redirect %d: replay '%s' source %d, the full passes '%s' source %d", i, a->node->name,
                    a->src_index, b->node->name, b->src_index);
        }
    }
}

static void compare_copy(const tg_sched *s, const tg_sched *full, const struct tg_graph *g) {
    const struct tg_graph *a = s->copy, *b = full->copy;
    if (a->n_nodes != b->n_nodes || a->n_leafs != b->n_leafs) {
        differs("the graph copy has %d nodes and %d leafs, the full passes' %d and %d", a->n_nodes, a->n_leafs,
                b->n_nodes, b->n_leafs);
    }
    for (int e = 0; e < a->n_nodes + a->n_leafs; e++) {
        const bool node = e < a->n_nodes;
        const struct tg_tensor *ta = node ? a->nodes[e] : a->leafs[e - a->n_nodes];
        const struct tg_tensor *tb = node ? b->nodes[e] : b->leafs[e - b->n_nodes];
        const int id_a = node ? s->node_ids[e] : s->leaf_ids[e - a->n_nodes];
        const int id_b = node ? full->node_ids[e] : full->leaf_ids[e - b->n_nodes];
        char where[64];
        snprintf(where, sizeof where, "graph copy %s %d", node ? "node" : "leaf", node ? e : e - a->n_nodes);
        if (tg_graph_contains(g, ta) || tg_graph_contains(g, tb)) {
            if (ta != tb) differs("%s: replay '%s', the full passes '%s'", where, ta->name, tb->name);
        } else {
            compare_own(s, full, ta, tb, where);
        }
        if (id_a != id_b) differs("%s '%s': buffer id %d, the full passes %d", where, ta->name, id_a, id_b);
    }
}

void sched_check_replay(const tg_sched *s, tg_sched *full, struct tg_graph *g) {
    sched_records_clear(full->recs);
    full->n_splits = 0;
    full->n_redirects = 0;
    (void)sched_memo_prime(full, g);
    enum tg_status st = sched_assign_backends(full, g);
    if (st == TG_OK) st = sched_build_splits(full, g);
    if (st == TG_OK) st = sched_build_copy(full, g);
    /* Host memory running out is no difference between the schedules: the
     * check cannot run, and the replay stands.  The message is the replay's
     * business, not the check's. */
    if (st == TG_ERR_ALLOC) {
        tg_clear_error();
        return;
    }
    if (st != TG_OK) differs("the replay scheduled a graph the full passes refuse: %s", tg_last_error());
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        const bool node = u < g->n_nodes;
        const struct tg_tensor *t = node ? g->nodes[u] : g->leafs[u - g->n_nodes];
        compare_record(s, full, t, t, node ? "node" : "leaf");
    }
    compare_splits(s, full);
    compare_copy(s, full, g);
    full->n_redirects = 0; /* never applied: nothing to undo */
    full->assigning = NULL;
}

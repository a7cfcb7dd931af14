/* The graph allocator's fast replays of its recorded plan, and their
 * cross-check.  Each checks, in every build, what its binding relies on;
 * anything it cannot vouch for goes to the general path (alloc.c), which
 * classifies, compares with alloc_plan_matches and names what differs.
 *
 *   unchanged  the graph bound last, found as that bind left it
 *              (alloc_image.c): nothing to do.
 *   stamped    a graph with the recorded structure: each tensor is stamped
 *              with this check's pass and its graph position, so a source's
 *              position is one load instead of a hash lookup; structure,
 *              sizes and memory are compared with the records.
 *   vouched    a graph the scheduler vouches has the structure of the graph
 *              bound under a token (its own replay compared every tensor):
 *              memory is checked here, and sizes and view roots as the
 *              positions are bound (alloc_bind's BIND_VOUCHED).
 *
 * Where TG_CHECKS is on, every graph a replay accepts is also put to the
 * general check, and every position to the address its record names: a
 * difference aborts, naming the replay and the first difference. */
#include "alloc-impl.h"
#include "alloc-vouched.h"
#include "tg-checks.h"

#include <stdio.h>
#include <string.h>

/* ---- stamps ------------------------------------------------------------------------------------ */

#define STAMP_REF_BITS 24
#define STAMP_MAX_REF ((1 << STAMP_REF_BITS) - 1)

static uint64_t replay_pass_counter; /* shared by all allocators: passes never repeat */

static uint64_t next_replay_pass(void) { return __atomic_add_fetch(&replay_pass_counter, 1, __ATOMIC_RELAXED); }

static uint64_t stamp_of(const struct tg_tensor *t) {
    return __atomic_load_n(&t->private_.alloc_stamp, __ATOMIC_RELAXED);
}

static void stamp(struct tg_tensor *t, uint64_t pass, int ref) {
    __atomic_store_n(&t->private_.alloc_stamp, pass << STAMP_REF_BITS | (uint64_t)ref, __ATOMIC_RELAXED);
}

/* t's ref in this pass: a tensor not stamped by it is outside the graph. */
static inline int stamped_ref(const struct tg_tensor *t, uint64_t pass) {
    if (!t) return REF_NONE;
    uint64_t s = stamp_of(t);
    return s >> STAMP_REF_BITS == pass ? (int)(s & STAMP_MAX_REF) : REF_OUTSIDE;
}

/* Whether a replay can be tried on graph at all (before any tensor is looked at). */
static bool replay_possible(const tg_gallocr *g, const struct tg_graph *graph) {
    return g->have_plan && g->plan_bindable && !alloc_fault_changes_planning(g) && graph->n_nodes == g->n_nodes &&
           graph->n_leafs == g->n_leafs && graph->n_nodes + graph->n_leafs < STAMP_MAX_REF;
}

/* ---- memory, as the general path classifies it ------------------------------------------------ */

/* A tensor outside the graph (a source or a view root) must bring its own
 * memory, and not memory of this allocator; a view outside the graph must
 * also sit at its offset of such a root, planned external where the root is
 * in the graph (alloc_classify's and check_outside_view's rules). */
static bool outside_has_own_memory(tg_gallocr *g, const struct tg_tensor *t, uint64_t pass) {
    const struct tg_tensor *root = t->view_src ? t->view_src : t;
    if (root != t) {
        if (!root->data || t->data != (const uint8_t *)root->data + t->view_offs) return false;
        const int root_ref = stamped_ref(root, pass);
        if (root_ref != REF_OUTSIDE) return g->records[pos_of_ref(root_ref)].sig.external;
    }
    return (root->data || root->buffer) && !alloc_owns_buffer(g, root->buffer);
}

/* alloc_classify's rule for a graph tensor that is not a view: 1 external,
 * 0 planned here, -1 let the general path decide.  was_result: whether a
 * leaf was a result of the last bind (1, 0, -1 unknown: ask). */
static inline __attribute__((always_inline)) int external_memory(tg_gallocr *g, const struct tg_tensor *t,
                                                                 signed char was_result, bool is_node) {
    bool has_memory = t->data || t->buffer;
    if (!has_memory) return 0;
    if (alloc_owns_buffer_cached(g, t->buffer)) {
        if (is_node) return 0;
        bool result = was_result >= 0 ? was_result == 1 : alloc_was_last_result(g, t);
        return result ? -1 : 0;
    }
    /* a node, or an input leaf, in another plan's compute buffer is planned here again */
    if ((is_node || t->op == TG_OP_NONE) && t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE)
        return 0;
    return 1;
}

/* Whether t, not a view, comes with memory (or without) as the plan says:
 * external when planned external, planned here otherwise. */
static inline __attribute__((always_inline)) bool memory_as_planned(tg_gallocr *g, const struct tg_tensor *t,
                                                                    signed char was_result, bool is_node,
                                                                    bool planned_external) {
    int external = external_memory(g, t, was_result, is_node);
    return external >= 0 && (external == 1) == planned_external;
}

/* ---- the stamped replay --------------------------------------------------------------------- */

/* Whether t has the ne and nb recorded in rec. */
static inline __attribute__((always_inline)) bool shape_as_recorded(const struct tg_tensor *t,
                                                                    const struct record *rec) {
    return tg_lanes_zero(tg_lanes_diff(t->ne, rec->shape, sizeof t->ne + sizeof t->nb));
}

/* The check of one position, inlined into the loops of stamped_graph_matches.
 * Leafs and the nodes before t have their shape_unchanged scratch set: when
 * t and every source kept the recorded shape (the type is in the
 * signature), the same-layout bits are the recorded ones, and so is the
 * size where the buffer type uses the default size rule. */
static inline __attribute__((always_inline)) bool stamped_position_matches(tg_gallocr *g, const struct tg_tensor *t,
                                                                            struct record *rec, bool is_node,
                                                                            uint64_t pass) {
    const struct signature *sig = &rec->sig;
    if (t->op != sig->op || t->type != sig->type || t->flags != sig->flags ||
        (t->view_offs != sig->view_offs && !sig->window) ||
        !tg_sources_empty_from(t, sig->n_src)) {
        return false;
    }
    const bool shape_unchanged = is_node ? shape_as_recorded(t, rec) : rec->shape_unchanged;
    if (is_node) rec->shape_unchanged = shape_unchanged;
    bool layouts_known = shape_unchanged;
    for (int k = 0; k < sig->n_src; k++) {
        const struct tg_tensor *src = t->src[k];
        int ref = stamped_ref(src, pass);
        if (ref != sig->src[k]) return false;
        if (ref == REF_NONE) continue;
        if (ref == REF_OUTSIDE) {
            layouts_known = false;
            if (is_node && !outside_has_own_memory(g, src, pass)) return false;
        } else {
            layouts_known = layouts_known && g->records[pos_of_ref(ref)].shape_unchanged;
        }
    }
    if (!layouts_known) {
        uint16_t layout_bits = 0;
        for (int k = 0; k < sig->n_src; k++) {
            if (t->src[k] && same_layout(t, t->src[k])) layout_bits |= (uint16_t)(1u << k);
        }
        if (layout_bits != sig->same_layout_srcs) return false;
    }
    int view_ref = stamped_ref(t->view_src, pass);
    if (view_ref != sig->view_src) return false;
    if (t->view_src) {
        if (view_ref == REF_OUTSIDE && !outside_has_own_memory(g, t, pass)) return false;
        return !sig->external;
    }
    if (!memory_as_planned(g, t, rec->was_result, is_node, sig->external)) return false;
    if (sig->external) return true;
    if (rec->buffer_id < 0) return false;
    if (shape_unchanged && !g->bufts[rec->buffer_id]->iface.get_alloc_size) return true;
    return alloc_size(g, rec->buffer_id, t) <= rec->size;
}

/* Stamps the leafs and notes which kept their recorded shape and which were
 * nodes of the last bind; false when one is listed twice.  same_tensors:
 * every leaf carries the last bind's stamp at its position. */
static bool stamp_leafs(tg_gallocr *g, const struct tg_graph *graph, uint64_t pass, bool *same_tensors) {
    const uint64_t last_bind_stamp = g->last_bind_pass << STAMP_REF_BITS;
    bool same = g->last_bind_pass != 0;
    for (int j = 0; j < graph->n_leafs; j++) {
        struct tg_tensor *t = graph->leafs[j];
        if (!t) return false; /* lists written directly: the general path names it */
        struct record *rec = &g->records[j];
        uint64_t old = stamp_of(t);
        if (old >> STAMP_REF_BITS == pass) return false;
        same &= old == (last_bind_stamp | (uint64_t)ref_of_pos(j));
        /* a stamp still of the last bind's check tells whether this leaf was a bound node then */
        signed char was_result = -1;
        if (g->last_bind_pass && old >> STAMP_REF_BITS == g->last_bind_pass) {
            const int pos = pos_of_ref((int)(old & STAMP_MAX_REF));
            was_result = pos >= graph->n_leafs && g->records[pos].buffer_id >= 0;
        }
        rec->was_result = was_result;
        rec->shape_unchanged = shape_as_recorded(t, rec);
        stamp(t, pass, ref_of_pos(j));
    }
    *same_tensors = same;
    return true;
}

/* Leafs are stamped first, then each node is stamped and checked in one
 * visit: its sources and view root come before it in a graph built in
 * topological order (a later one reads as outside the graph, a mismatch).
 * Leafs are checked last: a leaf's recorded sources may be at any position.
 * same_tensors: whether graph holds the tensors of the last bind, each at
 * its position there (their stamps are that bind's). */
static bool stamped_graph_matches(tg_gallocr *g, const struct tg_graph *graph, uint64_t pass, bool *same_tensors) {
    bool same;
    if (!stamp_leafs(g, graph, pass, &same)) return false;
    const uint64_t last_bind_stamp = g->last_bind_pass << STAMP_REF_BITS;
    for (int i = 0; i < graph->n_nodes; i++) {
        struct tg_tensor *t = graph->nodes[i];
        if (!t) return false;
        const int ref = ref_of_pos(graph->n_leafs + i);
        uint64_t old = stamp_of(t);
        if (old >> STAMP_REF_BITS == pass) return false; /* listed twice */
        same &= old == (last_bind_stamp | (uint64_t)ref);
        stamp(t, pass, ref);
        if (!stamped_position_matches(g, t, &g->records[graph->n_leafs + i], true, pass)) return false;
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        if (!stamped_position_matches(g, graph->leafs[j], &g->records[j], false, pass)) return false;
    }
    *same_tensors = same;
    return true;
}

/* ---- the replay cross-check ------------------------------------------------------------------- */

#if TG_CHECKS
/* The general path's check (classification and alloc_plan_matches) on
 * graph; true with why naming the first difference when it refuses.  Run
 * before a replay binds: a bind changes which leafs read as results of the
 * last bind. */
static bool general_check_refuses(tg_gallocr *g, struct tg_graph *graph, char *why, size_t why_size) {
    enum tg_status st = alloc_classify(g, graph);
    if (st != TG_OK) {
        snprintf(why, why_size, "%s", tg_last_error());
        return true;
    }
    return !alloc_plan_matches(g, graph, why, why_size);
}

static void replay_check_failed(const char *replay, const char *why) {
    tg_internal_error(__FILE__, __LINE__, "the allocator's %s replay accepted a graph the general check refuses: %s",
                      replay, why);
}

/* After a replay bound graph (or found it bound): every position the plan
 * gives memory is at the address its record names, every view of a root of
 * the plan's at its root's address plus its offset. */
static void check_bound_as_planned(tg_gallocr *g, const struct tg_graph *graph, const char *replay) {
    for (int pos = 0; pos < graph->n_leafs + graph->n_nodes; pos++) {
        const struct tg_tensor *t = tensor_at(graph, pos);
        const struct record *rec = &g->records[pos];
        if (rec->buffer_id < 0) continue;
        const struct chunk_buffers *cb = &g->buffers[g->owner_of[rec->buffer_id]];
        const uint8_t *want = cb->bases[rec->addr.chunk] + rec->addr.offset;
        if (t->buffer != cb->chunks[rec->addr.chunk] || (const uint8_t *)t->data != want) {
            tg_internal_error(__FILE__, __LINE__, "the allocator's %s replay left '%s' at %p, its plan says %p",
                              replay, t->name, t->data, (const void *)want);
        }
    }
    for (int v = 0; v < g->n_views; v++) {
        const struct tg_tensor *t = tensor_at(graph, g->views[v].pos);
        if (g->views[v].root_ours && t->data != (uint8_t *)t->view_src->data + t->view_offs) {
            tg_internal_error(__FILE__, __LINE__, "the allocator's %s replay left view '%s' away from its root '%s'",
                              replay, t->name, t->view_src->name);
        }
    }
}
#endif

/* ---- alloc_graph's replays ------------------------------------------------------------------- */

enum tg_status alloc_replay(tg_gallocr *g, struct tg_graph *graph) {
    if (!replay_possible(g, graph)) return TG_ERR_NEEDS_RESERVE;
    if (alloc_image_holds(g, graph)) {
#if TG_CHECKS
        char why[256] = "";
        if (general_check_refuses(g, graph, why, sizeof why)) replay_check_failed("unchanged-graph", why);
        check_bound_as_planned(g, graph, "unchanged-graph");
#endif
        g->stats.n_allocs++;
        g->stats.n_allocs_unchanged++;
        return TG_OK;
    }
    uint64_t pass = next_replay_pass();
    bool same_tensors;
    if (!stamped_graph_matches(g, graph, pass, &same_tensors)) return TG_ERR_NEEDS_RESERVE;
#if TG_CHECKS
    char why[256] = "";
    if (general_check_refuses(g, graph, why, sizeof why)) replay_check_failed("stamped", why);
#endif
    enum tg_status st = alloc_bind(g, graph, BIND_MATCHED, pass);
    if (st != TG_OK) return st;
#if TG_CHECKS
    check_bound_as_planned(g, graph, "stamped");
#endif
    g->stats.n_allocs_replayed++;
    alloc_consider_image(g, graph, same_tensors);
    return TG_OK;
}

/* ---- the vouched replay (alloc-vouched.h) ----------------------------------------------------- */

uint64_t tg_gallocr_bind_token(const tg_gallocr *g) { return g ? g->bind_token : 0; }

/* The memory half of the replay check, without stamps, for the positions
 * binding does not check: leafs (external ones stay so; a leaf found in
 * this allocator's memory asks the last bind's node list whether it was a
 * result there), and nodes planned external.  Nodes planned here are
 * checked as they are bound. */
static bool vouched_memory_matches(tg_gallocr *g, const struct tg_graph *graph) {
    for (int j = 0; j < graph->n_leafs; j++) {
        const struct tg_tensor *t = graph->leafs[j];
        if (!t->view_src && !memory_as_planned(g, t, -1, false, g->records[j].sig.external)) return false;
    }
    for (int k = 0; k < g->n_external_nodes; k++) {
        const struct tg_tensor *t = graph->nodes[g->external_nodes[k]];
        if (t->view_src || !memory_as_planned(g, t, -1, true, true)) return false;
    }
    return true;
}

enum tg_status tg_gallocr_alloc_graph_vouched(tg_gallocr *g, struct tg_graph *graph, uint64_t token) {
    /* A plan that refers to a tensor outside the graph is not replayed on
     * the caller's word: what such a tensor brings is checked by stamps. */
    if (!g || !graph || token == 0 || token != g->bind_token || !replay_possible(g, graph) || g->plan_refers_outside) {
        return tg_gallocr_alloc_graph(g, graph);
    }
#if TG_CHECKS
    char why[256] = "";
    const bool refused = general_check_refuses(g, graph, why, sizeof why);
#endif
    if (!vouched_memory_matches(g, graph)) return tg_gallocr_alloc_graph(g, graph);
    enum tg_status st = alloc_bind(g, graph, g->fault == TG_FAULT_TRUST_VOUCH ? BIND_MATCHED : BIND_VOUCHED, 0);
    if (st == TG_ERR_NEEDS_RESERVE) return tg_gallocr_alloc_graph(g, graph); /* a size or view root differs */
    if (st != TG_OK) return st;
#if TG_CHECKS
    if (refused) replay_check_failed("vouched", why);
    check_bound_as_planned(g, graph, "vouched");
#endif
    g->stats.n_allocs_vouched++;
    return tg_graph_note_allocated(graph);
}

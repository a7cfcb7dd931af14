/* Property suite: over thousands of generated graphs, the real plan
 *   - is legal by every oracle checker,
 *   - stays within lower bound <= buffer size <= naive total per address space,
 *   - is deterministic (a second decode of the same seed plans the same offsets),
 *   - never replays a stale plan: after planning a case, binding a copy with one
 *     edge changed (same counts and sizes, llama.cpp #28448) is legal or refused,
 *   - replays: reserve with the worst case then alloc_graph of the same structure
 *     with smaller sizes succeeds without a new plan, never grows a buffer, and
 *     is still legal,
 *   - re-allocation of the graph bound last: once imaged, an unchanged graph
 *     is found as bound (same offsets, still legal), and the same graph with
 *     one edge changed in place is not (it is bound again, legally),
 *   - a graph bound by one allocator and then by another (and back) is planned
 *     again by each, legally,
 *   - views of weights bound before planning (a KV cache's windows) are planned
 *     around and never moved, when planned and when the plan is replayed.
 * TG_PROPS_CASES scales the number of seeds, TG_PROPS_SEED moves the range. */
#include "alloc-vouched.h"
#include "tg-gen.h"
#include "tg-oracle.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int n_failures;

static void report_failure(const struct tg_gen_case *c, const char *what, const struct tg_oracle_report *rep) {
    n_failures++;
    if (n_failures > 3) return; /* the first few tell the story */
    fprintf(stderr, "\n=== property '%s' failed for seed %llu (replay: TG_PROPS_SEED=%llu TG_PROPS_CASES=1)\n", what,
            (unsigned long long)c->seed, (unsigned long long)c->seed);
    if (rep) tg_oracle_report_print(rep, 20);
    char *text = tg_gen_case_to_text(c);
    if (text) fprintf(stderr, "%s", text);
    free(text);
}

/* The oracle's view of a case taken before the allocator binds it, to judge
 * that bind afterwards (the snapshot holds what the bind must not touch). */
struct bind_watch {
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
};

static void watch_begin(struct bind_watch *w, const struct tg_gen_case *k) {
    CHECK_OK(tg_oracle_snapshot_take(k->graph, &w->snap));
    CHECK_OK(tg_oracle_liveness_build(k->graph, &w->snap, k->node_ids, k->leaf_ids, &w->lv));
}

/* When bound, every checker judges k's bind (a violation is reported as
 * property what); then the watch is freed. */
static void watch_end(struct bind_watch *w, struct tg_gen_case *k, bool bound, const char *what) {
    struct tg_oracle_report rep = {0};
    if (bound) {
        CHECK_OK(tg_oracle_check(k->graph, &w->lv, &w->snap, k->bufts, k->n_ids, &rep));
        CHECK(rep.n == 0);
        if (rep.n) report_failure(k, what, &rep);
    }
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&w->lv);
    tg_oracle_snapshot_free(&w->snap);
}

/* The same for a graph bound before by another allocator: only memory in the
 * user's buffers counts as pre-allocated, the other plan's is planned again. */
static void watch_begin_moved(struct bind_watch *w, const struct tg_gen_case *k) {
    CHECK_OK(tg_oracle_snapshot_take_user_memory(k->graph, &w->snap));
    CHECK_OK(tg_oracle_liveness_build(k->graph, &w->snap, k->node_ids, k->leaf_ids, &w->lv));
}

static size_t offset_of(const struct tg_tensor *t) {
    return t->data && t->buffer ? (size_t)((const char *)t->data - (const char *)tg_buffer_get_base(t->buffer)) : SIZE_MAX;
}

/* Whether some view of k sits in a weight, bound before any plan. */
static bool has_bound_view(const struct tg_gen_case *k) {
    for (int u = 0; u < k->graph->n_nodes + k->graph->n_leafs; u++) {
        const struct tg_graph *g = k->graph;
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        if (t->view_src && t->buffer && t->buffer == k->external_buffer) return true;
    }
    return false;
}

/* Same structure: counts, ops, types, flags and source slots (by position). */
static bool same_structure(const struct tg_gen_case *ca, const struct tg_gen_case *cb) {
    const struct tg_graph *a = ca->graph, *b = cb->graph;
    if (a->n_nodes != b->n_nodes || a->n_leafs != b->n_leafs) return false;
    for (int i = 0; i < a->n_nodes; i++) {
        const struct tg_tensor *x = a->nodes[i], *y = b->nodes[i];
        if (x->op != y->op || x->type != y->type || x->flags != y->flags) return false;
        /* view offsets and which sources share the node's layout (in-place
         * eligibility) are part of the structure a plan depends on */
        if ((x->view_src == NULL) != (y->view_src == NULL) || x->view_offs != y->view_offs) return false;
        for (int k = 0; k < TG_MAX_SRC; k++) {
            if ((x->src[k] == NULL) != (y->src[k] == NULL)) return false;
            if (x->src[k] && tg_are_same_layout(x, x->src[k]) != tg_are_same_layout(y, y->src[k])) return false;
            if (x->src[k] && (strcmp(x->src[k]->name, y->src[k]->name) != 0 || tg_nbytes(y->src[k]) > tg_nbytes(x->src[k])))
                return false;
        }
        if (tg_nbytes(y) > tg_nbytes(x) || strcmp(x->name, y->name) != 0) return false;
    }
    for (int j = 0; j < a->n_leafs; j++) {
        if (tg_nbytes(b->leafs[j]) > tg_nbytes(a->leafs[j]) || a->leafs[j]->flags != b->leafs[j]->flags ||
            (a->leafs[j]->buffer == ca->external_buffer) != (b->leafs[j]->buffer == cb->external_buffer))
            return false;
    }
    return true;
}

/* ---- what real runtimes add (fuzz/gen/gen_runtime.c), with the scheduler's vouched replay --- */

struct vouch {
    uint64_t token;
    long long *n_vouched; /* binds the vouched replay made itself (not handed to the general path) */
};

static enum tg_status vouched_rebind(tg_gallocr *ga, struct tg_graph *g, void *user) {
    struct vouch *v = user;
    struct tg_gallocr_stats before, after;
    tg_gallocr_get_stats(ga, &before);
    enum tg_status st = tg_gallocr_alloc_graph_vouched(ga, g, v->token);
    tg_gallocr_get_stats(ga, &after);
    *v->n_vouched += after.n_allocs_vouched > before.n_allocs_vouched;
    return st;
}

static void note_token(tg_gallocr *ga, void *user) { ((struct vouch *)user)->token = tg_gallocr_bind_token(ga); }

static void runtime_features(uint64_t seed, const struct tg_gen_options *opts, struct tg_gen_runtime_stats *n,
                             long long *n_vouched) {
    struct tg_gen_case *k = NULL;
    if (tg_gen_case_from_seed(seed, opts, &k) != TG_OK || !k) return;
    struct vouch v = {0, n_vouched};
    const struct tg_gen_runtime_hooks rh = {vouched_rebind, note_token, &v};
    char why[400];
    bool ok = tg_gen_runtime_check(k, seed, &rh, n, why, sizeof why);
    CHECK_MSG(ok, "seed %llu: %s", (unsigned long long)seed, why);
    if (!ok) report_failure(k, "runtime features", NULL);
    tg_gen_case_free(k);
}

int main(void) {
    const char *env_cases = getenv("TG_PROPS_CASES");
    const char *env_seed = getenv("TG_PROPS_SEED");
    uint64_t n_cases = env_cases ? strtoull(env_cases, NULL, 10) : 3000;
    uint64_t first_seed = env_seed ? strtoull(env_seed, NULL, 10) : 1;
    struct tg_gen_options opts = tg_gen_default_options();
    struct tg_gen_options bound_opts = opts;
    bound_opts.bound_views = true;
    struct tg_gen_options small_opts = opts;
    small_opts.max_tensor_bytes = opts.max_tensor_bytes / 8;

    long long n_tensors = 0, n_replays = 0, n_replays_unplanned = 0, n_replay_skipped = 0, n_rewired = 0,
              n_unchanged = 0, n_seen = 0, n_moved = 0, n_bound_view_cases = 0;
    struct tg_gen_runtime_stats features = {0};
    long long n_vouched = 0;
    clock_t t0 = clock();
    for (uint64_t seed = first_seed; seed < first_seed + n_cases; seed++) {
        struct tg_gen_case *c = NULL, *again = NULL, *small = NULL;
        CHECK_OK(tg_gen_case_from_seed(seed, &opts, &c));
        if (!c) break;
        struct tg_gen_plan_result res;
        tg_gallocr *galloc = NULL;
        CHECK_OK(tg_gen_plan_and_check(c, TG_FAULT_NONE, &galloc, &res));
        n_tensors += res.n_tensors;
        CHECK_MSG(res.plan_status == TG_OK, "seed %llu: planning failed: %s", (unsigned long long)seed, tg_last_error());
        if (res.plan_status != TG_OK) report_failure(c, "plans", NULL);
        CHECK(res.report.n == 0);
        if (res.report.n) report_failure(c, "no checker violation", &res.report);

        /* lower bound <= buffer size <= naive total, per address space */
        for (int id = 0; id < c->n_ids && res.plan_status == TG_OK; id++) {
            bool owner = true;
            for (int k = 0; k < id; k++) owner = owner && c->bufts[k] != c->bufts[id];
            if (!owner) continue;
            bool ok = res.lower_bound[id] <= res.buffer_size[id] && res.buffer_size[id] <= res.naive_total[id];
            CHECK_MSG(ok, "seed %llu id %d: lower bound %zu, buffer %zu, naive %zu", (unsigned long long)seed, id,
                      res.lower_bound[id], res.buffer_size[id], res.naive_total[id]);
            if (!ok) report_failure(c, "lower bound <= peak <= naive total", NULL);
        }

        /* TG_PLAN_BEST (the default): legal and never worse than TG_PLAN_GGML */
        if (res.plan_status == TG_OK) {
            struct tg_gen_case *cb = NULL, *cg = NULL;
            struct tg_gen_plan_result rb, rg;
            CHECK_OK(tg_gen_case_from_seed(seed, &opts, &cb));
            CHECK_OK(tg_gen_case_from_seed(seed, &opts, &cg));
            if (cb && cg && tg_gen_plan_and_check_policy(cb, TG_FAULT_NONE, TG_PLAN_BEST, NULL, &rb) == TG_OK) {
                if (tg_gen_plan_and_check_policy(cg, TG_FAULT_NONE, TG_PLAN_GGML, NULL, &rg) == TG_OK) {
                    CHECK(rb.plan_status == TG_OK && rb.report.n == 0);
                    if (rb.report.n) report_failure(cb, "TG_PLAN_BEST: no checker violation", &rb.report);
                    for (int id = 0; id < c->n_ids; id++) {
                        CHECK_MSG(rb.buffer_size[id] <= rg.buffer_size[id] && rb.lower_bound[id] <= rb.buffer_size[id],
                                  "seed %llu id %d: best %zu, ggml %zu, lower bound %zu", (unsigned long long)seed, id,
                                  rb.buffer_size[id], rg.buffer_size[id], rb.lower_bound[id]);
                    }
                    tg_gen_plan_result_free(&rg);
                }
                tg_gen_plan_result_free(&rb);
            }
            tg_gen_case_free(cb);
            tg_gen_case_free(cg);
        }

        /* determinism: a fresh decode of the same seed gets the same offsets */
        struct tg_gen_plan_result res2;
        tg_gallocr *galloc2 = NULL;
        CHECK_OK(tg_gen_case_from_seed(seed, &opts, &again));
        if (again && tg_gen_plan_and_check(again, TG_FAULT_NONE, &galloc2, &res2) == TG_OK) {
            bool same = res2.plan_status == res.plan_status;
            for (int i = 0; same && i < c->graph->n_nodes; i++)
                same = offset_of(c->graph->nodes[i]) == offset_of(again->graph->nodes[i]);
            for (int j = 0; same && j < c->graph->n_leafs; j++)
                same = offset_of(c->graph->leafs[j]) == offset_of(again->graph->leafs[j]);
            for (int id = 0; same && id < c->n_ids; id++) same = res.buffer_size[id] == res2.buffer_size[id];
            CHECK_MSG(same, "seed %llu: two plans of the same case differ", (unsigned long long)seed);
            if (!same) report_failure(c, "deterministic", NULL);
            tg_gen_plan_result_free(&res2);
        }
        tg_gallocr_free(galloc2);

        /* same counts and sizes, one edge changed: re-plan (one buffer) or refuse, never stale */
        struct tg_gen_case *rewired = NULL;
        if (galloc && res.plan_status == TG_OK && tg_gen_case_from_seed(seed, &opts, &rewired) == TG_OK &&
            tg_gen_case_rewire_edge(rewired, seed)) {
            n_rewired++;
            struct bind_watch watch;
            watch_begin(&watch, rewired);
            enum tg_status st = tg_gallocr_alloc_graph(galloc, rewired->graph);
            CHECK_MSG(st == TG_OK || (st == TG_ERR_NEEDS_RESERVE && c->n_ids > 1),
                      "seed %llu: alloc of the rewired graph: %s", (unsigned long long)seed, tg_last_error());
            watch_end(&watch, rewired, st == TG_OK, "changed edge: no stale replay");
            /* the allocator now holds the rewired plan: reserve the original again */
            CHECK_OK(tg_gallocr_reserve_n(galloc, c->graph, c->node_ids, c->leaf_ids));
        }
        size_t reserved_size[TG_GEN_MAX_IDS] = {0}; /* baseline for "never grows" */
        for (int id = 0; galloc && id < c->n_ids; id++) reserved_size[id] = tg_gallocr_get_buffer_size(galloc, id);
        tg_gen_case_free(rewired);

        /* reserve(worst case) then alloc of the same structure with smaller sizes */
        if (galloc && res.plan_status == TG_OK && tg_gen_case_from_seed(seed, &small_opts, &small) == TG_OK) {
            if (!same_structure(c, small)) {
                n_replay_skipped++;
            } else {
                n_replays++;
                struct bind_watch watch;
                watch_begin(&watch, small);
                struct tg_gallocr_stats before, after;
                tg_gallocr_get_stats(galloc, &before);
                enum tg_status st = tg_gallocr_alloc_graph(galloc, small->graph);
                tg_gallocr_get_stats(galloc, &after);
                /* the same structure, no larger: the reserved plan is replayed, not made again */
                bool replayed = st == TG_OK && after.n_plans == before.n_plans;
                n_replays_unplanned += replayed;
                CHECK_MSG(replayed, "seed %llu: the smaller graph was planned again", (unsigned long long)seed);
                CHECK_MSG(st == TG_OK, "seed %llu: alloc of the smaller graph after reserve: %s",
                          (unsigned long long)seed, tg_last_error());
                bool grew = false;
                for (int id = 0; id < c->n_ids; id++) grew = grew || tg_gallocr_get_buffer_size(galloc, id) > reserved_size[id];
                CHECK_MSG(!grew, "seed %llu: a buffer grew for a smaller graph", (unsigned long long)seed);
                watch_end(&watch, small, st == TG_OK, "smaller graph replays legally");
                if (st != TG_OK || grew) report_failure(c, "reserve then smaller alloc never grows", NULL);
            }
        }
        tg_gen_case_free(small);

        /* the graph bound last, unchanged, then with an edge changed in place */
        if (galloc && res.plan_status == TG_OK &&
            tg_gallocr_reserve_n(galloc, c->graph, c->node_ids, c->leaf_ids) == TG_OK) {
            struct tg_gallocr_stats before, after;
            int n_slots = c->graph->n_nodes + c->graph->n_leafs;
            size_t *first = malloc((size_t)n_slots * sizeof *first + 1);
            bool bound = first != NULL;
            for (int k = 0; k < 3 && bound; k++) bound = tg_gallocr_alloc_graph(galloc, c->graph) == TG_OK;
            CHECK_MSG(bound, "seed %llu: re-allocation of the same graph: %s", (unsigned long long)seed, tg_last_error());
            for (int u = 0; bound && u < n_slots; u++) {
                first[u] = offset_of(u < c->graph->n_nodes ? c->graph->nodes[u] : c->graph->leafs[u - c->graph->n_nodes]);
            }
            tg_gallocr_get_stats(galloc, &before);
            if (bound && tg_gallocr_alloc_graph(galloc, c->graph) == TG_OK) {
                tg_gallocr_get_stats(galloc, &after);
                bool unchanged = after.n_allocs_unchanged == before.n_allocs_unchanged + 1;
                n_unchanged += unchanged;
                bool same = true;
                for (int u = 0; u < n_slots; u++) {
                    same = same && first[u] == offset_of(u < c->graph->n_nodes ? c->graph->nodes[u]
                                                                                : c->graph->leafs[u - c->graph->n_nodes]);
                }
                CHECK_MSG(same, "seed %llu: an unchanged graph moved on re-allocation", (unsigned long long)seed);
                if (!same) report_failure(c, "unchanged graph stays where it was", NULL);
                /* the same edge change on c (imaged) and on a fresh decode of the seed bound by an
                 * allocator that never imaged it: the same outcome, and legal */
                struct tg_gen_case *fresh = NULL;
                tg_gallocr *ref = NULL;
                if (tg_gen_case_from_seed(seed, &opts, &fresh) == TG_OK &&
                    (ref = tg_gallocr_new_n(fresh->bufts, fresh->n_ids)) != NULL &&
                    tg_gallocr_reserve_n(ref, fresh->graph, fresh->node_ids, fresh->leaf_ids) == TG_OK &&
                    tg_gen_case_rewire_edge(c, seed) && tg_gen_case_rewire_edge(fresh, seed)) {
                    struct bind_watch watch;
                    watch_begin(&watch, fresh);
                    tg_gallocr_get_stats(galloc, &before);
                    enum tg_status st = tg_gallocr_alloc_graph(galloc, c->graph);
                    tg_gallocr_get_stats(galloc, &after);
                    enum tg_status st_ref = tg_gallocr_alloc_graph(ref, fresh->graph);
                    CHECK_MSG(after.n_allocs_unchanged == before.n_allocs_unchanged,
                              "seed %llu: an edge changed in place went unseen", (unsigned long long)seed);
                    bool same_outcome = st == st_ref;
                    for (int u = 0; same_outcome && st == TG_OK && u < n_slots; u++) {
                        bool node = u < c->graph->n_nodes;
                        int v = node ? u : u - c->graph->n_nodes;
                        same_outcome = offset_of(node ? c->graph->nodes[v] : c->graph->leafs[v]) ==
                                       offset_of(node ? fresh->graph->nodes[v] : fresh->graph->leafs[v]);
                    }
                    CHECK_MSG(same_outcome, "seed %llu: an edge changed in place: %s, a fresh copy: %s (or other places)",
                              (unsigned long long)seed, tg_status_name(st), tg_status_name(st_ref));
                    if (!same_outcome) report_failure(c, "edge changed in place: bound as a fresh copy is", NULL);
                    n_seen += st_ref == TG_OK;
                    watch_end(&watch, fresh, st_ref == TG_OK, "edge changed: bound again, legally");
                }
                tg_gallocr_free(ref);
                tg_gen_case_free(fresh);
            }
            free(first);
        }

        /* the graph moves to a second allocator while bound by the first (two
         * schedulers taking turns with one graph), then back: each plans every
         * tensor the other bound again, legally, and leaves the weights */
        if (galloc && res.plan_status == TG_OK) {
            tg_gallocr *other = tg_gallocr_new_n(c->bufts, c->n_ids);
            CHECK(other != NULL);
            for (int turn = 0; other && turn < 2; turn++) {
                tg_gallocr *to = turn == 0 ? other : galloc;
                struct bind_watch watch;
                watch_begin_moved(&watch, c);
                enum tg_status st = turn == 0 ? tg_gallocr_reserve_n(to, c->graph, c->node_ids, c->leaf_ids) : TG_OK;
                if (st == TG_OK) st = tg_gallocr_alloc_graph(to, c->graph);
                /* back to the first: its plan may be of the graph before the edge change above */
                if (st == TG_ERR_NEEDS_RESERVE && turn == 1) {
                    st = tg_gallocr_reserve_n(to, c->graph, c->node_ids, c->leaf_ids);
                    if (st == TG_OK) st = tg_gallocr_alloc_graph(to, c->graph);
                }
                CHECK_MSG(st == TG_OK, "seed %llu: the graph moved to allocator %d: %s", (unsigned long long)seed,
                          turn == 0 ? 2 : 1, tg_last_error());
                n_moved += st == TG_OK;
                watch_end(&watch, c, st == TG_OK, turn == 0 ? "moved to a second allocator" : "moved back");
            }
            tg_gallocr_free(other);
        }
        /* views of weights bound before planning (ggml_view_* of an allocated KV
         * cache): planned around, never moved; and the plan replayed twice */
        struct tg_gen_case *bv = NULL;
        if (tg_gen_case_from_seed(seed, &bound_opts, &bv) == TG_OK && has_bound_view(bv)) {
            n_bound_view_cases++;
            struct tg_gen_plan_result rv;
            tg_gallocr *gv = NULL;
            CHECK_OK(tg_gen_plan_and_check(bv, TG_FAULT_NONE, &gv, &rv));
            CHECK_MSG(rv.plan_status == TG_OK, "seed %llu, bound views: planning failed: %s", (unsigned long long)seed,
                      tg_last_error());
            CHECK(rv.report.n == 0);
            if (rv.report.n) report_failure(bv, "bound views: no checker violation", &rv.report);
            for (int k = 0; gv && rv.plan_status == TG_OK && k < 2; k++) {
                struct bind_watch watch;
                watch_begin_moved(&watch, bv);
                enum tg_status st = tg_gallocr_alloc_graph(gv, bv->graph);
                CHECK_MSG(st == TG_OK, "seed %llu, bound views: bind %d again: %s", (unsigned long long)seed, k + 2,
                          tg_last_error());
                watch_end(&watch, bv, st == TG_OK, "bound views: bound again");
            }
            tg_gen_plan_result_free(&rv);
            tg_gallocr_free(gv);
        }
        tg_gen_case_free(bv);
        runtime_features(seed, &bound_opts, &features, &n_vouched);
        tg_gen_plan_result_free(&res);
        tg_gallocr_free(galloc);
        tg_gen_case_free(again);
        tg_gen_case_free(c);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("prop_plan: %llu graphs (seeds %llu..%llu), %lld tensors checked, %lld smaller-graph allocations "
           "(%lld replayed without a new plan; %lld skipped: structure changed with size), %lld rewired-edge "
           "rebinds, %lld graphs found unchanged on re-allocation, %lld in-place edge changes bound again, "
           "%lld binds of a graph another allocator had bound, %lld graphs with views of weights bound before "
           "planning, %.1f graphs/s\n",
           (unsigned long long)n_cases, (unsigned long long)first_seed, (unsigned long long)(first_seed + n_cases - 1),
           n_tensors, n_replays, n_replays_unplanned, n_replay_skipped, n_rewired, n_unchanged, n_seen, n_moved, n_bound_view_cases,
           secs > 0 ? (double)n_cases / secs : 0.0);
    printf("prop_plan: %lld graphs with logging buffer hooks (%lld binds judged), %lld with a source outside the "
           "graph (%lld refused without memory, %lld binds after it moved), %lld binds vouched for (%lld by the vouched "
           "replay itself), %lld binds after views of weights moved, %lld after the weights moved to another "
           "buffer\n", features.cases, features.hooked_binds, features.outside, features.refused,
           features.outside_moved, features.rebinds, n_vouched, features.windows_moved, features.weights_moved);
    /* every path this property claims to judge must have run, or it proves nothing */
    CHECK_MSG(n_cases < 20 || (features.outside > 0 && n_vouched > 0 && features.windows_moved > 0 &&
                               features.weights_moved > 0),
              "no source outside the graph (%lld), vouched bind (%lld) or moved window (%lld)", features.outside,
              n_vouched, features.windows_moved);
    CHECK_MSG(n_cases < 20 || (n_unchanged > 0 && n_seen > 0), "no graph was found unchanged (%lld) or changed (%lld)",
              n_unchanged, n_seen);
    CHECK_MSG(n_cases < 20 || n_bound_view_cases > 0, "no graph had a view of a weight bound before planning");
    CHECK_MSG(n_cases < 20 || (n_replays_unplanned > 0 && n_rewired > 0),
              "no smaller graph replayed its reserved plan (%lld of %lld), or no edge was rewired (%lld)",
              n_replays_unplanned, n_replays, n_rewired);
    return tg_test_finish();
}

/* The graph allocator (docs/allocator.md): its lifecycle, its compute
 * buffers (which only grow; outgrown ones are retired so tensors left in
 * them read as stale), and the public entry points, which tie the other
 * files together (alloc-impl.h lists them):
 *   reserve     plan the graph (alloc_plan.c), record the plan
 *               (alloc_record.c), grow the buffers;
 *   alloc_graph a replay when one applies (alloc_replay.c, alloc_image.c),
 *               else the general check, a re-plan when it fails (one buffer
 *               id), and the bind (alloc_record.c). */
#include "alloc-impl.h"
#include "tg-checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- faults (checker self-tests) ----------------------------------------------------------- */

static const char *const fault_names[TG_FAULT_COUNT] = {
    "none", "skip-consumer-count", "ignore-output-flag", "inplace-ignore-layout",
    "free-view-root", "merge-off-by-one", "ignore-alignment", "stale-replay", "trust-vouch",
};

const char *tg_fault_name(enum tg_fault f) { return (unsigned)f < TG_FAULT_COUNT ? fault_names[f] : "?"; }

enum tg_fault tg_fault_from_name(const char *name) {
    for (int f = 0; name && f < TG_FAULT_COUNT; f++) {
        if (strcmp(fault_names[f], name) == 0) return (enum tg_fault)f;
    }
    return TG_FAULT_COUNT;
}

void tg_gallocr_set_fault(tg_gallocr *galloc, enum tg_fault fault) {
    if (!galloc || (unsigned)fault >= TG_FAULT_COUNT) return;
    tg_fault_announce("graph allocator", (int)fault, fault_names[fault]);
    galloc->fault = fault;
    galloc->plan_bindable = false; /* plans made under another rule set must not be replayed */
    alloc_forget_replays(galloc);
}

/* ---- creation ---------------------------------------------------------------------------------- */

tg_gallocr *tg_gallocr_new_n(tg_buffer_type **bufts, int n_bufs) {
    if (!bufts || n_bufs <= 0) {
        tg_fail(TG_ERR_INVALID, "tg_gallocr_new_n needs at least one buffer type");
        return NULL;
    }
    for (int i = 0; i < n_bufs; i++) {
        if (!bufts[i]) {
            tg_fail(TG_ERR_INVALID, "tg_gallocr_new_n: buffer type %d is NULL", i);
            return NULL;
        }
    }
    tg_gallocr *g = calloc(1, sizeof *g);
    if (!g) goto oom;
    g->n_bufs = n_bufs;
    g->requested_policy = TG_PLAN_BEST;
    g->bufts = calloc((size_t)n_bufs, sizeof *g->bufts);
    g->owner_of = calloc((size_t)n_bufs, sizeof *g->owner_of);
    g->planners = calloc((size_t)n_bufs, sizeof *g->planners);
    g->buffers = calloc((size_t)n_bufs, sizeof *g->buffers);
    g->live_bytes = calloc((size_t)n_bufs, sizeof *g->live_bytes);
    g->lower_bound = calloc((size_t)n_bufs, sizeof *g->lower_bound);
    g->n_tensors = calloc((size_t)n_bufs, sizeof *g->n_tensors);
    if (!g->bufts || !g->owner_of || !g->planners || !g->buffers || !g->live_bytes || !g->lower_bound ||
        !g->n_tensors) {
        goto oom;
    }
    for (int i = 0; i < n_bufs; i++) {
        g->bufts[i] = bufts[i];
        g->owner_of[i] = i;
        for (int j = 0; j < i; j++) {
            if (bufts[j] == bufts[i]) {
                g->owner_of[i] = j;
                break;
            }
        }
        if (g->owner_of[i] == i) {
            tg_planner_init(&g->planners[i], tg_buft_get_alignment(bufts[i]), tg_buft_get_max_size(bufts[i]));
        }
    }
    alloc_forget_replays(g);
    return g;
oom:
    tg_gallocr_free(g);
    tg_fail(TG_ERR_ALLOC, "out of host memory creating a graph allocator");
    return NULL;
}

tg_gallocr *tg_gallocr_new(tg_buffer_type *buft) { return tg_gallocr_new_n(&buft, 1); }

void tg_gallocr_free(tg_gallocr *g) {
    if (!g) return;
    for (int i = 0; g->owner_of && i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        if (g->planners) tg_planner_release(&g->planners[i]);
        if (g->buffers) {
            for (int c = 0; c < g->buffers[i].n_chunks; c++) {
                alloc_unpoison_chunk(g->buffers[i].chunks[c]);
                tg_buffer_free(g->buffers[i].chunks[c]);
            }
            free(g->buffers[i].chunks);
            free(g->buffers[i].bases);
        }
    }
    for (int i = 0; i < g->n_retired; i++) free(g->retired[i]);
    free(g->retired);
    /* the planning pass */
    tg_hash_free(&g->hash);
    free(g->track_of_bucket);
    free(g->tracked);
    free(g->infos);
    free(g->leaf_track);
    free(g->node_track);
    free(g->src_track);
    free(g->n_src);
    free(g->walk);
    free(g->blocks);
    free(g->block_owner);
    /* the recorded plan and the last bind */
    free(g->records);
    free(g->views);
    free(g->external_nodes);
    free(g->binds);
    free(g->bind_fits);
    free(g->last_bound);
    free(g->next_bound);
    tg_hash_free(&g->last_bound_set);
    /* the image */
    free(g->image);
    free(g->image_chunks);
    free(g->bufts);
    free(g->owner_of);
    free(g->planners);
    free(g->buffers);
    free(g->live_bytes);
    free(g->lower_bound);
    free(g->n_tensors);
    free(g);
}

void tg_gallocr_set_policy(tg_gallocr *galloc, enum tg_plan_policy policy) {
    if (galloc) galloc->requested_policy = policy;
}

enum tg_plan_policy tg_gallocr_get_policy(const tg_gallocr *galloc) {
    return galloc ? galloc->requested_policy : TG_PLAN_BEST;
}

void alloc_forget_replays(tg_gallocr *g) {
    g->binds_stale = true;
    g->bind_token = 0;
    g->last_bind_pass = 0;
    g->image_token = 0;
    g->image_misses = 0;
    g->same_tensor_binds = 0;
    g->known_ours = NULL;
    g->known_foreign = NULL;
}

/* ---- compute buffers ------------------------------------------------------------------------ */

bool alloc_owns_buffer(const tg_gallocr *g, const tg_buffer *buf) {
    if (!buf) return false;
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        for (int c = 0; c < g->buffers[i].n_chunks; c++) {
            if (g->buffers[i].chunks[c] == buf) return true;
        }
    }
    for (int i = 0; i < g->n_retired; i++) {
        if (g->retired[i] == buf) return true;
    }
    return false;
}

bool tg_gallocr_owns_buffer(const tg_gallocr *galloc, const tg_buffer *buf) {
    return galloc && alloc_owns_buffer(galloc, buf);
}

/* An outgrown buffer gives its memory back but keeps its object (with a new
 * generation), so tensors still pointing at it report TG_ERR_STALE rather
 * than touching freed memory. */
static bool retire_buffer(tg_gallocr *g, tg_buffer *buf) {
    alloc_unpoison_chunk(buf);
    if (g->n_retired == g->cap_retired) {
        int cap = g->cap_retired ? g->cap_retired * 2 : 8;
        tg_buffer **grown = realloc(g->retired, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        g->retired = grown;
        g->cap_retired = cap;
    }
    if (buf->iface.free_buffer) buf->iface.free_buffer(buf);
    memset(&buf->iface, 0, sizeof buf->iface);
    buf->context = NULL;
    buf->size = 0;
    buf->generation++;
    g->retired[g->n_retired++] = buf;
    return true;
}

/* Grows the chunk buffers of owner id i to the plan (never shrinks them). */
static enum tg_status grow_buffers(tg_gallocr *g, int i) {
    struct tg_planner *p = &g->planners[i];
    struct chunk_buffers *cb = &g->buffers[i];
    if (p->n_chunks > cb->n_chunks) {
        tg_buffer **grown = realloc(cb->chunks, (size_t)p->n_chunks * sizeof *grown);
        if (!grown) return tg_fail(TG_ERR_ALLOC, "out of host memory for the compute buffer list");
        for (int c = cb->n_chunks; c < p->n_chunks; c++) grown[c] = NULL;
        cb->chunks = grown;
        uint8_t **bases = realloc(cb->bases, (size_t)p->n_chunks * sizeof *bases);
        if (!bases) return tg_fail(TG_ERR_ALLOC, "out of host memory for the compute buffer list");
        cb->bases = bases;
    }
    for (int c = 0; c < p->n_chunks; c++) {
        size_t need = tg_planner_chunk_size(p, c);
        tg_buffer *old = c < cb->n_chunks ? cb->chunks[c] : NULL;
        if (old && tg_buffer_get_size(old) >= need) continue;
        tg_buffer *fresh = tg_buft_alloc_buffer(g->bufts[i], need);
        if (!fresh) {
            char cause[256]; /* the message is rewritten below: keep the backend's reason */
            snprintf(cause, sizeof cause, "%s", tg_last_error());
            return tg_fail(TG_ERR_ALLOC, "allocating compute buffer %d (chunk %d, %zu bytes) of type '%s' failed: %s",
                           i, c, need, tg_buft_name(g->bufts[i]), cause);
        }
        tg_buffer_set_usage(fresh, TG_BUFFER_USAGE_COMPUTE);
        alloc_forget_replays(g); /* fresh may sit where a foreign buffer was; binds name the old chunks */
        if (old && !retire_buffer(g, old)) {
            tg_buffer_free(fresh);
            return tg_fail(TG_ERR_ALLOC, "out of host memory for the compute buffer list");
        }
        cb->chunks[c] = fresh;
        cb->bases[c] = tg_buffer_get_base(fresh);
        if (c >= cb->n_chunks) cb->n_chunks = c + 1;
    }
    return TG_OK;
}

size_t tg_gallocr_get_buffer_size(const tg_gallocr *g, int buffer_id) {
    if (!g || buffer_id < 0 || buffer_id >= g->n_bufs || g->owner_of[buffer_id] != buffer_id) return 0;
    size_t total = 0;
    const struct chunk_buffers *cb = &g->buffers[buffer_id];
    for (int c = 0; c < cb->n_chunks; c++) total += tg_buffer_get_size(cb->chunks[c]);
    return total;
}

/* ---- entry points ------------------------------------------------------------------------------ */

static enum tg_status reserve_impl(tg_gallocr *g, struct tg_graph *graph, const int *node_ids, const int *leaf_ids,
                                   bool allocate, size_t *sizes) {
    if (!g || !graph) return tg_fail(TG_ERR_INVALID, "reserve needs an allocator and a graph");
    TG_ASSERT(graph->n_nodes >= 0 && graph->n_leafs >= 0 && graph->n_nodes <= graph->size && graph->n_leafs <= graph->size,
              "graph lists of %d nodes and %d leafs in a graph of size %d", graph->n_nodes, graph->n_leafs, graph->size);
    g->have_plan = false;
    g->plan_bindable = false;
    alloc_forget_replays(g); /* the records change: nothing derived from them holds */
    g->stats.n_plans++;
    enum tg_status st = alloc_classify(g, graph);
    if (st == TG_OK) st = alloc_plan_graph(g, graph, node_ids, leaf_ids);
    if (st == TG_OK) st = alloc_record_plan(g, graph);
    if (st != TG_OK) return st;
    g->have_plan = true;
    g->size_only = !allocate;
    for (int i = 0; i < g->n_bufs; i++) {
        bool owner = g->owner_of[i] == i;
        if (sizes) sizes[i] = owner ? tg_planner_total_size(&g->planners[i]) : 0;
        if (allocate && owner && (st = grow_buffers(g, i)) != TG_OK) return st;
        TG_ASSERT(!allocate || !owner || tg_gallocr_get_buffer_size(g, i) >= tg_planner_total_size(&g->planners[i]),
                  "buffer id %d: %zu bytes of buffers for a plan of %zu", i, tg_gallocr_get_buffer_size(g, i),
                  tg_planner_total_size(&g->planners[i]));
    }
    g->plan_bindable = allocate;
    return TG_OK;
}

enum tg_status tg_gallocr_reserve(tg_gallocr *galloc, struct tg_graph *graph) {
    tg_clear_error(); /* a success leaves no older failure behind */
    return reserve_impl(galloc, graph, NULL, NULL, true, NULL);
}

enum tg_status tg_gallocr_reserve_n(tg_gallocr *galloc, struct tg_graph *graph, const int *node_buffer_ids,
                                    const int *leaf_buffer_ids) {
    tg_clear_error(); /* a success leaves no older failure behind */
    return reserve_impl(galloc, graph, node_buffer_ids, leaf_buffer_ids, true, NULL);
}

enum tg_status tg_gallocr_reserve_n_size(tg_gallocr *galloc, struct tg_graph *graph, const int *node_buffer_ids,
                                         const int *leaf_buffer_ids, size_t *sizes) {
    tg_clear_error(); /* a success leaves no older failure behind */
    return reserve_impl(galloc, graph, node_buffer_ids, leaf_buffer_ids, false, sizes);
}

static enum tg_status alloc_graph(tg_gallocr *g, struct tg_graph *graph);

enum tg_status tg_gallocr_alloc_graph(tg_gallocr *g, struct tg_graph *graph) {
    tg_clear_error(); /* a success leaves no older failure behind */
    if (!g || !graph) return tg_fail(TG_ERR_INVALID, "alloc_graph needs an allocator and a graph");
    enum tg_status st = alloc_graph(g, graph);
    return st == TG_OK ? tg_graph_note_allocated(graph) : st;
}

static enum tg_status alloc_graph(tg_gallocr *g, struct tg_graph *graph) {
    if (g->have_plan && g->size_only) {
        return tg_fail(TG_ERR_NEEDS_RESERVE, "the last plan was made by tg_gallocr_reserve_n_size, which allocates "
                       "no compute buffers: call tg_gallocr_reserve (or _reserve_n) before tg_gallocr_alloc_graph");
    }
    enum tg_status st = alloc_replay(g, graph);
    if (st != TG_ERR_NEEDS_RESERVE) return st;
    st = alloc_classify(g, graph);
    if (st != TG_OK) return st;
    char why[256] = "no plan has been made yet";
    if (!g->have_plan || !g->plan_bindable || !alloc_plan_matches(g, graph, why, sizeof why)) {
        if (g->have_plan && !g->plan_bindable) snprintf(why, sizeof why, "the last reserve failed to allocate its buffers");
        if (g->n_bufs > 1) {
            return tg_fail(TG_ERR_NEEDS_RESERVE, "graph allocator with %d buffers cannot re-plan by itself (%s): call "
                           "tg_gallocr_reserve_n with the buffer ids first", g->n_bufs, why);
        }
        st = reserve_impl(g, graph, NULL, NULL, true, NULL);
        if (st != TG_OK) return st;
    }
    st = alloc_bind(g, graph, BIND_CLASSIFIED, 0);
    g->stats.n_allocs_general += st == TG_OK;
    TG_ASSERT(st != TG_OK || g->bind_token != 0, "a successful bind names itself");
    return st;
}

void tg_gallocr_get_stats(const tg_gallocr *g, struct tg_gallocr_stats *stats) {
    if (!stats) return;
    *stats = g ? g->stats : (struct tg_gallocr_stats){0};
}

enum tg_status tg_gallocr_get_report(const tg_gallocr *g, int buffer_id, struct tg_plan_report *report) {
    if (!g || !report || buffer_id < 0 || buffer_id >= g->n_bufs) {
        return tg_fail(TG_ERR_INVALID, "get_report: no allocator, no report, or buffer id %d out of range", buffer_id);
    }
    if (!g->have_plan) return tg_fail(TG_ERR_INVALID, "get_report: no plan yet (call tg_gallocr_reserve first)");
    bool owner = g->owner_of[buffer_id] == buffer_id;
    report->peak = owner ? tg_planner_total_size(&g->planners[buffer_id]) : 0;
    report->lower_bound = owner ? g->lower_bound[buffer_id] : 0;
    report->n_chunks = owner ? g->planners[buffer_id].n_chunks : 0;
    report->n_tensors = g->n_tensors[buffer_id];
    return TG_OK;
}

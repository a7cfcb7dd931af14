/* The allocator differential (see tg-ggml.h): a case planned by ggml_gallocr
 * and by tgsched's allocator with TG_PLAN_GGML; ggml's plan judged by the
 * oracle; both compared chunk for chunk and offset for offset; every
 * difference classified. */
#include "tg-ggml.h"

#include "ggml-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tg_ggml_alloc_class_name(enum tg_ggml_alloc_class c) {
    static const char *const names[TG_GGML_CLASS_COUNT] = {
        "same", "in-place across buffer ids", "raw output view", "input in place while counting",
        "best fit across chunks", "ggml's chunk cap", "ggml abort: free blocks", "ggml abort: in-place bigger", "op-none view read",
        "stale plan replayed", "replay of another graph's plan", "unread leaf grew", "ggml abort: unlisted fill its hash",
        "UNEXPLAINED"};
    return c < TG_GGML_CLASS_COUNT ? names[c] : "?";
}

/* A leaf the plan would place that its context could own instead: contiguous
 * (a context packs it), not an input, and small (a bias, a norm's weight). */
static bool could_be_context_owned(const struct tg_tensor *t) {
    return !t->view_src && !t->buffer && !t->data && !(t->flags & TG_FLAG_INPUT) && tg_is_contiguous(t) &&
           tg_nbytes(t) <= 16384;
}

/* One leaf in three of those, by position, gets host memory of the case's;
 * a view of one gets its address, as ggml_view_* sets it on a view of a
 * tensor with data. */
static enum tg_status give_context_memory(struct tg_gen_case *c) {
    struct tg_graph *g = c->graph;
    size_t total = 0;
    for (int j = 0; j < g->n_leafs; j++) {
        if (could_be_context_owned(g->leafs[j]) && (j * 5 + g->n_leafs) % 3 == 0) total += (tg_nbytes(g->leafs[j]) + 63) / 64 * 64;
    }
    if (total == 0) return TG_OK;
    c->context_memory = calloc(total, 1);
    if (!c->context_memory) return tg_fail(TG_ERR_ALLOC, "out of host memory");
    size_t off = 0;
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        if (!could_be_context_owned(t) || (j * 5 + g->n_leafs) % 3 != 0) continue;
        t->data = (char *)c->context_memory + off;
        off += (tg_nbytes(t) + 63) / 64 * 64;
    }
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        const struct tg_tensor *r = t->view_src;
        if (r && r->data && !r->buffer && !t->data) t->data = (char *)r->data + t->view_offs;
    }
    return TG_OK;
}

/* Whether a later node than position `after` reads t (directly). */
static bool read_after(const struct tg_graph *g, int after, const struct tg_tensor *t) {
    for (int i = after + 1; i < g->n_nodes; i++)
        for (int k = 0; k < TG_MAX_SRC; k++)
            if (g->nodes[i]->src[k] == t) return true;
    return false;
}

/* Half the leafs with memory and half the views bound in memory the plan
 * does not own (by position) leave the graph's lists while nodes still read
 * them: the graph is rebuilt without them, ids kept per tensor. */
static enum tg_status unlist_sources(struct tg_gen_case *c) {
    struct tg_graph *g = c->graph;
    struct tg_graph *ng = tg_graph_new(g->size);
    int *node_ids = malloc(((size_t)g->n_nodes + 1) * sizeof *node_ids);
    int *leaf_ids = malloc(((size_t)g->n_leafs + 1) * sizeof *leaf_ids);
    enum tg_status st = ng && node_ids && leaf_ids ? TG_OK : tg_fail(TG_ERR_ALLOC, "out of host memory");
    int n_nodes = 0, n_leafs = 0;
    for (int j = 0; st == TG_OK && j < g->n_leafs; j++) {
        const struct tg_tensor *t = g->leafs[j];
        bool has_memory = t->buffer || t->data;
        if (has_memory && (j * 3 + g->n_leafs) % 2 == 0 && read_after(g, -1, t)) continue;
        st = tg_graph_add_leaf(ng, g->leafs[j]);
        leaf_ids[n_leafs++] = c->leaf_ids[j];
    }
    for (int i = 0; st == TG_OK && i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        bool bound_view = t->view_src && t->data && (t->view_src->buffer || t->view_src->data) && t->op != TG_OP_NONE &&
                          !(t->flags & TG_FLAG_OUTPUT);
        if (bound_view && (i * 3 + g->n_nodes) % 2 == 0 && read_after(g, i, t)) continue;
        st = tg_graph_add_node(ng, g->nodes[i]);
        node_ids[n_nodes++] = c->node_ids[i];
    }
    if (st != TG_OK) {
        tg_graph_free(ng);
        free(node_ids);
        free(leaf_ids);
        return st;
    }
    tg_graph_free(g);
    free(c->node_ids);
    free(c->leaf_ids);
    c->graph = ng;
    c->node_ids = node_ids;
    c->leaf_ids = leaf_ids;
    return TG_OK;
}

enum tg_status tg_ggml_case_make(const struct tg_ggml_case_source *src, struct tg_gen_case **out) {
    enum tg_status st = src->text ? tg_gen_case_from_text(src->text, src->text_len, src->name ? src->name : "case.tg", true, out)
                                  : tg_gen_case_from_bytes(src->bytes, src->n, &src->opts, out);
    if (st != TG_OK) return st;
    const struct tg_graph *g = (*out)->graph;
    for (int i = 0; src->input_nodes && i < g->n_nodes; i++) { /* one in three, by position: the same in every copy */
        struct tg_tensor *t = g->nodes[i];
        if (tg_op_can_inplace(t->op) && !t->view_src && (i * 7 + g->n_nodes) % 3 == 0) t->flags |= TG_FLAG_INPUT;
    }
    if (src->context_owned) st = give_context_memory(*out);
    if (st == TG_OK && src->unlisted) st = unlist_sources(*out);
    if (st != TG_OK) {
        tg_gen_case_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- ggml's side -------------------------------------------------------------------------- */

/* Where ggml put one tensor: the buffer type index, its chunk and the offset. */
struct placement {
    int type; /* -1: not planned (external, view, or ggml left it unbound) */
    int chunk;
    size_t offset;
};

struct ggml_side {
    struct tg_gen_case *c;
    struct tg_ggml_buft types[TG_GEN_MAX_BUFTS];
    struct tg_ggml_buft external;
    ggml_backend_buffer_type_t ids[TG_GEN_MAX_IDS];
    struct tg_ggml_graph gg;
    ggml_gallocr_t galloc;
    bool planned;
    char bind_failure[300]; /* ggml's plan could not be bound as read back */
    size_t size[TG_GEN_MAX_IDS];
    size_t chunk_size[TG_GEN_MAX_BUFTS][TG_GGML_BUFT_MAX_CHUNKS];
    int n_chunks[TG_GEN_MAX_BUFTS];
};

static ggml_backend_buffer_type_t external_type(const struct tg_tensor *t, void *user) {
    (void)t;
    return &((struct ggml_side *)user)->external.buft;
}

static void plan_in_ggml(void *user) {
    struct ggml_side *s = user;
    s->galloc = ggml_gallocr_new_n(s->ids, s->c->n_ids);
    s->planned = ggml_gallocr_reserve_n(s->galloc, s->gg.graph, s->c->node_ids, s->c->leaf_ids) &&
                 ggml_gallocr_alloc_graph(s->galloc, s->gg.graph);
}

static int type_index(const struct tg_gen_case *c, int id) {
    return (int)((const struct tg_gen_buft *)c->bufts[id] - c->bufts_storage);
}

static struct placement placement_in_ggml(const struct ggml_side *s, const struct tg_tensor *t) {
    struct placement p = {-1, -1, 0};
    struct ggml_tensor *x = tg_ggml_lookup(&s->gg, t);
    if (!x || !x->buffer || t->view_src || t->buffer) return p;
    for (int k = 0; k < s->c->n_bufts; k++) {
        int chunk = tg_ggml_buft_chunk_of(&s->types[k], x->buffer);
        if (chunk < 0) continue;
        p.type = k;
        p.chunk = chunk;
        p.offset = (size_t)((char *)x->data - (char *)ggml_backend_buffer_get_base(x->buffer));
    }
    return p;
}

static void ggml_side_free(struct ggml_side *s) {
    if (s->galloc) ggml_gallocr_free(s->galloc);
    tg_ggml_graph_free(&s->gg);
    tg_gen_case_free(s->c);
}

/* ---- judging ggml's plan with the oracle ---------------------------------------------------- */

/* Binds the case's tensors where ggml put them (address-only tgsched buffers
 * of the case's types, one per ggml chunk), runs every checker with node_ids
 * as the nodes' buffer ids, and unbinds them again. */
static enum tg_status judge_ggml_plan(struct ggml_side *s, const struct placement *where, const int *node_ids,
                                      struct tg_oracle_report *rep) {
    struct tg_gen_case *c = s->c;
    struct tg_graph *g = c->graph;
    int n = g->n_nodes + g->n_leafs;
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    enum tg_status st = tg_oracle_snapshot_take(g, &snap);
    if (st != TG_OK) return st;
    st = tg_oracle_liveness_build(g, &snap, node_ids, c->leaf_ids, &lv);
    if (st != TG_OK) {
        tg_oracle_snapshot_free(&snap);
        return st;
    }
    tg_buffer *chunks[TG_GEN_MAX_BUFTS][TG_GGML_BUFT_MAX_CHUNKS] = {{0}};
    for (int k = 0; k < c->n_bufts && st == TG_OK; k++) {
        for (int ch = 0; ch < s->n_chunks[k] && st == TG_OK; ch++) {
            chunks[k][ch] = tg_buft_alloc_buffer(&c->bufts_storage[k].buft, s->chunk_size[k][ch]);
            if (!chunks[k][ch]) st = TG_ERR_ALLOC;
            else tg_buffer_set_usage(chunks[k][ch], TG_BUFFER_USAGE_COMPUTE);
        }
    }
    bool *bound = calloc((size_t)n + 1, sizeof *bound);
    if (!bound) st = TG_ERR_ALLOC;
    for (int u = 0; u < n && st == TG_OK; u++) {
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        const struct placement *p = &where[u];
        if (p->type < 0 || t->buffer) continue;
        tg_buffer *b = chunks[p->type][p->chunk];
        bound[u] = true;
        if (tg_tensor_bind(t, b, (char *)tg_buffer_get_base(b) + p->offset) != TG_OK) {
            /* ggml's plan puts the tensor past its chunk: a finding, named as the oracle would */
            snprintf(s->bind_failure, sizeof s->bind_failure, "%s", tg_last_error());
        }
    }
    for (int u = 0; u < n && st == TG_OK; u++) {
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        if (t->view_src && t->view_src->buffer && !t->buffer) {
            st = tg_tensor_view_bind(t);
            bound[u] = true;
        }
    }
    if (st == TG_OK) st = tg_oracle_check(g, &lv, &snap, c->bufts, c->n_ids, rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    for (int u = 0; bound && u < n; u++) { /* unbound again: the plan may be judged once more */
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        if (bound[u]) t->data = NULL, t->buffer = NULL;
    }
    free(bound);
    for (int k = 0; k < c->n_bufts; k++)
        for (int ch = 0; ch < s->n_chunks[k]; ch++) tg_buffer_free(chunks[k][ch]);
    return st;
}

/* ---- triggers of the listed differences -------------------------------------------------------- */

static int source_id(const struct tg_graph *g, const int *node_ids, const int *leaf_ids, const struct tg_tensor *s) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == s) return node_ids[i];
    for (int j = 0; j < g->n_leafs; j++)
        if (g->leafs[j] == s) return leaf_ids[j];
    return -1;
}

static bool same_place(const struct placement *a, const struct placement *b) {
    return a->type >= 0 && a->type == b->type && a->chunk == b->chunk && a->offset == b->offset;
}

/* ggml's rule for an input-flagged node that may run in place: it is placed
 * while consumers are still being counted, and takes the memory of a source
 * placed by then (a leaf of the plan's, or an input-flagged node before it)
 * that has one consumer counted so far (nodes before it) and no view: the
 * source is then placed again later. */
static bool input_taken_while_counting(const struct tg_gen_case *c, int i) {
    const struct tg_graph *g = c->graph;
    const struct tg_tensor *t = g->nodes[i];
    if (!(t->flags & TG_FLAG_INPUT) || !tg_op_can_inplace(t->op) || t->view_src) return false;
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *p = t->src[k];
        bool placed = false;
        for (int j = 0; p && j < g->n_leafs && !placed; j++) placed = g->leafs[j] == p;
        for (int n = 0; p && n < i && !placed; n++) placed = g->nodes[n] == p && (p->flags & TG_FLAG_INPUT);
        if (!placed || p->view_src || p->buffer || (p->flags & TG_FLAG_OUTPUT) || !tg_are_same_layout(t, p)) continue;
        int consumers = 0, views = 0;
        for (int n = 0; n < i; n++) {
            for (int m = 0; m < TG_MAX_SRC; m++) consumers += g->nodes[n]->src[m] == p;
            views += g->nodes[n]->view_src == p;
        }
        if (consumers == 1 && views == 0) return true;
    }
    return false;
}

static int position_of(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        if ((u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes]) == t) return u;
    }
    return -1;
}

/* The listed differences ggml's plan shows, and per node the buffer id its
 * memory came from (eff: a node sharing a source's memory has the source's). */
static void find_triggers(const struct ggml_side *s, const struct placement *where, unsigned *triggers, int *eff) {
    const struct tg_graph *g = s->c->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        eff[i] = s->c->node_ids[i];
        for (int k = 0; k < TG_MAX_SRC && where[i].type >= 0; k++) {
            const struct tg_tensor *p = t->src[k];
            if (!p || p->view_src || p->buffer) continue;
            int pu = position_of(g, p);
            if (pu < 0 || !same_place(&where[pu], &where[i])) continue;
            int parent_id = pu < g->n_nodes ? eff[pu] : source_id(g, s->c->node_ids, s->c->leaf_ids, p);
            if (parent_id != s->c->node_ids[i]) *triggers |= 1u << TG_GGML_INPLACE_OTHER_BUFFER;
            eff[i] = parent_id;
            break;
        }
    }
    /* a read through a view with op none changes ggml's plan only where ggml
     * planned the root and may free or reuse it (not an output) */
    for (int i = 0; i < g->n_nodes; i++) {
        if (input_taken_while_counting(s->c, i)) *triggers |= 1u << TG_GGML_INPUT_INPLACE;
        for (int k = 0; k < TG_MAX_SRC; k++) {
            const struct tg_tensor *p = g->nodes[i]->src[k];
            if (!p || !p->view_src || p->op != TG_OP_NONE || p->view_src->buffer) continue;
            int ru = position_of(g, p->view_src);
            const struct ggml_tensor *root = tg_ggml_lookup(&s->gg, p->view_src);
            if (ru >= 0 && where[ru].type >= 0 && root && !(root->flags & GGML_TENSOR_FLAG_OUTPUT)) {
                *triggers |= 1u << TG_GGML_NONE_VIEW_READ;
            }
        }
    }
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        const struct ggml_tensor *x = tg_ggml_lookup(&s->gg, u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes]);
        if (x && (x->flags & GGML_TENSOR_FLAG_OUTPUT) && x->view_src && !(x->view_src->flags & GGML_TENSOR_FLAG_OUTPUT)) {
            *triggers |= 1u << TG_GGML_RAW_OUTPUT_VIEW;
        }
    }
}

/* ---- comparing with tgsched's plan ------------------------------------------------------------ */

static bool planned_by(const tg_gallocr *galloc, const struct tg_tensor *t) {
    return t->buffer && !t->view_src && tg_gallocr_owns_buffer(galloc, t->buffer);
}

/* Offsets, and the chunks as a one-to-one map between ggml's and tgsched's buffers. */
static void compare_plans(const struct ggml_side *s, const struct placement *where, const struct tg_gen_case *c2,
                          const tg_gallocr *galloc2, struct tg_ggml_alloc_result *res) {
    const struct tg_graph *g = c2->graph;
    const tg_buffer *tg_of[TG_GEN_MAX_BUFTS][TG_GGML_BUFT_MAX_CHUNKS] = {{0}};
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        const struct placement *p = &where[u];
        bool ours = planned_by(galloc2, t);
        if ((p->type >= 0) != ours) {
            if (!res->n_offsets_differ++) snprintf(res->detail, sizeof res->detail, "tensor '%s' is planned by %s only", t->name, ours ? "tgsched" : "ggml");
            continue;
        }
        if (!ours) continue;
        res->n_tensors_compared++;
        size_t offset = (size_t)((char *)t->data - (char *)tg_buffer_get_base(t->buffer));
        const tg_buffer **mapped = &tg_of[p->type][p->chunk];
        bool same_chunk = !*mapped || *mapped == t->buffer;
        if (!*mapped) *mapped = t->buffer;
        if (offset != p->offset || !same_chunk || t->buffer->size != s->chunk_size[p->type][p->chunk]) {
            if (!res->n_offsets_differ++) {
                snprintf(res->detail, sizeof res->detail, "tensor '%s': ggml chunk %d offset %zu (chunk of %zu bytes), "
                         "tgsched offset %zu (buffer of %zu bytes)%s", t->name, p->chunk, p->offset,
                         s->chunk_size[p->type][p->chunk], offset, t->buffer->size, same_chunk ? "" : ", another chunk");
            }
        }
    }
    for (int id = 0; id < c2->n_ids; id++) {
        if (res->ggml_size[id] != res->tg_size[id] && !res->n_offsets_differ++) {
            snprintf(res->detail, sizeof res->detail, "buffer id %d: ggml %zu bytes, tgsched %zu", id, res->ggml_size[id],
                     res->tg_size[id]);
        }
    }
}

/* ---- the differential ------------------------------------------------------------------------- */

/* One plan by ggml of a fresh copy of the case (node ids replaced when given):
 * placements, chunk sizes, the oracle's report, triggers and ggml's ids. */
struct plan_round {
    struct ggml_side s;
    bool finished;
    char abort_message[300];
    struct placement *where;
    struct tg_oracle_report rep;
    unsigned triggers;
    int *eff;
    int n_violations_asked; /* judged with the case's ids */
};

static void round_free(struct plan_round *r) {
    free(r->where);
    free(r->eff);
    tg_oracle_report_free(&r->rep);
    ggml_side_free(&r->s);
}

/* The self-test's fault: the second owned leaf of ggml's plan put where the
 * first is (leafs are live together from the first step). */
static void overlap_two_leafs(const struct tg_graph *g, struct placement *where) {
    int first = -1;
    for (int j = 0; j < g->n_leafs; j++) {
        struct placement *p = &where[g->n_nodes + j];
        if (p->type < 0) continue;
        if (first < 0) {
            first = g->n_nodes + j;
        } else {
            *p = where[first];
            return;
        }
    }
}

static enum tg_status plan_round(const struct tg_ggml_case_source *src, const struct tg_ggml_alloc_options *o,
                                 const int *node_ids, struct plan_round *r) {
    memset(r, 0, sizeof *r);
    struct ggml_side *s = &r->s;
    enum tg_status st = tg_ggml_case_make(src, &s->c);
    if (st != TG_OK) return st;
    struct tg_gen_case *c = s->c;
    if (node_ids) memcpy(c->node_ids, node_ids, (size_t)c->graph->n_nodes * sizeof *node_ids);
    for (int k = 0; k < c->n_bufts; k++) {
        const struct tg_gen_buft *b = &c->bufts_storage[k];
        enum ggml_op pad_op = b->pad_bytes && b->padded_op < TG_OP_COUNT ? tg_ggml_op(b->padded_op) : GGML_OP_COUNT;
        tg_ggml_buft_init(&s->types[k], b->name, b->alignment, b->max_size, pad_op, b->pad_bytes, false);
    }
    tg_ggml_buft_init(&s->external, "external", 64, 0, GGML_OP_COUNT, 0, false);
    for (int id = 0; id < c->n_ids; id++) s->ids[id] = &s->types[type_index(c, id)].buft;
    struct tg_ggml_import_options io = {.raw_output_flags = o->raw_flags_import, .external_buft = external_type, .user = s};
    st = tg_ggml_import(c->graph, &io, &s->gg);
    if (st != TG_OK) return st;
    r->finished = tg_ggml_catch(plan_in_ggml, s, r->abort_message, sizeof r->abort_message);
    if (!r->finished || !s->planned) return TG_OK;

    int n = c->graph->n_nodes + c->graph->n_leafs;
    r->where = calloc((size_t)n + 1, sizeof *r->where);
    r->eff = calloc((size_t)c->graph->n_nodes + 1, sizeof *r->eff);
    if (!r->where || !r->eff) return tg_fail(TG_ERR_ALLOC, "out of host memory");
    for (int k = 0; k < c->n_bufts; k++) {
        s->n_chunks[k] = s->types[k].n_made;
        for (int ch = 0; ch < s->n_chunks[k]; ch++) s->chunk_size[k][ch] = ggml_backend_buffer_get_size(s->types[k].made[ch]);
    }
    for (int id = 0; id < c->n_ids; id++) s->size[id] = ggml_gallocr_get_buffer_size(s->galloc, id);
    for (int u = 0; u < n; u++) {
        r->where[u] = placement_in_ggml(s, u < c->graph->n_nodes ? c->graph->nodes[u] : c->graph->leafs[u - c->graph->n_nodes]);
    }
    find_triggers(s, r->where, &r->triggers, r->eff);
    if (o->overlap_ggml_plan) overlap_two_leafs(c->graph, r->where);
    /* judged with the ids asked for, which counts the deviation of a node
     * placed in place over a source of another id (the violations reported),
     * then with the id each node's memory came from (eff), which holds such
     * a node to its source's type, as ggml sized it: only what remains
     * there is left to classify */
    struct tg_oracle_report asked = {0};
    st = judge_ggml_plan(s, r->where, c->node_ids, &asked);
    r->n_violations_asked = asked.n;
    tg_oracle_report_free(&asked);
    return st == TG_OK ? judge_ggml_plan(s, r->where, r->eff, &r->rep) : st;
}

/* Whether every violation of the report is the in-place-across-ids deviation:
 * the source in another id, or (ids of two types) the node's size in its own
 * type larger than the source's (ggml sizes it in the source's type; in one
 * type it would abort instead, TG_GGML_INPLACE_BIGGER). */
static bool only_other_buffer_inplace(const struct tg_oracle_report *rep) {
    for (int i = 0; i < rep->n; i++) {
        const struct tg_oracle_violation *v = &rep->items[i];
        bool across = v->inplace_reason == TG_INPLACE_DIFFERENT_BUFFER || v->inplace_reason == TG_INPLACE_NODE_BIGGER;
        if (v->rule != TG_RULE_ILLEGAL_INPLACE || !across) return false;
    }
    return true;
}

/* ggml_gallocr sizes its hash set for the graph's nodes and leafs (a quarter
 * more, then the next prime of its table) and inserts every source too: the
 * tensors gg reaches outside the lists may fill it. */
static bool hash_may_fill(const struct tg_ggml_graph *gg) {
    const struct ggml_cgraph *cg = gg->graph;
    size_t listed = (size_t)(cg->n_nodes + cg->n_leafs);
    return (size_t)gg->n_tensors > listed && (size_t)gg->n_tensors >= ggml_hash_size(listed + listed / 4);
}

static void note_abort(struct tg_ggml_alloc_result *res, const char *message, bool hash_full) {
    enum tg_ggml_alloc_class k = TG_GGML_UNEXPLAINED;
    if (strstr(message, "out of free blocks")) k = TG_GGML_FREE_BLOCKS;
    else if (strstr(message, "parent_size >= node_size")) k = TG_GGML_INPLACE_BIGGER;
    else if (hash_full && strstr(message, "ggml-impl.h") && strstr(message, "fatal error")) k = TG_GGML_UNLISTED_HASH_FULL;
    res->classes |= 1u << k;
    snprintf(res->detail, sizeof res->detail, "ggml aborted: %s", message);
}

#define MAX_ROUNDS 5 /* one with the raw flags gone, then ids */

/* A copy of where ggml put every tensor in a round, with its chunk sizes after them. */
static struct placement *keep_placements(const struct plan_round *r) {
    const struct tg_gen_case *c = r->s.c;
    int n = c->graph->n_nodes + c->graph->n_leafs;
    struct placement *p = malloc(((size_t)n + TG_GEN_MAX_BUFTS * TG_GGML_BUFT_MAX_CHUNKS) * sizeof *p);
    if (!p) return NULL;
    memcpy(p, r->where, (size_t)n * sizeof *p);
    for (int k = 0; k < TG_GEN_MAX_BUFTS; k++) {
        for (int ch = 0; ch < TG_GGML_BUFT_MAX_CHUNKS; ch++) {
            bool made = k < c->n_bufts && ch < r->s.n_chunks[k];
            p[n + k * TG_GGML_BUFT_MAX_CHUNKS + ch] = (struct placement){-1, -1, made ? r->s.chunk_size[k][ch] : 0};
        }
    }
    return p;
}

static bool same_placements(const struct placement *kept, const struct plan_round *r) {
    struct placement *now = keep_placements(r);
    const struct tg_graph *g = r->s.c->graph;
    size_t n = (size_t)(g->n_nodes + g->n_leafs) + TG_GEN_MAX_BUFTS * TG_GGML_BUFT_MAX_CHUNKS;
    bool same = now != NULL;
    for (size_t u = 0; same && u < n; u++) {
        same = kept[u].type == now[u].type && kept[u].chunk == now[u].chunk && kept[u].offset == now[u].offset;
    }
    free(now);
    return same;
}

enum tg_status tg_ggml_alloc_compare(const struct tg_ggml_case_source *src, const struct tg_ggml_alloc_options *opts,
                                     struct tg_ggml_alloc_result *res) {
    const struct tg_ggml_alloc_options none = {.tg_fault = TG_FAULT_NONE};
    const struct tg_ggml_alloc_options *o = opts ? opts : &none;
    memset(res, 0, sizeof *res);
    struct plan_round r;
    int *ids = NULL;
    enum tg_status st = TG_OK;
    struct tg_ggml_alloc_options ro = *o; /* this round's: raw flags go once a view flagged alone is seen */
    struct placement *raw_plan = NULL;    /* ggml's plan with them, to see whether they changed it */
    for (;;) {
        st = plan_round(src, &ro, ids, &r);
        res->rounds++;
        if (raw_plan && (st != TG_OK || !r.finished || !r.s.planned || !same_placements(raw_plan, &r))) {
            res->classes |= 1u << TG_GGML_RAW_OUTPUT_VIEW;
        }
        free(raw_plan);
        raw_plan = NULL;
        if (st != TG_OK || !r.finished || !r.s.planned) break;
        if (r.s.bind_failure[0]) {
            res->classes |= 1u << TG_GGML_UNEXPLAINED;
            snprintf(res->detail, sizeof res->detail, "ggml's plan: [out of buffer bounds] %s", r.s.bind_failure);
            break;
        }
        if (getenv("TG_GGML_VERBOSE") && r.rep.n) {
            tg_logf("ggml's plan, round %d:\n", res->rounds);
            tg_oracle_report_print(&r.rep, 20);
        }
        if (res->rounds == 1) res->n_violations = r.n_violations_asked;
        bool other_ids = (r.triggers >> TG_GGML_INPLACE_OTHER_BUFFER) & 1;
        bool raw_view = (r.triggers >> TG_GGML_RAW_OUTPUT_VIEW) & 1;
        if ((!other_ids && !raw_view) || res->rounds == MAX_ROUNDS) break;
        if (raw_view) {
            /* ggml frees the root of a view flagged output alone: plan again with
             * the flags as ggml_set_output sets them, where that cannot occur, so
             * the defect excuses nothing else; it is the class where the flags
             * changed ggml's plan */
            raw_plan = keep_placements(&r);
            if (r.rep.n) {
                snprintf(res->detail, sizeof res->detail, "ggml's plan with the raw flags: [%s] %s",
                         tg_oracle_rule_name(r.rep.items[0].rule), r.rep.items[0].message);
            }
            if (!raw_plan) {
                st = tg_fail(TG_ERR_ALLOC, "out of host memory");
                break;
            }
            ro.raw_flags_import = false;
            round_free(&r);
            continue; /* the same ids: what the flags changed is seen alone */
        }
        /* the deviation explains violations of its own kind only; plan again
         * with the ids ggml used, where it cannot occur */
        res->classes |= 1u << TG_GGML_INPLACE_OTHER_BUFFER;
        if (!only_other_buffer_inplace(&r.rep)) break;
        res->ids_replaced = true;
        int n_nodes = r.s.c->graph->n_nodes;
        free(ids);
        ids = malloc(((size_t)n_nodes + 1) * sizeof *ids);
        if (!ids) {
            st = tg_fail(TG_ERR_ALLOC, "out of host memory");
            break;
        }
        memcpy(ids, r.eff, (size_t)n_nodes * sizeof *ids);
        round_free(&r);
    }
    if (st == TG_OK && !r.finished) note_abort(res, r.abort_message, r.s.gg.graph && hash_may_fill(&r.s.gg));
    else if (st == TG_OK && !r.s.planned) {
        res->classes |= 1u << TG_GGML_UNEXPLAINED;
        snprintf(res->detail, sizeof res->detail, "ggml_gallocr could not plan the case");
    }

    /* tgsched plans a fresh copy with the last round's ids and ggml's policy;
     * its own plan must be legal */
    struct tg_gen_case *c2 = NULL;
    tg_gallocr *galloc2 = NULL;
    if (st == TG_OK) st = tg_ggml_case_make(src, &c2);
    if (st == TG_OK && ids) memcpy(c2->node_ids, ids, (size_t)c2->graph->n_nodes * sizeof *ids);
    struct tg_gen_plan_result r2;
    if (st == TG_OK) st = tg_gen_plan_and_check_policy(c2, o->tg_fault, TG_PLAN_GGML, &galloc2, &r2);
    if (st == TG_OK) {
        for (int id = 0; id < c2->n_ids; id++) res->tg_size[id] = r2.buffer_size[id];
        for (int id = 0; galloc2 && id < c2->n_ids; id++) {
            struct tg_plan_report rep;
            if (tg_gallocr_get_report(galloc2, id, &rep) == TG_OK && rep.n_chunks > 1) res->multi_chunk = true;
        }
        if (r2.plan_status != TG_OK || r2.report.n) {
            res->classes |= 1u << TG_GGML_UNEXPLAINED;
            snprintf(res->detail, sizeof res->detail, "tgsched's own plan failed or broke a rule: %s",
                     r2.report.n ? r2.report.items[0].message : tg_last_error());
        }
        tg_gen_plan_result_free(&r2);
    }
    if (st == TG_OK && res->ids_replaced) {
        /* compared above with ggml's ids, tgsched's plan of the case as given
         * must be legal too: a fault need not show with other ids */
        struct tg_gen_case *c1 = NULL;
        st = tg_ggml_case_make(src, &c1);
        struct tg_gen_plan_result r1;
        if (st == TG_OK) st = tg_gen_plan_and_check_policy(c1, o->tg_fault, TG_PLAN_GGML, NULL, &r1);
        if (st == TG_OK) {
            if (r1.plan_status != TG_OK || r1.report.n) {
                res->classes |= 1u << TG_GGML_UNEXPLAINED;
                snprintf(res->detail, sizeof res->detail, "tgsched's own plan with the case's ids failed or broke a "
                         "rule: %s", r1.report.n ? r1.report.items[0].message : tg_last_error());
            }
            tg_gen_plan_result_free(&r1);
        }
        tg_gen_case_free(c1);
    }

    if (st == TG_OK && r.where) {
        struct ggml_side *s = &r.s;
        for (int id = 0; id < s->c->n_ids; id++) res->ggml_size[id] = s->size[id];
        bool at_cap = false, ggml_chunks = false;
        for (int k = 0; k < s->c->n_bufts; k++) {
            ggml_chunks |= s->n_chunks[k] > 1;
            at_cap |= s->n_chunks[k] >= TG_GGML_CHUNK_CAP_COUNT;
        }
        res->multi_chunk |= ggml_chunks;
        unsigned triggers = r.triggers;
        /* at the cap the chunks part ways for that reason, whatever the best fit did;
         * below it only ggml's chunks count: in one chunk its best fit is tgsched's,
         * so chunks of tgsched's alone are tgsched's doing */
        if (at_cap) triggers |= 1u << TG_GGML_CHUNK_CAP;
        else if (ggml_chunks) triggers |= 1u << TG_GGML_CHUNK_BEST_FIT;
        compare_plans(s, r.where, c2, galloc2, res);
        bool other_ids_left = (triggers >> TG_GGML_INPLACE_OTHER_BUFFER) & 1;
        if (r.rep.n) {
            snprintf(res->detail, sizeof res->detail, "ggml's plan: [%s] %s", tg_oracle_rule_name(r.rep.items[0].rule),
                     r.rep.items[0].message);
            /* several chunks never excuse a violation; ids excuse only their own kind */
            unsigned excuses = triggers & ~(1u << TG_GGML_CHUNK_BEST_FIT) & ~(1u << TG_GGML_CHUNK_CAP) &
                               ~(1u << TG_GGML_INPLACE_OTHER_BUFFER);
            if (other_ids_left && only_other_buffer_inplace(&r.rep)) excuses |= 1u << TG_GGML_INPLACE_OTHER_BUFFER;
            res->classes |= excuses ? excuses : 1u << TG_GGML_UNEXPLAINED;
        }
        if (res->n_offsets_differ) res->classes |= triggers ? triggers : 1u << TG_GGML_UNEXPLAINED;
    }
    res->equal = st == TG_OK && r.where && !res->n_offsets_differ && !((res->classes >> TG_GGML_UNEXPLAINED) & 1);
    round_free(&r);
    free(ids);
    tg_gallocr_free(galloc2);
    tg_gen_case_free(c2);
    return st;
}

/* ---- a sequence: reserve and alloc with graph a, then alloc with graph b ------------------------- */

const char *tg_ggml_sequence_name(enum tg_ggml_sequence seq) {
    static const char *const names[TG_GGML_SEQ_COUNT] = {"same graph", "an edge moved", "a view's root moved",
                                                         "smaller", "bigger"};
    return seq < TG_GGML_SEQ_COUNT ? names[seq] : "?";
}

/* One view of the case gets another root: an earlier tensor the plan places,
 * of the same type and byte size as its root (the view's offset stays inside
 * it).  False when the case has no such pair. */
static bool move_view_root(struct tg_gen_case *c, uint64_t salt) {
    struct tg_graph *g = c->graph;
    for (int tries = 0; tries < 64 && g->n_nodes > 1; tries++) {
        int i = 1 + (int)((salt * 2654435761u + (uint64_t)tries * 40503u) % (uint64_t)(g->n_nodes - 1));
        struct tg_tensor *v = g->nodes[i];
        struct tg_tensor *r = v->view_src;
        if (!r || v->op == TG_OP_NONE || r->buffer || r->data) continue;
        for (int u = i - 1; u >= -g->n_leafs; u--) {
            struct tg_tensor *cand = u >= 0 ? g->nodes[u] : g->leafs[-1 - u];
            if (cand == r || cand->view_src || cand->buffer || cand->data || cand->type != r->type ||
                tg_nbytes(cand) != tg_nbytes(r)) {
                continue;
            }
            v->view_src = cand;
            for (int k = 0; k < TG_MAX_SRC; k++)
                if (v->src[k] == r) v->src[k] = cand;
            return true;
        }
    }
    return false;
}

/* The sources of graph a and of graph b. */
static enum tg_status sequence_cases(const struct tg_ggml_case_source *src, enum tg_ggml_sequence seq, uint64_t salt,
                                     struct tg_gen_case **a, struct tg_gen_case **b) {
    struct tg_ggml_case_source sa = *src, sb = *src;
    if (!src->text && seq == TG_GGML_SEQ_SMALLER) sb.opts.max_tensor_bytes /= 16;
    if (!src->text && seq == TG_GGML_SEQ_BIGGER) sa.opts.max_tensor_bytes /= 16;
    *a = *b = NULL;
    enum tg_status st = tg_ggml_case_make(&sa, a);
    if (st == TG_OK) st = tg_ggml_case_make(&sb, b);
    if (st != TG_OK) return st;
    if (seq == TG_GGML_SEQ_EDGE_MOVED) tg_gen_case_rewire_edge(*b, salt);
    if (seq == TG_GGML_SEQ_VIEW_MOVED) move_view_root(*b, salt);
    /* alloc_graph takes no buffer ids: those in force for b are the reserve's,
     * a's, slot by slot (b decoded with another cap may have drawn others) */
    const struct tg_graph *ga = (*a)->graph, *gb = (*b)->graph;
    if (ga->n_nodes == gb->n_nodes && ga->n_leafs == gb->n_leafs) {
        memcpy((*b)->node_ids, (*a)->node_ids, (size_t)ga->n_nodes * sizeof *(*a)->node_ids);
        memcpy((*b)->leaf_ids, (*a)->leaf_ids, (size_t)ga->n_leafs * sizeof *(*a)->leaf_ids);
    }
    return TG_OK;
}

/* Where ggml put t: made[] searched newest first, since a buffer freed by a
 * reallocation may have had the address of a newer one. */
static struct placement placement_latest(const struct ggml_side *s, const struct tg_ggml_graph *gg, const struct tg_tensor *t) {
    struct placement p = {-1, -1, 0};
    struct ggml_tensor *x = tg_ggml_lookup(gg, t);
    if (!x || !x->buffer || t->view_src || t->buffer) return p;
    for (int k = 0; k < s->c->n_bufts; k++) {
        for (int ch = s->types[k].n_made - 1; ch >= 0; ch--) {
            if (s->types[k].made[ch] != x->buffer) continue;
            p.type = k;
            p.chunk = ch;
            p.offset = (size_t)((char *)x->data - (char *)ggml_backend_buffer_get_base(x->buffer));
            return p;
        }
    }
    return p;
}

struct sequence_ggml {
    struct ggml_side a;     /* graph a, the allocator and the buffer types */
    struct tg_gen_case *cb; /* graph b */
    struct tg_ggml_graph gb;
    bool b_bound;
};

static void sequence_bind_b(void *user) {
    struct sequence_ggml *q = user;
    q->b_bound = ggml_gallocr_alloc_graph(q->a.galloc, q->gb.graph);
}

static void sequence_chunk_sizes(struct ggml_side *s, int from[TG_GEN_MAX_BUFTS]) {
    for (int k = 0; k < s->c->n_bufts; k++) {
        for (int ch = from[k]; ch < s->types[k].n_made; ch++) {
            s->chunk_size[k][ch] = ggml_backend_buffer_get_size(s->types[k].made[ch]);
        }
        s->n_chunks[k] = s->types[k].n_made;
    }
}

static bool same_shape(const struct tg_graph *a, const struct tg_graph *b) {
    return a->n_nodes == b->n_nodes && a->n_leafs == b->n_leafs;
}

/* Whether ggml's alloc_graph binds b with a's plan: with several ids it
 * cannot plan again (it binds with a's plan or refuses); with one it plans
 * again where ggml_gallocr_needs_realloc finds a slot that does not fit: the
 * node or a source now needs memory of the plan where a's had its own or was
 * a view (or was no source), or more bytes than a's.  Memory as at a's
 * reserve and before b's bind: the cases' own (ggml's copies of a are bound
 * by now).  Comparing placements instead misses a replay: a tensor of b is
 * bound by the first slot that names it, another tensor's slot in a. */
static bool slot_fits(ggml_backend_buffer_type_t buft, const struct tg_ggml_graph *ga, const struct tg_tensor *a,
                      const struct tg_ggml_graph *gb, const struct tg_tensor *b) {
    if (b->view_src || b->data || b->buffer) return true;
    if (!a || a->view_src || a->data || a->buffer) return false;
    return ggml_backend_buft_get_alloc_size(buft, tg_ggml_lookup(ga, a)) >= ggml_backend_buft_get_alloc_size(buft, tg_ggml_lookup(gb, b));
}

/* ggml_gallocr_needs_realloc's answer for b: false when every node and
 * source slot fits a's plan. */
static bool slots_fit(const struct ggml_side *s, const struct tg_gen_case *cb, const struct tg_ggml_graph *gb) {
    const struct tg_graph *a = s->c->graph, *b = cb->graph;
    if (a->n_nodes != b->n_nodes || a->n_leafs != b->n_leafs) return false;
    for (int i = 0; i < b->n_nodes; i++) {
        if (!slot_fits(s->ids[0], &s->gg, a->nodes[i], gb, b->nodes[i])) return false;
        for (int k = 0; k < TG_MAX_SRC; k++) {
            if (b->nodes[i]->src[k] && !slot_fits(s->ids[0], &s->gg, a->nodes[i]->src[k], gb, b->nodes[i]->src[k])) return false;
        }
    }
    return true;
}

static bool ggml_replays(const struct ggml_side *s, const struct tg_gen_case *cb, const struct tg_ggml_graph *gb) {
    return s->c->n_ids > 1 || slots_fit(s, cb, gb);
}

/* Where ggml replays a's plan and a leaf of b needs memory of the plan while
 * a's leaf at its position had memory of its own (or was a view), the plan's
 * entry has buffer id -1 and ggml binds the leaf through galloc->buffers[-1]:
 * a crash (SIGSEGV, not an abort tg_ggml_catch could return from), so ggml is
 * not run (alloc-unread-leaf-weights). */
static bool unread_leaf_lost_memory(const struct ggml_side *s, const struct tg_gen_case *cb,
                                    const struct tg_ggml_graph *gb) {
    const struct tg_graph *a = s->c->graph, *b = cb->graph;
    if (!slots_fit(s, cb, gb)) return false;
    for (int j = 0; j < b->n_leafs; j++) {
        const struct tg_tensor *lb = b->leafs[j], *la = a->leafs[j];
        bool needs_plan = !lb->view_src && !lb->buffer && !lb->data;
        if (needs_plan && (la->view_src || la->buffer || la->data)) return true;
    }
    return false;
}

/* ggml_gallocr_needs_realloc compares each node's and each source's size with
 * the plan, never a leaf's: a leaf of b the plan places that no node reads,
 * larger than a's leaf at its position (ggml then replays a's plan). */
static bool unread_leaf_grew(const struct tg_graph *a, const struct tg_graph *b) {
    if (!same_shape(a, b)) return false;
    for (int j = 0; j < b->n_leafs; j++) {
        const struct tg_tensor *lb = b->leafs[j], *la = a->leafs[j];
        bool planned = !lb->view_src && !lb->buffer && !lb->data && !la->view_src && !la->buffer && !la->data;
        if (planned && tg_nbytes(lb) > tg_nbytes(la) && !read_after(b, -1, lb)) return true;
    }
    return false;
}

enum tg_status tg_ggml_alloc_sequence_compare(const struct tg_ggml_case_source *src, enum tg_ggml_sequence seq,
                                              uint64_t salt, const struct tg_ggml_alloc_options *opts,
                                              struct tg_ggml_alloc_result *res) {
    const struct tg_ggml_alloc_options none = {.tg_fault = TG_FAULT_NONE};
    const struct tg_ggml_alloc_options *o = opts ? opts : &none;
    memset(res, 0, sizeof *res);
    res->rounds = 1;
    struct sequence_ggml q;
    memset(&q, 0, sizeof q);
    struct ggml_side *s = &q.a;
    struct tg_gen_case *ta = NULL, *tb = NULL;
    tg_gallocr *galloc = NULL;
    struct placement *where_a = NULL, *where_b = NULL;
    int *eff = NULL;
    struct tg_oracle_report rep = {0}, tg_rep = {0};
    char message[300] = "";

    /* ggml: a reserved and bound, then b bound */
    enum tg_status st = sequence_cases(src, seq, salt, &s->c, &q.cb);
    struct tg_gen_case *c = s->c;
    if (st != TG_OK) goto done;
    for (int k = 0; k < c->n_bufts; k++) {
        const struct tg_gen_buft *b = &c->bufts_storage[k];
        enum ggml_op pad_op = b->pad_bytes && b->padded_op < TG_OP_COUNT ? tg_ggml_op(b->padded_op) : GGML_OP_COUNT;
        tg_ggml_buft_init(&s->types[k], b->name, b->alignment, b->max_size, pad_op, b->pad_bytes, false);
    }
    tg_ggml_buft_init(&s->external, "external", 64, 0, GGML_OP_COUNT, 0, false);
    for (int id = 0; id < c->n_ids; id++) s->ids[id] = &s->types[type_index(c, id)].buft;
    struct tg_ggml_import_options io = {.raw_output_flags = o->raw_flags_import, .external_buft = external_type, .user = s};
    if ((st = tg_ggml_import(c->graph, &io, &s->gg)) != TG_OK || (st = tg_ggml_import(q.cb->graph, &io, &q.gb)) != TG_OK) goto done;
    bool finished = tg_ggml_catch(plan_in_ggml, s, message, sizeof message), lost_memory = false;
    if (finished && s->planned) {
        int from[TG_GEN_MAX_BUFTS] = {0};
        sequence_chunk_sizes(s, from);
        const struct tg_graph *g = c->graph;
        where_a = calloc((size_t)(g->n_nodes + g->n_leafs) + 1, sizeof *where_a);
        if (!where_a) {
            st = tg_fail(TG_ERR_ALLOC, "out of host memory");
            goto done;
        }
        for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
            where_a[u] = placement_latest(s, &s->gg, u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes]);
        }
        for (int k = 0; k < c->n_bufts; k++) from[k] = s->types[k].n_made;
        lost_memory = unread_leaf_lost_memory(s, q.cb, &q.gb);
        finished = !lost_memory && tg_ggml_catch(sequence_bind_b, &q, message, sizeof message);
        if (finished) sequence_chunk_sizes(s, from);
    }
    bool leaf_grew = unread_leaf_grew(c->graph, q.cb->graph);
    if (lost_memory) {
        res->classes |= 1u << TG_GGML_UNREAD_LEAF_GREW;
        snprintf(res->detail, sizeof res->detail, "ggml would bind a leaf of graph b through buffer id -1 (SIGSEGV)");
    } else if (!finished && s->planned && leaf_grew && strstr(message, "ggml_backend_buffer_get_alloc_size(buffer, tensor) <=")) {
        res->classes |= 1u << TG_GGML_UNREAD_LEAF_GREW;
        snprintf(res->detail, sizeof res->detail, "ggml aborted binding graph b: %s", message);
    } else if (!finished) {
        note_abort(res, message, hash_may_fill(&s->gg) || hash_may_fill(&q.gb));
    } else if (!s->planned) {
        res->classes |= 1u << TG_GGML_UNEXPLAINED;
        snprintf(res->detail, sizeof res->detail, "ggml_gallocr could not plan graph a");
    }
    res->ggml_refused = finished && s->planned && !q.b_bound;

    /* tgsched: the same calls on its own copies */
    if ((st = sequence_cases(src, seq, salt, &ta, &tb)) != TG_OK) goto done;
    galloc = tg_gallocr_new_n(ta->bufts, ta->n_ids);
    if (!galloc) {
        st = tg_fail(TG_ERR_ALLOC, "out of host memory");
        goto done;
    }
    tg_gallocr_set_policy(galloc, TG_PLAN_GGML);
    tg_gallocr_set_fault(galloc, o->tg_fault);
    enum tg_status tst = tg_gallocr_reserve_n(galloc, ta->graph, ta->node_ids, ta->leaf_ids);
    if (tst == TG_OK) tst = tg_gallocr_alloc_graph(galloc, ta->graph);
    struct tg_gallocr_stats before;
    tg_gallocr_get_stats(galloc, &before);
    if (tst == TG_OK) {
        struct tg_oracle_snapshot snap;
        struct tg_oracle_liveness lv;
        if ((st = tg_oracle_snapshot_take(tb->graph, &snap)) != TG_OK) goto done;
        st = tg_oracle_liveness_build(tb->graph, &snap, tb->node_ids, tb->leaf_ids, &lv);
        if (st != TG_OK) {
            tg_oracle_snapshot_free(&snap);
            goto done;
        }
        tst = tg_gallocr_alloc_graph(galloc, tb->graph);
        if (tst == TG_OK) st = tg_oracle_check(tb->graph, &lv, &snap, tb->bufts, tb->n_ids, &tg_rep);
        tg_oracle_liveness_free(&lv);
        tg_oracle_snapshot_free(&snap);
        if (st != TG_OK) goto done;
    }
    struct tg_gallocr_stats after;
    tg_gallocr_get_stats(galloc, &after);
    res->tg_replayed = tst == TG_OK && after.n_plans == before.n_plans;
    res->tg_refused = tst == TG_ERR_NEEDS_RESERVE && ta->n_ids > 1;
    if ((tst != TG_OK && !res->tg_refused) || tg_rep.n) {
        res->classes |= 1u << TG_GGML_UNEXPLAINED;
        snprintf(res->detail, sizeof res->detail, "tgsched's binding of graph b (%s) failed or broke a rule: %s",
                 tg_ggml_sequence_name(seq), tg_rep.n ? tg_rep.items[0].message : tg_last_error());
    }
    for (int id = 0; id < ta->n_ids; id++) res->tg_size[id] = tg_gallocr_get_buffer_size(galloc, id);
    if (!finished || !s->planned || !q.b_bound) {
        /* ggml refuses b only with several ids (it cannot plan them again by itself): so does tgsched, unless
         * b matches a's plan slot by slot, which ggml's weaker check would have found too */
        if (res->ggml_refused && !res->tg_refused) {
            res->classes |= 1u << TG_GGML_UNEXPLAINED;
            snprintf(res->detail, sizeof res->detail, "ggml refused graph b (%s), tgsched bound it", tg_ggml_sequence_name(seq));
        }
        goto done;
    }

    /* ggml's binding of b: replayed or planned again, judged by the oracle */
    const struct tg_graph *gb = q.cb->graph;
    int nb = gb->n_nodes + gb->n_leafs;
    where_b = calloc((size_t)nb + 1, sizeof *where_b);
    eff = calloc((size_t)gb->n_nodes + 1, sizeof *eff);
    if (!where_b || !eff) {
        st = tg_fail(TG_ERR_ALLOC, "out of host memory");
        goto done;
    }
    for (int u = 0; u < nb; u++) where_b[u] = placement_latest(s, &q.gb, u < gb->n_nodes ? gb->nodes[u] : gb->leafs[u - gb->n_nodes]);
    res->ggml_replayed = ggml_replays(s, q.cb, &q.gb);
    for (int id = 0; id < c->n_ids; id++) res->ggml_size[id] = ggml_gallocr_get_buffer_size(s->galloc, id);
    struct ggml_side sb = *s; /* b's view of the same allocator and buffer types */
    sb.c = q.cb;
    sb.gg = q.gb;
    unsigned triggers = 0;
    find_triggers(&sb, where_b, &triggers, eff);
    for (int k = 0; k < c->n_bufts; k++) res->multi_chunk |= s->types[k].n_made > 1;
    if ((st = judge_ggml_plan(&sb, where_b, eff, &rep)) != TG_OK) goto done;
    if (sb.bind_failure[0]) {
        res->classes |= 1u << TG_GGML_UNEXPLAINED;
        snprintf(res->detail, sizeof res->detail, "ggml's binding of graph b: [out of buffer bounds] %s", sb.bind_failure);
        goto done;
    }
    res->n_violations = rep.n;
    bool tg_changed = !res->tg_replayed; /* tgsched found b's slots differ from a's (or a size grew) */
    if (rep.n) {
        snprintf(res->detail, sizeof res->detail, "ggml's binding of graph b (%s, %s): [%s] %s", tg_ggml_sequence_name(seq),
                 res->ggml_replayed ? "a's plan" : "planned again", tg_oracle_rule_name(rep.items[0].rule), rep.items[0].message);
        unsigned excuses = triggers & ~(1u << TG_GGML_INPLACE_OTHER_BUFFER);
        if (only_other_buffer_inplace(&rep)) excuses |= triggers & (1u << TG_GGML_INPLACE_OTHER_BUFFER);
        if (res->ggml_replayed && tg_changed) excuses = 1u << TG_GGML_STALE_PLAN;
        if (res->ggml_replayed && leaf_grew) excuses = 1u << TG_GGML_UNREAD_LEAF_GREW;
        res->classes |= excuses ? excuses : 1u << TG_GGML_UNEXPLAINED;
    } else if (res->ggml_replayed && tg_changed) {
        res->classes |= 1u << TG_GGML_REPLAY_OTHER_GRAPH;
    }
    if (res->tg_refused || rep.n || (res->ggml_replayed && tg_changed)) goto done;

    /* the same decision: the bindings compared offset for offset */
    const tg_buffer *tg_of[TG_GEN_MAX_BUFTS][TG_GGML_BUFT_MAX_CHUNKS] = {{0}};
    for (int u = 0; u < nb; u++) {
        const struct tg_tensor *t = u < tb->graph->n_nodes ? tb->graph->nodes[u] : tb->graph->leafs[u - tb->graph->n_nodes];
        const struct placement *p = &where_b[u];
        bool ours = planned_by(galloc, t);
        bool differs = (p->type >= 0) != ours;
        if (ours && !differs) {
            res->n_tensors_compared++;
            const tg_buffer **mapped = &tg_of[p->type][p->chunk];
            differs = (*mapped && *mapped != t->buffer) ||
                      (size_t)((char *)t->data - (char *)tg_buffer_get_base(t->buffer)) != p->offset;
            if (!*mapped) *mapped = t->buffer;
        }
        if (differs && !res->n_offsets_differ++) {
            snprintf(res->detail, sizeof res->detail, "graph b (%s), tensor '%s': ggml %s, tgsched %s", tg_ggml_sequence_name(seq),
                     t->name, res->ggml_replayed ? "bound a's plan" : "planned again",
                     res->tg_replayed ? "bound a's plan" : "planned again");
        }
    }
    if (res->n_offsets_differ) {
        bool at_cap = false, chunks = false;
        for (int k = 0; k < c->n_bufts; k++) {
            chunks |= s->n_chunks[k] > 1;
            at_cap |= s->n_chunks[k] >= TG_GGML_CHUNK_CAP_COUNT;
        }
        if (at_cap) triggers |= 1u << TG_GGML_CHUNK_CAP;
        else if (chunks) triggers |= 1u << TG_GGML_CHUNK_BEST_FIT;
        res->classes |= triggers ? triggers : 1u << TG_GGML_UNEXPLAINED;
    }
done:
    res->equal = st == TG_OK && !res->n_offsets_differ && !((res->classes >> TG_GGML_UNEXPLAINED) & 1);
    tg_oracle_report_free(&rep);
    tg_oracle_report_free(&tg_rep);
    free(where_a);
    free(where_b);
    free(eff);
    tg_gallocr_free(galloc);
    tg_gen_case_free(ta);
    tg_gen_case_free(tb);
    tg_ggml_graph_free(&q.gb);
    tg_gen_case_free(q.cb);
    ggml_side_free(s);
    return st;
}

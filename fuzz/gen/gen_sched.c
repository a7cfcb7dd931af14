/* Scheduler cases (fuzz_sched and the scheduler properties): a header of
 * TG_GEN_SCHED_HEADER_BYTES decodes to a backend setup, weight placement and a
 * sequence of scheduler calls; the rest of the bytes is a computable graph
 * (gen_case.c) with three variants.  The runner executes the calls on one
 * scheduler and checks every step: the scheduler's checkers after each
 * allocation, bit-identical results against the CPU alone after each compute,
 * set/get round trips through device memory, reserve never undersized, and the
 * misuse the API must refuse (allocating an allocated graph).  Computes run
 * back to back as llama.cpp's do (values set and results fetched
 * asynchronously, compared at the next synchronize), and everything runs
 * under the sim devices' race detector with jittered queues.  With flags bit
 * 4 the calls run a second time, each graph reading a tensor it does not
 * list (in a device's or the CPU's buffer, or in context memory; itself or a
 * view of it) in place of one of its sources. */
#include "tg-gen.h"

#include "tg-cpu.h"
#include "tg-oracle-sched.h"
#include "tg-sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUILDS (1 + 2 * TG_GEN_SCHED_MAX_CALLS) /* the first, one per switch, one per reserve */
#define MAX_PINS TG_GEN_SCHED_MAX_CALLS
#define MAX_PENDING TG_GEN_SCHED_MAX_CALLS

/* ---- decoding --------------------------------------------------------------------------- */

struct header_reader {
    const uint8_t *p;
    size_t n, at;
};

static uint8_t hb(struct header_reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

void tg_gen_sched_decode(const uint8_t *data, size_t size, struct tg_gen_sched_case *out) {
    memset(out, 0, sizeof *out);
    struct header_reader r = {data, size < TG_GEN_SCHED_HEADER_BYTES ? size : TG_GEN_SCHED_HEADER_BYTES, 0};
    out->n_sims = hb(&r) % (TG_GEN_SCHED_MAX_SIMS + 1);
    uint8_t flags = hb(&r);
    out->parallel = flags & 1;
    out->op_offload = (flags >> 1) & 1;
    out->bound_views = (flags >> 2) & 1;
    out->kv_moves = (flags >> 3) & 1;
    /* bits 4-7, unread before them: the outside run comes after the run the
     * input always made, so no input loses what it did */
    out->outside = (flags >> 4) & 1;
    out->outside_kind = (flags >> 5) & 3;
    out->outside_weights = (flags >> 7) & 1;
    out->placement = hb(&r);
    out->n_calls = 1 + hb(&r) % TG_GEN_SCHED_MAX_CALLS;
    for (int i = 0; i < out->n_calls; i++) {
        out->calls[i].kind = (enum tg_gen_sched_call)(hb(&r) % TG_GEN_SCHED_CALL_COUNT);
        out->calls[i].a = hb(&r);
        out->calls[i].b = hb(&r);
    }
    r.at = TG_GEN_SCHED_SIMS_AT; /* the sims' bytes sit at a fixed place */
    for (int i = 0; i < out->n_sims; i++) {
        struct tg_gen_sched_sim *s = &out->sims[i];
        uint8_t b = hb(&r);
        s->alignment = (size_t)32 << (b % 4);
        s->alloc_pad = (b >> 2) & 1;
        s->share_host = ((b >> 3) & 7) == 0;
        s->synchronous = (b >> 6) & 1;
        uint64_t mask = 0;
        for (int k = 0; k < 8; k++) mask = mask << 8 | hb(&r);
        s->op_mask = mask;
        /* bit 7, only with op offload (which claimed nothing before this bit had a
         * meaning, so older inputs lose no case): the sim claims ops on host
         * weights from a batch of 1, 2, 4 or 8 rows, the mask's top bits say */
        if (out->op_offload && (b >> 7)) s->offload_min_batch = (int64_t)1 << (mask >> 62);
    }
    r.at = TG_GEN_SCHED_VARIANTS_AT;
    out->other_shift = 1 + hb(&r) % 16;
    out->rewire_salt = hb(&r);
    out->resize_at = hb(&r);
    out->resize_to = hb(&r);
    size_t header = size < TG_GEN_SCHED_HEADER_BYTES ? size : TG_GEN_SCHED_HEADER_BYTES;
    out->graph = data + header;
    out->graph_n = size - header;
}


const char *tg_gen_sched_call_name(enum tg_gen_sched_call k) {
    static const char *names[TG_GEN_SCHED_CALL_COUNT] = {"compute", "alloc",   "reset",   "reserve", "pin",
                                                         "set_get", "rebuild", "other",   "rewired", "resized"};
    return k < TG_GEN_SCHED_CALL_COUNT ? names[k] : "?";
}

static bool sim_supports(const struct tg_gen_sched_sim *s, int op) { return (s->op_mask >> (op % 64)) & 1; }

/* ---- text ----------------------------------------------------------------------------- */

struct text {
    char *s;
    size_t n, cap;
};

static void put(struct text *t, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k >= 0 && t->n + (size_t)k + 1 > t->cap) {
        size_t cap = (t->cap ? t->cap * 2 : 1024) + (size_t)k;
        char *grown = realloc(t->s, cap);
        if (grown) {
            t->s = grown;
            t->cap = cap;
        }
    }
    if (k >= 0 && t->n + (size_t)k + 1 <= t->cap) {
        vsnprintf(t->s + t->n, (size_t)k + 1, fmt, again);
        t->n += (size_t)k;
    }
    va_end(again);
}

char *tg_gen_sched_case_to_text(const uint8_t *data, size_t size) {
    struct tg_gen_sched_case sc;
    tg_gen_sched_decode(data, size, &sc);
    struct text t = {0};
    put(&t, "# fuzz_sched case: cpu + %d sim device(s), pipeline copies %d, op offload %s, views of weights %s%s, "
        "weights placed by %u\n", sc.n_sims, sc.parallel ? 4 : 1, sc.op_offload ? "on" : "off",
        sc.bound_views ? "bound" : "left to the scheduler", sc.kv_moves ? " and moved each token" : "", sc.placement);
    if (sc.outside) {
        static const char *kinds[4] = {"a tensor in a buffer", "a view of a tensor in a buffer",
                                       "a tensor in context memory", "a view of a tensor in context memory"};
        put(&t, "# then run again with a node source swapped for %s outside the graph%s\n", kinds[sc.outside_kind],
            sc.outside_kind < 2 ? (sc.outside_weights ? " (usage weights)" : " (usage any)") : "");
    }
    for (int i = 0; i < sc.n_sims; i++) {
        const struct tg_gen_sched_sim *s = &sc.sims[i];
        put(&t, "#   sim%d: alignment %zu, alloc pad %d, shares the host buffer type: %s, %s, offloads from batch "
            "%lld; ops:", i, s->alignment, s->alloc_pad ? 64 : 0, s->share_host ? "yes" : "no",
            s->synchronous ? "synchronous" : "async", (long long)s->offload_min_batch);
        for (int op = 1; op < TG_OP_COUNT; op++) {
            if (sim_supports(s, op)) put(&t, " %s", tg_op_name((enum tg_op)op));
        }
        put(&t, "\n");
    }
    put(&t, "# calls:");
    for (int i = 0; i < sc.n_calls; i++) {
        put(&t, " %s", tg_gen_sched_call_name(sc.calls[i].kind));
        if (sc.calls[i].kind == TG_GEN_SCHED_PIN) put(&t, "(node %%n=%u -> backend %u)", sc.calls[i].a, sc.calls[i].b);
        if (sc.calls[i].kind == TG_GEN_SCHED_SET_GET) put(&t, "(tensor %%n=%u)", sc.calls[i].a);
    }
    put(&t, "\n# variants: other = graph bytes shifted by %zu, rewired = one edge moved (salt %u), resized = byte %u "
        "set to %u\n# the graph:\n", sc.other_shift, sc.rewire_salt, sc.resize_at, sc.resize_to);
    struct tg_gen_options opts = tg_gen_target_options("sched");
    struct tg_gen_case *c = NULL;
    if (tg_gen_case_from_bytes(sc.graph, sc.graph_n, &opts, &c) == TG_OK) {
        char *g = tg_gen_case_to_text(c);
        if (g) put(&t, "%s", g);
        free(g);
        tg_gen_case_free(c);
    }
    return t.s;
}

/* ---- running -------------------------------------------------------------------------- */

enum variant { V_MAIN, V_OTHER, V_REWIRED, V_RESIZED, V_COUNT };

/* With kv_moves, the windows of weights (views whose root is a weight) sit at
 * one of KV_POSITIONS offsets, the token's: as llama.cpp's KV-cache views move
 * with n_past while the graph keeps its shape. */
#define KV_POSITIONS 4

/* In the outside run (flags bit 4): the tensor a node reads in place of one
 * of its sources, not in the graph, as a weight the caller never listed or
 * memory a context owns.  Its values depend on the token's window position
 * only, so the reference of that position holds the same; a build's come
 * with each compute, in order with the work on its memory's queue. */
struct outside {
    struct tg_tensor *read, *root; /* read: root, or a view of it one row in */
    struct tg_context *mem;        /* context-memory kinds: owns root and view */
    tg_buffer *buf;                /* buffer kinds: room for root at two places */
    size_t span;                   /* bytes of one place */
    int place;                     /* which of the two the root is at */
    int dev;                       /* the backend whose memory holds it (-1: the reference's CPU buffer) */
    void *values, *poison;         /* root's bytes, and what the place it leaves gets */
};

/* The CPU-only reference of one variant: inputs filled by the oracle, values
 * saved before compute reuses their memory, and the results. */
struct reference {
    bool decoded, computed_once, computable;
    struct tg_gen_case *c;
    struct outside out;
    tg_gallocr *galloc;
    void **leaf_values, **input_values, **results;
};

/* Where a build's weights (the external leafs the generator bound in the
 * case's host buffer) live: each on the backend the salt picks for it (the
 * CPU may keep it in the case's buffer, or take a fresh host buffer), in
 * buffers of the given usage.  The next token may place them otherwise: in
 * other buffers, of other types, on other backends, with another usage. */
struct placement {
    uint8_t salt;
    enum tg_buffer_usage usage; /* WEIGHTS or ANY */
    bool fresh_host;            /* CPU weights move out of the case's buffer into a new one */
};

/* One build of a variant handed to the scheduler, its weights placed. */
struct build {
    enum variant v;
    int kv_pos; /* the token's window position (0 without kv_moves) */
    struct tg_gen_case *c;
    struct outside out; /* the outside run's (root NULL otherwise) */
    struct placement placement;
    void **home; /* per leaf: its address in the case's buffer (weights only) */
    tg_buffer *moved[TG_GEN_SCHED_MAX_SIMS + 1]; /* per backend (the CPU last); older ones kept until the end */
    tg_buffer *retired[TG_GEN_SCHED_MAX_CALLS * (TG_GEN_SCHED_MAX_SIMS + 1)];
    int n_retired;
};

/* A compute whose results are on their way (fetched asynchronously). */
struct pending {
    int build;
    void **results; /* per node of the graph; NULL where the reference has none */
};

struct run {
    struct tg_gen_sched_case sc;
    struct tg_gen_options opts;
    uint8_t *resized_bytes;
    tg_backend *backends[TG_GEN_SCHED_MAX_SIMS + 1]; /* the last: the CPU, watched */
    int n_backends;
    tg_sim_race *race;
    tg_sched *s;
    struct reference refs[V_COUNT][KV_POSITIONS]; /* per variant and window position */
    int kv_pos; /* the position of the token being built (kv_moves) */
    struct build builds[MAX_BUILDS];
    int n_builds;
    int cur;       /* build the calls act on */
    int allocated; /* build the scheduler holds allocated, -1 none */
    struct tg_oracle_sched_pin pins[MAX_PINS];
    int n_pins;
    /* after a successful reserve (no pins): the sizes the next alloc of that variant must not exceed */
    bool reserve_pending;
    enum variant reserve_variant;
    struct placement reserve_placement; /* weights elsewhere make another schedule: no promise then */
    int reserve_outside_dev;            /* so does an outside tensor elsewhere (a reset moves weights only) */
    size_t reserved[TG_GEN_SCHED_MAX_SIMS + 1];
    struct pending pending[MAX_PENDING];
    int n_pending;
    struct tg_gen_sched_stats *stats;
    char *failure;
    size_t failure_len;
    bool failed;
    bool trace; /* TG_GEN_TRACE set: each call is printed to stderr */
    bool outside_run; /* each graph reads a tensor outside it (the second run of flags bit 4) */
};

static bool failf(struct run *r, const char *fmt, ...) {
    if (r->failed) return false;
    r->failed = true;
    va_list ap;
    va_start(ap, fmt);
    if (r->failure && r->failure_len) vsnprintf(r->failure, r->failure_len, fmt, ap);
    va_end(ap);
    return false;
}

/* Moves every window of a weight of c (a view whose root the generator bound,
 * node or leaf) to the offset of window position pos, keeping its shape: one
 * row further per position, wrapped to stay inside the root. */
static void move_windows(struct tg_gen_case *c, int pos, struct tg_gen_sched_stats *stats) {
    struct tg_graph *g = c->graph;
    for (int i = 0; pos && i < g->n_nodes + g->n_leafs; i++) {
        struct tg_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        const struct tg_tensor *root = t->view_src;
        if (!root || !root->buffer || root->buffer != c->external_buffer) continue;
        size_t extent = tg_nbytes(t), room = tg_nbytes(root) - extent, elem = tg_type_size(t->type);
        if (room < elem) continue;
        size_t row = t->nb[1] > elem ? t->nb[1] : elem;
        size_t offs = (t->view_offs + (size_t)pos * row) % (room + 1) / elem * elem;
        if (offs == t->view_offs) continue;
        t->view_offs = offs;
        if (t->buffer) t->data = (uint8_t *)root->data + offs; /* bound with its root: follows it */
        if (stats) stats->windows_moved++;
    }
}

static enum tg_status decode_variant(struct run *r, enum variant v, int kv_pos, struct tg_gen_sched_stats *stats,
                                     struct tg_gen_case **out) {
    const uint8_t *bytes = r->sc.graph;
    size_t n = r->sc.graph_n;
    if (v == V_OTHER) {
        size_t shift = r->sc.other_shift < n ? r->sc.other_shift : n;
        bytes += shift;
        n -= shift;
    } else if (v == V_RESIZED) {
        bytes = r->resized_bytes;
    }
    enum tg_status st = tg_gen_case_from_bytes(bytes, n, &r->opts, out);
    if (st == TG_OK && v == V_REWIRED) tg_gen_case_rewire_edge(*out, r->sc.rewire_salt);
    if (st == TG_OK) move_windows(*out, kv_pos, stats);
    return st;
}

static void outside_free(struct outside *o) {
    tg_buffer_free(o->buf);
    tg_context_free(o->mem);
    free(o->values);
    free(o->poison);
}

/* Binds o's root at its place in its buffer, and its view after it. */
static enum tg_status outside_bind(struct outside *o) {
    enum tg_status st = tg_tensor_bind(o->root, o->buf, (char *)tg_buffer_get_base(o->buf) + (size_t)o->place * o->span);
    if (st == TG_OK && o->read != o->root) st = tg_tensor_view_bind(o->read);
    return st;
}

/* In the outside run, c's node source that tg_gen_pick_outside_source picks
 * (the same in a build and its reference: same bytes, same salt) becomes o's
 * tensor of the same type and shape: in a fresh buffer of backend dev with
 * the given usage (dev < 0: a CPU buffer, the reference's), or in memory a
 * context owns, as the case's flags say.  Values for window position kv_pos;
 * the reference's are written at once. */
static bool swap_in_outside(struct run *r, struct tg_gen_case *c, struct outside *o, int dev, enum tg_buffer_usage usage,
                            int kv_pos) {
    int node, slot;
    if (!r->outside_run || !tg_gen_pick_outside_source(c->graph, r->sc.rewire_salt, &node, &slot)) return true;
    const struct tg_tensor *src = c->graph->nodes[node]->src[slot];
    o->dev = dev;
    const bool view = r->sc.outside_kind & 1, in_context = r->sc.outside_kind & 2;
    const int64_t n = tg_nelements(src) + (view ? src->ne[0] : 0); /* a view sits one row into its root */
    size_t bytes = tg_row_size(src->type, n);
    struct tg_context *ctx = c->ctx;
    if (in_context) {
        o->mem = tg_context_new((struct tg_context_params){.mem_size = 2 * bytes + 1024, .no_alloc = false});
        if (!(ctx = o->mem)) return failf(r, "outside context: %s", tg_last_error());
    }
    o->root = view ? tg_new_tensor_1d(ctx, src->type, n) : tg_new_tensor(ctx, src->type, TG_MAX_DIMS, src->ne);
    o->read = !view || !o->root ? o->root
                                : tg_view_4d(ctx, o->root, src->ne[0], src->ne[1], src->ne[2], src->ne[3], src->nb[1],
                                             src->nb[2], src->nb[3], src->nb[1]);
    if (!o->read) return failf(r, "outside tensor: %s", tg_last_error());
    tg_set_name(o->root, "outside");
    if (view) tg_set_name(o->read, "outside (view)");
    o->values = calloc(1, bytes + 1);
    o->poison = calloc(1, bytes + 1);
    if (!o->values || !o->poison) return failf(r, "out of host memory");
    for (size_t i = 0; src->type == TG_TYPE_F32 && i + 4 <= bytes; i += 4) {
        /* in [0.5, 1), which every op takes; i32 sources stay 0, a valid row */
        float f = 0.5f + (float)((i / 4 + (size_t)kv_pos) % 8) / 16.0f, nan = __builtin_nanf("");
        memcpy((char *)o->values + i, &f, 4);
        memcpy((char *)o->poison + i, &nan, 4);
    }
    if (!in_context) {
        tg_buffer_type *buft = dev < 0 ? tg_cpu_buffer_type() : tg_backend_get_default_buffer_type(r->backends[dev]);
        size_t align = tg_buft_get_alignment(buft);
        o->span = (tg_buft_get_alloc_size(buft, o->root) + align - 1) / align * align;
        o->buf = tg_buft_alloc_buffer(buft, 2 * o->span);
        if (!o->buf) return failf(r, "outside buffer: %s", tg_last_error());
        tg_buffer_set_usage(o->buf, usage);
        if (outside_bind(o) != TG_OK) return failf(r, "binding the outside tensor: %s", tg_last_error());
    }
    if (dev < 0) memcpy(o->root->data, o->values, bytes);
    c->graph->nodes[node]->src[slot] = o->read;
    return true;
}

/* Writes o's values where its root is now, in order with the work on that memory's queue. */
static void outside_set(struct run *r, struct outside *o) {
    if (o->buf) tg_gen_set_async(o->root, o->values, r->backends[r->n_backends - 1]);
    else memcpy(o->root->data, o->values, tg_nbytes(o->root)); /* host memory, no compute on it in flight */
}

/* Moves o's root (and view) to its buffer's other place, poisoning the one it
 * leaves: a schedule or copy still pointing there reads NaNs.  Context memory
 * stays where its context put it. */
static bool outside_move(struct run *r, struct outside *o) {
    if (!o->buf) return true;
    tg_gen_set_async(o->root, o->poison, r->backends[r->n_backends - 1]);
    o->place ^= 1;
    if (outside_bind(o) != TG_OK) return failf(r, "moving the outside tensor: %s", tg_last_error());
    r->stats->outside_moved++;
    return true;
}

/* Decodes variant v's reference at window position kv_pos (the scheduler's
 * graph size must fit it). */
static bool reference_decoded(struct run *r, enum variant v, int kv_pos) {
    struct reference *ref = &r->refs[v][kv_pos];
    if (ref->decoded) return !r->failed;
    ref->decoded = true;
    if (decode_variant(r, v, kv_pos, NULL, &ref->c) != TG_OK) return failf(r, "decoding variant %d: %s", v, tg_last_error());
    return swap_in_outside(r, ref->c, &ref->out, -1, TG_BUFFER_USAGE_ANY, kv_pos);
}

/* Computes variant v on the CPU alone, once, at its first compute: inputs
 * filled by the oracle and saved before the compute reuses their memory. */
static bool reference_computed(struct run *r, enum variant v, int kv_pos) {
    struct reference *ref = &r->refs[v][kv_pos];
    if (!reference_decoded(r, v, kv_pos)) return false;
    if (ref->computed_once) return ref->computable;
    ref->computed_once = true;
    struct tg_graph *g = ref->c->graph;
    if (!tg_gen_graph_cpu_computable(g) || g->n_nodes == 0) return false; /* planned and checked, never computed */
    ref->galloc = tg_gallocr_new(tg_cpu_buffer_type());
    if (!ref->galloc || tg_gallocr_alloc_graph(ref->galloc, g) != TG_OK || tg_oracle_fill_inputs(g, 1) != TG_OK)
        return failf(r, "reference: %s", tg_last_error());
    ref->leaf_values = calloc((size_t)g->n_leafs + 1, sizeof *ref->leaf_values);
    ref->input_values = calloc((size_t)g->n_nodes + 1, sizeof *ref->input_values);
    ref->results = calloc((size_t)g->n_nodes + 1, sizeof *ref->results);
    if (!ref->leaf_values || !ref->input_values || !ref->results) return failf(r, "out of host memory");
    for (int j = 0; j < g->n_leafs; j++) {
        if (!g->leafs[j]->view_src && g->leafs[j]->data) ref->leaf_values[j] = tg_gen_tensor_bytes(g->leafs[j]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if ((g->nodes[i]->flags & TG_FLAG_INPUT) && !g->nodes[i]->view_src) ref->input_values[i] = tg_gen_tensor_bytes(g->nodes[i]);
    }
    if (tg_cpu_compute_graph(g, 1) != TG_OK) return failf(r, "reference compute: %s", tg_last_error());
    for (int i = 0; i < g->n_nodes; i++) {
        if (tg_gen_node_is_result(g, i)) ref->results[i] = tg_gen_tensor_bytes(g->nodes[i]);
    }
    ref->computable = true;
    return true;
}

static void reference_free(struct reference *ref) {
    if (ref->c) {
        for (int j = 0; ref->leaf_values && j < ref->c->graph->n_leafs; j++) free(ref->leaf_values[j]);
        for (int i = 0; i < ref->c->graph->n_nodes; i++) {
            if (ref->input_values) free(ref->input_values[i]);
            if (ref->results) free(ref->results[i]);
        }
    }
    free(ref->leaf_values);
    free(ref->input_values);
    free(ref->results);
    tg_gallocr_free(ref->galloc);
    tg_gen_case_free(ref->c);
    outside_free(&ref->out);
}

/* Which backend external leaf j lives on under salt. */
static int backend_of_weight(const struct run *r, uint8_t salt, int j) {
    uint64_t x = ((uint64_t)salt + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(j + 1) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (int)(x % (uint64_t)r->n_backends);
}

/* A weight: a leaf that is no view, bound by the generator (in the case's
 * buffer) or by an earlier placement (in one of the build's buffers). */
static bool is_weight(const struct build *b, const struct tg_tensor *t) {
    if (t->view_src || !t->buffer) return false;
    if (t->buffer == b->c->external_buffer) return true;
    for (int d = 0; d < TG_GEN_SCHED_MAX_SIMS + 1; d++) {
        if (b->moved[d] && t->buffer == b->moved[d]) return true;
    }
    return false;
}

/* Binds the weights of build b where placement p says, in fresh buffers (the
 * ones they were in are kept until the run ends: the scheduler may have
 * copies in flight).  Views of the graph whose root moved are unbound, as a
 * caller moving weights would do: the allocator binds them again.  Their
 * values come with each compute. */
static bool place_weights(struct run *r, struct build *b, struct placement p) {
    struct tg_graph *g = b->c->graph;
    size_t need[TG_GEN_SCHED_MAX_SIMS + 1] = {0};
    for (int j = 0; j < g->n_leafs; j++) {
        const struct tg_tensor *t = g->leafs[j];
        int dev = backend_of_weight(r, p.salt, j);
        bool stays = dev == r->n_backends - 1 && !p.fresh_host;
        if (!is_weight(b, t) || stays) continue;
        need[dev] += tg_buft_get_alloc_size(tg_backend_get_default_buffer_type(r->backends[dev]), t) + 512;
    }
    tg_buffer *fresh[TG_GEN_SCHED_MAX_SIMS + 1] = {0};
    for (int dev = 0; dev < r->n_backends; dev++) {
        if (!need[dev]) continue;
        fresh[dev] = tg_backend_alloc_buffer(r->backends[dev], need[dev]);
        if (!fresh[dev]) return failf(r, "weights buffer on %s: %s", tg_backend_name(r->backends[dev]), tg_last_error());
        tg_buffer_set_usage(fresh[dev], p.usage);
    }
    if (b->c->external_buffer) tg_buffer_set_usage(b->c->external_buffer, p.usage);
    size_t used[TG_GEN_SCHED_MAX_SIMS + 1] = {0};
    bool moved_any = false;
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        int dev = backend_of_weight(r, p.salt, j);
        if (!is_weight(b, t)) continue;
        tg_buffer *to = fresh[dev];
        if (!to) to = b->c->external_buffer; /* stays on the CPU, in the case's buffer */
        if (t->buffer == to) continue;
        char *at = tg_buffer_get_base(to);
        if (to != b->c->external_buffer) {
            size_t align = tg_buffer_get_alignment(to);
            used[dev] = (used[dev] + align - 1) / align * align;
            at += used[dev];
            used[dev] += tg_buffer_get_alloc_size(to, t);
        } else {
            at = b->home[j];
        }
        if (tg_tensor_bind(t, to, at) != TG_OK) return failf(r, "binding a weight: %s", tg_last_error());
        moved_any = true;
    }
    for (int dev = 0; dev < r->n_backends; dev++) {
        if (!fresh[dev]) continue;
        if (b->moved[dev]) b->retired[b->n_retired++] = b->moved[dev];
        b->moved[dev] = fresh[dev];
    }
    /* leafs too: a view made as ggml_view_tensor makes it (op none) is a leaf.
     * With bound_views each is bound where its weight now is (a fresh decode
     * leaves them unbound), as ggml_view_* binds a view of a KV cache. */
    for (int i = 0; (moved_any || r->sc.bound_views) && i < g->n_nodes + g->n_leafs; i++) {
        struct tg_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (t->view_src && is_weight(b, t->view_src)) {
            t->data = NULL;
            t->buffer = NULL;
            if (r->sc.bound_views && tg_tensor_view_bind(t) != TG_OK)
                return failf(r, "binding a view of a weight: %s", tg_last_error());
            r->stats->views_bound += r->sc.bound_views;
        }
    }
    b->placement = p;
    return true;
}

/* Where the generator bound each weight of b. */
static bool remember_homes(struct run *r, struct build *b) {
    struct tg_graph *g = b->c->graph;
    b->home = calloc((size_t)g->n_leafs + 1, sizeof *b->home);
    if (!b->home) return failf(r, "out of host memory");
    for (int j = 0; j < g->n_leafs; j++) {
        if (is_weight(b, g->leafs[j])) b->home[j] = g->leafs[j]->data;
    }
    return true;
}

/* A fresh build of variant v, its weights placed by p. */
static int new_build(struct run *r, enum variant v, struct placement p) {
    if (r->n_builds == MAX_BUILDS || !reference_decoded(r, v, r->kv_pos)) return -1;
    struct build *b = &r->builds[r->n_builds];
    memset(b, 0, sizeof *b);
    b->v = v;
    b->kv_pos = r->kv_pos;
    if (decode_variant(r, v, b->kv_pos, r->stats, &b->c) != TG_OK) return failf(r, "decoding a build: %s", tg_last_error()), -1;

    r->n_builds++;
    if (!remember_homes(r, b) || !place_weights(r, b, p)) return -1;
    /* on the backend the placement gives a weight past the graph's, so a rebuild moves it too */
    int dev = backend_of_weight(r, p.salt, b->c->graph->n_leafs);
    enum tg_buffer_usage usage = r->sc.outside_weights ? TG_BUFFER_USAGE_WEIGHTS : TG_BUFFER_USAGE_ANY;
    if (!swap_in_outside(r, b->c, &b->out, dev, usage, b->kv_pos)) return -1;
    r->stats->outside_builds += b->out.root != NULL;
    return r->n_builds - 1;
}

/* The placement a call's byte a asks for after placement p: bit 0 picks
 * other backends (other buffer types), bit 1 the other usage, bit 2 moves
 * CPU weights into a fresh host buffer (or back). */
static struct placement next_placement(struct placement p, uint8_t a) {
    if (a & 1) p.salt = (uint8_t)(p.salt * 5u + a + 1u);
    if (a & 2) p.usage = p.usage == TG_BUFFER_USAGE_WEIGHTS ? TG_BUFFER_USAGE_ANY : TG_BUFFER_USAGE_WEIGHTS;
    if (a & 4) p.fresh_host = !p.fresh_host;
    return p;
}

/* An op placed where it cannot run is a refusal only when the user or the
 * memory put it there (a pin, a pre-allocated tensor), or a writer into a view
 * cannot reach its root's memory and the root cannot come to it (pinned,
 * pre-allocated, memory its context owns: docs/scheduler.md, step 7; an open
 * root moves to a backend that runs it and its writers, and in these graphs
 * the CPU runs every op, so a writer refused over an open root is a bug).
 * Every other pass places an op only on a backend that runs it. */
static bool unsupported_is_legitimate(const char *why) {
    if (strstr(why, "no backend of this scheduler supports")) return strstr(why, "(the CPU computes: yes)") == NULL;
    if (strstr(why, "which does not support it")) return strstr(why, "(pre-allocated)") || strstr(why, "(user pin)");
    if (strstr(why, "cannot move: ")) {
        return strstr(why, "cannot move: it is pinned there") || strstr(why, "cannot move: it is pre-allocated") ||
               strstr(why, "cannot move: its memory is its context's");
    }
    /* pre-allocated where no backend can run the op */
    return strstr(why, "is pre-allocated in a buffer of type") != NULL;
}

static bool is_refusal(enum tg_status st) {
    /* unsupported ops and random pins that cannot all hold are refusals, not bugs; these
     * devices have no buffer size limit and the tensors are small, so a failed allocation is
     * a failure (taken as a refusal, a scheduler that refused graphs it should plan passed) */
    return (st == TG_ERR_UNSUPPORTED && unsupported_is_legitimate(tg_last_error())) ||
           (st == TG_ERR_INVALID && strstr(tg_last_error(), "pin them"));
}

static bool in_graph(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == t) return true;
    for (int j = 0; j < g->n_leafs; j++)
        if (g->leafs[j] == t) return true;
    return false;
}

static bool same_placement(struct placement a, struct placement b) {
    return a.salt == b.salt && a.usage == b.usage && a.fresh_host == b.fresh_host;
}

/* Allocates the current build and checks the schedule; false on refusal or failure. */
static bool alloc_current(struct run *r) {
    struct build *b = &r->builds[r->cur];
    struct tg_graph *g = b->c->graph;
    struct tg_oracle_snapshot snap;
    /* a build allocated before (then reset, or another graph allocated) still holds that plan's memory */
    if (tg_oracle_snapshot_take_user_memory(g, &snap) != TG_OK) return failf(r, "snapshot: %s", tg_last_error());
    enum tg_status st = tg_sched_alloc_graph(r->s, g);
    r->allocated = -1; /* whatever was allocated before is forgotten either way */
    if (st != TG_OK) {
        tg_oracle_snapshot_free(&snap);
        if (is_refusal(st)) {
            r->stats->refusals++;
            return false;
        }
        return failf(r, "tg_sched_alloc_graph: %s", tg_last_error());
    }
    r->allocated = r->cur;
    r->stats->allocs++;
    if (tg_sched_last_was_replay(r->s)) r->stats->replays++;
    for (int i = 0; i < g->n_nodes; i++)
        r->stats->offloads += tg_sched_get_tensor_reason(r->s, g->nodes[i]) == TG_REASON_OFFLOAD;
    struct tg_oracle_sched_pin pins[MAX_PINS];
    int n_pins = 0;
    for (int i = 0; i < r->n_pins; i++) {
        if (in_graph(g, r->pins[i].tensor)) pins[n_pins++] = r->pins[i];
    }
    struct tg_oracle_sched_report rep = {0};
    if (tg_oracle_sched_check(r->s, &snap, NULL, pins, n_pins, &rep) != TG_OK) {
        tg_oracle_snapshot_free(&snap);
        return failf(r, "scheduler checker could not run: %s", tg_last_error());
    }
    tg_oracle_snapshot_free(&snap);
    if (rep.n) {
        failf(r, "[%s] %s", tg_oracle_sched_rule_name(rep.items[0].rule), rep.items[0].message);
        tg_oracle_sched_report_free(&rep);
        return false;
    }
    tg_oracle_sched_report_free(&rep);
    if (r->reserve_pending && r->reserve_variant == b->v && same_placement(r->reserve_placement, b->placement) &&
        r->reserve_outside_dev == b->out.dev && r->n_pins == 0) {
        for (int i = 0; i < r->n_backends; i++) {
            size_t now = tg_sched_get_buffer_size(r->s, r->backends[i]);
            if (now > r->reserved[i])
                return failf(r, "reserve was undersized: %s's buffer grew from %zu to %zu bytes on the alloc after it",
                             tg_backend_name(r->backends[i]), r->reserved[i], now);
        }
    }
    r->reserve_pending = false;
    return true;
}

static bool call_alloc(struct run *r) {
    if (r->allocated == r->cur) {
        /* misuse: the graph is allocated already; the scheduler must refuse and keep its state */
        enum tg_status st = tg_sched_alloc_graph(r->s, r->builds[r->cur].c->graph);
        if (st != TG_ERR_INVALID) return failf(r, "allocating an allocated graph again gave %s, not a refusal", tg_status_name(st));
        return true;
    }
    alloc_current(r);
    return !r->failed;
}

tg_backend *tg_gen_memory_queue(const struct tg_tensor *t, tg_backend *host) {
    const struct tg_tensor *root = t->view_src ? t->view_src : t;
    if (!root->buffer || tg_buffer_is_host(root->buffer)) return host;
    return root->buffer->buft->owner;
}

void tg_gen_set_async(struct tg_tensor *t, const void *values, tg_backend *host) {
    tg_backend *queue = tg_gen_memory_queue(t, host);
    tg_backend_tensor_set_async(queue, t, values, 0, tg_nbytes(t));
    if ((t->flags & TG_FLAG_INPUT) && queue != host) tg_backend_synchronize(queue);
}

/* Synchronizes and compares the results of every pending compute with the CPU alone. */
static bool finish_pending(struct run *r) {
    if (r->n_pending == 0) return !r->failed;
    tg_sched_synchronize(r->s);
    for (int k = 0; k < r->n_pending; k++) {
        struct pending *p = &r->pending[k];
        const struct build *b = &r->builds[p->build];
        const struct reference *ref = &r->refs[b->v][b->kv_pos];
        struct tg_graph *g = b->c->graph, *rg = ref->c->graph;
        bool same = true;
        for (int i = 0; i < g->n_nodes; i++) {
            if (!p->results[i]) continue;
            if (same && memcmp(p->results[i], ref->results[i], tg_nbytes(rg->nodes[i])) != 0) {
                same = failf(r, "node %d '%s' (%s, on %s) differs from the CPU-only run", i, g->nodes[i]->name,
                             tg_op_name(g->nodes[i]->op), tg_backend_name(tg_sched_get_tensor_backend(r->s, g->nodes[i])));
            }
            free(p->results[i]);
        }
        free(p->results);
        r->stats->computes_compared += same;
        r->stats->outside_computes += same && b->out.root;
    }
    r->n_pending = 0;
    return !r->failed;
}

static bool call_compute(struct run *r) {
    struct build *b = &r->builds[r->cur];
    const struct reference *ref = &r->refs[b->v][b->kv_pos];
    if (!reference_computed(r, b->v, b->kv_pos)) return !r->failed;
    if (r->allocated != r->cur && !alloc_current(r)) return !r->failed;
    if (r->n_pending == MAX_PENDING && !finish_pending(r)) return false;
    struct tg_graph *g = b->c->graph;
    /* every leaf, weights included: a graph may write into a weight (a cpy or
     * set_rows into a view of it, as a KV cache is written), and each compute
     * must start from the state the reference started from */
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        if (!t->view_src && ref->leaf_values[j]) tg_gen_set_async(t, ref->leaf_values[j], r->backends[r->n_backends - 1]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (ref->input_values[i]) tg_gen_set_async(g->nodes[i], ref->input_values[i], r->backends[r->n_backends - 1]);
    }
    if (b->out.root) outside_set(r, &b->out);
    r->stats->computes_back_to_back += r->n_pending > 0;
    if (tg_sched_graph_compute_async(r->s, g) != TG_OK) return failf(r, "tg_sched_graph_compute_async: %s", tg_last_error());
    struct pending *p = &r->pending[r->n_pending++];
    p->build = r->cur;
    p->results = calloc((size_t)g->n_nodes + 1, sizeof *p->results);
    if (!p->results) return failf(r, "out of host memory");
    for (int i = 0; i < g->n_nodes; i++) {
        if (!ref->results[i]) continue;
        size_t n = tg_nbytes(g->nodes[i]);
        if (!(p->results[i] = malloc(n ? n : 1))) return failf(r, "out of host memory");
        tg_backend_tensor_get_async(tg_gen_memory_queue(g->nodes[i], r->backends[r->n_backends - 1]), g->nodes[i],
                                    p->results[i], 0, n);
    }
    return true;
}

/* a & 1: the sizes alone first (tg_sched_reserve_size, computes maybe still
 * in flight), which the reserve after it must agree with */
static bool call_reserve(struct run *r, uint8_t a) {
    int m = new_build(r, r->builds[r->cur].v, r->builds[r->cur].placement);
    if (m < 0) return !r->failed;
    size_t sizes[TG_GEN_SCHED_MAX_SIMS + 1] = {0};
    enum tg_status size_st = TG_OK;
    if (a & 1) {
        size_st = tg_sched_reserve_size(r->s, r->builds[m].c->graph, sizes);
        r->allocated = -1;
        if (size_st != TG_OK && !is_refusal(size_st)) return failf(r, "tg_sched_reserve_size: %s", tg_last_error());
    }
    enum tg_status st = tg_sched_reserve(r->s, r->builds[m].c->graph);
    r->allocated = -1;
    if ((a & 1) && (size_st == TG_OK) != (st == TG_OK))
        return failf(r, "tg_sched_reserve_size said %s, tg_sched_reserve of the same graph %s",
                     tg_status_name(size_st), tg_status_name(st));
    if (st != TG_OK) {
        if (is_refusal(st)) {
            r->stats->refusals++;
            return true;
        }
        return failf(r, "tg_sched_reserve: %s", tg_last_error());
    }
    for (int i = 0; (a & 1) && i < r->n_backends; i++) {
        size_t now = tg_sched_get_buffer_size(r->s, r->backends[i]);
        if (sizes[i] > now)
            return failf(r, "tg_sched_reserve_size said %s needs %zu bytes, the reserve of the same graph gave it %zu",
                         tg_backend_name(r->backends[i]), sizes[i], now);
    }
    r->stats->sizes_measured += (a & 1) != 0;
    r->reserve_pending = r->n_pins == 0;
    r->reserve_variant = r->builds[m].v;
    r->reserve_placement = r->builds[m].placement;
    r->reserve_outside_dev = r->builds[m].out.dev;
    for (int i = 0; i < r->n_backends; i++) r->reserved[i] = tg_sched_get_buffer_size(r->s, r->backends[i]);
    return true;
}

static void call_pin(struct run *r, uint8_t a, uint8_t bk) {
    struct tg_graph *g = r->builds[r->cur].c->graph;
    if (g->n_nodes == 0) return;
    struct tg_tensor *t = g->nodes[a % g->n_nodes];
    int backend = bk % r->n_backends;
    tg_sched_set_tensor_backend(r->s, t, r->backends[backend]);
    for (int i = 0; i < r->n_pins; i++) {
        if (r->pins[i].tensor == t) {
            r->pins[i].backend_id = backend; /* a later pin replaces an earlier one */
            return;
        }
    }
    if (r->n_pins < MAX_PINS) r->pins[r->n_pins++] = (struct tg_oracle_sched_pin){t, backend};
}

/* Writes a pattern into a bound tensor of the allocated graph, reads it back,
 * and restores what was there. */
static bool call_set_get(struct run *r, uint8_t a) {
    if (r->allocated != r->cur) return true;
    if (!finish_pending(r)) return false; /* synchronous access: nothing may be in flight */
    struct tg_graph *g = r->builds[r->cur].c->graph;
    int n = g->n_nodes + g->n_leafs;
    if (n == 0) return true;
    struct tg_tensor *t = NULL;
    for (int k = 0; k < n && !t; k++) {
        int i = (a + k) % n;
        struct tg_tensor *c = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (c->buffer && c->data && tg_nbytes(c) > 0 && !c->view_src) t = c;
    }
    if (!t) return true;
    size_t bytes = tg_nbytes(t);
    uint8_t *before = tg_gen_tensor_bytes(t), *pattern = malloc(bytes), *back = malloc(bytes);
    bool ok = before && pattern && back;
    if (!ok) failf(r, "set/get of '%s': %s", t->name, tg_last_error());
    for (size_t i = 0; ok && i < bytes; i++) pattern[i] = (uint8_t)(a * 31u + i * 7u + 1u);
    if (ok && (tg_tensor_set(t, pattern, 0, bytes) != TG_OK || tg_tensor_get(t, back, 0, bytes) != TG_OK))
        ok = failf(r, "set/get of '%s': %s", t->name, tg_last_error());
    if (ok && memcmp(pattern, back, bytes) != 0)
        ok = failf(r, "'%s' in %s read back different bytes than were written", t->name, tg_buft_name(t->buffer->buft));
    /* what was there may be bytes no plan wrote yet: put back, not compared */
    if (ok && tg_tensor_set(t, before, 0, bytes) != TG_OK)
        ok = failf(r, "restoring '%s' in %s failed", t->name, tg_buft_name(t->buffer->buft));
    free(before);
    free(pattern);
    free(back);
    if (ok) r->stats->set_gets++;
    return ok;
}

/* The next build: variant v, its weights placed as a (see next_placement)
 * says relative to the current build's. */
static bool switch_to(struct run *r, enum variant v, uint8_t a) {
    int b = new_build(r, v, next_placement(r->builds[r->cur].placement, a));
    if (b >= 0) r->cur = b;
    return !r->failed;
}

static bool run_call_kind(struct run *r, const struct tg_gen_sched_case *sc, int i, enum tg_gen_sched_call k);

static bool run_call(struct run *r, const struct tg_gen_sched_case *sc, int i) {
    enum tg_gen_sched_call k = sc->calls[i].kind;
    r->stats->calls[k]++;
    if (r->trace) {
        fprintf(stderr, "gen_sched: call %d %s on build %d (variant %d), allocated build %d, %d pin(s)\n", i,
                tg_gen_sched_call_name(k), r->cur, r->builds[r->cur].v, r->allocated, r->n_pins);
    }
    bool ok = run_call_kind(r, sc, i, k);
    if (ok && tg_sim_race_count(r->race) > 0) return failf(r, "race detector: %s", tg_sim_race_report(r->race));
    return ok;
}

static bool run_call_kind(struct run *r, const struct tg_gen_sched_case *sc, int i, enum tg_gen_sched_call k) {
    switch (k) {
    case TG_GEN_SCHED_COMPUTE: return call_compute(r);
    case TG_GEN_SCHED_ALLOC: return call_alloc(r);
    case TG_GEN_SCHED_RESET:
        tg_sched_reset(r->s);
        r->allocated = -1;
        r->n_pins = 0;
        /* a & 8: the same tensors' weights move before the next allocation */
        if (sc->calls[i].a & 8) {
            struct build *b = &r->builds[r->cur];
            if (b->out.root && !outside_move(r, &b->out)) return false;
            return place_weights(r, b, next_placement(b->placement, sc->calls[i].a));
        }
        return true;
    case TG_GEN_SCHED_RESERVE: return call_reserve(r, sc->calls[i].a);
    case TG_GEN_SCHED_PIN: call_pin(r, sc->calls[i].a, sc->calls[i].b); return true;
    case TG_GEN_SCHED_SET_GET: return call_set_get(r, sc->calls[i].a);
    case TG_GEN_SCHED_REBUILD:
        /* the next token: with kv_moves its windows of the weights sit one position on */
        if (sc->kv_moves) r->kv_pos = (r->kv_pos + 1) % KV_POSITIONS;
        return switch_to(r, r->builds[r->cur].v, sc->calls[i].a);
    case TG_GEN_SCHED_OTHER: return switch_to(r, V_OTHER, 0);
    case TG_GEN_SCHED_REWIRED: return switch_to(r, V_REWIRED, 0);
    case TG_GEN_SCHED_RESIZED: return switch_to(r, V_RESIZED, 0);
    case TG_GEN_SCHED_CALL_COUNT: break;
    }
    return true;
}

static bool make_backends(struct run *r) {
    if (!(r->race = tg_sim_race_new())) return failf(r, "tg_sim_race_new: %s", tg_last_error());
    for (int i = 0; i < r->sc.n_sims; i++) {
        const struct tg_gen_sched_sim *d = &r->sc.sims[i];
        struct tg_sim_params p;
        tg_sim_params_default(&p);
        char name[16];
        snprintf(name, sizeof name, "sim%d", i);
        p.name = name;
        p.alignment = d->alignment;
        p.alloc_pad = d->alloc_pad ? 64 : 0;
        p.share_host_buffer_type = d->share_host;
        p.synchronous = d->synchronous;
        p.offload_min_batch = d->offload_min_batch;
        p.supported_ops_all = false;
        for (int op = 0; op < TG_OP_COUNT; op++) p.supported_ops[op] = sim_supports(d, op);
        p.race = r->race;
        p.jitter_seed = 1 + r->sc.placement + 256u * (unsigned)i;
        r->backends[i] = tg_backend_sim_new(&p);
        if (!r->backends[i]) return failf(r, "tg_backend_sim_new: %s", tg_last_error());
        r->n_backends = i + 1;
    }
    r->backends[r->n_backends] = tg_sim_watch_new(tg_backend_cpu_new(), r->race, NULL);
    if (!r->backends[r->n_backends]) return failf(r, "tg_backend_cpu_new: %s", tg_last_error());
    r->n_backends++;
    return true;
}

/* One run of the case; with outside_run every graph reads a tensor outside it. */
static enum tg_status run_case(const uint8_t *data, size_t size, bool outside_run, struct tg_gen_sched_stats *stats,
                               char *failure, size_t failure_len) {
    struct run *r = calloc(1, sizeof *r);
    if (!r) return tg_fail(TG_ERR_ALLOC, "out of host memory");
    r->stats = stats;
    r->outside_run = outside_run;
    r->failure = failure;
    r->failure_len = failure_len;
    if (failure && failure_len) failure[0] = '\0';
    r->allocated = -1;
    r->trace = getenv("TG_GEN_TRACE") != NULL;
    tg_gen_sched_decode(data, size, &r->sc);
    r->opts = tg_gen_target_options("sched");
    r->resized_bytes = malloc(r->sc.graph_n + 1);
    if (!r->resized_bytes) {
        free(r);
        return tg_fail(TG_ERR_ALLOC, "out of host memory");
    }
    memcpy(r->resized_bytes, r->sc.graph, r->sc.graph_n);
    if (r->sc.graph_n) r->resized_bytes[r->sc.resize_at % r->sc.graph_n] = r->sc.resize_to;

    /* every variant the calls switch to is decoded up front: the scheduler's graph size must fit all */
    bool used[V_COUNT] = {true, false, false, false};
    for (int i = 0; i < r->sc.n_calls; i++) {
        if (r->sc.calls[i].kind == TG_GEN_SCHED_OTHER) used[V_OTHER] = true;
        if (r->sc.calls[i].kind == TG_GEN_SCHED_REWIRED) used[V_REWIRED] = true;
        if (r->sc.calls[i].kind == TG_GEN_SCHED_RESIZED) used[V_RESIZED] = true;
    }
    size_t graph_size = 16;
    bool ok = make_backends(r);
    for (int v = 0; ok && v < V_COUNT; v++) {
        if (!used[v] || !(ok = reference_decoded(r, (enum variant)v, 0))) continue;
        size_t n = (size_t)(r->refs[v][0].c->graph->n_nodes + r->refs[v][0].c->graph->n_leafs) * 2 + 16;
        if (n > graph_size) graph_size = n;
    }
    if (ok) {
        r->s = tg_sched_new(r->backends, NULL, r->n_backends, graph_size, r->sc.parallel, r->sc.op_offload);
        if (!r->s) ok = failf(r, "tg_sched_new: %s", tg_last_error());
    }
    struct placement first = {r->sc.placement, TG_BUFFER_USAGE_WEIGHTS, false};
    if (ok) ok = (r->cur = new_build(r, V_MAIN, first)) >= 0;
    for (int i = 0; ok && i < r->sc.n_calls; i++) ok = run_call(r, &r->sc, i);
    if (r->s) finish_pending(r);
    if (r->race && tg_sim_race_count(r->race) > 0) failf(r, "race detector: %s", tg_sim_race_report(r->race));

    /* the scheduler first: freeing it gives the current graph its sources back */
    tg_sched_free(r->s);
    for (int i = 0; i < r->n_builds; i++) {
        for (int d = 0; d < TG_GEN_SCHED_MAX_SIMS + 1; d++) tg_buffer_free(r->builds[i].moved[d]);
        for (int k = 0; k < r->builds[i].n_retired; k++) tg_buffer_free(r->builds[i].retired[k]);
        free(r->builds[i].home);
        tg_gen_case_free(r->builds[i].c);
        outside_free(&r->builds[i].out);
    }
    for (int v = 0; v < V_COUNT; v++) {
        for (int k = 0; k < KV_POSITIONS; k++) reference_free(&r->refs[v][k]);
    }
    for (int k = 0; k < r->n_pending; k++) { /* left by a failure */
        for (int i = 0; i < r->builds[r->pending[k].build].c->graph->n_nodes; i++) free(r->pending[k].results[i]);
        free(r->pending[k].results);
    }
    for (int i = 0; i < r->n_backends; i++) tg_backend_free(r->backends[i]);
    tg_sim_race_free(r->race);
    free(r->resized_bytes);
    bool failed = r->failed;
    free(r);
    return failed ? TG_ERR_INVALID : TG_OK;
}

enum tg_status tg_gen_sched_run(const uint8_t *data, size_t size, struct tg_gen_sched_stats *stats, char *failure,
                                size_t failure_len) {
    struct tg_gen_sched_stats ignored;
    if (!stats) stats = &ignored;
    memset(stats, 0, sizeof *stats);
    enum tg_status st = run_case(data, size, false, stats, failure, failure_len);
    struct tg_gen_sched_case sc;
    tg_gen_sched_decode(data, size, &sc);
    if (st != TG_OK || !sc.outside) return st;
    /* flags bit 4: the same calls again, each graph reading a tensor outside it */
    char *why = failure && failure_len ? malloc(failure_len) : NULL;
    st = run_case(data, size, true, stats, why, why ? failure_len : 0);
    if (st == TG_ERR_INVALID && why) snprintf(failure, failure_len, "outside run (a source not in the graph): %s", why);
    free(why);
    return st;
}

/* Running a scheduler case both ways (see tg-ggml-sched.h): the case from
 * bytes or a file, ggml_backend_sched over the test backends in a child
 * (traced), tg_sched over sims and the CPU. */
#include "tg-ggml-sched.h"

#include "tg-cpu.h"
#include "tg-io.h"
#include "tg-sim.h"
#include "tg_test_child.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_ggml_sched_slot(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == t) return i;
    for (int j = 0; j < g->n_leafs; j++)
        if (g->leafs[j] == t) return g->n_nodes + j;
    return -1;
}

int tg_ggml_sched_slot_named(const struct tg_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return i;
    for (int j = 0; j < g->n_leafs; j++)
        if (strcmp(g->leafs[j]->name, name) == 0) return g->n_nodes + j;
    return -1;
}

/* ---- cases ---------------------------------------------------------------------------------- */

void tg_ggml_sched_case_free(struct tg_ggml_sched_case *k) {
    tg_gen_case_free(k->c); /* before the buffers its weights were moved to */
    for (int b = 0; b < TG_GGML_SCHED_MAX_BACKENDS; b++) tg_buffer_free(k->tg_moved[b]);
    for (int b = 0; b < TG_GGML_SCHED_MAX_BACKENDS; b++) tg_backend_free(k->tg_backends[b]);
    free(k->placement);
    free(k->context_memory);
    memset(k, 0, sizeof *k);
}

/* Gives the leafs marked in owned memory of the case's own, as a context made
 * with no_alloc false gives its tensors (data, no buffer), filled with a
 * pattern. */
static enum tg_status give_context_memory(struct tg_ggml_sched_case *k, const bool *owned) {
    const struct tg_graph *g = k->c->graph;
    size_t total = 0;
    for (int j = 0; j < g->n_leafs; j++)
        if (owned[j]) total += (tg_nbytes(g->leafs[j]) + 63) / 64 * 64;
    if (!total) return TG_OK;
    k->context_memory = malloc(total);
    if (!k->context_memory) return tg_fail(TG_ERR_ALLOC, "out of host memory");
    for (size_t i = 0; i < total; i++) ((uint8_t *)k->context_memory)[i] = (uint8_t)(i * 7 + 1);
    size_t off = 0;
    for (int j = 0; j < g->n_leafs; j++) {
        if (!owned[j]) continue;
        g->leafs[j]->data = (uint8_t *)k->context_memory + off;
        off += (tg_nbytes(g->leafs[j]) + 63) / 64 * 64;
    }
    return TG_OK;
}

/* A leaf the plan would place (no memory, no view, not an input) that is
 * contiguous: one its context could own instead. */
static bool could_be_context_owned(const struct tg_tensor *t) {
    return !t->view_src && !t->buffer && !t->data && !(t->flags & TG_FLAG_INPUT) && tg_is_contiguous(t);
}

enum tg_status tg_ggml_sched_case_from_bytes(const uint8_t *bytes, size_t n, struct tg_ggml_sched_case *k) {
    memset(k, 0, sizeof *k);
    struct tg_gen_sched_case sc;
    tg_gen_sched_decode(bytes, n, &sc);
    k->n_backends = sc.n_sims + 1;
    k->parallel = sc.parallel;
    k->op_offload = sc.op_offload;
    for (int i = 0; i < sc.n_sims; i++) {
        struct tg_ggml_sched_device *d = &k->dev[i];
        snprintf(d->name, sizeof d->name, "sim%d", i);
        d->alignment = sc.sims[i].alignment;
        d->pad = sc.sims[i].alloc_pad ? 64 : 0;
        d->shares_host = sc.sims[i].share_host;
        for (int op = 0; op < TG_OP_COUNT; op++) d->ops[op] = (sc.sims[i].op_mask >> (op % 64)) & 1; /* as the sim's */
    }
    struct tg_gen_options opts = tg_gen_target_options("sched");
    enum tg_status st = tg_gen_case_from_bytes(sc.graph, sc.graph_n, &opts, &k->c);
    if (st != TG_OK) return st;
    const struct tg_graph *g = k->c->graph;
    k->placement = calloc((size_t)g->n_leafs + 1, sizeof *k->placement);
    if (!k->placement) return tg_fail(TG_ERR_ALLOC, "out of host memory");
    for (int j = 0; j < g->n_leafs; j++) { /* weights on random backends, by the case's salt */
        const struct tg_tensor *t = g->leafs[j];
        k->placement[j] = -1;
        if (t->view_src || !t->buffer || t->buffer != k->c->external_buffer) continue;
        uint64_t x = ((uint64_t)sc.placement + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(j + 1) * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        k->placement[j] = (int)(x % (uint64_t)k->n_backends);
    }
    /* a sixth of the leafs the plan would place live in memory their context
     * owns instead (a bias made with no_alloc false), by the case's salt */
    bool *owned = calloc((size_t)g->n_leafs + 1, sizeof *owned);
    if (!owned) return tg_fail(TG_ERR_ALLOC, "out of host memory");
    for (int j = 0; j < g->n_leafs; j++) {
        uint64_t x = ((uint64_t)sc.placement + 5) * 0x94d049bb133111ebull ^ (uint64_t)(j + 1) * 0x9e3779b97f4a7c15ull;
        x ^= x >> 31;
        owned[j] = could_be_context_owned(g->leafs[j]) && x % 6 == 0;
    }
    st = give_context_memory(k, owned);
    free(owned);
    if (st != TG_OK) return st;
    /* A max buffer size on a third of the devices: compute buffers in chunks.
     * Never below the device's weights nor below one tensor: ggml would give
     * a larger tensor a chunk of its own, which the sim (a device with a hard
     * limit) refuses. */
    size_t largest = 0;
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        size_t b = tg_nbytes(u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes]);
        largest = b > largest ? b : largest;
    }
    for (int i = 0; i < sc.n_sims; i++) {
        uint64_t x = ((uint64_t)sc.placement + 3) * 0xbf58476d1ce4e5b9ull ^ (uint64_t)(i + 1) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        if (x % 3) continue;
        struct tg_ggml_sched_device *d = &k->dev[i];
        size_t weights = 0;
        for (int j = 0; j < g->n_leafs; j++) {
            if (k->placement[j] == i) weights += tg_nbytes(g->leafs[j]) + d->pad + d->alignment + 512;
        }
        size_t max = (size_t)1024 << (x / 3 % 6), one = largest + d->pad + d->alignment;
        max = max > one ? max : one;
        d->max_size = max > weights ? max : weights;
    }
    return TG_OK;
}

/* "meta DEV.KEY=VALUE" of the file, or NULL. */
static const char *meta_of(const struct tg_file *f, const char *dev, const char *key) {
    size_t nd = strlen(dev), nk = strlen(key);
    for (int i = 0; i < f->n_meta; i++) {
        const char *m = f->meta[i];
        if (strncmp(m, dev, nd) == 0 && m[nd] == '.' && strncmp(m + nd + 1, key, nk) == 0 && m[nd + 1 + nk] == '=') {
            return m + nd + 2 + nk;
        }
    }
    return NULL;
}

static enum tg_status device_from_meta(const struct tg_file *f, int i, struct tg_ggml_sched_device *d) {
    snprintf(d->name, sizeof d->name, "%s", f->backend_names[i]);
    const char *v = meta_of(f, d->name, "align");
    d->alignment = v ? strtoull(v, NULL, 10) : 256;
    d->pad = (v = meta_of(f, d->name, "pad")) ? strtoull(v, NULL, 10) : 0;
    d->max_size = (v = meta_of(f, d->name, "max")) ? strtoull(v, NULL, 10) : 0;
    d->shares_host = (v = meta_of(f, d->name, "shares_host")) && strcmp(v, "1") == 0;
    const char *ops = meta_of(f, d->name, "ops");
    for (int op = 0; op < TG_OP_COUNT; op++) d->ops[op] = ops == NULL;
    while (ops && *ops) {
        char name[40];
        size_t n = strcspn(ops, "+");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), ops);
        enum tg_op op = tg_op_from_name(name);
        if (op == TG_OP_COUNT) return tg_fail(TG_ERR_INVALID, "meta %s.ops names unknown op '%s'", d->name, name);
        d->ops[op] = true;
        ops += n + (ops[n] == '+');
    }
    return TG_OK;
}

enum tg_status tg_ggml_sched_case_from_text(const char *text, size_t len, const char *name, struct tg_ggml_sched_case *k) {
    memset(k, 0, sizeof *k);
    struct tg_file *f = NULL;
    enum tg_status st = tg_file_parse(text, len, name, &f);
    if (st != TG_OK) return st;
    if (f->n_backends > TG_GGML_SCHED_MAX_BACKENDS || strcmp(f->backend_names[f->n_backends - 1], "cpu") != 0) {
        st = tg_fail(TG_ERR_INVALID, "%s: a scheduler case has up to %d devices, then cpu", name, TG_GGML_SCHED_MAX_DEVICES);
    }
    k->n_backends = f->n_backends;
    for (int i = 0; st == TG_OK && i < f->n_backends - 1; i++) st = device_from_meta(f, i, &k->dev[i]);
    const char *v;
    k->parallel = (v = meta_of(f, "sched", "parallel")) && strcmp(v, "1") == 0;
    k->op_offload = (v = meta_of(f, "sched", "op_offload")) && strcmp(v, "1") == 0;
    /* the graph as a case: one buffer id of the CPU's type (the scheduler sets the real ones) */
    char *with = st == TG_OK ? malloc(len + 64) : NULL;
    if (with) {
        const char *nl = memchr(text, '\n', len);
        size_t head = nl ? (size_t)(nl - text) + 1 : len;
        int extra = snprintf(with + head, 64, "buft host align=64\nbuffers host\n");
        memcpy(with, text, head);
        memcpy(with + head + (size_t)extra, text + head, len - head);
        st = tg_gen_case_from_text(with, len + (size_t)extra, name, false, &k->c);
        free(with);
    } else if (st == TG_OK) {
        st = tg_fail(TG_ERR_ALLOC, "out of host memory");
    }
    if (st == TG_OK) {
        const struct tg_graph *g = k->c->graph;
        k->placement = calloc((size_t)g->n_leafs + 1, sizeof *k->placement);
        for (int j = 0; k->placement && j < g->n_leafs; j++) {
            const struct tg_file_tensor *r = NULL;
            for (int i = 0; i < f->n_tensors && !r; i++)
                if (f->tensors[i].is_leaf && strcmp(f->tensors[i].tensor->name, g->leafs[j]->name) == 0) r = &f->tensors[i];
            k->placement[j] = r && r->placement != TG_PLACE_NONE ? r->placement_backend : -1;
        }
        if (!k->placement) st = tg_fail(TG_ERR_ALLOC, "out of host memory");
    }
    const char *owned_names = meta_of(f, "context", "owned");
    if (st == TG_OK && owned_names) {
        const struct tg_graph *g = k->c->graph;
        bool *owned = calloc((size_t)g->n_leafs + 1, sizeof *owned);
        if (!owned) st = tg_fail(TG_ERR_ALLOC, "out of host memory");
        for (const char *at = owned_names; st == TG_OK && *at; at += strcspn(at, "+") + (at[strcspn(at, "+")] == '+')) {
            int n = (int)strcspn(at, "+"), found = -1;
            for (int j = 0; j < g->n_leafs && found < 0; j++)
                if ((int)strlen(g->leafs[j]->name) == n && strncmp(g->leafs[j]->name, at, (size_t)n) == 0) found = j;
            if (found < 0 || !could_be_context_owned(g->leafs[found]) || k->placement[found] >= 0) {
                st = tg_fail(TG_ERR_INVALID, "%s: meta context.owned names '%.*s', which is not a contiguous leaf "
                             "without buf=, view or input flag", name, n, at);
            } else {
                owned[found] = true;
            }
        }
        if (st == TG_OK) st = give_context_memory(k, owned);
        free(owned);
    }
    tg_file_free(f);
    if (st != TG_OK) tg_ggml_sched_case_free(k);
    return st;
}

/* ---- ggml's side, in a child ---------------------------------------------------------------- */

static struct tg_ggml_schedule *abort_plan; /* the child's shared result, for its abort callback */

static void child_abort(const char *message) {
    if (abort_plan) {
        abort_plan->aborted = true;
        snprintf(abort_plan->message, sizeof abort_plan->message, "%s", message);
    }
}

static ggml_backend_buffer_type_t weights_buft(const struct tg_tensor *t, void *user) {
    struct tg_ggml_sched_side *side = user;
    const struct tg_graph *g = side->k->c->graph;
    int u = tg_ggml_sched_slot(g, t);
    int b = u >= g->n_nodes ? side->k->placement[u - g->n_nodes] : -1;
    if (b < 0 || b == side->k->n_backends - 1) return &side->weights_on_cpu.buft;
    return side->tb[b].buft;
}

int tg_ggml_sched_side_backend(const struct tg_ggml_sched_side *side, ggml_backend_t b) {
    for (int i = 0; i < side->k->n_backends; i++)
        if (&side->tb[i].backend == b) return i;
    return -1;
}

enum tg_status tg_ggml_sched_side_open(struct tg_ggml_sched_side *side, const struct tg_ggml_sched_case *k) {
    memset(side, 0, sizeof *side);
    side->k = k;
    int n = k->n_backends;
    tg_ggml_test_cpu_init(&side->tb[n - 1], n - 1, &side->trace);
    for (int i = 0; i < n - 1; i++) {
        const struct tg_ggml_sched_device *d = &k->dev[i];
        tg_ggml_test_device_init(&side->tb[i], i, d->name, d->alignment, d->pad, d->shares_host, &side->tb[n - 1], d->ops,
                                 TG_GGML_SCHED_OFFLOAD_MIN_BATCH, &side->trace);
        side->tb[i].own.max_size = d->max_size;
    }
    tg_ggml_buft_init(&side->weights_on_cpu, "weights", 64, 0, GGML_OP_COUNT, 0, true);
    side->weights_on_cpu.trace = &side->trace;
    struct tg_ggml_import_options io = {.external_buft = weights_buft, .user = side};
    enum tg_status st = tg_ggml_import(k->c->graph, &io, &side->gg);
    if (st != TG_OK) return st;
    for (int i = 0; i < n; i++) side->backends[i] = &side->tb[i].backend;
    const struct tg_graph *g = k->c->graph;
    size_t graph_size = (size_t)(g->n_nodes + g->n_leafs) * 2 + 64;
    side->sched = ggml_backend_sched_new(side->backends, NULL, n, graph_size, k->parallel, k->op_offload);
    return TG_OK;
}

void tg_ggml_sched_side_close(struct tg_ggml_sched_side *side) {
    if (side->sched) ggml_backend_sched_free(side->sched);
    tg_ggml_graph_free(&side->gg);
    memset(side, 0, sizeof *side);
}

/* The trace as splits: each compute is a split, the data moved before it its inputs. */
static void splits_from_trace(const struct tg_ggml_sched_side *side, struct tg_ggml_schedule *p) {
    const struct tg_graph *g = side->k->c->graph;
    int pending[TG_GGML_SCHED_MAX_INPUTS], n_pending = 0;
    for (int e = 0; e < side->trace.n && p->n_splits < TG_GGML_SCHED_MAX_SPLITS; e++) {
        const struct tg_ggml_trace_event *ev = &side->trace.ev[e];
        if (!ev->compute) {
            /* a copy's name is BACKEND#SOURCE#COPY; a source read directly is named itself */
            char name[GGML_MAX_NAME];
            const char *h = strchr(ev->name, '#');
            snprintf(name, sizeof name, "%s", h ? h + 1 : ev->name);
            char *h2 = strchr(name, '#');
            if (h2) *h2 = '\0';
            int u = tg_ggml_sched_slot_named(g, name);
            bool seen = false;
            for (int i = 0; i < n_pending; i++) seen |= pending[i] == u;
            if (!seen && n_pending < TG_GGML_SCHED_MAX_INPUTS) pending[n_pending++] = u;
            continue;
        }
        struct tg_ggml_split *s = &p->splits[p->n_splits++];
        s->backend = ev->backend;
        s->i_start = (int)(ev->nodes - (const struct ggml_tensor *const *)ggml_graph_nodes(side->gg.graph));
        s->i_end = s->i_start + ev->n_nodes;
        s->n_inputs = n_pending;
        memcpy(s->inputs, pending, (size_t)n_pending * sizeof *pending);
        n_pending = 0;
    }
}

void tg_ggml_sched_side_schedule(struct tg_ggml_sched_side *side, struct tg_ggml_schedule *p) {
    const struct tg_ggml_sched_case *k = side->k;
    ggml_backend_sched_t sched = side->sched;
    struct ggml_cgraph *graph = side->gg.graph;
    if (!ggml_backend_sched_alloc_graph(sched, graph)) {
        p->refused = true;
        snprintf(p->message, sizeof p->message, "ggml_backend_sched_alloc_graph failed");
        return;
    }
    const struct tg_graph *g = k->c->graph;
    p->n_nodes = g->n_nodes;
    for (int u = 0; u < g->n_nodes + g->n_leafs && u < TG_GGML_SCHED_MAX_TENSORS; u++) {
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        p->backend[u] = tg_ggml_sched_side_backend(side, ggml_backend_sched_get_tensor_backend(sched, tg_ggml_lookup(&side->gg, t)));
    }
    p->n_copies = ggml_backend_sched_get_n_copies(sched);
    for (int i = 0; i < k->n_backends; i++) p->sizes[i] = ggml_backend_sched_get_buffer_size(sched, side->backends[i]);
    for (int i = 0; i < k->n_backends - 1; i++) {
        int chunks = 0;
        for (int m = 0; m < side->tb[i].own.n_made; m++) {
            chunks += ggml_backend_buffer_get_usage(side->tb[i].own.made[m]) == GGML_BACKEND_BUFFER_USAGE_COMPUTE;
        }
        p->chunked |= chunks > 1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ggml_tensor *x = tg_ggml_lookup(&side->gg, g->nodes[i]);
        for (int j = 0; j < GGML_MAX_SRC && !x->view_src && x->data; j++) {
            const struct ggml_tensor *s = x->src[j];
            /* a split input's copy has no backend in ggml's table; it lives on
             * its reader's, so reusing it in place is not across backends */
            ggml_backend_t s_on = s ? ggml_backend_sched_get_tensor_backend(sched, (struct ggml_tensor *)s) : NULL;
            if (s_on && !s->view_src && s->data == x->data &&
                s_on != ggml_backend_sched_get_tensor_backend(sched, (struct ggml_tensor *)x)) {
                p->inplace_across = true;
            }
        }
    }
    side->trace.n = 0;
    ggml_backend_sched_graph_compute(sched, graph);
    p->n_data_moves = 0;
    for (int e = 0; e < side->trace.n; e++) p->n_data_moves += !side->trace.ev[e].compute;
    splits_from_trace(side, p);
    if (side->trace.overflow || p->n_splits != ggml_backend_sched_get_n_splits(sched)) {
        snprintf(p->message, sizeof p->message, "the trace lost splits (%d traced, %d by ggml)", p->n_splits,
                 ggml_backend_sched_get_n_splits(sched));
        return;
    }
    p->ran = true;
}

struct ggml_child_job {
    const struct tg_ggml_sched_case *k;
    struct tg_ggml_schedule *out; /* shared with the parent */
};

static void ggml_child(const void *arg) {
    const struct ggml_child_job *job = arg;
    abort_plan = job->out;
    ggml_set_abort_callback(child_abort);
    struct tg_ggml_sched_side *side = calloc(1, sizeof *side);
    if (!side || tg_ggml_sched_side_open(side, job->k) != TG_OK) {
        snprintf(job->out->message, sizeof job->out->message, "ggml's side: %s", tg_last_error());
        return;
    }
    tg_ggml_sched_side_schedule(side, job->out);
    /* the process ends here: the schedule and the graph go with it */
}

/* Runs ggml's side in a child; its abort (a GGML_ASSERT) is a finding. */
enum tg_status tg_ggml_schedule_in_ggml(const struct tg_ggml_sched_case *k, struct tg_ggml_schedule *out) {
    struct tg_ggml_schedule *shared = tg_test_shared_new(sizeof *shared);
    if (!shared) return tg_fail(TG_ERR_ALLOC, "no shared memory for the child's result");
    struct ggml_child_job job = {k, shared};
    struct tg_child_read child = tg_test_fork(ggml_child, &job, false);
    memcpy(out, shared, sizeof *out);
    tg_test_shared_free(shared, sizeof *shared);
    if (!child.started) return tg_fail(TG_ERR_ALLOC, "fork failed");
    if (!out->ran && !out->aborted && !out->refused && !out->message[0]) {
        snprintf(out->message, sizeof out->message, "the child ended with status 0x%x", child.status);
    }
    return TG_OK;
}

/* ---- tgsched's side ----------------------------------------------------------------------- */

tg_sched *tg_ggml_tgsched_open(struct tg_ggml_sched_case *k, bool plan_only) {
    int n = k->n_backends;
    tg_backend **backends = k->tg_backends;
    for (int i = 0; i < n - 1; i++) {
        const struct tg_ggml_sched_device *d = &k->dev[i];
        struct tg_sim_params sp;
        tg_sim_params_default(&sp);
        sp.name = d->name;
        sp.alignment = d->alignment;
        sp.alloc_pad = d->pad;
        sp.max_buffer_size = d->max_size;
        sp.share_host_buffer_type = d->shares_host;
        sp.synchronous = true;
        sp.plan_only = plan_only; /* the op set decides, as the test backends' */
        sp.supported_ops_all = false;
        memcpy(sp.supported_ops, d->ops, sizeof sp.supported_ops);
        sp.offload_min_batch = TG_GGML_SCHED_OFFLOAD_MIN_BATCH;
        backends[i] = tg_backend_sim_new(&sp);
        if (!backends[i]) return NULL;
    }
    backends[n - 1] = tg_backend_cpu_new();
    if (!backends[n - 1]) return NULL;
    tg_backend_cpu_set_plan_only(backends[n - 1], plan_only);
    if (tg_ggml_tgsched_move_weights(k, backends) != TG_OK) return NULL;
    struct tg_graph *g = k->c->graph;
    size_t graph_size = (size_t)(g->n_nodes + g->n_leafs) * 2 + 64;
    tg_sched *s = tg_sched_new(backends, NULL, n, graph_size, k->parallel, k->op_offload);
    if (s) tg_gallocr_set_policy(tg_sched_get_gallocr(s), TG_PLAN_GGML);
    return s;
}

enum tg_status tg_ggml_tgsched_move_weights(struct tg_ggml_sched_case *k, tg_backend *const *backends) {
    int n = k->n_backends;
    /* weights move to their backends' buffers */
    struct tg_graph *g = k->c->graph;
    tg_buffer **moved = k->tg_moved;
    size_t need[TG_GGML_SCHED_MAX_BACKENDS] = {0}, used[TG_GGML_SCHED_MAX_BACKENDS] = {0};
    for (int j = 0; j < g->n_leafs; j++) {
        int b = k->placement[j];
        if (b >= 0 && b < n - 1) need[b] += tg_buft_get_alloc_size(tg_backend_get_default_buffer_type(backends[b]), g->leafs[j]) + 512;
    }
    for (int b = 0; b < n - 1; b++) {
        if (!need[b]) continue;
        moved[b] = tg_backend_alloc_buffer(backends[b], need[b]);
        if (!moved[b]) return tg_fail(TG_ERR_ALLOC, "moving the weights: %s", tg_last_error());
        tg_buffer_set_usage(moved[b], TG_BUFFER_USAGE_WEIGHTS);
    }
    for (int j = 0; j < g->n_leafs; j++) {
        int b = k->placement[j];
        if (b < 0 || b == n - 1) continue;
        size_t align = tg_buffer_get_alignment(moved[b]);
        used[b] = (used[b] + align - 1) / align * align;
        enum tg_status st = tg_tensor_bind(g->leafs[j], moved[b], (char *)tg_buffer_get_base(moved[b]) + used[b]);
        if (st != TG_OK) return st;
        used[b] += tg_buffer_get_alloc_size(moved[b], g->leafs[j]);
    }
    /* views of a moved weight (nodes, and leafs made as ggml_view_tensor makes
     * them) still point into the case's buffer: unbound, as a caller moving
     * weights does, so the allocator binds them again at their root */
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        if (t->view_src && t->buffer && t->buffer != t->view_src->buffer) {
            t->data = NULL;
            t->buffer = NULL;
        }
    }
    return TG_OK;
}

enum tg_status tg_ggml_schedule_in_tgsched(struct tg_ggml_sched_case *k, enum tg_sched_fault fault,
                                           struct tg_ggml_schedule *p) {
    memset(p, 0, sizeof *p);
    tg_sched *s = tg_ggml_tgsched_open(k, true);
    if (!s) return tg_fail(TG_ERR_INVALID, "tgsched's side: %s", tg_last_error());
    tg_sched_set_fault(s, fault);
    struct tg_graph *g = k->c->graph;
    enum tg_status st = tg_sched_alloc_graph(s, g);
    if (st != TG_OK) {
        p->refused = true;
        snprintf(p->message, sizeof p->message, "%s", tg_last_error());
        tg_sched_free(s);
        return TG_OK;
    }
    tg_ggml_tgsched_capture(s, k, p);
    tg_sched_free(s);
    return TG_OK;
}

void tg_ggml_tgsched_capture(const tg_sched *s, const struct tg_ggml_sched_case *k, struct tg_ggml_schedule *p) {
    const struct tg_graph *g = k->c->graph;
    int n = k->n_backends;
    p->ran = true;
    p->n_nodes = g->n_nodes;
    for (int u = 0; u < g->n_nodes + g->n_leafs && u < TG_GGML_SCHED_MAX_TENSORS; u++) {
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        p->backend[u] = tg_sched_get_tensor_backend_id(s, t);
        enum tg_sched_reason why = tg_sched_get_tensor_reason(s, t);
        p->weights_rule[u] = why == TG_REASON_WEIGHTS || why == TG_REASON_OFFLOAD;
    }
    struct tg_graph *copy = tg_sched_get_graph_copy(s);
    for (int i = 0; i < tg_sched_get_n_splits(s) && p->n_splits < TG_GGML_SCHED_MAX_SPLITS; i++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(s, i, &info) != TG_OK) continue;
        struct tg_ggml_split *sp = &p->splits[p->n_splits++];
        sp->backend = info.backend_id;
        sp->i_start = sp->i_end = -1;
        for (int c = info.i_start; c < info.i_end; c++) {
            int u = tg_ggml_sched_slot(g, copy->nodes[c]);
            if (u < 0 || u >= g->n_nodes) continue; /* a copy the scheduler made */
            if (sp->i_start < 0) sp->i_start = u;
            sp->i_end = u + 1;
        }
        for (int k2 = 0; k2 < info.n_inputs && sp->n_inputs < TG_GGML_SCHED_MAX_INPUTS; k2++) {
            sp->inputs[sp->n_inputs++] = tg_ggml_sched_slot(g, info.inputs[k2]);
        }
    }
    p->n_copies = tg_sched_get_n_copies(s);
    for (int b = 0; b < n; b++) p->sizes[b] = tg_sched_get_buffer_size(s, tg_sched_get_backend(s, b));
}

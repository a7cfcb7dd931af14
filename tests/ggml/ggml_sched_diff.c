/* The scheduler differential (see tg-ggml-sched.h): one generated case, its
 * schedule by ggml_backend_sched (in a child process, traced through the
 * test backends) and by tg_sched, compared node by node and split by split. */
#include "tg-ggml-sched.h"

#include "tg-cpu.h"
#include "tg-sched.h"
#include "tg-sim.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_BACKENDS (TG_GEN_SCHED_MAX_SIMS + 1)
#define SD_MAX_NODES 4096
#define SD_MAX_SPLITS 256
#define SD_MAX_INPUTS 64
#define OFFLOAD_MIN_BATCH 4

const char *tg_ggml_sched_class_name(enum tg_ggml_sched_class c) {
    static const char *const names[TG_GGML_SCHED_CLASS_COUNT] = {
        "same", "ggml abort: unassigned leaf", "both refuse", "copy reuse across splits", "pipeline input copies",
        "ggml writes elsewhere", "ggml view on first backend", "in-place across backends", "only views",
        "view of weights", "UNEXPLAINED"};
    return c < TG_GGML_SCHED_CLASS_COUNT ? names[c] : "?";
}

/* One schedule, as either side made it.  Tensors are named by their slot in
 * the user's graph: nodes 0..n_nodes-1, then leafs. */
struct sd_split {
    int backend, i_start, i_end, n_inputs;
    int inputs[SD_MAX_INPUTS];
};
struct sd_plan {
    bool ran, aborted, refused;
    char message[300];
    int n_nodes;
    int node_backend[SD_MAX_NODES]; /* nodes, then leafs */
    int n_splits;
    struct sd_split splits[SD_MAX_SPLITS];
    int n_copies;
    size_t sizes[MAX_BACKENDS];
    bool inplace_across; /* ggml: a node took a source's memory in place, the two on different backends */
    bool weights_rule[SD_MAX_NODES]; /* tgsched: the node went where its weights are (or was offloaded) */
};

/* ---- the case, shared by both sides ------------------------------------------------------- */

struct sd_case {
    struct tg_gen_sched_case sc;
    struct tg_gen_case *c;
    int n_backends;
    int *placement; /* per leaf: the backend its weights live on (-1: not pre-allocated) */
};

static int slot_of_name(const struct tg_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return i;
    for (int j = 0; j < g->n_leafs; j++)
        if (strcmp(g->leafs[j]->name, name) == 0) return g->n_nodes + j;
    return -1;
}

static int slot_of(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == t) return i;
    for (int j = 0; j < g->n_leafs; j++)
        if (g->leafs[j] == t) return g->n_nodes + j;
    return -1;
}

static void place_weights(struct sd_case *k) {
    const struct tg_graph *g = k->c->graph;
    for (int j = 0; j < g->n_leafs; j++) {
        const struct tg_tensor *t = g->leafs[j];
        k->placement[j] = -1;
        if (t->view_src || !t->buffer || t->buffer != k->c->external_buffer) continue;
        uint64_t x = ((uint64_t)k->sc.placement + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(j + 1) * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        k->placement[j] = (int)(x % (uint64_t)k->n_backends);
    }
}

/* ---- ggml's side, in a child ---------------------------------------------------------------- */

struct ggml_child {
    const struct sd_case *k;
    struct tg_ggml_trace trace;
    struct tg_ggml_test_backend tb[MAX_BACKENDS];
    struct tg_ggml_buft weights_on_cpu; /* host memory of pre-allocated leafs on the CPU */
    struct sd_plan *out;
};

static struct sd_plan *abort_plan; /* the child's shared result, for its abort callback */

static void child_abort(const char *message) {
    if (abort_plan) {
        abort_plan->aborted = true;
        snprintf(abort_plan->message, sizeof abort_plan->message, "%s", message);
    }
}

static ggml_backend_buffer_type_t weights_buft(const struct tg_tensor *t, void *user) {
    struct ggml_child *ch = user;
    const struct tg_graph *g = ch->k->c->graph;
    int u = slot_of(g, t);
    int b = u >= g->n_nodes ? ch->k->placement[u - g->n_nodes] : -1;
    if (b < 0 || b == ch->k->n_backends - 1) return &ch->weights_on_cpu.buft;
    return ch->tb[b].buft;
}

static int backend_index(struct ggml_child *ch, ggml_backend_t b) {
    for (int i = 0; i < ch->k->n_backends; i++)
        if (&ch->tb[i].backend == b) return i;
    return -1;
}

/* The trace as splits: each compute is a split, the data moved before it its inputs. */
static void splits_from_trace(struct ggml_child *ch, const struct ggml_cgraph *cg, struct sd_plan *p) {
    const struct tg_graph *g = ch->k->c->graph;
    int pending[SD_MAX_INPUTS], n_pending = 0;
    for (int e = 0; e < ch->trace.n && p->n_splits < SD_MAX_SPLITS; e++) {
        const struct tg_ggml_trace_event *ev = &ch->trace.ev[e];
        if (!ev->compute) {
            /* a copy's name is BACKEND#SOURCE#COPY; a source read directly is named itself */
            char name[GGML_MAX_NAME];
            const char *h = strchr(ev->name, '#');
            snprintf(name, sizeof name, "%s", h ? h + 1 : ev->name);
            char *h2 = strchr(name, '#');
            if (h2) *h2 = '\0';
            int u = slot_of_name(g, name);
            bool seen = false;
            for (int i = 0; i < n_pending; i++) seen |= pending[i] == u;
            if (!seen && n_pending < SD_MAX_INPUTS) pending[n_pending++] = u;
            continue;
        }
        struct sd_split *s = &p->splits[p->n_splits++];
        s->backend = ev->backend;
        s->i_start = (int)(ev->nodes - (const struct ggml_tensor *const *)ggml_graph_nodes((struct ggml_cgraph *)cg));
        s->i_end = s->i_start + ev->n_nodes;
        s->n_inputs = n_pending;
        memcpy(s->inputs, pending, (size_t)n_pending * sizeof *pending);
        n_pending = 0;
    }
}

static void run_ggml_child(struct ggml_child *ch) {
    const struct sd_case *k = ch->k;
    struct sd_plan *p = ch->out;
    int n = k->n_backends;
    tg_ggml_test_cpu_init(&ch->tb[n - 1], n - 1, &ch->trace);
    for (int i = 0; i < n - 1; i++) {
        const struct tg_gen_sched_sim *s = &k->sc.sims[i];
        char name[16];
        snprintf(name, sizeof name, "sim%d", i);
        tg_ggml_test_device_init(&ch->tb[i], i, name, s->alignment, s->alloc_pad ? 64 : 0, s->share_host, &ch->tb[n - 1],
                                 s->op_mask, OFFLOAD_MIN_BATCH, &ch->trace);
    }
    tg_ggml_buft_init(&ch->weights_on_cpu, "weights", 64, 0, GGML_OP_COUNT, 0, true);
    ch->weights_on_cpu.trace = &ch->trace;
    struct tg_ggml_graph gg;
    struct tg_ggml_import_options io = {.external_buft = weights_buft, .user = ch};
    if (tg_ggml_import(k->c->graph, &io, &gg) != TG_OK) {
        snprintf(p->message, sizeof p->message, "import: %s", tg_last_error());
        return;
    }
    ggml_backend_t backends[MAX_BACKENDS];
    for (int i = 0; i < n; i++) backends[i] = &ch->tb[i].backend;
    const struct tg_graph *g = k->c->graph;
    size_t graph_size = (size_t)(g->n_nodes + g->n_leafs) * 2 + 64;
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, n, graph_size, k->sc.parallel, k->sc.op_offload);
    if (!ggml_backend_sched_alloc_graph(sched, gg.graph)) {
        p->refused = true;
        snprintf(p->message, sizeof p->message, "ggml_backend_sched_alloc_graph failed");
        return;
    }
    p->n_nodes = g->n_nodes;
    for (int u = 0; u < g->n_nodes + g->n_leafs && u < SD_MAX_NODES; u++) {
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        p->node_backend[u] = backend_index(ch, ggml_backend_sched_get_tensor_backend(sched, tg_ggml_lookup(&gg, t)));
    }
    p->n_copies = ggml_backend_sched_get_n_copies(sched);
    for (int i = 0; i < n; i++) p->sizes[i] = ggml_backend_sched_get_buffer_size(sched, backends[i]);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct ggml_tensor *x = tg_ggml_lookup(&gg, g->nodes[i]);
        for (int j = 0; j < GGML_MAX_SRC && !x->view_src && x->data; j++) {
            const struct ggml_tensor *s = x->src[j];
            if (s && !s->view_src && s->data == x->data &&
                ggml_backend_sched_get_tensor_backend(sched, (struct ggml_tensor *)s) !=
                    ggml_backend_sched_get_tensor_backend(sched, (struct ggml_tensor *)x)) {
                p->inplace_across = true;
            }
        }
    }
    ch->trace.n = 0;
    ggml_backend_sched_graph_compute(sched, gg.graph);
    splits_from_trace(ch, gg.graph, p);
    if (ch->trace.overflow || p->n_splits != ggml_backend_sched_get_n_splits(sched)) {
        snprintf(p->message, sizeof p->message, "the trace lost splits (%d traced, %d by ggml)", p->n_splits,
                 ggml_backend_sched_get_n_splits(sched));
        return;
    }
    p->ran = true;
    /* the process ends here: the schedule and the graph go with it */
}

/* Runs ggml's side in a child; its abort (a GGML_ASSERT) is a finding. */
static enum tg_status ggml_schedule(const struct sd_case *k, struct sd_plan *out) {
    struct sd_plan *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return tg_fail(TG_ERR_ALLOC, "no shared memory for the child's result");
    memset(shared, 0, sizeof *shared);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        abort_plan = shared;
        ggml_set_abort_callback(child_abort);
        struct ggml_child *ch = calloc(1, sizeof *ch);
        if (ch) {
            ch->k = k;
            ch->out = shared;
            run_ggml_child(ch);
        }
        _exit(0);
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    memcpy(out, shared, sizeof *out);
    munmap(shared, sizeof *shared);
    if (pid < 0) return tg_fail(TG_ERR_ALLOC, "fork failed");
    if (!out->ran && !out->aborted && !out->refused && !out->message[0]) {
        snprintf(out->message, sizeof out->message, "the child ended with status 0x%x", status);
    }
    return TG_OK;
}

/* ---- tgsched's side ----------------------------------------------------------------------- */

static enum tg_status tg_schedule(struct sd_case *k, struct sd_plan *p, tg_backend **backends, tg_buffer **moved,
                                  enum tg_sched_fault fault) {
    int n = k->n_backends;
    for (int i = 0; i < n - 1; i++) {
        const struct tg_gen_sched_sim *s = &k->sc.sims[i];
        struct tg_sim_params sp;
        tg_sim_params_default(&sp);
        char name[16];
        snprintf(name, sizeof name, "sim%d", i);
        sp.name = name;
        sp.alignment = s->alignment;
        sp.alloc_pad = s->alloc_pad ? 64 : 0;
        sp.share_host_buffer_type = s->share_host;
        sp.synchronous = true;
        sp.plan_only = true; /* the op set decides, as the test backends' */
        sp.supported_ops_all = false;
        for (int op = 0; op < TG_OP_COUNT; op++) sp.supported_ops[op] = (s->op_mask >> (op % 64)) & 1;
        sp.offload_min_batch = OFFLOAD_MIN_BATCH;
        backends[i] = tg_backend_sim_new(&sp);
        if (!backends[i]) return TG_ERR_ALLOC;
    }
    backends[n - 1] = tg_backend_cpu_new();
    if (!backends[n - 1]) return TG_ERR_ALLOC;
    tg_backend_cpu_set_plan_only(backends[n - 1], true);
    /* weights move to their backends' buffers */
    struct tg_graph *g = k->c->graph;
    size_t need[MAX_BACKENDS] = {0}, used[MAX_BACKENDS] = {0};
    for (int j = 0; j < g->n_leafs; j++) {
        int b = k->placement[j];
        if (b >= 0 && b < n - 1) need[b] += tg_buft_get_alloc_size(tg_backend_get_default_buffer_type(backends[b]), g->leafs[j]) + 512;
    }
    for (int b = 0; b < n - 1; b++) {
        if (!need[b]) continue;
        moved[b] = tg_backend_alloc_buffer(backends[b], need[b]);
        if (!moved[b]) return TG_ERR_ALLOC;
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
    size_t graph_size = (size_t)(g->n_nodes + g->n_leafs) * 2 + 64;
    tg_sched *s = tg_sched_new(backends, NULL, n, graph_size, k->sc.parallel, k->sc.op_offload);
    if (!s) return tg_fail(TG_ERR_INVALID, "tg_sched_new: %s", tg_last_error());
    tg_gallocr_set_policy(tg_sched_get_gallocr(s), TG_PLAN_GGML);
    tg_sched_set_fault(s, fault);
    enum tg_status st = tg_sched_alloc_graph(s, g);
    if (st != TG_OK) {
        p->refused = true;
        snprintf(p->message, sizeof p->message, "%s", tg_last_error());

        tg_sched_free(s);
        return TG_OK;
    }
    p->ran = true;
    p->n_nodes = g->n_nodes;
    for (int u = 0; u < g->n_nodes + g->n_leafs && u < SD_MAX_NODES; u++) {
        const struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        p->node_backend[u] = tg_sched_get_tensor_backend_id(s, t);
        enum tg_sched_reason why = tg_sched_get_tensor_reason(s, t);
        p->weights_rule[u] = why == TG_REASON_WEIGHTS || why == TG_REASON_OFFLOAD;
    }
    struct tg_graph *copy = tg_sched_get_graph_copy(s);
    for (int i = 0; i < tg_sched_get_n_splits(s) && p->n_splits < SD_MAX_SPLITS; i++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(s, i, &info) != TG_OK) continue;
        struct sd_split *sp = &p->splits[p->n_splits++];
        sp->backend = info.backend_id;
        sp->i_start = sp->i_end = -1;
        for (int c = info.i_start; c < info.i_end; c++) {
            int u = slot_of(g, copy->nodes[c]);
            if (u < 0 || u >= g->n_nodes) continue; /* a copy the scheduler made */
            if (sp->i_start < 0) sp->i_start = u;
            sp->i_end = u + 1;
        }
        for (int k2 = 0; k2 < info.n_inputs && sp->n_inputs < SD_MAX_INPUTS; k2++) sp->inputs[sp->n_inputs++] = slot_of(g, info.inputs[k2]);
    }
    p->n_copies = tg_sched_get_n_copies(s);
    for (int b = 0; b < n; b++) p->sizes[b] = tg_sched_get_buffer_size(s, backends[b]);
    tg_sched_free(s);
    return TG_OK;
}

/* ---- comparing ------------------------------------------------------------------------------ */

static bool has_input(const struct sd_split *s, int u) {
    for (int i = 0; i < s->n_inputs; i++)
        if (s->inputs[i] == u) return true;
    return false;
}

static bool copied_before(const struct sd_plan *p, int i, int backend, int u) {
    for (int j = 0; j < i; j++)
        if (p->splits[j].backend == backend && has_input(&p->splits[j], u)) return true;
    return false;
}

/* tgsched's schedule as ggml would make it if it read copies again: inputs
 * an earlier split on the same backend copied are not inputs, and a split
 * that had only such inputs does not end where a weight read elsewhere would
 * end a split with inputs (ggml counts none there).  False when nothing changed. */
static bool as_with_copy_reuse(const struct sd_plan *p, struct sd_plan *out) {
    *out = *p;
    out->n_splits = 0;
    bool changed = false;
    for (int i = 0; i < p->n_splits; i++) {
        const struct sd_split *s = &p->splits[i];
        struct sd_split *prev = out->n_splits ? &out->splits[out->n_splits - 1] : NULL;
        bool merge = prev && prev->backend == s->backend && prev->n_inputs == 0 && prev->i_end == s->i_start;
        struct sd_split *d = merge ? prev : &out->splits[out->n_splits++];
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

static bool same_inputs(const struct sd_split *a, const struct sd_split *b) {
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
static bool writes_elsewhere(const struct tg_graph *g, const struct sd_plan *gp) {
    for (int u = 0; u < g->n_nodes; u++) {
        const struct tg_tensor *t = g->nodes[u];
        if (!t->view_src || tg_op_is_view(t->op) || t->op == TG_OP_NONE) continue;
        int root = slot_of(g, t->view_src);
        if (root >= 0 && gp->node_backend[u] != gp->node_backend[root]) return true;
    }
    return false;
}

/* The node tgsched refused because it writes its destination's memory and the
 * destination's backend cannot run it; -1 for another refusal. */
static int refused_writer(const struct sd_case *k, const struct sd_plan *tp) {
    const struct tg_graph *g = k->c->graph;
    int i = -1;
    const char *at = strstr(tp->message, "node ");
    if (!strstr(tp->message, "must run there") || !at || sscanf(at, "node %d", &i) != 1) return -1;
    return i >= 0 && i < g->n_nodes && g->nodes[i]->view_src ? i : -1;
}

/* ggml ran that node on its destination's backend anyway (a view follows
 * its root, op or not), which does not have the op. */
static bool writes_without_op(const struct sd_case *k, const struct sd_plan *gp, const struct sd_plan *tp) {
    const struct tg_graph *g = k->c->graph;
    int i = refused_writer(k, tp);
    if (i < 0) return false;
    int b = gp->node_backend[i];
    if (b < 0 || b == k->n_backends - 1) return false; /* the CPU runs every op */
    int op = (int)g->nodes[i]->op;
    return !((k->sc.sims[b].op_mask >> (op % 64)) & 1);
}

/* ggml put a view op on another backend than its root (a root not assigned
 * yet when the view is met: the view takes the first backend with view ops). */
static bool view_off_root(const struct tg_graph *g, const struct sd_plan *gp, int u) {
    if (u < 0 || u >= g->n_nodes || !tg_op_is_view(g->nodes[u]->op)) return false;
    int root = slot_of(g, g->nodes[u]->view_src);
    return root >= 0 && gp->node_backend[u] != gp->node_backend[root];
}

static bool reads_view_of_weights(const struct sd_case *k, int u) {
    const struct tg_graph *g = k->c->graph;
    for (int j = 0; j < TG_MAX_SRC; j++) {
        const struct tg_tensor *s = g->nodes[u]->src[j];
        int root = s && s->view_src ? slot_of(g, s->view_src) : -1;
        if (root >= g->n_nodes && k->placement[root - g->n_nodes] >= 0) return true;
    }
    return false;
}

static bool any_reads_view_of_weights(const struct sd_case *k) {
    for (int u = 0; u < k->c->graph->n_nodes; u++)
        if (reads_view_of_weights(k, u)) return true;
    return false;
}

static bool split_starts_at(const struct sd_plan *p, int u) {
    for (int i = 0; i < p->n_splits; i++)
        if (p->splits[i].i_start == u) return true;
    return false;
}

/* A node reading a view of a pre-allocated weight that tgsched placed by the
 * weights rule, that ggml and tgsched put on different backends, or where
 * tgsched starts a split and ggml does not:
 * ggml's weight checks look at the view's own buffer, which a view gets only
 * when the graph is allocated, so they do not see the weight (the rule that
 * ops go to their weights, and the one that ends a split reading weights from
 * elsewhere); tgsched's follow the view to its root. */
static bool reads_view_of_weights_elsewhere(const struct sd_case *k, const struct sd_plan *gp, const struct sd_plan *tp) {
    for (int u = 0; u < k->c->graph->n_nodes; u++) {
        if (!reads_view_of_weights(k, u)) continue;
        if (tp->weights_rule[u] || gp->node_backend[u] != tp->node_backend[u]) return true;
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
static bool view_took_first_backend(const struct sd_case *k, const struct sd_plan *gp, const struct sd_plan *tp) {
    const struct tg_graph *g = k->c->graph;
    for (int u = 0; u < g->n_nodes; u++) {
        if (view_off_root(g, gp, u)) return true;
        const struct tg_tensor *v = g->nodes[u];
        if (!tg_op_is_view(v->op) || gp->node_backend[u] == tp->node_backend[u]) continue;
        int root = slot_of(g, v->view_src);
        if (root < g->n_nodes || k->placement[root - g->n_nodes] >= 0) continue; /* a leaf planned, not pre-allocated */
        bool first = true;
        for (int i = 0; i < u && first; i++) first = !reads(g->nodes[i], v->view_src);
        if (first) return true;
    }
    return false;
}

static void compare(const struct sd_plan *gp, const struct sd_plan *tp_own, int n_backends, struct tg_ggml_sched_result *res) {
    res->n_splits_ggml = gp->n_splits;
    res->n_splits_tg = tp_own->n_splits;
    static struct sd_plan reused; /* large: kept off the stack */
    bool reuse = as_with_copy_reuse(tp_own, &reused);
    const struct sd_plan *tp = reuse ? &reused : tp_own;
    for (int i = 0; i < tp->n_nodes; i++) {
        if (gp->node_backend[i] == tp->node_backend[i]) continue;
        if (!res->nodes_differ++) {
            snprintf(res->detail, sizeof res->detail, "node %d: ggml backend %d, tgsched %d", i, gp->node_backend[i], tp->node_backend[i]);
        }
    }
    int n = gp->n_splits < tp->n_splits ? gp->n_splits : tp->n_splits;
    for (int i = 0; i < n; i++) {
        const struct sd_split *a = &gp->splits[i], *b = &tp->splits[i];
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
    bool structure = res->nodes_differ || res->splits_differ || res->inputs_differ || res->copies_differ;
    /* sizes follow the copies, and the allocator's in-place rule (test_ggml_alloc) */
    bool sizes_explained = reuse || input_copies || gp->inplace_across;
    if (structure || (res->sizes_differ && !sizes_explained)) res->classes |= 1u << TG_GGML_SCHED_UNEXPLAINED;
}

/* Where ggml did not schedule (an abort) or tgsched refused, the reason; where
 * both scheduled, the comparison, and for a difference the ggml behaviour it
 * follows from (each changes what comes after it, so the case is its). */
static void classify(const struct sd_case *k, const struct sd_plan *gp, const struct sd_plan *tp,
                     struct tg_ggml_sched_result *res) {
    const struct tg_graph *g = k->c->graph;
    enum tg_ggml_sched_class c = TG_GGML_SCHED_UNEXPLAINED;
    if (gp->aborted && strstr(gp->message, "buffer_id >= 0") && tp->ran) {
        c = TG_GGML_SCHED_UNASSIGNED_LEAF;
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
        compare(gp, tp, k->n_backends, res);
        res->compared = true;
        if (!((res->classes >> TG_GGML_SCHED_UNEXPLAINED) & 1)) return;
        res->classes &= ~(1u << TG_GGML_SCHED_UNEXPLAINED);
        res->compared = false;
        if (only_views(g)) c = TG_GGML_SCHED_ALL_VIEWS;
        else if (reads_view_of_weights_elsewhere(k, gp, tp)) c = TG_GGML_SCHED_VIEW_OF_WEIGHTS;
        else if (view_took_first_backend(k, gp, tp)) c = TG_GGML_SCHED_VIEW_OFF_ROOT;
        else if (writes_elsewhere(g, gp)) c = TG_GGML_SCHED_WRITE_ELSEWHERE;
    }
    res->classes |= 1u << c;
}

enum tg_status tg_ggml_sched_compare(const uint8_t *bytes, size_t n, enum tg_sched_fault fault,
                                     struct tg_ggml_sched_result *res) {
    memset(res, 0, sizeof *res);
    struct sd_case k;
    memset(&k, 0, sizeof k);
    tg_gen_sched_decode(bytes, n, &k.sc);
    k.n_backends = k.sc.n_sims + 1;
    res->n_backends = k.n_backends;
    struct tg_gen_options opts = tg_gen_target_options("sched");
    enum tg_status st = tg_gen_case_from_bytes(k.sc.graph, k.sc.graph_n, &opts, &k.c);
    if (st != TG_OK) return st;
    const struct tg_graph *g = k.c->graph;
    res->n_nodes = g->n_nodes;
    k.placement = calloc((size_t)g->n_leafs + 1, sizeof *k.placement);
    struct sd_plan *gp = calloc(1, sizeof *gp), *tp = calloc(1, sizeof *tp);
    tg_backend *backends[MAX_BACKENDS] = {0};
    tg_buffer *moved[MAX_BACKENDS] = {0};
    if (!k.placement || !gp || !tp || g->n_nodes + g->n_leafs > SD_MAX_NODES) st = tg_fail(TG_ERR_ALLOC, "sched differential: no room");
    if (st == TG_OK) {
        place_weights(&k);
        st = ggml_schedule(&k, gp); /* before tgsched moves the weights: the child sees the case as decoded */
    }
    if (st == TG_OK) st = tg_schedule(&k, tp, backends, moved, fault);
    if (st == TG_OK) classify(&k, gp, tp, res);
    tg_gen_case_free(k.c); /* before the buffers its weights were moved to */
    for (int b = 0; b < MAX_BACKENDS; b++) tg_buffer_free(moved[b]);
    for (int b = 0; b < MAX_BACKENDS; b++) tg_backend_free(backends[b]);
    free(k.placement);
    free(gp);
    free(tp);
    return st;
}

/* The CPU backend: op dispatch, exact support checks, and graph compute with a
 * team of threads that split each node's rows and meet at a barrier between
 * nodes. */
#include "cpu-kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum family { FAMILY_NONE, FAMILY_NOOP, FAMILY_ELEMENTWISE, FAMILY_ROWS, FAMILY_COPY, FAMILY_MATRIX, FAMILY_CONV };

static enum family family_of(enum tg_op op) {
    switch (op) {
    case TG_OP_NONE: case TG_OP_VIEW: case TG_OP_RESHAPE: case TG_OP_PERMUTE: case TG_OP_TRANSPOSE:
        return FAMILY_NOOP;
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV: case TG_OP_ADD1: case TG_OP_SCALE:
    case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_FILL: case TG_OP_UNARY: case TG_OP_GLU:
    case TG_OP_DIAG_MASK_INF:
        return FAMILY_ELEMENTWISE;
    case TG_OP_RMS_NORM: case TG_OP_NORM: case TG_OP_SOFT_MAX: case TG_OP_ROPE: case TG_OP_CONCAT: case TG_OP_SUM_ROWS:
        return FAMILY_ROWS;
    case TG_OP_CPY: case TG_OP_DUP: case TG_OP_CONT: case TG_OP_GET_ROWS: case TG_OP_SET_ROWS:
        return FAMILY_COPY;
    case TG_OP_MUL_MAT: case TG_OP_FLASH_ATTN_EXT:
        return FAMILY_MATRIX;
    case TG_OP_IM2COL:
        return FAMILY_CONV;
    default:
        return FAMILY_NONE;
    }
}

bool tg_cpu_supports_op(const struct tg_tensor *node) {
    switch (family_of(node->op)) {
    case FAMILY_NOOP: return true;
    case FAMILY_ELEMENTWISE: return cpu_supports_elementwise(node);
    case FAMILY_ROWS: return cpu_supports_rows(node);
    case FAMILY_COPY: return cpu_supports_copy(node);
    case FAMILY_MATRIX: return cpu_supports_matrix(node);
    case FAMILY_CONV: return cpu_supports_conv(node);
    default: return false;
    }
}

static struct cpu_work work_of(const struct tg_tensor *node) {
    switch (family_of(node->op)) {
    case FAMILY_ROWS: return cpu_work_rows(node);
    case FAMILY_COPY: return cpu_work_copy(node);
    case FAMILY_MATRIX: return cpu_work_matrix(node);
    default: return (struct cpu_work){0, 0};
    }
}

static size_t round_up(size_t n) { return (n + 63) / 64 * 64; }

/* "'x' (op mul_mat, f32 [8, 2, 1, 1] from 'w' q4_1 [64, 8, 1, 1] nb 20,40,320,320,
 * 'y' f16 [..] nb ..)": what a refusal names, every source's type and layout
 * (the result's type alone rarely says what is missing). */
static void describe(const struct tg_tensor *n, char *out, size_t size) {
    size_t len = 0;
    int w = snprintf(out, size, "'%s' (op %s, %s [%lld, %lld, %lld, %lld]", n->name, tg_op_name(n->op),
                     tg_type_name(n->type), (long long)n->ne[0], (long long)n->ne[1], (long long)n->ne[2],
                     (long long)n->ne[3]);
    bool first = true;
    for (int k = 0; k < TG_MAX_SRC && w >= 0 && (len += (size_t)w) < size; k++) {
        const struct tg_tensor *s = n->src[k];
        w = 0;
        if (!s || s == n) continue;
        w = snprintf(out + len, size - len, "%s '%s' %s [%lld, %lld, %lld, %lld] nb %zu,%zu,%zu,%zu",
                     first ? " from" : ",", s->name, tg_type_name(s->type), (long long)s->ne[0], (long long)s->ne[1],
                     (long long)s->ne[2], (long long)s->ne[3], s->nb[0], s->nb[1], s->nb[2], s->nb[3]);
        first = false;
    }
    if (len < size) snprintf(out + len, size - len, ")");
}

static enum tg_status refuse(const struct tg_tensor *n, int index) {
    char what[640];
    describe(n, what, sizeof what);
    if (index >= 0) {
        return tg_fail(TG_ERR_UNSUPPORTED, "CPU backend: no kernel for node %d %s: this type or layout is not computed here",
                       index, what);
    }
    return tg_fail(TG_ERR_UNSUPPORTED, "CPU backend: no kernel for node %s: this type or layout is not computed here", what);
}

void tg_cpu_describe_node(const struct tg_tensor *node, char *out, size_t size) { describe(node, out, size); }

static enum tg_status compute(struct tg_tensor *node, const struct cpu_exec *x) {
    switch (family_of(node->op)) {
    case FAMILY_ELEMENTWISE: return cpu_op_elementwise(node, x);
    case FAMILY_ROWS: return cpu_op_rows(node, x);
    case FAMILY_COPY: return cpu_op_copy(node, x);
    case FAMILY_MATRIX: return cpu_op_matrix(node, x);
    case FAMILY_CONV: return cpu_op_conv(node, x);
    default: return TG_OK;
    }
}

static bool has_no_memory(const struct tg_tensor *t) { return !t->data; }

/* in a buffer the host cannot address (a device's) */
static bool off_host(const struct tg_tensor *t) { return t->buffer && !tg_buffer_is_host(t->buffer); }

/* The node, or the first of its sources, that the kernel cannot touch for
 * the reason bad tests: NULL when there is none. */
static const struct tg_tensor *first_operand(const struct tg_tensor *n, bool (*bad)(const struct tg_tensor *)) {
    if (bad(n)) return n;
    for (int k = 0; k < TG_MAX_SRC; k++) {
        if (n->src[k] && bad(n->src[k])) return n->src[k];
    }
    return NULL;
}

static enum tg_status no_memory(const struct tg_tensor *n, const struct tg_tensor *missing, int index) {
    char where[32] = "";
    if (index >= 0) snprintf(where, sizeof where, "%d ", index);
    if (missing == n) {
        return tg_fail(TG_ERR_INVALID, "CPU backend: node %s'%s' has no memory (allocate the graph first)", where, n->name);
    }
    return tg_fail(TG_ERR_INVALID, "CPU backend: source '%s' of node %s'%s' has no memory (allocate the graph first)",
                   missing->name, where, n->name);
}

enum tg_status tg_cpu_compute_node(struct tg_tensor *node, int ith, int nth) {
    if (!tg_cpu_supports_op(node)) return refuse(node, -1);
    const struct tg_tensor *missing = family_of(node->op) != FAMILY_NOOP ? first_operand(node, has_no_memory) : NULL;
    if (missing) return no_memory(node, missing, -1);
    const struct cpu_work w = work_of(node);
    uint8_t *mem = NULL;
    if (w.shared + w.per_thread > 0) {
        mem = aligned_alloc(64, round_up(w.shared) + round_up(w.per_thread));
        if (!mem) return tg_fail(TG_ERR_ALLOC, "CPU backend: out of memory for the scratch of node '%s'", node->name);
    }
    const struct cpu_exec x = {.ith = ith, .nth = nth, .shared = mem, .own = mem ? mem + round_up(w.shared) : NULL};
    enum tg_status st = compute(node, &x);
    free(mem);
    return st;
}

static enum tg_status not_host(const struct tg_tensor *n, const struct tg_tensor *off, int index) {
    const char *buft = tg_buft_name(off->buffer->buft);
    if (off == n) {
        return tg_fail(TG_ERR_INVALID, "CPU backend: node %d '%s' is in a buffer of type '%s', which is not host "
                       "memory: give it host memory", index, n->name, buft);
    }
    return tg_fail(TG_ERR_INVALID, "CPU backend: source '%s' of node %d '%s' is in a buffer of type '%s', which is "
                   "not host memory: copy it to a host buffer first (the scheduler copies split inputs)", off->name,
                   index, n->name, buft);
}

/* Checks every node and sizes the scratch the largest needs. */
static enum tg_status check_graph(const struct tg_graph *g, struct cpu_work *most) {
    *most = (struct cpu_work){0, 0};
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *n = g->nodes[i];
        if (n->flags & TG_FLAG_NO_COMPUTE) continue; /* in the graph, never computed (as ggml's CPU) */
        if (!tg_cpu_supports_op(n)) return refuse(n, i);
        if (family_of(n->op) != FAMILY_NOOP) {
            const struct tg_tensor *missing = first_operand(n, has_no_memory);
            if (missing) return no_memory(n, missing, i);
            const struct tg_tensor *off = first_operand(n, off_host);
            if (off) return not_host(n, off, i);
        }
        const struct cpu_work w = work_of(n);
        if (round_up(w.shared) > most->shared) most->shared = round_up(w.shared);
        if (round_up(w.per_thread) > most->per_thread) most->per_thread = round_up(w.per_thread);
    }
    return TG_OK;
}

struct team {
    struct tg_graph *graph;
    int nth;
    pthread_barrier_t barrier;
    uint8_t *scratch; /* shared block, then one block per thread */
    struct cpu_work work;
    enum tg_status status; /* first failure; written before a barrier */
    /* the start gate: helpers wait until every thread exists (go) or one
     * could not be started (abandon), so no partial team meets at the barrier */
    pthread_mutex_t gate_lock;
    pthread_cond_t gate;
    int gate_state; /* 0 waiting, 1 go, 2 abandon */
};

struct member {
    struct team *team;
    int ith;
};

static void team_sync(void *arg) { pthread_barrier_wait(&((struct team *)arg)->barrier); }

static bool pass_gate(struct team *t) {
    pthread_mutex_lock(&t->gate_lock);
    while (t->gate_state == 0) pthread_cond_wait(&t->gate, &t->gate_lock);
    const bool go = t->gate_state == 1;
    pthread_mutex_unlock(&t->gate_lock);
    return go;
}

static void open_gate(struct team *t, int state) {
    pthread_mutex_lock(&t->gate_lock);
    t->gate_state = state;
    pthread_cond_broadcast(&t->gate);
    pthread_mutex_unlock(&t->gate_lock);
}

static void *run_member(void *arg) {
    struct member *m = arg;
    struct team *t = m->team;
    if (m->ith > 0 && !pass_gate(t)) return NULL;
    const struct cpu_exec x = {.ith = m->ith, .nth = t->nth, .shared = t->scratch,
                               .own = t->scratch ? t->scratch + t->work.shared + (size_t)m->ith * t->work.per_thread : NULL,
                               .sync = t->nth > 1 ? team_sync : NULL, .sync_arg = t};
    for (int i = 0; i < t->graph->n_nodes; i++) {
        struct tg_tensor *n = t->graph->nodes[i];
        if (family_of(n->op) == FAMILY_NOOP || (n->flags & TG_FLAG_NO_COMPUTE)) continue;
        enum tg_status st = compute(n, &x);
        if (st != TG_OK && m->ith == 0) t->status = st;
        cpu_sync(&x); /* the next node may read this one */
    }
    return NULL;
}

enum tg_status tg_cpu_compute_graph(struct tg_graph *graph, int n_threads) {
    struct team team = {.graph = graph, .nth = n_threads < 1 ? 1 : n_threads > 64 ? 64 : n_threads, .status = TG_OK};
    enum tg_status st = check_graph(graph, &team.work);
    if (st != TG_OK) return st;
    const size_t bytes = team.work.shared + (size_t)team.nth * team.work.per_thread;
    if (bytes > 0 && !(team.scratch = aligned_alloc(64, bytes))) {
        return tg_fail(TG_ERR_ALLOC, "CPU backend: out of memory for %zu bytes of kernel scratch", bytes);
    }
    if (team.nth == 1) {
        struct member one = {&team, 0};
        run_member(&one);
        free(team.scratch);
        return team.status;
    }
    pthread_t threads[64];
    struct member members[64];
    if (pthread_barrier_init(&team.barrier, NULL, (unsigned)team.nth) != 0) {
        free(team.scratch);
        return tg_fail(TG_ERR_ALLOC, "CPU backend: cannot create a thread barrier");
    }
    pthread_mutex_init(&team.gate_lock, NULL);
    pthread_cond_init(&team.gate, NULL);
    int started = 1;
    for (int t = 1; t < team.nth; t++) {
        members[t] = (struct member){&team, t};
        if (pthread_create(&threads[t], NULL, run_member, &members[t]) != 0) break;
        started++;
    }
    open_gate(&team, started == team.nth ? 1 : 2);
    if (started == team.nth) {
        members[0] = (struct member){&team, 0};
        run_member(&members[0]);
    }
    for (int t = 1; t < started; t++) pthread_join(threads[t], NULL);
    pthread_cond_destroy(&team.gate);
    pthread_mutex_destroy(&team.gate_lock);
    pthread_barrier_destroy(&team.barrier);
    free(team.scratch);
    if (started < team.nth) {
        return tg_fail(TG_ERR_ALLOC, "CPU backend: could start only %d of %d threads", started, team.nth);
    }
    return team.status;
}

/* ---- the backend object ------------------------------------------------------------- */

struct cpu_backend {
    tg_backend backend;
    int n_threads;
    bool plan_only;
};

static const char *cpu_name(tg_backend *b) { (void)b; return "cpu"; }
static void cpu_free(tg_backend *b) { free(b->context); }
static tg_buffer_type *cpu_default_buft(tg_backend *b) { (void)b; return tg_cpu_buffer_type(); }

static enum tg_status cpu_graph_compute(tg_backend *b, struct tg_graph *g) {
    return tg_cpu_compute_graph(g, ((struct cpu_backend *)b->context)->n_threads);
}

static bool cpu_supports_op(tg_backend *b, const struct tg_tensor *op) {
    return ((struct cpu_backend *)b->context)->plan_only || tg_cpu_supports_op(op);
}

static bool cpu_supports_buft(tg_backend *b, tg_buffer_type *buft) {
    (void)b;
    return tg_buft_is_host(buft);
}

tg_backend *tg_backend_cpu_new(void) {
    struct cpu_backend *c = calloc(1, sizeof *c);
    if (!c) {
        tg_fail(TG_ERR_ALLOC, "out of host memory for the CPU backend");
        return NULL;
    }
    c->n_threads = 1;
    c->backend = (tg_backend){
        .iface = {.get_name = cpu_name, .free = cpu_free, .get_default_buffer_type = cpu_default_buft,
                  .graph_compute = cpu_graph_compute, .supports_op = cpu_supports_op,
                  .supports_buft = cpu_supports_buft},
        .context = c,
    };
    return &c->backend;
}

bool tg_backend_is_cpu(tg_backend *backend) { return backend && backend->iface.get_name == cpu_name; }

void tg_backend_cpu_set_plan_only(tg_backend *backend, bool plan_only) {
    if (tg_backend_is_cpu(backend)) ((struct cpu_backend *)backend->context)->plan_only = plan_only;
}

void tg_backend_cpu_set_n_threads(tg_backend *backend, int n_threads) {
    if (tg_backend_is_cpu(backend)) ((struct cpu_backend *)backend->context)->n_threads = n_threads < 1 ? 1 : n_threads;
}

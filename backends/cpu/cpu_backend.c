/* The CPU backend: op dispatch, exact support checks, and graph compute with a
 * team of threads that split each node's rows and meet at a barrier between
 * nodes. */
#include "cpu-kernels.h"

#include <pthread.h>
#include <stdlib.h>

enum family { FAMILY_NONE, FAMILY_NOOP, FAMILY_ELEMENTWISE, FAMILY_ROWS, FAMILY_MATRIX };

static enum family family_of(enum tg_op op) {
    switch (op) {
    case TG_OP_NONE: case TG_OP_VIEW: case TG_OP_RESHAPE: case TG_OP_PERMUTE: case TG_OP_TRANSPOSE:
        return FAMILY_NOOP;
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV: case TG_OP_ADD1: case TG_OP_SCALE:
    case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_FILL: case TG_OP_UNARY: case TG_OP_GLU:
    case TG_OP_DIAG_MASK_INF:
        return FAMILY_ELEMENTWISE;
    case TG_OP_RMS_NORM: case TG_OP_NORM: case TG_OP_SOFT_MAX: case TG_OP_ROPE: case TG_OP_GET_ROWS:
    case TG_OP_SET_ROWS: case TG_OP_CPY: case TG_OP_DUP: case TG_OP_CONT: case TG_OP_CONCAT: case TG_OP_SUM_ROWS:
        return FAMILY_ROWS;
    case TG_OP_MUL_MAT: case TG_OP_FLASH_ATTN_EXT:
        return FAMILY_MATRIX;
    default:
        return FAMILY_NONE;
    }
}

bool tg_cpu_supports_op(const struct tg_tensor *node) {
    switch (family_of(node->op)) {
    case FAMILY_NOOP: return true;
    case FAMILY_ELEMENTWISE: return cpu_supports_elementwise(node);
    case FAMILY_ROWS: return cpu_supports_rows(node);
    case FAMILY_MATRIX: return cpu_supports_matrix(node);
    default: return false;
    }
}

enum tg_status tg_cpu_compute_node(struct tg_tensor *node, int ith, int nth) {
    if (!tg_cpu_supports_op(node)) {
        return tg_fail(TG_ERR_UNSUPPORTED, "CPU backend: no kernel for node '%s' (op %s, type %s%s%s)", node->name,
                       tg_op_name(node->op), tg_type_name(node->type), node->src[0] ? ", src0 " : "",
                       node->src[0] ? tg_type_name(node->src[0]->type) : "");
    }
    if (!node->data && family_of(node->op) != FAMILY_NOOP) {
        return tg_fail(TG_ERR_INVALID, "CPU backend: node '%s' has no memory (allocate the graph first)", node->name);
    }
    switch (family_of(node->op)) {
    case FAMILY_ELEMENTWISE: return cpu_op_elementwise(node, ith, nth);
    case FAMILY_ROWS: return cpu_op_rows(node, ith, nth);
    case FAMILY_MATRIX: return cpu_op_matrix(node, ith, nth);
    default: return TG_OK;
    }
}

static enum tg_status check_graph(const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *n = g->nodes[i];
        if (!tg_cpu_supports_op(n)) {
            return tg_fail(TG_ERR_UNSUPPORTED, "CPU backend: no kernel for node %d '%s' (op %s, type %s)", i, n->name,
                           tg_op_name(n->op), tg_type_name(n->type));
        }
        if (family_of(n->op) != FAMILY_NOOP && !n->data) {
            return tg_fail(TG_ERR_INVALID, "CPU backend: node %d '%s' has no memory (allocate the graph first)", i, n->name);
        }
    }
    return TG_OK;
}

struct team {
    struct tg_graph *graph;
    int nth;
    pthread_barrier_t barrier;
    enum tg_status status; /* first failure; written before a barrier */
};

struct member {
    struct team *team;
    int ith;
};

static void *run_member(void *arg) {
    struct member *m = arg;
    struct team *t = m->team;
    for (int i = 0; i < t->graph->n_nodes; i++) {
        struct tg_tensor *n = t->graph->nodes[i];
        if (family_of(n->op) != FAMILY_NOOP) {
            enum tg_status st = tg_cpu_compute_node(n, m->ith, t->nth);
            if (st != TG_OK && m->ith == 0) t->status = st;
        }
        pthread_barrier_wait(&t->barrier); /* the next node may read this one */
    }
    return NULL;
}

enum tg_status tg_cpu_compute_graph(struct tg_graph *graph, int n_threads) {
    enum tg_status st = check_graph(graph);
    if (st != TG_OK) return st;
    if (n_threads <= 1) {
        for (int i = 0; i < graph->n_nodes && st == TG_OK; i++) st = tg_cpu_compute_node(graph->nodes[i], 0, 1);
        return st;
    }
    struct team team = {.graph = graph, .nth = n_threads, .status = TG_OK};
    pthread_t threads[64];
    struct member members[64];
    if (n_threads > 64) n_threads = team.nth = 64;
    if (pthread_barrier_init(&team.barrier, NULL, (unsigned)n_threads) != 0) {
        return tg_fail(TG_ERR_ALLOC, "CPU backend: cannot create a thread barrier");
    }
    int started = 1;
    for (int t = 1; t < n_threads; t++) {
        members[t] = (struct member){&team, t};
        if (pthread_create(&threads[t], NULL, run_member, &members[t]) != 0) break;
        started++;
    }
    if (started < n_threads) {
        /* cannot run a partial team through the barrier: stop the started ones first */
        pthread_barrier_destroy(&team.barrier);
        return tg_fail(TG_ERR_ALLOC, "CPU backend: could start only %d of %d threads", started, n_threads);
    }
    members[0] = (struct member){&team, 0};
    run_member(&members[0]);
    for (int t = 1; t < n_threads; t++) pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&team.barrier);
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

/* The allocator and CPU defects of docs/upstream.md, each from its reproducer
 * in corpus/upstream/ (label ggml): what the pinned ggml does, shown by
 * running it, and what tgsched does with the same graph.  Where ggml crashes,
 * it runs in a child process and the test checks how the child ended.  The
 * scheduler's are in test_ggml_upstream_sched.c. */
#include "tg-ggml.h"
#include "tg_test.h"
#include "tg_test_rng.h"
#include "tg_test_child.h"

#include "ggml-cpu.h"
#include "ggml-impl.h" /* ggml_graph_view: one node of the imported graph */
#include "tg-cpu.h"
#include "tg-io.h"
#include "tg-sched.h"

#include <math.h>

#define UPSTREAM(name) "corpus/upstream/" name ".tg"

/* ---- the allocator: the differential on one reproducer ------------------------------------------ */

static struct tg_ggml_alloc_result alloc_compare(const char *path, bool raw) {
    struct tg_ggml_alloc_result r;
    memset(&r, 0, sizeof r);
    size_t len = 0;
    char *text = tg_ggml_read_text(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text) return r;
    struct tg_ggml_case_source src = {.text = text, .text_len = len, .name = path};
    struct tg_ggml_alloc_options o = {.raw_flags_import = raw, .tg_fault = TG_FAULT_NONE};
    CHECK_OK(tg_ggml_alloc_compare(&src, &o, &r));
    free(text);
    /* tgsched's own plan is legal in every case (an illegal one is classified unexplained) */
    CHECK_MSG(!((r.classes >> TG_GGML_UNEXPLAINED) & 1), "%s: %s", path, r.detail);
    printf("%-44s ggml: %s; tgsched: legal, %zu bytes\n", path, r.detail[0] ? r.detail : "same plan", r.tg_size[0]);
    return r;
}

static bool has(const struct tg_ggml_alloc_result *r, enum tg_ggml_alloc_class c) { return (r->classes >> c) & 1; }

static void allocator_defects(void) {
    struct tg_ggml_alloc_result r = alloc_compare(UPSTREAM("alloc-inplace-bigger"), false);
    CHECK(has(&r, TG_GGML_INPLACE_BIGGER) && strstr(r.detail, "parent_size >= node_size") && r.tg_size[0] > 0);

    r = alloc_compare(UPSTREAM("alloc-input-inplace"), false);
    CHECK(has(&r, TG_GGML_INPUT_INPLACE) && r.n_violations > 0 && strstr(r.detail, "live overlap"));

    r = alloc_compare(UPSTREAM("alloc-raw-output-view"), true);
    CHECK(has(&r, TG_GGML_RAW_OUTPUT_VIEW) && r.n_violations > 0 && strstr(r.detail, "output overwritten"));
    /* flagged as ggml_set_output flags it (the root too), ggml keeps the output */
    r = alloc_compare(UPSTREAM("alloc-raw-output-view"), false);
    CHECK(r.classes == 0 && r.n_violations == 0 && r.equal);

    r = alloc_compare(UPSTREAM("alloc-inplace-other-buffer"), false);
    CHECK(has(&r, TG_GGML_INPLACE_OTHER_BUFFER) && r.n_violations > 0);

    r = alloc_compare(UPSTREAM("alloc-none-view-read"), false);
    CHECK(has(&r, TG_GGML_NONE_VIEW_READ) && r.n_violations > 0 && strstr(r.detail, "view of the source is still live"));

    r = alloc_compare(UPSTREAM("alloc-none-view-release"), false);
    CHECK_MSG(has(&r, TG_GGML_NONE_VIEW_READ) && r.n_violations > 0, "classes 0x%x, %d violations: %s", r.classes,
              r.n_violations, r.detail);

    r = alloc_compare(UPSTREAM("alloc-free-blocks"), false);
    CHECK(has(&r, TG_GGML_FREE_BLOCKS) && strstr(r.detail, "out of free blocks") && r.tg_size[0] > 0);
}

/* ---- the allocator: call sequences ---------------------------------------------------------- */

static struct tg_gen_case *load_case(const char *path) {
    size_t len = 0;
    char *text = tg_ggml_read_text(path, &len);
    struct tg_gen_case *c = NULL;
    if (text) CHECK_OK(tg_gen_case_from_text(text, len, path, true, &c));
    free(text);
    return c;
}

/* A listed deviation, not a defect: past 16 chunks ggml grows its last one,
 * tgsched adds chunks; the class names that reason and excuses no violation. */
static void chunk_cap(void) {
    struct tg_ggml_alloc_result r = alloc_compare("tests/io/ggml_chunk_cap.tg", false);
    CHECK(has(&r, TG_GGML_CHUNK_CAP) && !has(&r, TG_GGML_CHUNK_BEST_FIT) && r.n_violations == 0 && r.multi_chunk);
    CHECK(r.ggml_size[0] == 1280 && r.tg_size[0] == 1280);
}

/* ggml_gallocr binds graph a, then graph b: ggml replays a's plan for b,
 * whose binding, judged by the oracle, overlaps live tensors; tgsched plans
 * b again, legally.  Pairs: an edge moved (alloc-stale-plan), an unread leaf
 * grown (alloc-unread-leaf). */
static void replayed_pair(const char *path_a, const char *path_b) {
    struct tg_gen_case *a = load_case(path_a), *b = load_case(path_b);
    if (!a || !b) return;
    struct tg_ggml_buft buft;
    tg_ggml_buft_init(&buft, "cpu", 32, 0, GGML_OP_COUNT, 0, false);
    struct tg_ggml_graph ga, gb;
    CHECK_OK(tg_ggml_import(a->graph, NULL, &ga));
    CHECK_OK(tg_ggml_import(b->graph, NULL, &gb));
    ggml_gallocr_t galloc = ggml_gallocr_new(&buft.buft);
    CHECK(ggml_gallocr_alloc_graph(galloc, ga.graph));
    int made = buft.n_made;
    CHECK(ggml_gallocr_alloc_graph(galloc, gb.graph));
    CHECK_MSG(buft.n_made == made, "ggml planned %s again", path_b); /* it reused a's plan */
    /* b as ggml bound it, judged: the oracle's snapshot first (nothing bound yet) */
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    CHECK_OK(tg_oracle_snapshot_take(b->graph, &snap));
    CHECK_OK(tg_oracle_liveness_build(b->graph, &snap, b->node_ids, b->leaf_ids, &lv));
    tg_buffer *buf = tg_buft_alloc_buffer(b->bufts[0], ggml_gallocr_get_buffer_size(galloc, 0));
    tg_buffer_set_usage(buf, TG_BUFFER_USAGE_COMPUTE);
    for (int u = 0; u < b->graph->n_leafs + b->graph->n_nodes; u++) {
        struct tg_tensor *t = u < b->graph->n_leafs ? b->graph->leafs[u] : b->graph->nodes[u - b->graph->n_leafs];
        const struct ggml_tensor *x = tg_ggml_lookup(&gb, t);
        size_t off = (size_t)((char *)x->data - (char *)ggml_backend_buffer_get_base(x->buffer));
        CHECK_OK(tg_tensor_bind(t, buf, (char *)tg_buffer_get_base(buf) + off));
    }
    struct tg_oracle_report rep;
    CHECK_OK(tg_oracle_check(b->graph, &lv, &snap, b->bufts, b->n_ids, &rep));
    printf("%-44s ggml reuses a's plan for b: %s\n", path_b, rep.n ? rep.items[0].message : "no violation");
    CHECK(tg_oracle_report_count(&rep, TG_RULE_LIVE_OVERLAP) > 0);
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_buffer_free(buf);
    ggml_gallocr_free(galloc);
    tg_ggml_graph_free(&ga);
    tg_ggml_graph_free(&gb);
    tg_gen_case_free(a);
    tg_gen_case_free(b);

    /* tgsched: the same sequence on one allocator; b is planned again and legal */
    a = load_case(path_a);
    b = load_case(path_b);
    if (!a || !b) return;
    tg_gallocr *galloc2 = tg_gallocr_new(a->bufts[0]);
    CHECK_OK(tg_gallocr_alloc_graph(galloc2, a->graph));
    CHECK_OK(tg_oracle_snapshot_take(b->graph, &snap));
    CHECK_OK(tg_oracle_liveness_build(b->graph, &snap, b->node_ids, b->leaf_ids, &lv));
    CHECK_OK(tg_gallocr_alloc_graph(galloc2, b->graph));
    CHECK_OK(tg_oracle_check(b->graph, &lv, &snap, b->bufts, b->n_ids, &rep));
    struct tg_gallocr_stats stats;
    tg_gallocr_get_stats(galloc2, &stats);
    printf("%-44s tgsched plans b again (%llu plans): %d violations\n", "", (unsigned long long)stats.n_plans, rep.n);
    CHECK(rep.n == 0 && stats.n_plans == 2);
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_gallocr_free(galloc2);
    tg_gen_case_free(a);
    tg_gen_case_free(b);
}

struct unread_leaf_run {
    ggml_gallocr_t galloc;
    struct ggml_cgraph *a, *b;
    bool bound_a, bound_b;
};

static void unread_leaf_sequence(void *user) {
    struct unread_leaf_run *r = user;
    r->bound_a = ggml_gallocr_alloc_graph(r->galloc, r->a);
    r->bound_b = ggml_gallocr_alloc_graph(r->galloc, r->b);
}

/* The unread leaf grown past the end of a's buffer: ggml replays a's plan
 * still, and binding the leaf aborts; the allocator differential's sequences
 * class both as alloc-unread-leaf. */
static void unread_leaf_past_the_end(void) {
    struct tg_gen_case *a = load_case(UPSTREAM("alloc-unread-leaf-a")), *b = load_case(UPSTREAM("alloc-unread-leaf-b"));
    if (!a || !b) return;
    struct tg_tensor *u = b->graph->leafs[1];
    u->ne[0] = 1024; /* 4 KB, the buffer of a has 576 bytes */
    for (int d = 1; d < 4; d++) u->nb[d] = u->nb[d - 1] * u->ne[d - 1];
    struct tg_ggml_buft buft;
    tg_ggml_buft_init(&buft, "cpu", 32, 0, GGML_OP_COUNT, 0, false);
    struct tg_ggml_graph ga, gb;
    CHECK_OK(tg_ggml_import(a->graph, NULL, &ga));
    CHECK_OK(tg_ggml_import(b->graph, NULL, &gb));
    struct unread_leaf_run r = {ggml_gallocr_new(&buft.buft), ga.graph, gb.graph, false, false};
    char message[400] = "";
    bool finished = tg_ggml_catch(unread_leaf_sequence, &r, message, sizeof message);
    printf("%-44s ggml, u grown to 4 KB: %s\n", "", finished ? "bound" : message);
    CHECK(r.bound_a && !finished && strstr(message, "ggml_backend_buffer_get_alloc_size(buffer, tensor) <="));
    ggml_gallocr_free(r.galloc); /* the abort left its tables whole */
    tg_ggml_graph_free(&ga);
    tg_ggml_graph_free(&gb);

    tg_gallocr *galloc = tg_gallocr_new(a->bufts[0]);
    CHECK_OK(tg_gallocr_alloc_graph(galloc, a->graph));
    CHECK_OK(tg_gallocr_alloc_graph(galloc, b->graph));
    CHECK(tg_gallocr_get_buffer_size(galloc, 0) >= 4096 + 512);
    tg_gallocr_free(galloc);
    tg_gen_case_free(a);
    tg_gen_case_free(b);
}

/* The case's pre-allocated leafs taken out of its lists (sources set on
 * nodes after the graph was built). */
static void unlist_weights(struct tg_gen_case *c) {
    struct tg_graph *g = c->graph, *ng = tg_graph_new(g->size);
    int n_leafs = 0;
    for (int j = 0; ng && j < g->n_leafs; j++) {
        if (g->leafs[j]->buffer) continue;
        CHECK_OK(tg_graph_add_leaf(ng, g->leafs[j]));
        c->leaf_ids[n_leafs++] = c->leaf_ids[j];
    }
    for (int i = 0; ng && i < g->n_nodes; i++) CHECK_OK(tg_graph_add_node(ng, g->nodes[i]));
    CHECK(ng != NULL);
    if (!ng) return;
    tg_graph_free(g);
    c->graph = ng;
}

struct hash_full_run {
    ggml_gallocr_t galloc;
    struct ggml_cgraph *graph;
    bool bound;
};

static void hash_full_alloc(void *user) {
    struct hash_full_run *r = user;
    r->bound = ggml_gallocr_alloc_graph(r->galloc, r->graph);
}

struct two_graphs {
    struct tg_ggml_buft *buft;
    struct ggml_cgraph *first, *second;
};

/* in a child: ggml's allocator on one graph, then the other */
static void alloc_one_then_other(const void *arg) {
    const struct two_graphs *job = arg;
    ggml_gallocr_t galloc = ggml_gallocr_new(&job->buft->buft);
    bool bound = ggml_gallocr_alloc_graph(galloc, job->first) && ggml_gallocr_alloc_graph(galloc, job->second);
    _exit(bound ? 0 : 1);
}

/* The unread leaf in memory in the first graph, without in the second: ggml
 * replays the first plan and binds the leaf through buffer id -1 (the child
 * dies); tgsched plans the second graph again, legally. */
static void unread_leaf_loses_memory(void) {
    struct tg_gen_case *a = load_case(UPSTREAM("alloc-unread-leaf-weights")), *b = load_case(UPSTREAM("alloc-unread-leaf-a"));
    if (!a || !b) return;
    struct tg_ggml_buft buft;
    tg_ggml_buft_init(&buft, "cpu", 32, 0, GGML_OP_COUNT, 0, false);
    struct tg_ggml_graph ga, gb;
    CHECK_OK(tg_ggml_import(a->graph, NULL, &ga));
    CHECK_OK(tg_ggml_import(b->graph, NULL, &gb));
    struct two_graphs job = {&buft, ga.graph, gb.graph};
    struct tg_child_read child = tg_test_fork(alloc_one_then_other, &job, false);
    printf("%-44s ggml, then alloc-unread-leaf-a: %s\n", UPSTREAM("alloc-unread-leaf-weights"),
           tg_child_signal(&child) ? strsignal(tg_child_signal(&child)) : "bound");
    CHECK(tg_child_signal(&child) != 0);
    tg_ggml_graph_free(&ga);
    tg_ggml_graph_free(&gb);

    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep;
    tg_gallocr *galloc = tg_gallocr_new(a->bufts[0]);
    CHECK_OK(tg_gallocr_alloc_graph(galloc, a->graph));
    CHECK_OK(tg_oracle_snapshot_take(b->graph, &snap));
    CHECK_OK(tg_oracle_liveness_build(b->graph, &snap, b->node_ids, b->leaf_ids, &lv));
    CHECK_OK(tg_gallocr_alloc_graph(galloc, b->graph));
    CHECK_OK(tg_oracle_check(b->graph, &lv, &snap, b->bufts, b->n_ids, &rep));
    struct tg_gallocr_stats stats;
    tg_gallocr_get_stats(galloc, &stats);
    printf("%-44s tgsched plans it again (%llu plans): %d violations\n", "", (unsigned long long)stats.n_plans, rep.n);
    CHECK(rep.n == 0 && stats.n_plans == 2);
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_gallocr_free(galloc);
    tg_gen_case_free(a);
    tg_gen_case_free(b);
}

/* Sources the graph does not list fill ggml_gallocr's hash set: ggml aborts;
 * listed, it plans them.  tgsched plans the graph either way. */
static void unlisted_hash_full(void) {
    for (int unlisted = 0; unlisted < 2; unlisted++) {
        struct tg_gen_case *c = load_case(UPSTREAM("alloc-unlisted-hash-full"));
        if (!c) return;
        if (unlisted) unlist_weights(c);
        struct tg_ggml_buft buft;
        tg_ggml_buft_init(&buft, "cpu", 32, 0, GGML_OP_COUNT, 0, false);
        struct tg_ggml_graph gg;
        CHECK_OK(tg_ggml_import(c->graph, NULL, &gg));
        struct hash_full_run r = {ggml_gallocr_new(&buft.buft), gg.graph, false};
        char message[400] = "";
        bool finished = tg_ggml_catch(hash_full_alloc, &r, message, sizeof message);
        printf("%-44s ggml, weights %s: %s\n", UPSTREAM("alloc-unlisted-hash-full"), unlisted ? "unlisted" : "listed",
               finished ? (r.bound ? "planned" : "not planned") : message);
        if (unlisted) CHECK(!finished && strstr(message, "fatal error"));
        else CHECK(finished && r.bound);
        ggml_gallocr_free(r.galloc); /* an abort in its hash set leaves the allocator's tables whole */
        tg_ggml_graph_free(&gg);

        struct tg_oracle_snapshot snap;
        struct tg_oracle_liveness lv;
        struct tg_oracle_report rep;
        CHECK_OK(tg_oracle_snapshot_take(c->graph, &snap));
        CHECK_OK(tg_oracle_liveness_build(c->graph, &snap, c->node_ids, c->leaf_ids, &lv));
        tg_gallocr *galloc = tg_gallocr_new(c->bufts[0]);
        CHECK_OK(tg_gallocr_alloc_graph(galloc, c->graph));
        CHECK_OK(tg_oracle_check(c->graph, &lv, &snap, c->bufts, c->n_ids, &rep));
        printf("%-44s tgsched: %d violations, %zu bytes\n", "", rep.n, tg_gallocr_get_buffer_size(galloc, 0));
        CHECK(rep.n == 0 && tg_gallocr_get_buffer_size(galloc, 0) == 32);
        tg_oracle_report_free(&rep);
        tg_oracle_liveness_free(&lv);
        tg_oracle_snapshot_free(&snap);
        tg_gallocr_free(galloc);
        tg_gen_case_free(c);
    }
}

/* in a child: ggml_gallocr_reserve_n_size, then ggml_gallocr_alloc_graph */
static void reserve_size_and_alloc(const void *arg) {
    const struct two_graphs *job = arg;
    ggml_backend_buffer_type_t types[1] = {&job->buft->buft};
    ggml_gallocr_t galloc = ggml_gallocr_new_n(types, 1);
    size_t sizes[1];
    ggml_gallocr_reserve_n_size(galloc, job->first, NULL, NULL, sizes);
    ggml_gallocr_alloc_graph(galloc, job->first);
}

/* ggml_gallocr_reserve_n_size, then ggml_gallocr_alloc_graph: ggml binds into
 * the buffer it never made (the child dies); tgsched refuses. */
static void reserve_size_then_alloc(void) {
    struct tg_gen_case *c = load_case(UPSTREAM("alloc-reserve-size"));
    if (!c) return;
    struct tg_ggml_buft buft;
    tg_ggml_buft_init(&buft, "cpu", 32, 0, GGML_OP_COUNT, 0, false);
    struct tg_ggml_graph gg;
    CHECK_OK(tg_ggml_import(c->graph, NULL, &gg));
    struct two_graphs job = {&buft, gg.graph, NULL};
    struct tg_child_read child = tg_test_fork(reserve_size_and_alloc, &job, false);
    bool crashed = tg_child_signal(&child) != 0;
    printf("%-44s ggml: reserve_n_size then alloc_graph %s\n", UPSTREAM("alloc-reserve-size"),
           crashed ? strsignal(tg_child_signal(&child)) : "returned");
    CHECK(crashed);
    tg_ggml_graph_free(&gg);

    tg_gallocr *galloc = tg_gallocr_new_n(c->bufts, c->n_ids);
    size_t sizes[1] = {0};
    CHECK_OK(tg_gallocr_reserve_n_size(galloc, c->graph, c->node_ids, c->leaf_ids, sizes));
    enum tg_status st = tg_gallocr_alloc_graph(galloc, c->graph);
    printf("%-44s tgsched: %s: %s\n", "", tg_status_name(st), tg_last_error());
    CHECK(st == TG_ERR_NEEDS_RESERVE && sizes[0] > 0);
    tg_gallocr_free(galloc);
    tg_gen_case_free(c);
}

/* ---- the CPU backend ---------------------------------------------------------------------------- */

/* What ggml's CPU backend does with a reproducer's last node, its input `a`
 * set to values: whether supports_op claims it, and, computed in a child
 * (a GGML_ASSERT ends it), how the child ended and the result's first element. */
struct ggml_cpu_outcome {
    bool claimed, aborted;
    char report[512]; /* the first line ggml printed on stderr */
    float first;      /* NAN unless the compute finished */
};

/* the first line of what a child wrote on stderr */
static void first_line(char *dst, size_t size, const char *report) {
    size_t len = strcspn(report, "\n");
    if (len >= size) len = size - 1;
    memcpy(dst, report, len);
    dst[len] = '\0';
}

struct cpu_compute_job {
    ggml_backend_t cpu;
    struct ggml_cgraph *graph;
    struct ggml_tensor *read; /* its first float goes to *first */
    float *first;             /* shared with the parent */
};

/* in a child: ggml's CPU backend computes the graph (an assert aborts) */
static void cpu_compute_child(const void *arg) {
    const struct cpu_compute_job *job = arg;
    ggml_log_set(NULL, NULL);
    ggml_backend_graph_compute(job->cpu, job->graph);
    ggml_backend_tensor_get(job->read, job->first, 0, sizeof *job->first);
}

static void ggml_cpu_run(const struct tg_file *f, const float *values, size_t n, struct ggml_cpu_outcome *o) {
    memset(o, 0, sizeof *o);
    struct tg_ggml_graph gg;
    CHECK_OK(tg_ggml_import(f->graph, NULL, &gg));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    struct ggml_tensor *last = ggml_graph_node(gg.graph, -1);
    o->claimed = ggml_backend_supports_op(cpu, last);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(galloc, gg.graph));
    ggml_backend_tensor_set(ggml_graph_get_tensor(gg.graph, "a"), values, 0, n * sizeof *values);
    float *first = tg_test_shared_new(sizeof *first);
    CHECK(first != NULL);
    if (first) {
        *first = NAN;
        struct cpu_compute_job job = {cpu, gg.graph, last, first};
        struct tg_child_read child = tg_test_fork(cpu_compute_child, &job, true);
        first_line(o->report, sizeof o->report, child.report);
        o->aborted = tg_child_signal(&child) != 0;
        o->first = *first;
    }
    tg_test_shared_free(first, sizeof *first);
    ggml_gallocr_free(galloc);
    ggml_backend_free(cpu);
    tg_ggml_graph_free(&gg);
}

/* tgsched's CPU backend on the same graph: *ok when it computed; the
 * buffer holding the file's tensors (the caller frees it after reading). */
static tg_buffer *tg_cpu_run(struct tg_file *f, const float *values, size_t n, bool *ok) {
    enum tg_status st;
    tg_buffer *buf = tg_alloc_ctx_tensors(f->ctx, tg_cpu_buffer_type(), &st);
    CHECK(buf != NULL);
    *ok = buf && tg_tensor_set(f->graph->leafs[0], values, 0, n * sizeof *values) == TG_OK &&
          tg_cpu_compute_graph(f->graph, 1) == TG_OK;
    return buf;
}

static void cpu_supports_op(void) {
    const char *path = UPSTREAM("cpu-supports-op-inexact");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    float values[12];
    for (int i = 0; i < 12; i++) values[i] = (float)(i + 1);
    struct ggml_cpu_outcome o;
    ggml_cpu_run(f, values, 12, &o);
    printf("%-44s ggml: supports_op %s; computing it: %s\n", path, o.claimed ? "true" : "false",
           o.aborted ? o.report : "fine");
    CHECK(o.claimed && o.aborted && strstr(o.report, "GGML_ASSERT"));

    /* tgsched: its CPU backend computes it: column sums of a */
    struct tg_tensor *sum = f->graph->nodes[f->graph->n_nodes - 1];
    CHECK(tg_cpu_supports_op(sum));
    bool right;
    tg_buffer *buf = tg_cpu_run(f, values, 12, &right);
    for (int c = 0; right && c < 4; c++) right &= tg_get_f32_nd(sum, 0, c, 0, 0) == values[c] + values[4 + c] + values[8 + c];
    printf("%-44s tgsched: computed, column sums %s\n", "", right ? "right" : "WRONG");
    CHECK(right);
    tg_buffer_free(buf);
    tg_file_free(f);
}

/* sum of a transposed tensor: ggml's kernel reads rows as contiguous */
static void cpu_sum_permuted(void) {
    const char *path = UPSTREAM("cpu-sum-permuted");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    float values[12], truth = 0;
    for (int i = 0; i < 12; i++) values[i] = (float)(i + 1), truth += values[i];
    struct ggml_cpu_outcome o;
    ggml_cpu_run(f, values, 12, &o);
    printf("%-44s ggml: supports_op %s; sum %s %g (truth %g)\n", path, o.claimed ? "true" : "false",
           o.aborted ? "aborted:" : "=", (double)o.first, (double)truth);
    CHECK(o.claimed && (o.aborted || o.first != truth));

    /* tgsched: a CPU backend computes the sum right or says it cannot */
    struct tg_tensor *sum = f->graph->nodes[f->graph->n_nodes - 1];
    if (!tg_cpu_supports_op(sum)) {
        tg_backend *tcpu = tg_backend_cpu_new();
        tg_sched *sched = tcpu ? tg_sched_new(&tcpu, NULL, 1, 64, false, false) : NULL;
        enum tg_status st = sched ? tg_sched_alloc_graph(sched, f->graph) : TG_ERR_ALLOC;
        printf("%-44s tgsched: the CPU backend has no sum kernel; the scheduler: %s: %s\n", "", tg_status_name(st),
               tg_last_error());
        CHECK(st != TG_OK && strstr(tg_last_error(), "'s'"));
        tg_sched_free(sched);
        tg_backend_free(tcpu);
    } else {
        bool ok;
        tg_buffer *buf = tg_cpu_run(f, values, 12, &ok);
        printf("%-44s tgsched: sum = %g\n", "", ok ? (double)tg_get_f32_nd(sum, 0, 0, 0, 0) : (double)NAN);
        CHECK(ok && tg_get_f32_nd(sum, 0, 0, 0, 0) == truth);
        tg_buffer_free(buf);
    }
    tg_file_free(f);
}

/* gelu_quick past fp16's range: ggml's table lookup overflows */
static void cpu_gelu_quick_overflow(void) {
    const char *path = UPSTREAM("cpu-gelu-quick-overflow");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    const float values[2] = {70000.0f, 1.0f};
    struct ggml_cpu_outcome o;
    ggml_cpu_run(f, values, 2, &o);
    printf("%-44s ggml: supports_op %s; gelu_quick(70000) = %g (truth 70000)\n", path, o.claimed ? "true" : "false",
           (double)o.first);
    CHECK(o.claimed && !o.aborted && !isfinite(o.first));

    struct tg_tensor *g = f->graph->nodes[f->graph->n_nodes - 1];
    CHECK(tg_cpu_supports_op(g));
    bool ok;
    tg_buffer *buf = tg_cpu_run(f, values, 2, &ok);
    const float got = ok ? tg_get_f32_nd(g, 0, 0, 0, 0) : NAN;
    printf("%-44s tgsched: gelu_quick(70000) = %g\n", "", (double)got);
    CHECK(ok && got == 70000.0f);
    tg_buffer_free(buf);
    tg_file_free(f);
}

/* ---- the CPU backend, one node at a time ------------------------------------------------------- */

/* What ggml's CPU backend does with one named node of a reproducer whose
 * sources are `a` (set to values) and views of it: supports_op, and the node
 * computed alone in a child (a GGML_ASSERT ends it), its first values.  The
 * buffer is cleared to zero first, so bytes a kernel reads from outside its
 * operands are the same from run to run. */
#define NODE_VALUES 16
struct ggml_node_outcome {
    bool claimed, aborted;
    char report[512];
    double v[NODE_VALUES]; /* NAN unless the compute finished */
};

struct node_compute_job {
    ggml_backend_t cpu;
    struct ggml_cgraph *graph;
    int at;                /* the node computed, alone */
    struct ggml_tensor *x; /* that node */
    double *v;             /* its values, shared with the parent */
};

/* in a child: ggml's CPU backend computes one node (an assert aborts) */
static void node_compute_child(const void *arg) {
    const struct node_compute_job *job = arg;
    const struct ggml_tensor *x = job->x;
    ggml_log_set(NULL, NULL);
    struct ggml_cgraph one = ggml_graph_view(job->graph, job->at, job->at + 1);
    ggml_backend_graph_compute(job->cpu, &one);
    char bytes[NODE_VALUES * 4];
    ggml_backend_tensor_get(x, bytes, 0, ggml_nbytes(x));
    for (int64_t i = 0; i < ggml_nelements(x) && i < NODE_VALUES; i++) {
        int32_t k;
        float v;
        memcpy(x->type == GGML_TYPE_I32 ? (void *)&k : (void *)&v, bytes + 4 * i, 4);
        job->v[i] = x->type == GGML_TYPE_I32 ? (double)k : (double)v;
    }
}

static void ggml_cpu_node_run(const struct tg_file *f, const float *values, size_t n, const char *name,
                              struct ggml_node_outcome *o) {
    memset(o, 0, sizeof *o);
    struct tg_ggml_graph gg;
    CHECK_OK(tg_ggml_import(f->graph, NULL, &gg));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(galloc, gg.graph));
    struct ggml_tensor *a = ggml_graph_get_tensor(gg.graph, "a"), *x = ggml_graph_get_tensor(gg.graph, name);
    int at = -1;
    for (int i = 0; i < ggml_graph_n_nodes(gg.graph); i++) at = ggml_graph_node(gg.graph, i) == x ? i : at;
    CHECK_MSG(a && x && at >= 0 && ggml_is_contiguous(x) && ggml_nbytes(x) <= NODE_VALUES * 4, "node %s", name);
    o->claimed = x && ggml_backend_supports_op(cpu, x);
    double *shared = tg_test_shared_new(sizeof o->v);
    CHECK(shared != NULL);
    for (int i = 0; shared && i < NODE_VALUES; i++) shared[i] = NAN;
    if (shared && a && x && at >= 0) {
        ggml_backend_buffer_clear(a->buffer, 0);
        ggml_backend_tensor_set(a, values, 0, n * sizeof *values);
        struct node_compute_job job = {cpu, gg.graph, at, x, shared};
        struct tg_child_read child = tg_test_fork(node_compute_child, &job, true);
        first_line(o->report, sizeof o->report, child.report);
        o->aborted = tg_child_signal(&child) != 0;
    }
    if (shared) memcpy(o->v, shared, sizeof o->v);
    tg_test_shared_free(shared, sizeof o->v);
    ggml_gallocr_free(galloc);
    ggml_backend_free(cpu);
    tg_ggml_graph_free(&gg);
}

/* tgsched's result for a node of a computed file, as doubles (f32 or i32) */
static void tg_node_values(const struct tg_tensor *t, double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (t->type == TG_TYPE_I32) {
            int32_t k = 0;
            CHECK_OK(tg_tensor_get(t, &k, (size_t)i * 4, 4));
            v[i] = k;
        } else {
            float x = NAN;
            CHECK_OK(tg_tensor_get(t, &x, (size_t)i * 4, 4));
            v[i] = x;
        }
    }
}

/* got against the double reference: equal infinities, or within a float's rounding */
static bool close_to(const double *got, const double *ref, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (isinf(ref[i]) ? got[i] != ref[i] : !(fabs(got[i] - ref[i]) <= 1e-5 * fmax(1.0, fabs(ref[i])))) return false;
    }
    return true;
}

static struct tg_tensor *node_named(const struct tg_file *f, const char *name) {
    for (int i = 0; i < f->graph->n_nodes; i++) {
        if (!strcmp(f->graph->nodes[i]->name, name)) return f->graph->nodes[i];
    }
    return NULL;
}

/* The transposed operand at[i0, i1] = a[i1, i0] of the reproducers: a is [4, 3], at [3, 4]. */
static double transposed(const float *a, int64_t i0, int64_t i1) { return a[i0 * 4 + i1]; }

/* More ops of cpu-supports-op-inexact, each as ggml's constructors build it:
 * supports_op true, the kernel asserts; tgsched computes each right against a
 * double reference from the definition. */
static void cpu_supports_op_more(void) {
    const char *path = UPSTREAM("cpu-supports-op-inexact-ops");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    float a[12];
    for (int i = 0; i < 12; i++) a[i] = (float)(i + 1);
    bool ok;
    tg_buffer *buf = tg_cpu_run(f, a, 12, &ok);
    CHECK_MSG(ok, "tgsched: %s", tg_last_error());
    static const char *const names[] = {"add", "mul", "sqr", "log", "rms_norm", "diag_mask_inf", "abs"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        const char *name = names[k];
        double ref[12], got[12];
        int64_t n = 12;
        for (int64_t i1 = 0; i1 < 4; i1++) {
            double ss = 0;
            for (int64_t i0 = 0; i0 < 3; i0++) ss += transposed(a, i0, i1) * transposed(a, i0, i1);
            for (int64_t i0 = 0; i0 < 3; i0++) {
                const double x = transposed(a, i0, i1);
                double *r = &ref[i1 * 3 + i0];
                if (!strcmp(name, "add")) *r = x + x;
                else if (!strcmp(name, "mul") || !strcmp(name, "sqr")) *r = x * x;
                else if (!strcmp(name, "log")) *r = log(x);
                else if (!strcmp(name, "rms_norm")) *r = x / sqrt(ss / 3 + 1e-5);
                else if (!strcmp(name, "diag_mask_inf")) *r = i0 > i1 ? -INFINITY : x; /* n_past 0 */
            }
        }
        if (!strcmp(name, "abs")) { /* abs of the column a[0..2] as [1, 3] */
            n = 3;
            for (int i = 0; i < 3; i++) ref[i] = fabs((double)a[i]);
        }
        struct ggml_node_outcome o;
        ggml_cpu_node_run(f, a, 12, name, &o);
        const struct tg_tensor *t = node_named(f, name);
        const bool tg_claims = t && tg_cpu_supports_op(t);
        if (t && ok) tg_node_values(t, got, n);
        const bool tg_right = t && ok && close_to(got, ref, n);
        printf("%-44s %-13s ggml: supports_op %s, %s; tgsched: %s\n", k ? "" : path, name, o.claimed ? "true" : "false",
               o.aborted ? o.report : "computed", tg_right ? "right" : "WRONG");
        CHECK_MSG(o.claimed && o.aborted && strstr(o.report, "GGML_ASSERT"), "%s: has the pinned ggml stopped asserting?", name);
        CHECK_MSG(tg_claims && tg_right, "tgsched's %s of a transposed tensor", name);
    }
    tg_buffer_free(buf);
    tg_file_free(f);
}

/* mean, argmax, leaky_relu of a transposed tensor: ggml reads rows as
 * contiguous.  tgsched's CPU backend has none of these kernels and says so
 * (as for sum, cpu-sum-permuted); the day it has them all, it computes them
 * here against the double reference. */
static void cpu_rows_transposed(void) {
    const char *path = UPSTREAM("cpu-rows-transposed");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    float a[12];
    for (int i = 0; i < 12; i++) a[i] = (float)((i * 7) % 12 - 5);
    static const char *const names[] = {"mean", "argmax", "leaky_relu"};
    enum { N_OPS = sizeof names / sizeof *names };
    bool all = true;
    for (int k = 0; k < N_OPS; k++) all &= node_named(f, names[k]) && tg_cpu_supports_op(node_named(f, names[k]));
    bool ok = false;
    tg_buffer *buf = all ? tg_cpu_run(f, a, 12, &ok) : NULL;
    for (int k = 0; k < N_OPS; k++) {
        const char *name = names[k];
        double ref[12], got[12];
        const int64_t n = strcmp(name, "leaky_relu") ? 4 : 12;
        for (int64_t i1 = 0; i1 < 4; i1++) {
            double sum = 0;
            int64_t best = 0;
            for (int64_t i0 = 0; i0 < 3; i0++) {
                const double x = transposed(a, i0, i1);
                sum += x;
                best = x > transposed(a, best, i1) ? i0 : best;
                if (n == 12) ref[i1 * 3 + i0] = x > 0 ? x : 0.1 * x;
            }
            if (!strcmp(name, "mean")) ref[i1] = sum / 3;
            if (!strcmp(name, "argmax")) ref[i1] = (double)best;
        }
        struct ggml_node_outcome o;
        ggml_cpu_node_run(f, a, 12, name, &o);
        const struct tg_tensor *t = node_named(f, name);
        const bool tg_claims = t && tg_cpu_supports_op(t);
        if (t && ok) tg_node_values(t, got, n);
        const bool tg_right = t && ok && close_to(got, ref, n);
        printf("%-44s %-10s ggml: supports_op %s, %s %g %g %g %g (truth %g %g %g %g); tgsched: %s\n", k ? "" : path, name,
               o.claimed ? "true" : "false", o.aborted ? o.report : "computed", o.v[0], o.v[1], o.v[2], o.v[3], ref[0],
               ref[1], ref[2], ref[3], !tg_claims ? "no kernel, says so" : tg_right ? "right" : "WRONG");
        CHECK_MSG(o.claimed && !o.aborted && !close_to(o.v, ref, n), "%s: has the pinned ggml started reading the strides?", name);
        CHECK_MSG(!tg_claims || !all || tg_right, "tgsched's %s of a transposed tensor", name);
    }
    if (!all) { /* a node it cannot compute: the CPU backend refuses the graph, naming it */
        tg_buffer *b2 = tg_cpu_run(f, a, 12, &ok);
        printf("%-44s tgsched: %s\n", "", ok ? "computed" : tg_last_error());
        CHECK(!ok && strstr(tg_last_error(), "no kernel for node"));
        tg_buffer_free(b2);
    }
    tg_buffer_free(buf);
    tg_file_free(f);
}

/* scale of a permute whose one-element dim 1 has a stride that is not the row
 * pitch: outside ggml's contract (its constructor refuses it), and its kernel,
 * given the node by the import, reads past a: the scheduler differential's
 * values that change from run to run.  Here the bytes past a are zeros. */
static struct ggml_tensor *scale_of_permute;
static void build_scale_of_permute(void *ctx) { ggml_scale(ctx, scale_of_permute, 2.0f); }

static void cpu_scale_size1_stride(void) {
    const char *path = UPSTREAM("cpu-scale-size1-stride");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    /* ggml's own constructor on the same operand */
    struct ggml_init_params ip = {.mem_size = 8 * ggml_tensor_overhead(), .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    scale_of_permute = ggml_permute(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3), 0, 2, 1, 3);
    char message[400] = "";
    const bool built = tg_ggml_catch(build_scale_of_permute, ctx, message, sizeof message);
    ggml_free(ctx);
    float a[12];
    double ref[12], got[12];
    for (int i = 0; i < 12; i++) a[i] = (float)(i + 1), ref[i] = 2.0 * a[i];
    struct ggml_node_outcome o;
    ggml_cpu_node_run(f, a, 12, "s", &o);
    bool ok;
    tg_buffer *buf = tg_cpu_run(f, a, 12, &ok);
    const struct tg_tensor *s = node_named(f, "s");
    if (s && ok) tg_node_values(s, got, 12);
    const bool tg_right = s && ok && close_to(got, ref, 12);
    printf("%-44s ggml_scale: %s; the kernel given it: supports_op %s, row 1 %g %g (truth %g %g); tgsched: %s\n", path,
           built ? "built" : message, o.claimed ? "true" : "false", o.v[4], o.v[5], ref[4], ref[5], tg_right ? "right" : "WRONG");
    CHECK_MSG(!built && strstr(message, "ggml_is_padded_1d"), "ggml_scale now builds it: its kernel's reads past a are ggml's defect");
    CHECK(o.claimed && !o.aborted && close_to(o.v, ref, 4) && !close_to(o.v + 4, ref + 4, 8));
    CHECK(tg_right);
    tg_buffer_free(buf);
    tg_file_free(f);
}

/* ---- rope of rows of an odd width: ggml's kernel writes past each row ---------------------------- */

enum { ROPE_W = 3, ROPE_ROWS = 16, ROPE_N = ROPE_W * ROPE_ROWS, GUARD_N = 8 };
static const float GUARD_VALUE = -7.0f;

/* normal mode, 2 of 3 dims rotated, base 10000, no scaling: theta = pos */
static void rope_reference(const float *a, const int32_t *pos, double *ref) {
    for (int r = 0; r < ROPE_ROWS; r++) {
        const double x0 = a[r * ROPE_W], x1 = a[r * ROPE_W + 1], p = pos[r];
        ref[r * ROPE_W + 0] = x0 * cos(p) - x1 * sin(p);
        ref[r * ROPE_W + 1] = x0 * sin(p) + x1 * cos(p);
        ref[r * ROPE_W + 2] = a[r * ROPE_W + 2];
    }
}

static bool rope_close(const float *got, const double *ref) {
    double g[ROPE_N];
    for (int i = 0; i < ROPE_N; i++) g[i] = got[i];
    return close_to(g, ref, ROPE_N);
}

static void cpu_rope_odd_width(void) {
    const char *path = UPSTREAM("cpu-rope-odd-width");
    float a[ROPE_N], guard[GUARD_N], got[ROPE_N];
    int32_t pos[ROPE_ROWS];
    double ref[ROPE_N];
    for (int i = 0; i < ROPE_N; i++) a[i] = (float)(i + 1);
    for (int i = 0; i < ROPE_ROWS; i++) pos[i] = i + 1;
    rope_reference(a, pos, ref);

    /* ggml: its own constructor, its tensors in one buffer in the order made, r right before guard */
    struct ggml_init_params ip = {.mem_size = 8 * ggml_tensor_overhead() + ggml_graph_overhead(), .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *ga = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ROPE_W, 1, ROPE_ROWS);
    struct ggml_tensor *gpos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, ROPE_ROWS);
    struct ggml_tensor *gr = ggml_rope_ext(ctx, ga, gpos, NULL, 2, GGML_ROPE_TYPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    struct ggml_tensor *gguard = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, GUARD_N);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 1);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    CHECK_MSG(buf && (char *)gr->data + ggml_nbytes(gr) == gguard->data, "ggml: guard not right after r");
    for (int i = 0; i < GUARD_N; i++) guard[i] = GUARD_VALUE;
    ggml_backend_tensor_set(ga, a, 0, sizeof a);
    ggml_backend_tensor_set(gpos, pos, 0, sizeof pos);
    ggml_backend_tensor_set(gguard, guard, 0, sizeof guard);
    struct ggml_cgraph *graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, gr);
    const bool claimed = ggml_backend_supports_op(cpu, gr);
    CHECK(ggml_backend_graph_compute(cpu, graph) == GGML_STATUS_SUCCESS);
    ggml_backend_tensor_get(gr, got, 0, sizeof got);
    ggml_backend_tensor_get(gguard, guard, 0, sizeof guard);
    int32_t guard_bits;
    memcpy(&guard_bits, &guard[0], sizeof guard_bits);
    printf("%-44s ggml: supports_op %s; r %s, guard[0] %d as bits (was %g)", path, claimed ? "true" : "false",
           rope_close(got, ref) ? "right" : "WRONG", guard_bits, (double)GUARD_VALUE);
    CHECK_MSG(claimed && rope_close(got, ref), "ggml's rope itself");
    CHECK_MSG(guard[0] != GUARD_VALUE && guard_bits == pos[0] && guard[1] == GUARD_VALUE,
              "has the pinned ggml stopped writing past the row?");
    /* with threads splitting the rows, a row's spill lands on the next row's first element after
     * another thread wrote it, at times: counted, not required (it is a race) */
    ggml_backend_cpu_set_n_threads(cpu, 4);
    int racy = 0;
    for (int run = 0; run < 200; run++) {
        CHECK(ggml_backend_graph_compute(cpu, graph) == GGML_STATUS_SUCCESS);
        ggml_backend_tensor_get(gr, got, 0, sizeof got);
        racy += !rope_close(got, ref);
    }
    printf("; 4 threads: r wrong in %d of 200 runs", racy);
    ggml_backend_buffer_free(buf);
    ggml_backend_free(cpu);
    ggml_free(ctx);

    /* tgsched: the file's tensors in one buffer in file order, r right before guard */
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    struct tg_tensor *tr = node_named(f, "r"), *tguard = f->graph->leafs[2];
    enum tg_status st;
    tg_buffer *tbuf = tg_alloc_ctx_tensors(f->ctx, tg_cpu_buffer_type(), &st);
    CHECK(tbuf != NULL && tr && !strcmp(tguard->name, "guard"));
    if (tbuf && tr) {
        CHECK_MSG((char *)tr->data + tg_nbytes(tr) == tguard->data, "tgsched: guard not right after r");
        for (int i = 0; i < GUARD_N; i++) guard[i] = GUARD_VALUE;
        CHECK_OK(tg_tensor_set(f->graph->leafs[0], a, 0, sizeof a));
        CHECK_OK(tg_tensor_set(f->graph->leafs[1], pos, 0, sizeof pos));
        CHECK_OK(tg_tensor_set(tguard, guard, 0, sizeof guard));
        CHECK_OK(tg_cpu_compute_graph(f->graph, 1));
        CHECK_OK(tg_tensor_get(tr, got, 0, sizeof got));
        CHECK_OK(tg_tensor_get(tguard, guard, 0, sizeof guard));
        printf("; tgsched: r %s, guard[0] %g\n", rope_close(got, ref) ? "right" : "WRONG", (double)guard[0]);
        CHECK(rope_close(got, ref) && guard[0] == GUARD_VALUE);
    }
    tg_buffer_free(tbuf);
    tg_file_free(f);
}

/* ---- flash attention with f16 V: ggml's f16 accumulator ----------------------------------------- */

/* softmax_j(scale q.k_j) v_j for one query, all in double: the scores, their
 * maximum, the weights and both sums, the plain definition (no online
 * softmax), so it shares no rounding with either kernel. */
static void flash_reference(const double *q, const double *k, const double *v, int64_t dk, int64_t dv, int64_t n_kv,
                            double scale, double *out) {
    double *s = malloc((size_t)n_kv * sizeof *s), max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n_kv; j++) {
        double dot = 0;
        for (int64_t d = 0; d < dk; d++) dot += q[d] * k[j * dk + d];
        s[j] = scale * dot;
        max = fmax(max, s[j]);
    }
    for (int64_t d = 0; d < dv; d++) out[d] = 0;
    for (int64_t j = 0; j < n_kv; j++) {
        const double w = exp(s[j] - max);
        sum += w;
        for (int64_t d = 0; d < dv; d++) out[d] += w * v[j * dv + d];
    }
    for (int64_t d = 0; d < dv; d++) out[d] /= sum;
    free(s);
}

/* The reference by hand: scores 0 and ln 3 weigh the V rows 1:3, and equal
 * scores give the mean. */
static void flash_reference_by_hand(void) {
    const double q[2] = {1, 0}, k[4] = {0, 0, log(3.0), 0}, v[4] = {1, 0, 5, 2};
    double out[2];
    flash_reference(q, k, v, 2, 2, 2, 1.0, out);
    CHECK_MSG(fabs(out[0] - 4.0) < 1e-12 && fabs(out[1] - 1.5) < 1e-12, "reference: %.17g %.17g (want 4, 1.5)", out[0],
              out[1]);
    const double k_equal[4] = {0.5, 0.25, 0.5, 0.25};
    flash_reference(q, k_equal, v, 2, 2, 2, 1.0, out);
    CHECK_MSG(fabs(out[0] - 3.0) < 1e-12 && fabs(out[1] - 1.0) < 1e-12, "reference: %.17g %.17g (want 3, 1)", out[0],
              out[1]);
}

static double nmse_against(const float *x, const double *ref, int64_t n) {
    double err = 0, norm = 0;
    for (int64_t i = 0; i < n; i++) err += (x[i] - ref[i]) * (x[i] - ref[i]), norm += ref[i] * ref[i];
    return err / norm;
}

/* Flat attention over 2,048 keys (the 7B decode graph's), V around 1.0:
 * ggml's f16 sum of the weighted V rows rounds each addition to f16's step
 * (1 past 1,024); tgsched sums in f32.  Both against the double reference
 * from the same operands: q in multiples of 1/256 (exact in f16, which both
 * kernels convert q to first), k and v as their f16 values. */
#define FLASH_GGML_MIN_NMSE 1e-4 /* ggml's, measured 1.5e-3: below, a new pin sums in f32 (about 1e-12) */
#define FLASH_TG_MAX_NMSE 1e-10  /* tgsched's, measured 7.4e-13 */
static void cpu_flash_f16_accumulator(void) {
    flash_reference_by_hand();
    const char *path = UPSTREAM("cpu-flash-f16-accumulator");
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    struct tg_tensor *tq = f->graph->leafs[0], *tk = f->graph->leafs[1], *tv = f->graph->leafs[2];
    struct tg_tensor *out = f->graph->nodes[f->graph->n_nodes - 1];
    /* the layout the reference below assumes: one head, f16 K and V, no mask */
    CHECK(out->op == TG_OP_FLASH_ATTN_EXT && tk->type == TG_TYPE_F16 && tv->type == TG_TYPE_F16 && tq->ne[2] == 1 &&
          !out->src[3] && tg_get_op_param_f32(out, 2) == 0.0f);
    const int64_t D = tq->ne[0], n_q = tq->ne[1], n_kv = tk->ne[1], DV = tv->ne[0], n_out = tg_nelements(out);
    const float scale = tg_get_op_param_f32(out, 0);
    float *q = malloc((size_t)(D * n_q) * sizeof *q), *kf = malloc((size_t)(D * n_kv) * sizeof *kf);
    float *vf = malloc((size_t)(DV * n_kv) * sizeof *vf), *got_ggml = calloc((size_t)n_out, sizeof *got_ggml);
    float *got_tg = calloc((size_t)n_out, sizeof *got_tg);
    ggml_fp16_t *k16 = malloc((size_t)(D * n_kv) * sizeof *k16), *v16 = malloc((size_t)(DV * n_kv) * sizeof *v16);
    double *qd = malloc((size_t)D * sizeof *qd), *kd = malloc((size_t)(D * n_kv) * sizeof *kd);
    double *vd = malloc((size_t)(DV * n_kv) * sizeof *vd), *ref = malloc((size_t)n_out * sizeof *ref);
    rng_state = 0x5eed;
    for (int64_t i = 0; i < D * n_q; i++) q[i] = (float)((int)(rng_next() % 65) - 32) / 256.0f;
    for (int64_t i = 0; i < D * n_kv; i++) kf[i] = (float)(rng_next() % 1024) / 1024.0f - 0.5f;
    for (int64_t i = 0; i < DV * n_kv; i++) vf[i] = 0.75f + (float)(rng_next() % 1024) / 2048.0f;
    ggml_fp32_to_fp16_row(kf, k16, D * n_kv);
    ggml_fp32_to_fp16_row(vf, v16, DV * n_kv);
    for (int64_t i = 0; i < D * n_kv; i++) kd[i] = ggml_fp16_to_fp32(k16[i]);
    for (int64_t i = 0; i < DV * n_kv; i++) vd[i] = ggml_fp16_to_fp32(v16[i]);
    /* out[:, 0, iq] is query iq's row (the result is permuted: [DV, heads, queries]) */
    for (int64_t iq = 0; iq < n_q; iq++) {
        for (int64_t d = 0; d < D; d++) qd[d] = q[iq * D + d];
        flash_reference(qd, kd, vd, D, DV, n_kv, scale, ref + iq * DV);
    }

    /* ggml's CPU backend on the imported graph */
    struct tg_ggml_graph gg;
    CHECK_OK(tg_ggml_import(f->graph, NULL, &gg));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(galloc, gg.graph));
    ggml_backend_tensor_set(ggml_graph_get_tensor(gg.graph, "q"), q, 0, (size_t)(D * n_q) * sizeof *q);
    ggml_backend_tensor_set(ggml_graph_get_tensor(gg.graph, "k"), k16, 0, (size_t)(D * n_kv) * sizeof *k16);
    ggml_backend_tensor_set(ggml_graph_get_tensor(gg.graph, "v"), v16, 0, (size_t)(DV * n_kv) * sizeof *v16);
    CHECK(ggml_backend_graph_compute(cpu, gg.graph) == GGML_STATUS_SUCCESS);
    ggml_backend_tensor_get(ggml_graph_node(gg.graph, -1), got_ggml, 0, (size_t)n_out * sizeof *got_ggml);
    ggml_gallocr_free(galloc);
    ggml_backend_free(cpu);
    tg_ggml_graph_free(&gg);

    /* tgsched's CPU backend on the same graph and bytes */
    enum tg_status st;
    tg_buffer *buf = tg_alloc_ctx_tensors(f->ctx, tg_cpu_buffer_type(), &st);
    CHECK(buf != NULL);
    bool ok = buf && tg_tensor_set(tq, q, 0, (size_t)(D * n_q) * sizeof *q) == TG_OK &&
              tg_tensor_set(tk, k16, 0, (size_t)(D * n_kv) * sizeof *k16) == TG_OK &&
              tg_tensor_set(tv, v16, 0, (size_t)(DV * n_kv) * sizeof *v16) == TG_OK &&
              tg_cpu_compute_graph(f->graph, 2) == TG_OK &&
              tg_tensor_get(out, got_tg, 0, (size_t)n_out * sizeof *got_tg) == TG_OK;
    CHECK_MSG(ok, "tgsched: %s", tg_last_error());

    int64_t worst = 0;
    for (int64_t i = 1; i < n_out; i++) {
        if (fabs(got_ggml[i] - ref[i]) > fabs(got_ggml[worst] - ref[worst])) worst = i;
    }
    const double e_ggml = nmse_against(got_ggml, ref, n_out), e_tg = nmse_against(got_tg, ref, n_out);
    printf("%-44s ggml: NMSE %.2g against double (element %lld: %.6g, reference %.6g)\n", path, e_ggml,
           (long long)worst, (double)got_ggml[worst], ref[worst]);
    printf("%-44s tgsched: NMSE %.2g\n", "", e_tg);
    CHECK_MSG(e_ggml > FLASH_GGML_MIN_NMSE, "ggml's NMSE %.3g: at most %g, has the pinned ggml stopped summing in f16?",
              e_ggml, FLASH_GGML_MIN_NMSE);
    CHECK_MSG(ok && e_tg < FLASH_TG_MAX_NMSE, "tgsched's NMSE %.3g, bound %g", e_tg, FLASH_TG_MAX_NMSE);
    tg_buffer_free(buf);
    tg_file_free(f);
    free(q), free(kf), free(vf), free(got_ggml), free(got_tg), free(k16), free(v16);
    free(qd), free(kd), free(vd), free(ref);
}

int main(void) {
    tg_ggml_quiet_log();
    allocator_defects();
    chunk_cap();
    replayed_pair(UPSTREAM("alloc-stale-plan-a"), UPSTREAM("alloc-stale-plan-b"));
    replayed_pair(UPSTREAM("alloc-unread-leaf-a"), UPSTREAM("alloc-unread-leaf-b"));
    unread_leaf_past_the_end();
    unread_leaf_loses_memory();
    unlisted_hash_full();
    reserve_size_then_alloc();
    cpu_supports_op();
    cpu_sum_permuted();
    cpu_gelu_quick_overflow();
    cpu_supports_op_more();
    cpu_rows_transposed();
    cpu_scale_size1_stride();
    cpu_rope_odd_width();
    cpu_flash_f16_accumulator();
    return tg_test_finish();
}

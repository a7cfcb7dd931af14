/* The scheduler defects of docs/upstream.md, each from its reproducer in
 * corpus/upstream/ (label ggml): ggml_backend_sched over the test backends of
 * tg-ggml-sched.h, what it does shown by running it, and what tg_sched does
 * with the same graph and call sequence.  Where ggml crashes, it runs in a
 * child process and the test checks how the child ended. */
#include "tg-ggml-sched.h"
#include "tg_test.h"
#include "tg_test_child.h"

#include "ggml-alloc.h"
#include "ggml-impl.h"
#include "tg-alloc.h"
#include "tg-cpu.h"
#include "tg-oracle-sched.h"

#include <unistd.h>

#define UPSTREAM(name) "corpus/upstream/" name ".tg"
/* ---- the scheduler ---------------------------------------------------------------------------- */

struct both {
    struct tg_ggml_sched_case k;
    struct tg_ggml_schedule ggml, tgs;
};

static bool schedule_both(const char *path, struct both *b) {
    size_t len = 0;
    char *text = tg_ggml_read_text(path, &len);
    bool ok = text && tg_ggml_sched_case_from_text(text, len, path, &b->k) == TG_OK;
    free(text);
    CHECK_MSG(ok, "%s: %s", path, tg_last_error());
    if (!ok) return false;
    CHECK_OK(tg_ggml_schedule_in_ggml(&b->k, &b->ggml));
    CHECK_OK(tg_ggml_schedule_in_tgsched(&b->k, TG_SCHED_FAULT_NONE, &b->tgs));
    return true;
}

static bool split_reads(const struct tg_ggml_schedule *p, int backend, int u) {
    for (int i = 0; i < p->n_splits; i++) {
        if (p->splits[i].backend != backend) continue;
        for (int k = 0; k < p->splits[i].n_inputs; k++)
            if (p->splits[i].inputs[k] == u) return true;
    }
    return false;
}

static void scheduler_defects(void) {
    static struct both b;
    const int cpu = 1, dev0 = 0;
    if (schedule_both(UPSTREAM("sched-unassigned-leaf"), &b)) {
        printf("%-44s ggml: %s; tgsched: %s\n", UPSTREAM("sched-unassigned-leaf"), b.ggml.aborted ? b.ggml.message : "ran",
               b.tgs.ran ? "planned" : b.tgs.message);
        CHECK(b.ggml.aborted && strstr(b.ggml.message, "buffer_id >= 0") && b.tgs.ran);
        tg_ggml_sched_case_free(&b.k);
    }
    if (schedule_both(UPSTREAM("sched-none-view-unassigned"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int y = tg_ggml_sched_slot_named(g, "y"), r = tg_ggml_sched_slot_named(g, "r"), rv = tg_ggml_sched_slot_named(g, "rv");
        printf("%-44s ggml: %s; tgsched: y, r, rv on backends %d, %d, %d\n", UPSTREAM("sched-none-view-unassigned"),
               b.ggml.aborted ? b.ggml.message : "ran", b.tgs.backend[y], b.tgs.backend[r], b.tgs.backend[rv]);
        CHECK(b.ggml.aborted && strstr(b.ggml.message, "src_backend_id != -1"));
        CHECK(b.tgs.ran && b.tgs.backend[r] == b.tgs.backend[y] && b.tgs.backend[rv] == b.tgs.backend[r]);
        struct tg_ggml_sched_result res = {0}; /* the differential's class and nothing else */
        tg_ggml_sched_classify(&b.k, &b.ggml, &b.tgs, &res);
        CHECK(res.classes == 1u << TG_GGML_SCHED_NONE_VIEW_UNASSIGNED);
        tg_ggml_sched_case_free(&b.k);
    }
    if (schedule_both(UPSTREAM("sched-none-view-late"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int r = tg_ggml_sched_slot_named(g, "r"), rv = tg_ggml_sched_slot_named(g, "rv"), y = tg_ggml_sched_slot_named(g, "y");
        printf("%-44s ggml: r, rv on backends %d, %d, y on %d copies rv: %s; tgsched: r, rv on %d, %d\n",
               UPSTREAM("sched-none-view-late"), b.ggml.backend[r], b.ggml.backend[rv], b.ggml.backend[y],
               split_reads(&b.ggml, cpu, rv) ? "yes" : "no", b.tgs.backend[r], b.tgs.backend[rv]);
        CHECK(b.ggml.ran && b.ggml.backend[r] == dev0 && b.ggml.backend[rv] == dev0 && b.ggml.backend[y] == cpu &&
              split_reads(&b.ggml, cpu, rv));
        CHECK(b.tgs.ran && b.tgs.backend[r] == cpu && b.tgs.backend[rv] == cpu && b.tgs.backend[y] == cpu);
        struct tg_ggml_sched_result res = {0};
        tg_ggml_sched_classify(&b.k, &b.ggml, &b.tgs, &res);
        unsigned want = 1u << TG_GGML_SCHED_NONE_VIEW_LATE | 1u << TG_GGML_SCHED_NONE_VIEW_READ; /* q's read of rv */
        CHECK_MSG(res.classes == want, "classes 0x%x: %s", res.classes, res.detail);
        tg_ggml_sched_case_free(&b.k);
    }
    if (schedule_both(UPSTREAM("sched-write-elsewhere"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int written = tg_ggml_sched_slot_named(g, "written"), dst = tg_ggml_sched_slot_named(g, "dst");
        printf("%-44s set_rows into dst (on backend %d): ggml runs it on backend %d, tgsched on %d\n",
               UPSTREAM("sched-write-elsewhere"), b.ggml.backend[dst], b.ggml.backend[written], b.tgs.backend[written]);
        CHECK(b.ggml.ran && b.ggml.backend[written] == dev0 && b.ggml.backend[dst] == cpu);
        CHECK(b.tgs.ran && b.tgs.backend[written] == b.tgs.backend[dst]);
        tg_ggml_sched_case_free(&b.k);
    }
    if (schedule_both(UPSTREAM("sched-view-of-weights"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int y = tg_ggml_sched_slot_named(g, "y"), w_view = tg_ggml_sched_slot_named(g, "w_view");
        printf("%-44s mul_mat of a view of weights on dev0: ggml runs it on backend %d and copies the weight: %s; "
               "tgsched on %d\n", UPSTREAM("sched-view-of-weights"), b.ggml.backend[y],
               split_reads(&b.ggml, cpu, w_view) ? "yes" : "no", b.tgs.backend[y]);
        CHECK(b.ggml.ran && b.ggml.backend[y] == cpu && split_reads(&b.ggml, cpu, w_view));
        CHECK(b.tgs.ran && b.tgs.backend[y] == dev0 && !split_reads(&b.tgs, cpu, w_view));
        tg_ggml_sched_case_free(&b.k);
    }
    if (schedule_both(UPSTREAM("sched-view-of-weights-first"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int s = tg_ggml_sched_slot_named(g, "s"), m = tg_ggml_sched_slot_named(g, "m");
        struct tg_ggml_sched_result res = {0}; /* the class, though s, reading the view, is on the CPU in both */
        tg_ggml_sched_classify(&b.k, &b.ggml, &b.tgs, &res);
        printf("%-44s add reads a view of weights on dev0, then weights on the cpu: ggml: s, m on backends %d, %d; "
               "tgsched: %d, %d; class %s\n", UPSTREAM("sched-view-of-weights-first"), b.ggml.backend[s], b.ggml.backend[m],
               b.tgs.backend[s], b.tgs.backend[m], tg_ggml_sched_class_name(TG_GGML_SCHED_VIEW_OF_WEIGHTS));
        CHECK(b.ggml.ran && b.ggml.backend[s] == cpu && b.ggml.backend[m] == cpu);
        CHECK(b.tgs.ran && b.tgs.backend[s] == cpu && b.tgs.backend[m] == dev0);
        CHECK_MSG(res.classes == 1u << TG_GGML_SCHED_VIEW_OF_WEIGHTS, "classes 0x%x: %s", res.classes, res.detail);
        tg_ggml_sched_case_free(&b.k);
    }
}

/* A leaf in memory its context owns (data, no buffer) read on a device.
 * ggml: the leaf takes its reader's device and nobody copies it (the device
 * reads a host pointer); read on the CPU first, it is copied, and compute
 * aborts on the copy.  tgsched: on the CPU, copied to the device.  Both
 * allocators leave the leaf's memory alone. */
static bool open_case(const char *path, struct tg_ggml_sched_case *k);

static void context_memory(void) {
    static struct both b;
    const int cpu = 1, dev0 = 0;
    if (schedule_both(UPSTREAM("sched-context-memory"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int bias = tg_ggml_sched_slot_named(g, "bias"), y = tg_ggml_sched_slot_named(g, "y");
        printf("%-44s ggml: y on backend %d, bias on %d, copied: %s; tgsched: bias on %d, copied: %s\n",
               UPSTREAM("sched-context-memory"), b.ggml.backend[y], b.ggml.backend[bias],
               split_reads(&b.ggml, dev0, bias) ? "yes" : "no", b.tgs.backend[bias], split_reads(&b.tgs, dev0, bias) ? "yes" : "no");
        CHECK(b.ggml.ran && b.ggml.backend[y] == dev0 && b.ggml.backend[bias] == dev0 && !split_reads(&b.ggml, dev0, bias));
        CHECK(b.tgs.ran && b.tgs.backend[y] == dev0 && b.tgs.backend[bias] == cpu && split_reads(&b.tgs, dev0, bias));
        struct tg_ggml_sched_result res = {0};
        tg_ggml_sched_classify(&b.k, &b.ggml, &b.tgs, &res);
        CHECK_MSG(res.classes == 1u << TG_GGML_SCHED_CONTEXT_MEMORY, "classes 0x%x: %s", res.classes, res.detail);

        tg_ggml_sched_case_free(&b.k);
    }
    if (schedule_both(UPSTREAM("sched-context-memory-copied"), &b)) {
        const struct tg_graph *g = b.k.c->graph;
        int bias = tg_ggml_sched_slot_named(g, "bias");
        printf("%-44s ggml: %s; tgsched: bias on %d, copied to dev0: %s\n", UPSTREAM("sched-context-memory-copied"),
               b.ggml.aborted ? b.ggml.message : "ran", b.tgs.backend[bias], split_reads(&b.tgs, dev0, bias) ? "yes" : "no");
        CHECK(b.ggml.aborted && strstr(b.ggml.message, "GGML_ASSERT(buffer)") && b.ggml.backend[bias] == cpu);
        CHECK(b.tgs.ran && b.tgs.backend[bias] == cpu && split_reads(&b.tgs, dev0, bias));
        struct tg_ggml_sched_result res = {0};
        tg_ggml_sched_classify(&b.k, &b.ggml, &b.tgs, &res);
        CHECK_MSG(res.classes == 1u << TG_GGML_SCHED_CONTEXT_MEMORY, "classes 0x%x: %s", res.classes, res.detail);
        tg_ggml_sched_case_free(&b.k);
    }
}

/* ggml_gallocr and tgsched's allocator on the same graph, fresh (the
 * scheduler planned the case's tensors): the leaf in context memory keeps its
 * memory, only y is planned. */
static void context_memory_allocators(void) {
    struct tg_ggml_sched_case k;
    if (!open_case(UPSTREAM("sched-context-memory"), &k)) return;
    const struct tg_graph *g = k.c->graph;
    struct tg_tensor *bias = g->leafs[tg_ggml_sched_slot_named(g, "bias") - g->n_nodes];
    static struct tg_ggml_sched_side side;
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    struct ggml_tensor *gbias = tg_ggml_lookup(&side.gg, bias);
    void *owned = gbias->data;
    CHECK(owned != NULL && gbias->buffer == NULL);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(ga, side.gg.graph));
    size_t ggml_size = ggml_gallocr_get_buffer_size(ga, 0);
    CHECK(gbias->data == owned && gbias->buffer == NULL);
    ggml_gallocr_free(ga);
    tg_ggml_sched_side_close(&side);
    void *t_owned = bias->data;
    tg_gallocr *ta = tg_gallocr_new(tg_cpu_buffer_type());
    CHECK_OK(tg_gallocr_alloc_graph(ta, k.c->graph));
    size_t tg_size = tg_gallocr_get_buffer_size(ta, 0);
    CHECK(bias->data == t_owned && bias->buffer == NULL);
    tg_gallocr_free(ta);
    printf("%-44s graph allocators: the bias keeps its memory; planned %zu bytes by ggml, %zu by tgsched\n", "",
           ggml_size, tg_size);
    CHECK(ggml_size == 256 && tg_size == 256);
    tg_ggml_sched_case_free(&k);
}

/* Whether the trace copied source into a split input on backend: data moved
 * into its copy (BACKEND#SOURCE#N), or out of the source itself (a copy from
 * device memory into host memory reads the source). */
static bool copied_to(const struct tg_ggml_sched_side *side, const char *backend, const char *source) {
    char prefix[GGML_MAX_NAME + 24];
    int n = snprintf(prefix, sizeof prefix, "%s#%s#", backend, source);
    for (int e = 0; e < side->trace.n; e++) {
        const char *moved = side->trace.ev[e].name;
        if (!side->trace.ev[e].compute && (strncmp(moved, prefix, (size_t)n) == 0 || strcmp(moved, source) == 0)) return true;
    }
    return false;
}

static ggml_backend_buffer_type_t buft_of(const struct ggml_tensor *t) {
    const struct ggml_tensor *root = t->view_src ? t->view_src : t;
    return root->buffer ? ggml_backend_buffer_get_type(root->buffer) : NULL;
}

/* Where ggml's writer into an open root (no memory before scheduling) runs
 * and where it writes: the writer is placed like any node (by weights, or by
 * expansion), the allocator gives it the root's memory in the root's
 * backend's buffer, and the split copies the root to the writer's backend as
 * the writer's source dst_src.  tgsched runs the writer where the root is. */
static void write_into_open_root(const char *name, int dst_src) {
    char path[128];
    snprintf(path, sizeof path, "corpus/upstream/%s.tg", name);
    const int cpu = 1, dev0 = 0;
    static struct both b;
    if (!schedule_both(path, &b)) return;
    const struct tg_graph *g = b.k.c->graph;
    int written = tg_ggml_sched_slot_named(g, "written"), root = tg_ggml_sched_slot(g, g->nodes[written]->view_src);
    CHECK(b.ggml.ran && b.ggml.backend[written] == dev0 && b.ggml.backend[root] == cpu);
    CHECK(b.tgs.ran && b.tgs.backend[written] == b.tgs.backend[root] && b.tgs.backend[root] == cpu);
    struct tg_ggml_sched_result res = {0};
    tg_ggml_sched_classify(&b.k, &b.ggml, &b.tgs, &res);
    CHECK_MSG(res.classes == 1u << TG_GGML_SCHED_WRITE_ELSEWHERE, "classes 0x%x: %s", res.classes, res.detail);
    tg_ggml_sched_case_free(&b.k);

    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    static struct tg_ggml_sched_side side;
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    g = k.c->graph;
    struct ggml_tensor *gw = tg_ggml_lookup(&side.gg, g->nodes[written]);
    struct ggml_tensor *groot = tg_ggml_lookup(&side.gg, g->nodes[written]->view_src);
    CHECK(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph));
    const struct ggml_tensor *copy = gw->src[dst_src];
    bool in_root = gw->data == groot->data && buft_of(gw) == side.tb[cpu].buft;
    bool dev0_can = ggml_backend_dev_supports_buft(&side.tb[dev0].device, buft_of(gw));
    bool copied = copy != groot && buft_of(copy) == side.tb[dev0].buft;
    side.trace.n = 0;
    CHECK(ggml_backend_sched_graph_compute(side.sched, side.gg.graph) == GGML_STATUS_SUCCESS);
    bool root_copied = copied_to(&side, "dev0", groot->name);
    printf("%-44s ggml: the writer on backend %d, its root on %d; the writer's memory is the root's in the cpu's "
           "buffer: %s (dev0 can use it: %s); its src[%d] is '%s' in dev0's buffer: %s, copied in: %s\n",
           path, b.ggml.backend[written], b.ggml.backend[root], in_root ? "yes" : "no", dev0_can ? "yes" : "no",
           dst_src, copy->name, copied ? "yes" : "no", root_copied ? "yes" : "no");
    CHECK(in_root && !dev0_can && copied && root_copied);
    tg_ggml_sched_side_close(&side);
    tg_ggml_sched_case_free(&k);
}

/* The leafs named moved to the end of a ggml and a tgsched leaf list, which
 * then ends before them: sources the graph does not list. */
static int unlist_ggml(struct ggml_cgraph *gg, const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        for (int j = 0; j < gg->n_leafs; j++)
            if (strcmp(gg->leafs[j]->name, names[k]) == 0) {
                struct ggml_tensor *t = gg->leafs[j];
                memmove(&gg->leafs[j], &gg->leafs[j + 1], (size_t)(gg->n_leafs - j - 1) * sizeof *gg->leafs);
                gg->leafs[--gg->n_leafs] = t;
                break;
            }
    return gg->n_leafs;
}

static int unlist_tg(struct tg_graph *g, const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        for (int j = 0; j < g->n_leafs; j++)
            if (strcmp(g->leafs[j]->name, names[k]) == 0) {
                struct tg_tensor *t = g->leafs[j];
                memmove(&g->leafs[j], &g->leafs[j + 1], (size_t)(g->n_leafs - j - 1) * sizeof *g->leafs);
                g->leafs[--g->n_leafs] = t;
                break;
            }
    return g->n_leafs;
}

static bool tg_split_reads(const tg_sched *s, int backend, const struct tg_tensor *t) {
    struct tg_sched_split_info info;
    for (int i = 0; tg_sched_get_split_info(s, i, &info) == TG_OK; i++)
        for (int j = 0; j < info.n_inputs && info.backend_id == backend; j++)
            if (info.inputs[j] == t) return true;
    return false;
}

/* Sources in memory that the graph does not list: h (the CPU's buffer) read
 * on dev0, d (dev0's buffer) read on the CPU.  ggml copies each when listed;
 * unlisted, pass 4 gives each its reader's backend and nothing is copied:
 * the reader computes on memory its backend cannot use. */
static void unlisted_source(void) {
    const char *path = UPSTREAM("sched-unlisted-source");
    const char *const names[] = {"h", "d"};
    const int cpu = 1, dev0 = 0;
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    struct tg_graph *g = k.c->graph;
    struct tg_tensor *y = g->nodes[tg_ggml_sched_slot_named(g, "y")], *z = g->nodes[tg_ggml_sched_slot_named(g, "z")];
    struct tg_tensor *h = y->src[1], *d = z->src[0];
    static struct tg_ggml_sched_side side;
    for (int listed = 1; listed >= 0; listed--) {
        CHECK_OK(tg_ggml_sched_side_open(&side, &k));
        struct ggml_tensor *gy = tg_ggml_lookup(&side.gg, y), *gz = tg_ggml_lookup(&side.gg, z);
        struct ggml_tensor *gh = gy->src[1], *gd = gz->src[0];
        if (!listed) CHECK(unlist_ggml(side.gg.graph, names, 2) == 1);
        CHECK(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph));
        int h_on = tg_ggml_sched_side_backend(&side, ggml_backend_sched_get_tensor_backend(side.sched, gh));
        int d_on = tg_ggml_sched_side_backend(&side, ggml_backend_sched_get_tensor_backend(side.sched, gd));
        int y_on = tg_ggml_sched_side_backend(&side, ggml_backend_sched_get_tensor_backend(side.sched, gy));
        int z_on = tg_ggml_sched_side_backend(&side, ggml_backend_sched_get_tensor_backend(side.sched, gz));
        bool y_reads_h = gy->src[1] == gh, z_reads_d = gz->src[0] == gd; /* the originals, not copies */
        bool dev0_can_h = ggml_backend_dev_supports_buft(&side.tb[dev0].device, buft_of(gh));
        bool cpu_can_d = ggml_backend_dev_supports_buft(&side.tb[cpu].device, buft_of(gd));
        side.trace.n = 0;
        CHECK(ggml_backend_sched_graph_compute(side.sched, side.gg.graph) == GGML_STATUS_SUCCESS);
        bool h_copied = copied_to(&side, "dev0", "h"), d_copied = copied_to(&side, "cpu", "d");
        printf("%-44s ggml, h and d %s: y on %d reads h (on %d) %s, dev0 can use h's memory: %s; "
               "z on %d reads d (on %d) %s, the cpu can use d's memory: %s\n", listed ? path : "",
               listed ? "listed" : "not listed", y_on, h_on, y_reads_h ? "directly" : "through a copy",
               dev0_can_h ? "yes" : "no", z_on, d_on, z_reads_d ? "directly" : "through a copy", cpu_can_d ? "yes" : "no");
        CHECK(y_on == dev0 && z_on == cpu && !dev0_can_h && !cpu_can_d);
        if (listed) CHECK(h_on == cpu && d_on == dev0 && !y_reads_h && !z_reads_d && h_copied && d_copied);
        else CHECK(h_on == dev0 && d_on == cpu && y_reads_h && z_reads_d && !h_copied && !d_copied);
        tg_ggml_sched_side_close(&side);
    }
    tg_sched *s = tg_ggml_tgsched_open(&k, true);
    CHECK(s != NULL);
    if (s) {
        int n_leafs = g->n_leafs;
        CHECK(unlist_tg(g, names, 2) == 1);
        CHECK_OK(tg_sched_alloc_graph(s, g));
        int h_on = tg_sched_get_tensor_backend_id(s, h), d_on = tg_sched_get_tensor_backend_id(s, d);
        bool h_copied = tg_split_reads(s, dev0, h), d_copied = tg_split_reads(s, cpu, d);
        printf("%-44s tgsched, not listed: y on %d, h on %d, copied to dev0: %s; z on %d, d on %d, copied to the cpu: %s\n",
               "", tg_sched_get_tensor_backend_id(s, y), h_on, h_copied ? "yes" : "no",
               tg_sched_get_tensor_backend_id(s, z), d_on, d_copied ? "yes" : "no");
        CHECK(h_on == cpu && d_on == dev0 && h_copied && d_copied);
        tg_sched_reset(s);
        g->n_leafs = n_leafs;
        tg_sched_free(s);
    }
    tg_ggml_sched_case_free(&k);
}

/* ---- the scheduler: pins and the eval callback ------------------------------------------------ */

static bool open_case(const char *path, struct tg_ggml_sched_case *k) {
    size_t len = 0;
    char *text = tg_ggml_read_text(path, &len);
    bool ok = text && tg_ggml_sched_case_from_text(text, len, path, k) == TG_OK;
    free(text);
    CHECK_MSG(ok, "%s: %s", path, tg_last_error());
    return ok;
}

/* The backend the trace computed node u on, -1 when no split held it. */
static int computed_on(const struct tg_ggml_sched_side *side, int u) {
    for (int e = 0; e < side->trace.n; e++) {
        const struct tg_ggml_trace_event *ev = &side->trace.ev[e];
        int i0 = ev->compute ? (int)(ev->nodes - (const struct ggml_tensor *const *)ggml_graph_nodes(side->gg.graph)) : -1;
        if (ev->compute && u >= i0 && u < i0 + ev->n_nodes) return ev->backend;
    }
    return -1;
}

static bool cancel_first(struct ggml_tensor *t, bool ask, void *user) {
    (void)t;
    int *seen = user;
    if (ask) return true;
    (*seen)++;
    return false; /* cancel at the first node computed */
}

static bool cancel_first_tg(struct tg_tensor *t, bool ask, void *user) {
    (void)t;
    int *seen = user;
    if (ask) return true;
    (*seen)++;
    return false;
}

/* The graph is imported afresh for every ggml call sequence: ggml's
 * scheduler rewrites the sources of the graph it schedules to its copies. */
static void pins_and_callback(void) {
    const char *path = UPSTREAM("sched-pins");
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    const struct tg_graph *g = k.c->graph;
    int y = tg_ggml_sched_slot_named(g, "y");
    static struct tg_ggml_sched_side side;
    /* reserve_size with y pinned to the CPU plans y where it would go unpinned: dev0 (its consumer's backend) */
    size_t sizes[2];
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    struct ggml_tensor *gy = tg_ggml_lookup(&side.gg, g->nodes[y]);
    ggml_backend_sched_set_tensor_backend(side.sched, gy, side.backends[1]);
    ggml_backend_sched_reserve_size(side.sched, side.gg.graph, sizes);
    int planned_on = tg_ggml_sched_side_backend(&side, ggml_backend_sched_get_tensor_backend(side.sched, gy));
    tg_ggml_sched_side_close(&side);
    printf("%-44s ggml: y pinned to the cpu, reserve_size plans it on backend %d\n", path, planned_on);
    CHECK(planned_on == 0);
    /* compute without an explicit alloc: ggml resets first, and the pin goes */
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    ggml_backend_sched_set_tensor_backend(side.sched, tg_ggml_lookup(&side.gg, g->nodes[y]), side.backends[1]);
    side.trace.n = 0;
    ggml_backend_sched_graph_compute(side.sched, side.gg.graph);
    int y_on = computed_on(&side, y);
    tg_ggml_sched_side_close(&side);
    printf("%-44s ggml: y pinned to the cpu, computed without an explicit alloc on backend %d\n", "", y_on);
    CHECK(y_on == 0);
    /* the callback cancels at the first node: ggml leaves that split only */
    int seen = 0;
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    ggml_backend_sched_set_eval_callback(side.sched, cancel_first, &seen);
    CHECK(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph));
    int n_splits = ggml_backend_sched_get_n_splits(side.sched);
    side.trace.n = 0;
    enum ggml_status gs = ggml_backend_sched_graph_compute(side.sched, side.gg.graph);
    tg_ggml_sched_side_close(&side);
    printf("%-44s ggml: cancelled at the first node of %d splits: status %d, %d nodes computed and seen\n", "",
           n_splits, gs, seen);
    CHECK(n_splits >= 2 && seen >= 2 && gs == GGML_STATUS_SUCCESS);
    /* tgsched: the pin holds through reserve_size and compute; cancel stops the graph */
    tg_sched *s = tg_ggml_tgsched_open(&k, false);
    CHECK(s != NULL);
    if (s) {
        tg_sched_set_tensor_backend(s, k.c->graph->nodes[y], k.tg_backends[1]);
        CHECK_OK(tg_sched_reserve_size(s, k.c->graph, sizes));
        CHECK_OK(tg_sched_alloc_graph(s, k.c->graph));
        int t_planned = tg_sched_get_tensor_backend_id(s, k.c->graph->nodes[y]);
        CHECK_OK(tg_sched_graph_compute(s, k.c->graph));
        int t_y = tg_sched_get_tensor_backend_id(s, k.c->graph->nodes[y]);
        printf("%-44s tgsched: y pinned to the cpu: after reserve_size it is planned on backend %d, compute runs it on %d\n", "",
               t_planned, t_y);
        CHECK(t_planned == 1 && t_y == 1);
        tg_sched_reset(s);
        int t_seen = 0;
        tg_sched_set_eval_callback(s, cancel_first_tg, &t_seen);
        enum tg_status st = tg_sched_graph_compute(s, k.c->graph);
        printf("%-44s tgsched: cancelled at the first node: %s, %d node computed and seen\n", "", tg_status_name(st), t_seen);
        CHECK(st == TG_ERR_ABORTED && t_seen == 1);
        tg_sched_free(s);
    }
    tg_ggml_sched_case_free(&k);
}


/* ---- the scheduler: call sequences ---------------------------------------------------------- */

static int data_moves(const struct tg_ggml_sched_side *side) {
    int n = 0;
    for (int e = 0; e < side->trace.n; e++) n += !side->trace.ev[e].compute;
    return n;
}

static int tg_split_inputs(const tg_sched *s) {
    int n = 0;
    struct tg_sched_split_info info;
    for (int i = 0; tg_sched_get_split_info(s, i, &info) == TG_OK; i++) n += info.n_inputs;
    return n;
}

/* reserve(g), then alloc_graph(g) and compute: ggml copies nothing the second time */
static void reserve_then_alloc(void) {
    const char *path = UPSTREAM("sched-reserve-then-alloc");
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    static struct tg_ggml_sched_side side;
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    CHECK(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph));
    side.trace.n = 0;
    CHECK(ggml_backend_sched_graph_compute(side.sched, side.gg.graph) == GGML_STATUS_SUCCESS);
    int fresh = data_moves(&side);
    tg_ggml_sched_side_close(&side);
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    CHECK(ggml_backend_sched_reserve(side.sched, side.gg.graph));
    CHECK(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph));
    side.trace.n = 0;
    CHECK(ggml_backend_sched_graph_compute(side.sched, side.gg.graph) == GGML_STATUS_SUCCESS);
    int again = data_moves(&side);
    const struct ggml_tensor *m = ggml_graph_node(side.gg.graph, tg_ggml_sched_slot_named(k.c->graph, "m"));
    printf("%-44s ggml: split inputs copied: %d on a fresh graph, %d after reserve on it (m reads '%s')\n", path, fresh,
           again, m->src[1]->name);
    CHECK(fresh == 2 && again == 0 && strcmp(m->src[1]->name, "y") != 0);
    tg_ggml_sched_side_close(&side);

    tg_sched *s = tg_ggml_tgsched_open(&k, false);
    CHECK(s != NULL);
    if (s) {
        CHECK_OK(tg_sched_alloc_graph(s, k.c->graph));
        int t_fresh = tg_split_inputs(s);
        tg_sched_reset(s);
        CHECK_OK(tg_sched_reserve(s, k.c->graph));
        CHECK_OK(tg_sched_alloc_graph(s, k.c->graph));
        CHECK_OK(tg_sched_graph_compute(s, k.c->graph));
        int t_again = tg_split_inputs(s);
        tg_sched_reset(s);
        const struct tg_tensor *tm = k.c->graph->nodes[tg_ggml_sched_slot_named(k.c->graph, "m")];
        printf("%-44s tgsched: split inputs %d on a fresh graph, %d after reserve on it (after reset m reads '%s')\n", "",
               t_fresh, t_again, tm->src[1]->name);
        CHECK(t_fresh == 2 && t_again == 2 && strcmp(tm->src[1]->name, "y") == 0);
        tg_sched_free(s);
    }
    tg_ggml_sched_case_free(&k);
}

/* alloc_graph(g1), then compute(g2): ggml computes g1 */
static void compute_other_graph(void) {
    const char *path = UPSTREAM("sched-compute-other-graph");
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    static struct tg_ggml_sched_side side;
    int last = k.c->graph->n_nodes - 1;
    CHECK_OK(tg_ggml_sched_side_open(&side, &k));
    CHECK(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph));
    struct ggml_cgraph g2 = ggml_graph_view(side.gg.graph, 0, last);
    side.trace.n = 0;
    CHECK(ggml_backend_sched_graph_compute(side.sched, &g2) == GGML_STATUS_SUCCESS);
    int on = computed_on(&side, last);
    tg_ggml_sched_side_close(&side);
    printf("%-44s ggml: computing g1 without its last node computes that node too (on backend %d)\n", path, on);
    CHECK(on >= 0);

    tg_sched *s = tg_ggml_tgsched_open(&k, false);
    CHECK(s != NULL);
    if (s) {
        struct tg_graph *g2t = tg_graph_view(k.c->graph, 0, last);
        CHECK(g2t != NULL);
        CHECK_OK(tg_sched_alloc_graph(s, k.c->graph));
        CHECK_OK(tg_sched_graph_compute(s, g2t));
        int t_on = tg_sched_get_tensor_backend_id(s, k.c->graph->nodes[last]);
        printf("%-44s tgsched: schedules g2; its last scheduled graph %s the node\n", "", t_on < 0 ? "lacks" : "holds");
        CHECK(t_on < 0 && tg_sched_get_tensor_backend_id(s, k.c->graph->nodes[0]) >= 0);
        tg_sched_free(s);
        tg_graph_free(g2t);
    }
    tg_ggml_sched_case_free(&k);
}

static tg_buffer *out_of_memory(tg_buffer_type *buft, size_t size) {
    tg_fail(TG_ERR_ALLOC, "%s: out of memory for %zu bytes (the test's failing device)", tg_buft_name(buft), size);
    return NULL;
}

/* in a child: ggml's scheduler allocates the case's graph with dev0 out of memory */
static void alloc_with_dev0_failing(const void *arg) {
    static struct tg_ggml_sched_side side;
    if (tg_ggml_sched_side_open(&side, arg) != TG_OK) _exit(3);
    side.tb[0].own.fail_alloc = true;
    _exit(ggml_backend_sched_alloc_graph(side.sched, side.gg.graph) ? 0 : 2);
}

/* dev0 cannot allocate its compute buffer: ggml crashes, tgsched fails cleanly */
static void alloc_fails(void) {
    const char *path = UPSTREAM("sched-alloc-fails");
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    struct tg_child_read child = tg_test_fork(alloc_with_dev0_failing, &k, false);
    int sig = tg_child_signal(&child);
    printf("%-44s ggml: alloc_graph with dev0 out of memory: %s\n", path,
           sig ? strsignal(sig) : WEXITSTATUS(child.status) == 2 ? "returned false" : "returned true");
    CHECK(sig != 0);

    tg_sched *s = tg_ggml_tgsched_open(&k, false);
    CHECK(s != NULL);
    if (s) {
        tg_buffer_type *bt = tg_backend_get_default_buffer_type(k.tg_backends[0]);
        tg_buffer *(*alloc)(tg_buffer_type *, size_t) = bt->iface.alloc_buffer;
        bt->iface.alloc_buffer = out_of_memory;
        enum tg_status st = tg_sched_alloc_graph(s, k.c->graph);
        printf("%-44s tgsched: %s: %s\n", "", tg_status_name(st), tg_last_error());
        CHECK(st == TG_ERR_ALLOC);
        bt->iface.alloc_buffer = alloc;
        CHECK_OK(tg_sched_alloc_graph(s, k.c->graph));
        CHECK_OK(tg_sched_graph_compute(s, k.c->graph));
        tg_sched_free(s);
    }
    tg_ggml_sched_case_free(&k);
}

/* ---- the scheduler: the same graph, token after token --------------------------------------- */

#define AGAIN_ROUNDS 6
#define AGAIN_W 64 /* w and x: 16 x 4 floats each */

/* What ggml's child saw, round by round, before it ended. */
struct again_rounds {
    int reached;                         /* the round whose alloc started last */
    int copied[AGAIN_ROUNDS];            /* data moves (split input copies) while computing */
    char m_reads[AGAIN_ROUNDS][GGML_MAX_NAME]; /* m's src[1] after the alloc */
};

static void again_values(int round, float *x) {
    for (int i = 0; i < AGAIN_W; i++) x[i] = (float)((i * 7 + round * 13) % 17) / 8.0f - 1.0f;
}

/* The case on the CPU alone (its own copy of the graph): z and q for w, x. */
static bool again_cpu_alone(const char *path, const float *w, const float *x, float *z, float *q) {
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return false;
    struct tg_graph *g = k.c->graph;
    struct tg_tensor *tw = g->leafs[tg_ggml_sched_slot_named(g, "w") - g->n_nodes];
    struct tg_tensor *tx = g->leafs[tg_ggml_sched_slot_named(g, "x") - g->n_nodes];
    tg_gallocr *ga = tg_gallocr_new(tg_cpu_buffer_type());
    bool ok = ga && tg_gallocr_alloc_graph(ga, g) == TG_OK && tg_tensor_set(tw, w, 0, AGAIN_W * sizeof *w) == TG_OK &&
              tg_tensor_set(tx, x, 0, AGAIN_W * sizeof *x) == TG_OK && tg_cpu_compute_graph(g, 1) == TG_OK &&
              tg_tensor_get(g->nodes[tg_ggml_sched_slot_named(g, "z")], z, 0, 16 * sizeof *z) == TG_OK &&
              tg_tensor_get(g->nodes[tg_ggml_sched_slot_named(g, "q")], q, 0, AGAIN_W * sizeof *q) == TG_OK;
    CHECK_MSG(ok, "the cpu alone: %s", tg_last_error());
    tg_gallocr_free(ga);
    tg_ggml_sched_case_free(&k);
    return ok;
}

struct again_job {
    const struct tg_ggml_sched_case *k;
    int m;                     /* the slot of node m */
    struct again_rounds *seen; /* shared with the parent */
};

/* in a child: ggml's scheduler allocates and computes the same cgraph again
 * after each reset */
static void same_graph_rounds(const void *arg) {
    const struct again_job *job = arg;
    struct again_rounds *seen = job->seen;
    static struct tg_ggml_sched_side side;
    if (tg_ggml_sched_side_open(&side, job->k) != TG_OK) _exit(3);
    struct ggml_tensor *gm = ggml_graph_node(side.gg.graph, job->m);
    for (int r = 0; r < AGAIN_ROUNDS; r++) {
        seen->reached = r;
        if (!ggml_backend_sched_alloc_graph(side.sched, side.gg.graph)) _exit(2);
        snprintf(seen->m_reads[r], sizeof seen->m_reads[r], "%s", gm->src[1]->name);
        side.trace.n = 0;
        if (ggml_backend_sched_graph_compute(side.sched, side.gg.graph) != GGML_STATUS_SUCCESS) _exit(2);
        seen->copied[r] = data_moves(&side);
        ggml_backend_sched_reset(side.sched);
    }
}

/* The same cgraph allocated and computed again after each reset, with 4
 * copies and w on dev0 (sched-same-graph-again).  ggml, in a child: the
 * sources its first split rewrote point into its context, which the next
 * split makes again in the same memory; nothing is copied after the first
 * round and the fifth alloc crashes.  tgsched: every round copies its split
 * inputs, passes the scheduler checkers and equals the CPU alone bit for bit. */
static void same_graph_again(void) {
    const char *path = UPSTREAM("sched-same-graph-again");
    struct tg_ggml_sched_case k;
    if (!open_case(path, &k)) return;
    struct again_rounds *seen = tg_test_shared_new(sizeof *seen);
    CHECK(seen != NULL);
    if (!seen) return;
    seen->reached = -1;
    struct again_job job = {&k, tg_ggml_sched_slot_named(k.c->graph, "m"), seen};
    struct tg_child_read child = tg_test_fork(same_graph_rounds, &job, false);
    int sig = tg_child_signal(&child);
    printf("%-44s ggml, 4 copies: round 0 copies %d, m reads '%s'; round 1 copies %d, m reads '%s'; alloc of round "
           "%d: %s\n", path, seen->copied[0], seen->m_reads[0], seen->copied[1], seen->m_reads[1], seen->reached,
           sig ? strsignal(sig) : "returned");
    /* the day a pin fixes it this fails: then the row in docs/upstream.md goes */
    CHECK(sig != 0 && seen->reached == 4); /* SIGSEGV (SIGABRT under a sanitizer) */
    CHECK(seen->copied[0] == 3 && strcmp(seen->m_reads[0], "dev0#x#0") == 0);
    CHECK(seen->copied[1] == 0 && strncmp(seen->m_reads[1], "dev0#x#", 7) != 0);
    tg_test_shared_free(seen, sizeof *seen);

    tg_sched *s = tg_ggml_tgsched_open(&k, false);
    CHECK(s != NULL);
    if (s) {
        struct tg_graph *g = k.c->graph;
        struct tg_tensor *w = g->leafs[tg_ggml_sched_slot_named(g, "w") - g->n_nodes];
        struct tg_tensor *x = g->leafs[tg_ggml_sched_slot_named(g, "x") - g->n_nodes];
        float wv[AGAIN_W], xv[AGAIN_W], z[16], q[AGAIN_W], z_ref[16], q_ref[AGAIN_W];
        again_values(100, wv);
        CHECK_OK(tg_tensor_set(w, wv, 0, sizeof wv));
        int same = 0, copied = 0;
        for (int r = 0; r < AGAIN_ROUNDS; r++) {
            struct tg_oracle_snapshot snap;
            CHECK_OK(tg_oracle_snapshot_take_user_memory(g, &snap));
            CHECK_OK(tg_sched_alloc_graph(s, g));
            struct tg_oracle_sched_report rep = {0};
            CHECK_OK(tg_oracle_sched_check(s, &snap, NULL, NULL, 0, &rep));
            CHECK_MSG(rep.n == 0, "round %d: %s", r, rep.n ? rep.items[0].message : "");
            tg_oracle_sched_report_free(&rep);
            tg_oracle_snapshot_free(&snap);
            copied += tg_split_inputs(s) == 3;
            again_values(r, xv);
            CHECK_OK(tg_tensor_set(x, xv, 0, sizeof xv));
            CHECK_OK(tg_sched_graph_compute(s, g));
            CHECK_OK(tg_tensor_get(g->nodes[tg_ggml_sched_slot_named(g, "z")], z, 0, sizeof z));
            CHECK_OK(tg_tensor_get(g->nodes[tg_ggml_sched_slot_named(g, "q")], q, 0, sizeof q));
            tg_sched_reset(s);
            if (again_cpu_alone(path, wv, xv, z_ref, q_ref))
                same += memcmp(z, z_ref, sizeof z) == 0 && memcmp(q, q_ref, sizeof q) == 0;
        }
        printf("%-44s tgsched, %d copies: %d of %d rounds copy the 3 split inputs, %d equal the cpu alone bit for bit\n",
               "", tg_sched_get_n_copies(s), copied, AGAIN_ROUNDS, same);
        CHECK(tg_sched_get_n_copies(s) == 4 && copied == AGAIN_ROUNDS && same == AGAIN_ROUNDS);
        tg_sched_free(s);
    }
    tg_ggml_sched_case_free(&k);
}

int main(void) {
    tg_ggml_quiet_log();
    scheduler_defects();
    context_memory();
    context_memory_allocators();
    write_into_open_root("sched-write-elsewhere", 2);
    write_into_open_root("sched-write-elsewhere-open", 1);
    unlisted_source();
    pins_and_callback();
    reserve_then_alloc();
    compute_other_graph();
    alloc_fails();
    same_graph_again();
    return tg_test_finish();
}

/* The scheduler differential token after token (label ggml): the generated
 * cases of test_ggml_sched, each as a caller runs a model, with 1 and with 4
 * copies (pipeline parallelism), through one scheduler per side:
 *   round 0  the graph, fresh;
 *   round 1  reset, the same cgraph allocated again (graph reuse);
 *   round 2  reset, another graph (other bytes: another size, its own weights
 *            on the same backends), as decode follows prefill;
 *   round 3  reset, the first cgraph again.
 * Each round: ggml_backend_sched (in a child, its schedule traced) and
 * tg_sched (sims that compute, and the CPU) schedule the round's graph; the
 * two schedules are classified as test_ggml_sched classifies them, tgsched's
 * passes every scheduler checker, and its results equal the same graph on the
 * CPU alone bit for bit (inputs and weights filled afresh each round).  A
 * round that allocates the same graph again must schedule it as its first
 * round did: ggml does not (sched-same-graph-again, docs/upstream.md), tgsched
 * must.  TG_GGML_SEQ_CASES sets the count, TG_GGML_SEQ_CASE runs one. */
#include "tg-ggml-sched.h"
#include "tg-gen.h"
#include "tg-oracle-sched.h"
#include "tg-cpu.h"
#include "tg_test.h"
#include "tg_test_child.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 4
static const int round_graph[ROUNDS] = {0, 0, 1, 0}; /* which of the two graphs each round allocates */

/* Sequence classes, over and above the differential's. */
enum seq_class {
    SEQ_AGAIN_DIFFERS = TG_GGML_SCHED_CLASS_COUNT, /* ggml schedules the same graph again otherwise than
                                                     * the first time (its sources still name copies) */
    SEQ_AGAIN_CRASH,  /* ggml crashed allocating or computing the same graph again */
    SEQ_GGML_ENDED,   /* ggml's child crashed (no assert) in a round that allocates a graph for the first time */
    SEQ_NOT_REACHED,  /* ggml's child ended (an assert or a crash) in an earlier round */
    SEQ_SIZES_CARRIED, /* the schedules alike, the buffer sizes not: an earlier round's sizes differed, and
                        * compute buffers only grow (in both) */
    SEQ_SKIPPED,      /* not compared: the second graph did not fit the first's devices */
    SEQ_CLASS_COUNT
};

static const char *seq_class_name(int c) {
    if (c < TG_GGML_SCHED_CLASS_COUNT) return tg_ggml_sched_class_name((enum tg_ggml_sched_class)c);
    static const char *const names[] = {"ggml: same graph again differs", "ggml crash: same graph again",
                                        "ggml crash: fresh graph", "ggml ended before",
                                        "sizes carried from a round before", "skipped"};
    return names[c - TG_GGML_SCHED_CLASS_COUNT];
}

static void case_bytes(uint64_t seed, uint8_t *bytes, size_t n) { tg_gen_seed_bytes(seed * 0x9e3779b97f4a7c15ull + 11, bytes, n); }

#define CASE_BYTES (TG_GEN_SCHED_HEADER_BYTES + TG_GEN_SEED_BYTES)

/* The two graphs of a case: the first from its seed; the second with the
 * same devices and weights salt, its graph from another seed. */
static void sequence_bytes(uint64_t seed, uint8_t bytes[2][CASE_BYTES]) {
    case_bytes(seed, bytes[0], CASE_BYTES);
    case_bytes(seed + 0x5eed, bytes[1], CASE_BYTES);
    memcpy(bytes[1], bytes[0], TG_GEN_SCHED_HEADER_BYTES);
}

/* ---- ggml's side: the rounds in a child -------------------------------------------------- */

struct ggml_rounds {
    int reached;      /* the round running when the child ended */
    int signal;       /* the signal that ended it (minus the exit status when it exited failing), 0 when none */
    struct tg_ggml_schedule p[ROUNDS];
};

static struct ggml_rounds *child_rounds;

static void child_abort(const char *message) {
    struct tg_ggml_schedule *p = &child_rounds->p[child_rounds->reached];
    p->aborted = true;
    snprintf(p->message, sizeof p->message, "%s", message);
}

struct second {
    struct tg_ggml_sched_side *side;
    const struct tg_ggml_sched_case *k;
};

static ggml_backend_buffer_type_t second_weights(const struct tg_tensor *t, void *user) {
    const struct second *sec = user;
    const struct tg_graph *g = sec->k->c->graph;
    int u = tg_ggml_sched_slot(g, t);
    int b = u >= g->n_nodes ? sec->k->placement[u - g->n_nodes] : -1;
    if (b < 0 || b == sec->k->n_backends - 1) return &sec->side->weights_on_cpu.buft;
    return sec->side->tb[b].buft;
}

static size_t graph_size_of(struct tg_ggml_sched_case *const *k) {
    size_t most = 0;
    for (int i = 0; i < 2; i++) {
        size_t n = (size_t)(k[i]->c->graph->n_nodes + k[i]->c->graph->n_leafs) * 2 + 64;
        most = n > most ? n : most;
    }
    return most;
}

struct rounds_job {
    struct tg_ggml_sched_case *const *k;
    struct ggml_rounds *out; /* shared with the parent */
};

static void run_ggml_rounds(const void *arg) {
    const struct rounds_job *job = arg;
    struct tg_ggml_sched_case *const *k = job->k;
    struct ggml_rounds *out = job->out;
    child_rounds = out;
    ggml_set_abort_callback(child_abort);
    static struct tg_ggml_sched_side side;
    static struct tg_ggml_graph second_gg;
    if (tg_ggml_sched_side_open(&side, k[0]) != TG_OK) return;
    struct second sec = {&side, k[1]};
    struct tg_ggml_import_options io = {.external_buft = second_weights, .user = &sec};
    if (tg_ggml_import(k[1]->c->graph, &io, &second_gg) != TG_OK) return;
    ggml_backend_sched_free(side.sched); /* one scheduler for both graphs */
    side.sched = ggml_backend_sched_new(side.backends, NULL, k[0]->n_backends, graph_size_of(k), k[0]->parallel,
                                        k[0]->op_offload);
    struct tg_ggml_graph first_gg = side.gg;
    for (int r = 0; r < ROUNDS; r++) {
        out->reached = r;
        side.k = k[round_graph[r]];
        side.gg = round_graph[r] ? second_gg : first_gg;
        tg_ggml_sched_side_schedule(&side, &out->p[r]);
        ggml_backend_sched_reset(side.sched);
    }
    out->reached = ROUNDS;
}

static void ggml_side(struct tg_ggml_sched_case *const *k, struct ggml_rounds *out) {
    memset(out, 0, sizeof *out);
    struct ggml_rounds *shared = tg_test_shared_new(sizeof *shared);
    if (!shared) return;
    struct rounds_job job = {k, shared};
    struct tg_child_read child = tg_test_fork(run_ggml_rounds, &job, false);
    memcpy(out, shared, sizeof *out);
    if (tg_child_signal(&child)) out->signal = tg_child_signal(&child);
    else if (child.started && WEXITSTATUS(child.status)) out->signal = -WEXITSTATUS(child.status); /* a sanitizer's report */
    tg_test_shared_free(shared, sizeof *shared);
}

/* ---- tgsched's side: the rounds, checked and computed ------------------------------------ */

static void set_bytes(struct tg_tensor *t, const void *v) {
    if (!t->buffer && t->data) memcpy(t->data, v, tg_nbytes(t)); /* memory its context owns */
    else CHECK_OK(tg_tensor_set(t, v, 0, tg_nbytes(t)));
}

static void *get_bytes(const struct tg_tensor *t) {
    if (t->buffer || !t->data) return tg_gen_tensor_bytes(t);
    void *v = malloc(tg_nbytes(t));
    if (v) memcpy(v, t->data, tg_nbytes(t));
    return v;
}

/* Whether leaf or input node t gets the reference's values: a root with memory. */
static bool fed(const struct tg_tensor *t) { return !t->view_src && t->data; }

/* Fills the reference (a fresh decode of the round's bytes on the CPU alone)
 * with seed's values, copies them into g (scheduled: inputs and weights
 * bound), computes g with s, and the reference on the CPU: every result bit
 * for bit.  Returns whether it compared (the graph has CPU kernels). */
static bool computed_as_cpu_alone(tg_sched *s, struct tg_graph *g, const uint8_t *bytes, uint64_t seed, const char *what) {
    if (!tg_gen_graph_cpu_computable(g) || g->n_nodes == 0) return false;
    struct tg_ggml_sched_case ref;
    CHECK_OK(tg_ggml_sched_case_from_bytes(bytes, CASE_BYTES, &ref));
    struct tg_graph *rg = ref.c->graph;
    bool ok = rg->n_nodes == g->n_nodes && rg->n_leafs == g->n_leafs;
    tg_gallocr *ga = ok ? tg_gallocr_new(tg_cpu_buffer_type()) : NULL;
    ok = ok && ga && tg_gallocr_alloc_graph(ga, rg) == TG_OK && tg_oracle_fill_inputs(rg, seed) == TG_OK;
    CHECK_MSG(ok, "%s: the reference: %s", what, tg_last_error());
    for (int u = 0; ok && u < g->n_nodes + g->n_leafs; u++) {
        struct tg_tensor *t = u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
        const struct tg_tensor *rt = u < g->n_nodes ? rg->nodes[u] : rg->leafs[u - g->n_nodes];
        if ((u < g->n_nodes && !(t->flags & TG_FLAG_INPUT)) || !fed(t) || !fed(rt)) continue;
        void *v = get_bytes(rt);
        if (v) set_bytes(t, v);
        free(v);
    }
    ok = ok && tg_sched_graph_compute(s, g) == TG_OK && tg_cpu_compute_graph(rg, 1) == TG_OK;
    CHECK_MSG(ok, "%s: compute: %s", what, tg_last_error());
    for (int i = 0; ok && i < g->n_nodes; i++) {
        if (!tg_gen_node_is_result(rg, i)) continue; /* g reads the scheduler's copies until reset */
        void *a = get_bytes(g->nodes[i]), *b = get_bytes(rg->nodes[i]);
        CHECK_MSG(a && b && memcmp(a, b, tg_nbytes(g->nodes[i])) == 0, "%s: node %d (%s) differs from the cpu alone",
                  what, i, g->nodes[i]->name);
        free(a);
        free(b);
    }
    tg_gallocr_free(ga);
    tg_ggml_sched_case_free(&ref);
    return ok;
}

/* tg_sched over the first case's backends (the second's weights moved there
 * too), one scheduler for every round.  Returns the rounds computed and
 * compared with the CPU alone; -1 when the second graph did not fit. */
static int tgsched_side(struct tg_ggml_sched_case *const *k, uint8_t bytes[2][CASE_BYTES], uint64_t seed,
                        struct tg_ggml_schedule *tp) {
    tg_sched *s = tg_ggml_tgsched_open(k[0], false);
    CHECK_MSG(s != NULL, "case %llu: tgsched's side: %s", (unsigned long long)seed, tg_last_error());
    if (!s) return 0;
    tg_sched_free(s);
    if (tg_ggml_tgsched_move_weights(k[1], k[0]->tg_backends) != TG_OK) return -1; /* a sim's max size */
    s = tg_sched_new(k[0]->tg_backends, NULL, k[0]->n_backends, graph_size_of(k), k[0]->parallel, k[0]->op_offload);
    CHECK(s != NULL);
    if (!s) return 0;
    tg_gallocr_set_policy(tg_sched_get_gallocr(s), TG_PLAN_GGML);
    int compared = 0;
    for (int r = 0; r < ROUNDS; r++) {
        const struct tg_ggml_sched_case *kr = k[round_graph[r]];
        struct tg_graph *g = kr->c->graph;
        char what[80];
        snprintf(what, sizeof what, "case %llu, %d copies, round %d", (unsigned long long)seed, kr->parallel ? 4 : 1, r);
        memset(&tp[r], 0, sizeof tp[r]);
        struct tg_oracle_snapshot snap;
        CHECK_OK(tg_oracle_snapshot_take_user_memory(g, &snap));
        enum tg_status st = tg_sched_alloc_graph(s, g);
        if (st != TG_OK) {
            tp[r].refused = true;
            snprintf(tp[r].message, sizeof tp[r].message, "%s", tg_last_error());
        } else {
            struct tg_oracle_sched_report rep = {0};
            CHECK_OK(tg_oracle_sched_check(s, &snap, NULL, NULL, 0, &rep));
            CHECK_MSG(rep.n == 0, "%s: scheduler checker: %s", what, rep.n ? rep.items[0].message : "");
            tg_ggml_tgsched_capture(s, kr, &tp[r]);
            if (rep.n == 0) compared += computed_as_cpu_alone(s, g, bytes[round_graph[r]], seed * 16 + (uint64_t)r, what);
            tg_oracle_sched_report_free(&rep);
        }
        tg_oracle_snapshot_free(&snap);
        tg_sched_reset(s);
    }
    tg_sched_free(s);
    return compared;
}

/* ---- comparing ------------------------------------------------------------------------------- */

static bool same_split(const struct tg_ggml_split *a, const struct tg_ggml_split *b) {
    if (a->backend != b->backend || a->i_start != b->i_start || a->i_end != b->i_end || a->n_inputs != b->n_inputs) return false;
    for (int i = 0; i < a->n_inputs; i++) {
        bool found = false;
        for (int j = 0; j < b->n_inputs; j++) found |= a->inputs[i] == b->inputs[j];
        if (!found) return false;
    }
    return true;
}

/* Two schedules of one graph alike: the same outcome, backends, splits with
 * their inputs, copies, and (ggml) data moved. */
static bool same_schedule(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *a, const struct tg_ggml_schedule *b) {
    if (a->ran != b->ran || a->refused != b->refused || a->aborted != b->aborted) return false;
    if (!a->ran) return true;
    const struct tg_graph *g = k->c->graph;
    for (int u = 0; u < g->n_nodes + g->n_leafs && u < TG_GGML_SCHED_MAX_TENSORS; u++)
        if (a->backend[u] != b->backend[u]) return false;
    if (a->n_splits != b->n_splits || a->n_copies != b->n_copies || a->n_data_moves != b->n_data_moves) return false;
    for (int i = 0; i < a->n_splits; i++)
        if (!same_split(&a->splits[i], &b->splits[i])) return false;
    return true;
}

/* The round where graph r's cgraph was allocated first. */
static int first_round_of(int r) {
    for (int i = 0; i < r; i++)
        if (round_graph[i] == round_graph[r]) return i;
    return r;
}

int main(void) {
    tg_ggml_quiet_log();
    const char *env = getenv("TG_GGML_SEQ_CASES");
    int n = env ? atoi(env) : 200;
    const char *only = getenv("TG_GGML_SEQ_CASE");
    uint64_t first = only ? strtoull(only, NULL, 10) : 1, last = only ? first : (uint64_t)n;
    int per_class[SEQ_CLASS_COUNT] = {0}, rounds = 0, computed = 0, failures = 0, sequences = 0, again_rounds = 0;
    static struct ggml_rounds gr;
    static struct tg_ggml_schedule tp[ROUNDS];
    for (uint64_t seed = first; seed <= last; seed++) {
        for (int copies = 1; copies <= 4; copies += 3) {
            uint8_t bytes[2][CASE_BYTES];
            sequence_bytes(seed, bytes);
            struct tg_ggml_sched_case k1, k2;
            CHECK_OK(tg_ggml_sched_case_from_bytes(bytes[0], CASE_BYTES, &k1));
            CHECK_OK(tg_ggml_sched_case_from_bytes(bytes[1], CASE_BYTES, &k2));
            struct tg_ggml_sched_case *k[2] = {&k1, &k2};
            k1.parallel = k2.parallel = copies > 1;
            for (int d = 0; d < k1.n_backends - 1; d++) { /* a device's max size fits both graphs */
                size_t m1 = k1.dev[d].max_size, m2 = k2.dev[d].max_size;
                k1.dev[d].max_size = k2.dev[d].max_size = m1 && m2 ? (m1 > m2 ? m1 : m2) : 0;
            }
            ggml_side(k, &gr);
            int c = tgsched_side(k, bytes, seed, tp);
            sequences++;
            if (c < 0) {
                per_class[SEQ_SKIPPED] += ROUNDS;
                tg_ggml_sched_case_free(&k2);
                tg_ggml_sched_case_free(&k1);
                continue;
            }
            computed += c;
            bool sizes_differed = false; /* in a round before */
            for (int r = 0; r < ROUNDS; r++) {
                const struct tg_ggml_sched_case *kr = k[round_graph[r]];
                int r0 = first_round_of(r);
                rounds++;
                again_rounds += r0 != r;
                unsigned classes = 0;
                char detail[400] = "";
                /* tgsched schedules a graph it saw before as it did the first time */
                CHECK_MSG(r0 == r || same_schedule(kr, &tp[r0], &tp[r]),
                          "case %llu, %d copies: tgsched's round %d differs from its round %d", (unsigned long long)seed,
                          copies, r, r0);
                bool aborted = gr.reached == r && gr.p[r].aborted; /* a GGML_ASSERT: the round's outcome */
                bool crashed = gr.reached == r && gr.signal && !aborted;
                if (gr.reached < r) {
                    classes = 1u << SEQ_NOT_REACHED;
                } else if (r0 != r && (crashed || (aborted && !gr.p[r0].aborted))) {
                    classes = 1u << SEQ_AGAIN_CRASH;
                    snprintf(detail, sizeof detail, "ggml's child ended in round %d (signal %d): %s", r, gr.signal,
                             gr.p[r].message);
                } else if (crashed) {
                    classes = 1u << SEQ_GGML_ENDED;
                    snprintf(detail, sizeof detail, "ggml's child ended in round %d (signal %d)", r, gr.signal);
                } else if (r0 != r && !same_schedule(kr, &gr.p[r0], &gr.p[r])) {
                    classes = 1u << SEQ_AGAIN_DIFFERS;
                    snprintf(detail, sizeof detail, "ggml round %d: %d data moves, round %d: %d", r0,
                             gr.p[r0].n_data_moves, r, gr.p[r].n_data_moves);
                } else {
                    struct tg_ggml_sched_result res;
                    memset(&res, 0, sizeof res);
                    tg_ggml_sched_classify(kr, &gr.p[r], &tp[r], &res);
                    bool only_sizes = res.compared || (res.sizes_differ && !res.nodes_differ && !res.splits_differ &&
                                                       !res.inputs_differ && !res.copies_differ);
                    if (res.classes == 1u << TG_GGML_SCHED_UNEXPLAINED && only_sizes && sizes_differed)
                        res.classes = 1u << SEQ_SIZES_CARRIED;
                    classes = res.classes ? res.classes : 1u << TG_GGML_SCHED_SAME;
                    snprintf(detail, sizeof detail, "%s", res.detail);
                }
                if (gr.reached > r || (gr.reached == r && !gr.signal)) {
                    for (int b = 0; b < kr->n_backends; b++) sizes_differed |= gr.p[r].sizes[b] != tp[r].sizes[b];
                    sizes_differed |= (classes >> SEQ_AGAIN_DIFFERS) & 1;
                }
                for (int x = 0; x < SEQ_CLASS_COUNT; x++) per_class[x] += (classes >> x) & 1;
                bool unexplained = (classes >> TG_GGML_SCHED_UNEXPLAINED) & 1;
                bool crashed_fresh = (classes >> SEQ_GGML_ENDED) & 1;
                CHECK(!unexplained && !crashed_fresh);
                if (((unexplained || crashed_fresh) && failures++ < 3) || only) {
                    fprintf(stderr, "case %llu, %d copies, round %d: %s\n", (unsigned long long)seed, copies, r, detail);
                }
            }
            tg_ggml_sched_case_free(&k2);
            tg_ggml_sched_case_free(&k1);
        }
    }
    printf("scheduler differential token after token: %d sequences (%llu cases with 1 and 4 copies) of %d rounds "
           "(fresh, same graph again, another graph, the first again); %d rounds classified, %d of them allocating a "
           "graph again; %d rounds computed by tgsched equal to the cpu alone bit for bit\n",
           sequences, (unsigned long long)(last - first + 1), ROUNDS, rounds, again_rounds, computed);
    for (int x = 0; x < SEQ_CLASS_COUNT; x++)
        if (per_class[x]) printf("  %-34s %d\n", seq_class_name(x), per_class[x]);
    return tg_test_finish();
}

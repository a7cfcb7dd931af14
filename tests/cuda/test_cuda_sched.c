/* Whole graphs through the scheduler with CUDA + CPU, compared with the CPU
 * alone within the model-level bound (NMSE 2e-3 per result; a NaN fails;
 * infinities must match):
 *   - random computable graphs from the props generator (fuzz/gen), their
 *     pre-allocated leafs moved to the GPU at random, and every third one also
 *     through a pipeline-parallel scheduler (three evaluations, rotating input
 *     copies);
 *   - the tiny LLaMA prefill graph of the corpus: layer 1, its KV cache and the
 *     output weights on the GPU, the rest on the CPU, with op offload (batch 32
 *     reaches the threshold) and without; everything on the GPU; everything in
 *     host memory with the matmuls offloaded; split and pipeline parallel.
 * The pipelined LLaMA run computes its evaluations back to back (results
 * fetched asynchronously, one synchronize at the end), as llama.cpp does.
 *
 * The protocol: every run's device and CPU are watched (tg_sim_watch), so the
 * calls that order work (computes, copies, event records and waits,
 * synchronizes) are traced.  With a GPU each run is repeated on the sim
 * device under CUDA's name, and wherever both ran the same splits their
 * traces must be equal line for line: the sim's race detector, which judges
 * every sim run, then judges the protocol the GPU ran too.
 *
 * Without a GPU it exits 77 (skipped), after running this whole harness with
 * the simulated device standing in for CUDA (it computes with the CPU's
 * kernels, so it must pass; its race detector must find nothing), and after
 * showing that the comparison fires on faults injected into a scheduled graph
 * through the eval callback (a perturbed node on the device, a NaN) and on
 * perturbed result values. */
#include "cuda_test.h"
#include "sched-sync.h"
#include "tg_test_rng.h"

#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-gen.h"
#include "tg-io.h"
#include "tg-sched.h"
#include "tg-sim.h"
#include "tg.h"

#include <stdint.h>

#define MODEL_NMSE 2e-3
#define LLAMA_PATH "corpus/graphs/llama-tiny-prefill32.tg"
#define PIPELINE_EVALS 3

/* ---- values and the model-level comparison ---------------------------------------------- */

/* Every element of t (its bytes in raw, any strides) in logical order as doubles. */
static double *values_of(const struct tg_tensor *t, const uint8_t *raw) {
    const int64_t n = tg_nelements(t);
    double *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const uint8_t *p = raw + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    uint16_t h;
                    double v;
                    switch (t->type) {
                    case TG_TYPE_F32: { float f; memcpy(&f, p, 4); v = f; break; }
                    case TG_TYPE_F16: memcpy(&h, p, 2); v = tg_fp16_to_fp32(h); break;
                    case TG_TYPE_BF16: memcpy(&h, p, 2); v = tg_bf16_to_fp32(h); break;
                    case TG_TYPE_I32: { int32_t x; memcpy(&x, p, 4); v = x; break; }
                    case TG_TYPE_I64: { int64_t x; memcpy(&x, p, 8); v = (double)x; break; }
                    default: v = NAN; break;
                    }
                    out[k++] = v;
                }
    return out;
}

/* Every element of t (any buffer) in logical order as doubles. */
static double *read_values(const struct tg_tensor *t) {
    const size_t bytes = tg_nbytes(t);
    uint8_t *raw = malloc(bytes ? bytes : 1);
    CHECK_OK(tg_tensor_get(t, raw, 0, bytes));
    double *out = values_of(t, raw);
    free(raw);
    return out;
}

/* Whole graphs may make NaNs of their own (a generated graph can take the log
 * of a difference): a NaN fails where the CPU has a number, or the CPU a NaN
 * where the device has a number; NaNs in the same places are not compared. */
struct comparison {
    double nmse;
    int nan, inf_mismatch; /* nan: NaN on one side only */
};

static struct comparison compare_values(const double *want, const double *got, int64_t n) {
    struct comparison c = {0.0, 0, 0};
    double err = 0.0, ref = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            c.nan += isnan(want[i]) != isnan(got[i]);
            continue;
        }
        if (isinf(want[i]) || isinf(got[i])) {
            c.inf_mismatch += want[i] != got[i];
            continue;
        }
        err += (want[i] - got[i]) * (want[i] - got[i]);
        ref += want[i] * want[i];
    }
    c.nmse = ref > 0.0 ? err / ref : err;
    return c;
}

static bool within_model_bound(struct comparison c) {
    return c.nan == 0 && c.inf_mismatch == 0 && c.nmse <= MODEL_NMSE;
}

/* The backends of a run, watched: the device (CUDA, or the sim standing in
 * for it, judged by a race detector) and a CPU, both traced into one trace. */
struct rig {
    tg_backend *device, *cpu;
    tg_sim_trace *trace;
    tg_sim_race *race; /* the sim's */
};

/* sim_name: the sim's name (NULL: "sim-stand-in"); a sim repeating a CUDA
 * run takes CUDA's, so that both name their copies alike. */
static bool rig_new(struct rig *r, bool cuda, int64_t offload_min_batch, const char *sim_name) {
    memset(r, 0, sizeof *r);
    r->trace = tg_sim_trace_new();
    tg_backend *device;
    if (cuda) {
        device = tg_backend_cuda_new(0);
        if (device) tg_backend_cuda_set_offload_min_batch(device, offload_min_batch);
    } else {
        struct tg_sim_params p;
        tg_sim_params_default(&p);
        p.name = sim_name ? sim_name : "sim-stand-in";
        p.offload_min_batch = offload_min_batch == INT64_MAX ? 0 : offload_min_batch; /* 0: never */
        p.race = r->race = tg_sim_race_new();
        p.jitter_seed = 5;
        device = tg_backend_sim_new(&p);
    }
    CHECK_MSG(device != NULL, "%s", tg_last_error());
    if (!device) return false;
    r->device = tg_sim_watch_new(device, NULL, r->trace);
    r->cpu = tg_sim_watch_new(tg_backend_cpu_new(), r->race, r->trace);
    return true;
}

/* what: the run, which must have been race-free (NULL: not judged). */
static void rig_free(struct rig *r, const char *what) {
    tg_backend_free(r->device);
    tg_backend_free(r->cpu);
    if (r->race) {
        CHECK_MSG(!what || tg_sim_race_count(r->race) == 0, "%s: the sim race detector: %s", what,
                  tg_sim_race_report(r->race));
        tg_sim_race_free(r->race);
    }
    tg_sim_trace_free(r->trace);
}

/* ---- the protocol: a CUDA run's trace against the sim's ---------------------------------- */

/* The protocol comparison's self-test makes the scheduler leave this site out. */
static enum tg_sched_sync_site protocol_fault = TG_SCHED_SYNC_COUNT;

struct protocol_stats {
    int equal;     /* runs with the same splits whose traces matched */
    int schedules; /* runs whose splits differ (an op or offload choice CUDA makes otherwise) */
};

/* Only the compute lines of a trace: the splits it ran. */
static char *compute_lines(const char *trace) {
    char *out = malloc(strlen(trace) + 1), *o = out;
    for (const char *line = trace; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "compute ", 8) == 0) {
            memcpy(o, line, len);
            o += len;
        }
        line += len;
    }
    *o = '\0';
    return out;
}

enum protocol_verdict { SAME_PROTOCOL, OTHER_SPLITS, OTHER_PROTOCOL };

/* Whether two runs issued the same protocol; where they did not, the first
 * line that differs goes into why. */
static enum protocol_verdict protocols(const char *a, const char *b, char *why, size_t len) {
    char *ca = compute_lines(a), *cb = compute_lines(b);
    enum protocol_verdict v = strcmp(ca, cb) != 0 ? OTHER_SPLITS : strcmp(a, b) != 0 ? OTHER_PROTOCOL : SAME_PROTOCOL;
    free(ca);
    free(cb);
    if (v == OTHER_PROTOCOL) {
        size_t at = 0, line = 1;
        for (; a[at] && a[at] == b[at]; at++) line += a[at] == '\n';
        while (at && a[at - 1] != '\n') at--; /* the start of the first line that differs */
        snprintf(why, len, "line %zu:\n  %.*s\n  %.*s", line, (int)strcspn(a + at, "\n"), a + at,
                 (int)strcspn(b + at, "\n"), b + at);
    }
    return v;
}

/* Where both runs computed the same splits, they must have issued the same protocol. */
static void compare_protocols(const char *what, struct rig *gpu, struct rig *sim, struct protocol_stats *ps) {
    char why[512];
    enum protocol_verdict v = protocols(tg_sim_trace_text(gpu->trace), tg_sim_trace_text(sim->trace), why, sizeof why);
    CHECK_MSG(v != OTHER_PROTOCOL, "%s: the GPU run's protocol (first) differs from the sim's at %s", what, why);
    ps->equal += v == SAME_PROTOCOL;
    ps->schedules += v == OTHER_SPLITS;
    tg_sim_trace_clear(gpu->trace);
    tg_sim_trace_clear(sim->trace);
}

/* ---- random graphs from the props generator ---------------------------------------------- */

static struct tg_gen_options gen_options(void) {
    struct tg_gen_options o = tg_gen_default_options();
    o.computable = true;
    o.max_ops = 24;
    o.max_tensor_bytes = (size_t)256 << 10;
    return o;
}

/* The generated case on the CPU alone, with the inputs it started from (saved
 * before compute, which may reuse their memory in place). */
struct reference {
    struct tg_gen_case *c;
    tg_gallocr *galloc;
    void **leaf_values, **input_values;
};

static bool cpu_computes_all(const struct tg_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_NONE && !tg_op_is_view(t->op) && !tg_cpu_supports_op(t)) return false;
    }
    return true;
}

static bool reference_run(struct reference *ref, uint64_t seed) {
    const struct tg_gen_options opts = gen_options();
    memset(ref, 0, sizeof *ref);
    if (tg_gen_case_from_seed(seed, &opts, &ref->c) != TG_OK || !cpu_computes_all(ref->c->graph)) return false;
    struct tg_graph *g = ref->c->graph;
    ref->galloc = tg_gallocr_new(tg_cpu_buffer_type());
    if (!ref->galloc || tg_gallocr_alloc_graph(ref->galloc, g) != TG_OK || tg_oracle_fill_inputs(g, seed) != TG_OK)
        return false;
    ref->leaf_values = calloc((size_t)g->n_leafs + 1, sizeof *ref->leaf_values);
    ref->input_values = calloc((size_t)g->n_nodes + 1, sizeof *ref->input_values);
    if (!ref->leaf_values || !ref->input_values) return false;
    for (int j = 0; j < g->n_leafs; j++) {
        if (!g->leafs[j]->view_src && !(ref->leaf_values[j] = tg_gen_tensor_bytes(g->leafs[j]))) return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *t = g->nodes[i];
        if ((t->flags & TG_FLAG_INPUT) && !t->view_src && !(ref->input_values[i] = tg_gen_tensor_bytes(t))) return false;
    }
    return tg_cpu_compute_graph(g, 1) == TG_OK;
}

static void reference_free(struct reference *ref) {
    for (int j = 0; ref->leaf_values && j < ref->c->graph->n_leafs; j++) free(ref->leaf_values[j]);
    for (int i = 0; ref->input_values && i < ref->c->graph->n_nodes; i++) free(ref->input_values[i]);
    free(ref->leaf_values);
    free(ref->input_values);
    tg_gallocr_free(ref->galloc);
    tg_gen_case_free(ref->c);
}

static bool put_values(const void *values, struct tg_tensor *t) {
    return values && tg_tensor_set(t, values, 0, tg_nbytes(t)) == TG_OK;
}

struct gen_stats {
    int graphs, pipelined, results, skipped;
    long device_nodes; /* nodes the scheduler put on the device, over all evaluations */
    double worst_nmse;
};

/* The case again, its pre-allocated leafs half moved to the device, scheduled
 * on device + CPU (pipeline parallel: PIPELINE_EVALS evaluations through one
 * scheduler), every result compared with the reference. */
static void check_generated(uint64_t seed, tg_backend *device, tg_backend *cpu, bool parallel, struct gen_stats *st) {
    struct reference ref;
    if (!reference_run(&ref, seed)) {
        st->skipped++;
        reference_free(&ref);
        return;
    }
    const struct tg_gen_options opts = gen_options();
    struct tg_gen_case *c = NULL;
    tg_buffer *moved = NULL;
    tg_sched *s = NULL;
    CHECK_OK(tg_gen_case_from_seed(seed, &opts, &c));
    if (!c) goto done;
    struct tg_graph *g = c->graph, *rg = ref.c->graph;
    /* move about half of the pre-allocated leafs into one device weights buffer */
    tg_buffer_type *dev_buft = tg_backend_get_default_buffer_type(device);
    const size_t align = tg_buft_get_alignment(dev_buft);
    uint64_t r = seed ^ 0x5eedull;
    bool *move = calloc((size_t)g->n_leafs + 1, sizeof *move);
    size_t need = 0;
    for (int j = 0; j < g->n_leafs; j++) {
        struct tg_tensor *t = g->leafs[j];
        rng_state = r++;
        if (t->view_src || !c->external_buffer || t->buffer != c->external_buffer || rng_next() % 2) continue;
        move[j] = true;
        need += tg_buft_get_alloc_size(dev_buft, t) + align;
    }
    if (need) {
        moved = tg_buft_alloc_buffer(dev_buft, need);
        CHECK_MSG(moved != NULL, "seed %llu: device buffer: %s", (unsigned long long)seed, tg_last_error());
        if (moved) tg_buffer_set_usage(moved, TG_BUFFER_USAGE_WEIGHTS);
    }
    size_t used = 0;
    for (int j = 0; moved && j < g->n_leafs; j++) {
        if (!move[j]) continue;
        used = (used + align - 1) / align * align;
        CHECK_OK(tg_tensor_bind(g->leafs[j], moved, (uint8_t *)tg_buffer_get_base(moved) + used));
        used += tg_buft_get_alloc_size(dev_buft, g->leafs[j]);
    }
    free(move);
    tg_backend *backends[2] = {device, cpu};
    s = tg_sched_new(backends, NULL, 2, (size_t)g->size + 16, parallel, true);
    CHECK_MSG(s != NULL, "tg_sched_new: %s", tg_last_error());
    if (!s) goto done;
    tg_sched_testing_drop(s, protocol_fault);
    for (int e = 0; e < (parallel ? PIPELINE_EVALS : 1); e++) {
        if (e > 0) tg_sched_reset(s); /* the next step's graph: pipeline copies rotate */
        enum tg_status ast = tg_sched_alloc_graph(s, g);
        if (ast == TG_ERR_UNSUPPORTED) {
            st->skipped++;
            break;
        }
        CHECK_MSG(ast == TG_OK, "seed %llu: alloc: %s", (unsigned long long)seed, tg_last_error());
        if (ast != TG_OK) break;
        bool ok = true;
        for (int j = 0; j < g->n_leafs; j++) {
            if (!g->leafs[j]->view_src && g->leafs[j]->data) ok &= put_values(ref.leaf_values[j], g->leafs[j]);
        }
        for (int i = 0; i < g->n_nodes; i++) {
            if ((g->nodes[i]->flags & TG_FLAG_INPUT) && !g->nodes[i]->view_src)
                ok &= put_values(ref.input_values[i], g->nodes[i]);
        }
        CHECK_MSG(ok, "seed %llu: setting inputs: %s", (unsigned long long)seed, tg_last_error());
        enum tg_status cst = tg_sched_graph_compute(s, g);
        CHECK_MSG(cst == TG_OK, "seed %llu: compute: %s", (unsigned long long)seed, tg_last_error());
        if (cst != TG_OK) break;
        for (int i = 0; i < g->n_nodes; i++) {
            if (!tg_gen_node_is_result(rg, i)) continue;
            double *want = read_values(rg->nodes[i]), *got = read_values(g->nodes[i]);
            const struct comparison cmp = compare_values(want, got, tg_nelements(rg->nodes[i]));
            CHECK_MSG(within_model_bound(cmp),
                      "generated graph seed %llu%s evaluation %d: node %d '%s' (%s): NMSE %.3g, %d NaN, %d "
                      "infinities differ (replay: tg-fuzz-decode --seed %llu)",
                      (unsigned long long)seed, parallel ? " (pipeline parallel)" : "", e, i, g->nodes[i]->name,
                      tg_op_name(g->nodes[i]->op), cmp.nmse, cmp.nan, cmp.inf_mismatch, (unsigned long long)seed);
            if (cmp.nmse > st->worst_nmse) st->worst_nmse = cmp.nmse;
            st->results++;
            free(want);
            free(got);
        }
        for (int i = 0; i < g->n_nodes; i++) st->device_nodes += tg_sched_get_tensor_backend_id(s, g->nodes[i]) == 0;
        if (!parallel) st->graphs++;
        else if (e == PIPELINE_EVALS - 1) st->pipelined++;
    }
done:
    tg_sched_free(s); /* first: it gives the graph its sources back */
    tg_buffer_free(moved);
    tg_gen_case_free(c);
    reference_free(&ref);
}

static void print_generated(const char *device, const struct gen_stats *st) {
    printf("generated graphs on %s + CPU vs CPU: %d graphs, %d more pipelined (%d evaluations each), %ld nodes on "
           "the device, %d results compared, %d skipped, worst NMSE %.3g\n",
           device, st->graphs, st->pipelined, PIPELINE_EVALS, st->device_nodes, st->results, st->skipped,
           st->worst_nmse);
}

static void check_generated_graphs(bool cuda, int n_seeds) {
    struct rig dev, sim;
    if (!rig_new(&dev, cuda, 32, NULL)) return;
    if (cuda && !rig_new(&sim, false, 32, tg_backend_name(dev.device))) return;
    struct gen_stats st = {0, 0, 0, 0, 0, 0.0}, st_sim = st;
    struct protocol_stats ps = {0, 0};
    for (int i = 0; i < n_seeds; i++) {
        const uint64_t seed = 1 + (uint64_t)i;
        for (int parallel = 0; parallel < (i % 3 == 0 ? 2 : 1); parallel++) {
            check_generated(seed, dev.device, dev.cpu, parallel, &st);
            if (!cuda) continue;
            check_generated(seed, sim.device, sim.cpu, parallel, &st_sim);
            char what[64];
            snprintf(what, sizeof what, "generated graph seed %llu%s", (unsigned long long)seed,
                     parallel ? " (pipeline parallel)" : "");
            compare_protocols(what, &dev, &sim, &ps);
        }
    }
    print_generated(tg_backend_name(dev.device), &st);
    CHECK(st.graphs >= n_seeds / 2 && st.pipelined > 0 && st.device_nodes > 0);
    if (cuda) {
        print_generated("the sim under CUDA's name", &st_sim);
        printf("protocol of generated graphs: %d GPU runs issued the sim's protocol line for line, %d ran other "
               "splits than the sim\n", ps.equal, ps.schedules);
        CHECK(ps.equal > 0);
        rig_free(&sim, "generated graphs (sim under CUDA's name)");
    }
    rig_free(&dev, "generated graphs");
}

/* ---- the tiny LLaMA graph from the corpus --------------------------------------------- */

/* Layer 1, its KV cache and the output weights go to the device when split. */
static bool on_device_half(const char *name) {
    return strstr(name, "blk.1.") || strstr(name, "_l1") || strncmp(name, "output", 6) == 0;
}

static struct tg_tensor *consumer_of(const struct tg_graph *g, const struct tg_tensor *t, enum tg_op op, int slot) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->op == op && g->nodes[i]->src[slot] == t) return g->nodes[i];
    }
    return NULL;
}

static void set_values(struct tg_tensor *t, const void *v) { CHECK_OK(tg_tensor_set(t, v, 0, tg_nbytes(t))); }

/* What the inputs of a llama graph index, read before scheduling (the
 * scheduler points consumers' sources at its copies until reset). */
struct llama_inputs {
    int64_t n_tokens;
    int64_t *range;   /* per file tensor: rows of the get_rows/set_rows reading it (0: none) */
    int64_t *v_slots; /* per file tensor read by a V-cache set_rows: the cache length n_ctx */
};

static struct llama_inputs plan_llama_inputs(const struct tg_file *f) {
    struct llama_inputs in = {1, calloc((size_t)f->n_tensors + 1, sizeof(int64_t)),
                              calloc((size_t)f->n_tensors + 1, sizeof(int64_t))};
    for (int i = 0; i < f->n_tensors; i++) {
        if (strcmp(f->tensors[i].tensor->name, "inp_k_idxs") == 0) in.n_tokens = f->tensors[i].tensor->ne[0];
    }
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_tensor *t = f->tensors[i].tensor;
        const struct tg_tensor *rows = consumer_of(f->graph, t, TG_OP_GET_ROWS, 1);
        const struct tg_tensor *set = consumer_of(f->graph, t, TG_OP_SET_ROWS, 1);
        in.range[i] = rows ? rows->src[0]->ne[1] : set ? set->src[2]->ne[1] : 0;
        if (set && t->ne[0] > in.n_tokens) in.v_slots[i] = set->src[2]->ne[1] / (t->ne[0] / in.n_tokens);
    }
    return in;
}

/* Inputs of a llama.cpp prefill with n_past 0: tokens, positions 0.., token t
 * in KV slot t (K rows; V entries slot + n_ctx * channel of the transposed V
 * cache), a causal mask, the last token's row as the output.  Other inputs
 * get random values in range. */
static void fill_llama_inputs(struct tg_file *f, const struct llama_inputs *in) {
    rng_state = 777; /* the same inputs in every run and evaluation */
    const int64_t n_tokens = in->n_tokens;
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (!f->tensors[i].is_leaf || !(t->flags & TG_FLAG_INPUT)) continue;
        const int64_t n = tg_nelements(t);
        void *v = calloc((size_t)(n ? n : 1), 8);
        int32_t *iv = v;
        float *fv = v;
        if (strcmp(t->name, "inp_pos") == 0 || strcmp(t->name, "inp_k_idxs") == 0) {
            for (int64_t k = 0; k < n; k++) iv[k] = (int32_t)k;
        } else if (strcmp(t->name, "inp_v_idxs") == 0 && in->v_slots[i] > 0) {
            const int64_t n_embd_v = n / n_tokens;
            for (int64_t k = 0; k < n; k++) iv[k] = (int32_t)(k / n_embd_v + in->v_slots[i] * (k % n_embd_v));
        } else if (strcmp(t->name, "inp_out_ids") == 0) {
            for (int64_t k = 0; k < n; k++) iv[k] = (int32_t)(n_tokens - n + k);
        } else if (strcmp(t->name, "kq_mask") == 0 && t->type == TG_TYPE_F32) {
            for (int64_t q = 0; q < n / t->ne[0]; q++)
                for (int64_t j = 0; j < t->ne[0]; j++) fv[q * t->ne[0] + j] = j <= q % t->ne[1] ? 0.0f : -INFINITY;
        } else if (t->type == TG_TYPE_I32) {
            const int64_t range = in->range[i] > 0 ? in->range[i] : 128;
            for (int64_t k = 0; k < n; k++) iv[k] = (int32_t)(rng_next() % (uint64_t)range);
        } else if (t->type == TG_TYPE_F32) {
            for (int64_t k = 0; k < n; k++) fv[k] = rng_uniform(-1.0f, 1.0f);
        }
        set_values(t, v);
        free(v);
    }
}

/* Random weights (norm weights near 1) and KV cache contents, in file order. */
static void fill_llama_weights(struct tg_file *f) {
    rng_state = 12345;
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (f->tensors[i].placement == TG_PLACE_NONE) continue;
        const int64_t n = tg_nelements(t);
        const size_t es = tg_type_size(t->type);
        uint8_t *v = malloc((size_t)(n ? n : 1) * es);
        const bool norm = t->ne[1] == 1;
        for (int64_t k = 0; k < n; k++) {
            const float x = norm ? rng_uniform(0.8f, 1.2f) : rng_uniform(-0.1f, 0.1f);
            if (t->type == TG_TYPE_F32) memcpy(v + k * 4, &x, 4);
            else if (t->type == TG_TYPE_F16) { uint16_t h = tg_fp32_to_fp16(x); memcpy(v + k * 2, &h, 2); }
        }
        set_values(t, v);
        free(v);
    }
}

struct llama_run {
    const char *what;
    bool split;          /* layer 1 and output on the device, the rest on the CPU */
    bool all_on_device;  /* every weight and the KV cache on the device */
    bool parallel;       /* pipeline parallelism, PIPELINE_EVALS evaluations */
    int64_t min_batch;   /* op offload threshold of the device */
};

struct injection {
    const char *node; /* fault injected after this node is computed */
    bool nan;         /* a NaN; otherwise +1 on every element */
    int hits;
};

static bool inject(struct tg_tensor *t, bool ask, void *user) {
    struct injection *inj = user;
    if (strcmp(t->name, inj->node) != 0) return !ask;
    if (ask) return true;
    const int64_t n = tg_nelements(t);
    CHECK(t->type == TG_TYPE_F32 && tg_is_contiguous(t));
    float *v = malloc((size_t)n * sizeof *v);
    CHECK_OK(tg_tensor_get(t, v, 0, (size_t)n * sizeof *v));
    for (int64_t k = 0; k < n; k++) {
        if (inj->nan) v[k] = k == n - 1 ? NAN : v[k];
        else v[k] += 1.0f;
    }
    CHECK_OK(tg_tensor_set(t, v, 0, (size_t)n * sizeof *v));
    free(v);
    inj->hits++;
    return true;
}

/* The graph's last node after one run (device NULL: the CPU alone); every
 * evaluation of a pipelined run, computed back to back with its result
 * fetched asynchronously, must match the first.  NULL on failure. */
static double *run_llama(tg_backend *cpu, tg_backend *device, const struct llama_run *run, struct injection *inj,
                         int64_t *n_out, int *n_splits) {
    struct tg_file *f = tg_file_read(LLAMA_PATH);
    CHECK_MSG(f != NULL, "%s: %s", LLAMA_PATH, tg_last_error());
    if (!f) return NULL;
    /* pre-allocated tensors: [device?][data?] buffers, weights usage for weights */
    struct tg_tensor **lists[4];
    int counts[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) lists[k] = malloc((size_t)f->n_tensors * sizeof *lists[k]);
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *ft = &f->tensors[i];
        if (ft->placement == TG_PLACE_NONE) continue;
        const int dev = device && (run->all_on_device || (run->split && on_device_half(ft->tensor->name)));
        const int k = dev * 2 + (ft->placement == TG_PLACE_DATA);
        lists[k][counts[k]++] = ft->tensor;
    }
    tg_buffer *bufs[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4; k++) {
        if (!counts[k]) continue;
        tg_buffer_type *buft = tg_backend_get_default_buffer_type(k >= 2 ? device : cpu);
        const size_t align = tg_buft_get_alignment(buft);
        size_t total = 0;
        for (int i = 0; i < counts[k]; i++) total = (total + align - 1) / align * align + tg_buft_get_alloc_size(buft, lists[k][i]);
        bufs[k] = tg_buft_alloc_buffer(buft, total);
        CHECK_MSG(bufs[k] != NULL, "%s: buffer of %zu bytes: %s", run->what, total, tg_last_error());
        if (!bufs[k]) continue;
        tg_buffer_set_usage(bufs[k], k % 2 ? TG_BUFFER_USAGE_ANY : TG_BUFFER_USAGE_WEIGHTS);
        size_t off = 0;
        for (int i = 0; i < counts[k]; i++) {
            off = (off + align - 1) / align * align;
            CHECK_OK(tg_tensor_bind(lists[k][i], bufs[k], (uint8_t *)tg_buffer_get_base(bufs[k]) + off));
            off += tg_buft_get_alloc_size(buft, lists[k][i]);
        }
    }
    fill_llama_weights(f);
    struct llama_inputs inputs = plan_llama_inputs(f);
    tg_backend *backends[2] = {device ? device : cpu, cpu};
    const int n_backends = device ? 2 : 1;
    tg_sched *s = tg_sched_new(backends, NULL, n_backends, 4096, run->parallel, true);
    CHECK_MSG(s != NULL, "tg_sched_new: %s", tg_last_error());
    tg_sched_testing_drop(s, protocol_fault);
    if (s && inj) tg_sched_set_eval_callback(s, inject, inj);
    struct tg_tensor *result = tg_graph_node(f->graph, -1);
    double *out = NULL;
    *n_out = tg_nelements(result);
    uint8_t *raw[PIPELINE_EVALS] = {NULL};
    int n_evals = 0;
    for (int e = 0; s && e < (run->parallel ? PIPELINE_EVALS : 1); e++) {
        if (e > 0) tg_sched_reset(s); /* a new graph each step, as llama.cpp does: the copies rotate */
        CHECK_OK(tg_sched_alloc_graph(s, f->graph));
        fill_llama_inputs(f, &inputs);
        const enum tg_status st = tg_sched_graph_compute_async(s, f->graph);
        CHECK_MSG(st == TG_OK, "%s: compute: %s", run->what, tg_last_error());
        if (st != TG_OK) break;
        /* fetched by the queue of its memory; the host's is done when compute_async returns */
        raw[n_evals] = malloc(tg_nbytes(result));
        const bool in_host = !result->buffer || tg_buffer_is_host(result->buffer);
        tg_backend_tensor_get_async(in_host ? backends[n_backends - 1] : backends[0], result, raw[n_evals++], 0,
                                    tg_nbytes(result));
    }
    if (s) tg_sched_synchronize(s);
    for (int e = 0; e < n_evals; e++) {
        double *v = values_of(result, raw[e]);
        free(raw[e]);
        if (out) {
            const struct comparison c = compare_values(out, v, *n_out);
            CHECK_MSG(within_model_bound(c), "%s: evaluation %d differs from the first: NMSE %.3g, %d NaN", run->what, e,
                      c.nmse, c.nan);
            free(v);
        } else {
            out = v;
        }
    }
    *n_splits = s ? tg_sched_get_n_splits(s) : 0;
    tg_sched_free(s);
    free(inputs.range);
    free(inputs.v_slots);
    for (int k = 0; k < 4; k++) {
        tg_buffer_free(bufs[k]);
        free(lists[k]);
    }
    tg_file_free(f);
    return out;
}

static const struct llama_run llama_runs[] = {
    {"split, offload", true, false, false, 32},
    {"split, no offload", true, false, false, INT64_MAX},
    {"all on the device", false, true, false, 32},
    {"weights in host memory, matmuls offloaded", false, false, false, 32},
    {"split, pipeline parallel", true, false, true, 32},
};

static void check_llama(bool cuda, const double *want, int64_t n) {
    int checked = 0;
    struct protocol_stats ps = {0, 0};
    for (size_t r = 0; r < sizeof llama_runs / sizeof llama_runs[0]; r++) {
        struct rig dev;
        if (!rig_new(&dev, cuda, llama_runs[r].min_batch, NULL)) continue;
        int64_t n_got = 0;
        int splits = 0;
        double *got = run_llama(dev.cpu, dev.device, &llama_runs[r], NULL, &n_got, &splits);
        if (want && got && n_got == n) {
            const struct comparison c = compare_values(want, got, n);
            CHECK_MSG(within_model_bound(c), "llama-tiny prefill32 (%s): NMSE %.3g, %d NaN, %d infinities differ",
                      llama_runs[r].what, c.nmse, c.nan, c.inf_mismatch);
            printf("llama-tiny prefill32 on %s + CPU (%s): %d splits, NMSE %.3g vs the CPU alone\n",
                   tg_backend_name(dev.device), llama_runs[r].what, splits, c.nmse);
            checked++;
        }
        /* weights on both sides always make several splits */
        if (llama_runs[r].split) CHECK_MSG(splits > 1, "%s: %d splits", llama_runs[r].what, splits);
        free(got);
        struct rig sim;
        if (cuda && rig_new(&sim, false, llama_runs[r].min_batch, tg_backend_name(dev.device))) {
            free(run_llama(sim.cpu, sim.device, &llama_runs[r], NULL, &n_got, &splits));
            char what[96];
            snprintf(what, sizeof what, "llama-tiny prefill32 (%s)", llama_runs[r].what);
            compare_protocols(what, &dev, &sim, &ps);
            rig_free(&sim, what);
        }
        rig_free(&dev, llama_runs[r].what);
    }
    CHECK(checked == (int)(sizeof llama_runs / sizeof llama_runs[0]));
    if (cuda) {
        printf("protocol of the llama runs: %d GPU runs issued the sim's protocol line for line, %d ran other splits "
               "than the sim\n", ps.equal, ps.schedules);
        CHECK(ps.equal > 0);
    }
}

/* ---- the comparison's self-test ----------------------------------------------------------- */

static void self_test_comparison(void) {
    double want[64], got[64];
    for (int i = 0; i < 64; i++) want[i] = got[i] = sin(i + 1.0);
    CHECK(within_model_bound(compare_values(want, got, 64)));
    for (int i = 0; i < 64; i++) got[i] = want[i] * 1.04; /* NMSE 1.6e-3 */
    CHECK(within_model_bound(compare_values(want, got, 64)));
    for (int i = 0; i < 64; i++) got[i] = want[i] * 1.05; /* NMSE 2.5e-3 */
    CHECK(!within_model_bound(compare_values(want, got, 64)));
    for (int i = 0; i < 64; i++) got[i] = want[i];
    got[7] = NAN;
    CHECK(!within_model_bound(compare_values(want, got, 64)));
    got[7] = -INFINITY;
    CHECK(!within_model_bound(compare_values(want, got, 64)));
    want[7] = -INFINITY; /* the same infinity on both sides is fine */
    CHECK(within_model_bound(compare_values(want, got, 64)));
    want[7] = got[7] = NAN; /* and a NaN the CPU makes too */
    CHECK(within_model_bound(compare_values(want, got, 64)));
    want[7] = 1.0;
    CHECK(!within_model_bound(compare_values(want, got, 64)));
    want[7] = NAN;
    got[7] = 1.0;
    CHECK(!within_model_bound(compare_values(want, got, 64)));
}

/* Faults injected into a scheduled llama graph on the stand-in device must be
 * caught by the same comparison the GPU runs use. */
static void self_test_injected(const double *want, int64_t n) {
    static const struct {
        const char *node;
        bool nan;
        const char *what;
    } faults[] = {
        {"kqv_out-1", false, "+1 on a device node (attention output of layer 1)"},
        {"result_norm", true, "a NaN in a device node (the final norm)"},
    };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        struct rig sim;
        if (!rig_new(&sim, false, 32, NULL)) continue;
        struct injection inj = {faults[i].node, faults[i].nan, 0};
        int64_t n_got = 0;
        int splits = 0;
        double *got = run_llama(sim.cpu, sim.device, &llama_runs[0], &inj, &n_got, &splits);
        CHECK_MSG(inj.hits == 1, "fault '%s': injected %d times", faults[i].what, inj.hits);
        const bool caught = want && got && n_got == n && !within_model_bound(compare_values(want, got, n));
        CHECK_MSG(caught, "fault '%s' was not caught by the comparison", faults[i].what);
        printf("comparison self-test: %-50s %s\n", faults[i].what, caught ? "caught" : "MISSED");
        free(got);
        rig_free(&sim, faults[i].what);
    }
}

/* One generated graph on a fresh sim rig (fault: the site its scheduler
 * leaves out); its protocol, malloc'ed. */
static char *traced_run(uint64_t seed, enum tg_sched_sync_site fault) {
    struct rig sim;
    if (!rig_new(&sim, false, 32, NULL)) return NULL;
    struct gen_stats st = {0, 0, 0, 0, 0, 0.0};
    protocol_fault = fault;
    check_generated(seed, sim.device, sim.cpu, false, &st);
    protocol_fault = TG_SCHED_SYNC_COUNT;
    char *text = strdup(tg_sim_trace_text(sim.trace));
    rig_free(&sim, fault == TG_SCHED_SYNC_COUNT ? "protocol self-test" : NULL);
    return text;
}

/* Two sim runs of a generated graph issue the same protocol; one whose
 * scheduler leaves out the host's wait for the previous split's backend does
 * not (on the first seed where that wait is issued at all), and the
 * comparison the GPU runs use says where. */
static void self_test_protocol(void) {
    char why[512] = "";
    bool caught = false;
    uint64_t seed = 1;
    for (; seed <= 12 && !caught; seed++) {
        char *a = traced_run(seed, TG_SCHED_SYNC_COUNT), *b = traced_run(seed, TG_SCHED_SYNC_COUNT);
        char *faulty = traced_run(seed, TG_SCHED_SYNC_PREV_BACKEND);
        if (a && b && faulty) {
            CHECK_MSG(protocols(a, b, why, sizeof why) == SAME_PROTOCOL,
                      "seed %llu: two sim runs issued different protocols at %s", (unsigned long long)seed, why);
            caught = protocols(a, faulty, why, sizeof why) == OTHER_PROTOCOL;
        }
        free(a);
        free(b);
        free(faulty);
    }
    CHECK_MSG(caught, "no protocol without the previous split's wait compared different");
    printf("protocol self-test: a run leaving out the previous split's wait (prev-backend) %s (generated graph "
           "seed %llu) at %s\n", caught ? "is caught" : "is MISSED", (unsigned long long)seed - 1, why);
}

int main(void) {
    tg_backend *cpu = tg_backend_cpu_new();
    CHECK(cpu != NULL);
    if (!cpu) return tg_test_finish();
    const bool have_gpu = TG_TEST_CUDA_PRESENT();
    self_test_comparison();
    int64_t n = 0;
    int splits = 0;
    const struct llama_run cpu_only = {"CPU only", false, false, false, 0};
    double *want = run_llama(cpu, NULL, &cpu_only, NULL, &n, &splits);
    CHECK(want != NULL && n > 0);
    self_test_injected(want, n);
    self_test_protocol();
    /* with a GPU the real thing (and its protocol against the sim's); without, the dry run on the stand-in device */
    check_generated_graphs(have_gpu, have_gpu ? 60 : 12);
    check_llama(have_gpu, want, n);
    free(want);
    tg_backend_free(cpu);
    return tg_test_finish_or_skip(have_gpu, "comparison self-tests and the dry run on the sim");
}

/* Whole graphs through the scheduler with CUDA + CPU, compared with the CPU
 * alone (NMSE within the model-level bound 2e-3): random MLP/attention-like
 * graphs with weights spread over both backends, and the tiny LLaMA prefill
 * graph from the corpus with layer 0 on the CPU and layer 1 on the GPU, with
 * and without op offload, and with pipeline parallelism (several evaluations
 * rotating input copies).  Skips (exit 77) without a CUDA device. */
#include "tg_test.h"

#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-io.h"
#include "tg-sched.h"
#include "tg.h"

#include <stdint.h>

#define MODEL_NMSE 2e-3
#define MAX_BUFFERS 8

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi) { return lo + (hi - lo) * (float)((rng_next() >> 11) * (1.0 / 9007199254740992.0)); }

/* Random contents for a float tensor, or distinct indices below range for i32. */
static void fill_tensor(struct tg_tensor *t, float lo, float hi, int64_t range) {
    const int64_t n = tg_nelements(t);
    const size_t bytes = tg_nbytes(t);
    uint8_t *buf = malloc(bytes ? bytes : 1);
    if (t->type == TG_TYPE_I32) {
        int32_t *v = (int32_t *)buf;
        if (range < n) range = n;
        int32_t *pool = malloc((size_t)range * sizeof *pool);
        for (int64_t i = 0; i < range; i++) pool[i] = (int32_t)i;
        for (int64_t i = 0; i < n; i++) {
            const int64_t j = i + (int64_t)(rng_next() % (uint64_t)(range - i));
            const int32_t tmp = pool[i];
            pool[i] = pool[j];
            pool[j] = tmp;
            v[i] = pool[i];
        }
        free(pool);
    } else {
        for (int64_t i = 0; i < n; i++) {
            const float x = rng_uniform(lo, hi);
            if (t->type == TG_TYPE_F32) ((float *)buf)[i] = x;
            else if (t->type == TG_TYPE_F16) ((uint16_t *)buf)[i] = tg_fp32_to_fp16(x);
            else if (t->type == TG_TYPE_BF16) ((uint16_t *)buf)[i] = tg_fp32_to_bf16(x);
        }
    }
    CHECK_OK(tg_tensor_set(t, buf, 0, bytes));
    free(buf);
}

static float *read_f32(const struct tg_tensor *t) {
    const int64_t n = tg_nelements(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    CHECK(t->type == TG_TYPE_F32 && tg_is_contiguous(t));
    CHECK_OK(tg_tensor_get(t, v, 0, (size_t)n * sizeof *v));
    return v;
}

static double nmse(const float *want, const float *got, int64_t n, int *nan_count) {
    double err = 0.0, ref = 0.0;
    *nan_count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            (*nan_count)++;
            continue;
        }
        err += ((double)want[i] - got[i]) * ((double)want[i] - got[i]);
        ref += (double)want[i] * want[i];
    }
    return ref > 0.0 ? err / ref : err;
}

/* Binds the given tensors into one new buffer of buft (aligned, in order). */
static tg_buffer *bind_into(tg_buffer_type *buft, struct tg_tensor **ts, int n, enum tg_buffer_usage usage) {
    const size_t align = tg_buft_get_alignment(buft);
    size_t total = 0;
    for (int i = 0; i < n; i++) total = (total + align - 1) / align * align + tg_buft_get_alloc_size(buft, ts[i]);
    tg_buffer *buf = tg_buft_alloc_buffer(buft, total);
    CHECK_MSG(buf != NULL, "buffer of %zu bytes: %s", total, tg_last_error());
    if (!buf) return NULL;
    tg_buffer_set_usage(buf, usage);
    uint8_t *base = tg_buffer_get_base(buf);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        off = (off + align - 1) / align * align;
        CHECK_OK(tg_tensor_bind(ts[i], buf, base + off));
        off += tg_buft_get_alloc_size(buft, ts[i]);
    }
    return buf;
}

/* ---- random layered graphs ----------------------------------------------------------- */

struct mlp_graph {
    struct tg_context *ctx;
    struct tg_graph *graph;
    struct tg_tensor *input;
    struct tg_tensor *output;
    struct tg_tensor *weights[32];
    int n_weights;
};

/* A stack of layers, each matmul -> bias -> activation -> (norm | softmax |
 * rope-free residual), shaped by the seed.  Same seed, same graph. */
static struct mlp_graph build_mlp(uint64_t seed, int64_t batch) {
    struct mlp_graph m;
    memset(&m, 0, sizeof m);
    rng_state = seed;
    m.ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    m.graph = tg_graph_new(512);
    int64_t width = 16 + (int64_t)(rng_next() % 64);
    m.input = tg_new_tensor_2d(m.ctx, TG_TYPE_F32, width, batch);
    tg_set_name(m.input, "x");
    tg_set_input(m.input);
    struct tg_tensor *x = m.input;
    const int n_layers = 2 + (int)(rng_next() % 4);
    for (int l = 0; l < n_layers; l++) {
        const int64_t next = 16 + (int64_t)(rng_next() % 96);
        struct tg_tensor *w = tg_new_tensor_2d(m.ctx, rng_next() % 2 ? TG_TYPE_F16 : TG_TYPE_F32, width, next);
        struct tg_tensor *b = tg_new_tensor_1d(m.ctx, TG_TYPE_F32, next);
        tg_format_name(w, "w%d", l);
        tg_format_name(b, "b%d", l);
        m.weights[m.n_weights++] = w;
        m.weights[m.n_weights++] = b;
        struct tg_tensor *h = tg_add(m.ctx, tg_mul_mat(m.ctx, w, x), b);
        switch (rng_next() % 4) {
        case 0: h = tg_unary(m.ctx, h, TG_UNARY_GELU); break;
        case 1: h = tg_unary(m.ctx, h, TG_UNARY_SILU); break;
        case 2: h = tg_soft_max(m.ctx, h, NULL, 0.5f, 0.0f); break;
        default: h = tg_glu_split(m.ctx, h, tg_unary(m.ctx, h, TG_UNARY_TANH), TG_GLU_SWIGLU); break;
        }
        h = tg_rms_norm(m.ctx, h, 1e-5f);
        if (next == width) h = tg_add(m.ctx, h, x);
        /* a transposed round trip exercises strided copies between backends */
        if (rng_next() % 3 == 0) h = tg_cont(m.ctx, tg_transpose(m.ctx, tg_cont(m.ctx, tg_transpose(m.ctx, h))));
        x = h;
        width = next;
    }
    m.output = tg_scale(m.ctx, x, 2.0f);
    tg_set_output(m.output);
    CHECK_OK(tg_graph_build_forward_expand(m.graph, m.output));
    return m;
}

/* Computes the graph with the given backends; weights with odd index go to
 * backends[0] when split.  Returns the output values. */
static float *run_mlp(uint64_t seed, int64_t batch, tg_backend **backends, int n_backends, bool split, bool parallel,
                      int n_evals) {
    struct mlp_graph m = build_mlp(seed, batch);
    struct tg_tensor *on_first[32], *on_last[32];
    int n_first = 0, n_last = 0;
    for (int i = 0; i < m.n_weights; i++) {
        if (split && i % 4 < 2) on_first[n_first++] = m.weights[i];
        else on_last[n_last++] = m.weights[i];
    }
    tg_buffer *bufs[2] = {NULL, NULL};
    if (n_first) bufs[0] = bind_into(tg_backend_get_default_buffer_type(backends[0]), on_first, n_first, TG_BUFFER_USAGE_WEIGHTS);
    if (n_last) bufs[1] = bind_into(tg_backend_get_default_buffer_type(backends[n_backends - 1]), on_last, n_last, TG_BUFFER_USAGE_WEIGHTS);
    rng_state = seed * 7919 + 1;
    for (int i = 0; i < m.n_weights; i++) fill_tensor(m.weights[i], -0.3f, 0.3f, 0);
    float *out = NULL;
    tg_sched *sched = tg_sched_new(backends, NULL, n_backends, 1024, parallel, true);
    CHECK_MSG(sched != NULL, "tg_sched_new: %s", tg_last_error());
    if (sched) {
        for (int e = 0; e < n_evals; e++) {
            CHECK_OK(tg_sched_alloc_graph(sched, m.graph));
            rng_state = seed * 31 + (uint64_t)e;
            fill_tensor(m.input, -1.0f, 1.0f, 0);
            CHECK_OK(tg_sched_graph_compute(sched, m.graph));
            float *v = read_f32(m.output);
            if (out) {
                /* later evaluations get other inputs: only check they ran and are finite */
                int nans = 0;
                for (int64_t i = 0; i < tg_nelements(m.output); i++) nans += isnan(v[i]) != 0;
                CHECK_MSG(nans == 0, "evaluation %d: NaN in output", e);
                free(v);
            } else {
                out = v;
            }
        }
        if (split && n_backends > 1) CHECK(tg_sched_get_n_splits(sched) >= 1);
        tg_sched_free(sched);
    }
    tg_buffer_free(bufs[0]);
    tg_buffer_free(bufs[1]);
    tg_graph_free(m.graph);
    tg_context_free(m.ctx);
    return out;
}

static void check_mlp_graphs(tg_backend *cpu, tg_backend *cuda) {
    tg_backend *both[2] = {cuda, cpu};
    tg_backend *cpu_only[1] = {cpu};
    int checked = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        const int64_t batch = seed % 3 == 0 ? 1 : (seed % 3 == 1 ? 7 : 40);
        const bool parallel = seed % 4 == 0;
        float *want = run_mlp(seed, batch, cpu_only, 1, false, false, 1);
        float *got = run_mlp(seed, batch, both, 2, true, parallel, parallel ? 3 : 1);
        if (want && got) {
            struct mlp_graph m = build_mlp(seed, batch);
            const int64_t n = tg_nelements(m.output);
            tg_graph_free(m.graph);
            tg_context_free(m.ctx);
            int nans = 0;
            const double e = nmse(want, got, n, &nans);
            CHECK_MSG(nans == 0 && e <= MODEL_NMSE, "random graph seed %llu batch %lld: NMSE %.3g, %d NaN",
                      (unsigned long long)seed, (long long)batch, e, nans);
            printf("random graph seed %2llu batch %2lld parallel %d: NMSE %.3g\n", (unsigned long long)seed,
                   (long long)batch, parallel, e);
            checked++;
        }
        free(want);
        free(got);
    }
    CHECK(checked == 12);
}

/* ---- the tiny LLaMA graph from the corpus ----------------------------------------------- */

static bool on_gpu_half(const char *name) {
    return strstr(name, "blk.1.") || strstr(name, "_l1") || strncmp(name, "output", 6) == 0;
}

/* Valid index range for an i32 input, from how the graph uses it. */
static int64_t index_range(const struct tg_graph *g, const struct tg_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *n = g->nodes[i];
        if (n->op == TG_OP_GET_ROWS && n->src[1] == t) return n->src[0]->ne[1];
        if (n->op == TG_OP_SET_ROWS && n->src[1] == t) return n->src[2]->ne[1];
    }
    return 128; /* positions */
}

static float *run_llama(const char *path, tg_backend **backends, int n_backends, bool split, bool parallel,
                        int64_t offload_min_batch) {
    struct tg_file *f = tg_file_read(path);
    CHECK_MSG(f != NULL, "%s: %s", path, tg_last_error());
    if (!f) return NULL;
    /* pre-allocated tensors: weights and data (KV cache) per backend */
    struct tg_tensor *lists[4][256];
    int counts[4] = {0, 0, 0, 0};
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *ft = &f->tensors[i];
        if (ft->placement == TG_PLACE_NONE) continue;
        const int gpu = split && on_gpu_half(ft->tensor->name);
        const int k = gpu * 2 + (ft->placement == TG_PLACE_DATA);
        if (counts[k] < 256) lists[k][counts[k]++] = ft->tensor;
    }
    tg_buffer *bufs[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4; k++) {
        if (!counts[k]) continue;
        tg_backend *be = k >= 2 ? backends[0] : backends[n_backends - 1];
        bufs[k] = bind_into(tg_backend_get_default_buffer_type(be), lists[k], counts[k],
                            k % 2 ? TG_BUFFER_USAGE_ANY : TG_BUFFER_USAGE_WEIGHTS);
    }
    /* same contents in every run: fill in file order, whatever the placement */
    rng_state = 12345;
    for (int i = 0; i < f->n_tensors; i++) {
        if (f->tensors[i].placement != TG_PLACE_NONE) fill_tensor(f->tensors[i].tensor, -0.2f, 0.2f, 0);
    }
    if (n_backends > 1) tg_backend_cuda_set_offload_min_batch(backends[0], offload_min_batch);
    float *out = NULL;
    tg_sched *sched = tg_sched_new(backends, NULL, n_backends, 4096, parallel, true);
    CHECK_MSG(sched != NULL, "tg_sched_new: %s", tg_last_error());
    struct tg_tensor *result = tg_graph_node(f->graph, -1);
    for (int e = 0; sched && e < (parallel ? 3 : 1); e++) {
        CHECK_OK(tg_sched_alloc_graph(sched, f->graph));
        rng_state = 777; /* same inputs every evaluation: each must give the same result */
        for (int i = 0; i < f->n_tensors; i++) {
            struct tg_tensor *t = f->tensors[i].tensor;
            if (f->tensors[i].is_leaf && (t->flags & TG_FLAG_INPUT)) {
                fill_tensor(t, -1.0f, 0.0f, t->type == TG_TYPE_I32 ? index_range(f->graph, t) : 0);
            }
        }
        CHECK_OK(tg_sched_graph_compute(sched, f->graph));
        float *v = read_f32(result);
        if (out) {
            int nans = 0;
            const double e2 = nmse(out, v, tg_nelements(result), &nans);
            CHECK_MSG(e2 <= MODEL_NMSE && nans == 0, "evaluation %d differs from the first: NMSE %.3g", e, e2);
            free(v);
        } else {
            out = v;
        }
    }
    if (sched) tg_sched_free(sched);
    for (int k = 0; k < 4; k++) tg_buffer_free(bufs[k]);
    tg_file_free(f);
    return out;
}

static void check_llama(tg_backend *cpu, tg_backend *cuda) {
    const char *path = "corpus/graphs/llama-tiny-prefill32.tg";
    tg_backend *both[2] = {cuda, cpu};
    tg_backend *cpu_only[1] = {cpu};
    float *want = run_llama(path, cpu_only, 1, false, false, 0);
    struct tg_file *f = tg_file_read(path);
    const int64_t n = f ? tg_nelements(tg_graph_node(f->graph, -1)) : 0;
    tg_file_free(f);
    static const struct {
        bool split, parallel;
        int64_t min_batch;
        const char *what;
    } runs[] = {
        {true, false, 32, "split, offload"},
        {true, false, INT64_MAX, "split, no offload"},
        {false, false, 32, "all on CPU buffers, offload"},
        {true, true, 32, "split, pipeline parallel"},
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        float *got = run_llama(path, both, 2, runs[r].split, runs[r].parallel, runs[r].min_batch);
        if (want && got) {
            int nans = 0;
            const double e = nmse(want, got, n, &nans);
            CHECK_MSG(nans == 0 && e <= MODEL_NMSE, "llama-tiny (%s): NMSE %.3g, %d NaN", runs[r].what, e, nans);
            printf("llama-tiny prefill32 (%s): NMSE %.3g vs CPU\n", runs[r].what, e);
        }
        free(got);
    }
    free(want);
    tg_backend_cuda_set_offload_min_batch(cuda, 32);
}

/* Without a GPU the harness still runs on the CPU alone: the same graph
 * computed twice must agree exactly, and the comparison must reject a
 * perturbed result, so a broken harness cannot hide behind the skip. */
static void self_check_on_cpu(tg_backend *cpu) {
    tg_backend *cpu_only[1] = {cpu};
    float *a = run_mlp(5, 7, cpu_only, 1, false, false, 1);
    float *b = run_mlp(5, 7, cpu_only, 1, false, false, 1);
    struct mlp_graph m = build_mlp(5, 7);
    const int64_t n = tg_nelements(m.output);
    tg_graph_free(m.graph);
    tg_context_free(m.ctx);
    int nans = 0;
    CHECK(a && b && nmse(a, b, n, &nans) == 0.0 && nans == 0);
    if (a && b) {
        b[n / 2] += 0.5f + fabsf(b[n / 2]);
        CHECK(nmse(a, b, n, &nans) > 0.0);
    }
    free(a);
    free(b);
    const char *path = "corpus/graphs/llama-tiny-prefill32.tg";
    float *la = run_llama(path, cpu_only, 1, false, false, 0);
    float *lb = run_llama(path, cpu_only, 1, false, false, 0);
    struct tg_file *f = tg_file_read(path);
    const int64_t ln = f ? tg_nelements(tg_graph_node(f->graph, -1)) : 0;
    tg_file_free(f);
    CHECK(la && lb && ln > 0 && nmse(la, lb, ln, &nans) == 0.0 && nans == 0);
    if (la && lb && ln > 0) {
        for (int64_t i = 0; i < ln; i++) lb[i] = -lb[i];
        CHECK(nmse(la, lb, ln, &nans) > MODEL_NMSE);
    }
    free(la);
    free(lb);
}

int main(void) {
    tg_backend *cpu = tg_backend_cpu_new();
    CHECK(cpu != NULL);
    if (tg_cuda_device_count() == 0) {
        if (cpu) self_check_on_cpu(cpu);
        tg_backend_free(cpu);
        printf("no CUDA device: skipping (CPU-only harness self-check: %d passed, %d failed)\n", tg_test_passed_,
               tg_test_failed_);
        return tg_test_failed_ ? 1 : 77;
    }
    tg_backend *cuda = tg_backend_cuda_new(0);
    CHECK_MSG(cuda != NULL, "%s", tg_last_error());
    if (cpu && cuda) {
        check_mlp_graphs(cpu, cuda);
        check_llama(cpu, cuda);
    }
    tg_backend_free(cuda);
    tg_backend_free(cpu);
    return tg_test_finish();
}

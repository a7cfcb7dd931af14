/* A decode loop as llama.cpp runs it, token by token, through one scheduler:
 * the graph is built afresh each token in a new context, its weights and a KV
 * cache allocated once (a context owning its memory, tg_alloc_ctx_tensors on
 * the CPU's type or a sim's), and the views into the cache move with n_past:
 * the new token's k and v are copied into the window at n_past (the offset
 * moves, the shape stays), and attention reads the first n_kv rows, n_kv =
 * n_past + 1 padded to 1, 2, 4 or 8 (the shape changes every pad tokens, as
 * llama.cpp pads n_kv, so between changes only offsets move).  Each token:
 *   - the schedule passes every scheduler checker;
 *   - its result is bit-identical to the same token computed by a fresh
 *     CPU-only scheduler on a cache of its own, and so is the cache afterwards
 *     (a replay that kept the last token's window would write the wrong rows);
 *   - optionally a worst-case reserve first (n_kv = n_ctx), a reset between
 *     tokens or none, pipeline copies, op offload, schedule replay off;
 *   - the attention's output goes through ADD1 (a one-element bias) and, with
 *     a second scheduler, is read as a leaf by that scheduler's graph (two
 *     schedulers chained, the second computed while the first's graph is still
 *     allocated).
 * A model in memory its context owns used to fail two ways: the oracle called
 * its views unbound (they have data and, like their root, no buffer), and the
 * scheduler let the bias follow its consumer onto a sim with no copy (the sim
 * refused to read host memory); see test_sched_rules, test_oracle_checkers.
 * TG_PROPS_CASES scales the number of seeds, TG_PROPS_SEED moves the range. */
#include "tg-cpu.h"
#include "tg-oracle-sched.h"
#include "tg-sim.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIMS 2

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The model: projections, a KV cache (k rows [d, n_ctx], v transposed
 * [n_ctx, d] as llama.cpp keeps it without flash attention) and a bias. */
struct model {
    struct tg_context *ctx;
    tg_buffer *buffer; /* NULL when the context owns the memory */
    struct tg_tensor *wq, *wk, *wv, *k_cache, *v_cache, *bias;
    bool set_rows; /* the cache written by set_rows at an index (v not transposed), not cpy into a window */
};

/* Where a model's memory comes from: 0 a context owning it, 1
 * tg_alloc_ctx_tensors on the CPU, 2 on the first sim. */
static bool model_new(struct model *m, int64_t d, int64_t n_ctx, int where, tg_backend *sim, bool set_rows) {
    memset(m, 0, sizeof *m);
    m->set_rows = set_rows;
    struct tg_context_params cp = {(size_t)(3 * d * d + 2 * d * n_ctx + 1) * sizeof(float) + 4096, where != 0};
    if (!(m->ctx = tg_context_new(cp))) return false;
    m->wq = tg_new_tensor_2d(m->ctx, TG_TYPE_F32, d, d);
    m->wk = tg_new_tensor_2d(m->ctx, TG_TYPE_F32, d, d);
    m->wv = tg_new_tensor_2d(m->ctx, TG_TYPE_F32, d, d);
    m->k_cache = tg_new_tensor_2d(m->ctx, TG_TYPE_F32, d, n_ctx);
    m->v_cache = set_rows ? tg_new_tensor_2d(m->ctx, TG_TYPE_F32, d, n_ctx) : tg_new_tensor_2d(m->ctx, TG_TYPE_F32, n_ctx, d);
    m->bias = tg_new_tensor_1d(m->ctx, TG_TYPE_F32, 1);
    if (!m->wq || !m->wk || !m->wv || !m->k_cache || !m->v_cache || !m->bias) return false;
    if (where == 0) return m->wq->data != NULL;
    enum tg_status st;
    m->buffer = where == 1 ? tg_alloc_ctx_tensors(m->ctx, tg_cpu_buffer_type(), &st)
                           : tg_alloc_ctx_tensors_for_backend(m->ctx, sim, &st);
    return m->buffer != NULL;
}

static void model_free(struct model *m) {
    tg_buffer_free(m->buffer);
    tg_context_free(m->ctx);
}

static void fill(struct tg_tensor *t, uint64_t *r) {
    size_t n = (size_t)tg_nelements(t);
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) v[i] = (float)(rng_next(r) % 2001) / 1000.0f - 1.0f;
    if (v) CHECK_OK(tg_tensor_set(t, v, 0, n * sizeof *v));
    free(v);
}

/* Both models get the same values (the cache's unwritten rows included: the
 * padded window reads them). */
static void fill_both(struct model *a, struct model *b, uint64_t seed) {
    struct tg_tensor *ta[] = {a->wq, a->wk, a->wv, a->k_cache, a->v_cache, a->bias};
    struct tg_tensor *tb[] = {b->wq, b->wk, b->wv, b->k_cache, b->v_cache, b->bias};
    for (int i = 0; i < 6; i++) {
        uint64_t r = seed * 31 + (uint64_t)i, r2 = r;
        fill(ta[i], &r);
        fill(tb[i], &r2);
    }
}

struct token_graph {
    struct tg_context *ctx;
    struct tg_graph *graph;
    struct tg_tensor *x, *rows, *out; /* rows: the index set_rows writes at (set_rows models) */
};

/* One token's graph at n_past, the attention over n_kv rows. */
static bool token_graph_new(struct token_graph *tg, const struct model *m, int64_t n_past, int64_t n_kv) {
    const int64_t d = m->wq->ne[0];
    struct tg_context_params cp = {0, true};
    memset(tg, 0, sizeof *tg);
    if (!(tg->ctx = tg_context_new(cp)) || !(tg->graph = tg_graph_new(64))) return false;
    struct tg_context *c = tg->ctx;
    tg->x = tg_new_tensor_2d(c, TG_TYPE_F32, d, 1);
    tg_set_input(tg->x);
    struct tg_tensor *q = tg_mul_mat(c, m->wq, tg->x), *k = tg_mul_mat(c, m->wk, tg->x);
    struct tg_tensor *v = tg_mul_mat(c, m->wv, tg->x);
    struct tg_tensor *k_store, *v_store;
    if (m->set_rows) {
        /* rows written at an index the input gives: the graph stays the same */
        tg->rows = tg_new_tensor_1d(c, TG_TYPE_I64, 1);
        tg_set_input(tg->rows);
        k_store = tg_set_rows(c, m->k_cache, k, tg->rows);
        v_store = tg_set_rows(c, m->v_cache, v, tg->rows);
    } else {
        /* the window at n_past: the offset moves every token */
        struct tg_tensor *k_dst = tg_view_1d(c, m->k_cache, d, (size_t)n_past * m->k_cache->nb[1]);
        struct tg_tensor *v_dst = tg_view_2d(c, m->v_cache, 1, d, m->v_cache->nb[1], (size_t)n_past * sizeof(float));
        k_store = tg_cpy(c, k, k_dst);
        v_store = tg_cpy(c, tg_reshape_2d(c, v, 1, d), v_dst);
    }
    if (!k_store || !v_store) return false;
    if (tg_graph_build_forward_expand(tg->graph, k_store) != TG_OK ||
        tg_graph_build_forward_expand(tg->graph, v_store) != TG_OK)
        return false;
    /* the attention over the first n_kv rows: the shape changes with n_kv */
    struct tg_tensor *keys = tg_view_2d(c, m->k_cache, d, n_kv, m->k_cache->nb[1], 0);
    struct tg_tensor *vals = m->set_rows ? tg_cont(c, tg_transpose(c, tg_view_2d(c, m->v_cache, d, n_kv, m->v_cache->nb[1], 0)))
                                         : tg_view_2d(c, m->v_cache, n_kv, d, m->v_cache->nb[1], 0);
    struct tg_tensor *kq = tg_soft_max(c, tg_mul_mat(c, keys, q), NULL, 0.125f, 0.0f);
    tg->out = tg_add1(c, tg_mul_mat(c, vals, kq), m->bias);
    if (!tg->out) return false;
    tg_set_output(tg->out);
    return tg_graph_build_forward_expand(tg->graph, tg->out) == TG_OK;
}

static void token_graph_free(struct token_graph *tg) {
    tg_graph_free(tg->graph);
    tg_context_free(tg->ctx);
}

static float *tensor_values(struct tg_tensor *t) {
    size_t n = tg_nbytes(t);
    float *v = malloc(n);
    if (v && tg_tensor_get(t, v, 0, n) != TG_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static bool same_values(struct tg_tensor *a, struct tg_tensor *b) {
    float *va = tensor_values(a), *vb = tensor_values(b);
    bool same = va && vb && tg_nbytes(a) == tg_nbytes(b) && memcmp(va, vb, tg_nbytes(a)) == 0;
    free(va);
    free(vb);
    return same;
}

struct totals {
    long long tokens, replays, shape_kept, chained, reserves;
};

static void run_seed(uint64_t seed, struct totals *tot) {
    uint64_t r = seed ^ 0x6b76ull;
    const int64_t d = 1 + (int64_t)(rng_next(&r) % 12), n_ctx = 2 + (int64_t)(rng_next(&r) % 15);
    const int64_t pad = (int64_t)1 << (rng_next(&r) % 4);
    const int n_sims = (int)(rng_next(&r) % (MAX_SIMS + 1));
    const bool parallel = rng_next(&r) % 3 == 0, op_offload = rng_next(&r) % 2, reserve = rng_next(&r) % 2;
    const bool reset_each = rng_next(&r) % 2, replay = rng_next(&r) % 4 != 0, chain = rng_next(&r) % 3 == 0;
    const bool set_rows = rng_next(&r) % 2;
    int where = (int)(rng_next(&r) % 3);
    if (where == 2 && n_sims == 0) where = 1;
    if (getenv("TG_KV_TRACE"))
        fprintf(stderr, "seed %llu: d %lld, n_ctx %lld, pad %lld, %d sim(s), parallel %d, op offload %d, reserve %d, "
                "reset each %d, replay %d, chain %d, model memory %d, set_rows %d\n", (unsigned long long)seed, (long long)d,
                (long long)n_ctx, (long long)pad, n_sims, parallel, op_offload, reserve, reset_each, replay, chain, where, set_rows);

    tg_sim_race *race = tg_sim_race_new();
    tg_backend *backends[MAX_SIMS + 1];
    int n_backends = 0;
    for (int i = 0; i < n_sims; i++) {
        struct tg_sim_params p;
        tg_sim_params_default(&p);
        char name[16];
        snprintf(name, sizeof name, "sim%d", i);
        p.name = name;
        p.alignment = (size_t)32 << (rng_next(&r) % 4);
        p.alloc_pad = rng_next(&r) % 2 ? 64 : 0;
        p.share_host_buffer_type = rng_next(&r) % 5 == 0;
        p.offload_min_batch = op_offload ? 1 : 0;
        p.supported_ops_all = rng_next(&r) % 3 == 0;
        for (int op = 0; op < TG_OP_COUNT; op++) p.supported_ops[op] = rng_next(&r) % 10 < 7;
        /* the cache's writes run where the cache is: a sim holding it runs cpy */
        if (where == 2 && i == 0) p.supported_ops[TG_OP_CPY] = p.supported_ops[TG_OP_SET_ROWS] = true;
        p.race = race;
        p.jitter_seed = seed + 1;
        backends[n_backends++] = tg_backend_sim_new(&p);
    }
    backends[n_backends++] = tg_sim_watch_new(tg_backend_cpu_new(), race, NULL);
    tg_backend *cpu_alone = tg_backend_cpu_new();

    struct model m, ref;
    CHECK_MSG(model_new(&m, d, n_ctx, where, backends[0], set_rows) && model_new(&ref, d, n_ctx, 0, NULL, set_rows),
              "seed %llu: model: %s", (unsigned long long)seed, tg_last_error());
    fill_both(&m, &ref, seed);
    tg_sched *s = tg_sched_new(backends, NULL, n_backends, 64, parallel, op_offload);
    CHECK(s != NULL);
    tg_sched_set_replay(s, replay);
    /* the second scheduler of a chain: the same backends, reading the first's output as a leaf */
    tg_sched *s2 = chain ? tg_sched_new(backends, NULL, n_backends, 16, false, false) : NULL;
    bool ok = s != NULL && (!chain || s2 != NULL);
    if (ok && reserve) {
        struct token_graph worst;
        ok = token_graph_new(&worst, &m, n_ctx - 1, n_ctx);
        if (ok) {
            enum tg_status st = tg_sched_reserve(s, worst.graph);
            ok = st == TG_OK;
            CHECK_MSG(ok, "seed %llu: reserve: %s", (unsigned long long)seed, tg_last_error());
            tot->reserves += ok;
        }
        token_graph_free(&worst);
    }
    int64_t last_n_kv = -1;
    for (int64_t n_past = 0; ok && n_past < n_ctx; n_past++) {
        int64_t n_kv = (n_past + 1 + pad - 1) / pad * pad;
        if (n_kv > n_ctx) n_kv = n_ctx;
        struct token_graph tg, rg;
        ok = token_graph_new(&tg, &m, n_past, n_kv) && token_graph_new(&rg, &ref, n_past, n_kv);
        CHECK_MSG(ok, "seed %llu: building token %lld: %s", (unsigned long long)seed, (long long)n_past,
                  tg_last_error());
        if (!ok) break;
        float x[16];
        for (int64_t i = 0; i < d; i++) x[i] = (float)((seed + (uint64_t)n_past * 7 + (uint64_t)i) % 17) / 8.0f - 1.0f;
        if (reset_each) tg_sched_reset(s);
        struct tg_oracle_snapshot snap;
        CHECK_OK(tg_oracle_snapshot_take_user_memory(tg.graph, &snap));
        enum tg_status st = tg_sched_alloc_graph(s, tg.graph);
        CHECK_MSG(st == TG_OK, "seed %llu, token %lld: alloc: %s", (unsigned long long)seed, (long long)n_past,
                  tg_last_error());
        ok = st == TG_OK;
        if (ok) {
            tot->replays += tg_sched_last_was_replay(s);
            tot->shape_kept += n_kv == last_n_kv;
            struct tg_oracle_sched_report rep = {0};
            CHECK_OK(tg_oracle_sched_check(s, &snap, NULL, NULL, 0, &rep));
            CHECK_MSG(rep.n == 0, "seed %llu, token %lld (n_kv %lld): [%s] %s", (unsigned long long)seed,
                      (long long)n_past, (long long)n_kv, rep.n ? tg_oracle_sched_rule_name(rep.items[0].rule) : "",
                      rep.n ? rep.items[0].message : "");
            ok = rep.n == 0;
            tg_oracle_sched_report_free(&rep);
        }
        tg_oracle_snapshot_free(&snap);
        if (ok) {
            CHECK_OK(tg_tensor_set(tg.x, x, 0, (size_t)d * sizeof *x));
            if (tg.rows) CHECK_OK(tg_tensor_set(tg.rows, &n_past, 0, sizeof n_past));
            CHECK_OK(tg_sched_graph_compute(s, tg.graph));
        }
        /* the reference: a fresh CPU-only scheduler on the reference cache */
        tg_sched *fresh = tg_sched_new(&cpu_alone, NULL, 1, 64, false, false);
        CHECK(fresh != NULL);
        if (ok && fresh && tg_sched_alloc_graph(fresh, rg.graph) == TG_OK) {
            CHECK_OK(tg_tensor_set(rg.x, x, 0, (size_t)d * sizeof *x));
            if (rg.rows) CHECK_OK(tg_tensor_set(rg.rows, &n_past, 0, sizeof n_past));
            CHECK_OK(tg_sched_graph_compute(fresh, rg.graph));
            CHECK_MSG(same_values(tg.out, rg.out), "seed %llu, token %lld (n_kv %lld, replay %d): the output differs "
                      "from a fresh CPU-only schedule", (unsigned long long)seed, (long long)n_past, (long long)n_kv,
                      (int)tg_sched_last_was_replay(s));
            CHECK_MSG(same_values(m.k_cache, ref.k_cache) && same_values(m.v_cache, ref.v_cache),
                      "seed %llu, token %lld: the KV cache differs from a fresh CPU-only schedule's",
                      (unsigned long long)seed, (long long)n_past);
        }
        /* chained: the second scheduler reads this token's output (still
         * allocated by the first) as a leaf, as ggml_view_tensor makes it */
        if (ok && s2 && fresh) {
            struct tg_context_params cp = {0, true};
            struct tg_context *c2 = tg_context_new(cp);
            struct tg_graph *g2 = tg_graph_new(16);
            struct tg_tensor *in = tg_view_1d(c2, tg.out, d, 0);
            in->op = TG_OP_NONE;
            memset(in->src, 0, sizeof in->src);
            struct tg_tensor *y = tg_add1(c2, tg_sqr(c2, in), m.bias);
            tg_set_output(y);
            CHECK_OK(tg_graph_build_forward_expand(g2, y));
            CHECK_OK(tg_sched_alloc_graph(s2, g2));
            CHECK_OK(tg_sched_graph_compute(s2, g2));
            struct tg_context *c3 = tg_context_new(cp);
            struct tg_graph *g3 = tg_graph_new(16);
            struct tg_tensor *in3 = tg_view_1d(c3, rg.out, d, 0);
            in3->op = TG_OP_NONE;
            memset(in3->src, 0, sizeof in3->src);
            struct tg_tensor *y3 = tg_add1(c3, tg_sqr(c3, in3), ref.bias);
            tg_set_output(y3);
            CHECK_OK(tg_graph_build_forward_expand(g3, y3));
            /* a scheduler of its own: the reference output is in fresh's compute buffer */
            tg_sched *fresh2 = tg_sched_new(&cpu_alone, NULL, 1, 16, false, false);
            CHECK_OK(tg_sched_alloc_graph(fresh2, g3));
            CHECK_OK(tg_sched_graph_compute(fresh2, g3));
            CHECK_MSG(same_values(y, y3), "seed %llu, token %lld: the chained scheduler's result differs",
                      (unsigned long long)seed, (long long)n_past);
            tot->chained++;
            tg_sched_reset(s2);
            tg_graph_free(g2);
            tg_context_free(c2);
            tg_sched_free(fresh2);
            tg_graph_free(g3);
            tg_context_free(c3);
        }
        tg_sched_free(fresh);
        tot->tokens += ok;
        last_n_kv = n_kv;
        /* the graph's tensors go with their context: the scheduler forgets it first */
        tg_sched_reset(s);
        token_graph_free(&tg);
        token_graph_free(&rg);
    }
    CHECK_MSG(tg_sim_race_count(race) == 0, "seed %llu: race detector: %s", (unsigned long long)seed,
              tg_sim_race_report(race));
    tg_sched_free(s2);
    tg_sched_free(s);
    model_free(&m);
    model_free(&ref);
    for (int i = 0; i < n_backends; i++) tg_backend_free(backends[i]);
    tg_backend_free(cpu_alone);
    tg_sim_race_free(race);
}

int main(void) {
    const char *env_cases = getenv("TG_PROPS_CASES"), *env_seed = getenv("TG_PROPS_SEED");
    uint64_t n_cases = env_cases ? strtoull(env_cases, NULL, 10) : 300;
    uint64_t first = env_seed ? strtoull(env_seed, NULL, 10) : 1;
    struct totals tot = {0};
    clock_t t0 = clock();
    for (uint64_t seed = first; seed < first + n_cases; seed++) run_seed(seed, &tot);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("prop_kv_tokens: %llu seeds (%llu..%llu), %lld tokens bit-identical to a fresh CPU-only schedule "
           "(%lld schedules replayed, %lld tokens whose shapes the last token had), %lld worst-case reserves, "
           "%lld chained computes, %.1f seeds/s\n",
           (unsigned long long)n_cases, (unsigned long long)first, (unsigned long long)(first + n_cases - 1),
           tot.tokens, tot.replays, tot.shape_kept, tot.reserves, tot.chained, secs > 0 ? (double)n_cases / secs : 0.0);
    CHECK_MSG(n_cases < 50 || (tot.replays > 0 && tot.shape_kept > 0 && tot.chained > 0),
              "a path this property judges never ran");
    return tg_test_finish();
}

/* Differential execution: the real plan against the naive plan (tg-oracle.h).
 * Both runs use the same kernels and inputs, so any difference in the outputs
 * comes from memory sharing that should not have happened. */
#include "tg-oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Smallest row count of the indexing ops that read t as their index source. */
static int64_t index_limit(const struct tg_graph *graph, const struct tg_tensor *t) {
    int64_t limit = 64; /* positions for rope and anything else */
    for (int i = 0; i < graph->n_nodes; i++) {
        const struct tg_tensor *n = graph->nodes[i];
        /* get_rows picks rows of its table (src[0]); set_rows writes rows of
         * its destination, whose shape it has */
        int64_t rows = -1;
        if (n->op == TG_OP_GET_ROWS && n->src[1] == t && n->src[0]) rows = n->src[0]->ne[1];
        if (n->op == TG_OP_SET_ROWS && n->src[1] == t) rows = n->ne[1];
        if (rows >= 0 && rows < limit) limit = rows;
    }
    return limit > 0 ? limit : 1;
}

/* Where a quantized block keeps its fp16 scales (ggml's layouts), and the
 * largest |quant x sub-scale| a block can hold: a block gets random quants
 * and scales that keep every value within 1/sqrt(row length), as trained
 * weights roughly are, so a model's activations stay of order one. */
struct block_scales {
    enum tg_type type;
    int n, offset[2];
    double reach;
};
static const struct block_scales block_scales[] = {
    {TG_TYPE_Q4_0, 1, {0, 0}, 8},          {TG_TYPE_Q4_1, 2, {0, 2}, 16},      {TG_TYPE_Q5_0, 1, {0, 0}, 16},
    {TG_TYPE_Q5_1, 2, {0, 2}, 32},         {TG_TYPE_Q8_0, 1, {0, 0}, 128},     {TG_TYPE_Q4_K, 2, {0, 2}, 63.0 * 15},
    {TG_TYPE_Q6_K, 1, {208, 0}, 128.0 * 32},
};

/* n blocks of t's type: random bytes, then each block's scales drawn from
 * 256 values spread over [0.5, 1.5) times the unit that keeps its values
 * within 1/sqrt(ne0). */
static void fill_blocks(const struct tg_tensor *t, uint8_t *out, size_t n, uint64_t *state) {
    const struct block_scales *bs = NULL;
    for (size_t i = 0; i < sizeof block_scales / sizeof *block_scales; i++) {
        if (block_scales[i].type == t->type) bs = &block_scales[i];
    }
    const size_t size = tg_type_size(t->type), bytes = n * size;
    for (size_t k = 0; k < bytes; k += 8) {
        const uint64_t r = splitmix(state);
        memcpy(out + k, &r, 8); /* the chunk has room for a whole last word */
    }
    if (!bs) return;
    uint16_t scales[256];
    const double unit = 1.0 / bs->reach / sqrt((double)t->ne[0]);
    for (int i = 0; i < 256; i++) scales[i] = tg_fp32_to_fp16((float)(unit * (0.5 + (i + 0.5) / 256.0)));
    uint64_t r = 0;
    for (size_t b = 0; b < n; b++) {
        for (int s = 0; s < bs->n; s++) {
            if ((b * 2 + (size_t)s) % 8 == 0) r = splitmix(state);
            memcpy(out + b * size + bs->offset[s], &scales[r & 0xFF], 2);
            r >>= 8;
        }
    }
}

/* An fp16 value uniform over [0.5, 1.5) from 11 random bits: half of them
 * the binade [0.5, 1) at full resolution, half [1, 1.5) at its coarser one. */
static uint16_t half_in_range(uint64_t bits) {
    const uint16_t u = (uint16_t)(bits & 0x7FF);
    return u < 1024 ? (uint16_t)(0x3800 + u) : (uint16_t)(0x3C00 + ((u - 1024) >> 1));
}

/* scale > 0: a model's float weight matrix, uniform over [-scale, scale)
 * (scale = 1/sqrt(ne0), as the quantized weights); else [0.5, 1.5). */
static void fill_elements(const struct tg_tensor *t, uint8_t *out, size_t n, int64_t limit, float scale,
                          uint64_t *state) {
    const size_t esize = tg_type_size(t->type);
    if (t->type == TG_TYPE_F16 && scale <= 0.0f) { /* four values per draw: caches of gigabytes */
        for (size_t i = 0; i < n; i += 4) {
            uint64_t r = splitmix(state);
            for (size_t k = i; k < i + 4 && k < n; k++, r >>= 16) {
                const uint16_t h = half_in_range(r);
                memcpy(out + k * 2, &h, 2);
            }
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t r = splitmix(state);
        float f = 0.5f + (float)(r >> 40) / (float)(1ull << 24);
        if (scale > 0.0f) f = (2.0f * f - 2.0f) * scale;
        switch (t->type) {
        case TG_TYPE_F32: memcpy(out + i * 4, &f, 4); break;
        case TG_TYPE_F16: { uint16_t h = tg_fp32_to_fp16(f); memcpy(out + i * 2, &h, 2); break; }
        case TG_TYPE_BF16: { uint16_t h = tg_fp32_to_bf16(f); memcpy(out + i * 2, &h, 2); break; }
        case TG_TYPE_I32: { int32_t v = (int32_t)(r % (uint64_t)limit); memcpy(out + i * 4, &v, 4); break; }
        case TG_TYPE_I64: { int64_t v = (int64_t)(r % (uint64_t)limit); memcpy(out + i * 8, &v, 8); break; }
        default: out[i * esize] = (uint8_t)r; break;
        }
    }
}

/* Fills t through its buffer, a chunk of at most 1 MiB at a time (weights
 * of gigabytes need no second copy in memory). */
/* A float matrix in a weights buffer, filled as a model's when model is set. */
static float weight_scale(const struct tg_tensor *t, bool model) {
    const bool weights = t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_WEIGHTS;
    const bool is_float = t->type == TG_TYPE_F32 || t->type == TG_TYPE_F16 || t->type == TG_TYPE_BF16;
    return model && weights && is_float && t->ne[1] > 1 ? 1.0f / sqrtf((float)t->ne[0]) : 0.0f;
}

static enum tg_status fill_one(const struct tg_graph *graph, struct tg_tensor *t, uint64_t seed, bool model) {
    if (!t->data || !t->buffer || !tg_buffer_is_host(t->buffer) || !tg_is_contiguous(t)) return TG_OK;
    const int64_t n = tg_nelements(t);
    if (n <= 0) return TG_OK;
    const bool blocks = tg_type_is_quantized(t->type);
    const size_t unit = tg_type_size(t->type), units = tg_nbytes(t) / unit;
    /* filled a chunk at a time, never more than the tensor: a sanitizer
     * build poisons every byte malloc hands out, and most tensors are small */
    const size_t max_chunk = ((size_t)1 << 20) / unit + 1;
    const size_t per_chunk = units < max_chunk ? units : max_chunk;
    uint8_t *chunk = malloc(per_chunk * unit + 8);
    if (!chunk) return tg_fail(TG_ERR_ALLOC, "tensor '%s': out of host memory filling inputs", t->name);
    const int64_t limit = t->type == TG_TYPE_I32 || t->type == TG_TYPE_I64 ? index_limit(graph, t) : 0;
    uint64_t state = seed;
    enum tg_status st = TG_OK;
    for (size_t first = 0; first < units && st == TG_OK; first += per_chunk) {
        const size_t k = units - first < per_chunk ? units - first : per_chunk;
        if (blocks) fill_blocks(t, chunk, k, &state);
        else fill_elements(t, chunk, k, limit, weight_scale(t, model), &state);
        st = tg_tensor_set(t, chunk, first * unit, k * unit);
    }
    free(chunk);
    return st;
}

static enum tg_status fill_graph(struct tg_graph *graph, uint64_t seed, bool model) {
    enum tg_status st = TG_OK;
    for (int j = 0; j < graph->n_leafs && st == TG_OK; j++) {
        /* a leaf that is a view (ggml_view_tensor's kind) has no values of its
         * own: its root's are filled or computed, and before the compute a
         * computed root's memory may still belong to a tensor the plan put
         * there first */
        struct tg_tensor *t = graph->leafs[j];
        if (t->view_src) {
            /* ggml_view_tensor's leaf does not bring its root into the graph:
             * a root outside it is filled through the first such view */
            bool first = !tg_graph_contains(graph, t->view_src);
            for (int e = 0; first && e < j; e++) first = graph->leafs[e]->view_src != t->view_src;
            if (!first) continue;
            t = t->view_src;
        }
        st = fill_one(graph, t, seed ^ (0x1000193ULL * (uint64_t)(j + 1)), model);
    }
    for (int i = 0; i < graph->n_nodes && st == TG_OK; i++) {
        if (graph->nodes[i]->flags & TG_FLAG_INPUT) {
            st = fill_one(graph, graph->nodes[i], seed ^ (0x9e3779b1ULL * (uint64_t)(i + 1)), model);
        }
    }
    return st;
}

enum tg_status tg_oracle_fill_inputs(struct tg_graph *graph, uint64_t seed) { return fill_graph(graph, seed, false); }

enum tg_status tg_oracle_fill_model_inputs(struct tg_graph *graph, uint64_t seed) { return fill_graph(graph, seed, true); }

enum tg_status tg_oracle_copy_inputs(struct tg_graph *dst, const struct tg_graph *ref) {
    for (int j = 0; j < dst->n_leafs; j++) {
        const struct tg_tensor *from = ref->leafs[j];
        if (!from->data || dst->leafs[j]->view_src || from->data == dst->leafs[j]->data) continue; /* shared */
        enum tg_status st = tg_tensor_set(dst->leafs[j], from->data, 0, tg_nbytes(from));
        if (st != TG_OK) return st;
    }
    for (int i = 0; i < dst->n_nodes; i++) {
        if (!(dst->nodes[i]->flags & TG_FLAG_INPUT) || dst->nodes[i]->view_src) continue;
        enum tg_status st = tg_tensor_set(dst->nodes[i], ref->nodes[i]->data, 0, tg_nbytes(ref->nodes[i]));
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* Nodes nobody in the graph reads, directly or through a view (a node read
 * through a view, as ggml_view_tensor's leaf, gives its memory up after that
 * read, so its final bytes are no result). */
static bool *find_sinks(const struct tg_graph *g) {
    bool *read = calloc((size_t)g->n_nodes + 1, sizeof *read);
    if (!read) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int k = 0; k < TG_MAX_SRC; k++) {
            const struct tg_tensor *s = g->nodes[i]->src[k];
            const struct tg_tensor *root = s ? s->view_src : NULL;
            for (int j = 0; s && j < i; j++) {
                if (g->nodes[j] == s || g->nodes[j] == root) read[j] = true;
            }
        }
    }
    for (int i = 0; i < g->n_nodes; i++) read[i] = !read[i];
    return read;
}

static enum tg_status compare_node(const struct tg_tensor *a, const struct tg_tensor *b, struct tg_oracle_diff_result *res) {
    size_t n = tg_nbytes(a);
    if (n != tg_nbytes(b)) {
        res->n_mismatched++;
        snprintf(res->message, sizeof res->message, "tensor '%s': %zu bytes vs %zu in the reference", a->name, n, tg_nbytes(b));
        return TG_OK;
    }
    uint8_t *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
    enum tg_status st = x && y ? TG_OK : tg_fail(TG_ERR_ALLOC, "out of host memory comparing '%s'", a->name);
    if (st == TG_OK) st = tg_tensor_get(a, x, 0, n);
    if (st == TG_OK) st = tg_tensor_get(b, y, 0, n);
    if (st == TG_OK) {
        res->n_compared++;
        for (size_t i = 0; i < n; i++) {
            if (x[i] == y[i]) continue; // NOLINT(clang-analyzer-core.NullDereference): st is an error when x or y is NULL
            if (res->n_mismatched++ == 0) {
                snprintf(res->message, sizeof res->message,
                         "tensor '%s' (%s) differs from the naive plan's at byte %zu of %zu (0x%02x vs 0x%02x)", a->name,
                         tg_op_name(a->op), i, n, x[i], y[i]);
            }
            break;
        }
    }
    free(x);
    free(y);
    return st;
}

enum tg_status tg_oracle_diff(struct tg_graph *real, struct tg_graph *reference, tg_oracle_compute_fn compute,
                              tg_oracle_supports_fn supports, void *user, uint64_t seed,
                              struct tg_oracle_diff_result *res) {
    memset(res, 0, sizeof *res);
    if (real->n_nodes != reference->n_nodes || real->n_leafs != reference->n_leafs) {
        return tg_fail(TG_ERR_INVALID, "differential run: the two graphs differ in size (%d/%d nodes, %d/%d leafs)",
                       real->n_nodes, reference->n_nodes, real->n_leafs, reference->n_leafs);
    }
    for (int i = 0; i < real->n_nodes; i++) {
        const struct tg_tensor *n = real->nodes[i];
        if (!tg_op_is_view(n->op) && !supports(n, user)) return TG_OK; /* not computable: res->computed false */
    }
    enum tg_status st = tg_oracle_fill_inputs(real, seed);
    if (st == TG_OK) st = tg_oracle_fill_inputs(reference, seed);
    if (st == TG_OK) st = compute(real, user);
    if (st == TG_OK) st = compute(reference, user);
    if (st != TG_OK) return st;
    res->computed = true;
    bool *sink = find_sinks(real);
    if (!sink) return tg_fail(TG_ERR_ALLOC, "differential run: out of host memory");
    for (int i = 0; i < real->n_nodes && st == TG_OK; i++) {
        if (sink[i] || (real->nodes[i]->flags & TG_FLAG_OUTPUT)) st = compare_node(real->nodes[i], reference->nodes[i], res);
    }
    free(sink);
    return st;
}

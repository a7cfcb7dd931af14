/* flash_attn_ext, with the CPU's semantics: for query row (i1, head h, batch b)
 *   dst[:, h, i1, b] = softmax_j(s_j) . v[:, j, h / gqa, b],
 *   s_j = softcap(scale * q . k_j) + slope(h) * mask[j, i1, h % mask.ne2, b % mask.ne3]
 * (softcap t -> c * tanh(t / c) when c != 0; slope from ALiBi's max_bias).
 * One block per query row: its threads score the keys into a scratch row in
 * device memory, the block reduces max and sum, then each thread accumulates
 * output dimensions.  The rows go in launches whose scratch stays within the
 * backend's limit (a long prefill's n_q x heads rows of n_kv scores would
 * take more memory than its tensors).  Rows where every score is -inf give zeros, as on the
 * CPU; a sink (src[4], one logit per head) joins the normalisation.  As on
 * the CPU, a key the mask hides (-inf) is never read, neither its K row nor
 * its V row: an unwritten KV-cache slot may hold NaN or inf; every other
 * key's V row is read, whatever its weight.
 * Operands are read through their byte strides (permuted q, views of a KV
 * cache). */
#include "cuda_internal.cuh"

#define ATTN_THREADS 128

static __global__ void flash_attn_kernel(tg_cuda_view dst, tg_cuda_view q, tg_cuda_view k, tg_cuda_view v,
                                         tg_cuda_view mask, bool has_mask, tg_cuda_view sinks, bool has_sinks,
                                         float scale, float max_bias, float softcap, int64_t first_row,
                                         float *scratch) {
    __shared__ float shared[32];
    const int64_t n_q = q.ne[1], n_head = q.ne[2], n_kv = k.ne[1];
    const int64_t row = first_row + blockIdx.x;
    const int64_t iq1 = row % n_q, iq2 = (row / n_q) % n_head, iq3 = row / (n_q * n_head);
    const int64_t ik2 = iq2 / (n_head / k.ne[2]); /* grouped-query attention */
    const float slope = tg_cuda_alibi_slope(max_bias, iq2, n_head);
    float *w = scratch + (int64_t)blockIdx.x * n_kv;
    const char *q_row = q.data + tg_cuda_offset(q, 0, iq1, iq2, iq3);

    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n_kv; j += blockDim.x) {
        const float mv =
            has_mask ? slope * tg_cuda_load(mask.data + tg_cuda_offset(mask, j, iq1, iq2 % mask.ne[2], iq3 % mask.ne[3]),
                                            mask.type)
                     : 0.0f;
        if (mv == -INFINITY) { /* hidden: K not read */
            w[j] = -INFINITY;
            continue;
        }
        const char *k_row = k.data + tg_cuda_offset(k, 0, j, ik2, iq3);
        float s = 0.0f;
        for (int64_t d = 0; d < q.ne[0]; d++) {
            s += tg_cuda_load(q_row + d * q.nb[0], q.type) * tg_cuda_load(k_row + d * k.nb[0], k.type);
        }
        s *= scale;
        if (softcap != 0.0f) s = softcap * tanhf(s / softcap);
        s += mv;
        w[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = tg_cuda_block_max(mx, shared);
    const float sink = has_sinks ? tg_cuda_load(sinks.data + iq2 * sinks.nb[0], sinks.type) : -INFINITY;
    mx = fmaxf(mx, sink);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n_kv; j += blockDim.x) {
        if (w[j] == -INFINITY) { /* hidden (or no score at all): -1 marks a V row never read */
            w[j] = -1.0f;
            continue;
        }
        const float e = mx == -INFINITY ? 0.0f : expf(w[j] - mx);
        w[j] = e;
        sum += e;
    }
    /* its barriers also publish every w[j] to the whole block */
    sum = tg_cuda_block_sum(sum, shared);
    if (has_sinks && mx != -INFINITY) sum += expf(sink - mx);
    /* a NaN score makes the sum NaN and the row NaN, as on the CPU (a row with
     * nothing visible sums to 0 and stays zeros) */
    const float inv = sum > 0.0f ? 1.0f / sum : sum == 0.0f ? 0.0f : NAN;
    for (int64_t d = threadIdx.x; d < v.ne[0]; d += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n_kv; j++) {
            if (w[j] >= 0.0f) acc += w[j] * tg_cuda_load(v.data + tg_cuda_offset(v, d, j, ik2, iq3), v.type);
        }
        tg_cuda_store(dst.data + tg_cuda_offset(dst, d, iq2, iq1, iq3), dst.type, acc * inv);
    }
}

/* The CPU's rules (q and dst f32, k/v/mask float types), plus what the
 * kernel indexes: k and v per batch like q, one block per row. */
bool tg_cuda_supports_flash_attn(const struct tg_tensor *node) {
    const struct tg_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
    const struct tg_tensor *sinks = node->src[4];
    if (!q || !k || !v || q->type != TG_TYPE_F32 || node->type != TG_TYPE_F32) return false;
    if (sinks && (sinks->type != TG_TYPE_F32 || sinks->ne[0] < q->ne[2])) return false;
    if (!tg_cuda_is_float_type(k->type) || !tg_cuda_is_float_type(v->type)) return false;
    if (mask && (!tg_cuda_is_float_type(mask->type) || mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] ||
                 q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0)) {
        return false;
    }
    if (k->ne[2] <= 0 || q->ne[2] % k->ne[2] != 0) return false;
    const int64_t n_rows = q->ne[1] * q->ne[2] * q->ne[3];
    return q->ne[0] == k->ne[0] && k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2] && k->ne[3] == q->ne[3] &&
           v->ne[3] == q->ne[3] && node->ne[0] == v->ne[0] && node->ne[1] == q->ne[2] && node->ne[2] == q->ne[1] &&
           node->ne[3] == q->ne[3] && n_rows <= 0x7fffffffLL;
}

enum tg_status tg_cuda_op_flash_attn(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    const struct tg_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
    const struct tg_tensor *sinks = node->src[4];
    const int64_t n_rows = q->ne[1] * q->ne[2] * q->ne[3];
    if (n_rows == 0 || v->ne[0] == 0) return TG_OK;
    cudaStream_t s = ctx->stream;
    const size_t row_bytes = (size_t)k->ne[1] * sizeof(float);
    int64_t rows_per_launch = row_bytes > 0 ? (int64_t)(ctx->attn_scratch_limit / row_bytes) : n_rows;
    if (rows_per_launch < 1) rows_per_launch = 1;
    if (rows_per_launch > n_rows) rows_per_launch = n_rows;
    float *scratch = NULL;
    enum tg_status st = tg_cuda_scratch_alloc(ctx, (void **)&scratch, (size_t)rows_per_launch * row_bytes, node,
                                              "flash_attn_ext's score rows");
    if (st != TG_OK) return st;
    const tg_cuda_view qv = tg_cuda_view_of(q);
    /* launches on one stream run in order: each reuses the scratch */
    for (int64_t first = 0; first < n_rows; first += rows_per_launch) {
        const int64_t rows = n_rows - first < rows_per_launch ? n_rows - first : rows_per_launch;
        flash_attn_kernel<<<(unsigned)rows, ATTN_THREADS, 0, s>>>(
            tg_cuda_view_of(node), qv, tg_cuda_view_of(k), tg_cuda_view_of(v), mask ? tg_cuda_view_of(mask) : qv,
            mask != NULL, sinks ? tg_cuda_view_of(sinks) : qv, sinks != NULL, tg_get_op_param_f32(node, 0),
            tg_get_op_param_f32(node, 1), tg_get_op_param_f32(node, 2), first, scratch);
        if (cudaPeekAtLastError() != cudaSuccess) break; /* reported below */
    }
    tg_cuda_scratch_free(ctx, scratch);
    return tg_cuda_check_launch(node, "flash_attn_ext");
}

/* mul_mat and flash attention, with ggml's CPU semantics: the second
 * operand (or q) is first converted to the weight type's activation format
 * (q8_0, q8_1, q8_K, f16, bf16 or f32: cpu-quants.h) and every result is one
 * dot product of a weight row with a converted row (cpu_dot.c), so results
 * do not depend on the thread count. */
#include "cpu-kernels.h"

/* ---- mul_mat ------------------------------------------------------------------------- */

/* Rows of a (weights) and of dst per chunk of work: 16 x 16 dot products
 * keep a chunk's rows of a and b in the L2 cache. */
#define CHUNK 16

static bool rows_packed(const struct tg_tensor *t) { return t->nb[0] == tg_type_size(t->type); }

/* b is used as is when it is already in a's activation format with packed rows. */
static bool b_direct(const struct tg_tensor *a, const struct tg_tensor *b) {
    return b->type == cpu_act_type(cpu_act_of(a->type)) && rows_packed(b);
}

/* Converts rows [r0, r1) of b (in dst row order) into the activation format. */
static void convert_b(const struct tg_tensor *a, const struct tg_tensor *b, uint8_t *out, float *tmp, int64_t r0, int64_t r1) {
    const enum cpu_act act = cpu_act_of(a->type);
    const int64_t K = b->ne[0];
    const size_t row_size = cpu_act_row_size(act, K);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, b, &i1, &i2, &i3);
        const void *in = cpu_elem(b, 0, i1, i2, i3);
        const float *row = in;
        if (b->type != TG_TYPE_F32 || !rows_packed(b)) {
            for (int64_t k = 0; k < K; k++) tmp[k] = cpu_load((const uint8_t *)in + k * (int64_t)b->nb[0], b->type);
            row = tmp;
        }
        cpu_act_from_f32(act, row, out + (size_t)r * row_size, K);
    }
}

/* ---- mul_mat with the Hadamard hint ---------------------------------------------------- */

/* ggml_mul_mat_set_hint(GGML_HINT_SRC0_IS_HADAMARD), op param 1: a is taken
 * to be the normalised Walsh-Hadamard matrix of b's row length n (a power
 * of two) and is never read; each row of b is scaled by 1 / sqrt(n) and
 * transformed by butterflies, pairs len apart for len = 1, 2, 4, ... (the
 * Sylvester order), the same additions in the same order as ggml's, so the
 * same bits. */
static bool hadamard_hint(const struct tg_tensor *dst) { return dst->op_params[1] == TG_HINT_SRC0_IS_HADAMARD; }

static enum tg_status hadamard(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *b = dst->src[1];
    const int64_t n = b->ne[0];
    const float scale = 1.0f / sqrtf((float)n);
    int64_t r0, r1;
    cpu_rows(tg_nrows(b), x->ith, x->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, b, &i1, &i2, &i3);
        const float *in = cpu_elem(b, 0, i1, i2, i3);
        float *out = cpu_elem(dst, 0, i1, i2, i3);
        for (int64_t j = 0; j < n; j++) out[j] = in[j] * scale;
        for (int64_t len = 1; len < n; len <<= 1) {
            for (int64_t i = 0; i < n; i += 2 * len) {
                for (int64_t j = i; j < i + len; j++) {
                    const float u = out[j], v = out[j + len];
                    out[j] = u + v;
                    out[j + len] = u - v;
                }
            }
        }
    }
    return TG_OK;
}

static enum tg_status mul_mat(struct tg_tensor *dst, const struct cpu_exec *x) {
    if (hadamard_hint(dst)) return hadamard(dst, x);
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], N = tg_nrows(b);
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const enum cpu_act act = cpu_act_of(a->type);
    const size_t act_row = cpu_act_row_size(act, K);
    const bool direct = b_direct(a, b);
    uint8_t *converted = x->shared;
    float *tmp = x->own;
    /* a float weight row with a stride between elements, gathered packed */
    uint8_t *a_row = (uint8_t *)x->own + (size_t)K * sizeof(float);
    if (!direct) {
        int64_t c0 = 0, c1 = N;
        if (x->sync) cpu_rows(N, x->ith, x->nth, &c0, &c1); /* alone: convert every row */
        convert_b(a, b, converted, tmp, c0, c1);
        cpu_sync(x);
    }
    const cpu_dot_fn dot = cpu_dot_for(a->type);
    const int64_t chunks_m = (M + CHUNK - 1) / CHUNK, chunks_n = (N + CHUNK - 1) / CHUNK;
    int64_t c0, c1;
    cpu_rows(chunks_m * chunks_n, x->ith, x->nth, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        const int64_t n0 = c / chunks_m * CHUNK, m0 = c % chunks_m * CHUNK;
        const int64_t n1 = n0 + CHUNK < N ? n0 + CHUNK : N, m1 = m0 + CHUNK < M ? m0 + CHUNK : M;
        for (int64_t r = n0; r < n1; r++) {
            int64_t i1, i2, i3;
            cpu_unravel(r, b, &i1, &i2, &i3);
            const void *b_row = direct ? (const void *)cpu_elem(b, 0, i1, i2, i3) : converted + (size_t)r * act_row;
            for (int64_t i0 = m0; i0 < m1; i0++) {
                const uint8_t *w = cpu_elem(a, 0, i0, i2 / r2, i3 / r3);
                if (!rows_packed(a)) { /* float types only: supports_op refuses quantized rows not packed */
                    for (int64_t k = 0; k < K; k++) cpu_store(a_row + k * (int64_t)tg_type_size(a->type), a->type,
                                                              cpu_load(w + k * (int64_t)a->nb[0], a->type));
                    w = a_row;
                }
                const float v = dot(K, w, b_row);
                memcpy(cpu_elem(dst, i0, i1, i2, i3), &v, sizeof v);
            }
        }
    }
    return TG_OK;
}

/* ---- flash_attn_ext ------------------------------------------------------------------ */

static float alibi_slope(float max_bias, int64_t head, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= n_head) n_log2 *= 2;
    const float m0 = powf(2.0f, -max_bias / (float)n_log2), m1 = powf(2.0f, -(max_bias / 2.0f) / (float)n_log2);
    return head < n_log2 ? powf(m0, (float)(head + 1)) : powf(m1, (float)(2 * (head - n_log2) + 1));
}

/* dst[:, head, query, batch] = softmax_j(scale * q.k_j (softcapped) + slope * mask[j, query]) v_j,
 * with ggml's online softmax in f32; q is converted to k's activation
 * format first, v rows to f32; a key whose mask is -inf is skipped; a sink
 * (src[4], one logit per head) joins the normalisation. */
static enum tg_status flash_attn(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3], *sinks = dst->src[4];
    float scale = tg_get_op_param_f32(dst, 0);
    const float max_bias = tg_get_op_param_f32(dst, 1), softcap = tg_get_op_param_f32(dst, 2);
    if (softcap != 0.0f) scale /= softcap;
    const int64_t DK = q->ne[0], DV = v->ne[0], n_kv = k->ne[1], n_q = q->ne[1], H = q->ne[2];
    const enum cpu_act act = cpu_act_of(k->type);
    const cpu_dot_fn dot = cpu_dot_for(k->type);
    float *acc = x->own, *v_row = acc + DV, *q_f32 = v_row + DV;
    uint8_t *q_act = (uint8_t *)(q_f32 + DK);
    int64_t r0, r1;
    cpu_rows(n_q * H * q->ne[3], x->ith, x->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t iq1 = r % n_q, iq2 = (r / n_q) % H, iq3 = r / (n_q * H);
        const int64_t ik2 = iq2 / (H / k->ne[2]), ik3 = iq3 / (q->ne[3] / k->ne[3]);
        const int64_t iv2 = iq2 / (H / v->ne[2]), iv3 = iq3 / (q->ne[3] / v->ne[3]);
        const float slope = alibi_slope(max_bias, iq2, H);
        for (int64_t d = 0; d < DK; d++) q_f32[d] = cpu_load(cpu_elem(q, d, iq1, iq2, iq3), q->type);
        cpu_act_from_f32(act, q_f32, q_act, DK);
        for (int64_t d = 0; d < DV; d++) acc[d] = 0.0f;
        float sum = 0.0f, max = -INFINITY;
        for (int64_t j = 0; j < n_kv; j++) {
            const float mv = mask ? slope * cpu_load(cpu_elem(mask, j, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]), mask->type)
                                  : 0.0f;
            if (mv == -INFINITY) continue;
            float s = dot(DK, cpu_elem(k, 0, j, ik2, ik3), q_act) * scale;
            if (softcap != 0.0f) s = softcap * tanhf(s);
            s += mv;
            float ms = 1.0f, vs = 1.0f;
            if (s > max) { /* a new maximum: rescale what was summed */
                ms = max == -INFINITY ? 0.0f : cpu_exp_term(max - s);
                max = s;
                for (int64_t d = 0; d < DV; d++) acc[d] *= ms;
            } else {
                vs = cpu_exp_term(s - max);
            }
            cpu_to_f32(v->type, cpu_elem(v, 0, j, iv2, iv3), v_row, DV);
            for (int64_t d = 0; d < DV; d++) acc[d] += v_row[d] * vs;
            sum = sum * ms + vs;
        }
        if (sinks) {
            const float s = cpu_load(cpu_elem(sinks, iq2, 0, 0, 0), sinks->type);
            if (s > max) {
                const float ms = max == -INFINITY ? 0.0f : cpu_exp_term(max - s);
                for (int64_t d = 0; d < DV; d++) acc[d] *= ms;
                sum = sum * ms + 1.0f;
            } else {
                sum += cpu_exp_term(s - max);
            }
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int64_t d = 0; d < DV; d++) cpu_store(cpu_elem(dst, d, iq2, iq1, iq3), dst->type, acc[d] * inv);
    }
    return TG_OK;
}

/* ---- the family ------------------------------------------------------------------------ */

enum tg_status cpu_op_matrix(struct tg_tensor *dst, const struct cpu_exec *x) {
    return dst->op == TG_OP_MUL_MAT ? mul_mat(dst, x) : flash_attn(dst, x);
}

struct cpu_work cpu_work_matrix(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a || !b) return (struct cpu_work){0, 0};
    if (dst->op == TG_OP_MUL_MAT && hadamard_hint(dst)) return (struct cpu_work){0, 0};
    if (dst->op == TG_OP_MUL_MAT) {
        const size_t shared = b_direct(a, b) ? 0 : cpu_act_row_size(cpu_act_of(a->type), a->ne[0]) * (size_t)tg_nrows(b);
        return (struct cpu_work){shared, (size_t)a->ne[0] * (sizeof(float) + tg_type_size(a->type))};
    }
    const struct tg_tensor *v = dst->src[2];
    const int64_t DK = a->ne[0], DV = v ? v->ne[0] : 0;
    return (struct cpu_work){0, (size_t)(2 * DV + DK) * sizeof(float) + cpu_act_row_size(cpu_act_of(b->type), DK)};
}

/* The activation format divides the row (q8 blocks) and the weights have a dot product. */
static bool dot_fits(enum tg_type w, int64_t K) {
    const enum cpu_act act = cpu_act_of(w);
    return act != CPU_ACT_NONE && K % cpu_act_block(act) == 0 && K % tg_blck_size(w) == 0;
}

bool cpu_supports_matrix(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a || !b || dst->type != TG_TYPE_F32) return false;
    if (dst->op == TG_OP_MUL_MAT) {
        /* b: f32, or already a's activation type (ggml's rule) */
        if (!dot_fits(a->type, a->ne[0]) || (b->type != TG_TYPE_F32 && b->type != cpu_act_type(cpu_act_of(a->type)))) {
            return false;
        }
        /* quantized rows are read a whole block at a time: blocks must be
         * packed (a permuted weight is not gathered like a float one is) */
        if ((tg_type_is_quantized(a->type) && !rows_packed(a)) || (tg_type_is_quantized(b->type) && !rows_packed(b))) {
            return false;
        }
        /* the hint: a square Hadamard matrix of a power-of-two order, f32 rows of b and dst */
        if (hadamard_hint(dst) && (b->type != TG_TYPE_F32 || !rows_packed(b) || !rows_packed(dst) ||
                                   a->ne[1] != a->ne[0] || (a->ne[0] & (a->ne[0] - 1)) != 0)) {
            return false;
        }
        return a->ne[0] == b->ne[0] && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && dst->ne[0] == a->ne[1] &&
               dst->ne[1] == b->ne[1] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3];
    }
    if (dst->op == TG_OP_FLASH_ATTN_EXT) {
        const struct tg_tensor *q = a, *k = b, *v = dst->src[2], *mask = dst->src[3], *sinks = dst->src[4];
        if (!v || q->type != TG_TYPE_F32 || !dot_fits(k->type, k->ne[0]) || cpu_act_of(v->type) == CPU_ACT_NONE) return false;
        if (!rows_packed(k) || !rows_packed(v)) return false;
        if (mask && (!cpu_is_float(mask->type) || mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] ||
                     q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0)) {
            return false;
        }
        if (sinks && (sinks->type != TG_TYPE_F32 || sinks->ne[0] < q->ne[2])) return false;
        return q->ne[0] == k->ne[0] && k->ne[1] == v->ne[1] && q->ne[2] % k->ne[2] == 0 && q->ne[2] % v->ne[2] == 0 &&
               q->ne[3] % k->ne[3] == 0 && q->ne[3] % v->ne[3] == 0 && dst->ne[0] == v->ne[0] && dst->ne[1] == q->ne[2] &&
               dst->ne[2] == q->ne[1] && dst->ne[3] == q->ne[3];
    }
    return false;
}

/* Rotary position embedding, every mode ggml's CPU computes: normal
 * (adjacent pairs), neox (pairs half the rotated width apart), the
 * multimodal ones that take four positions per token (mrope and its
 * interleaved variant imrope, vision), and an offset that moves the rotated
 * dims (ggml_rope_set_offset).
 *
 * Pair k (k = 0 .. n_dims/2 - 1; vision: 0 .. ne0/2 - 1) turns by
 * pos * theta_scale^k with theta_scale = base^(-2 / n_dims), computed as
 * ggml computes it (the position times theta_scale once per pair, in
 * float), then divided by its frequency factor and scaled by YaRN.  The
 * multimodal modes choose per pair which of the token's four positions
 * (time, height, width, extra) it turns by, from the sections: pairs per
 * position, op params 11-14.  A row is read before it is written, so dst
 * may alias src0. */
#include "cpu-kernels.h"

#define N_SECTIONS 4 /* ggml's GGML_MROPE_SECTIONS */

/* YaRN: the dimension range over which extrapolation ramps to interpolation. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static float yarn_ramp(float low, float high, int64_t pair) {
    float y = ((float)pair - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static bool is_multi(int mode) { return (mode & TG_ROPE_MROPE) != 0; } /* mrope, imrope and vision */

/* Which of the four positions pair k turns by (0 time, 1 height, 2 width,
 * 3 extra): sections[] consecutive pairs each, repeating every sum of them;
 * imrope interleaves time, height and width pair by pair instead. */
static int section_of(int mode, const int *sections, int64_t k) {
    const int total = sections[0] + sections[1] + sections[2] + sections[3];
    const int s = (int)(k % total);
    if (mode == TG_ROPE_IMROPE) {
        if (s % 3 == 1 && s < 3 * sections[1]) return 1;
        if (s % 3 == 2 && s < 3 * sections[2]) return 2;
        if (s % 3 == 0 && s < 3 * sections[0]) return 0;
        return 3;
    }
    if (s < sections[0]) return 0;
    if (s < sections[0] + sections[1]) return 1;
    if (s < sections[0] + sections[1] + sections[2]) return 2;
    return 3;
}

/* Vision restarts each position's angle where its section begins; where
 * an empty section shares its start with the next, only the earlier
 * position restarts there (ggml checks them in that order). */
static int restarted_at(const int *sections, int64_t k) {
    const int total = sections[0] + sections[1] + sections[2] + sections[3];
    const int s = (int)(k % total);
    if (s == 0) return 0;
    if (s == sections[0]) return 1;
    if (s == sections[0] + sections[1]) return 2;
    if (s == sections[0] + sections[1] + sections[2]) return 3;
    return -1;
}

void cpu_rope_row(struct tg_tensor *dst, const struct tg_tensor *a, int64_t i1, int64_t i2, int64_t i3) {
    const int n_dims = dst->op_params[1], mode = dst->op_params[2], n_ctx_orig = dst->op_params[4];
    const int n_offs = dst->op_params[15];
    const int sections[N_SECTIONS] = {dst->op_params[11], dst->op_params[12], dst->op_params[13], dst->op_params[14]};
    const float base = tg_get_op_param_f32(dst, 5), freq_scale = tg_get_op_param_f32(dst, 6);
    const float ext = tg_get_op_param_f32(dst, 7), attn = tg_get_op_param_f32(dst, 8);
    const float beta_fast = tg_get_op_param_f32(dst, 9), beta_slow = tg_get_op_param_f32(dst, 10);
    float low = floorf(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, base));
    float high = ceilf(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, base));
    low = fmaxf(0.0f, low);
    high = fminf((float)(n_dims - 1), high);
    const struct tg_tensor *factors = dst->src[2];
    const float theta_scale = powf(base, -2.0f / (float)n_dims);
    const bool multi = is_multi(mode), vision = mode == TG_ROPE_VISION;
    /* the token's positions, and each one's angle for the current pair */
    float position[N_SECTIONS] = {0}, theta[N_SECTIONS];
    for (int s = 0; s < (multi ? N_SECTIONS : 1); s++)
        position[s] = (float)cpu_index(dst->src[1], i2 + s * a->ne[2], 0, 0);
    memcpy(theta, position, sizeof(theta));
    const int64_t n_pairs = vision ? a->ne[0] / 2 : n_dims / 2;
    for (int64_t k = 0; k < n_pairs; k++) {
        int which = 0;
        if (multi) {
            const int restart = vision ? restarted_at(sections, k) : -1;
            if (restart >= 0) theta[restart] = position[restart];
            which = section_of(mode, sections, k);
        }
        const float factor = factors ? cpu_load(cpu_elem(factors, k, 0, 0, 0), factors->type) : 1.0f;
        const float theta_extrap = theta[which] / factor;
        const float theta_interp = freq_scale * theta_extrap;
        float angle = theta_interp, mscale = attn;
        if (ext != 0.0f) {
            const float mix = yarn_ramp(low, high, k) * ext;
            angle = theta_interp * (1.0f - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
        }
        const float c = cosf(angle) * mscale, s = sinf(angle) * mscale;
        /* normal: dims 2k, 2k + 1; vision: k, k + n_dims; the rest: k, k + n_dims / 2; after the offset */
        const int64_t j0 = n_offs + (mode == TG_ROPE_NORMAL ? 2 * k : k);
        const int64_t j1 = mode == TG_ROPE_NORMAL ? j0 + 1 : vision ? j0 + n_dims : j0 + n_dims / 2;
        const float x0 = cpu_load(cpu_elem(a, j0, i1, i2, i3), a->type);
        const float x1 = cpu_load(cpu_elem(a, j1, i1, i2, i3), a->type);
        cpu_store(cpu_elem(dst, j0, i1, i2, i3), dst->type, x0 * c - x1 * s);
        cpu_store(cpu_elem(dst, j1, i1, i2, i3), dst->type, x0 * s + x1 * c);
        for (int p = 0; p < N_SECTIONS; p++) theta[p] *= theta_scale;
    }
    if (vision) return; /* every dim turned */
    for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
        if (i0 >= n_offs && i0 < n_offs + n_dims) continue;
        cpu_store(cpu_elem(dst, i0, i1, i2, i3), dst->type, cpu_load(cpu_elem(a, i0, i1, i2, i3), a->type));
    }
}

bool cpu_supports_rope(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *pos = dst->src[1], *factors = dst->src[2];
    const int n_dims = dst->op_params[1], mode = dst->op_params[2], n_offs = dst->op_params[15];
    if (!a || !pos) return false;
    if (mode != TG_ROPE_NORMAL && mode != TG_ROPE_NEOX && mode != TG_ROPE_MROPE && mode != TG_ROPE_IMROPE &&
        mode != TG_ROPE_VISION)
        return false;
    if ((a->type != TG_TYPE_F32 && a->type != TG_TYPE_F16) || dst->type != a->type || !tg_are_same_shape(a, dst))
        return false;
    const int64_t n_positions = is_multi(mode) ? N_SECTIONS * a->ne[2] : a->ne[2];
    if (pos->type != TG_TYPE_I32 || pos->ne[0] < n_positions) return false;
    if (n_dims <= 0 || n_dims % 2 != 0 || n_offs < 0 || n_offs % 2 != 0 || n_offs > a->ne[0] - n_dims) return false;
    if (mode == TG_ROPE_VISION && (n_offs != 0 || 2 * (int64_t)n_dims != a->ne[0])) return false;
    if (is_multi(mode)) {
        int total = 0;
        for (int s = 11; s < 11 + N_SECTIONS; s++) {
            if (dst->op_params[s] < 0 || dst->op_params[s] > a->ne[0]) return false;
            total += dst->op_params[s];
        }
        /* ggml asserts one of the first three is above 0 */
        if (dst->op_params[11] + dst->op_params[12] + dst->op_params[13] <= 0 || total > a->ne[0]) return false;
    }
    const int64_t n_pairs = mode == TG_ROPE_VISION ? a->ne[0] / 2 : n_dims / 2;
    return !factors || (factors->type == TG_TYPE_F32 && factors->ne[0] >= n_pairs);
}

/* im2col: the patches of a convolution's input as rows, so that a mul_mat
 * with the kernel computes the convolution (ggml_conv_1d / ggml_conv_2d are
 * im2col + mul_mat).  ggml's layout and params: a is the kernel [KW, KH, IC,
 * OC] (only its shape is read), b the input [IW, IH, IC, N] (1-D: [IW, IC,
 * N]); params s0, s1, p0, p1, d0, d1, is_2D; the result row for output
 * position (ow, oh, n) holds the patch in (ic, kh, kw) order, zero outside
 * the input. */
#include "cpu-kernels.h"
#include "tg-impl.h" /* tg_conv_output_size: the rules' size, without int overflow */

struct im2col_params {
    int s0, s1, p0, p1, d0, d1;
    bool is_2d;
};

static struct im2col_params params_of(const struct tg_tensor *dst) {
    const int32_t *p = dst->op_params;
    return (struct im2col_params){p[0], p[1], p[2], p[3], p[4], p[5], p[6] == 1};
}

enum tg_status cpu_op_conv(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    const struct im2col_params p = params_of(dst);
    const int64_t KW = a->ne[0], KH = p.is_2d ? a->ne[1] : 1;
    const int64_t IW = b->ne[0], IH = p.is_2d ? b->ne[1] : 1, IC = p.is_2d ? b->ne[2] : b->ne[1];
    int64_t r0, r1;
    cpu_rows(tg_nrows(dst), x->ith, x->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t ow, i2, i3;
        cpu_unravel(r, dst, &ow, &i2, &i3);
        const int64_t oh = p.is_2d ? i2 : 0, n = p.is_2d ? i3 : i2;
        for (int64_t ic = 0; ic < IC; ic++) {
            for (int64_t kh = 0; kh < KH; kh++) {
                for (int64_t kw = 0; kw < KW; kw++) {
                    const int64_t iw = ow * p.s0 + kw * p.d0 - p.p0, ih = oh * p.s1 + kh * p.d1 - p.p1;
                    float v = 0.0f;
                    if (iw >= 0 && iw < IW && ih >= 0 && ih < IH) {
                        const void *in = p.is_2d ? cpu_elem(b, iw, ih, ic, n) : cpu_elem(b, iw, ic, n, 0);
                        v = cpu_load(in, b->type);
                    }
                    cpu_store(cpu_elem(dst, (ic * KH + kh) * KW + kw, ow, i2, i3), dst->type, v);
                }
            }
        }
    }
    return TG_OK;
}

bool cpu_supports_conv(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (dst->op != TG_OP_IM2COL || !a || !b || !cpu_is_float(b->type)) return false;
    if (dst->type != TG_TYPE_F32 && dst->type != TG_TYPE_F16) return false;
    const struct im2col_params p = params_of(dst);
    if (p.s0 < 1 || p.d0 < 1 || p.p0 < 0 || (p.is_2d && (p.s1 < 1 || p.d1 < 1 || p.p1 < 0))) return false;
    if (p.is_2d) {
        return a->ne[2] == b->ne[2] && dst->ne[0] == a->ne[0] * a->ne[1] * a->ne[2] &&
               dst->ne[1] == tg_conv_output_size(b->ne[0], a->ne[0], p.s0, p.p0, p.d0) &&
               dst->ne[2] == tg_conv_output_size(b->ne[1], a->ne[1], p.s1, p.p1, p.d1) && dst->ne[3] == b->ne[3];
    }
    return a->ne[1] == b->ne[1] && b->ne[3] == 1 && dst->ne[0] == a->ne[0] * a->ne[1] &&
           dst->ne[1] == tg_conv_output_size(b->ne[0], a->ne[0], p.s0, p.p0, p.d0) && dst->ne[2] == b->ne[2] &&
           dst->ne[3] == 1;
}

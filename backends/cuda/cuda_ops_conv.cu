/* im2col on the device, with the CPU's layout and params (backends/cpu/
 * cpu_ops_conv.c): one thread per result element, zero outside the input. */
#include "cuda_internal.cuh"

struct im2col_params {
    int s0, s1, p0, p1, d0, d1;
    bool is_2d;
};

static im2col_params im2col_params_of(const struct tg_tensor *node) {
    im2col_params p;
    p.s0 = tg_get_op_param_i32(node, 0);
    p.s1 = tg_get_op_param_i32(node, 1);
    p.p0 = tg_get_op_param_i32(node, 2);
    p.p1 = tg_get_op_param_i32(node, 3);
    p.d0 = tg_get_op_param_i32(node, 4);
    p.d1 = tg_get_op_param_i32(node, 5);
    p.is_2d = tg_get_op_param_i32(node, 6) == 1;
    return p;
}

/* Result element (k, ow, i2, i3): k = (ic * KH + kh) * KW + kw; (oh, n) =
 * (i2, i3) in 2-D, (0, i2) in 1-D. */
static __global__ void im2col_kernel(tg_cuda_view dst, tg_cuda_view b, int64_t KW, int64_t KH, im2col_params p,
                                     int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        const int64_t kw = c[0] % KW, kh = (c[0] / KW) % KH, ic = c[0] / (KW * KH);
        const int64_t oh = p.is_2d ? c[2] : 0, nn = p.is_2d ? c[3] : c[2];
        const int64_t iw = c[1] * p.s0 + kw * p.d0 - p.p0, ih = oh * p.s1 + kh * p.d1 - p.p1;
        const int64_t IW = b.ne[0], IH = p.is_2d ? b.ne[1] : 1;
        float v = 0.0f;
        if (iw >= 0 && iw < IW && ih >= 0 && ih < IH) {
            const int64_t off = p.is_2d ? tg_cuda_offset(b, iw, ih, ic, nn) : tg_cuda_offset(b, iw, ic, nn, 0);
            v = tg_cuda_load(b.data + off, b.type);
        }
        tg_cuda_store(dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]), dst.type, v);
    }
}

static int64_t conv_out(int64_t in, int64_t k, int s, int pad, int d) { return (in + 2 * pad - d * (k - 1) - 1) / s + 1; }

bool tg_cuda_supports_conv(const struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0], *b = node->src[1];
    if (node->op != TG_OP_IM2COL || !a || !b || !tg_cuda_is_float_type(b->type)) return false;
    if (node->type != TG_TYPE_F32 && node->type != TG_TYPE_F16) return false;
    const im2col_params p = im2col_params_of(node);
    if (p.s0 < 1 || p.d0 < 1 || p.p0 < 0 || (p.is_2d && (p.s1 < 1 || p.d1 < 1 || p.p1 < 0))) return false;
    if (p.is_2d) {
        return a->ne[2] == b->ne[2] && node->ne[0] == a->ne[0] * a->ne[1] * a->ne[2] &&
               node->ne[1] == conv_out(b->ne[0], a->ne[0], p.s0, p.p0, p.d0) &&
               node->ne[2] == conv_out(b->ne[1], a->ne[1], p.s1, p.p1, p.d1) && node->ne[3] == b->ne[3];
    }
    return a->ne[1] == b->ne[1] && b->ne[3] == 1 && node->ne[0] == a->ne[0] * a->ne[1] &&
           node->ne[1] == conv_out(b->ne[0], a->ne[0], p.s0, p.p0, p.d0) && node->ne[2] == b->ne[2] && node->ne[3] == 1;
}

enum tg_status tg_cuda_op_conv(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    const int64_t n = tg_nelements(node);
    if (n == 0) return TG_OK;
    const im2col_params p = im2col_params_of(node);
    const struct tg_tensor *a = node->src[0];
    im2col_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, ctx->stream>>>(tg_cuda_view_of(node), tg_cuda_view_of(node->src[1]),
                                                                       a->ne[0], p.is_2d ? a->ne[1] : 1, p, n);
    return tg_cuda_check_launch(node, "im2col");
}

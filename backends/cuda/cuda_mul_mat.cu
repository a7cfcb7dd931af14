/* mul_mat through cuBLAS.  dst[i, j] = sum_k a[k, i] * b[k, j] per 2-D slice;
 * in cuBLAS's column-major view that is C = A^T B with A = a (K x M), B = b
 * (K x N), C = dst (M x N).  f32 weights use f32 GEMM; f16 weights use f16
 * inputs with f32 accumulation (b rounded to f16, as ggml's CUDA backend does:
 * the CPU keeps b in f32, which is why mul_mat's bound is NMSE 5e-4).
 * Quantized weights are decoded into an f16 temporary and multiplied the same
 * way (as ggml's CUDA backend does for batches; the CPU instead quantizes b
 * to the weights' activation format: within the same bound).  Operands whose
 * rows are not unit-stride, and bf16 weights, are first copied into
 * contiguous temporaries on the stream. */
#include "cuda_internal.cuh"

static bool rows_are_unit_stride(const struct tg_tensor *t) {
    const size_t es = tg_type_size(t->type);
    return t->nb[0] == es && t->nb[1] % es == 0 && t->nb[2] % es == 0 && t->nb[3] % es == 0 &&
           t->nb[1] / es >= (size_t)t->ne[0];
}

bool tg_cuda_supports_mul_mat(const struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0];
    const struct tg_tensor *b = node->src[1];
    if (!a || !b || node->type != TG_TYPE_F32) return false;
    /* the Hadamard hint: the CPU transforms b without reading a, as ggml's CPU does */
    if (tg_get_op_param_i32(node, 1) == TG_HINT_SRC0_IS_HADAMARD) return false;
    const bool quantized = tg_type_is_quantized(a->type) && a->nb[0] == tg_type_size(a->type) &&
                           a->ne[0] % tg_blck_size(a->type) == 0;
    if (!(tg_cuda_is_float_type(a->type) || quantized) || !tg_cuda_is_float_type(b->type)) return false;
    if (a->ne[0] != b->ne[0] || node->ne[0] != a->ne[1] || node->ne[1] != b->ne[1] || node->ne[2] != b->ne[2] ||
        node->ne[3] != b->ne[3]) {
        return false;
    }
    if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    /* the result is written in place by cuBLAS: unit-stride rows needed */
    if (!rows_are_unit_stride(node) || node->nb[1] / 4 < (size_t)node->ne[0]) return false;
    /* cuBLAS takes int dimensions and leading dimensions */
    const int64_t lim = 0x7fffffffLL;
    return a->ne[0] < lim && a->ne[1] < lim && b->ne[1] < lim && (int64_t)(node->nb[1] / 4) < lim &&
           (quantized || (int64_t)(a->nb[1] / tg_type_size(a->type)) < lim) &&
           (int64_t)(b->nb[1] / tg_type_size(b->type)) < lim;
}

/* A contiguous operand: either the tensor itself or a temporary copy. */
struct gemm_operand {
    const char *data;
    cudaDataType_t type;
    size_t es;
    int64_t ld;
    int64_t nb2, nb3;
    void *temp;
};

static enum tg_status prepare_operand(tg_cuda_backend_ctx *ctx, const struct tg_tensor *t, enum tg_type want,
                                      struct gemm_operand *op) {
    op->temp = NULL;
    op->type = want == TG_TYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
    op->es = tg_type_size(want);
    if (t->type == want && rows_are_unit_stride(t)) {
        op->data = (const char *)t->data;
        op->ld = (int64_t)(t->nb[1] / op->es);
        op->nb2 = (int64_t)t->nb[2];
        op->nb3 = (int64_t)t->nb[3];
        return TG_OK;
    }
    const size_t bytes = (size_t)tg_nelements(t) * op->es;
    enum tg_status st = tg_cuda_scratch_alloc(ctx, &op->temp, bytes, t, "a contiguous copy for mul_mat");
    if (st != TG_OK) return st;
    st = tg_cuda_convert_to_contiguous(ctx->stream, t, op->temp, want);
    op->data = (const char *)op->temp;
    op->ld = t->ne[0];
    op->nb2 = (int64_t)(op->es * (size_t)t->ne[0] * (size_t)t->ne[1]);
    op->nb3 = op->nb2 * t->ne[2];
    return st;
}

enum tg_status tg_cuda_op_mul_mat(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0];
    const struct tg_tensor *b = node->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    if (tg_nelements(node) == 0) return TG_OK;
    cudaStream_t s = ctx->stream;
    if (K == 0) {
        /* empty inner dimension: the product is zero everywhere */
        for (int64_t i3 = 0; i3 < node->ne[3]; i3++) {
            for (int64_t i2 = 0; i2 < node->ne[2]; i2++) {
                char *p = (char *)node->data + i2 * node->nb[2] + i3 * node->nb[3];
                cudaMemset2DAsync(p, node->nb[1], 0, (size_t)M * 4, (size_t)N, s);
            }
        }
        return tg_cuda_check_launch(node, "mul_mat (empty K)");
    }
    const enum tg_type compute = a->type == TG_TYPE_F16 || tg_type_is_quantized(a->type) ? TG_TYPE_F16 : TG_TYPE_F32;
    struct gemm_operand A, B;
    B.temp = NULL;
    enum tg_status st = prepare_operand(ctx, a, compute, &A);
    if (st == TG_OK) st = prepare_operand(ctx, b, compute, &B);
    if (st == TG_OK) {
        const float alpha = 1.0f, beta = 0.0f;
        const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
        const int ldc = (int)(node->nb[1] / 4);
        for (int64_t i13 = 0; i13 < b->ne[3] && st == TG_OK; i13++) {
            for (int64_t i12 = 0; i12 < b->ne[2]; i12++) {
                /* broadcast as the CPU does: consecutive b slices share an a slice */
                const char *pa = A.data + (i12 / r2) * A.nb2 + (i13 / r3) * A.nb3;
                const char *pb = B.data + i12 * B.nb2 + i13 * B.nb3;
                float *pc = (float *)((char *)node->data + i12 * node->nb[2] + i13 * node->nb[3]);
                cublasStatus_t cs = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, pa,
                                                 A.type, (int)A.ld, pb, B.type, (int)B.ld, &beta, pc, CUDA_R_32F, ldc,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (cs != CUBLAS_STATUS_SUCCESS) {
                    st = tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s': cuBLAS GEMM failed (%s)", node->name,
                                 cublasGetStatusString(cs));
                    break;
                }
            }
        }
    }
    tg_cuda_scratch_free(ctx, A.temp);
    tg_cuda_scratch_free(ctx, B.temp);
    if (st != TG_OK) return st;
    return tg_cuda_check_launch(node, "mul_mat");
}

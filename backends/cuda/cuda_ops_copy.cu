/* Data movement kernels: cpy/cont/dup (with type conversion, any strides on
 * both sides), get_rows and set_rows.  Same-typed copies move raw element bytes
 * (whole blocks for quantized types) so they are exact for every type, i32
 * included.  Quantized sources are decoded an element at a time.  Encoding
 * into a quantized type is refused: the device encoder disagreed with the
 * CPU's on an H200 (tests/cuda/test_cuda_backend.c says which ops), so the
 * scheduler leaves those copies to the CPU. */
#include "cuda_quants.cuh"

static bool is_copy_type(enum tg_type t) {
    return t == TG_TYPE_F32 || t == TG_TYPE_F16 || t == TG_TYPE_BF16 || t == TG_TYPE_I32;
}

/* Element k of src in row-major order goes to element k of dst: shapes may
 * differ as long as the counts agree (ggml's cpy). */
static __global__ void copy_kernel(tg_cuda_view dst, tg_cuda_view src, int64_t es_same, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t cs[4], cd[4];
        tg_cuda_unravel(i, src.ne, cs);
        tg_cuda_unravel(i, dst.ne, cd);
        const char *from = src.data + tg_cuda_offset(src, cs[0], cs[1], cs[2], cs[3]);
        char *to = dst.data + tg_cuda_offset(dst, cd[0], cd[1], cd[2], cd[3]);
        if (es_same > 0) {
            for (int64_t k = 0; k < es_same; k++) to[k] = from[k];
        } else {
            tg_cuda_store(to, dst.type, tg_cuda_load(from, src.type));
        }
    }
}

/* Element k of a quantized src to element k of a float dst. */
static __global__ void copy_from_quant_kernel(tg_cuda_view dst, tg_cuda_view src, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t cs[4], cd[4];
        tg_cuda_unravel(i, src.ne, cs);
        tg_cuda_unravel(i, dst.ne, cd);
        const char *row = src.data + tg_cuda_offset(src, 0, cs[1], cs[2], cs[3]);
        tg_cuda_store(dst.data + tg_cuda_offset(dst, cd[0], cd[1], cd[2], cd[3]), dst.type,
                      tg_cuda_dequant(row, src.type, cs[0]));
    }
}

/* Same quantized type: block k of src (logical order) to block k of dst. */
static __global__ void copy_blocks_kernel(tg_cuda_view dst, tg_cuda_view src, int64_t blk, int64_t size, int64_t n_blocks) {
    for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < n_blocks; b += (int64_t)gridDim.x * blockDim.x) {
        int64_t cs[4], cd[4];
        tg_cuda_unravel(b * blk, src.ne, cs);
        tg_cuda_unravel(b * blk, dst.ne, cd);
        const char *from = src.data + (cs[0] / blk) * src.nb[0] + cs[1] * src.nb[1] + cs[2] * src.nb[2] + cs[3] * src.nb[3];
        char *to = dst.data + (cd[0] / blk) * dst.nb[0] + cd[1] * dst.nb[1] + cd[2] * dst.nb[2] + cd[3] * dst.nb[3];
        for (int64_t k = 0; k < size; k++) to[k] = from[k];
    }
}

static __device__ __forceinline__ int64_t load_index(const tg_cuda_view &idx, int64_t i0, int64_t i1, int64_t i2) {
    const char *p = idx.data + tg_cuda_offset(idx, i0, i1, i2, 0);
    return idx.type == TG_TYPE_I32 ? (int64_t) * (const int32_t *)p : *(const int64_t *)p;
}

/* dst row (j, i1, i2) is src row (rows[j, i1, i2], i1, i2); an index outside
 * the source gives a row of zeros, as on the CPU.  Same-typed rows (i32
 * included) move their bits; others convert to dst's f32. */
static __global__ void get_rows_kernel(tg_cuda_view dst, tg_cuda_view src, tg_cuda_view rows, bool quantized, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, dst.ne, c);
        const int64_t r = load_index(rows, c[1], c[2], c[3]);
        char *to = dst.data + tg_cuda_offset(dst, c[0], c[1], c[2], c[3]);
        if (r < 0 || r >= src.ne[1]) {
            tg_cuda_store(to, dst.type, 0.0f);
            continue;
        }
        if (quantized) {
            tg_cuda_store(to, dst.type, tg_cuda_dequant(src.data + tg_cuda_offset(src, 0, r, c[2], c[3]), src.type, c[0]));
            continue;
        }
        const char *from = src.data + tg_cuda_offset(src, c[0], r, c[2], c[3]);
        if (src.type == TG_TYPE_I32) {
            *(int32_t *)to = *(const int32_t *)from;
        } else {
            tg_cuda_store(to, dst.type, tg_cuda_load(from, src.type));
        }
    }
}

/* Destination row of new row (j, i2, i3): rows[j, i2 % R1, i3 % R2], or -1
 * when out of range (such rows write nothing, as on the CPU). */
static __device__ __forceinline__ int64_t set_rows_target(const tg_cuda_view &rows, int64_t j, int64_t i2, int64_t i3,
                                                          int64_t dst_ne1) {
    const int64_t r = load_index(rows, j, i2 % rows.ne[1], i3 % rows.ne[2]);
    return r >= 0 && r < dst_ne1 ? r : -1;
}

/* The CPU writes new rows in order, so where indices repeat the last one wins.
 * Pass 1 finds, for every destination row, the last new row aimed at it
 * (winner starts at -1); pass 2 writes only those rows.  Deterministic, and
 * equal to the CPU, whatever the indices. */
static __global__ void set_rows_winner_kernel(int32_t *winner, tg_cuda_view src, tg_cuda_view rows, int64_t dst_ne1,
                                              int64_t n_rows) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = i % src.ne[1], i2 = (i / src.ne[1]) % src.ne[2], i3 = i / (src.ne[1] * src.ne[2]);
        const int64_t r = set_rows_target(rows, j, i2, i3, dst_ne1);
        if (r >= 0) atomicMax(&winner[r + dst_ne1 * (i2 + src.ne[2] * i3)], (int32_t)j);
    }
}

/* winner NULL: the caller knows no destination row is aimed at twice. */
static __global__ void set_rows_kernel(tg_cuda_view dst, tg_cuda_view src, tg_cuda_view rows, const int32_t *winner,
                                       int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        tg_cuda_unravel(i, src.ne, c);
        const int64_t r = set_rows_target(rows, c[1], c[2], c[3], dst.ne[1]);
        if (r < 0) continue;
        if (winner && winner[r + dst.ne[1] * (c[2] + src.ne[2] * c[3])] != (int32_t)c[1]) continue;
        const char *from = src.data + tg_cuda_offset(src, c[0], c[1], c[2], c[3]);
        tg_cuda_store(dst.data + tg_cuda_offset(dst, c[0], r, c[2], c[3]), dst.type, tg_cuda_load(from, src.type));
    }
}

/* A quantized tensor's rows hold whole blocks, packed. */
static bool blocks_packed(const struct tg_tensor *t) {
    return !tg_type_is_quantized(t->type) || (t->ne[0] % tg_blck_size(t->type) == 0 && t->nb[0] == tg_type_size(t->type));
}

bool tg_cuda_supports_copy(const struct tg_tensor *node) {
    const struct tg_tensor *a = node->src[0];
    const struct tg_tensor *b = node->src[1];
    if (!a) return false;
    switch (node->op) {
    case TG_OP_CPY:
    case TG_OP_CONT:
    case TG_OP_DUP:
        if (tg_nelements(a) != tg_nelements(node)) return false;
        if (tg_type_is_quantized(a->type) || tg_type_is_quantized(node->type)) {
            if (!blocks_packed(a) || !blocks_packed(node)) return false;
            if (a->type == node->type) return true;
            return tg_type_is_quantized(a->type) && tg_cuda_is_float_type(node->type);
        }
        return is_copy_type(a->type) && is_copy_type(node->type);
    case TG_OP_GET_ROWS:
        if (!b || (b->type != TG_TYPE_I32 && b->type != TG_TYPE_I64) || b->ne[3] != 1) return false;
        if (node->ne[0] != a->ne[0] || node->ne[1] != b->ne[0] || node->ne[2] != b->ne[1] || node->ne[3] != b->ne[2]) {
            return false;
        }
        if (a->ne[2] != b->ne[1] || a->ne[3] != b->ne[2]) return false;
        if (a->type == TG_TYPE_I32) return node->type == TG_TYPE_I32;
        if (tg_type_is_quantized(a->type)) return blocks_packed(a) && node->type == TG_TYPE_F32;
        return tg_cuda_is_float_type(a->type) && node->type == TG_TYPE_F32;
    case TG_OP_SET_ROWS: {
        if (!b || (b->type != TG_TYPE_I32 && b->type != TG_TYPE_I64) || b->ne[3] != 1) return false;
        if (!tg_cuda_is_float_type(a->type)) return false;
        if (!tg_cuda_is_float_type(node->type)) return false;
        /* the winner pass ranks new rows in int32 */
        return a->ne[0] == node->ne[0] && a->ne[1] == b->ne[0] && a->ne[2] % b->ne[1] == 0 &&
               a->ne[3] % b->ne[2] == 0 && a->ne[2] == node->ne[2] && a->ne[3] == node->ne[3] &&
               a->ne[1] < 0x7fffffffLL;
    }
    default:
        return false;
    }
}

static enum tg_status launch_copy(cudaStream_t stream, const struct tg_tensor *src, tg_cuda_view dst) {
    const int64_t n = tg_nelements(src);
    if (n == 0) return TG_OK;
    tg_cuda_view sv = tg_cuda_view_of(src);
    const int64_t es_same = (int)src->type == dst.type ? (int64_t)tg_type_size(src->type) : 0;
    copy_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, stream>>>(dst, sv, es_same, n);
    return TG_OK;
}

enum tg_status tg_cuda_convert_to_contiguous(cudaStream_t stream, const struct tg_tensor *src, void *dst_data,
                                             enum tg_type dst_type) {
    tg_cuda_view dst;
    dst.data = (char *)dst_data;
    dst.type = (int)dst_type;
    const size_t es = tg_type_size(dst_type);
    for (int i = 0; i < 4; i++) dst.ne[i] = src->ne[i];
    dst.nb[0] = (int64_t)es;
    for (int i = 1; i < 4; i++) dst.nb[i] = dst.nb[i - 1] * dst.ne[i - 1];
    if (tg_type_is_quantized(src->type)) {
        const int64_t n = tg_nelements(src);
        if (n > 0) copy_from_quant_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, stream>>>(dst, tg_cuda_view_of(src), n);
    } else {
        launch_copy(stream, src, dst);
    }
    return tg_cuda_check_launch(src, "contiguous conversion");
}

enum tg_status tg_cuda_op_copy(tg_cuda_backend_ctx *ctx, struct tg_tensor *node) {
    cudaStream_t s = ctx->stream;
    const struct tg_tensor *a = node->src[0];
    switch (node->op) {
    case TG_OP_CPY:
    case TG_OP_CONT:
    case TG_OP_DUP: {
        const int64_t n = tg_nelements(a);
        if (n == 0) return TG_OK;
        const tg_cuda_view dst = tg_cuda_view_of(node), src = tg_cuda_view_of(a);
        if (tg_type_is_quantized(a->type) && a->type == node->type) {
            const int64_t blk = tg_blck_size(a->type), n_blocks = n / blk;
            copy_blocks_kernel<<<tg_cuda_blocks_for(n_blocks, 256), 256, 0, s>>>(dst, src, blk,
                                                                                 (int64_t)tg_type_size(a->type), n_blocks);
        } else if (tg_type_is_quantized(a->type)) {
            copy_from_quant_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, s>>>(dst, src, n);
        } else {
            launch_copy(s, a, dst);
        }
        break;
    }
    case TG_OP_GET_ROWS: {
        const int64_t n = tg_nelements(node);
        if (n == 0) return TG_OK;
        get_rows_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, s>>>(tg_cuda_view_of(node), tg_cuda_view_of(a),
                                                                   tg_cuda_view_of(node->src[1]),
                                                                   tg_type_is_quantized(a->type), n);
        break;
    }
    case TG_OP_SET_ROWS: {
        const int64_t n = tg_nelements(a);
        if (n == 0) return TG_OK;
        const tg_cuda_view dst = tg_cuda_view_of(node), src = tg_cuda_view_of(a), rows = tg_cuda_view_of(node->src[1]);
        int32_t *winner = NULL;
        if (a->ne[1] > 1) {
            /* several new rows per slice may share an index: rank them first */
            const size_t bytes = (size_t)node->ne[1] * (size_t)a->ne[2] * (size_t)a->ne[3] * sizeof(int32_t);
            enum tg_status st = tg_cuda_scratch_alloc(ctx, (void **)&winner, bytes, node, "set_rows' row ranking");
            if (st != TG_OK) return st;
            cudaMemsetAsync(winner, 0xff, bytes, s); /* -1: no row yet */
            const int64_t n_rows = a->ne[1] * a->ne[2] * a->ne[3];
            set_rows_winner_kernel<<<tg_cuda_blocks_for(n_rows, 256), 256, 0, s>>>(winner, src, rows, node->ne[1], n_rows);
        }
        set_rows_kernel<<<tg_cuda_blocks_for(n, 256), 256, 0, s>>>(dst, src, rows, winner, n);
        tg_cuda_scratch_free(ctx, winner);
        break;
    }
    default:
        return tg_fail(TG_ERR_UNSUPPORTED, "tensor '%s': op %s has no CUDA copy kernel", node->name,
                       tg_op_name(node->op));
    }
    return tg_cuda_check_launch(node, tg_op_name(node->op));
}

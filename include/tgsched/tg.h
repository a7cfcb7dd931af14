/* tgsched core: types, tensors, metadata contexts, op constructors, graphs.
 *
 * The tensor model follows ggml's so that `.tg` dumps of real ggml graphs load
 * unchanged: ne[4] element counts, nb[4] byte strides, op + 16 op_params words,
 * flags, up to TG_MAX_SRC sources, view_src + view_offs, data + buffer, a name.
 *
 * Errors: functions that can fail return `enum tg_status` (or NULL) and leave a
 * thread-local message readable with tg_last_error().  Op constructors accept
 * NULL sources and return NULL, so a chain of constructors needs one check. */
#ifndef TG_H
#define TG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 4
#define TG_MAX_SRC 10
#define TG_MAX_OP_PARAMS 16 /* 32-bit words */
#define TG_MAX_NAME 64

enum tg_status {
    TG_OK = 0,
    TG_ERR_INVALID = 1,       /* bad argument or malformed input */
    TG_ERR_ALLOC = 2,         /* a buffer or host allocation failed */
    TG_ERR_STALE = 3,         /* tensor memory was handed to a later plan */
    TG_ERR_UNSUPPORTED = 4,   /* no backend/kernel can do this */
    TG_ERR_ABORTED = 5,       /* cancelled by an eval callback */
    TG_ERR_NEEDS_RESERVE = 6, /* graph structure changed: call reserve first */
    TG_ERR_IO = 7,            /* file could not be read or written */
    TG_ERR_DEVICE = 8,        /* a device or driver call failed (the message has its error) */
};

/* Every function returning enum tg_status is declared TG_NODISCARD: dropping
 * the status is a compiler warning.  Success is TG_OK (0), unlike ggml's bool
 * results (true on success): see docs/porting-from-ggml.md. */
#if defined(__GNUC__) || defined(__clang__)
#define TG_NODISCARD __attribute__((warn_unused_result))
#else
#define TG_NODISCARD
#endif

const char *tg_status_name(enum tg_status s);
/* Message of the last failure on this thread ("" when none).  The scheduler's
 * and graph allocator's entry points (reserve, reserve_size, alloc_graph,
 * graph_compute) clear it when they start, so after their success it is "";
 * read it right after a call returned a status other than TG_OK. */
const char *tg_last_error(void);
/* Record a failure: sets the thread's message and returns `s` for chaining. */
enum tg_status tg_fail(enum tg_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tg_clear_error(void);

/* Log hook: the library prints debug output (TG_SCHED_DEBUG) through it. */
typedef void (*tg_log_fn)(const char *text, void *user);
void tg_set_log(tg_log_fn fn, void *user);
/* Print through the log hook (stderr when none is set). */
void tg_logf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- types ---------------------------------------------------------------- */

enum tg_type {
    TG_TYPE_F32,
    TG_TYPE_F16,
    TG_TYPE_BF16,
    TG_TYPE_I32,
    TG_TYPE_I64,
    TG_TYPE_I8,
    TG_TYPE_Q4_0,
    TG_TYPE_Q4_1,
    TG_TYPE_Q5_0,
    TG_TYPE_Q5_1,
    TG_TYPE_Q8_0,
    TG_TYPE_Q4_K,
    TG_TYPE_Q6_K,
    TG_TYPE_COUNT
};

const char *tg_type_name(enum tg_type t);
/* TG_TYPE_COUNT when the name is unknown. */
enum tg_type tg_type_from_name(const char *name);
size_t tg_type_size(enum tg_type t); /* bytes per block */
int64_t tg_blck_size(enum tg_type t); /* elements per block */
bool tg_type_is_quantized(enum tg_type t);

/* fp16 / bf16 conversion (round to nearest even). */
uint16_t tg_fp32_to_fp16(float f);
float tg_fp16_to_fp32(uint16_t h);
uint16_t tg_fp32_to_bf16(float f);
float tg_bf16_to_fp32(uint16_t h);

/* ---- ops ------------------------------------------------------------------ */

/* ggml's op list and spelling (lower-case names are the `.tg` spelling). */
#define TG_OP_LIST(X) \
    X(NONE, "none") X(DUP, "dup") X(ADD, "add") X(ADD_ID, "add_id") X(ADD1, "add1") \
    X(ACC, "acc") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(SQR, "sqr") \
    X(SQRT, "sqrt") X(LOG, "log") X(SIN, "sin") X(COS, "cos") X(SUM, "sum") \
    X(SUM_ROWS, "sum_rows") X(CUMSUM, "cumsum") X(MEAN, "mean") X(ARGMAX, "argmax") \
    X(COUNT_EQUAL, "count_equal") X(REPEAT, "repeat") X(REPEAT_BACK, "repeat_back") \
    X(CONCAT, "concat") X(SILU_BACK, "silu_back") X(NORM, "norm") \
    X(RMS_NORM, "rms_norm") X(RMS_NORM_BACK, "rms_norm_back") \
    X(GROUP_NORM, "group_norm") X(L2_NORM, "l2_norm") X(MUL_MAT, "mul_mat") \
    X(MUL_MAT_ID, "mul_mat_id") X(OUT_PROD, "out_prod") X(SCALE, "scale") \
    X(SET, "set") X(CPY, "cpy") X(CONT, "cont") X(RESHAPE, "reshape") \
    X(VIEW, "view") X(PERMUTE, "permute") X(TRANSPOSE, "transpose") \
    X(GET_ROWS, "get_rows") X(GET_ROWS_BACK, "get_rows_back") X(SET_ROWS, "set_rows") \
    X(DIAG, "diag") X(DIAG_MASK_INF, "diag_mask_inf") X(DIAG_MASK_ZERO, "diag_mask_zero") \
    X(SOFT_MAX, "soft_max") X(SOFT_MAX_BACK, "soft_max_back") X(ROPE, "rope") \
    X(ROPE_BACK, "rope_back") X(CLAMP, "clamp") X(CONV_TRANSPOSE_1D, "conv_transpose_1d") \
    X(IM2COL, "im2col") X(IM2COL_BACK, "im2col_back") X(CONV_2D, "conv_2d") \
    X(CONV_2D_DW, "conv_2d_dw") X(CONV_TRANSPOSE_2D, "conv_transpose_2d") \
    X(POOL_1D, "pool_1d") X(POOL_2D, "pool_2d") X(POOL_2D_BACK, "pool_2d_back") \
    X(UPSCALE, "upscale") X(PAD, "pad") X(PAD_REFLECT_1D, "pad_reflect_1d") \
    X(ROLL, "roll") X(ARANGE, "arange") X(TIMESTEP_EMBEDDING, "timestep_embedding") \
    X(ARGSORT, "argsort") X(LEAKY_RELU, "leaky_relu") X(TRI, "tri") X(FILL, "fill") \
    X(FLASH_ATTN_EXT, "flash_attn_ext") X(FLASH_ATTN_BACK, "flash_attn_back") \
    X(SSM_CONV, "ssm_conv") X(SSM_SCAN, "ssm_scan") X(WIN_PART, "win_part") \
    X(WIN_UNPART, "win_unpart") X(GET_REL_POS, "get_rel_pos") \
    X(ADD_REL_POS, "add_rel_pos") X(RWKV_WKV6, "rwkv_wkv6") \
    X(GATED_LINEAR_ATTN, "gated_linear_attn") X(RWKV_WKV7, "rwkv_wkv7") \
    X(UNARY, "unary") X(MAP_CUSTOM1, "map_custom1") X(MAP_CUSTOM2, "map_custom2") \
    X(MAP_CUSTOM3, "map_custom3") X(CUSTOM, "custom") \
    X(CROSS_ENTROPY_LOSS, "cross_entropy_loss") \
    X(CROSS_ENTROPY_LOSS_BACK, "cross_entropy_loss_back") \
    X(OPT_STEP_ADAMW, "opt_step_adamw") X(OPT_STEP_SGD, "opt_step_sgd") X(GLU, "glu")

enum tg_op {
#define TG_OP_ENUM_(e, s) TG_OP_##e,
    TG_OP_LIST(TG_OP_ENUM_)
#undef TG_OP_ENUM_
    TG_OP_COUNT
};

const char *tg_op_name(enum tg_op op);
/* TG_OP_COUNT when the name is unknown. */
enum tg_op tg_op_from_name(const char *name);
/* True for ops whose result may share its first eligible source's memory
 * (docs/allocator.md, "The rules": in-place reuse); kernels of these ops must
 * not assume non-aliasing. */
bool tg_op_can_inplace(enum tg_op op);
/* True for view, reshape, permute, transpose: no computation, result is a view. */
bool tg_op_is_view(enum tg_op op);

/* ggml's numbering (the `.tg` params word); xielu's parameters: tg_xielu. */
enum tg_unary_op {
    TG_UNARY_ABS, TG_UNARY_SGN, TG_UNARY_NEG, TG_UNARY_STEP, TG_UNARY_TANH,
    TG_UNARY_ELU, TG_UNARY_RELU, TG_UNARY_SIGMOID, TG_UNARY_GELU,
    TG_UNARY_GELU_QUICK, TG_UNARY_SILU, TG_UNARY_HARDSWISH,
    TG_UNARY_HARDSIGMOID, TG_UNARY_EXP, TG_UNARY_EXPM1, TG_UNARY_SOFTPLUS,
    TG_UNARY_GELU_ERF, TG_UNARY_XIELU, TG_UNARY_FLOOR, TG_UNARY_CEIL,
    TG_UNARY_ROUND, TG_UNARY_TRUNC, TG_UNARY_COUNT
};

/* swiglu_oai reads alpha (params word 2) and limit (word 3). */
enum tg_glu_op {
    TG_GLU_REGLU, TG_GLU_GEGLU, TG_GLU_SWIGLU, TG_GLU_SWIGLU_OAI, TG_GLU_GEGLU_ERF,
    TG_GLU_GEGLU_QUICK, TG_GLU_COUNT
};

/* ggml's GGML_ROPE_TYPE_*: the multimodal modes (tg_rope_multi) take four
 * positions per token and pair dims as neox does. */
enum tg_rope_mode { TG_ROPE_NORMAL = 0, TG_ROPE_NEOX = 2, TG_ROPE_MROPE = 8, TG_ROPE_VISION = 24, TG_ROPE_IMROPE = 40 };

/* ---- tensors -------------------------------------------------------------- */

enum tg_tensor_flag {
    TG_FLAG_INPUT = 1,
    TG_FLAG_OUTPUT = 2,
    TG_FLAG_PARAM = 4,
    TG_FLAG_LOSS = 8,
    /* a node in the graph, planned and scheduled, that no backend computes:
     * ggml's nodes without GGML_TENSOR_FLAG_COMPUTE (the branches
     * ggml_build_forward_select leaves out, ggml_build_forward_order) */
    TG_FLAG_NO_COMPUTE = 32,
};

struct tg_buffer;

/* Library-private marks a tensor carries for the graph allocator and the
 * scheduler.  Users never read or write them.  Each is only a hint that
 * spares a hash lookup on the per-token paths, verified before use, so a
 * tensor shared by several allocators or schedulers stays correct. */
struct tg_tensor_private {
    uint64_t alloc_stamp; /* the graph allocator's last replay check: its pass and the tensor's graph position */
    uint64_t sched_stamp; /* the scheduler: the schedule's epoch and the tensor's record index */
    uint64_t plan_hint;   /* the graph allocator's last planning pass: the tensor's entry in its table */
};

struct tg_tensor {
    /* Field order follows the per-token replay checks, which read type, op,
     * flags, shape and strides first (impl/tg-impl.h asserts the layout they
     * rely on). */
    enum tg_type type;
    enum tg_op op;
    int32_t flags;
    int64_t ne[TG_MAX_DIMS]; /* elements per dimension, ne[0] innermost */
    size_t nb[TG_MAX_DIMS];  /* stride in bytes per dimension */

    struct tg_tensor *src[TG_MAX_SRC];

    struct tg_tensor *view_src; /* root tensor of a view (never an intermediate view) */
    size_t view_offs;

    void *data;               /* address in its buffer (device address for devices) */
    struct tg_buffer *buffer; /* NULL until bound */
    /* Generation of `buffer` when this tensor was bound; a compute buffer bumps
     * its generation whenever a new plan is bound into it, which makes the
     * tensors of older plans stale (TG_ERR_STALE instead of silent corruption). */
    uint64_t bind_generation;
    void *extra; /* backend-private per-tensor data */
    struct tg_tensor_private private_; /* library-private: never read or write */

    int32_t op_params[TG_MAX_OP_PARAMS];

    char name[TG_MAX_NAME];
};

size_t tg_nbytes(const struct tg_tensor *t);     /* ggml's rule, any strides */
size_t tg_row_size(enum tg_type type, int64_t ne0);
int64_t tg_nelements(const struct tg_tensor *t);
int64_t tg_nrows(const struct tg_tensor *t);
bool tg_is_contiguous(const struct tg_tensor *t);
bool tg_is_permuted(const struct tg_tensor *t);
bool tg_is_view(const struct tg_tensor *t); /* view_src != NULL */
bool tg_are_same_shape(const struct tg_tensor *a, const struct tg_tensor *b);
bool tg_are_same_layout(const struct tg_tensor *a, const struct tg_tensor *b); /* type, ne, nb */
/* b can be broadcast to a: a->ne[i] % b->ne[i] == 0 for all i. */
bool tg_can_repeat(const struct tg_tensor *b, const struct tg_tensor *a);

void tg_set_name(struct tg_tensor *t, const char *name);
void tg_format_name(struct tg_tensor *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tg_set_input(struct tg_tensor *t);
void tg_set_output(struct tg_tensor *t);
void tg_set_param(struct tg_tensor *t);

int32_t tg_get_op_param_i32(const struct tg_tensor *t, int i);
float tg_get_op_param_f32(const struct tg_tensor *t, int i);
void tg_set_op_param_i32(struct tg_tensor *t, int i, int32_t v);
void tg_set_op_param_f32(struct tg_tensor *t, int i, float v);

/* Element access for host-resident f32/f16/bf16/i32/i64/i8 tensors (tests, tools). */
float tg_get_f32_nd(const struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void tg_set_f32_nd(struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);

/* ---- contexts: arenas of tensor metadata ----------------------------------- */

struct tg_context_params {
    size_t mem_size;  /* bytes of host data for tensors when !no_alloc */
    bool no_alloc;    /* metadata only: data is bound later by an allocator */
};

struct tg_context;
struct tg_context *tg_context_new(struct tg_context_params params);
void tg_context_free(struct tg_context *ctx);
bool tg_context_no_alloc(const struct tg_context *ctx);
size_t tg_context_used_mem(const struct tg_context *ctx);
int tg_context_n_tensors(const struct tg_context *ctx);
/* Tensors in creation order (for static allocation). */
struct tg_tensor *tg_context_first_tensor(const struct tg_context *ctx);
struct tg_tensor *tg_context_next_tensor(const struct tg_context *ctx, const struct tg_tensor *t);
/* Look a tensor up by name (first match), NULL when absent. */
struct tg_tensor *tg_context_get_tensor(const struct tg_context *ctx, const char *name);

/* New tensors.  ne has n_dims entries (1..4), the rest are 1. */
struct tg_tensor *tg_new_tensor(struct tg_context *ctx, enum tg_type type, int n_dims, const int64_t *ne);
struct tg_tensor *tg_new_tensor_1d(struct tg_context *ctx, enum tg_type type, int64_t ne0);
struct tg_tensor *tg_new_tensor_2d(struct tg_context *ctx, enum tg_type type, int64_t ne0, int64_t ne1);
struct tg_tensor *tg_new_tensor_3d(struct tg_context *ctx, enum tg_type type, int64_t ne0, int64_t ne1, int64_t ne2);
struct tg_tensor *tg_new_tensor_4d(struct tg_context *ctx, enum tg_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct tg_tensor *tg_dup_tensor(struct tg_context *ctx, const struct tg_tensor *src); /* same type and shape, no data */
/* A tensor with explicit strides, op and sources, no checks beyond size
 * overflow: used by the `.tg` reader and the fuzz decoder, which check
 * structure themselves. */
struct tg_tensor *tg_new_tensor_raw(struct tg_context *ctx, enum tg_type type, const int64_t ne[4], const size_t nb[4]);

/* The rules of t's op hold (the checks ggml's constructors assert, and the
 * result type, shape, strides and view they make): TG_OK, or TG_ERR_INVALID
 * naming the tensor, its op and the rule.  Every constructor below and the
 * `.tg` reader apply it; use it on tensors made with tg_new_tensor_raw. */
TG_NODISCARD enum tg_status tg_op_validate(const struct tg_tensor *t);

/* ---- op constructors (ggml semantics; results are new tensors) -------------
 * Binary element-wise ops broadcast b over a (tg_can_repeat(b, a)). */
struct tg_tensor *tg_add(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b);
struct tg_tensor *tg_sub(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b);
struct tg_tensor *tg_mul(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b);
struct tg_tensor *tg_div(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b);
struct tg_tensor *tg_add1(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b); /* b: 1 element */
struct tg_tensor *tg_scale(struct tg_context *ctx, struct tg_tensor *a, float s);
struct tg_tensor *tg_scale_bias(struct tg_context *ctx, struct tg_tensor *a, float s, float bias);
struct tg_tensor *tg_sqr(struct tg_context *ctx, struct tg_tensor *a);
struct tg_tensor *tg_sqrt(struct tg_context *ctx, struct tg_tensor *a);
struct tg_tensor *tg_log(struct tg_context *ctx, struct tg_tensor *a);
struct tg_tensor *tg_fill(struct tg_context *ctx, struct tg_tensor *a, float v);
struct tg_tensor *tg_unary(struct tg_context *ctx, struct tg_tensor *a, enum tg_unary_op op);
/* xielu (ggml_xielu): x > 0: ap x^2 + beta x, else (expm1(min(x, eps)) - x) an + beta x, with
 * ap = softplus(alpha_p) and an = beta + softplus(alpha_n), stored so in params 1-4 (an, ap, beta, eps). */
struct tg_tensor *tg_xielu(struct tg_context *ctx, struct tg_tensor *a, float alpha_n, float alpha_p, float beta,
                           float eps);
/* Fused form: a holds both halves along ne0 (result ne0 = a->ne0/2). */
struct tg_tensor *tg_glu(struct tg_context *ctx, struct tg_tensor *a, enum tg_glu_op op, bool swapped);
/* Split form: activation(a) * b. */
struct tg_tensor *tg_glu_split(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, enum tg_glu_op op);
/* swiglu_oai (split form when b, else fused): min(a, limit) * sigmoid(alpha * .) * (clamp(b, +-limit) + 1). */
struct tg_tensor *tg_swiglu_oai(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, float alpha, float limit);
struct tg_tensor *tg_rms_norm(struct tg_context *ctx, struct tg_tensor *a, float eps);
struct tg_tensor *tg_norm(struct tg_context *ctx, struct tg_tensor *a, float eps);
/* mask may be NULL (f32 or f16, broadcast over rows/dims 2-3 as ggml). */
struct tg_tensor *tg_soft_max(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *mask, float scale, float max_bias);
/* Attention sinks for a soft_max or flash_attn_ext result: an f32 logit per
 * head that joins the normalisation (ggml_soft_max_add_sinks). */
TG_NODISCARD enum tg_status tg_add_sinks(struct tg_tensor *result, struct tg_tensor *sinks);
/* pos: i32 vector of a->ne[2] positions. */
struct tg_tensor *tg_rope(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos, int n_dims, int mode,
                          int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                          float attn_factor, float beta_fast, float beta_slow);
/* With per-pair frequency divisors: factors f32 [>= n_dims/2] or NULL (ggml_rope_ext's c). */
struct tg_tensor *tg_rope_ext(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos, struct tg_tensor *factors,
                              int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                              float attn_factor, float beta_fast, float beta_slow);
/* Multimodal rope (ggml_rope_multi): mode TG_ROPE_MROPE, TG_ROPE_IMROPE or
 * TG_ROPE_VISION; pos: i32 [4 x a->ne[2]], the tokens' time positions, then
 * their heights, widths and extra positions; sections: how many pairs turn
 * by each of the four (repeating; one of the first three above 0).  Vision turns every
 * dim (n_dims = ne0 / 2) and restarts each position's angle at its section. */
struct tg_tensor *tg_rope_multi(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *pos,
                                struct tg_tensor *factors, int n_dims, const int sections[4], int mode, int n_ctx_orig,
                                float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                float beta_slow);
/* Turns dims [n_offs, n_offs + n_dims) of a rope node instead of [0, n_dims)
 * (ggml_rope_set_offset, op param 15): n_offs even, at most ne0 - n_dims; not
 * for vision.  TG_ERR_INVALID otherwise, the node unchanged. */
TG_NODISCARD enum tg_status tg_rope_set_offset(struct tg_tensor *rope, int n_offs);
/* a: [K, M, ...] of any type (quantized weights too; tg_cpu_supports_op says
 * what the CPU computes), b: [K, N, ...] f32 -> [M, N, ...] f32; b's dims 2-3
 * are multiples of a's (broadcast). */
struct tg_tensor *tg_mul_mat(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b);
/* ggml's op hints (ggml_mul_mat_set_hint, op param 1 of mul_mat): with
 * TG_HINT_SRC0_IS_HADAMARD, a is the normalised Walsh-Hadamard matrix (n x n,
 * n a power of two) and the CPU transforms b's rows without reading it. */
enum tg_op_hint { TG_HINT_NONE = 0, TG_HINT_SRC0_IS_HADAMARD = 1 };
TG_NODISCARD enum tg_status tg_mul_mat_set_hint(struct tg_tensor *mul_mat, enum tg_op_hint hint);
/* rows: i32 [n] (or [n, ne2, ne3]); result f32 rows of a. */
struct tg_tensor *tg_get_rows(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *rows);
/* Writes rows of b into a at indices rows; the result is a view of a. */
struct tg_tensor *tg_set_rows(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, struct tg_tensor *rows);
/* Copies a into b (converting type); the result is a view of b. */
struct tg_tensor *tg_cpy(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b);
struct tg_tensor *tg_cont(struct tg_context *ctx, struct tg_tensor *a);
struct tg_tensor *tg_dup(struct tg_context *ctx, struct tg_tensor *a);
/* A new tensor of `type` with a's shape, written from a (ggml_cast). */
struct tg_tensor *tg_cast(struct tg_context *ctx, struct tg_tensor *a, enum tg_type type);
struct tg_tensor *tg_diag_mask_inf(struct tg_context *ctx, struct tg_tensor *a, int n_past);
struct tg_tensor *tg_concat(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, int dim);
struct tg_tensor *tg_sum_rows(struct tg_context *ctx, struct tg_tensor *a);
/* Convolution patches as rows (ggml_im2col): kernel a [KW, KH, IC, OC] (shape
 * only), input b [IW, IH, IC, N] (1-D: [IW, IC, N]); result [IC*KH*KW, OW,
 * OH, N] (1-D: [IC*KW, OW, N]) of dst_type (f32 or f16).  conv = mul_mat of
 * the result with the kernel reshaped to [IC*KH*KW, OC]. */
struct tg_tensor *tg_im2col(struct tg_context *ctx, struct tg_tensor *a, struct tg_tensor *b, int s0, int s1, int p0,
                            int p1, int d0, int d1, bool is_2d, enum tg_type dst_type);
/* Views: the result shares a's memory (view_src is a's root). */
struct tg_tensor *tg_reshape_1d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0);
struct tg_tensor *tg_reshape_2d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1);
struct tg_tensor *tg_reshape_3d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
struct tg_tensor *tg_reshape_4d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct tg_tensor *tg_view_1d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, size_t offset);
struct tg_tensor *tg_view_2d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
struct tg_tensor *tg_view_3d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             size_t nb1, size_t nb2, size_t offset);
struct tg_tensor *tg_view_4d(struct tg_context *ctx, struct tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
struct tg_tensor *tg_permute(struct tg_context *ctx, struct tg_tensor *a, int ax0, int ax1, int ax2, int ax3);
struct tg_tensor *tg_transpose(struct tg_context *ctx, struct tg_tensor *a);
/* flash attention: q [D, n_q, H, B] f32, k/v [D, n_kv, H_kv, B] f16/f32,
 * mask [n_kv, n_q_pad] f16 or NULL; result [D, H, n_q, B] f32 (ggml layout). */
struct tg_tensor *tg_flash_attn_ext(struct tg_context *ctx, struct tg_tensor *q, struct tg_tensor *k,
                                    struct tg_tensor *v, struct tg_tensor *mask, float scale,
                                    float max_bias, float logit_softcap);

/* ---- graphs ---------------------------------------------------------------- */

struct tg_graph {
    int size;    /* capacity of nodes and of leafs */
    int n_nodes; /* nodes in execution order */
    int n_leafs;
    struct tg_tensor **nodes;
    struct tg_tensor **leafs;
    struct tg_graph_visited *visited; /* membership of nodes and leafs */
    bool is_view;                     /* shares nodes with its parent (tg_graph_view) */
};

#define TG_DEFAULT_GRAPH_SIZE 2048

struct tg_graph *tg_graph_new(int size);
void tg_graph_free(struct tg_graph *g);
/* Adds t and everything it depends on, sources before consumers (ggml order:
 * sources in slot order, depth first); tensors without op and not views are
 * leafs.  Fails with TG_ERR_INVALID when the graph is full. */
TG_NODISCARD enum tg_status tg_graph_build_forward_expand(struct tg_graph *g, struct tg_tensor *t);
/* Append directly, keeping the caller's order (the `.tg` reader). */
TG_NODISCARD enum tg_status tg_graph_add_node(struct tg_graph *g, struct tg_tensor *t);
TG_NODISCARD enum tg_status tg_graph_add_leaf(struct tg_graph *g, struct tg_tensor *t);
bool tg_graph_contains(const struct tg_graph *g, const struct tg_tensor *t);
/* Node i (negative counts from the end). */
struct tg_tensor *tg_graph_node(const struct tg_graph *g, int i);
/* A graph over nodes [i0, i1) of g without leafs; free with tg_graph_free. */
struct tg_graph *tg_graph_view(const struct tg_graph *g, int i0, int i1);
/* Copies node and leaf lists (not tensors) into dst, which must be large enough. */
TG_NODISCARD enum tg_status tg_graph_copy(const struct tg_graph *src, struct tg_graph *dst);
void tg_graph_reset_lists(struct tg_graph *g); /* n_nodes = n_leafs = 0 */

#ifdef __cplusplus
}
#endif
#endif

/* The kernel differential: every op, type and operand layout tgsched's CPU
 * backend computes, against ggml's CPU backend on the same bytes.
 *
 * The table (ggml_kernel_table.c) has one entry per op form: how to make its
 * operands for a variant, a type and a layout, how to build the op with each
 * library's constructor, whether it may run in place, and its bound: ggml's
 * NMSE bounds (test-backend-ops: 1e-7 by default, 1e-6 soft_max, 5e-4
 * mul_mat and attention), 0 for bit-for-bit results (copies, moves of rows).
 * Adding an op or a type is adding an entry or a bit of its `types`.
 *
 * Each variant: the operands are filled with the same bytes on both sides
 * (strided ones through a transposed or permuted view of a filled base),
 * ggml computes the op with its CPU backend (the reference), tgsched with its
 * CPU kernels, out of place and, where the op may, in place (the result
 * bound over its first operand's memory); then element by element. */
#ifndef TG_GGML_KERNELS_H
#define TG_GGML_KERNELS_H

#include "tg-ggml.h"

/* Contiguous; transposed (dims 0 and 1 swapped: elements strided); permuted
 * (dims 1 and 2 swapped: rows contiguous, as attention's q/k/v are). */
enum kd_layout { KD_CONTIGUOUS, KD_TRANSPOSED, KD_PERMUTED, KD_LAYOUT_COUNT };
#define KD_LAYOUT_BIT(l) (1u << (l))
#define KD_ALL_LAYOUTS (KD_LAYOUT_BIT(KD_CONTIGUOUS) | KD_LAYOUT_BIT(KD_TRANSPOSED) | KD_LAYOUT_BIT(KD_PERMUTED))
#define KD_TYPE_BIT(t) (1u << (t))
#define KD_FLOAT_TYPES (KD_TYPE_BIT(TG_TYPE_F32) | KD_TYPE_BIT(TG_TYPE_F16) | KD_TYPE_BIT(TG_TYPE_BF16))

/* What an operand holds: op-safe values, so NaN never hides a mismatch. */
enum kd_fill {
    KD_ANY,      /* [-1, 1) */
    KD_POSITIVE, /* [0.5, 1.5): log, sqrt, div */
    KD_INDEX,    /* integers in [0, limit): rows of get_rows/set_rows, positions of rope */
    KD_MASK,     /* [-1, 0]: attention masks */
};

struct kd_operand {
    enum tg_type type;
    int64_t ne[4];           /* the operand's shape as the op sees it */
    enum kd_layout layout;   /* how it is laid out in memory */
    enum kd_fill fill;
    int64_t limit;           /* KD_INDEX */
};

#define KD_MAX_OPERANDS 4
struct kd_setup {
    int n;
    struct kd_operand op[KD_MAX_OPERANDS];
};

struct kd_entry;
typedef bool (*kd_operands_fn)(const struct kd_entry *e, int variant, enum tg_type type, enum kd_layout layout,
                               struct kd_setup *out);
typedef struct tg_tensor *(*kd_build_tg_fn)(struct tg_context *ctx, struct tg_tensor *const *src,
                                            const struct kd_entry *e, enum tg_type type);
typedef struct ggml_tensor *(*kd_build_ggml_fn)(struct ggml_context *ctx, struct ggml_tensor *const *src,
                                                const struct kd_entry *e, enum tg_type type);

struct kd_entry {
    const char *name;
    kd_operands_fn operands; /* false: no such variant */
    kd_build_tg_fn build_tg;
    kd_build_ggml_fn build_ggml;
    int param;               /* the entry's sub-op, dim, n_past, mode... */
    enum kd_fill fill;       /* what its first operand holds */
    float f[4];              /* its float parameters (scale, bias, eps...) */
    unsigned types;          /* KD_TYPE_BIT per type tried */
    unsigned layouts;        /* KD_LAYOUT_BIT per layout tried */
    bool inplace;            /* also computed with the result over its first operand */
    double max_nmse;         /* 0: bit for bit */
};

extern const struct kd_entry kd_table[];
extern const int kd_table_size;

/* ---- running one variant ------------------------------------------------------------ */

/* Test-only fault: tgsched's kernel reads its second operand as if it were
 * contiguous (strides rewritten to the contiguous ones while it computes):
 * the fault the differential exists to catch.  Off unless set. */
extern bool kd_fault_src1_as_contiguous;

enum kd_outcome {
    KD_COMPARED,     /* both computed, compared */
    KD_NO_VARIANT,   /* the entry has no such variant, or no in-place form here */
    KD_TG_REFUSED,   /* tgsched's constructor or CPU backend refused it */
    KD_GGML_REFUSED, /* ggml's constructor or CPU backend refused it (or aborted) */
};

struct kd_result {
    enum kd_outcome outcome;
    bool passed;
    double nmse;        /* against ggml's output */
    long n_elements, n_differ; /* elements not bit-identical */
    bool nonfinite_mismatch;
    bool ggml_aborted;  /* KD_GGML_REFUSED by an assert (not by supports_op) */
    char what[200];     /* the variant, for messages */
};

/* Runs entry e's variant (type, layout) once out of place, or in place; with
 * n_threads for tgsched's CPU backend.  Errors only for host memory. */
enum tg_status kd_run(const struct kd_entry *e, int variant, enum tg_type type, enum kd_layout layout, bool inplace,
                      int n_threads, uint64_t seed, struct kd_result *res);

#endif

/* The op-by-shape-by-type grid: one-op graphs built twice from the same
 * description, one on the CPU (the reference) and one on the backend under
 * test, every tensor bound inside one buffer of the backend's default type
 * with at least 1 KiB of sentinel bytes before and after each, the inputs
 * filled with the same random data; then compared: NMSE within the op's
 * bound (1e-7 default, 5e-4 mul_mat and attention, exact for data movement),
 * no NaN, infinities at the same places, every sentinel byte untouched.
 * Operands come contiguous, transposed and permuted; in-place-capable ops also
 * run with the result over src0, and over src1 where its layout allows.
 * Used by test_cuda_ops (CUDA, and the sim as its stand-in) and by the backend
 * conformance harness (tests/backend/conformance.h). */
#ifndef TG_TEST_OP_GRID_H
#define TG_TEST_OP_GRID_H

#include "tg-backend.h"
#include "tg.h"

#include <stdbool.h>
#include <stdint.h>

#define SENTINEL 0xA5   /* the guard bytes around every tensor */
#define MAX_CASES 4096

enum case_kind {
    K_BINARY, K_ADD1, K_SCALE, K_SQR, K_SQRT, K_LOG, K_FILL, K_UNARY, K_DIAG_MASK_INF, K_RMS_NORM, K_NORM,
    K_SOFT_MAX, K_ROPE, K_GLU, K_GLU_SPLIT, K_SUM_ROWS, K_CONCAT, K_CPY, K_CONT, K_DUP, K_GET_ROWS, K_SET_ROWS,
    K_MUL_MAT, K_FLASH_ATTN, K_IM2COL, K_COUNT
};

enum layout { L_CONTIGUOUS, L_TRANSPOSED, L_PERMUTED, L_COUNT };

/* Which source the result shares memory with on the backend under test (the
 * CPU reference never shares). */
enum inplace { IP_NONE, IP_SRC0, IP_SRC1 };

struct op_case {
    enum case_kind kind;
    int64_t ne[4];
    enum layout layout; /* of the operands (see build_case) */
    enum inplace inplace;
    enum tg_type type;  /* first operand */
    enum tg_type type2; /* second operand or destination */
    int sub;            /* binary/unary/glu sub-op, dim, rope mode, row count, N, n_kv */
    int sub2;           /* broadcast bits, mask kind, index mode, r2, attention variant bits */
    float f0, f1;       /* scale/bias, fill value, max_bias, ext_factor, softcap */
    float lo, hi;       /* range of float inputs */
    double max_nmse;    /* < 0: exact */
    char label[160];
};

struct diff {
    double nmse;
    int nan, inf_mismatch, differ;
};

/* What a comparison found wrong, one bit per checker. */
enum {
    BAD_UNSUPPORTED = 1, /* the CPU computes the case, the backend refuses it */
    BAD_COMPUTE = 2,     /* the backend accepted the case and then failed it */
    BAD_GUARD = 4,       /* a sentinel byte around a tensor changed */
    BAD_NAN = 8,
    BAD_INF = 16,        /* an infinity where the CPU has none, or of the other sign */
    BAD_NMSE = 32,       /* NMSE above the op's bound */
    BAD_EXACT = 64,      /* a value differs in an exact op */
    BAD_REFERENCE = 128, /* the CPU itself failed: a harness problem */
};

struct verdict {
    bool reference_ran; /* false: the CPU does not compute this case (not judged) */
    unsigned bad;
    struct diff d;
    int guard_errors;
    char why[640];
};

struct grid {
    struct op_case *cases;
    int n;
};

/* A NaN on either side counts; infinities must agree exactly; NMSE over the rest. */
struct diff diff_values(const double *want, const double *got, int64_t n);
/* Runs c on ref (the CPU) and on test from the same seed and judges test. */
struct verdict compare_on(tg_backend *ref, tg_backend *test, const struct op_case *c, uint64_t seed);
/* A case of kind with shape ne: f32 operands in [-1, 1], bound 1e-7. */
struct op_case base_case(enum case_kind kind, const int64_t ne[4]);
void finish_label(struct op_case *c); /* names the case (after its fields are set) */
void build_grid(struct grid *gr);     /* every case, into gr->cases (MAX_CASES of room) */

struct grid_totals {
    int compared;    /* judged cases (a failed one counts) */
    int failed;      /* cases that failed, and cases the CPU did not compute */
    int refused;     /* cases the backend's supports_op refused (not judged unless refusals_fail) */
    int cpu_refused; /* cases the CPU did not compute: a bug in the grid */
};
/* Every case of the grid on test against cpu, then the per-op max-NMSE table
 * on stdout (failures on stderr).  refusals_fail: a case the CPU computes and
 * test refuses is a failure (CUDA must take them all); otherwise it is skipped. */
struct grid_totals run_grid(tg_backend *cpu, tg_backend *test, bool refusals_fail);
/* Harness failures inside the grid (a constructor, a binding, a transfer
 * failing): a caller's run is not clean unless this is 0. */
int op_grid_harness_failures(void);

#endif

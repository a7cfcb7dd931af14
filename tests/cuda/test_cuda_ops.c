/* CUDA vs CPU, op by op (test-backend-ops style).  Each case builds a one-op
 * graph twice from the same description, binds every tensor inside one buffer
 * of the backend with at least 1 KiB of sentinel bytes before and after each
 * tensor, fills the inputs with the same random data, computes, and compares:
 * NMSE within the op's bound (1e-7 default, 5e-4 mul_mat and attention, exact
 * for data movement), no NaN, infinities at the same places, every sentinel
 * byte untouched, and the backend accepting every case the CPU computes.
 * Operands come contiguous, transposed and permuted; in-place-capable ops also
 * run with the result over src0, and over src1 where its layout allows.
 *
 * The grid and its checkers live in tests/backend/op_grid.c, shared with the
 * backend conformance harness (docs/backends.md).
 *
 * Without a GPU it exits 77 (skipped), but only after the harness has run:
 *   - every checker is shown to fire on an injected fault: a wrapper backend
 *     refuses the op, fails, writes a guard byte, perturbs or NaNs its result;
 *   - the whole grid runs with the simulated device standing in for CUDA (the
 *     CPU's kernels on device-like memory: every case must pass), so a broken
 *     case shows up here rather than on the first GPU run. */
#include "backend/op_grid.h"
#include "cuda_test.h"

#include "tg-cpu.h"
#include "tg-cuda.h"
#include "tg-sim.h"
#include "tg.h"

#include <stdint.h>

/* ---- fault injection: a backend that breaks one rule on purpose ------------------------- */

enum fault {
    FAULT_NONE, FAULT_REFUSE, FAULT_COMPUTE_ERROR, FAULT_GUARD_AFTER, FAULT_GUARD_BEFORE, FAULT_PERTURB,
    FAULT_NAN, FAULT_INF, FAULT_ULP
};

/* Forwards to an inner backend, then damages the graph's result as told. */
struct faulty_backend {
    tg_backend base; /* first: the tg_backend pointer is the struct's */
    tg_backend *inner;
    enum fault fault;
};

static struct faulty_backend *faulty_of(tg_backend *b) { return (struct faulty_backend *)b; }
static const char *faulty_name(tg_backend *b) { (void)b; return "faulty"; }
static tg_buffer_type *faulty_buft(tg_backend *b) { return tg_backend_get_default_buffer_type(faulty_of(b)->inner); }
static void faulty_synchronize(tg_backend *b) { tg_backend_synchronize(faulty_of(b)->inner); }
static bool faulty_supports_buft(tg_backend *b, tg_buffer_type *t) { return tg_backend_supports_buft(faulty_of(b)->inner, t); }

static bool faulty_supports_op(tg_backend *b, const struct tg_tensor *op) {
    return faulty_of(b)->fault != FAULT_REFUSE && tg_backend_supports_op(faulty_of(b)->inner, op);
}

/* One byte just outside out's bytes (a kernel writing past its tensor). */
static void write_stray_byte(struct tg_tensor *out, bool after) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *stray = tg_new_tensor_1d(ctx, TG_TYPE_I8, 1);
    uint8_t *at = (uint8_t *)out->data + (after ? (ptrdiff_t)tg_nbytes(out) : -1);
    const uint8_t value = (uint8_t)~SENTINEL;
    CHECK_OK(tg_tensor_bind(stray, out->buffer, at));
    CHECK_OK(tg_tensor_set(stray, &value, 0, 1));
    tg_context_free(ctx);
}

static enum tg_status faulty_compute(tg_backend *b, struct tg_graph *g) {
    struct faulty_backend *f = faulty_of(b);
    if (f->fault == FAULT_COMPUTE_ERROR) return tg_fail(TG_ERR_UNSUPPORTED, "faulty backend: injected compute failure");
    enum tg_status st = tg_backend_graph_compute(f->inner, g);
    tg_backend_synchronize(f->inner);
    struct tg_tensor *out = g->nodes[g->n_nodes - 1];
    if (st != TG_OK || f->fault == FAULT_NONE) return st;
    if (f->fault == FAULT_GUARD_AFTER || f->fault == FAULT_GUARD_BEFORE) {
        write_stray_byte(out, f->fault == FAULT_GUARD_AFTER);
        return TG_OK;
    }
    /* the value faults expect a contiguous f32 result */
    CHECK(out->type == TG_TYPE_F32 && tg_is_contiguous(out));
    const int64_t n = tg_nelements(out);
    float *v = malloc((size_t)n * sizeof *v);
    CHECK_OK(tg_tensor_get(out, v, 0, (size_t)n * sizeof *v));
    switch (f->fault) {
    case FAULT_PERTURB:
        for (int64_t i = 0; i < n; i++) v[i] *= 1.0f + 1e-3f; /* NMSE 1e-6: above 1e-7, below 5e-4 */
        break;
    case FAULT_NAN: v[n / 2] = NAN; break;
    case FAULT_INF: v[n / 2] = INFINITY; break;
    case FAULT_ULP: v[n / 2] = nextafterf(v[n / 2], INFINITY); break;
    default: break;
    }
    CHECK_OK(tg_tensor_set(out, v, 0, (size_t)n * sizeof *v));
    free(v);
    return TG_OK;
}

static void faulty_init(struct faulty_backend *f, tg_backend *inner, enum fault fault) {
    memset(f, 0, sizeof *f);
    f->inner = inner;
    f->fault = fault;
    f->base.iface.get_name = faulty_name;
    f->base.iface.get_default_buffer_type = faulty_buft;
    f->base.iface.synchronize = faulty_synchronize;
    f->base.iface.graph_compute = faulty_compute;
    f->base.iface.supports_op = faulty_supports_op;
    f->base.iface.supports_buft = faulty_supports_buft;
    f->base.context = f;
}

/* ---- the checkers' self-test: each must fire on the fault it exists for ------------------- */

static void self_test_diff(void) {
    double want[4] = {1.0, -2.0, INFINITY, 0.5};
    double got[4] = {1.0, -2.0, INFINITY, 0.5};
    struct diff d = diff_values(want, got, 4);
    CHECK(d.nan == 0 && d.inf_mismatch == 0 && d.differ == 0 && d.nmse == 0.0);
    got[1] = -2.001; /* NMSE 1e-6 / 5.25 */
    d = diff_values(want, got, 4);
    CHECK(d.nmse > 1e-7 && d.nmse < 1e-6 && d.differ == 1);
    got[1] = nextafter(-2.0, 0.0);
    CHECK(diff_values(want, got, 4).differ == 1);
    got[1] = -2.0;
    got[2] = -INFINITY;
    CHECK(diff_values(want, got, 4).inf_mismatch == 1);
    got[2] = 7.0;
    CHECK(diff_values(want, got, 4).inf_mismatch == 1);
    got[2] = INFINITY;
    got[0] = NAN;
    CHECK(diff_values(want, got, 4).nan == 1);
    want[0] = NAN; /* NaN on both sides is still a failure: inputs are chosen never to make one */
    CHECK(diff_values(want, got, 4).nan == 1);
}

static void self_test_checkers(tg_backend *cpu, tg_backend *stand_in) {
    self_test_diff();
    const int64_t ne[4] = {9, 4, 2, 1};
    struct op_case add = base_case(K_BINARY, ne);
    add.sub2 = 5;
    finish_label(&add);
    struct op_case add_loose = add; /* the mul_mat/attention bound */
    add_loose.max_nmse = 5e-4;
    struct op_case copy = base_case(K_CPY, ne);
    copy.max_nmse = -1;
    finish_label(&copy);
    struct op_case rms_inplace = base_case(K_RMS_NORM, ne);
    rms_inplace.inplace = IP_SRC0;
    finish_label(&rms_inplace);
    static const struct {
        enum fault fault;
        int which; /* 0 add, 1 add with the loose bound, 2 exact copy, 3 in-place rms_norm */
        unsigned want;
        const char *what;
    } expect[] = {
        {FAULT_NONE, 0, 0, "a clean run passes"},
        {FAULT_NONE, 2, 0, "a clean exact op passes"},
        {FAULT_NONE, 3, 0, "a clean in-place run passes"},
        {FAULT_REFUSE, 0, BAD_UNSUPPORTED, "supports_op refusing a CPU op is caught"},
        {FAULT_COMPUTE_ERROR, 0, BAD_COMPUTE, "a failing compute is caught"},
        {FAULT_GUARD_AFTER, 0, BAD_GUARD, "a byte written past the result is caught"},
        {FAULT_GUARD_BEFORE, 0, BAD_GUARD, "a byte written before the result is caught"},
        {FAULT_GUARD_AFTER, 3, BAD_GUARD, "a stray byte is caught in place too"},
        {FAULT_PERTURB, 0, BAD_NMSE, "a 1e-3 relative error fails the 1e-7 bound"},
        {FAULT_PERTURB, 1, 0, "... and passes the 5e-4 bound"},
        {FAULT_NAN, 0, BAD_NAN, "a NaN is caught"},
        {FAULT_NAN, 1, BAD_NAN, "a NaN is caught whatever the bound"},
        {FAULT_INF, 0, BAD_INF, "an infinity where the CPU has a number is caught"},
        {FAULT_ULP, 2, BAD_EXACT, "one ulp off in an exact op is caught"},
        {FAULT_ULP, 0, 0, "one ulp off is within the 1e-7 bound"},
    };
    const struct op_case *cases[4] = {&add, &add_loose, &copy, &rms_inplace};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        struct faulty_backend f;
        faulty_init(&f, stand_in, expect[i].fault);
        const struct verdict v = compare_on(cpu, &f.base, cases[expect[i].which], 1000 + i);
        CHECK_MSG(v.reference_ran && v.bad == expect[i].want, "self-test '%s': checkers reported 0x%x, want 0x%x (%s)",
                  expect[i].what, v.bad, expect[i].want, v.why);
        if (expect[i].fault == FAULT_GUARD_AFTER || expect[i].fault == FAULT_GUARD_BEFORE) {
            CHECK_MSG(v.guard_errors == 1, "self-test '%s': %d guard bytes counted, want 1", expect[i].what,
                      v.guard_errors);
        }
        printf("checker self-test: %-52s %s\n", expect[i].what, v.bad == expect[i].want ? "ok" : "FAILED");
    }
}

/* Refusals that must be exact on CUDA: no kernel reads these. */
static void check_cuda_refusals(tg_backend *cuda) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *q = tg_new_tensor_2d(ctx, TG_TYPE_Q4_0, 64, 4);
    struct tg_tensor *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 2);
    struct tg_tensor *mm = tg_mul_mat(ctx, q, x);
    CHECK(mm != NULL && tg_backend_supports_op(cuda, mm));
    /* no device encoder for the k-quants */
    struct tg_tensor *big = tg_new_tensor_2d(ctx, TG_TYPE_F32, 256, 2);
    struct tg_tensor *k4 = tg_cpy(ctx, big, tg_new_tensor_2d(ctx, TG_TYPE_Q4_K, 256, 2));
    CHECK(k4 != NULL && !tg_backend_supports_op(cuda, k4));
    struct tg_tensor *xielu = tg_unary(ctx, x, TG_UNARY_XIELU);
    CHECK(xielu != NULL && !tg_backend_supports_op(cuda, xielu));
    tg_context_free(ctx);
}

int main(void) {
    tg_backend *cpu = tg_backend_cpu_new();
    struct tg_sim_params sp;
    tg_sim_params_default(&sp);
    sp.name = "sim-stand-in";
    tg_backend *sim = tg_backend_sim_new(&sp);
    CHECK(cpu != NULL && sim != NULL);
    if (cpu && sim) self_test_checkers(cpu, sim);
    const bool have_gpu = TG_TEST_CUDA_PRESENT();
    tg_backend *cuda = NULL;
    if (have_gpu) {
        cuda = tg_backend_cuda_new(0);
        CHECK_MSG(cuda != NULL, "%s", tg_last_error());
    }
    if (cpu && sim && !have_gpu) {
        /* the dry run: every case through the harness, the sim standing in for CUDA */
        const struct grid_totals t = run_grid(cpu, sim, true);
        CHECK_MSG(t.compared > 1000 && t.failed == 0, "%d cases compared, %d failed", t.compared, t.failed);
    }
    if (cpu && cuda) {
        check_cuda_refusals(cuda);
        const struct grid_totals t = run_grid(cpu, cuda, true);
        CHECK_MSG(t.compared > 1000 && t.failed == 0, "%d cases compared, %d failed", t.compared, t.failed);
    }
    CHECK_MSG(op_grid_harness_failures() == 0, "the grid's harness failed %d checks (above)", op_grid_harness_failures());
    tg_backend_free(cuda);
    tg_backend_free(sim);
    tg_backend_free(cpu);
    return tg_test_finish_or_skip(have_gpu, "checker self-tests and the grid's dry run on the sim");
}

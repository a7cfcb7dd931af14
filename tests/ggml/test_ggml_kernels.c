/* The kernel differential against ggml's CPU backend (label ggml): every
 * entry of the table (ggml_kernel_table.c) in every type, operand layout and
 * shape it lists, out of place and in place, tgsched's CPU kernels (one and
 * three threads) against ggml's on the same bytes, within ggml's NMSE bounds
 * or bit for bit.  Prints per op the variants compared and the largest NMSE.
 *
 * Then the self-test: with the test-only fault that makes tgsched's kernels
 * read a strided second operand as if it were contiguous, the differential
 * must fail add(a[12,7], transpose(b[7,12])) (77 of 84 elements wrong) and
 * every other case the fault reaches. */
#include "tg-ggml-kernels.h"
#include "tg_test.h"

struct per_op {
    int compared, exact, failed, tg_refused, ggml_refused, ggml_aborted;
    double max_nmse;
    char worst[200];
};

static void run_entry(const struct kd_entry *e, struct per_op *p, bool report_failures) {
    for (int t = 0; t < TG_TYPE_COUNT; t++) {
        if (!((e->types >> t) & 1)) continue;
        for (int l = 0; l < KD_LAYOUT_COUNT; l++) {
            if (!((e->layouts >> l) & 1)) continue;
            for (int v = 0;; v++) {
                bool any = false;
                for (int inplace = 0; inplace < 2; inplace++) {
                    struct kd_result r;
                    uint64_t seed = (uint64_t)(v + 1) * 1000003u + (uint64_t)t * 101u + (uint64_t)l;
                    if (kd_run(e, v, (enum tg_type)t, (enum kd_layout)l, inplace, 1 + 2 * (v % 2), seed, &r) != TG_OK) {
                        CHECK_MSG(false, "%s: %s", e->name, tg_last_error());
                        return;
                    }
                    if (r.outcome == KD_NO_VARIANT) continue;
                    any = true;
                    if (r.outcome == KD_TG_REFUSED) p->tg_refused++;
                    if (r.outcome == KD_GGML_REFUSED && !r.ggml_aborted) p->ggml_refused++;
                    p->ggml_aborted += r.ggml_aborted;
                    if (r.outcome != KD_COMPARED) continue;
                    p->compared++;
                    p->exact += r.n_differ == 0;
                    if (r.nmse > p->max_nmse || !p->worst[0]) {
                        p->max_nmse = r.nmse > p->max_nmse ? r.nmse : p->max_nmse;
                        snprintf(p->worst, sizeof p->worst, "%s", r.what);
                    }
                    if (!r.passed) {
                        p->failed++;
                        if (report_failures) {
                            fprintf(stderr, "kernel differs from ggml: %s: NMSE %.3g (bound %.3g), %ld of %ld elements not "
                                    "bit-identical%s\n", r.what, r.nmse, e->max_nmse, r.n_differ, r.n_elements,
                                    r.nonfinite_mismatch ? ", a NaN/Inf differs" : "");
                        }
                    }
                }
                /* variants are dense: the first absent one ends the list (in place may be absent alone) */
                struct kd_setup probe = {0};
                if (!any && !e->operands(e, v, (enum tg_type)t, (enum kd_layout)l, &probe)) break;
            }
        }
    }
}

static void table(void) {
    int total = 0, ops = 0, asserted = 0, asserting_ops = 0;
    printf("%-24s %8s %6s %12s %10s  %s\n", "op", "compared", "exact", "max NMSE", "bound",
           "ggml: unsupported / asserts");
    for (int i = 0; i < kd_table_size; i++) {
        const struct kd_entry *e = &kd_table[i];
        struct per_op p = {0};
        run_entry(e, &p, true);
        printf("%-24s %8d %6d %12.3g %10.3g  %d / %d\n", e->name, p.compared, p.exact, p.max_nmse, e->max_nmse,
               p.ggml_refused, p.ggml_aborted);
        CHECK_MSG(p.failed == 0, "%s: %d variants differ from ggml", e->name, p.failed);
        CHECK_MSG(p.compared > 0, "%s: nothing compared", e->name);
        /* every variant the table lists is one tgsched computes */
        CHECK_MSG(p.tg_refused == 0, "%s: tgsched refused %d listed variants", e->name, p.tg_refused);
        total += p.compared;
        ops++;
        asserted += p.ggml_aborted;
        asserting_ops += p.ggml_aborted > 0;
    }
    printf("%d op forms, %d variants compared; ggml's CPU backend said it supports %d variants (%d op forms) and then "
           "asserted computing them (docs/upstream.md): not compared\n", ops, total, asserted, asserting_ops);
}

static const struct kd_entry *entry(const char *name) {
    for (int i = 0; i < kd_table_size; i++)
        if (strcmp(kd_table[i].name, name) == 0) return &kd_table[i];
    return NULL;
}

/* The fault the differential exists for: a kernel reading a transposed
 * second operand as if it were contiguous. */
static void fault_self_test(void) {
    kd_fault_src1_as_contiguous = true;
    struct kd_result r;
    /* ops_binary variant 0: a [12,7] contiguous, b the same shape, transposed (base [7,12]) */
    CHECK_OK(kd_run(entry("add"), 0, TG_TYPE_F32, KD_TRANSPOSED, false, 1, 1, &r));
    /* b[i0,i1] read at the contiguous offset i0 + 12 i1 of b's base [7,12]
     * instead of i1 + 7 i0: right only where the two coincide */
    long right = 0;
    for (int i1 = 0; i1 < 7; i1++)
        for (int i0 = 0; i0 < 12; i0++) right += i0 + 12 * i1 == i1 + 7 * i0;
    printf("fault self-test: %s: %ld of %ld elements wrong (all but the %ld the wrong strides read right), NMSE %.3g: "
           "%s\n", r.what, r.n_differ, r.n_elements, right, r.nmse, r.passed ? "NOT CAUGHT" : "caught");
    CHECK(r.outcome == KD_COMPARED && !r.passed && r.n_elements == 84 && r.n_differ == 84 - right);
    /* the whole table under the fault: every op whose kernel reads a strided second operand fails */
    int caught = 0;
    printf("fault self-test: the table catches the fault in:");
    for (int i = 0; i < kd_table_size; i++) {
        struct per_op p = {0};
        run_entry(&kd_table[i], &p, false);
        if (p.failed) printf(" %s (%d variants)", kd_table[i].name, p.failed);
        caught += p.failed > 0;
    }
    printf("\n");
    CHECK(caught >= 5); /* add, sub, mul, div, mul_mat at least */
    kd_fault_src1_as_contiguous = false;
}

int main(void) {
    tg_ggml_quiet_log();
    table();
    fault_self_test();
    return tg_test_finish();
}

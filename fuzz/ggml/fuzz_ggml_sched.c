/* Fuzz target against upstream ggml's scheduler (built when the pinned ggml
 * is there: tests/ggml/tests.cmake): the scheduler differential of
 * tg-ggml-sched.h on one generated case, bytes as fuzz_sched's.  Both
 * ggml_backend_sched (in a child: its asserts and crashes are findings about
 * ggml, not about the harness) and tg_sched schedule the case, and then
 * compute it with the same inputs and weights; every result of each is held
 * against the CPU alone.  It aborts, with the case written out, when
 *  - a difference between the two schedules has no listed reason
 *    (docs/upstream.md),
 *  - tgsched computes a wrong value, or does not compute a case it scheduled,
 *  - ggml computes a wrong value where the schedules are the same.
 * ggml's listed defects, its aborts included, are not failures. */
#include "tg-ggml-sched.h"

#include <stdio.h>
#include <stdlib.h>

/* the values' seed: any fixed one (the bytes already vary the case) */
enum { VALUES_SEED = 1 };

static void fail(const uint8_t *data, size_t size, const char *what) {
    fprintf(stderr, "fuzz_ggml_sched: %s\n", what);
    char *text = tg_gen_sched_case_to_text(data, size);
    if (text) fprintf(stderr, "%s\n", text);
    free(text);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) tg_ggml_quiet_log(), quiet = true;
    struct tg_ggml_sched_result r;
    struct tg_ggml_value_result gv, tv;
    if (tg_ggml_sched_compare_values(data, size, VALUES_SEED, &r, &gv, &tv) != TG_OK) return 0; /* out of memory */
    char what[800];
    if ((r.classes >> TG_GGML_SCHED_UNEXPLAINED) & 1) {
        snprintf(what, sizeof what, "unexplained difference from ggml's schedule: %s", r.detail);
        fail(data, size, what);
    }
    if (tv.wrong) {
        snprintf(what, sizeof what, "tgsched's node %d differs from the cpu alone", tv.first_wrong);
        fail(data, size, what);
    }
    if (!tv.ran && !tv.no_reference && !((r.classes >> TG_GGML_SCHED_BOTH_REFUSE) & 1)) {
        snprintf(what, sizeof what, "tgsched did not compute a case it can schedule: %s", tv.message);
        fail(data, size, what);
    }
    if (!r.classes && gv.ran && gv.wrong) {
        snprintf(what, sizeof what, "the schedules are the same, but ggml's node %d differs from the cpu alone",
                 gv.first_wrong);
        fail(data, size, what);
    }
    return 0;
}

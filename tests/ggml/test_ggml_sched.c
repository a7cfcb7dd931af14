/* The scheduler differential against ggml_backend_sched (label ggml): generated
 * multi-backend cases (the CPU and 0-3 devices with their op sets, alignments,
 * padding, shared host memory, weights placed on any backend, op offload,
 * pipeline copies) scheduled by both; the backend of every node, the splits
 * with their inputs, the copies and every compute buffer must be the same,
 * except where a listed reason (docs/upstream.md) explains it.
 * Then values: both schedules computed (ggml's through its CPU kernels on
 * the test backends, tgsched's on sims that compute) with the same inputs
 * and weights, every result against the CPU alone; per class, how many cases
 * give ggml a wrong value.  tgsched's must all be right, and so must ggml's
 * where the schedules are the same.
 * TG_GGML_SCHED_CASES sets the count, TG_GGML_SCHED_CASE runs one. */
#include "tg-ggml-sched.h"
#include "tg_test.h"

static void case_bytes(uint64_t seed, uint8_t *bytes, size_t n) { tg_gen_seed_bytes(seed * 0x9e3779b97f4a7c15ull + 11, bytes, n); }

/* The differential must fail when tgsched schedules wrong: a source read
 * across backends without a copy, expansion ignoring which ops a backend has. */
static void self_test(void) {
    int skip_copy = 0, ignore_support = 0, n = 400;
    for (uint64_t seed = 1; seed <= (uint64_t)n; seed++) {
        uint8_t bytes[TG_GEN_SCHED_HEADER_BYTES + TG_GEN_SEED_BYTES];
        case_bytes(seed, bytes, sizeof bytes);
        struct tg_ggml_sched_result r;
        CHECK_OK(tg_ggml_sched_compare(bytes, sizeof bytes, TG_SCHED_FAULT_SKIP_COPY, &r));
        skip_copy += (r.classes >> TG_GGML_SCHED_UNEXPLAINED) & 1;
        CHECK_OK(tg_ggml_sched_compare(bytes, sizeof bytes, TG_SCHED_FAULT_IGNORE_SUPPORT, &r));
        ignore_support += (r.classes >> TG_GGML_SCHED_UNEXPLAINED) & 1;
    }
    printf("self-test: tgsched differs unexplained with skip-copy in %d of %d cases, with ignore-support in %d\n",
           skip_copy, n, ignore_support);
    /* and the value comparison when tgsched computes wrong: a case that
     * computes right without the fault must not compute right with it */
    int broken = 0, computed = 0, values_n = 200;
    for (uint64_t seed = 1; seed <= (uint64_t)values_n; seed++) {
        uint8_t bytes[TG_GEN_SCHED_HEADER_BYTES + TG_GEN_SEED_BYTES];
        case_bytes(seed, bytes, sizeof bytes);
        struct tg_ggml_sched_values v;
        struct tg_ggml_value_result right, faulty;
        CHECK_OK(tg_ggml_sched_values_make(bytes, sizeof bytes, seed, &v));
        CHECK_OK(tg_ggml_values_in_tgsched(bytes, sizeof bytes, &v, TG_SCHED_FAULT_NONE, &right));
        CHECK_OK(tg_ggml_values_in_tgsched(bytes, sizeof bytes, &v, TG_SCHED_FAULT_SKIP_COPY, &faulty));
        computed += right.ran && right.wrong == 0;
        broken += right.ran && right.wrong == 0 && (!faulty.ran || faulty.wrong > 0);
        tg_ggml_sched_values_free(&v);
    }
    printf("self-test: with skip-copy tgsched's values fail (a wrong result or a refused compute) in %d of the %d "
           "cases it computes right without\n", broken, computed);
    CHECK(computed > values_n / 2 && broken > computed / 10);
    /* skip-copy shows only where a split reads another backend's result and ggml schedules the
     * case too (a third of the cases abort in ggml): about one case in seven */
    CHECK(skip_copy > n / 20 && ignore_support > 0);
}

int main(void) {
    tg_ggml_quiet_log();
    const char *env = getenv("TG_GGML_SCHED_CASES");
    int n = env ? atoi(env) : 2000;
    const char *only = getenv("TG_GGML_SCHED_CASE");
    uint64_t first = only ? strtoull(only, NULL, 10) : 1, last = only ? first : (uint64_t)n;
    if (!only) self_test();
    int per_class[TG_GGML_SCHED_CLASS_COUNT] = {0}, multi = 0, splits = 0, failures = 0, nodes = 0, compared = 0,
        compared_nodes = 0, chunked = 0;
    /* per class: cases ggml computed, of them with a wrong result, with a device on memory not its own;
     * ggml's crashes computing; tgsched's computed cases and results */
    int v_ran[TG_GGML_SCHED_CLASS_COUNT] = {0}, v_wrong[TG_GGML_SCHED_CLASS_COUNT] = {0},
        v_foreign[TG_GGML_SCHED_CLASS_COUNT] = {0}, v_crash[TG_GGML_SCHED_CLASS_COUNT] = {0},
        v_kernel[TG_GGML_SCHED_CLASS_COUNT] = {0};
    int tg_ran = 0, tg_results = 0, tg_exact = 0, ggml_results = 0, ggml_exact = 0, ggml_as_alone = 0, ggml_rope_spill = 0;
    double worst_close = 0.0;
    for (uint64_t seed = first; seed <= last; seed++) {
        uint8_t bytes[TG_GEN_SCHED_HEADER_BYTES + TG_GEN_SEED_BYTES];
        case_bytes(seed, bytes, sizeof bytes);
        struct tg_ggml_sched_result r;
        struct tg_ggml_value_result gv, tv;
        CHECK_OK(tg_ggml_sched_compare_values(bytes, sizeof bytes, seed, &r, &gv, &tv));
        unsigned cls = r.classes ? r.classes : 1u << TG_GGML_SCHED_SAME;
        for (int k = 0; k < TG_GGML_SCHED_CLASS_COUNT; k++) {
            if (!((cls >> k) & 1)) continue;
            v_ran[k] += gv.ran && gv.compared > 0;
            v_wrong[k] += gv.ran && gv.wrong > 0;
            v_foreign[k] += gv.ran && gv.foreign > 0;
            /* an assert of ggml's CPU kernels is its kernel refusing the operands' layout, not the schedule */
            bool kernel = gv.aborted && strstr(gv.message, "ggml-cpu/");
            v_kernel[k] += kernel;
            v_crash[k] += gv.aborted && !kernel && (gv.signal || !strstr(gv.message, "buffer_id >= 0"));
        }
        ggml_results += gv.ran ? gv.compared : 0;
        ggml_exact += gv.ran ? gv.exact : 0;
        ggml_as_alone += gv.ran ? gv.as_alone : 0;
        ggml_rope_spill += gv.ran ? gv.rope_spill : 0;
        tg_ran += tv.ran;
        tg_results += tv.compared;
        tg_exact += tv.exact;
        worst_close = gv.worst_close > worst_close ? gv.worst_close : worst_close;
        worst_close = tv.worst_close > worst_close ? tv.worst_close : worst_close;
        /* tgsched's values are right wherever it scheduled; ggml's where the schedules are the same */
        /* tgsched computes every case it schedules: only a node no backend can run stops it */
        CHECK_MSG(tv.ran || tv.no_reference || ((r.classes >> TG_GGML_SCHED_BOTH_REFUSE) & 1),
                  "case %llu: tgsched did not compute: %s", (unsigned long long)seed, tv.message);
        CHECK_MSG(tv.wrong == 0, "case %llu: tgsched's node %d differs from the cpu alone", (unsigned long long)seed,
                  tv.first_wrong);
        CHECK_MSG(r.classes || !gv.ran || gv.wrong == 0, "case %llu: schedules the same, ggml's node %d differs from the "
                  "cpu alone", (unsigned long long)seed, gv.first_wrong);
        if (getenv("TG_GGML_VALUES_LIST") && (gv.aborted || gv.wrong))
            printf("case %llu classes %#x: ggml %s, %d wrong (node %d)\n", (unsigned long long)seed, cls, gv.message,
                   gv.wrong, gv.first_wrong);
        if (only) {
            fprintf(stderr, "case %llu values: ggml %s (%s) %d results, %d exact, %d close, %d wrong (first node %d), "
                    "%d as ggml's cpu alone, %d nodes on foreign memory; tgsched %s (%s) %d results, %d exact, %d wrong\n", (unsigned long long)seed,
                    gv.ran ? "ran" : "did not run", gv.message, gv.compared, gv.exact, gv.close, gv.wrong, gv.first_wrong,
                    gv.as_alone, gv.foreign, tv.ran ? "ran" : "did not run", tv.message, tv.compared, tv.exact, tv.wrong);
        }
        if (!r.classes) per_class[TG_GGML_SCHED_SAME]++;
        for (int k = 1; k < TG_GGML_SCHED_CLASS_COUNT; k++) per_class[k] += (r.classes >> k) & 1;
        multi += r.n_backends > 1;
        splits += r.n_splits_tg;
        nodes += r.n_nodes;
        compared += r.compared;
        compared_nodes += r.compared ? r.n_nodes : 0;
        chunked += r.compared && r.chunked;
        bool unexplained = (r.classes >> TG_GGML_SCHED_UNEXPLAINED) & 1;
        CHECK(!unexplained);
        if (getenv("TG_GGML_SCHED_LIST") && unexplained) printf("case %llu: %s\n", (unsigned long long)seed, r.detail);
        if ((unexplained && failures++ < 3) || only) {
            fprintf(stderr, "case %llu: %s%s\n", (unsigned long long)seed, unexplained ? "unexplained: " : "", r.detail);
            char *text = tg_gen_sched_case_to_text(bytes, sizeof bytes);
            if (text && (unexplained || getenv("TG_GGML_VERBOSE"))) fprintf(stderr, "%s\n", text);
            free(text);
        }
    }
    printf("scheduler differential: %llu cases (%d with devices), %d nodes, %d splits by tgsched; %d cases (%d nodes) "
           "compared node by node, split by split (the rest: ggml aborted, both refused, or a ggml behaviour changed "
           "everything after it), %d of them with a device's compute buffer in chunks (its max size); %d identical in "
           "every node, split, input, copy and buffer size\n",
           (unsigned long long)(last - first + 1), multi, nodes, splits, compared, compared_nodes, chunked,
           per_class[TG_GGML_SCHED_SAME]);
    for (int k = 0; k < TG_GGML_SCHED_CLASS_COUNT; k++) {
        if (per_class[k]) printf("  %-32s %d\n", tg_ggml_sched_class_name((enum tg_ggml_sched_class)k), per_class[k]);
    }
    printf("values: tgsched computed %d cases, %d results, %d bit for bit with the cpu alone, none wrong; ggml computed "
           "%d results, %d bit for bit, %d as ggml on its cpu alone, %d where its rope wrote past a row; largest NMSE of "
           "a result within %g: %.3g\n", tg_ran, tg_results, tg_exact, ggml_results, ggml_exact, ggml_as_alone,
           ggml_rope_spill, TG_GGML_VALUE_NMSE, worst_close);
    printf("  %-34s %6s %6s %6s %6s %6s\n", "class (values of ggml's schedule)", "ran", "wrong", "abort", "kernel", "foreign");
    for (int k = 0; k < TG_GGML_SCHED_CLASS_COUNT; k++) {
        if (per_class[k]) printf("  %-34s %6d %6d %6d %6d %6d\n", tg_ggml_sched_class_name((enum tg_ggml_sched_class)k),
                                 v_ran[k], v_wrong[k], v_crash[k], v_kernel[k], v_foreign[k]);
    }
    /* a sixth: cases with memory a context owns (about one in fifteen) are ggml's class */
    if (!only) CHECK(per_class[TG_GGML_SCHED_SAME] > n / 6 && compared > n / 3 && multi > n / 2 && chunked > 0);
    return tg_test_finish();
}

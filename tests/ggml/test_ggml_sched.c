/* The scheduler differential against ggml_backend_sched (label ggml): generated
 * multi-backend cases (the CPU and 0-3 devices with their op sets, alignments,
 * padding, shared host memory, weights placed on any backend, op offload,
 * pipeline copies) scheduled by both; the backend of every node, the splits
 * with their inputs, the copies and every compute buffer must be the same,
 * except where a listed reason (docs/upstream.md) explains it.
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
    for (uint64_t seed = first; seed <= last; seed++) {
        uint8_t bytes[TG_GEN_SCHED_HEADER_BYTES + TG_GEN_SEED_BYTES];
        case_bytes(seed, bytes, sizeof bytes);
        struct tg_ggml_sched_result r;
        CHECK_OK(tg_ggml_sched_compare(bytes, sizeof bytes, TG_SCHED_FAULT_NONE, &r));
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
    /* a sixth: cases with memory a context owns (about one in fifteen) are ggml's class */
    if (!only) CHECK(per_class[TG_GGML_SCHED_SAME] > n / 6 && compared > n / 3 && multi > n / 2 && chunked > 0);
    return tg_test_finish();
}

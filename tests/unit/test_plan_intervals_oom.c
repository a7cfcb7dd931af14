/* Host memory running out inside tg_plan_intervals (tg-plan.h promises
 * TG_ERR_ALLOC): whichever allocation fails, the call either says
 * TG_ERR_ALLOC and leaves the offsets as they were, or succeeds with the
 * plan it makes with memory to spare (the search is deterministic, so a
 * plan made short of memory must not pass for it), and nothing leaks.
 * tg_intervals_fixed_overlap likewise.  tg_test_oom.h fails the k-th
 * allocation; without it (sanitizers) the test is skipped. */
#include "tg_test_oom.h"

#include "tg-plan.h"
#include "tg_test.h"
#include "tg_test_rng.h"

#ifdef OOM_CAN_FAIL

#define N 120

static struct tg_interval problem[N];
static int n = N; /* the blocks of the problem in use */

/* hard: sizes and lifetimes that the first heuristics do not pack to the
 * lower bound, so the local search, the round robins and the ladder run. */
static void make_problem(bool hard) {
    rng_state = hard ? 7 : 20240611;
    for (int i = 0; i < N; i++) {
        int lower = (int)(rng_next() % 60);
        problem[i] = (struct tg_interval){
            .size = hard ? 1 + (size_t)(rng_next() % 1000) : 16 + (size_t)(rng_next() % 40) * 16,
            .lower = lower,
            .upper = lower + 1 + (int)(rng_next() % (hard ? 30 : 12)),
            .alignment = !hard && i % 9 == 0 ? 64 : 0,
            .offset = 0,
        };
        if (!hard && i % 17 == 3) { /* pre-placed buffers, far apart so none overlap */
            problem[i].fixed = true;
            problem[i].offset = (size_t)(i / 17) * 4096;
        }
    }
}

/* 40 blocks (no alignment, none fixed) the first heuristics do not pack to
 * the lower bound: the depth-first search of plan_exact.c runs. */
static void make_small_problem(void) {
    n = 40;
    rng_state = 5;
    for (int i = 0; i < n; i++) {
        int lower = (int)(rng_next() % 30);
        size_t size = (1 + (size_t)(rng_next() % 7)) * (rng_next() % 3 ? 64 : 192);
        problem[i] = (struct tg_interval){.size = size, .lower = lower, .upper = lower + 1 + (int)(rng_next() % 8)};
    }
}

/* A block fixed at offset 100 for the whole run, and blocks of 40 to 69
 * bytes two by two on overlapping steps: two of them never fit below it. */
static void make_gap_problem(int blocks) {
    n = blocks;
    problem[0] = (struct tg_interval){.size = 1, .lower = 0, .upper = n, .fixed = true, .offset = 100};
    for (int i = 1; i < n; i++) {
        const int step = (i - 1) / 2;
        problem[i] = (struct tg_interval){.size = 40 + (size_t)(i * 37 % 30), .lower = step, .upper = step + 2};
    }
}

struct outcome {
    enum tg_status st;
    enum tg_interval_result result;
    size_t peak;
    size_t offsets[N];
};

static struct outcome plan(const struct tg_interval_options *opts, long k) {
    struct outcome o;
    struct tg_interval b[N];
    memcpy(b, problem, sizeof b);
    memset(o.offsets, 0, sizeof o.offsets);
    for (int i = 0; i < n; i++)
        if (!b[i].fixed) b[i].offset = 12345; /* to see whether a failed call wrote offsets */
    o.result = (enum tg_interval_result)-1;
    o.peak = 7;
    oom_fail_at(k);
    o.st = tg_plan_intervals(b, n, opts, &o.result, &o.peak);
    for (int i = 0; i < n; i++) o.offsets[i] = b[i].offset;
    return o;
}

/* Every k for one set of options; the count of allocations one call makes. */
static long sweep(const char *what, const struct tg_interval_options *opts, long dense) {
    struct outcome want = plan(opts, -1);
    CHECK_OK(want.st);
    long k = 0;
    int n_alloc_errors = 0;
    for (; k < 1000000; k = oom_next_k(k, dense)) {
        long live0 = oom_live();
        struct outcome got = plan(opts, k);
        bool fired = oom_disarm();
        CHECK_MSG(oom_live() == live0, "%s k=%ld: %ld blocks leak", what, k, oom_live() - live0);
        if (!fired) {
            CHECK_OK(got.st);
            break;
        }
        if (got.st == TG_ERR_ALLOC) {
            n_alloc_errors++;
            CHECK_ERR_HAS("memory");
            bool untouched = true;
            for (int i = 0; i < n; i++) untouched &= problem[i].fixed || got.offsets[i] == 12345;
            CHECK_MSG(untouched, "%s k=%ld: TG_ERR_ALLOC wrote offsets", what, k);
            continue;
        }
        CHECK_MSG(got.st == TG_OK, "%s k=%ld: %s (want TG_OK or TG_ERR_ALLOC): %s", what, k, tg_status_name(got.st),
                  tg_last_error());
        CHECK_MSG(got.result == want.result && got.peak == want.peak &&
                      memcmp(got.offsets, want.offsets, sizeof got.offsets) == 0,
                  "%s k=%ld: an allocation failed and the call said TG_OK with another plan (result %d peak %zu, "
                  "want result %d peak %zu)",
                  what, k, (int)got.result, got.peak, (int)want.result, want.peak);
    }
    CHECK_MSG(k < 1000000, "%s: never ran out of allocations to fail", what);
    printf("%s: %ld allocations, %d answered TG_ERR_ALLOC\n", what, k, n_alloc_errors);
    return k;
}
#endif

int main(void) {
#ifndef OOM_CAN_FAIL
    printf("skipped: this build's allocator cannot be replaced (a sanitizer owns it, or not glibc)\n");
    return 77;
#else
    if (!oom_injects()) return oom_skip_not_injecting();
    printf("interval planner out of memory\n"); /* stdout's buffer is allocated before any count */
    make_problem(true);
    sweep("hard, no capacity", NULL, 4000);
    make_problem(false);
    sweep("no capacity", NULL, 4000);
    struct outcome free_plan = plan(NULL, -1);
    struct tg_interval_options tight = {.capacity = free_plan.peak};
    sweep("capacity at the peak", &tight, 4000);
    struct tg_interval_options below = {.capacity = free_plan.peak / 2};
    sweep("capacity below the bound", &below, 4000);

    /* The deeper searches, each run tens of milliseconds: the first
     * allocations, then a sample.  Small (at most small_problem_blocks): the
     * heuristics miss the bound, so the depth-first search runs. */
    make_small_problem();
    sweep("small, the depth-first search", NULL, 4000);
    /* A hole below a fixed block that the two widest of each step cannot
     * share: the bound is out of reach, so the canonical searches, the local
     * search and the ladder run to their budgets; small, then large (the
     * early search, and the round robins with a helper thread). */
    make_gap_problem(40);
    sweep("small, a gap below a fixed block", NULL, 4000);
    make_gap_problem(66);
    struct tg_interval_options helpers = {.threads = 2};
    sweep("large, a gap below a fixed block, 2 threads", &helpers, 64);
    n = N;

    /* tg_intervals_fixed_overlap: TG_ERR_ALLOC or the right answer. */
    for (long k = 0;; k++) {
        long live0 = oom_live();
        int a = 7, b = 7;
        oom_fail_at(k);
        enum tg_status st = tg_intervals_fixed_overlap(problem, N, &a, &b);
        bool fired = oom_disarm();
        CHECK(oom_live() == live0);
        if (!fired) {
            CHECK_OK(st);
            CHECK(a == -1 && b == -1);
            break;
        }
        CHECK_STATUS(st, TG_ERR_ALLOC);
    }
    return tg_test_finish();
#endif
}

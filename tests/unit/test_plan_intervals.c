/* The interval planner's API (tg-plan.h), every plan judged by the oracle's
 * interval checker (oracle/intervals.c: no overlap, alignment, fixed buffers
 * kept, the claimed peak, the capacity): hand-derived small instances with
 * and without a capacity, infeasible ones (the lower bound above the
 * capacity, a fixed buffer that leaves no hole wide enough, an alignment
 * that pushes a buffer past it), bad input (fixed buffers that overlap
 * among it, their search held against every pair), and random instances
 * with alignments and fixed buffers.  First the checker
 * itself catches each fault it exists for. */
#include "tg-oracle-intervals.h"
#include "tg-plan.h"
#include "tg_test.h"

#include <stdint.h>
#include <string.h>

#define MAX_N 64

/* Plans a copy of in; the oracle judges it.  Returns the verdict. */
static enum tg_interval_result plan_and_judge(const struct tg_interval *in, int n, size_t capacity, double seconds,
                                              struct tg_interval *out, size_t *peak, int *violations) {
    memcpy(out, in, sizeof(*in) * (size_t)n);
    const struct tg_interval_options opts = {.capacity = capacity, .seconds = seconds};
    enum tg_interval_result result = TG_INTERVALS_NOT_FOUND;
    CHECK_OK(tg_plan_intervals(out, n, &opts, &result, peak));
    struct tg_oracle_interval_report rep;
    CHECK(tg_oracle_check_intervals(in, out, n, *peak, result == TG_INTERVALS_PLANNED ? capacity : 0, &rep));
    if (rep.n) fprintf(stderr, "oracle: %s\n", rep.first);
    *violations = rep.n;
    return result;
}

static void test_oracle_catches_faults(void) {
    const struct tg_interval in[3] = {
        {.size = 4, .lower = 0, .upper = 3, .alignment = 4},
        {.size = 4, .lower = 2, .upper = 5},
        {.size = 2, .lower = 0, .upper = 5, .fixed = true, .offset = 8},
    };
    struct tg_interval out[3];
    memcpy(out, in, sizeof out);
    out[0].offset = 0;
    out[1].offset = 4;
    struct tg_oracle_interval_report rep;
    CHECK(tg_oracle_check_intervals(in, out, 3, 10, 10, &rep) && rep.n == 0);
    out[1].offset = 2; /* shares bytes with buffer 0 at step 2 */
    CHECK(tg_oracle_check_intervals(in, out, 3, 10, 0, &rep) && rep.count[TG_IRULE_OVERLAP] == 1 && rep.n == 1);
    out[1].offset = 4;
    out[0].offset = 10; /* not a multiple of its alignment 4 */
    CHECK(tg_oracle_check_intervals(in, out, 3, 14, 0, &rep) && rep.count[TG_IRULE_MISALIGNED] == 1);
    out[0].offset = 0;
    out[2].offset = 12;
    CHECK(tg_oracle_check_intervals(in, out, 3, 14, 0, &rep) && rep.count[TG_IRULE_FIXED_MOVED] == 1 && rep.n == 1);
    out[2].offset = 8;
    out[1].size = 3;
    CHECK(tg_oracle_check_intervals(in, out, 3, 10, 0, &rep) && rep.count[TG_IRULE_INPUT_CHANGED] == 1);
    out[1].size = 4;
    CHECK(tg_oracle_check_intervals(in, out, 3, 9, 0, &rep) && rep.count[TG_IRULE_WRONG_PEAK] == 1 && rep.n == 1);
    CHECK(tg_oracle_check_intervals(in, out, 3, 10, 9, &rep) && rep.count[TG_IRULE_OVER_CAPACITY] == 1 && rep.n == 1);
    /* the oracle's lower bound, by hand: 10 live at step 2 (4 + 4 + 2), the
     * fixed buffer ends at 10; raised to 14 by a fixed one ending there; an
     * empty fixed buffer far up ends nowhere */
    CHECK(tg_oracle_intervals_lower_bound(in, 3) == 10);
    struct tg_interval more[5] = {in[0], in[1], in[2]};
    more[3] = (struct tg_interval){.size = 0, .lower = 0, .upper = 1, .fixed = true, .offset = 1000};
    CHECK(tg_oracle_intervals_lower_bound(more, 4) == 10);
    more[4] = (struct tg_interval){.size = 2, .lower = 6, .upper = 7, .fixed = true, .offset = 12};
    CHECK(tg_oracle_intervals_lower_bound(more, 5) == 14);
}

/* MiniMalloc's example (corpus/dsa/example.12.csv): five buffers whose live
 * sum reaches 12 at step 0; MiniMalloc's own plan ends at 12.  At 12 there
 * is a plan, at 11 none (the lower bound is above it). */
static void test_minimalloc_example(void) {
    const struct tg_interval in[5] = {
        {.size = 4, .lower = 0, .upper = 3}, {.size = 4, .lower = 3, .upper = 9}, {.size = 4, .lower = 0, .upper = 9},
        {.size = 4, .lower = 9, .upper = 21}, {.size = 4, .lower = 0, .upper = 21},
    };
    struct tg_interval out[5];
    size_t peak = 0;
    int bad = 0;
    CHECK(plan_and_judge(in, 5, 0, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && peak == 12 && bad == 0);
    CHECK(plan_and_judge(in, 5, 12, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && peak <= 12 && bad == 0);
    CHECK(plan_and_judge(in, 5, 11, 0, out, &peak, &bad) == TG_INTERVALS_INFEASIBLE && bad == 0);
    CHECK(plan_and_judge(in, 5, 11, 0.01, out, &peak, &bad) == TG_INTERVALS_INFEASIBLE && bad == 0);
}

/* A fixed buffer of 2 bytes at offset 4, live throughout, splits 10 bytes
 * into holes of 4 and 4: a free buffer of 3 fits in either, one of 5 in
 * neither, although the live sum is 10.  Without a capacity the 5 goes
 * above the fixed one (ends at 11), the 3 below it. */
static void test_fixed_buffer(void) {
    const struct tg_interval in[3] = {
        {.size = 2, .lower = 0, .upper = 10, .fixed = true, .offset = 4},
        {.size = 3, .lower = 0, .upper = 10},
        {.size = 5, .lower = 0, .upper = 10},
    };
    struct tg_interval out[3];
    size_t peak = 0;
    int bad = 0;
    CHECK(plan_and_judge(in, 3, 10, 0, out, &peak, &bad) == TG_INTERVALS_INFEASIBLE && bad == 0);
    CHECK(plan_and_judge(in, 3, 10, 0.01, out, &peak, &bad) == TG_INTERVALS_INFEASIBLE && bad == 0);
    CHECK(plan_and_judge(in, 3, 0, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && bad == 0);
    CHECK_MSG(peak == 11 && out[0].offset == 4 && out[1].offset == 0 && out[2].offset == 6,
              "peak %zu, offsets %zu %zu %zu", peak, out[0].offset, out[1].offset, out[2].offset);
    CHECK(plan_and_judge(in, 3, 11, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && peak == 11 && bad == 0);
    /* a fixed buffer above the rest sets the peak: the free ones stay below it */
    const struct tg_interval high[2] = {
        {.size = 1, .lower = 0, .upper = 2, .fixed = true, .offset = 100},
        {.size = 8, .lower = 1, .upper = 3},
    };
    struct tg_interval out2[2];
    CHECK(plan_and_judge(high, 2, 0, 0, out2, &peak, &bad) == TG_INTERVALS_PLANNED && bad == 0);
    CHECK_MSG(peak == 101 && out2[1].offset == 0, "peak %zu, offset %zu", peak, out2[1].offset);
    /* fixed buffers live together that share bytes: no plan at all */
    const struct tg_interval clash[2] = {
        {.size = 4, .lower = 0, .upper = 2, .fixed = true, .offset = 0},
        {.size = 4, .lower = 1, .upper = 3, .fixed = true, .offset = 2},
    };
    CHECK(tg_plan_intervals(out2, 0, NULL, NULL, NULL) == TG_OK);
    memcpy(out2, clash, sizeof out2);
    enum tg_interval_result result = TG_INTERVALS_PLANNED;
    CHECK(tg_plan_intervals(out2, 2, NULL, &result, &peak) == TG_ERR_INVALID);
    CHECK(result == TG_INTERVALS_INFEASIBLE && peak == SIZE_MAX && out2[0].offset == 0 && out2[1].offset == 2);
    CHECK_MSG(strstr(tg_last_error(), "fixed buffers 0 (bytes [0, 4), steps [0, 2)) and 1 (bytes [2, 6), steps [1, 3))") !=
                  NULL,
              "%s", tg_last_error());
}

/* Two buffers of 3 bytes live together, each aligned to 4: the second
 * cannot start below 4, so the lowest plan ends at 7 although the live sum
 * is 6; at capacity 6 there is none. */
static void test_alignment(void) {
    const struct tg_interval in[2] = {
        {.size = 3, .lower = 0, .upper = 2, .alignment = 4},
        {.size = 3, .lower = 0, .upper = 2, .alignment = 4},
    };
    struct tg_interval out[2];
    size_t peak = 0;
    int bad = 0;
    CHECK(plan_and_judge(in, 2, 0, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && peak == 7 && bad == 0);
    CHECK(plan_and_judge(in, 2, 6, 0, out, &peak, &bad) == TG_INTERVALS_INFEASIBLE && bad == 0);
    CHECK(plan_and_judge(in, 2, 6, 0.01, out, &peak, &bad) == TG_INTERVALS_INFEASIBLE && bad == 0);
    /* alignment 3 and 1: 3 + 3 fits exactly */
    struct tg_interval odd[2];
    memcpy(odd, in, sizeof odd);
    odd[0].alignment = 3;
    odd[1].alignment = 1;
    CHECK(plan_and_judge(odd, 2, 6, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && peak == 6 && bad == 0);
}

static void test_bad_input(void) {
    struct tg_interval b[2] = {{.size = 1, .lower = 0, .upper = 2}, {.size = 1, .lower = 3, .upper = 3}};
    CHECK(tg_plan_intervals(b, 2, NULL, NULL, NULL) == TG_ERR_INVALID);
    CHECK(strstr(tg_last_error(), "buffer 1 is live over [3, 3)") != NULL);
    b[1] = (struct tg_interval){.size = 2, .lower = 0, .upper = 1, .fixed = true, .offset = SIZE_MAX - 1};
    CHECK(tg_plan_intervals(b, 2, NULL, NULL, NULL) == TG_ERR_INVALID);
    CHECK(strstr(tg_last_error(), "fixed buffer 1") != NULL);
    CHECK(tg_plan_intervals(NULL, 3, NULL, NULL, NULL) == TG_ERR_INVALID);
    CHECK(tg_plan_intervals(b, -1, NULL, NULL, NULL) == TG_ERR_INVALID);
    /* sizes and alignments adding up past SIZE_MAX: refused, where offsets
     * wrapped (three buffers aligned to 2^63 aborted the planner on an
     * internal check; two of 2^63 bytes made a plan of peak SIZE_MAX) */
    struct tg_interval big[3];
    for (int i = 0; i < 3; i++)
        big[i] = (struct tg_interval){.size = 8, .lower = 0, .upper = 2, .alignment = (size_t)1 << 63};
    CHECK(tg_plan_intervals(big, 3, NULL, NULL, NULL) == TG_ERR_INVALID);
    CHECK(strstr(tg_last_error(), "add up past SIZE_MAX") != NULL);
    big[0] = big[1] = (struct tg_interval){.size = (size_t)1 << 63, .lower = 0, .upper = 2};
    CHECK(tg_plan_intervals(big, 2, NULL, NULL, NULL) == TG_ERR_INVALID);
    big[0] = (struct tg_interval){.size = SIZE_MAX, .lower = 0, .upper = 1};
    CHECK(tg_plan_intervals(big, 1, NULL, NULL, NULL) == TG_OK); /* alone it fits: [0, SIZE_MAX) */
    big[0].alignment = 2; /* its padding would pass SIZE_MAX */
    CHECK(tg_plan_intervals(big, 1, NULL, NULL, NULL) == TG_ERR_INVALID);
    CHECK(strstr(tg_last_error(), "with buffer 0 (18446744073709551615 bytes, alignment 2)") != NULL);
    /* a fixed buffer counts once, by its end: 2^63 fixed and 2^62 free fit */
    big[0] = (struct tg_interval){.size = (size_t)1 << 63, .lower = 0, .upper = 1, .fixed = true, .offset = 0};
    big[1] = (struct tg_interval){.size = (size_t)1 << 62, .lower = 1, .upper = 2};
    size_t peak = 0;
    CHECK_OK(tg_plan_intervals(big, 2, NULL, NULL, &peak));
    CHECK_MSG(peak == (size_t)1 << 63 && big[1].offset == 0, "peak %zu, offset %zu", peak, big[1].offset);
}

static uint64_t rng = 0x243F6A8885A308D3ULL;

static uint64_t rnd(uint64_t below) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rng >> 33) % below;
}

/* Whether byte at lies below the end of [offset, offset + size); an end
 * past SIZE_MAX is above every byte. */
static bool below_end(size_t at, size_t offset, size_t size) {
    return offset > SIZE_MAX - size || at < offset + size;
}

/* Written from the definition, every pair: the reference for the sweep. */
static bool clash_by_definition(const struct tg_interval *x, const struct tg_interval *y) {
    if (!x->fixed || !y->fixed || x->size == 0 || y->size == 0) return false;
    if (x->upper <= y->lower || y->upper <= x->lower) return false;
    return below_end(x->offset, y->offset, y->size) && below_end(y->offset, x->offset, x->size);
}

/* tg_intervals_fixed_overlap: edges by hand (bytes or steps that only touch,
 * empty and free buffers, ends at SIZE_MAX), then random sets of fixed and
 * free buffers against every pair. */
static void test_fixed_overlap(void) {
    int a, b;
    struct tg_interval e[3] = {
        {.size = 4, .lower = 0, .upper = 2, .fixed = true, .offset = 0},
        {.size = 4, .lower = 0, .upper = 2, .fixed = true, .offset = 4}, /* bytes touch */
        {.size = 4, .lower = 2, .upper = 4, .fixed = true, .offset = 2}, /* steps touch */
    };
    CHECK_OK(tg_intervals_fixed_overlap(e, 3, &a, &b));
    CHECK(a == -1 && b == -1);
    e[2] = (struct tg_interval){.size = 0, .lower = 0, .upper = 2, .fixed = true, .offset = 2}; /* empty */
    CHECK_OK(tg_intervals_fixed_overlap(e, 3, &a, &b));
    CHECK(a == -1);
    e[2] = (struct tg_interval){.size = 8, .lower = 1, .upper = 2}; /* free */
    CHECK_OK(tg_intervals_fixed_overlap(e, 3, &a, &b));
    CHECK(a == -1);
    e[2] = (struct tg_interval){.size = 1, .lower = 1, .upper = 9, .fixed = true, .offset = 7};
    CHECK_OK(tg_intervals_fixed_overlap(e, 3, &a, &b));
    CHECK_MSG(a == 1 && b == 2, "%d %d", a, b);
    const struct tg_interval top[2] = {
        {.size = 4, .lower = 0, .upper = 1, .fixed = true, .offset = SIZE_MAX - 4},
        {.size = 1, .lower = 0, .upper = 1, .fixed = true, .offset = SIZE_MAX - 1},
    };
    CHECK_OK(tg_intervals_fixed_overlap(top, 2, &a, &b));
    CHECK(a == 0 && b == 1);
    CHECK(tg_intervals_fixed_overlap(NULL, 2, &a, &b) == TG_ERR_INVALID);
    CHECK(tg_intervals_fixed_overlap(e, 3, NULL, &b) == TG_ERR_INVALID);

    struct tg_interval in[MAX_N];
    int disagreements = 0, clashes = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const int n = 1 + (int)rnd(MAX_N);
        const uint64_t spread = 1 + rnd(400); /* few clash when wide */
        for (int i = 0; i < n; i++) {
            const int lower = (int)rnd(30);
            in[i] = (struct tg_interval){.size = rnd(10) == 0 ? 0 : 1 + rnd(16), .lower = lower,
                                         .upper = lower + 1 + (int)rnd(6), .fixed = rnd(3) != 0, .offset = rnd(spread)};
        }
        bool any = false;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) any |= clash_by_definition(&in[i], &in[j]);
        CHECK_OK(tg_intervals_fixed_overlap(in, n, &a, &b));
        const bool named = a >= 0 && a < b && b < n && clash_by_definition(&in[a], &in[b]);
        disagreements += any != (a >= 0) || (a >= 0 && !named);
        clashes += any;
    }
    CHECK_MSG(disagreements == 0, "%d of 3000 sets judged otherwise than by every pair", disagreements);
    CHECK_MSG(clashes > 500 && clashes < 2500, "%d of 3000 sets clash: the test needs both kinds", clashes);
}

/* An empty buffer pre-placed far above the rest takes no memory, so it sets
 * no peak: with few buffers (the exact searches plan) and with more than
 * the searches take (2,048: the priority-order placements alone plan), the
 * peak is the oracle's highest end, and a capacity of all sizes summed (the
 * buffers stacked) is met. */
static void test_empty_fixed_buffer(void) {
    enum { N = 3000 };
    static struct tg_interval in[N], out[N];
    const int counts[2] = {60, N};
    for (int c = 0; c < 2; c++) {
        const int n = counts[c];
        for (int i = 0; i < n; i++) {
            const int lower = (int)rnd(1000);
            in[i] = (struct tg_interval){.size = 1 + rnd(64), .lower = lower, .upper = lower + 1 + (int)rnd(50)};
        }
        in[0] = (struct tg_interval){.size = 0, .lower = 0, .upper = 1000, .fixed = true, .offset = (size_t)1 << 30};
        size_t bound = 0, peak = 0;
        int bad = 0;
        for (int i = 0; i < n; i++) bound += in[i].size;
        CHECK(plan_and_judge(in, n, bound, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED);
        CHECK_MSG(bad == 0 && peak < bound, "%d buffers: peak %zu, %d violations", n, peak, bad);
    }
    /* ... even at SIZE_MAX, or with more bytes above it than the free buffers
     * need: it bounds no offset, so the problem is not refused as one whose
     * offsets could pass SIZE_MAX (it was, naming the free buffer) */
    struct tg_interval far[2] = {
        {.size = 0, .lower = 0, .upper = 2, .fixed = true, .offset = SIZE_MAX},
        {.size = 16, .lower = 0, .upper = 2},
    };
    size_t peak = 0;
    int bad = 0;
    CHECK(plan_and_judge(far, 2, 0, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED);
    CHECK_MSG(bad == 0 && peak == 16 && out[0].offset == SIZE_MAX, "peak %zu, %d violations", peak, bad);
    far[0].offset = SIZE_MAX - 8;
    CHECK(plan_and_judge(far, 2, 16, 0, out, &peak, &bad) == TG_INTERVALS_PLANNED && bad == 0 && peak == 16);
}

/* Random buffers with random alignments; then some of them fixed where a
 * first plan put them (so a plan exists), and the rest planned around them,
 * under the capacity of that first plan: every plan is legal, and the
 * capacity of a plan that exists is met. */
static void test_random(void) {
    static const size_t alignments[] = {0, 1, 2, 8, 16, 24};
    struct tg_interval in[MAX_N], first[MAX_N], out[MAX_N];
    int bad_plans = 0, found = 0, wrong_proofs = 0, with_fixed = 0;
    for (int trial = 0; trial < 200; trial++) {
        const int n = 2 + (int)rnd(MAX_N - 1);
        for (int i = 0; i < n; i++) {
            const int lower = (int)rnd(40);
            in[i] = (struct tg_interval){.size = rnd(20) == 0 ? 0 : 1 + rnd(300), .lower = lower,
                                         .upper = lower + 1 + (int)rnd(12), .alignment = alignments[rnd(6)]};
        }
        size_t peak = 0;
        int bad = 0;
        CHECK(plan_and_judge(in, n, 0, 0, first, &peak, &bad) == TG_INTERVALS_PLANNED);
        bad_plans += bad;
        for (int i = 0; i < n; i++) {
            if (rnd(4) != 0) continue;
            in[i].fixed = true;
            in[i].offset = first[i].offset;
            with_fixed++;
        }
        size_t again = 0;
        const enum tg_interval_result r = plan_and_judge(in, n, peak, 0, out, &again, &bad);
        bad_plans += bad;
        found += r == TG_INTERVALS_PLANNED;
        wrong_proofs += r == TG_INTERVALS_INFEASIBLE;
    }
    CHECK_MSG(bad_plans == 0, "%d violations", bad_plans);
    CHECK_MSG(wrong_proofs == 0, "%d capacities a known plan meets were called infeasible", wrong_proofs);
    /* the work-bounded search finds most; tight capacities with many fixed
     * buffers can take it longer than its budget */
    CHECK_MSG(found >= 150, "only %d of 200 capacities a known plan meets were met", found);
    CHECK(with_fixed > 500);
}

int main(void) {
    test_oracle_catches_faults();
    test_minimalloc_example();
    test_fixed_buffer();
    test_alignment();
    test_bad_input();
    test_fixed_overlap();
    test_empty_fixed_buffer();
    test_random();
    return tg_test_finish();
}

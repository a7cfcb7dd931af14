/* Offline offset planner: every plan is checked by an independent pairwise
 * checker (time-overlapping blocks never share a byte, offsets aligned, the
 * returned peak is the real one), on hand-checked instances, the MiniMalloc
 * example, random instances, edge cases and huge sizes. */
#include "plan-offline.h"
#include "plan-offline-impl.h"
#include "tg_test.h"
#include "tg_test_intervals.h"

#include <stdint.h>

/* ---- independent checker (quadratic on purpose: no shared code with the planner) ---- */

enum plan_fault { PLAN_OK, PLAN_OVERLAP, PLAN_MISALIGNED, PLAN_WRONG_PEAK };

static size_t align_up(size_t size, size_t alignment) {
    return alignment <= 1 ? size : (size + alignment - 1) / alignment * alignment;
}

static enum plan_fault check_plan(const struct tg_live_block *b, int n, size_t alignment, size_t peak) {
    size_t real_peak = 0;
    for (int i = 0; i < n; i++) {
        if (alignment > 1 && b[i].offset % alignment != 0) return PLAN_MISALIGNED;
        const size_t end = b[i].offset + align_up(b[i].size, alignment);
        if (b[i].size > 0 && end > real_peak) real_peak = end;
        const int ei = b[i].end < b[i].start ? b[i].start : b[i].end;
        for (int j = i + 1; j < n; j++) {
            const int ej = b[j].end < b[j].start ? b[j].start : b[j].end;
            if (b[i].size == 0 || b[j].size == 0 || ei < b[j].start || ej < b[i].start) continue;
            if (b[i].offset + b[i].size <= b[j].offset || b[j].offset + b[j].size <= b[i].offset) continue;
            return PLAN_OVERLAP;
        }
    }
    return real_peak == peak ? PLAN_OK : PLAN_WRONG_PEAK;
}

/* Brute-force lower bound: the live sum at every start step. */
static size_t naive_lower_bound(const struct tg_live_block *b, int n) {
    size_t best = 0;
    for (int i = 0; i < n; i++) {
        size_t sum = 0;
        for (int j = 0; j < n; j++) {
            const int ej = b[j].end < b[j].start ? b[j].start : b[j].end;
            if (b[j].start <= b[i].start && b[i].start <= ej) sum += b[j].size;
        }
        if (sum > best) best = sum;
    }
    return best;
}

static uint64_t test_rng = 0x1234567887654321ULL;

static uint64_t rnd(void) {
    test_rng = test_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return test_rng >> 33;
}

/* ---- tests ---- */

static void test_checker_catches_faults(void) {
    struct tg_live_block b[2] = {{16, 0, 3, 0}, {16, 2, 5, 16}};
    CHECK(check_plan(b, 2, 16, 32) == PLAN_OK);
    b[1].offset = 8; /* overlaps block 0 while both are live at steps 2..3 */
    CHECK(check_plan(b, 2, 1, 24) == PLAN_OVERLAP);
    b[1].offset = 24;
    CHECK(check_plan(b, 2, 16, 40) == PLAN_MISALIGNED);
    b[1].offset = 16;
    CHECK(check_plan(b, 2, 16, 48) == PLAN_WRONG_PEAK);
    b[1].start = 4; /* no longer live together: sharing is fine */
    b[1].offset = 0;
    CHECK(check_plan(b, 2, 1, 16) == PLAN_OK);
}

static void test_edge_cases(void) {
    CHECK(tg_plan_offline(NULL, 0, NULL) == 0);
    CHECK(tg_live_lower_bound(NULL, 0) == 0);
    struct tg_live_block one = {100, 3, 7, 12345};
    const struct tg_offline_options opts = {.alignment = 64};
    const size_t peak = tg_plan_offline(&one, 1, &opts);
    CHECK(peak == 128);
    CHECK(one.offset == 0);
    CHECK(tg_live_lower_bound(&one, 1) == 100);
    /* Zero-size blocks take no memory and never collide. */
    struct tg_live_block zeros[3] = {{0, 0, 5, 7}, {0, 0, 5, 7}, {8, 0, 5, 7}};
    CHECK(tg_plan_offline(zeros, 3, NULL) == 8);
    CHECK(check_plan(zeros, 3, 1, 8) == PLAN_OK);
    /* A reversed range counts as live at its start only. */
    struct tg_live_block rev[2] = {{10, 5, 2, 0}, {10, 3, 4, 0}};
    CHECK(tg_live_lower_bound(rev, 2) == 10);
    CHECK(tg_plan_offline(rev, 2, NULL) == 10);
    /* Fixed blocks that overlap: no plan, the rest stacked above them; an
     * empty block, even one asking for an alignment, stays at 0 and moves
     * nothing. */
    struct tg_live_block clash[4] = {{4, 0, 3, 0}, {4, 1, 2, 2}, {0, 0, 3, 99}, {8, 0, 3, 99}};
    const bool fixed[4] = {true, true, false, false};
    const size_t align[4] = {1, 1, 16, 1};
    const struct tg_offline_options clash_opts = {.alignment = 1, .fixed = fixed, .block_alignment = align};
    size_t clash_peak = 0;
    CHECK(tg_plan_offline_fit(clash, 4, &clash_opts, &clash_peak) == TG_OFFLINE_INFEASIBLE && clash_peak == SIZE_MAX);
    CHECK_MSG(clash[0].offset == 0 && clash[1].offset == 2 && clash[2].offset == 0 && clash[3].offset == 6,
              "offsets %zu %zu %zu %zu", clash[0].offset, clash[1].offset, clash[2].offset, clash[3].offset);
}

static void test_hand_checked(void) {
    /* All live together: they stack, peak = sum. */
    struct tg_live_block stack[3] = {{10, 0, 4, 0}, {20, 1, 3, 0}, {30, 2, 2, 0}};
    CHECK(tg_live_lower_bound(stack, 3) == 60);
    size_t peak = tg_plan_offline(stack, 3, NULL);
    CHECK(peak == 60);
    CHECK(check_plan(stack, 3, 1, peak) == PLAN_OK);
    /* Disjoint in time: all share offset 0. */
    struct tg_live_block chain[4] = {{5, 0, 0, 9}, {7, 1, 1, 9}, {3, 2, 2, 9}, {6, 3, 3, 9}};
    peak = tg_plan_offline(chain, 4, NULL);
    CHECK(peak == 7);
    for (int i = 0; i < 4; i++) CHECK(chain[i].offset == 0);
    /* The ggml hole: a long-lived small block placed after a freed big one must
     * not leave the big later block above the hole.  Steps: A(8) 0..1, B(2)
     * 1..5, C(10) 3..4: live sums 8, 10, 2, 12, 12, 2 -> bound 12, reachable by
     * putting B at 10 or at 0 with C above it. */
    struct tg_live_block hole[3] = {{8, 0, 1, 0}, {2, 1, 5, 0}, {10, 3, 4, 0}};
    CHECK(tg_live_lower_bound(hole, 3) == 12);
    peak = tg_plan_offline(hole, 3, NULL);
    CHECK(peak == 12);
    CHECK(check_plan(hole, 3, 1, peak) == PLAN_OK);
    /* Alignment: sizes 1 with alignment 32 take 32 each. */
    struct tg_live_block small[3] = {{1, 0, 2, 0}, {1, 0, 2, 0}, {33, 1, 1, 0}};
    const struct tg_offline_options a32 = {.alignment = 32};
    peak = tg_plan_offline(small, 3, &a32);
    CHECK(peak == 128);
    CHECK(check_plan(small, 3, 32, peak) == PLAN_OK);
}

static int load_csv(const char *path, struct tg_live_block *out, int cap) {
    size_t *size = malloc(sizeof(size_t) * (size_t)cap);
    int *start = malloc(sizeof(int) * (size_t)cap), *end = malloc(sizeof(int) * (size_t)cap);
    const int n = size && start && end ? tg_test_read_csv(path, size, start, end, cap) : -1;
    for (int i = 0; i < n; i++) out[i] = (struct tg_live_block){size[i], start[i], end[i], 0};
    free(size);
    free(start);
    free(end);
    return n;
}

static void test_minimalloc_example(void) {
    struct tg_live_block b[16];
    const int n = load_csv("corpus/dsa/example.12.csv", b, 16);
    CHECK(n == 5);
    if (n != 5) return;
    CHECK(tg_live_lower_bound(b, n) == 12);
    CHECK(naive_lower_bound(b, n) == 12);
    const size_t peak = tg_plan_offline(b, n, NULL);
    CHECK(peak == 12);
    CHECK(check_plan(b, n, 1, peak) == PLAN_OK);
    for (int s = 0; s < TG_OFFLINE_N_STRATEGIES; s++) {
        struct tg_live_block c[16];
        memcpy(c, b, sizeof(c));
        const size_t sp = tg_plan_offline_single(c, n, NULL, (enum tg_offline_strategy)s);
        CHECK_MSG(check_plan(c, n, 1, sp) == PLAN_OK, "strategy %s", tg_offline_strategy_name((enum tg_offline_strategy)s));
        CHECK(sp >= 12);
    }
}

/* A 44-block instance (random, from a search over small problems) whose
 * plan at the lower bound the canonical search does not find: each of its
 * preorders gives up after 300M units of work, and MiniMalloc after 60 s.
 * The depth-first search that small problems get finds it within a few
 * hundred nodes; the default mode must stay at the bound here. */
static void test_small_hard_instance(void) {
    struct tg_live_block b[64];
    const int n = load_csv("tests/io/intervals_small_hard.csv", b, 64);
    CHECK_MSG(n == 44, "tests/io/intervals_small_hard.csv: %d blocks read", n);
    if (n != 44) return;
    const size_t bound = tg_live_lower_bound(b, n);
    CHECK(bound == naive_lower_bound(b, n) && bound == 409117);
    const size_t peak = tg_plan_offline(b, n, NULL);
    CHECK_MSG(peak == bound, "peak %zu, lower bound %zu", peak, bound);
    CHECK(check_plan(b, n, 1, peak) == PLAN_OK);
}

/* A random instance: mostly short lifetimes, some long-lived blocks, a few
 * zero sizes, sizes spread over three orders of magnitude. */
static int random_instance(struct tg_live_block *b, int max_n) {
    const int n = 1 + (int)(rnd() % (uint64_t)max_n);
    const int steps = 1 + (int)(rnd() % 64);
    for (int i = 0; i < n; i++) {
        const int start = (int)(rnd() % (uint64_t)steps);
        const int life = rnd() % 5 == 0 ? (int)(rnd() % (uint64_t)steps) : (int)(rnd() % 4);
        size_t size = (size_t)(1 + rnd() % 1000) * (rnd() % 3 == 0 ? 97 : 1);
        if (rnd() % 25 == 0) size = 0;
        b[i] = (struct tg_live_block){size, start, start + life, 0};
    }
    return n;
}

static void test_random_instances(void) {
    enum { MAX_N = 120, CASES = 300 };
    static struct tg_live_block base[MAX_N], a[MAX_N], c[MAX_N];
    const size_t alignments[] = {1, 8, 32, 64};
    int bad = 0, not_deterministic = 0, worse_than_single = 0, below_bound = 0, bound_mismatch = 0;
    for (int k = 0; k < CASES; k++) {
        const int n = random_instance(base, MAX_N);
        const size_t alignment = alignments[rnd() % 4];
        const struct tg_offline_options opts = {.alignment = alignment};
        if (tg_live_lower_bound(base, n) != naive_lower_bound(base, n)) bound_mismatch++;
        memcpy(a, base, sizeof(*a) * (size_t)n);
        const size_t peak = tg_plan_offline(a, n, &opts);
        if (check_plan(a, n, alignment, peak) != PLAN_OK) bad++;
        /* The bound of the rounded sizes is what the planner can reach. */
        for (int i = 0; i < n; i++) c[i] = (struct tg_live_block){align_up(base[i].size, alignment), base[i].start, base[i].end, 0};
        if (peak < naive_lower_bound(c, n)) below_bound++;
        memcpy(c, base, sizeof(*c) * (size_t)n);
        const size_t again = tg_plan_offline(c, n, &opts);
        if (again != peak) not_deterministic++;
        for (int i = 0; i < n; i++)
            if (c[i].offset != a[i].offset) {
                not_deterministic++;
                break;
            }
        for (int s = 0; s < TG_OFFLINE_N_STRATEGIES; s++) {
            memcpy(c, base, sizeof(*c) * (size_t)n);
            const size_t sp = tg_plan_offline_single(c, n, &opts, (enum tg_offline_strategy)s);
            if (check_plan(c, n, alignment, sp) != PLAN_OK) bad++;
            if (peak > sp) worse_than_single++;
        }
    }
    CHECK_MSG(bad == 0, "%d invalid plans", bad);
    CHECK_MSG(bound_mismatch == 0, "%d lower bounds differ from the brute-force one", bound_mismatch);
    CHECK_MSG(below_bound == 0, "%d peaks below the lower bound", below_bound);
    CHECK_MSG(not_deterministic == 0, "%d plans differ between two runs", not_deterministic);
    CHECK_MSG(worse_than_single == 0, "%d portfolio peaks above a single strategy", worse_than_single);
}

static void test_huge_sizes(void) {
    const size_t quarter = (SIZE_MAX / 4) & ~(size_t)63; /* aligned, three of them fit */
    struct tg_live_block b[3] = {{quarter, 0, 2, 0}, {quarter, 1, 3, 0}, {quarter, 2, 4, 0}};
    const struct tg_offline_options opts = {.alignment = 64};
    size_t peak = tg_plan_offline(b, 3, &opts);
    CHECK(peak == 3 * quarter);
    CHECK(check_plan(b, 3, 64, peak) == PLAN_OK);
    CHECK(tg_live_lower_bound(b, 3) == 3 * quarter);
    /* Five of them live together do not fit in size_t: reported as SIZE_MAX. */
    struct tg_live_block over[5];
    for (int i = 0; i < 5; i++) over[i] = (struct tg_live_block){quarter, 0, 1, 0};
    CHECK(tg_live_lower_bound(over, 5) == SIZE_MAX);
    CHECK(tg_plan_offline(over, 5, &opts) == SIZE_MAX);
    /* A size that cannot be rounded up saturates instead of wrapping to 0. */
    struct tg_live_block unroundable = {SIZE_MAX - 3, 0, 0, 0};
    CHECK(tg_plan_offline(&unroundable, 1, &opts) == SIZE_MAX);
}

/* The planner only compares and halves sizes, so scaling every size of an
 * instance by a power of two must scale its plan exactly.  Scaled so that the
 * lower bound passes SIZE_MAX / n, the exact search's prune can no longer sum
 * sections as differences (n blocks below the capacity might overflow) and
 * takes its saturating path; the plans must still agree. */
static void test_scaled_sizes(void) {
    enum { MAX_N = 60, CASES = 200 };
    static struct tg_live_block base[MAX_N], a[MAX_N], c[MAX_N];
    int bad = 0, not_scaled = 0, huge = 0;
    for (int k = 0; k < CASES; k++) {
        const int n = random_instance(base, MAX_N);
        size_t total = 0;
        for (int i = 0; i < n; i++) {
            base[i].size = align_up(base[i].size, 64); /* the gap halvings stay exact */
            total += base[i].size;
        }
        int shift = 0; /* the largest that keeps the sum of all sizes under 2^62 */
        while (total > 0 && (total << (shift + 1)) < ((size_t)1 << 62)) shift++;
        memcpy(a, base, sizeof(*a) * (size_t)n);
        const size_t peak = tg_plan_offline(a, n, NULL);
        for (int i = 0; i < n; i++) c[i] = (struct tg_live_block){base[i].size << shift, base[i].start, base[i].end, 0};
        if (tg_live_lower_bound(c, n) > SIZE_MAX / (size_t)n) huge++;
        const size_t scaled = tg_plan_offline(c, n, NULL);
        if (check_plan(c, n, 1, scaled) != PLAN_OK) bad++;
        bool same = scaled == peak << shift;
        for (int i = 0; i < n && same; i++) same = c[i].size == 0 || c[i].offset == a[i].offset << shift;
        not_scaled += !same;
    }
    CHECK_MSG(bad == 0, "%d invalid plans of scaled instances", bad);
    CHECK_MSG(not_scaled == 0, "%d scaled instances planned differently", not_scaled);
    CHECK_MSG(huge > CASES / 2, "only %d instances had a bound past SIZE_MAX / n", huge);
}

/* Past the exact searches' block limit (their scratch grows with blocks x
 * depth) the portfolio still plans, validly, in bounded memory. */
static void test_many_blocks(void) {
    enum { N = 3000 };
    static struct tg_live_block b[N];
    for (int i = 0; i < N; i++) {
        const int start = (int)(rnd() % 2000);
        b[i] = (struct tg_live_block){(size_t)(1 + rnd() % 4096), start, start + (int)(rnd() % 40), 0};
    }
    const size_t bound = tg_live_lower_bound(b, N);
    const size_t peak = tg_plan_offline(b, N, NULL);
    CHECK(check_plan(b, N, 1, peak) == PLAN_OK);
    CHECK_MSG(peak >= bound && peak <= bound + bound / 2, "peak %zu, lower bound %zu", peak, bound);
}

static void test_exact_mode(void) {
    enum { N = 40 };
    struct tg_live_block base[N], a[N], c[N];
    for (int k = 0; k < 20; k++) {
        const int n = random_instance(base, N);
        memcpy(a, base, sizeof(a));
        const size_t heuristic = tg_plan_offline(a, n, NULL);
        memcpy(c, base, sizeof(c));
        const struct tg_offline_options exact = {.alignment = 1, .exact = true, .exact_seconds = 0.02};
        const size_t best = tg_plan_offline(c, n, &exact);
        CHECK(check_plan(c, n, 1, best) == PLAN_OK);
        CHECK(best <= heuristic);
        CHECK(best >= tg_live_lower_bound(base, n));
    }
}

/* The greedy-breadth key: the live bytes of the busiest step a block spans,
 * ends inclusive.  A [0, 1] 10 bytes, B [1, 2] 20, C [2, 3] 5: step 1 holds
 * A and B (30), step 2 holds B and C (25). */
static void test_breadth_inclusive_ends(void) {
    const struct tg_live_block blocks[3] = {{10, 0, 1, 0}, {20, 1, 2, 0}, {5, 2, 3, 0}};
    struct offline_problem p;
    CHECK(offline_problem_init(&p, blocks, 3, 1, NULL, NULL));
    size_t breadth[3] = {0};
    CHECK(compute_breadth(&p, breadth));
    CHECK_MSG(breadth[0] == 30 && breadth[1] == 30 && breadth[2] == 25, "breadth %zu %zu %zu", breadth[0], breadth[1],
              breadth[2]);
    offline_problem_release(&p);
}

/* With every search's budget at zero the planner's plan is the best of its
 * strategies alone (tg_plan_offline_single), on random instances: a later
 * strategy's lower peak replaces an earlier one's. */
static void test_best_strategy_kept(void) {
    enum { N = 60 };
    struct tg_live_block base[N], a[N], c[N];
    struct tg_offline_budgets none = tg_offline_default_budgets;
    none.small_problem_blocks = 0;
    none.search_max_blocks = 0;
    none.local_search_max_work = 0;
    none.early_search_max_excess = -1.0;
    none.canonical_ladder_effort = 0;
    const struct tg_offline_options opts = {.alignment = 1, .budgets = &none};
    int differ = 0, mixed = 0;
    for (int k = 0; k < 200; k++) {
        const int n = random_instance(base, N);
        size_t best = SIZE_MAX, first = 0;
        for (int st = 0; st < TG_OFFLINE_N_STRATEGIES; st++) {
            memcpy(c, base, sizeof(c));
            const size_t peak = tg_plan_offline_single(c, n, &opts, (enum tg_offline_strategy)st);
            if (st == 0) first = peak;
            if (peak < best) best = peak;
        }
        memcpy(a, base, sizeof(a));
        const size_t peak = tg_plan_offline(a, n, &opts);
        differ += peak != best;
        mixed += best < first;
        if (check_plan(a, n, 1, peak) != PLAN_OK) differ++;
    }
    CHECK_MSG(differ == 0, "%d of 200 plans are not the best single strategy's", differ);
    CHECK_MSG(mixed > 0, "no instance where a later strategy beats the first");
}

int main(void) {
    test_best_strategy_kept();
    test_breadth_inclusive_ends();
    test_checker_catches_faults();
    test_edge_cases();
    test_hand_checked();
    test_minimalloc_example();
    test_small_hard_instance();
    test_random_instances();
    test_huge_sizes();
    test_scaled_sizes();
    test_many_blocks();
    test_exact_mode();
    return tg_test_finish();
}

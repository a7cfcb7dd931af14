/* Canonical exact search: on every small random instance, with and without
 * alignments of their own and fixed blocks, its verdict (a plan under the
 * capacity, or none exists) agrees with a brute force over all aligned
 * offsets; every plan it returns passes an independent checker (no overlap,
 * under the capacity, aligned, fixed blocks kept); node limits, deadlines and
 * degenerate inputs give the documented results; it solves hard MiniMalloc
 * instances at their capacity; a search run in slices visits exactly
 * what one run visits (same work, same verdict, same plan); and a search
 * guided by a plan agrees with the brute force too and, given a plan,
 * returns it after a fraction of the work. */
#include "plan-canonical.h"
#include "tg_test.h"
#include "tg_test_intervals.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define MAX_BLOCKS 400

struct instance {
    int n;
    size_t size[MAX_BLOCKS];
    int start[MAX_BLOCKS], end[MAX_BLOCKS];
    int adj_begin[MAX_BLOCKS + 1];
    int *adj;
    size_t alignment[MAX_BLOCKS]; /* used when aligned */
    size_t fixed[MAX_BLOCKS];     /* used when has_fixed; TG_CANONICAL_FREE: free */
    bool aligned, has_fixed;
};

static bool live_together(const struct instance *in, int i, int j) {
    return in->start[i] <= in->end[j] && in->start[j] <= in->end[i];
}

static void build_conflicts(struct instance *in) {
    tg_test_conflicts(in->n, in->size, in->start, in->end, in->adj_begin, &in->adj);
}

static struct tg_canonical_problem problem_of(const struct instance *in) {
    return (struct tg_canonical_problem){in->n,   in->size, in->start, in->end, in->adj_begin, in->adj,
                                         in->aligned ? in->alignment : NULL, in->has_fixed ? in->fixed : NULL};
}

enum plan_fault { PLAN_OK, PLAN_OVERLAP, PLAN_OVER_CAPACITY, PLAN_MISALIGNED, PLAN_FIXED_MOVED };

static bool is_fixed(const struct instance *in, int i) { return in->has_fixed && in->fixed[i] != TG_CANONICAL_FREE; }

static enum plan_fault check_plan(const struct instance *in, const size_t *offset, size_t capacity) {
    for (int i = 0; i < in->n; i++) {
        if (is_fixed(in, i) && offset[i] != in->fixed[i]) return PLAN_FIXED_MOVED;
        if (!is_fixed(in, i) && in->aligned && in->size[i] > 0 && offset[i] % in->alignment[i] != 0)
            return PLAN_MISALIGNED;
        if (in->size[i] > 0 && (offset[i] > capacity || in->size[i] > capacity - offset[i])) return PLAN_OVER_CAPACITY;
        for (int j = i + 1; j < in->n; j++) {
            if (in->size[i] == 0 || in->size[j] == 0 || !live_together(in, i, j)) continue;
            if (offset[i] + in->size[i] <= offset[j] || offset[j] + in->size[j] <= offset[i]) continue;
            return PLAN_OVERLAP;
        }
    }
    return PLAN_OK;
}

/* Whether blocks k.. can be given offsets under capacity, trying every
 * aligned offset (a fixed block only its own). */
static bool brute_force_fits(const struct instance *in, size_t *offset, int k, size_t capacity) {
    if (k == in->n) return true;
    if (in->size[k] == 0) { /* takes no memory: anywhere, its fixed offset or 0 */
        offset[k] = is_fixed(in, k) ? in->fixed[k] : 0;
        return brute_force_fits(in, offset, k + 1, capacity);
    }
    if (in->size[k] > capacity) return false;
    const size_t step = in->aligned && in->alignment[k] > 1 ? in->alignment[k] : 1;
    const size_t first = is_fixed(in, k) ? in->fixed[k] : 0, last = is_fixed(in, k) ? in->fixed[k] : capacity;
    for (size_t at = first; at <= last && at + in->size[k] <= capacity; at += step) {
        bool clash = false;
        for (int j = 0; j < k && !clash; j++) {
            clash = in->size[k] > 0 && in->size[j] > 0 && live_together(in, j, k) && at < offset[j] + in->size[j] &&
                    offset[j] < at + in->size[k];
        }
        if (clash) continue;
        offset[k] = at;
        if (brute_force_fits(in, offset, k + 1, capacity)) return true;
    }
    return false;
}

static void print_instance(const struct instance *in, size_t capacity, bool fits) {
    fprintf(stderr, "capacity %zu, brute force %s:", capacity, fits ? "fits" : "no plan");
    for (int i = 0; i < in->n; i++) {
        fprintf(stderr, " [size %zu, steps %d-%d", in->size[i], in->start[i], in->end[i]);
        if (in->aligned) fprintf(stderr, ", alignment %zu", in->alignment[i]);
        if (is_fixed(in, i)) fprintf(stderr, ", fixed at %zu", in->fixed[i]);
        fprintf(stderr, "]");
    }
    fprintf(stderr, "\n");
}

static size_t lower_bound(const struct instance *in) {
    size_t best = 0;
    for (int i = 0; i < in->n; i++) {
        size_t sum = 0;
        for (int j = 0; j < in->n; j++)
            if (in->start[j] <= in->start[i] && in->start[i] <= in->end[j]) sum += in->size[j];
        if (sum > best) best = sum;
    }
    return best;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static int rnd(int below) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int)((rng_state >> 33) % (uint64_t)below);
}

static void test_checker_catches_faults(void) {
    struct instance in = {.n = 2, .size = {4, 4}, .start = {0, 1}, .end = {2, 3}};
    build_conflicts(&in);
    size_t ok[2] = {0, 4}, overlap[2] = {0, 2}, high[2] = {0, 8};
    CHECK(check_plan(&in, ok, 8) == PLAN_OK);
    CHECK(check_plan(&in, overlap, 8) == PLAN_OVERLAP);
    CHECK(check_plan(&in, high, 8) == PLAN_OVER_CAPACITY);
    in.aligned = true;
    in.alignment[0] = 1;
    in.alignment[1] = 8;
    CHECK(check_plan(&in, ok, 8) == PLAN_MISALIGNED);
    in.aligned = false;
    in.has_fixed = true;
    in.fixed[0] = 4;
    in.fixed[1] = TG_CANONICAL_FREE;
    CHECK(check_plan(&in, ok, 8) == PLAN_FIXED_MOVED);
    free(in.adj);
}

static void test_agrees_with_brute_force(void) {
    struct instance in = {0};
    int found = 0, infeasible = 0, disagree = 0, bad_plans = 0, gave_up = 0;
    for (int trial = 0; trial < 800; trial++) {
        in.n = 2 + rnd(5);
        /* a quarter plain, a quarter with alignments of their own, a quarter with some blocks fixed too,
         * a quarter with most blocks fixed, often at the same offsets (the search's rules for fixed
         * blocks left behind by a placement at their offset or above it) */
        const int kind = trial / TG_N_PREORDERS % 4;
        in.aligned = kind != 0;
        in.has_fixed = kind >= 2;
        for (int i = 0; i < in.n; i++) {
            in.size[i] = (size_t)rnd(4); /* some zero */
            in.start[i] = rnd(6);
            in.end[i] = in.start[i] + rnd(4);
            in.alignment[i] = 1 + (size_t)rnd(3);
            in.fixed[i] = TG_CANONICAL_FREE;
            if (kind == 2 && rnd(4) == 0) in.fixed[i] = (size_t)rnd(6);
            if (kind == 3 && rnd(3) != 0) in.fixed[i] = (size_t)rnd(3) * 2;
        }
        build_conflicts(&in);
        const size_t bound = lower_bound(&in);
        for (size_t capacity = bound > 0 ? bound - 1 : 0; capacity <= bound + 2; capacity++) {
            size_t brute[MAX_BLOCKS], offset[MAX_BLOCKS];
            const bool fits = brute_force_fits(&in, brute, 0, capacity);
            const struct tg_canonical_problem p = problem_of(&in);
            long long effort = 0; /* no limit */
            const enum tg_canonical_result r =
                tg_canonical_search(&p, capacity, (enum tg_canonical_preorder)(trial % TG_N_PREORDERS), &effort, 0,
                                    offset);
            /* the same search guided by a random "plan": another order, the same verdict */
            size_t guide[MAX_BLOCKS], guided_offset[MAX_BLOCKS];
            for (int i = 0; i < in.n; i++) guide[i] = (size_t)rnd(8);
            struct tg_canonical_search *guided = tg_canonical_new_guided(&p, capacity, guide);
            effort = 0;
            const enum tg_canonical_result r_guided = tg_canonical_run(guided, &effort, 0, guided_offset);
            tg_canonical_free(guided);
            const enum tg_canonical_result results[2] = {r, r_guided};
            const size_t *offsets[2] = {offset, guided_offset};
            for (int k = 0; k < 2; k++) {
                if (results[k] == TG_CANONICAL_GAVE_UP) gave_up++;
                else if ((results[k] == TG_CANONICAL_FOUND) != fits && ++disagree <= 3)
                    print_instance(&in, capacity, fits);
                if (results[k] == TG_CANONICAL_FOUND) {
                    found++;
                    if (check_plan(&in, offsets[k], capacity) != PLAN_OK) bad_plans++;
                } else if (results[k] == TG_CANONICAL_INFEASIBLE) {
                    infeasible++;
                }
            }
        }
    }
    CHECK_MSG(disagree == 0, "%d verdicts differ from the brute force", disagree);
    CHECK_MSG(bad_plans == 0, "%d plans overlap or exceed the capacity", bad_plans);
    CHECK_MSG(gave_up == 0, "%d searches without a limit gave up", gave_up);
    CHECK_MSG(found > 1000 && infeasible > 1000, "found %d, infeasible %d: the instances test both verdicts", found,
              infeasible);
    free(in.adj);
}

static void test_degenerate_inputs(void) {
    size_t offset[4] = {7, 7, 7, 7};
    long long effort = 0;
    CHECK(tg_canonical_search(NULL, 10, 0, &effort, 0, offset) == TG_CANONICAL_GAVE_UP);
    /* zero-size blocks take no memory: offset 0 */
    struct instance zeros = {.n = 3, .size = {0, 0, 5}, .start = {0, 0, 0}, .end = {3, 3, 3}};
    build_conflicts(&zeros);
    struct tg_canonical_problem p = problem_of(&zeros);
    CHECK(tg_canonical_search(&p, 5, 0, &effort, 0, offset) == TG_CANONICAL_FOUND);
    CHECK(offset[0] == 0 && offset[1] == 0 && offset[2] == 0);
    /* a block larger than the capacity: nothing to search */
    CHECK(tg_canonical_search(&p, 4, 0, &effort, 0, offset) == TG_CANONICAL_INFEASIBLE);
    /* sizes near SIZE_MAX do not wrap */
    const size_t third = SIZE_MAX / 3;
    struct instance huge = {.n = 3, .size = {third, third, third}, .start = {0, 1, 2}, .end = {2, 3, 4}};
    build_conflicts(&huge);
    p = problem_of(&huge);
    CHECK(tg_canonical_search(&p, SIZE_MAX, 0, &effort, 0, offset) == TG_CANONICAL_FOUND);
    CHECK(check_plan(&huge, offset, SIZE_MAX) == PLAN_OK);
    CHECK(tg_canonical_search(&p, 2 * third, 0, &effort, 0, offset) == TG_CANONICAL_INFEASIBLE);
    free(zeros.adj);
    free(huge.adj);
}

static int load_csv(const char *path, struct instance *in) {
    in->n = tg_test_read_csv(path, in->size, in->start, in->end, MAX_BLOCKS);
    if (in->n < 0) return -1;
    build_conflicts(in);
    return in->n;
}

static double clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_limits(void) {
    struct instance in = {0};
    const int n = load_csv("corpus/dsa/E.1048576.csv", &in);
    CHECK_MSG(n > 100, "cannot read corpus/dsa/E.1048576.csv");
    if (n <= 100) return;
    size_t *offset = malloc(sizeof(size_t) * (size_t)in.n);
    const struct tg_canonical_problem p = problem_of(&in);
    /* the effort limit stops it within one placement's work of the limit */
    long long effort = 5000;
    CHECK(tg_canonical_search(&p, 1048576, 0, &effort, 0, offset) == TG_CANONICAL_GAVE_UP);
    CHECK_MSG(effort >= 5000 && effort < 5000 + 2 * in.adj_begin[in.n], "a 5,000-unit search did %lld", effort);
    /* past its deadline it gives up before its first placement, where a
     * search allowed one unit of work stops too: the same work is counted */
    long long one_unit = 1;
    CHECK(tg_canonical_search(&p, 1048576, 0, &one_unit, 0, offset) == TG_CANONICAL_GAVE_UP);
    effort = 0;
    CHECK(tg_canonical_search(&p, 1048576, 0, &effort, clock_now() - 1, offset) == TG_CANONICAL_GAVE_UP);
    CHECK_MSG(effort > 0 && effort == one_unit, "a search past its deadline did %lld units of work, one allowed a unit %lld",
              effort, one_unit);
    free(offset);
    free(in.adj);
}

/* MiniMalloc's challenging instances that this search solves at their
 * capacity within a few thousand placements (the greedy planners stay 12-37%
 * above).  E with TWA and H with TAW are solved only because each piece is
 * ranked again after a split (MiniMalloc's dynamic ordering): with the
 * ranks of the whole problem those searches do not finish. */
static void test_hard_instances(void) {
    static const struct {
        const char *path;
        enum tg_canonical_preorder preorder;
    } cases[] = {
        {"corpus/dsa/A.1048576.csv", TG_PREORDER_TOTAL_WIDTH_AREA},
        {"corpus/dsa/C.1048576.csv", TG_PREORDER_TOTAL_AREA_WIDTH},
        {"corpus/dsa/D.1048576.csv", TG_PREORDER_WIDTH_AREA_TOTAL},
        {"corpus/dsa/E.1048576.csv", TG_PREORDER_TOTAL_WIDTH_AREA},
        {"corpus/dsa/G.1048576.csv", TG_PREORDER_TOTAL_WIDTH_AREA},
        {"corpus/dsa/H.1048576.csv", TG_PREORDER_TOTAL_AREA_WIDTH},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct instance in = {0};
        const int n = load_csv(cases[c].path, &in);
        CHECK_MSG(n > 100, "cannot read %s", cases[c].path);
        if (n <= 100) continue;
        size_t *offset = malloc(sizeof(size_t) * (size_t)in.n);
        const struct tg_canonical_problem p = problem_of(&in);
        long long effort = 20000000;
        const enum tg_canonical_result r = tg_canonical_search(&p, 1048576, cases[c].preorder, &effort, 0, offset);
        CHECK_MSG(r == TG_CANONICAL_FOUND, "%s: no plan at the capacity after %lld units of work", cases[c].path, effort);
        if (r == TG_CANONICAL_FOUND)
            CHECK_MSG(check_plan(&in, offset, 1048576) == PLAN_OK, "%s: bad plan", cases[c].path);
        free(offset);
        free(in.adj);
    }
}

/* Runs a new search in slices (each slice 1..max_slice units, drawn) until
 * it ends or total_limit (> 0) is spent; the work of all slices in *work. */
static enum tg_canonical_result run_in_slices(const struct tg_canonical_problem *p, size_t capacity,
                                              enum tg_canonical_preorder preorder, long long max_slice,
                                              long long total_limit, long long *work, size_t *offset) {
    struct tg_canonical_search *search = tg_canonical_new(p, capacity, preorder);
    enum tg_canonical_result r = TG_CANONICAL_GAVE_UP;
    *work = 0;
    for (;;) {
        long long slice = 1 + (long long)rnd((int)max_slice);
        if (total_limit > 0 && *work + slice > total_limit) slice = total_limit - *work;
        if (slice <= 0) break;
        r = tg_canonical_run(search, &slice, 0, offset);
        *work += slice;
        if (r != TG_CANONICAL_GAVE_UP) break;
    }
    tg_canonical_free(search);
    return r;
}

static bool same_offsets(const size_t *a, const size_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* A search stopped by its limit goes on where it stopped: in slices it does
 * the same work and returns the same verdict and plan as in one run, where
 * one run finds a plan, proves there is none, or stops at the same total. */
static void test_resumed_runs(void) {
    struct instance in = {0};
    int differ = 0, runs = 0;
    for (int trial = 0; trial < 300; trial++) {
        in.n = 3 + rnd(6);
        in.aligned = trial % 3 == 1;
        in.has_fixed = trial % 3 == 2;
        for (int i = 0; i < in.n; i++) {
            in.size[i] = 1 + (size_t)rnd(4);
            in.start[i] = rnd(6);
            in.end[i] = in.start[i] + rnd(4);
            in.alignment[i] = 1 + (size_t)rnd(3);
            in.fixed[i] = rnd(4) == 0 ? (size_t)rnd(6) : TG_CANONICAL_FREE;
        }
        build_conflicts(&in);
        const struct tg_canonical_problem p = problem_of(&in);
        const size_t bound = lower_bound(&in);
        for (size_t capacity = bound; capacity <= bound + 1; capacity++) {
            const enum tg_canonical_preorder preorder = (enum tg_canonical_preorder)(trial % TG_N_PREORDERS);
            size_t one[MAX_BLOCKS] = {0}, sliced[MAX_BLOCKS] = {0};
            long long work_one = 0, work_sliced = 0;
            const enum tg_canonical_result r_one = tg_canonical_search(&p, capacity, preorder, &work_one, 0, one);
            const enum tg_canonical_result r_sliced = run_in_slices(&p, capacity, preorder, 8, 0, &work_sliced, sliced);
            runs++;
            if (r_one != r_sliced || work_one != work_sliced ||
                (r_one == TG_CANONICAL_FOUND && !same_offsets(one, sliced, in.n)))
                differ++;
        }
    }
    CHECK_MSG(differ == 0, "%d of %d small searches differ when run in slices", differ, runs);
    /* a hard instance: found after ~10M units in one run (TWA), and stopped at 3M */
    in.aligned = in.has_fixed = false;
    const int n = load_csv("corpus/dsa/A.1048576.csv", &in);
    CHECK_MSG(n > 100, "cannot read corpus/dsa/A.1048576.csv");
    if (n > 100) {
        size_t *one = malloc(sizeof(size_t) * (size_t)n), *sliced = malloc(sizeof(size_t) * (size_t)n);
        const struct tg_canonical_problem p = problem_of(&in);
        long long work_one = 20000000, work_sliced = 0;
        enum tg_canonical_result r_one = tg_canonical_search(&p, 1048576, TG_PREORDER_TOTAL_WIDTH_AREA, &work_one, 0, one);
        enum tg_canonical_result r_sliced =
            run_in_slices(&p, 1048576, TG_PREORDER_TOTAL_WIDTH_AREA, 300000, 20000000, &work_sliced, sliced);
        CHECK_MSG(r_one == TG_CANONICAL_FOUND && r_sliced == TG_CANONICAL_FOUND && work_one == work_sliced &&
                      same_offsets(one, sliced, n),
                  "A in slices: %d after %lld units, in one run %d after %lld", (int)r_sliced, work_sliced,
                  (int)r_one, work_one);
        work_one = 3000000;
        r_one = tg_canonical_search(&p, 1048576, TG_PREORDER_TOTAL_WIDTH_AREA, &work_one, 0, one);
        r_sliced = run_in_slices(&p, 1048576, TG_PREORDER_TOTAL_WIDTH_AREA, 300000, 3000000, &work_sliced, sliced);
        CHECK_MSG(r_one == TG_CANONICAL_GAVE_UP && r_sliced == TG_CANONICAL_GAVE_UP && work_one == work_sliced,
                  "A stopped at 3M units: %lld in slices, %lld in one run", work_sliced, work_one);
        /* an ended search keeps its verdict and writes its plan again, doing no work */
        struct tg_canonical_search *search = tg_canonical_new(&p, 1048576, TG_PREORDER_TOTAL_WIDTH_AREA);
        long long effort = 0;
        CHECK(tg_canonical_run(search, &effort, 0, one) == TG_CANONICAL_FOUND);
        for (int i = 0; i < n; i++) sliced[i] = 0;
        effort = 0;
        CHECK(tg_canonical_run(search, &effort, 0, sliced) == TG_CANONICAL_FOUND && effort == 0 &&
              same_offsets(one, sliced, n));
        tg_canonical_free(search);
        free(one);
        free(sliced);
    }
    CHECK(tg_canonical_new(NULL, 10, 0) == NULL);
    long long effort = 5;
    CHECK(tg_canonical_run(NULL, &effort, 0, NULL) == TG_CANONICAL_GAVE_UP && effort == 0);
    tg_canonical_free(NULL);
    free(in.adj);
}

/* A search guided by a plan walks out from that plan: given the plan a
 * preorder found at the capacity, it returns the same plan, after a fraction
 * of the work (the guide ignored, it would repeat that preorder's search). */
static void test_guided_by_a_plan(void) {
    static const char *const paths[] = {"corpus/dsa/A.1048576.csv", "corpus/dsa/E.1048576.csv"};
    for (size_t c = 0; c < sizeof(paths) / sizeof(paths[0]); c++) {
        struct instance in = {0};
        const int n = load_csv(paths[c], &in);
        CHECK_MSG(n > 100, "cannot read %s", paths[c]);
        if (n <= 100) continue;
        size_t *plan = malloc(sizeof(size_t) * (size_t)n), *again = malloc(sizeof(size_t) * (size_t)n);
        const struct tg_canonical_problem p = problem_of(&in);
        long long work = 20000000;
        const enum tg_canonical_result r = tg_canonical_search(&p, 1048576, TG_PREORDER_TOTAL_WIDTH_AREA, &work, 0, plan);
        CHECK_MSG(r == TG_CANONICAL_FOUND, "%s: TWA found no plan in %lld units", paths[c], work);
        if (r == TG_CANONICAL_FOUND) {
            struct tg_canonical_search *guided = tg_canonical_new_guided(&p, 1048576, plan);
            long long guided_work = work;
            const enum tg_canonical_result r_guided = tg_canonical_run(guided, &guided_work, 0, again);
            tg_canonical_free(guided);
            CHECK_MSG(r_guided == TG_CANONICAL_FOUND && same_offsets(plan, again, n) && guided_work * 4 < work,
                      "%s: guided by TWA's plan (%lld units): %d after %lld units, %s plan", paths[c], work,
                      (int)r_guided, guided_work, same_offsets(plan, again, n) ? "the same" : "another");
        }
        free(plan);
        free(again);
        free(in.adj);
    }
    CHECK(tg_canonical_new_guided(NULL, 10, NULL) == NULL);
}

/* Fixed blocks and the canonical order.  A fixed block placed at its offset
 * beside a free block there (they do not conflict, a third block conflicts
 * with both above them): the only plan under the capacity places the free
 * block, which every preorder ranks first (longer lived), and then the fixed
 * one at the same offset, which a search that took "at the last placement's
 * offset" for "left behind" would miss. */
static void test_fixed_beside_a_placement(void) {
    struct instance in = {.n = 3, .size = {1, 1, 1}, .start = {0, 3, 0}, .end = {2, 3, 3}, .has_fixed = true,
                          .fixed = {TG_CANONICAL_FREE, 0, TG_CANONICAL_FREE}};
    build_conflicts(&in);
    for (int preorder = 0; preorder < TG_N_PREORDERS; preorder++) {
        size_t offset[3];
        long long effort = 0;
        const struct tg_canonical_problem p = problem_of(&in);
        const enum tg_canonical_result r =
            tg_canonical_search(&p, 2, (enum tg_canonical_preorder)preorder, &effort, 0, offset);
        CHECK_MSG(r == TG_CANONICAL_FOUND, "preorder %d: no plan at capacity 2 (0, 0, 1 fits)", preorder);
        if (r == TG_CANONICAL_FOUND) CHECK(check_plan(&in, offset, 2) == PLAN_OK);
    }
    free(in.adj);
}

/* Most blocks fixed where a plan put them, a few free above: "can the top
 * be packed lower?".  A fixed block behind the last placement can never be
 * placed, and one that failed at its offset leaves no other candidate; with
 * those rules the search proves this one infeasible in about 450K units of
 * work (without them: about 25M).  The plan is first fit in order of start,
 * made here; the five blocks with the highest tops are free, the capacity
 * one byte below its peak. */
static void test_mostly_fixed(void) {
    struct instance in = {0};
    const int n = load_csv("corpus/dsa/D.1048576.csv", &in);
    CHECK_MSG(n > 100, "cannot read corpus/dsa/D.1048576.csv");
    if (n <= 100) return;
    size_t offset[MAX_BLOCKS], peak = 0;
    for (int i = 0; i < n; i++) { /* first fit in order of start */
        offset[i] = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int e = in.adj_begin[i]; e < in.adj_begin[i + 1]; e++) {
                const int j = in.adj[e];
                if (j < i && offset[i] < offset[j] + in.size[j] && offset[j] < offset[i] + in.size[i]) {
                    offset[i] = offset[j] + in.size[j];
                    moved = true;
                }
            }
        }
        if (offset[i] + in.size[i] > peak) peak = offset[i] + in.size[i];
    }
    in.has_fixed = true;
    for (int i = 0; i < n; i++) in.fixed[i] = offset[i];
    for (int k = 0; k < 5; k++) {
        int highest = -1;
        for (int i = 0; i < n; i++)
            if (in.fixed[i] != TG_CANONICAL_FREE &&
                (highest < 0 || offset[i] + in.size[i] > offset[highest] + in.size[highest]))
                highest = i;
        in.fixed[highest] = TG_CANONICAL_FREE;
    }
    const struct tg_canonical_problem p = problem_of(&in);
    for (int preorder = 0; preorder < TG_N_PREORDERS; preorder++) {
        long long effort = 2000000;
        size_t out[MAX_BLOCKS];
        const enum tg_canonical_result r =
            tg_canonical_search(&p, peak - 1, (enum tg_canonical_preorder)preorder, &effort, 0, out);
        CHECK_MSG(r == TG_CANONICAL_INFEASIBLE, "preorder %d: %d after %lld units (peak %zu)", preorder, (int)r,
                  effort, peak);
        /* at the peak itself the plan it came from fits */
        effort = 2000000;
        CHECK(tg_canonical_search(&p, peak, (enum tg_canonical_preorder)preorder, &effort, 0, out) ==
              TG_CANONICAL_FOUND);
    }
    free(in.adj);
}

int main(void) {
    test_checker_catches_faults();
    test_agrees_with_brute_force();
    test_degenerate_inputs();
    test_limits();
    test_hard_instances();
    test_resumed_runs();
    test_guided_by_a_plan();
    test_fixed_beside_a_placement();
    test_mostly_fixed();
    return tg_test_finish();
}

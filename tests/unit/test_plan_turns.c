/* The round robin of the canonical searches on several threads
 * (plan-turns.h): for 1-4 threads it gives what the searches give when one
 * thread takes the turns in order here (the answer, the plan, the work
 * counted, the next turn), also when a round robin goes on where a budget
 * stopped it, and with a budget of more turns than memory could count;
 * helper threads do take turns, the first job of a new pool
 * included; and the whole planner gives the same offsets for every thread
 * count. */
#include "plan-offline.h"
#include "plan-turns.h"
#include "tg_test.h"
#include "tg_test_intervals.h"
#include "tg_test_rng.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKS 500
#define N_SEARCHES 4

struct instance {
    int n;
    size_t size[MAX_BLOCKS];
    int start[MAX_BLOCKS], end[MAX_BLOCKS];
    int adj_begin[MAX_BLOCKS + 1];
    int *adj;
    size_t guide[MAX_BLOCKS]; /* the fourth search's preorder */
};

static void build_conflicts(struct instance *in) {
    tg_test_conflicts(in->n, in->size, in->start, in->end, in->adj_begin, &in->adj);
    for (int i = 0; i < in->n; i++) in->guide[i] = (size_t)((unsigned)i * 2654435761u % 1000003u);
}

static int load_csv(const char *path, struct instance *in) {
    in->n = tg_test_read_csv(path, in->size, in->start, in->end, MAX_BLOCKS);
    if (in->n < 0) return -1;
    build_conflicts(in);
    return in->n;
}

static uint64_t below(uint64_t n) { return rng_next() % n; }

static void random_instance(struct instance *in) {
    in->n = 60 + (int)below(100);
    for (int i = 0; i < in->n; i++) {
        in->start[i] = (int)below(200);
        in->end[i] = in->start[i] + (int)below(60);
        in->size[i] = 1 + below(64);
    }
    build_conflicts(in);
}

static size_t lower_bound(const struct instance *in) {
    size_t best = 0;
    for (int i = 0; i < in->n; i++) { /* the live sum peaks at some block's start */
        size_t live = 0;
        for (int j = 0; j < in->n; j++)
            if (in->start[j] <= in->start[i] && in->start[i] <= in->end[j]) live += in->size[j];
        if (live > best) best = live;
    }
    return best;
}

static struct tg_canonical_problem problem_of(const struct instance *in) {
    return (struct tg_canonical_problem){in->n, in->size, in->start, in->end, in->adj_begin, in->adj, NULL, NULL};
}

static bool make_searches(const struct tg_canonical_problem *p, const struct instance *in, size_t capacity, int n,
                          struct tg_canonical_search **s) {
    for (int k = 0; k < n; k++)
        s[k] = k < TG_N_PREORDERS ? tg_canonical_new(p, capacity, (enum tg_canonical_preorder)k)
                                  : tg_canonical_new_guided(p, capacity, in->guide);
    for (int k = 0; k < n; k++)
        if (!s[k]) return false;
    return true;
}

static void free_searches(struct tg_canonical_search **s, int n) {
    for (int k = 0; k < n; k++) tg_canonical_free(s[k]);
}

struct outcome {
    enum tg_canonical_result result;
    long long spent;
    int next_first;
    size_t offset[MAX_BLOCKS];
};

/* The reference: one thread takes the turns in their order. */
static void in_order(struct tg_canonical_search **s, const struct tg_turns *t, struct outcome *o) {
    const long long limit = (t->budget + t->slice - 1) / t->slice;
    o->result = TG_CANONICAL_GAVE_UP;
    o->spent = 0;
    o->next_first = (int)((t->first + limit) % t->n);
    for (long long turn = 0; turn < limit; turn++) {
        const int k = (int)((t->first + turn) % t->n);
        long long effort = turn == limit - 1 ? t->budget - (limit - 1) * t->slice : t->slice;
        const enum tg_canonical_result r = tg_canonical_run(s[k], &effort, 0, o->offset);
        o->spent += effort;
        if (r != TG_CANONICAL_GAVE_UP) {
            o->result = r;
            o->next_first = (int)((t->first + turn + 1) % t->n);
            return;
        }
    }
}

static bool same_outcome(const struct outcome *a, const struct outcome *b, int n) {
    if (a->result != b->result || a->spent != b->spent || a->next_first != b->next_first) return false;
    return a->result != TG_CANONICAL_FOUND || memcmp(a->offset, b->offset, sizeof(size_t) * (size_t)n) == 0;
}

static struct tg_turn_pool *pools[5]; /* by thread count; [0], [1]: none */
static long long cases, answers, resumed;

/* Two round robins in a row on the same searches (the second goes on where
 * the first stopped), against the reference, for every thread count. */
static void check_case(const struct instance *in, size_t capacity, int n_searches, int first, long long slice,
                       long long budget1, long long budget2) {
    const struct tg_canonical_problem p = problem_of(in);
    static struct outcome want[2], got[2];
    struct tg_canonical_search *s[N_SEARCHES];
    if (!make_searches(&p, in, capacity, n_searches, s)) {
        CHECK_MSG(false, "no memory for the searches");
        return;
    }
    struct tg_turns t = {s, n_searches, first, slice, budget1, 0};
    in_order(s, &t, &want[0]);
    const bool again = want[0].result == TG_CANONICAL_GAVE_UP;
    if (again) {
        t.first = want[0].next_first;
        t.budget = budget2;
        in_order(s, &t, &want[1]);
    }
    free_searches(s, n_searches);
    cases++;
    answers += want[again].result != TG_CANONICAL_GAVE_UP;
    resumed += again;
    for (int threads = 1; threads <= 4; threads++) {
        if (!make_searches(&p, in, capacity, n_searches, s)) {
            CHECK_MSG(false, "no memory for the searches");
            return;
        }
        struct tg_turns_report report;
        t = (struct tg_turns){s, n_searches, first, slice, budget1, 0};
        got[0].result = tg_turns_run(pools[threads], &t, got[0].offset, &report);
        got[0].spent = report.spent;
        got[0].next_first = report.next_first;
        bool same = same_outcome(&want[0], &got[0], in->n);
        if (same && again) {
            t.first = report.next_first;
            t.budget = budget2;
            got[1].result = tg_turns_run(pools[threads], &t, got[1].offset, &report);
            got[1].spent = report.spent;
            got[1].next_first = report.next_first;
            same = same_outcome(&want[1], &got[1], in->n);
        }
        CHECK_MSG(same, "%d threads, %d blocks, capacity %zu, %d searches from %d: result %d/%d, work %lld/%lld, next %d/%d",
                  threads, in->n, capacity, n_searches, first, (int)got[0].result, (int)want[0].result, got[0].spent,
                  want[0].spent, got[0].next_first, want[0].next_first);
        free_searches(s, n_searches);
    }
}

static void test_same_as_in_order(void) {
    static struct instance in;
    rng_state = 0x7475726e73ULL;
    for (int round = 0; round < 40; round++) {
        random_instance(&in);
        const size_t bound = lower_bound(&in);
        const long long full = (long long)in.adj_begin[in.n] + in.n;
        const size_t capacities[] = {bound, bound + bound / 50, bound - 1};
        for (int c = 0; c < 3; c++) {
            const int n_searches = 3 + (round & 1);
            const int first = (int)below((uint64_t)n_searches);
            /* short turns, so that an answer comes after many of them */
            check_case(&in, capacities[c], n_searches, first, 1 + full / 4, 40 * full + 7, 400 * full);
        }
    }
    static const char *const paths[] = {"corpus/dsa/A.1048576.csv", "corpus/dsa/D.1048576.csv",
                                        "corpus/dsa/E.1048576.csv"};
    for (int f = 0; f < 3; f++) {
        const int n = load_csv(paths[f], &in);
        CHECK_MSG(n > 100, "cannot read %s", paths[f]);
        if (n <= 100) continue;
        const long long full = (long long)in.adj_begin[in.n] + in.n;
        check_case(&in, 1048576, N_SEARCHES, f, 2 * full, 300 * full, 600000);
    }
    printf("%lld cases against the in-order reference: %lld answered, %lld went on after a budget\n", cases, answers,
           resumed);
    /* a budget far beyond memory's count of turns: the turns' record grows with the turns taken */
    random_instance(&in);
    {
        const struct tg_canonical_problem p = problem_of(&in);
        struct tg_canonical_search *s[TG_N_PREORDERS];
        if (make_searches(&p, &in, lower_bound(&in) * 2, TG_N_PREORDERS, s)) {
            const struct tg_turns t = {s, TG_N_PREORDERS, 0, 8, LLONG_MAX / 4, 0};
            struct tg_turns_report report;
            CHECK(tg_turns_run(pools[2], &t, NULL, &report) == TG_CANONICAL_FOUND && report.spent > 0);
        }
        free_searches(s, TG_N_PREORDERS);
    }
    /* the cases reach each kind of ending */
    CHECK_MSG(answers > 20 && cases - answers > 5 && resumed > 5, "%lld cases: %lld answers, %lld resumed", cases,
              answers, resumed);
    free(in.adj);
}

/* A new pool's helpers join its first job even when they start after it
 * began, and take turns there (summed over five pools, so that a busy
 * machine starving one helper for a whole job does not fail the test). */
static void test_helpers_take_turns(void) {
    static struct instance in;
    const int n = load_csv("corpus/dsa/A.1048576.csv", &in);
    CHECK_MSG(n > 100, "cannot read corpus/dsa/A.1048576.csv");
    if (n <= 100) return;
    const struct tg_canonical_problem p = problem_of(&in);
    const long long full = (long long)in.adj_begin[in.n] + in.n;
    long long helper_turns = 0;
    for (int round = 0; round < 6; round++) {
        struct tg_canonical_search *s[TG_N_PREORDERS];
        if (!make_searches(&p, &in, 1048576, TG_N_PREORDERS, s)) {
            CHECK_MSG(false, "no memory for the searches");
            break;
        }
        /* the job begins right away, as the planner's first does, likely before the helpers run */
        struct tg_turn_pool *pool = round < 5 ? tg_turn_pool_new(2) : NULL;
        CHECK(round == 5 || pool != NULL);
        const struct tg_turns t = {s, TG_N_PREORDERS, 0, 2 * full, 400 * full, 0};
        struct tg_turns_report report;
        (void)tg_turns_run(pool, &t, NULL, &report);
        if (pool) helper_turns += report.helper_turns;
        else CHECK(report.helper_turns == 0);
        free_searches(s, TG_N_PREORDERS);
        tg_turn_pool_free(pool);
    }
    CHECK_MSG(helper_turns > 0, "the helpers took no turn in five new pools' first jobs");
    CHECK(tg_turn_pool_new(1) == NULL && tg_turn_pool_new(0) == NULL);
    tg_turn_pool_free(NULL);
    free(in.adj);
}

/* The planner's default mode: the same offsets for 1, 2 and 3 threads. */
static void test_planner_same_plan(void) {
    static const char *const paths[] = {"corpus/dsa/A.1048576.csv", "corpus/dsa/D.1048576.csv",
                                        "corpus/dsa/F.1048576.csv"};
    static struct instance in;
    static struct tg_live_block blocks[3][MAX_BLOCKS];
    for (int f = 0; f < 3; f++) {
        const int n = load_csv(paths[f], &in);
        CHECK_MSG(n > 100, "cannot read %s", paths[f]);
        if (n <= 100) continue;
        size_t peak[3];
        for (int t = 0; t < 3; t++) {
            for (int i = 0; i < n; i++) blocks[t][i] = (struct tg_live_block){in.size[i], in.start[i], in.end[i], 0};
            const struct tg_offline_options opts = {.alignment = 1, .threads = t + 1};
            peak[t] = tg_plan_offline(blocks[t], n, &opts);
        }
        for (int t = 1; t < 3; t++)
            CHECK_MSG(peak[t] == peak[0] && memcmp(blocks[t], blocks[0], sizeof(blocks[0][0]) * (size_t)n) == 0,
                      "%s: %d threads give peak %zu, one thread %zu", paths[f], t + 1, peak[t], peak[0]);
    }
    free(in.adj);
}

int main(void) {
    for (int t = 2; t <= 4; t++) {
        pools[t] = tg_turn_pool_new(t);
        CHECK_MSG(pools[t] != NULL, "no pool of %d threads", t);
    }
    test_same_as_in_order();
    test_helpers_take_turns();
    test_planner_same_plan();
    for (int t = 2; t <= 4; t++) tg_turn_pool_free(pools[t]);
    return tg_test_finish();
}

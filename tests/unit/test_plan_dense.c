/* The offline planner places the blocks of dense problems (most pairs of
 * blocks live at the same time) by walking the placed blocks in offset order
 * instead of sorting each block's placed conflicts.  The two ways must give
 * the same plans, offset for offset: this file compiles the planner a second
 * time with the walk switched off, under other names, and compares the two
 * on random dense and sparse instances, for the whole portfolio and for each
 * strategy alone. */
#define DENSE_ONE_IN 0 /* never dense: every placement sorts conflicts */
#define tg_plan_offline sorting_plan_offline
#define tg_plan_offline_single sorting_plan_offline_single
#define tg_live_lower_bound sorting_live_lower_bound
#define tg_offline_strategy_name sorting_offline_strategy_name
#include "plan_offline.c"
#undef tg_plan_offline
#undef tg_plan_offline_single
#undef tg_live_lower_bound
#undef tg_offline_strategy_name

#include "tg_test.h"

/* The library's planner (plan-offline.h was read above under the other names). */
size_t tg_plan_offline(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts);
size_t tg_plan_offline_single(struct tg_live_block *blocks, int n, size_t alignment, enum tg_offline_strategy s);

static uint64_t rng_state = 0x243F6A8885A308D3ULL;

static uint64_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng_state >> 33;
}

/* steps: few make most blocks live together (dense), many make them sparse. */
static int random_instance(struct tg_live_block *b, int max_n, int steps) {
    const int n = 2 + (int)(rnd() % (uint64_t)(max_n - 1));
    for (int i = 0; i < n; i++) {
        const int start = (int)(rnd() % (uint64_t)steps);
        const int life = rnd() % 4 == 0 ? (int)(rnd() % (uint64_t)steps) : (int)(rnd() % 3);
        size_t size = (size_t)(1 + rnd() % 64) * (rnd() % 2 ? 16 : 1);
        if (rnd() % 30 == 0) size = 0;
        b[i] = (struct tg_live_block){size, start, start + life, 0};
    }
    return n;
}

/* The library's own rule, on the instance as the planner sees it. */
static bool is_dense(const struct tg_live_block *b, int n) {
    long long conflicts = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && b[i].size && b[j].size && b[i].start <= b[j].end && b[j].start <= b[i].end) conflicts++;
    return conflicts * 4 > (long long)n * n;
}

static bool same_offsets(const struct tg_live_block *a, const struct tg_live_block *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].offset != b[i].offset) return false;
    return true;
}

static void test_dense_walk_places_as_sorting(void) {
    enum { MAX_N = 100, CASES = 400 };
    static struct tg_live_block base[MAX_N], walked[MAX_N], sorted[MAX_N];
    const size_t alignments[] = {1, 16, 64};
    int dense = 0, sparse = 0, differ = 0, differ_single = 0;
    for (int k = 0; k < CASES; k++) {
        const int steps = k % 2 ? 2 + (int)(rnd() % 6) : 100 + (int)(rnd() % 300);
        const int n = random_instance(base, MAX_N, steps);
        if (is_dense(base, n)) dense++;
        else sparse++;
        const struct tg_offline_options opts = {alignments[rnd() % 3], 0, false, 0};
        memcpy(walked, base, sizeof(*base) * (size_t)n);
        memcpy(sorted, base, sizeof(*base) * (size_t)n);
        const size_t peak = tg_plan_offline(walked, n, &opts);
        if (peak != sorting_plan_offline(sorted, n, &opts) || !same_offsets(walked, sorted, n)) differ++;
        for (int s = 0; s < TG_OFFLINE_N_STRATEGIES; s++) {
            memcpy(walked, base, sizeof(*base) * (size_t)n);
            memcpy(sorted, base, sizeof(*base) * (size_t)n);
            const size_t single = tg_plan_offline_single(walked, n, opts.alignment, (enum tg_offline_strategy)s);
            if (single != sorting_plan_offline_single(sorted, n, opts.alignment, (enum tg_offline_strategy)s) ||
                !same_offsets(walked, sorted, n))
                differ_single++;
        }
    }
    CHECK_MSG(dense >= CASES / 4 && sparse >= CASES / 4, "%d dense and %d sparse instances", dense, sparse);
    CHECK_MSG(differ == 0, "%d of %d plans differ from the sorting placement's", differ, CASES);
    CHECK_MSG(differ_single == 0, "%d single-strategy plans differ from the sorting placement's", differ_single);
}

int main(void) {
    test_dense_walk_places_as_sorting();
    return tg_test_finish();
}

/* The offline planner places the blocks of dense problems (most pairs of
 * blocks live at the same time) by walking the placed blocks in offset order
 * instead of sorting each block's placed conflicts.  The two ways must give
 * the same plans, offset for offset: this file plans random dense and sparse
 * instances with the default budgets and with budgets that never walk
 * (dense_one_in 0), for the whole portfolio and for each strategy alone. */
#include "plan-offline.h"
#include "tg_test.h"

#include <stdint.h>
#include <string.h>

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
    return conflicts * tg_offline_default_budgets.dense_one_in > (long long)n * n;
}

static bool same_offsets(const struct tg_live_block *a, const struct tg_live_block *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].offset != b[i].offset) return false;
    return true;
}

static void test_dense_walk_places_as_sorting(void) {
    struct tg_offline_budgets never_walk = tg_offline_default_budgets;
    never_walk.dense_one_in = 0;
    enum { MAX_N = 100, CASES = 400 };
    static struct tg_live_block base[MAX_N], walked[MAX_N], sorted[MAX_N];
    const size_t alignments[] = {1, 16, 64};
    int dense = 0, sparse = 0, differ = 0, differ_single = 0;
    for (int k = 0; k < CASES; k++) {
        const int steps = k % 2 ? 2 + (int)(rnd() % 6) : 100 + (int)(rnd() % 300);
        const int n = random_instance(base, MAX_N, steps);
        if (is_dense(base, n)) dense++;
        else sparse++;
        const size_t alignment = alignments[rnd() % 3];
        const struct tg_offline_options opts = {.alignment = alignment};
        const struct tg_offline_options sorting = {.alignment = alignment, .budgets = &never_walk};
        memcpy(walked, base, sizeof(*base) * (size_t)n);
        memcpy(sorted, base, sizeof(*base) * (size_t)n);
        const size_t peak = tg_plan_offline(walked, n, &opts);
        if (peak != tg_plan_offline(sorted, n, &sorting) || !same_offsets(walked, sorted, n)) differ++;
        for (int s = 0; s < TG_OFFLINE_N_STRATEGIES; s++) {
            memcpy(walked, base, sizeof(*base) * (size_t)n);
            memcpy(sorted, base, sizeof(*base) * (size_t)n);
            const size_t single = tg_plan_offline_single(walked, n, &opts, (enum tg_offline_strategy)s);
            if (single != tg_plan_offline_single(sorted, n, &sorting, (enum tg_offline_strategy)s) ||
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

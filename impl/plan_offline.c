/* Offline offset planner (the engine of TG_PLAN_BEST; the contract is in
 * plan-offline.h): a portfolio of greedy placements of priority orders
 * (plan_place.c), a bounded local search on the best order, and exact
 * searches (the canonical one of plan-canonical.h, the depth-first one of
 * plan_exact.c) bounded by work, in the order tg_plan_offline_fit lists;
 * with exact, the same searches by the clock; with a capacity, the
 * canonical search at it. */
#include "plan-canonical.h"
#include "plan-offline-impl.h"
#include "plan-turns.h"
#include "tg-checks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- budgets ---- */

const struct tg_offline_budgets tg_offline_default_budgets = {
    /* a walk visits up to all placed blocks, a sort d log d entries for d conflicts */
    .dense_one_in = 4,
    /* problems of the fuzz targets' size get their own, smaller budgets */
    .small_problem_blocks = 64,
    /* the exact searches keep blocks x depth entries of scratch; beyond this they cannot finish anyway */
    .search_max_blocks = 2048,
    /* the local search re-places the best order this many times (graph problems: of the fuzz
     * corpora's 103 of 65-2,048 blocks it brings 4 to the bound that the canonical search
     * misses with twice the work at the bound in its place, and the ladder after it; the
     * generated tune set: mean ratio 1.092 with it, 1.099 without, the ladder's guided search
     * starting from a better plan, for about a fifth of the time)... */
    .local_search_placements = 400,
    .small_local_search_placements = 100,
    /* ...but visits no more entries than this: big dense problems stay at tens of milliseconds */
    .local_search_max_work = 1000000,
    /* near the bound, a short local search first often reaches it, and then the rest is skipped:
     * model graphs (llama-7b-decode-flash: 0.2 ms instead of the canonical search's 2 ms) */
    .early_search_placements = 16,
    .early_search_max_excess = 0.10,
    /* the canonical search at the bound before the local search, the three preorders taking
     * turns, for this much work (units track time, placements do not: what one costs varies
     * tenfold between instances); on the generated tune set it plans 35 of 100 at the bound
     * (16M: 37, 32M: 38, 100M: 41, at 1.3, 1.9 and about 4 times the time), the slowest
     * instance in under 50 ms on one thread (docs/performance.md) */
    .bound_search_work = 8000000,
    /* small problems: these many placements' worth at most (they are planned by the thousand) */
    .small_bound_search_placements = 400,
    /* the canonical search down the ladder of capacities after the other searches, this much
     * work; on the generated tune set twice this lowers the median ratio by 0.003 and no p90,
     * at 1.4 times the time; half of it raises the median by 0.007 */
    .canonical_ladder_effort = 8000000,
    /* small problems: the ladder's work at most these many placements' worth */
    .small_ladder_placements = 2000,
    /* a capacity the plan misses: the canonical search at it, these many placements' worth */
    .capacity_placements = 2000,
    /* small problems: the depth-first search after the local search, nodes and work (long-lived
     * blocks make nodes dear); larger ones skip it: on the generated tune set it left no plan
     * better than the canonical ladder after it does alone, for 2-12 ms each */
    .small_dfs_nodes = 1000,
    .small_dfs_work = 4000000,
    /* small problems try this many depth-first nodes at the bound before the canonical search:
     * each finds bound plans the other misses */
    .small_bound_dfs_nodes = 100,
    /* the depth-first search's first attempts are this short, and double per round */
    .dfs_first_attempt_nodes = 256,
    /* opts->exact: the default time, and the shares of it the canonical search takes at the
     * bound (or the capacity) and down the ladder (the depth-first search has the rest) */
    .exact_default_seconds = 10.0,
    .exact_bound_share = 0.5,
    .exact_ladder_share = 0.8,
};

/* ---- fallback and small-n paths ---- */

/* Fixed blocks where they are, every other block stacked above the previous
 * one and above them: valid for any input whose fixed blocks do not overlap,
 * needs no memory. */
static size_t stack_blocks(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts) {
    const size_t alignment = opts->alignment > 1 ? opts->alignment : 1;
    size_t top = 0;
    for (int i = 0; i < n; i++) {
        const size_t end = sat_add(blocks[i].offset, round_up(blocks[i].size, alignment));
        if (opts->fixed && opts->fixed[i] && blocks[i].size > 0 && end > top) top = end;
    }
    for (int i = 0; i < n; i++) {
        if (opts->fixed && opts->fixed[i]) continue;
        if (blocks[i].size == 0) { /* takes no memory: offset 0, the top stays */
            blocks[i].offset = 0;
            continue;
        }
        top = round_up(round_up(top, alignment), opts->block_alignment ? opts->block_alignment[i] : 1);
        blocks[i].offset = top;
        top = sat_add(top, round_up(blocks[i].size, alignment));
    }
    return top;
}

static size_t normalize_alignment(size_t alignment) {
    return alignment == 0 ? 1 : alignment;
}

/* ---- the search state shared by the portfolio, local search and exact mode ---- */

/* The canonical search's round robin (see round_robin) at one capacity: its
 * searches are kept so that a later round robin at the same capacity goes
 * on where this one stopped instead of starting again. */
#define N_CANONICAL_PREORDERS 3
struct canonical_searches {
    struct tg_canonical_problem problem; /* the searches point at it */
    size_t capacity;
    struct tg_canonical_search *search[N_CANONICAL_PREORDERS + 1]; /* all NULL: none made */
    int n_searches;
    int turn; /* the search that goes next */
};

struct planner_run {
    struct offline_problem prob;
    struct placer pl;
    struct tg_rank_key *keys;
    size_t *breadth;
    int *order;        /* current order */
    int *cand_order;   /* candidate order */
    size_t *offset;    /* offsets for the current order */
    size_t *cand_offset;
    size_t *prefix_peak;
    size_t *cand_prefix_peak;
    size_t peak;
    bool have_plan; /* order/offset hold a complete placement */
    enum fit_mode fit;
    const struct tg_offline_budgets *b;
    struct canonical_searches at_target; /* at the lower bound, or the capacity asked for */
    struct canonical_searches on_ladder;  /* at the ladder's current capacity */
    size_t ladder_floor;                  /* no plan below it: the bound, or above a capacity refuted */
    int threads;                          /* the options' count, 1 once helpers failed to start */
    struct tg_turn_pool *pool;            /* the round robins' helpers, started by the first that uses them */
    bool out_of_memory; /* a search went without its scratch memory: the plan is not the one the budgets give */
};

static void searches_release(struct canonical_searches *rr) {
    for (int k = 0; k < rr->n_searches; k++) tg_canonical_free(rr->search[k]);
    memset(rr, 0, sizeof(*rr));
}

static void run_release(struct planner_run *r) {
    searches_release(&r->at_target);
    searches_release(&r->on_ladder);
    tg_turn_pool_free(r->pool);
    offline_problem_release(&r->prob);
    free(r->pl.spans);
    free(r->pl.by_offset);
    free(r->pl.position);
    free(r->pl.heap);
    free(r->pl.heap_index);
    free(r->pl.floor);
    free(r->pl.placed);
    free(r->keys);
    free(r->breadth);
    free(r->order);
    free(r->cand_order);
    free(r->offset);
    free(r->cand_offset);
    free(r->prefix_peak);
    free(r->cand_prefix_peak);
}

/* Whether to place by walking the placed blocks in offset order rather than
 * sorting each block's placed conflicts: the walk pays when the average
 * block conflicts with more than one in dense_one_in blocks (0: never). */
static bool dense_problem(const struct offline_problem *p, const struct tg_offline_budgets *b) {
    return b->dense_one_in > 0 && (long long)p->adj_begin[p->n] * b->dense_one_in > (long long)p->n * p->n;
}

static bool run_init(struct planner_run *r, const struct tg_live_block *blocks, int n,
                     const struct tg_offline_options *opts, const struct tg_offline_budgets *budgets) {
    memset(r, 0, sizeof(*r));
    r->b = budgets;
    r->threads = opts->threads;
    if (!offline_problem_init(&r->prob, blocks, n, normalize_alignment(opts->alignment), opts->block_alignment,
                              opts->fixed))
        return false;
    r->ladder_floor = r->prob.lower_bound;
    int max_degree = 0;
    for (int i = 0; i < n; i++) {
        const int d = r->prob.adj_begin[i + 1] - r->prob.adj_begin[i];
        if (d > max_degree) max_degree = d;
    }
    const size_t un = (size_t)n;
    r->pl.p = &r->prob;
    r->pl.spans = malloc(sizeof(struct span) * ((size_t)max_degree + 1));
    const bool dense = dense_problem(&r->prob, budgets);
    if (dense) r->pl.by_offset = malloc(sizeof(*r->pl.by_offset) * un);
    r->pl.position = malloc(sizeof(int) * un);
    r->pl.heap = malloc(sizeof(struct heap_entry) * un);
    r->pl.heap_index = malloc(sizeof(int) * un);
    r->pl.floor = malloc(sizeof(size_t) * un);
    r->pl.placed = malloc(sizeof(bool) * un);
    r->keys = malloc(sizeof(*r->keys) * un);
    r->breadth = malloc(sizeof(size_t) * un);
    r->order = malloc(sizeof(int) * un);
    r->cand_order = malloc(sizeof(int) * un);
    r->offset = malloc(sizeof(size_t) * un);
    r->cand_offset = malloc(sizeof(size_t) * un);
    r->prefix_peak = calloc(un, sizeof(size_t));
    r->cand_prefix_peak = calloc(un, sizeof(size_t));
    if (!r->pl.spans || (dense && !r->pl.by_offset) || !r->pl.position || !r->pl.heap || !r->pl.heap_index || !r->pl.floor || !r->pl.placed || !r->keys || !r->breadth || !r->order || !r->cand_order ||
        !r->offset || !r->cand_offset || !r->prefix_peak || !r->cand_prefix_peak) {
        run_release(r);
        return false;
    }
    if (!compute_breadth(&r->prob, r->breadth)) {
        free(r->breadth);
        r->breadth = NULL; /* the breadth order degrades to index order */
        r->out_of_memory = true; /* ...which is another plan than the one asked for */
    }
    r->peak = SIZE_MAX;
    return true;
}

/* Runs one strategy into the candidate buffers; adopts it when it is at least
 * as good as the current one (ties keep the earlier strategy). */
/* The analyzer loses track of the buffers when they are swapped: none is lost. */
// NOLINTBEGIN(clang-analyzer-unix.Malloc)
static size_t run_strategy(struct planner_run *r, enum tg_offline_strategy s) {
    enum fit_mode fit = strategy_fit(s);
    if (fit == FIT_LOWEST && r->prob.fixed) fit = FIT_FIRST; /* bottom up cannot see fixed blocks above */
    make_order(&r->prob, s, r->breadth, r->keys, r->cand_order);
    const size_t peak = place_order(&r->pl, r->cand_order, 0, r->cand_offset, r->cand_prefix_peak, fit, SIZE_MAX);
    if (!r->have_plan || peak < r->peak) {
        r->have_plan = true;
        int *to = r->order;
        r->order = r->cand_order;
        r->cand_order = to;
        size_t *so = r->offset;
        r->offset = r->cand_offset;
        r->cand_offset = so;
        size_t *sp = r->prefix_peak;
        r->prefix_peak = r->cand_prefix_peak;
        r->cand_prefix_peak = sp;
        r->peak = peak;
        r->fit = fit;
    }
    return peak;
}
// NOLINTEND(clang-analyzer-unix.Malloc)

static void write_offsets(const struct planner_run *r, struct tg_live_block *blocks) {
    for (int i = 0; i < r->prob.n; i++) blocks[i].offset = r->offset[i];
}

size_t tg_plan_offline_single(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts,
                              enum tg_offline_strategy s) {
    if (blocks == NULL || n <= 0) return 0;
    const struct tg_offline_options defaults = {.alignment = 1};
    if (opts == NULL) opts = &defaults;
    const struct tg_offline_budgets *b = opts->budgets ? opts->budgets : &tg_offline_default_budgets;
    if ((unsigned)s >= TG_OFFLINE_N_STRATEGIES) s = TG_OFFLINE_GREEDY_SIZE;
    struct planner_run r;
    if (!run_init(&r, blocks, n, opts, b)) return stack_blocks(blocks, n, opts);
    const size_t peak = run_strategy(&r, s);
    write_offsets(&r, blocks);
    run_release(&r);
    return peak;
}

/* ---- bounded local search ---- */

/* Small deterministic generator (xorshift64*), seeded from the input size so
 * the same input always walks the same path. */
static uint64_t next_random(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* The local search's moves: a block at the peak hops up to this many places
 * earlier in the order, or anywhere earlier, or two blocks swap; out of
 * LOCAL_MOVES draws, LOCAL_SHORT_HOPS are short hops and LOCAL_HOPS hops. */
#define LOCAL_HOP_WINDOW 8
#define LOCAL_MOVES 8
#define LOCAL_SHORT_HOPS 4
#define LOCAL_HOPS 6

/* Makes pl.position give the rank of order[from..n) again (the searches
 * read the ranks of the adopted order).  order is the permutation the
 * placements wrote; the analyzer loses track of it through the generated
 * sort. */
static void adopt_positions(struct planner_run *r, int from) {
    // NOLINTNEXTLINE(clang-analyzer-core.uninitialized.ArraySubscript)
    for (int q = from; q < r->prob.n; q++) r->pl.position[r->order[q]] = q;
}

/* placements: the work budget in full re-placements (capped by the budgets'
 * local_search_max_work).  Deterministic by construction.  Fixed blocks
 * keep the head of the order (make_order put them there). */
static void local_search(struct planner_run *r, long long placements) {
    const int n = r->prob.n, base = r->prob.n_fixed;
    if (n - base < 2 || r->peak <= r->prob.lower_bound) return;
    const long long full_placement = offline_full_placement_work(&r->prob);
    long long budget = full_placement * placements;
    if (budget > r->b->local_search_max_work) budget = r->b->local_search_max_work;
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    int *peak_blocks = malloc(sizeof(int) * (size_t)n);
    if (peak_blocks == NULL) {
        r->out_of_memory = true;
        return;
    }
    const long long start_work = r->pl.work;
    while (r->pl.work - start_work < budget && r->peak > r->prob.lower_bound) {
        /* The blocks touching the peak decide it: move one of them earlier in
         * the order so it is placed before what now sits below it.  (None
         * is fixed: a fixed block's end is part of the bound.) */
        int n_peak = 0;
        for (int q = base; q < n; q++) {
            const int i = r->order[q];
            if (r->prob.size[i] > 0 && sat_add(r->offset[i], r->prob.size[i]) == r->peak) peak_blocks[n_peak++] = q;
        }
        memcpy(r->cand_order, r->order, sizeof(int) * (size_t)n);
        int first_changed;
        const uint64_t move = next_random(&rng) % LOCAL_MOVES;
        const int from = n_peak > 0 ? peak_blocks[next_random(&rng) % (uint64_t)n_peak] : base;
        if (move < LOCAL_HOPS && from > base) {
            /* Mostly short hops (keep the good prefix), sometimes anywhere. */
            int to;
            if (move < LOCAL_SHORT_HOPS) {
                const int window = from - base < LOCAL_HOP_WINDOW ? from - base : LOCAL_HOP_WINDOW;
                to = from - 1 - (int)(next_random(&rng) % (uint64_t)window);
            } else {
                to = base + (int)(next_random(&rng) % (uint64_t)(from - base));
            }
            const int moved = r->cand_order[from];
            memmove(r->cand_order + to + 1, r->cand_order + to, sizeof(int) * (size_t)(from - to));
            r->cand_order[to] = moved;
            first_changed = to;
        } else {
            /* Diversify: swap two random blocks. */
            int a = base + (int)(next_random(&rng) % (uint64_t)(n - base));
            int b = base + (int)(next_random(&rng) % (uint64_t)(n - base));
            if (a == b) continue;
            if (a > b) {
                const int t = a;
                a = b;
                b = t;
            }
            const int t = r->cand_order[a];
            r->cand_order[a] = r->cand_order[b];
            r->cand_order[b] = t;
            first_changed = a;
        }
        memcpy(r->cand_offset, r->offset, sizeof(size_t) * (size_t)n);
        memcpy(r->cand_prefix_peak, r->prefix_peak, sizeof(size_t) * (size_t)first_changed);
        /* Positions of the unchanged prefix are already right. */
        const size_t peak =
            place_order(&r->pl, r->cand_order, first_changed, r->cand_offset, r->cand_prefix_peak, r->fit, r->peak);
        if (peak <= r->peak) {
            /* Equal peaks are accepted too: walking the plateau finds exits. */
            int *to = r->order;
            r->order = r->cand_order;
            r->cand_order = to;
            size_t *so = r->offset;
            r->offset = r->cand_offset;
            r->cand_offset = so;
            size_t *sp = r->prefix_peak;
            r->prefix_peak = r->cand_prefix_peak;
            r->cand_prefix_peak = sp;
            r->peak = peak;
        } else {
            /* Restore the positions of the current order. */
            adopt_positions(r, first_changed);
        }
    }
    free(peak_blocks);
}

/* ---- the canonical search (plan-canonical.h) in rounds ---- */

/* MiniMalloc's preorders, in its order (WAT, TAW, TWA): with each piece
 * ranked again after a split, every challenging instance falls to one. */
static const enum tg_canonical_preorder canonical_preorders[N_CANONICAL_PREORDERS] = {
    TG_PREORDER_WIDTH_AREA_TOTAL, TG_PREORDER_TOTAL_AREA_WIDTH, TG_PREORDER_TOTAL_WIDTH_AREA};
/* The ladder's next capacity is this fraction of the gap below the best peak
 * (each plan found shrinks the gap; a capacity halfway to the bound would
 * take far longer or have no plan). */
#define LADDER_STEP_DIVISOR 8
/* A round robin's turns are this many placements' worth (MiniMalloc's first
 * node limit is twice the buffers): short enough that the preorder that
 * finds a plan is not kept waiting, long enough that turns cost nothing. */
#define ROUND_ROBIN_SLICE_PLACEMENTS 2

/* Takes a plan found by a search as the run's result, where it is lower
 * (a search that found its plan earlier hands it out again). */
static void adopt_offsets(struct planner_run *r, const size_t *offset) {
    const struct offline_problem *p = &r->prob;
    size_t peak = 0;
    for (int i = 0; i < p->n; i++)
        if (p->size[i] > 0 && sat_add(offset[i], p->size[i]) > peak) peak = sat_add(offset[i], p->size[i]);
    if (peak >= r->peak) return;
    memcpy(r->offset, offset, sizeof(size_t) * (size_t)p->n);
    r->peak = peak;
}

/* rr's searches at capacity: those it has when they are at it, else new
 * ones; false when memory ran out. */
static bool searches_at(struct planner_run *r, struct canonical_searches *rr, size_t capacity) {
    const struct offline_problem *p = &r->prob;
    if (rr->search[0] && rr->capacity == capacity) return true;
    searches_release(rr);
    rr->problem = (struct tg_canonical_problem){p->n, p->size, p->start, p->end, p->adj_begin, p->adj, p->align,
                                                p->fixed};
    rr->capacity = capacity;
    /* Below the best plan the ladder also searches outward from that plan
     * (tg_canonical_new_guided): on the generated tune set the mean ratio
     * falls from 1.094 to 1.092, the median from 1.106 to 1.100.  At the
     * bound the same fourth search takes turns from the three and plans
     * fewer there (35 instead of 36; mean 1.094). */
    const bool guided = rr == &r->on_ladder && r->have_plan;
    const int count = N_CANONICAL_PREORDERS + (guided ? 1 : 0);
    for (int k = 0; k < count; k++) {
        rr->search[k] = k < N_CANONICAL_PREORDERS ? tg_canonical_new(&rr->problem, capacity, canonical_preorders[k])
                                                  : tg_canonical_new_guided(&rr->problem, capacity, r->offset);
        rr->n_searches = k + 1;
        if (!rr->search[k]) {
            searches_release(rr);
            return false;
        }
    }
    return true;
}

/* The canonical search at one capacity, MiniMalloc's round robin over its
 * preorders, but without restarts: each preorder's search goes on from where
 * its last turn stopped, turns of ROUND_ROBIN_SLICE_PLACEMENTS placements'
 * worth each, until one finds a plan (adopted) or proves there is none.  A
 * search that needs W units of work is so done after about
 * N_CANONICAL_PREORDERS x W in all (restarts with a doubling limit, as
 * MiniMalloc's, spend two to four times that).  The turns run on the run's
 * threads (plan-turns.h), with the same answer for every count.  Stops
 * after budget units (<= 0: no limit) or at the deadline (<= 0: none), rr's
 * searches kept for a later call at the same capacity; *spent grows by the
 * work counted. */
static enum tg_canonical_result round_robin(struct planner_run *r, struct canonical_searches *rr, size_t capacity,
                                            long long budget, double deadline, long long *spent) {
    const struct offline_problem *p = &r->prob;
    if (p->n > r->b->search_max_blocks) return TG_CANONICAL_GAVE_UP;
    size_t *offset = malloc(sizeof(size_t) * (size_t)p->n);
    enum tg_canonical_result result = TG_CANONICAL_GAVE_UP;
    if (offset == NULL || !searches_at(r, rr, capacity)) r->out_of_memory = true;
    else {
        /* helpers only where turns are long enough to pay for the hand-over, one search each at most */
        if (r->threads > 1 && !r->pool && p->n > r->b->small_problem_blocks) {
            r->pool = tg_turn_pool_new(r->threads < N_CANONICAL_PREORDERS + 1 ? r->threads : N_CANONICAL_PREORDERS + 1);
            r->threads = r->pool ? r->threads : 1; /* none could start: not tried again */
        }
        const long long slice = offline_full_placement_work(p) * ROUND_ROBIN_SLICE_PLACEMENTS;
        const struct tg_turns turns = {rr->search, rr->n_searches, rr->turn, slice > 0 ? slice : 1, budget, deadline};
        struct tg_turns_report report;
        result = tg_turns_run(r->pool, &turns, offset, &report);
        r->out_of_memory |= report.out_of_memory;
        *spent += report.spent;
        rr->turn = report.next_first;
    }
    if (result == TG_CANONICAL_FOUND) adopt_offsets(r, offset);
    free(offset);
    return result;
}

/* Down the ladder: the round robin at a capacity LADDER_STEP_DIVISOR-th of
 * the gap below the best peak (the three preorders and a search guided by
 * that plan taking turns), again at the next capacity when it finds a plan
 * there; a capacity proved infeasible raises the floor of the gap.
 * Stops after budget units of work (<= 0: no limit), at the deadline (<= 0:
 * none), or when a capacity is neither planned nor refuted. */
static void ladder(struct planner_run *r, long long budget, double deadline) {
    long long spent = 0;
    while (r->peak > r->ladder_floor && (budget <= 0 || spent < budget)) {
        /* a rung the last ladder left unanswered is taken up where it stopped */
        const size_t step = (r->peak - r->ladder_floor) / LADDER_STEP_DIVISOR;
        const size_t capacity = r->peak - (step > 0 ? step : 1);
        const enum tg_canonical_result result =
            round_robin(r, &r->on_ladder, capacity, budget > 0 ? budget - spent : 0, deadline, &spent);
        if (result == TG_CANONICAL_INFEASIBLE) r->ladder_floor = capacity + 1;
        if (result == TG_CANONICAL_GAVE_UP) break;
    }
}

/* The depth-first search (plan_exact.c) from the run's best plan: not for
 * blocks with alignments of their own or fixed offsets. */
static void exact_run(struct planner_run *r, double seconds, long long nodes, long long work, bool bound_only) {
    if (r->prob.align || r->prob.fixed) return;
    if (!offline_exact_search(&r->prob, r->pl.position, r->b, seconds, nodes, work, bound_only, &r->peak, r->offset))
        r->out_of_memory = true; /* skipped: another plan than the one asked for */
}

/* The ladder's effort: none at the bound; small problems at most
 * small_ladder_placements placements' worth. */
static long long ladder_effort(const struct planner_run *r) {
    const struct tg_offline_budgets *b = r->b;
    if (r->peak <= r->prob.lower_bound) return 0;
    const long long most = offline_full_placement_work(&r->prob) * b->small_ladder_placements;
    return r->prob.n <= b->small_problem_blocks && most < b->canonical_ladder_effort ? most
                                                                                      : b->canonical_ladder_effort;
}

/* ---- entry point ---- */

/* A short local search from the first strategy's order, kept only when it
 * reaches the lower bound (then nothing can beat it and the other strategies
 * are skipped).  Otherwise the run is put back as it was, so the full
 * portfolio gives the same plan as without this try.  Tried only when the
 * first plan is within early_search_max_excess of the bound: from further
 * away a short search does not get there. */
static void early_search(struct planner_run *r) {
    const int n = r->prob.n;
    const size_t bound = r->prob.lower_bound;
    if (r->peak <= bound || (double)(r->peak - bound) > r->b->early_search_max_excess * (double)bound) return;
    int *order = malloc(sizeof(int) * (size_t)n);
    size_t *offset = malloc(sizeof(size_t) * (size_t)n);
    size_t *prefix_peak = malloc(sizeof(size_t) * (size_t)n);
    if (!order || !offset || !prefix_peak) {
        r->out_of_memory = true;
    } else {
        memcpy(order, r->order, sizeof(int) * (size_t)n);
        memcpy(offset, r->offset, sizeof(size_t) * (size_t)n);
        memcpy(prefix_peak, r->prefix_peak, sizeof(size_t) * (size_t)n);
        const size_t peak = r->peak;
        const long long work = r->pl.work;
        adopt_positions(r, 0);
        local_search(r, r->b->early_search_placements);
        if (r->peak > bound) {
            memcpy(r->order, order, sizeof(int) * (size_t)n);
            memcpy(r->offset, offset, sizeof(size_t) * (size_t)n);
            memcpy(r->prefix_peak, prefix_peak, sizeof(size_t) * (size_t)n);
            r->peak = peak;
            r->pl.work = work;
        }
    }
    free(order);
    free(offset);
    free(prefix_peak);
}

/* Every block placed lies below the peak, apart from every block it
 * conflicts with, at an aligned offset or its fixed one. */
static void assert_plan(const struct planner_run *r) {
    if (!TG_CHECKS) return;
    const struct offline_problem *p = &r->prob;
    for (int i = 0; i < p->n; i++) {
        const size_t end = sat_add(r->offset[i], p->size[i]);
        TG_ASSERT(p->size[i] == 0 || end <= r->peak, "block %d ends at %zu, the peak is %zu", i, end, r->peak);
        if (p->fixed && p->fixed[i] != OFFLINE_FREE)
            TG_ASSERT(r->offset[i] == p->fixed[i], "fixed block %d moved to %zu", i, r->offset[i]);
        else if (p->align && p->size[i] > 0)
            TG_ASSERT(r->offset[i] % p->align[i] == 0, "block %d at %zu, alignment %zu", i, r->offset[i], p->align[i]);
        for (int e = p->adj_begin[i]; e < p->adj_begin[i + 1]; e++) {
            const int j = p->adj[e];
            TG_ASSERT(end <= r->offset[j] || sat_add(r->offset[j], p->size[j]) <= r->offset[i],
                      "blocks %d and %d live together and overlap", i, j);
        }
    }
}

/* The deterministic pipeline: each step stops as soon as a plan meets the
 * lower bound. */
static void plan_by_work(struct planner_run *r) {
    const struct tg_offline_budgets *b = r->b;
    const bool small = r->prob.n <= b->small_problem_blocks;
    run_strategy(r, (enum tg_offline_strategy)0);
    if (!small) early_search(r);
    for (int s = 1; s < TG_OFFLINE_N_STRATEGIES && r->peak > r->prob.lower_bound; s++)
        run_strategy(r, (enum tg_offline_strategy)s);
    adopt_positions(r, 0);
    /* A short round robin of the canonical search at the bound, before the
     * local search: where it finds the plan (most problems) the rest is
     * skipped.  Small problems try a few depth-first nodes there first. */
    if (small) exact_run(r, 0, b->small_bound_dfs_nodes, 0, true);
    long long spent = 0;
    if (r->peak > r->prob.lower_bound) {
        long long budget = b->bound_search_work;
        if (small && offline_full_placement_work(&r->prob) * b->small_bound_search_placements < budget)
            budget = offline_full_placement_work(&r->prob) * b->small_bound_search_placements;
        round_robin(r, &r->at_target, r->prob.lower_bound, budget, 0, &spent);
    }
    local_search(r, small ? b->small_local_search_placements : b->local_search_placements);
    adopt_positions(r, 0);
    /* Short, work-bounded runs of the exact searches: they often reach the
     * bound or lower the peak where the local search stalls, and stay
     * deterministic. */
    if (small) exact_run(r, 0, b->small_dfs_nodes, b->small_dfs_work, false);
    const long long ladder_work = ladder_effort(r);
    if (ladder_work > 0) ladder(r, ladder_work, 0);
}

/* By the clock, after plan_by_work: the canonical search at the capacity
 * (or the bound) until its share of the time, or until it finds a plan
 * under the capacity or proves there is none; down the ladder until its
 * share; the depth-first search with the rest.  The searches plan_by_work
 * stopped at the same capacities go on from where they stopped. */
static enum tg_canonical_result plan_by_clock(struct planner_run *r, size_t capacity, double seconds) {
    const struct tg_offline_budgets *b = r->b;
    const double start = offline_now_seconds();
    const size_t target = capacity > r->prob.lower_bound ? capacity : r->prob.lower_bound;
    enum tg_canonical_result result = r->peak <= target ? TG_CANONICAL_FOUND : TG_CANONICAL_GAVE_UP;
    long long spent = 0;
    if (result != TG_CANONICAL_FOUND) {
        const double share = capacity > 0 ? 1.0 : b->exact_bound_share; /* a capacity's answer is what is asked */
        result = round_robin(r, &r->at_target, target, 0, start + seconds * share, &spent);
    }
    if (result == TG_CANONICAL_INFEASIBLE && target == capacity) return result;
    ladder(r, 0, start + seconds * b->exact_ladder_share);
    const double left = start + seconds - offline_now_seconds();
    if (left > 0) exact_run(r, left, 0, 0, false);
    return r->peak <= target ? TG_CANONICAL_FOUND : result;
}

enum tg_offline_fit tg_plan_offline_fit(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts,
                                        size_t *peak) {
    const struct tg_offline_options defaults = {.alignment = 1};
    if (opts == NULL) opts = &defaults;
    size_t ignored;
    if (peak == NULL) peak = &ignored;
    *peak = 0;
    if (blocks == NULL || n <= 0) return TG_OFFLINE_FITS;
    const struct tg_offline_budgets *b = opts->budgets ? opts->budgets : &tg_offline_default_budgets;
    const size_t capacity = opts->capacity;
    struct planner_run r;
    if (!run_init(&r, blocks, n, opts, b)) {
        *peak = stack_blocks(blocks, n, opts);
        return TG_OFFLINE_NO_MEMORY;
    }
    if (r.prob.fixed_overlap) {
        *peak = SIZE_MAX;
        stack_blocks(blocks, n, opts);
        run_release(&r);
        return TG_OFFLINE_INFEASIBLE;
    }
    plan_by_work(&r);
    enum tg_canonical_result result = TG_CANONICAL_FOUND;
    if (capacity > 0 && r.prob.lower_bound > capacity) {
        result = TG_CANONICAL_INFEASIBLE;
    } else if (opts->exact) {
        result = plan_by_clock(&r, capacity, opts->exact_seconds > 0 ? opts->exact_seconds : b->exact_default_seconds);
    } else if (capacity > 0 && r.peak > capacity) {
        long long spent = 0;
        const long long budget = offline_full_placement_work(&r.prob) * b->capacity_placements;
        result = round_robin(&r, &r.at_target, capacity, budget, 0, &spent);
    }
    assert_plan(&r);
    *peak = r.peak;
    write_offsets(&r, blocks);
    const bool out_of_memory = r.out_of_memory;
    run_release(&r);
    if (out_of_memory) return TG_OFFLINE_NO_MEMORY;
    if (capacity == 0 || *peak <= capacity) return TG_OFFLINE_FITS;
    return result == TG_CANONICAL_INFEASIBLE ? TG_OFFLINE_INFEASIBLE : TG_OFFLINE_NOT_FOUND;
}

size_t tg_plan_offline(struct tg_live_block *blocks, int n, const struct tg_offline_options *opts) {
    struct tg_offline_options minimize = opts ? *opts : (struct tg_offline_options){.alignment = 1};
    minimize.capacity = 0;
    size_t peak = 0;
    (void)tg_plan_offline_fit(blocks, n, &minimize, &peak);
    return peak;
}

/* Fault self-tests: for each fault the allocator can inject (tg-alloc.h), the
 * oracle's checkers flag generated cases within a bounded number of seeds, and
 * the very same cases are clean with the fault off.  A checker that never fires
 * under its fault would be a checker that cannot fail. */
#include "tg-gen.h"
#include "tg-oracle.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SEEDS 1500   /* bound on seeds tried per fault */
#define WANT_FLAGGED 3   /* flagged cases collected per fault before stopping */

struct fault_outcome {
    int n_tried;
    int n_flagged;
    uint64_t flagged_seeds[WANT_FLAGGED];
    int rule_hits[TG_RULE_COUNT];
    int inplace_hits[TG_INPLACE_NOT_SAME_ADDRESS + 1];
};

static void tally(struct fault_outcome *out, const struct tg_oracle_report *rep) {
    for (int i = 0; i < rep->n; i++) {
        out->rule_hits[rep->items[i].rule]++;
        if (rep->items[i].rule == TG_RULE_ILLEGAL_INPLACE) out->inplace_hits[rep->items[i].inplace_reason]++;
    }
}

/* Plans (or, for stale-replay, reserves one case then binds a rewired copy) and
 * checks; returns the report of the bound graph. */
static bool run_case(uint64_t seed, enum tg_fault fault, struct tg_oracle_report *rep, bool *applicable) {
    struct tg_gen_options opts = tg_gen_default_options();
    struct tg_gen_case *c = NULL;
    *applicable = true;
    *rep = (struct tg_oracle_report){0};
    if (tg_gen_case_from_seed(seed, &opts, &c) != TG_OK) return false;
    bool ok = true;
    if (fault != TG_FAULT_STALE_REPLAY) {
        struct tg_gen_plan_result res;
        ok = tg_gen_plan_and_check(c, fault, NULL, &res) == TG_OK;
        if (ok && res.plan_status != TG_OK) *applicable = false; /* a fault may make planning fail outright */
        if (ok) {
            *rep = res.report;
            res.report = (struct tg_oracle_report){0};
        }
        tg_gen_plan_result_free(&res);
    } else {
        struct tg_gen_case *changed = NULL;
        tg_gallocr *galloc = tg_gallocr_new_n(c->bufts, c->n_ids);
        ok = galloc && tg_gen_case_from_seed(seed, &opts, &changed) == TG_OK;
        *applicable = ok && tg_gen_case_rewire_edge(changed, seed);
        if (*applicable) {
            tg_gallocr_set_fault(galloc, fault);
            *applicable = tg_gallocr_reserve_n(galloc, c->graph, c->node_ids, c->leaf_ids) == TG_OK;
        }
        if (*applicable) {
            struct tg_oracle_snapshot snap;
            struct tg_oracle_liveness lv;
            ok = tg_oracle_snapshot_take(changed->graph, &snap) == TG_OK;
            ok = ok && tg_oracle_liveness_build(changed->graph, &snap, changed->node_ids, changed->leaf_ids, &lv) == TG_OK;
            /* Without the fault the changed edges force a re-plan (or a refusal with several buffers). */
            enum tg_status st = ok ? tg_gallocr_alloc_graph(galloc, changed->graph) : TG_ERR_ALLOC;
            if (st == TG_OK) ok = tg_oracle_check(changed->graph, &lv, &snap, changed->bufts, changed->n_ids, rep) == TG_OK;
            else *applicable = st == TG_ERR_NEEDS_RESERVE ? true : false;
            if (ok) tg_oracle_liveness_free(&lv);
            tg_oracle_snapshot_free(&snap);
        }
        tg_gallocr_free(galloc);
        tg_gen_case_free(changed);
    }
    tg_gen_case_free(c);
    return ok;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); /* findings go to stderr: keep the order readable */
    const char *env_cases = getenv("TG_PROPS_CASES");
    int max_seeds = env_cases ? atoi(env_cases) : MAX_SEEDS;
    if (max_seeds < 50) max_seeds = 50; /* the bound must leave the checkers a fair chance */
    int total_cases = 0;
    for (int f = TG_FAULT_NONE + 1; f < TG_FAULT_COUNT; f++) {
        /* trust-vouch acts on the scheduler's vouched replay alone, which
         * plan_and_check never takes: test_alloc_vouched shows what it breaks */
        if (f == TG_FAULT_TRUST_VOUCH) continue;
        struct fault_outcome out = {0};
        for (uint64_t seed = 1; seed <= (uint64_t)max_seeds && out.n_flagged < WANT_FLAGGED; seed++) {
            struct tg_oracle_report rep;
            bool applicable;
            CHECK(run_case(seed, (enum tg_fault)f, &rep, &applicable));
            out.n_tried++;
            if (applicable && rep.n > 0) {
                out.flagged_seeds[out.n_flagged++] = seed;
                tally(&out, &rep);
                if (out.n_flagged == 1) {
                    printf("  %s, seed %llu, first findings:\n", tg_fault_name((enum tg_fault)f), (unsigned long long)seed);
                    tg_oracle_report_print(&rep, 2);
                }
            }
            tg_oracle_report_free(&rep);
        }
        total_cases += out.n_tried;
        printf("fault %-22s: %d of %d cases flagged;", tg_fault_name((enum tg_fault)f), out.n_flagged, out.n_tried);
        for (int r = 0; r < TG_RULE_COUNT; r++) {
            if (out.rule_hits[r]) printf(" %s x%d", tg_oracle_rule_name((enum tg_oracle_rule)r), out.rule_hits[r]);
        }
        printf("\n");
        CHECK_MSG(out.n_flagged > 0, "fault '%s' was not flagged in %d cases", tg_fault_name((enum tg_fault)f), out.n_tried);

        /* The rule each fault breaks is the one that fires. */
        switch ((enum tg_fault)f) {
        case TG_FAULT_IGNORE_ALIGNMENT: CHECK(out.rule_hits[TG_RULE_MISALIGNED] > 0); break;
        case TG_FAULT_INPLACE_IGNORE_LAYOUT: CHECK(out.inplace_hits[TG_INPLACE_LAYOUT_DIFFERS] > 0); break;
        case TG_FAULT_IGNORE_OUTPUT_FLAG:
            CHECK(out.rule_hits[TG_RULE_OUTPUT_OVERWRITTEN] + out.inplace_hits[TG_INPLACE_SOURCE_PROTECTED] > 0);
            break;
        default: break;
        }

        /* The same cases are clean without the fault. */
        for (int i = 0; i < out.n_flagged; i++) {
            struct tg_oracle_report rep;
            bool applicable;
            CHECK(run_case(out.flagged_seeds[i], TG_FAULT_NONE, &rep, &applicable));
            CHECK_MSG(rep.n == 0, "seed %llu has violations without fault '%s'", (unsigned long long)out.flagged_seeds[i],
                      tg_fault_name((enum tg_fault)f));
            if (rep.n) tg_oracle_report_print(&rep, 5);
            tg_oracle_report_free(&rep);
        }
    }
    printf("prop_faults: %d generated cases over %d faults\n", total_cases, TG_FAULT_COUNT - 2);
    return tg_test_finish();
}

/* The interval checker on plans read back whole (every offset given): an
 * offset that breaks its buffer's alignment is a violation there, while the
 * same buffer pre-placed by the caller is kept where it is, as the planner
 * keeps it (tg_plan_intervals never moves a fixed buffer). */
#include "tg-oracle-intervals.h"
#include "tg_test.h"

#include <stdint.h>

int main(void) {
    /* the buffers of tgsched's mis.csv and planned.csv: A [0, 100) at 0, B [100, 200) or [128, 228) */
    struct tg_interval mis[2] = {
        {.size = 100, .lower = 0, .upper = 2, .alignment = 64, .fixed = true, .offset = 0},
        {.size = 100, .lower = 1, .upper = 3, .alignment = 64, .fixed = true, .offset = 100},
    };
    struct tg_interval planned[2] = {mis[0], mis[1]};
    planned[1].offset = 128;
    struct tg_oracle_interval_report rep;

    CHECK(tg_oracle_check_interval_plan(mis, 2, 200, 0, &rep));
    CHECK_MSG(rep.n == 1 && rep.count[TG_IRULE_MISALIGNED] == 1, "%d violations: %s", rep.n, rep.first);
    CHECK(strstr(rep.first, "buffer 1 at 100") && strstr(rep.first, "alignment 64"));
    CHECK(tg_oracle_check_interval_plan(planned, 2, 228, 0, &rep));
    CHECK_MSG(rep.n == 0, "%d violations: %s", rep.n, rep.first);

    /* the other rules still hold: a plan whose buffers overlap, and a wrong peak */
    planned[1].offset = 64;
    CHECK(tg_oracle_check_interval_plan(planned, 2, 200, 0, &rep));
    CHECK(rep.count[TG_IRULE_OVERLAP] == 1 && rep.count[TG_IRULE_WRONG_PEAK] == 1 && rep.n == 2);

    /* pre-placed by the caller: kept where given, not judged by alignment */
    CHECK(tg_oracle_check_intervals(mis, mis, 2, 200, 0, &rep));
    CHECK_MSG(rep.n == 0, "%d violations: %s", rep.n, rep.first);
    CHECK(tg_oracle_check_interval_plan(mis, 0, 0, 0, &rep) && rep.n == 0);

    /* a buffer whose bytes run past SIZE_MAX (wrapping onto another's at 0),
     * claimed at the saturated peak SIZE_MAX: once 0 violations, both as a
     * plan and against its input */
    const struct tg_interval in[2] = {{.size = 10, .lower = 0, .upper = 2}, {.size = 4, .lower = 0, .upper = 2}};
    struct tg_interval wraps[2] = {in[0], in[1]};
    wraps[0].offset = SIZE_MAX - 5;
    CHECK(tg_oracle_check_intervals(in, wraps, 2, SIZE_MAX, 0, &rep));
    CHECK_MSG(rep.n == 1 && rep.count[TG_IRULE_PAST_END] == 1, "%d violations: %s", rep.n, rep.first);
    CHECK(strstr(rep.first, "buffer 0") && strstr(rep.first, "past SIZE_MAX"));
    CHECK(tg_oracle_check_interval_plan(wraps, 2, SIZE_MAX, 0, &rep) && rep.count[TG_IRULE_PAST_END] == 1);
    CHECK(strcmp(tg_oracle_interval_rule_name(TG_IRULE_PAST_END), "past-end") == 0);
    wraps[0].offset = SIZE_MAX - 10; /* ends at SIZE_MAX exactly: legal */
    CHECK(tg_oracle_check_intervals(in, wraps, 2, SIZE_MAX, 0, &rep) && rep.n == 0);

    /* a plan whose buffers differ from the input in any field is judged
     * against the input: a lifetime cut short hides nothing (A and B share
     * step 1 and the bytes [64, 100)) */
    const struct tg_interval asked[2] = {{.size = 100, .lower = 0, .upper = 2, .alignment = 64},
                                         {.size = 100, .lower = 1, .upper = 3, .alignment = 64}};
    for (int field = 0; field < 5; field++) {
        struct tg_interval got[2] = {asked[0], asked[1]};
        got[1].offset = 128;
        CHECK(tg_oracle_check_intervals(asked, got, 2, 228, 0, &rep) && rep.n == 0);
        if (field == 0) got[0].size = 64;
        if (field == 1) got[1].lower = 2;
        if (field == 2) got[0].upper = 1;
        if (field == 3) got[1].alignment = 32;
        if (field == 4) got[1].fixed = true;
        CHECK_MSG(tg_oracle_check_intervals(asked, got, 2, 228, 0, &rep) && rep.count[TG_IRULE_INPUT_CHANGED] == 1,
                  "field %d: %d violations: %s", field, rep.n, rep.first);
    }
    return tg_test_finish();
}

/* Fuzz target for real-plan-vs-naive-plan execution: the decoded case
 * (computable ops only) is computed on the CPU twice, once bound by the
 * allocator (the first byte picks the policy) and once by the oracle's naive
 * plan, from the same inputs; any output that differs in a single bit aborts.
 * Then the same bytes again with a node source swapped for a tensor outside
 * the graph that moves between the plan and its replay (added after the
 * first check: every corpus input keeps what it did). */
#include "tg-gen.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    struct tg_gen_options opts = tg_gen_target_options("exec");
    enum tg_plan_policy policy = data[0] & 1 ? TG_PLAN_BEST : TG_PLAN_GGML;
    struct tg_oracle_diff_result res;
    enum tg_status st = tg_gen_exec_check(data + 1, size - 1, &opts, policy, 1, &res);
    if (st != TG_OK) {
        fprintf(stderr, "fuzz_exec: %s\n", tg_last_error());
        abort();
    }
    if (res.n_mismatched) {
        fprintf(stderr, "fuzz_exec: real and naive plans differ: %s\n", res.message);
        abort();
    }
    st = tg_gen_exec_outside_check(data + 1, size - 1, &opts, policy, 1, size, &res);
    if (st != TG_OK || res.n_mismatched) {
        fprintf(stderr, "fuzz_exec: a source outside the graph, moved before a replay: %s\n",
                st != TG_OK ? tg_last_error() : res.message);
        abort();
    }
    return 0;
}

/* Fuzz target for the scheduler: the bytes decode (fuzz/gen/gen_sched.c) to a
 * backend setup (the CPU plus 0-3 sim devices with their op sets, alignments,
 * alloc padding, host sharing, sync or async), pipeline copies and op offload,
 * weights placed on random backends, a sequence of scheduler calls (compute,
 * alloc, reset, reserve, pins, set/get, the graph rebuilt, a second graph, the
 * graph with an edge moved or a size changed) and a computable graph.  Every
 * allocation must pass the scheduler checkers, every compute must equal the
 * CPU alone bit for bit; unsupported ops and conflicting pins are refusals. */
#include "tg-gen.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char failure[600];
    enum tg_status st = tg_gen_sched_run(data, size, NULL, failure, sizeof failure);
    if (st == TG_ERR_INVALID) {
        fprintf(stderr, "fuzz_sched: %s\n", failure);
        char *text = tg_gen_sched_case_to_text(data, size);
        if (text) fprintf(stderr, "%s\n", text);
        free(text);
        abort();
    }
    return 0;
}

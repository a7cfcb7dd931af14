/* Fuzz target against upstream ggml (built when the pinned ggml is there:
 * tests/ggml/tests.cmake): the allocator differential of tg-ggml.h on one
 * generated case.  The first byte picks the variant: bits 0-1 output flags as
 * ggml_set_output sets them, raw flags, some nodes flagged input, or some
 * views made as ggml_view_tensor makes them; bits 2-4 at 6 add memory the
 * plan does not own (context memory, bound views, sources the graph does not
 * list), at 7 run a sequence instead (reserve and bind graph a, bind graph b;
 * bits 5-7 pick how b differs).  The rest
 * decodes as fuzz_alloc's bytes do.  ggml_gallocr and tgsched with
 * TG_PLAN_GGML plan the case; ggml's plan is judged by every oracle checker,
 * and the plans are compared offset for offset.  A violation in ggml's plan
 * or a difference that no listed class (docs/upstream.md) explains aborts
 * with the case written out; listed ggml defects, aborts included, do not. */
#include "tg-ggml.h"

#include <stdio.h>
#include <stdlib.h>

enum { FLAGS_AS_GGML, RAW_FLAGS, INPUT_NODES, NONE_VIEWS, VARIANTS };
enum { WITH_MEMORY = 6, SEQUENCE = 7 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) tg_ggml_quiet_log(), quiet = true;
    if (size < 1) return 0;
    int variant = data[0] % VARIANTS, extra = (data[0] >> 2) % 8;
    bool memory = extra == WITH_MEMORY;
    struct tg_ggml_case_source src = {.bytes = data + 1, .n = size - 1, .opts = tg_gen_target_options("alloc"),
                                      .input_nodes = variant == INPUT_NODES, .context_owned = memory, .unlisted = memory};
    src.opts.raw_output_flags = variant == RAW_FLAGS;
    src.opts.none_views = variant == NONE_VIEWS;
    src.opts.bound_views = memory;
    struct tg_ggml_alloc_options o = {.raw_flags_import = variant == RAW_FLAGS, .tg_fault = TG_FAULT_NONE};
    struct tg_ggml_alloc_result r;
    enum tg_status st = extra == SEQUENCE
        ? tg_ggml_alloc_sequence_compare(&src, (enum tg_ggml_sequence)((data[0] >> 5) % TG_GGML_SEQ_COUNT), size, &o, &r)
        : tg_ggml_alloc_compare(&src, &o, &r);
    if (st != TG_OK) return 0; /* out of host memory only */
    if (!((r.classes >> TG_GGML_UNEXPLAINED) & 1)) return 0;
    fprintf(stderr, "fuzz_ggml: unexplained difference from ggml (variant %d, extra %d): %s\n", variant, extra, r.detail);
    src.unlisted = false; /* a `.tg` file lists every source: the case as it was before some left the lists */
    struct tg_gen_case *c = NULL;
    if (tg_ggml_case_make(&src, &c) == TG_OK) {
        char *text = tg_gen_case_to_text(c);
        if (text) fprintf(stderr, "%s\n", text);
        free(text);
        tg_gen_case_free(c);
    }
    abort();
}

/* Fuzz target against upstream ggml (built when the pinned ggml is there:
 * tests/ggml/tests.cmake): the allocator differential of tg-ggml.h on one
 * generated case.  The first byte picks the variant (output flags as
 * ggml_set_output sets them, raw flags, some nodes flagged input, or some
 * views made as ggml_view_tensor makes them), the rest
 * decodes as fuzz_alloc's bytes do.  ggml_gallocr and tgsched with
 * TG_PLAN_GGML plan the case; ggml's plan is judged by every oracle checker,
 * and the plans are compared offset for offset.  A violation in ggml's plan
 * or a difference that no listed class (docs/upstream.md) explains aborts
 * with the case written out; listed ggml defects, aborts included, do not. */
#include "tg-ggml.h"

#include <stdio.h>
#include <stdlib.h>

enum { FLAGS_AS_GGML, RAW_FLAGS, INPUT_NODES, NONE_VIEWS, VARIANTS };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) tg_ggml_quiet_log(), quiet = true;
    if (size < 1) return 0;
    int variant = data[0] % VARIANTS;
    struct tg_ggml_case_source src = {.bytes = data + 1, .n = size - 1, .opts = tg_gen_target_options("alloc"),
                                      .input_nodes = variant == INPUT_NODES};
    src.opts.raw_output_flags = variant == RAW_FLAGS;
    src.opts.none_views = variant == NONE_VIEWS;
    struct tg_ggml_alloc_options o = {.raw_flags_import = variant == RAW_FLAGS, .tg_fault = TG_FAULT_NONE};
    struct tg_ggml_alloc_result r;
    if (tg_ggml_alloc_compare(&src, &o, &r) != TG_OK) return 0; /* out of host memory only */
    if (!((r.classes >> TG_GGML_UNEXPLAINED) & 1)) return 0;
    fprintf(stderr, "fuzz_ggml: unexplained difference from ggml (variant %d): %s\n", variant, r.detail);
    struct tg_gen_case *c = NULL;
    if (tg_ggml_case_make(&src, &c) == TG_OK) {
        char *text = tg_gen_case_to_text(c);
        if (text) fprintf(stderr, "%s\n", text);
        free(text);
        tg_gen_case_free(c);
    }
    abort();
}

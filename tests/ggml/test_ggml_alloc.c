/* The allocator differential against upstream ggml (label ggml): thousands of
 * generated cases, and the real graphs of corpus/graphs, planned by
 * ggml_gallocr and by tgsched with TG_PLAN_GGML.  ggml's plan must pass every
 * oracle checker and equal tgsched's chunk for chunk and offset for offset,
 * except where a listed reason (docs/upstream.md) explains the difference;
 * an unexplained one fails the test with the case written out.
 *
 * Cases come with output flags as ggml_set_output sets them, and as variants
 * with raw flags (a view flagged alone), input-flagged nodes, op-none views,
 * and memory the plan does not own (leafs in context memory, views bound in
 * place, sources the graph does not list).  Then sequences: one allocator
 * reserves and binds graph a, then binds graph b (the same, an edge or a
 * view's root moved, smaller, bigger), ggml's and tgsched's bindings of b
 * judged and compared.  TG_GGML_CASES sets the count. */
#include "tg-ggml.h"
#include "tg_test.h"

#include <dirent.h>

struct tally {
    int cases, equal, equal_after_ids;
    int per_class[TG_GGML_CLASS_COUNT];
    int multi_chunk, violations_cases;
    long tensors_compared;
};

static void count(struct tally *t, const struct tg_ggml_alloc_result *r) {
    t->cases++;
    t->equal += r->equal;
    t->equal_after_ids += r->equal && r->ids_replaced;
    t->multi_chunk += r->multi_chunk;
    t->violations_cases += r->n_violations > 0;
    t->tensors_compared += r->n_tensors_compared;
    if (!r->classes) t->per_class[TG_GGML_SAME]++;
    for (int k = 1; k < TG_GGML_CLASS_COUNT; k++) t->per_class[k] += (r->classes >> k) & 1;
}

static void print_tally(const char *what, const struct tally *t) {
    printf("%s: %d cases, %ld tensors compared; %d plans equal offset for offset (%d once ids were ggml's); %d with "
           "several chunks; %d where ggml's first plan breaks a rule\n", what, t->cases, t->tensors_compared, t->equal,
           t->equal_after_ids, t->multi_chunk, t->violations_cases);
    for (int k = 0; k < TG_GGML_CLASS_COUNT; k++) {
        if (t->per_class[k]) printf("  %-32s %d\n", tg_ggml_alloc_class_name((enum tg_ggml_alloc_class)k), t->per_class[k]);
    }
}

static void report_unexplained(const struct tg_ggml_case_source *src, const struct tg_ggml_alloc_result *r, const char *what) {
    fprintf(stderr, "%s: unexplained difference from ggml: %s\n", what, r->detail);
    /* a `.tg` file lists every source: the case is written before some leave the lists */
    struct tg_ggml_case_source listed = *src;
    listed.unlisted = false;
    if (src->unlisted) fprintf(stderr, "# the case with every source listed (the comparison unlists some)\n");
    struct tg_gen_case *c = NULL;
    if (tg_ggml_case_make(&listed, &c) == TG_OK) {
        char *text = tg_gen_case_to_text(c);
        if (text) fprintf(stderr, "%s\n", text);
        free(text);
        tg_gen_case_free(c);
    }
}

enum variant { FLAGS_AS_GGML, RAW_FLAGS, INPUT_NODES, NONE_VIEWS, MEMORY };
static const char *const variant_names[] = {"generated, flags as ggml_set_output", "generated, raw output flags",
                                            "generated, some nodes flagged input",
                                            "generated, some views as ggml_view_tensor makes them",
                                            "generated, context memory, bound views, sources the graph does not list"};

/* Case `seed` of a variant, from bytes (TG_GEN_SEED_BYTES), compared both ways. */
static struct tg_ggml_case_source compare_case(uint64_t seed, enum variant v, uint8_t *bytes,
                                               struct tg_ggml_alloc_result *r) {
    bool raw = v == RAW_FLAGS;
    tg_gen_seed_bytes(seed * 2654435761u + (uint64_t)v * 7, bytes, TG_GEN_SEED_BYTES);
    struct tg_ggml_case_source src = {.bytes = bytes, .n = TG_GEN_SEED_BYTES, .opts = tg_gen_target_options("alloc"),
                                      .input_nodes = v == INPUT_NODES, .context_owned = v == MEMORY, .unlisted = v == MEMORY};
    src.opts.raw_output_flags = raw;
    src.opts.none_views = v == NONE_VIEWS;
    src.opts.bound_views = v == MEMORY;
    struct tg_ggml_alloc_options o = {.raw_flags_import = raw, .tg_fault = TG_FAULT_NONE};
    CHECK_OK(tg_ggml_alloc_compare(&src, &o, r));
    return src;
}

/* In a case of the MEMORY variant: leafs in context memory, and tensors
 * nodes read that the graph does not list. */
static void count_memory(const struct tg_ggml_case_source *src, int *owned, int *unlisted) {
    struct tg_gen_case *c = NULL;
    if (tg_ggml_case_make(src, &c) != TG_OK) return;
    const struct tg_graph *g = c->graph;
    for (int j = 0; j < g->n_leafs; j++) *owned += g->leafs[j]->data && !g->leafs[j]->buffer && !g->leafs[j]->view_src;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < TG_MAX_SRC; k++)
            *unlisted += g->nodes[i]->src[k] && !tg_graph_contains(g, g->nodes[i]->src[k]);
    tg_gen_case_free(c);
}

static void generated_cases(int n, enum variant v) {
    bool raw = v == RAW_FLAGS;
    struct tally t = {0};
    int failures = 0, owned = 0, unlisted = 0;
    for (uint64_t seed = 1; seed <= (uint64_t)n; seed++) {
        uint8_t bytes[TG_GEN_SEED_BYTES];
        struct tg_ggml_alloc_result r;
        struct tg_ggml_case_source src = compare_case(seed, v, bytes, &r);
        count(&t, &r);
        if (v == MEMORY) count_memory(&src, &owned, &unlisted);
        bool unexplained = (r.classes >> TG_GGML_UNEXPLAINED) & 1;
        CHECK(!unexplained);
        if (unexplained && failures++ < 3) {
            char what[64];
            snprintf(what, sizeof what, "%s, case %llu", variant_names[v], (unsigned long long)seed);
            report_unexplained(&src, &r, what);
        }
    }
    print_tally(variant_names[v], &t);
    if (v == MEMORY) {
        printf("  (%d leafs in context memory, %d reads of tensors the graph does not list)\n", owned, unlisted);
        CHECK(owned > n / 4 && unlisted > n / 4);
    }
    /* the differential must compare for real: most cases equal, every tensor */
    CHECK(t.equal > n / 2);
    CHECK(t.tensors_compared > 10L * n);
    if (raw) CHECK(t.per_class[TG_GGML_RAW_OUTPUT_VIEW] > 0);
    else CHECK(t.per_class[TG_GGML_RAW_OUTPUT_VIEW] == 0);
    if (v == INPUT_NODES) CHECK(t.per_class[TG_GGML_INPUT_INPLACE] > 0);
    if (v == NONE_VIEWS) CHECK(t.per_class[TG_GGML_NONE_VIEW_READ] > 0);
    else CHECK(t.per_class[TG_GGML_NONE_VIEW_READ] == 0);
}

/* Reserve and bind graph a, then bind graph b (tg-ggml.h's sequences, each in
 * turn), generated with output flags as ggml_set_output sets them and, every
 * other case, with memory the plan does not own and sources not listed. */
static void sequences(int n) {
    struct tally t = {0};
    int failures = 0, replayed[2][TG_GGML_SEQ_COUNT] = {{0}}, refused[2][TG_GGML_SEQ_COUNT] = {{0}};
    for (uint64_t seed = 1; seed <= (uint64_t)n; seed++) {
        enum tg_ggml_sequence seq = (enum tg_ggml_sequence)(seed % TG_GGML_SEQ_COUNT);
        bool memory = (seed / TG_GGML_SEQ_COUNT) % 2;
        uint8_t bytes[TG_GEN_SEED_BYTES];
        tg_gen_seed_bytes(seed * 2654435761u + 5, bytes, sizeof bytes);
        struct tg_ggml_case_source src = {.bytes = bytes, .n = sizeof bytes, .opts = tg_gen_target_options("alloc"),
                                          .context_owned = memory, .unlisted = memory};
        src.opts.bound_views = memory;
        struct tg_ggml_alloc_result r;
        CHECK_OK(tg_ggml_alloc_sequence_compare(&src, seq, seed, NULL, &r));
        count(&t, &r);
        replayed[0][seq] += r.ggml_replayed;
        replayed[1][seq] += r.tg_replayed;
        refused[0][seq] += r.ggml_refused;
        refused[1][seq] += r.tg_refused;
        bool unexplained = (r.classes >> TG_GGML_UNEXPLAINED) & 1;
        CHECK(!unexplained);
        if (unexplained && failures++ < 3) {
            char what[96];
            snprintf(what, sizeof what, "sequence (%s), case %llu", tg_ggml_sequence_name(seq), (unsigned long long)seed);
            report_unexplained(&src, &r, what);
        }
    }
    print_tally("sequences: reserve and bind a, bind b", &t);
    for (int q = 0; q < TG_GGML_SEQ_COUNT; q++) {
        printf("  b %-22s bound with a's plan: ggml %d, tgsched %d; refused (several ids): ggml %d, tgsched %d\n",
               tg_ggml_sequence_name((enum tg_ggml_sequence)q), replayed[0][q], replayed[1][q], refused[0][q], refused[1][q]);
    }
    /* each decision is reached: the same graph is bound with its plan by both,
     * a moved edge makes ggml replay a stale plan */
    CHECK(t.per_class[TG_GGML_STALE_PLAN] > 0);
    CHECK(replayed[1][TG_GGML_SEQ_SAME] > n / TG_GGML_SEQ_COUNT / 2 && refused[1][TG_GGML_SEQ_SMALLER] > 0);
    CHECK(t.tensors_compared > 5L * n);
}

/* The sequence differential fails when tgsched replays as ggml does (counts
 * and sizes only): its binding of b breaks a rule. */
static void sequence_self_test(void) {
    int caught = 0, n = 200;
    for (uint64_t seed = 1; seed <= (uint64_t)n; seed++) {
        uint8_t bytes[TG_GEN_SEED_BYTES];
        tg_gen_seed_bytes(seed * 2654435761u + 5, bytes, sizeof bytes);
        struct tg_ggml_case_source src = {.bytes = bytes, .n = sizeof bytes, .opts = tg_gen_target_options("alloc")};
        struct tg_ggml_alloc_options o = {.tg_fault = TG_FAULT_STALE_REPLAY};
        struct tg_ggml_alloc_result r;
        CHECK_OK(tg_ggml_alloc_sequence_compare(&src, seed % 2 ? TG_GGML_SEQ_EDGE_MOVED : TG_GGML_SEQ_VIEW_MOVED, seed, &o, &r));
        caught += (r.classes >> TG_GGML_UNEXPLAINED) & 1;
    }
    printf("self-test: tgsched with stale-replay binds graph b illegally, unexplained, in %d of %d sequences\n", caught, n);
    CHECK(caught > n / 20);
}

/* A plain `.tg` file as a case: one buffer id of ggml's CPU buffer type (32). */
static char *with_cpu_setup(const char *text, size_t len, size_t *out_len) {
    const char *setup = "buft cpu align=32\nbuffers cpu\n";
    const char *nl = memchr(text, '\n', len);
    size_t head = nl ? (size_t)(nl - text) + 1 : len;
    char *out = malloc(len + strlen(setup) + 1);
    if (!out) return NULL;
    memcpy(out, text, head);
    memcpy(out + head, setup, strlen(setup));
    memcpy(out + head + strlen(setup), text + head, len - head);
    *out_len = len + strlen(setup);
    out[*out_len] = '\0';
    return out;
}

static void real_graphs(void) {
    DIR *d = opendir("corpus/graphs");
    CHECK(d != NULL);
    if (!d) return;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 4 || strcmp(e->d_name + nl - 3, ".tg") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "corpus/graphs/%s", e->d_name);
        size_t len = 0, cpu_len = 0;
        char *text = tg_ggml_read_text(path, &len);
        char *cpu = text ? with_cpu_setup(text, len, &cpu_len) : NULL;
        CHECK(cpu != NULL);
        if (cpu) {
            struct tg_ggml_case_source src = {.text = cpu, .text_len = cpu_len, .name = path};
            struct tg_ggml_alloc_result r;
            CHECK_OK(tg_ggml_alloc_compare(&src, NULL, &r));
            CHECK_MSG(r.classes == 0 && r.n_violations == 0, "%s: %s", path, r.detail);
            printf("%s: ggml %zu bytes, tgsched %zu bytes, %d tensors compared, %d differ\n", path, r.ggml_size[0],
                   r.tg_size[0], r.n_tensors_compared, r.n_offsets_differ);
            files++;
        }
        free(text);
        free(cpu);
    }
    closedir(d);
    CHECK(files >= 5);
}

/* The differential must fail when either side breaks: tgsched planning with
 * an injected fault, or ggml's plan (as read back) overlapping two live leafs. */
static void self_test(void) {
    int tg_caught = 0, ggml_caught = 0, n = 200;
    for (uint64_t seed = 1; seed <= (uint64_t)n; seed++) {
        uint8_t bytes[TG_GEN_SEED_BYTES];
        tg_gen_seed_bytes(seed * 2654435761u, bytes, sizeof bytes);
        struct tg_ggml_case_source src = {.bytes = bytes, .n = sizeof bytes, .opts = tg_gen_target_options("alloc")};
        struct tg_ggml_alloc_result r;
        struct tg_ggml_alloc_options o = {.tg_fault = TG_FAULT_MERGE_OFF_BY_ONE};
        CHECK_OK(tg_ggml_alloc_compare(&src, &o, &r));
        tg_caught += (r.classes >> TG_GGML_UNEXPLAINED) & 1;
        o = (struct tg_ggml_alloc_options){.tg_fault = TG_FAULT_NONE, .overlap_ggml_plan = true};
        CHECK_OK(tg_ggml_alloc_compare(&src, &o, &r));
        ggml_caught += (r.classes >> TG_GGML_UNEXPLAINED) & 1;
    }
    printf("self-test: tgsched with merge-off-by-one differs unexplained in %d of %d cases; ggml's plan with two "
           "leafs overlapped in %d\n", tg_caught, n, ggml_caught);
    CHECK(tg_caught > n / 10 && ggml_caught > n / 2);
}

/* A listed class excuses a difference only where its cause is in the case:
 * each file is a case where tgsched with a fault differs from ggml and a
 * class's trigger once excused it (see each file's comment). */
static void classes_excuse_no_fault(void) {
    static const struct {
        const char *path;
        bool raw;
        enum tg_fault fault;
    } cases[] = {
        {"tests/io/ggml_fault_raw_view.tg", true, TG_FAULT_MERGE_OFF_BY_ONE},
        {"tests/io/ggml_fault_tg_chunks.tg", false, TG_FAULT_MERGE_OFF_BY_ONE},
        {"tests/io/ggml_fault_none_view_output_root.tg", false, TG_FAULT_SKIP_CONSUMER_COUNT},
        {"tests/io/ggml_fault_ids_replaced.tg", true, TG_FAULT_SKIP_CONSUMER_COUNT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len = 0;
        char *text = tg_ggml_read_text(cases[i].path, &len);
        CHECK_MSG(text != NULL, "cannot read %s", cases[i].path);
        if (!text) continue;
        struct tg_ggml_case_source src = {.text = text, .text_len = len, .name = cases[i].path};
        struct tg_ggml_alloc_result r;
        struct tg_ggml_alloc_options o = {.raw_flags_import = cases[i].raw, .tg_fault = TG_FAULT_NONE};
        CHECK_OK(tg_ggml_alloc_compare(&src, &o, &r));
        CHECK_MSG(!((r.classes >> TG_GGML_UNEXPLAINED) & 1), "%s without a fault: %s", cases[i].path, r.detail);
        o.tg_fault = cases[i].fault;
        CHECK_OK(tg_ggml_alloc_compare(&src, &o, &r));
        CHECK_MSG((r.classes >> TG_GGML_UNEXPLAINED) & 1, "%s with %s: classes 0x%x excuse it (%s)", cases[i].path,
                  tg_fault_name(cases[i].fault), r.classes, r.detail);
        free(text);
    }
}

int main(void) {
    tg_ggml_quiet_log();
    const char *env = getenv("TG_GGML_CASES");
    int n = env ? atoi(env) : 10000;
    const char *only = getenv("TG_GGML_CASE"); /* one case, for debugging */
    if (only) {
        uint64_t seed = strtoull(only, NULL, 10);
        for (int v = 0; v <= MEMORY; v++) {
            uint8_t bytes[TG_GEN_SEED_BYTES];
            struct tg_ggml_alloc_result r;
            compare_case(seed, (enum variant)v, bytes, &r);
            printf("case %llu, %s: classes 0x%x, %d rounds, %s\n", (unsigned long long)seed, variant_names[v], r.classes,
                   r.rounds, r.detail);
        }
        return tg_test_finish();
    }
    real_graphs();
    self_test();
    classes_excuse_no_fault();
    generated_cases(n, FLAGS_AS_GGML);
    generated_cases(n / 2, RAW_FLAGS);
    generated_cases(n / 2, INPUT_NODES);
    generated_cases(n / 2, NONE_VIEWS);
    generated_cases(n / 2, MEMORY);
    sequence_self_test();
    sequences(n / 2);
    return tg_test_finish();
}

/* The allocator setup in `.tg` files (`buft`, `buffers`, `bufid=`): read,
 * written canonically, refused with a line and a reason when malformed; and
 * a generated case written as a file and read back is the same case (same
 * text, same plan offset for offset).  Also the generator's output flags:
 * set as ggml_set_output sets them by default, on the tensor only when raw. */
#include "tg-gen.h"
#include "tg-io.h"
#include "tg_test.h"

static void reads_and_writes_setup(void) {
    const char *in = "tgraph 1\n"
                     "buft gpu align=256 max=65536 pad=mul_mat:64\n"
                     "buft host align=32\n"
                     "buffers gpu,host,gpu\n"
                     "leaf 0 f32 16 4 1 1 none bufid=1 name=x\n"
                     "node 1 f32 16 4 1 1 scale src=0 params=0x3f000000 bufid=2 name=y\n"
                     "node 2 f32 16 4 1 1 scale src=1 params=0x3f000000 bufid=0 flags=output name=z\n";
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_parse(in, strlen(in), "setup.tg", &f));
    if (!f) return;
    const struct tg_io_alloc_setup *a = &f->alloc;
    CHECK(a->n_bufts == 2 && a->n_ids == 3);
    CHECK(strcmp(a->bufts[0].name, "gpu") == 0 && a->bufts[0].alignment == 256 && a->bufts[0].max_size == 65536);
    CHECK(a->bufts[0].pad_op == TG_OP_MUL_MAT && a->bufts[0].pad_bytes == 64);
    CHECK(a->bufts[1].alignment == 32 && a->bufts[1].max_size == 0 && a->bufts[1].pad_op == TG_OP_COUNT);
    CHECK(a->buft_of_id[0] == 0 && a->buft_of_id[1] == 1 && a->buft_of_id[2] == 0);
    CHECK(f->tensors[0].buffer_id == 1 && f->tensors[1].buffer_id == 2 && f->tensors[2].buffer_id == 0);
    char *out = tg_file_write_mem(f, NULL);
    /* canonical: bufid=0 is the default and left out */
    const char *want = "tgraph 1\n"
                       "buft gpu align=256 max=65536 pad=mul_mat:64\n"
                       "buft host align=32\n"
                       "buffers gpu,host,gpu\n"
                       "leaf 0 f32 16 4 1 1 none bufid=1 name=x\n"
                       "node 1 f32 16 4 1 1 scale src=0 params=0x3f000000 bufid=2 name=y\n"
                       "node 2 f32 16 4 1 1 scale src=1 params=0x3f000000 flags=output name=z\n";
    CHECK_MSG(out && strcmp(out, want) == 0, "got:\n%s", out ? out : tg_last_error());
    free(out);
    tg_file_free(f);
}

static void refused(const char *text, int line, const char *says) {
    struct tg_file *f = NULL;
    enum tg_status st = tg_file_parse(text, strlen(text), "bad.tg", &f);
    char where[32];
    snprintf(where, sizeof where, "bad.tg:%d:", line);
    CHECK_MSG(st == TG_ERR_INVALID && !f && strstr(tg_last_error(), where) && strstr(tg_last_error(), says),
              "'%s' gave %s: %s (wanted line %d, '%s')", text, tg_status_name(st), tg_last_error(), line, says);
    tg_file_free(f);
}

static void refuses_malformed_setup(void) {
    refused("tgraph 1\nleaf 0 f32 4 1 1 1 none bufid=1\n", 2, "needs a 'buffers' header line");
    refused("tgraph 1\nbuft a align=16\nbuffers a\nleaf 0 f32 4 1 1 1 none bufid=1\n", 4, "0..0");
    refused("tgraph 1\nbuft a align=16\nbuffers a\nleaf 0 f32 4 1 1 1 none bufid=-1\n", 4, "is not a buffer id");
    refused("tgraph 1\nbuft a align=16\nbuffers b\n", 3, "no earlier 'buft' line declares");
    refused("tgraph 1\nbuft a align=24\n", 2, "not a power of two");
    refused("tgraph 1\nbuft a align=0\n", 2, "not a power of two");
    refused("tgraph 1\nbuft a max=16\n", 2, "needs align=N");
    refused("tgraph 1\nbuft a align=16 color=red\n", 2, "unknown buft key 'color'");
    refused("tgraph 1\nbuft a align=16 pad=frob:3\n", 2, "unknown op 'frob'");
    refused("tgraph 1\nbuft a align=16 pad=add\n", 2, "pad= needs OP:BYTES");
    refused("tgraph 1\nbuft a align=16 align=32\n", 2, "given twice");
    refused("tgraph 1\nbuft a align=16\nbuft a align=32\n", 3, "declared twice");
    refused("tgraph 1\nbuft a/b align=16\n", 2, "outside [A-Za-z0-9_.-]");
    refused("tgraph 1\nbuft a align=16\nbuffers a\nbuft b align=16\n", 4, "before the 'buffers' line");
    refused("tgraph 1\nbuft a align=16\nbuffers a\nbuffers a\n", 4, "a second 'buffers' line");
    refused("tgraph 1\nbuft a align=16\nbuffers a a\n", 3, "unexpected 'a' after the buffers list");
    refused("tgraph 1\nbuft a align=16 pad=:64\n", 2, "pad= names no op: ':64'");
    /* 32 characters: one more than the name's array holds with its NUL */
    refused("tgraph 1\nbuft a2345678901234567890123456789012 align=16\n", 2, "is longer than 31 characters");
    /* one buft line more than the setup holds (TG_IO_MAX_BUFTS) */
    char many[1024] = "tgraph 1\n";
    for (int i = 0; i <= TG_IO_MAX_BUFTS; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "buft b%d align=16\n", i);
    refused(many, TG_IO_MAX_BUFTS + 2, "more than 16 'buft' lines");
    /* one buffer id more than the setup holds (TG_IO_MAX_BUFFER_IDS) */
    snprintf(many, sizeof many, "tgraph 1\nbuft a align=16\nbuffers a");
    for (int i = 0; i < TG_IO_MAX_BUFFER_IDS; i++) snprintf(many + strlen(many), sizeof many - strlen(many), ",a");
    refused(many, 3, "more than 16 buffer ids");
    refused("tgraph 1\nleaf 0 f32 4 1 1 1 none\nbuft a align=16\n", 3, "before the first tensor line");
    refused("tgraph 1\nbuft a align=16\nleaf 0 f32 4 1 1 1 none\nbuffers a\n", 4, "before the first tensor line");
}

/* Every tensor's placement of a planned case: buffer, offset in it. */
static bool same_plan(const struct tg_gen_case *a, const struct tg_gen_case *b, char *why, size_t why_size) {
    const struct tg_graph *ga = a->graph, *gb = b->graph;
    if (ga->n_nodes != gb->n_nodes || ga->n_leafs != gb->n_leafs) return snprintf(why, why_size, "counts"), false;
    for (int u = 0; u < ga->n_nodes + ga->n_leafs; u++) {
        const struct tg_tensor *ta = u < ga->n_nodes ? ga->nodes[u] : ga->leafs[u - ga->n_nodes];
        const struct tg_tensor *tb = u < gb->n_nodes ? gb->nodes[u] : gb->leafs[u - gb->n_nodes];
        bool a_planned = ta->buffer && tg_buffer_get_usage(ta->buffer) == TG_BUFFER_USAGE_COMPUTE;
        bool b_planned = tb->buffer && tg_buffer_get_usage(tb->buffer) == TG_BUFFER_USAGE_COMPUTE;
        if (a_planned != b_planned) return snprintf(why, why_size, "tensor %s planned in one only", ta->name), false;
        if (!a_planned) continue;
        size_t oa = (size_t)((char *)ta->data - (char *)tg_buffer_get_base(ta->buffer));
        size_t ob = (size_t)((char *)tb->data - (char *)tg_buffer_get_base(tb->buffer));
        if (oa != ob || ta->buffer->size != tb->buffer->size) {
            return snprintf(why, why_size, "tensor %s at %zu vs %zu", ta->name, oa, ob), false;
        }
    }
    return true;
}

static void generated_case_round_trip(void) {
    struct tg_gen_options opts = tg_gen_target_options("alloc");
    int compared = 0, with_weights = 0, multi_id = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        struct tg_gen_case *a = NULL, *b = NULL;
        if (tg_gen_case_from_seed(seed, &opts, &a) != TG_OK) continue;
        char *text = tg_gen_case_to_text(a);
        CHECK(text != NULL);
        if (!text) {
            tg_gen_case_free(a);
            continue;
        }
        CHECK_OK(tg_gen_case_from_text(text, strlen(text), "case.tg", true, &b));
        if (b) {
            b->seed = a->seed;
            char *again = tg_gen_case_to_text(b);
            CHECK_MSG(again && strcmp(again, text) == 0, "seed %llu: the case read back is written differently",
                      (unsigned long long)seed);
            free(again);
            struct tg_gen_plan_result ra, rb;
            tg_gallocr *ga = NULL, *gb = NULL; /* hold the plans' buffers while they are compared */
            CHECK_OK(tg_gen_plan_and_check_policy(a, TG_FAULT_NONE, TG_PLAN_GGML, &ga, &ra));
            CHECK_OK(tg_gen_plan_and_check_policy(b, TG_FAULT_NONE, TG_PLAN_GGML, &gb, &rb));
            char why[160] = "";
            CHECK_MSG(ra.plan_status == rb.plan_status && ra.report.n == 0 && rb.report.n == 0 && same_plan(a, b, why, sizeof why),
                      "seed %llu: plans differ: %s", (unsigned long long)seed, why);
            for (int id = 0; id < a->n_ids; id++) CHECK(ra.buffer_size[id] == rb.buffer_size[id]);
            tg_gen_plan_result_free(&ra);
            tg_gen_plan_result_free(&rb);
            tg_gallocr_free(ga);
            tg_gallocr_free(gb);
            compared++;
            with_weights += a->n_external > 0;
            multi_id += a->n_ids > 1;
        }
        free(text);
        tg_gen_case_free(a);
        tg_gen_case_free(b);
    }
    printf("round trip: %d cases (%d with weights, %d with several buffer ids)\n", compared, with_weights, multi_id);
    CHECK(compared >= 290 && with_weights > 50 && multi_id > 50);
}

/* Output views: the root is flagged as ggml_set_output flags it, unless raw. */
static void output_flags_follow_ggml(void) {
    int flagged_views = 0, raw_unflagged_roots = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        for (int raw = 0; raw < 2; raw++) {
            struct tg_gen_options opts = tg_gen_default_options();
            opts.raw_output_flags = raw;
            opts.address_only = true;
            struct tg_gen_case *c = NULL;
            if (tg_gen_case_from_seed(seed, &opts, &c) != TG_OK) continue;
            for (int i = 0; i < c->graph->n_nodes; i++) {
                const struct tg_tensor *t = c->graph->nodes[i];
                if (!(t->flags & TG_FLAG_OUTPUT) || !t->view_src) continue;
                if (!raw) {
                    flagged_views++;
                    CHECK_MSG(t->view_src->flags & TG_FLAG_OUTPUT, "seed %llu: output view %s, root %s unflagged",
                              (unsigned long long)seed, t->name, t->view_src->name);
                } else if (!(t->view_src->flags & TG_FLAG_OUTPUT)) {
                    raw_unflagged_roots++;
                }
            }
            tg_gen_case_free(c);
        }
    }
    printf("output views: %d flagged as ggml_set_output does; %d roots left unflagged when raw\n", flagged_views,
           raw_unflagged_roots);
    CHECK(flagged_views > 20 && raw_unflagged_roots > 20);
}

int main(void) {
    reads_and_writes_setup();
    refuses_malformed_setup();
    generated_case_round_trip();
    output_flags_follow_ggml();
    return tg_test_finish();
}

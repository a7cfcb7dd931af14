/* The case generator: every byte string decodes (empty, constant, random), a
 * seed and its bytes give the same case, decoding is deterministic, the text
 * form parses back as a `.tg` graph, op results and mul_mat costs stay within
 * the case's budget, and the address-only buffer type refuses data access.  Each decoded case also plans legally (smoke, not the props). */
#include "tg-gen.h"
#include "tg-io.h"
#include "tg-oracle.h"
#include "tg_test.h"

static void check_case_plans(struct tg_gen_case *c) {
    struct tg_gen_plan_result res;
    CHECK_OK(tg_gen_plan_and_check(c, TG_FAULT_NONE, NULL, &res));
    CHECK_MSG(res.plan_status == TG_OK && res.report.n == 0, "seed %llu: status %s, %d violations",
              (unsigned long long)c->seed, tg_status_name(res.plan_status), res.report.n);
    tg_gen_plan_result_free(&res);
}

static void test_any_bytes_decode(void) {
    uint8_t bytes[512];
    struct tg_gen_case *c = NULL;
    CHECK_OK(tg_gen_case_from_bytes(NULL, 0, NULL, &c)); /* nothing: all zeros */
    CHECK(c && tg_gen_case_n_tensors(c) >= 1 && c->n_ids >= 1 && c->n_ids <= TG_GEN_MAX_IDS);
    if (c) check_case_plans(c);
    tg_gen_case_free(c);

    memset(bytes, 0xff, sizeof bytes);
    CHECK_OK(tg_gen_case_from_bytes(bytes, sizeof bytes, NULL, &c));
    CHECK(c && tg_gen_case_n_tensors(c) >= 1);
    if (c) check_case_plans(c);
    tg_gen_case_free(c);

    for (size_t len = 1; len <= 64; len += 7) {
        tg_gen_seed_bytes(len * 77, bytes, len);
        CHECK_OK(tg_gen_case_from_bytes(bytes, len, NULL, &c));
        CHECK(c != NULL);
        if (c) check_case_plans(c);
        tg_gen_case_free(c);
    }
}

static void test_seed_is_its_bytes(void) {
    uint8_t bytes[TG_GEN_SEED_BYTES];
    struct tg_gen_case *a = NULL, *b = NULL, *d = NULL;
    CHECK_OK(tg_gen_case_from_seed(42, NULL, &a));
    tg_gen_seed_bytes(42, bytes, sizeof bytes);
    CHECK_OK(tg_gen_case_from_bytes(bytes, sizeof bytes, NULL, &b));
    CHECK_OK(tg_gen_case_from_seed(43, NULL, &d));
    if (a && b && d) {
        CHECK(a->seed == 42 && b->seed == 0);
        b->seed = 42; /* the seed line is the only difference allowed */
        char *ta = tg_gen_case_to_text(a), *tb = tg_gen_case_to_text(b), *td = tg_gen_case_to_text(d);
        CHECK(ta && tb && td);
        if (ta && tb && td) {
            CHECK(strcmp(ta, tb) == 0);
            CHECK(strcmp(ta, td) != 0);
            CHECK(strstr(ta, "# tggen case, seed 42") == ta);
            CHECK(strstr(ta, "tgraph 1") != NULL);
            /* the text is a `.tg` file ('#' lines are comments) */
            struct tg_file *f = NULL;
            CHECK_OK(tg_file_parse(ta, strlen(ta), "case42", &f));
            if (f) CHECK(f->graph->n_nodes == a->graph->n_nodes && f->graph->n_leafs == a->graph->n_leafs);
            tg_file_free(f);
        }
        free(ta);
        free(tb);
        free(td);
    }
    tg_gen_case_free(a);
    tg_gen_case_free(b);
    tg_gen_case_free(d);
}

static void test_options_and_externals(void) {
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    opts.max_ops = 8;
    int n_external = 0, n_cases = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct tg_gen_case *c = NULL;
        CHECK_OK(tg_gen_case_from_seed(seed, &opts, &c));
        if (!c) continue;
        n_cases++;
        n_external += c->n_external;
        for (int j = 0; j < c->graph->n_leafs; j++) {
            const struct tg_tensor *t = c->graph->leafs[j];
            CHECK_MSG(t->type == TG_TYPE_F32 || t->type == TG_TYPE_I32, "seed %llu: computable case has a %s leaf",
                      (unsigned long long)seed, tg_type_name(t->type));
            if (t->data) CHECK(t->buffer == c->external_buffer);
        }
        tg_gen_case_free(c);
    }
    CHECK(n_cases == 200);
    CHECK(n_external > 0);
}

static void test_address_only_buffer(void) {
    struct tg_gen_buft bt;
    tg_gen_buft_init_address_only(&bt, "addr", 64);
    tg_buffer *buf = tg_buft_alloc_buffer(&bt.buft, (size_t)1 << 32); /* 4 GB of address space, no memory */
    CHECK(buf != NULL);
    if (!buf) return;
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, 16);
    tg_set_name(t, "far");
    CHECK_OK(tg_tensor_bind(t, buf, (char *)tg_buffer_get_base(buf) + ((size_t)1 << 31)));
    float v[16] = {0};
    tg_clear_error();
    CHECK_OK(tg_tensor_set(t, v, 0, sizeof v));
    CHECK_ERR_HAS("address-only");
    tg_context_free(ctx);
    tg_buffer_free(buf);
}

/* Address-only buffers share one reservation of address space: buffers live
 * together never overlap and keep a gap between them, the space is taken
 * again once none is live, and a buffer too large for it is mapped alone. */
static void test_address_only_buffers_share_space(void) {
    struct tg_gen_buft bt;
    tg_gen_buft_init_address_only(&bt, "addr", 256);
    enum { N_BUFFERS = 6 };
    tg_buffer *bufs[N_BUFFERS];
    const size_t sizes[N_BUFFERS] = {1, 100, 4096, 65536, 5000, (size_t)1 << 30};
    for (int i = 0; i < N_BUFFERS; i++) {
        bufs[i] = tg_buft_alloc_buffer(&bt.buft, sizes[i]);
        CHECK(bufs[i] != NULL);
        if (!bufs[i]) return;
        CHECK((uintptr_t)tg_buffer_get_base(bufs[i]) % 256 == 0);
    }
    for (int i = 0; i < N_BUFFERS; i++) {
        for (int j = 0; j < N_BUFFERS; j++) {
            if (i == j) continue;
            const uintptr_t a = (uintptr_t)tg_buffer_get_base(bufs[i]), b = (uintptr_t)tg_buffer_get_base(bufs[j]);
            /* a page of no buffer's after each one */
            CHECK(a + sizes[i] + 4096 <= b || b + sizes[j] + 4096 <= a);
        }
    }
    void *first = tg_buffer_get_base(bufs[0]);
    for (int i = 0; i < N_BUFFERS; i++) tg_buffer_free(bufs[i]);
    tg_buffer *again = tg_buft_alloc_buffer(&bt.buft, 64);
    CHECK(again && tg_buffer_get_base(again) == first);
    /* larger than the whole reservation: its own mapping, beside the shared one */
    tg_buffer *huge = tg_buft_alloc_buffer(&bt.buft, (size_t)9 << 30);
    CHECK(huge != NULL);
    if (huge && again) {
        const uintptr_t h = (uintptr_t)tg_buffer_get_base(huge), a = (uintptr_t)tg_buffer_get_base(again);
        CHECK(h + ((size_t)9 << 30) <= a || a + 64 <= h);
    }
    tg_buffer_free(huge);
    tg_buffer_free(again);
}

/* Op results stay within four times the tensor cap, and a computable case's
 * mul_mats within its budget of 256 multiply-adds per capped element: the
 * input fuzz_exec timed out on (chains of mul_mat outer products, 16 MB each)
 * and 3,000 random seeds. */
static bool case_within_budget(const struct tg_gen_case *c, const struct tg_gen_options *o, char *why, size_t n) {
    long long macs = 0;
    for (int i = 0; i < c->graph->n_nodes; i++) {
        const struct tg_tensor *t = c->graph->nodes[i];
        if (tg_nbytes(t) > 4 * o->max_tensor_bytes) {
            snprintf(why, n, "node '%s' has %zu bytes", t->name, tg_nbytes(t));
            return false;
        }
        if (t->op == TG_OP_MUL_MAT) macs += (long long)tg_nelements(t) * t->src[0]->ne[0];
    }
    if (macs > 256 * (long long)(o->max_tensor_bytes / sizeof(float))) {
        snprintf(why, n, "mul_mats cost %lld multiply-adds", macs);
        return false;
    }
    return true;
}

static void test_compute_budget(void) {
    const struct tg_gen_options o = tg_gen_target_options("exec");
    char why[128];
    FILE *f = fopen("corpus/regressions/fuzz_exec/timeout-mul-mat-outer-products-16mb", "rb");
    CHECK(f != NULL);
    if (f) {
        uint8_t bytes[256];
        const size_t len = fread(bytes, 1, sizeof bytes, f);
        fclose(f);
        struct tg_gen_case *c = NULL;
        CHECK(len > 1);
        if (len > 1) CHECK_OK(tg_gen_case_from_bytes(bytes + 1, len - 1, &o, &c)); /* fuzz_exec: byte 0 is the policy */
        if (c) CHECK_MSG(case_within_budget(c, &o, why, sizeof why), "the timeout input: %s", why);
        tg_gen_case_free(c);
    }
    int over = 0;
    for (uint64_t seed = 0; seed < 3000; seed++) {
        uint8_t bytes[200];
        tg_gen_seed_bytes(seed, bytes, sizeof bytes);
        struct tg_gen_case *c = NULL;
        if (tg_gen_case_from_bytes(bytes, sizeof bytes, &o, &c) == TG_OK && !case_within_budget(c, &o, why, sizeof why)) {
            if (over++ == 0) fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, why);
        }
        tg_gen_case_free(c);
    }
    CHECK_MSG(over == 0, "%d of 3,000 seeds over the budget", over);
}

/* A node read only through an op-none view (ggml_view_tensor's, a leaf) is
 * no result: its memory is free once the view's last reader is done, so a
 * schedule may reuse it (prop_sched_calls compared r and failed 12 of 30,000
 * seeds). */
static void test_read_through_none_view_is_no_result(void) {
    static const char text[] = "tgraph 1\n"
                               "buft cpu align=32\n"
                               "buffers cpu\n"
                               "leaf 0 f32 16 1 1 1 none flags=input name=x\n"
                               "node 1 f32 16 1 1 1 sqrt src=0 name=r\n"
                               "leaf 2 f32 16 1 1 1 none view=1:0 name=rv\n"
                               "node 3 f32 16 1 1 1 reshape src=2 view=1:0 name=rv2\n"
                               "node 4 f32 16 1 1 1 sqr src=3 name=y\n"
                               "node 5 f32 16 1 1 1 sqrt src=0 name=s\n"
                               "leaf 6 f32 16 1 1 1 none view=5:0 name=sv\n"
                               "node 7 f32 16 1 1 1 sqr src=6 name=z\n";
    struct tg_gen_case *c = NULL;
    CHECK_OK(tg_gen_case_from_text(text, sizeof text - 1, "none-view", false, &c));
    if (!c) return;
    const struct tg_graph *g = c->graph;
    CHECK(g->n_nodes == 5 && strcmp(g->nodes[0]->name, "r") == 0 && strcmp(g->nodes[3]->name, "s") == 0);
    CHECK(!tg_gen_node_is_result(g, 0)); /* r: read by y through rv and rv2 */
    CHECK(!tg_gen_node_is_result(g, 3)); /* s: read by z through sv */
    CHECK(!tg_gen_node_is_result(g, 1)); /* a view */
    CHECK(tg_gen_node_is_result(g, 2) && tg_gen_node_is_result(g, 4));
    tg_gen_case_free(c);
}

int main(void) {
    test_read_through_none_view_is_no_result();
    test_any_bytes_decode();
    test_compute_budget();
    test_seed_is_its_bytes();
    test_options_and_externals();
    test_address_only_buffer();
    test_address_only_buffers_share_space();
    return tg_test_finish();
}

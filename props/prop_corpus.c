/* Every real model graph in corpus/graphs plans with no checker violation, and
 * its planned size lies between the oracle's lower bound and the naive total.
 * Weights and KV cache are bound to reserved address space (reserve_only) and
 * the compute buffer is address-only too, so 7B graphs plan without their
 * memory; nothing is computed here.  Prints peak, lower bound and ratio. */
#include "tg-gen.h"
#include "tg-io.h"
#include "tg-oracle.h"
#include "tg_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A backend that only hands out a buffer type: tg_file_bind_external needs one
 * to place the file's pre-allocated tensors, and no kernel runs here. */
struct planning_backend {
    tg_backend backend;
    struct tg_gen_buft buft;
};
static const char *planning_name(tg_backend *b) {
    (void)b;
    return "planning";
}
static tg_buffer_type *planning_buft(tg_backend *b) { return &((struct planning_backend *)b->context)->buft.buft; }

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void check_file(const char *path, size_t alignment, long long *n_tensors) {
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_load(path, &f));
    if (!f) return;
    struct planning_backend pb = {0};
    tg_gen_buft_init_address_only(&pb.buft, "weights", 64);
    pb.backend.iface.get_name = planning_name;
    pb.backend.iface.get_default_buffer_type = planning_buft;
    pb.backend.context = &pb;
    tg_backend *backends[1] = {&pb.backend};
    CHECK_OK(tg_file_bind_external(f, backends, 1, true));

    struct tg_gen_buft compute;
    tg_gen_buft_init_address_only(&compute, "compute", alignment);
    tg_buffer_type *bufts[1] = {&compute.buft};
    struct tg_oracle_snapshot snap;
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    size_t lower = 0, naive_total = 0;
    CHECK_OK(tg_oracle_snapshot_take(f->graph, &snap));
    CHECK_OK(tg_oracle_liveness_build(f->graph, &snap, NULL, NULL, &lv));
    CHECK_OK(tg_oracle_lower_bound(&lv, bufts, 1, &lower, &naive_total));
    tg_gallocr *galloc = tg_gallocr_new(bufts[0]);
    CHECK_OK(tg_gallocr_reserve(galloc, f->graph));
    enum tg_status st = tg_gallocr_alloc_graph(galloc, f->graph);
    CHECK_OK(st);
    if (st == TG_OK) {
        CHECK_OK(tg_oracle_check(f->graph, &lv, &snap, bufts, 1, &rep));
        CHECK_MSG(rep.n == 0, "%s: %d violations", path, rep.n);
        tg_oracle_report_print(&rep, 10);
    }
    size_t peak = tg_gallocr_get_buffer_size(galloc, 0);
    struct tg_plan_report plan_report = {0};
    CHECK_OK(tg_gallocr_get_report(galloc, 0, &plan_report));
    CHECK_MSG(lower <= peak && peak <= naive_total, "%s: lower bound %zu, peak %zu, naive %zu", path, lower, peak,
              naive_total);
    printf("%-44s align %3zu: %5d nodes, peak %10zu, lower bound %10zu (allocator's own %10zu), ratio %.3f, "
           "naive %11zu\n", path, alignment, f->graph->n_nodes, peak, lower, plan_report.lower_bound,
           lower ? (double)peak / (double)lower : 0.0, naive_total);
    *n_tensors += lv.n;
    tg_oracle_report_free(&rep);
    tg_oracle_liveness_free(&lv);
    tg_oracle_snapshot_free(&snap);
    tg_gallocr_free(galloc);
    tg_file_free(f);
}

int main(void) {
    const char *dir_path = "corpus/graphs";
    DIR *dir = opendir(dir_path);
    CHECK_MSG(dir != NULL, "cannot open %s (run from the repository root)", dir_path);
    if (!dir) return tg_test_finish();
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && n < 256) {
        size_t len = strlen(e->d_name);
        if (len > 3 && strcmp(e->d_name + len - 3, ".tg") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    CHECK(n > 0);
    long long n_tensors = 0;
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir_path, names[i]);
        check_file(path, 32, &n_tensors);  /* ggml's CPU alignment */
        check_file(path, 256, &n_tensors); /* a device-like alignment */
        free(names[i]);
    }
    printf("prop_corpus: %d graphs x 2 alignments, %lld tensors checked\n", n, n_tensors);
    return tg_test_finish();
}

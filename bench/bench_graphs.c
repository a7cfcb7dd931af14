/* Planner quality and speed on real graphs (`.tg`), per policy:
 *   peak, lower bound, ratio      of the plan (32-byte host buffer type, like ggml's CPU type)
 *   plan_us                       planning only (reserve_n_size), median
 *   alloc_graph_ns_per_node       bare graph allocator replay of a reserved plan, median / nodes
 *   reserve_us                    first reserve (plan + buffer allocation), median over fresh allocators
 * and the scheduler's per-token cost: after one reserve, tg_sched_reset +
 * tg_sched_alloc_graph on a freshly loaded copy of the graph (the copy is not
 * timed), median / nodes (rows with policy sched-ggml / sched-best: schedule
 * replay on, the default; sched-full-*: replay off, every pass every token).
 * Timings are medians over --reps runs; the human-readable mode shows min-max.
 * A scheduler sample is one token (tens of microseconds), so its rows take
 * SCHED_SAMPLES_PER_REP samples per rep: an 11-sample median of single
 * tokens moved by 20% from run to run.
 *
 * glibc's malloc returns the top of its heap to the kernel when more than a
 * threshold is free, and raises that threshold (and the mmap threshold) as
 * larger blocks are freed: the timings then depended on what ran before (the
 * first file's rows, or a change in some table's size, decided whether every
 * token's fresh graph copy re-faulted its pages).  main fixes both thresholds
 * high, so every row measures with a heap that keeps its pages. */
#define _POSIX_C_SOURCE 200809L
#include "tg-alloc.h"
#include "tg-cpu.h"
#include "tg-io.h"
#include "tg-sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define SCHED_SAMPLES_PER_REP 9
#define SCHED_WARMUP 3

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A benchmark step that must succeed: stop with the library's message. */
static void must(enum tg_status st, const char *path) {
    if (st != TG_OK) {
        fprintf(stderr, "bench_graphs: %s: %s\n", path, tg_last_error());
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stat3 {
    double median, min, max;
};

static struct stat3 summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (struct stat3){v[n / 2], v[0], v[n - 1]};
}

static struct tg_file *load(const char *path, tg_backend *cpu) {
    struct tg_file *f = NULL;
    if (tg_file_load(path, &f) != TG_OK) {
        fprintf(stderr, "bench_graphs: %s\n", tg_last_error());
        exit(2);
    }
    tg_backend *cpus[TG_IO_MAX_BACKENDS];
    for (int i = 0; i < f->n_backends; i++) cpus[i] = cpu;
    if (tg_file_bind_external(f, cpus, f->n_backends, true) != TG_OK) {
        fprintf(stderr, "bench_graphs: %s\n", tg_last_error());
        exit(2);
    }
    return f;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void bench_file(const char *path, enum tg_plan_policy policy, int reps, bool tsv, tg_backend *cpu) {
    const char *pname = policy == TG_PLAN_BEST ? "best" : "ggml";
    tg_buffer_type *buft = tg_cpu_buffer_type_aligned(32);
    struct tg_file *f = load(path, cpu);
    struct tg_graph *g = f->graph;
    double *t = malloc((size_t)reps * sizeof *t);

    /* first reserve, on fresh allocators (after one untimed warm-up: the first
     * file's first run otherwise pays for page faults and cold caches) */
    struct tg_plan_report rep = {0};
    {
        tg_gallocr *warm = tg_gallocr_new(buft);
        tg_gallocr_set_policy(warm, policy);
        must(tg_gallocr_reserve(warm, g), path);
        tg_gallocr_free(warm);
    }
    for (int r = 0; r < reps; r++) {
        tg_gallocr *ga = tg_gallocr_new(buft);
        tg_gallocr_set_policy(ga, policy);
        double t0 = now_ns();
        if (tg_gallocr_reserve(ga, g) != TG_OK) {
            fprintf(stderr, "bench_graphs: %s: %s\n", path, tg_last_error());
            exit(1);
        }
        t[r] = (now_ns() - t0) / 1e3;
        must(tg_gallocr_get_report(ga, 0, &rep), path);
        tg_gallocr_free(ga);
    }
    struct stat3 reserve = summarize(t, reps);

    /* planning only */
    tg_gallocr *ga = tg_gallocr_new(buft);
    tg_gallocr_set_policy(ga, policy);
    for (int r = 0; r < reps; r++) {
        size_t size;
        double t0 = now_ns();
        must(tg_gallocr_reserve_n_size(ga, g, NULL, NULL, &size), path);
        t[r] = (now_ns() - t0) / 1e3;
    }
    struct stat3 plan = summarize(t, reps);

    /* replay of a reserved plan */
    must(tg_gallocr_reserve(ga, g), path);
    must(tg_gallocr_alloc_graph(ga, g), path);
    int inner = 20;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int k = 0; k < inner; k++) must(tg_gallocr_alloc_graph(ga, g), path);
        t[r] = (now_ns() - t0) / inner / g->n_nodes;
    }
    struct stat3 replay = summarize(t, reps);
    tg_gallocr_free(ga);
    tg_file_free(f);

    /* scheduler per token: reset + alloc_graph of a fresh copy */
    tg_backend_cpu_set_plan_only(cpu, true);
    struct tg_file *first = load(path, cpu);
    tg_sched *s = tg_sched_new(&cpu, NULL, 1, (size_t)(first->graph->n_nodes + first->graph->n_leafs) * 2 + 64, false, false);
    tg_gallocr_set_policy(tg_sched_get_gallocr(s), policy);
    if (tg_sched_reserve(s, first->graph) != TG_OK) {
        fprintf(stderr, "bench_graphs: sched reserve %s: %s\n", path, tg_last_error());
        exit(1);
    }
    int n_nodes = first->graph->n_nodes;
    /* with schedule replay (the default), then with the full passes every token */
    struct stat3 sched = {0}, sched_full = {0};
    int n_replayed = 0;
    const int samples = reps * SCHED_SAMPLES_PER_REP;
    double *ts = malloc((size_t)samples * sizeof *ts);
    for (int pass = 0; pass < 2; pass++) {
        tg_sched_set_replay(s, pass == 0);
        /* the first tokens of a pass (the first file's above all) pay for
         * page faults and cold caches: SCHED_WARMUP untimed ones first */
        for (int r = -SCHED_WARMUP; r < samples; r++) {
            struct tg_file *fresh = load(path, cpu);
            double t0 = now_ns();
            tg_sched_reset(s);
            enum tg_status st = tg_sched_alloc_graph(s, fresh->graph);
            if (r >= 0) ts[r] = (now_ns() - t0) / n_nodes;
            if (st != TG_OK) {
                fprintf(stderr, "bench_graphs: sched alloc %s: %s\n", path, tg_last_error());
                exit(1);
            }
            n_replayed += r >= 0 && pass == 0 && tg_sched_last_was_replay(s);
            tg_sched_reset(s);
            tg_file_free(fresh);
        }
        if (pass == 0) sched = summarize(ts, samples);
        else sched_full = summarize(ts, samples);
    }
    free(ts);
    tg_sched_free(s);
    tg_file_free(first);
    tg_backend_cpu_set_plan_only(cpu, false);

    double ratio = rep.lower_bound ? (double)rep.peak / (double)rep.lower_bound : 0.0;
    if (tsv) {
        printf("%s\t%s\t%zu\t%zu\t%.3f\t%.1f\t%.1f\t%.1f\n", base_name(path), pname, rep.peak, rep.lower_bound, ratio,
               plan.median, replay.median, reserve.median);
        printf("%s\tsched-%s\t%zu\t%zu\t%.3f\t-\t%.1f\t-\n", base_name(path), pname, rep.peak, rep.lower_bound, ratio,
               sched.median);
        printf("%s\tsched-full-%s\t%zu\t%zu\t%.3f\t-\t%.1f\t-\n", base_name(path), pname, rep.peak, rep.lower_bound,
               ratio, sched_full.median);
    } else {
        printf("%-30s %-5s %5d nodes  peak %11zu  lb %11zu  ratio %.3f  plan %8.1f us [%.1f-%.1f]  "
               "replay %6.1f ns/node [%.1f-%.1f]  reserve %8.1f us  sched reset+alloc %6.1f ns/node [%.1f-%.1f] "
               "(%d/%d replayed; full passes %6.1f [%.1f-%.1f])\n",
               base_name(path), pname, g ? n_nodes : 0, rep.peak, rep.lower_bound, ratio, plan.median, plan.min,
               plan.max, replay.median, replay.min, replay.max, reserve.median, sched.median, sched.min, sched.max,
               n_replayed, reps * SCHED_SAMPLES_PER_REP, sched_full.median, sched_full.min, sched_full.max);
    }
    free(t);
}

int main(int argc, char **argv) {
    int reps = 11;
    bool tsv = false;
    int first_file = 1;
    for (; first_file < argc && argv[first_file][0] == '-'; first_file++) {
        if (strcmp(argv[first_file], "--tsv") == 0) tsv = true;
        else if (strcmp(argv[first_file], "--reps") == 0 && first_file + 1 < argc) reps = atoi(argv[++first_file]);
        else if (strcmp(argv[first_file], "--no-header") == 0) continue;
        else {
            fprintf(stderr, "usage: bench_graphs [--tsv] [--reps N] FILE.tg...\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
    tg_backend *cpu = tg_backend_cpu_new();
    for (int i = first_file; i < argc; i++) {
        bench_file(argv[i], TG_PLAN_GGML, reps, tsv, cpu);
        bench_file(argv[i], TG_PLAN_BEST, reps, tsv, cpu);
    }
    tg_backend_free(cpu);
    return 0;
}

/* Offline planner benchmark on dynamic storage allocation instances in the
 * MiniMalloc CSV format (header id,lower,upper,size; live over [lower, upper)).
 *
 * Usage: bench_intervals [--tsv] [--reps N] [--exact SECONDS] [--capacity-from-name] [--all] [--summary] [--threads N] FILE.csv...
 * Policies per file: greedy-size and best-fit-time (the two simple
 * strategies), best (the default of TG_PLAN_BEST: work-bounded), with --all
 * every single strategy, with --threads N (> 1) best again on N threads
 * ("best-Nt", its plan required to be best's), and with --exact the search
 * by the clock (one thread), for the
 * capacity in the file's name (NAME.CAPACITY.csv) with --capacity-from-name,
 * else for the lowest peak it finds.  Times are medians over --reps runs
 * (default 11; the exact search runs once); the human-readable mode also
 * shows the min-max spread.  --summary prints, per policy, the distribution
 * over the files instead: how many at the bound, the median, 90th percentile
 * and largest ratio to the lower bound, and the same of the time. */
#include "plan-offline.h"
#include "tg-oracle-intervals.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct instance {
    struct tg_live_block *blocks;
    int n;
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int read_csv(const char *path, struct instance *inst) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[512];
    int cap = 0, line_no = 0;
    inst->blocks = NULL;
    inst->n = 0;
    while (fgets(line, sizeof(line), f)) {
        line_no++;
        if (line_no == 1 && strncmp(line, "id,", 3) == 0) continue;
        if (line[0] == '\n' || line[0] == '\0') continue;
        char id[128];
        long long lower, upper;
        unsigned long long size;
        if (sscanf(line, "%127[^,],%lld,%lld,%llu", id, &lower, &upper, &size) != 4 || upper <= lower ||
            lower < 0 || upper > INT32_MAX) {
            fprintf(stderr, "%s:%d: expected id,lower,upper,size with 0 <= lower < upper\n", path, line_no);
            fclose(f);
            free(inst->blocks);
            return -1;
        }
        if (inst->n == cap) {
            cap = cap ? cap * 2 : 256;
            struct tg_live_block *grown = realloc(inst->blocks, sizeof(*grown) * (size_t)cap);
            if (grown == NULL) {
                fclose(f);
                free(inst->blocks);
                return -1;
            }
            inst->blocks = grown;
        }
        /* Half-open [lower, upper) is the inclusive step range [lower, upper - 1]. */
        inst->blocks[inst->n++] = (struct tg_live_block){(size_t)size, (int)lower, (int)(upper - 1), 0};
    }
    fclose(f);
    return 0;
}

static int compare_doubles(const void *pa, const void *pb) {
    const double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* The oracle's judgement of a plan (tg-oracle-intervals.h: its own sweep
 * for overlaps, the peak recomputed); false with the first violation
 * printed. */
static int plan_is_valid(const char *path, const char *policy, const struct tg_live_block *b, int n, size_t peak) {
    struct tg_interval *before = malloc(sizeof(*before) * (size_t)n), *after = malloc(sizeof(*after) * (size_t)n);
    struct tg_oracle_interval_report rep = {0};
    bool ran = before && after;
    for (int i = 0; ran && i < n; i++) {
        before[i] = (struct tg_interval){b[i].size, b[i].start, b[i].end + 1, 1, false, 0};
        after[i] = before[i];
        after[i].offset = b[i].offset;
    }
    if (ran) ran = tg_oracle_check_intervals(before, after, n, peak, 0, &rep);
    free(before);
    free(after);
    if (!ran) fprintf(stderr, "%s: policy %s: the oracle could not check the plan (out of memory)\n", path, policy);
    else if (rep.n > 0) fprintf(stderr, "%s: policy %s: %d violations, first: %s\n", path, policy, rep.n, rep.first);
    return ran && rep.n == 0;
}

enum policy { POLICY_GREEDY_SIZE, POLICY_BEST_FIT_TIME, POLICY_BEST, POLICY_EXACT, POLICY_SINGLE };

/* The capacity in a MiniMalloc file name, NAME.CAPACITY.csv (0: none). */
static size_t capacity_from_name(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot || strcmp(dot, ".csv") != 0) return 0;
    const char *begin = dot;
    while (begin > path && begin[-1] >= '0' && begin[-1] <= '9') begin--;
    if (begin == dot || begin == path || begin[-1] != '.') return 0;
    return (size_t)strtoull(begin, NULL, 10);
}

static size_t run_policy(struct tg_live_block *blocks, int n, enum policy p, int single, int threads, double exact_s,
                         size_t capacity) {
    struct tg_offline_options opts = {.alignment = 1, .threads = threads};
    switch (p) {
    case POLICY_GREEDY_SIZE: return tg_plan_offline_single(blocks, n, NULL, TG_OFFLINE_GREEDY_SIZE);
    case POLICY_BEST_FIT_TIME: return tg_plan_offline_single(blocks, n, NULL, TG_OFFLINE_BEST_FIT_TIME);
    case POLICY_SINGLE: return tg_plan_offline_single(blocks, n, NULL, (enum tg_offline_strategy)single);
    case POLICY_EXACT: {
        opts.exact = true;
        opts.exact_seconds = exact_s;
        opts.capacity = capacity;
        size_t peak = 0;
        (void)tg_plan_offline_fit(blocks, n, &opts, &peak); /* the peak says whether it fits */
        return peak;
    }
    case POLICY_BEST: default: return tg_plan_offline(blocks, n, &opts);
    }
}

struct bench_run {
    enum policy p;
    int single;
    const char *name;
    int threads; /* the planner's */
};

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* --summary: per policy, the distribution over the files of the ratio to the
 * lower bound and of the planning time. */
struct summary {
    const char *name;
    int n, at_bound;
    double *ratio, *ms;
};

static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof(double), compare_doubles);
    const int k = (int)(q * (n - 1) + 0.5);
    return v[k];
}

static void print_summary(struct summary *s, int tsv) {
    if (s->n == 0) return;
    const double r50 = quantile(s->ratio, s->n, 0.5), r90 = quantile(s->ratio, s->n, 0.9),
                 rmax = quantile(s->ratio, s->n, 1.0);
    const double t50 = quantile(s->ms, s->n, 0.5), t90 = quantile(s->ms, s->n, 0.9), tmax = quantile(s->ms, s->n, 1.0);
    if (tsv)
        printf("%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.2f\t%.2f\t%.2f\n", s->name, s->n, s->at_bound, r50, r90, rmax, t50, t90,
               tmax);
    else
        printf("%-16s %5d %6d %8.4f %8.4f %8.4f %9.2f %9.2f %9.2f\n", s->name, s->n, s->at_bound, r50, r90, rmax, t50, t90,
               tmax);
}

int main(int argc, char **argv) {
    int tsv = 0, reps = 11, all = 0, summary = 0, named_capacity = 0;
    double exact_s = 0;
    int threads = 1;
    char threads_name[32];
    int first_file = argc;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--tsv") == 0) tsv = 1;
        else if (strcmp(argv[a], "--all") == 0) all = 1;
        else if (strcmp(argv[a], "--summary") == 0) summary = 1;
        else if (strcmp(argv[a], "--capacity-from-name") == 0) named_capacity = 1;
        else if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) reps = atoi(argv[++a]);
        else if (strcmp(argv[a], "--exact") == 0 && a + 1 < argc) exact_s = atof(argv[++a]);
        else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc) threads = atoi(argv[++a]);
        else if (argv[a][0] == '-') {
            fprintf(stderr, "usage: %s [--tsv] [--reps N] [--exact SECONDS] [--capacity-from-name] [--all] [--summary] [--threads N] FILE.csv...\n", argv[0]);
            return 2;
        } else {
            first_file = a;
            break;
        }
    }
    if (first_file >= argc) {
        fprintf(stderr, "usage: %s [--tsv] [--reps N] [--exact SECONDS] [--capacity-from-name] [--all] [--summary] [--threads N] FILE.csv...\n", argv[0]);
        return 2;
    }
    if (reps < 1) reps = 1;
    snprintf(threads_name, sizeof(threads_name), "best-%dt", threads); /* --threads N > 1: best again on N threads */
    struct summary sums[TG_OFFLINE_N_STRATEGIES + 3];
    int n_sums = 0;
    const int n_files = argc - first_file;
    if (summary) {
        if (tsv) printf("policy\tfiles\tat_bound\tratio_median\tratio_p90\tratio_max\tms_median\tms_p90\tms_max\n");
        else printf("%-16s %5s %6s %8s %8s %8s %9s %9s %9s\n", "policy", "files", "at_lb", "r_median", "r_p90", "r_max",
                    "ms_median", "ms_p90", "ms_max");
    } else if (tsv) printf("case\tpolicy\tpeak\tlower_bound\tratio\tplan_us\talloc_graph_ns_per_node\treserve_us\n");
    else printf("%-16s %-16s %10s %10s %7s %12s %22s\n", "case", "policy", "peak", "lower", "ratio", "plan_us",
                "spread_us(min-max)");
    int status = 0;
    for (int a = first_file; a < argc; a++) {
        struct instance inst;
        if (read_csv(argv[a], &inst) != 0) {
            status = 1;
            continue;
        }
        const size_t lower = tg_live_lower_bound(inst.blocks, inst.n);
        struct tg_live_block *best_plan = calloc((size_t)inst.n, sizeof(*best_plan));
        if (!best_plan) {
            fprintf(stderr, "%s: out of memory\n", argv[a]);
            return 1;
        }
        struct bench_run runs[TG_OFFLINE_N_STRATEGIES + 3];
        int n_runs = 0;
        runs[n_runs++] = (struct bench_run){POLICY_GREEDY_SIZE, 0, "greedy-size", 1};
        runs[n_runs++] = (struct bench_run){POLICY_BEST_FIT_TIME, 0, "best-fit-time", 1};
        if (all)
            for (int s = 0; s < TG_OFFLINE_N_STRATEGIES; s++)
                if (s != TG_OFFLINE_GREEDY_SIZE && s != TG_OFFLINE_BEST_FIT_TIME)
                    runs[n_runs++] = (struct bench_run){POLICY_SINGLE, s,
                                                           tg_offline_strategy_name((enum tg_offline_strategy)s), 1};
        runs[n_runs++] = (struct bench_run){POLICY_BEST, 0, "best", 1};
        if (threads > 1) runs[n_runs++] = (struct bench_run){POLICY_BEST, 0, threads_name, threads};
        if (exact_s > 0) runs[n_runs++] = (struct bench_run){POLICY_EXACT, 0, "exact", 1};
        for (int r = 0; r < n_runs; r++) {
            /* The exact search runs to its time limit when it cannot prove the
             * bound, so it is run once. */
            const int my_reps = runs[r].p == POLICY_EXACT ? 1 : reps;
            double *times = malloc(sizeof(double) * (size_t)my_reps);
            struct tg_live_block *work = malloc(sizeof(*work) * (size_t)inst.n);
            if (!times || !work) {
                fprintf(stderr, "%s: out of memory\n", argv[a]);
                exit(1);
            }
            size_t peak = 0;
            for (int k = 0; k < my_reps; k++) {
                memcpy(work, inst.blocks, sizeof(*work) * (size_t)inst.n);
                const double t0 = now_us();
                peak = run_policy(work, inst.n, runs[r].p, runs[r].single, runs[r].threads, exact_s,
                                  named_capacity ? capacity_from_name(argv[a]) : 0);
                times[k] = now_us() - t0;
            }
            if (!plan_is_valid(argv[a], runs[r].name, work, inst.n, peak)) status = 1;
            if (runs[r].p == POLICY_BEST && runs[r].threads > 1 && memcmp(work, best_plan, sizeof(*work) * (size_t)inst.n) != 0) {
                fprintf(stderr, "%s: %s planned other offsets than best (one thread)\n", argv[a], runs[r].name);
                status = 1;
            }
            if (runs[r].p == POLICY_BEST && runs[r].threads <= 1) memcpy(best_plan, work, sizeof(*work) * (size_t)inst.n);
            qsort(times, (size_t)my_reps, sizeof(double), compare_doubles);
            const double median = times[my_reps / 2];
            const double ratio = lower ? (double)peak / (double)lower : 1.0;
            if (summary) {
                int k = 0;
                while (k < n_sums && strcmp(sums[k].name, runs[r].name) != 0) k++;
                if (k == n_sums) {
                    sums[n_sums++] = (struct summary){runs[r].name, 0, 0, malloc(sizeof(double) * (size_t)n_files),
                                                      malloc(sizeof(double) * (size_t)n_files)};
                }
                sums[k].ratio[sums[k].n] = ratio;
                sums[k].ms[sums[k].n++] = median / 1e3;
                sums[k].at_bound += peak <= lower;
            } else if (tsv)
                printf("%s\t%s\t%zu\t%zu\t%.3f\t%.0f\t-\t-\n", base_name(argv[a]), runs[r].name, peak, lower, ratio,
                       median);
            else
                printf("%-16s %-16s %10zu %10zu %7.3f %12.0f %10.0f-%-10.0f\n", base_name(argv[a]), runs[r].name,
                       peak, lower, ratio, median, times[0], times[my_reps - 1]);
            fflush(stdout);
            free(times);
            free(work);
        }
        free(inst.blocks);
        free(best_plan);
    }
    for (int k = 0; k < n_sums; k++) {
        print_summary(&sums[k], tsv);
        free(sums[k].ratio);
        free(sums[k].ms);
    }
    return status;
}

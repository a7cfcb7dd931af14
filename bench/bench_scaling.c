/* How each `tgsched` verb grows with the graph: generates graphs of 1k to 1M
 * nodes in two shapes, runs each verb (and each planner policy) on them as a
 * user would, as a child process, and reports CPU time (user + system: on a
 * shared machine it moves much less than wall time, which is printed too) and
 * peak memory (max RSS) per node; draws both against the node count as an SVG
 * plot.
 *
 *   bench_scaling --tgsched PATH --dir DIR [--max-nodes N] [--reps N] [--svg OUT.svg]
 *
 * Shapes:
 *   chain     x -> mul -> mul -> ... : every node reads the one before, so a
 *             planner reuses one address for the whole graph
 *   residual  blocks of rms_norm, mul (norm weight), mul_mat (8x8 weight), add
 *             (the residual stream): four nodes and two weights per block, one
 *             block per layer (blk.K.*), so --layers-on splits it across devices
 * Times are medians of --reps runs (by CPU time; one run for a million nodes).
 * Prints one tab-separated row per shape, size and case. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 8
#define MAX_ARGS 12

struct bench_case {
    const char *name;
    const char *args[MAX_ARGS]; /* verb and options; "@LAYERS" becomes gpu0:<half the layers> */
};

static const struct bench_case cases[] = {
    {"info", {"info"}},
    {"plan best", {"plan", "--plan", "best"}},
    {"plan ggml", {"plan", "--plan", "ggml"}},
    {"check best", {"check", "--plan", "best"}},
    {"check ggml", {"check", "--plan", "ggml"}},
    {"check split", {"check", "--backends", "sim:gpu0,cpu", "--layers-on", "@LAYERS"}},
    {"run", {"run"}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const char *const shapes[] = {"chain", "residual"};
#define N_SHAPES 2

struct sample {
    double seconds;     /* wall */
    double cpu_seconds; /* user + system */
    long max_rss_kib;
    int exit_status;
};

struct row {
    int shape, n_nodes, c;
    struct sample s;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Writes the graph of `shape` with about n_nodes nodes; returns its layers. */
static int write_graph(const char *path, int shape, int n_nodes) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_scaling: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    fprintf(f, "tgraph 1\nmeta builder=bench_scaling_%s\n", shapes[shape]);
    int layers = 0;
    if (shape == 0) {
        fprintf(f, "leaf 0 f32 64 1 1 1 none flags=input name=x\nleaf 1 f32 64 1 1 1 none buf=weights name=w\n");
        for (int i = 0; i < n_nodes; i++) {
            fprintf(f, "node %d f32 64 1 1 1 mul src=%d,1%s name=h%d\n", i + 2, i ? i + 1 : 0,
                    i == n_nodes - 1 ? " flags=output" : "", i);
        }
    } else {
        layers = n_nodes / 4;
        int id = 0, x = id++;
        fprintf(f, "leaf %d f32 8 1 1 1 none flags=input name=inp\n", x);
        for (int k = 0; k < layers; k++) {
            int norm_w = id++, w = id++;
            fprintf(f, "leaf %d f32 8 1 1 1 none buf=weights name=blk.%d.norm.weight\n", norm_w, k);
            fprintf(f, "leaf %d f32 8 8 1 1 none buf=weights name=blk.%d.w.weight\n", w, k);
            int n1 = id++, n2 = id++, n3 = id++, out = id++;
            fprintf(f, "node %d f32 8 1 1 1 rms_norm src=%d params=0x3727c5ac name=norm-%d\n", n1, x, k);
            fprintf(f, "node %d f32 8 1 1 1 mul src=%d,%d name=normed-%d\n", n2, n1, norm_w, k);
            fprintf(f, "node %d f32 8 1 1 1 mul_mat src=%d,%d name=proj-%d\n", n3, w, n2, k);
            fprintf(f, "node %d f32 8 1 1 1 add src=%d,%d%s name=res-%d\n", out, x, n3,
                    k == layers - 1 ? " flags=output" : "", k);
            x = out;
        }
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "bench_scaling: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return layers;
}

/* Runs tgsched with the case's arguments on path, output discarded. */
static struct sample run_once(const char *tgsched, const struct bench_case *c, const char *path, int layers) {
    char layers_arg[32];
    snprintf(layers_arg, sizeof layers_arg, "gpu0:%d", layers / 2 > 0 ? layers / 2 : 1);
    char *argv[MAX_ARGS + 3];
    int n = 0;
    argv[n++] = (char *)tgsched;
    for (int i = 0; i < MAX_ARGS && c->args[i]; i++) {
        argv[n++] = strcmp(c->args[i], "@LAYERS") == 0 ? layers_arg : (char *)c->args[i];
    }
    argv[n++] = (char *)path;
    argv[n] = NULL;
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execv(tgsched, argv);
        _exit(127);
    }
    struct sample s = {0};
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) {
        fprintf(stderr, "bench_scaling: cannot run %s: %s\n", tgsched, strerror(errno));
        exit(2);
    }
    s.seconds = now_s() - t0;
    s.cpu_seconds = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
                    1e-6 * (double)ru.ru_stime.tv_usec;
    s.max_rss_kib = ru.ru_maxrss;
    s.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return s;
}

static int cmp_sample(const void *a, const void *b) {
    double x = ((const struct sample *)a)->cpu_seconds, y = ((const struct sample *)b)->cpu_seconds;
    return (x > y) - (x < y);
}

/* ---- the plot: per-node time and memory against nodes, log-log ---- */

static const char *const case_colours[N_CASES] = {"#9c9c9c", "#4e79a7", "#76b7b2", "#e15759",
                                                  "#f28e2b", "#b07aa1", "#59a14f"};

struct axis {
    double lo, hi; /* log10 of the data range */
};

static double clamp_log(double v) { return log10(v > 1e-12 ? v : 1e-12); }

static void plot_panel(FILE *f, const struct row *rows, int n_rows, double x0, const char *title, bool memory,
                       int min_nodes, int max_nodes) {
    const double w = 500, h = 330, top = 84, left = x0 + 80;
    struct axis ax = {floor(log10(min_nodes)), ceil(log10(max_nodes))}, ay = {1e9, -1e9};
    for (int i = 0; i < n_rows; i++) {
        double v = memory ? rows[i].s.max_rss_kib * 1024.0 / rows[i].n_nodes : rows[i].s.cpu_seconds * 1e6 / rows[i].n_nodes;
        if (clamp_log(v) < ay.lo) ay.lo = clamp_log(v);
        if (clamp_log(v) > ay.hi) ay.hi = clamp_log(v);
    }
    ay.lo = floor(ay.lo);
    ay.hi = ceil(ay.hi);
    if (ay.hi <= ay.lo) ay.hi = ay.lo + 1;
    if (ax.hi <= ax.lo) ax.hi = ax.lo + 1;
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", left, top - 10, title);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#444\"/>\n", left,
            top, w, h);
    for (double e = ax.lo; e <= ax.hi + 1e-9; e += 1) {
        double x = left + (e - ax.lo) / (ax.hi - ax.lo) * w;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", x, top, x, top + h);
        double n = pow(10, e);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">%.0f%s</text>\n", x, top + h + 16,
                n >= 1e6 ? n / 1e6 : n >= 1e3 ? n / 1e3 : n, n >= 1e6 ? "M" : n >= 1e3 ? "k" : "");
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\">nodes in the graph</text>\n",
            left + w / 2, top + h + 34);
    for (double e = ay.lo; e <= ay.hi + 1e-9; e += 1) {
        double y = top + h - (e - ay.lo) / (ay.hi - ay.lo) * h;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, y, left + w, y);
        if (memory) {
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g B</text>\n", left - 6, y + 4,
                    pow(10, e));
        } else {
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g us</text>\n", left - 6,
                    y + 4, pow(10, e));
        }
    }
    if (!memory) { /* the goal: 1 s per 100k nodes = 10 us per node */
        double y = top + h - (1.0 - ay.lo) / (ay.hi - ay.lo) * h;
        if (y >= top && y <= top + h) {
            fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n"
                       "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" fill=\"#c00\" text-anchor=\"end\">goal: 1 s per "
                       "100k nodes</text>\n", left, y, left + w, y, left + w - 4, y - 4);
        }
    }
    for (int shape = 0; shape < N_SHAPES; shape++) {
        for (int c = 0; c < N_CASES; c++) {
            int n = 0;
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", case_colours[c],
                    shape ? " stroke-dasharray=\"5,3\"" : "");
            for (int i = 0; i < n_rows; i++) {
                if (rows[i].shape != shape || rows[i].c != c || rows[i].s.exit_status != 0) continue;
                double v = memory ? rows[i].s.max_rss_kib * 1024.0 / rows[i].n_nodes
                                  : rows[i].s.cpu_seconds * 1e6 / rows[i].n_nodes;
                double x = left + (log10(rows[i].n_nodes) - ax.lo) / (ax.hi - ax.lo) * w;
                double y = top + h - (clamp_log(v) - ay.lo) / (ay.hi - ay.lo) * h;
                fprintf(f, "%s%.1f,%.1f", n++ ? " " : "", x, y);
            }
            fputs("\"/>\n", f);
        }
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 %.0f %.0f)\">"
               "%s</text>\n", x0 + 14, top + h / 2, x0 + 14, top + h / 2,
            memory ? "peak memory (max RSS) per node" : "CPU time (user + system) per node");
}

static void write_svg(const char *path, const struct row *rows, int n_rows, int min_nodes, int max_nodes,
                      const char *machine) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_scaling: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1240\" height=\"580\" font-family=\"DejaVu Sans, "
               "sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"20\" y=\"24\" font-size=\"15\" font-weight=\"bold\">tgsched verbs on generated graphs "
               "(Release): flat lines grow linearly</text>\n");
    fprintf(f, "<text x=\"20\" y=\"42\" font-size=\"11\">%s; bench/scaling</text>\n", machine);
    plot_panel(f, rows, n_rows, 0, "time per node", false, min_nodes, max_nodes);
    plot_panel(f, rows, n_rows, 620, "memory per node", true, min_nodes, max_nodes);
    double lx = 80, ly = 508;
    for (int c = 0; c < N_CASES; c++) {
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s</text>\n", lx, ly - 4, lx + 22, ly - 4,
                case_colours[c], lx + 28, ly, cases[c].name);
        lx += 40 + 7.0 * (double)strlen(cases[c].name);
    }
    fprintf(f, "<line x1=\"80\" y1=\"536\" x2=\"102\" y2=\"536\" stroke=\"#444\" stroke-width=\"2\"/>"
               "<text x=\"108\" y=\"540\" font-size=\"12\">chain graph</text>\n"
               "<line x1=\"220\" y1=\"536\" x2=\"242\" y2=\"536\" stroke=\"#444\" stroke-width=\"2\" "
               "stroke-dasharray=\"5,3\"/><text x=\"248\" y=\"540\" font-size=\"12\">residual graph (4 nodes per "
               "layer)</text>\n</svg>\n");
    fclose(f);
}

static void usage(void) {
    fprintf(stderr, "usage: bench_scaling --tgsched PATH --dir DIR [--max-nodes N] [--reps N] [--svg OUT.svg] "
                    "[--machine TEXT]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *tgsched = NULL, *dir = NULL, *svg = NULL, *machine = "";
    int max_nodes = 1000000, reps = 3;
    for (int i = 1; i < argc; i += 2) { /* OPTION VALUE pairs */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (strcmp(argv[i], "--tgsched") == 0) tgsched = v;
        else if (strcmp(argv[i], "--dir") == 0) dir = v;
        else if (strcmp(argv[i], "--svg") == 0) svg = v;
        else if (strcmp(argv[i], "--machine") == 0) machine = v;
        else if (strcmp(argv[i], "--max-nodes") == 0) max_nodes = atoi(v);
        else if (strcmp(argv[i], "--reps") == 0) reps = atoi(v);
        else usage();
    }
    if (!tgsched || !dir || max_nodes < 1000 || reps < 1) usage();
    int sizes[MAX_SIZES], n_sizes = 0;
    for (int n = 1000; n <= max_nodes && n_sizes < MAX_SIZES; n *= 10) sizes[n_sizes++] = n;
    struct row *rows = calloc((size_t)N_SHAPES * MAX_SIZES * N_CASES, sizeof *rows);
    if (!rows) return 2;
    int n_rows = 0, failures = 0;
    printf("shape\tnodes\tcase\tcpu_seconds\tcpu_us_per_node\twall_seconds\tmax_rss_mib\tbytes_per_node\texit\n");
    for (int shape = 0; shape < N_SHAPES; shape++) {
        for (int k = 0; k < n_sizes; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s-%d.tg", dir, shapes[shape], sizes[k]);
            int layers = write_graph(path, shape, sizes[k]);
            int n_nodes = shape == 0 ? sizes[k] : layers * 4;
            for (int c = 0; c < N_CASES; c++) {
                if (layers == 0 && strcmp(cases[c].name, "check split") == 0) continue; /* no layers to place */
                struct sample s[16];
                int r_max = sizes[k] >= 1000000 ? 1 : reps > 16 ? 16 : reps;
                for (int r = 0; r < r_max; r++) s[r] = run_once(tgsched, &cases[c], path, layers);
                qsort(s, (size_t)r_max, sizeof s[0], cmp_sample);
                struct row *row = &rows[n_rows++];
                *row = (struct row){shape, n_nodes, c, s[r_max / 2]};
                failures += row->s.exit_status != 0;
                printf("%s\t%d\t%s\t%.3f\t%.2f\t%.3f\t%.1f\t%.0f\t%d\n", shapes[shape], n_nodes, cases[c].name,
                       row->s.cpu_seconds, row->s.cpu_seconds * 1e6 / n_nodes, row->s.seconds,
                       row->s.max_rss_kib / 1024.0, row->s.max_rss_kib * 1024.0 / n_nodes, row->s.exit_status);
                fflush(stdout);
            }
            remove(path);
        }
    }
    if (svg) write_svg(svg, rows, n_rows, sizes[0], sizes[n_sizes - 1], machine);
    free(rows);
    if (failures) fprintf(stderr, "bench_scaling: %d runs exited non-zero (exit column)\n", failures);
    return failures ? 1 : 0;
}

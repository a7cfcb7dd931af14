/* Hard interval instances with a known optimum, in the MiniMalloc CSV format
 * (header id,lower,upper,size; live over [lower, upper)), to choose the
 * offline planner's budgets on one set and report on another.
 *
 * Usage: gen_intervals --seed S [--count N] [--out DIR] [--plan]
 * Writes DIR/gen-S.csv, DIR/gen-(S+1).csv, ... (N files, default 1; DIR
 * default "."); a seed always gives the same file.  --plan adds the column
 * offset: where each block was cut from the strip, a plan at the optimum that
 * `tgsched check FILE.csv` verifies (without it the file is a problem to
 * plan; with it every block is pre-placed).
 *
 * How: a strip 1 MiB high (the capacity) and 1,048,576 steps long is cut into
 * rectangles by guillotine cuts, each rectangle a block (its steps the
 * lifetime, its bytes the size).  The rectangles tile the strip, so they fit
 * under the capacity where they were cut, and every step is covered to the
 * capacity, so no plan is lower: the optimum is the capacity.  Then some
 * rectangles are dropped, never those live at one chosen step, so the lower
 * bound and the optimum stay the capacity while the rest gets slack, as in
 * MiniMalloc's challenging set.
 *
 * Two families, like that set: "mixed" (A-E, I-K: cut either way with even
 * odds until a piece is small, so thin slabs live long and tall ones briefly,
 * sizes and lifetimes over three orders of magnitude; up to 15% dropped) and
 * "even" (F-H: sizes and lifetimes within a factor of four; 30-45% dropped).
 * Each seed draws the family, its ranges and the share dropped, and keeps the
 * instance when its block count lies in 120..480 (the challenging set has
 * 154-454; its mixed instances 154-215 and 374-454). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    UNIT = 1024,            /* sizes and steps are multiples of it, as in the challenging set */
    CAPACITY_UNITS = 1024,  /* the strip is 1 MiB high... */
    SPAN_UNITS = 1024,      /* ...and 1,048,576 steps long */
    MIN_BLOCKS = 120,
    MAX_BLOCKS = 480,
    MAX_RECTS = 8192,
};

struct rect {
    int t0, t1; /* steps [t0, t1), in units */
    int y0, h;  /* bytes [y0, y0 + h), in units */
};

static uint64_t rng_state;

static uint64_t next_u64(void) { /* splitmix64: a seed gives one stream on every platform */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform01(void) { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

/* An integer in [lo, hi]. */
static int uniform_int(int lo, int hi) { return lo + (int)(next_u64() % (uint64_t)(hi - lo + 1)); }

struct family {
    bool even;
    int min_h, max_h; /* even: the range of heights (sizes), units */
    int min_w, max_w; /* even: the range of widths (lifetimes), units */
    double piece_area; /* mixed: a piece larger than about this many square units is cut */
    double drop;       /* share of rectangles dropped (not those live at the kept step) */
};

static struct family draw_family(void) {
    struct family f = {0};
    f.even = uniform01() < 0.3;
    if (f.even) {
        f.min_h = uniform_int(24, 40);
        f.max_h = f.min_h * uniform_int(3, 4);
        f.min_w = uniform_int(12, 20);
        f.max_w = f.min_w * uniform_int(3, 4);
        f.drop = 0.3 + 0.15 * uniform01();
    } else {
        /* The strip ends in about twice as many pieces as it has piece
         * areas (a cut at a uniform place leaves many pieces well below
         * one), so 60-250 areas give 120-480 blocks, the whole range kept,
         * as the challenging set's mixed instances span it. */
        f.piece_area = (double)CAPACITY_UNITS * SPAN_UNITS / uniform_int(60, 250);
        f.drop = 0.15 * uniform01();
    }
    return f;
}

/* Whether piece r is cut further, and which way. */
static bool cut_again(const struct family *f, struct rect r, bool *across_time) {
    const int w = r.t1 - r.t0;
    if (f->even) {
        const bool cut_w = w > f->max_w, cut_h = r.h > f->max_h;
        *across_time = cut_w && (!cut_h || uniform01() < 0.5);
        return cut_w || cut_h;
    }
    const double area = (double)w * r.h;
    *across_time = r.h < 2 || (w >= 2 && uniform01() < 0.5);
    return area > f->piece_area * (0.5 + uniform01()) && (w >= 2 || r.h >= 2);
}

/* Guillotine cuts: a piece is cut in two, across time or across memory, at a
 * uniform position.  Mixed: either way with even odds, until the piece is
 * about piece_area or smaller, so thin slabs live long and tall ones
 * briefly, as in the challenging set.  Even: a side longer than its range
 * allows is cut, both halves kept within range, until both sides are in range.
 * Returns the new count, or -1 when there are too many. */
static int cut_pieces(const struct family *f, struct rect r, struct rect *rects, int n) {
    bool across_time;
    if (!cut_again(f, r, &across_time)) {
        if (n == MAX_RECTS) return -1;
        rects[n] = r;
        return n + 1;
    }
    struct rect a = r, b = r;
    const int w = r.t1 - r.t0;
    if (across_time) {
        const int margin = f->even && w >= 2 * f->min_w ? f->min_w : 1;
        const int at = r.t0 + uniform_int(margin, w - margin);
        a.t1 = at;
        b.t0 = at;
    } else {
        const int margin = f->even && r.h >= 2 * f->min_h ? f->min_h : 1;
        const int at = uniform_int(margin, r.h - margin);
        a.h = at;
        b.y0 = r.y0 + at;
        b.h = r.h - at;
    }
    n = cut_pieces(f, a, rects, n);
    return n < 0 ? n : cut_pieces(f, b, rects, n);
}

/* Drops a share of the rectangles not live at one step, shuffles the rest;
 * returns how many are kept. */
static int drop_some(const struct family *f, struct rect *rects, int n) {
    const int kept_step = uniform_int(0, SPAN_UNITS - 1);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const bool at_kept_step = rects[i].t0 <= kept_step && kept_step < rects[i].t1;
        if (at_kept_step || uniform01() >= f->drop) rects[kept++] = rects[i];
    }
    for (int i = kept - 1; i > 0; i--) { /* the order of the file says nothing of the cut */
        const int j = (int)(next_u64() % (uint64_t)(i + 1));
        const struct rect t = rects[i];
        rects[i] = rects[j];
        rects[j] = t;
    }
    return kept;
}

static int write_instance(const char *dir, unsigned long long seed, bool with_plan) {
    static struct rect rects[MAX_RECTS];
    rng_state = seed * 0xD1B54A32D192ED03ULL + 1;
    int n = 0;
    for (int attempt = 0;; attempt++) {
        const struct family f = draw_family();
        n = cut_pieces(&f, (struct rect){0, SPAN_UNITS, 0, CAPACITY_UNITS}, rects, 0);
        if (n < 0) continue;
        n = drop_some(&f, rects, n);
        if (n >= MIN_BLOCKS && n <= MAX_BLOCKS) break;
        if (attempt > 10000) {
            fprintf(stderr, "gen_intervals: seed %llu: no instance of %d-%d blocks\n", seed, MIN_BLOCKS, MAX_BLOCKS);
            return -1;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/gen-%llu.csv", dir, seed);
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "gen_intervals: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(out, with_plan ? "id,lower,upper,size,offset\n" : "id,lower,upper,size\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%d,%d,%d,%d", i, rects[i].t0 * UNIT, rects[i].t1 * UNIT, rects[i].h * UNIT);
        if (with_plan) fprintf(out, ",%d", rects[i].y0 * UNIT);
        fputc('\n', out);
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "gen_intervals: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    unsigned long long seed = 0;
    long count = 1;
    const char *dir = ".";
    bool have_seed = false, with_plan = false;
    for (int a = 1; a < argc; a++) {
        char *end = NULL;
        if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc) {
            seed = strtoull(argv[++a], &end, 10);
            have_seed = *end == '\0';
        } else if (strcmp(argv[a], "--count") == 0 && a + 1 < argc) {
            count = strtol(argv[++a], &end, 10);
            if (*end != '\0' || count < 1) count = -1;
        } else if (strcmp(argv[a], "--out") == 0 && a + 1 < argc) {
            dir = argv[++a];
        } else if (strcmp(argv[a], "--plan") == 0) {
            with_plan = true;
        } else {
            count = -1;
        }
    }
    if (!have_seed || count < 1) {
        fprintf(stderr, "usage: %s --seed S [--count N] [--out DIR] [--plan]\n", argv[0]);
        return 2;
    }
    for (long k = 0; k < count; k++)
        if (write_instance(dir, seed + (unsigned long long)k, with_plan) != 0) return 1;
    return 0;
}

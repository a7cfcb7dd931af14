/* Interval files (see plan_intervals.h).
 *
 * The format is MiniMalloc's: a header naming the columns, then one buffer a
 * line.  Columns: id (or buffer, buffer_id; each buffer its own), lower (or
 * start, begin) and upper: the buffer is live over [lower, upper); "end"
 * instead of upper is inclusive, as MiniMalloc reads it; size; optionally
 * alignment (the offset is a multiple of it) and offset (given: the buffer
 * is pre-placed there, a multiple of its alignment; empty: it is planned).
 * A file written with --out has every offset, so check reads it back as a
 * plan to verify. */
#include "plan_intervals.h"

#include "tg-oracle-intervals.h"
#include "tg-plan.h"
#include "tgsched.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum column { COL_ID, COL_LOWER, COL_UPPER, COL_END, COL_SIZE, COL_ALIGNMENT, COL_OFFSET, N_COLUMNS };

struct interval_file {
    int n, cap;
    struct tg_interval *buffers;
    char **ids; /* as the file spells them, whole: the plan written names every buffer so */
    int *lines; /* the line each buffer was read from (the duplicate id message names both) */
    bool has_alignment;
    int n_fixed;
};

struct interval_options {
    const char *path, *out_path;
    size_t capacity;
    double seconds;
    int threads; /* 0: every online core */
    bool json;
};

static void interval_help(FILE *out, bool check) {
    fprintf(out,
            "usage: tgsched %s FILE.csv [--capacity BYTES] [--exact SECONDS] [--threads N] [--out PLAN.csv] [--json]\n\n"
            "Plans buffers with known lifetimes (MiniMalloc's CSV: id,lower,upper,size, live over\n"
            "[lower, upper); optional columns alignment and offset, a given offset pre-placing the\n"
            "buffer there) so that buffers live at the same time never share a byte, and prints the\n"
            "peak against the lower bound (the most bytes live at one step).%s\n\n"
            "  --capacity BYTES   find a plan whose peak is at most BYTES, or say that none exists\n"
            "  --exact SECONDS    search by the clock for up to SECONDS (default: bounded by work,\n"
            "                     the same plan on every machine)\n"
            "  --threads N        threads the searches take turns on (default: every online core; the\n"
            "                     plan is the same for every count)\n"
            "  --out PLAN.csv     write the plan: the input's columns and every buffer's offset\n"
            "  --json             one JSON document on stdout (docs/json.md)\n\n"
            "exit status: %s; 2 bad input or arguments; 3 out of resources\n",
            check ? "check" : "plan",
            check ? "  Then the oracle judges the plan: no overlap, alignments, pre-placed\n"
                    "buffers kept, the peak, the capacity."
                  : "",
            check ? "0 the plan fits and is legal; 1 a violation, or no plan fits the capacity"
                  : "0 planned (under the capacity, when one is given); 1 no plan fits the capacity");
}

const char *plan_intervals_path(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const size_t len = strlen(argv[i]);
        const bool after_value_option = strcmp(argv[i - 1], "--out") == 0 || strcmp(argv[i - 1], "--svg") == 0;
        if (argv[i][0] != '-' && !after_value_option && len > 4 && strcmp(argv[i] + len - 4, ".csv") == 0)
            return argv[i];
    }
    return NULL;
}

/* ---- reading ---- */

static int column_of(const char *name) {
    static const struct {
        const char *name;
        enum column column;
    } names[] = {{"id", COL_ID},         {"buffer", COL_ID},       {"buffer_id", COL_ID},  {"lower", COL_LOWER},
                 {"start", COL_LOWER},   {"begin", COL_LOWER},     {"upper", COL_UPPER},   {"end", COL_END},
                 {"size", COL_SIZE},     {"alignment", COL_ALIGNMENT}, {"offset", COL_OFFSET}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strcmp(name, names[k].name) == 0) return (int)names[k].column;
    return -1;
}

/* Splits line in place at commas; returns the field count, every field
 * counted (the message names it), though only the first max are kept. */
static int split_fields(char *line, char **fields, int max) {
    int n = 0;
    for (char *p = line;;) {
        if (n < max) fields[n] = p;
        n++;
        char *comma = strchr(p, ',');
        if (!comma) break;
        *comma = '\0';
        p = comma + 1;
    }
    return n;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool parse_i64(const char *text, long long *value) {
    if (!is_digit(text[0]) && !(text[0] == '-' && is_digit(text[1]))) return false;
    char *end = NULL;
    errno = 0;
    *value = strtoll(text, &end, 10);
    return errno == 0 && *end == '\0';
}

static int bad_line(const char *path, int line, const char *what) {
    return tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "%s:%d: %s", path, line, what);
}

static int add_buffer(struct interval_file *f, const char *path, int line_no, char **fields, const int *where) {
    long long lower, upper;
    unsigned long long size, alignment = 0, offset = 0;
    const bool end_inclusive = where[COL_UPPER] < 0;
    if (!parse_i64(fields[where[COL_LOWER]], &lower) ||
        !parse_i64(fields[end_inclusive ? where[COL_END] : where[COL_UPPER]], &upper))
        return bad_line(path, line_no, "lower and upper must be whole numbers");
    if (end_inclusive) upper = upper < LLONG_MAX ? upper + 1 : upper;
    if (lower < INT_MIN || upper > INT_MAX || upper <= lower)
        return bad_line(path, line_no, "the buffer must be live over [lower, upper) with lower < upper, in int range");
    if (!tgsched_parse_u64(fields[where[COL_SIZE]], &size) || size > SIZE_MAX)
        return bad_line(path, line_no, "size must be a whole number of bytes");
    if (where[COL_ALIGNMENT] >= 0 && (!tgsched_parse_u64(fields[where[COL_ALIGNMENT]], &alignment) || alignment > SIZE_MAX))
        return bad_line(path, line_no, "alignment must be a whole number (0 or 1: any offset)");
    const bool fixed = where[COL_OFFSET] >= 0 && fields[where[COL_OFFSET]][0] != '\0';
    if (fixed && (!tgsched_parse_u64(fields[where[COL_OFFSET]], &offset) || offset > SIZE_MAX))
        return bad_line(path, line_no, "offset must be a whole number of bytes, or empty (the buffer is planned)");
    if (fixed && offset > SIZE_MAX - size) /* here, where the line and id are known (the planner has neither) */
        return tgsched_fail(TGSCHED_EXIT_BAD_INPUT,
                            "%s:%d: buffer '%s' pre-placed at %llu with %llu bytes ends past the address space (%zu)",
                            path, line_no, fields[where[COL_ID]], offset, size, (size_t)SIZE_MAX);
    if (f->n == f->cap) {
        const int cap = f->cap ? 2 * f->cap : 256;
        struct tg_interval *b = realloc(f->buffers, sizeof(*b) * (size_t)cap);
        if (b) f->buffers = b;
        char **ids = realloc(f->ids, sizeof(*ids) * (size_t)cap);
        if (ids) f->ids = ids;
        int *lines = realloc(f->lines, sizeof(*lines) * (size_t)cap);
        if (lines) f->lines = lines;
        if (!b || !ids || !lines || cap > INT_MAX / 2)
            return tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s: out of memory", path);
        f->cap = cap;
    }
    const char *id = fields[where[COL_ID]];
    const size_t id_len = strlen(id);
    f->ids[f->n] = malloc(id_len + 1);
    if (!f->ids[f->n]) return tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s: out of memory", path);
    memcpy(f->ids[f->n], id, id_len + 1);
    f->lines[f->n] = line_no;
    f->buffers[f->n] = (struct tg_interval){(size_t)size, (int)lower, (int)upper, (size_t)alignment, fixed, (size_t)offset};
    f->has_alignment |= alignment > 1;
    f->n_fixed += fixed;
    f->n++;
    return TGSCHED_EXIT_OK;
}

static void interval_file_release(struct interval_file *f) {
    for (int i = 0; i < f->n; i++) free(f->ids[i]);
    free(f->ids);
    free(f->lines);
    free(f->buffers);
}

struct id_entry {
    const char *id;
    int line;
};

static int compare_ids(const void *pa, const void *pb) {
    const struct id_entry *a = pa, *b = pb;
    const int c = strcmp(a->id, b->id);
    return c != 0 ? c : (a->line > b->line) - (a->line < b->line);
}

/* Ids name the buffers in the plan written and in the messages, so two
 * buffers with one id would be told apart by nothing: refused, naming the
 * later line and the earlier one. */
static int check_unique_ids(const char *path, const struct interval_file *f) {
    if (f->n < 2) return TGSCHED_EXIT_OK;
    struct id_entry *by_id = malloc(sizeof(*by_id) * (size_t)f->n);
    if (!by_id) return tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s: out of memory", path);
    for (int i = 0; i < f->n; i++) by_id[i] = (struct id_entry){f->ids[i], f->lines[i]};
    qsort(by_id, (size_t)f->n, sizeof(*by_id), compare_ids);
    int rc = TGSCHED_EXIT_OK;
    /* of every repeated id, the pair whose later line comes first in the file */
    int later = 0, earlier = 0;
    const char *id = NULL;
    for (int k = 1; k < f->n; k++)
        if (strcmp(by_id[k - 1].id, by_id[k].id) == 0 && (id == NULL || by_id[k].line < later)) {
            id = by_id[k].id;
            later = by_id[k].line;
            earlier = by_id[k - 1].line;
        }
    if (id)
        rc = tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "%s:%d: id '%.60s' is taken by the buffer at line %d: each buffer "
                          "needs an id of its own (the plan written names buffers by id)", path, later, id, earlier);
    free(by_id);
    return rc;
}

/* A pre-placed buffer at an offset its own alignment forbids contradicts
 * itself: the planner would keep it there, and the plan it writes would fail
 * the check that holds every offset of a whole plan to its alignment. */
static int check_fixed_aligned(const char *path, const struct interval_file *f) {
    for (int i = 0; i < f->n; i++) {
        const struct tg_interval *b = &f->buffers[i];
        if (b->fixed && b->alignment > 1 && b->offset % b->alignment != 0)
            return tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "%s:%d: buffer '%.60s' is pre-placed at %zu, not a multiple of "
                                "its alignment %zu: give an aligned offset, or leave the offset empty to have it planned",
                                path, f->lines[i], f->ids[i], b->offset, b->alignment);
    }
    return TGSCHED_EXIT_OK;
}

static int read_intervals(const char *path, struct interval_file *f) {
    FILE *in = fopen(path, "r");
    if (!in) return tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "cannot open '%s': %s", path, strerror(errno));
    char line[1024];
    int where[N_COLUMNS], n_columns = 0, rc = TGSCHED_EXIT_OK;
    for (int c = 0; c < N_COLUMNS; c++) where[c] = -1;
    for (int line_no = 1; rc == TGSCHED_EXIT_OK && fgets(line, sizeof line, in); line_no++) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = bad_line(path, line_no, "line longer than 1022 characters");
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        char *fields[N_COLUMNS];
        const int n = split_fields(line, fields, N_COLUMNS);
        if (n_columns == 0) { /* the header */
            for (int k = 0; k < n && rc == TGSCHED_EXIT_OK; k++) {
                const int c = k < N_COLUMNS ? column_of(fields[k]) : -1;
                if (k < N_COLUMNS && strcmp(fields[k], "gaps") == 0) {
                    rc = bad_line(path, line_no, "MiniMalloc's gaps column is not supported: split such a buffer "
                                                 "into one per live stretch, pre-placed at the same offset");
                } else if (c < 0 || where[c] >= 0) {
                    char what[160];
                    snprintf(what, sizeof what,
                             "column '%.40s' is unknown or repeated (columns: id, lower, upper or end, size, "
                             "alignment, offset)",
                             k < N_COLUMNS ? fields[k] : "...");
                    rc = bad_line(path, line_no, what);
                } else {
                    where[c] = k;
                }
            }
            if (rc == TGSCHED_EXIT_OK &&
                (where[COL_ID] < 0 || where[COL_LOWER] < 0 || (where[COL_UPPER] < 0) == (where[COL_END] < 0) ||
                 where[COL_SIZE] < 0))
                rc = bad_line(path, line_no, "the header must name id, lower, upper (or end) and size");
            n_columns = n;
        } else if (n != n_columns) {
            char what[96];
            snprintf(what, sizeof what, "%d fields where the header names %d", n, n_columns);
            rc = bad_line(path, line_no, what);
        } else {
            rc = add_buffer(f, path, line_no, fields, where);
        }
    }
    if (rc == TGSCHED_EXIT_OK && ferror(in)) rc = tgsched_fail(TGSCHED_EXIT_BAD_INPUT, "%s: read error", path);
    if (rc == TGSCHED_EXIT_OK && n_columns == 0) rc = bad_line(path, 1, "empty file: no header");
    if (rc == TGSCHED_EXIT_OK) rc = check_unique_ids(path, f);
    fclose(in);
    return rc;
}

/* ---- writing ---- */

static int write_plan(const char *path, const struct interval_file *f, const struct tg_interval *plan) {
    struct tgsched_output_file file;
    if (!tgsched_output_open(&file, path))
        return tgsched_fail(TGSCHED_EXIT_RESOURCE, "cannot write '%s': %s", path, strerror(errno));
    FILE *out = file.f;
    fprintf(out, "id,lower,upper,size%s,offset\n", f->has_alignment ? ",alignment" : "");
    for (int i = 0; i < f->n; i++) {
        fprintf(out, "%s,%d,%d,%zu", f->ids[i], plan[i].lower, plan[i].upper, plan[i].size);
        if (f->has_alignment) fprintf(out, ",%zu", plan[i].alignment);
        fprintf(out, ",%zu\n", plan[i].offset);
    }
    const bool replaced = file.temp != NULL; /* else written in place: part of it may be out */
    if (!tgsched_output_commit(&file))
        return tgsched_fail(TGSCHED_EXIT_RESOURCE, "cannot write '%s'%s: %s", path, replaced ? " (left as it was)" : "",
                            strerror(errno));
    return TGSCHED_EXIT_OK;
}

/* ---- planning and the report ---- */

struct live_event {
    int step;
    bool starts;
    size_t size;
};

/* Ends before starts at one step: a buffer live over [lower, upper) is gone at upper. */
static int compare_events(const void *pa, const void *pb) {
    const struct live_event *a = pa, *b = pb;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return (int)a->starts - (int)b->starts;
}

/* The most bytes live at one step, by a sweep over the sorted starts and
 * ends: the report's own count, not the planner's.  *past_step: the first
 * step where the sizes live together sum past SIZE_MAX (no plan can exist),
 * else -1.  False when out of host memory. */
static bool live_lower_bound(const struct tg_interval *b, int n, size_t *bound, int *past_step) {
    *bound = 0;
    *past_step = -1;
    if (n == 0) return true;
    struct live_event *events = malloc(sizeof *events * 2 * (size_t)n);
    if (!events) return false;
    for (int i = 0; i < n; i++) {
        events[2 * i] = (struct live_event){b[i].lower, true, b[i].size};
        events[2 * i + 1] = (struct live_event){b[i].upper, false, b[i].size};
    }
    qsort(events, 2 * (size_t)n, sizeof *events, compare_events);
    size_t live = 0;
    for (int k = 0; k < 2 * n; k++) {
        if (!events[k].starts) {
            live -= events[k].size;
        } else if (live > SIZE_MAX - events[k].size) {
            *bound = SIZE_MAX;
            *past_step = events[k].step;
            break;
        } else {
            live += events[k].size;
            if (live > *bound) *bound = live;
        }
    }
    free(events);
    return true;
}

static const char *result_word(enum tg_interval_result r) {
    switch (r) {
    case TG_INTERVALS_PLANNED: return "planned";
    case TG_INTERVALS_INFEASIBLE: return "infeasible";
    case TG_INTERVALS_NOT_FOUND: return "not_found";
    }
    return "unknown";
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_options(int argc, char **argv, bool check, struct interval_options *opt) {
    /* the usage hint names the CSV help: `tgsched plan --help` lists the .tg options */
    const char *verb = check ? "check FILE.csv" : "plan FILE.csv";
    memset(opt, 0, sizeof *opt);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long u = 0;
        char *end = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            interval_help(stdout, check);
            return TGSCHED_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            opt->json = true;
        } else if (strcmp(a, "--capacity") == 0) {
            if (!val || !tgsched_parse_u64(val, &u) || u == 0 || u > SIZE_MAX)
                return tgsched_usage_error(verb, "--capacity takes a number of bytes above 0");
            opt->capacity = (size_t)u;
            i++;
        } else if (strcmp(a, "--exact") == 0) {
            opt->seconds = val ? strtod(val, &end) : 0;
            if (!val || *end || !(opt->seconds > 0 && opt->seconds <= 86400))
                return tgsched_usage_error(verb, "--exact takes seconds, above 0 and at most a day");
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (!val || !tgsched_parse_u64(val, &u) || u < 1 || u > 64) return tgsched_usage_error(verb, "--threads takes 1..64");
            opt->threads = (int)u;
            i++;
        } else if (strcmp(a, "--out") == 0) {
            if (!val) return tgsched_usage_error(verb, "--out needs a file name");
            opt->out_path = val;
            i++;
        } else if (a[0] == '-') {
            return tgsched_usage_error(verb, "unknown option '%s' for a CSV file", a);
        } else if (opt->path) {
            return tgsched_usage_error(verb, "one file at a time");
        } else {
            opt->path = a;
        }
    }
    return -1;
}

/* overlap: two pre-placed buffers live together that share bytes (the
 * reason there is no plan), else -1s. */
static void print_text(const struct interval_options *opt, const struct interval_file *f, size_t lower_bound,
                       size_t peak, enum tg_interval_result result, double seconds, const int overlap[2]) {
    printf("intervals %s: %d buffers (%d pre-placed%s)\n", opt->path, f->n, f->n_fixed,
           f->has_alignment ? ", alignments of their own" : "");
    printf("bound     %zu bytes: the most live at one step\n", lower_bound);
    if (opt->capacity) printf("capacity  %zu bytes\n", opt->capacity);
    const int a = overlap[0], b = overlap[1];
    if (a >= 0)
        printf("plan      none: pre-placed buffers '%s' [%zu, %zu) and '%s' [%zu, %zu) are live together and "
               "overlap; give one of them another offset or leave it out of the offset column\n",
               f->ids[a], f->buffers[a].offset, f->buffers[a].offset + f->buffers[a].size, f->ids[b],
               f->buffers[b].offset, f->buffers[b].offset + f->buffers[b].size);
    else printf("plan      peak %zu bytes, %.4f x the bound, in %.3f s on %d thread%s%s\n", peak,
                lower_bound ? (double)peak / (double)lower_bound : 1.0, seconds, tgsched_threads(opt->threads),
                tgsched_threads(opt->threads) == 1 ? "" : "s", opt->seconds > 0 ? " (searched by the clock)" : "");
    if (opt->capacity && a < 0) {
        if (result == TG_INTERVALS_PLANNED) printf("verdict   fits the capacity\n");
        else if (result == TG_INTERVALS_INFEASIBLE) printf("verdict   no plan fits the capacity (proved)\n");
        else printf("verdict   no plan under the capacity found within the limits (--exact searches longer)\n");
    }
    /* only a plan is written: with clashing pre-placed buffers there is none */
    if (opt->out_path && a >= 0) printf("not written %s: there is no plan\n", opt->out_path);
    else if (opt->out_path) printf("written   %s\n", opt->out_path);
}

int plan_intervals_run(int argc, char **argv, bool check) {
    struct interval_options opt;
    int rc = parse_options(argc, argv, check, &opt);
    if (rc >= 0) return rc;
    struct interval_file f = {0};
    struct tg_interval *plan = NULL;
    rc = read_intervals(opt.path, &f);
    /* under check, a file with every offset is a whole plan: a misaligned one is the violation to report */
    const bool whole_plan = check && f.n > 0 && f.n_fixed == f.n;
    if (rc == TGSCHED_EXIT_OK && !whole_plan) rc = check_fixed_aligned(opt.path, &f);
    const char *not_written = opt.out_path ? " (--out: nothing written)" : "";
    /* the bound first: sizes live together past SIZE_MAX have no plan at
     * all, which is the file's fault, whatever the planner would answer */
    size_t lower_bound = 0;
    int past_step = -1;
    if (rc == TGSCHED_EXIT_OK && !live_lower_bound(f.buffers, f.n, &lower_bound, &past_step))
        rc = tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s: out of memory for the lower bound", opt.path);
    if (rc == TGSCHED_EXIT_OK && past_step >= 0)
        rc = tgsched_fail(TGSCHED_EXIT_BAD_INPUT,
                          "%s: the buffers live at step %d need more than %zu bytes (SIZE_MAX) together: no plan fits "
                          "in the address space%s",
                          opt.path, past_step, (size_t)SIZE_MAX, not_written);
    if (rc == TGSCHED_EXIT_OK && f.n > 0) {
        plan = malloc(sizeof(*plan) * (size_t)f.n);
        if (!plan) rc = tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s: out of memory", opt.path);
        else memcpy(plan, f.buffers, sizeof(*plan) * (size_t)f.n);
    }
    enum tg_interval_result result = TG_INTERVALS_PLANNED;
    size_t peak = 0;
    double seconds = 0;
    int overlap[2] = {-1, -1};
    bool clash = false;
    if (rc == TGSCHED_EXIT_OK) {
        const struct tg_interval_options options = {opt.capacity, opt.seconds, tgsched_threads(opt.threads)};
        const double start = now_seconds();
        const enum tg_status st = tg_plan_intervals(plan, f.n, &options, &result, &peak);
        seconds = now_seconds() - start;
        /* the reader rejects every other malformed buffer, so a refusal here is
         * pre-placed buffers that clash: named by their ids below (no plan) */
        clash = st == TG_ERR_INVALID && tg_intervals_fixed_overlap(f.buffers, f.n, &overlap[0], &overlap[1]) == TG_OK &&
                overlap[0] >= 0;
        /* (sizes and alignments that could wrap an offset past SIZE_MAX are among its refusals) */
        if (st != TG_OK && !clash)
            rc = tgsched_fail(tgsched_exit_for(st), "%s: %s%s", opt.path, tg_last_error(), not_written);
    }
    if (rc == TGSCHED_EXIT_OK && opt.out_path && !clash) rc = write_plan(opt.out_path, &f, plan);
    struct tg_oracle_interval_report rep = {0};
    if (rc == TGSCHED_EXIT_OK && check && !clash) {
        const size_t capacity = result == TG_INTERVALS_PLANNED ? opt.capacity : 0;
        /* every offset given: a plan to verify (a written one read back), so
         * each offset is held to its alignment; else the pre-placed ones stay
         * where the caller put them, as the planner keeps them */
        const bool ok = whole_plan ? tg_oracle_check_interval_plan(plan, f.n, peak, capacity, &rep)
                                                    : tg_oracle_check_intervals(f.buffers, plan, f.n, peak, capacity, &rep);
        if (!ok) rc = tgsched_fail(TGSCHED_EXIT_RESOURCE, "%s: out of memory in the check", opt.path);
    }
    if (rc != TGSCHED_EXIT_OK) {
        free(plan);
        interval_file_release(&f);
        return rc;
    }
    if (result != TG_INTERVALS_PLANNED || (check && rep.n > 0)) rc = TGSCHED_EXIT_FAILED;
    if (opt.json) {
        tgsched_json_open(stdout);
        printf("\"intervals\":{\"file\":");
        tgsched_json_string(stdout, opt.path);
        printf(",\"buffers\":%d,\"fixed\":%d,\"lower_bound\":%zu,\"capacity\":%zu,\"peak\":", f.n, f.n_fixed,
               lower_bound, opt.capacity);
        if (clash) printf("null");
        else printf("%zu", peak);
        printf(",\"result\":\"%s\",\"seconds\":%.6f,\"threads\":%d},", result_word(result), seconds, tgsched_threads(opt.threads));
        if (check && clash) { /* no plan, so nothing was checked */
            printf("\"check\":null,");
        } else if (check) {
            printf("\"check\":{\"violations\":%d,\"first\":", rep.n);
            tgsched_json_string(stdout, rep.first);
            printf("},");
        }
        tgsched_json_close(stdout, rc);
    } else {
        print_text(&opt, &f, lower_bound, peak, result, seconds, overlap);
        if (check && clash) {
            printf("check     not run: there is no plan to check (the pre-placed buffers above clash)\n");
        } else if (check) {
            if (rep.n == 0) printf("check     0 violations: no two live buffers overlap, alignments and pre-placed "
                                   "buffers kept, the peak as claimed%s.  The plan is legal.\n",
                                   result == TG_INTERVALS_PLANNED && opt.capacity ? ", under the capacity" : "");
            else {
                /* the oracle numbers the buffers; the file names them */
                printf("check     %d violation%s; the first: %s", rep.n, rep.n == 1 ? "" : "s", rep.first);
                for (int k = 0; k < 2 && rep.first_buffers[k] >= 0 && rep.first_buffers[k] < f.n; k++)
                    printf("%s'%s'", k ? " and " : " (buffer ", f.ids[rep.first_buffers[k]]);
                printf("%s\n", rep.first_buffers[0] >= 0 ? ")" : "");
            }
        }
    }
    free(plan);
    interval_file_release(&f);
    return rc;
}

/* `tgsched info FILE.tg [--json]`: what a graph holds, before any planning.
 *
 * Counts, the op histogram of the nodes, bytes by kind (weights and other data
 * pre-allocated outside the planner, graph inputs, and activations: the sum
 * over non-view nodes, i.e. what a planner without reuse would need), and the
 * ops that this build's CPU kernels cannot compute. */
#include "tg-cpu.h"
#include "tgsched.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Weak until every build carries the CPU kernels: without them the check is
 * reported as not done instead of failing to link. */
#pragma weak tg_cpu_supports_op

enum byte_kind { KIND_WEIGHTS, KIND_DATA, KIND_INPUTS, KIND_ACTIVATIONS, KIND_COUNT };

static const char *const kind_names[KIND_COUNT] = {"weights", "data", "inputs", "activations"};
static const char *const kind_notes[KIND_COUNT] = {
    "buf=weights, allocated before planning",
    "buf=data (KV cache, user tensors), allocated before planning",
    "leafs without buf=, planned",
    "non-view nodes, planned (sum without reuse)",
};

struct graph_info {
    int n_nodes, n_leafs, n_views;
    int op_count[TG_OP_COUNT];
    int uncomputable[TG_OP_COUNT];
    bool computability_known;
    size_t bytes[KIND_COUNT]; /* SIZE_MAX when the sum passes it (see past) */
    bool past[KIND_COUNT];    /* the sum passes SIZE_MAX: what a planner without reuse could not hold */
    int tensors[KIND_COUNT];
};

static void gather(const struct tg_file *f, struct graph_info *info) {
    memset(info, 0, sizeof *info);
    info->n_nodes = f->graph->n_nodes;
    info->n_leafs = f->graph->n_leafs;
    info->computability_known = tg_cpu_supports_op != NULL;
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *r = &f->tensors[i];
        const struct tg_tensor *t = r->tensor;
        if (!r->is_leaf) {
            info->op_count[t->op]++;
            if (info->computability_known && !tg_cpu_supports_op(t)) info->uncomputable[t->op]++;
        }
        if (t->view_src) {
            info->n_views++;
            continue;
        }
        enum byte_kind kind;
        if (r->placement == TG_PLACE_WEIGHTS) kind = KIND_WEIGHTS;
        else if (r->placement == TG_PLACE_DATA) kind = KIND_DATA;
        else if (r->is_leaf) kind = KIND_INPUTS;
        else kind = KIND_ACTIVATIONS;
        /* saturated: a wrapped total would claim a graph too big for any
         * address space is small */
        const size_t bytes = tg_nbytes(t);
        if (info->bytes[kind] > SIZE_MAX - bytes) info->past[kind] = true;
        info->bytes[kind] = info->past[kind] ? SIZE_MAX : info->bytes[kind] + bytes;
        info->tensors[kind]++;
    }
}

/* Ops by count, most frequent first, then by name. */
static int compare_ops_by_count(const void *a, const void *b, const int *count) {
    int x = *(const int *)a, y = *(const int *)b;
    if (count[x] != count[y]) return count[y] - count[x];
    return strcmp(tg_op_name((enum tg_op)x), tg_op_name((enum tg_op)y));
}

static int sorted_ops(const int *count, int *order) {
    int n = 0;
    for (int op = 0; op < TG_OP_COUNT; op++) {
        if (count[op] > 0) order[n++] = op;
    }
    /* insertion sort: at most a few dozen ops */
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && compare_ops_by_count(&order[j - 1], &order[j], count) > 0; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    }
    return n;
}

static void print_text(const char *path, const struct tg_file *f, const struct graph_info *info) {
    printf("file         %s\n", path);
    printf("backends     ");
    for (int b = 0; b < f->n_backends; b++) printf("%s%s", b ? "," : "", f->backend_names[b]);
    printf("\nnodes        %d\nleafs        %d\nviews        %d\n", info->n_nodes, info->n_leafs, info->n_views);
    for (int k = 0; k < KIND_COUNT; k++) {
        if (info->past[k])
            printf("%-12s more than %zu bytes (SIZE_MAX) in %d tensors: %s\n", kind_names[k], info->bytes[k],
                   info->tensors[k], kind_notes[k]);
        else
            printf("%-12s %.1f MiB (%zu bytes) in %d tensors: %s\n", kind_names[k],
                   (double)info->bytes[k] / (1024.0 * 1024.0), info->bytes[k], info->tensors[k], kind_notes[k]);
    }
    int order[TG_OP_COUNT];
    int n = sorted_ops(info->op_count, order);
    printf("ops (%d kinds over %d nodes):\n", n, info->n_nodes);
    for (int i = 0; i < n; i++) printf("  %-16s %d\n", tg_op_name((enum tg_op)order[i]), info->op_count[order[i]]);
    if (!info->computability_known) {
        printf("not computable: unknown (this build has no CPU kernels)\n");
        return;
    }
    n = sorted_ops(info->uncomputable, order);
    if (n == 0) {
        printf("not computable: none (every op has a CPU kernel)\n");
        return;
    }
    printf("not computable by this build (loadable and plannable, refused at compute time):\n");
    for (int i = 0; i < n; i++) {
        printf("  %-16s %d nodes\n", tg_op_name((enum tg_op)order[i]), info->uncomputable[order[i]]);
    }
}

static void print_op_object(const int *count) {
    int order[TG_OP_COUNT];
    int n = sorted_ops(count, order);
    printf("{");
    for (int i = 0; i < n; i++) printf("%s\"%s\":%d", i ? "," : "", tg_op_name((enum tg_op)order[i]), count[order[i]]);
    printf("}");
}

static void print_json(const char *path, const struct tg_file *f, const struct graph_info *info) {
    for (int k = 0; k < KIND_COUNT; k++) /* the number alone cannot say it was cut */
        if (info->past[k]) tgsched_note("bytes.%s: more than %zu (SIZE_MAX); shown as SIZE_MAX", kind_names[k], (size_t)SIZE_MAX);
    tgsched_json_open(stdout);
    printf("\"file\":");
    tgsched_json_string(stdout, path);
    printf(",\"backends\":[");
    for (int b = 0; b < f->n_backends; b++) {
        if (b) printf(",");
        tgsched_json_string(stdout, f->backend_names[b]);
    }
    printf("],\"n_nodes\":%d,\"n_leafs\":%d,\"n_views\":%d,", info->n_nodes, info->n_leafs, info->n_views);
    printf("\"bytes\":{");
    for (int k = 0; k < KIND_COUNT; k++) printf("%s\"%s\":%zu", k ? "," : "", kind_names[k], info->bytes[k]);
    printf("},\"tensors\":{");
    for (int k = 0; k < KIND_COUNT; k++) printf("%s\"%s\":%d", k ? "," : "", kind_names[k], info->tensors[k]);
    printf("},\"ops\":");
    print_op_object(info->op_count);
    printf(",\"uncomputable_ops\":");
    if (info->computability_known) print_op_object(info->uncomputable);
    else printf("null");
    printf(",\"meta\":{");
    for (int i = 0; i < f->n_meta; i++) {
        const char *eq = strchr(f->meta[i], '=');
        const size_t n = eq ? (size_t)(eq - f->meta[i]) : strlen(f->meta[i]);
        printf("%s", i ? "," : "");
        tgsched_json_string_n(stdout, f->meta[i], n); /* whole: cut keys could merge */
        printf(":");
        tgsched_json_string(stdout, eq ? eq + 1 : "");
    }
    printf("},");
    tgsched_json_close(stdout, TGSCHED_EXIT_OK);
}

static void print_info_help(void) {
    printf("usage: tgsched info FILE.tg [--json]\n\n"
           "Prints what the graph holds: node, leaf and view counts; bytes of weights and\n"
           "other pre-allocated data (buf=weights, buf=data), of graph inputs and of\n"
           "activations (non-view nodes, summed without reuse); the op histogram; and the\n"
           "ops this build cannot compute (they still load and plan).\n\n"
           "  --json   one JSON document instead of text, errors included (docs/json.md)\n\n"
           "exit status: 0 success, 2 unreadable or malformed file, or bad arguments,\n"
           "3 out of host memory\n");
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_info_help();
            return TGSCHED_EXIT_OK;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return tgsched_usage_error("info", "unknown option '%s'", argv[i]);
        } else if (path) {
            return tgsched_usage_error("info", "one file at a time ('%s' and '%s' given)", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) return tgsched_usage_error("info", "missing FILE.tg");
    int rc = TGSCHED_EXIT_BAD_INPUT;
    struct tg_file *f = tgsched_load(path, &rc);
    if (!f) return rc;
    struct graph_info info;
    gather(f, &info);
    if (json) print_json(path, f, &info);
    else print_text(path, f, &info);
    tg_file_free(f);
    return TGSCHED_EXIT_OK;
}

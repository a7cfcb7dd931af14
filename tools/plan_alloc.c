/* Planning a file that states an allocator setup (see plan_alloc.h): the
 * file becomes a generated case (the generator reads its own cases back),
 * planned and judged as fuzz_alloc does. */
#include "plan_alloc.h"

#include "tgsched.h"

#include <stdlib.h>
#include <string.h>

bool plan_alloc_is_case(const struct session_options *opt) {
    struct tg_file *f = NULL;
    if (session_parse_file(opt, &f) != TG_OK) return false;
    bool yes = f->alloc.n_ids > 0;
    tg_file_free(f);
    return yes;
}

/* The file states the buffer types and ids, and the graph allocator alone
 * plans it: an option for the scheduler or the report would be ignored, and
 * a user would take its absence from the result for its effect. */
static int refuse_unused_options(const struct session_options *opt, bool check) {
    unsigned unused = opt->given & ~(unsigned)(SESSION_OPT_PLAN | SESSION_OPT_JSON);
    if (!unused) return -1;
    char names[256] = "";
    size_t len = 0;
    for (unsigned bit = 1; bit && bit <= unused && len < sizeof names; bit <<= 1) {
        if (!(unused & bit)) continue;
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", session_option_name(bit));
    }
    bool several = (unused & (unused - 1)) != 0;
    return tgsched_usage_error(check ? "check" : "plan",
                               "%s %s not apply to %s: the file states its own allocator setup (buft and buffers "
                               "lines), which the graph allocator plans alone; only --plan and --json apply",
                               names, several ? "do" : "does", opt->path);
}

#ifdef TG_HAVE_TGGEN
#include "tg-gen.h"

static const char *policy_name(const struct session_options *opt) { return opt->policy == TG_PLAN_GGML ? "ggml" : "best"; }

static void print_text(const struct session_options *opt, const struct tg_gen_case *c, const struct tg_gen_plan_result *r,
                       bool check) {
    printf("graph     %s: %d nodes, %d leafs; an allocator case: %d buffer ids over %d buffer types, policy %s\n",
           opt->path, c->graph->n_nodes, c->graph->n_leafs, c->n_ids, c->n_bufts, policy_name(opt));
    printf("buffers   per buffer id (ids sharing a type count once, at the first):\n");
    printf("          %-4s %-12s %13s %13s %13s %7s\n", "id", "type", "size", "lower bound", "naive", "ratio");
    for (int id = 0; id < c->n_ids; id++) {
        printf("          %-4d %-12s %13zu %13zu %13zu", id, tg_buft_name(c->bufts[id]), r->buffer_size[id],
               r->lower_bound[id], r->naive_total[id]);
        if (r->lower_bound[id]) printf(" %7.3f\n", (double)r->buffer_size[id] / (double)r->lower_bound[id]);
        else printf("       -\n");
    }
    if (!check) return;
    printf("check     %d violation%s in %d tensors%s\n", r->report.n, r->report.n == 1 ? "" : "s", r->n_tensors,
           r->report.n ? ": the plan is NOT legal" : ": the plan is legal");
    for (int i = 0; i < r->report.n && i < 200; i++) {
        printf("  [%s] %s\n", tg_oracle_rule_name(r->report.items[i].rule), r->report.items[i].message);
    }
}

/* The planned tensors of buffer id `id` (owned, in a compute buffer), each
 * with its chunk: the id's buffers numbered in the order tensors first use them. */
static void json_tensors(const struct tg_gen_case *c, int id, FILE *out) {
    const struct tg_graph *g = c->graph;
    const tg_buffer *chunks[64];
    int n_chunks = 0;
    bool first = true;
    for (int u = 0; u < g->n_leafs + g->n_nodes; u++) {
        bool leaf = u < g->n_leafs;
        const struct tg_tensor *t = leaf ? g->leafs[u] : g->nodes[u - g->n_leafs];
        int tid = leaf ? c->leaf_ids[u] : c->node_ids[u - g->n_leafs];
        if (tid != id || t->view_src || !t->buffer || tg_buffer_get_usage(t->buffer) != TG_BUFFER_USAGE_COMPUTE) continue;
        int k = 0;
        while (k < n_chunks && chunks[k] != t->buffer) k++;
        if (k == n_chunks && n_chunks < 64) chunks[n_chunks++] = t->buffer;
        fprintf(out, "%s{\"name\":", first ? "" : ",");
        tgsched_json_string(out, t->name);
        fprintf(out, ",\"op\":\"%s\",\"type\":\"%s\",\"chunk\":%d,\"offset\":%zu,\"size\":%zu}", tg_op_name(t->op),
                tg_type_name(t->type), k,
                (size_t)((const char *)t->data - (const char *)tg_buffer_get_base((tg_buffer *)t->buffer)),
                tg_buffer_get_alloc_size((tg_buffer *)t->buffer, t));
        first = false;
    }
}

static void print_json(const struct session_options *opt, const struct tg_gen_case *c, const struct tg_gen_plan_result *r,
                       bool check, int rc) {
    tgsched_json_open(stdout);
    fputs("\"file\":", stdout);
    tgsched_json_string(stdout, opt->path);
    printf(",\"graph\":{\"n_nodes\":%d,\"n_leafs\":%d},\"policy\":\"%s\",\"allocator_case\":true,\"buffers\":[",
           c->graph->n_nodes, c->graph->n_leafs, policy_name(opt));
    for (int id = 0; id < c->n_ids; id++) {
        printf("%s{\"buffer_id\":%d,\"type\":", id ? "," : "", id);
        tgsched_json_string(stdout, tg_buft_name(c->bufts[id]));
        printf(",\"size\":%zu,\"lower_bound\":%zu,\"naive\":%zu,\"tensors\":[", r->buffer_size[id], r->lower_bound[id],
               r->naive_total[id]);
        json_tensors(c, id, stdout);
        fputs("]}", stdout);
    }
    fputs("],", stdout);
    if (check) {
        printf("\"check\":{\"checked_tensors\":%d,\"violations\":[", r->n_tensors);
        for (int i = 0; i < r->report.n; i++) {
            printf("%s{\"rule\":\"allocator\",\"tensor\":null,\"message\":", i ? "," : "");
            tgsched_json_string(stdout, r->report.items[i].message);
            putchar('}');
        }
        fputs("]},", stdout);
    }
    tgsched_json_close(stdout, rc);
}

int plan_alloc_run(const struct session_options *opt, bool check) {
    int rc = refuse_unused_options(opt, check);
    if (rc >= 0) return rc;
    tgsched_progress("%s states an allocator setup: planning it with the graph allocator alone", opt->path);
    struct tg_gen_case *c = NULL;
    enum tg_status st = tg_gen_case_from_text(opt->text, opt->text_len, opt->path, true, &c);
    struct tg_gen_plan_result r;
    memset(&r, 0, sizeof r);
    tg_gallocr *galloc = NULL;
    if (st == TG_OK) st = tg_gen_plan_and_check_policy(c, TG_FAULT_NONE, opt->policy, &galloc, &r);
    if (st == TG_OK && r.plan_status != TG_OK) st = r.plan_status;
    if (st != TG_OK) {
        rc = tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
    } else {
        rc = check && r.report.n ? TGSCHED_EXIT_FAILED : TGSCHED_EXIT_OK;
        if (opt->json) print_json(opt, c, &r, check, rc);
        else print_text(opt, c, &r, check);
    }
    tg_gen_plan_result_free(&r);
    tg_gallocr_free(galloc);
    tg_gen_case_free(c);
    return rc;
}

#else /* a build without the generator library */

int plan_alloc_run(const struct session_options *opt, bool check) {
    int rc = refuse_unused_options(opt, check);
    if (rc >= 0) return rc;
    return tgsched_fail(TGSCHED_EXIT_BAD_INPUT,
                        "%s states an allocator setup, which this build cannot plan (built without fuzz/gen)", opt->path);
}
#endif

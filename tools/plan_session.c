/* Loading, backends, scheduling and plan reports for plan/check/run. */
#include "plan_session.h"

#include "plan_map.h"
#include "tgsched.h"

#include <stdlib.h>
#include <string.h>

int session_parse_args(const char *verb, int argc, char **argv, struct session_options *opt,
                       void (*help)(FILE *out)) {
    memset(opt, 0, sizeof *opt);
    opt->policy = TG_PLAN_BEST;
    opt->n_copies = 1;
    opt->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help(stdout);
            return TGSCHED_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            opt->json = true;
        } else if (strcmp(a, "--backends") == 0) {
            if (!val) return tgsched_usage_error(verb, "--backends needs a spec");
            opt->backends_spec = val;
            i++;
        } else if (strcmp(a, "--plan") == 0) {
            if (!val || (strcmp(val, "ggml") != 0 && strcmp(val, "best") != 0)) {
                return tgsched_usage_error(verb, "--plan takes 'ggml' or 'best'");
            }
            opt->policy = strcmp(val, "ggml") == 0 ? TG_PLAN_GGML : TG_PLAN_BEST;
            i++;
        } else if (strcmp(a, "--n-copies") == 0) {
            char *end = NULL;
            long n = val ? strtol(val, &end, 10) : 0;
            if (!val || *end || (n != 1 && n != TG_SCHED_MAX_COPIES)) {
                return tgsched_usage_error(verb, "--n-copies takes 1 or %d (pipeline parallel)", TG_SCHED_MAX_COPIES);
            }
            opt->n_copies = (int)n;
            i++;
        } else if (strcmp(a, "--layers-on") == 0) {
            const char *colon = val ? strrchr(val, ':') : NULL;
            char *end = NULL;
            long n = colon ? strtol(colon + 1, &end, 10) : -1;
            if (!colon || colon == val || *end || n < 0) {
                return tgsched_usage_error(verb, "--layers-on takes BACKEND:N (weights of layers 0..N-1 on BACKEND)");
            }
            static char name[32];
            snprintf(name, sizeof name, "%.*s", (int)(colon - val), val);
            opt->layers_backend = name;
            opt->layers_count = (int)n;
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            char *end = NULL;
            unsigned long long v = val ? strtoull(val, &end, 10) : 0;
            if (!val || *end) return tgsched_usage_error(verb, "--seed takes a number");
            opt->seed = v;
            i++;
        } else if (strcmp(a, "--svg") == 0) {
            if (!val) return tgsched_usage_error(verb, "--svg needs an output path");
            opt->svg_path = val;
            i++;
        } else if (a[0] == '-') {
            return tgsched_usage_error(verb, "unknown option '%s'", a);
        } else if (opt->path) {
            return tgsched_usage_error(verb, "one graph file at a time ('%s' and '%s' given)", opt->path, a);
        } else {
            opt->path = a;
        }
    }
    if (!opt->path) return tgsched_usage_error(verb, "no graph file given");
    return -1;
}

static enum tg_status map_file_backends(struct session *s) {
    struct tg_file *f = s->file;
    for (int i = 0; i < f->n_backends; i++) {
        int k = backend_set_find(&s->backends, f->backend_names[i]);
        if (k < 0) {
            return tg_fail(TG_ERR_INVALID, "%s places tensors on backend '%s', which --backends does not define "
                           "(add e.g. sim:%s to the spec)", s->opt.path, f->backend_names[i], f->backend_names[i]);
        }
        s->file_backends[i] = s->backends.backends[k];
    }
    return TG_OK;
}

/* --layers-on: move the weights of the first N layers (GGUF names blk.K.*) to a backend. */
static enum tg_status place_layers(struct session *s) {
    if (!s->opt.layers_backend) return TG_OK;
    int b = -1;
    for (int i = 0; i < s->file->n_backends; i++) {
        if (strcmp(s->file->backend_names[i], s->opt.layers_backend) == 0) b = i;
    }
    if (b < 0) {
        if (s->file->n_backends >= TG_IO_MAX_BACKENDS) return tg_fail(TG_ERR_INVALID, "too many backends");
        /* a backend the file does not name: add it in front (highest priority) */
        b = 0;
        for (int i = s->file->n_backends; i > 0; i--) memcpy(s->file->backend_names[i], s->file->backend_names[i - 1], 32);
        snprintf(s->file->backend_names[0], 32, "%s", s->opt.layers_backend);
        s->file->n_backends++;
        for (int i = 0; i < s->file->n_tensors; i++) {
            struct tg_file_tensor *ft = &s->file->tensors[i];
            if (ft->placement != TG_PLACE_NONE) ft->placement_backend++;
            if (ft->pinned_backend >= 0) ft->pinned_backend++;
        }
    }
    int moved = 0;
    for (int i = 0; i < s->file->n_tensors; i++) {
        struct tg_file_tensor *ft = &s->file->tensors[i];
        int layer = -1;
        bool weight = ft->placement == TG_PLACE_WEIGHTS && sscanf(ft->tensor->name, "blk.%d.", &layer) == 1;
        /* the KV cache of an offloaded layer lives with it, as in llama.cpp */
        bool cache = ft->placement == TG_PLACE_DATA && (sscanf(ft->tensor->name, "cache_k_l%d", &layer) == 1 ||
                                                        sscanf(ft->tensor->name, "cache_v_l%d", &layer) == 1);
        if (!weight && !cache) continue;
        if (layer < s->opt.layers_count) {
            ft->placement_backend = b;
            moved++;
        }
    }
    if (!s->opt.json) fprintf(stderr, "tgsched: %d weight and KV-cache tensors of layers 0..%d placed on %s\n", moved,
                              s->opt.layers_count - 1, s->opt.layers_backend);
    return TG_OK;
}

static enum tg_status apply_pins(struct session *s) {
    for (int i = 0; i < s->file->n_tensors; i++) {
        const struct tg_file_tensor *ft = &s->file->tensors[i];
        if (ft->pinned_backend >= 0) tg_sched_set_tensor_backend(s->sched, ft->tensor, s->file_backends[ft->pinned_backend]);
    }
    return TG_OK;
}

enum tg_status session_open(struct session *s, const struct session_options *opt) {
    memset(s, 0, sizeof *s);
    s->opt = *opt;
    enum tg_status st = tg_file_load(opt->path, &s->file);
    if (st == TG_OK) st = place_layers(s);
    if (st != TG_OK) return st;
    backend_spec_sims_plan_only(opt->reserve_only);
    st = opt->backends_spec ? backend_set_from_spec(opt->backends_spec, &s->backends)
                            : backend_set_from_names(s->file->backend_names, s->file->n_backends, &s->backends);
    if (st == TG_OK && opt->reserve_only) backend_set_plan_only(&s->backends);
    if (st == TG_OK) st = map_file_backends(s);
    if (st == TG_OK) st = tg_file_bind_external(s->file, s->file_backends, s->file->n_backends, opt->reserve_only);
    if (st != TG_OK) return st;
    struct tg_graph *g = s->file->graph;
    if (opt->snapshot) {
        st = tg_oracle_snapshot_take(g, &s->snap);
        if (st != TG_OK) return st;
        s->have_snap = true;
    }
    s->sched = tg_sched_new(s->backends.backends, NULL, s->backends.n, (size_t)(g->n_nodes + g->n_leafs) * 2 + 64,
                            opt->n_copies > 1, true);
    if (!s->sched) return TG_ERR_INVALID;
    tg_gallocr_set_policy(tg_sched_get_gallocr(s->sched), opt->policy);
    apply_pins(s);
    st = tg_sched_reserve(s->sched, g);
    if (st == TG_OK) {
        apply_pins(s); /* pins are per scheduled graph */
        st = tg_sched_alloc_graph(s->sched, g);
    }
    return st;
}

void session_close(struct session *s) {
    if (s->have_snap) tg_oracle_snapshot_free(&s->snap);
    tg_sched_free(s->sched);
    tg_file_free(s->file); /* frees the external buffers it bound */
    backend_set_free(&s->backends);
    memset(s, 0, sizeof *s);
}

static void print_bytes(FILE *out, size_t n) {
    if (n >= ((size_t)1 << 20)) fprintf(out, "%9.2f MiB", (double)n / (double)((size_t)1 << 20));
    else fprintf(out, "%9.2f KiB", (double)n / 1024.0);
}

void session_print_plan(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    struct tg_graph *copy = tg_sched_get_graph_copy(sched);
    int n_splits = tg_sched_get_n_splits(sched);
    fprintf(out, "graph %s: %d nodes, %d leafs; %d backends; %d splits; %d copies\n", s->opt.path,
            s->file->graph->n_nodes, s->file->graph->n_leafs, tg_sched_get_n_backends(sched), n_splits,
            tg_sched_get_n_copies(sched));
    for (int i = 0; i < n_splits; i++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(sched, i, &info) != TG_OK) continue;
        fprintf(out, "split %d on %s: nodes %d..%d, %d inputs", i,
                tg_backend_name(tg_sched_get_backend(sched, info.backend_id)), info.i_start, info.i_end - 1,
                info.n_inputs);
        for (int k = 0; k < info.n_inputs; k++) {
            fprintf(out, "%s%s (", k ? ", " : ": ", info.inputs[k]->name);
            print_bytes(out, tg_nbytes(info.inputs[k]));
            fputc(')', out);
        }
        fputc('\n', out);
    }
    fprintf(out, "\nnodes (step backend reason op name):\n");
    for (int i = 0; copy && i < copy->n_nodes; i++) {
        const struct tg_tensor *t = copy->nodes[i];
        int b = tg_sched_get_tensor_backend_id(sched, t);
        fprintf(out, "%5d %-8s %-16s %-14s %s\n", i, b >= 0 ? tg_backend_name(tg_sched_get_backend(sched, b)) : "-",
                tg_sched_reason_name(tg_sched_get_tensor_reason(sched, t)), tg_op_name(t->op), t->name);
    }
    fprintf(out, "\nbuffers (compute memory per backend, policy %s):\n",
            tg_gallocr_get_policy(tg_sched_get_gallocr(sched)) == TG_PLAN_BEST ? "best" : "ggml");
    fprintf(out, "  %-10s %13s %13s %13s %7s\n", "backend", "size", "peak", "lower bound", "ratio");
    for (int b = 0; b < tg_sched_get_n_backends(sched); b++) {
        struct tg_plan_report rep;
        if (tg_gallocr_get_report(tg_sched_get_gallocr(sched), b, &rep) != TG_OK) continue;
        fprintf(out, "  %-10s ", tg_backend_name(tg_sched_get_backend(sched, b)));
        print_bytes(out, tg_sched_get_buffer_size(sched, tg_sched_get_backend(sched, b)));
        fputs("  ", out);
        print_bytes(out, rep.peak);
        fputs("  ", out);
        print_bytes(out, rep.lower_bound);
        if (rep.lower_bound) fprintf(out, "  %6.3f\n", (double)rep.peak / (double)rep.lower_bound);
        else fputs("       -\n", out);
    }
}

void session_print_plan_json(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    struct tg_graph *copy = tg_sched_get_graph_copy(sched);
    fputs("{\"file\":", out);
    tgsched_json_string(out, s->opt.path);
    fprintf(out, ",\"n_nodes\":%d,\"n_leafs\":%d,\"n_copies\":%d,\"splits\":[", s->file->graph->n_nodes,
            s->file->graph->n_leafs, tg_sched_get_n_copies(sched));
    for (int i = 0; i < tg_sched_get_n_splits(sched); i++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(sched, i, &info) != TG_OK) continue;
        fprintf(out, "%s{\"backend\":", i ? "," : "");
        tgsched_json_string(out, tg_backend_name(tg_sched_get_backend(sched, info.backend_id)));
        fprintf(out, ",\"first_node\":%d,\"end_node\":%d,\"inputs\":[", info.i_start, info.i_end);
        for (int k = 0; k < info.n_inputs; k++) {
            fprintf(out, "%s{\"name\":", k ? "," : "");
            tgsched_json_string(out, info.inputs[k]->name);
            fprintf(out, ",\"bytes\":%zu}", tg_nbytes(info.inputs[k]));
        }
        fputs("]}", out);
    }
    fputs("],\"nodes\":[", out);
    for (int i = 0; copy && i < copy->n_nodes; i++) {
        const struct tg_tensor *t = copy->nodes[i];
        int b = tg_sched_get_tensor_backend_id(sched, t);
        fprintf(out, "%s{\"name\":", i ? "," : "");
        tgsched_json_string(out, t->name);
        fprintf(out, ",\"op\":\"%s\",\"backend\":", tg_op_name(t->op));
        tgsched_json_string(out, b >= 0 ? tg_backend_name(tg_sched_get_backend(sched, b)) : "");
        fprintf(out, ",\"reason\":\"%s\"}", tg_sched_reason_name(tg_sched_get_tensor_reason(sched, t)));
    }
    fputs("],\"buffers\":[", out);
    bool first = true;
    for (int b = 0; b < tg_sched_get_n_backends(sched); b++) {
        struct tg_plan_report rep;
        if (tg_gallocr_get_report(tg_sched_get_gallocr(sched), b, &rep) != TG_OK) continue;
        fprintf(out, "%s{\"backend\":", first ? "" : ",");
        tgsched_json_string(out, tg_backend_name(tg_sched_get_backend(sched, b)));
        fprintf(out, ",\"size\":%zu,\"peak\":%zu,\"lower_bound\":%zu,\"ratio\":%.6f}",
                tg_sched_get_buffer_size(sched, tg_sched_get_backend(sched, b)), rep.peak, rep.lower_bound,
                rep.lower_bound ? (double)rep.peak / (double)rep.lower_bound : 0.0);
        first = false;
    }
    fputs("]}\n", out);
}

enum tg_status session_write_svg(const struct session *s, const char *path) {
    struct tg_graph *copy = tg_sched_get_graph_copy(s->sched);
    if (!copy) return tg_fail(TG_ERR_INVALID, "no scheduled graph to draw");
    struct plan_map map;
    enum tg_status st = plan_map_build(copy, &map);
    if (st != TG_OK) return st;
    for (int p = 0; p < map.n_panels; p++) {
        struct plan_panel *pp = &map.panels[p];
        if (pp->n_rects == 0) continue;
        int b = tg_sched_get_tensor_buffer_id(s->sched, pp->rects[0].tensor);
        struct tg_plan_report rep;
        if (b >= 0 && tg_gallocr_get_report(tg_sched_get_gallocr(s->sched), b, &rep) == TG_OK) {
            pp->lower_bound = rep.lower_bound;
            snprintf(pp->title, sizeof pp->title, "%s compute buffer (%s)",
                     tg_backend_name(tg_sched_get_backend(s->sched, b)), tg_buft_name(pp->buffer->buft));
        }
    }
    st = plan_map_write_svg(&map, path);
    plan_map_free(&map);
    return st;
}

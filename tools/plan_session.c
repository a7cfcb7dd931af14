/* Options, loading, backends and scheduling for plan/check/run. */
#include "plan_session.h"

#include "tg-cpu.h"

#include "tgsched.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void session_print_common_help(FILE *out) {
    fprintf(out,
            "  --backends SPEC    backends in priority order, cpu last.  Default: the file's\n"
            "                     `backends` line (a simulated device per name, the last the CPU).\n"
            "                     SPEC: cpu | sim:NAME[:ops=all|OP+OP][:align=N][:pad=N][:max=N]\n"
            "                     [:offload=N][:host][:sync], comma-separated; sizes take K, M or G\n"
            "                     (max=36M); e.g. sim:gpu0,cpu\n"
            "  --layers-on B:N    weights and KV cache of layers 0..N-1 (tensors blk.K.*,\n"
            "                     cache_k_lK, cache_v_lK) on backend B, like llama.cpp's -ngl;\n"
            "                     N from 1 to the graph's number of layers.  Without it every\n"
            "                     weight stays where the file puts it (on the CPU for the corpus\n"
            "                     graphs), and ops run where their weights are\n"
            "  --plan ggml|best   memory planner: ggml's online best fit (the CPU's buffer in\n"
            "                     ggml's CPU buffer type, aligned to 32), or the offline planner\n"
            "                     that is never worse (default best)\n"
            "  --n-copies 1|%d     pipeline parallelism: %d copies of each split input\n"
            "  --json             one JSON document on stdout, errors included (docs/json.md)\n",
            TG_SCHED_MAX_COPIES, TG_SCHED_MAX_COPIES);
}

/* Options that only some verbs take: refused by the others instead of ignored. */
static int verb_only(const char *verb, const char *option, const char *verbs) {
    return tgsched_usage_error(verb, "%s is an option of %s", option, verbs);
}

/* Layer numbers --layers-on can name (its N is at most this); a larger number
 * in a tensor's name is part of the name, not a layer index. */
#define MAX_LAYERS 1000000

/* The value after an option, or NULL after a usage error in *rc: one that
 * looks like an option is one the user forgot a value before (`--svg --json`
 * would write a file named --json). */
static const char *option_value(const char *verb, const char *option, const char *val, const char *what, int *rc) {
    if (!val) {
        *rc = tgsched_usage_error(verb, "%s needs %s", option, what);
        return NULL;
    }
    if (strncmp(val, "--", 2) == 0) {
        *rc = tgsched_usage_error(verb, "%s needs %s, not the option '%s'", option, what, val);
        return NULL;
    }
    return val;
}

_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "--seed is read as unsigned long long");

/* A backend name as the file's `backends` line takes it (docs/graph-format.md):
 * --layers-on writes it there when the file does not name it. */
static bool backend_name_ok(const char *name, size_t len) {
    if (len == 0 || len > 31) return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '-') return false;
    }
    return true;
}

static int parse_layers_on(const char *verb, const char *val, struct session_options *opt) {
    const char *colon = strrchr(val, ':');
    if (!colon || colon[1] == '\0') {
        return tgsched_usage_error(verb, "--layers-on takes BACKEND:N (weights of layers 0..N-1 on BACKEND)");
    }
    if (!backend_name_ok(val, (size_t)(colon - val))) {
        return tgsched_usage_error(verb, "--layers-on '%s': the backend name must be 1 to 31 letters, digits, '_', "
                                   "'.' or '-' (a name of --backends or the file's backends line)", val);
    }
    char *end = NULL;
    errno = 0;
    long n = strtol(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || errno || *end || n > MAX_LAYERS) {
        return tgsched_usage_error(verb, "--layers-on '%s': N must be a number of layers from 1 to %d", val, MAX_LAYERS);
    }
    snprintf(opt->layers_backend, sizeof opt->layers_backend, "%.*s", (int)(colon - val), val);
    opt->layers_count = (int)n;
    return -1;
}

/* Reads the whole graph file once, so that a pipe (/dev/stdin) works: every
 * verb parses it more than once. */
static enum tg_status read_input(struct session_options *opt) {
    FILE *fp = fopen(opt->path, "rb");
    if (!fp) return tg_fail(TG_ERR_IO, "cannot open '%s': %s", opt->path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    enum tg_status st = text ? TG_OK : TG_ERR_ALLOC;
    while (st == TG_OK) {
        if (len == cap) {
            char *bigger = cap <= SIZE_MAX / 2 ? realloc(text, cap * 2) : NULL;
            if (!bigger) {
                st = TG_ERR_ALLOC;
                break;
            }
            text = bigger;
            cap *= 2;
        }
        size_t got = fread(text + len, 1, cap - len, fp);
        if (got == 0) break;
        len += got;
    }
    if (st == TG_ERR_ALLOC) st = tg_fail(TG_ERR_ALLOC, "cannot read '%s': out of host memory", opt->path);
    else if (ferror(fp)) st = tg_fail(TG_ERR_IO, "cannot read '%s': %s", opt->path, strerror(errno));
    fclose(fp);
    if (st != TG_OK) {
        free(text);
        return st;
    }
    opt->text = text;
    opt->text_len = len;
    return TG_OK;
}

int session_parse_args(const char *verb, int argc, char **argv, struct session_options *opt,
                       void (*help)(FILE *out)) {
    memset(opt, 0, sizeof *opt);
    opt->policy = TG_PLAN_BEST;
    opt->n_copies = 1;
    opt->seed = 1;
    bool computes = strcmp(verb, "run") == 0;
    int rc = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        const char *val = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help(stdout);
            return TGSCHED_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            opt->json = true;
            opt->given |= SESSION_OPT_JSON;
        } else if (strcmp(a, "--nodes") == 0) {
            if (computes) return verb_only(verb, a, "plan and check only");
            opt->list_nodes = true;
            opt->given |= SESSION_OPT_NODES;
        } else if (strcmp(a, "--backends") == 0) {
            if (!(val = option_value(verb, a, next, "a spec", &rc))) return rc;
            opt->backends_spec = val;
            opt->given |= SESSION_OPT_BACKENDS;
            i++;
        } else if (strcmp(a, "--plan") == 0) {
            if (!(val = option_value(verb, a, next, "a planner, 'ggml' or 'best'", &rc))) return rc;
            if (strcmp(val, "ggml") != 0 && strcmp(val, "best") != 0) {
                return tgsched_usage_error(verb, "--plan takes 'ggml' or 'best'");
            }
            opt->policy = strcmp(val, "ggml") == 0 ? TG_PLAN_GGML : TG_PLAN_BEST;
            opt->given |= SESSION_OPT_PLAN;
            i++;
        } else if (strcmp(a, "--n-copies") == 0) {
            if (!(val = option_value(verb, a, next, "a number of copies", &rc))) return rc;
            char *end = NULL;
            long n = strtol(val, &end, 10);
            if (*end || (n != 1 && n != TG_SCHED_MAX_COPIES)) {
                return tgsched_usage_error(verb, "--n-copies takes 1 or %d (pipeline parallel)", TG_SCHED_MAX_COPIES);
            }
            opt->n_copies = (int)n;
            opt->given |= SESSION_OPT_N_COPIES;
            i++;
        } else if (strcmp(a, "--layers-on") == 0) {
            if (!(val = option_value(verb, a, next, "BACKEND:N", &rc))) return rc;
            if ((rc = parse_layers_on(verb, val, opt)) >= 0) return rc;
            opt->given |= SESSION_OPT_LAYERS_ON;
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            if (!computes) return verb_only(verb, a, "run only (the input values it computes with)");
            if (!(val = option_value(verb, a, next, "a number", &rc))) return rc;
            unsigned long long seed = 0; /* 64 bits: the static assert below */
            if (!tgsched_parse_u64(val, &seed)) {
                return tgsched_usage_error(verb, "--seed takes a decimal number from 0 to %llu, not '%s'",
                                           (unsigned long long)UINT64_MAX, val);
            }
            opt->seed = (uint64_t)seed;
            opt->given |= SESSION_OPT_SEED;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (!computes) return verb_only(verb, a, "run only (the CPU threads it computes with)");
            if (!(val = option_value(verb, a, next, "a number of threads", &rc))) return rc;
            unsigned long long n = 0;
            if (!tgsched_parse_u64(val, &n) || n < 1 || n > 64) return tgsched_usage_error(verb, "--threads takes 1..64");
            opt->threads = (int)n;
            opt->given |= SESSION_OPT_THREADS;
            i++;
        } else if (strcmp(a, "--svg") == 0) {
            if (computes) return verb_only(verb, a, "plan and check only (run computes; draw its plan with plan --svg)");
            if (!(val = option_value(verb, a, next, "an output path", &rc))) return rc;
            opt->svg_path = val;
            opt->given |= SESSION_OPT_SVG;
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
    enum tg_status st = read_input(opt);
    if (st != TG_OK) return tgsched_fail(tgsched_exit_for(st), "%s", tg_last_error());
    return -1;
}

void session_options_free(struct session_options *opt) {
    free(opt->text);
    opt->text = NULL;
    opt->text_len = 0;
}

const char *session_option_name(unsigned bit) {
    switch (bit) {
    case SESSION_OPT_JSON: return "--json";
    case SESSION_OPT_NODES: return "--nodes";
    case SESSION_OPT_BACKENDS: return "--backends";
    case SESSION_OPT_PLAN: return "--plan";
    case SESSION_OPT_N_COPIES: return "--n-copies";
    case SESSION_OPT_LAYERS_ON: return "--layers-on";
    case SESSION_OPT_SEED: return "--seed";
    case SESSION_OPT_THREADS: return "--threads";
    case SESSION_OPT_SVG: return "--svg";
    default: return "an option";
    }
}

enum tg_status session_parse_file(const struct session_options *opt, struct tg_file **out) {
    return tg_file_parse(opt->text, opt->text_len, opt->path, out);
}

static enum tg_status map_file_backends(struct session *s) {
    struct tg_file *f = s->file;
    for (int i = 0; i < f->n_backends; i++) {
        int k = backend_set_find(&s->backends, f->backend_names[i]);
        if (k < 0 && strcmp(f->backend_names[i], s->opt.layers_backend) == 0) {
            /* the option put it there, not the file: blame the option */
            return tg_fail(TG_ERR_INVALID, "--layers-on %s:%d names backend '%s', which --backends does not define "
                           "(add e.g. sim:%s to --backends, or name one of its backends)", s->opt.layers_backend,
                           s->opt.layers_count, f->backend_names[i], f->backend_names[i]);
        }
        if (k < 0) {
            return tg_fail(TG_ERR_INVALID, "%s places tensors on backend '%s', which --backends does not define "
                           "(add e.g. sim:%s to the spec)", s->opt.path, f->backend_names[i], f->backend_names[i]);
        }
        s->file_backends[i] = s->backends.backends[k];
    }
    return TG_OK;
}

/* The layer number at s (decimal digits) and where it ends; -1 when there is
 * none or it is too large for --layers-on to name (then the digits are only
 * part of a name: a layer count of a billion would mean nothing). */
static int layer_number(const char *s, const char **end) {
    int n = 0;
    const char *c = s;
    for (; isdigit((unsigned char)*c); c++) {
        n = n * 10 + (*c - '0'); /* no overflow: n stays below MAX_LAYERS */
        if (n >= MAX_LAYERS) return -1;
    }
    *end = c;
    return c == s ? -1 : n;
}

/* Layer of a per-layer tensor (weights blk.K.*, KV cache cache_k_lK / cache_v_lK), else -1. */
static int layer_of(const struct tg_file_tensor *ft) {
    const char *name = ft->tensor->name;
    const char *end = NULL;
    if (ft->placement == TG_PLACE_WEIGHTS && strncmp(name, "blk.", 4) == 0) {
        int layer = layer_number(name + 4, &end);
        return layer >= 0 && *end == '.' ? layer : -1;
    }
    if (ft->placement == TG_PLACE_DATA &&
        (strncmp(name, "cache_k_l", 9) == 0 || strncmp(name, "cache_v_l", 9) == 0)) {
        return layer_number(name + 9, &end);
    }
    return -1;
}

static int count_layers(const struct tg_file *f) {
    int n = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        int layer = f->tensors[i].placement == TG_PLACE_WEIGHTS ? layer_of(&f->tensors[i]) : -1;
        if (layer + 1 > n) n = layer + 1;
    }
    return n;
}

/* --layers-on: move the weights and KV cache of the first N layers to a backend. */
static enum tg_status place_layers(struct session *s) {
    const char *name = s->opt.layers_backend;
    int n = s->opt.layers_count;
    if (!name[0]) return TG_OK;
    if (s->n_layers == 0) {
        return tg_fail(TG_ERR_INVALID, "--layers-on %s:%d: %s has no per-layer weights (tensors named blk.N.*), "
                       "so there are no layers to place; leave the option out", name, n, s->opt.path);
    }
    if (n < 1 || n > s->n_layers) {
        return tg_fail(TG_ERR_INVALID, "--layers-on %s:%d: the graph has %d layers (0..%d); give N from 1 to %d, "
                       "or leave the option out to keep every weight where the file puts it", name, n, s->n_layers,
                       s->n_layers - 1, s->n_layers);
    }
    int b = -1;
    for (int i = 0; i < s->file->n_backends; i++) {
        if (strcmp(s->file->backend_names[i], name) == 0) b = i;
    }
    if (b < 0) {
        if (s->file->n_backends >= TG_IO_MAX_BACKENDS) return tg_fail(TG_ERR_INVALID, "too many backends");
        /* a backend the file does not name: add it in front (highest priority) */
        b = 0;
        for (int i = s->file->n_backends; i > 0; i--) memcpy(s->file->backend_names[i], s->file->backend_names[i - 1], 32);
        snprintf(s->file->backend_names[0], 32, "%s", name);
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
        int layer = layer_of(ft);
        if (layer >= 0 && layer < n) {
            ft->placement_backend = b;
            moved++;
        }
    }
    tgsched_note("--layers-on %s:%d placed the %d weight and KV-cache tensors of layers 0..%d (of %d) on %s", name, n,
                 moved, n - 1, s->n_layers, name);
    return TG_OK;
}

static void apply_pins(struct session *s) {
    for (int i = 0; i < s->file->n_tensors; i++) {
        const struct tg_file_tensor *ft = &s->file->tensors[i];
        if (ft->pinned_backend >= 0) tg_sched_set_tensor_backend(s->sched, ft->tensor, s->file_backends[ft->pinned_backend]);
    }
}

/* A backend before the CPU that got no node: say why and what to do (a
 * plan that silently leaves the device idle looks like a working offload). */
static void note_idle_backends(struct session *s) {
    struct tg_graph *copy = tg_sched_get_graph_copy(s->sched);
    int n_backends = tg_sched_get_n_backends(s->sched);
    int nodes[TG_SCHED_MAX_BACKENDS] = {0}, weights[TG_SCHED_MAX_BACKENDS] = {0};
    for (int i = 0; copy && i < copy->n_nodes; i++) {
        int b = tg_sched_get_tensor_backend_id(s->sched, copy->nodes[i]);
        if (b >= 0) nodes[b]++;
    }
    int n_weights = 0;
    for (int i = 0; i < s->file->n_tensors; i++) {
        const struct tg_file_tensor *ft = &s->file->tensors[i];
        if (ft->placement != TG_PLACE_WEIGHTS) continue;
        n_weights++;
        int b = tg_sched_get_backend_id(s->sched, s->file_backends[ft->placement_backend]);
        if (b >= 0) weights[b]++;
    }
    for (int b = 0; b < n_backends - 1; b++) {
        if (nodes[b] > 0) continue;
        const char *name = tg_backend_name(tg_sched_get_backend(s->sched, b));
        char how[256];
        if (s->n_layers > 0) {
            snprintf(how, sizeof how, "--layers-on %s:N (N from 1 to %d, the graph's layers)", name, s->n_layers);
        } else {
            snprintf(how, sizeof how, "buf=weights@%s on weight lines of the file", name);
        }
        if (weights[b]) {
            tgsched_note("%s runs no node although %d weight tensors are on it: no op reading them is supported there "
                         "(see the ops= of its --backends item)", name, weights[b]);
            continue;
        }
        tgsched_note("%s runs no node: an op runs where its weights are, none of this graph's %d weight tensors is on "
                     "%s, and the other ops follow their neighbours. To give %s work, put weights on it with %s, or let "
                     "it take ops on host weights at batch sizes of at least B with --backends sim:%s:offload=B,...",
                     name, n_weights, name, name, how, name);
    }
}

/* By buffer id (unknown ids last), then by the order the map found the buffers in (chunk). */
static int cmp_panel_by_buffer_id(const void *pa, const void *pb) {
    const struct plan_panel *a = pa, *b = pb;
    unsigned ia = (unsigned)a->buffer_id, ib = (unsigned)b->buffer_id; /* -1 sorts last */
    if (ia != ib) return ia < ib ? -1 : 1;
    return (a->chunk > b->chunk) - (a->chunk < b->chunk);
}

enum tg_status session_open(struct session *s, const struct session_options *opt) {
    memset(s, 0, sizeof *s);
    s->opt = *opt;
    enum tg_status st = session_parse_file(opt, &s->file);
    if (st != TG_OK) return st;
    s->n_layers = count_layers(s->file);
    st = place_layers(s);
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
    /* ggml's planner plans in ggml's CPU buffer type, which aligns to 32 */
    for (int i = 0; i < s->backends.n; i++) s->bufts[i] = tg_backend_get_default_buffer_type(s->backends.backends[i]);
    tg_backend *cpu = s->backends.backends[s->backends.n - 1];
    if (opt->policy == TG_PLAN_GGML && tg_backend_is_cpu(cpu)) s->bufts[s->backends.n - 1] = tg_cpu_buffer_type_aligned(32);
    s->sched = tg_sched_new(s->backends.backends, s->bufts, s->backends.n, (size_t)(g->n_nodes + g->n_leafs) * 2 + 64,
                            opt->n_copies > 1, true);
    if (!s->sched) return TG_ERR_INVALID;
    tg_gallocr_set_policy(tg_sched_get_gallocr(s->sched), opt->policy);
    apply_pins(s);
    st = tg_sched_reserve(s->sched, g);
    if (st == TG_OK) {
        apply_pins(s); /* pins are per scheduled graph */
        st = tg_sched_alloc_graph(s->sched, g);
    }
    if (st != TG_OK) return st;
    note_idle_backends(s);
    if (!opt->reserve_only) return TG_OK;
    st = plan_map_build(tg_sched_get_graph_copy(s->sched), &s->map);
    if (st != TG_OK) return st;
    s->have_map = true;
    for (int p = 0; p < s->map.n_panels; p++) {
        struct plan_panel *pp = &s->map.panels[p];
        for (int i = 0; i < pp->n_rects; i++) {
            pp->rects[i].split_copy = tg_sched_get_copy_source(s->sched, pp->rects[i].tensor) != NULL;
        }
        if (pp->n_rects) pp->buffer_id = tg_sched_get_tensor_buffer_id(s->sched, pp->rects[0].tensor);
        pp->chunk = p; /* the order of first use, kept among a buffer id's chunks by the sort below */
    }
    /* the map in the text report's order, buffer id by buffer id */
    qsort(s->map.panels, (size_t)s->map.n_panels, sizeof *s->map.panels, cmp_panel_by_buffer_id);
    for (int p = 0; p < s->map.n_panels; p++) {
        struct plan_panel *pp = &s->map.panels[p];
        int first = p, last = p;
        while (first > 0 && s->map.panels[first - 1].buffer_id == pp->buffer_id) first--;
        while (last + 1 < s->map.n_panels && s->map.panels[last + 1].buffer_id == pp->buffer_id) last++;
        pp->chunk = p - first;
        pp->n_chunks = last - first + 1;
        int b = pp->buffer_id;
        struct tg_plan_report rep;
        if (b >= 0 && tg_gallocr_get_report(tg_sched_get_gallocr(s->sched), b, &rep) == TG_OK) {
            const char *name = tg_backend_name(tg_sched_get_backend(s->sched, b));
            /* the bound is the backend's over all its chunks: one chunk is not measured against it */
            pp->lower_bound = pp->n_chunks == 1 ? rep.lower_bound : 0;
            if (pp->n_chunks == 1) snprintf(pp->title, sizeof pp->title, "%s compute buffer", name);
            else snprintf(pp->title, sizeof pp->title, "%s compute buffer, chunk %d of %d", name, pp->chunk + 1, pp->n_chunks);
        }
    }
    return TG_OK;
}

void session_close(struct session *s) {
    if (s->have_map) plan_map_free(&s->map);
    if (s->have_snap) tg_oracle_snapshot_free(&s->snap);
    tg_sched_free(s->sched);
    tg_file_free(s->file); /* frees the external buffers it bound */
    backend_set_free(&s->backends);
    memset(s, 0, sizeof *s);
}

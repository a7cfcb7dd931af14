/* The reports of plan and check: a short summary (what ran where, where the
 * memory went, what it means), the per-node listing with its legend on
 * request, and the same facts as JSON. */
#include "plan_session.h"
#include "tgsched.h"

#include <stdlib.h>
#include <string.h>

#define PEAK_TENSORS_SHOWN 4
#define SPLITS_SHOWN 8

/* What each assignment reason means, for the legend of the per-node listing
 * (docs/scheduler.md "Assignment" has the passes in full). */
static const char *reason_meaning(enum tg_sched_reason r) {
    switch (r) {
    case TG_REASON_NONE: return "not assigned";
    case TG_REASON_PREALLOCATED: return "its memory (or its view root's) already exists in this backend's buffer";
    case TG_REASON_USER_PIN: return "pinned to this backend by the caller (backend= in the file)";
    case TG_REASON_INPUT_CPU: return "a graph input: inputs are set on the CPU";
    case TG_REASON_WEIGHTS: return "reads weights that live in this backend's memory: ops run where their weights are";
    case TG_REASON_OFFLOAD: return "reads host weights, and this backend takes such ops for large batches (offload=)";
    case TG_REASON_EXPAND_GPU_DOWN: return "took the backend of the nearest earlier node on an accelerator";
    case TG_REASON_EXPAND_GPU_UP: return "took the backend of the nearest later node on an accelerator";
    case TG_REASON_EXPAND_DOWN: return "took the backend of the nearest earlier assigned node";
    case TG_REASON_EXPAND_UP: return "took the backend of the nearest later assigned node";
    case TG_REASON_UPGRADE: return "moved up to a higher-priority backend of the same memory that reads all its sources";
    case TG_REASON_MOST_SOURCES: return "the backend that supports it and already holds most of its sources";
    case TG_REASON_FIRST_SUPPORTING: return "nothing else decided: the first backend that supports the op";
    case TG_REASON_VIEW_SOURCE: return "a view: it lives where the tensor it views lives";
    case TG_REASON_FOLLOW_CONSUMER: return "a leftover source (a constant): goes where the node reading it runs";
    case TG_REASON_SPLIT_COPY: return "a copy of a split input, added by the scheduler (named BACKEND#SOURCE#N)";
    case TG_REASON_COUNT: break;
    }
    return "?";
}

static const char *policy_name(const struct session *s) {
    return tg_gallocr_get_policy(tg_sched_get_gallocr(s->sched)) == TG_PLAN_BEST ? "best" : "ggml";
}

static const char *backend_of(const struct session *s, int id) {
    return id >= 0 ? tg_backend_name(tg_sched_get_backend(s->sched, id)) : "-";
}

/* Backend b's tensors and their bytes over every chunk of its compute buffer
 * (a max buffer size splits it into several, each a panel of the map). */
static int count_tensors(const struct session *s, int b, size_t *bytes) {
    int n = 0;
    *bytes = 0;
    for (int p = 0; p < s->map.n_panels; p++) {
        const struct plan_panel *pp = &s->map.panels[p];
        if (pp->buffer_id != b) continue;
        n += pp->n_rects;
        for (int i = 0; i < pp->n_rects; i++) *bytes += pp->rects[i].size;
    }
    return n;
}

/* The step where backend b has the most bytes live over all its chunks (the
 * earliest such, -1 when it holds nothing), counted as each panel's peak is. */
static int backend_peak(const struct session *s, int b, size_t *live_at_peak) {
    *live_at_peak = 0;
    long long *delta = calloc((size_t)s->map.n_steps + 2, sizeof *delta);
    if (!delta) return -1;
    bool any = false;
    for (int p = 0; p < s->map.n_panels; p++) {
        const struct plan_panel *pp = &s->map.panels[p];
        if (pp->buffer_id != b) continue;
        any |= pp->n_rects > 0;
        plan_panel_add_live(pp, delta);
    }
    const int peak_step = any ? plan_live_peak(delta, s->map.n_steps, live_at_peak) : -1;
    free(delta);
    return peak_step;
}

/* label, then text wrapped at WRAP_COLUMNS; continuation lines indented by indent columns */
#define WRAP_COLUMNS 100

static void print_wrapped_at(FILE *out, const char *label, int indent, const char *text) {
    fprintf(out, "%-*s", indent, label);
    int col = (int)strlen(label) > indent ? (int)strlen(label) : indent, start = col;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col > start && col + 1 + (int)word > WRAP_COLUMNS) {
            fprintf(out, "\n%*s", indent, "");
            col = start = indent;
        } else if (col > start) {
            fputc(' ', out);
            col++;
        }
        fwrite(text, 1, word, out);
        col += (int)word;
        text += word;
        while (*text == ' ') text++;
    }
    fputc('\n', out);
}

static void print_wrapped(FILE *out, const char *label, const char *text) { print_wrapped_at(out, label, 10, text); }

static void print_schedule(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    int n_splits = tg_sched_get_n_splits(sched);
    char b1[32];
    fprintf(out, "schedule  %d split%s (a split is a run of nodes on one backend; what it reads from another\n"
                 "          backend's memory is copied in first):\n", n_splits, n_splits == 1 ? "" : "s");
    for (int i = 0; i < n_splits; i++) {
        struct tg_sched_split_info info;
        if (i == SPLITS_SHOWN && n_splits > SPLITS_SHOWN + 1) {
            fprintf(out, "            ... and %d more (--nodes lists every step, --json every split)\n", n_splits - i);
            break;
        }
        if (tg_sched_get_split_info(sched, i, &info) != TG_OK) continue;
        char label[64], text[1024];
        snprintf(label, sizeof label, "            %-3d %-8s", i, backend_of(s, info.backend_id));
        int len = snprintf(text, sizeof text, "steps %d..%d, %d node%s", info.i_start, info.i_end - 1,
                           info.i_end - info.i_start, info.i_end - info.i_start == 1 ? "" : "s");
        size_t bytes = 0;
        for (int k = 0; k < info.n_inputs; k++) bytes += tg_nbytes(info.inputs[k]);
        if (info.n_inputs) {
            tgsched_format_bytes(b1, sizeof b1, bytes);
            len += snprintf(text + len, sizeof text - (size_t)len, ", %d input%s copied in (%s):", info.n_inputs,
                            info.n_inputs == 1 ? "" : "s", b1);
            for (int k = 0; k < info.n_inputs && k < 6 && (size_t)len < sizeof text; k++) {
                len += snprintf(text + len, sizeof text - (size_t)len, "%s %s", k ? "," : "", info.inputs[k]->name);
            }
            if (info.n_inputs > 6 && (size_t)len < sizeof text) snprintf(text + len, sizeof text - (size_t)len, ", ...");
        }
        print_wrapped_at(out, label, 26, text);
    }
    struct tg_graph *copy = tg_sched_get_graph_copy(sched);
    int n_steps = copy ? copy->n_nodes : 0, n_graph = s->file->graph->n_nodes;
    if (n_steps != n_graph) {
        fprintf(out, "          %d steps: the graph's %d nodes and %d the scheduler added to copy split inputs\n",
                n_steps, n_graph, n_steps - n_graph);
    }
}

static void print_peak(const struct session *s, const struct plan_panel *pp, const char *backend, FILE *out) {
    int shown[PEAK_TENSORS_SHOWN];
    int n_live = plan_panel_live_set(pp, pp->peak_step, shown, PEAK_TENSORS_SHOWN);
    struct tg_graph *copy = tg_sched_get_graph_copy(s->sched);
    char text[1024], b1[32];
    tgsched_format_bytes(b1, sizeof b1, pp->peak_live);
    int len = snprintf(text, sizeof text, "%s is fullest at step %d (%s) with %s live in %d tensor%s:", backend,
                       pp->peak_step, copy && pp->peak_step >= 0 ? copy->nodes[pp->peak_step]->name : "-", b1, n_live,
                       n_live == 1 ? "" : "s");
    int n_shown = n_live < PEAK_TENSORS_SHOWN ? n_live : PEAK_TENSORS_SHOWN;
    for (int k = 0; k < n_shown && len > 0 && (size_t)len < sizeof text; k++) {
        const struct plan_rect *r = &pp->rects[shown[k]];
        tgsched_format_bytes(b1, sizeof b1, r->size);
        len += snprintf(text + len, sizeof text - (size_t)len, "%s %s %s", k ? "," : "", r->tensor->name, b1);
    }
    if (n_live > n_shown && len > 0 && (size_t)len < sizeof text) len += snprintf(text + len, sizeof text - (size_t)len, ", ...");
    int top = plan_panel_top(pp);
    if (top >= 0 && pp->lower_bound && pp->peak > pp->lower_bound && len > 0 && (size_t)len < sizeof text) {
        /* a plan above its lower bound: say what reaches the highest byte */
        const struct plan_rect *r = &pp->rects[top];
        snprintf(text + len, sizeof text - (size_t)len, "; its highest byte is used by %s (steps %d..%d)",
                 r->tensor->name, r->start, r->end);
    }
    print_wrapped(out, "", text);
}

static void print_memory(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    char b1[32], b2[32], b3[32];
    fprintf(out, "memory    compute buffer per backend, planned by the '%s' planner.  lower bound: the most\n"
                 "          bytes live at one step, which no plan can go below; ratio = size / lower bound:\n",
            policy_name(s));
    fprintf(out, "            %-8s %12s %12s %7s %8s %16s\n", "backend", "size", "lower bound", "ratio", "tensors",
            "without reuse");
    for (int b = 0; b < tg_sched_get_n_backends(sched); b++) {
        struct tg_plan_report rep;
        if (tg_gallocr_get_report(tg_sched_get_gallocr(sched), b, &rep) != TG_OK) continue;
        size_t without_reuse;
        int n_tensors = count_tensors(s, b, &without_reuse);
        tgsched_format_bytes(b1, sizeof b1, tg_sched_get_buffer_size(sched, tg_sched_get_backend(sched, b)));
        tgsched_format_bytes(b2, sizeof b2, rep.lower_bound);
        tgsched_format_bytes(b3, sizeof b3, without_reuse);
        fprintf(out, "            %-8s %12s %12s ", backend_of(s, b), b1, b2);
        if (rep.lower_bound) fprintf(out, "%7.3f", (double)rep.peak / (double)rep.lower_bound);
        else fprintf(out, "%7s", "-");
        fprintf(out, " %8d %16s\n", n_tensors, b3);
    }
    /* the panels are in buffer id order (session_open), a backend's chunks in turn */
    for (int p = 0; p < s->map.n_panels; p++) {
        const struct plan_panel *pp = &s->map.panels[p];
        if (pp->buffer_id < 0 || pp->peak_step < 0) continue;
        char who[64];
        if (pp->n_chunks > 1) snprintf(who, sizeof who, "%s chunk %d of %d", backend_of(s, pp->buffer_id), pp->chunk + 1, pp->n_chunks);
        else snprintf(who, sizeof who, "%s", backend_of(s, pp->buffer_id));
        print_peak(s, pp, who, out);
    }
}

static void print_nodes(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    struct tg_graph *copy = tg_sched_get_graph_copy(sched);
    bool used[TG_REASON_COUNT] = {0};
    fprintf(out, "\nnodes in execution order (step: position in the scheduled graph, the file's nodes plus\n"
                 "the copies the scheduler added):\n");
    fprintf(out, "  %5s %-8s %-16s %-14s %s\n", "step", "backend", "reason", "op", "name");
    for (int i = 0; copy && i < copy->n_nodes; i++) {
        const struct tg_tensor *t = copy->nodes[i];
        enum tg_sched_reason r = tg_sched_get_tensor_reason(sched, t);
        if ((unsigned)r < TG_REASON_COUNT) used[r] = true;
        fprintf(out, "  %5d %-8s %-16s %-14s %s\n", i, backend_of(s, tg_sched_get_tensor_backend_id(sched, t)),
                tg_sched_reason_name(r), tg_op_name(t->op), t->name);
    }
    fprintf(out, "\nreasons (why a node runs on its backend; the passes are in docs/scheduler.md):\n");
    for (int r = 0; r < TG_REASON_COUNT; r++) {
        if (used[r]) fprintf(out, "  %-16s %s\n", tg_sched_reason_name((enum tg_sched_reason)r), reason_meaning((enum tg_sched_reason)r));
    }
}

void session_print_plan(const struct session *s, FILE *out) {
    const struct tg_graph *g = s->file->graph;
    char text[1024];
    int len = snprintf(text, sizeof text, "%s: %d nodes (ops, in execution order), %d leafs (weights, inputs, KV cache)",
                       s->opt.path, g->n_nodes, g->n_leafs);
    if (s->n_layers && len > 0 && (size_t)len < sizeof text) snprintf(text + len, sizeof text - (size_t)len, ", %d layers", s->n_layers);
    print_wrapped(out, "graph", text);
    fprintf(out, "backends  ");
    for (int b = 0; b < tg_sched_get_n_backends(s->sched); b++) fprintf(out, "%s%s", b ? ", " : "", backend_of(s, b));
    fprintf(out, " (priority order)%s\n", tg_sched_get_n_copies(s->sched) > 1 ? ", pipeline parallel" : "");
    print_schedule(s, out);
    print_memory(s, out);
    for (int i = 0; i < tgsched_n_notes(); i++) print_wrapped(out, "note", tgsched_note_text(i));
}

void session_print_tail(const struct session *s, FILE *out) {
    if (s->opt.list_nodes) print_nodes(s, out);
    else fprintf(out, "more      --nodes: each node's backend and why; --svg FILE: the memory map; --json: all of it\n");
}

/* ---- JSON: the plan's fields (docs/json.md) ---- */

/* One planned tensor of a buffer.  New per-tensor facts go here. */
static void json_tensor(const struct session *s, const struct plan_panel *pp, const struct plan_rect *r, FILE *out) {
    (void)s;
    fputs("{\"name\":", out);
    tgsched_json_string(out, r->tensor->name);
    fprintf(out, ",\"op\":\"%s\",\"type\":\"%s\",\"chunk\":%d,\"offset\":%zu,\"size\":%zu,\"first_step\":%d,\"last_step\":%d,"
                 "\"split_copy\":%s,\"inplace_of\":",
            tg_op_name(r->tensor->op), tg_type_name(r->tensor->type), pp->chunk, r->offset, r->size, r->start, r->end,
            r->split_copy ? "true" : "false");
    if (r->inplace_parent >= 0) tgsched_json_string(out, pp->rects[r->inplace_parent].tensor->name);
    else fputs("null", out);
    fputc('}', out);
}

static void json_buffers(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    fputs("\"buffers\":[", out);
    bool first = true;
    for (int b = 0; b < tg_sched_get_n_backends(sched); b++) {
        struct tg_plan_report rep;
        if (tg_gallocr_get_report(tg_sched_get_gallocr(sched), b, &rep) != TG_OK) continue;
        size_t peak_live;
        int peak_step = backend_peak(s, b, &peak_live);
        fprintf(out, "%s{\"backend\":", first ? "" : ",");
        tgsched_json_string(out, backend_of(s, b));
        fprintf(out, ",\"size\":%zu,\"peak\":%zu,\"lower_bound\":%zu,\"ratio\":%.6f,\"peak_step\":%d,\"peak_live\":%zu,"
                     "\"tensors\":[",
                tg_sched_get_buffer_size(sched, tg_sched_get_backend(sched, b)), rep.peak, rep.lower_bound,
                rep.lower_bound ? (double)rep.peak / (double)rep.lower_bound : 0.0, peak_step, peak_live);
        bool first_tensor = true;
        for (int p = 0; p < s->map.n_panels; p++) {
            const struct plan_panel *pp = &s->map.panels[p];
            for (int i = 0; pp->buffer_id == b && i < pp->n_rects; i++) {
                if (!first_tensor) fputc(',', out);
                json_tensor(s, pp, &pp->rects[i], out);
                first_tensor = false;
            }
        }
        fputs("]}", out);
        first = false;
    }
    fputs("],", out);
}

void session_print_plan_json(const struct session *s, FILE *out) {
    const tg_sched *sched = s->sched;
    struct tg_graph *copy = tg_sched_get_graph_copy(sched);
    fputs("\"file\":", out);
    tgsched_json_string(out, s->opt.path);
    fprintf(out, ",\"graph\":{\"n_nodes\":%d,\"n_leafs\":%d,\"n_layers\":%d},\"n_steps\":%d,\"policy\":\"%s\","
                 "\"n_copies\":%d,\"backends\":[",
            s->file->graph->n_nodes, s->file->graph->n_leafs, s->n_layers, copy ? copy->n_nodes : 0, policy_name(s),
            tg_sched_get_n_copies(sched));
    for (int b = 0; b < tg_sched_get_n_backends(sched); b++) {
        if (b) fputc(',', out);
        tgsched_json_string(out, backend_of(s, b));
    }
    fputs("],\"splits\":[", out);
    for (int i = 0; i < tg_sched_get_n_splits(sched); i++) {
        struct tg_sched_split_info info;
        if (tg_sched_get_split_info(sched, i, &info) != TG_OK) continue;
        fprintf(out, "%s{\"backend\":", i ? "," : "");
        tgsched_json_string(out, backend_of(s, info.backend_id));
        fprintf(out, ",\"first_step\":%d,\"end_step\":%d,\"inputs\":[", info.i_start, info.i_end);
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
        fprintf(out, "%s{\"step\":%d,\"name\":", i ? "," : "", i);
        tgsched_json_string(out, t->name);
        fprintf(out, ",\"op\":\"%s\",\"backend\":", tg_op_name(t->op));
        tgsched_json_string(out, backend_of(s, tg_sched_get_tensor_backend_id(sched, t)));
        fprintf(out, ",\"reason\":\"%s\"}", tg_sched_reason_name(tg_sched_get_tensor_reason(sched, t)));
    }
    fputs("],", out);
    json_buffers(s, out);
}

enum tg_status session_write_svg(const struct session *s, const char *path) {
    if (!s->have_map) return tg_fail(TG_ERR_INVALID, "no scheduled graph to draw");
    return plan_map_write_svg(&s->map, path);
}

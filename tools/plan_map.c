/* Memory-map model of a bound graph (see plan_map.h). */
#include "plan_map.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One sighting of a planned root: produced by node `step`, or read (or a leaf) at `step`. */
struct sighting {
    const struct tg_tensor *root;
    int step;
    int seq;       /* order of appearance, for a stable rect order */
    bool produced; /* the node computing the root (else a read, or a leaf) */
};

static const struct tg_tensor *root_of(const struct tg_tensor *t) { return t->view_src ? t->view_src : t; }

static bool planned(const struct tg_tensor *t) {
    return t->buffer && t->data && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE;
}

static int cmp_sighting(const void *pa, const void *pb) {
    const struct sighting *a = pa, *b = pb;
    if (a->root != b->root) return (uintptr_t)a->root < (uintptr_t)b->root ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

struct span {
    const struct tg_tensor *root;
    int start, end, seq;
};

static int cmp_span_order(const void *pa, const void *pb) {
    const struct span *a = pa, *b = pb;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static void sight(struct sighting *s, int *n, const struct tg_tensor *t, int step, bool produced) {
    const struct tg_tensor *r = root_of(t);
    if (planned(r)) {
        s[*n] = (struct sighting){r, step, *n, produced && r == t};
        (*n)++;
    }
}

/* Lifetimes of planned roots: from the step they are produced (0 for leafs
 * and inputs, which are read before any node makes them) to the last step
 * anything reads them (the end for outputs). */
static int collect_spans(const struct tg_graph *g, struct span **out) {
    size_t cap = (size_t)g->n_leafs + (size_t)g->n_nodes * (TG_MAX_SRC + 1) + 1;
    struct sighting *s = malloc(cap * sizeof *s);
    if (!s) return -1;
    int n = 0;
    for (int i = 0; i < g->n_leafs; i++) sight(s, &n, g->leafs[i], 0, false);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *node = g->nodes[i];
        for (int k = 0; k < TG_MAX_SRC; k++) {
            if (node->src[k]) sight(s, &n, node->src[k], i, false);
        }
        sight(s, &n, node, i, true);
    }
    qsort(s, (size_t)n, sizeof *s, cmp_sighting);
    struct span *spans = malloc(((size_t)n + 1) * sizeof *spans);
    int n_spans = 0;
    for (int i = 0; spans && i < n;) {
        /* sightings of one root, in order of appearance: the first says whether it was produced */
        struct span sp = {s[i].root, s[i].produced ? s[i].step : 0, 0, s[i].seq};
        for (; i < n && s[i].root == sp.root; i++) {
            if (s[i].step > sp.end) sp.end = s[i].step;
        }
        if (sp.end < sp.start) sp.end = sp.start;
        if (sp.root->flags & TG_FLAG_OUTPUT) sp.end = g->n_nodes > 0 ? g->n_nodes - 1 : 0;
        spans[n_spans++] = sp;
    }
    free(s);
    if (!spans) return -1;
    qsort(spans, (size_t)n_spans, sizeof *spans, cmp_span_order);
    *out = spans;
    return n_spans;
}

static int panel_for(struct plan_map *map, const tg_buffer *buf) {
    for (int p = 0; p < map->n_panels; p++) {
        if (map->panels[p].buffer == buf) return p;
    }
    struct plan_panel *grown = realloc(map->panels, (size_t)(map->n_panels + 1) * sizeof *grown);
    if (!grown) return -1;
    map->panels = grown;
    struct plan_panel *pp = &map->panels[map->n_panels];
    memset(pp, 0, sizeof *pp);
    pp->buffer = buf;
    pp->buffer_size = buf->size;
    pp->peak_step = -1;
    pp->buffer_id = -1;
    pp->n_chunks = 1;
    snprintf(pp->title, sizeof pp->title, "%s buffer %d", tg_buft_name(buf->buft), map->n_panels);
    return map->n_panels++;
}

struct rect_by_root {
    const struct tg_tensor *root;
    int panel, rect;
};

static int cmp_by_root(const void *pa, const void *pb) {
    const struct rect_by_root *a = pa, *b = pb;
    return (uintptr_t)a->root < (uintptr_t)b->root ? -1 : (uintptr_t)a->root > (uintptr_t)b->root;
}

/* In-place pairs: a tensor starting at the step its same-address
 * predecessor ends, computed by an op that reads that predecessor. */
static bool link_inplace(struct plan_map *map, int n_rects) {
    struct rect_by_root *index = malloc(((size_t)n_rects + 1) * sizeof *index);
    if (!index) return false;
    int n = 0;
    for (int p = 0; p < map->n_panels; p++) {
        for (int i = 0; i < map->panels[p].n_rects; i++) index[n++] = (struct rect_by_root){map->panels[p].rects[i].tensor, p, i};
    }
    qsort(index, (size_t)n, sizeof *index, cmp_by_root);
    for (int p = 0; p < map->n_panels; p++) {
        struct plan_panel *pp = &map->panels[p];
        for (int i = 0; i < pp->n_rects; i++) {
            struct plan_rect *child = &pp->rects[i];
            for (int k = 0; k < TG_MAX_SRC; k++) {
                if (!child->tensor->src[k]) continue;
                struct rect_by_root key = {root_of(child->tensor->src[k]), 0, 0};
                const struct rect_by_root *hit = bsearch(&key, index, (size_t)n, sizeof *index, cmp_by_root);
                if (!hit || hit->panel != p || hit->rect == i) continue;
                const struct plan_rect *parent = &pp->rects[hit->rect];
                if (parent->offset == child->offset && parent->end == child->start) child->inplace_parent = hit->rect;
            }
        }
    }
    free(index);
    return true;
}

void plan_panel_add_live(const struct plan_panel *pp, long long *delta) {
    for (int i = 0; i < pp->n_rects; i++) {
        const struct plan_rect *r = &pp->rects[i];
        int start = r->inplace_parent >= 0 ? r->start + 1 : r->start;
        if (start > r->end) continue;
        delta[start] += (long long)r->size;
        delta[r->end + 1] -= (long long)r->size;
    }
}

int plan_live_peak(const long long *delta, int n_steps, size_t *live_at_peak) {
    int peak_step = -1;
    long long live = 0;
    *live_at_peak = 0;
    for (int s = 0; s < n_steps; s++) {
        live += delta[s];
        if (peak_step < 0 || (size_t)live > *live_at_peak) {
            peak_step = s;
            *live_at_peak = (size_t)live;
        }
    }
    return peak_step;
}

static bool find_peak(struct plan_panel *pp, int n_steps) {
    long long *delta = calloc((size_t)n_steps + 2, sizeof *delta);
    if (!delta) return false;
    plan_panel_add_live(pp, delta);
    if (pp->n_rects) pp->peak_step = plan_live_peak(delta, n_steps, &pp->peak_live);
    free(delta);
    return true;
}

enum tg_status plan_map_build(const struct tg_graph *g, struct plan_map *map) {
    memset(map, 0, sizeof *map);
    map->n_steps = g->n_nodes;
    struct span *spans = NULL;
    int n = collect_spans(g, &spans);
    if (n < 0) return tg_fail(TG_ERR_ALLOC, "out of memory building the plan map");
    bool ok = true;
    for (int k = 0; ok && k < n; k++) {
        const struct tg_tensor *t = spans[k].root;
        int p = panel_for(map, t->buffer);
        ok = p >= 0;
        if (!ok) break;
        struct plan_panel *pp = &map->panels[p];
        if ((pp->n_rects & (pp->n_rects - 1)) == 0) { /* grow at powers of two */
            struct plan_rect *grown = realloc(pp->rects, (size_t)(pp->n_rects ? 2 * pp->n_rects : 1) * sizeof *grown);
            ok = grown != NULL;
            if (!ok) break;
            pp->rects = grown;
        }
        size_t offset = (size_t)((const uint8_t *)t->data - (const uint8_t *)tg_buffer_get_base((tg_buffer *)t->buffer));
        size_t size = tg_buffer_get_alloc_size((tg_buffer *)t->buffer, t);
        pp->rects[pp->n_rects++] = (struct plan_rect){t, spans[k].start, spans[k].end, offset, size, -1, false};
        if (offset + size > pp->peak) pp->peak = offset + size;
    }
    free(spans);
    ok = ok && link_inplace(map, n);
    for (int p = 0; ok && p < map->n_panels; p++) ok = find_peak(&map->panels[p], map->n_steps);
    if (!ok) {
        plan_map_free(map);
        return tg_fail(TG_ERR_ALLOC, "out of memory building the plan map");
    }
    return TG_OK;
}

void plan_map_free(struct plan_map *map) {
    for (int p = 0; p < map->n_panels; p++) free(map->panels[p].rects);
    free(map->panels);
    memset(map, 0, sizeof *map);
}

/* The max largest rects (live at step, or all when step < 0), largest first. */
static int top_by_size(const struct plan_panel *p, int step, int *out, int max) {
    int n_match = 0, n_out = 0;
    for (int i = 0; i < p->n_rects; i++) {
        if (step >= 0 && !plan_rect_live_at(&p->rects[i], step)) continue;
        n_match++;
        /* keep the max largest, largest first: insert into the short list */
        if (n_out < max) n_out++;
        else if (max == 0 || p->rects[out[max - 1]].size >= p->rects[i].size) continue;
        int j = n_out - 1;
        while (j > 0 && p->rects[out[j - 1]].size < p->rects[i].size) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = i;
    }
    return step >= 0 ? n_match : n_out;
}

int plan_panel_live_set(const struct plan_panel *p, int step, int *out, int max) {
    return step >= 0 ? top_by_size(p, step, out, max) : 0;
}

int plan_panel_largest(const struct plan_panel *p, int *out, int max) { return top_by_size(p, -1, out, max); }

int plan_panel_top(const struct plan_panel *p) {
    for (int i = 0; i < p->n_rects; i++) {
        if (p->rects[i].offset + p->rects[i].size == p->peak) return i;
    }
    return -1;
}

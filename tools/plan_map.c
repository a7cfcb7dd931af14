/* Memory-map model of a bound graph (see plan_map.h). */
#include "plan_map.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct span {
    const struct tg_tensor *root;
    int start, end;
};

static int find_span(struct span *spans, int n, const struct tg_tensor *root) {
    for (int i = n - 1; i >= 0; i--) {
        if (spans[i].root == root) return i;
    }
    return -1;
}

static const struct tg_tensor *root_of(const struct tg_tensor *t) { return t->view_src ? t->view_src : t; }

static bool planned(const struct tg_tensor *t) {
    return t->buffer && t->data && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE;
}

/* Lifetimes of planned roots: first step they are produced (0 for leafs and
 * inputs), last step anything reads them (or the end for outputs). */
static int collect_spans(const struct tg_graph *g, struct span *spans) {
    int n = 0;
    for (int i = 0; i < g->n_leafs; i++) {
        const struct tg_tensor *r = root_of(g->leafs[i]);
        if (planned(r) && find_span(spans, n, r) < 0) spans[n++] = (struct span){r, 0, 0};
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tg_tensor *node = g->nodes[i];
        for (int s = 0; s < TG_MAX_SRC; s++) {
            const struct tg_tensor *src = node->src[s];
            if (!src) continue;
            const struct tg_tensor *r = root_of(src);
            if (!planned(r)) continue;
            int k = find_span(spans, n, r);
            if (k < 0) {
                spans[n++] = (struct span){r, 0, i};
            } else if (spans[k].end < i) {
                spans[k].end = i;
            }
        }
        const struct tg_tensor *r = root_of(node);
        if (!planned(r)) continue;
        int k = find_span(spans, n, r);
        if (k < 0) {
            spans[n++] = (struct span){r, i, i};
        } else if (spans[k].end < i) {
            spans[k].end = i;
        }
    }
    for (int k = 0; k < n; k++) {
        if (spans[k].root->flags & TG_FLAG_OUTPUT) spans[k].end = g->n_nodes > 0 ? g->n_nodes - 1 : 0;
    }
    return n;
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
    snprintf(pp->title, sizeof pp->title, "%s buffer %d", tg_buft_name(buf->buft), map->n_panels);
    return map->n_panels++;
}

enum tg_status plan_map_build(const struct tg_graph *g, struct plan_map *map) {
    memset(map, 0, sizeof *map);
    map->n_steps = g->n_nodes;
    int cap = g->n_nodes + g->n_leafs;
    struct span *spans = calloc((size_t)(cap > 0 ? cap : 1), sizeof *spans);
    if (!spans) return tg_fail(TG_ERR_ALLOC, "out of memory building the plan map");
    int n = collect_spans(g, spans);
    for (int k = 0; k < n; k++) {
        const struct tg_tensor *t = spans[k].root;
        int p = panel_for(map, t->buffer);
        if (p < 0) {
            free(spans);
            plan_map_free(map);
            return tg_fail(TG_ERR_ALLOC, "out of memory building the plan map");
        }
        struct plan_panel *pp = &map->panels[p];
        struct plan_rect *grown = realloc(pp->rects, (size_t)(pp->n_rects + 1) * sizeof *grown);
        if (!grown) {
            free(spans);
            plan_map_free(map);
            return tg_fail(TG_ERR_ALLOC, "out of memory building the plan map");
        }
        pp->rects = grown;
        size_t offset = (size_t)((const uint8_t *)t->data - (const uint8_t *)tg_buffer_get_base((tg_buffer *)t->buffer));
        size_t size = tg_buffer_get_alloc_size((tg_buffer *)t->buffer, t);
        pp->rects[pp->n_rects++] = (struct plan_rect){t, spans[k].start, spans[k].end, offset, size, -1};
        if (offset + size > pp->peak) pp->peak = offset + size;
    }
    free(spans);
    /* In-place pairs: a tensor starting at the step its same-address
     * predecessor ends, computed by an op that reads that predecessor. */
    for (int p = 0; p < map->n_panels; p++) {
        struct plan_panel *pp = &map->panels[p];
        for (int i = 0; i < pp->n_rects; i++) {
            struct plan_rect *child = &pp->rects[i];
            for (int j = 0; j < pp->n_rects; j++) {
                const struct plan_rect *parent = &pp->rects[j];
                if (j == i || parent->offset != child->offset || parent->end != child->start) continue;
                for (int s = 0; s < TG_MAX_SRC; s++) {
                    if (child->tensor->src[s] && root_of(child->tensor->src[s]) == parent->tensor) {
                        child->inplace_parent = j;
                    }
                }
            }
        }
    }
    return TG_OK;
}

void plan_map_free(struct plan_map *map) {
    for (int p = 0; p < map->n_panels; p++) free(map->panels[p].rects);
    free(map->panels);
    memset(map, 0, sizeof *map);
}

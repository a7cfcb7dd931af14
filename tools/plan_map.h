/* A plan's memory map: for each compute buffer, one rectangle per tensor
 * lifetime (node steps x byte range), computed from a bound graph, and the
 * step where the most bytes are live.  The `tgsched` verbs summarise it, draw
 * it as SVG and emit it as JSON. */
#ifndef TG_PLAN_MAP_H
#define TG_PLAN_MAP_H

#include "tg-backend.h"

struct plan_rect {
    const struct tg_tensor *tensor;
    int start, end;        /* node steps, inclusive */
    size_t offset, size;   /* bytes inside the buffer */
    int inplace_parent;    /* index of the rect whose memory this one took over, -1 */
    bool split_copy;       /* a copy of a split input made by the scheduler (set by the caller) */
};

struct plan_panel {
    char title[96];
    const tg_buffer *buffer; /* the buffer (or multi-buffer part) the rects live in */
    size_t buffer_size;
    size_t peak;             /* max offset + size over the rects */
    size_t lower_bound;      /* from the allocator's report when known, else 0 */
    int peak_step;           /* the step with the most bytes live (the earliest such), -1 when empty */
    size_t peak_live;        /* bytes live at peak_step, an in-place pair counted once */
    int n_rects;
    struct plan_rect *rects; /* in order of first step, then first appearance */
    int buffer_id;           /* the scheduler's buffer id (set by the caller), -1 when unknown */
    int chunk, n_chunks;     /* which of its buffer id's buffers this is (a max buffer size splits one) */
};

struct plan_map {
    int n_steps;
    int n_panels;
    struct plan_panel *panels;
};

/* Builds the map of every tensor of g that lives in a buffer of usage COMPUTE
 * (tensors the planner placed), grouped by buffer.  Views are folded into
 * their root's lifetime.  O(n log n) in the graph's tensors. */
enum tg_status plan_map_build(const struct tg_graph *g, struct plan_map *map);
void plan_map_free(struct plan_map *map);
/* Whether rect r is live at step s. */
static inline bool plan_rect_live_at(const struct plan_rect *r, int s) { return r->start <= s && s <= r->end; }
/* How many rects of p are live at step s; the indices of the largest (at
 * most max of them, largest first) go to out. */
int plan_panel_live_set(const struct plan_panel *p, int step, int *out, int max);
/* Adds the bytes pp has live at each step to delta (a difference array of
 * n_steps + 2 entries): an in-place child shares its parent's bytes at the
 * step where one ends and the other starts. */
void plan_panel_add_live(const struct plan_panel *pp, long long *delta);
/* The earliest step with the most bytes live by delta, those bytes in
 * *live_at_peak; -1 (and 0) when there are no steps. */
int plan_live_peak(const long long *delta, int n_steps, size_t *live_at_peak);
/* The first rect whose last byte is the panel's highest (it sets the size), -1 when empty. */
int plan_panel_top(const struct plan_panel *p);
/* Indices of the max largest rects of p, largest first; returns how many. */
int plan_panel_largest(const struct plan_panel *p, int *out, int max);
/* Writes the map as an SVG picture (tools/plan_svg.c). */
enum tg_status plan_map_write_svg(const struct plan_map *map, const char *path);

#endif

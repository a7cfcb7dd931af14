/* A plan's memory map: for each compute buffer, one rectangle per tensor
 * lifetime (node steps x byte range), computed from a bound graph.  The
 * `tgsched` verbs print it, render it as SVG and emit it as JSON. */
#ifndef TG_PLAN_MAP_H
#define TG_PLAN_MAP_H

#include "tg-backend.h"

struct plan_rect {
    const struct tg_tensor *tensor;
    int start, end;        /* node steps, inclusive */
    size_t offset, size;   /* bytes inside the buffer */
    int inplace_parent;    /* index of the rect whose memory this one took over, -1 */
};

struct plan_panel {
    char title[96];
    const tg_buffer *buffer; /* the buffer (or multi-buffer part) the rects live in */
    size_t buffer_size;
    size_t peak;             /* max offset + size over the rects */
    size_t lower_bound;      /* from the allocator's report when known, else 0 */
    int n_rects;
    struct plan_rect *rects;
};

struct plan_map {
    int n_steps;
    int n_panels;
    struct plan_panel *panels;
};

/* Builds the map of every tensor of g that lives in a buffer of usage COMPUTE
 * (tensors the planner placed), grouped by buffer.  Views are folded into
 * their root's lifetime. */
enum tg_status plan_map_build(const struct tg_graph *g, struct plan_map *map);
void plan_map_free(struct plan_map *map);
/* Writes the map as an SVG picture: one panel per buffer, x = node step,
 * y = offset, a rectangle per lifetime coloured by op kind, in-place pairs
 * linked, peak and lower bound drawn. */
enum tg_status plan_map_write_svg(const struct plan_map *map, const char *path);

#endif

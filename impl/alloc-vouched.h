/* The graph allocator's entry points for the scheduler (not public).
 *
 * A scheduler that replays its schedule has already compared a new graph,
 * tensor by tensor, with the last one it bound; the allocator's own replay
 * check would repeat the structural half of that.  These calls let it skip
 * that half and check only memory (the replay rule of docs/allocator.md still
 * holds: the structure is compared, once, by the scheduler). */
#ifndef TG_ALLOC_VOUCHED_H
#define TG_ALLOC_VOUCHED_H

#include "tg-alloc.h"

#include <stdint.h>

/* Names the allocator's last successful bind (alloc_graph); 0 when there is
 * none since its plan was last made or its fault switch set. */
uint64_t tg_gallocr_bind_token(const tg_gallocr *galloc);

/* tg_gallocr_alloc_graph for a graph the caller vouches is, slot by slot,
 * the same as the graph bound under token: same node and leaf order, and per
 * tensor the same type, op, flags, shape, strides, view offset, and sources
 * and view root at the same positions.  What the binding relies on is still
 * checked, in every build: memory (which tensors come with their own,
 * whether it is this allocator's), that every tensor fits the bytes the plan
 * gives it, and that every view has the recorded root and offset.  Anything
 * else takes tg_gallocr_alloc_graph.  Builds with TG_CHECKS (tg-checks.h)
 * also run the general check and abort if it refuses a graph bound here. */
enum tg_status tg_gallocr_alloc_graph_vouched(tg_gallocr *galloc, struct tg_graph *graph, uint64_t token);

#endif

/* The graph allocator's entry points for the scheduler (not public).
 *
 * A scheduler that replays its schedule has already compared a new graph,
 * tensor by tensor, with the last one it bound; the allocator's own replay
 * check would repeat the structural half of that.  These calls let it skip
 * that half and check only memory (the replay rule of design.md 4.3 still
 * holds: the structure is compared, once, by the scheduler). */
#ifndef TG_ALLOC_VOUCHED_H
#define TG_ALLOC_VOUCHED_H

#include "tg-alloc.h"

#include <stdint.h>

/* 1 where the allocator also runs its general check on vouched graphs and
 * aborts on disagreement: builds with assertions, and fuzzing builds. */
#if !defined(NDEBUG) || defined(TG_FUZZING_BUILD) || defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
#define TG_ALLOC_CHECKS_VOUCHED 1
#else
#define TG_ALLOC_CHECKS_VOUCHED 0
#endif

/* Names the allocator's last successful bind (alloc_graph); 0 when there is
 * none since its plan was last made or its fault switch set. */
uint64_t tg_gallocr_bind_token(const tg_gallocr *galloc);

/* tg_gallocr_alloc_graph for a graph the caller vouches is, slot by slot,
 * the same as the graph bound under token: same node and leaf order, and per
 * tensor the same type, op, flags, shape, strides, view offset, and sources
 * and view root at the same positions.  Memory (which tensors come with
 * their own, whether it is this allocator's) is still checked; anything
 * unusual takes tg_gallocr_alloc_graph.  Builds with assertions and fuzzing
 * builds run the general check as well and abort if it refuses the graph. */
enum tg_status tg_gallocr_alloc_graph_vouched(tg_gallocr *galloc, struct tg_graph *graph, uint64_t token);

#endif

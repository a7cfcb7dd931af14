/* Offset planner over virtual memory (internal to the graph allocator).
 *
 * Memory of one buffer type is split into chunks (a chunk per real buffer);
 * each chunk keeps its free blocks sorted by offset and merges neighbours on
 * free.  TG_PLAN_GGML placement: best fit over the interior blocks of every
 * chunk (each chunk's last block is left out), else ggml's tail-block choice,
 * else a new chunk.  On a single chunk this gives exactly ggml's offsets. */
#ifndef TG_PLAN_H
#define TG_PLAN_H

#include "tg.h"

#include <stdbool.h>
#include <stddef.h>

struct tg_plan_addr {
    int chunk;
    size_t offset;
};

struct tg_free_block {
    size_t offset;
    size_t size;
};

struct tg_plan_chunk {
    struct tg_free_block *blocks; /* sorted by offset, never adjacent after a free */
    int n_blocks;
    int cap_blocks;
    size_t high_water; /* bytes of this chunk the plan uses */
};

struct tg_planner {
    size_t alignment;      /* rounding unit of sizes and offsets (1 when alignment is ignored) */
    size_t max_chunk_size; /* the buffer type's max size, capped at SIZE_MAX / 2 */
    struct tg_plan_chunk *chunks;
    int n_chunks;
    int cap_chunks;
    bool merge_off_by_one; /* fault injection: a merge grows the block by one unit */
};

void tg_planner_init(struct tg_planner *p, size_t alignment, size_t max_size);
void tg_planner_release(struct tg_planner *p);
/* Forget every placement; keeps the memory of the lists. */
void tg_planner_reset(struct tg_planner *p);
size_t tg_planner_round(const struct tg_planner *p, size_t size);
/* Places size bytes (rounded up); TG_ERR_ALLOC only when host memory runs out. */
enum tg_status tg_planner_alloc(struct tg_planner *p, size_t size, const char *tensor_name, struct tg_plan_addr *out);
/* Returns [addr, addr + size) (rounded up) to the free lists.  Aborts on a
 * double or overlapping free where TG_CHECKS is on (an internal invariant). */
enum tg_status tg_planner_free(struct tg_planner *p, struct tg_plan_addr addr, size_t size, const char *tensor_name);
/* Bytes chunk c needs (0 for a chunk that does not exist). */
size_t tg_planner_chunk_size(const struct tg_planner *p, int c);
size_t tg_planner_total_size(const struct tg_planner *p);
/* After an offline re-placement of chunk c's tensors: the bytes it now needs. */
void tg_planner_set_chunk_size(struct tg_planner *p, int c, size_t size);

#endif

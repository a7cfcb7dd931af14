/* The online best-fit offset planner (TG_PLAN_GGML), see plan.h. */
#include "plan.h"
#include "tg-checks.h"
#include "tg-size.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_planner_init(struct tg_planner *p, size_t alignment, size_t max_size) {
    memset(p, 0, sizeof *p);
    p->alignment = alignment ? alignment : 1;
    /* Half the address space keeps every offset + size representable as int64. */
    p->max_chunk_size = max_size < SIZE_MAX / 2 ? max_size : SIZE_MAX / 2;
    if (p->max_chunk_size == 0) p->max_chunk_size = 1;
}

void tg_planner_release(struct tg_planner *p) {
    for (int c = 0; c < p->cap_chunks; c++) free(p->chunks[c].blocks);
    free(p->chunks);
    p->chunks = NULL;
    p->n_chunks = p->cap_chunks = 0;
}

void tg_planner_reset(struct tg_planner *p) {
    for (int c = 0; c < p->n_chunks; c++) {
        p->chunks[c].n_blocks = 0;
        p->chunks[c].high_water = 0;
    }
    p->n_chunks = 0;
}

size_t tg_planner_round(const struct tg_planner *p, size_t size) {
    return round_up(size, p->alignment); /* SIZE_MAX: no buffer holds it */
}

size_t tg_planner_chunk_size(const struct tg_planner *p, int c) {
    return c >= 0 && c < p->n_chunks ? p->chunks[c].high_water : 0;
}

size_t tg_planner_total_size(const struct tg_planner *p) {
    size_t total = 0;
    for (int c = 0; c < p->n_chunks; c++) total += p->chunks[c].high_water;
    return total;
}

static bool insert_block(struct tg_plan_chunk *ch, int at, size_t offset, size_t size) {
    if (ch->n_blocks == ch->cap_blocks) {
        int cap = ch->cap_blocks ? ch->cap_blocks * 2 : 16;
        struct tg_free_block *grown = realloc(ch->blocks, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        ch->blocks = grown;
        ch->cap_blocks = cap;
    }
    memmove(&ch->blocks[at + 1], &ch->blocks[at], (size_t)(ch->n_blocks - at) * sizeof *ch->blocks);
    ch->blocks[at] = (struct tg_free_block){offset, size};
    ch->n_blocks++;
    return true;
}

static void remove_block(struct tg_plan_chunk *ch, int at) {
    memmove(&ch->blocks[at], &ch->blocks[at + 1], (size_t)(ch->n_blocks - at - 1) * sizeof *ch->blocks);
    ch->n_blocks--;
}

static enum tg_status add_chunk(struct tg_planner *p, size_t min_size, const char *tensor_name) {
    if (p->n_chunks == p->cap_chunks) {
        int cap = p->cap_chunks ? p->cap_chunks * 2 : 4;
        struct tg_plan_chunk *grown = realloc(p->chunks, (size_t)cap * sizeof *grown);
        if (!grown) return tg_fail(TG_ERR_ALLOC, "tensor '%s': out of host memory for the planner", tensor_name);
        memset(&grown[p->cap_chunks], 0, (size_t)(cap - p->cap_chunks) * sizeof *grown);
        p->chunks = grown;
        p->cap_chunks = cap;
    }
    struct tg_plan_chunk *ch = &p->chunks[p->n_chunks];
    ch->n_blocks = 0;
    ch->high_water = 0;
    /* A tensor larger than the maximum gets a chunk of exactly its size. */
    size_t extent = min_size > p->max_chunk_size ? min_size : p->max_chunk_size;
    if (!insert_block(ch, 0, 0, extent)) {
        return tg_fail(TG_ERR_ALLOC, "tensor '%s': out of host memory for the planner", tensor_name);
    }
    p->n_chunks++;
    return TG_OK;
}

enum tg_status tg_planner_alloc(struct tg_planner *p, size_t size, const char *tensor_name, struct tg_plan_addr *out) {
    TG_ASSERT(p->alignment > 0 && p->n_chunks >= 0, "a planner with alignment %zu and %d chunks", p->alignment,
              p->n_chunks);
    size = tg_planner_round(p, size);
    if (size == SIZE_MAX) {
        return tg_fail(TG_ERR_ALLOC, "tensor '%s' needs more bytes than any buffer can hold (its size, rounded to "
                       "the alignment %zu, passes the address space): check its shape and its buffer type's padding",
                       tensor_name, p->alignment);
    }
    int best_chunk = -1, best_block = -1;

    /* Interior best fit, global over chunks.  A chunk's last block is its growth
     * room, kept for the tail rule below; ties go to the later block as in ggml. */
    size_t best_size = SIZE_MAX;
    for (int c = 0; c < p->n_chunks; c++) {
        const struct tg_plan_chunk *ch = &p->chunks[c];
        for (int i = 0; i < ch->n_blocks - 1; i++) {
            if (ch->blocks[i].size >= size && ch->blocks[i].size <= best_size) {
                best_chunk = c;
                best_block = i;
                best_size = ch->blocks[i].size;
            }
        }
    }

    /* Tail: prefer a placement that stays under a chunk's high water with the
     * least slack; failing that, the one that grows a chunk the least. */
    if (best_chunk < 0) {
        int64_t best_reuse = INT64_MIN;
        for (int c = 0; c < p->n_chunks; c++) {
            const struct tg_plan_chunk *ch = &p->chunks[c];
            if (ch->n_blocks == 0) continue;
            const struct tg_free_block *last = &ch->blocks[ch->n_blocks - 1];
            if (last->size < size) continue;
            int64_t reuse = (int64_t)ch->high_water - (int64_t)last->offset - (int64_t)size;
            bool better_reuse = best_reuse < 0 && reuse > best_reuse;
            bool better_fit = reuse >= 0 && reuse < best_reuse;
            if (better_reuse || better_fit) {
                best_chunk = c;
                best_block = ch->n_blocks - 1;
                best_reuse = reuse;
            }
        }
    }

    if (best_chunk < 0) {
        enum tg_status st = add_chunk(p, size, tensor_name);
        if (st != TG_OK) return st;
        best_chunk = p->n_chunks - 1;
        best_block = 0;
    }

    struct tg_plan_chunk *ch = &p->chunks[best_chunk];
    /* a block was chosen above, or a chunk with one block was created */
    // NOLINTBEGIN(clang-analyzer-core.NullDereference)
    struct tg_free_block *b = &ch->blocks[best_block];
    out->chunk = best_chunk;
    out->offset = b->offset;
    b->offset += size;
    b->size -= size;
    // NOLINTEND(clang-analyzer-core.NullDereference)
    if (b->size == 0) remove_block(ch, best_block);
    if (out->offset + size > ch->high_water) ch->high_water = out->offset + size;
    return TG_OK;
}

/* A free that overlaps free memory means the liveness bookkeeping is broken:
 * continuing would hand the same bytes to two live tensors (an invariant,
 * checked where TG_CHECKS is on). */
static void assert_free_range(const struct tg_planner *p, const struct tg_plan_chunk *ch, struct tg_plan_addr addr,
                              size_t size, const char *tensor_name) {
    if (!TG_CHECKS || p->merge_off_by_one) return; /* the injected fault makes overlaps on purpose */
    TG_ASSERT(addr.offset + size <= ch->high_water, "tensor '%s' frees [%zu, +%zu) in chunk %d past its %zu bytes",
              tensor_name, addr.offset, size, addr.chunk, ch->high_water);
    for (int i = 0; i < ch->n_blocks; i++) {
        const struct tg_free_block *b = &ch->blocks[i];
        TG_ASSERT(!(addr.offset < b->offset + b->size && b->offset < addr.offset + size),
                  "tensor '%s' frees [%zu, +%zu) in chunk %d, which is free already (double free)", tensor_name,
                  addr.offset, size, addr.chunk);
    }
}

enum tg_status tg_planner_free(struct tg_planner *p, struct tg_plan_addr addr, size_t size, const char *tensor_name) {
    size = tg_planner_round(p, size);
    if (addr.chunk < 0 || addr.chunk >= p->n_chunks) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s': free in chunk %d that does not exist", tensor_name, addr.chunk);
    }
    struct tg_plan_chunk *ch = &p->chunks[addr.chunk];
    assert_free_range(p, ch, addr, size, tensor_name);
    size_t end = addr.offset + size;
    /* Grow the block that ends where this range starts, then join its successor. */
    for (int i = 0; i < ch->n_blocks; i++) {
        struct tg_free_block *b = &ch->blocks[i];
        if (b->offset + b->size == addr.offset) {
            b->size += size + (p->merge_off_by_one ? p->alignment : 0);
            if (i + 1 < ch->n_blocks && b->offset + b->size == ch->blocks[i + 1].offset) {
                b->size += ch->blocks[i + 1].size;
                remove_block(ch, i + 1);
            }
            return TG_OK;
        }
    }
    /* Else grow the block that starts where this range ends, then join its predecessor. */
    for (int i = 0; i < ch->n_blocks; i++) {
        struct tg_free_block *b = &ch->blocks[i];
        if (b->offset == end) {
            b->offset = addr.offset;
            b->size += size;
            if (i > 0 && ch->blocks[i - 1].offset + ch->blocks[i - 1].size == b->offset) {
                ch->blocks[i - 1].size += b->size;
                remove_block(ch, i);
            }
            return TG_OK;
        }
    }
    int at = 0;
    while (at < ch->n_blocks && ch->blocks[at].offset < addr.offset) at++;
    if (!insert_block(ch, at, addr.offset, size)) {
        return tg_fail(TG_ERR_ALLOC, "tensor '%s': out of host memory for the free list", tensor_name);
    }
    return TG_OK;
}

void tg_planner_set_chunk_size(struct tg_planner *p, int c, size_t size) {
    if (c >= 0 && c < p->n_chunks) p->chunks[c].high_water = size;
}

/* The graph bound last, found unchanged.
 *
 * A runtime that keeps its graph (or rebuilds it in the same memory) hands
 * the allocator the same tensors at the same positions, and usually nothing
 * in them has changed.  Then every field the stamped check reads holds what
 * it held when that check passed, and every field a bind writes holds what
 * the bind wrote: the graph is bound as the plan says, and binding it again
 * would write the same values.  So once the same tensors have come back, the
 * graph is imaged right after its bind, and the next call compares it with
 * the image and returns with nothing to do while it matches.
 *
 * The image holds per position, as 8-byte words in position order:
 *   the tensor; its first 8 bytes (type, op); a kind word (flags, the number
 *   of sources in use, the IMAGE_ bits below and a chunk index); ne and nb;
 *   each source in use; view_src and view_offs where either is set; data as
 *   bound, then buffer and bind_generation unless the buffer is one of the
 *   allocator's chunks (the kind word names it, and image_chunks holds its
 *   generation); for a node in a buffer of another's, that buffer's usage (a
 *   compute buffer's node is planned again, any other's keeps its memory).
 * Sources and view roots compare by pointer: the positions hold the same
 * tensors, so the same pointer names the same position.  Sources past those
 * in use must still be empty.  Not imaged: plans that refer to a tensor
 * outside the graph (its memory is no position's, so it would go
 * unchecked), and buffers with init_tensor or reset hooks (a bind calls
 * them, so it is not a no-op there). */
#include "alloc-impl.h"

#include <limits.h>
#include <string.h>

#define IMAGE_MAX_POSITION_WORDS (3 + 2 * TG_MAX_DIMS + TG_MAX_SRC + 2 + 4)
#define IMAGE_HAS_VIEW_WORDS ((uint64_t)1 << 40)
#define IMAGE_OWN_SIZE_RULE ((uint64_t)1 << 41) /* its buffer type sizes tensors its own way: ask again */
#define IMAGE_IN_CHUNK ((uint64_t)1 << 42)      /* bound in image_chunks[kind >> IMAGE_CHUNK_SHIFT] */
#define IMAGE_USAGE_WORD ((uint64_t)1 << 43)    /* a node in a buffer of another's: its usage follows */
#define IMAGE_CHUNK_SHIFT 48
#define IMAGE_MAX_CHUNKS (1 << (64 - IMAGE_CHUNK_SHIFT))

static uint64_t word_of(const void *p) { return (uint64_t)(uintptr_t)p; }

/* Index of buf among image_chunks, or -1. */
static int image_chunk_of(const tg_gallocr *g, const tg_buffer *buf) {
    for (int c = 0; buf && c < g->n_image_chunks; c++) {
        if (g->image_chunks[c].buffer == buf) return c;
    }
    return -1;
}

/* Lists the compute chunks for an image; false when there are too many or
 * one has hooks a bind calls (binding again is not a no-op there). */
static bool list_image_chunks(tg_gallocr *g) {
    g->n_image_chunks = 0;
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        for (int c = 0; c < g->buffers[i].n_chunks; c++) {
            const tg_buffer *b = g->buffers[i].chunks[c];
            if (b->iface.init_tensor || b->iface.reset || g->n_image_chunks == IMAGE_MAX_CHUNKS ||
                !tg_grow_array((void **)&g->image_chunks, &g->cap_image_chunks, g->n_image_chunks + 1,
                               sizeof *g->image_chunks)) {
                return false;
            }
            g->image_chunks[g->n_image_chunks++] = (struct image_chunk){b, b->generation};
        }
    }
    return true;
}

static void take_image(tg_gallocr *g, const struct tg_graph *graph) {
    int n_graph = graph->n_leafs + graph->n_nodes;
    if (n_graph > INT_MAX / IMAGE_MAX_POSITION_WORDS || !list_image_chunks(g) ||
        !tg_grow_array((void **)&g->image, &g->cap_image_words, n_graph * IMAGE_MAX_POSITION_WORDS,
                       sizeof *g->image)) {
        return; /* no image: every call takes the stamped check */
    }
    uint64_t *w = g->image;
    for (int pos = 0; pos < n_graph; pos++) {
        const struct tg_tensor *t = tensor_at(graph, pos);
        const struct record *rec = &g->records[pos];
        const int n_src = rec->sig.n_src;
        const bool view_words = t->view_src || t->view_offs;
        const bool own_size_rule = rec->buffer_id >= 0 && g->bufts[rec->buffer_id]->iface.get_alloc_size;
        const int chunk = image_chunk_of(g, t->buffer);
        const bool in_chunk = chunk >= 0 && t->bind_generation == g->image_chunks[chunk].generation;
        const bool usage_word = !in_chunk && t->buffer && pos >= graph->n_leafs;
        *w++ = word_of(t);
        memcpy(w++, t, sizeof(uint64_t));
        *w++ = (uint32_t)t->flags | (uint64_t)n_src << 32 | (view_words ? IMAGE_HAS_VIEW_WORDS : 0) |
               (own_size_rule ? IMAGE_OWN_SIZE_RULE : 0) |
               (in_chunk ? IMAGE_IN_CHUNK | (uint64_t)chunk << IMAGE_CHUNK_SHIFT : 0) |
               (usage_word ? IMAGE_USAGE_WORD : 0);
        memcpy(w, t->ne, sizeof t->ne);
        memcpy(w + TG_MAX_DIMS, t->nb, sizeof t->nb);
        w += 2 * TG_MAX_DIMS;
        for (int k = 0; k < n_src; k++) *w++ = word_of(t->src[k]);
        if (view_words) {
            *w++ = word_of(t->view_src);
            *w++ = t->view_offs;
        }
        *w++ = word_of(t->data);
        if (!in_chunk) {
            *w++ = word_of(t->buffer);
            *w++ = t->bind_generation;
        }
        if (usage_word) *w++ = (uint64_t)tg_buffer_get_usage(t->buffer);
    }
    g->image_token = g->bind_token;
    g->stats.n_images++;
}

/* Whether t, at position pos, is as imaged at *cursor; moves the cursor past its words. */
static inline __attribute__((always_inline)) bool position_as_imaged(tg_gallocr *g, const struct tg_tensor *t,
                                                                     int pos, const uint64_t **cursor) {
    if (!t) return false; /* lists written directly: the general path names it */
    const uint64_t *w = *cursor;
    const uint64_t kind = w[2]; /* flags, n_src, IMAGE_ bits */
    uint64_t type_op;
    memcpy(&type_op, t, sizeof type_op);
    const int n_src = (int)(kind >> 32 & 0xff);
    uint64_t diff = (word_of(t) ^ w[0]) | (type_op ^ w[1]) | ((uint32_t)t->flags ^ (uint32_t)kind);
    tg_lanes lanes = tg_lanes_diff(t->ne, w + 3, sizeof t->ne + sizeof t->nb) | tg_sources_from(t, n_src);
    w += 3 + 2 * TG_MAX_DIMS;
    for (int k = 0; k < n_src; k++) diff |= word_of(t->src[k]) ^ w[k];
    w += n_src;
    if (kind & IMAGE_HAS_VIEW_WORDS) {
        diff |= (word_of(t->view_src) ^ w[0]) | (t->view_offs ^ w[1]);
        w += 2;
    } else {
        diff |= word_of(t->view_src) | t->view_offs;
    }
    diff |= word_of(t->data) ^ w[0];
    if (kind & IMAGE_IN_CHUNK) {
        const struct image_chunk *chunk = &g->image_chunks[kind >> IMAGE_CHUNK_SHIFT];
        diff |= (word_of(t->buffer) ^ word_of(chunk->buffer)) | (t->bind_generation ^ chunk->generation);
        *cursor = w + 1;
    } else {
        diff |= (word_of(t->buffer) ^ w[1]) | (t->bind_generation ^ w[2]);
        *cursor = w + 3;
    }
    if ((diff | lanes[0] | lanes[1]) != 0) return false;
    if (kind & IMAGE_USAGE_WORD) {
        /* the buffer is the imaged one: its usage may have changed since */
        if ((uint64_t)tg_buffer_get_usage(t->buffer) != **cursor) return false;
        (*cursor)++;
    }
    if (!(kind & IMAGE_OWN_SIZE_RULE)) return true;
    const struct record *rec = &g->records[pos];
    return alloc_size(g, rec->buffer_id, t) <= rec->size;
}

bool alloc_image_holds(tg_gallocr *g, const struct tg_graph *graph) {
    if (!g->image_token || g->image_token != g->bind_token) return false;
    const uint64_t *cursor = g->image;
    for (int j = 0; j < graph->n_leafs; j++) {
        if (!position_as_imaged(g, graph->leafs[j], j, &cursor)) goto changed;
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!position_as_imaged(g, graph->nodes[i], graph->n_leafs + i, &cursor)) goto changed;
    }
    return true;
changed:
    g->image_token = 0;
    g->image_misses += g->image_misses < 32;
    return false;
}

/* Images the graph once its tensors came back 2^misses times in a row. */
void alloc_consider_image(tg_gallocr *g, const struct tg_graph *graph, bool same_tensors) {
    g->same_tensor_binds = same_tensors ? g->same_tensor_binds + 1 : 0;
    if (!same_tensors || g->same_tensor_binds < (uint64_t)1 << g->image_misses) return;
    if (g->plan_refers_outside) return;
    take_image(g, graph);
    g->same_tensor_binds = 0;
}

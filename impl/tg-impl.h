/* Declarations shared between the core's source files (not public). */
#ifndef TG_IMPL_H
#define TG_IMPL_H

#include "tg-backend.h"
#include "tg.h"

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct tg_type_traits {
    const char *name;
    int64_t block_elems;
    size_t block_bytes;
    bool quantized;
};
/* Indexed by enum tg_type (valid types only; the public accessors check). */
extern const struct tg_type_traits tg_type_traits_table[TG_TYPE_COUNT];

/* The layout the per-token checks rely on: type and op are the first 8 bytes
 * (the unchanged-graph image copies them as one word), strides follow the
 * shape (shape and strides compare as one block), and source pointers sit
 * in pairs (tg_sources_from loads them 16 bytes at a time). */
_Static_assert(offsetof(struct tg_tensor, type) == 0 && offsetof(struct tg_tensor, op) == 4,
               "type and op are the tensor's first 8 bytes");
_Static_assert(offsetof(struct tg_tensor, nb) == offsetof(struct tg_tensor, ne) + sizeof(((struct tg_tensor *)0)->ne),
               "nb follows ne");
_Static_assert(offsetof(struct tg_tensor, src) % 8 == 0 && TG_MAX_SRC % 2 == 0, "sources load in 16-byte pairs");

/* tg_nbytes inlined, for the per-token paths (types already validated). */
static inline __attribute__((always_inline)) size_t tg_nbytes_inline(const struct tg_tensor *t) {
    if (t->ne[0] <= 0 || t->ne[1] <= 0 || t->ne[2] <= 0 || t->ne[3] <= 0) return 0;
    const struct tg_type_traits *tr = &tg_type_traits_table[t->type];
    size_t bytes;
    int first;
    if (tr->block_elems == 1) {
        bytes = tr->block_bytes;
        first = 0;
    } else {
        bytes = (size_t)t->ne[0] * t->nb[0] / (size_t)tr->block_elems;
        first = 1;
    }
    for (int i = first; i < TG_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    return bytes;
}

/* Grows *p (an array of elem-byte entries with capacity *cap) to at least n
 * entries, keeping its contents; false when out of memory.  Grows at least
 * twofold: callers growing by a little at a time (a pool filled tensor by
 * tensor) would otherwise copy the array each time, quadratic wherever
 * realloc cannot extend in place (always under ASan). */
static inline bool tg_grow_array(void **p, int *cap, int n, size_t elem) {
    if (n <= *cap || n <= 0) return true;
    int new_cap = *cap < INT_MAX / 2 && 2 * *cap > n ? 2 * *cap : n;
    void *grown = realloc(*p, (size_t)new_cap * elem);
    if (!grown) return false;
    *p = grown;
    *cap = new_cap;
    return true;
}

/* 16-byte lanes for the replay checks' block compares (a GCC and Clang
 * vector extension: SSE2 on x86-64, NEON on arm64, scalar code elsewhere). */
typedef uint64_t tg_lanes __attribute__((vector_size(16)));

static inline tg_lanes tg_lanes_load(const void *p) {
    tg_lanes v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The OR of a ^ b over size bytes (a multiple of 16): zero when equal. */
static inline tg_lanes tg_lanes_diff(const void *a, const void *b, size_t size) {
    tg_lanes acc = {0, 0};
    /* sizes are constants of 32-160 bytes: straight-line code, no loop */
#pragma GCC unroll 16
    for (size_t o = 0; o < size; o += sizeof acc) {
        acc |= tg_lanes_load((const char *)a + o) ^ tg_lanes_load((const char *)b + o);
    }
    return acc;
}

static inline bool tg_lanes_zero(tg_lanes v) { return (v[0] | v[1]) == 0; }

/* Nonzero lanes unless every source slot of t from n on is empty (the
 * replay checks ask it of every tensor).  Most tensors use at most two
 * slots: the eight past them are four lane loads rather than a loop. */
static inline tg_lanes tg_sources_from(const struct tg_tensor *t, int n) {
    _Static_assert(TG_MAX_SRC == 10, "the unrolled tail covers slots 2..9");
    static const tg_lanes first_two_unused[3] = {{~0ull, ~0ull}, {0, ~0ull}, {0, 0}};
    tg_lanes any = {0, 0};
    if (n <= 2) {
        any = tg_lanes_load(&t->src[0]) & first_two_unused[n];
        for (int k = 2; k < TG_MAX_SRC; k += 2) any |= tg_lanes_load(&t->src[k]);
        return any;
    }
    for (int k = n; k < TG_MAX_SRC; k++) any[0] |= (uint64_t)(uintptr_t)t->src[k];
    return any;
}

static inline bool tg_sources_empty_from(const struct tg_tensor *t, int n) { return tg_lanes_zero(tg_sources_from(t, n)); }

/* Sets t's name to the concatenation of the strings up to a NULL, cut like
 * snprintf: the names ops and the scheduler give on every graph build,
 * without printf's cost.  tg_int_text writes value in decimal into buf. */
void tg_name_join(struct tg_tensor *t, const char *first, ...);
const char *tg_int_text(char buf[12], int value);

/* For a caller that rewrote entries of g's node and leaf lists in place,
 * knowing they hold no duplicates (the scheduler's graph copy on replay):
 * the membership set is rebuilt on its next use. */
void tg_graph_lists_rewritten(struct tg_graph *g);
/* How many times g's lists have changed (added to, reset, rewritten): equal
 * counts mean the same lists.  0 for a graph view, which never changes. */
uint64_t tg_graph_edits(const struct tg_graph *g);

/* ---- graph_print.c: a graph as allocated, which compute checks it still is ---- */
struct tg_print_entry;
struct tg_graph_print {
    bool taken;
    int n_nodes, n_leafs;
    uint64_t edits; /* tg_graph_edits then: a graph reset and built again to the same size differs */
    struct tg_print_entry *at; /* per position, nodes then leafs */
    int cap;
};
/* How a refusal names the parties: "<caller>: ... changed since <alloc_call>: ...; <again>". */
struct tg_print_words {
    const char *caller, *alloc_call, *again;
};
enum tg_status tg_graph_print_take(struct tg_graph_print *p, const struct tg_graph *g);
/* TG_OK when nothing was taken, or while g is as taken: its lists, and per
 * position the tensor, its header, sources, view and memory; else
 * TG_ERR_INVALID naming the first tensor that changed. */
enum tg_status tg_graph_print_check(const struct tg_graph_print *p, const struct tg_graph *g,
                                    const struct tg_print_words *w);
void tg_graph_print_free(struct tg_graph_print *p);
/* TG_ERR_STALE naming the first tensor of g whose buffer was planned again
 * since it was bound; else TG_OK. */
enum tg_status tg_graph_check_fresh(const struct tg_graph *g, const struct tg_print_words *w);
/* The allocator's print kept with g (graph.c): taken by tg_gallocr_alloc_graph,
 * checked by tg_backend_graph_compute, with its tensors' freshness.  A graph
 * view keeps none. */
enum tg_status tg_graph_note_allocated(struct tg_graph *g);
enum tg_status tg_graph_check_allocated(const struct tg_graph *g);

/* buf's init_tensor hook on t (backend.c); a failure is named (the tensor,
 * the buffer type, the hook's reason if it gave one). */
enum tg_status tg_buffer_init_tensor_hook(tg_buffer *buf, struct tg_tensor *t);

/* Binds t (not a view) at addr in buf without tg_tensor_bind's checks: for a
 * caller that placed t inside buf itself (the allocator replaying its plan). */
static inline enum tg_status tg_tensor_bind_placed(struct tg_tensor *t, tg_buffer *buf, void *addr) {
    t->buffer = buf;
    t->data = addr;
    t->bind_generation = buf->generation;
    return buf->iface.init_tensor ? tg_buffer_init_tensor_hook(buf, t) : TG_OK;
}

/* Binds view t inside its root, which has memory: tg_tensor_view_bind
 * after its checks, and the allocator binding a plan it just matched. */
static inline enum tg_status tg_tensor_view_bind_placed(struct tg_tensor *t) {
    const struct tg_tensor *root = t->view_src;
    t->buffer = root->buffer;
    t->data = (uint8_t *)root->data + t->view_offs;
    t->bind_generation = root->bind_generation;
    return t->buffer && t->buffer->iface.init_tensor ? tg_buffer_init_tensor_hook(t->buffer, t) : TG_OK;
}

/* tg_op_validate's check (op_rules.c): false with the broken rule in why. */
bool tg_op_rules_hold(const struct tg_tensor *t, char *why, size_t size);
/* ggml's convolution output size, (in + 2p - d(k - 1) - 1) / s + 1 for s, d > 0,
 * k >= 1, or -1 where a term leaves int64 (op_rules.c). */
int64_t tg_conv_output_size(int64_t in, int64_t k, int s, int p, int d);

/* A view tensor of a (its root resolved, offsets added) with shape ne and
 * strides nb (NULL: contiguous) at byte offset; checks the range. */
struct tg_tensor *tg_new_view_internal(struct tg_context *ctx, struct tg_tensor *a, enum tg_type type,
                                       const int64_t ne[4], const size_t nb[4], size_t offset);
/* Takes back a tensor of ctx that a constructor made and then refused: it
 * leaves the context's list (so static allocation gives it no memory and
 * lookups cannot find it), and its entry and arena data where they were the
 * last handed out. */
void tg_context_discard(struct tg_context *ctx, struct tg_tensor *t);

#endif

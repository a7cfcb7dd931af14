/* The graph allocator's state and what its files share (not public).
 *
 *   alloc.c         lifecycle, compute buffers, the public entry points
 *   alloc_plan.c    the planning pass: liveness, in-place reuse, placement
 *   alloc_record.c  the plan's records, the general replay check, binding
 *   alloc_replay.c  the fast replays (stamped, vouched) and their cross-check
 *   alloc_image.c   the graph bound last, found unchanged
 *
 * Index spaces, each with its own name:
 *   position (pos)  a tensor's place in the graph, leafs first: leaf j is at
 *                   j, node i at n_leafs + i.  Records, bind entries and view
 *                   records are kept in position order.
 *   ref             a source or view root named through its position:
 *                   REF_NONE an empty source, REF_OUTSIDE a tensor that is
 *                   neither a node nor a leaf, else pos + 1.  Signatures and
 *                   stamps hold refs.
 *   track id        a tensor's entry in the planning pass's table (infos,
 *                   tracked), dense in the order the pass first met it.
 *   bucket          a place in the planning pass's hash table (tg-hash.h),
 *                   mapped to a track id. */
#ifndef TG_ALLOC_IMPL_H
#define TG_ALLOC_IMPL_H

#include "plan-offline.h"
#include "plan.h"
#include "tg-alloc.h"
#include "tg-hash.h"
#include "tg-impl.h"

#include <stdint.h>

/* ---- positions and refs ------------------------------------------------------------------ */

#define REF_NONE (-1)    /* no tensor: an empty source, or no view root */
#define REF_OUTSIDE 0    /* a tensor that is neither a node nor a leaf of the graph */
#define POS_OUTSIDE (-1) /* the position of such a tensor */

static inline int ref_of_pos(int pos) { return pos < 0 ? REF_OUTSIDE : pos + 1; }
static inline int pos_of_ref(int ref) { return ref - 1; }

static inline struct tg_tensor *tensor_at(const struct tg_graph *graph, int pos) {
    return pos < graph->n_leafs ? graph->leafs[pos] : graph->nodes[pos - graph->n_leafs];
}

/* tg_are_same_layout inlined (the replay checks ask it of every source). */
static inline bool same_layout(const struct tg_tensor *a, const struct tg_tensor *b) {
    if (a->type != b->type) return false;
    for (int d = 0; d < TG_MAX_DIMS; d++) {
        if (a->ne[d] != b->ne[d] || a->nb[d] != b->nb[d]) return false;
    }
    return true;
}

/* ---- the planning pass's table (alloc_plan.c) --------------------------------------------- */

/* Per tensor the pass touches. */
struct tensor_info {
    int pos;          /* graph position, POS_OUTSIDE when it is neither a node nor a leaf */
    int n_consumers;  /* consumers not yet executed */
    int n_views;      /* views (with an op) not yet done */
    bool has_readers; /* a node reads it, itself or through a view with an op: it goes once they are done */
    int buffer_id;
    struct tg_plan_addr addr;
    size_t size;      /* alloc size at planning */
    bool external;    /* has memory the plan does not own */
    bool placed;      /* the plan gave it memory (possibly shared in place) */
    bool owned;       /* the plan still holds that memory (ggml's "allocated") */
    bool protected_;  /* output, or root of an output view: never freed */
    bool classified;  /* external / stale decided for this pass */
    bool listed;      /* in the pass's classification order */
    int block;        /* lifetime block holding its memory (TG_PLAN_BEST), -1 none */
    int root;         /* track id of its view root (views only), -1 none */
};

/* ---- the recorded plan (alloc_record.c) --------------------------------------------------- */

/* What a replay compares of a tensor: the structure its plan depends on. */
struct signature {
    enum tg_op op;
    enum tg_type type;
    int32_t flags;
    int src[TG_MAX_SRC];       /* refs */
    int view_src;              /* ref */
    size_t view_offs;          /* 0 for a window */
    bool window;               /* a view of memory the plan does not own (a KV cache's window): where it
                                * sits does not change the plan, so its offset may move between binds */
    uint16_t same_layout_srcs; /* bit k: source k has this tensor's layout (decides in-place) */
    unsigned char n_src;       /* 1 + the last source in use */
    bool external;             /* has memory the plan does not own */
};

/* The plan of one graph position. */
struct record {
    struct signature sig;
    int buffer_id; /* -1: the plan gives it no memory (view, external) */
    struct tg_plan_addr addr;
    size_t size;
    /* The tensor's ne and nb when planned.  A replay that finds them (and the
     * type, in sig) unchanged knows its size and its sources' same-layout
     * bits without computing them. */
    uint64_t shape[2 * TG_MAX_DIMS];
    /* scratch of the stamped check, leafs: 1 the tensor was a bound node of
     * the last bound graph, 0 it was not, -1 unknown (ask alloc_was_last_result) */
    signed char was_result;
    /* scratch of the stamped check: the tensor has the recorded shape */
    bool shape_unchanged;
};

/* A view of the recorded plan: its root (by ref) and offset, and whether the
 * root's memory is the plan's. */
struct view_record {
    int pos;
    int root_ref;
    size_t offset;
    bool root_ours;
};

/* Where a position with memory is bound, resolved once per plan (after its
 * buffers exist). */
struct bind_entry {
    int pos;
    tg_buffer *buf;
    uint8_t *addr;
    size_t size;
};

/* What a vouched bind compares for the bind entry of the same index: the
 * recorded type and shape, else the alloc size.  Apart from the entries, so
 * that the other binds read no more than where to bind. */
struct bind_fit {
    bool own_size_rule; /* its buffer type sizes tensors its own way */
    enum tg_type type;
    uint64_t shape[2 * TG_MAX_DIMS];
};

/* ---- compute buffers (alloc.c) and the image (alloc_image.c) -------------------------------- */

struct chunk_buffers {
    tg_buffer **chunks;
    uint8_t **bases; /* each chunk's base address, read once when it is allocated */
    int n_chunks;
};

struct image_chunk {
    const tg_buffer *buffer;
    uint64_t generation;
};

struct tg_gallocr {
    /* ---- buffers and settings (alloc.c) ---- */
    tg_buffer_type **bufts;
    int *owner_of;                 /* buffer id -> first id with the same buffer type */
    struct chunk_buffers *buffers; /* used at owner ids */
    tg_buffer **retired;           /* outgrown buffers: memory released, object kept so stale tensors say so */
    /* The replay checks ask of every weight whether its buffer is ours: the
     * last answers, one each way.  Ours stays ours (retired buffers are kept);
     * a foreign buffer can only become ours when buffers grow. */
    const tg_buffer *known_ours, *known_foreign;
    struct tg_gallocr_stats stats;
    int n_bufs, n_retired, cap_retired;
    enum tg_plan_policy requested_policy;
    enum tg_fault fault;

    /* ---- the planning pass (alloc_plan.c) ---- */
    struct tg_planner *planners;   /* used at owner ids */
    size_t *live_bytes;            /* per owner id, during planning */
    size_t *lower_bound;           /* per owner id */
    int *n_tensors;                /* per buffer id */
    /* Each tensor the pass touches gets a track id in the order it is first
     * met, so infos and tracked fill front to back: a table indexed by bucket
     * would be touched at scattered places (fresh pages on every first
     * reserve of a large graph). */
    struct tg_hash_set hash;
    int *track_of_bucket;             /* [hash.size] */
    const struct tg_tensor **tracked; /* [cap_infos]: track id -> tensor */
    struct tensor_info *infos;        /* [cap_infos] */
    /* The graph of the pass by track id, so the pass and the records look
     * nothing up: each leaf's and node's, each node's sources' (-1 where
     * empty) and how many sources it uses, and the tensors in the order they
     * are classified (graph order). */
    int *leaf_track, *node_track, *src_track;
    unsigned char *n_src;
    int *walk;
    /* Lifetimes of the memory blocks the online pass hands out, for the
     * offline re-placement of TG_PLAN_BEST: a block starts when memory is
     * taken, continues through in-place reuse, ends when it is freed. */
    struct tg_live_block *blocks;
    int *block_owner;
    int n_tracked, cap_infos;
    int n_walk, cap_leaf_track, cap_node_track, cap_src_track, cap_n_src;
    int n_blocks, cap_blocks;
    int step; /* node step of the planning pass (0 for leafs and inputs) */

    /* ---- the recorded plan (alloc_record.c) ---- */
    struct record *records;     /* [n_leafs + n_nodes], by position */
    struct view_record *views;
    int *external_nodes;        /* nodes the plan leaves in memory of their own */
    struct bind_entry *binds;
    struct bind_fit *bind_fits; /* one per bind entry */
    int n_nodes, n_leafs, cap_records;
    int n_views, cap_views;
    int n_external_nodes, cap_external_nodes;
    int n_binds, cap_binds, cap_bind_fits;
    bool have_plan;           /* a plan is recorded (report available) */
    bool plan_bindable;       /* buffers exist that hold the recorded plan */
    bool size_only;           /* the recorded plan came from reserve_n_size */
    bool plan_refers_outside; /* a recorded source or view root is neither a node nor a leaf */
    bool binds_stale;         /* binds must be resolved again (a new plan, or new buffers) */

    /* ---- the last bind (alloc_record.c) ---- */
    /* Its nodes, kept as a list and hashed only when a check must ask (a
     * leaf found in our buffer), off the replay path.  A bind fills the
     * other list and swaps it in when it succeeds. */
    bool last_bound_hashed;
    const struct tg_tensor **last_bound, **next_bound;
    struct tg_hash_set last_bound_set;
    uint64_t bind_token;     /* names the last successful bind; 0: none since the replay state was forgotten */
    uint64_t last_bind_pass; /* stamp pass of the last bind; 0: none (the general path binds unstamped) */
    int n_last_bound, n_next_bound, cap_last_bound, cap_next_bound;

    /* ---- the unchanged graph (alloc_image.c) ---- */
    /* The graph of the last bind as that bind left it, taken once the same
     * tensors came back.  Valid while image_token is the bind token.  Imaging
     * costs a copy, so after each image that did not match, twice as many
     * binds of the same tensors are waited for before the next one. */
    uint64_t *image;
    struct image_chunk *image_chunks; /* the compute chunks and their generations when imaged */
    uint64_t image_token;
    uint64_t same_tensor_binds; /* stamped binds in a row of the last bound tensors */
    int cap_image_words;
    int n_image_chunks, cap_image_chunks;
    unsigned image_misses;      /* images that did not match, since the replay state was forgotten */
};

/* ---- alloc.c --------------------------------------------------------------------------------- */

/* Whether buf is one of the allocator's compute buffers (in use or retired). */
bool alloc_owns_buffer(const tg_gallocr *g, const tg_buffer *buf);

/* alloc_owns_buffer with the last answers kept (the replay checks ask it of
 * every weight). */
static inline __attribute__((always_inline)) bool alloc_owns_buffer_cached(tg_gallocr *g, const tg_buffer *buf) {
    if (buf == g->known_ours) return buf != NULL;
    if (buf == g->known_foreign) return false;
    const bool ours = alloc_owns_buffer(g, buf);
    if (ours) g->known_ours = buf;
    else g->known_foreign = buf;
    return ours;
}

static inline __attribute__((always_inline)) size_t alloc_size(const tg_gallocr *g, int buffer_id,
                                                              const struct tg_tensor *t) {
    tg_buffer_type *buft = g->bufts[buffer_id];
    /* a buffer type's own rule goes through tg_buft_get_alloc_size (never fewer than the tensor's bytes) */
    return buft->iface.get_alloc_size ? tg_buft_get_alloc_size(buft, t) : tg_nbytes_inline(t);
}

/* Whether a fault is on that changes what planning or the general check
 * decide (the replays then stand aside); trust-vouch acts on the vouched
 * replay alone. */
static inline bool alloc_fault_changes_planning(const tg_gallocr *g) {
    return g->fault != TG_FAULT_NONE && g->fault != TG_FAULT_TRUST_VOUCH;
}

/* Forgets everything the replays derived from the recorded plan and the last
 * bind: bind entries, the bind token and stamp pass, the image and its
 * back-off, the buffer-ownership answers.  The one place they are reset:
 * every event that can make one wrong (a new plan, a fault switched, buffers
 * grown or retired, a failed bind) calls it. */
void alloc_forget_replays(tg_gallocr *g);

/* ASan visibility inside the compute buffers: binding a plan poisons each
 * host chunk and unpoisons just the tensors it binds, so a kernel or a
 * caller touching memory no tensor of the current plan owns (a stale tensor
 * of an earlier graph, a read past a tensor) is reported even though a chunk
 * is one allocation.  Inline no-ops elsewhere (the bind loop calls one per
 * tensor). */
#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN 1
#endif
#endif
#ifdef TG_ASAN
#include <sanitizer/asan_interface.h>
static inline void alloc_poison_chunk(tg_buffer *b) {
    if (b && tg_buffer_is_host(b) && tg_buffer_get_base(b)) ASAN_POISON_MEMORY_REGION(tg_buffer_get_base(b), b->size);
}
static inline void alloc_unpoison_chunk(tg_buffer *b) {
    if (b && tg_buffer_is_host(b) && tg_buffer_get_base(b)) ASAN_UNPOISON_MEMORY_REGION(tg_buffer_get_base(b), b->size);
}
static inline void alloc_unpoison_tensor(const struct tg_tensor *t, size_t size) {
    if (t->buffer && tg_buffer_is_host(t->buffer)) ASAN_UNPOISON_MEMORY_REGION(t->data, size);
}
#else
static inline void alloc_poison_chunk(tg_buffer *b) { (void)b; }
static inline void alloc_unpoison_chunk(tg_buffer *b) { (void)b; }
static inline void alloc_unpoison_tensor(const struct tg_tensor *t, size_t size) {
    (void)t;
    (void)size;
}
#endif

/* ---- alloc_plan.c ---------------------------------------------------------------------------- */

/* Tracks graph's nodes, leafs, sources and view roots and classifies each:
 * memory the plan does not own (external), or planned here; refuses a
 * result of an earlier graph used as an input (TG_ERR_STALE), naming it. */
enum tg_status alloc_classify(tg_gallocr *g, struct tg_graph *graph);
/* The planning pass over graph (classified first): liveness, in-place reuse,
 * online placement per buffer id, then the offline re-placement of
 * TG_PLAN_BEST.  Leaves each tracked tensor's placement in its info. */
enum tg_status alloc_plan_graph(tg_gallocr *g, struct tg_graph *graph, const int *node_ids, const int *leaf_ids);
/* t's info in the pass that classified the graph last, or NULL. */
struct tensor_info *alloc_info_of(tg_gallocr *g, const struct tg_tensor *t);
/* Graph position pos's info (the graph alloc_classify saw last). */
static inline struct tensor_info *alloc_info_at(tg_gallocr *g, const struct tg_graph *graph, int pos) {
    return &g->infos[pos < graph->n_leafs ? g->leaf_track[pos] : g->node_track[pos - graph->n_leafs]];
}
/* Track ids of node i's sources (-1 where empty), g->n_src[i] of them. */
static inline const int *alloc_sources_of(const tg_gallocr *g, int node_index) {
    return &g->src_track[(size_t)node_index * TG_MAX_SRC];
}

/* ---- alloc_record.c -------------------------------------------------------------------------- */

/* Records the plan alloc_plan_graph left (graph classified and planned). */
enum tg_status alloc_record_plan(tg_gallocr *g, const struct tg_graph *graph);
/* Whether the recorded plan is valid for graph (docs/allocator.md, "Plan records and replay"), graph
 * classified first; why names the first difference. */
bool alloc_plan_matches(tg_gallocr *g, const struct tg_graph *graph, char *why, size_t why_size);
/* Whether t was a node bound by the last bind (so a result, not an input). */
bool alloc_was_last_result(tg_gallocr *g, const struct tg_tensor *t);

/* How alloc_bind may trust graph: the general path classified it; a replay
 * check matched it to the plan; or the caller vouched for its structure and
 * only memory was checked (binding then checks, per tensor, that it fits its
 * bytes and, per view, its root and offset, and returns TG_ERR_NEEDS_RESERVE
 * at the first that does not). */
enum bind_mode { BIND_CLASSIFIED, BIND_MATCHED, BIND_VOUCHED };
/* Binds the recorded plan to graph.  pass: the stamp pass the check left on
 * graph's tensors, 0 when it stamped none. */
enum tg_status alloc_bind(tg_gallocr *g, struct tg_graph *graph, enum bind_mode mode, uint64_t pass);

/* ---- alloc_replay.c -------------------------------------------------------------------------- */

/* The replays of alloc_graph: the unchanged graph, else the stamped check.
 * TG_OK: bound (or found bound); TG_ERR_NEEDS_RESERVE: not applicable, take
 * the general path; anything else: binding failed. */
enum tg_status alloc_replay(tg_gallocr *g, struct tg_graph *graph);

/* ---- alloc_image.c --------------------------------------------------------------------------- */

/* Whether graph is as the last bind left it (its image holds). */
bool alloc_image_holds(tg_gallocr *g, const struct tg_graph *graph);
/* After a stamped bind: images the graph once its tensors came back often
 * enough (same_tensors: this bind's tensors were the last bind's). */
void alloc_consider_image(tg_gallocr *g, const struct tg_graph *graph, bool same_tensors);

#endif

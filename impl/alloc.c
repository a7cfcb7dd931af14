/* The graph allocator: liveness counting, in-place reuse and output protection
 * (design.md 4.1-4.2), plan recording with structural signatures and replay
 * (4.3), compute buffers that only grow, binding, and stale detection (4.4). */
#include "tg-alloc.h"
#include "alloc-vouched.h"
#include "plan.h"
#include "plan-offline.h"
#include "tg-checks.h"
#include "tg-hash.h"
#include "tg-impl.h"

#include <limits.h>

/* ASan visibility inside the arena (sanitizer builds only): binding a plan
 * poisons each host compute buffer and unpoisons just the tensors it binds, so
 * a kernel or a caller touching memory no tensor of the current plan owns (a
 * stale tensor of an earlier graph, a read past a tensor) is reported even
 * though the arena is one allocation. */
#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN 1
#endif
#endif
#ifdef TG_ASAN
#include <sanitizer/asan_interface.h>
static void arena_poison(tg_buffer *b) {
    if (b && tg_buffer_is_host(b) && tg_buffer_get_base(b)) ASAN_POISON_MEMORY_REGION(tg_buffer_get_base(b), b->size);
}
static void arena_unpoison(tg_buffer *b) {
    if (b && tg_buffer_is_host(b) && tg_buffer_get_base(b)) ASAN_UNPOISON_MEMORY_REGION(tg_buffer_get_base(b), b->size);
}
static void tensor_unpoison(const struct tg_tensor *t, size_t size) {
    if (t->buffer && tg_buffer_is_host(t->buffer)) ASAN_UNPOISON_MEMORY_REGION(t->data, size);
}
#else
static void arena_poison(tg_buffer *b) { (void)b; }
static void arena_unpoison(tg_buffer *b) { (void)b; }
static void tensor_unpoison(const struct tg_tensor *t, size_t size) { (void)t; (void)size; }
#endif
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Encoded reference from a slot to another tensor of the graph. */
#define REF_OUTSIDE INT_MIN /* a tensor that is neither a node nor a leaf */
static int leaf_ref(int leaf_index) { return -2 - leaf_index; }

/* Per tensor, per planning pass. */
struct tensor_info {
    int ref;          /* node index, leaf_ref(j) or REF_OUTSIDE */
    int n_consumers;  /* consumers not yet executed */
    int n_views;      /* views (with an op) not yet done */
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
    int root;         /* info slot of its view root (views only), -1 none */
};

/* Slot codes name a tensor of the graph by position, the way the replay
 * check's stamps do: 1..n_nodes the nodes, n_nodes+1.. the leafs. */
#define CODE_NONE (-1)   /* no tensor in this slot */
#define CODE_OUTSIDE 0   /* neither a node nor a leaf */

struct slot_signature {
    enum tg_op op;
    enum tg_type type;
    int32_t flags;
    int src[TG_MAX_SRC]; /* slot codes */
    int view_src;        /* slot code */
    size_t view_offs;
    uint16_t same_layout_srcs; /* bit j: src j has this tensor's layout (decides in-place) */
    unsigned char n_src;       /* 1 + the last source slot in use */
    bool external;
};

struct slot_plan {
    struct slot_signature sig;
    int buffer_id; /* -1: the plan gives it no memory (view, external) */
    struct tg_plan_addr addr;
    size_t size;
    /* The tensor's ne and nb when planned.  A replay that finds them (and the
     * type, in sig) unchanged knows its size and its sources' same-layout
     * bits without computing them. */
    uint64_t shape[2 * TG_MAX_DIMS];
    /* scratch of a replay check, leafs: 1 the tensor was a bound node of the
     * last bound graph, 0 it was not, -1 unknown (ask was_last_result) */
    signed char was_result;
    /* scratch of a replay check: the tensor has the recorded shape */
    bool shape_unchanged;
};

/* A view slot of the recorded plan, with whether its root's memory is the
 * plan's (decided by the plan alone once a replay check matched). */
struct view_slot {
    int slot; /* leafs 0..n_leafs-1, then nodes */
    int root_code; /* slot code of its root */
    size_t offset; /* in its root */
    bool root_ours;
};

struct bind_entry {
    int slot; /* leafs 0..n_leafs-1, then nodes */
    bool own_size_rule; /* its buffer type sizes tensors its own way */
    enum tg_type type;
    tg_buffer *buf;
    uint8_t *addr;
    size_t size;
    uint64_t shape[2 * TG_MAX_DIMS];
};

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
    int n_bufs;
    tg_buffer_type **bufts;
    int *owner_of;                /* buffer id -> first id with the same buffer type */
    struct tg_planner *planners;  /* used at owner ids */
    struct chunk_buffers *buffers;/* used at owner ids */
    size_t *live_bytes;           /* per owner id, during planning */
    size_t *lower_bound;          /* per owner id */
    int *n_tensors;               /* per buffer id */

    tg_buffer **retired;          /* outgrown buffers: memory released, object kept so stale tensors say so */
    int n_retired, cap_retired;

    /* Each tensor the pass touches gets a dense index (its "slot"), in the
     * order it is first met: infos and tracked are filled front to back.  A
     * table sized by the hash (a third full) would be touched at scattered
     * places: on a 1,000-node graph that was 900 KB of fresh pages faulted
     * in by every first reserve. */
    struct tg_hash_set hash;
    int *index_of_slot;           /* [hash.size]: hash slot -> dense index */
    const struct tg_tensor **tracked; /* [cap_infos]: dense index -> tensor */
    struct tensor_info *infos;    /* [cap_infos] */
    int n_tracked, cap_infos;
    /* The graph of the planning pass, by info slot, so the pass and the plan
     * record look nothing up: each leaf's and node's slot, each node's
     * sources' slots (-1 where empty) and how many slots it uses, and the
     * tensors in the order they are classified (graph order). */
    int *leaf_slot, *node_slot, *src_slot;
    unsigned char *n_src;
    int *walk;
    int n_walk, cap_leaf_slot, cap_node_slot, cap_src_slot, cap_n_src;

    /* One array in slot-code order (nodes, then leafs), so a code is an index. */
    struct slot_plan *plans, *node_plans, *leaf_plans;
    int n_nodes, n_leafs, cap_plans;
    /* Of the recorded plan, for binding: the view slots (leafs 0..n_leafs-1
     * first, then nodes n_leafs..) and the nodes it gives memory. */
    struct view_slot *view_slots;
    int n_view_slots, cap_view_slots;
    int *external_nodes; /* nodes the plan leaves in memory of their own */
    int n_external_nodes, cap_external_nodes;
    /* Where each slot with memory is bound, resolved once per plan (after
     * its buffers exist) rather than per bind. */
    struct bind_entry *binds;
    int n_binds, cap_binds;
    bool binds_stale;
    bool have_plan;     /* a plan is recorded (report available) */
    bool plan_bindable; /* buffers exist that hold the recorded plan */
    bool size_only;     /* the recorded plan came from reserve_n_size */
    bool plan_refers_outside; /* a recorded source or view root is neither a node nor a leaf */

    /* Nodes of the last bound plan, kept as a list and hashed only when a
     * check needs to ask (a leaf found in our buffer), off the replay path. */
    const struct tg_tensor **last_bound;
    const struct tg_tensor **next_bound; /* the list a bind fills, swapped in when it succeeds */
    int n_last_bound, n_next_bound, cap_last_bound, cap_next_bound;
    bool last_bound_hashed;
    uint64_t last_bind_pass; /* replay pass of the last bind; 0: general path, or a reserve since */
    uint64_t bind_token;     /* names the last successful bind; 0: none since the last plan */
    /* The graph of the last bind as that bind left it (see "re-allocation
     * of the graph bound last"), taken once the same tensors came back in
     * the same slots.  Valid while image_token is the bind token.  Imaging
     * costs a copy, so after each image that did not match, twice as many
     * binds of the same tensors are waited for before the next one. */
    uint64_t *image;
    /* The compute chunks and their generations when imaged: a slot bound in
     * one is imaged as its data and the chunk's index. */
    struct image_chunk *image_chunks;
    int n_image_chunks, cap_image_chunks;
    uint64_t image_token;
    uint64_t same_tensor_binds; /* stamped binds in a row of the last bound tensors */
    int cap_image_words;
    unsigned image_misses;      /* images that did not match, since the last plan */
    struct tg_gallocr_stats stats;
    /* The replay check asks of every weight whether its buffer is ours: the
     * last answers, one each way.  Ours stays ours (retired buffers are kept);
     * a foreign buffer can only become ours when grow_buffers allocates. */
    const tg_buffer *known_ours, *known_foreign;
    struct tg_hash_set last_bound_nodes;

    /* Lifetimes of the memory blocks the online pass hands out, for the
     * offline re-placement of TG_PLAN_BEST: a block starts when memory is
     * taken, continues through in-place reuse, ends when it is freed. */
    struct tg_live_block *blocks;
    int *block_owner;
    int n_blocks, cap_blocks;
    int step; /* node step of the planning pass (0 for leafs and inputs) */

    enum tg_plan_policy requested_policy;
    enum tg_fault fault;
};

/* ---- fault names ----------------------------------------------------------------- */

static const char *const fault_names[TG_FAULT_COUNT] = {
    "none", "skip-consumer-count", "ignore-output-flag", "inplace-ignore-layout",
    "free-view-root", "merge-off-by-one", "ignore-alignment", "stale-replay", "trust-vouch",
};

const char *tg_fault_name(enum tg_fault f) { return (unsigned)f < TG_FAULT_COUNT ? fault_names[f] : "?"; }

enum tg_fault tg_fault_from_name(const char *name) {
    for (int f = 0; name && f < TG_FAULT_COUNT; f++) {
        if (strcmp(fault_names[f], name) == 0) return (enum tg_fault)f;
    }
    return TG_FAULT_COUNT;
}

void tg_gallocr_set_fault(tg_gallocr *galloc, enum tg_fault fault) {
    if (!galloc || (unsigned)fault >= TG_FAULT_COUNT) return;
    tg_fault_announce("graph allocator", (int)fault, fault_names[fault]);
    galloc->fault = fault;
    galloc->plan_bindable = false; /* plans made under another rule set must not be replayed */
    galloc->bind_token = 0;
}

/* Whether a fault is on that changes what planning or the general check
 * decide (the replay tiers then stand aside); trust-vouch acts on the
 * vouched replay alone. */
static bool fault_changes_planning(const tg_gallocr *g) {
    return g->fault != TG_FAULT_NONE && g->fault != TG_FAULT_TRUST_VOUCH;
}

/* ---- creation ---------------------------------------------------------------------- */

tg_gallocr *tg_gallocr_new_n(tg_buffer_type **bufts, int n_bufs) {
    if (!bufts || n_bufs <= 0) {
        tg_fail(TG_ERR_INVALID, "tg_gallocr_new_n needs at least one buffer type");
        return NULL;
    }
    for (int i = 0; i < n_bufs; i++) {
        if (!bufts[i]) {
            tg_fail(TG_ERR_INVALID, "tg_gallocr_new_n: buffer type %d is NULL", i);
            return NULL;
        }
    }
    tg_gallocr *g = calloc(1, sizeof *g);
    if (!g) goto oom;
    g->n_bufs = n_bufs;
    g->requested_policy = TG_PLAN_BEST;
    g->bufts = calloc((size_t)n_bufs, sizeof *g->bufts);
    g->owner_of = calloc((size_t)n_bufs, sizeof *g->owner_of);
    g->planners = calloc((size_t)n_bufs, sizeof *g->planners);
    g->buffers = calloc((size_t)n_bufs, sizeof *g->buffers);
    g->live_bytes = calloc((size_t)n_bufs, sizeof *g->live_bytes);
    g->lower_bound = calloc((size_t)n_bufs, sizeof *g->lower_bound);
    g->n_tensors = calloc((size_t)n_bufs, sizeof *g->n_tensors);
    if (!g->bufts || !g->owner_of || !g->planners || !g->buffers || !g->live_bytes || !g->lower_bound ||
        !g->n_tensors) {
        goto oom;
    }
    for (int i = 0; i < n_bufs; i++) {
        g->bufts[i] = bufts[i];
        g->owner_of[i] = i;
        for (int j = 0; j < i; j++) {
            if (bufts[j] == bufts[i]) {
                g->owner_of[i] = j;
                break;
            }
        }
        if (g->owner_of[i] == i) {
            tg_planner_init(&g->planners[i], tg_buft_get_alignment(bufts[i]), tg_buft_get_max_size(bufts[i]));
        }
    }
    return g;
oom:
    tg_gallocr_free(g);
    tg_fail(TG_ERR_ALLOC, "out of host memory creating a graph allocator");
    return NULL;
}

tg_gallocr *tg_gallocr_new(tg_buffer_type *buft) { return tg_gallocr_new_n(&buft, 1); }

void tg_gallocr_free(tg_gallocr *g) {
    if (!g) return;
    for (int i = 0; g->owner_of && i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        if (g->planners) tg_planner_release(&g->planners[i]);
        if (g->buffers) {
            for (int c = 0; c < g->buffers[i].n_chunks; c++) {
                arena_unpoison(g->buffers[i].chunks[c]);
                tg_buffer_free(g->buffers[i].chunks[c]);
            }
            free(g->buffers[i].chunks);
            free(g->buffers[i].bases);
        }
    }
    for (int i = 0; i < g->n_retired; i++) free(g->retired[i]);
    free(g->retired);
    tg_hash_free(&g->hash);
    tg_hash_free(&g->last_bound_nodes);
    free(g->last_bound);
    free(g->next_bound);
    free(g->infos);
    free(g->tracked);
    free(g->index_of_slot);
    free(g->leaf_slot);
    free(g->node_slot);
    free(g->src_slot);
    free(g->n_src);
    free(g->walk);
    free(g->plans);
    free(g->view_slots);
    free(g->external_nodes);
    free(g->image);
    free(g->image_chunks);
    free(g->binds);
    free(g->bufts);
    free(g->owner_of);
    free(g->planners);
    free(g->buffers);
    free(g->live_bytes);
    free(g->lower_bound);
    free(g->n_tensors);
    free(g->blocks);
    free(g->block_owner);
    free(g);
}

void tg_gallocr_set_policy(tg_gallocr *galloc, enum tg_plan_policy policy) {
    if (galloc) galloc->requested_policy = policy;
}

enum tg_plan_policy tg_gallocr_get_policy(const tg_gallocr *galloc) {
    return galloc ? galloc->requested_policy : TG_PLAN_BEST;
}

/* ---- buffers --------------------------------------------------------------------------- */

static bool is_our_buffer(const tg_gallocr *g, const tg_buffer *buf) {
    if (!buf) return false;
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        for (int c = 0; c < g->buffers[i].n_chunks; c++) {
            if (g->buffers[i].chunks[c] == buf) return true;
        }
    }
    for (int i = 0; i < g->n_retired; i++) {
        if (g->retired[i] == buf) return true;
    }
    return false;
}

static inline __attribute__((always_inline)) bool is_our_buffer_cached(tg_gallocr *g, const tg_buffer *buf) {
    if (buf == g->known_ours) return buf != NULL;
    if (buf == g->known_foreign) return false;
    bool ours = is_our_buffer(g, buf);
    if (ours) g->known_ours = buf;
    else g->known_foreign = buf;
    return ours;
}

bool tg_gallocr_owns_buffer(const tg_gallocr *galloc, const tg_buffer *buf) { return galloc && is_our_buffer(galloc, buf); }

/* An outgrown buffer gives its memory back but keeps its object (with a new
 * generation), so tensors still pointing at it report TG_ERR_STALE rather
 * than touching freed memory. */
static bool retire_buffer(tg_gallocr *g, tg_buffer *buf) {
    arena_unpoison(buf);
    if (g->n_retired == g->cap_retired) {
        int cap = g->cap_retired ? g->cap_retired * 2 : 8;
        tg_buffer **grown = realloc(g->retired, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        g->retired = grown;
        g->cap_retired = cap;
    }
    if (buf->iface.free_buffer) buf->iface.free_buffer(buf);
    memset(&buf->iface, 0, sizeof buf->iface);
    buf->context = NULL;
    buf->size = 0;
    buf->generation++;
    g->retired[g->n_retired++] = buf;
    return true;
}

/* Grows the chunk buffers of owner id i to the plan (never shrinks them). */
static enum tg_status grow_buffers(tg_gallocr *g, int i) {
    struct tg_planner *p = &g->planners[i];
    struct chunk_buffers *cb = &g->buffers[i];
    if (p->n_chunks > cb->n_chunks) {
        tg_buffer **grown = realloc(cb->chunks, (size_t)p->n_chunks * sizeof *grown);
        if (!grown) return tg_fail(TG_ERR_ALLOC, "out of host memory for the compute buffer list");
        for (int c = cb->n_chunks; c < p->n_chunks; c++) grown[c] = NULL;
        cb->chunks = grown;
        uint8_t **bases = realloc(cb->bases, (size_t)p->n_chunks * sizeof *bases);
        if (!bases) return tg_fail(TG_ERR_ALLOC, "out of host memory for the compute buffer list");
        cb->bases = bases;
    }
    for (int c = 0; c < p->n_chunks; c++) {
        size_t need = tg_planner_chunk_size(p, c);
        tg_buffer *old = c < cb->n_chunks ? cb->chunks[c] : NULL;
        if (old && tg_buffer_get_size(old) >= need) continue;
        tg_buffer *fresh = tg_buft_alloc_buffer(g->bufts[i], need);
        if (!fresh) {
            char cause[256]; /* the message is rewritten below: keep the backend's reason */
            snprintf(cause, sizeof cause, "%s", tg_last_error());
            return tg_fail(TG_ERR_ALLOC, "allocating compute buffer %d (chunk %d, %zu bytes) of type '%s' failed: %s",
                           i, c, need, tg_buft_name(g->bufts[i]), cause);
        }
        tg_buffer_set_usage(fresh, TG_BUFFER_USAGE_COMPUTE);
        g->known_foreign = NULL; /* fresh may sit where a foreign buffer was */
        if (old && !retire_buffer(g, old)) {
            tg_buffer_free(fresh);
            return tg_fail(TG_ERR_ALLOC, "out of host memory for the compute buffer list");
        }
        cb->chunks[c] = fresh;
        cb->bases[c] = tg_buffer_get_base(fresh);
        if (c >= cb->n_chunks) cb->n_chunks = c + 1;
    }
    return TG_OK;
}

size_t tg_gallocr_get_buffer_size(const tg_gallocr *g, int buffer_id) {
    if (!g || buffer_id < 0 || buffer_id >= g->n_bufs || g->owner_of[buffer_id] != buffer_id) return 0;
    size_t total = 0;
    const struct chunk_buffers *cb = &g->buffers[buffer_id];
    for (int c = 0; c < cb->n_chunks; c++) total += tg_buffer_get_size(cb->chunks[c]);
    return total;
}

/* ---- per-tensor bookkeeping ---------------------------------------------------------------- */

/* The slot a tensor's hint names, when this pass tracks the tensor there.
 * The hint is only a guess (another allocator, or one in another thread, may
 * have written it since): the tensor check makes any value safe. */
static inline __attribute__((always_inline)) size_t hinted_slot(const tg_gallocr *g, const struct tg_tensor *t) {
    size_t slot = (size_t)__atomic_load_n(&t->private_.plan_hint, __ATOMIC_RELAXED);
    if (slot < (size_t)g->n_tracked && g->tracked[slot] == t) return slot;
    return TG_HASH_FULL;
}

/* The slot of t, or TG_HASH_FULL when the pass does not track it. */
static size_t slot_of(const tg_gallocr *g, const struct tg_tensor *t) {
    size_t slot = hinted_slot(g, t);
    if (slot != TG_HASH_FULL) return slot;
    size_t h = tg_hash_find(&g->hash, t);
    return h == TG_HASH_FULL ? TG_HASH_FULL : (size_t)g->index_of_slot[h];
}

static struct tensor_info *info_of(tg_gallocr *g, const struct tg_tensor *t) {
    size_t slot = slot_of(g, t);
    return slot == TG_HASH_FULL ? NULL : &g->infos[slot];
}

/* Room for n tracked tensors in tracked, infos and walk (each tensor is
 * listed in walk at most once); false when memory is short. */
static bool size_tracking_tables(tg_gallocr *g, int n) {
    int cap = g->cap_infos; /* tracked and walk are at least as long as infos */
    if (!tg_grow_array((void **)&g->tracked, &cap, n, sizeof *g->tracked)) return false;
    cap = g->cap_infos;
    if (!tg_grow_array((void **)&g->walk, &cap, n, sizeof *g->walk)) return false;
    return tg_grow_array((void **)&g->infos, &g->cap_infos, n, sizeof *g->infos);
}

/* Sets the tracking hash to size slots (a power of two) holding every tensor
 * tracked so far; false when memory is short (the old table is kept). */
static bool size_tracking_hash(tg_gallocr *g, size_t size) {
    struct tg_hash_set grown;
    int *index = malloc(size * sizeof *index);
    if (!index || !tg_hash_init(&grown, size)) {
        free(index);
        return false;
    }
    for (int i = 0; i < g->n_tracked; i++) index[tg_hash_insert(&grown, g->tracked[i])] = i;
    tg_hash_free(&g->hash);
    free(g->index_of_slot);
    g->hash = grown;
    g->index_of_slot = index;
    return true;
}

/* The table is kept at most half full.  It starts sized for the graph's own
 * nodes and leafs: tensors outside the graph (sources and view roots it
 * does not list) are few, and every slot of the table is touched, so one
 * sized for the worst case (every source distinct) cost fresh pages. */
static bool grow_tracking_hash(tg_gallocr *g) { return size_tracking_hash(g, g->hash.size * 2); }

/* Every tensor the graph touches gets an info; its slot, or -1 when memory
 * for the table is short. */
static int track(tg_gallocr *g, struct tg_tensor *t, int ref) {
    size_t slot = hinted_slot(g, t);
    if (slot == TG_HASH_FULL) {
        if ((size_t)(g->n_tracked + 1) * 2 > g->hash.size && !grow_tracking_hash(g)) return -1;
        bool added;
        size_t h = tg_hash_insert_new(&g->hash, t, &added);
        if (h == TG_HASH_FULL) return -1;
        if (!added) {
            slot = (size_t)g->index_of_slot[h];
        } else {
            /* infos may move: callers hold no info across a track */
            if (g->n_tracked == g->cap_infos && !size_tracking_tables(g, g->cap_infos * 2)) return -1;
            slot = (size_t)g->n_tracked++;
            g->index_of_slot[h] = (int)slot;
            g->tracked[slot] = t;
            memset(&g->infos[slot], 0, sizeof g->infos[slot]);
            g->infos[slot].ref = ref;
            g->infos[slot].buffer_id = -1;
            g->infos[slot].block = -1;
            g->infos[slot].root = -1;
        }
    }
    __atomic_store_n(&t->private_.plan_hint, (uint64_t)slot, __ATOMIC_RELAXED);
    return (int)slot;
}

static enum tg_status prepare_tracking(tg_gallocr *g, const struct tg_graph *graph) {
    if ((size_t)graph->n_nodes + (size_t)graph->n_leafs > (size_t)INT_MAX / 8 ||
        (size_t)graph->n_nodes > (size_t)INT_MAX / TG_MAX_SRC) {
        return tg_fail(TG_ERR_INVALID, "graph of %d nodes and %d leafs is too large to plan", graph->n_nodes,
                       graph->n_leafs);
    }
    /* Room for the listed tensors: the few outside the graph (sources and
     * view roots it does not list) grow the tables as they come. */
    const int listed = graph->n_nodes + graph->n_leafs + 16;
    if (!tg_grow_array((void **)&g->leaf_slot, &g->cap_leaf_slot, graph->n_leafs, sizeof *g->leaf_slot) ||
        !tg_grow_array((void **)&g->node_slot, &g->cap_node_slot, graph->n_nodes, sizeof *g->node_slot) ||
        !tg_grow_array((void **)&g->src_slot, &g->cap_src_slot, graph->n_nodes * TG_MAX_SRC, sizeof *g->src_slot) ||
        !tg_grow_array((void **)&g->n_src, &g->cap_n_src, graph->n_nodes, sizeof *g->n_src) ||
        (g->cap_infos < listed && !size_tracking_tables(g, listed))) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
    }
    g->n_tracked = 0;
    const size_t hash_size = (size_t)listed * 2;
    if (g->hash.size < hash_size) {
        if (!size_tracking_hash(g, tg_hash_size_for(hash_size))) {
            return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
        }
    } else {
        tg_hash_clear(&g->hash);
    }
    g->n_walk = 0;
    return TG_OK;
}

/* Whether t was a node bound by the last plan (so a result, not an input). */
static bool was_last_result(tg_gallocr *g, const struct tg_tensor *t) {
    if (g->n_last_bound == 0) return false;
    if (!g->last_bound_hashed) {
        size_t want = (size_t)g->n_last_bound * 2 + 16;
        if (g->last_bound_nodes.size < want) {
            tg_hash_free(&g->last_bound_nodes);
            if (!tg_hash_init(&g->last_bound_nodes, want)) {
                /* no memory for the table: a linear scan gives the same answer */
                for (int i = 0; i < g->n_last_bound; i++) {
                    if (g->last_bound[i] == t) return true;
                }
                return false;
            }
        } else {
            tg_hash_clear(&g->last_bound_nodes);
        }
        for (int i = 0; i < g->n_last_bound; i++) tg_hash_insert(&g->last_bound_nodes, g->last_bound[i]);
        g->last_bound_hashed = true;
    }
    return tg_hash_contains(&g->last_bound_nodes, t);
}

/* Decides whether t (not a view) has memory the plan does not own, and refuses
 * a result of an earlier graph used as an input here. */
static enum tg_status classify_one(tg_gallocr *g, const struct tg_tensor *t, struct tensor_info *info) {
    if (info->classified || t->view_src) return TG_OK;
    info->classified = true;
    bool has_memory = t->data || t->buffer;
    if (has_memory && is_our_buffer(g, t->buffer)) {
        /* Ours from an earlier bind: a node (or input leaf) of this graph is
         * planned again; anything else is a result the new plan would overwrite. */
        bool node_here = info->ref >= 0;
        bool leaf_here = info->ref <= -2 && info->ref != REF_OUTSIDE;
        if (!node_here && (!leaf_here || was_last_result(g, t))) {
            return tg_fail(TG_ERR_STALE, "tensor '%s' lives in this allocator's compute buffer (a result of an "
                           "earlier graph) and is used as an input here; planning this graph would overwrite "
                           "it: copy it into a buffer you own (tg_alloc_ctx_tensors + tg_tensor_copy) first",
                           t->name);
        }
        has_memory = false;
    } else if (has_memory && info->ref >= 0 && t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE) {
        /* a node bound by another allocator earlier (the graph moved between
         * schedulers): its memory belongs to that plan, so plan it again here */
        has_memory = false;
    }
    info->external = has_memory;
    if (!has_memory && info->ref == REF_OUTSIDE) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' is used by the graph but is neither a node nor a leaf of it "
                       "and has no memory: build the graph with tg_graph_build_forward_expand", t->name);
    }
    return TG_OK;
}

/* Appends slot to the classification order unless it is there already. */
static void list_once(tg_gallocr *g, int slot) {
    if (g->infos[slot].listed) return;
    g->infos[slot].listed = true;
    g->walk[g->n_walk++] = slot;
}

/* Tracks t and its view root (the root's slot kept in t's info) and lists
 * both for classification on first sight; t's slot, or -1. */
static int walk_tensor(tg_gallocr *g, struct tg_tensor *t) {
    int slot = track(g, t, REF_OUTSIDE);
    if (slot < 0) return -1;
    list_once(g, slot);
    if (t->view_src && g->infos[slot].root < 0) {
        int root = track(g, t->view_src, REF_OUTSIDE); /* may move infos */
        if (root < 0) return -1;
        g->infos[slot].root = root;
        list_once(g, root);
    }
    return slot;
}

static enum tg_status tracking_out_of_memory(void) {
    return tg_fail(TG_ERR_ALLOC, "out of host memory for the allocator's tensor table");
}

/* Registers nodes, leafs, node sources and view roots (the slot tables of the
 * pass), then classifies them in graph order (so the first offending tensor
 * is the one reported). */
static enum tg_status classify_tensors(tg_gallocr *g, struct tg_graph *graph) {
    enum tg_status st = prepare_tracking(g, graph);
    if (st != TG_OK) return st;
    for (int i = 0; i < graph->n_nodes; i++) {
        if ((g->node_slot[i] = track(g, graph->nodes[i], i)) < 0) return tracking_out_of_memory();
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        if ((g->leaf_slot[j] = track(g, graph->leafs[j], leaf_ref(j))) < 0) return tracking_out_of_memory();
    }
    /* A leaf is not computed here: its own sources do not matter. */
    for (int j = 0; j < graph->n_leafs; j++) {
        if (walk_tensor(g, graph->leafs[j]) < 0) return tracking_out_of_memory();
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        struct tg_tensor *t = graph->nodes[i];
        if (walk_tensor(g, t) < 0) return tracking_out_of_memory();
        int *slots = &g->src_slot[(size_t)i * TG_MAX_SRC];
        int n = 0;
        for (int k = 0; k < TG_MAX_SRC; k++) {
            slots[k] = -1;
            if (!t->src[k]) continue;
            if ((slots[k] = walk_tensor(g, t->src[k])) < 0) return tracking_out_of_memory();
            n = k + 1;
        }
        g->n_src[i] = (unsigned char)n;
    }
    for (int w = 0; w < g->n_walk; w++) {
        int slot = g->walk[w];
        if ((st = classify_one(g, g->tracked[slot], &g->infos[slot])) != TG_OK) return st;
    }
    return TG_OK;
}

/* ---- the planning pass ----------------------------------------------------------------------- */

static inline __attribute__((always_inline)) size_t alloc_size(tg_gallocr *g, int buffer_id, const struct tg_tensor *t) {
    tg_buffer_type *buft = g->bufts[buffer_id];
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : tg_nbytes_inline(t);
}

/* tg_are_same_layout inlined (the replay check asks it of every source). */
static inline bool same_layout(const struct tg_tensor *a, const struct tg_tensor *b) {
    if (a->type != b->type) return false;
    for (int d = 0; d < TG_MAX_DIMS; d++) {
        if (a->ne[d] != b->ne[d] || a->nb[d] != b->nb[d]) return false;
    }
    return true;
}

static void note_live(tg_gallocr *g, int owner, size_t delta_up, size_t delta_down) {
    g->live_bytes[owner] += delta_up;
    g->live_bytes[owner] -= delta_down;
    if (g->live_bytes[owner] > g->lower_bound[owner]) g->lower_bound[owner] = g->live_bytes[owner];
}

static enum tg_status release_tensor(tg_gallocr *g, const struct tg_tensor *t, struct tensor_info *info) {
    if (info->protected_ || !info->owned) return TG_OK;
    if (info->block >= 0) g->blocks[info->block].end = g->step;
    int owner = g->owner_of[info->buffer_id];
    struct tg_planner *p = &g->planners[owner];
    info->owned = false;
    note_live(g, owner, 0, tg_planner_round(p, info->size));
    return tg_planner_free(p, info->addr, info->size, t->name);
}

static const int *sources_of(const tg_gallocr *g, int node_index) {
    return &g->src_slot[(size_t)node_index * TG_MAX_SRC];
}

/* Tries to give node i the memory of one of its sources (design.md 4.2). */
static bool take_source_in_place(tg_gallocr *g, int i, struct tg_tensor *node, struct tensor_info *info,
                                 int buffer_id, enum tg_status *st) {
    if (!tg_op_can_inplace(node->op)) return false;
    int owner = g->owner_of[buffer_id];
    struct tg_planner *p = &g->planners[owner];
    size_t node_padded = tg_planner_round(p, alloc_size(g, buffer_id, node));
    const int *srcs = sources_of(g, i);
    for (int k = 0; k < g->n_src[i]; k++) {
        if (srcs[k] < 0) continue;
        struct tg_tensor *parent = node->src[k];
        struct tensor_info *pi = &g->infos[srcs[k]];
        if (!pi->owned || pi->buffer_id != buffer_id || pi->protected_) continue;
        if (g->fault != TG_FAULT_INPLACE_IGNORE_LAYOUT && !tg_are_same_layout(node, parent)) continue;
        if (pi->n_consumers != 1 || pi->n_views != 0) continue;
        size_t parent_padded = tg_planner_round(p, pi->size);
        if (node_padded > parent_padded) continue;
        info->buffer_id = buffer_id;
        info->addr = pi->addr;
        info->size = alloc_size(g, buffer_id, node);
        info->block = pi->block; /* the parent's block lives on (its surplus tail too: conservative) */
        pi->owned = false;
        if (parent_padded > node_padded) {
            /* Op-dependent alloc sizes: hand the parent's surplus tail back. */
            struct tg_plan_addr tail = {pi->addr.chunk, pi->addr.offset + node_padded};
            note_live(g, owner, 0, parent_padded - node_padded);
            *st = tg_planner_free(p, tail, parent_padded - node_padded, parent->name);
        }
        return true;
    }
    return false;
}

static enum tg_status open_block(tg_gallocr *g, struct tensor_info *info, int owner) {
    if (g->n_blocks == g->cap_blocks) {
        int cap = g->cap_blocks ? g->cap_blocks * 2 : 256;
        struct tg_live_block *b = realloc(g->blocks, (size_t)cap * sizeof *b);
        if (b) g->blocks = b;
        int *o = realloc(g->block_owner, (size_t)cap * sizeof *o);
        if (o) g->block_owner = o;
        if (!b || !o) return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
        g->cap_blocks = cap;
    }
    info->block = g->n_blocks;
    g->block_owner[g->n_blocks] = owner;
    g->blocks[g->n_blocks++] = (struct tg_live_block){tg_planner_round(&g->planners[owner], info->size), g->step, -1, 0};
    return TG_OK;
}

/* Gives t (info slot `slot`) memory in buffer_id unless it has some already.
 * node_index: t's index when it is the node being computed (it may then take
 * a source's memory in place), else -1. */
static enum tg_status place_tensor(tg_gallocr *g, struct tg_tensor *t, int slot, int buffer_id, int node_index) {
    struct tensor_info *info = &g->infos[slot];
    if (t->view_src || info->external || info->placed) return TG_OK;
    if (buffer_id < 0 || buffer_id >= g->n_bufs) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s': buffer id %d is out of range (the allocator has %d buffers)",
                       t->name, buffer_id, g->n_bufs);
    }
    info->placed = true;
    info->owned = true;
    g->n_tensors[buffer_id]++;
    enum tg_status st = TG_OK;
    if (node_index >= 0 && take_source_in_place(g, node_index, t, info, buffer_id, &st)) return st;
    int owner = g->owner_of[buffer_id];
    info->buffer_id = buffer_id;
    info->size = alloc_size(g, buffer_id, t);
    st = tg_planner_alloc(&g->planners[owner], info->size, t->name, &info->addr);
    if (st == TG_OK) note_live(g, owner, tg_planner_round(&g->planners[owner], info->size), 0);
    if (st == TG_OK) st = open_block(g, info, owner);
    return st;
}

static int id_at(const int *ids, int i) { return ids ? ids[i] : 0; }

static void mark_protected(tg_gallocr *g, const struct tg_tensor *t, int slot) {
    if (!(t->flags & TG_FLAG_OUTPUT) || g->fault == TG_FAULT_IGNORE_OUTPUT_FLAG) return;
    struct tensor_info *info = &g->infos[slot];
    info->protected_ = true;
    if (info->root >= 0) g->infos[info->root].protected_ = true;
}

/* Slot u of graph: leafs 0..n_leafs-1, then nodes (the order binding needs:
 * a node may view a leaf). */
static struct tg_tensor *slot_tensor(const struct tg_graph *graph, int u) {
    return u < graph->n_leafs ? graph->leafs[u] : graph->nodes[u - graph->n_leafs];
}

/* The tensor a slot code names (1..n_nodes the nodes, then the leafs). */
static struct tg_tensor *tensor_of_code(const struct tg_graph *graph, int code) {
    return code <= graph->n_nodes ? graph->nodes[code - 1] : graph->leafs[code - 1 - graph->n_nodes];
}

/* Info slot u of the graph's slots: leafs 0..n_leafs-1, then nodes. */
static int info_slot_at(const tg_gallocr *g, const struct tg_graph *graph, int u) {
    return u < graph->n_leafs ? g->leaf_slot[u] : g->node_slot[u - graph->n_leafs];
}

/* TG_PLAN_BEST: the online pass fixed which tensors share memory (in-place
 * chains) and when each block is taken and freed; place those lifetime blocks
 * again with the offline portfolio, and keep the result when it is smaller
 * than the online plan.  Only single-chunk address spaces are re-placed (a
 * buffer type with a max size keeps the online chunking). */
static void replan_offline(tg_gallocr *g, const struct tg_graph *graph) {
    for (int b = 0; b < g->n_blocks; b++) {
        if (g->blocks[b].end < 0) g->blocks[b].end = graph->n_nodes; /* never freed: live to the end */
    }
    for (int owner = 0; owner < g->n_bufs; owner++) {
        struct tg_planner *p = &g->planners[owner];
        if (g->owner_of[owner] != owner || p->n_chunks != 1) continue;
        int n = 0;
        for (int b = 0; b < g->n_blocks; b++) n += g->block_owner[b] == owner;
        struct tg_live_block *mine = malloc((size_t)(n > 0 ? n : 1) * sizeof *mine);
        int *index = malloc((size_t)(n > 0 ? n : 1) * sizeof *index);
        if (!mine || !index) { /* keep the online plan: valid, just not re-placed */
            free(mine);
            free(index);
            continue;
        }
        n = 0;
        for (int b = 0; b < g->n_blocks; b++) {
            if (g->block_owner[b] != owner) continue;
            index[n] = b;
            mine[n++] = g->blocks[b];
        }
        struct tg_offline_options opts = {.alignment = p->alignment};
        size_t peak = tg_plan_offline(mine, n, &opts);
        if (peak < tg_planner_chunk_size(p, 0) && peak <= p->max_chunk_size) {
            for (int k = 0; k < n; k++) g->blocks[index[k]].offset = mine[k].offset;
            for (int u = 0; u < graph->n_leafs + graph->n_nodes; u++) {
                struct tensor_info *info = &g->infos[info_slot_at(g, graph, u)];
                if (!info->placed || info->block < 0 || g->block_owner[info->block] != owner) continue;
                info->addr = (struct tg_plan_addr){0, g->blocks[info->block].offset};
            }
            tg_planner_set_chunk_size(p, 0, peak);
        }
        free(mine);
        free(index);
    }
}

/* Node i's sources are done with once it ran: free those no one needs any more. */
static enum tg_status release_sources(tg_gallocr *g, int i, const struct tg_tensor *node) {
    const int *srcs = sources_of(g, i);
    for (int k = 0; k < g->n_src[i]; k++) {
        if (srcs[k] < 0) continue;
        const struct tg_tensor *src = node->src[k];
        struct tensor_info *si = &g->infos[srcs[k]];
        si->n_consumers--;
        if (si->n_consumers != 0 || si->n_views != 0) continue;
        enum tg_status st;
        if (si->root >= 0) {
            struct tensor_info *ri = &g->infos[si->root];
            /* The view is done with: its root may go once nothing else needs it. */
            if (src->op != TG_OP_NONE && g->fault != TG_FAULT_FREE_VIEW_ROOT) ri->n_views--;
            if (ri->n_views != 0 || ri->n_consumers != 0) continue;
            st = release_tensor(g, src->view_src, ri);
        } else {
            st = release_tensor(g, src, si);
        }
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

static enum tg_status plan_graph(tg_gallocr *g, struct tg_graph *graph, const int *node_ids, const int *leaf_ids) {
    enum tg_status st = classify_tensors(g, graph);
    if (st != TG_OK) return st;
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] == i) {
            tg_planner_reset(&g->planners[i]);
            g->planners[i].alignment = g->fault == TG_FAULT_IGNORE_ALIGNMENT ? 1 : tg_buft_get_alignment(g->bufts[i]);
            if (g->planners[i].alignment == 0) g->planners[i].alignment = 1;
            g->planners[i].merge_off_by_one = g->fault == TG_FAULT_MERGE_OFF_BY_ONE;
        }
        g->live_bytes[i] = g->lower_bound[i] = 0;
        g->n_tensors[i] = 0;
    }
    for (int i = 0; i < graph->n_nodes; i++) mark_protected(g, graph->nodes[i], g->node_slot[i]);
    for (int j = 0; j < graph->n_leafs; j++) mark_protected(g, graph->leafs[j], g->leaf_slot[j]);
    g->n_blocks = 0;
    g->step = 0;

    /* Leafs first, then input-flagged tensors, so inputs never land on reused memory. */
    for (int j = 0; j < graph->n_leafs && st == TG_OK; j++) {
        st = place_tensor(g, graph->leafs[j], g->leaf_slot[j], id_at(leaf_ids, j), -1);
    }

    bool skipped_one = false;
    for (int i = 0; i < graph->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *node = graph->nodes[i];
        struct tensor_info *info = &g->infos[g->node_slot[i]];
        if (info->root >= 0 && node->op != TG_OP_NONE && g->fault != TG_FAULT_FREE_VIEW_ROOT) {
            g->infos[info->root].n_views++;
        }
        if (node->flags & TG_FLAG_INPUT) st = place_tensor(g, node, g->node_slot[i], id_at(node_ids, i), -1);
        const int *srcs = sources_of(g, i);
        for (int k = 0; k < g->n_src[i] && st == TG_OK; k++) {
            if (srcs[k] < 0) continue;
            struct tensor_info *si = &g->infos[srcs[k]];
            if (g->fault == TG_FAULT_SKIP_CONSUMER_COUNT && !skipped_one && si->n_consumers > 0) {
                skipped_one = true; /* fault: a source with several consumers loses one */
                continue;
            }
            si->n_consumers++;
            if (node->src[k]->flags & TG_FLAG_INPUT) st = place_tensor(g, node->src[k], srcs[k], id_at(node_ids, i), -1);
        }
    }

    for (int i = 0; i < graph->n_nodes && st == TG_OK; i++) {
        struct tg_tensor *node = graph->nodes[i];
        int buffer_id = id_at(node_ids, i);
        g->step = i;
        const int *srcs = sources_of(g, i);
        for (int k = 0; k < g->n_src[i] && st == TG_OK; k++) {
            if (srcs[k] >= 0) st = place_tensor(g, node->src[k], srcs[k], buffer_id, -1);
        }
        if (st == TG_OK) st = place_tensor(g, node, g->node_slot[i], buffer_id, i);
        if (st == TG_OK) st = release_sources(g, i, node);
    }
    /* A fault-injected allocator keeps the online plan, so the injected
     * deviation reaches the bound plan unchanged for the checkers to find. */
    if (st == TG_OK && g->requested_policy == TG_PLAN_BEST && !fault_changes_planning(g)) replan_offline(g, graph);
    return st;
}

/* ---- plan records and replay ------------------------------------------------------------------ */

static int code_of_info(const struct tensor_info *info, int n_nodes) {
    if (!info || info->ref == REF_OUTSIDE) return CODE_OUTSIDE;
    return info->ref >= 0 ? info->ref + 1 : n_nodes + 1 + (-2 - info->ref);
}

static int code_of(tg_gallocr *g, const struct tg_tensor *t, int n_nodes) {
    return t ? code_of_info(info_of(g, t), n_nodes) : CODE_NONE;
}

/* Slot u's signature (leafs 0..n_leafs-1, then nodes), after
 * classify_tensors(graph): a node's sources come from the slot tables, a
 * leaf's (not walked: any tensor) by lookup. */
static void make_signature(tg_gallocr *g, const struct tg_graph *graph, int u, struct slot_signature *sig) {
    const struct tg_tensor *t = slot_tensor(graph, u);
    const struct tensor_info *info = &g->infos[info_slot_at(g, graph, u)];
    const int n_nodes = graph->n_nodes;
    memset(sig, 0, sizeof *sig);
    _Static_assert(CODE_NONE == -1, "a slot of all one bits reads as no source");
    memset(sig->src, 0xff, sizeof sig->src);
    sig->op = t->op;
    sig->type = t->type;
    sig->flags = t->flags;
    const int node_index = u - graph->n_leafs;
    /* a node's sources past n_src are empty (the slot tables say so) */
    const int n_src = node_index >= 0 ? g->n_src[node_index] : TG_MAX_SRC;
    for (int k = 0; k < n_src; k++) {
        const struct tg_tensor *src = t->src[k];
        if (!src) continue;
        sig->src[k] = node_index >= 0 ? code_of_info(&g->infos[sources_of(g, node_index)[k]], n_nodes)
                                      : code_of(g, src, n_nodes);
        if (same_layout(t, src)) sig->same_layout_srcs |= (uint16_t)(1u << k);
        sig->n_src = (unsigned char)(k + 1);
    }
    sig->view_src = t->view_src ? code_of_info(&g->infos[info->root], n_nodes) : CODE_NONE;
    sig->view_offs = t->view_offs;
    sig->external = info->external;
}

static void record_slot(tg_gallocr *g, const struct tg_graph *graph, int u, struct slot_plan *rec) {
    make_signature(g, graph, u, &rec->sig);
    const struct tg_tensor *t = slot_tensor(graph, u);
    const struct tensor_info *info = &g->infos[info_slot_at(g, graph, u)];
    rec->buffer_id = -1;
    rec->addr = (struct tg_plan_addr){-1, 0};
    rec->size = 0;
    _Static_assert(sizeof rec->shape == sizeof t->ne + sizeof t->nb, "ne and nb are recorded as one block");
    memcpy(rec->shape, t->ne, sizeof t->ne);
    memcpy(rec->shape + TG_MAX_DIMS, t->nb, sizeof t->nb);
    rec->was_result = -1;
    rec->shape_unchanged = false;
    if (info->placed && !t->view_src && !info->external) {
        rec->buffer_id = info->buffer_id;
        rec->addr = info->addr;
        rec->size = info->size;
    }
}

static const struct slot_plan *plan_of_slot(const tg_gallocr *g, int slot) {
    return slot < g->n_leafs ? &g->leaf_plans[slot] : &g->node_plans[slot - g->n_leafs];
}

/* The record of a slot code (nodes 1..n_nodes, then leafs). */
static const struct slot_plan *plan_of_code(const tg_gallocr *g, int code) {
    return &g->plans[code - 1];
}

static enum tg_status record_plan(tg_gallocr *g, const struct tg_graph *graph) {
    int n_graph = graph->n_nodes + graph->n_leafs;
    /* one record to spare: the table exists even for an empty graph (no offsets from NULL) */
    if (!tg_grow_array((void **)&g->plans, &g->cap_plans, n_graph + 1, sizeof *g->plans) ||
        !tg_grow_array((void **)&g->view_slots, &g->cap_view_slots, n_graph, sizeof *g->view_slots) ||

        !tg_grow_array((void **)&g->external_nodes, &g->cap_external_nodes, graph->n_nodes, sizeof *g->external_nodes)) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory recording a plan of %d nodes", graph->n_nodes);
    }
    g->node_plans = g->plans;
    g->leaf_plans = g->plans + graph->n_nodes;
    for (int i = 0; i < graph->n_nodes; i++) record_slot(g, graph, graph->n_leafs + i, &g->node_plans[i]);
    for (int j = 0; j < graph->n_leafs; j++) record_slot(g, graph, j, &g->leaf_plans[j]);
    g->n_nodes = graph->n_nodes;
    g->n_leafs = graph->n_leafs;
    g->n_view_slots = 0;
    g->plan_refers_outside = false;
    for (int u = 0; u < n_graph; u++) {
        const struct slot_signature *sig = &plan_of_slot(g, u)->sig;
        for (int k = 0; k < sig->n_src; k++) g->plan_refers_outside |= sig->src[k] == CODE_OUTSIDE;
        if (sig->view_src == CODE_NONE) continue;
        g->plan_refers_outside |= sig->view_src == CODE_OUTSIDE;
        bool root_ours = sig->view_src != CODE_OUTSIDE && !plan_of_code(g, sig->view_src)->sig.external;
        g->view_slots[g->n_view_slots++] = (struct view_slot){u, sig->view_src, sig->view_offs, root_ours};
    }
    g->n_external_nodes = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        if (g->node_plans[i].sig.external) g->external_nodes[g->n_external_nodes++] = i;
    }
    g->binds_stale = true;
    return TG_OK;
}

/* Whether the recorded plan is valid for graph (4.3); why names the first
 * difference.  Needs classify_tensors(graph) first. */
static bool slot_matches(tg_gallocr *g, const struct tg_graph *graph, int u, char *why, size_t why_size) {
    const struct slot_plan *rec = plan_of_slot(g, u);
    const struct tg_tensor *t = slot_tensor(graph, u);
    const bool is_leaf = u < graph->n_leafs;
    const char *kind = is_leaf ? "leaf" : "node";
    const int index = is_leaf ? u : u - graph->n_leafs;
    struct slot_signature sig;
    make_signature(g, graph, u, &sig);
    /* The injected fault is ggml's check: counts and sizes only. */
    /* both signatures are memset to 0 before they are filled: padding compares equal */
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    if (g->fault != TG_FAULT_STALE_REPLAY && memcmp(&sig, &rec->sig, sizeof sig) != 0) {
        snprintf(why, why_size, "%s %d ('%s') differs in op, type, flags, sources, view or external memory", kind,
                 index, t->name);
        return false;
    }
    bool needs_memory = !t->view_src && !g->infos[info_slot_at(g, graph, u)].external;
    if (needs_memory && rec->buffer_id < 0) {
        snprintf(why, why_size, "%s %d ('%s') has no memory in the plan", kind, index, t->name);
        return false;
    }
    if (needs_memory && alloc_size(g, rec->buffer_id, t) > rec->size) {
        snprintf(why, why_size, "%s %d ('%s') needs %zu bytes, the plan has %zu", kind, index, t->name,
                 alloc_size(g, rec->buffer_id, t), rec->size);
        return false;
    }
    return true;
}

/* Nodes first, then leafs: the first difference named is the earliest node. */
static bool plan_matches(tg_gallocr *g, const struct tg_graph *graph, char *why, size_t why_size) {
    if (graph->n_nodes != g->n_nodes || graph->n_leafs != g->n_leafs) {
        snprintf(why, why_size, "the graph has %d nodes and %d leafs, the plan %d and %d", graph->n_nodes,
                 graph->n_leafs, g->n_nodes, g->n_leafs);
        return false;
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!slot_matches(g, graph, graph->n_leafs + i, why, why_size)) return false;
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        if (!slot_matches(g, graph, j, why, why_size)) return false;
    }
    return true;
}

/* ---- binding ---------------------------------------------------------------------------------- */

static enum tg_status resolve_binds(tg_gallocr *g) {
    int n_slots = g->n_leafs + g->n_nodes;
    if (!tg_grow_array((void **)&g->binds, &g->cap_binds, n_slots, sizeof *g->binds)) {
        return tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
    }
    g->n_binds = 0;
    for (int u = 0; u < n_slots; u++) {
        const struct slot_plan *rec = plan_of_slot(g, u);
        if (rec->buffer_id < 0) continue;
        const struct chunk_buffers *cb = &g->buffers[g->owner_of[rec->buffer_id]];
        struct bind_entry *b = &g->binds[g->n_binds++];
        *b = (struct bind_entry){u, g->bufts[rec->buffer_id]->iface.get_alloc_size != NULL, rec->sig.type,
                                cb->chunks[rec->addr.chunk], cb->bases[rec->addr.chunk] + rec->addr.offset, rec->size, {0}};
        memcpy(b->shape, rec->shape, sizeof b->shape);
    }
    g->binds_stale = false;
    return TG_OK;
}

/* Views of external tensors that already have memory are left alone. */
static enum tg_status bind_view(struct tg_tensor *t, bool root_is_ours) {
    if (!t->view_src) return TG_OK;
    if (!root_is_ours && (t->buffer || !t->view_src->data)) return TG_OK;
    return tg_tensor_view_bind(t);
}

/* bind_view for a graph a replay check matched: a root of the plan's was
 * bound just before, so every root bound to has memory. */
static enum tg_status bind_matched_view(struct tg_tensor *t, bool root_is_ours) {
    if (!root_is_ours && (t->buffer || !t->view_src->data)) return TG_OK;
    return tg_tensor_view_bind_placed(t);
}

static bool view_root_is_ours(tg_gallocr *g, const struct tg_tensor *t) {
    struct tensor_info *root = info_of(g, t->view_src);
    return root && !root->external;
}

static void begin_binding(tg_gallocr *g) {
    for (int i = 0; i < g->n_bufs; i++) {
        if (g->owner_of[i] != i) continue;
        for (int c = 0; c < g->buffers[i].n_chunks; c++) {
            tg_buffer_reset(g->buffers[i].chunks[c]);
            tg_buffer_begin_plan(g->buffers[i].chunks[c]);
            arena_unpoison(g->buffers[i].chunks[c]);
            arena_poison(g->buffers[i].chunks[c]);
        }
    }
}

/* Whether t fits the bytes entry b gives it.  Checked in every build where
 * no check compared t's shape with the plan (a vouched graph): binding t
 * where it does not fit would hand out bytes the plan gave another tensor. */
static inline __attribute__((always_inline)) bool fits_entry(tg_gallocr *g, const struct bind_entry *b,
                                                             const struct tg_tensor *t) {
    /* planned here: no memory yet, or ours (a node or leaf bound before) */
    if ((t->data || t->buffer) && !is_our_buffer_cached(g, t->buffer) &&
        !(t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE)) {
        return false;
    }
    if (!b->own_size_rule && t->type == b->type && tg_lanes_zero(tg_lanes_diff(t->ne, b->shape, sizeof b->shape))) return true;
    if (!b->own_size_rule) return tg_nbytes_inline(t) <= b->size;
    tg_buffer_type *buft = b->buf->buft;
    return buft->iface.get_alloc_size(buft, t) <= b->size;
}

/* Leafs first, then nodes, at the places the planner chose inside their
 * chunks: tg_tensor_bind's checks would only repeat that.  check_fit: a
 * tensor that does not fit its bytes stops the binding with
 * TG_ERR_NEEDS_RESERVE (the caller takes the general path). */
static enum tg_status bind_slots(tg_gallocr *g, struct tg_graph *graph, bool check_fit) {
    enum tg_status st = g->binds_stale ? resolve_binds(g) : TG_OK;
    if (st == TG_OK &&
        (!tg_grow_array((void **)&g->last_bound, &g->cap_last_bound, graph->n_nodes, sizeof *g->last_bound) ||
         !tg_grow_array((void **)&g->next_bound, &g->cap_next_bound, graph->n_nodes, sizeof *g->next_bound))) {
        st = tg_fail(TG_ERR_ALLOC, "out of host memory for allocator tables");
    }
    const struct tg_tensor **bound_nodes = g->next_bound;
    int n_bound_nodes = 0;
    const int n_leafs = graph->n_leafs;
    for (int e = 0; e < g->n_binds && st == TG_OK; e++) {
        const struct bind_entry *b = &g->binds[e];
        struct tg_tensor *t = slot_tensor(graph, b->slot);
        if (check_fit && !fits_entry(g, b, t)) return TG_ERR_NEEDS_RESERVE;
        st = tg_tensor_bind_placed(t, b->buf, b->addr);
        if (st == TG_OK) tensor_unpoison(t, b->size);
        if (b->slot >= n_leafs) bound_nodes[n_bound_nodes++] = t;
    }
    g->n_next_bound = n_bound_nodes;
    return st;
}

/* After a bind succeeded: the nodes it bound are the last bound. */
static void swap_in_bound_nodes(tg_gallocr *g) {
    const struct tg_tensor **list = g->last_bound;
    g->last_bound = g->next_bound;
    g->next_bound = list;
    int cap = g->cap_next_bound;
    g->cap_next_bound = g->cap_last_bound;
    g->cap_last_bound = cap;
    g->n_last_bound = g->n_next_bound;
    g->last_bound_hashed = false;
}

/* ---- replay without hashing ---------------------------------------------------------------------
 * The common per-token call: a graph with the recorded plan's structure.  Each
 * slot's tensor is stamped with a pass number unique to this check and its
 * slot, so a source's slot is one load instead of a hash lookup.  Anything
 * unusual (duplicates, a tensor outside the graph without memory, a leaf
 * holding a result of the last plan, a mismatch) returns false and the general
 * path decides, with its precise messages. */

#define STAMP_SLOT_BITS 24
#define STAMP_MAX_SLOTS ((1 << STAMP_SLOT_BITS) - 1)

static uint64_t replay_pass_counter; /* shared by all allocators: passes never repeat */
static uint64_t bind_token_counter;  /* likewise for bind tokens */

static uint64_t stamp_of(const struct tg_tensor *t) { return __atomic_load_n(&t->private_.alloc_stamp, __ATOMIC_RELAXED); }

/* slot code: 1..n_nodes for nodes, n_nodes+1.. for leafs */
static void stamp(struct tg_tensor *t, uint64_t pass, int code) {
    __atomic_store_n(&t->private_.alloc_stamp, pass << STAMP_SLOT_BITS | (uint64_t)code, __ATOMIC_RELAXED);
}

/* t's slot code in this pass: a tensor not stamped by it is outside the graph */
static inline int stamped_code(const struct tg_tensor *t, uint64_t pass) {
    if (!t) return CODE_NONE;
    uint64_t s = stamp_of(t);
    return s >> STAMP_SLOT_BITS == pass ? (int)(s & STAMP_MAX_SLOTS) : CODE_OUTSIDE;
}

/* A tensor outside the graph (a source or a view root) must bring its own
 * memory, and not memory of this allocator (classify_one's rule). */
static bool outside_has_own_memory(tg_gallocr *g, const struct tg_tensor *t, uint64_t pass) {
    const struct tg_tensor *root = t->view_src ? t->view_src : t;
    if (root != t && stamped_code(root, pass) != CODE_OUTSIDE) return true;
    return (root->data || root->buffer) && !is_our_buffer(g, root->buffer);
}

/* classify_one for a slot tensor that is not a view: 1 external, 0 planned
 * here, -1 let the general path decide. */
static inline __attribute__((always_inline)) int slot_external(tg_gallocr *g, const struct tg_tensor *t,
                                                               signed char was_result, bool is_node) {
    bool has_memory = t->data || t->buffer;
    if (!has_memory) return 0;
    if (is_our_buffer_cached(g, t->buffer)) {
        if (is_node) return 0;
        bool result = was_result >= 0 ? was_result == 1 : was_last_result(g, t);
        return result ? -1 : 0;
    }
    if (is_node && t->buffer && tg_buffer_get_usage(t->buffer) == TG_BUFFER_USAGE_COMPUTE) return 0;
    return 1;
}

/* Whether t, not a view, comes with memory (or without) as the plan says:
 * external when planned external, planned here otherwise. */
static inline __attribute__((always_inline)) bool memory_as_planned(tg_gallocr *g, const struct tg_tensor *t,
                                                                    signed char was_result, bool is_node,
                                                                    bool planned_external) {
    int external = slot_external(g, t, was_result, is_node);
    return external >= 0 && (external == 1) == planned_external;
}

/* Whether t has the ne and nb recorded in rec. */
static inline __attribute__((always_inline)) bool shape_as_recorded(const struct tg_tensor *t,
                                                                    const struct slot_plan *rec) {
    return tg_lanes_zero(tg_lanes_diff(t->ne, rec->shape, sizeof t->ne) |
                         tg_lanes_diff(t->nb, rec->shape + TG_MAX_DIMS, sizeof t->nb));
}

/* The per-slot check, inlined into the loops of stamped_slots_match.  Leafs
 * and the nodes before t have their shape_unchanged scratch set: when t and
 * every source kept the recorded shape (the type is in the signature), the
 * same-layout bits are the recorded ones, and so is the size where the
 * buffer type uses the default size rule. */
static inline __attribute__((always_inline)) bool stamped_slot_matches(tg_gallocr *g, const struct tg_tensor *t,
                                                                        struct slot_plan *rec, bool is_node,
                                                                        uint64_t pass) {
    const struct slot_signature *sig = &rec->sig;
    if (t->op != sig->op || t->type != sig->type || t->flags != sig->flags || t->view_offs != sig->view_offs ||
        !tg_sources_empty_from(t, sig->n_src)) {
        return false;
    }
    const bool shape_unchanged = is_node ? shape_as_recorded(t, rec) : rec->shape_unchanged;
    if (is_node) rec->shape_unchanged = shape_unchanged;
    bool layouts_known = shape_unchanged;
    for (int k = 0; k < sig->n_src; k++) {
        const struct tg_tensor *src = t->src[k];
        int code = stamped_code(src, pass);
        if (code != sig->src[k]) return false;
        if (code == CODE_NONE) continue;
        if (code == CODE_OUTSIDE) {
            layouts_known = false;
            if (is_node && !outside_has_own_memory(g, src, pass)) return false;
        } else {
            layouts_known = layouts_known && plan_of_code(g, code)->shape_unchanged;
        }
    }
    if (!layouts_known) {
        uint16_t layout_bits = 0;
        for (int k = 0; k < sig->n_src; k++) {
            if (t->src[k] && same_layout(t, t->src[k])) layout_bits |= (uint16_t)(1u << k);
        }
        if (layout_bits != sig->same_layout_srcs) return false;
    }
    int view_code = stamped_code(t->view_src, pass);
    if (view_code != sig->view_src) return false;
    if (t->view_src) {
        if (view_code == CODE_OUTSIDE && !outside_has_own_memory(g, t, pass)) return false;
        return !sig->external;
    }
    int external = slot_external(g, t, rec->was_result, is_node);
    if (external < 0 || (external == 1) != sig->external) return false;
    if (external) return true;
    if (rec->buffer_id < 0) return false;
    if (shape_unchanged && !g->bufts[rec->buffer_id]->iface.get_alloc_size) return true;
    return alloc_size(g, rec->buffer_id, t) <= rec->size;
}

/* Stamps the leafs (and, for the structural check, notes which kept their
 * recorded shape); false when one is listed twice. */
static inline __attribute__((always_inline)) bool stamp_leafs(tg_gallocr *g, const struct tg_graph *graph,
                                                                uint64_t pass, bool structure, bool *same_tensors) {
    int n_nodes = graph->n_nodes;
    const uint64_t last_bind_stamp = g->last_bind_pass << STAMP_SLOT_BITS;
    bool same = g->last_bind_pass != 0;
    for (int j = 0; j < graph->n_leafs; j++) {
        uint64_t old = stamp_of(graph->leafs[j]);
        if (old >> STAMP_SLOT_BITS == pass) return false;
        same &= old == (last_bind_stamp | (uint64_t)(n_nodes + 1 + j));
        /* a stamp still of the last bind's check tells whether this leaf was a node then */
        signed char was_result = -1;
        if (g->last_bind_pass && old >> STAMP_SLOT_BITS == g->last_bind_pass) {
            int code = (int)(old & STAMP_MAX_SLOTS);
            was_result = code <= n_nodes && g->node_plans[code - 1].buffer_id >= 0;
        }
        g->leaf_plans[j].was_result = was_result;
        if (structure) g->leaf_plans[j].shape_unchanged = shape_as_recorded(graph->leafs[j], &g->leaf_plans[j]);
        stamp(graph->leafs[j], pass, n_nodes + 1 + j);
    }
    *same_tensors = same;
    return true;
}

/* ---- replay of a graph the caller vouches for -------------------------------------------------
 * The scheduler's per-token path: its own replay check has compared every
 * tensor of the new graph, slot by slot, with the graph bound under a token
 * (types, shapes, strides, ops, flags, sources, view roots and offsets), so
 * the structural half of stamped_slot_matches would only repeat it.  What the
 * scheduler cannot see is memory: which tensors arrive with memory of their
 * own, and whether it is ours.  That half runs here. */

/* Whether t fits the memory rec gives it: type and shape as recorded (the
 * size the plan gave), or an alloc size no larger.  A buffer type with its
 * own size rule is asked again.  Checked in every build: binding t where
 * it does not fit would hand out bytes the plan gave another tensor. */
static inline __attribute__((always_inline)) bool fits_record(tg_gallocr *g, const struct tg_tensor *t,
                                                              const struct slot_plan *rec) {
    if (rec->buffer_id < 0) return false;
    if (t->type == rec->sig.type && shape_as_recorded(t, rec) && !g->bufts[rec->buffer_id]->iface.get_alloc_size) {
        return true;
    }
    return alloc_size(g, rec->buffer_id, t) <= rec->size;
}

static inline bool slot_memory_matches(tg_gallocr *g, const struct tg_tensor *t, const struct slot_plan *rec,
                                       bool is_node, uint64_t pass) {
    if (t->view_src) {
        /* views are never external; a root outside the graph needs the full check */
        int code = stamped_code(t->view_src, pass);
        return code != CODE_OUTSIDE && code == rec->sig.view_src && t->view_offs == rec->sig.view_offs;
    }
    if (!memory_as_planned(g, t, rec->was_result, is_node, rec->sig.external)) return false;
    return rec->sig.external || fits_record(g, t, rec);
}

/* Leafs are stamped first, then each node is stamped and checked in one
 * visit: its sources and view root come before it in a graph built in
 * topological order (a later one reads as outside the graph, a mismatch).
 * Leafs are checked last: a leaf's recorded sources may be any slot.
 * structure: the full check, else memory only (a vouched graph). */
static inline __attribute__((always_inline)) bool stamped_slots_match(tg_gallocr *g, const struct tg_graph *graph,
                                                                       uint64_t pass, bool structure,
                                                                       bool *same_tensors) {
    bool same;
    if (!stamp_leafs(g, graph, pass, structure, &same)) return false;
    const uint64_t last_bind_stamp = g->last_bind_pass << STAMP_SLOT_BITS;
    for (int i = 0; i < graph->n_nodes; i++) {
        struct tg_tensor *t = graph->nodes[i];
        uint64_t old = stamp_of(t);
        if (old >> STAMP_SLOT_BITS == pass) return false; /* listed twice */
        same &= old == (last_bind_stamp | (uint64_t)(i + 1));
        stamp(t, pass, i + 1);
        struct slot_plan *rec = &g->node_plans[i];
        if (!(structure ? stamped_slot_matches(g, t, rec, true, pass) : slot_memory_matches(g, t, rec, true, pass))) {
            return false;
        }
    }
    for (int j = 0; j < graph->n_leafs; j++) {
        const struct tg_tensor *t = graph->leafs[j];
        struct slot_plan *rec = &g->leaf_plans[j];
        if (!(structure ? stamped_slot_matches(g, t, rec, false, pass) : slot_memory_matches(g, t, rec, false, pass))) {
            return false;
        }
    }
    *same_tensors = same;
    return true;
}

/* same_tensors: whether graph holds the tensors of the last bind, each in
 * its slot there (their stamps are that bind's). */
static bool stamped_plan_matches(tg_gallocr *g, const struct tg_graph *graph, uint64_t pass, bool *same_tensors) {
    return stamped_slots_match(g, graph, pass, true, same_tensors);
}

static bool stamped_memory_matches(tg_gallocr *g, const struct tg_graph *graph, uint64_t pass) {
    bool same_tensors;
    return stamped_slots_match(g, graph, pass, false, &same_tensors);
}

/* How bind_plan may trust graph: the general path classified its tensors;
 * a replay check matched it to the plan; or the caller vouched for its
 * structure and only memory was checked (binding then checks sizes and view
 * roots itself, and returns TG_ERR_NEEDS_RESERVE where they differ). */
enum bind_mode { BIND_CLASSIFIED, BIND_MATCHED, BIND_VOUCHED };

/* Binds the recorded plan to graph.  pass: the stamp pass the check left
 * on graph's tensors, 0 when it stamped none. */
static enum tg_status bind_plan(tg_gallocr *g, struct tg_graph *graph, enum bind_mode mode, uint64_t pass) {
    begin_binding(g);
    enum tg_status st = bind_slots(g, graph, mode == BIND_VOUCHED);
    /* leafs first: a node may view a leaf.  The general path looks at every
     * slot (under the stale-replay fault the graph may differ from the plan). */
    if (mode != BIND_CLASSIFIED) {
        for (int v = 0; v < g->n_view_slots && st == TG_OK; v++) {
            const struct view_slot *vs = &g->view_slots[v];
            struct tg_tensor *t = slot_tensor(graph, vs->slot);
            if (mode == BIND_VOUCHED &&
                (!t->view_src || t->view_offs != vs->offset || vs->root_code <= 0 ||
                 t->view_src != tensor_of_code(graph, vs->root_code))) {
                st = TG_ERR_NEEDS_RESERVE;
                break;
            }
            st = bind_matched_view(t, vs->root_ours);
        }
    } else {
        for (int u = 0; u < graph->n_nodes + graph->n_leafs && st == TG_OK; u++) {
            struct tg_tensor *t = slot_tensor(graph, u);
            if (t->view_src) st = bind_view(t, view_root_is_ours(g, t));
        }
    }
    if (st == TG_OK) swap_in_bound_nodes(g);
    g->last_bind_pass = st == TG_OK ? pass : 0;
    g->bind_token = st == TG_OK ? __atomic_add_fetch(&bind_token_counter, 1, __ATOMIC_RELAXED) : 0;
    g->stats.n_allocs += st == TG_OK;
    return st;
}

/* TG_OK: bound; TG_ERR_NEEDS_RESERVE: not applicable, take the general path;
 * anything else: binding failed. */
/* Whether a stamped replay of the recorded plan can be tried on graph at all
 * (before any tensor is looked at). */
static bool replay_possible(const tg_gallocr *g, const struct tg_graph *graph) {
    return g->have_plan && g->plan_bindable && !fault_changes_planning(g) && graph->n_nodes == g->n_nodes &&
           graph->n_leafs == g->n_leafs && graph->n_nodes + graph->n_leafs < STAMP_MAX_SLOTS;
}

static uint64_t next_replay_pass(void) { return __atomic_add_fetch(&replay_pass_counter, 1, __ATOMIC_RELAXED); }

#if TG_CHECKS
/* The replay cross-check of Debug and fuzzing builds.  The general path's
 * check (classification and plan_matches) must accept every graph a replay
 * tier accepts; general_check_refuses runs it and names the first
 * difference.  It runs before the tier binds: a bind changes which leafs
 * read as results of the last bind. */
static bool general_check_refuses(tg_gallocr *g, struct tg_graph *graph, char *why, size_t why_size) {
    enum tg_status st = classify_tensors(g, graph);
    if (st != TG_OK) {
        snprintf(why, why_size, "%s", tg_last_error());
        return true;
    }
    return !plan_matches(g, graph, why, why_size);
}

/* After a replay tier bound graph (or found it as bound): every slot the
 * plan gives memory is at the address the records name, every view of a
 * root of the plan's at its root's address plus its offset. */
static void check_bound_as_planned(tg_gallocr *g, const struct tg_graph *graph, const char *tier) {
    for (int u = 0; u < graph->n_leafs + graph->n_nodes; u++) {
        const struct tg_tensor *t = slot_tensor(graph, u);
        const struct slot_plan *rec = plan_of_slot(g, u);
        if (rec->buffer_id >= 0) {
            const struct chunk_buffers *cb = &g->buffers[g->owner_of[rec->buffer_id]];
            const uint8_t *want = cb->bases[rec->addr.chunk] + rec->addr.offset;
            if (t->buffer != cb->chunks[rec->addr.chunk] || (const uint8_t *)t->data != want) {
                tg_internal_error(__FILE__, __LINE__, "the allocator's %s replay left '%s' at %p, its plan says %p",
                                  tier, t->name, t->data, (const void *)want);
            }
        }
    }
    for (int v = 0; v < g->n_view_slots; v++) {
        const struct tg_tensor *t = slot_tensor(graph, g->view_slots[v].slot);
        if (g->view_slots[v].root_ours && t->data != (uint8_t *)t->view_src->data + t->view_offs) {
            tg_internal_error(__FILE__, __LINE__, "the allocator's %s replay left view '%s' away from its root '%s'",
                              tier, t->name, t->view_src->name);
        }
    }
}

static void replay_check_failed(const char *tier, const char *why) {
    tg_internal_error(__FILE__, __LINE__, "the allocator's %s replay accepted a graph the general check refuses: %s",
                      tier, why);
}
#endif

/* ---- re-allocation of the graph bound last, unchanged ----------------------------------------
 * A runtime that keeps its graph (or rebuilds it in the same memory) hands
 * the allocator the same tensors in the same slots, and usually nothing in
 * them has changed.  Then every field the replay check reads holds what it
 * held when that check passed, and every field a bind writes holds what the
 * bind wrote: the graph is bound as the plan says, and binding it again
 * would write the same values.  So once the same tensors have come back,
 * the graph is imaged right after its bind, and the next call compares it
 * with the image and returns with nothing to do while it matches.  The
 * image holds per slot, as 8-byte words in slot order (leafs, then nodes):
 *   the tensor; its first 8 bytes (type, op); a kind word (flags, the
 *   number of source slots in use, the IMAGE_ bits below and a chunk
 *   index); ne and nb; each source in use; view_src and view_offs where
 *   either is set; data as bound, then buffer and bind_generation unless
 *   the buffer is one of the allocator's chunks (the kind word names it,
 *   and image_chunks holds its generation); for a node in a buffer of
 *   another's, that buffer's usage (a compute buffer's node is planned
 *   again, any other's keeps its memory).
 * Sources and view roots compare by pointer: the slots hold the same
 * tensors, so the same pointer names the same slot.  Source slots past
 * those in use must still be empty.  Not imaged: plans that refer to a
 * tensor outside the graph (its memory is no slot's, so it would go
 * unchecked), and buffers with init_tensor or reset hooks (a bind calls
 * them, so it is not a no-op there). */

#define IMAGE_MAX_SLOT_WORDS (3 + 2 * TG_MAX_DIMS + TG_MAX_SRC + 2 + 4)
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
    if (n_graph > INT_MAX / IMAGE_MAX_SLOT_WORDS || !list_image_chunks(g) ||
        !tg_grow_array((void **)&g->image, &g->cap_image_words, n_graph * IMAGE_MAX_SLOT_WORDS, sizeof *g->image)) {
        return; /* no image: every call takes the replay check */
    }
    uint64_t *w = g->image;
    for (int u = 0; u < n_graph; u++) {
        const struct tg_tensor *t = slot_tensor(graph, u);
        const struct slot_plan *rec = plan_of_slot(g, u);
        const int n_src = rec->sig.n_src;
        const bool view_words = t->view_src || t->view_offs;
        const bool own_size_rule = rec->buffer_id >= 0 && g->bufts[rec->buffer_id]->iface.get_alloc_size;
        const int chunk = image_chunk_of(g, t->buffer);
        const bool in_chunk = chunk >= 0 && t->bind_generation == g->image_chunks[chunk].generation;
        const bool usage_word = !in_chunk && t->buffer && u >= graph->n_leafs;
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

/* Whether t, in slot u, is as imaged at *cursor; moves the cursor past its words. */
static inline __attribute__((always_inline)) bool slot_as_imaged(tg_gallocr *g, const struct tg_tensor *t, int u,
                                                                 const uint64_t **cursor) {
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
    const struct slot_plan *rec = plan_of_slot(g, u);
    return alloc_size(g, rec->buffer_id, t) <= rec->size;
}

static bool graph_as_imaged(tg_gallocr *g, const struct tg_graph *graph) {
    if (!g->image_token || g->image_token != g->bind_token) return false;
    const uint64_t *cursor = g->image;
    for (int j = 0; j < graph->n_leafs; j++) {
        if (!slot_as_imaged(g, graph->leafs[j], j, &cursor)) goto changed;
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!slot_as_imaged(g, graph->nodes[i], graph->n_leafs + i, &cursor)) goto changed;
    }
    return true;
changed:
    g->image_token = 0;
    g->image_misses += g->image_misses < 32;
    return false;
}

/* After a stamped bind: image the graph once its tensors came back
 * 2^misses times in a row. */
static void consider_image(tg_gallocr *g, const struct tg_graph *graph, bool same_tensors) {
    g->same_tensor_binds = same_tensors ? g->same_tensor_binds + 1 : 0;
    if (!same_tensors || g->same_tensor_binds < (uint64_t)1 << g->image_misses) return;
    if (g->plan_refers_outside) return;
    take_image(g, graph);
    g->same_tensor_binds = 0;
}

static enum tg_status replay_stamped(tg_gallocr *g, struct tg_graph *graph) {
    if (!replay_possible(g, graph)) return TG_ERR_NEEDS_RESERVE;
    if (graph_as_imaged(g, graph)) {
#if TG_CHECKS
        char why[256] = "";
        if (general_check_refuses(g, graph, why, sizeof why)) replay_check_failed("unchanged-graph", why);
        check_bound_as_planned(g, graph, "unchanged-graph");
#endif
        g->stats.n_allocs++;
        g->stats.n_allocs_unchanged++;
        return TG_OK;
    }
    uint64_t pass = next_replay_pass();
    bool same_tensors;
    if (!stamped_plan_matches(g, graph, pass, &same_tensors)) return TG_ERR_NEEDS_RESERVE;
#if TG_CHECKS
    char why[256] = "";
    if (general_check_refuses(g, graph, why, sizeof why)) replay_check_failed("stamped", why);
#endif
    enum tg_status st = bind_plan(g, graph, BIND_MATCHED, pass);
#if TG_CHECKS
    if (st == TG_OK) check_bound_as_planned(g, graph, "stamped");
#endif
    if (st == TG_OK) {
        g->stats.n_allocs_replayed++;
        consider_image(g, graph, same_tensors);
    }
    return st;
}

uint64_t tg_gallocr_bind_token(const tg_gallocr *g) { return g ? g->bind_token : 0; }

/* The memory half of the replay check without stamps, for a vouched graph
 * whose plan refers to nothing outside it: every view root is a slot (the
 * caller vouches for its position), no tensor is listed twice (the caller's
 * own check would have seen it), and a leaf found in this allocator's memory
 * asks the last bind's node list whether it was a result there. */
static bool vouched_memory_matches(tg_gallocr *g, const struct tg_graph *graph) {
    for (int j = 0; j < graph->n_leafs; j++) {
        const struct tg_tensor *t = graph->leafs[j];
        if (!t->view_src && !memory_as_planned(g, t, -1, false, g->leaf_plans[j].sig.external)) return false;
    }
    for (int k = 0; k < g->n_external_nodes; k++) {
        const struct tg_tensor *t = graph->nodes[g->external_nodes[k]];
        if (t->view_src || !memory_as_planned(g, t, -1, true, true)) return false;
    }
    return true;
}

enum tg_status tg_gallocr_alloc_graph_vouched(tg_gallocr *g, struct tg_graph *graph, uint64_t token) {
    if (!g || !graph || token == 0 || token != g->bind_token || !replay_possible(g, graph)) {
        return tg_gallocr_alloc_graph(g, graph);
    }
#if TG_CHECKS
    char why[256] = "";
    const bool refused = general_check_refuses(g, graph, why, sizeof why);
#endif
    uint64_t pass = 0;
    if (g->plan_refers_outside) {
        pass = next_replay_pass();
        if (!stamped_memory_matches(g, graph, pass)) return tg_gallocr_alloc_graph(g, graph);
    } else if (!vouched_memory_matches(g, graph)) {
        return tg_gallocr_alloc_graph(g, graph);
    }
    enum tg_status st = bind_plan(g, graph, g->fault == TG_FAULT_TRUST_VOUCH ? BIND_MATCHED : BIND_VOUCHED, pass);
    if (st == TG_ERR_NEEDS_RESERVE) return tg_gallocr_alloc_graph(g, graph); /* a size or view root differs */
#if TG_CHECKS
    if (st == TG_OK && refused) replay_check_failed("vouched", why);
    if (st == TG_OK) check_bound_as_planned(g, graph, "vouched");
#endif
    g->stats.n_allocs_vouched += st == TG_OK;
    return st;
}

/* ---- public entry points ------------------------------------------------------------------------ */

static enum tg_status reserve_impl(tg_gallocr *g, struct tg_graph *graph, const int *node_ids, const int *leaf_ids,
                                   bool allocate, size_t *sizes) {
    if (!g || !graph) return tg_fail(TG_ERR_INVALID, "reserve needs an allocator and a graph");
    g->have_plan = false;
    g->plan_bindable = false;
    g->last_bind_pass = 0; /* the plan's node records change: stamps no longer tell */
    g->bind_token = 0;
    g->image_token = 0;
    g->image_misses = 0;
    g->same_tensor_binds = 0;
    g->stats.n_plans++;
    enum tg_status st = plan_graph(g, graph, node_ids, leaf_ids);
    if (st == TG_OK) st = record_plan(g, graph);
    if (st != TG_OK) return st;
    g->have_plan = true;
    g->size_only = !allocate;
    for (int i = 0; i < g->n_bufs; i++) {
        bool owner = g->owner_of[i] == i;
        if (sizes) sizes[i] = owner ? tg_planner_total_size(&g->planners[i]) : 0;
        if (allocate && owner && (st = grow_buffers(g, i)) != TG_OK) return st;
    }
    g->plan_bindable = allocate;
    return TG_OK;
}

enum tg_status tg_gallocr_reserve(tg_gallocr *galloc, struct tg_graph *graph) {
    tg_clear_error(); /* a success leaves no older failure behind */
    return reserve_impl(galloc, graph, NULL, NULL, true, NULL);
}

enum tg_status tg_gallocr_reserve_n(tg_gallocr *galloc, struct tg_graph *graph, const int *node_buffer_ids,
                                    const int *leaf_buffer_ids) {
    tg_clear_error(); /* a success leaves no older failure behind */
    return reserve_impl(galloc, graph, node_buffer_ids, leaf_buffer_ids, true, NULL);
}

enum tg_status tg_gallocr_reserve_n_size(tg_gallocr *galloc, struct tg_graph *graph, const int *node_buffer_ids,
                                         const int *leaf_buffer_ids, size_t *sizes) {
    tg_clear_error(); /* a success leaves no older failure behind */
    return reserve_impl(galloc, graph, node_buffer_ids, leaf_buffer_ids, false, sizes);
}

enum tg_status tg_gallocr_alloc_graph(tg_gallocr *g, struct tg_graph *graph) {
    tg_clear_error(); /* a success leaves no older failure behind */
    if (!g || !graph) return tg_fail(TG_ERR_INVALID, "alloc_graph needs an allocator and a graph");
    if (g->have_plan && g->size_only) {
        return tg_fail(TG_ERR_NEEDS_RESERVE, "the last plan was made by tg_gallocr_reserve_n_size, which allocates "
                       "no compute buffers: call tg_gallocr_reserve (or _reserve_n) before tg_gallocr_alloc_graph");
    }
    enum tg_status st = replay_stamped(g, graph);
    if (st != TG_ERR_NEEDS_RESERVE) return st;
    st = classify_tensors(g, graph);
    if (st != TG_OK) return st;
    char why[256] = "no plan has been made yet";
    if (!g->have_plan || !g->plan_bindable || !plan_matches(g, graph, why, sizeof why)) {
        if (g->have_plan && !g->plan_bindable) snprintf(why, sizeof why, "the last reserve failed to allocate its buffers");
        if (g->n_bufs > 1) {
            return tg_fail(TG_ERR_NEEDS_RESERVE, "graph allocator with %d buffers cannot re-plan by itself (%s): call "
                           "tg_gallocr_reserve_n with the buffer ids first", g->n_bufs, why);
        }
        st = reserve_impl(g, graph, NULL, NULL, true, NULL);
        if (st != TG_OK) return st;
    }
    st = bind_plan(g, graph, BIND_CLASSIFIED, 0);
    g->stats.n_allocs_general += st == TG_OK;
    return st;
}

void tg_gallocr_get_stats(const tg_gallocr *g, struct tg_gallocr_stats *stats) {
    if (!stats) return;
    *stats = g ? g->stats : (struct tg_gallocr_stats){0};
}

enum tg_status tg_gallocr_get_report(const tg_gallocr *g, int buffer_id, struct tg_plan_report *report) {
    if (!g || !report || buffer_id < 0 || buffer_id >= g->n_bufs) {
        return tg_fail(TG_ERR_INVALID, "get_report: no allocator, no report, or buffer id %d out of range", buffer_id);
    }
    if (!g->have_plan) return tg_fail(TG_ERR_INVALID, "get_report: no plan yet (call tg_gallocr_reserve first)");
    bool owner = g->owner_of[buffer_id] == buffer_id;
    report->peak = owner ? tg_planner_total_size(&g->planners[buffer_id]) : 0;
    report->lower_bound = owner ? g->lower_bound[buffer_id] : 0;
    report->n_chunks = owner ? g->planners[buffer_id].n_chunks : 0;
    report->n_tensors = g->n_tensors[buffer_id];
    return TG_OK;
}

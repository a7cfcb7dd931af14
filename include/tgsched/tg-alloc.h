/* tgsched graph allocator: plans the memory of a graph's intermediate tensors
 * inside one or more buffer types, then binds the plan (docs/allocator.md).
 *
 * Usage: tg_gallocr_new(buft) -> tg_gallocr_reserve(g, worst_case_graph) once
 * -> tg_gallocr_alloc_graph(g, graph) per evaluation.  alloc_graph replays the
 * recorded plan while the graph keeps the same structure; a structural change
 * re-plans (one buffer) or returns TG_ERR_NEEDS_RESERVE (several buffers).
 * Binding a new plan makes the tensors of the previous graph stale. */
#ifndef TG_ALLOC_H
#define TG_ALLOC_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear allocator inside an existing buffer ------------------------------ */
struct tg_tallocr {
    tg_buffer *buffer;
    void *base;
    size_t alignment;
    size_t offset;
};
struct tg_tallocr tg_tallocr_new(tg_buffer *buffer);
/* Binds t at the next aligned offset; TG_ERR_ALLOC (naming t) when it does not fit. */
TG_NODISCARD enum tg_status tg_tallocr_alloc(struct tg_tallocr *talloc, struct tg_tensor *t);

/* ---- graph allocator ------------------------------------------------------------ */

enum tg_plan_policy {
    TG_PLAN_GGML = 0, /* ggml-compatible online best fit with its tail heuristic */
    TG_PLAN_BEST = 1, /* offline portfolio over liveness intervals, never worse */
};

typedef struct tg_gallocr tg_gallocr;

tg_gallocr *tg_gallocr_new(tg_buffer_type *buft);
/* Buffer ids index bufts; ids that share a buffer type share one address space. */
tg_gallocr *tg_gallocr_new_n(tg_buffer_type **bufts, int n_bufs);
void tg_gallocr_free(tg_gallocr *galloc);
void tg_gallocr_set_policy(tg_gallocr *galloc, enum tg_plan_policy policy);
/* The policy set last, TG_PLAN_BEST when none was (and for a NULL allocator). */
enum tg_plan_policy tg_gallocr_get_policy(const tg_gallocr *galloc);

/* Plan the graph (every tensor in buffer 0) and grow the buffers to fit. */
TG_NODISCARD enum tg_status tg_gallocr_reserve(tg_gallocr *galloc, struct tg_graph *graph);
/* node_buffer_ids[i] / leaf_buffer_ids[i]: buffer id per node / leaf (NULL: all 0). */
TG_NODISCARD enum tg_status tg_gallocr_reserve_n(tg_gallocr *galloc, struct tg_graph *graph, const int *node_buffer_ids,
                                    const int *leaf_buffer_ids);
/* Plan only: sizes[i] receives the bytes buffer id i needs (shared types count
 * once, at their first id, 0 at the others).  No buffer is allocated; a later
 * alloc_graph returns TG_ERR_NEEDS_RESERVE instead of binding into nothing. */
TG_NODISCARD enum tg_status tg_gallocr_reserve_n_size(tg_gallocr *galloc, struct tg_graph *graph, const int *node_buffer_ids,
                                         const int *leaf_buffer_ids, size_t *sizes);
/* Bind the graph's tensors (re-planning with one buffer when needed).
 * TG_ERR_STALE when the graph uses, as a leaf or source, a result of an
 * earlier graph that still lives in this allocator's buffers (copy it into a
 * buffer you own first); TG_ERR_NEEDS_RESERVE after a size-only reserve.
 * The graph bound last, passed again with nothing in it changed, is left as
 * that bind left it: its tensors keep their memory, and so do views of them
 * made since.  Any bind (another graph, or this one after a change) makes
 * such views stale. */
TG_NODISCARD enum tg_status tg_gallocr_alloc_graph(tg_gallocr *galloc, struct tg_graph *graph);
/* Bytes of buffer id (0 for an id whose type an earlier id already holds). */
size_t tg_gallocr_get_buffer_size(const tg_gallocr *galloc, int buffer_id);
/* Whether buf is one of the allocator's compute buffers (in use, or outgrown and
 * retired): memory there belongs to its plans, not to the user. */
bool tg_gallocr_owns_buffer(const tg_gallocr *galloc, const tg_buffer *buf);

/* ---- plan introspection (tools, oracle reports, benchmarks) ---------------------- */
struct tg_plan_report {
    size_t peak;        /* bytes the plan needs in this buffer id (sum of chunks) */
    size_t lower_bound; /* max over steps of live bytes, each size rounded up to the
                         * alignment (legal in-place pairs counted once) */
    int n_chunks;
    int n_tensors;      /* tensors owned by the plan in this buffer id */
};
/* Report for buffer id of the last plan; TG_ERR_INVALID before any.  Ids that
 * share a buffer type report peak, lower bound and chunks at the first such
 * id (0 at the others); n_tensors is always per id. */
TG_NODISCARD enum tg_status tg_gallocr_get_report(const tg_gallocr *galloc, int buffer_id, struct tg_plan_report *report);

/* How the allocator's alloc_graph calls were served since tg_gallocr_new:
 * to find a runtime that re-plans every token, or one that misses the fast
 * paths. */
struct tg_gallocr_stats {
    uint64_t n_plans;            /* plans made: reserves, and re-plans inside alloc_graph */
    uint64_t n_allocs;           /* successful alloc_graph calls, all the kinds below */
    uint64_t n_allocs_unchanged; /* the graph bound last, found as that bind left it: nothing to do */
    uint64_t n_allocs_replayed;  /* a graph matched to the plan slot by slot (stamps, no hashing), bound */
    uint64_t n_allocs_vouched;   /* a graph the scheduler matched first (memory checked only), bound */
    uint64_t n_allocs_general;   /* bound after the general check, with hashing (and any re-plan) */
    uint64_t n_images;           /* copies of a bound graph taken for the unchanged check (one per
                                    2^k binds of the same tensors after k of them no longer matched) */
};
/* Zeros for a NULL allocator. */
void tg_gallocr_get_stats(const tg_gallocr *galloc, struct tg_gallocr_stats *stats);

/* ---- fault injection (checker self-tests only) -------------------------------------
 * A switch that makes the allocator break one rule on purpose, so the oracle's
 * self-tests (and the allocator's own replay cross-check, in Debug builds) can
 * show each checker fires.  Off unless a test calls tg_gallocr_set_fault; no
 * environment variable turns it on.  A fault that is on says so once on
 * stderr.  Never set in production. */
enum tg_fault {
    TG_FAULT_NONE = 0,
    TG_FAULT_SKIP_CONSUMER_COUNT,  /* "skip-consumer-count": one source's consumer is not counted */
    TG_FAULT_IGNORE_OUTPUT_FLAG,   /* "ignore-output-flag": outputs are freed like any tensor */
    TG_FAULT_INPLACE_IGNORE_LAYOUT,/* "inplace-ignore-layout": in-place reuse without same layout */
    TG_FAULT_FREE_VIEW_ROOT,       /* "free-view-root": a view's root is freed while the view lives */
    TG_FAULT_MERGE_OFF_BY_ONE,     /* "merge-off-by-one": free-block merge grows a block by one alignment unit */
    TG_FAULT_IGNORE_ALIGNMENT,     /* "ignore-alignment": sizes/offsets are not rounded to the alignment */
    TG_FAULT_STALE_REPLAY,         /* "stale-replay": replay a plan after an edge change (ggml's check) */
    TG_FAULT_TRUST_VOUCH,          /* "trust-vouch": the scheduler's replay binds without checking sizes
                                      and view roots against the plan */
    TG_FAULT_COUNT
};
const char *tg_fault_name(enum tg_fault f);
enum tg_fault tg_fault_from_name(const char *name); /* TG_FAULT_COUNT when unknown */
void tg_gallocr_set_fault(tg_gallocr *galloc, enum tg_fault fault);

#ifdef __cplusplus
}
#endif
#endif

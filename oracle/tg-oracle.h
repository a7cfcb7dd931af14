/* tgsched oracle: an independent judge of graph memory plans (docs/testing.md, "The oracle").
 *
 * It uses only the public headers, never the planner's internals, so a bug in
 * the planner cannot hide a bug in the oracle.  Pieces:
 *   snapshot   which tensors had memory BEFORE planning (external tensors);
 *              after binding every tensor has data, so this must come first
 *   liveness   its own analysis: per tensor, owned or not, first and last node
 *              step it is live, whether it is protected (output / output-view root)
 *   naive      a plan that reuses nothing: one block per owned tensor
 *   checkers   over a bound graph, a list of violations naming tensors and rule
 *   lower bound / naive total, for "lower bound <= peak <= naive total"
 *   differential execution (tg-oracle-diff, only where the CPU backend exists)
 *
 * Liveness rules (docs/allocator.md, "The rules"; ggml's behaviour): a tensor is owned when it is
 * not a view and had no data before planning.  Leafs and input-flagged tensors are
 * live from step 0, other nodes from their own step.  A tensor lives until its last
 * consumer, or the last consumer of any view of it; outputs, roots of output views,
 * and tensors (or views) nobody consumes stay live to the end (the allocator frees
 * a tensor only when a consumer releases it, so graph sinks are never reused). */
#ifndef TG_ORACLE_H
#define TG_ORACLE_H

#include "tg-alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- snapshot ------------------------------------------------------------------- */

struct tg_oracle_snapshot_entry {
    const struct tg_tensor *tensor;
    void *data;
    tg_buffer *buffer;
};

/* Every tensor the graph touches (nodes, leafs, sources, view roots) that already
 * had memory, with that memory. */
struct tg_oracle_snapshot {
    int n;
    struct tg_oracle_snapshot_entry *entries;
    struct tg_oracle_map *map; /* private: tensor -> index into entries */
    bool user_memory_only;     /* taken by tg_oracle_snapshot_take_user_memory */
};

enum tg_status tg_oracle_snapshot_take(const struct tg_graph *graph, struct tg_oracle_snapshot *snap);
/* The same, for a graph allocated again after an earlier plan bound it (a reset
 * then an alloc of the same graph): memory in compute buffers (usage COMPUTE,
 * what allocators bind) is the earlier plan's and is planned again, so only
 * memory in the user's buffers counts as pre-allocated.  Not for graphs that
 * read results of another graph straight from its compute buffer. */
enum tg_status tg_oracle_snapshot_take_user_memory(const struct tg_graph *graph, struct tg_oracle_snapshot *snap);
void tg_oracle_snapshot_free(struct tg_oracle_snapshot *snap);
/* The entry of t, NULL when t had no memory before planning. */
const struct tg_oracle_snapshot_entry *tg_oracle_snapshot_find(const struct tg_oracle_snapshot *snap,
                                                              const struct tg_tensor *t);

/* ---- liveness ------------------------------------------------------------------- */

#define TG_ORACLE_STEP_END INT32_MAX /* "live to the end of the graph" */

struct tg_oracle_tensor_info {
    struct tg_tensor *tensor;
    bool owned;      /* not a view and no memory before planning */
    bool external;   /* not a view and had memory before planning */
    bool protected_; /* output-flagged, or root of an output-flagged view */
    int node_index;  /* step of the node, -1 for leafs and tensors outside the graph */
    int buffer_id;   /* requested buffer id (node/leaf id array), -1 when unknown */
    int first;       /* first step live */
    int last;        /* last step live (TG_ORACLE_STEP_END: to the end) */
    int last_direct_use;/* last step a node reads this tensor itself (-1: never) */
    int last_view_use;  /* last step a view of it is read or created (-1: never) */
};

struct tg_oracle_liveness {
    int n_steps; /* graph nodes */
    int n;
    struct tg_oracle_tensor_info *infos;
    struct tg_oracle_map *map; /* private: tensor -> index into infos */
};

/* node_ids / leaf_ids: buffer id per node / leaf as given to the allocator (NULL: all 0). */
enum tg_status tg_oracle_liveness_build(const struct tg_graph *graph, const struct tg_oracle_snapshot *snap,
                                        const int *node_ids, const int *leaf_ids, struct tg_oracle_liveness *lv);
void tg_oracle_liveness_free(struct tg_oracle_liveness *lv);
const struct tg_oracle_tensor_info *tg_oracle_liveness_find(const struct tg_oracle_liveness *lv,
                                                           const struct tg_tensor *t);
bool tg_oracle_live_together(const struct tg_oracle_tensor_info *a, const struct tg_oracle_tensor_info *b);

/* ---- in-place legality (docs/allocator.md, "The rules") ----------------------------------------------- */

enum tg_oracle_inplace_reason {
    TG_INPLACE_OK = 0,
    TG_INPLACE_OP_NOT_CAPABLE,   /* op not in the in-place list */
    TG_INPLACE_SOURCE_NOT_OWNED, /* source is a view or external */
    TG_INPLACE_DIFFERENT_BUFFER, /* source planned in another buffer id */
    TG_INPLACE_SOURCE_PROTECTED, /* source is an output or an output view's root */
    TG_INPLACE_LAYOUT_DIFFERS,   /* type, ne or nb differ */
    TG_INPLACE_NOT_LAST_CONSUMER,/* another node reads the source later */
    TG_INPLACE_LIVE_VIEW,        /* a view of the source is still used later */
    TG_INPLACE_NODE_BIGGER,      /* node's alloc size exceeds the source's */
    TG_INPLACE_NOT_SAME_ADDRESS, /* node shares memory with the source but does not start at it */
};
const char *tg_oracle_inplace_reason_text(enum tg_oracle_inplace_reason r);
/* The oracle's own list of ops that may write their result over source 0. */
bool tg_oracle_op_can_inplace(enum tg_op op);
/* Whether node may take src's memory.  bufts index buffer ids (for alloc sizes;
 * NULL: tg_nbytes). */
enum tg_oracle_inplace_reason tg_oracle_inplace_check(const struct tg_oracle_liveness *lv,
                                                      const struct tg_tensor *node, const struct tg_tensor *src,
                                                      tg_buffer_type **bufts, int n_bufs);

/* ---- lower bound and naive total ------------------------------------------------------- */

/* Per buffer id that owns an address space (the first id of each buffer type;
 * others get 0): max over steps of live alloc bytes, a legal in-place pair
 * counted once; and the sum of all owned tensors' aligned alloc sizes. */
enum tg_status tg_oracle_lower_bound(const struct tg_oracle_liveness *lv, tg_buffer_type **bufts, int n_bufs,
                                     size_t *lower_bounds, size_t *naive_totals);

/* ---- naive allocator --------------------------------------------------------------- */

/* One host buffer per buffer type (ids sharing a type share it); every owned
 * tensor gets its own aligned block, nothing is reused; views are bound to
 * their roots.  The graph's tensors are bound; free with tg_oracle_naive_free
 * after the tensors are no longer used. */
struct tg_oracle_naive {
    int n_buffers;
    tg_buffer **buffers;
    size_t total; /* bytes over all buffers */
};
enum tg_status tg_oracle_naive_alloc(struct tg_graph *graph, const struct tg_oracle_liveness *lv,
                                     tg_buffer_type **bufts, int n_bufs, struct tg_oracle_naive *naive);
/* The same for a graph whose every tensor goes in buffers of one type (a
 * reference computed in host memory): snapshot and liveness taken here. */
enum tg_status tg_oracle_naive_alloc_one_type(struct tg_graph *graph, tg_buffer_type *buft,
                                              struct tg_oracle_naive *naive);
void tg_oracle_naive_free(struct tg_oracle_naive *naive);

/* ---- checkers ------------------------------------------------------------------------- */

enum tg_oracle_rule {
    TG_RULE_UNBOUND,            /* an owned tensor, or a view whose root is bound, has no memory after binding */
    TG_RULE_LIVE_OVERLAP,       /* two live tensors share bytes (by address, whatever buffer objects hold
                                 * them); a pre-allocated tensor counts as live for the whole graph */
    TG_RULE_ILLEGAL_INPLACE,    /* a node shares its source's memory against 4.2 */
    TG_RULE_OUT_OF_BOUNDS,      /* tensor extends past its buffer */
    TG_RULE_MISALIGNED,         /* offset not a multiple of the alignment of its buffer id's type */
    TG_RULE_OUTPUT_OVERWRITTEN, /* a protected tensor's memory is given to a later tensor */
    TG_RULE_VIEW_OUTSIDE_ROOT,  /* a view's bytes are not inside its root's, or its address is wrong */
    TG_RULE_EXTERNAL_MOVED,     /* pre-allocated memory changed by planning */
    TG_RULE_WRONG_BUFFER_TYPE,  /* an owned tensor sits in a buffer of another type than its buffer id's */
    TG_RULE_COUNT
};
const char *tg_oracle_rule_name(enum tg_oracle_rule r);

struct tg_oracle_violation {
    enum tg_oracle_rule rule;
    enum tg_oracle_inplace_reason inplace_reason; /* for TG_RULE_ILLEGAL_INPLACE */
    const struct tg_tensor *a;
    const struct tg_tensor *b; /* may be NULL */
    char message[320];
};

struct tg_oracle_report {
    int n;
    int cap;
    struct tg_oracle_violation *items;
    int n_checked_tensors;
    /* pairs the pairwise rules examined: only those sharing a step and a byte
     * (a legal plan has about one per in-place reuse), so a check stays about
     * linear in the graph's size */
    long long n_pairs_judged;
};

void tg_oracle_report_free(struct tg_oracle_report *rep);
/* Number of violations of one rule. */
int tg_oracle_report_count(const struct tg_oracle_report *rep, enum tg_oracle_rule rule);
/* Writes every violation, one line each, through tg_logf. */
void tg_oracle_report_print(const struct tg_oracle_report *rep, int max_lines);

/* Runs every checker over the bound graph.  lv must have been built from a
 * snapshot taken before the plan was bound; bufts/node_ids as for the plan.
 * Returns TG_OK with the violations in rep (rep->n == 0: the plan is legal),
 * or an error status when the check itself could not run (out of memory). */
enum tg_status tg_oracle_check(const struct tg_graph *graph, const struct tg_oracle_liveness *lv,
                               const struct tg_oracle_snapshot *snap, tg_buffer_type **bufts, int n_bufs,
                               struct tg_oracle_report *rep);

/* ---- differential execution --------------------------------------------------------------
 * Two copies of one graph (same construction: nodes and leafs correspond by
 * position), one bound by the real plan, one by the naive plan, are filled with
 * the same inputs, computed, and their outputs compared bit for bit.  Computing
 * goes through callbacks so the oracle does not depend on a particular backend
 * (the props pass tg_cpu_compute_graph / tg_cpu_supports_op). */

typedef enum tg_status (*tg_oracle_compute_fn)(struct tg_graph *graph, void *user);
typedef bool (*tg_oracle_supports_fn)(const struct tg_tensor *node, void *user);

/* Fills every leaf and input-flagged node with values from op-safe ranges:
 * f32/f16/bf16 in [0.5, 1.5) (log, sqrt, div stay finite), i32 below the
 * smallest row count of the get_rows/set_rows that read it (valid indices),
 * small non-negative positions otherwise (rope); quantized blocks with
 * random quants and scales that keep values within 1/sqrt(ne0) (weights).
 * Pre-allocated tensors in memory the host cannot write are left alone.
 * Same seed, same values. */
enum tg_status tg_oracle_fill_inputs(struct tg_graph *graph, uint64_t seed);
/* The same, except that float matrices in weights buffers get a trained
 * model's scale: uniform over +-1/sqrt(ne0), signs mixed, like the quantized
 * ones (all-positive weights make a deep model's activations overflow f16
 * caches). */
enum tg_status tg_oracle_fill_model_inputs(struct tg_graph *graph, uint64_t seed);
/* Gives dst, a graph of the same shape as ref (the same file loaded again),
 * ref's values of every leaf and input-flagged node; views and leafs that
 * share ref's memory are skipped. */
enum tg_status tg_oracle_copy_inputs(struct tg_graph *dst, const struct tg_graph *ref);

struct tg_oracle_diff_result {
    bool computed;        /* false: some node is not supported, nothing ran */
    int n_compared;       /* output-flagged tensors and graph sinks compared */
    int n_mismatched;
    char message[320];    /* the first mismatch, naming the tensor and byte */
};

/* Fills, computes and compares real vs reference (see above).  Returns an
 * error when filling or computing failed; mismatches are in res. */
enum tg_status tg_oracle_diff(struct tg_graph *real, struct tg_graph *reference, tg_oracle_compute_fn compute,
                              tg_oracle_supports_fn supports, void *user, uint64_t seed,
                              struct tg_oracle_diff_result *res);

#ifdef __cplusplus
}
#endif
#endif

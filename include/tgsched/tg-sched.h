/* tgsched backend scheduler (docs/scheduler.md): assigns each node of a graph
 * to a backend, cuts the graph into splits (maximal runs on one backend), adds
 * copies for split inputs that live where the split's backend cannot read,
 * plans all compute memory with one graph allocator, and computes the splits.
 *
 * Backends are in priority order, the last one is the CPU. */
#ifndef TG_SCHED_H
#define TG_SCHED_H

#include "tg-alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_SCHED_MAX_BACKENDS 16
#define TG_SCHED_MAX_COPIES 4
/* A split takes at most this many inputs; the next node that would pass it
 * starts a new split.  A fixed constant, so splits never depend on history. */
#define TG_SCHED_MAX_SPLIT_INPUTS 30

typedef struct tg_sched tg_sched;

/* Called for each node when ask is true ("do you want to see this node?") and,
 * when it said yes, again after it was computed with ask false; returning false
 * then cancels the whole graph (TG_ERR_ABORTED). */
typedef bool (*tg_sched_eval_callback)(struct tg_tensor *t, bool ask, void *user_data);

/* bufts may be NULL (each backend's default type).  graph_size bounds the nodes
 * and the leafs of graphs this scheduler takes, as ggml's does (below 16: 16; the copies the
 * scheduler adds have room of their own).  parallel enables
 * pipeline parallelism (TG_SCHED_MAX_COPIES copies of inputs).  NULL with a
 * message on bad arguments (e.g. the last backend is not a CPU). */
tg_sched *tg_sched_new(tg_backend **backends, tg_buffer_type **bufts, int n_backends, size_t graph_size,
                       bool parallel, bool op_offload);
/* Also restores the sources of the graph it has scheduled (see reset), so free
 * the scheduler (or reset it) before freeing that graph's tensors. */
void tg_sched_free(tg_sched *sched);

/* Pipeline copies of each split input, 1 to TG_SCHED_MAX_COPIES (a scheduler
 * made with parallel has TG_SCHED_MAX_COPIES, without it 1): waits for the
 * backends, forgets the scheduled graph, and the next alloc reserves again. */
TG_NODISCARD enum tg_status tg_sched_set_n_copies(tg_sched *sched, int n_copies);

TG_NODISCARD enum tg_status tg_sched_reserve(tg_sched *sched, struct tg_graph *measure_graph);
/* Sizes only: sizes[i] receives backend i's compute buffer bytes.  Keeps pins. */
TG_NODISCARD enum tg_status tg_sched_reserve_size(tg_sched *sched, struct tg_graph *measure_graph, size_t *sizes);
TG_NODISCARD enum tg_status tg_sched_alloc_graph(tg_sched *sched, struct tg_graph *graph);
/* Inputs are read once per compute: the plan may give an input's memory to
 * later nodes.  Set them again before each compute, also to retry one that
 * failed part way (its earlier splits may have run).  graph_compute also
 * returns a failure of work it queued on a backend, known once it has run;
 * after compute_async and tg_sched_synchronize, tg_backend_take_failure says
 * it (else that backend's next compute returns it).  A graph allocated and
 * changed since in anything but the contents of memory (its lists, a
 * tensor's sources, header, view, data or buffer) is refused
 * (TG_ERR_INVALID, naming the tensor): reset and allocate it again. */
TG_NODISCARD enum tg_status tg_sched_graph_compute(tg_sched *sched, struct tg_graph *graph);
TG_NODISCARD enum tg_status tg_sched_graph_compute_async(tg_sched *sched, struct tg_graph *graph);
void tg_sched_synchronize(tg_sched *sched);
/* Forget the current graph: assignments, splits, allocation, and the user
 * pins (pins survive reserve, reserve_size, alloc_graph and compute; only
 * reset clears them).  Sources the scheduler redirected to its copies are
 * restored, so the user's graph is unchanged after reset. */
void tg_sched_reset(tg_sched *sched);

/* Pin t to backend (kept until tg_sched_reset).  A pin on a pre-allocated
 * tensor cannot move its memory: the tensor's buffer decides, as for its views. */
void tg_sched_set_tensor_backend(tg_sched *sched, struct tg_tensor *t, tg_backend *backend);
tg_backend *tg_sched_get_tensor_backend(tg_sched *sched, const struct tg_tensor *t);
void tg_sched_set_eval_callback(tg_sched *sched, tg_sched_eval_callback cb, void *user_data);
/* Schedule replay (on by default): a graph whose every tensor matches the last
 * fully scheduled graph in header, source positions and existing buffers gets
 * that schedule restated instead of derived again (the per-token case of a
 * graph rebuilt every step).  Off: every schedule runs the full passes; the
 * property tests compare both. */
void tg_sched_set_replay(tg_sched *sched, bool enabled);
/* Whether the graph scheduled last was a replay (for debugging per-token cost). */
bool tg_sched_last_was_replay(const tg_sched *sched);

int tg_sched_get_n_backends(const tg_sched *sched);
tg_backend *tg_sched_get_backend(const tg_sched *sched, int i);
int tg_sched_get_backend_id(const tg_sched *sched, const tg_backend *backend); /* -1 if absent */
int tg_sched_get_n_splits(const tg_sched *sched);
int tg_sched_get_n_copies(const tg_sched *sched);
size_t tg_sched_get_buffer_size(const tg_sched *sched, tg_backend *backend);

/* ---- introspection: what the scheduler decided and why ------------------------ */

/* Which pass assigned a node (docs/scheduler.md, "Assignment"); printed by TG_SCHED_DEBUG
 * and `tgsched plan`. */
enum tg_sched_reason {
    TG_REASON_NONE = 0,
    TG_REASON_PREALLOCATED, /* tensor (or its view root) already lives in a buffer */
    TG_REASON_USER_PIN,     /* tg_sched_set_tensor_backend */
    TG_REASON_INPUT_CPU,    /* input flag: goes to the CPU */
    TG_REASON_WEIGHTS,      /* an op reading weights runs where the weights are */
    TG_REASON_OFFLOAD,      /* op on host weights offloaded to a backend that wants it */
    TG_REASON_EXPAND_GPU_DOWN,
    TG_REASON_EXPAND_GPU_UP,
    TG_REASON_EXPAND_DOWN,
    TG_REASON_EXPAND_UP,
    TG_REASON_UPGRADE,      /* moved to a higher-priority backend with the same buffer type */
    TG_REASON_MOST_SOURCES, /* backend supporting most of its sources */
    TG_REASON_FIRST_SUPPORTING, /* nothing else decided: first backend that supports the op */
    TG_REASON_VIEW_SOURCE,  /* a view follows its source */
    TG_REASON_FOLLOW_CONSUMER, /* leftover source follows its consumer */
    TG_REASON_SPLIT_COPY,   /* a copy of a split input, made by the scheduler */
    TG_REASON_COUNT
};
const char *tg_sched_reason_name(enum tg_sched_reason r);

struct tg_sched_split_info {
    int backend_id;
    int i_start, i_end;            /* node range in the scheduler's graph copy */
    int n_inputs;
    struct tg_tensor *const *inputs; /* the split's input tensors (originals) */
};
/* Split i of the last scheduled graph; TG_ERR_INVALID when out of range. */
TG_NODISCARD enum tg_status tg_sched_get_split_info(const tg_sched *sched, int i, struct tg_sched_split_info *info);
/* Backend id and reason of a tensor of the last scheduled graph (-1 / NONE if unknown). */
int tg_sched_get_tensor_backend_id(const tg_sched *sched, const struct tg_tensor *t);
enum tg_sched_reason tg_sched_get_tensor_reason(const tg_sched *sched, const struct tg_tensor *t);
/* The graph the scheduler planned and computes: the user's nodes plus the copy
 * tensors of split inputs, in split order.  Valid until the next schedule. */
struct tg_graph *tg_sched_get_graph_copy(const tg_sched *sched);
/* For a copy tensor in the graph copy: the original it copies (NULL otherwise). */
struct tg_tensor *tg_sched_get_copy_source(const tg_sched *sched, const struct tg_tensor *t);
/* The graph allocator the scheduler plans with (reports, policy). */
tg_gallocr *tg_sched_get_gallocr(const tg_sched *sched);
/* The buffer id (= backend id) a tensor of the graph copy was planned into, -1 if none. */
int tg_sched_get_tensor_buffer_id(const tg_sched *sched, const struct tg_tensor *t);

/* ---- fault injection (checker self-tests only) ----------------------------------------
 * Like the allocator's faults: makes the scheduler break one rule on purpose
 * so the scheduler checkers (oracle/tg-oracle-sched.h, and the replay
 * cross-check in Debug builds) can show they fire.  Off unless a test calls
 * tg_sched_set_fault; no environment variable turns it on.  A fault that is
 * on says so once on stderr.  Never set in production: a faulty schedule can
 * make a host thread read device memory. */
enum tg_sched_fault {
    TG_SCHED_FAULT_NONE = 0,
    TG_SCHED_FAULT_SKIP_COPY,         /* "skip-copy": one cross-backend source is read without a copy */
    TG_SCHED_FAULT_IGNORE_PIN,        /* "ignore-pin": user pins are not applied */
    TG_SCHED_FAULT_IGNORE_SUPPORT,    /* "ignore-support": expansion places nodes on backends without the op */
    TG_SCHED_FAULT_NO_INPUT_LIMIT,    /* "no-input-limit": splits take any number of inputs */
    TG_SCHED_FAULT_MOVE_PREALLOCATED, /* "move-preallocated": views of pre-allocated tensors follow their consumers */
    TG_SCHED_FAULT_MEMO_USAGE_ONLY,   /* "memo-usage-only": schedule replay compares only the usage of a
                                         pre-allocated tensor's buffer, not its buffer type */
    TG_SCHED_FAULT_COUNT
};
const char *tg_sched_fault_name(enum tg_sched_fault f);
enum tg_sched_fault tg_sched_fault_from_name(const char *name); /* TG_SCHED_FAULT_COUNT when unknown */
void tg_sched_set_fault(tg_sched *sched, enum tg_sched_fault fault);

#ifdef __cplusplus
}
#endif
#endif

/* tgsched random case generator, shared by the property suite and the fuzzers.
 *
 * A case is decoded from BYTES: a tiny reader hands out bytes and returns zeros
 * once they run out, so every input decodes to some case.  The seeded variant
 * fills bytes from a PRNG (splitmix64) and decodes them, so a failing property
 * case and a failing fuzz input are the same kind of object: tg_gen_seed_bytes
 * gives the bytes of a seed for replay through the fuzz driver.
 *
 * A case holds: 1-3 buffer ids over 1-3 host buffer types (alignments 16..512,
 * some with a max size so the planner must chunk, some ids sharing a type, some
 * types padding the alloc size of one op), a graph in a no_alloc context (chains,
 * diamonds, fan-out/fan-in, views of views, reshape/permute/transpose, in-place
 * chains, cpy/set_rows into views, concat, get_rows, mul_mat, sum_rows, outputs
 * and inputs in the middle, output views, external leafs pre-allocated in a host
 * buffer of the case, their views bound too with bound_views), sizes from a few bytes to several MB, and a buffer id per
 * node and leaf.  Op constructors that reject a shape return NULL: the generator
 * skips that op, so decoding never fails on content. */
#ifndef TG_GEN_H
#define TG_GEN_H

#include "tg-alloc.h"
#include "tg-oracle.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_GEN_MAX_BUFTS 3
#define TG_GEN_MAX_IDS 3

/* What the init_tensor and reset hooks of a logging buffer type were told, in
 * order (ggml's CUDA and SYCL buffers have such hooks: init_tensor pads a
 * quantized tensor or sets up extras, and must see each tensor bound). */
struct tg_gen_hook_event {
    const tg_buffer *buffer;
    const struct tg_tensor *tensor; /* NULL: a reset of buffer */
    const void *data;               /* the tensor's data when it was initialised */
};
struct tg_gen_hook_log {
    struct tg_gen_hook_event *events;
    int n, cap;
    bool overflow; /* host memory ran out: the log is incomplete */
};
void tg_gen_hook_log_free(struct tg_gen_hook_log *log);

/* A host buffer type with a chosen alignment, max size and op-dependent padding. */
struct tg_gen_buft {
    tg_buffer_type buft; /* first member: callbacks cast back */
    size_t alignment;
    size_t max_size;      /* 0: no limit */
    enum tg_op padded_op; /* tensors of this op need pad_bytes more (TG_OP_COUNT: none) */
    size_t pad_bytes;
    bool address_only;    /* buffers reserve address space only (planning real models) */
    struct tg_gen_hook_log *hooks; /* non-NULL: its buffers have init_tensor and reset hooks logging here */
    char name[32];
};
void tg_gen_buft_init(struct tg_gen_buft *b, const char *name, size_t alignment, size_t max_size,
                      enum tg_op padded_op, size_t pad_bytes);
/* The same type with address-only buffers: mapped PROT_NONE without committing
 * memory, so a multi-GB plan can be bound and checked; data access fails. */
void tg_gen_buft_init_address_only(struct tg_gen_buft *b, const char *name, size_t alignment);
/* Turn an initialised type (alignment, max size and padding kept) address-only. */
void tg_gen_buft_make_address_only(struct tg_gen_buft *b);
/* Give the type's buffers from now on, and buf (one of its buffers, or NULL)
 * at once, init_tensor and reset hooks that log into log. */
void tg_gen_buft_log_hooks(struct tg_gen_buft *b, struct tg_gen_hook_log *log, tg_buffer *buf);

/* Room for the scheduler setup that the scheduler issue fills in; the graph
 * generator leaves it zeroed (no sim backends, no pins, one copy). */
struct tg_gen_sched_setup {
    int n_sim_backends; /* simulated devices in front of the CPU */
    int n_copies;       /* pipeline copies (0 or 1: none) */
    int *node_pins;     /* per node: backend index or -1 (NULL: none pinned) */
};

struct tg_gen_options {
    int max_ops;               /* op steps decoded (default 40) */
    size_t max_tensor_bytes;   /* cap on one tensor (default 4 MB) */
    bool computable;           /* only f32/i32 data and ops the CPU kernels are meant to run */
    bool address_only;         /* buffers reserve address space only: for targets that plan and
                                * check but never touch data (no memset of MBs per fuzz input) */
    bool raw_output_flags;     /* outputs flag the tensor only; by default a view's root is flagged
                                * too, as ggml_set_output does */
    bool none_views;           /* some views are made as ggml_view_tensor makes them: op none, no
                                * source, a leaf of the graph read in place of its root */
    bool bound_views;          /* views of the pre-allocated leafs come bound, as ggml_view_* binds a
                                * view of allocated memory (a KV cache's window): the allocator finds
                                * them with memory (no draw: other options' cases stay as they were) */
};
struct tg_gen_options tg_gen_default_options(void);
/* The options each fuzz target decodes with ("alloc", "exec", "sched"), so the
 * targets and tg-fuzz-decode agree. */
struct tg_gen_options tg_gen_target_options(const char *target);

struct tg_gen_case {
    uint64_t seed;      /* seed it came from (0 when decoded from arbitrary bytes) */
    int n_bufts;
    struct tg_gen_buft bufts_storage[TG_GEN_MAX_BUFTS];
    int n_ids;          /* buffer ids of the allocator */
    tg_buffer_type *bufts[TG_GEN_MAX_IDS]; /* buffer id -> type (ids may share) */
    struct tg_context *ctx;                /* no_alloc, owns the tensors */
    struct tg_graph *graph;
    int *node_ids;      /* buffer id per node */
    int *leaf_ids;      /* buffer id per leaf */
    struct tg_gen_buft external_buft;
    tg_buffer *external_buffer; /* pre-allocated leafs (NULL when none) */
    int n_external;
    void *context_memory; /* host memory of tensors their context owns (data, no buffer), freed with the case */
    struct tg_gen_sched_setup sched;
};

/* Decode a case; fails only when host memory runs out. */
enum tg_status tg_gen_case_from_bytes(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                      struct tg_gen_case **out);
/* The bytes a seed expands to (n bytes into out). */
void tg_gen_seed_bytes(uint64_t seed, uint8_t *out, size_t n);
#define TG_GEN_SEED_BYTES 1024
enum tg_status tg_gen_case_from_seed(uint64_t seed, const struct tg_gen_options *opts, struct tg_gen_case **out);
void tg_gen_case_free(struct tg_gen_case *c);
/* Changes one edge without changing counts, types or sizes (llama.cpp #28448's
 * dynamic topology): a node chosen from salt reads an earlier non-view node of
 * the same type and size instead of its first source.  False when the graph
 * has no such pair. */
bool tg_gen_case_rewire_edge(struct tg_gen_case *c, uint64_t salt);
/* The case as a `.tg` file: a '#' line with the seed, its buffer types and
 * ids (`buft`, `buffers`, `bufid=`), the graph, pre-allocated leafs as
 * buf=weights.  malloc'ed, caller frees. */
char *tg_gen_case_to_text(const struct tg_gen_case *c);
/* The case such a file states (any `.tg` with 'buft' and 'buffers' lines):
 * the same buffer types, ids and graph, buf= tensors pre-allocated in a
 * weights buffer (address-only when asked).  Errors as tg_file_parse, or
 * TG_ERR_INVALID when the file states no allocator setup that fits a case. */
enum tg_status tg_gen_case_from_text(const char *text, size_t len, const char *name, bool address_only,
                                     struct tg_gen_case **out);
/* Total tensors in the case (nodes + leafs). */
int tg_gen_case_n_tensors(const struct tg_gen_case *c);
/* Every computed node of g has a CPU kernel: a CPU-only reference run exists. */
bool tg_gen_graph_cpu_computable(const struct tg_graph *g);
/* Whether node i's value is compared with a reference: outputs, and non-view
 * nodes no later node reads, directly or through a view (others may be
 * overwritten in place, or freed after their last read). */
bool tg_gen_node_is_result(const struct tg_graph *g, int i);
/* A malloc'ed copy of t's bytes (read through tg_tensor_get); NULL when it
 * cannot be read or host memory runs out.  Caller frees. */
void *tg_gen_tensor_bytes(const struct tg_tensor *t);

/* ---- judging a float device against the CPU reference (gen_rounding.c) --------------- */

/* The model-level bound: normalized mean squared error of a result. */
#define TG_GEN_MODEL_NMSE 2e-3
/* Relative error given to every f32 element after every node: 16 float
 * roundings (2^-24 each), for the error a float reduction accumulates. */
#define TG_GEN_ROUNDING_REL 0x1p-20
/* A device result may differ from the reference by this multiple of the NMSE
 * the rounding noise causes (10x in amplitude). */
#define TG_GEN_ROUNDING_MARGIN 100.0
/* Computes g on the CPU node by node (one thread), adding rounding noise drawn
 * from seed after each node.  g must be allocated and its inputs set. */
enum tg_status tg_gen_compute_with_rounding_noise(struct tg_graph *g, uint64_t seed);
/* The NMSE a device result may have against the reference, given the NMSE
 * rounding noise caused in the same result: TG_GEN_MODEL_NMSE or
 * TG_GEN_ROUNDING_MARGIN times the noise's, whichever is larger. */
double tg_gen_result_bound(double noise_nmse);
/* NMSE of got against want over want's elements (host memory); finite values
 * only.  *nonfinite_mismatch is set when a NaN or an infinity is not in the
 * same place with the same value in both. */
double tg_gen_nmse(const struct tg_tensor *got, const struct tg_tensor *want, bool *nonfinite_mismatch);

/* ---- planning a case and judging it with the oracle ------------------------------------ */

struct tg_gen_plan_result {
    enum tg_status plan_status;     /* reserve_n + alloc_graph */
    struct tg_oracle_report report; /* violations (empty when the plan is legal) */
    size_t buffer_size[TG_GEN_MAX_IDS]; /* tg_gallocr_get_buffer_size per id */
    size_t lower_bound[TG_GEN_MAX_IDS]; /* oracle's, per address-space owner id */
    size_t naive_total[TG_GEN_MAX_IDS];
    int n_tensors;                  /* tensors the oracle looked at */
};

/* Snapshot, liveness, reserve_n + alloc_graph with the case's buffer ids (fault
 * injected when not TG_FAULT_NONE), then every checker.  *galloc_out receives the
 * allocator (its buffers hold the bound tensors; caller frees) or NULL.  Returns
 * an error only when the oracle itself could not run; a planning failure is
 * reported in res->plan_status.  Free res with tg_gen_plan_result_free. */
enum tg_status tg_gen_plan_and_check(struct tg_gen_case *c, enum tg_fault fault, tg_gallocr **galloc_out,
                                     struct tg_gen_plan_result *res);
/* The same with an explicit planner policy (plan_and_check keeps the allocator's default). */
enum tg_status tg_gen_plan_and_check_policy(struct tg_gen_case *c, enum tg_fault fault, enum tg_plan_policy policy,
                                            tg_gallocr **galloc_out, struct tg_gen_plan_result *res);
void tg_gen_plan_result_free(struct tg_gen_plan_result *res);

/* ---- what real runtimes hand the allocator (gen_runtime.c) ------------------------------ */

/* A caller's other way to bind (prop_plan: the scheduler's vouched replay),
 * tried once where the outside tensor moved, and told of each bind. */
struct tg_gen_runtime_hooks {
    enum tg_status (*rebind)(tg_gallocr *ga, struct tg_graph *g, void *user);
    void (*bound)(tg_gallocr *ga, void *user);
    void *user;
};
struct tg_gen_runtime_stats {
    long long cases, outside, refused, outside_moved, rebinds, windows_moved, weights_moved, hooked_binds;
};
/* With init_tensor/reset hooks logging on k's buffer types, a node source
 * swapped for a tensor outside the graph (picked from salt; k's graph
 * otherwise unchanged): refused by name without memory; planned, bound
 * unchanged, bound after the outside tensor moved and moved back, after the
 * views of weights moved a row on (bound there, then left stale), after the
 * weights moved to another buffer (their views left behind), each bind
 * judged by every checker, without a re-plan, hooks called as ggml calls them
 * (each buffer reset, each tensor bound initialised once where it ends), the
 * outside tensor left alone; then, without memory again, refused by every
 * path.  False with the first failure in why.  k keeps the moved windows. */
/* A node (index) and source slot to read a tensor outside the graph instead:
 * a contiguous source that is not a view, of a node that is not one, the
 * first from salt on.  False when the graph has none. */
bool tg_gen_pick_outside_source(const struct tg_graph *g, uint64_t salt, int *node, int *slot);
bool tg_gen_runtime_check(struct tg_gen_case *k, uint64_t salt, const struct tg_gen_runtime_hooks *rh,
                          struct tg_gen_runtime_stats *stats, char *why, size_t why_len);

/* ---- differential execution of a case (gen_exec.c) ------------------------------------ */

/* Decodes the case twice from the same bytes, plans one copy with the real
 * allocator (policy) and one with the oracle's naive allocator, computes both
 * on the CPU from the same inputs (fill_seed) and compares outputs bit for bit.
 * res->computed is false when some op has no CPU kernel.  Errors: planning or
 * computing failed (the message says which). */
enum tg_status tg_gen_exec_check(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                 enum tg_plan_policy policy, uint64_t fill_seed, struct tg_oracle_diff_result *res);
/* The same case with a node source (tg_gen_pick_outside_source, salt)
 * swapped in both copies for a tensor outside the graph holding the same
 * values in a user buffer.  The real copy is planned and bound, then the
 * outside tensor moves (its old place overwritten with NaNs) and the plan is
 * replayed: results must still equal the naive plan's.  res->computed is
 * false when nothing ran (no such source, or an op without a kernel). */
enum tg_status tg_gen_exec_outside_check(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                         enum tg_plan_policy policy, uint64_t fill_seed, uint64_t salt,
                                         struct tg_oracle_diff_result *res);

/* ---- scheduler cases: setup, weights, call sequence (gen_sched.c) ------------------------ */

#define TG_GEN_SCHED_MAX_SIMS 3
#define TG_GEN_SCHED_MAX_CALLS 12
/* header: sims, flags, placement, call count, calls (kind, a, b), 9 bytes per
 * sim (settings, op mask), variant bytes; the fields sit at fixed offsets */
#define TG_GEN_SCHED_CALLS_AT 4
#define TG_GEN_SCHED_SIMS_AT (TG_GEN_SCHED_CALLS_AT + 3 * TG_GEN_SCHED_MAX_CALLS)
#define TG_GEN_SCHED_VARIANTS_AT (TG_GEN_SCHED_SIMS_AT + 9 * TG_GEN_SCHED_MAX_SIMS)
#define TG_GEN_SCHED_HEADER_BYTES (TG_GEN_SCHED_VARIANTS_AT + 4)

enum tg_gen_sched_call {
    TG_GEN_SCHED_COMPUTE, /* alloc when needed, set inputs, compute: results equal the CPU alone bit for bit */
    TG_GEN_SCHED_ALLOC,   /* tg_sched_alloc_graph; on an allocated graph it must be refused */
    TG_GEN_SCHED_RESET,   /* tg_sched_reset: pins go, the graph's sources come back; with a & 8
                           * the graph's weights then move as a says (see REBUILD) */
    TG_GEN_SCHED_RESERVE, /* reserve with a fresh build as the measure graph: the next alloc of
                           * that graph (no pins) must not grow a buffer; with a & 1, sizes alone
                           * first (reserve_size), none above what the reserve then gives */
    TG_GEN_SCHED_PIN,     /* pin a node of the current graph to a backend */
    TG_GEN_SCHED_SET_GET, /* write a pattern into a bound tensor, read it back, restore it */
    TG_GEN_SCHED_REBUILD, /* the current graph built afresh (the next token), its weights placed as
                           * a says: bit 0 on other backends (other buffer types), bit 1 in
                           * buffers of the other usage (weights / any), bit 2 the CPU's in a
                           * fresh host buffer or back in the case's; always in fresh buffers */
    TG_GEN_SCHED_OTHER,   /* a second, different graph on the same scheduler */
    TG_GEN_SCHED_REWIRED, /* the graph with one edge moved (same counts and sizes) */
    TG_GEN_SCHED_RESIZED, /* the graph with one byte changed (sizes or structure differ) */
    TG_GEN_SCHED_CALL_COUNT
};
const char *tg_gen_sched_call_name(enum tg_gen_sched_call k);

struct tg_gen_sched_sim {
    size_t alignment;
    bool alloc_pad, share_host, synchronous;
    uint64_t op_mask; /* op o is supported when bit o % 64 is set */
    int64_t offload_min_batch; /* with op offload: claims ops on host weights whose ne[1] is at least
                                * this (0: claims none, as before the field existed) */
};

struct tg_gen_sched_case {
    int n_sims; /* sim devices in front of the CPU */
    struct tg_gen_sched_sim sims[TG_GEN_SCHED_MAX_SIMS];
    bool parallel, op_offload; /* pipeline copies (4), op offload */
    bool bound_views;          /* views of weights bound where their weight sits (ggml_view_* of an
                                * allocated tensor), again after each move; else left for the scheduler */
    bool kv_moves;             /* (flags bit 3) each rebuild (the next token) moves the views of weights,
                                * same shapes, a row on (wrapping, 4 positions), as a KV cache's windows
                                * move with n_past; the reference is computed per position */
    bool outside;              /* (flags bit 4) the case runs again, a node source swapped for a tensor
                                * outside the graph (tg_gen_pick_outside_source): */
    uint8_t outside_kind;      /* (bits 5-6) 0 a tensor in a buffer of some backend, 1 a view of one,
                                * 2 a tensor in context memory, 3 a view of one */
    bool outside_weights;      /* (bit 7) its buffer's usage is weights (else any) */
    uint8_t placement;         /* salt placing external leafs (weights) on backends (first build) */
    int n_calls;
    struct {
        enum tg_gen_sched_call kind;
        uint8_t a, b; /* pin: node, backend; set_get: tensor */
    } calls[TG_GEN_SCHED_MAX_CALLS];
    size_t other_shift;           /* the other graph decodes from the graph bytes shifted by this */
    uint8_t rewire_salt;          /* tg_gen_case_rewire_edge salt of the rewired graph */
    uint8_t resize_at, resize_to; /* the resized graph: graph byte resize_at % n set to resize_to */
    const uint8_t *graph;         /* the graph's bytes (inside the input) */
    size_t graph_n;
};

/* Any bytes decode: a short header reads as zeros (one compute of the graph on the CPU). */
void tg_gen_sched_decode(const uint8_t *data, size_t size, struct tg_gen_sched_case *out);
/* The setup, the calls and the graph as text; malloc'ed, caller frees. */
char *tg_gen_sched_case_to_text(const uint8_t *data, size_t size);

struct tg_gen_sched_stats {
    int calls[TG_GEN_SCHED_CALL_COUNT]; /* run, by kind */
    int allocs;            /* successful allocations, each judged by the scheduler checkers */
    int replays;           /* of those, schedules replayed from the previous one */
    int refusals;          /* unsupported ops or conflicting pins, refused with a status */
    int computes_compared; /* computes whose results were compared with the CPU alone */
    int computes_back_to_back; /* of those, issued while an earlier one's results were still on their way */
    int set_gets;          /* set/get round trips */
    int offloads;          /* nodes a sim claimed from the CPU by op offload, over every allocation */
    int sizes_measured;    /* reserves preceded by tg_sched_reserve_size, its sizes held to */
    int views_bound;       /* views of weights bound before the scheduler saw them (bound_views) */
    int windows_moved;     /* views of weights built at another offset than the first token's (kv_moves) */
    int outside_builds;    /* builds whose graph reads a tensor outside it (flags bit 4) */
    int outside_computes;  /* of the computes compared, those of such builds */
    int outside_moved;     /* outside tensors moved to another place by a reset (a & 8) */
};

/* The backend whose queue reads or writes t's memory in order with the work
 * issued there: the device owning the memory, or host (the CPU) for host
 * memory, where a backend computing on it is done once
 * tg_sched_graph_compute_async has returned. */
tg_backend *tg_gen_memory_queue(const struct tg_tensor *t, tg_backend *host);
/* Writes values (kept alive until a synchronize) into t asynchronously on that
 * queue.  A user input in device memory is waited for: the scheduler copies
 * user inputs synchronously when compute starts. */
void tg_gen_set_async(struct tg_tensor *t, const void *values, tg_backend *host);

/* Runs the case on fresh backends and one scheduler.  TG_OK when every check
 * held (refusals are fine); TG_ERR_INVALID with the first failure in `failure`
 * otherwise; TG_ERR_ALLOC when host memory ran out.  Everything is freed. */
enum tg_status tg_gen_sched_run(const uint8_t *data, size_t size, struct tg_gen_sched_stats *stats, char *failure,
                                size_t failure_len);

#ifdef __cplusplus
}
#endif
#endif

/* The scheduler differential: ggml_backend_sched over test backends written
 * against ggml-backend-impl.h, and tg_sched over sim devices and the CPU with
 * the same properties, on the same generated multi-backend case.
 *
 * The test backends: a device per backend (the last of type CPU, the others
 * GPU), a buffer type with the sim's alignment, padding and max size (or
 * the CPU's, for a device that shares host memory), the sim's op set and
 * offload rule.
 * Their graph_compute records the split it is given (its backend and node
 * range), and their buffers record the tensors data moves in and out of,
 * which are the split's input copies.  That trace is ggml's schedule as it
 * ran.  With kernels (tg_ggml_values_in_ggml) graph_compute also runs the
 * split with ggml's CPU backend, so ggml's schedule computes values.
 *
 * Compared: the backend of every node, the splits (backend, nodes, inputs),
 * pipeline copies, and the compute buffer of every backend (tgsched with
 * TG_PLAN_GGML). */
#ifndef TG_GGML_SCHED_H
#define TG_GGML_SCHED_H

#include "tg-ggml.h"
#include "tg-sched.h"

/* ---- the trace of a ggml schedule as it runs ------------------------------------------ */

#define TG_GGML_TRACE_MAX 4096
struct tg_ggml_trace_event {
    bool compute;           /* a split computed, else data moved */
    int backend;            /* compute: the backend's index */
    const struct ggml_tensor *const *nodes; /* compute: the split's nodes (inside the user's node list) */
    int n_nodes;
    char name[GGML_MAX_NAME]; /* data moved: the tensor written or read */
};
struct tg_ggml_trace {
    int n;
    bool overflow;
    struct tg_ggml_trace_event ev[TG_GGML_TRACE_MAX];
};
/* Records that data of t moved (NULL trace: nothing). */
void tg_ggml_trace_data(struct tg_ggml_trace *trace, const struct ggml_tensor *t);

/* ---- test backends -------------------------------------------------------------------------- */

struct tg_ggml_test_backend {
    struct ggml_backend backend;       /* first: callbacks cast back */
    struct ggml_backend_device device;
    struct tg_ggml_buft own;           /* its memory */
    ggml_backend_buffer_type_t buft;   /* its default buffer type: own, or the CPU's when sharing host memory */
    bool is_cpu;
    bool ops[GGML_OP_COUNT];           /* supported ops (view ops and none always) */
    int64_t offload_min_batch;         /* offload_op: ops with ne[1] >= this (0: never) */
    int index;
    char name[16];
    struct tg_ggml_trace *trace;
    ggml_backend_t kernels;            /* when set, graph_compute runs the split with it (ggml's CPU
                                        * backend: every buffer here is host memory); NULL: trace only */
    int foreign;                       /* nodes it computed reading or writing memory not of its own
                                        * buffer type (a device without host memory; kernels set) */
};

/* The CPU: host memory aligned as tgsched's CPU buffer type (64: a device
 * sharing host memory shares that type on both sides), every op, any host
 * buffer. */
void tg_ggml_test_cpu_init(struct tg_ggml_test_backend *b, int index, struct tg_ggml_trace *trace);
/* A device: its own buffer type (alignment, pad per tensor), or the CPU's
 * when shares_host; ops: tgsched's ops it supports (indexed by enum tg_op). */
void tg_ggml_test_device_init(struct tg_ggml_test_backend *b, int index, const char *name, size_t alignment,
                              size_t pad, bool shares_host, const struct tg_ggml_test_backend *cpu, const bool *ops,
                              int64_t offload_min_batch, struct tg_ggml_trace *trace);

/* ---- a scheduler case, as both schedulers get it ------------------------------------------- */

#define TG_GGML_SCHED_MAX_DEVICES TG_GEN_SCHED_MAX_SIMS
#define TG_GGML_SCHED_MAX_BACKENDS (TG_GGML_SCHED_MAX_DEVICES + 1)
#define TG_GGML_SCHED_OFFLOAD_MIN_BATCH 4 /* devices claim host-weight ops with ne[1] >= this */

/* A device of the case: tgsched's sim and ggml's test device alike. */
struct tg_ggml_sched_device {
    char name[16];
    size_t alignment, pad; /* pad: bytes more per tensor */
    size_t max_size;       /* the largest buffer (0: no limit): compute buffers come in chunks */
    bool shares_host;      /* uses the CPU's buffer type (a BLAS-like backend) */
    bool ops[TG_OP_COUNT]; /* supported ops (none and the view ops always) */
};

struct tg_ggml_sched_case {
    int n_backends; /* the devices, then the CPU */
    struct tg_ggml_sched_device dev[TG_GGML_SCHED_MAX_DEVICES];
    bool parallel, op_offload;
    struct tg_gen_case *c; /* the graph; pre-allocated leafs in c->external_buffer */
    int *placement;        /* per leaf: the backend it lives on, -1 when not pre-allocated */
    void *context_memory;  /* the memory of leafs their context owns (data, no buffer), or NULL */
    /* tgsched's side, kept for callers that look further */
    tg_backend *tg_backends[TG_GGML_SCHED_MAX_BACKENDS];
    tg_buffer *tg_moved[TG_GGML_SCHED_MAX_BACKENDS];
};

/* A case as fuzz_sched decodes bytes (tg_gen_sched_decode: the devices,
 * pipeline copies, op offload, weights on random backends; the graph). */
enum tg_status tg_ggml_sched_case_from_bytes(const uint8_t *bytes, size_t n, struct tg_ggml_sched_case *k);
/* A case from a `.tg` file: `backends DEV...,cpu`, pre-allocated tensors
 * `buf=weights@DEV`, and per device `meta DEV.ops=op+op...` (default: every
 * op), `meta DEV.align=N` (256), `meta DEV.pad=N` (0), `meta DEV.max=N` (0: no
 * limit), `meta DEV.shares_host=1`;
 * `meta sched.parallel=1`, `meta sched.op_offload=1`; `meta context.owned=NAME+NAME...`:
 * leafs whose memory their context owns (no_alloc false: data, no buffer). */
enum tg_status tg_ggml_sched_case_from_text(const char *text, size_t len, const char *name, struct tg_ggml_sched_case *k);
void tg_ggml_sched_case_free(struct tg_ggml_sched_case *k);

/* ---- a schedule, as either side made it ---------------------------------------------------- */

#define TG_GGML_SCHED_MAX_TENSORS 4096
#define TG_GGML_SCHED_MAX_SPLITS 256
#define TG_GGML_SCHED_MAX_INPUTS 64

/* Tensors are named by their slot in the case's graph: nodes, then leafs. */
struct tg_ggml_split {
    int backend, i_start, i_end; /* node range [i_start, i_end) of the graph */
    int n_inputs;
    int inputs[TG_GGML_SCHED_MAX_INPUTS];
};

struct tg_ggml_schedule {
    bool ran, aborted, refused;
    char message[300]; /* the abort or the refusal */
    int n_nodes;
    int backend[TG_GGML_SCHED_MAX_TENSORS]; /* per slot */
    int n_splits;
    struct tg_ggml_split splits[TG_GGML_SCHED_MAX_SPLITS];
    int n_copies;
    size_t sizes[TG_GGML_SCHED_MAX_BACKENDS]; /* compute buffer per backend */
    bool inplace_across;                      /* ggml: a node took a source's memory in place across backends */
    bool chunked;                             /* ggml: a device's compute buffer came in several chunks (max size) */
    bool weights_rule[TG_GGML_SCHED_MAX_TENSORS]; /* tgsched: placed by the weights (or offload) rule */
    int n_data_moves;                         /* ggml: data moved while computing (split input copies) */
};

/* ggml_backend_sched_alloc_graph + compute over test backends, in a child
 * (ggml aborts on some graphs: then out->aborted with ggml's message). */
enum tg_status tg_ggml_schedule_in_ggml(const struct tg_ggml_sched_case *k, struct tg_ggml_schedule *out);
/* tg_sched_alloc_graph over sims and the CPU with TG_PLAN_GGML (fault
 * injected unless TG_SCHED_FAULT_NONE).  Moves the case's weights to their
 * backends: run it after ggml's side. */
enum tg_status tg_ggml_schedule_in_tgsched(struct tg_ggml_sched_case *k, enum tg_sched_fault fault,
                                           struct tg_ggml_schedule *out);
/* The schedule tgsched made last for the case's graph (s allocated it). */
void tg_ggml_tgsched_capture(const tg_sched *s, const struct tg_ggml_sched_case *k, struct tg_ggml_schedule *out);
/* The slot of a tensor of the case's graph, -1 when it is not there. */
int tg_ggml_sched_slot(const struct tg_graph *g, const struct tg_tensor *t);
/* The slot of the first tensor with that name, -1 when none has it. */
int tg_ggml_sched_slot_named(const struct tg_graph *g, const char *name);

/* ggml's side of a case in this process (for call sequences: pins, reserve,
 * callbacks): the test backends with one trace, the imported graph (weights
 * in buffers of their backends), a ggml_backend_sched over them. */
struct tg_ggml_sched_side {
    const struct tg_ggml_sched_case *k;
    struct tg_ggml_trace trace;
    struct tg_ggml_test_backend tb[TG_GGML_SCHED_MAX_BACKENDS];
    ggml_backend_t backends[TG_GGML_SCHED_MAX_BACKENDS];
    struct tg_ggml_buft weights_on_cpu;
    struct tg_ggml_graph gg;
    ggml_backend_sched_t sched;
};
enum tg_status tg_ggml_sched_side_open(struct tg_ggml_sched_side *side, const struct tg_ggml_sched_case *k);
void tg_ggml_sched_side_close(struct tg_ggml_sched_side *side);
/* ggml_backend_sched_alloc_graph of the side's graph (side->gg, slots of
 * side->k), the schedule taken, then compute (traced): out->ran when all of
 * it went through.  In this process: run it in a child where ggml may abort. */
void tg_ggml_sched_side_schedule(struct tg_ggml_sched_side *side, struct tg_ggml_schedule *out);
/* Index of a test backend of the side, -1 when b is none of them. */
int tg_ggml_sched_side_backend(const struct tg_ggml_sched_side *side, ggml_backend_t b);
/* tgsched's side: sims and the CPU (plan_only: no kernels needed, nothing
 * computes), the weights moved to their backends, a tg_sched with TG_PLAN_GGML
 * (the caller frees it; the backends go with the case).  NULL on failure. */
tg_sched *tg_ggml_tgsched_open(struct tg_ggml_sched_case *k, bool plan_only);
/* The case's weights moved into buffers of those backends (k->tg_moved), as
 * tg_ggml_tgsched_open moves them: a second case on the same backends. */
enum tg_status tg_ggml_tgsched_move_weights(struct tg_ggml_sched_case *k, tg_backend *const *backends);

/* ---- values: both schedules computed --------------------------------------------------------
 * The case decoded again on the CPU alone (tgsched's kernels, which the
 * kernel differentials and test_ggml_model hold against ggml's), its leafs
 * and input nodes filled (tg_oracle_fill_inputs) and computed: the reference.
 * Each side gets the same bytes in the same slots after allocating and
 * before computing; its result nodes (tg_gen_node_is_result) are compared
 * with the reference's, element by element through their strides.  ggml's
 * result, where beyond the bound, is also held against ggml's own CPU alone
 * (one backend, weights in host memory): equal to it, or that one as far
 * off, it is ggml's kernels (or its allocator), not its schedule. */
struct tg_ggml_sched_values {
    struct tg_ggml_sched_case ref;
    tg_gallocr *ga;
    void **fed;   /* per slot: the bytes fed (roots with memory: leafs and input nodes), else NULL */
    bool ready;   /* false: a node has no CPU kernel, nothing to compare with */
};
enum tg_status tg_ggml_sched_values_make(const uint8_t *bytes, size_t n, uint64_t seed, struct tg_ggml_sched_values *v);
void tg_ggml_sched_values_free(struct tg_ggml_sched_values *v);

/* NMSE above which a result that is not bit for bit is a wrong value: the
 * kernels of the two libraries differ by at most 1e-6 per op on these ranges
 * (gelu's f16 table; 1e-9 elsewhere, docs/upstream.md "Kernels"); a value
 * read stale, lost or from another tensor is off by far more. */
#define TG_GGML_VALUE_NMSE 1e-4

struct tg_ggml_value_result {
    bool ran;           /* allocated and computed (ggml: its child came through) */
    bool aborted;       /* ggml asserted (message), or its child crashed (signal) */
    int signal;
    char message[200];
    int compared, exact, close, wrong; /* result nodes: bit for bit, within TG_GGML_VALUE_NMSE, beyond */
    int as_alone;       /* ggml: beyond the bound, but so is ggml on its CPU alone, or equal to it (kernels, allocator) */
    int rope_spill;     /* ggml: beyond the bound where its rope of rows of an odd width wrote past a row into the
                         * result's bytes (cpu-rope-odd-width, docs/upstream.md) */
    int first_wrong;    /* node slot, -1 when none */
    double worst_close; /* largest NMSE of a close node */
    int foreign;        /* ggml: nodes a device computed on memory not of its buffer type */
    bool no_reference;  /* the CPU alone cannot compute the case: nothing was compared */
};
/* ggml_backend_sched over the test backends with kernels, in a child: k as
 * tg_ggml_schedule_in_ggml takes it (before tgsched's side moves weights). */
enum tg_status tg_ggml_values_in_ggml(const struct tg_ggml_sched_case *k, const struct tg_ggml_sched_values *v,
                                      struct tg_ggml_value_result *out);
/* tg_sched over sims that compute and the CPU, on a case decoded afresh
 * from the bytes (nothing of it moved yet), with fault set (self-tests). */
enum tg_status tg_ggml_values_in_tgsched(const uint8_t *bytes, size_t n, const struct tg_ggml_sched_values *v,
                                         enum tg_sched_fault fault, struct tg_ggml_value_result *out);

/* ---- the differential ----------------------------------------------------------------------- */

enum tg_ggml_sched_class {
    TG_GGML_SCHED_SAME = 0,
    TG_GGML_SCHED_UNASSIGNED_LEAF, /* ggml aborts: a leaf nothing computes with gets no backend */
    TG_GGML_SCHED_BOTH_REFUSE,     /* no backend can run a node: ggml aborts, tgsched refuses */
    TG_GGML_SCHED_COPY_REUSE,      /* ggml reads an earlier split's copy; tgsched copies per split */
    TG_GGML_SCHED_INPUT_COPIES,    /* pipeline copies of user inputs: ggml keeps four, tgsched none */
    TG_GGML_SCHED_WRITE_ELSEWHERE, /* ggml runs a write into a tensor (set_rows, cpy) on another backend
                                    * than the tensor's: into a copy (lost) or into memory it cannot use */
    TG_GGML_SCHED_VIEW_OFF_ROOT,   /* a view met before its root is assigned: ggml puts it on the first
                                    * backend with view ops (off its root, or its root follows it) */
    TG_GGML_SCHED_INPLACE_ACROSS,  /* backends sharing a buffer type: ggml reuses in place across them */
    TG_GGML_SCHED_ALL_VIEWS,       /* nothing computes: ggml's split keeps a stale backend */
    TG_GGML_SCHED_VIEW_OF_WEIGHTS, /* ggml's weights rule misses a view of a weight (no buffer yet) */
    TG_GGML_SCHED_NONE_VIEW_UNASSIGNED, /* ggml aborts: an op-none view read before its root (a leaf without
                                         * memory) has a backend gets none */
    TG_GGML_SCHED_NONE_VIEW_READ,  /* the allocator's op-none view read: ggml frees the view's root before a
                                    * read through the view (or never), or while another view of it lives;
                                    * buffer sizes differ, or ggml computes a wrong value */
    TG_GGML_SCHED_CONTEXT_MEMORY,  /* a leaf in context memory (data, no buffer) gets no backend from its
                                    * memory: ggml gives it its first reader's, a device then reads the host
                                    * pointer as its own, a copy of it aborts compute (GGML_ASSERT(buffer)),
                                    * and its readers cannot move to a device sharing host memory */
    TG_GGML_SCHED_NONE_VIEW_LATE,  /* the same op-none view read before its root has a backend, and read
                                    * again after: ggml gives it the root's backend then, the root's first
                                    * direct reader's; tgsched's root follows the view's first reader */
    TG_GGML_SCHED_UNEXPLAINED,
    TG_GGML_SCHED_CLASS_COUNT
};
const char *tg_ggml_sched_class_name(enum tg_ggml_sched_class c);

struct tg_ggml_sched_result {
    unsigned classes;
    int n_backends, n_nodes, n_splits_ggml, n_splits_tg;
    int nodes_differ, splits_differ, inputs_differ;
    bool sizes_differ, copies_differ;
    bool user_inputs; /* a node reads an input-flagged tensor */
    bool chunked;     /* ggml made a device's compute buffer in several chunks */
    bool compared;    /* both scheduled and the schedules were compared (differences, if any, classified) */
    char detail[400];
};

/* Both schedules of a case compared, and every difference classified. */
void tg_ggml_sched_classify(const struct tg_ggml_sched_case *k, const struct tg_ggml_schedule *ggml,
                            const struct tg_ggml_schedule *tgs, struct tg_ggml_sched_result *res);
/* A generated case (bytes as fuzz_sched's), scheduled both ways and
 * classified; fault: injected into tgsched (the self-test). */
enum tg_status tg_ggml_sched_compare(const uint8_t *bytes, size_t n, enum tg_sched_fault fault,
                                     struct tg_ggml_sched_result *res);
/* The same, and both sides computed with the values of seed (when the case
 * has CPU kernels: else both value results are left !ran with compared 0). */
enum tg_status tg_ggml_sched_compare_values(const uint8_t *bytes, size_t n, uint64_t seed, struct tg_ggml_sched_result *res,
                                            struct tg_ggml_value_result *ggml, struct tg_ggml_value_result *tgs);

#endif

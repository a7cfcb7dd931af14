/* The scheduler differential: ggml_backend_sched over test backends written
 * against ggml-backend-impl.h, and tg_sched over sim devices and the CPU with
 * the same properties, on the same generated multi-backend case.
 *
 * The test backends: a device per backend (the last of type CPU, the others
 * GPU), a buffer type with the sim's alignment and padding (or the CPU's,
 * for a device that shares host memory), the sim's op set and offload rule.
 * Their graph_compute computes nothing: it records the split it is given (its
 * backend and node range), and their buffers record the tensors data moves in
 * and out of, which are the split's input copies.  That trace is ggml's
 * schedule as it ran.
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
};

/* The CPU: host memory aligned as tgsched's CPU buffer type (64: a device
 * sharing host memory shares that type on both sides), every op, any host
 * buffer. */
void tg_ggml_test_cpu_init(struct tg_ggml_test_backend *b, int index, struct tg_ggml_trace *trace);
/* A device: its own buffer type (alignment, pad per tensor), or the CPU's
 * when shares_host; op set from a tgsched op mask (bit op % 64, as the sim's). */
void tg_ggml_test_device_init(struct tg_ggml_test_backend *b, int index, const char *name, size_t alignment,
                              size_t pad, bool shares_host, const struct tg_ggml_test_backend *cpu, uint64_t op_mask,
                              int64_t offload_min_batch, struct tg_ggml_trace *trace);

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
    bool compared;    /* both scheduled and the schedules were compared (differences, if any, classified) */
    char detail[400];
};

/* bytes: a scheduler case as fuzz_sched decodes it (tg_gen_sched_decode: the
 * backends, pipeline copies, op offload, weight placement; the graph).  The
 * ggml side runs in a child process: ggml aborts on some graphs.  fault:
 * tgsched schedules with it injected (the self-test; TG_SCHED_FAULT_NONE). */
enum tg_status tg_ggml_sched_compare(const uint8_t *bytes, size_t n, enum tg_sched_fault fault,
                                     struct tg_ggml_sched_result *res);

#endif

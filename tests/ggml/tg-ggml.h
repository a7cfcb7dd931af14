/* The harness that holds tgsched against upstream ggml (the pinned copy in
 * ../shared/ggml, built only when present): a tgsched graph imported into a
 * ggml graph, ggml buffer types with chosen properties, ggml's aborts caught,
 * and the allocator differential (ggml_gallocr's plan of a case judged by the
 * oracle and compared with TG_PLAN_GGML offset for offset).
 *
 * Only tests, fuzz targets and the upstream reproducers use it: nothing of it
 * is part of the library, and no ggml code is copied here. */
#ifndef TG_GGML_H
#define TG_GGML_H

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"
#include "ggml.h"

#include "tg-gen.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ---- ggml's aborts ------------------------------------------------------------
 * ggml stops on a failed GGML_ASSERT.  Code that plans in ggml's C allocator
 * runs through tg_ggml_catch: an abort there returns false with ggml's message
 * (its memory is then leaked, never reused), so one case cannot take a whole
 * differential down.  ggml's log is kept quiet unless TG_GGML_VERBOSE is set. */
void tg_ggml_quiet_log(void);
bool tg_ggml_catch(void (*fn)(void *user), void *user, char *message, size_t message_size);

/* ---- types and ops --------------------------------------------------------------- */

/* GGML_TYPE_COUNT / GGML_OP_COUNT when ggml has no such type / op (by name). */
enum ggml_type tg_ggml_type(enum tg_type type);
enum ggml_op tg_ggml_op(enum tg_op op);

/* ---- buffer types with chosen properties ------------------------------------------- */

#define TG_GGML_BUFT_MAX_CHUNKS 64
/* ggml-alloc.c's GGML_VBUFFER_MAX_CHUNKS (not in a header): at this many chunks
 * ggml stops adding them and lets the last one grow past the maximum size. */
#define TG_GGML_CHUNK_CAP_COUNT 16

/* A ggml buffer type with an alignment, a max size and an op whose tensors
 * need pad_bytes more (tgsched's generated types, stated by `buft` lines).
 * Its buffers are address-only (a fixed base, no memory: the allocator
 * differential never touches data) or real memory, host-visible to ggml
 * (is_host) unless it stands for a device's.  It remembers the buffers
 * it made since tg_ggml_buft_forget, in order: a ggml_gallocr makes one per
 * chunk, so the order is the chunk index. */
struct tg_ggml_trace;
struct tg_ggml_buft {
    struct ggml_backend_buffer_type buft; /* first: callbacks cast back */
    char name[32];
    size_t alignment, max_size; /* max_size 0: no limit */
    enum ggml_op pad_op;        /* GGML_OP_COUNT: none */
    size_t pad_bytes;
    bool pad_all_ops;           /* every tensor needs pad_bytes more (a device's padding) */
    bool host_memory;           /* memory behind the buffers (else a fixed base, no memory) */
    bool is_host;               /* ggml may read it directly (else through set/get) */
    bool fail_alloc;            /* every allocation fails (a device out of memory) */
    struct tg_ggml_trace *trace; /* when set, data moved in or out is recorded (tg-ggml-sched.h) */
    int n_made;
    ggml_backend_buffer_t made[TG_GGML_BUFT_MAX_CHUNKS];
};
void tg_ggml_buft_init(struct tg_ggml_buft *b, const char *name, size_t alignment, size_t max_size,
                       enum ggml_op pad_op, size_t pad_bytes, bool host_memory);
void tg_ggml_buft_forget(struct tg_ggml_buft *b);
/* Chunk index of a buffer this type made, -1 when it did not make it. */
int tg_ggml_buft_chunk_of(const struct tg_ggml_buft *b, ggml_backend_buffer_t buf);

/* ---- import: a tgsched graph as a ggml graph ---------------------------------------- */

struct tg_ggml_import_options {
    /* Copy flags bit for bit; by default an output flag is set with
     * ggml_set_output, which flags a view's root too. */
    bool raw_output_flags;
    /* The ggml buffer type a pre-allocated root goes to (NULL function or
     * result: ggml's CPU buffer type); its usage is the tgsched buffer's. */
    ggml_backend_buffer_type_t (*external_buft)(const struct tg_tensor *t, void *user);
    /* Pre-allocated roots in host memory this returns true for keep their
     * memory: bound at the same address in a ggml CPU buffer laid over their
     * tgsched buffer, so ggml reads the very bytes tgsched does (a model's
     * weights, never copied).  NULL: none. */
    bool (*share_memory)(const struct tg_tensor *t, void *user);
    void *user;
};

#define TG_GGML_MAX_EXTERNAL_BUFFERS 16

/* The ggml twin of a tgsched graph: same nodes and leafs in the same order,
 * each tensor with the same type, shape, strides, op, op params, sources,
 * view, flags (COMPUTE added on computed nodes, as ggml_build_forward_expand
 * does) and name; pre-allocated tensors bound in ggml buffers of their own,
 * tensors in context memory in a ggml context that owns theirs. */
struct tg_ggml_graph {
    struct ggml_context *ctx;
    /* Roots whose memory their tgsched context owns (data, no buffer) are made
     * in a context of their own with no_alloc false, as ggml's users make
     * them: data set, buffer NULL (NULL when the graph has none). */
    struct ggml_context *owned;
    struct ggml_cgraph *graph;
    int n_tensors;
    const struct tg_tensor **from; /* sorted by address, with... */
    struct ggml_tensor **to;       /* ...the ggml tensor of each */
    int n_buffers;
    ggml_backend_buffer_t buffers[TG_GGML_MAX_EXTERNAL_BUFFERS];
    tg_buffer *laid_over[TG_GGML_MAX_EXTERNAL_BUFFERS]; /* the tgsched buffer a shared one covers, else NULL */
};
enum tg_status tg_ggml_import(const struct tg_graph *g, const struct tg_ggml_import_options *opts,
                              struct tg_ggml_graph *out);
void tg_ggml_graph_free(struct tg_ggml_graph *gg);
struct ggml_tensor *tg_ggml_lookup(const struct tg_ggml_graph *gg, const struct tg_tensor *t);

/* A whole file as a NUL-terminated string (the caller frees), NULL when it
 * cannot be read. */
char *tg_ggml_read_text(const char *path, size_t *len);

/* ---- the allocator differential ----------------------------------------------------
 * A case is planned by ggml_gallocr (reserve_n + alloc_graph, the case's
 * buffer types and ids) and by tgsched's allocator with TG_PLAN_GGML.  ggml's
 * plan is bound into a copy of the case and judged by every oracle checker;
 * then the two plans are compared: buffer sizes, the chunk of every tensor
 * and its offset.  Each difference is put in a class: a listed deviation
 * (docs/upstream.md says why), a ggml defect, or unexplained (a failure). */
enum tg_ggml_alloc_class {
    TG_GGML_SAME = 0,              /* no difference */
    TG_GGML_INPLACE_OTHER_BUFFER,  /* ggml reused a source in place across buffer ids (it ignores the id) */
    TG_GGML_RAW_OUTPUT_VIEW,       /* a view flagged output alone: ggml frees its root, tgsched keeps it */
    TG_GGML_INPUT_INPLACE,         /* ggml gave an input node its source's memory while counting consumers */
    TG_GGML_CHUNK_BEST_FIT,        /* ggml made several chunks: its best fit is per chunk, tgsched's global */
    TG_GGML_CHUNK_CAP,             /* ggml made its most chunks (16): its last one grows past the maximum size,
                                    * tgsched adds chunks */
    TG_GGML_FREE_BLOCKS,           /* ggml aborted: more than 256 free blocks in a chunk */
    TG_GGML_INPLACE_BIGGER,        /* ggml aborted: an in-place node needs more bytes than its source */
    TG_GGML_NONE_VIEW_READ,        /* a node reads a view with op none of a planned root: ggml frees the root at
                                    * its last direct consumer (or never), tgsched keeps it until that read */
    TG_GGML_STALE_PLAN,            /* a sequence: alloc_graph binds graph b with the plan of graph a (its check
                                    * compares counts and sizes only) and b's binding breaks a rule */
    TG_GGML_REPLAY_OTHER_GRAPH,    /* a sequence: ggml binds b with a's plan, legally, where tgsched, which
                                    * compares each slot's sources and views, plans b again or asks for a reserve */
    TG_GGML_UNREAD_LEAF_GREW,      /* a sequence: a leaf no node of b reads is larger than a's at its position:
                                    * ggml's check never looks at leafs, replays a's plan, and the leaf overlaps
                                    * what follows it or (past the buffer's end) its binding aborts */
    TG_GGML_UNLISTED_HASH_FULL,    /* ggml aborted: tensors the graph reaches but does not list (sources set
                                    * after it was built) fill ggml_gallocr's hash set, sized for the lists */
    TG_GGML_UNEXPLAINED,           /* a difference or violation no listed reason covers */
    TG_GGML_CLASS_COUNT
};
const char *tg_ggml_alloc_class_name(enum tg_ggml_alloc_class c);

struct tg_ggml_alloc_result {
    unsigned classes;       /* bit per class found (TG_GGML_SAME when none) */
    int n_violations;       /* oracle violations in ggml's plan (first round) */
    int rounds;             /* plans by ggml: 1, more when raw flags were dropped or ids set to ggml's */
    bool ids_replaced;      /* the last round ran with the ids ggml used */
    bool equal;             /* the last round's plans are the same, and nothing unexplained */
    int n_tensors_compared; /* tensors both planned */
    int n_offsets_differ;
    bool multi_chunk;
    size_t ggml_size[TG_GEN_MAX_IDS], tg_size[TG_GEN_MAX_IDS];
    /* a sequence's decisions on graph b: bound with a's plan, planned again, or refused
     * (several buffer ids: ggml's alloc_graph false, tgsched's TG_ERR_NEEDS_RESERVE) */
    bool ggml_replayed, ggml_refused, tg_replayed, tg_refused;
    char detail[400]; /* the first violation or difference, or ggml's abort message */
};

/* How a differential case is made: twice from the same bytes or text (one
 * copy is bound to ggml's plan, the other planned by tgsched). */
struct tg_ggml_case_source {
    const uint8_t *bytes; /* a generated case (tg_gen_case_from_bytes), or... */
    size_t n;
    struct tg_gen_options opts;
    const char *text;     /* ...a `.tg` file with an allocator setup */
    size_t text_len;
    const char *name;
    /* variant: flag some nodes that may run in place as inputs (ggml_set_input on
     * a computed tensor), which ggml places while it counts consumers */
    bool input_nodes;
    /* variant: some small leafs the plan would place live in memory their
     * context owns instead (no_alloc false: data, no buffer), and views of
     * them hold the address as ggml's view constructors set it */
    bool context_owned;
    /* variant: some sources with memory (pre-allocated or context-owned
     * leafs, views bound in them) are not listed in the graph, as when a
     * source is set on a node after the graph was built */
    bool unlisted;
};
enum tg_status tg_ggml_case_make(const struct tg_ggml_case_source *src, struct tg_gen_case **out);

/* How a comparison runs; the faults are for the differential's self-test. */
struct tg_ggml_alloc_options {
    bool raw_flags_import;  /* import output flags bit for bit (else as ggml_set_output sets them) */
    enum tg_fault tg_fault; /* tgsched plans with this fault injected (TG_FAULT_NONE) */
    bool overlap_ggml_plan; /* fault: ggml's plan, as read back, has its second owned leaf moved
                             * onto its first (two live tensors in the same bytes) */
};

/* Plans the case both ways and classifies.  Where raw flags leave a view
 * flagged output alone, ggml plans the case again with them as
 * ggml_set_output sets them; where ggml reused a source in place across
 * buffer ids, again with each such node's id set to the one ggml used (and
 * tgsched's plan with the case's ids must then be legal too).  The last
 * round is compared: those two excuse nothing else.  An error status only
 * when a case could not be made or the oracle could not run. */
enum tg_status tg_ggml_alloc_compare(const struct tg_ggml_case_source *src, const struct tg_ggml_alloc_options *opts,
                                     struct tg_ggml_alloc_result *res);

/* ---- a sequence: ggml_gallocr_reserve_n with graph a, alloc_graph with a, then with b --------
 * b is a fresh copy of a, changed: */
enum tg_ggml_sequence {
    TG_GGML_SEQ_SAME,       /* not at all (the next token of the same shape) */
    TG_GGML_SEQ_EDGE_MOVED, /* one node reads another tensor of the same type and size (tg_gen_case_rewire_edge) */
    TG_GGML_SEQ_VIEW_MOVED, /* one view has another root of the same type and size */
    TG_GGML_SEQ_SMALLER,    /* decoded with a sixteenth of the tensor cap (generated cases; text: the same) */
    TG_GGML_SEQ_BIGGER,     /* a is that one, b the case as given */
    TG_GGML_SEQ_COUNT
};
const char *tg_ggml_sequence_name(enum tg_ggml_sequence seq);
/* Both allocators run the sequence on one allocator each (tgsched with
 * TG_PLAN_GGML and opts->tg_fault).  tgsched's binding of b must pass the
 * oracle (or, with several ids, be refused as needing a reserve); ggml's is
 * judged by the oracle too: a violation (or ggml's abort binding a leaf past
 * its buffer) where an unread leaf grew is TG_GGML_UNREAD_LEAF_GREW, else a
 * violation where ggml bound b with a's plan and tgsched did not is
 * TG_GGML_STALE_PLAN, the same decision legal TG_GGML_REPLAY_OTHER_GRAPH.  Where both made the same decision the two
 * bindings are compared offset for offset; a difference is excused only by
 * the triggers the direct comparison uses (ggml's plan of b). */
enum tg_status tg_ggml_alloc_sequence_compare(const struct tg_ggml_case_source *src, enum tg_ggml_sequence seq,
                                              uint64_t salt, const struct tg_ggml_alloc_options *opts,
                                              struct tg_ggml_alloc_result *res);

/* One element at p as a double, for comparing results (NaN for a type
 * without a plain value: quantized blocks). */
static inline double tg_ggml_element(enum ggml_type type, const char *p) {
    switch (type) {
    case GGML_TYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case GGML_TYPE_F16: { ggml_fp16_t h; memcpy(&h, p, 2); return ggml_fp16_to_fp32(h); }
    case GGML_TYPE_BF16: { ggml_bf16_t h; memcpy(&h, p, 2); return ggml_bf16_to_fp32(h); }
    case GGML_TYPE_I32: { int32_t i; memcpy(&i, p, 4); return i; }
    case GGML_TYPE_I64: { int64_t i; memcpy(&i, p, 8); return (double)i; }
    default: return (double)NAN;
    }
}

#endif

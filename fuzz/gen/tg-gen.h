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
 * buffer of the case), sizes from a few bytes to several MB, and a buffer id per
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

/* A host buffer type with a chosen alignment, max size and op-dependent padding. */
struct tg_gen_buft {
    tg_buffer_type buft; /* first member: callbacks cast back */
    size_t alignment;
    size_t max_size;      /* 0: no limit */
    enum tg_op padded_op; /* tensors of this op need pad_bytes more (TG_OP_COUNT: none) */
    size_t pad_bytes;
    bool address_only;    /* buffers reserve address space only (planning real models) */
    char name[32];
};
void tg_gen_buft_init(struct tg_gen_buft *b, const char *name, size_t alignment, size_t max_size,
                      enum tg_op padded_op, size_t pad_bytes);
/* The same type with address-only buffers: mapped PROT_NONE without committing
 * memory, so a multi-GB plan can be bound and checked; data access fails. */
void tg_gen_buft_init_address_only(struct tg_gen_buft *b, const char *name, size_t alignment);

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
};
struct tg_gen_options tg_gen_default_options(void);

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
/* The case as text: '#' lines with the seed, buffer types and ids, then the
 * graph in `.tg` form (tg_graph_write_mem).  malloc'ed, caller frees. */
char *tg_gen_case_to_text(const struct tg_gen_case *c);
/* Total tensors in the case (nodes + leafs). */
int tg_gen_case_n_tensors(const struct tg_gen_case *c);

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

/* ---- differential execution of a case (gen_exec.c) ------------------------------------ */

/* Decodes the case twice from the same bytes, plans one copy with the real
 * allocator (policy) and one with the oracle's naive allocator, computes both
 * on the CPU from the same inputs (fill_seed) and compares outputs bit for bit.
 * res->computed is false when some op has no CPU kernel.  Errors: planning or
 * computing failed (the message says which). */
enum tg_status tg_gen_exec_check(const uint8_t *data, size_t size, const struct tg_gen_options *opts,
                                 enum tg_plan_policy policy, uint64_t fill_seed, struct tg_oracle_diff_result *res);

#ifdef __cplusplus
}
#endif
#endif

/* tgsched CPU backend: 64-byte-aligned host buffers, reference kernels that
 * handle any strides and ggml's broadcasting, multithreaded graph compute. */
#ifndef TG_CPU_H
#define TG_CPU_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_CPU_ALIGNMENT 64

tg_backend *tg_backend_cpu_new(void);
bool tg_backend_is_cpu(tg_backend *backend);
void tg_backend_cpu_set_n_threads(tg_backend *backend, int n_threads);
/* Plan-only mode (for planning graphs whose ops or types have no kernel here,
 * e.g. quantized weights): supports_op accepts every op, and graph_compute
 * refuses with TG_ERR_UNSUPPORTED naming the first node it cannot compute. */
void tg_backend_cpu_set_plan_only(tg_backend *backend, bool plan_only);
/* The host buffer type (shared, never freed). */
tg_buffer_type *tg_cpu_buffer_type(void);
/* A host buffer type with another alignment (for ggml-compatible planning:
 * ggml's CPU type aligns to 32).  Shared per alignment, never freed. */
tg_buffer_type *tg_cpu_buffer_type_aligned(size_t alignment);
/* A host buffer over caller memory (not freed by the buffer); NULL with
 * TG_ERR_INVALID when ptr is NULL and size is not 0. */
tg_buffer *tg_cpu_buffer_from_ptr(void *ptr, size_t size);

/* The kernels, for other backends that compute on host-visible memory (sim):
 * computes rows [ith-th share] of one node; all sources and dst must be in
 * host memory.  TG_ERR_UNSUPPORTED (naming the node) when no kernel fits. */
TG_NODISCARD enum tg_status tg_cpu_compute_node(struct tg_tensor *node, int ith, int nth);
/* Exact: true only when tg_cpu_compute_node will compute this node. */
bool tg_cpu_supports_op(const struct tg_tensor *node);
/* "'name' (op mul_mat, f32 [..]; source 'w' q4_1 [..] strides ..)": the node
 * and its source of another type, for messages about what has no kernel. */
void tg_cpu_describe_node(const struct tg_tensor *node, char *out, size_t size);
/* Single-threaded compute of a whole graph on host memory (reference path). */
TG_NODISCARD enum tg_status tg_cpu_compute_graph(struct tg_graph *graph, int n_threads);

#ifdef __cplusplus
}
#endif
#endif

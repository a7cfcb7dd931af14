/* tg-ggml-export: write any ggml graph as a tgsched `.tg` file, to plan,
 * check and draw it with `tgsched` (docs/graph-format.md, README.md "Check
 * your own ggml graphs").
 *
 * For ggml and llama.cpp users: compile tg-ggml-export.c into your program
 * (it needs only ggml's headers: -I ggml/include, and -I ggml/src for the
 * graph's own leaf order; without ggml/src, or with TG_EXPORT_NO_GGML_IMPL
 * defined, leafs are written in the order the nodes first read them and the
 * file says so: `meta leaf_order=first_use`), call tg_ggml_export once the
 * graph is built, and
 * run `tgsched check graph.tg` or `tgsched plan graph.tg --plan ggml --json`.
 *
 * What is written: ggml's leafs (in ggml's order), then its nodes in
 * execution order; per tensor its type, shape, strides, op, op params,
 * sources, view, flags and name; tensors that already have memory as
 * `buf=weights` (a buffer of usage weights) or `buf=data` (any other memory
 * that is not a compute buffer).  Given the scheduler (after
 * ggml_backend_sched_alloc_graph, or split_graph), also its backends in
 * priority order, on which backend each pre-allocated tensor lives, and the
 * backend ggml chose for every tensor: as `x-ggml-backend=NAME` (a note the
 * reader keeps out of the graph: tgsched schedules on its own), or as
 * `backend=NAME` pins, which make tgsched plan ggml's own assignment.  The
 * copies the scheduler put in place of split inputs are written as the
 * tensors they copy: matched by identity where the scheduler holds one copy
 * per input (its context's layout at the pinned ggml, each pairing checked),
 * else by ggml's spelling of the copy's name, refused where two tensors could
 * be the one copied.  Nodes ggml does not compute (no compute flag:
 * ggml_build_forward_order and ggml_build_forward_select's other branches)
 * are written `nocompute`. */
#ifndef TG_GGML_EXPORT_H
#define TG_GGML_EXPORT_H

#include "ggml-backend.h"
#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tg_ggml_export_options {
    ggml_backend_sched_t sched; /* NULL: one backend, "cpu" */
    bool pin_assignment;        /* write the scheduler's choices as backend= pins */
    const char *meta;           /* extra "KEY=VALUE" lines, '\n'-separated (NULL: none) */
};

/* The graph as `.tg` text (malloc'ed, the caller frees), or NULL with the
 * reason in tg_ggml_export_error(): a type or op the format cannot spell
 * (named), backend names the format would write alike, a meta line without
 * '=', a
 * tensor named by a source that is neither a node nor a leaf and has no
 * memory, or no memory.  opts may be NULL. */
char *tg_ggml_export_mem(struct ggml_cgraph *graph, const struct tg_ggml_export_options *opts, size_t *len);
/* The same into a file; 0 on success, -1 with the reason in tg_ggml_export_error(). */
int tg_ggml_export(struct ggml_cgraph *graph, const char *path, const struct tg_ggml_export_options *opts);
/* Why the last export on this thread failed ("" when it did not). */
const char *tg_ggml_export_error(void);

#ifdef __cplusplus
}
#endif
#endif

/* tgsched `.tg` graph text format, version 1 (see docs/graph-format.md).
 *
 * tg_file_read parses a whole file into a context + graph plus what the format
 * says beyond tensors (backend names, placements, pins, meta lines).  Any error
 * is reported with the line number and a sentence; nothing is handed back then.
 * tg_file_write produces the canonical form: write(read(f)) is stable. */
#ifndef TG_IO_H
#define TG_IO_H

#include "tg-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_IO_MAX_BACKENDS 16
#define TG_IO_MAX_BUFTS 16
#define TG_IO_MAX_BUFFER_IDS 16

enum tg_placement {
    TG_PLACE_NONE = 0, /* planned by the allocator (or a view) */
    TG_PLACE_WEIGHTS,  /* buf=weights[@B]: pre-allocated, usage weights */
    TG_PLACE_DATA,     /* buf=data[@B]: pre-allocated, usage any (KV cache, user data) */
};

struct tg_file_tensor {
    struct tg_tensor *tensor;
    int64_t id;             /* id in the file */
    bool is_leaf;
    enum tg_placement placement;
    int placement_backend;  /* index into backend_names (default: last) */
    int pinned_backend;     /* backend=B, -1 when not pinned */
    int buffer_id;          /* bufid=N: the graph allocator's buffer id (default 0) */
};

/* A buffer type stated by a `buft` line: what a planner needs of it. */
struct tg_io_buft {
    char name[32];
    size_t alignment;  /* a power of two */
    size_t max_size;   /* 0: no limit */
    enum tg_op pad_op; /* tensors of this op need pad_bytes more (TG_OP_COUNT: none) */
    size_t pad_bytes;
};

/* A graph allocator's setup (`buft` and `buffers` lines): buffer id i plans
 * into bufts[buft_of_id[i]]; ids may share a type, and then an address space. */
struct tg_io_alloc_setup {
    int n_bufts;
    struct tg_io_buft bufts[TG_IO_MAX_BUFTS];
    int n_ids; /* 0: no `buffers` line (the file is planned by the scheduler) */
    int buft_of_id[TG_IO_MAX_BUFFER_IDS];
};

struct tg_file {
    struct tg_context *ctx; /* no_alloc: owns the tensors */
    struct tg_graph *graph; /* leafs and nodes in file order */
    int n_backends;         /* >= 1; "cpu" alone when the header has none */
    char backend_names[TG_IO_MAX_BACKENDS][32];
    int n_meta;
    char **meta;            /* "KEY=VALUE" strings */
    struct tg_io_alloc_setup alloc; /* buffer types and allocator buffer ids, if stated */
    int n_tensors;
    struct tg_file_tensor *tensors; /* in file order */
    /* Owned by the file: buffers made by tg_file_bind_external. */
    int n_buffers;
    tg_buffer **buffers;
    struct tg_file_index *index; /* private: tensor -> record lookup */
};

/* NULL on failure with tg_last_error() = "FILE:LINE: sentence". */
struct tg_file *tg_file_read(const char *path);
/* Parse text held in memory; name is used in messages. */
struct tg_file *tg_file_read_mem(const char *text, size_t len, const char *name);
/* The same with the status: TG_ERR_IO when the file cannot be read (message
 * names the path and the system's reason), TG_ERR_INVALID for malformed text,
 * TG_ERR_ALLOC when host memory runs out.  *out is NULL on failure. */
TG_NODISCARD enum tg_status tg_file_load(const char *path, struct tg_file **out);
TG_NODISCARD enum tg_status tg_file_parse(const char *text, size_t len, const char *name, struct tg_file **out);
void tg_file_free(struct tg_file *f);
/* Find the record of a tensor (NULL if it is not from this file). */
const struct tg_file_tensor *tg_file_find(const struct tg_file *f, const struct tg_tensor *t);

/* Write a file's graph in canonical form: tensors in file order with their
 * ids, keys in a fixed order, nb= only when not contiguous, params= up to the
 * last non-zero word.  Returns TG_ERR_IO on write errors, TG_ERR_INVALID when
 * a tensor references one that is not written before it. */
TG_NODISCARD enum tg_status tg_file_write(const char *path, const struct tg_file *f);
/* Canonical text in a malloc'ed string (caller frees); NULL on failure. */
char *tg_file_write_mem(const struct tg_file *f, size_t *len);
/* Canonical text of any graph: ids are positions, leafs first, placement taken
 * from the tensors' buffers (usage weights -> buf=weights, other pre-bound
 * memory -> buf=data, compute buffers -> none); one backend, "cpu". */
char *tg_graph_write_mem(const struct tg_graph *g, size_t *len);
TG_NODISCARD enum tg_status tg_graph_write(const char *path, const struct tg_graph *g);
/* The same with an allocator setup: `buft` and `buffers` lines from setup and
 * bufid= from node_ids / leaf_ids (buffer id per node / leaf, NULL: all 0), so
 * a graph allocator case is written whole.  NULL on failure. */
char *tg_graph_write_alloc_mem(const struct tg_graph *g, const struct tg_io_alloc_setup *setup, const int *node_ids,
                               const int *leaf_ids, size_t *len);

/* Bind every pre-allocated tensor (buf=weights / buf=data) of the file into
 * buffers of the given backends (backends[i] serves backend_names[i]; NULL
 * entries mean the last backend).  With reserve_only, buffers reserve address
 * space without committing memory (planning a 7B graph without 4 GB of RAM);
 * reading such a tensor's data is then an error of the buffer.  The buffers are
 * owned by the file and freed by tg_file_free. */
TG_NODISCARD enum tg_status tg_file_bind_external(struct tg_file *f, tg_backend **backends, int n_backends, bool reserve_only);

#ifdef __cplusplus
}
#endif
#endif

/* Test backends for ggml's scheduler (see tg-ggml-sched.h), written against
 * ggml-backend-impl.h as a backend author writes one: a device interface
 * (type, buffer type, supports_op, supports_buft, offload_op) and a backend
 * whose graph_compute records the split instead of computing it. */
#include "tg-ggml-sched.h"

#include <stdio.h>
#include <string.h>

void tg_ggml_trace_data(struct tg_ggml_trace *trace, const struct ggml_tensor *t) {
    if (!trace) return;
    if (trace->n == TG_GGML_TRACE_MAX) {
        trace->overflow = true;
        return;
    }
    struct tg_ggml_trace_event *e = &trace->ev[trace->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", t->name);
}

static struct tg_ggml_test_backend *of_device(ggml_backend_dev_t dev) { return dev->context; }
static struct tg_ggml_test_backend *of_backend(ggml_backend_t backend) { return backend->context; }

/* ---- the device ---------------------------------------------------------------------------- */

static const char *dev_name(ggml_backend_dev_t dev) { return of_device(dev)->name; }
static const char *dev_description(ggml_backend_dev_t dev) { return of_device(dev)->name; }

static void dev_memory(ggml_backend_dev_t dev, size_t *free_bytes, size_t *total) {
    (void)dev;
    *free_bytes = *total = 0;
}

static enum ggml_backend_dev_type dev_type(ggml_backend_dev_t dev) {
    return of_device(dev)->is_cpu ? GGML_BACKEND_DEVICE_TYPE_CPU : GGML_BACKEND_DEVICE_TYPE_GPU;
}

static void dev_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props *props) {
    memset(props, 0, sizeof *props);
    props->name = dev_name(dev);
    props->description = dev_description(dev);
    props->type = dev_type(dev);
}

static ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t dev) { return of_device(dev)->buft; }

static bool is_view_op(enum ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

/* as the sim's: none and the view ops everywhere, the rest from the op set */
static bool dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor *op) {
    const struct tg_ggml_test_backend *b = of_device(dev);
    if (op->op == GGML_OP_NONE || is_view_op(op->op)) return true;
    return b->is_cpu || b->ops[op->op];
}

/* as tgsched's: the CPU reads any host memory; a device only its own type */
static bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft) {
    const struct tg_ggml_test_backend *b = of_device(dev);
    return b->is_cpu ? ggml_backend_buft_is_host(buft) : buft == b->buft;
}

static bool dev_offload_op(ggml_backend_dev_t dev, const struct ggml_tensor *op) {
    const struct tg_ggml_test_backend *b = of_device(dev);
    return b->offload_min_batch > 0 && op->ne[1] >= b->offload_min_batch;
}

/* ---- the backend ------------------------------------------------------------------------------ */

static const char *backend_name(ggml_backend_t backend) { return of_backend(backend)->name; }
static void backend_free(ggml_backend_t backend) { (void)backend; }

/* Whether a device whose memory is its own reads or writes t elsewhere: all
 * memory here is the host's, so such a node computes the right bytes where a
 * real device would read host (or another device's) addresses as its own. */
static bool foreign_to(const struct tg_ggml_test_backend *b, const struct ggml_tensor *t) {
    if (b->is_cpu || b->buft != &b->own.buft || !t) return false; /* host memory is the CPU's to read */
    return !t->buffer || t->buffer->buft != b->buft;
}

static void trace_split(struct tg_ggml_test_backend *b, struct ggml_cgraph *graph) {
    struct tg_ggml_trace *trace = b->trace;
    if (!trace) return;
    if (trace->n == TG_GGML_TRACE_MAX) {
        trace->overflow = true;
        return;
    }
    struct tg_ggml_trace_event *e = &trace->ev[trace->n++];
    memset(e, 0, sizeof *e);
    e->compute = true;
    e->backend = b->index;
    e->nodes = (const struct ggml_tensor *const *)ggml_graph_nodes(graph);
    e->n_nodes = ggml_graph_n_nodes(graph);
}

static enum ggml_status backend_compute(ggml_backend_t backend, struct ggml_cgraph *graph) {
    struct tg_ggml_test_backend *b = of_backend(backend);
    trace_split(b, graph);
    if (!b->kernels) return GGML_STATUS_SUCCESS;
    for (int i = 0; i < ggml_graph_n_nodes(graph); i++) {
        const struct ggml_tensor *x = ggml_graph_node(graph, i);
        if (x->op == GGML_OP_NONE || is_view_op(x->op)) continue; /* nothing computed */
        bool foreign = foreign_to(b, x);
        for (int j = 0; j < GGML_MAX_SRC; j++) foreign |= foreign_to(b, x->src[j]);
        b->foreign += foreign;
    }
    return ggml_backend_graph_compute(b->kernels, graph);
}

static void init_common(struct tg_ggml_test_backend *b, int index, const char *name, bool is_cpu,
                        struct tg_ggml_trace *trace) {
    memset(b, 0, sizeof *b);
    b->index = index;
    b->is_cpu = is_cpu;
    b->trace = trace;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->device.iface = (struct ggml_backend_device_i){
        .get_name = dev_name,
        .get_description = dev_description,
        .get_memory = dev_memory,
        .get_type = dev_type,
        .get_props = dev_props,
        .get_buffer_type = dev_buft,
        .supports_op = dev_supports_op,
        .supports_buft = dev_supports_buft,
        .offload_op = dev_offload_op,
    };
    b->device.context = b;
    b->backend.iface = (struct ggml_backend_i){
        .get_name = backend_name,
        .free = backend_free,
        .graph_compute = backend_compute,
    };
    b->backend.device = &b->device;
    b->backend.context = b;
}

void tg_ggml_test_cpu_init(struct tg_ggml_test_backend *b, int index, struct tg_ggml_trace *trace) {
    init_common(b, index, "cpu", true, trace);
    tg_ggml_buft_init(&b->own, "cpu", 64, 0, GGML_OP_COUNT, 0, true);
    b->own.trace = trace;
    b->own.buft.device = &b->device;
    b->buft = &b->own.buft;
}

void tg_ggml_test_device_init(struct tg_ggml_test_backend *b, int index, const char *name, size_t alignment,
                              size_t pad, bool shares_host, const struct tg_ggml_test_backend *cpu, const bool *ops,
                              int64_t offload_min_batch, struct tg_ggml_trace *trace) {
    init_common(b, index, name, false, trace);
    tg_ggml_buft_init(&b->own, name, alignment, 0, GGML_OP_COUNT, pad, true);
    b->own.pad_all_ops = pad > 0;
    b->own.is_host = false; /* device memory: ggml moves data through set/get */
    b->own.trace = trace;
    b->own.buft.device = &b->device;
    b->buft = shares_host ? cpu->buft : &b->own.buft;
    for (int op = 0; op < GGML_OP_COUNT; op++) b->ops[op] = false;
    for (int op = 1; op < TG_OP_COUNT; op++) { /* tgsched's ops, mapped to ggml's */
        enum ggml_op g = tg_ggml_op((enum tg_op)op);
        if (g != GGML_OP_COUNT && ops[op]) b->ops[g] = true;
    }
    b->offload_min_batch = offload_min_batch;
}

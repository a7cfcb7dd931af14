/* ggml buffer types with chosen alignment, max size and op padding (see
 * tg-ggml.h), written against ggml-backend-impl.h as a backend author writes
 * them.  Address-only buffers have no memory: every one sits at the same
 * fixed, maximally aligned base, which ggml's allocator only adds offsets to. */
#include "tg-ggml-sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADDRESS_ONLY_BASE ((uintptr_t)1 << 32)

struct host_memory {
    void *base;
};

static struct tg_ggml_buft *buft_of(ggml_backend_buffer_type_t b) { return (struct tg_ggml_buft *)b; }

static const char *buft_name(ggml_backend_buffer_type_t b) { return buft_of(b)->name; }
static size_t buft_alignment(ggml_backend_buffer_type_t b) { return buft_of(b)->alignment; }
static size_t buft_max_size(ggml_backend_buffer_type_t b) { return buft_of(b)->max_size ? buft_of(b)->max_size : SIZE_MAX; }
static bool buft_is_host(ggml_backend_buffer_type_t b) { return buft_of(b)->is_host; }

static size_t buft_alloc_size(ggml_backend_buffer_type_t b, const struct ggml_tensor *t) {
    const struct tg_ggml_buft *x = buft_of(b);
    return ggml_nbytes(t) + (x->pad_all_ops || t->op == x->pad_op ? x->pad_bytes : 0);
}

static void buffer_free(ggml_backend_buffer_t buf) {
    struct host_memory *m = buf->context;
    if (m) free(m->base);
    free(m);
}

static void *buffer_base(ggml_backend_buffer_t buf) {
    struct host_memory *m = buf->context;
    return m ? m->base : (void *)ADDRESS_ONLY_BASE;
}

static void buffer_memset(ggml_backend_buffer_t buf, struct ggml_tensor *t, uint8_t v, size_t off, size_t n) {
    if (buf->context) memset((char *)t->data + off, v, n);
}

static void buffer_set(ggml_backend_buffer_t buf, struct ggml_tensor *t, const void *data, size_t off, size_t n) {
    tg_ggml_trace_data(buft_of(buf->buft)->trace, t);
    if (buf->context) memcpy((char *)t->data + off, data, n);
}

static void buffer_get(ggml_backend_buffer_t buf, const struct ggml_tensor *t, void *data, size_t off, size_t n) {
    tg_ggml_trace_data(buft_of(buf->buft)->trace, t);
    if (buf->context) memcpy(data, (const char *)t->data + off, n);
    else memset(data, 0, n);
}

static void buffer_clear(ggml_backend_buffer_t buf, uint8_t v) {
    struct host_memory *m = buf->context;
    if (m) memset(m->base, v, buf->size);
}

static ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t b, size_t size) {
    struct tg_ggml_buft *t = buft_of(b);
    if (t->fail_alloc) return NULL;
    struct host_memory *m = NULL;
    if (t->host_memory) {
        m = calloc(1, sizeof *m);
        size_t align = t->alignment < sizeof(void *) ? sizeof(void *) : t->alignment;
        if (!m || posix_memalign(&m->base, align, (size + align - 1) / align * align) != 0) {
            free(m);
            return NULL;
        }
        memset(m->base, 0, size);
    }
    struct ggml_backend_buffer_i iface = {
        .free_buffer = buffer_free,
        .get_base = buffer_base,
        .memset_tensor = buffer_memset,
        .set_tensor = buffer_set,
        .get_tensor = buffer_get,
        .clear = buffer_clear,
    };
    ggml_backend_buffer_t buf = ggml_backend_buffer_init(b, iface, m, size);
    if (t->n_made < TG_GGML_BUFT_MAX_CHUNKS) t->made[t->n_made++] = buf;
    return buf;
}

void tg_ggml_buft_init(struct tg_ggml_buft *b, const char *name, size_t alignment, size_t max_size,
                       enum ggml_op pad_op, size_t pad_bytes, bool host_memory) {
    memset(b, 0, sizeof *b);
    b->buft.iface = (struct ggml_backend_buffer_type_i){
        .get_name = buft_name,
        .alloc_buffer = buft_alloc,
        .get_alignment = buft_alignment,
        .get_max_size = buft_max_size,
        .get_alloc_size = buft_alloc_size,
        .is_host = buft_is_host,
    };
    b->buft.context = b;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->alignment = alignment ? alignment : 1;
    b->max_size = max_size;
    b->pad_op = pad_op;
    b->pad_bytes = pad_bytes;
    b->host_memory = host_memory;
    b->is_host = host_memory;
}

void tg_ggml_buft_forget(struct tg_ggml_buft *b) { b->n_made = 0; }

int tg_ggml_buft_chunk_of(const struct tg_ggml_buft *b, ggml_backend_buffer_t buf) {
    for (int i = 0; i < b->n_made; i++) {
        if (b->made[i] == buf) return i;
    }
    return -1;
}

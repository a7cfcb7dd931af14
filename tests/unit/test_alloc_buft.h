/* A host buffer type for allocator tests, configurable per instance:
 * alignment, max size, an op whose tensors need extra bytes (like an
 * op-dependent get_alloc_size), and allocation failure on demand. */
#ifndef TEST_ALLOC_BUFT_H
#define TEST_ALLOC_BUFT_H

#include "tg-alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct test_buft {
    tg_buffer_type buft; /* first: the iface callbacks cast back to test_buft */
    size_t alignment;
    size_t max_size;     /* 0: no limit */
    enum tg_op padded_op;/* tensors of this op need pad_bytes more (TG_OP_COUNT: none) */
    size_t pad_bytes;
    int fail_allocs;     /* the next this many alloc_buffer calls fail... */
    int fail_skip;       /* ...after this many more succeed */
    int n_allocs;        /* successful alloc_buffer calls */
    char name[32];
};

static inline struct test_buft *test_buft_of(tg_buffer_type *b) { return (struct test_buft *)b; }
static inline const char *test_buft_name(tg_buffer_type *b) { return test_buft_of(b)->name; }
static inline size_t test_buft_align(tg_buffer_type *b) { return test_buft_of(b)->alignment; }
static inline size_t test_buft_max(tg_buffer_type *b) { return test_buft_of(b)->max_size ? test_buft_of(b)->max_size : SIZE_MAX; }
static inline bool test_buft_is_host(tg_buffer_type *b) { (void)b; return true; }
static inline size_t test_buft_alloc_size(tg_buffer_type *b, const struct tg_tensor *t) {
    struct test_buft *tb = test_buft_of(b);
    return tg_nbytes(t) + (t->op == tb->padded_op ? tb->pad_bytes : 0);
}
static inline void test_buf_free(tg_buffer *b) { free(b->context); }
static inline void *test_buf_base(tg_buffer *b) { return b->context; }
static inline void test_buf_set(tg_buffer *b, struct tg_tensor *t, const void *d, size_t o, size_t n) { (void)b; memcpy((char *)t->data + o, d, n); }
static inline void test_buf_get(tg_buffer *b, const struct tg_tensor *t, void *d, size_t o, size_t n) { (void)b; memcpy(d, (const char *)t->data + o, n); }
static inline void test_buf_memset(tg_buffer *b, struct tg_tensor *t, uint8_t v, size_t o, size_t n) { (void)b; memset((char *)t->data + o, v, n); }
static inline void test_buf_clear(tg_buffer *b, uint8_t v) { memset(b->context, v, b->size); }

static inline tg_buffer *test_buft_alloc(tg_buffer_type *b, size_t size) {
    struct test_buft *tb = test_buft_of(b);
    if (tb->fail_skip > 0) {
        tb->fail_skip--;
    } else if (tb->fail_allocs > 0) {
        tb->fail_allocs--;
        tg_fail(TG_ERR_ALLOC, "test buffer type '%s' refuses %zu bytes (failure on demand)", tb->name, size);
        return NULL;
    }
    void *mem = NULL;
    size_t align = tb->alignment < sizeof(void *) ? sizeof(void *) : tb->alignment;
    if (posix_memalign(&mem, align, size ? size : 1) != 0) {
        tg_fail(TG_ERR_ALLOC, "test buffer type '%s': out of host memory for %zu bytes", tb->name, size);
        return NULL;
    }
    struct tg_buffer_iface iface = {.free_buffer = test_buf_free, .get_base = test_buf_base, .set_tensor = test_buf_set,
                                    .get_tensor = test_buf_get, .memset_tensor = test_buf_memset, .clear = test_buf_clear};
    tg_buffer *buf = tg_buffer_init(b, iface, mem, size);
    if (!buf) free(mem);
    else tb->n_allocs++;
    return buf;
}

static inline void test_buft_init(struct test_buft *tb, const char *name, size_t alignment, size_t max_size) {
    memset(tb, 0, sizeof *tb);
    tb->buft.iface = (struct tg_buffer_type_iface){.get_name = test_buft_name, .alloc_buffer = test_buft_alloc,
                                                   .get_alignment = test_buft_align, .get_max_size = test_buft_max,
                                                   .get_alloc_size = test_buft_alloc_size, .is_host = test_buft_is_host};
    tb->alignment = alignment;
    tb->max_size = max_size;
    tb->padded_op = TG_OP_COUNT;
    snprintf(tb->name, sizeof tb->name, "%s", name);
}

/* Byte ranges of two bound tensors intersect (sizes are tg_nbytes). */
static inline bool test_overlap(const struct tg_tensor *a, const struct tg_tensor *b) {
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    return a0 < b0 + tg_nbytes(b) && b0 < a0 + tg_nbytes(a);
}

/* Offset of a bound tensor inside its buffer. */
static inline size_t test_offset(const struct tg_tensor *t) {
    return (size_t)((const char *)t->data - (const char *)tg_buffer_get_base(t->buffer));
}

static inline struct tg_context *test_ctx(void) {
    return tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
}

static inline struct tg_tensor *test_f32(struct tg_context *ctx, const char *name, int64_t n, bool input) {
    struct tg_tensor *t = tg_new_tensor_1d(ctx, TG_TYPE_F32, n);
    tg_set_name(t, name);
    if (input) tg_set_input(t);
    return t;
}

static inline struct tg_tensor *test_named(struct tg_tensor *t, const char *name) {
    if (t) tg_set_name(t, name);
    return t;
}

#endif

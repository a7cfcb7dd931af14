/* Tensors and contexts.  A context is an arena of tensor metadata (entries are
 * chunk-allocated so tensor pointers stay stable) plus, when not in no_alloc
 * mode, a host data arena the tensors are carved from. */
#include "tg.h"
#include "tg-impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Metadata chunks grow geometrically: a context of a few tensors (a test, a fuzz
 * case) does not pay for zeroing the 90 KB a model-sized chunk takes. */
#define CTX_FIRST_CHUNK_ENTRIES 16
#define CTX_MAX_CHUNK_ENTRIES 256
#define CTX_DATA_ALIGN 64

struct ctx_entry {
    struct tg_tensor tensor; /* first member: a tensor pointer is an entry pointer */
    struct ctx_entry *next;
};

struct ctx_chunk {
    struct ctx_chunk *next;
    int used, capacity;
    struct ctx_entry entries[];
};

struct tg_context {
    bool no_alloc;
    size_t mem_size;
    size_t mem_used;
    uint8_t *mem;
    struct ctx_chunk *chunks; /* newest first */
    struct ctx_entry *first, *last;
    int n_tensors;
};

/* ---- tensor properties ------------------------------------------------------ */

size_t tg_row_size(enum tg_type type, int64_t ne0) {
    return tg_type_size(type) * (size_t)(ne0 / tg_blck_size(type));
}

size_t tg_nbytes(const struct tg_tensor *t) {
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (t->ne[i] <= 0) return 0;
    }
    size_t bytes;
    int64_t blck = tg_blck_size(t->type);
    if (blck == 1) {
        bytes = tg_type_size(t->type);
        for (int i = 0; i < TG_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        /* Blocks times the block's bytes, as the reader and tg_new_tensor_raw size
         * it: ne0 * nb0 first could wrap where the size itself fits.  ne0 is a
         * multiple of the block size (tg_new_tensor_raw refuses others), so the
         * result is the same as ggml's ne0 * nb0 / blck whenever that does not wrap. */
        bytes = (size_t)(t->ne[0] / blck) * t->nb[0];
        for (int i = 1; i < TG_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return bytes;
}

int64_t tg_nelements(const struct tg_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t tg_nrows(const struct tg_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* ggml_is_contiguous: a single-element row (ne0 = 1, a transposed column)
 * has no stride of its own, so its nb0 is not looked at.  ggml skips nb0 for
 * any one-block row; for the block types that row's nb0 still counts in the
 * byte size (tg_nbytes, as ggml_nbytes), so such a tensor is not packed and
 * stays non-contiguous here. */
bool tg_is_contiguous(const struct tg_tensor *t) {
    size_t expect = tg_type_size(t->type);
    if (t->nb[0] != expect && t->ne[0] != 1) return false;
    expect = tg_row_size(t->type, t->ne[0]);
    for (int i = 1; i < TG_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return false;
        expect *= (size_t)t->ne[i];
    }
    return true;
}

bool tg_is_permuted(const struct tg_tensor *t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool tg_is_view(const struct tg_tensor *t) { return t->view_src != NULL; }

bool tg_are_same_shape(const struct tg_tensor *a, const struct tg_tensor *b) {
    return memcmp(a->ne, b->ne, sizeof a->ne) == 0;
}

bool tg_are_same_layout(const struct tg_tensor *a, const struct tg_tensor *b) {
    return a->type == b->type && tg_are_same_shape(a, b) && memcmp(a->nb, b->nb, sizeof a->nb) == 0;
}

bool tg_can_repeat(const struct tg_tensor *b, const struct tg_tensor *a) {
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (b->ne[i] <= 0 || a->ne[i] % b->ne[i] != 0) return false;
    }
    return true;
}

void tg_set_name(struct tg_tensor *t, const char *name) {
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

void tg_name_join(struct tg_tensor *t, const char *first, ...) {
    size_t len = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *part = first; part; part = va_arg(ap, const char *)) {
        while (*part && len + 1 < sizeof t->name) t->name[len++] = *part++;
    }
    va_end(ap);
    t->name[len] = '\0';
}

const char *tg_int_text(char buf[12], int value) {
    char *p = buf + 11;
    unsigned v = value < 0 ? 0u - (unsigned)value : (unsigned)value;
    *p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    if (value < 0) *--p = '-';
    return p;
}

void tg_format_name(struct tg_tensor *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

void tg_set_input(struct tg_tensor *t) { t->flags |= TG_FLAG_INPUT; }
void tg_set_output(struct tg_tensor *t) { t->flags |= TG_FLAG_OUTPUT; }
void tg_set_param(struct tg_tensor *t) { t->flags |= TG_FLAG_PARAM; }

int32_t tg_get_op_param_i32(const struct tg_tensor *t, int i) { return t->op_params[i]; }

float tg_get_op_param_f32(const struct tg_tensor *t, int i) {
    float f;
    memcpy(&f, &t->op_params[i], sizeof f);
    return f;
}

void tg_set_op_param_i32(struct tg_tensor *t, int i, int32_t v) { t->op_params[i] = v; }
void tg_set_op_param_f32(struct tg_tensor *t, int i, float v) { memcpy(&t->op_params[i], &v, sizeof v); }

static void *element_ptr(const struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (uint8_t *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

float tg_get_f32_nd(const struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const void *p = element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case TG_TYPE_F32: return *(const float *)p;
    case TG_TYPE_F16: return tg_fp16_to_fp32(*(const uint16_t *)p);
    case TG_TYPE_BF16: return tg_bf16_to_fp32(*(const uint16_t *)p);
    case TG_TYPE_I32: return (float)*(const int32_t *)p;
    case TG_TYPE_I64: return (float)*(const int64_t *)p;
    case TG_TYPE_I8: return (float)*(const int8_t *)p;
    default: return NAN;
    }
}

void tg_set_f32_nd(struct tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    void *p = element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
    case TG_TYPE_F32: *(float *)p = v; break;
    case TG_TYPE_F16: *(uint16_t *)p = tg_fp32_to_fp16(v); break;
    case TG_TYPE_BF16: *(uint16_t *)p = tg_fp32_to_bf16(v); break;
    case TG_TYPE_I32: *(int32_t *)p = (int32_t)v; break;
    case TG_TYPE_I64: *(int64_t *)p = (int64_t)v; break;
    case TG_TYPE_I8: *(int8_t *)p = (int8_t)v; break;
    default: break;
    }
}

/* ---- contexts --------------------------------------------------------------- */

struct tg_context *tg_context_new(struct tg_context_params params) {
    struct tg_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        tg_fail(TG_ERR_ALLOC, "out of host memory creating a context");
        return NULL;
    }
    ctx->no_alloc = params.no_alloc;
    if (!params.no_alloc && params.mem_size > 0) {
        size_t size = (params.mem_size + CTX_DATA_ALIGN - 1) / CTX_DATA_ALIGN * CTX_DATA_ALIGN;
        ctx->mem = aligned_alloc(CTX_DATA_ALIGN, size);
        if (!ctx->mem) {
            free(ctx);
            tg_fail(TG_ERR_ALLOC, "out of host memory: context data arena of %zu bytes", params.mem_size);
            return NULL;
        }
        ctx->mem_size = size;
    }
    return ctx;
}

void tg_context_free(struct tg_context *ctx) {
    if (!ctx) return;
    struct ctx_chunk *c = ctx->chunks;
    while (c) {
        struct ctx_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(ctx->mem);
    free(ctx);
}

bool tg_context_no_alloc(const struct tg_context *ctx) { return ctx->no_alloc; }
size_t tg_context_used_mem(const struct tg_context *ctx) { return ctx->mem_used; }
int tg_context_n_tensors(const struct tg_context *ctx) { return ctx->n_tensors; }

struct tg_tensor *tg_context_first_tensor(const struct tg_context *ctx) {
    return ctx->first ? &ctx->first->tensor : NULL;
}

struct tg_tensor *tg_context_next_tensor(const struct tg_context *ctx, const struct tg_tensor *t) {
    (void)ctx;
    const struct ctx_entry *e = (const struct ctx_entry *)t;
    return e->next ? &e->next->tensor : NULL;
}

struct tg_tensor *tg_context_get_tensor(const struct tg_context *ctx, const char *name) {
    for (struct ctx_entry *e = ctx->first; e; e = e->next) {
        if (strcmp(e->tensor.name, name) == 0) return &e->tensor;
    }
    return NULL;
}

static struct tg_tensor *context_new_entry(struct tg_context *ctx) {
    if (!ctx->chunks || ctx->chunks->used == ctx->chunks->capacity) {
        int capacity = CTX_FIRST_CHUNK_ENTRIES;
        if (ctx->chunks) capacity = ctx->chunks->capacity < CTX_MAX_CHUNK_ENTRIES ? 2 * ctx->chunks->capacity
                                                                                : CTX_MAX_CHUNK_ENTRIES;
        struct ctx_chunk *c = calloc(1, sizeof *c + (size_t)capacity * sizeof c->entries[0]);
        if (!c) {
            tg_fail(TG_ERR_ALLOC, "out of host memory for tensor metadata");
            return NULL;
        }
        c->capacity = capacity;
        c->next = ctx->chunks;
        ctx->chunks = c;
    }
    struct ctx_entry *e = &ctx->chunks->entries[ctx->chunks->used++];
    if (ctx->last) {
        ctx->last->next = e;
    } else {
        ctx->first = e;
    }
    ctx->last = e;
    ctx->n_tensors++;
    return &e->tensor;
}

void tg_context_discard(struct tg_context *ctx, struct tg_tensor *t) {
    struct ctx_entry *e = (struct ctx_entry *)t, *prev = NULL, *cur = ctx->first;
    while (cur && cur != e) {
        prev = cur;
        cur = cur->next;
    }
    if (!cur) return; /* not listed in ctx */
    if (prev) prev->next = e->next;
    else ctx->first = e->next;
    if (ctx->last == e) ctx->last = prev;
    ctx->n_tensors--;
    /* arena data is carved in creation order: only the last block goes back */
    if (t->data && !t->view_src && !ctx->no_alloc) {
        size_t aligned = (tg_nbytes(t) + CTX_DATA_ALIGN - 1) / CTX_DATA_ALIGN * CTX_DATA_ALIGN;
        if ((uint8_t *)t->data + aligned == ctx->mem + ctx->mem_used) ctx->mem_used -= aligned;
    }
    if (ctx->chunks->used > 0 && &ctx->chunks->entries[ctx->chunks->used - 1] == e) ctx->chunks->used--;
    memset(e, 0, sizeof *e); /* a reused slot starts zeroed, as a fresh chunk's */
}

/* Byte size of a tensor with these strides, false on size_t overflow. */
static bool checked_nbytes(enum tg_type type, const int64_t ne[4], const size_t nb[4], size_t *out) {
    size_t total;
    int64_t blck = tg_blck_size(type);
    int first = 0;
    if (blck == 1) {
        total = tg_type_size(type);
    } else {
        if (ne[0] % blck != 0) return false;
        if (__builtin_mul_overflow((size_t)(ne[0] / blck), nb[0], &total)) return false;
        first = 1;
    }
    for (int i = first; i < TG_MAX_DIMS; i++) {
        size_t term;
        if (__builtin_mul_overflow((size_t)(ne[i] - 1), nb[i], &term)) return false;
        if (__builtin_add_overflow(total, term, &total)) return false;
    }
    *out = total;
    return true;
}

static void default_strides(enum tg_type type, const int64_t ne[4], size_t nb[4]) {
    nb[0] = tg_type_size(type);
    nb[1] = tg_row_size(type, ne[0]);
    nb[2] = nb[1] * (size_t)ne[1];
    nb[3] = nb[2] * (size_t)ne[2];
}

/* Contiguous strides, false when the size overflows. */
static bool checked_default_strides(enum tg_type type, const int64_t ne[4], size_t nb[4]) {
    int64_t blck = tg_blck_size(type);
    if (ne[0] % blck != 0) return false;
    nb[0] = tg_type_size(type);
    if (__builtin_mul_overflow(nb[0], (size_t)(ne[0] / blck), &nb[1])) return false;
    for (int i = 2; i < TG_MAX_DIMS; i++) {
        if (__builtin_mul_overflow(nb[i - 1], (size_t)ne[i - 1], &nb[i])) return false;
    }
    size_t total;
    return !__builtin_mul_overflow(nb[3], (size_t)ne[3], &total);
}

struct tg_tensor *tg_new_tensor_raw(struct tg_context *ctx, enum tg_type type, const int64_t ne[4],
                                    const size_t nb[4]) {
    if (!ctx) return NULL;
    if ((unsigned)type >= TG_TYPE_COUNT) {
        tg_fail(TG_ERR_INVALID, "unknown tensor type %d", (int)type);
        return NULL;
    }
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (ne[i] <= 0) {
            tg_fail(TG_ERR_INVALID, "dimension %d is %lld: every dimension must be >= 1", i, (long long)ne[i]);
            return NULL;
        }
    }
    size_t strides[4];
    if (nb) {
        memcpy(strides, nb, sizeof strides);
    } else if (ne[0] % tg_blck_size(type) != 0) {
        tg_fail(TG_ERR_INVALID, "tensor of %s [%lld, %lld, %lld, %lld]: ne0 must be a multiple of the type's block "
                "size %lld", tg_type_name(type), (long long)ne[0], (long long)ne[1], (long long)ne[2],
                (long long)ne[3], (long long)tg_blck_size(type));
        return NULL;
    } else if (!checked_default_strides(type, ne, strides)) {
        tg_fail(TG_ERR_INVALID, "tensor of %s [%lld, %lld, %lld, %lld] is too large (size overflows size_t)",
                tg_type_name(type), (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
        return NULL;
    }
    size_t bytes;
    if (!checked_nbytes(type, ne, strides, &bytes)) {
        tg_fail(TG_ERR_INVALID, "tensor of %s [%lld, %lld, %lld, %lld] has an invalid size (overflow, or ne0 "
                "not a multiple of the block size %lld)", tg_type_name(type), (long long)ne[0],
                (long long)ne[1], (long long)ne[2], (long long)ne[3], (long long)tg_blck_size(type));
        return NULL;
    }
    struct tg_tensor *t = context_new_entry(ctx);
    if (!t) return NULL;
    t->type = type;
    memcpy(t->ne, ne, sizeof t->ne);
    memcpy(t->nb, strides, sizeof t->nb);
    return t;
}

/* Carve data for a fresh tensor from the context arena (not in no_alloc mode). */
static bool context_alloc_data(struct tg_context *ctx, struct tg_tensor *t) {
    if (ctx->no_alloc) return true;
    size_t size = tg_nbytes(t);
    size_t aligned = (size + CTX_DATA_ALIGN - 1) / CTX_DATA_ALIGN * CTX_DATA_ALIGN;
    if (aligned > ctx->mem_size - ctx->mem_used) {
        tg_fail(TG_ERR_ALLOC, "context data arena full: tensor '%s' needs %zu bytes, %zu of %zu left "
                "(create the context with a larger mem_size, or use no_alloc and an allocator)",
                t->name, size, ctx->mem_size - ctx->mem_used, ctx->mem_size);
        return false;
    }
    t->data = ctx->mem + ctx->mem_used;
    ctx->mem_used += aligned;
    return true;
}

struct tg_tensor *tg_new_tensor(struct tg_context *ctx, enum tg_type type, int n_dims, const int64_t *ne) {
    if (!ctx) return NULL;
    if (n_dims < 1 || n_dims > TG_MAX_DIMS) {
        tg_fail(TG_ERR_INVALID, "tensor with %d dimensions: 1 to %d allowed", n_dims, TG_MAX_DIMS);
        return NULL;
    }
    int64_t full[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) full[i] = ne[i];
    struct tg_tensor *t = tg_new_tensor_raw(ctx, type, full, NULL);
    if (t && !context_alloc_data(ctx, t)) {
        tg_context_discard(ctx, t);
        return NULL;
    }
    return t;
}

struct tg_tensor *tg_new_tensor_1d(struct tg_context *ctx, enum tg_type type, int64_t ne0) {
    return tg_new_tensor(ctx, type, 1, &ne0);
}

struct tg_tensor *tg_new_tensor_2d(struct tg_context *ctx, enum tg_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return tg_new_tensor(ctx, type, 2, ne);
}

struct tg_tensor *tg_new_tensor_3d(struct tg_context *ctx, enum tg_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return tg_new_tensor(ctx, type, 3, ne);
}

struct tg_tensor *tg_new_tensor_4d(struct tg_context *ctx, enum tg_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tg_new_tensor(ctx, type, 4, ne);
}

struct tg_tensor *tg_dup_tensor(struct tg_context *ctx, const struct tg_tensor *src) {
    if (!src) return NULL;
    return tg_new_tensor(ctx, src->type, 4, src->ne);
}

struct tg_tensor *tg_new_view_internal(struct tg_context *ctx, struct tg_tensor *a, enum tg_type type,
                                       const int64_t ne[4], const size_t nb[4], size_t offset) {
    struct tg_tensor *root = a;
    if (root->view_src) {
        if (offset > SIZE_MAX - root->view_offs) {
            tg_fail(TG_ERR_INVALID, "view of view '%s' at offset %zu: with its own offset %zu it passes SIZE_MAX",
                    root->name, offset, root->view_offs);
            return NULL;
        }
        offset += root->view_offs;
        root = root->view_src;
    }
    size_t strides[4];
    if (nb) {
        memcpy(strides, nb, sizeof strides);
    } else {
        default_strides(type, ne, strides);
    }
    struct tg_tensor *t = tg_new_tensor_raw(ctx, type, ne, strides);
    if (!t) return NULL;
    size_t bytes = tg_nbytes(t);
    if (offset > tg_nbytes(root) || bytes > tg_nbytes(root) - offset) {
        tg_fail(TG_ERR_INVALID, "view of '%s' at offset %zu with %zu bytes lies outside its %zu bytes",
                root->name, offset, bytes, tg_nbytes(root));
        tg_context_discard(ctx, t);
        return NULL;
    }
    t->view_src = root;
    t->view_offs = offset;
    if (root->data) {
        t->data = (uint8_t *)root->data + offset;
        t->buffer = root->buffer;
        t->bind_generation = root->bind_generation;
    }
    return t;
}

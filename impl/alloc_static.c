/* Static allocation: a linear allocator inside one buffer, and allocation of
 * every tensor of a context (weights, inputs) into buffers of one type. */
#include "tg-alloc.h"
#include "tg-size.h" /* sizes past SIZE_MAX fail at the buffer type, with its message */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct tg_tallocr tg_tallocr_new(tg_buffer *buffer) {
    struct tg_tallocr talloc = {buffer, NULL, 1, 0};
    if (!buffer) return talloc;
    talloc.base = tg_buffer_get_base(buffer);
    talloc.alignment = tg_buffer_get_alignment(buffer);
    if (talloc.alignment == 0) talloc.alignment = 1;
    /* Start at the first aligned address of the buffer, not at its base. */
    size_t misalign = (uintptr_t)talloc.base % talloc.alignment;
    talloc.offset = misalign ? talloc.alignment - misalign : 0;
    return talloc;
}

enum tg_status tg_tallocr_alloc(struct tg_tallocr *talloc, struct tg_tensor *t) {
    if (!talloc || !talloc->buffer || !t) return tg_fail(TG_ERR_INVALID, "tg_tallocr_alloc needs an allocator with a buffer and a tensor");
    if (t->view_src) {
        return tg_fail(TG_ERR_INVALID, "tensor '%s' is a view: bind it with tg_tensor_view_bind after its root '%s'",
                       t->name, t->view_src->name);
    }
    size_t size = round_up(tg_buffer_get_alloc_size(talloc->buffer, t), talloc->alignment);
    size_t capacity = tg_buffer_get_size(talloc->buffer);
    if (talloc->offset > capacity || size > capacity - talloc->offset) {
        return tg_fail(TG_ERR_ALLOC, "tensor '%s' needs %zu bytes but buffer '%s' has %zu of %zu left: allocate a "
                       "larger buffer (tg_alloc_ctx_tensors sizes it for you)", t->name, size,
                       tg_buft_name(tg_buffer_get_type(talloc->buffer)),
                       talloc->offset > capacity ? 0 : capacity - talloc->offset, capacity);
    }
    enum tg_status st = tg_tensor_bind(t, talloc->buffer, (uint8_t *)talloc->base + talloc->offset);
    if (st == TG_OK) talloc->offset += size;
    return st;
}

/* ---- every tensor of a context --------------------------------------------------- */

static bool needs_memory(const struct tg_tensor *t) { return !t->view_src && !t->data && !t->buffer; }

static void unbind_parts(struct tg_context *ctx, tg_buffer **parts, int n_parts) {
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t; t = tg_context_next_tensor(ctx, t)) {
        for (int i = 0; i < n_parts; i++) {
            if (t->buffer == parts[i]) {
                t->buffer = NULL;
                t->data = NULL;
            }
        }
    }
    for (int i = 0; i < n_parts; i++) tg_buffer_free(parts[i]);
}

tg_buffer *tg_alloc_ctx_tensors(struct tg_context *ctx, tg_buffer_type *buft, enum tg_status *status) {
    enum tg_status local_status;
    if (!status) status = &local_status;
    *status = TG_OK;
    if (!ctx || !buft) {
        *status = tg_fail(TG_ERR_INVALID, "tg_alloc_ctx_tensors needs a context and a buffer type");
        return NULL;
    }
    size_t alignment = tg_buft_get_alignment(buft);
    size_t max_size = tg_buft_get_max_size(buft);

    /* First pass: how many buffers, cut where the next tensor would pass max_size. */
    int n_parts = 0, n_needing = 0;
    size_t cur = 0;
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t; t = tg_context_next_tensor(ctx, t)) {
        if (!needs_memory(t)) continue;
        size_t size = round_up(tg_buft_get_alloc_size(buft, t), alignment);
        if (n_needing == 0 || (cur > 0 && sat_add(cur, size) > max_size)) {
            n_parts++;
            cur = 0;
        }
        cur = sat_add(cur, size);
        n_needing++;
    }
    if (n_needing == 0) return NULL;

    tg_buffer **parts = calloc((size_t)n_parts, sizeof *parts);
    if (!parts) {
        *status = tg_fail(TG_ERR_ALLOC, "out of host memory allocating context tensors");
        return NULL;
    }
    /* Second pass: the same cut, now allocating each buffer and binding its tensors. */
    int part = -1;
    struct tg_tallocr talloc = {0};
    cur = 0;
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t && *status == TG_OK; t = tg_context_next_tensor(ctx, t)) {
        if (!needs_memory(t)) continue;
        size_t size = round_up(tg_buft_get_alloc_size(buft, t), alignment);
        if (part < 0 || (cur > 0 && sat_add(cur, size) > max_size)) {
            /* Size this part by summing until the next cut. */
            size_t part_size = 0;
            for (struct tg_tensor *u = t; u; u = tg_context_next_tensor(ctx, u)) {
                if (!needs_memory(u)) continue;
                size_t s = round_up(tg_buft_get_alloc_size(buft, u), alignment);
                if (part_size > 0 && sat_add(part_size, s) > max_size) break;
                part_size = sat_add(part_size, s);
            }
            part++;
            parts[part] = tg_buft_alloc_buffer(buft, part_size); /* buffer types return aligned bases */
            if (!parts[part]) {
                char cause[256]; /* the message is rewritten below: keep the backend's reason */
                snprintf(cause, sizeof cause, "%s", tg_last_error());
                *status = tg_fail(TG_ERR_ALLOC, "tensor '%s': allocating a buffer of %zu bytes of type '%s' failed: %s",
                                  t->name, part_size, tg_buft_name(buft), cause);
                break;
            }
            talloc = tg_tallocr_new(parts[part]);
            cur = 0;
        }
        *status = tg_tallocr_alloc(&talloc, t);
        cur = sat_add(cur, size);
    }
    /* Views last: every root that needed memory has it now. */
    for (struct tg_tensor *t = tg_context_first_tensor(ctx); t && *status == TG_OK; t = tg_context_next_tensor(ctx, t)) {
        if (t->view_src && !t->buffer && t->view_src->data) *status = tg_tensor_view_bind(t);
    }
    if (*status != TG_OK) {
        unbind_parts(ctx, parts, part + 1);
        free(parts);
        return NULL;
    }
    tg_buffer *result = parts[0];
    if (n_parts > 1) {
        result = tg_multi_buffer_new(parts, n_parts);
        if (!result) {
            *status = TG_ERR_ALLOC;
            unbind_parts(ctx, parts, n_parts);
        }
    }
    free(parts);
    return result;
}

tg_buffer *tg_alloc_ctx_tensors_for_backend(struct tg_context *ctx, tg_backend *backend, enum tg_status *status) {
    if (!backend) {
        if (status) *status = tg_fail(TG_ERR_INVALID, "tg_alloc_ctx_tensors_for_backend needs a backend");
        return NULL;
    }
    return tg_alloc_ctx_tensors(ctx, tg_backend_get_default_buffer_type(backend), status);
}

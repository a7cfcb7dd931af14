/* Static allocation: the linear allocator and tg_alloc_ctx_tensors (buffer
 * cuts at the max size, oversize tensors, views, failure, nothing to do). */
#include "test_alloc_buft.h"
#include "tg_test.h"

static void test_tallocr(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *a = test_f32(ctx, "a", 4, false);  /* 16 -> 32 */
    struct tg_tensor *b = test_f32(ctx, "b", 10, false); /* 40 -> 64 */
    struct tg_tensor *c = test_f32(ctx, "c", 16, false); /* 64: does not fit */
    tg_buffer *buf = tg_buft_alloc_buffer(&tb.buft, 128);
    struct tg_tallocr ta = tg_tallocr_new(buf);
    CHECK_OK(tg_tallocr_alloc(&ta, a));
    CHECK_OK(tg_tallocr_alloc(&ta, b));
    CHECK(test_offset(a) == 0 && test_offset(b) == 32 && ta.offset == 96);
    CHECK_STATUS(tg_tallocr_alloc(&ta, c), TG_ERR_ALLOC);
    CHECK_ERR_HAS("'c'");
    CHECK(c->data == NULL && ta.offset == 96);
    tg_buffer_free(buf);
    tg_context_free(ctx);
}

/* A buffer whose base is not aligned: the first tensor starts at its first
 * aligned address, not at the base. */
static void *shifted_base(tg_buffer *b) { return (char *)b->context + 8; }

static void test_tallocr_misaligned_base(void) {
    struct test_buft tb;
    test_buft_init(&tb, "host32", 32, 0);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *a = test_f32(ctx, "a", 4, false);
    tg_buffer *buf = tg_buft_alloc_buffer(&tb.buft, 128);
    if (buf) buf->iface.get_base = shifted_base; /* base at 8 of a 32-aligned block */
    struct tg_tallocr ta = tg_tallocr_new(buf);
    CHECK(ta.offset == 24);
    CHECK_OK(tg_tallocr_alloc(&ta, a));
    CHECK((uintptr_t)a->data % 32 == 0 && ta.offset == 56);
    tg_buffer_free(buf);
    tg_context_free(ctx);
}

static void test_ctx_tensors_cut_at_max_size(void) {
    struct test_buft tb;
    test_buft_init(&tb, "max256", 32, 256);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *t0 = test_f32(ctx, "t0", 25, false);     /* 100 -> 128 */
    struct tg_tensor *t1 = test_f32(ctx, "t1", 25, false);     /* 128: fills part 0 */
    struct tg_tensor *t2 = test_f32(ctx, "t2", 25, false);     /* part 1 */
    struct tg_tensor *big = test_f32(ctx, "big", 250, false);  /* 1000: part 2 of its own */
    struct tg_tensor *t3 = test_f32(ctx, "t3", 8, false);      /* part 3 */
    struct tg_tensor *v = tg_view_1d(ctx, big, 10, 40);
    enum tg_status st = TG_ERR_INVALID;
    tg_buffer *buf = tg_alloc_ctx_tensors(ctx, &tb.buft, &st);
    CHECK(buf && st == TG_OK && tg_buffer_is_multi(buf));
    CHECK(t0->buffer == t1->buffer && t1->buffer != t2->buffer && big->buffer != t2->buffer &&
          t3->buffer != big->buffer);
    CHECK(test_offset(t0) == 0 && test_offset(t1) == 128 && test_offset(big) == 0 && test_offset(t3) == 0);
    CHECK(tg_buffer_get_size(t0->buffer) == 256 && tg_buffer_get_size(big->buffer) == 1024);
    CHECK(tb.n_allocs == 4 && tg_buffer_get_size(buf) == 256 + 128 + 1024 + 32);
    CHECK(v->data == (char *)big->data + 40 && v->buffer == big->buffer);
    float vals[4] = {1, 2, 3, 4}, back[4] = {0};
    CHECK_OK(tg_tensor_set(t2, vals, 0, sizeof vals));
    CHECK_OK(tg_tensor_get(t2, back, 0, sizeof back));
    CHECK(back[3] == 4);
    /* everything has memory now: a second call has nothing to do */
    tg_buffer *again = tg_alloc_ctx_tensors(ctx, &tb.buft, &st);
    CHECK(again == NULL && st == TG_OK);
    tg_buffer_free(buf);
    tg_context_free(ctx);
}

static void test_ctx_tensors_failure(void) {
    struct test_buft tb;
    test_buft_init(&tb, "max64", 32, 64);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *a = test_f32(ctx, "a", 16, false);
    struct tg_tensor *b = test_f32(ctx, "b", 16, false);
    enum tg_status st = TG_OK;
    tb.fail_skip = 1; /* the second part fails after the first succeeded */
    tb.fail_allocs = 1;
    tg_buffer *buf = tg_alloc_ctx_tensors(ctx, &tb.buft, &st);
    CHECK(buf == NULL && st == TG_ERR_ALLOC);
    CHECK_ERR_HAS("failure on demand");
    CHECK(tb.n_allocs == 1 && a->data == NULL && a->buffer == NULL && b->data == NULL); /* part 0 released */
    buf = tg_alloc_ctx_tensors(ctx, &tb.buft, &st);
    CHECK(buf && st == TG_OK && a->buffer && b->buffer && a->buffer != b->buffer);
    tg_buffer_free(buf);
    tg_context_free(ctx);
}

/* The linear allocator refuses a view; tg_alloc_ctx_tensors leaves tensors
 * that have memory alone, joins two parts into one multi-buffer, and releases
 * every part, the last included, when a view cannot be bound. */
static void test_ctx_tensors_edges(void) {
    struct test_buft tb;
    test_buft_init(&tb, "max128", 32, 128);
    struct tg_context *ctx = test_ctx();
    struct tg_tensor *r = test_f32(ctx, "r", 8, false);
    struct tg_tensor *v = tg_view_1d(ctx, r, 4, 0);
    tg_buffer *buf = tg_buft_alloc_buffer(&tb.buft, 128);
    struct tg_tallocr ta = tg_tallocr_new(buf);
    CHECK_STATUS(tg_tallocr_alloc(&ta, v), TG_ERR_INVALID);
    CHECK_ERR_HAS("is a view");
    CHECK(ta.offset == 0 && v->data == NULL && v->buffer == NULL);
    ta.offset = 128; /* full: still refused as a view, not for want of room */
    CHECK_STATUS(tg_tallocr_alloc(&ta, v), TG_ERR_INVALID);
    CHECK_ERR_HAS("bind it with tg_tensor_view_bind after its root 'r'");
    tg_buffer_free(buf);

    v->view_offs = 100; /* past r's 32 bytes: its binding fails after r's */
    enum tg_status st = TG_OK;
    buf = tg_alloc_ctx_tensors(ctx, &tb.buft, &st);
    CHECK(buf == NULL && st == TG_ERR_INVALID);
    CHECK(r->buffer == NULL && r->data == NULL && v->buffer == NULL && v->data == NULL);
    v->view_offs = 0;

    struct tg_tensor *s = test_f32(ctx, "s", 25, false); /* 100 -> 128: a part of its own */
    buf = tg_alloc_ctx_tensors(ctx, &tb.buft, &st);
    CHECK(buf && st == TG_OK && tg_buffer_is_multi(buf) && tg_buffer_get_size(buf) == 32 + 128);
    CHECK(r->buffer && s->buffer && r->buffer != s->buffer && v->data == r->data);
    tg_buffer_free(buf);
    tg_context_free(ctx);

    struct tg_context *host = tg_context_new((struct tg_context_params){.mem_size = 1024, .no_alloc = false});
    struct tg_tensor *h = host ? test_f32(host, "h", 8, false) : NULL;
    CHECK(h && h->data);
    if (h) {
        void *data = h->data;
        CHECK(tg_alloc_ctx_tensors(host, &tb.buft, &st) == NULL && st == TG_OK);
        CHECK(h->data == data && h->buffer == NULL);
    }
    tg_context_free(host);
}

int main(void) {
    test_tallocr();
    test_tallocr_misaligned_base();
    test_ctx_tensors_edges();
    test_ctx_tensors_cut_at_max_size();
    test_ctx_tensors_failure();
    return tg_test_finish();
}

/* tg_file_bind_external: pre-allocated tensors (buf=weights / buf=data) get
 * memory of their backend's buffer type, aligned, without overlap, with the
 * usage that steers the scheduler; views follow their roots; buffers split at
 * the type's max size; reserve_only keeps the backend's buffer type but backs
 * it with reserved address space whose data calls are refused. */
#include "tg-io.h"
#include "tg_test.h"

#include <stdint.h>

/* A host test backend with a chosen alignment and max buffer size. */
struct test_buft_config {
    size_t alignment;
    size_t max_size;
    size_t fail_above; /* nonzero: a buffer larger than this cannot be had */
};

static void host_free(tg_buffer *buf) { free(buf->context); }
static void *host_base(tg_buffer *buf) { return buf->context; }
static void host_memset(tg_buffer *buf, struct tg_tensor *t, uint8_t v, size_t off, size_t n) {
    (void)buf;
    memset((uint8_t *)t->data + off, v, n);
}
static void host_set(tg_buffer *buf, struct tg_tensor *t, const void *d, size_t off, size_t n) {
    (void)buf;
    memcpy((uint8_t *)t->data + off, d, n);
}
static void host_get(tg_buffer *buf, const struct tg_tensor *t, void *d, size_t off, size_t n) {
    (void)buf;
    memcpy(d, (const uint8_t *)t->data + off, n);
}
static void host_clear(tg_buffer *buf, uint8_t v) { memset(buf->context, v, buf->size); }

static const char *test_buft_name(tg_buffer_type *buft) {
    (void)buft;
    return "test-host";
}
static tg_buffer *test_alloc(tg_buffer_type *buft, size_t size) {
    struct test_buft_config *cfg = buft->context;
    if (cfg->fail_above && size > cfg->fail_above) {
        tg_fail(TG_ERR_ALLOC, "test-host: no buffer of %zu bytes", size);
        return NULL;
    }
    void *mem = aligned_alloc(cfg->alignment, (size + cfg->alignment - 1) / cfg->alignment * cfg->alignment);
    if (!mem) return NULL;
    struct tg_buffer_iface iface = {.free_buffer = host_free, .get_base = host_base, .memset_tensor = host_memset,
                                    .set_tensor = host_set, .get_tensor = host_get, .clear = host_clear};
    tg_buffer *buf = tg_buffer_init(buft, iface, mem, size);
    if (!buf) free(mem);
    return buf;
}
static size_t test_alignment(tg_buffer_type *buft) { return ((struct test_buft_config *)buft->context)->alignment; }
static size_t test_max_size(tg_buffer_type *buft) { return ((struct test_buft_config *)buft->context)->max_size; }
static bool test_is_host(tg_buffer_type *buft) {
    (void)buft;
    return true;
}

struct test_backend {
    tg_backend backend;
    tg_buffer_type buft;
    struct test_buft_config cfg;
};

static const char *test_backend_name(tg_backend *b) {
    (void)b;
    return "test";
}
static tg_buffer_type *test_default_buft(tg_backend *b) { return &((struct test_backend *)b->context)->buft; }

static void test_backend_init(struct test_backend *tb, size_t alignment, size_t max_size) {
    memset(tb, 0, sizeof *tb);
    tb->cfg.alignment = alignment;
    tb->cfg.max_size = max_size;
    tb->buft.iface = (struct tg_buffer_type_iface){.get_name = test_buft_name, .alloc_buffer = test_alloc,
                                                   .get_alignment = test_alignment, .get_max_size = test_max_size,
                                                   .is_host = test_is_host};
    tb->buft.context = &tb->cfg;
    tb->buft.owner = &tb->backend;
    tb->backend.iface.get_name = test_backend_name;
    tb->backend.iface.get_default_buffer_type = test_default_buft;
    tb->backend.context = tb;
}

/* Every root with a placement is bound inside its buffer, aligned, with the
 * right usage and type; no two overlap; views follow their roots; the rest is unbound. */
static void check_binding(const struct tg_file *f, tg_buffer_type *const *bufts, size_t alignment) {
    bool all_ok = true;
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *r = &f->tensors[i];
        const struct tg_tensor *t = r->tensor;
        if (t->view_src) {
            if (t->view_src->buffer) {
                all_ok &= t->buffer == t->view_src->buffer && t->data == (uint8_t *)t->view_src->data + t->view_offs;
            } else {
                all_ok &= t->buffer == NULL;
            }
            continue;
        }
        if (r->placement == TG_PLACE_NONE) {
            all_ok &= t->buffer == NULL && t->data == NULL;
            continue;
        }
        bool ok = t->buffer && t->data && (uintptr_t)t->data % alignment == 0;
        ok = ok && tg_buffer_get_type(t->buffer) == bufts[r->placement_backend];
        ok = ok && tg_buffer_get_usage(t->buffer) ==
                       (r->placement == TG_PLACE_WEIGHTS ? TG_BUFFER_USAGE_WEIGHTS : TG_BUFFER_USAGE_ANY);
        uint8_t *base = ok ? tg_buffer_get_base(t->buffer) : NULL;
        ok = ok && (uint8_t *)t->data >= base &&
             (uint8_t *)t->data + tg_nbytes(t) <= base + tg_buffer_get_size(t->buffer);
        CHECK_MSG(ok, "tensor '%s' is not bound as its placement says", t->name);
        all_ok &= ok;
        for (int j = 0; j < i && ok; j++) {
            const struct tg_tensor *u = f->tensors[j].tensor;
            if (u->view_src || !u->data) continue;
            bool apart = (uint8_t *)t->data >= (uint8_t *)u->data + tg_nbytes(u) ||
                         (uint8_t *)u->data >= (uint8_t *)t->data + tg_nbytes(t);
            CHECK_MSG(apart, "'%s' overlaps '%s'", t->name, u->name);
        }
    }
    CHECK(all_ok);
}

static int reserved_logs;
static void count_reserved_logs(const char *text, void *user) {
    (void)user;
    reserved_logs += strstr(text, "reserved address space") != NULL;
}

static int count_placement(const struct tg_file *f, enum tg_placement p) {
    int n = 0;
    for (int i = 0; i < f->n_tensors; i++) n += f->tensors[i].placement == p;
    return n;
}

int main(void) {
    struct test_backend host;
    test_backend_init(&host, 256, SIZE_MAX);
    tg_backend *one[1] = {&host.backend};
    tg_buffer_type *host_types[1] = {&host.buft};

    /* The tiny graph: one weights buffer, one data buffer (KV cache). */
    struct tg_file *f = tg_file_read("corpus/graphs/llama-tiny-prefill32.tg");
    CHECK(f != NULL);
    if (f) {
        CHECK(count_placement(f, TG_PLACE_WEIGHTS) > 0 && count_placement(f, TG_PLACE_DATA) == 4);
        CHECK_OK(tg_file_bind_external(f, one, 1, false));
        CHECK(f->n_buffers == 2);
        check_binding(f, host_types, 256);
        struct tg_tensor *w = tg_context_get_tensor(f->ctx, "blk.0.attn_norm.weight");
        float in[256], out[256];
        for (int i = 0; i < 256; i++) in[i] = (float)i * 0.5f;
        CHECK_OK(tg_tensor_set(w, in, 0, sizeof in));
        CHECK_OK(tg_tensor_get(w, out, 0, sizeof out));
        CHECK(memcmp(in, out, sizeof in) == 0);
        CHECK_STATUS(tg_file_bind_external(f, one, 1, false), TG_ERR_INVALID);
        CHECK_ERR_HAS("already bound");
    }
    tg_file_free(f);

    /* A small max size splits the weights into several buffers; a tensor larger
     * than the max gets one of its own. */
    struct test_backend small;
    test_backend_init(&small, 64, 300000);
    tg_backend *small_one[1] = {&small.backend};
    tg_buffer_type *small_types[1] = {&small.buft};
    f = tg_file_read("corpus/graphs/llama-tiny-prefill32.tg");
    if (f) {
        CHECK_OK(tg_file_bind_external(f, small_one, 1, false));
        CHECK_MSG(f->n_buffers > 4, "%d buffers", f->n_buffers);
        check_binding(f, small_types, 64);
        /* Only a tensor larger than the max makes a larger buffer, and then alone. */
        int oversized_buffers = 0, oversized_tensors = 0;
        for (int k = 0; k < f->n_buffers; k++) {
            if (tg_buffer_get_size(f->buffers[k]) <= 300000) continue;
            oversized_buffers++;
            int in_it = 0;
            for (int i = 0; i < f->n_tensors; i++) {
                in_it += f->tensors[i].tensor->buffer == f->buffers[k] && !f->tensors[i].tensor->view_src;
            }
            CHECK(in_it == 1);
        }
        for (int i = 0; i < f->n_tensors; i++) {
            oversized_tensors += f->tensors[i].placement != TG_PLACE_NONE && tg_nbytes(f->tensors[i].tensor) > 300000;
        }
        CHECK(oversized_tensors == 8 && oversized_buffers == oversized_tensors);
    }
    tg_file_free(f);

    /* The max size is inclusive: two weights that fill it exactly (384 bytes,
     * aligned to 512, then 384) share one buffer, the second at the alignment;
     * a smaller max splits them, the file's first tensor included. */
    static const char pair[] = "tgraph 1\nleaf 0 f32 96 1 1 1 none buf=weights name=w0\n"
                               "leaf 1 f32 96 1 1 1 none buf=weights name=w1\n";
    for (int fits = 0; fits < 2; fits++) {
        struct test_backend capped;
        test_backend_init(&capped, 256, fits ? 896 : 700);
        tg_backend *capped_one[1] = {&capped.backend};
        tg_buffer_type *capped_types[1] = {&capped.buft};
        f = tg_file_read_mem(pair, sizeof pair - 1, "pair.tg");
        CHECK(f != NULL);
        if (f) {
            CHECK_OK(tg_file_bind_external(f, capped_one, 1, false));
            CHECK_MSG(f->n_buffers == (fits ? 1 : 2), "max %d: %d buffers", fits ? 896 : 700, f->n_buffers);
            for (int k = 0; k < f->n_buffers; k++) CHECK(tg_buffer_get_size(f->buffers[k]) <= (fits ? 896u : 700u));
            check_binding(f, capped_types, 256);
        }
        tg_file_free(f);
    }

    /* Two backends: buf=weights@gpu0 goes to backends[0], the default to the last;
     * a NULL entry means the last backend. */
    static const char two[] = "tgraph 1\nbackends gpu0,cpu\n"
                              "leaf 0 f32 100 1 1 1 none buf=weights@gpu0 name=w_gpu\n"
                              "leaf 1 f32 100 1 1 1 none buf=weights name=w_cpu\n"
                              "leaf 2 f16 64 4 1 1 none buf=data@gpu0 name=cache\n"
                              "node 3 f16 64 2 1 1 view src=2 view=2:128 name=cache_view\n"
                              "node 4 f32 100 1 1 1 add src=0,1 name=sum\n";
    struct test_backend gpu;
    test_backend_init(&gpu, 512, SIZE_MAX);
    tg_backend *both[2] = {&gpu.backend, &host.backend};
    tg_buffer_type *both_types[2] = {&gpu.buft, &host.buft};
    f = tg_file_read_mem(two, sizeof two - 1, "two.tg");
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(tg_file_bind_external(f, both, 2, false));
        CHECK(f->n_buffers == 3);
        check_binding(f, both_types, 256);
        struct tg_tensor *view = f->tensors[3].tensor;
        CHECK(view->buffer == f->tensors[2].tensor->buffer);
        CHECK(view->data == (uint8_t *)f->tensors[2].tensor->data + 128);
        CHECK(f->tensors[4].tensor->data == NULL);
    }
    tg_file_free(f);
    f = tg_file_read_mem(two, sizeof two - 1, "two.tg");
    tg_backend *with_null[2] = {NULL, &host.backend};
    if (f) {
        CHECK_OK(tg_file_bind_external(f, with_null, 2, false));
        tg_buffer_type *host_twice[2] = {&host.buft, &host.buft};
        check_binding(f, host_twice, 256);
        CHECK_STATUS(tg_file_bind_external(NULL, one, 1, false), TG_ERR_INVALID);
    }
    tg_file_free(f);
    f = tg_file_read_mem(two, sizeof two - 1, "two.tg");
    if (f) {
        tg_backend *last_null[2] = {&gpu.backend, NULL};
        CHECK_STATUS(tg_file_bind_external(f, last_null, 2, false), TG_ERR_INVALID);
        CHECK_STATUS(tg_file_bind_external(f, NULL, 0, false), TG_ERR_INVALID);
        CHECK(f->n_buffers == 0 && f->tensors[0].tensor->buffer == NULL);
    }
    tg_file_free(f);

    /* A buffer that cannot be had after another was bound leaves the file as
     * it was: nothing bound, the first buffer freed, and a later bind works. */
    static const char partial[] = "tgraph 1\n"
                                  "leaf 0 f32 64 1 1 1 none buf=weights name=w\n"
                                  "node 1 f32 16 1 1 1 view src=0 view=0:64 name=w_tail\n"
                                  "leaf 2 f32 4096 1 1 1 none buf=data name=cache\n"
                                  "node 3 f32 16 1 1 1 add src=1,1 name=sum\n";
    f = tg_file_read_mem(partial, sizeof partial - 1, "partial.tg");
    CHECK(f != NULL);
    if (f) {
        host.cfg.fail_above = 1024;
        CHECK_STATUS(tg_file_bind_external(f, one, 1, false), TG_ERR_ALLOC);
        CHECK_ERR_HAS("cannot allocate 16384 bytes of data for backend 'cpu' (buffer type 'test-host'): "
                      "test-host: no buffer of 16384 bytes");
        CHECK(f->n_buffers == 0 && f->buffers == NULL);
        for (int i = 0; i < f->n_tensors; i++) {
            CHECK(f->tensors[i].tensor->buffer == NULL && f->tensors[i].tensor->data == NULL);
        }
        host.cfg.fail_above = 0;
        CHECK_OK(tg_file_bind_external(f, one, 1, false));
        CHECK(f->n_buffers == 2);
        check_binding(f, host_types, 256);
    }
    tg_file_free(f);

    /* reserve_only: 7B weights (about 3.8 GB) cost address space only; the buffers
     * keep the backend's type and usage; data calls are refused with a message. */
    f = tg_file_read("corpus/graphs/llama-7b-prefill512-flash.tg");
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(tg_file_bind_external(f, one, 1, true));
        check_binding(f, host_types, 256);
        size_t weights = 0, reserved = 0;
        for (int i = 0; i < f->n_tensors; i++) {
            if (f->tensors[i].placement == TG_PLACE_WEIGHTS) weights += tg_nbytes(f->tensors[i].tensor);
        }
        for (int k = 0; k < f->n_buffers; k++) {
            if (tg_buffer_get_usage(f->buffers[k]) == TG_BUFFER_USAGE_WEIGHTS) reserved += tg_buffer_get_size(f->buffers[k]);
            CHECK(tg_buffer_get_type(f->buffers[k]) == &host.buft);
        }
        CHECK_MSG(weights > ((size_t)3 << 30) && reserved >= weights, "weights %zu reserved %zu", weights, reserved);
        struct tg_tensor *w = tg_context_get_tensor(f->ctx, "output_norm.weight");
        float v[4] = {1, 2, 3, 4};
        tg_set_log(count_reserved_logs, NULL);
        tg_clear_error();
        /* the reserved buffer's copy hooks are void: they report through the message */
        enum tg_status st = tg_tensor_set(w, v, 0, sizeof v);
        (void)st;
        CHECK_ERR_HAS("reserved address space");
        CHECK_ERR_HAS("output_norm.weight");
        tg_clear_error();
        st = tg_tensor_get(w, v, 0, sizeof v);
        (void)st;
        CHECK_ERR_HAS("reserved address space");
        CHECK(v[0] == 0 && v[3] == 0);
        /* a copy into it is claimed and refused by the reserved buffer itself,
         * so no fallback copies into the reserved pages */
        struct tg_context *host_ctx = tg_context_new((struct tg_context_params){.mem_size = 1 << 16, .no_alloc = false});
        struct tg_tensor *src = host_ctx ? tg_new_tensor_1d(host_ctx, w->type, w->ne[0]) : NULL;
        CHECK(src != NULL);
        if (src) {
            tg_clear_error();
            st = tg_tensor_copy(src, w);
            (void)st;
            CHECK_ERR_HAS("copy into of tensor 'output_norm.weight'");
        }
        tg_context_free(host_ctx);
        CHECK(reserved_logs == 3);
        tg_set_log(NULL, NULL);
    }
    tg_file_free(f);
    return tg_test_finish();
}

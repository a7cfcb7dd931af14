/* Backend conformance (conformance.h, docs/backends.md). */
#include "conformance.h"

#include "op_grid.h"
#include "sched_compare.h"

#include "tg-cpu.h"
#include "tg-sim.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One part's tally; failures are printed as they are found (the first 20). */
struct part {
    const char *target, *name;
    int checks, failed;
};

static bool expect(struct part *p, bool cond, const char *fmt, ...) {
    p->checks++;
    if (cond) return true;
    if (++p->failed <= 20) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "conformance %s: %s: ", p->target, p->name);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    return false;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void fill_pattern(uint8_t *p, size_t n, uint8_t salt) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131u + salt * 17u + 1u);
}

/* ---- buffers ------------------------------------------------------------------------------ */

#define N_TENSORS 6

/* The bytes of the whole buffer (read through an i8 tensor over all of it)
 * equal shadow; names the first byte that differs and the tensor holding it. */
static bool buffer_matches(struct part *p, struct tg_tensor *whole, uint8_t *shadow, size_t total,
                           struct tg_tensor *const *ts, const size_t *offs, const char *after) {
    uint8_t *got = malloc(total);
    if (!expect(p, got != NULL, "out of host memory")) return false;
    bool ok = expect(p, tg_tensor_get(whole, got, 0, total) == TG_OK, "reading the whole buffer back after %s: %s",
                     after, tg_last_error());
    for (size_t i = 0; ok && i < total; i++) {
        if (got[i] == shadow[i]) continue;
        char where[80] = "padding between tensors";
        for (int k = 0; k < N_TENSORS; k++) {
            if (i >= offs[k] && i < offs[k] + tg_nbytes(ts[k]))
                snprintf(where, sizeof where, "byte %zu of '%s'", i - offs[k], ts[k]->name);
        }
        ok = expect(p, false, "after %s, byte %zu of the buffer (%s) is 0x%02x, want 0x%02x", after, i, where,
                    got[i], shadow[i]);
    }
    /* later steps judge only their own damage */
    if (!ok) memcpy(shadow, got, total);
    free(got);
    return ok;
}

static void check_buffers(struct part *p, tg_backend *be, tg_buffer_type *buft) {
    const char *name = tg_buft_name(buft);
    expect(p, name && *name, "the buffer type has no name");
    name = name ? name : "?";
    expect(p, tg_backend_supports_buft(be, buft), "supports_buft refuses the buffer type '%s'", name);
    expect(p, tg_backend_supports_buft(be, tg_backend_get_default_buffer_type(be)),
           "supports_buft refuses the backend's own default buffer type");
    const size_t align = tg_buft_get_alignment(buft);
    expect(p, align > 0 && (align & (align - 1)) == 0, "alignment %zu is not a power of two", align);
    if (align == 0 || (align & (align - 1))) return;
    expect(p, tg_buft_get_max_size(buft) > 0, "max size 0");
    tg_buffer *empty = tg_buft_alloc_buffer(buft, 0);
    expect(p, empty != NULL, "a buffer of 0 bytes is refused (size 0 is legal): %s", tg_last_error());
    tg_buffer_free(empty);

    /* tensors of several ranks and types, one 3-D quantized, bound one after another */
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *ts[N_TENSORS] = {
        tg_new_tensor_1d(ctx, TG_TYPE_F32, 100),       tg_new_tensor_3d(ctx, TG_TYPE_F16, 7, 3, 2),
        tg_new_tensor_3d(ctx, TG_TYPE_Q4_0, 64, 2, 3), tg_new_tensor_4d(ctx, TG_TYPE_I32, 5, 4, 3, 2),
        tg_new_tensor_2d(ctx, TG_TYPE_F32, 33, 5),     tg_new_tensor_1d(ctx, TG_TYPE_I8, 3),
    };
    size_t offs[N_TENSORS], total = 0;
    for (int k = 0; k < N_TENSORS; k++) {
        tg_format_name(ts[k], "t%d %s", k, tg_type_name(ts[k]->type));
        /* the hook itself: the library answers at least tg_nbytes whatever it says, so ask it directly */
        const size_t raw = buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, ts[k]) : tg_nbytes(ts[k]);
        expect(p, raw >= tg_nbytes(ts[k]),
               "get_alloc_size says %zu bytes for '%s' [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
               "] of %zu bytes (never fewer than tg_nbytes)",
               raw, ts[k]->name, ts[k]->ne[0], ts[k]->ne[1], ts[k]->ne[2], ts[k]->ne[3], tg_nbytes(ts[k]));
        total = round_up(total, align);
        offs[k] = total;
        total += tg_buft_get_alloc_size(buft, ts[k]);
    }
    total = round_up(total, align) + align;
    struct tg_tensor *view = tg_view_1d(ctx, ts[0], 12, 10 * sizeof(float)); /* floats 10..21 of t0 */
    struct tg_tensor *whole = tg_new_tensor_1d(ctx, TG_TYPE_I8, (int64_t)total);
    /* binding reserves a tensor's allocation size (a padded type's passes its bytes): room for whole's */
    tg_buffer *buf = tg_buft_alloc_buffer(buft, whole ? tg_buft_get_alloc_size(buft, whole) : total);
    uint8_t *shadow = calloc(1, total), *data = malloc(total);
    if (!expect(p, buf != NULL, "a buffer of %zu bytes: %s", total, tg_last_error()) || !shadow || !data) goto done;
    expect(p, tg_buffer_get_size(buf) >= total, "a buffer of %zu bytes says it has %zu", total,
           tg_buffer_get_size(buf));
    expect(p, tg_buffer_get_type(buf) == buft, "the buffer's type is not the type that made it");
    expect(p, tg_buffer_is_host(buf) == tg_buft_is_host(buft), "is_host: the type says %d, its buffer %d",
           tg_buft_is_host(buft), tg_buffer_is_host(buf));
    uint8_t *base = tg_buffer_get_base(buf);
    if (!expect(p, base != NULL, "get_base is NULL for a buffer of %zu bytes", total)) goto done;
    expect(p, (uintptr_t)base % align == 0, "the base %p is not aligned to the type's %zu", (void *)base, align);
    bool bound = true;
    for (int k = 0; k < N_TENSORS; k++) {
        /* binding runs the init_tensor hook when the buffer has one */
        bound &= expect(p, tg_tensor_bind(ts[k], buf, base + offs[k]) == TG_OK, "binding '%s' at offset %zu: %s",
                        ts[k]->name, offs[k], tg_last_error());
        expect(p, ts[k]->data == base + offs[k] && (uintptr_t)ts[k]->data % align == 0,
               "'%s' bound at %p, want %p (aligned to %zu)", ts[k]->name, ts[k]->data, (void *)(base + offs[k]), align);
    }
    bound &= expect(p, tg_tensor_view_bind(view) == TG_OK, "binding a view: %s", tg_last_error());
    bound &= expect(p, tg_tensor_bind(whole, buf, base) == TG_OK, "binding the whole buffer: %s", tg_last_error());
    if (!bound) goto done;

    tg_buffer_clear(buf, 0x11);
    memset(shadow, 0x11, total);
    if (!buffer_matches(p, whole, shadow, total, ts, offs, "clear(0x11)")) goto done;
    /* whole tensors, then ranges inside them: nothing outside a range may change */
    fill_pattern(data, tg_nbytes(ts[0]), 1);
    expect(p, tg_tensor_set(ts[0], data, 0, tg_nbytes(ts[0])) == TG_OK, "set: %s", tg_last_error());
    memcpy(shadow + offs[0], data, tg_nbytes(ts[0]));
    buffer_matches(p, whole, shadow, total, ts, offs, "set of all of t0");
    fill_pattern(data, 101, 2);
    expect(p, tg_tensor_set(ts[3], data, 13, 101) == TG_OK, "set: %s", tg_last_error());
    memcpy(shadow + offs[3] + 13, data, 101);
    buffer_matches(p, whole, shadow, total, ts, offs, "set of 101 bytes at offset 13 of t3");
    uint8_t back[101];
    expect(p, tg_tensor_get(ts[3], back, 13, 101) == TG_OK && memcmp(back, data, 101) == 0,
           "get of 101 bytes at offset 13 of t3 does not read what set wrote there");
    fill_pattern(data, 8, 3);
    expect(p, tg_tensor_set(view, data, 4, 8) == TG_OK, "set through a view: %s", tg_last_error());
    memcpy(shadow + offs[0] + view->view_offs + 4, data, 8);
    buffer_matches(p, whole, shadow, total, ts, offs, "set of 8 bytes at offset 4 of a view at byte 40 of t0");
    expect(p, tg_tensor_memset(ts[4], 0x5A, 7, 50) == TG_OK, "memset: %s", tg_last_error());
    memset(shadow + offs[4] + 7, 0x5A, 50);
    buffer_matches(p, whole, shadow, total, ts, offs, "memset of 50 bytes at offset 7 of t4");
    expect(p, tg_tensor_memset(ts[1], 0, 0, tg_nbytes(ts[1])) == TG_OK, "memset: %s", tg_last_error());
    memset(shadow + offs[1], 0, tg_nbytes(ts[1]));
    buffer_matches(p, whole, shadow, total, ts, offs, "memset of all of t1");
    fill_pattern(data, 3, 4);
    expect(p, tg_tensor_set(ts[5], data, 0, 3) == TG_OK, "set: %s", tg_last_error()); /* odd size, last tensor */
    memcpy(shadow + offs[5], data, 3);
    buffer_matches(p, whole, shadow, total, ts, offs, "set of all 3 bytes of t5");

    /* the backend's async set and get (or their synchronous fallback), ordered by synchronize */
    fill_pattern(data, tg_nbytes(ts[2]), 5);
    tg_backend_tensor_set_async(be, ts[2], data, 0, tg_nbytes(ts[2]));
    uint8_t got_async[64];
    tg_backend_tensor_get_async(be, ts[0], got_async, 16, sizeof got_async);
    tg_backend_synchronize(be);
    memcpy(shadow + offs[2], data, tg_nbytes(ts[2]));
    buffer_matches(p, whole, shadow, total, ts, offs, "async set of all of t2 and a synchronize");
    expect(p, memcmp(got_async, shadow + offs[0] + 16, sizeof got_async) == 0,
           "async get of 64 bytes at offset 16 of t0 does not read what is there");

    /* copies to and from the CPU (cpy_tensor_async, or the synchronous fallback) */
    tg_backend *cpu = tg_backend_cpu_new();
    struct tg_context *hctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *hin = tg_new_tensor_1d(hctx, TG_TYPE_F32, 100), *hout = tg_new_tensor_1d(hctx, TG_TYPE_F32, 100);
    enum tg_status st = TG_OK;
    tg_buffer *hbuf = cpu ? tg_alloc_ctx_tensors_for_backend(hctx, cpu, &st) : NULL;
    if (expect(p, hbuf != NULL, "CPU buffer: %s", tg_last_error())) {
        fill_pattern(data, tg_nbytes(hin), 6);
        expect(p, tg_tensor_set(hin, data, 0, tg_nbytes(hin)) == TG_OK, "set: %s", tg_last_error());
        expect(p, tg_backend_tensor_copy_async(cpu, be, hin, ts[0]) == TG_OK, "copy from the CPU: %s",
               tg_last_error());
        tg_backend_synchronize(be);
        memcpy(shadow + offs[0], data, tg_nbytes(hin));
        buffer_matches(p, whole, shadow, total, ts, offs, "a copy from the CPU into t0");
        expect(p, tg_backend_tensor_copy_async(be, cpu, ts[0], hout) == TG_OK, "copy to the CPU: %s",
               tg_last_error());
        tg_backend_synchronize(be);
        tg_backend_synchronize(cpu);
        expect(p, tg_tensor_get(hout, back, 0, 100) == TG_OK && memcmp(back, data, 100) == 0,
               "a copy of t0 to the CPU does not hold t0's bytes");
    }
    tg_buffer_free(hbuf);
    tg_context_free(hctx);
    tg_backend_free(cpu);

    /* static allocation: every tensor of a context bound, aligned, usable */
    struct tg_context *sctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *s0 = tg_new_tensor_3d(sctx, TG_TYPE_F32, 9, 5, 3), *s1 = tg_new_tensor_1d(sctx, TG_TYPE_F16, 77);
    tg_buffer *sbuf = tg_alloc_ctx_tensors(sctx, buft, &st);
    if (expect(p, sbuf != NULL, "tg_alloc_ctx_tensors: %s", tg_last_error())) {
        expect(p, s0->data && s1->data && (uintptr_t)s0->data % align == 0 && (uintptr_t)s1->data % align == 0,
               "static allocation left a tensor unbound or unaligned");
        fill_pattern(data, tg_nbytes(s1), 7);
        expect(p, tg_tensor_set(s1, data, 0, tg_nbytes(s1)) == TG_OK &&
                      tg_tensor_get(s1, back, 0, 100) == TG_OK && memcmp(back, data, 100) == 0,
               "a statically allocated tensor does not read back what was written");
    }
    tg_buffer_free(sbuf);
    tg_context_free(sctx);
done:
    free(shadow);
    free(data);
    tg_buffer_free(buf);
    tg_context_free(ctx);
}

/* ---- ops ---------------------------------------------------------------------------------- */

static void check_ops(struct part *p, tg_backend *be) {
    tg_backend *cpu = tg_backend_cpu_new();
    if (!expect(p, cpu != NULL, "no CPU backend: %s", tg_last_error())) return;
    const int harness_before = op_grid_harness_failures();
    const struct grid_totals t = run_grid(cpu, be, false);
    expect(p, t.failed == 0, "%d of the %d cases it claims differ from the CPU (above)", t.failed, t.compared);
    expect(p, t.compared > 0, "it claims none of the grid's %d cases: nothing was checked", t.refused);
    expect(p, op_grid_harness_failures() == harness_before, "the grid's harness failed (above)");
    tg_backend_free(cpu);
}

/* ---- graphs ------------------------------------------------------------------------------- */

/* Non-view nodes the scheduler gave backend 0 (the one under test). */
static int nodes_on_target(tg_sched *s, const struct tg_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        n += !tg_op_is_view(g->nodes[i]->op) && g->nodes[i]->op != TG_OP_NONE &&
             tg_sched_get_tensor_backend_id(s, g->nodes[i]) == 0;
    }
    return n;
}

static void check_graphs(struct part *p, tg_backend *be, const struct tg_conformance_target *target) {
    tg_sim_race *race = tg_sim_race_new();
    struct tg_sim_params sp;
    tg_sim_params_default(&sp);
    sp.name = "conformance-sim";
    sp.race = race;
    sp.jitter_seed = 7;
    tg_backend *sim = tg_backend_sim_new(&sp);
    tg_backend *cpu = tg_sim_watch_new(tg_backend_cpu_new(), race, NULL);
    /* a backend computing on host memory on the calling thread is the host to the detector, as the CPU is */
    const bool watch = !tg_backend_is_sim(be) && tg_buft_is_host(tg_backend_get_default_buffer_type(be));
    tg_backend *target_be = watch ? tg_sim_watch_new(be, race, NULL) : be;
    if (!expect(p, race && sim && cpu && target_be, "setting up: %s", tg_last_error())) {
        tg_backend_free(sim);
        tg_backend_free(cpu);
        tg_backend_free(target_be);
        tg_sim_race_free(race);
        return;
    }
    struct setup pair = {.backends = {target_be, cpu}, .n_backends = 2, .race = race,
                         .max_nmse = target->graph_max_nmse};
    struct setup three = {.backends = {target_be, sim, cpu}, .n_backends = 3, .race = race,
                          .max_nmse = target->graph_max_nmse};
    struct tg_gen_options opts = tg_gen_default_options();
    opts.computable = true;
    opts.max_ops = 24;
    opts.max_tensor_bytes = (size_t)256 << 10;
    const int n_seeds = target->graph_seeds > 0 ? target->graph_seeds : 60;
    int compared = 0, skipped = 0, pipelined = 0, on_target = 0;
    for (int i = 0; i < n_seeds; i++) {
        const uint64_t seed = (uint64_t)i + 1;
        const struct setup *su = i % 2 ? &three : &pair;
        struct reference ref;
        if (!reference_run(&ref, seed, &opts)) {
            skipped++;
            reference_free(&ref);
            continue;
        }
        char why[400] = "";
        struct scheduled sc;
        tg_sched *s = tg_sched_new((tg_backend **)su->backends, NULL, su->n_backends,
                                   (size_t)ref.c->graph->size + 16, false, false);
        if (expect(p, s != NULL, "tg_sched_new: %s", tg_last_error()) && scheduled_init(&sc, &ref, su, seed, &opts)) {
            const enum outcome o = run_one(s, su, &sc, &ref, why, sizeof why);
            if (o == OUT_SAME) {
                compared++;
                on_target += nodes_on_target(s, sc.c->graph);
            } else if (o == OUT_SKIPPED) {
                skipped++;
            } else {
                expect(p, false, "seed %llu over %d backends: %s", (unsigned long long)seed, su->n_backends, why);
            }
            tg_sched_free(s);
            scheduled_free(&sc);
        } else {
            tg_sched_free(s);
        }
        if (i % 4 == 0) {
            tg_sched *sp2 = tg_sched_new((tg_backend **)su->backends, NULL, su->n_backends,
                                         (size_t)ref.c->graph->size + 16, true, false);
            const int n_copies = 2 + (int)(seed % 3);
            if (expect(p, sp2 && tg_sched_set_n_copies(sp2, n_copies) == TG_OK, "pipelined scheduler: %s",
                       tg_last_error())) {
                const enum outcome o =
                    run_pipelined(sp2, su, &ref, seed, &opts, n_copies + 2, &pipelined, why, sizeof why);
                expect(p, o != OUT_DIFFERENT && o != OUT_ERROR, "seed %llu pipelined (%d copies): %s",
                       (unsigned long long)seed, n_copies, why);
            }
            tg_sched_free(sp2);
        }
        reference_free(&ref);
    }
    expect(p, tg_sim_race_count(race) == 0, "the race detector: %s", tg_sim_race_report(race));
    expect(p, compared > 0, "no graph could be scheduled and compared (%d skipped)", skipped);
    expect(p, on_target > 0, "the scheduler gave the backend no node in %d graphs: it claims no op they use",
           compared);
    printf("conformance %s: graphs: %d compared (%d nodes on the backend), %d pipelined, %d skipped%s\n",
           p->target, compared, on_target, pipelined, skipped, watch ? ", its host accesses watched" : "");
    if (target_be != be) tg_backend_free(target_be); /* frees be too */
    else tg_backend_free(be);
    tg_backend_free(sim);
    tg_backend_free(cpu);
    tg_sim_race_free(race);
}

/* ---- async: queue order, synchronize, events ----------------------------------------------- */

/* The first of a few one-op graphs over x [64, 8] (and a weight w) the backend
 * claims; with op other than TG_OP_NONE, the one of that op. */
static struct tg_tensor *async_graph(struct tg_context *ctx, tg_backend *be, enum tg_op op, struct tg_tensor **x,
                                     struct tg_tensor **w, double *bound) {
    *x = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 8);
    *w = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 32);
    tg_set_name(*x, "x");
    tg_set_name(*w, "w");
    struct tg_tensor *cands[3] = {tg_mul_mat(ctx, *w, *x), tg_scale(ctx, *x, 0.5f), tg_add(ctx, *x, *x)};
    const double bounds[3] = {5e-4, 1e-7, 1e-7};
    for (int i = 0; i < 3; i++) {
        if (cands[i] && (op == TG_OP_NONE ? tg_backend_supports_op(be, cands[i]) : cands[i]->op == op)) {
            *bound = bounds[i];
            return cands[i];
        }
    }
    return NULL;
}

static double nmse_f32(const float *want, const float *got, size_t n) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i])) return INFINITY;
        err += ((double)want[i] - got[i]) * ((double)want[i] - got[i]);
        ref += (double)want[i] * want[i];
    }
    return ref > 0 ? err / ref : err;
}

#define ROUNDS 6

static void check_async(struct part *p, tg_backend *be) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_context *rctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *x, *w, *rx, *rw;
    double bound = 0;
    tg_backend *cpu = tg_backend_cpu_new();
    struct tg_tensor *y = async_graph(ctx, be, TG_OP_NONE, &x, &w, &bound);
    struct tg_tensor *ry = y ? async_graph(rctx, cpu, y->op, &rx, &rw, &bound) : NULL;
    struct tg_graph *g = tg_graph_new(16), *rg = tg_graph_new(16);
    enum tg_status st = TG_OK;
    tg_buffer *buf = NULL, *rbuf = NULL;
    float *xs = NULL, *outs = NULL, *want = NULL, *wv = NULL;
    tg_event *ev = NULL;
    if (!y) {
        printf("conformance %s: async: it claims none of mul_mat, scale, add on f32: only take_failure checked\n",
               p->target);
        expect(p, tg_backend_take_failure(be) == TG_OK, "take_failure with no work done: %s", tg_last_error());
        goto done;
    }
    if (!expect(p, ry && g && rg && tg_graph_build_forward_expand(g, y) == TG_OK &&
                       tg_graph_build_forward_expand(rg, ry) == TG_OK,
                "building the graphs: %s", tg_last_error()))
        goto done;
    buf = tg_alloc_ctx_tensors_for_backend(ctx, be, &st);
    rbuf = tg_alloc_ctx_tensors_for_backend(rctx, cpu, &st);
    if (!expect(p, buf && rbuf, "allocating: %s", tg_last_error())) goto done;
    const size_t nx = (size_t)tg_nelements(x), ny = (size_t)tg_nelements(y), nw = (size_t)tg_nelements(w);
    xs = malloc(ROUNDS * nx * sizeof *xs);
    outs = calloc(ROUNDS * ny, sizeof *outs);
    want = malloc(ROUNDS * ny * sizeof *want);
    wv = malloc(nw * sizeof *wv);
    if (!expect(p, xs && outs && want && wv, "out of host memory")) goto done;
    for (size_t i = 0; i < nw; i++) wv[i] = (float)((i * 37) % 19) / 19.0f - 0.5f;
    expect(p, tg_tensor_set(w, wv, 0, nw * 4) == TG_OK && tg_tensor_set(rw, wv, 0, nw * 4) == TG_OK, "set w: %s",
           tg_last_error());
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t i = 0; i < nx; i++) xs[r * nx + i] = (float)((i * 7 + (size_t)r * 13) % 23) / 23.0f - 0.3f;
        expect(p, tg_tensor_set(rx, xs + r * nx, 0, nx * 4) == TG_OK, "set: %s", tg_last_error());
        expect(p, tg_cpu_compute_graph(rg, 1) == TG_OK, "CPU reference: %s", tg_last_error());
        expect(p, tg_tensor_get(ry, want + r * ny, 0, ny * 4) == TG_OK, "get: %s", tg_last_error());
    }
    /* rounds queued back to back, no wait between: each get must see its own round's compute */
    for (int r = 0; r < ROUNDS; r++) {
        tg_backend_tensor_set_async(be, x, xs + r * nx, 0, nx * 4);
        expect(p, tg_backend_graph_compute(be, g) == TG_OK, "compute of round %d: %s", r, tg_last_error());
        tg_backend_tensor_get_async(be, y, outs + r * ny, 0, ny * 4);
    }
    tg_backend_synchronize(be);
    for (int r = 0; r < ROUNDS; r++) {
        const double e = nmse_f32(want + r * ny, outs + r * ny, ny);
        expect(p, e <= bound, "async set, compute, get queued %d times then one synchronize: round %d has NMSE %g "
               "(bound %g) against the CPU (queue order broken?)", ROUNDS, r, e, bound);
    }
    expect(p, tg_backend_take_failure(be) == TG_OK, "take_failure after clean work: %s", tg_last_error());
    ev = tg_event_new(be);
    if (!ev) {
        printf("conformance %s: async: no events (ordering checked through synchronize)\n", p->target);
        goto done;
    }
    memset(outs, 0, ROUNDS * ny * sizeof *outs);
    for (int r = 0; r < ROUNDS; r++) {
        /* a recorded event, synchronized on: the work before the record is done, the get included */
        tg_backend_tensor_set_async(be, x, xs + r * nx, 0, nx * 4);
        expect(p, tg_backend_graph_compute(be, g) == TG_OK, "compute: %s", tg_last_error());
        tg_backend_tensor_get_async(be, y, outs + r * ny, 0, ny * 4);
        tg_event_record(ev, be);
        tg_event_synchronize(ev);
        const double e = nmse_f32(want + r * ny, outs + r * ny, ny);
        expect(p, e <= bound, "event_synchronize returned before the work recorded before it: round %d NMSE %g", r, e);
    }
    for (int r = 0; r < ROUNDS; r++) {
        /* the CPU (the host) waiting on the event: then the result is there to read */
        tg_backend_tensor_set_async(be, x, xs + r * nx, 0, nx * 4);
        expect(p, tg_backend_graph_compute(be, g) == TG_OK, "compute: %s", tg_last_error());
        tg_event_record(ev, be);
        tg_event_wait(cpu, ev);
        float got[8 * 32];
        expect(p, ny <= 8 * 32 && tg_tensor_get(y, got, 0, ny * 4) == TG_OK, "get after the wait: %s",
               tg_last_error());
        const double e = nmse_f32(want + r * ny, got, ny);
        expect(p, e <= bound, "the CPU's event_wait returned before the recorded work: round %d NMSE %g", r, e);
    }
    tg_backend_synchronize(be);
    expect(p, tg_backend_take_failure(be) == TG_OK, "take_failure after clean work with events: %s", tg_last_error());
    printf("conformance %s: async: %d rounds queued, %d through event_synchronize, %d through the CPU's event_wait\n",
           p->target, ROUNDS, ROUNDS, ROUNDS);
done:
    tg_event_free(ev);
    free(xs);
    free(outs);
    free(want);
    free(wv);
    tg_buffer_free(buf);
    tg_buffer_free(rbuf);
    tg_graph_free(g);
    tg_graph_free(rg);
    tg_context_free(ctx);
    tg_context_free(rctx);
    tg_backend_free(cpu);
}

/* ---- the run ------------------------------------------------------------------------------ */

int tg_conformance_run(const struct tg_conformance_target *target) {
    static const char *const names[4] = {"buffers", "ops", "graphs", "async"};
    int failed = 0;
    for (int k = 0; k < 4; k++) {
        const int bit = 1 << k;
        if (target->skip & bit) {
            printf("conformance %s: %s: skipped\n", target->name, names[k]);
            continue;
        }
        struct part p = {target->name, names[k], 0, 0};
        tg_backend *be = target->new_backend(target->user);
        if (expect(&p, be != NULL, "the factory made no backend: %s", tg_last_error())) {
            switch (bit) {
            case TG_CONFORMANCE_BUFFERS: {
                tg_buffer_type *buft = target->buffer_type ? target->buffer_type(be, target->user)
                                                           : tg_backend_get_default_buffer_type(be);
                if (expect(&p, buft != NULL, "no buffer type")) check_buffers(&p, be, buft);
                break;
            }
            case TG_CONFORMANCE_OPS: check_ops(&p, be); break;
            case TG_CONFORMANCE_GRAPHS: check_graphs(&p, be, target); be = NULL; break; /* it freed be */
            default: check_async(&p, be); break;
            }
            tg_backend_free(be);
        }
        if (p.failed > 20) fprintf(stderr, "conformance %s: %s: ... %d failures in all\n", p.target, p.name, p.failed);
        printf("conformance %s: %s: %s (%d checks, %d failed)\n", target->name, names[k], p.failed ? "FAILED" : "ok",
               p.checks, p.failed);
        if (p.failed) failed |= bit;
    }
    printf("conformance %s: %s\n", target->name, failed ? "FAILED" : "conforms");
    return failed;
}

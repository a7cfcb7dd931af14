/* What real runtimes hand the allocator that a fresh decode does not: buffer
 * types with init_tensor and reset hooks, a source outside the graph (an
 * earlier graph's result, memory the user allocated) that moves between
 * binds or loses its memory, and views of weights (a KV cache's windows)
 * moved a row on between binds.  Shared by fuzz_alloc and prop_plan. */
#include "tg-gen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct tg_tensor *position(const struct tg_graph *g, int u) {
    return u < g->n_nodes ? g->nodes[u] : g->leafs[u - g->n_nodes];
}

static bool failf(char *why, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return false;
}

/* Whether buf is one of k's buffers with logging hooks. */
static bool hooked(const struct tg_gen_case *k, const tg_buffer *buf) {
    if (!buf) return false;
    for (int i = 0; i < k->n_bufts; i++) {
        if (buf->buft == &k->bufts_storage[i].buft) return true;
    }
    return buf->buft == &k->external_buft.buft && k->external_buft.hooks;
}

/* ggml's rule (ggml_gallocr_alloc_graph): every buffer of the allocator is
 * reset, then each tensor it binds, a view included, is initialised by its
 * buffer at the address it ends at.  A tensor the bind moved in memory it
 * does not own (a view of a weight) is initialised there too; one left where
 * it was need not be.  pre_data/pre_buf: each position before the call. */
static bool hooks_followed(const struct tg_gen_case *k, tg_gallocr *ga, const struct tg_gen_hook_log *log,
                           void *const *pre_data, tg_buffer *const *pre_buf, char *why, size_t len) {
    const struct tg_graph *g = k->graph;
    if (log->overflow) return true;
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        const struct tg_tensor *t = position(g, u);
        if (!hooked(k, t->buffer)) continue;
        bool reset = false;
        int n_init = 0;
        const void *at = NULL;
        for (int e = 0; e < log->n; e++) {
            const struct tg_gen_hook_event *ev = &log->events[e];
            if (!ev->tensor && ev->buffer == t->buffer) {
                reset = true;
                n_init = 0;
            } else if (ev->tensor == t) {
                n_init++;
                at = ev->buffer == t->buffer ? ev->data : NULL;
            }
        }
        const bool owned = tg_gallocr_owns_buffer(ga, t->buffer);
        const bool moved = t->data != pre_data[u] || t->buffer != pre_buf[u];
        if (owned && !reset) return failf(why, len, "'%s' was bound in a compute buffer not reset first", t->name);
        if ((owned || moved) ? n_init != 1 : n_init > 1) {
            return failf(why, len, "'%s' (%s, %s) was initialised %d times", t->name,
                         owned ? "in the allocator's buffer" : "in a buffer of the user's",
                         moved ? "moved" : "not moved", n_init);
        }
        if (n_init == 1 && at != t->data)
            return failf(why, len, "'%s' was initialised at %p but is bound at %p", t->name, at, t->data);
    }
    return true;
}

bool tg_gen_pick_outside_source(const struct tg_graph *g, uint64_t salt, int *node, int *slot) {
    for (int i = 0; i < g->n_nodes; i++) {
        const int at = (int)((i + salt) % (uint64_t)g->n_nodes);
        const struct tg_tensor *t = g->nodes[at];
        if (t->view_src || t->op == TG_OP_NONE) continue;
        for (int s = 0; s < TG_MAX_SRC; s++) {
            const struct tg_tensor *src = t->src[s];
            if (src && !src->view_src && tg_is_contiguous(src)) {
                *node = at;
                *slot = s;
                return true;
            }
        }
    }
    return false;
}

static bool pick_outside_slot(const struct tg_graph *g, uint64_t salt, struct tg_tensor **node, int *slot) {
    int at;
    if (!tg_gen_pick_outside_source(g, salt, &at, slot)) return false;
    *node = g->nodes[at];
    return true;
}

/* Moves each view of a weight a row on (back when that leaves the weight);
 * rebind: bind it there too (as ggml_view_* binds), else it is left stale
 * and the allocator must bind it.  The number moved. */
static int move_windows(struct tg_gen_case *k, bool rebind) {
    int moved = 0;
    const struct tg_graph *g = k->graph;
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        struct tg_tensor *t = position(g, u);
        const struct tg_tensor *root = t->view_src;
        if (!root || !root->buffer || root->buffer != k->external_buffer) continue;
        const size_t row = root->nb[1] ? root->nb[1] : root->nb[0], bytes = tg_nbytes(t), all = tg_nbytes(root);
        if (t->view_offs + row <= all && bytes <= all - t->view_offs - row) t->view_offs += row;
        else if (t->view_offs >= row) t->view_offs -= row;
        else continue;
        moved++;
        if (rebind && tg_tensor_view_bind(t) != TG_OK) return -1;
    }
    return moved;
}

/* Moves every tensor in k's weights buffer that the graph lists or views
 * (a view's root may be outside the graph) to the same offset of to, as a
 * runtime that reloads or re-uploads its weights; views are left where they
 * were, for the allocator to bind at their roots.  The number moved. */
static int move_weights(struct tg_gen_case *k, tg_buffer *from, tg_buffer *to) {
    int moved = 0;
    const struct tg_graph *g = k->graph;
    for (int u = 0; u < g->n_nodes + g->n_leafs; u++) {
        struct tg_tensor *t = position(g, u);
        struct tg_tensor *root = t->view_src ? t->view_src : t;
        if (root->buffer != from) continue;
        const size_t offset = (size_t)((char *)root->data - (char *)tg_buffer_get_base(from));
        if (tg_tensor_bind(root, to, (char *)tg_buffer_get_base(to) + offset) != TG_OK) return -1;
        moved++;
    }
    return moved;
}

/* Every checker on k's bind, from a snapshot taken before it. */
static bool oracle_judges(struct tg_gen_case *k, struct tg_oracle_snapshot *snap, char *why, size_t len) {
    struct tg_oracle_liveness lv;
    struct tg_oracle_report rep = {0};
    bool ok = tg_oracle_liveness_build(k->graph, snap, k->node_ids, k->leaf_ids, &lv) == TG_OK;
    if (ok) {
        ok = tg_oracle_check(k->graph, &lv, snap, k->bufts, k->n_ids, &rep) == TG_OK;
        if (ok && rep.n) ok = failf(why, len, "[%s] %s", tg_oracle_rule_name(rep.items[0].rule), rep.items[0].message);
        else if (!ok) failf(why, len, "the oracle could not run: %s", tg_last_error());
        tg_oracle_report_free(&rep);
        tg_oracle_liveness_free(&lv);
    } else {
        failf(why, len, "the oracle could not run: %s", tg_last_error());
    }
    return ok;
}

static bool refused_outside(enum tg_status st) {
    return st == TG_ERR_INVALID && strstr(tg_last_error(), "'outside'") &&
           strstr(tg_last_error(), "neither a node nor a leaf");
}

bool tg_gen_runtime_check(struct tg_gen_case *k, uint64_t salt, const struct tg_gen_runtime_hooks *rh,
                          struct tg_gen_runtime_stats *n, char *why, size_t len) {
    struct tg_gen_hook_log log = {0};
    for (int i = 0; i < k->n_bufts; i++) tg_gen_buft_log_hooks(&k->bufts_storage[i], &log, NULL);
    if (k->external_buffer) tg_gen_buft_log_hooks(&k->external_buft, &log, k->external_buffer);
    struct tg_graph *g = k->graph;
    const int n_pos = g->n_nodes + g->n_leafs;
    void **pre_data = calloc((size_t)n_pos + 1, sizeof *pre_data);
    tg_buffer **pre_buf = calloc((size_t)n_pos + 1, sizeof *pre_buf);
    tg_gallocr *ga = tg_gallocr_new_n(k->bufts, k->n_ids);
    struct tg_tensor *reader = NULL, *outside = NULL, *replaced = NULL;
    int slot = -1;
    struct tg_gen_buft user_type;
    tg_gen_buft_init(&user_type, "user", 64, 0, TG_OP_COUNT, 0);
    if (k->bufts_storage[0].address_only) tg_gen_buft_make_address_only(&user_type);
    tg_buffer *user = NULL;
    size_t span = 0;
    bool ok = true;
    if (!pre_data || !pre_buf || !ga) goto done; /* out of host memory: nothing to judge */
    n->cases++;
    /* a tensor outside the graph in place of a source */
    if (salt % 4 && pick_outside_slot(g, salt, &reader, &slot)) { /* one in four without: vouched for */
        const struct tg_tensor *src = reader->src[slot];
        outside = tg_new_tensor(k->ctx, src->type, TG_MAX_DIMS, src->ne);
        if (outside) {
            tg_set_name(outside, "outside");
            span = (tg_nbytes(outside) + 63) / 64 * 64;
            user = tg_buft_alloc_buffer(&user_type.buft, 2 * span);
        }
        if (!user) outside = NULL;
        if (outside) {
            replaced = reader->src[slot];
            reader->src[slot] = outside;
        }
    }
    /* without memory it is refused, by name */
    if (outside) {
        enum tg_status st = tg_gallocr_reserve_n(ga, g, k->node_ids, k->leaf_ids);
        if (st == TG_OK) st = tg_gallocr_alloc_graph(ga, g);
        if (!refused_outside(st)) {
            ok = failf(why, len, "a source outside the graph without memory: %s, '%s'", tg_status_name(st),
                       tg_last_error());
            goto done;
        }
        n->refused++;
        if (tg_tensor_bind(outside, user, tg_buffer_get_base(user)) != TG_OK) goto done;
        n->outside++;
    }
    enum tg_status st = tg_gallocr_reserve_n(ga, g, k->node_ids, k->leaf_ids);
    if (st != TG_OK) {
        ok = failf(why, len, "reserve: %s", tg_last_error());
        goto done;
    }
    /* bind 0: planned; 1: unchanged (vouched for where the caller can and
     * no tensor is outside: such plans are not); 2: the outside tensor moved
     * (the caller's way, which must then take the general path); 3: moved
     * back; 4: windows moved and bound; 5: windows moved, left stale; 6: the
     * weights moved to another buffer, their views left behind */
    tg_buffer *reloaded = NULL;
    for (int step = 0; step < 7; step++) {
        const char *what = "planned";
        bool alt = false;
        if (step == 1) {
            what = outside ? "bound again unchanged" : "bound again unchanged, vouched";
            alt = !outside && rh && rh->rebind;
        }
        if (step == 6) {
            if (!k->external_buffer) continue;
            reloaded = tg_buft_alloc_buffer(&k->external_buft.buft, tg_buffer_get_size(k->external_buffer));
            int moved = reloaded ? move_weights(k, k->external_buffer, reloaded) : 0;
            if (moved < 0) {
                ok = failf(why, len, "moving the weights: %s", tg_last_error());
                break;
            }
            if (!moved) continue;
            n->weights_moved++;
            what = "weights moved to another buffer";
        }
        if (step == 2 || step == 3) {
            if (!outside) continue;
            if (tg_tensor_bind(outside, user, (char *)tg_buffer_get_base(user) + (step == 2 ? span : 0)) != TG_OK)
                break;
            what = step == 2 ? "outside source moved" : "outside source moved back";
            alt = step == 2 && rh && rh->rebind;
            n->outside_moved++;
        }
        if (step >= 4) {
            int moved = move_windows(k, step == 4);
            if (moved < 0) {
                ok = failf(why, len, "binding a moved window: %s", tg_last_error());
                break;
            }
            if (!moved) continue;
            n->windows_moved++;
            what = step == 4 ? "windows moved and bound" : "windows moved, left stale";
        }
        for (int u = 0; u < n_pos; u++) {
            pre_data[u] = position(g, u)->data;
            pre_buf[u] = position(g, u)->buffer;
        }
        void *outside_at = outside ? outside->data : NULL;
        struct tg_oracle_snapshot snap;
        st = step == 0 ? tg_oracle_snapshot_take(g, &snap) : tg_oracle_snapshot_take_user_memory(g, &snap);
        if (st != TG_OK) break;
        log.n = 0;
        struct tg_gallocr_stats before, after;
        tg_gallocr_get_stats(ga, &before);
        st = alt ? rh->rebind(ga, g, rh->user) : tg_gallocr_alloc_graph(ga, g);
        n->rebinds += alt;
        char judged[200] = "";
        if (st == TG_OK && !oracle_judges(k, &snap, judged, sizeof judged)) st = TG_ERR_INVALID;
        tg_oracle_snapshot_free(&snap);
        if (st != TG_OK) {
            ok = failf(why, len, "%s: %s", what, judged[0] ? judged : tg_last_error());
            break;
        }
        if (rh && rh->bound) rh->bound(ga, rh->user);
        n->hooked_binds++;
        tg_gallocr_get_stats(ga, &after);
        /* neither a moved window nor moved outside memory changes the plan */
        if (step > 0 && after.n_plans != before.n_plans) {
            ok = failf(why, len, "%s: re-planned", what);
            break;
        }
        char hook_why[200];
        if (!hooks_followed(k, ga, &log, pre_data, pre_buf, hook_why, sizeof hook_why)) {
            ok = failf(why, len, "%s: buffer hooks: %s", what, hook_why);
            break;
        }
        if (outside && (reader->src[slot] != outside || outside->data != outside_at || outside->buffer != user)) {
            ok = failf(why, len, "%s: the allocator moved a tensor outside the graph", what);
            break;
        }
    }
    /* the outside tensor loses its memory (the user freed it): every path refuses */
    if (ok && outside && st == TG_OK) {
        outside->data = NULL;
        outside->buffer = NULL;
        if (rh && rh->rebind && !refused_outside(st = rh->rebind(ga, g, rh->user))) {
            ok = failf(why, len, "vouched bind with an outside source without memory: %s, '%s'", tg_status_name(st),
                       tg_last_error());
        } else if (!refused_outside(st = tg_gallocr_alloc_graph(ga, g))) {
            ok = failf(why, len, "replay with an outside source without memory: %s, '%s'", tg_status_name(st),
                       tg_last_error());
        }
        n->refused++;
    }
    /* the weights back where the case frees them */
    if (reloaded && move_weights(k, reloaded, k->external_buffer) < 0)
        ok = failf(why, len, "moving the weights back: %s", tg_last_error());
    tg_buffer_free(reloaded);
done:
    if (outside) reader->src[slot] = replaced;
    tg_gallocr_free(ga);
    tg_buffer_free(user);
    free(pre_data);
    free(pre_buf);
    /* the case's buffers outlive the log: no hook may write to it after this */
    for (int i = 0; i < k->n_bufts; i++) k->bufts_storage[i].hooks = NULL;
    k->external_buft.hooks = NULL;
    tg_gen_hook_log_free(&log);
    return ok;
}

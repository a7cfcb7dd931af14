/* Invariant checkers over a bound graph (docs/testing.md, "The oracle").  Each finding
 * names the tensors and the rule, so a failing property case explains itself. */
#include "tg-oracle.h"
#include "tg-oracle-overlaps.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VIOLATIONS 4096 /* enough to diagnose; a broken plan can produce n^2 */

const char *tg_oracle_rule_name(enum tg_oracle_rule r) {
    switch (r) {
    case TG_RULE_UNBOUND: return "unbound";
    case TG_RULE_LIVE_OVERLAP: return "live overlap";
    case TG_RULE_ILLEGAL_INPLACE: return "illegal in-place";
    case TG_RULE_OUT_OF_BOUNDS: return "out of buffer bounds";
    case TG_RULE_MISALIGNED: return "misaligned";
    case TG_RULE_OUTPUT_OVERWRITTEN: return "output overwritten";
    case TG_RULE_VIEW_OUTSIDE_ROOT: return "view outside its root";
    case TG_RULE_EXTERNAL_MOVED: return "external tensor moved";
    case TG_RULE_WRONG_BUFFER_TYPE: return "wrong buffer type";
    case TG_RULE_COUNT: break;
    }
    return "?";
}

void tg_oracle_report_free(struct tg_oracle_report *rep) {
    if (!rep) return;
    free(rep->items);
    *rep = (struct tg_oracle_report){0};
}

int tg_oracle_report_count(const struct tg_oracle_report *rep, enum tg_oracle_rule rule) {
    int n = 0;
    for (int i = 0; i < rep->n; i++) n += rep->items[i].rule == rule;
    return n;
}

void tg_oracle_report_print(const struct tg_oracle_report *rep, int max_lines) {
    for (int i = 0; i < rep->n && i < max_lines; i++) {
        tg_logf("  [%s] %s\n", tg_oracle_rule_name(rep->items[i].rule), rep->items[i].message);
    }
    if (rep->n > max_lines) tg_logf("  ... and %d more\n", rep->n - max_lines);
}

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static bool add_violation(struct tg_oracle_report *rep, enum tg_oracle_rule rule,
                          enum tg_oracle_inplace_reason reason, const struct tg_tensor *a, const struct tg_tensor *b,
                          const char *fmt, ...) {
    if (rep->n >= MAX_VIOLATIONS) return true;
    if (rep->n == rep->cap) {
        int cap = rep->cap ? rep->cap * 2 : 16;
        struct tg_oracle_violation *p = realloc(rep->items, (size_t)cap * sizeof *p);
        if (!p) return false;
        rep->items = p;
        rep->cap = cap;
    }
    struct tg_oracle_violation *v = &rep->items[rep->n++];
    v->rule = rule;
    v->inplace_reason = reason;
    v->a = a;
    v->b = b;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
    return true;
}

static size_t offset_in(const struct tg_tensor *t) {
    return (size_t)((const char *)t->data - (const char *)tg_buffer_get_base(t->buffer));
}

static bool in_buffer(const struct tg_tensor *t, size_t size) {
    uintptr_t base = (uintptr_t)tg_buffer_get_base(t->buffer), p = (uintptr_t)t->data;
    return p >= base && p - base <= t->buffer->size && size <= t->buffer->size - (p - base);
}

/* The buffer type the plan was asked to use for buffer id, NULL when the
 * caller named none (then the tensor's own buffer is all there is to go by). */
static tg_buffer_type *type_of_id(tg_buffer_type **bufts, int n_bufs, int id) {
    return bufts && id >= 0 && id < n_bufs ? bufts[id] : NULL;
}

/* ---- per-tensor rules -------------------------------------------------------------- */

static bool check_externals(const struct tg_oracle_snapshot *snap, struct tg_oracle_report *rep) {
    for (int i = 0; i < snap->n; i++) {
        const struct tg_oracle_snapshot_entry *e = &snap->entries[i];
        if (e->tensor->data == e->data && e->tensor->buffer == e->buffer) continue;
        if (!add_violation(rep, TG_RULE_EXTERNAL_MOVED, TG_INPLACE_OK, e->tensor, NULL,
                           "tensor '%s' had memory before planning (%p) and was moved to %p", e->tensor->name,
                           e->data, e->tensor->data)) {
            return false;
        }
    }
    return true;
}

/* One buffer type, or an equal one: callers may judge with a second
 * instance of the type they planned with (same name and rules). */
static bool same_type(tg_buffer_type *a, tg_buffer_type *b) {
    return a == b || (strcmp(tg_buft_name(a), tg_buft_name(b)) == 0 &&
                      tg_buft_get_alignment(a) == tg_buft_get_alignment(b) &&
                      tg_buft_get_max_size(a) == tg_buft_get_max_size(b) && tg_buft_is_host(a) == tg_buft_is_host(b));
}

/* The bytes a placed tensor takes: what its buffer id's type asks for it
 * (the plan reserved that), and never fewer than the tensor's own. */
static size_t held_bytes(const struct tg_tensor *t, tg_buffer_type *buft) {
    const size_t asked = buft ? tg_buft_get_alloc_size(buft, t) : tg_buffer_get_alloc_size(t->buffer, t);
    const size_t own = tg_nbytes(t);
    return asked > own ? asked : own;
}

/* Size and alignment are judged by the buffer type the tensor's id names, not
 * by the buffer it landed in: a plan that put it in another type's buffer
 * would otherwise be judged by that buffer's own, possibly laxer, rules. */
static bool check_placement(const struct tg_oracle_tensor_info *ti, tg_buffer_type *want, struct tg_oracle_report *rep,
                            bool *usable) {
    const struct tg_tensor *t = ti->tensor;
    *usable = false;
    if (!t->data || !t->buffer) {
        return add_violation(rep, TG_RULE_UNBOUND, TG_INPLACE_OK, t, NULL,
                             "tensor '%s' is owned by the plan (buffer id %d) but has no memory after binding",
                             t->name, ti->buffer_id);
    }
    tg_buffer_type *have = tg_buffer_get_type(t->buffer);
    if (want && !same_type(have, want) &&
        !add_violation(rep, TG_RULE_WRONG_BUFFER_TYPE, TG_INPLACE_OK, t, NULL,
                       "tensor '%s' (buffer id %d, buffer type '%s') is bound in a buffer of type '%s'", t->name,
                       ti->buffer_id, tg_buft_name(want), tg_buft_name(have))) {
        return false;
    }
    size_t size = held_bytes(t, want);
    if (!in_buffer(t, size)) {
        return add_violation(rep, TG_RULE_OUT_OF_BOUNDS, TG_INPLACE_OK, t, NULL,
                             "tensor '%s' (%zu bytes) at offset %td passes the end of buffer '%s' (%zu bytes)",
                             t->name, size, (const char *)t->data - (const char *)tg_buffer_get_base(t->buffer),
                             tg_buft_name(have), t->buffer->size);
    }
    *usable = true;
    size_t align = want ? tg_buft_get_alignment(want) : tg_buffer_get_alignment(t->buffer);
    if (align > 1 && offset_in(t) % align != 0) {
        return add_violation(rep, TG_RULE_MISALIGNED, TG_INPLACE_OK, t, NULL,
                             "tensor '%s' at offset %zu of buffer '%s' is not a multiple of its alignment %zu "
                             "(buffer type '%s')",
                             t->name, offset_in(t), tg_buft_name(have), align, tg_buft_name(want ? want : have));
    }
    return true;
}

static bool check_view(const struct tg_tensor *v, struct tg_oracle_report *rep) {
    const struct tg_tensor *root = v->view_src;
    if (!root->data) return true; /* unbound roots are reported as such */
    /* a root in memory its context owns (no buffer): its views have data alone */
    if (!v->data || (!v->buffer && root->buffer)) {
        /* the graph reads it (or computes it), so it must point into its root */
        return add_violation(rep, TG_RULE_UNBOUND, TG_INPLACE_OK, v, root,
                             "view '%s' of '%s' has no memory after binding (its root is bound)", v->name,
                             root->name);
    }
    size_t root_bytes = tg_nbytes(root), view_bytes = tg_nbytes(v);
    bool inside = v->view_offs <= root_bytes && view_bytes <= root_bytes - v->view_offs;
    bool placed = v->buffer == root->buffer && (const char *)v->data == (const char *)root->data + v->view_offs;
    if (inside && placed) return true;
    return add_violation(rep, TG_RULE_VIEW_OUTSIDE_ROOT, TG_INPLACE_OK, v, root,
                         "view '%s' (%zu bytes at offset %zu) %s its root '%s' (%zu bytes)", v->name, view_bytes,
                         v->view_offs, inside ? "is not bound at its offset in" : "reaches outside", root->name,
                         root_bytes);
}

/* ---- pairwise rules ----------------------------------------------------------------- */

struct placed {
    const struct tg_oracle_tensor_info *info;
    uintptr_t begin, end; /* addresses: buffers over the same memory are one memory */
    int first, last;      /* steps it holds its bytes (an external tensor: the whole graph) */
};

/* The source slot through which node reads p (directly or through a view of p), or NULL. */
static const struct tg_tensor *reads(const struct tg_tensor *node, const struct tg_tensor *p) {
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *s = node->src[k];
        if (s && (s == p || s->view_src == p)) return s;
    }
    return NULL;
}

static const char *buffer_name(const struct tg_tensor *t) {
    return t->buffer ? tg_buft_name(tg_buffer_get_type(t->buffer)) : "host context";
}

static void describe(char *out, size_t n, const struct placed *p) {
    const struct tg_oracle_tensor_info *ti = p->info;
    char last[16];
    if (p->last == TG_ORACLE_STEP_END) snprintf(last, sizeof last, "end");
    else snprintf(last, sizeof last, "%d", p->last);
    size_t at = ti->tensor->buffer ? offset_in(ti->tensor) : 0;
    snprintf(out, n, "'%s'%s [%zu, %zu) steps %d..%s", ti->tensor->name, ti->external ? " (pre-allocated)" : "", at,
             at + (size_t)(p->end - p->begin), p->first, last);
}

static bool judge_pair(const struct tg_oracle_liveness *lv, const struct placed *x, const struct placed *y,
                       tg_buffer_type **bufts, int n_bufs, struct tg_oracle_report *rep) {
    const struct tg_oracle_tensor_info *a = x->info, *b = y->info;
    if (a->external && b->external) return true; /* the caller's memory, laid out by the caller */
    if (!(x->first <= y->last && y->first <= x->last)) return true;
    /* described only for a violation: most overlapping pairs are legal in-place reuse */
    char da[160], db[160];
    const char *where = buffer_name(a->tensor);
    const char *also = a->tensor->buffer == b->tensor->buffer ? "" : " (through two buffer objects over one memory)";

    /* An in-place attempt: the later one is a node created at the step where it reads the other. */
    const struct tg_oracle_tensor_info *node = NULL, *src = NULL;
    if (b->node_index >= 0 && b->first == b->node_index && reads(b->tensor, a->tensor)) node = b, src = a;
    else if (a->node_index >= 0 && a->first == a->node_index && reads(a->tensor, b->tensor)) node = a, src = b;
    if (node && node->first >= src->first) {
        const struct tg_tensor *via = reads(node->tensor, src->tensor);
        enum tg_oracle_inplace_reason why = via != src->tensor
                                                ? TG_INPLACE_SOURCE_NOT_OWNED
                                                : tg_oracle_inplace_check(lv, node->tensor, src->tensor, bufts, n_bufs);
        if (why == TG_INPLACE_OK && node->tensor->data != src->tensor->data) why = TG_INPLACE_NOT_SAME_ADDRESS;
        if (why == TG_INPLACE_OK) return true;
        describe(da, sizeof da, x);
        describe(db, sizeof db, y);
        return add_violation(rep, TG_RULE_ILLEGAL_INPLACE, why, node->tensor, src->tensor,
                             "node %s shares memory with its source %s in buffer '%s'%s: %s", node == a ? da : db,
                             node == a ? db : da, where, also, tg_oracle_inplace_reason_text(why));
    }

    describe(da, sizeof da, x);
    describe(db, sizeof db, y);
    if (a->external || b->external) {
        const struct tg_oracle_tensor_info *ext = a->external ? a : b;
        return add_violation(rep, TG_RULE_LIVE_OVERLAP, TG_INPLACE_OK, ext == a ? b->tensor : a->tensor, ext->tensor,
                             "%s is planned over %s in buffer '%s'%s: memory the plan does not own",
                             ext == a ? db : da, ext == a ? da : db, where, also);
    }
    const struct tg_oracle_tensor_info *prot = NULL, *later = NULL;
    if (a->protected_ && b->first > a->first) prot = a, later = b;
    else if (b->protected_ && a->first > b->first) prot = b, later = a;
    if (prot) {
        return add_violation(rep, TG_RULE_OUTPUT_OVERWRITTEN, TG_INPLACE_OK, prot->tensor, later->tensor,
                             "output %s is overwritten by %s in buffer '%s'%s", prot == a ? da : db,
                             prot == a ? db : da, where, also);
    }
    return add_violation(rep, TG_RULE_LIVE_OVERLAP, TG_INPLACE_OK, a->tensor, b->tensor,
                         "%s and %s are live at the same step and overlap in buffer '%s'%s", da, db, where, also);
}

struct pair_judge {
    const struct tg_oracle_liveness *lv;
    const struct placed *ps;
    tg_buffer_type **bufts;
    int n_bufs;
    struct tg_oracle_report *rep;
    bool ok;
};

static bool judge_overlap(void *user, int i, int j) {
    struct pair_judge *pj = user;
    pj->rep->n_pairs_judged++;
    pj->ok = judge_pair(pj->lv, &pj->ps[i], &pj->ps[j], pj->bufts, pj->n_bufs, pj->rep);
    return pj->ok && pj->rep->n < MAX_VIOLATIONS;
}

enum tg_status tg_oracle_check(const struct tg_graph *graph, const struct tg_oracle_liveness *lv,
                               const struct tg_oracle_snapshot *snap, tg_buffer_type **bufts, int n_bufs,
                               struct tg_oracle_report *rep) {
    (void)graph;
    *rep = (struct tg_oracle_report){0};
    rep->n_checked_tensors = lv->n;
    struct placed *ps = malloc(((size_t)lv->n + 1) * sizeof *ps);
    struct tg_oracle_block *blocks = malloc(((size_t)lv->n + 1) * sizeof *blocks);
    bool ok = ps != NULL && blocks != NULL && check_externals(snap, rep);
    int n_placed = 0;
    for (int i = 0; ok && i < lv->n; i++) {
        const struct tg_oracle_tensor_info *ti = &lv->infos[i];
        const struct tg_tensor *t = ti->tensor;
        if (t->view_src) {
            ok = check_view(t, rep);
            continue;
        }
        uintptr_t begin = (uintptr_t)t->data, end = begin;
        int first = ti->first, last = ti->last;
        if (ti->external) {
            /* the caller's memory, which no owned tensor may take at any step
             * (a weight not read again is still read by the next run) */
            if (t->data) end = begin + tg_nbytes(t);
            first = 0;
            last = TG_ORACLE_STEP_END;
        } else if (ti->owned && ti->buffer_id >= 0) {
            bool usable = false;
            ok = check_placement(ti, type_of_id(bufts, n_bufs, ti->buffer_id), rep, &usable);
            if (usable) end = begin + held_bytes(t, type_of_id(bufts, n_bufs, ti->buffer_id));
        }
        if (end == begin) continue; /* unusable, or empty: holds no bytes */
        ps[n_placed] = (struct placed){ti, begin, end, first, last};
        /* one space for all: addresses decide, so two buffer objects over the
         * same memory cannot hide an overlap (distinct buffers never share an address) */
        blocks[n_placed++] = (struct tg_oracle_block){NULL, begin, end, first, last};
    }
    /* only pairs that share a step and a byte need judging: found by a sweep,
     * so a plan that reuses one address for many tensors is not quadratic */
    struct pair_judge pj = {lv, ps, bufts, n_bufs, rep, true};
    if (ok) ok = tg_oracle_for_each_overlap(blocks, n_placed, judge_overlap, &pj) && pj.ok;
    free(ps);
    free(blocks);
    if (!ok) {
        tg_oracle_report_free(rep);
        return tg_fail(TG_ERR_ALLOC, "oracle check: out of host memory");
    }
    return TG_OK;
}

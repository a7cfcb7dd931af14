/* Invariant checkers over a bound graph (design.md section 7).  Each finding
 * names the tensors and the rule, so a failing property case explains itself. */
#include "tg-oracle.h"
#include "tg-oracle-overlaps.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

/* The bytes a placed tensor takes: what its buffer asks for it, and never
 * fewer than the tensor's own, whatever the buffer type answers. */
static size_t held_bytes(const struct tg_tensor *t) {
    const size_t asked = tg_buffer_get_alloc_size(t->buffer, t), own = tg_nbytes(t);
    return asked > own ? asked : own;
}

static bool check_placement(const struct tg_oracle_tensor_info *ti, struct tg_oracle_report *rep, bool *usable) {
    const struct tg_tensor *t = ti->tensor;
    *usable = false;
    if (!t->data || !t->buffer) {
        return add_violation(rep, TG_RULE_UNBOUND, TG_INPLACE_OK, t, NULL,
                             "tensor '%s' is owned by the plan (buffer id %d) but has no memory after binding",
                             t->name, ti->buffer_id);
    }
    size_t size = held_bytes(t);
    if (!in_buffer(t, size)) {
        return add_violation(rep, TG_RULE_OUT_OF_BOUNDS, TG_INPLACE_OK, t, NULL,
                             "tensor '%s' (%zu bytes) at offset %td passes the end of buffer '%s' (%zu bytes)",
                             t->name, size, (const char *)t->data - (const char *)tg_buffer_get_base(t->buffer),
                             tg_buft_name(tg_buffer_get_type(t->buffer)), t->buffer->size);
    }
    *usable = true;
    size_t align = tg_buffer_get_alignment(t->buffer);
    if (align > 1 && offset_in(t) % align != 0) {
        return add_violation(rep, TG_RULE_MISALIGNED, TG_INPLACE_OK, t, NULL,
                             "tensor '%s' at offset %zu of buffer '%s' is not a multiple of its alignment %zu",
                             t->name, offset_in(t), tg_buft_name(tg_buffer_get_type(t->buffer)), align);
    }
    return true;
}

static bool check_view(const struct tg_tensor *v, struct tg_oracle_report *rep) {
    const struct tg_tensor *root = v->view_src;
    if (!root->data || !v->data) return true; /* unbound roots are reported as such */
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
    uintptr_t begin, end;
};

/* The source slot through which node reads p (directly or through a view of p), or NULL. */
static const struct tg_tensor *reads(const struct tg_tensor *node, const struct tg_tensor *p) {
    for (int k = 0; k < TG_MAX_SRC; k++) {
        const struct tg_tensor *s = node->src[k];
        if (s && (s == p || s->view_src == p)) return s;
    }
    return NULL;
}

static void describe(char *out, size_t n, const struct placed *p) {
    const struct tg_oracle_tensor_info *ti = p->info;
    char last[16];
    if (ti->last == TG_ORACLE_STEP_END) snprintf(last, sizeof last, "end");
    else snprintf(last, sizeof last, "%d", ti->last);
    snprintf(out, n, "'%s' [%zu, %zu) steps %d..%s", ti->tensor->name, offset_in(ti->tensor),
             offset_in(ti->tensor) + (size_t)(p->end - p->begin), ti->first, last);
}

static bool judge_pair(const struct tg_oracle_liveness *lv, const struct placed *x, const struct placed *y,
                       tg_buffer_type **bufts, int n_bufs, struct tg_oracle_report *rep) {
    const struct tg_oracle_tensor_info *a = x->info, *b = y->info;
    if (!tg_oracle_live_together(a, b)) return true;
    /* described only for a violation: most overlapping pairs are legal in-place reuse */
    char da[160], db[160];

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
                             "node %s shares memory with its source %s in buffer '%s': %s", node == a ? da : db,
                             node == a ? db : da, tg_buft_name(tg_buffer_get_type(a->tensor->buffer)),
                             tg_oracle_inplace_reason_text(why));
    }

    const struct tg_oracle_tensor_info *prot = NULL, *later = NULL;
    if (a->protected_ && b->first > a->first) prot = a, later = b;
    else if (b->protected_ && a->first > b->first) prot = b, later = a;
    describe(da, sizeof da, x);
    describe(db, sizeof db, y);
    if (prot) {
        return add_violation(rep, TG_RULE_OUTPUT_OVERWRITTEN, TG_INPLACE_OK, prot->tensor, later->tensor,
                             "output %s is overwritten by %s in buffer '%s'", prot == a ? da : db,
                             prot == a ? db : da, tg_buft_name(tg_buffer_get_type(a->tensor->buffer)));
    }
    return add_violation(rep, TG_RULE_LIVE_OVERLAP, TG_INPLACE_OK, a->tensor, b->tensor,
                         "%s and %s are live at the same step and overlap in buffer '%s'", da, db,
                         tg_buft_name(tg_buffer_get_type(a->tensor->buffer)));
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
        if (ti->tensor->view_src) {
            ok = check_view(ti->tensor, rep);
            continue;
        }
        if (!ti->owned || ti->buffer_id < 0) continue;
        bool usable = false;
        ok = check_placement(ti, rep, &usable);
        uintptr_t begin = (uintptr_t)ti->tensor->data;
        uintptr_t end = usable ? begin + held_bytes(ti->tensor) : begin;
        if (end == begin) continue; /* unusable, or empty: holds no bytes */
        ps[n_placed] = (struct placed){ti, begin, end};
        blocks[n_placed++] = (struct tg_oracle_block){ti->tensor->buffer, begin, end, ti->first, ti->last};
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

/* Legality of in-place sharing, condition by condition (docs/allocator.md, "The rules"), so a
 * violation can say which condition failed. */
#include "tg-oracle.h"

static size_t aligned_alloc_size(tg_buffer_type **bufts, int n_bufs, int id, const struct tg_tensor *t) {
    if (!bufts || id < 0 || id >= n_bufs) return tg_nbytes(t);
    size_t size = tg_buft_get_alloc_size(bufts[id], t);
    size_t align = tg_buft_get_alignment(bufts[id]);
    if (align > 1) size = (size + align - 1) / align * align;
    return size;
}

/* The ops whose kernels may write their result over source 0: each element
 * of the result depends on the same element of the source (or on its row,
 * read whole before any of it is written).  The oracle keeps its own list,
 * written from ggml's rule (ggml-alloc.c, ggml_op_can_inplace) rather than
 * taken from the library's: an op the library wrongly lets run in place is
 * then a violation here, not a rule both sides share.  test_oracle_checkers
 * holds the two lists equal, so a change to one is a decision about both. */
bool tg_oracle_op_can_inplace(enum tg_op op) {
    switch (op) {
    case TG_OP_FILL: /* writes every element from its parameter alone */
    case TG_OP_SCALE:
    case TG_OP_DIAG_MASK_ZERO:
    case TG_OP_DIAG_MASK_INF:
    case TG_OP_ADD:
    case TG_OP_ADD_ID:
    case TG_OP_ADD1:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
    case TG_OP_SQR:
    case TG_OP_SQRT:
    case TG_OP_LOG:
    case TG_OP_UNARY:
    case TG_OP_ROPE:
    case TG_OP_ROPE_BACK:
    case TG_OP_SILU_BACK:
    case TG_OP_RMS_NORM:
    case TG_OP_RMS_NORM_BACK:
    case TG_OP_SOFT_MAX:
    case TG_OP_SOFT_MAX_BACK:
        return true;
    default:
        return false;
    }
}

/* The same bytes read the same way: type, shape and strides. */
static bool same_layout(const struct tg_tensor *a, const struct tg_tensor *b) {
    if (a->type != b->type) return false;
    for (int d = 0; d < TG_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d] || a->nb[d] != b->nb[d]) return false;
    return true;
}

const char *tg_oracle_inplace_reason_text(enum tg_oracle_inplace_reason r) {
    switch (r) {
    case TG_INPLACE_OK: return "legal";
    case TG_INPLACE_OP_NOT_CAPABLE: return "op cannot run in place";
    case TG_INPLACE_SOURCE_NOT_OWNED: return "source is not owned by the plan (read through a view, or pre-allocated)";
    case TG_INPLACE_DIFFERENT_BUFFER: return "source is planned in a different buffer id";
    case TG_INPLACE_SOURCE_PROTECTED: return "source is an output or the root of an output view";
    case TG_INPLACE_LAYOUT_DIFFERS: return "layout differs (type, ne or nb)";
    case TG_INPLACE_NOT_LAST_CONSUMER: return "node is not the source's last consumer";
    case TG_INPLACE_LIVE_VIEW: return "a view of the source is still live";
    case TG_INPLACE_NODE_BIGGER: return "node's padded size is larger than the source's";
    case TG_INPLACE_NOT_SAME_ADDRESS: return "node does not start at the source's address";
    }
    return "?";
}

enum tg_oracle_inplace_reason tg_oracle_inplace_check(const struct tg_oracle_liveness *lv,
                                                      const struct tg_tensor *node, const struct tg_tensor *src,
                                                      tg_buffer_type **bufts, int n_bufs) {
    const struct tg_oracle_tensor_info *ni = tg_oracle_liveness_find(lv, node);
    const struct tg_oracle_tensor_info *si = tg_oracle_liveness_find(lv, src);
    if (!tg_oracle_op_can_inplace(node->op)) return TG_INPLACE_OP_NOT_CAPABLE;
    if (!ni || !si || !si->owned) return TG_INPLACE_SOURCE_NOT_OWNED;
    if (ni->buffer_id >= 0 && si->buffer_id >= 0 && ni->buffer_id != si->buffer_id) return TG_INPLACE_DIFFERENT_BUFFER;
    if (si->protected_) return TG_INPLACE_SOURCE_PROTECTED;
    if (!same_layout(node, src)) return TG_INPLACE_LAYOUT_DIFFERS;
    if (si->last_direct_use != ni->node_index) return TG_INPLACE_NOT_LAST_CONSUMER;
    /* a view the node itself reads counts: the node would overwrite bytes it
     * still reads through the view (add(S, transpose(S)) on S) */
    if (si->last_view_use >= ni->node_index) return TG_INPLACE_LIVE_VIEW;
    int id = ni->buffer_id >= 0 ? ni->buffer_id : si->buffer_id;
    if (aligned_alloc_size(bufts, n_bufs, id, node) > aligned_alloc_size(bufts, n_bufs, id, src)) {
        return TG_INPLACE_NODE_BIGGER;
    }
    return TG_INPLACE_OK;
}

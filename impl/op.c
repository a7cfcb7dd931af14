/* Op names and op properties that the planner relies on. */
#include "tg.h"

#include <string.h>

static const char *const op_names[TG_OP_COUNT] = {
#define TG_OP_NAME_(e, s) s,
    TG_OP_LIST(TG_OP_NAME_)
#undef TG_OP_NAME_
};

const char *tg_op_name(enum tg_op op) { return (unsigned)op < TG_OP_COUNT ? op_names[op] : "?"; }

enum tg_op tg_op_from_name(const char *name) {
    for (int op = 0; op < TG_OP_COUNT; op++) {
        if (strcmp(op_names[op], name) == 0) return (enum tg_op)op;
    }
    return TG_OP_COUNT;
}

bool tg_op_can_inplace(enum tg_op op) {
    switch (op) {
    case TG_OP_FILL: case TG_OP_SCALE: case TG_OP_DIAG_MASK_ZERO: case TG_OP_DIAG_MASK_INF:
    case TG_OP_ADD: case TG_OP_ADD_ID: case TG_OP_ADD1: case TG_OP_SUB: case TG_OP_MUL:
    case TG_OP_DIV: case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_UNARY:
    case TG_OP_ROPE: case TG_OP_ROPE_BACK: case TG_OP_SILU_BACK: case TG_OP_RMS_NORM:
    case TG_OP_RMS_NORM_BACK: case TG_OP_SOFT_MAX: case TG_OP_SOFT_MAX_BACK:
        return true;
    default:
        return false;
    }
}

bool tg_op_is_view(enum tg_op op) {
    return op == TG_OP_VIEW || op == TG_OP_RESHAPE || op == TG_OP_PERMUTE || op == TG_OP_TRANSPOSE;
}

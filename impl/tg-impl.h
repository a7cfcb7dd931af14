/* Declarations shared between the core's source files (not public). */
#ifndef TG_IMPL_H
#define TG_IMPL_H

#include "tg.h"

/* A view tensor of a (its root resolved, offsets added) with shape ne and
 * strides nb (NULL: contiguous) at byte offset; checks the range. */
struct tg_tensor *tg_new_view_internal(struct tg_context *ctx, struct tg_tensor *a, enum tg_type type,
                                       const int64_t ne[4], const size_t nb[4], size_t offset);

#endif

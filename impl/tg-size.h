/* Saturating size arithmetic: a size past SIZE_MAX reads as SIZE_MAX, which
 * no buffer holds and no plan fits, so an overflow becomes a refusal (a
 * buffer that cannot be had, a capacity missed) instead of a wrapped size. */
#ifndef TG_SIZE_H
#define TG_SIZE_H

#include <stddef.h>
#include <stdint.h>

static inline size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

static inline size_t sat_mul(size_t a, size_t b) {
    if (a != 0 && b > SIZE_MAX / a) return SIZE_MAX;
    return a * b;
}

/* size rounded up to a multiple of alignment (0 or 1: unchanged). */
static inline size_t round_up(size_t size, size_t alignment) {
    if (alignment <= 1) return size;
    const size_t rem = size % alignment;
    if (rem == 0) return size;
    if (size > SIZE_MAX - (alignment - rem)) return SIZE_MAX;
    return size + (alignment - rem);
}

#endif

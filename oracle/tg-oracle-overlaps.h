/* Private to the oracle: every pair of blocks that overlap both in steps and
 * in bytes, in O((n + pairs) log n) instead of comparing all pairs.  The
 * checkers judge each such pair; a legal plan has few (in-place reuse only),
 * so a check stays about linear in the graph's size. */
#ifndef TG_ORACLE_OVERLAPS_H
#define TG_ORACLE_OVERLAPS_H

#include <stdbool.h>
#include <stdint.h>

struct tg_oracle_block {
    const void *space;     /* blocks in different spaces (buffers) never overlap */
    uintptr_t begin, end;  /* bytes [begin, end), end > begin */
    int first, last;       /* steps [first, last], inclusive */
};

/* Calls pair(user, i, j) once for each pair of blocks i != j that share a step
 * and a byte, i before j in (space, begin, index) order.  Stops when pair
 * returns false.  Returns false when out of host memory. */
bool tg_oracle_for_each_overlap(const struct tg_oracle_block *blocks, int n,
                                bool (*pair)(void *user, int i, int j), void *user);

#endif

/* Private to the oracle: a pointer -> int map (open addressing, linear probing).
 * The oracle keeps its own instead of the core's hash set so that it shares no
 * code with the planner beyond the public API. */
#ifndef TG_ORACLE_MAP_H
#define TG_ORACLE_MAP_H

#include <stdbool.h>
#include <stddef.h>

struct tg_oracle_map {
    size_t cap; /* power of two */
    size_t n;
    const void **keys;
    int *values;
};

struct tg_oracle_map *tg_oracle_map_new(size_t expected);
void tg_oracle_map_free(struct tg_oracle_map *m);
/* -1 when absent. */
int tg_oracle_map_get(const struct tg_oracle_map *m, const void *key);
/* Inserts or overwrites; false when out of memory. */
bool tg_oracle_map_put(struct tg_oracle_map *m, const void *key, int value);

#endif

/* Pointer hash set with open addressing (linear probing), used for graph
 * membership and per-tensor bookkeeping in the allocator and scheduler.
 * Internal to the library: the oracle keeps its own structures. */
#ifndef TG_HASH_H
#define TG_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_HASH_FULL ((size_t)-1)

struct tg_hash_set {
    size_t size;        /* number of slots (a prime) */
    const void **keys;  /* slot -> key, valid where the used bit is set */
    uint64_t *used;     /* one bit per slot */
};

/* A prime >= min_size (at least 3). */
size_t tg_hash_size_for(size_t min_size);
/* false when memory is short. */
bool tg_hash_init(struct tg_hash_set *set, size_t min_size);
void tg_hash_free(struct tg_hash_set *set);
void tg_hash_clear(struct tg_hash_set *set);
/* Slot of key, or TG_HASH_FULL when absent. */
size_t tg_hash_find(const struct tg_hash_set *set, const void *key);
bool tg_hash_contains(const struct tg_hash_set *set, const void *key);
/* Slot of key, inserting it when absent; TG_HASH_FULL when the set is full. */
size_t tg_hash_insert(struct tg_hash_set *set, const void *key);

#endif

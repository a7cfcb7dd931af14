/* Pointer hash set with open addressing (linear probing), used for graph
 * membership and per-tensor bookkeeping in the allocator and scheduler.
 * Internal to the library: the oracle keeps its own structures.
 *
 * The table size is a power of two and the slot comes from a multiplicative
 * (Fibonacci) hash: lookups sit on the per-token path of the allocator and the
 * scheduler, where a division per probe was most of their cost. */
#ifndef TG_HASH_H
#define TG_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_HASH_FULL ((size_t)-1)

struct tg_hash_set {
    size_t size;        /* number of slots (a power of two, or 0) */
    unsigned bits;      /* log2(size) */
    const void **keys;  /* slot -> key, valid where the used bit is set */
    uint64_t *used;     /* one bit per slot */
};

/* The power of two >= min_size (at least 4). */
size_t tg_hash_size_for(size_t min_size);
/* false when memory is short. */
bool tg_hash_init(struct tg_hash_set *set, size_t min_size);
void tg_hash_free(struct tg_hash_set *set);
void tg_hash_clear(struct tg_hash_set *set);

static inline size_t tg_hash_home(const struct tg_hash_set *set, const void *key) {
    /* Pointers are aligned: the low bits carry nothing, the product's high bits mix all. */
    uint64_t x = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> (64 - set->bits));
}

static inline bool tg_hash_slot_used(const struct tg_hash_set *set, size_t i) {
    return (set->used[i >> 6] >> (i & 63)) & 1u;
}

/* Slot of key, or TG_HASH_FULL when absent. */
static inline size_t tg_hash_find(const struct tg_hash_set *set, const void *key) {
    if (set->size == 0) return TG_HASH_FULL;
    size_t mask = set->size - 1;
    size_t i = tg_hash_home(set, key);
    for (size_t probes = 0; probes < set->size; probes++, i = (i + 1) & mask) {
        if (!tg_hash_slot_used(set, i)) return TG_HASH_FULL;
        if (set->keys[i] == key) return i;
    }
    return TG_HASH_FULL;
}

static inline bool tg_hash_contains(const struct tg_hash_set *set, const void *key) {
    return tg_hash_find(set, key) != TG_HASH_FULL;
}

/* Slot of key, inserting it when absent; TG_HASH_FULL when the set is full. */
size_t tg_hash_insert(struct tg_hash_set *set, const void *key);
/* The same, and *added says whether key was absent (one probe sequence
 * where a find and then an insert take two). */
size_t tg_hash_insert_new(struct tg_hash_set *set, const void *key, bool *added);

#endif

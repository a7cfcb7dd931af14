/* Open-addressing pointer set.  Slots are found by linear probing from a hash
 * of the pointer; membership is a bit array so a cleared set costs one memset. */
#include "tg-hash.h"

#include <stdlib.h>
#include <string.h>

static bool is_prime(size_t n) {
    if (n < 2) return false;
    for (size_t d = 2; d * d <= n; d++) {
        if (n % d == 0) return false;
    }
    return true;
}

size_t tg_hash_size_for(size_t min_size) {
    size_t n = min_size < 3 ? 3 : min_size;
    while (!is_prime(n)) n++;
    return n;
}

bool tg_hash_init(struct tg_hash_set *set, size_t min_size) {
    set->size = tg_hash_size_for(min_size);
    set->keys = calloc(set->size, sizeof *set->keys);
    set->used = calloc((set->size + 63) / 64, sizeof *set->used);
    if (!set->keys || !set->used) {
        tg_hash_free(set);
        return false;
    }
    return true;
}

void tg_hash_free(struct tg_hash_set *set) {
    free((void *)set->keys);
    free(set->used);
    set->keys = NULL;
    set->used = NULL;
    set->size = 0;
}

void tg_hash_clear(struct tg_hash_set *set) {
    if (set->used) memset(set->used, 0, (set->size + 63) / 64 * sizeof *set->used);
}

static bool slot_used(const struct tg_hash_set *set, size_t i) {
    return (set->used[i / 64] >> (i % 64)) & 1u;
}

static size_t hash_ptr(const void *p, size_t size) {
    /* Pointers are aligned: drop the low bits before mixing. */
    uint64_t x = (uint64_t)(uintptr_t)p >> 4;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)(x % size);
}

size_t tg_hash_find(const struct tg_hash_set *set, const void *key) {
    if (set->size == 0) return TG_HASH_FULL;
    size_t start = hash_ptr(key, set->size);
    size_t i = start;
    do {
        if (!slot_used(set, i)) return TG_HASH_FULL;
        if (set->keys[i] == key) return i;
        i = (i + 1) % set->size;
    } while (i != start);
    return TG_HASH_FULL;
}

bool tg_hash_contains(const struct tg_hash_set *set, const void *key) {
    return tg_hash_find(set, key) != TG_HASH_FULL;
}

size_t tg_hash_insert(struct tg_hash_set *set, const void *key) {
    if (set->size == 0) return TG_HASH_FULL;
    size_t start = hash_ptr(key, set->size);
    size_t i = start;
    do {
        if (!slot_used(set, i)) {
            set->used[i / 64] |= (uint64_t)1 << (i % 64);
            set->keys[i] = key;
            return i;
        }
        if (set->keys[i] == key) return i;
        i = (i + 1) % set->size;
    } while (i != start);
    return TG_HASH_FULL;
}

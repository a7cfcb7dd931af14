/* Open-addressing pointer set.  Slots are found by linear probing from a hash
 * of the pointer; membership is a bit array so a cleared set costs one memset. */
#include "tg-hash.h"

#include <stdlib.h>
#include <string.h>

size_t tg_hash_size_for(size_t min_size) {
    size_t n = 4;
    while (n < min_size) n <<= 1;
    return n;
}

bool tg_hash_init(struct tg_hash_set *set, size_t min_size) {
    set->size = tg_hash_size_for(min_size);
    set->bits = 0;
    while (((size_t)1 << set->bits) < set->size) set->bits++;
    /* keys are read only where the used bit is set: only the bit array is zeroed */
    set->keys = malloc(set->size * sizeof *set->keys);
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
    set->bits = 0;
}

void tg_hash_clear(struct tg_hash_set *set) {
    if (set->used) memset(set->used, 0, (set->size + 63) / 64 * sizeof *set->used);
}

size_t tg_hash_insert_new(struct tg_hash_set *set, const void *key, bool *added) {
    *added = false;
    if (set->size == 0) return TG_HASH_FULL;
    size_t mask = set->size - 1;
    size_t i = tg_hash_home(set, key);
    for (size_t probes = 0; probes < set->size; probes++, i = (i + 1) & mask) {
        if (!tg_hash_slot_used(set, i)) {
            set->used[i >> 6] |= (uint64_t)1 << (i & 63);
            set->keys[i] = key;
            *added = true;
            return i;
        }
        if (set->keys[i] == key) return i;
    }
    return TG_HASH_FULL;
}

size_t tg_hash_insert(struct tg_hash_set *set, const void *key) {
    bool added;
    return tg_hash_insert_new(set, key, &added);
}

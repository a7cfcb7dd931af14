/* Pointer -> int map for the oracle (see tg-oracle-map.h). */
#include "tg-oracle-map.h"

#include <stdint.h>
#include <stdlib.h>

static size_t slot_of(const struct tg_oracle_map *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (m->cap - 1);
}

struct tg_oracle_map *tg_oracle_map_new(size_t expected) {
    struct tg_oracle_map *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = 16;
    while (m->cap < expected * 2) m->cap *= 2;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->values = calloc(m->cap, sizeof *m->values);
    if (!m->keys || !m->values) {
        tg_oracle_map_free(m);
        return NULL;
    }
    return m;
}

void tg_oracle_map_free(struct tg_oracle_map *m) {
    if (!m) return;
    free(m->keys);
    free(m->values);
    free(m);
}

int tg_oracle_map_get(const struct tg_oracle_map *m, const void *key) {
    if (!m || !key) return -1;
    for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) return m->values[i];
        if (!m->keys[i]) return -1;
    }
}

static bool grow(struct tg_oracle_map *m) {
    struct tg_oracle_map bigger = {.cap = m->cap * 2};
    bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
    bigger.values = calloc(bigger.cap, sizeof *bigger.values);
    if (!bigger.keys || !bigger.values) {
        free(bigger.keys);
        free(bigger.values);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i]) tg_oracle_map_put(&bigger, m->keys[i], m->values[i]);
    }
    free(m->keys);
    free(m->values);
    *m = bigger;
    return true;
}

bool tg_oracle_map_put(struct tg_oracle_map *m, const void *key, int value) {
    if (!key) return false;
    if ((m->n + 1) * 2 > m->cap && !grow(m)) return false;
    for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            m->values[i] = value;
            return true;
        }
        if (!m->keys[i]) {
            m->keys[i] = key;
            m->values[i] = value;
            m->n++;
            return true;
        }
    }
}

/* Deterministic test inputs: a splitmix64 stream per test binary (seed it by
 * setting rng_state) and uniform floats drawn from it. */
#ifndef TG_TEST_RNG_H
#define TG_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float rng_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0));
}

#endif

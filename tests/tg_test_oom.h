/* Host memory running out, for the allocation-failure tests: this header
 * replaces malloc, calloc, realloc, aligned_alloc, posix_memalign and free in
 * the executable that includes it (glibc forwards to __libc_*), so that a test
 * can fail the k-th allocation from now (oom_fail_at) and count the blocks
 * still live (oom_live), to see that an error path leaks nothing.  Include it
 * in one translation unit only.  Sanitizers that own the allocator, and
 * libcs other than glibc, rule this out: OOM_CAN_FAIL is then undefined and
 * the test should exit 77 (skipped). */
#ifndef TG_TEST_OOM_H
#define TG_TEST_OOM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define OOM_OWNED_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OOM_OWNED_ALLOCATOR 1
#endif

#if defined(__GLIBC__) && !defined(OOM_OWNED_ALLOCATOR)
#define OOM_CAN_FAIL 1

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void __libc_free(void *p);

/* -1: no failure planned; k >= 0: the k-th allocation from now fails.  Atomic:
 * backends allocate on their own threads too. */
static _Atomic long oom_countdown = -1;
/* Blocks handed out and not yet freed (since the program started). */
static _Atomic long oom_live_blocks;

/* A debugger's stop at the failed allocation: OOM_TRAP=K in the environment
 * raises SIGTRAP when the allocation failed for k = K fires. */
static long oom_trap_k = -2, oom_current_k = -1;

static bool oom_fail_now(void) {
    long c = atomic_load(&oom_countdown);
    while (c >= 0) {
        if (atomic_compare_exchange_weak(&oom_countdown, &c, c - 1)) {
            if (c == 0 && oom_current_k == oom_trap_k) raise(SIGTRAP);
            return c == 0;
        }
    }
    return false;
}

static void *oom_counted(void *p) {
    if (p) atomic_fetch_add(&oom_live_blocks, 1);
    return p;
}

void *malloc(size_t size) { return oom_fail_now() ? NULL : oom_counted(__libc_malloc(size)); }
void *calloc(size_t n, size_t size) { return oom_fail_now() ? NULL : oom_counted(__libc_calloc(n, size)); }
void *realloc(void *p, size_t size) {
    if (!p) return malloc(size);
    if (size == 0) {
        free(p);
        return NULL;
    }
    return oom_fail_now() ? NULL : __libc_realloc(p, size);
}
void *aligned_alloc(size_t alignment, size_t size) {
    return oom_fail_now() ? NULL : oom_counted(__libc_memalign(alignment, size));
}
int posix_memalign(void **out, size_t alignment, size_t size) {
    if (oom_fail_now()) return 12; /* ENOMEM */
    void *p = oom_counted(__libc_memalign(alignment, size));
    if (!p) return 12;
    *out = p;
    return 0;
}
void free(void *p) {
    if (!p) return;
    atomic_fetch_sub(&oom_live_blocks, 1);
    __libc_free(p);
}

/* Plans the k-th allocation from now to fail (k < 0: none). */
static inline void oom_fail_at(long k) {
    if (oom_trap_k == -2) {
        const char *trap = getenv("OOM_TRAP");
        oom_trap_k = trap ? atol(trap) : -1;
    }
    oom_current_k = k;
    atomic_store(&oom_countdown, k);
}
/* Stops failing; true when the planned failure happened. */
static inline bool oom_disarm(void) {
    long left = atomic_exchange(&oom_countdown, -1);
    return left < 0;
}
/* Holds the planned failure while the test itself allocates (a check). */
static inline long oom_pause(void) { return atomic_exchange(&oom_countdown, -1); }
static inline void oom_resume(long left) { atomic_store(&oom_countdown, left); }
static inline long oom_live(void) { return atomic_load(&oom_live_blocks); }

/* The k to try in turn: every k up to dense, then a stride that still
 * reaches the allocations of a long run (the planner's searches). */
static inline long oom_next_k(long k, long dense) { return k < dense ? k + 1 : k + 1 + (k - dense) / 8; }

/* Whether a planned failure reaches this executable's malloc.  A tool that
 * replaces malloc in the executable too (valgrind) bypasses the functions
 * above: every sweep would end at k = 0, its first run failing nothing, and
 * the test would pass having tested nothing. */
static inline bool oom_injects(void) {
    oom_fail_at(0);
    void *volatile probe = malloc(16);
    const bool failed = oom_disarm() && probe == NULL;
    free(probe);
    return failed;
}
/* main's first words where OOM_CAN_FAIL: skipped (77) unless oom_injects. */
static inline int oom_skip_not_injecting(void) {
    printf("skipped: a planned allocation failure did not happen (malloc is replaced here, as valgrind does)\n");
    return 77;
}
#endif

#endif

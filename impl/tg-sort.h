/* In-place sort generated per element type, for the planners' hot loops: the
 * C library's qsort compares through a function pointer (and glibc's merges
 * through a scratch buffer), which made sorting cost as much as the placement
 * work around it.  Not stable: callers give total orders, or orders whose ties
 * do not matter.
 *
 *   TG_DEFINE_SORT(sort_spans, struct span, SPAN_BEFORE)
 *
 * defines static void sort_spans(struct span *a, int n), where
 * SPAN_BEFORE(x, y) is true when x must come before y. */
#ifndef TG_SORT_H
#define TG_SORT_H

#include <stddef.h>

/* type is a type name, which cannot be parenthesized. */
// NOLINTBEGIN(bugprone-macro-parentheses)
#define TG_DEFINE_SORT(name, type, before)                                                                     \
    static void name##_by_insertion(type *a, int n) {                                                          \
        for (int i = 1; i < n; i++) {                                                                          \
            const type x = a[i];                                                                               \
            int j = i - 1;                                                                                     \
            while (j >= 0 && before(x, a[j])) {                                                                \
                a[j + 1] = a[j];                                                                               \
                j--;                                                                                           \
            }                                                                                                  \
            a[j + 1] = x;                                                                                      \
        }                                                                                                      \
    }                                                                                                          \
    /* quicksort: median of three, the smaller part recursed (depth O(log n)) */                               \
    static void name(type *a, int n) {                                                                         \
        while (n > 16) {                                                                                       \
            const int mid = n / 2;                                                                             \
            type t;                                                                                            \
            if (before(a[mid], a[0])) { t = a[mid]; a[mid] = a[0]; a[0] = t; }                                 \
            if (before(a[n - 1], a[0])) { t = a[n - 1]; a[n - 1] = a[0]; a[0] = t; }                           \
            if (before(a[n - 1], a[mid])) { t = a[n - 1]; a[n - 1] = a[mid]; a[mid] = t; }                     \
            const type pivot = a[mid];                                                                         \
            int i = 0, j = n - 1;                                                                              \
            for (;;) {                                                                                         \
                while (before(a[i], pivot)) i++;                                                               \
                while (before(pivot, a[j])) j--;                                                               \
                if (i >= j) break;                                                                             \
                t = a[i];                                                                                      \
                a[i] = a[j];                                                                                   \
                a[j] = t;                                                                                      \
                i++;                                                                                           \
                j--;                                                                                           \
            }                                                                                                  \
            /* a[0..j] are not after the pivot, a[j+1..n) not before it */                                     \
            const int left = j + 1;                                                                            \
            if (left < n - left) {                                                                             \
                name(a, left);                                                                                 \
                a += left;                                                                                     \
                n -= left;                                                                                     \
            } else {                                                                                           \
                name(a + left, n - left);                                                                      \
                n = left;                                                                                      \
            }                                                                                                  \
        }                                                                                                      \
        name##_by_insertion(a, n);                                                                             \
    }
// NOLINTEND(bugprone-macro-parentheses)

/* A block's rank by up to three keys, larger first, ties by index: the
 * offline planners' priority orders. */
struct tg_rank_key {
    size_t k1, k2, k3;
    int index;
};

#define TG_RANK_KEY_BEFORE(x, y)                                                                               \
    ((x).k1 != (y).k1   ? (x).k1 > (y).k1                                                                      \
     : (x).k2 != (y).k2 ? (x).k2 > (y).k2                                                                      \
     : (x).k3 != (y).k3 ? (x).k3 > (y).k3                                                                      \
                        : (x).index < (y).index)

#endif

/* Interval instances for the planner's tests, made with nothing of the
 * library's: MiniMalloc CSV files read (header id,lower,upper,size; each
 * buffer live over [lower, upper)), and the conflicts by brute force, so a
 * test's input does not rest on the code it checks. */
#ifndef TG_TEST_INTERVALS_H
#define TG_TEST_INTERVALS_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* Up to cap buffers of path into size[], start[], end[] (end = upper - 1);
 * the count, or -1 when the file cannot be opened. */
static inline int tg_test_read_csv(const char *path, size_t *size, int *start, int *end, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof(line), f) && n < cap) {
        char id[64];
        long long lower, upper;
        unsigned long long bytes;
        if (sscanf(line, "%63[^,],%lld,%lld,%llu", id, &lower, &upper, &bytes) != 4) continue; /* header */
        size[n] = (size_t)bytes;
        start[n] = (int)lower;
        end[n] = (int)(upper - 1);
        n++;
    }
    fclose(f);
    return n;
}

/* The conflicts of n blocks (those of size > 0 live at a common step), as
 * CSR: adj_begin[n + 1] given, *adj allocated here (freed first); quadratic
 * on purpose. */
static inline void tg_test_conflicts(int n, const size_t *size, const int *start, const int *end, int *adj_begin,
                                     int **adj) {
    free(*adj);
    *adj = malloc(sizeof(int) * ((size_t)n * (size_t)n + 1));
    int k = 0;
    for (int i = 0; i < n; i++) {
        adj_begin[i] = k;
        for (int j = 0; j < n; j++)
            if (j != i && size[i] > 0 && size[j] > 0 && start[i] <= end[j] && start[j] <= end[i]) (*adj)[k++] = j;
    }
    adj_begin[n] = k;
}

#endif

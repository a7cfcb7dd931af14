/* Internal errors and fault notices (tg-checks.h). */
#include "tg-checks.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_error(const char *file, int line, const char *cond, const char *fmt, va_list ap) {
    fprintf(stderr, "tgsched: internal error at %s:%d: ", file, line);
    if (cond) fprintf(stderr, "invariant %s: ", cond);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
}

_Noreturn void tg_internal_error(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_error(file, line, NULL, fmt, ap);
    va_end(ap);
    abort();
}

_Noreturn void tg_invariant_failed(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_error(file, line, cond, fmt, ap);
    va_end(ap);
    abort();
}

/* Bit f of the word of a component: fault f was announced.  Components are
 * told apart by their first letter ('g'raph allocator, 's'cheduler). */
static uint64_t announced[2];

void tg_fault_announce(const char *component, int fault, const char *fault_name) {
    if (fault <= 0 || fault >= 64) return;
    uint64_t *word = &announced[component && component[0] == 's'];
    uint64_t bit = (uint64_t)1 << fault;
    if (__atomic_fetch_or(word, bit, __ATOMIC_RELAXED) & bit) return;
    fprintf(stderr, "tgsched: fault '%s' is on in a %s: its results break a rule on purpose (a checker self-test)\n",
            fault_name, component);
}

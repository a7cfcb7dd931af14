/* Internal invariants, the replay differential checks and fault notices
 * (not public).
 *
 * TG_CHECKS is 1 in builds with assertions (Debug) and in fuzzing builds:
 * there the main entry points assert their invariants, and every replay (of
 * the allocator's plan, of the scheduler's schedule) is compared with what
 * the slow path it stands for decides.  Release builds skip both.  What a
 * fast path needs to be safe is never under TG_CHECKS: it is checked in
 * every build, where the fast path runs. */
#ifndef TG_CHECKS_H
#define TG_CHECKS_H

#if !defined(NDEBUG) || defined(TG_FUZZING_BUILD) || defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
#define TG_CHECKS 1
#else
#define TG_CHECKS 0
#endif

/* Prints "tgsched: internal error at FILE:LINE: MESSAGE" to stderr and aborts. */
_Noreturn void tg_internal_error(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The same for a failed invariant: "... FILE:LINE: invariant COND: MESSAGE". */
_Noreturn void tg_invariant_failed(const char *file, int line, const char *cond, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* An invariant: checked where TG_CHECKS is 1, and compiled (never run)
 * elsewhere.  The arguments after the condition are a printf message. */
#define TG_ASSERT(cond, ...)                                                                 \
    do {                                                                                     \
        if (TG_CHECKS && !(cond)) tg_invariant_failed(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

/* Says on stderr, once per process for each (component, fault), that a
 * fault switch is on: its results break a rule on purpose. */
void tg_fault_announce(const char *component, int fault, const char *fault_name);

#endif

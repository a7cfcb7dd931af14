/* Code run in a child process where its crash cannot take the test down:
 * code that must crash (a stray host read that a checker or a memory guard
 * must catch: the child reads one float at addr with the kernel's default
 * fault handling, sanitizers install their own; an internal error that must
 * abort), and code that may (ggml under test, whose asserts abort).  The
 * result says how the child ended and what it wrote to stderr (a sanitizer's
 * report, the error's message); what else it found it leaves in shared
 * memory. */
#ifndef TG_TEST_CHILD_H
#define TG_TEST_CHILD_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* the sanitizers' runtime, when the build has one (NULL otherwise) */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

struct tg_child_read {
    bool started;
    int status; /* as waitpid reports it */
    char report[8192];
};

/* Runs fn(arg) in a child process with the default handling of SIGSEGV,
 * SIGBUS and SIGABRT (a crash ends it, as it would end a program), and
 * GGML_NO_BACKTRACE set (ggml, on an abort, would attach a debugger to print
 * a backtrace); the child exits 0 when fn returns.  With capture, the child's
 * stderr goes into the report (what does not fit is read and dropped, so a
 * child that writes much never blocks); without, it stays the parent's. */
static inline struct tg_child_read tg_test_fork(void (*fn)(const void *), const void *arg, bool capture) {
    struct tg_child_read r;
    memset(&r, 0, sizeof r);
    fflush(NULL);
    int pipefd[2] = {-1, -1};
    if (capture && pipe(pipefd) != 0) return r;
    pid_t pid = fork();
    if (pid == 0) {
        if (capture) dup2(pipefd[1], 2);
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        /* a sanitizer's report ends the child, not the run: libFuzzer's death
         * callback would write the parent's input out as a crash */
        if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(NULL);
        setenv("GGML_NO_BACKTRACE", "1", 1);
        fn(arg);
        _exit(0);
    }
    if (capture) {
        close(pipefd[1]);
        size_t got = 0;
        char drop[4096];
        for (;;) {
            bool room = got < sizeof r.report - 1;
            ssize_t n = room ? read(pipefd[0], r.report + got, sizeof r.report - 1 - got) : read(pipefd[0], drop, sizeof drop);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            if (room) got += (size_t)n;
        }
        close(pipefd[0]);
    }
    if (pid < 0) return r;
    /* a signal to the parent (libFuzzer's timer, every second) interrupts the
     * wait: without the retry the child would be taken as ended, status 0,
     * while it still runs and writes its result */
    while (waitpid(pid, &r.status, 0) < 0) {
        if (errno != EINTR) return r;
    }
    r.started = true;
    return r;
}

/* tg_test_fork with the child's stderr captured */
static inline struct tg_child_read tg_test_run_in_child(void (*fn)(const void *), const void *arg) {
    return tg_test_fork(fn, arg, true);
}

/* The signal that ended the child; 0 when it exited (or never started). */
static inline int tg_child_signal(const struct tg_child_read *r) {
    return r->started && WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
}

/* Memory the child writes and the parent reads after it ended (zeroed); NULL
 * when there is none.  Free with tg_test_shared_free. */
static inline void *tg_test_shared_new(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    memset(p, 0, size);
    return p;
}

static inline void tg_test_shared_free(void *p, size_t size) {
    if (p) munmap(p, size);
}

static inline void tg_test_read_float(const void *addr) {
    volatile float f = *(const volatile float *)addr;
    (void)f;
}

static inline struct tg_child_read tg_test_read_in_child(const void *addr) {
    return tg_test_run_in_child(tg_test_read_float, addr);
}

/* The child was aborted (SIGABRT: an internal error) and its stderr has `what`. */
static inline bool tg_child_aborted(const struct tg_child_read *r, const char *what) {
    return r->started && WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGABRT && strstr(r->report, what) != NULL;
}

/* The child died of a memory fault (SIGSEGV, SIGBUS). */
static inline bool tg_child_faulted(const struct tg_child_read *r) {
    return r->started && WIFSIGNALED(r->status) && (WTERMSIG(r->status) == SIGSEGV || WTERMSIG(r->status) == SIGBUS);
}

/* The child failed and its stderr has `what` (a sanitizer's report). */
static inline bool tg_child_reported(const struct tg_child_read *r, const char *what) {
    return r->started && !(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) && strstr(r->report, what) != NULL;
}

#endif

/* Code that must crash, run in a child process where its crash cannot take
 * the test down: a stray host read (the access a checker or a memory guard
 * must catch; the child reads one float at addr with the kernel's default
 * fault handling, sanitizers install their own), or an internal error that
 * must abort.  The result says how the child ended and what it wrote to
 * stderr (a sanitizer's report, the error's message). */
#ifndef TG_TEST_CHILD_H
#define TG_TEST_CHILD_H

#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct tg_child_read {
    bool started;
    int status; /* as waitpid reports it */
    char report[8192];
};

/* Runs fn(arg) in a child process, its stderr captured; the child exits 0
 * when fn returns. */
static inline struct tg_child_read tg_test_run_in_child(void (*fn)(const void *), const void *arg) {
    struct tg_child_read r;
    memset(&r, 0, sizeof r);
    fflush(NULL);
    int pipefd[2];
    if (pipe(pipefd) != 0) return r;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        fn(arg);
        _exit(0);
    }
    close(pipefd[1]);
    size_t got = 0;
    ssize_t n;
    while (got < sizeof r.report - 1 && (n = read(pipefd[0], r.report + got, sizeof r.report - 1 - got)) > 0) {
        got += (size_t)n;
    }
    close(pipefd[0]);
    if (pid < 0) return r;
    waitpid(pid, &r.status, 0);
    r.started = true;
    return r;
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

/* The fork-a-child harness of tests/tg_test_child.h, which the ggml
 * differentials run ggml in: the parent waits for the child's end even when
 * signals keep interrupting it (libFuzzer's timer fires every second), reads
 * what the child left in shared memory only after that end, and reports how
 * the child ended; a child that writes much on stderr does not block. */
#include "tg_test.h"
#include "tg_test_child.h"

#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t ticks;

static void on_tick(int sig) {
    (void)sig;
    ticks++;
}

struct slow_job {
    int *result; /* shared */
};

/* ends after 200 ms and only then leaves its result */
static void slow_child(const void *arg) {
    const struct slow_job *job = arg;
    struct timespec pause = {0, 200 * 1000 * 1000};
    while (nanosleep(&pause, &pause) != 0) {
    }
    *job->result = 42;
}

static void aborting_child(const void *arg) {
    (void)arg;
    fprintf(stderr, "about to abort\n");
    abort();
}

static void chatty_child(const void *arg) {
    (void)arg;
    char line[1024];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\0';
    for (int i = 0; i < 512; i++) fprintf(stderr, "%s\n", line); /* 512 KB: eight pipes full */
}

static void waits_through_signals(void) {
    /* a handler without SA_RESTART, as libFuzzer installs its timer's */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tick;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, &old) == 0);
    struct itimerval every_5ms = {{0, 5000}, {0, 5000}}, off = {{0, 0}, {0, 0}};
    CHECK(setitimer(ITIMER_REAL, &every_5ms, NULL) == 0);
    int *result = tg_test_shared_new(sizeof *result);
    CHECK(result != NULL);
    if (result) {
        struct slow_job job = {result};
        struct tg_child_read child = tg_test_fork(slow_child, &job, false);
        CHECK(child.started && WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
        CHECK_MSG(*result == 42, "read the child's result before it ended: %d", *result);
        struct tg_child_read captured = tg_test_fork(slow_child, &job, true);
        CHECK(captured.started && WIFEXITED(captured.status) && WEXITSTATUS(captured.status) == 0);
    }
    CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
    CHECK(sigaction(SIGALRM, &old, NULL) == 0);
    CHECK(ticks > 10); /* the waits were interrupted */
    tg_test_shared_free(result, sizeof *result);
}

static void reports_how_it_ended(void) {
    struct tg_child_read r = tg_test_run_in_child(aborting_child, NULL);
    CHECK(tg_child_signal(&r) == SIGABRT);
    CHECK(tg_child_aborted(&r, "about to abort"));
    struct tg_child_read chatty = tg_test_run_in_child(chatty_child, NULL);
    CHECK(chatty.started && tg_child_signal(&chatty) == 0 && WEXITSTATUS(chatty.status) == 0);
    CHECK(strlen(chatty.report) == sizeof chatty.report - 1); /* the first bytes kept, the rest drained */
}

int main(void) {
    waits_through_signals();
    reports_how_it_ended();
    return tg_test_finish();
}

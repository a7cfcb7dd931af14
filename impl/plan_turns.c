/* The round robin of the canonical searches (plan-turns.h), on one thread
 * or several.
 *
 * Threads take tickets in order; a ticket gives a search its next slice,
 * and the turn's number comes from the search's own count of slices, not
 * from the ticket, so each search's j-th slice is turn j * n + its place
 * whichever thread runs it.  One lock guards the bookkeeping; a slice (two
 * placements' worth, tenths of a millisecond) runs outside it. */
#include "plan-turns.h"

#include "plan-offline-impl.h"
#include "tg-checks.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct job {
    const struct tg_turns *turns;
    long long limit;      /* turns numbered below it may run */
    long long last_slice; /* the work turn limit - 1 may do */
    long long next_ticket;
    long long answer_turn; /* LLONG_MAX: no answer yet */
    int answer_search;
    enum tg_canonical_result answer;
    long long *slices; /* per search: slices given out */
    bool *busy;        /* per search: a thread runs its slice */
    long long *effort; /* per turn given out: the work it did */
    long long effort_cap;
    bool out_of_memory; /* no room to record a turn: none more is taken */
    long long helper_turns;
    int active;        /* threads taking turns */
};

struct tg_turn_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake;   /* helpers: a job, or quit */
    pthread_cond_t change; /* a search's slice ended, or a thread left the job */
    struct job *job;       /* NULL between jobs */
    unsigned long generation;
    bool quit;
    int n_helpers;
    pthread_t *helper;
};

static bool past(double deadline) { return deadline > 0 && offline_now_seconds() > deadline; }

static void lock(struct tg_turn_pool *pool) {
    if (pool) pthread_mutex_lock(&pool->lock);
}

static void unlock(struct tg_turn_pool *pool) {
    if (pool) pthread_mutex_unlock(&pool->lock);
}

/* Takes turns until none is left to take: the budget's last, one past an
 * answer, or the deadline.  Called with the pool's lock held (pool NULL:
 * the only thread); returns with it held. */
static void take_turns(struct tg_turn_pool *pool, struct job *j, bool helper) {
    const struct tg_turns *t = j->turns;
    while (j->next_ticket < j->limit && j->next_ticket <= j->answer_turn && !j->out_of_memory && !past(t->deadline)) {
        if (j->next_ticket >= j->effort_cap) { /* grown with the turns taken, not the budget */
            const long long cap = j->effort_cap ? 2 * j->effort_cap : 64;
            long long *grown = realloc(j->effort, sizeof(long long) * (size_t)cap);
            if (!grown) {
                j->out_of_memory = true;
                break;
            }
            memset(grown + j->effort_cap, 0, sizeof(long long) * (size_t)(cap - j->effort_cap));
            j->effort = grown;
            j->effort_cap = cap;
        }
        const int k = (int)((t->first + j->next_ticket) % t->n);
        j->next_ticket++;
        while (j->busy[k]) pthread_cond_wait(&pool->change, &pool->lock); /* only with helpers */
        const long long turn = j->slices[k]++ * t->n + (k - t->first + t->n) % t->n;
        if (turn > j->answer_turn) continue;
        j->busy[k] = true;
        long long effort = turn == j->limit - 1 ? j->last_slice : t->slice;
        unlock(pool);
        const enum tg_canonical_result result = tg_canonical_run(t->search[k], &effort, t->deadline, NULL);
        lock(pool);
        j->busy[k] = false;
        if (pool) pthread_cond_broadcast(&pool->change);
        j->helper_turns += helper;
        j->effort[turn] = effort;
        /* a search stopped short of memory: the turns are not the ones the
         * budgets give, whichever search answers (the caller is told) */
        if (result == TG_CANONICAL_GAVE_UP && tg_canonical_out_of_memory(t->search[k])) j->out_of_memory = true;
        if (result != TG_CANONICAL_GAVE_UP && turn < j->answer_turn) {
            j->answer_turn = turn;
            j->answer_search = k;
            j->answer = result;
        }
    }
}

static void *helper_main(void *arg) {
    struct tg_turn_pool *pool = arg;
    pthread_mutex_lock(&pool->lock);
    unsigned long seen = 0; /* jobs count from 1: one begun before this thread started is still joined */
    for (;;) {
        while (!pool->quit && (pool->job == NULL || pool->generation == seen))
            pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->quit) break;
        seen = pool->generation;
        struct job *j = pool->job;
        j->active++;
        take_turns(pool, j, true);
        j->active--;
        pthread_cond_broadcast(&pool->change);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

struct tg_turn_pool *tg_turn_pool_new(int threads) {
    if (threads <= 1) return NULL;
    struct tg_turn_pool *pool = calloc(1, sizeof(*pool));
    pthread_t *helper = calloc((size_t)threads - 1, sizeof(pthread_t));
    if (!pool || !helper) {
        free(pool);
        free(helper);
        return NULL;
    }
    pool->helper = helper;
    if (pthread_mutex_init(&pool->lock, NULL) != 0) {
        free(helper);
        free(pool);
        return NULL;
    }
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->change, NULL);
    while (pool->n_helpers < threads - 1 && pthread_create(&helper[pool->n_helpers], NULL, helper_main, pool) == 0)
        pool->n_helpers++;
    if (pool->n_helpers == 0) { /* none started: the caller's thread alone */
        tg_turn_pool_free(pool);
        return NULL;
    }
    return pool;
}

void tg_turn_pool_free(struct tg_turn_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->quit = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int h = 0; h < pool->n_helpers; h++) pthread_join(pool->helper[h], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->change);
    pthread_mutex_destroy(&pool->lock);
    free(pool->helper);
    free(pool);
}

static void job_free(struct job *j) {
    if (!j) return;
    free(j->effort);
    free(j->slices);
    free(j->busy);
    free(j);
}

enum tg_canonical_result tg_turns_run(struct tg_turn_pool *pool, const struct tg_turns *turns, size_t *offset,
                                      struct tg_turns_report *report) {
    TG_ASSERT(turns->n > 0 && turns->slice > 0 && turns->first >= 0 && turns->first < turns->n,
              "round robin of %d searches from %d, slices of %lld", turns->n, turns->first, turns->slice);
    *report = (struct tg_turns_report){0, turns->first, 0, true};
    /* on the heap: the helpers reach it through the pool */
    struct job *j = calloc(1, sizeof(*j));
    if (!j) return TG_CANONICAL_GAVE_UP; /* no scratch memory (report says so) */
    *j = (struct job){.turns = turns, .limit = LLONG_MAX, .answer_turn = LLONG_MAX, .answer = TG_CANONICAL_GAVE_UP};
    if (turns->budget > 0) {
        j->limit = (turns->budget + turns->slice - 1) / turns->slice;
        j->last_slice = turns->budget - (j->limit - 1) * turns->slice;
    }
    j->slices = calloc((size_t)turns->n, sizeof(long long));
    j->busy = calloc((size_t)turns->n, sizeof(bool));
    if (!j->slices || !j->busy) {
        job_free(j);
        return TG_CANONICAL_GAVE_UP;
    }
    lock(pool);
    if (pool) {
        pool->job = j;
        pool->generation++;
        pthread_cond_broadcast(&pool->wake);
    }
    j->active++;
    take_turns(pool, j, false);
    j->active--;
    while (j->active > 0) pthread_cond_wait(&pool->change, &pool->lock); /* only with helpers */
    if (pool) pool->job = NULL;
    unlock(pool);
    /* Turns above the answer ran only beside it: not counted. */
    const long long counted = j->answer_turn != LLONG_MAX ? j->answer_turn + 1 : j->next_ticket;
    *report = (struct tg_turns_report){0, (int)((turns->first + counted) % turns->n), j->helper_turns,
                                       j->out_of_memory};
    for (long long t = 0; t < counted && t < j->effort_cap; t++) report->spent += j->effort[t];
    const enum tg_canonical_result answer = j->answer;
    if (answer == TG_CANONICAL_FOUND) {
        long long none = 1; /* the search is done: it only writes its plan again */
        tg_canonical_run(turns->search[j->answer_search], &none, 0, offset);
    }
    job_free(j);
    return answer;
}

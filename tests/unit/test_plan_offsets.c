/* The online offset planner (impl/plan.c): ggml's exact placements on one
 * chunk (hand-derived), global best fit across chunks, tail choice, chunking
 * at the max size, oversize tensors, merging, and more than 256 free blocks. */
#include "plan.h"
#include "tg_test.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t place(struct tg_planner *p, size_t size, int want_chunk) {
    struct tg_plan_addr a = {-1, 0};
    CHECK_OK(tg_planner_alloc(p, size, "t", &a));
    CHECK_MSG(a.chunk == want_chunk, "chunk %d, want %d", a.chunk, want_chunk);
    return a.offset;
}

static void release(struct tg_planner *p, int chunk, size_t offset, size_t size) {
    CHECK_OK(tg_planner_free(p, (struct tg_plan_addr){chunk, offset}, size, "t"));
}

/* Hand-derived from ggml's rules: interior best fit, ties to the later block,
 * tail block used only when no interior block fits. */
static void test_one_chunk_offsets(void) {
    struct tg_planner p;
    tg_planner_init(&p, 32, SIZE_MAX);
    CHECK(place(&p, 4, 0) == 0);    /* A: rounded to 32 */
    CHECK(place(&p, 64, 0) == 32);  /* B */
    CHECK(place(&p, 32, 0) == 96);  /* C */
    CHECK(place(&p, 20, 0) == 128); /* D */
    release(&p, 0, 32, 64);         /* B: hole [32, 96) */
    release(&p, 0, 128, 20);        /* D: merges into the tail, which now starts at 128 */
    CHECK(p.chunks[0].n_blocks == 2 && p.chunks[0].blocks[1].offset == 128);
    CHECK(place(&p, 32, 0) == 32);  /* E: the hole, not the tail */
    CHECK(place(&p, 32, 0) == 64);  /* F: rest of the hole */
    CHECK(p.chunks[0].n_blocks == 1);
    CHECK(place(&p, 64, 0) == 128); /* G: tail */
    CHECK(tg_planner_total_size(&p) == 192);
    tg_planner_release(&p);

    /* equal holes: ggml's "<=" picks the later one */
    tg_planner_init(&p, 16, SIZE_MAX);
    for (int i = 0; i < 5; i++) CHECK(place(&p, 16, 0) == (size_t)i * 16);
    release(&p, 0, 0, 16);
    release(&p, 0, 32, 16);
    CHECK(place(&p, 16, 0) == 32);
    CHECK(place(&p, 16, 0) == 0);
    CHECK(place(&p, 16, 0) == 80);
    tg_planner_release(&p);
}

/* The last block of a chunk is left out of the interior search even when it
 * is a closer fit (ggml keeps it for growth). */
static void test_last_block_excluded(void) {
    struct tg_planner p;
    tg_planner_init(&p, 16, 256);
    CHECK(place(&p, 256, 0) == 0);
    release(&p, 0, 0, 64);
    release(&p, 0, 128, 32);
    CHECK(place(&p, 32, 0) == 0); /* not 128, which would fit exactly */
    tg_planner_release(&p);
}

/* Tail rule across chunks: prefer the chunk where the tensor stays under the
 * high water mark; otherwise grow least. */
static void test_tail_choice_and_chunks(void) {
    struct tg_planner p;
    tg_planner_init(&p, 16, 256);
    CHECK(place(&p, 256, 0) == 0);  /* fills chunk 0 */
    CHECK(place(&p, 64, 1) == 0);   /* chunk 0 has no block: chunk 1 */
    release(&p, 0, 192, 64);        /* chunk 0 tail [192, 256) */
    CHECK(place(&p, 32, 0) == 192); /* stays under chunk 0's high water */
    CHECK(place(&p, 48, 1) == 64);  /* chunk 0 tail too small: grows chunk 1 */
    CHECK(tg_planner_chunk_size(&p, 0) == 256 && tg_planner_chunk_size(&p, 1) == 112);
    /* oversize tensor: a chunk of exactly its size */
    CHECK(place(&p, 1000, 2) == 0);
    CHECK(tg_planner_chunk_size(&p, 2) == 1008 && /* rounded */ p.chunks[2].n_blocks == 0);
    CHECK(place(&p, 16, 0) == 224); /* under chunk 0's high water beats growing chunk 1 */
    CHECK(tg_planner_chunk_size(&p, 3) == 0);
    tg_planner_release(&p);
}

/* Between two tails that both stay under their chunk's high water, the one
 * with the least slack wins, an exact fit (slack 0) included; the first such
 * tail is not kept once a tighter one shows (ggml's reuse factor). */
static void test_tail_least_slack(void) {
    struct tg_planner p;
    tg_planner_init(&p, 1, 100);
    CHECK(place(&p, 40, 0) == 0);  /* A */
    CHECK(place(&p, 30, 0) == 40); /* B: chunk 0 high water 70 */
    CHECK(place(&p, 90, 1) == 0);  /* C: chunk 0's tail [70, 100) too small */
    release(&p, 1, 0, 90);         /* chunk 1: [0, 100) free, high water 90 */
    release(&p, 0, 40, 30);        /* chunk 0: [40, 100) free, high water 70 */
    /* 20 bytes: slack 10 in chunk 0, 70 in chunk 1 */
    CHECK(place(&p, 20, 0) == 40);
    tg_planner_release(&p);

    tg_planner_init(&p, 1, 100);
    CHECK(place(&p, 10, 0) == 0);  /* A */
    CHECK(place(&p, 65, 0) == 10); /* B: chunk 0 high water 75, tail [75, 100) */
    CHECK(place(&p, 30, 1) == 0);  /* C: chunk 0's tail too small */
    release(&p, 1, 0, 30);         /* chunk 1: [0, 100) free, high water 30 */
    release(&p, 0, 10, 65);        /* chunk 0: [10, 100) free, high water 75 */
    /* 30 bytes: slack 35 in chunk 0, an exact fit (0) in chunk 1 */
    CHECK(place(&p, 30, 1) == 0);
    tg_planner_release(&p);
}

/* ggml resets the best fit per chunk (H4); the planner searches all chunks. */
static void test_global_best_fit(void) {
    struct tg_planner p;
    tg_planner_init(&p, 16, 128);
    CHECK(place(&p, 16, 0) == 0);
    CHECK(place(&p, 16, 0) == 16);
    CHECK(place(&p, 96, 0) == 32);
    CHECK(place(&p, 16, 1) == 0);
    CHECK(place(&p, 32, 1) == 16);
    CHECK(place(&p, 16, 1) == 48);
    CHECK(place(&p, 64, 1) == 64);
    release(&p, 0, 0, 16);
    release(&p, 0, 32, 96);
    release(&p, 1, 16, 32);
    release(&p, 1, 64, 64);
    CHECK(place(&p, 16, 0) == 0); /* the 16-byte hole of chunk 0, not chunk 1's 32 */
    CHECK(place(&p, 32, 1) == 16);
    tg_planner_release(&p);
}

static void test_merge_both_sides(void) {
    struct tg_planner p;
    tg_planner_init(&p, 8, SIZE_MAX);
    for (int i = 0; i < 4; i++) place(&p, 8, 0);
    release(&p, 0, 0, 8);
    release(&p, 0, 16, 8);
    CHECK(p.chunks[0].n_blocks == 3);
    release(&p, 0, 8, 8); /* joins [0,8) and [16,24) */
    CHECK(p.chunks[0].n_blocks == 2 && p.chunks[0].blocks[0].offset == 0 && p.chunks[0].blocks[0].size == 24);
    release(&p, 0, 24, 8); /* joins everything into the tail */
    CHECK(p.chunks[0].n_blocks == 1 && p.chunks[0].blocks[0].offset == 0);
    tg_planner_release(&p);
}

/* ggml aborts past 256 free blocks; the list grows instead. */
static void test_many_holes(void) {
    struct tg_planner p;
    tg_planner_init(&p, 32, SIZE_MAX);
    enum { N = 700 };
    for (int i = 0; i < N; i++) CHECK(place(&p, 32, 0) == (size_t)i * 32);
    for (int i = 0; i < N - 1; i += 2) release(&p, 0, (size_t)i * 32, 32);
    CHECK_MSG(p.chunks[0].n_blocks == N / 2 + 1, "%d blocks", p.chunks[0].n_blocks);
    /* every hole is taken again, highest first (ties go to the later block) */
    bool all_holes = true;
    for (int i = N - 2; i >= 0; i -= 2) {
        struct tg_plan_addr a;
        all_holes = all_holes && tg_planner_alloc(&p, 32, "t", &a) == TG_OK && a.offset == (size_t)i * 32;
    }
    CHECK(all_holes);
    CHECK(tg_planner_total_size(&p) == (size_t)N * 32);
    tg_planner_release(&p);
}

static void test_alignment_rounding(void) {
    struct tg_planner p;
    tg_planner_init(&p, 64, SIZE_MAX);
    size_t sizes[] = {1, 63, 64, 65, 200, 0, 7};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        struct tg_plan_addr a;
        CHECK_OK(tg_planner_alloc(&p, sizes[i], "t", &a));
        CHECK(a.offset % 64 == 0);
    }
    CHECK(tg_planner_total_size(&p) % 64 == 0);
    tg_planner_reset(&p);
    CHECK(tg_planner_total_size(&p) == 0 && p.n_chunks == 0);
    tg_planner_release(&p);
}

#ifndef NDEBUG
/* A double free is a broken invariant: debug builds stop with a message. */
static void test_double_free_aborts(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        struct tg_planner p;
        tg_planner_init(&p, 16, SIZE_MAX);
        struct tg_plan_addr a, b;
        tg_planner_alloc(&p, 16, "a", &a);
        tg_planner_alloc(&p, 16, "b", &b);
        tg_planner_free(&p, a, 16, "a");
        tg_planner_free(&p, a, 16, "a"); /* aborts here */
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %d", status);
}
#endif

int main(void) {
    test_one_chunk_offsets();
    test_last_block_excluded();
    test_tail_choice_and_chunks();
    test_tail_least_slack();
    test_global_best_fit();
    test_merge_both_sides();
    test_many_holes();
    test_alignment_rounding();
#ifndef NDEBUG
    test_double_free_aborts();
#endif
    return tg_test_finish();
}

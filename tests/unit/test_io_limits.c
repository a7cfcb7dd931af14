/* The reader's limits on sizes: lines (so that no token's length wraps an int),
 * element counts (so that the library's int64_t counts cannot overflow), and
 * byte sizes that agree between the reader and tg_nbytes. */
#include "tg-io.h"
#include "tg_test.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define HEAD "tgraph 1\n"
#define MAX_LINE ((size_t)1 << 20) /* IO_MAX_LINE in impl/graph_io-parse.h */

/* len SIZE_MAX: the text's strlen. */
static void check_rejected(const char *text, size_t len, int line, const char *says) {
    if (len == SIZE_MAX) len = strlen(text);
    struct tg_file *f = (struct tg_file *)1;
    tg_clear_error();
    CHECK_STATUS(tg_file_parse(text, len, "big.tg", &f), TG_ERR_INVALID);
    CHECK(f == NULL);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "big.tg:%d: ", line);
    CHECK_MSG(strncmp(tg_last_error(), prefix, strlen(prefix)) == 0, "message '%s' does not start with '%s'",
              tg_last_error(), prefix);
    CHECK_ERR_HAS(says);
}

/* A line of `fill` bytes of 'y' as a name= value (or an x- key, which the old
 * reader took at any length), built in memory. */
static void check_long_line(size_t fill, const char *key, bool accepted) {
    char head[64];
    int n = snprintf(head, sizeof head, HEAD "leaf 0 f32 4 1 1 1 none %s", key);
    size_t len = (size_t)n + fill + 1;
    char *text = malloc(len);
    if (!text) {
        CHECK_MSG(0, "no memory for a %zu-byte text", len);
        return;
    }
    memcpy(text, head, (size_t)n);
    memset(text + n, 'y', fill);
    text[len - 1] = '\n';
    struct tg_file *f = NULL;
    if (accepted) {
        CHECK_OK(tg_file_parse(text, len, "big.tg", &f));
        tg_file_free(f);
    } else {
        check_rejected(text, len, 2, "line is longer than 1048576 bytes");
    }
    free(text);
}

/* A name= token of n >= 2 GiB bytes, without 2 GiB of memory: one small file
 * of 'y' mapped again and again behind the line's start (an int length went
 * negative at 2^31 and crashed in memcpy, and wrapped to k at 2^32 + k). */
static void check_huge_token(size_t n_fill, size_t tail_y) {
    long page_l = sysconf(_SC_PAGESIZE);
    size_t page = page_l > 0 ? (size_t)page_l : 4096;
    const size_t piece = (size_t)2 << 20;
    if (n_fill % piece != 0 || piece % page != 0) {
        CHECK_MSG(0, "bad test setup");
        return;
    }
    FILE *tmp = tmpfile();
    if (!tmp) {
        printf("huge token skipped: no temporary file\n");
        return;
    }
    int fd = fileno(tmp);
    char *ys = malloc(piece);
    bool ok = ys != NULL;
    if (ok) {
        memset(ys, 'y', piece);
        ok = fwrite(ys, 1, piece, tmp) == piece && fflush(tmp) == 0;
    }
    free(ys);
    size_t total = page + n_fill + page;
    char *region = ok ? mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                      : MAP_FAILED;
    if (region == MAP_FAILED) {
        printf("huge token skipped: cannot reserve %zu bytes of address space\n", total);
        fclose(tmp);
        return;
    }
    for (size_t off = 0; ok && off < n_fill; off += piece) {
        ok = mmap(region + page + off, piece, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
    }
    if (ok) {
        static const char head[] = HEAD "leaf 0 f32 4 1 1 1 none name=";
        char *text = region + page - (sizeof head - 1);
        memcpy(text, head, sizeof head - 1);
        char *tail = region + page + n_fill;
        memset(tail, 'y', tail_y);
        tail[tail_y] = '\n';
        size_t len = (sizeof head - 1) + n_fill + tail_y + 1;
        check_rejected(text, len, 2, "line is longer than 1048576 bytes");
    } else {
        printf("huge token skipped: cannot map the file %zu times\n", n_fill / piece);
    }
    munmap(region, total);
    fclose(tmp);
}

static void check_nbytes(const char *text, int index, size_t want) {
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_parse(text, strlen(text), "q.tg", &f));
    if (!f) return;
    size_t got = tg_nbytes(f->tensors[index].tensor);
    CHECK_MSG(got == want, "tensor %d: tg_nbytes %zu, want %zu", index, got, want);
    tg_file_free(f);
}

int main(void) {
    /* Lines: at the limit accepted, past it refused with the line number. */
    size_t head_len = strlen("leaf 0 f32 4 1 1 1 none x-k=");
    check_long_line(MAX_LINE - head_len, "x-k=", true);
    check_long_line(MAX_LINE - head_len + 1, "x-k=", false);
    check_long_line(MAX_LINE, "name=", false);
    if (sizeof(size_t) >= 8) {
        check_huge_token((size_t)1 << 31, 0);     /* 2^31: a negative int length */
        check_huge_token((size_t)1 << 32, 5);     /* 2^32 + 5: wrapped to 5 */
    }

    /* Element counts: INT64_MAX elements are fine, one more dimension of 2 is not. */
    check_rejected(HEAD "leaf 0 i8 4611686018427387904 2 1 1 none name=a\n"
                        "node 1 i8 4611686018427387904 2 1 1 cont src=0 name=b\n",
                   SIZE_MAX, 2, "NE0 * NE1 * NE2 * NE3 must be at most 9223372036854775807");
    check_rejected(HEAD "leaf 0 i8 2 2 2 2305843009213693952 none\n", SIZE_MAX, 2, "more elements than");
    check_rejected(HEAD "leaf 0 i8 4 1 1 1 none\nleaf 1 i8 3037000500 1 3037000500 1 none nb=1,1,1,1\n", SIZE_MAX, 3,
                   "more elements than");
    struct tg_file *f = NULL;
    static const char most[] = HEAD "leaf 0 i8 9223372036854775807 1 1 1 none\nleaf 1 i8 1 3 1 3074457345618258602 "
                                    "none nb=1,1,1,1\n";
    CHECK_OK(tg_file_parse(most, sizeof most - 1, "most.tg", &f));
    if (f) CHECK(tg_nelements(f->tensors[0].tensor) == INT64_MAX);
    tg_file_free(f);
    /* The file test the command-line tools also read. */
    f = (struct tg_file *)1;
    CHECK_STATUS(tg_file_load("tests/io/elements_past_int64.tg", &f), TG_ERR_INVALID);
    CHECK_ERR_HAS("tests/io/elements_past_int64.tg:2: ");
    CHECK_ERR_HAS("more elements than a signed 64-bit integer holds");

    /* Byte sizes of block types: (ne0 / block) * nb0, as the reader checks them;
     * ne0 * nb0 first wrapped (to 2^56 here, and to 0 for the strided q4_0). */
    check_nbytes(HEAD "leaf 0 q4_0 1152921504606846976 1 1 1 none name=w buf=weights\n", 0,
                 (size_t)(1152921504606846976ull / 32 * 18));
    check_nbytes(HEAD "leaf 0 q4_0 1152921504606846976 1 1 1 none name=w buf=weights\n"
                      "leaf 1 q4_0 32 1 1 1 none nb=576460752303423488,576460752303423488,576460752303423488,"
                      "576460752303423488 name=z\n"
                      "node 2 q4_0 32 1 1 1 view src=1 view=1:0 name=v\n",
                 1, (size_t)576460752303423488ull);
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.mem_size = 0, .no_alloc = true});
    const int64_t ne[4] = {(int64_t)1 << 60, 1, 1, 1};
    struct tg_tensor *t = ctx ? tg_new_tensor_raw(ctx, TG_TYPE_Q8_0, ne, NULL) : NULL;
    CHECK(t != NULL);
    if (t) CHECK(tg_nbytes(t) == ((size_t)1 << 60) / 32 * 34);
    tg_context_free(ctx);
    /* Past size_t under the same rule: refused by the reader. */
    check_rejected(HEAD "leaf 0 q4_0 288230376151711744 1 1 1 none nb=4096,4096,4096,4096\n", SIZE_MAX, 2,
                   "overflows size_t");
    return tg_test_finish();
}

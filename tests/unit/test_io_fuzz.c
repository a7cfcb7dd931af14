/* Robustness of the reader on damaged corpus files: truncations at many offsets
 * and random byte changes.  Every input either loads (and then round-trips
 * canonically) or is refused with TG_ERR_INVALID and "NAME:LINE: sentence";
 * nothing crashes or leaks (run under ASan to see the latter).  Fixed seed, so
 * a failure reproduces. */
#include "tg-io.h"
#include "tg_test.h"

#include <stdint.h>

static const char *const corpus[] = {
    "corpus/graphs/llama-tiny-prefill32.tg",      "corpus/graphs/tinyllama-1.1b-prefill512.tg",
    "corpus/graphs/tinyllama-1.1b-decode.tg",     "corpus/graphs/llama-7b-prefill512-flash.tg",
    "corpus/graphs/llama-7b-decode-flash.tg",
};

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static char *read_all(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(fp);
    *len = (size_t)n;
    return s;
}

static int loaded, refused, bad_outcomes;

/* One damaged input: refused properly, or loaded and stable under write/read. */
static void try_input(const char *text, size_t len, const char *what) {
    struct tg_file *f = NULL;
    enum tg_status st = tg_file_parse(text, len, "damaged.tg", &f);
    if (st != TG_OK) {
        refused++;
        bool good = st == TG_ERR_INVALID && f == NULL && strncmp(tg_last_error(), "damaged.tg:", 11) == 0 &&
                    strchr(tg_last_error() + 11, ':') != NULL && strlen(tg_last_error()) > 20;
        if (!good) bad_outcomes++;
        CHECK_MSG(good, "%s: status %s, message '%s'", what, tg_status_name(st), tg_last_error());
        return;
    }
    loaded++;
    size_t len1 = 0, len2 = 0;
    char *w1 = tg_file_write_mem(f, &len1);
    struct tg_file *f2 = w1 ? tg_file_read_mem(w1, len1, "rewritten") : NULL;
    char *w2 = f2 ? tg_file_write_mem(f2, &len2) : NULL;
    bool stable = w1 && f2 && w2 && len1 == len2 && memcmp(w1, w2, len1) == 0 &&
                  f2->n_tensors == f->n_tensors && f2->graph->n_nodes == f->graph->n_nodes;
    if (!stable) bad_outcomes++;
    CHECK_MSG(stable, "%s: loaded but does not round-trip: %s", what, tg_last_error());
    free(w1);
    free(w2);
    tg_file_free(f2);
    tg_file_free(f);
}

/* Characters that matter to the grammar, so changes hit the parser's branches. */
static char interesting_byte(void) {
    static const char pool[] = " \n\t,=:-@#x09azZ\r\0\xff";
    uint64_t r = next_random();
    if (r % 4 == 0) return (char)(r >> 8);
    return pool[(r >> 8) % (sizeof pool - 1)];
}

int main(void) {
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) {
        size_t len = 0;
        char *text = read_all(corpus[c], &len);
        CHECK_MSG(text != NULL, "cannot read %s", corpus[c]);
        if (!text) continue;
        char what[160];

        /* Truncations: every other offset of the small file, a spread over the large ones. */
        size_t step = c == 0 ? 2 : len / 150 + 1;
        for (size_t cut = 0; cut < len; cut += step) {
            snprintf(what, sizeof what, "%s cut at %zu", corpus[c], cut);
            try_input(text, cut, what);
        }

        /* Random byte changes, 1 to 4 per input, on a copy. */
        char *copy = malloc(len);
        int rounds = c == 0 ? 1000 : 120;
        for (int round = 0; copy && round < rounds; round++) {
            memcpy(copy, text, len);
            int n_changes = 1 + (int)(next_random() % 4);
            size_t first_pos = 0;
            for (int k = 0; k < n_changes; k++) {
                size_t pos = (size_t)(next_random() % len);
                if (k == 0) first_pos = pos;
                copy[pos] = interesting_byte();
            }
            snprintf(what, sizeof what, "%s round %d (first change at %zu)", corpus[c], round, first_pos);
            try_input(copy, len, what);
        }
        free(copy);
        free(text);
    }
    /* Both outcomes happened, so the harness exercised the parser's failures and
     * its successes. */
    CHECK(loaded > 100 && refused > 1000);
    CHECK(bad_outcomes == 0);
    printf("damaged inputs: %d loaded, %d refused\n", loaded, refused);
    return tg_test_finish();
}

/* The fuzzers rely on the generator turning almost any bytes into a real case:
 * over random inputs of random lengths, at least 95% must decode to a valid,
 * non-trivial case (a graph with a computed node).  Prints the measured rates. */
#include "tg-gen.h"
#include "tg_test.h"

int main(void) {
    enum { N = 2000 };
    uint64_t x = 0x243f6a8885a308d3ull;
    int nontrivial = 0, two_or_more = 0, decoded = 0;
    long long nodes = 0;
    struct tg_gen_options opts = tg_gen_default_options();
    for (int i = 0; i < N; i++) {
        uint8_t buf[512];
        size_t len = 16 + (size_t)(i * 7919 % 497);
        for (size_t k = 0; k < len; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[k] = (uint8_t)x;
        }
        struct tg_gen_case *c = NULL;
        if (tg_gen_case_from_bytes(buf, len, &opts, &c) != TG_OK) continue;
        decoded++;
        int computed = 0;
        for (int n = 0; n < c->graph->n_nodes; n++) computed += !tg_op_is_view(c->graph->nodes[n]->op);
        nontrivial += computed >= 1;
        two_or_more += computed >= 2;
        nodes += c->graph->n_nodes;
        tg_gen_case_free(c);
    }
    double rate = 100.0 * nontrivial / N;
    printf("decode rate: %d of %d random inputs decoded, %d (%.1f%%) to a graph with a computed node, %d (%.1f%%) "
           "with two or more, %.1f nodes on average\n", decoded, N, nontrivial, rate, two_or_more,
           100.0 * two_or_more / N, (double)nodes / (decoded ? decoded : 1));
    CHECK(decoded == N);
    CHECK_MSG(rate >= 95.0, "only %.1f%% of random inputs decode to a non-trivial case", rate);
    return tg_test_finish();
}

/* Fuzz target for the `.tg` reader.  Properties: no crash, no leak; a rejected
 * input always leaves a message that names the input and a line; every node
 * of an accepted input holds its op's rules (tg_op_validate); an accepted
 * input writes out canonically, and the canonical text reads back and writes
 * out byte-identically (write(read(x)) is a fixed point). */
#include "tg-io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_tg_read: %s (last error: %s)\n", what, tg_last_error());
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_clear_error();
    struct tg_file *f = tg_file_read_mem((const char *)data, size, "fuzz.tg");
    if (!f) {
        const char *msg = tg_last_error();
        if (msg[0] == '\0') fail("rejected without a message");
        if (strncmp(msg, "fuzz.tg:", 8) != 0) fail("message does not name the input and line");
        return 0;
    }
    for (int i = 0; i < f->graph->n_nodes; i++) {
        if (tg_op_validate(f->graph->nodes[i]) != TG_OK) fail("accepted a node that breaks a rule of its op");
    }
    size_t len1 = 0, len2 = 0;
    char *text1 = tg_file_write_mem(f, &len1);
    if (!text1) fail("accepted input could not be written");
    struct tg_file *g = tg_file_read_mem(text1, len1, "canonical.tg");
    if (!g) fail("canonical text does not read back");
    if (g->graph->n_nodes != f->graph->n_nodes || g->graph->n_leafs != f->graph->n_leafs) {
        fail("canonical text changes the node or leaf count");
    }
    char *text2 = tg_file_write_mem(g, &len2);
    if (!text2) fail("canonical graph could not be written");
    if (len1 != len2 || memcmp(text1, text2, len1) != 0) fail("write(read(write(read(x)))) differs");
    free(text1);
    free(text2);
    tg_file_free(g);
    tg_file_free(f);
    return 0;
}

/* tg-fuzz-decode: prints what a fuzz input (or a property seed) decodes to, so a
 * crash can be read: the buffer types, the buffer ids and the graph as `.tg`,
 * and for fuzz_sched the backend setup and the pins it would apply.
 *
 *   tg-fuzz-decode [--target alloc|exec|sched] FILE
 *   tg-fuzz-decode [--target ...] --seed N        (a property-test seed) */
#include "tg-gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHED_SETUP_BYTES 40 /* as fuzz/targets/fuzz_sched.c */

static void print_sched_setup(const uint8_t *d, size_t n) {
    size_t at = 0;
#define NEXT() (at < n ? d[at++] : 0)
    int n_sims = NEXT() % 4;
    printf("# fuzz_sched setup: %d sim device(s) + cpu\n", n_sims);
    for (int i = 0; i < n_sims; i++) {
        uint8_t b = NEXT();
        uint64_t mask = 0;
        for (int k = 0; k < 8; k++) mask = mask << 8 | NEXT();
        printf("#   sim%d: alignment %zu, alloc pad %d, shares the host buffer type %s, %s, ops:", i, (size_t)32 << (b % 4),
               (b >> 2) & 1 ? 64 : 0, ((b >> 3) & 7) == 0 ? "yes" : "no", (b >> 6) & 1 ? "synchronous" : "async");
        for (int op = 1; op < TG_OP_COUNT; op++) {
            if ((mask >> (op % 64)) & 1) printf(" %s", tg_op_name((enum tg_op)op));
        }
        printf("\n");
    }
    int pipeline = NEXT() & 1;
    int offload = NEXT() & 1;
    printf("#   pipeline copies: %s, op offload: %s\n", pipeline ? "4" : "1", offload ? "on" : "off");
    int n_pins = NEXT() % 4;
    printf("#   pins (node index -> backend index, applied for each of the two rounds):");
    for (int k = 0; k < n_pins; k++) {
        int node = NEXT();
        int backend = NEXT();
        printf(" node%%n=%d->%d", node, backend % (n_sims + 1));
    }
    printf("\n");
#undef NEXT
}

int main(int argc, char **argv) {
    const char *target = "alloc", *path = NULL;
    long long seed = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) target = argv[++i];
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = atoll(argv[++i]);
        else if (argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr, "usage: tg-fuzz-decode [--target alloc|exec|sched] FILE | --seed N\n");
            return 2;
        }
    }
    uint8_t *data = NULL;
    size_t n = 0;
    if (seed >= 0) {
        n = TG_GEN_SEED_BYTES;
        data = malloc(n);
        tg_gen_seed_bytes((uint64_t)seed, data, n);
    } else if (path) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "tg-fuzz-decode: cannot open %s\n", path);
            return 2;
        }
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        data = malloc(len > 0 ? (size_t)len : 1);
        n = data ? fread(data, 1, (size_t)(len > 0 ? len : 0), f) : 0;
        fclose(f);
    } else {
        fprintf(stderr, "usage: tg-fuzz-decode [--target alloc|exec|sched] FILE | --seed N\n");
        return 2;
    }
    struct tg_gen_options opts = tg_gen_default_options();
    const uint8_t *graph_bytes = data;
    size_t graph_n = n;
    if (strcmp(target, "sched") == 0) {
        print_sched_setup(data, n < SCHED_SETUP_BYTES ? n : SCHED_SETUP_BYTES);
        opts.computable = true;
        opts.max_tensor_bytes = 1u << 16;
        graph_bytes = data + (n < SCHED_SETUP_BYTES ? n : SCHED_SETUP_BYTES);
        graph_n = n - (size_t)(graph_bytes - data);
    } else if (strcmp(target, "exec") == 0) {
        opts.computable = true;
        opts.max_tensor_bytes = 1u << 18;
        printf("# fuzz_exec policy: %s\n", n && (data[0] & 1) ? "best" : "ggml");
        if (n) {
            graph_bytes++;
            graph_n--;
        }
    } else {
        opts.max_tensor_bytes = 1u << 20;
    }
    struct tg_gen_case *c = NULL;
    if (tg_gen_case_from_bytes(graph_bytes, graph_n, &opts, &c) != TG_OK) {
        fprintf(stderr, "tg-fuzz-decode: %s\n", tg_last_error());
        free(data);
        return 1;
    }
    char *text = tg_gen_case_to_text(c);
    if (text) fputs(text, stdout);
    free(text);
    tg_gen_case_free(c);
    free(data);
    return 0;
}

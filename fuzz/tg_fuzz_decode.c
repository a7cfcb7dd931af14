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
    if (strcmp(target, "sched") == 0) {
        char *text = tg_gen_sched_case_to_text(data, n);
        if (text) fputs(text, stdout);
        free(text);
        free(data);
        return text ? 0 : 1;
    }
    struct tg_gen_options opts = tg_gen_target_options(target);
    const uint8_t *graph_bytes = data;
    size_t graph_n = n;
    if (strcmp(target, "exec") == 0) {
        printf("# fuzz_exec policy: %s\n", n && (data[0] & 1) ? "best" : "ggml");
        if (n) {
            graph_bytes++;
            graph_n--;
        }
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

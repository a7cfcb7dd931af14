/* Stands in for the checks against ggml when the build has none
 * (cmake/tg_ggml.cmake): `ctest -L ggml` then reports one skipped test and
 * why, where it would otherwise pass having run nothing. */
#include <stdio.h>

int main(int argc, char **argv) {
    printf("skipped: checks against ggml %s\n", argc > 1 ? argv[1] : "off");
    return 77; /* ctest: SKIP_RETURN_CODE */
}

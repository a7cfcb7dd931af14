/* AFL++ driver in persistent mode with the shared-memory test case buffer:
 * compile with afl-clang-fast (or afl-cc) together with one fuzz target. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef __AFL_FUZZ_TESTCASE_LEN
/* Built without AFL++'s compiler: read one input from stdin. */
int main(void) {
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, stdin);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}
#else
__AFL_FUZZ_INIT();

int main(void) {
    __AFL_INIT();
    const uint8_t *buf = __AFL_FUZZ_TESTCASE_BUF;
    while (__AFL_LOOP(10000)) {
        size_t len = (size_t)__AFL_FUZZ_TESTCASE_LEN;
        LLVMFuzzerTestOneInput(buf, len);
    }
    return 0;
}
#endif

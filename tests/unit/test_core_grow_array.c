/* tg_grow_array grows geometrically: an array filled a few entries at a time
 * (the scheduler's memo pool, tensor by tensor) is reallocated O(log n)
 * times, not once per call, which was quadratic wherever realloc copies
 * (under ASan: `plan` of a 100,000-node chain took 35 s and 1.6 GB). */
#include "tg-impl.h"
#include "tg_test.h"

int main(void) {
    int *a = NULL, cap = 0, reallocs = 0;
    bool ok = true;
    for (int n = 1; n <= 100000 && ok; n++) {
        int before = cap;
        ok = tg_grow_array((void **)&a, &cap, n, sizeof *a);
        if (ok) a[n - 1] = n; /* the contents survive each growth */
        reallocs += cap != before;
    }
    CHECK(ok);
    CHECK_MSG(reallocs <= 20, "%d reallocations for 100000 one-by-one growths", reallocs);
    CHECK(cap >= 100000);
    bool kept = true;
    for (int i = 0; ok && i < 100000; i++) kept &= a[i] == i + 1;
    CHECK(kept);
    /* a request far beyond twice the capacity gets exactly what it asks */
    int *b = NULL, cap_b = 0;
    CHECK(tg_grow_array((void **)&b, &cap_b, 1000, sizeof *b) && cap_b == 1000);
    CHECK(tg_grow_array((void **)&b, &cap_b, 5000, sizeof *b) && cap_b == 5000);
    CHECK(tg_grow_array((void **)&b, &cap_b, 5001, sizeof *b) && cap_b == 10000);
    CHECK(tg_grow_array((void **)&b, &cap_b, 0, sizeof *b) && cap_b == 10000);
    free(a);
    free(b);
    return tg_test_finish();
}

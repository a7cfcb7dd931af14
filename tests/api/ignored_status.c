/* Compiled by tests/api/tests.cmake, not run: dropping a status must not
 * compile under -Werror=unused-result (TG_NODISCARD), while using it does
 * (-DUSE_STATUS), so the failure is the dropped status and nothing else. */
#include <tgsched/tg-sched.h>

int reserve_twice(tg_sched *sched, struct tg_graph *g);

int reserve_twice(tg_sched *sched, struct tg_graph *g) {
#ifdef USE_STATUS
    return tg_sched_reserve(sched, g) == TG_OK && tg_sched_alloc_graph(sched, g) == TG_OK;
#else
    tg_sched_reserve(sched, g); /* a port of ggml code that ignored the bool */
    return 1;
#endif
}

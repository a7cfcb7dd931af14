/* Backends for the `tgsched` verbs, from a short spec:
 *
 *   SPEC    := ITEM[,ITEM...]          priority order, the last must be cpu
 *   ITEM    := cpu | sim:NAME[:OPT...]
 *   OPT     := ops=all | ops=OP+OP...  supported ops (default all)
 *            | align=N | pad=N | max=N buffer alignment, alloc padding, max buffer size (K/M/G suffixes)
 *            | offload=N               claim host-weight ops at batch >= N
 *            | host                    share the CPU buffer type (a BLAS-like backend)
 *            | sync                    no worker thread
 *
 * e.g. `sim:gpu0:ops=all,cpu` or `sim:gpu0:max=1G,sim:gpu1:ops=mul_mat+add,cpu`. */
#ifndef TG_BACKEND_SPEC_H
#define TG_BACKEND_SPEC_H

#include "tg-backend.h"

#define SPEC_MAX_BACKENDS 16

struct backend_set {
    int n;
    tg_backend *backends[SPEC_MAX_BACKENDS];
    char names[SPEC_MAX_BACKENDS][32];
};

/* Builds the backends of spec; on failure nothing is left allocated and the
 * message says which item is wrong. */
enum tg_status backend_set_from_spec(const char *spec, struct backend_set *set);
/* Plan-only backends (plan, check): ops without kernels are accepted. */
void backend_set_plan_only(struct backend_set *set);
void backend_spec_sims_plan_only(bool on);
/* Default when no spec is given: one sim device (all ops) per name of the
 * file's `backends` line except the last, which is the CPU. */
enum tg_status backend_set_from_names(char names[][32], int n, struct backend_set *set);
void backend_set_free(struct backend_set *set);
/* Index of the backend called name, -1 when absent. */
int backend_set_find(const struct backend_set *set, const char *name);

#endif

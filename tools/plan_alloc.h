/* `.tg` files that state a graph allocator's setup (`buft` and `buffers`
 * lines: a generated case, a ggml defect's reproducer): `plan` and `check`
 * plan them with the graph allocator alone, with the file's buffer types and
 * buffer ids, as ggml_gallocr_reserve_n would, instead of through the
 * scheduler. */
#ifndef TG_PLAN_ALLOC_H
#define TG_PLAN_ALLOC_H

#include "plan_session.h"

/* Whether the file (read by session_parse_args) states an allocator setup
 * (false when it cannot be parsed: the scheduler path then reports the error). */
bool plan_alloc_is_case(const struct session_options *opt);
/* Plans (and with check, judges with every oracle checker) and prints the
 * report or the JSON document (docs/json.md); returns the verb's exit code.
 * Options it does not use (all but --plan and --json) are usage errors. */
int plan_alloc_run(const struct session_options *opt, bool check);

#endif

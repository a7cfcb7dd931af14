/* Interval files in MiniMalloc's CSV format (`tgsched plan FILE.csv`,
 * `tgsched check FILE.csv`): buffers with a size and a lifetime, planned by
 * the interval planner (tg-plan.h), for a capacity when one is given, and
 * with check judged by the oracle's interval checker. */
#ifndef TG_PLAN_INTERVALS_TOOL_H
#define TG_PLAN_INTERVALS_TOOL_H

#include <stdbool.h>

/* The CSV file the arguments name (NULL when they name none): the verbs
 * hand such a call to plan_intervals_run before parsing graph options. */
const char *plan_intervals_path(int argc, char **argv);
/* Parses the interval options, plans (and with check, judges) and prints the
 * report or the JSON document (docs/json.md); returns the verb's exit code. */
int plan_intervals_run(int argc, char **argv, bool check);

#endif

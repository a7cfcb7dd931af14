/* Parses `--backends` specs into CPU and sim backends (see backend_spec.h). */
#include "backend_spec.h"

#include "tg-cpu.h"
#include "tg-sim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_size(const char *s, size_t *out) {
    if (!isdigit((unsigned char)*s)) return false; /* strtoull takes " -5" as 2^64 - 5 */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return false;
    unsigned long long mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1ull << 10; end++; break;
    case 'M': mul = 1ull << 20; end++; break;
    case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (*end != '\0' || (mul > 1 && v > (unsigned long long)SIZE_MAX / mul)) return false;
    *out = (size_t)(v * mul);
    return true;
}

static enum tg_status parse_ops(const char *list, struct tg_sim_params *p, const char *item) {
    if (strcmp(list, "all") == 0) {
        p->supported_ops_all = true;
        return TG_OK;
    }
    p->supported_ops_all = false;
    memset(p->supported_ops, 0, sizeof p->supported_ops);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *op = strtok_r(buf, "+", &save); op; op = strtok_r(NULL, "+", &save)) {
        enum tg_op o = tg_op_from_name(op);
        if (o == TG_OP_COUNT) return tg_fail(TG_ERR_INVALID, "--backends item '%s': unknown op '%s'", item, op);
        p->supported_ops[o] = true;
    }
    return TG_OK;
}

static enum tg_status parse_sim(char *item, const char *orig, struct tg_sim_params *p, char *name, size_t name_len) {
    tg_sim_params_default(p);
    char *save = NULL;
    strtok_r(item, ":", &save); /* "sim" */
    char *n = strtok_r(NULL, ":", &save);
    if (!n || !*n) return tg_fail(TG_ERR_INVALID, "--backends item '%s': a sim device needs a name (sim:NAME)", orig);
    if (strlen(n) >= name_len) /* --layers-on and the report name it whole */
        return tg_fail(TG_ERR_INVALID, "--backends item '%s': the name is longer than %zu characters", orig, name_len - 1);
    for (const char *c = n; *c; c++) /* as a .tg file's backends line takes them (docs/graph-format.md) */
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.' && *c != '-')
            return tg_fail(TG_ERR_INVALID, "--backends item '%s': a name is made of letters, digits, '_', '.' and '-'",
                           orig);
    snprintf(name, name_len, "%s", n);
    for (char *opt = strtok_r(NULL, ":", &save); opt; opt = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(opt, '=');
        const char *val = eq ? eq + 1 : "";
        if (eq) *eq = '\0';
        size_t num = 0;
        bool numeric = eq && parse_size(val, &num);
        if (strcmp(opt, "ops") == 0 && eq) {
            enum tg_status st = parse_ops(val, p, orig);
            if (st != TG_OK) return st;
        } else if (strcmp(opt, "align") == 0 && numeric && num > 0 && (num & (num - 1)) == 0) {
            p->alignment = num;
        } else if (strcmp(opt, "pad") == 0 && numeric) {
            p->alloc_pad = num;
        } else if (strcmp(opt, "max") == 0 && numeric && num > 0) {
            p->max_buffer_size = num;
        } else if (strcmp(opt, "offload") == 0 && numeric) {
            p->offload_min_batch = (int64_t)num;
        } else if (strcmp(opt, "host") == 0 && !eq) {
            p->share_host_buffer_type = true;
        } else if (strcmp(opt, "sync") == 0 && !eq) {
            p->synchronous = true;
        } else {
            return tg_fail(TG_ERR_INVALID, "--backends item '%s': bad option '%s%s%s' (ops=all|OP+OP, align=POW2, "
                           "pad=N, max=N[K|M|G], offload=N, host, sync)", orig, opt, eq ? "=" : "", val);
        }
    }
    return TG_OK;
}

static enum tg_status add_backend(struct backend_set *set, tg_backend *b, const char *name, const char *item) {
    if (!b) return tg_fail(TG_ERR_INVALID, "--backends item '%s': could not create the backend: %s", item, tg_last_error());
    if (backend_set_find(set, name) >= 0) {
        tg_backend_free(b);
        return tg_fail(TG_ERR_INVALID, "--backends: the name '%s' is used twice", name);
    }
    set->backends[set->n] = b;
    snprintf(set->names[set->n], sizeof set->names[set->n], "%s", name);
    set->n++;
    return TG_OK;
}

static bool sims_plan_only;

/* Sim devices read their plan-only flag at creation: set it before building. */
void backend_spec_sims_plan_only(bool on) { sims_plan_only = on; }

enum tg_status backend_set_from_spec(const char *spec, struct backend_set *set) {
    memset(set, 0, sizeof *set);
    char buf[2048];
    if (!spec || !*spec || strlen(spec) >= sizeof buf) return tg_fail(TG_ERR_INVALID, "--backends: empty or too long spec");
    snprintf(buf, sizeof buf, "%s", spec);
    enum tg_status st = TG_OK;
    bool saw_cpu_last = false;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item && st == TG_OK; item = strtok_r(NULL, ",", &save)) {
        char orig[256];
        snprintf(orig, sizeof orig, "%s", item);
        if (set->n == SPEC_MAX_BACKENDS) {
            st = tg_fail(TG_ERR_INVALID, "--backends: more than %d backends", SPEC_MAX_BACKENDS);
        } else if (strcmp(item, "cpu") == 0) {
            st = add_backend(set, tg_backend_cpu_new(), "cpu", orig);
            saw_cpu_last = true;
            continue;
        } else if (strncmp(item, "sim:", 4) == 0) {
            struct tg_sim_params p;
            char name[32];
            st = parse_sim(item, orig, &p, name, sizeof name);
            if (st == TG_OK) {
                p.name = name;
                p.plan_only = sims_plan_only;
                st = add_backend(set, tg_backend_sim_new(&p), name, orig);
            }
        } else {
            st = tg_fail(TG_ERR_INVALID, "--backends item '%s': expected 'cpu' or 'sim:NAME[:OPT...]'", orig);
        }
        saw_cpu_last = false;
    }
    if (st == TG_OK && !saw_cpu_last) st = tg_fail(TG_ERR_INVALID, "--backends '%s': the last backend must be cpu", spec);
    if (st != TG_OK) backend_set_free(set);
    return st;
}

enum tg_status backend_set_from_names(char names[][32], int n, struct backend_set *set) {
    memset(set, 0, sizeof *set);
    if (n < 1 || n > SPEC_MAX_BACKENDS) return tg_fail(TG_ERR_INVALID, "graph names %d backends (1..%d allowed)", n, SPEC_MAX_BACKENDS);
    for (int i = 0; i < n; i++) {
        enum tg_status st;
        if (i == n - 1) {
            st = add_backend(set, tg_backend_cpu_new(), names[i], names[i]);
        } else {
            struct tg_sim_params p;
            tg_sim_params_default(&p);
            p.name = names[i];
            p.plan_only = sims_plan_only;
            st = add_backend(set, tg_backend_sim_new(&p), names[i], names[i]);
        }
        if (st != TG_OK) {
            backend_set_free(set);
            return st;
        }
    }
    return TG_OK;
}

void backend_set_plan_only(struct backend_set *set) {
    for (int i = 0; i < set->n; i++) {
        tg_backend_cpu_set_plan_only(set->backends[i], true); /* no-op for non-CPU backends */
    }
}

void backend_set_free(struct backend_set *set) {
    for (int i = 0; i < set->n; i++) tg_backend_free(set->backends[i]);
    memset(set, 0, sizeof *set);
}

int backend_set_find(const struct backend_set *set, const char *name) {
    for (int i = 0; i < set->n; i++) {
        if (strcmp(set->names[i], name) == 0) return i;
    }
    return -1;
}

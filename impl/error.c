/* Uniform error reporting: a status code plus a thread-local message, and the
 * log hook used for debug output. */
#include "tg.h"

#include <stdarg.h>
#include <stdio.h>

/* Room for a message around a path as long as Linux allows (PATH_MAX, 4096):
 * a longer path pushed the reason out of the message. */
static _Thread_local char last_error[8192];

static tg_log_fn log_fn;
static void *log_user;

const char *tg_status_name(enum tg_status s) {
    switch (s) {
    case TG_OK: return "TG_OK";
    case TG_ERR_INVALID: return "TG_ERR_INVALID";
    case TG_ERR_ALLOC: return "TG_ERR_ALLOC";
    case TG_ERR_STALE: return "TG_ERR_STALE";
    case TG_ERR_UNSUPPORTED: return "TG_ERR_UNSUPPORTED";
    case TG_ERR_ABORTED: return "TG_ERR_ABORTED";
    case TG_ERR_NEEDS_RESERVE: return "TG_ERR_NEEDS_RESERVE";
    case TG_ERR_IO: return "TG_ERR_IO";
    case TG_ERR_DEVICE: return "TG_ERR_DEVICE";
    }
    return "TG_ERR_UNKNOWN";
}

const char *tg_last_error(void) { return last_error; }

void tg_clear_error(void) { last_error[0] = '\0'; }

enum tg_status tg_fail(enum tg_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

void tg_set_log(tg_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void tg_logf(const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (log_fn) {
        log_fn(text, log_user);
    } else {
        fputs(text, stderr);
    }
}

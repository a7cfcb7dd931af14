/* Observers of the host's own accesses to host memory, internal (defined in
 * impl/backend.c, set by the simulated device).
 *
 * A device computing on host memory from another thread (a sim sharing the
 * host's buffer type, under its race detector) must see the host's
 * synchronous accesses to host tensors, which never pass through a backend:
 * backend.c tells access of every set, get, memset and copy of a host tensor
 * (src NULL for a fill) and free_fn of every host buffer freed.  Unset, the
 * usual case, each access costs one load. */
#ifndef TG_HOST_OBSERVE_H
#define TG_HOST_OBSERVE_H

#include <stddef.h>

typedef void (*tg_host_access_fn)(void *dst, const char *dst_name, const void *src, const char *src_name,
                                  size_t size, const char *what);
typedef void (*tg_host_free_fn)(const void *base, size_t size);
/* NULL, NULL: none observes. */
void tg_host_observe(tg_host_access_fn access, tg_host_free_fn free_fn);

#endif

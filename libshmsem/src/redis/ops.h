// The Redis backend's entries (table.cc puts them in kRedisBackend), by
// file: open.cc (by name, detach), acquire.cc (acquires), ops.cc (the
// rest). Each is what backend.h says of its slot, for a Redis handle.
#ifndef SHMSEM_SRC_REDIS_OPS_H
#define SHMSEM_SRC_REDIS_OPS_H

#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <time.h>

namespace shmsem::detail {

int redis_create(const char *name, const shmsem_config *cfg, int flags,
                 shmsem_t **out);
int redis_open(const char *name, int flags, shmsem_t **out);
int redis_unlink(const char *name);
void redis_detach(shmsem_t *s);

int redis_acquire(shmsem_t *s, uint32_t n, const timespec *deadline,
                  shmsem_cancel_t *cancel, unsigned flags,
                  shmsem_lease_t *lease);
int redis_try_acquire(shmsem_t *s, uint32_t n, shmsem_lease_t *lease);

int redis_release(shmsem_t *s, shmsem_lease_t *lease);
int redis_set_permits(shmsem_t *s, uint32_t permits);
int redis_shutdown(shmsem_t *s);
int redis_recover(shmsem_t *s);
int redis_check(shmsem_t *s);
int redis_stat(shmsem_t *s, struct shmsem_stat *st);
int redis_inspect(shmsem_t *s, struct shmsem_inspection *out,
                  struct shmsem_holder *holders, uint32_t max_holders,
                  struct shmsem_waiter_info *waiters, uint32_t max_waiters);
int redis_declare_hold(shmsem_t *s, const shmsem_lease_t *lease,
                       uint64_t hold_ns);
int redis_lease_renew(shmsem_t *s, const shmsem_lease_t *lease);
// shmsem_list_at for a server (list.cc).
int redis_list(const char *where, struct shmsem_list_entry *out, uint32_t max);
int redis_lease_sequence(shmsem_t *s, const shmsem_lease_t *lease,
                         uint64_t *seq);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_OPS_H

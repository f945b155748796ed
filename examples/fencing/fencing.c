/*
 * Fencing a resource with a remote semaphore's leases (shmsem(7), "Across
 * hosts"; docs/REDIS.md, "Fencing").
 *
 * A lease of a Redis pool expires when its holder stops renewing it (killed,
 * paused, cut off). A holder paused past its TTL still believes it holds the
 * lease when it wakes, while the server has granted the same resource index
 * to someone else. The resource itself must then refuse the stale holder:
 * it keeps, per resource index, the highest generation (`lease.gen`) it has
 * accepted, and refuses a request with a lower one. Generations of one index
 * only grow (across server restarts too), so the newest holder always passes
 * and the stale one never does again. (A single counter across all indices
 * would wrongly refuse an older but valid holder of another index.)
 *
 * Generations belong to the pool, not to its name: removed and created anew
 * (shmsem rm, then create), the pool starts them again at 1. A resource that
 * outlives one pool must then forget what it has seen, or keep it per
 * creation: shmsem_inspect's created_realtime_ns names the pool's creation.
 *
 * This program plays both sides in one process: it takes a lease, lets it
 * expire by pausing its keep-alive (it detaches the handle, which stops the
 * renewals), takes the index again through a new handle, and shows the
 * resource refusing the first lease's write.
 *
 *   fencing redis://127.0.0.1:6379/fencing-demo
 */
#include <errno.h>
#include <shmsem/shmsem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_INDICES 16

/* The protected resource: the highest generation seen per index. */
struct resource {
  uint64_t highest_gen[MAX_INDICES];
};

/* Accept a write from the holder of `lease`, or refuse a stale one. */
static int resource_write(struct resource *r, const shmsem_lease_t *lease,
                          const char *what) {
  const uint32_t i = shmsem_lease_resource(lease);
  if (i >= MAX_INDICES) return -EINVAL;
  if (lease->gen < r->highest_gen[i]) {
    printf("resource %u: refused \"%s\" (generation %llu < %llu)\n", i, what,
           (unsigned long long)lease->gen,
           (unsigned long long)r->highest_gen[i]);
    return -EPERM;
  }
  r->highest_gen[i] = lease->gen;
  printf("resource %u: accepted \"%s\" (generation %llu)\n", i, what,
         (unsigned long long)lease->gen);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s redis://HOST[:PORT]/POOL\n", argv[0]);
    return 2;
  }
  struct shmsem_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.permits = 1;
  cfg.lease_ttl_ms = 200;
  shmsem_t *a = NULL, *b = NULL;
  int e = shmsem_create(argv[1], &cfg, 0, &a);
  if (e) {
    fprintf(stderr, "create %s: %s\n", argv[1], shmsem_strerror(e));
    return 1;
  }
  struct resource res;
  memset(&res, 0, sizeof res);
  shmsem_lease_t old_lease, new_lease;
  if ((e = shmsem_acquire(a, &old_lease)) != 0) goto fail;
  resource_write(&res, &old_lease, "first holder, on time");
  /* The first holder "pauses": nobody renews its lease any more. */
  if ((e = shmsem_open(argv[1], 0, &b)) != 0) goto fail;
  shmsem_detach(a);
  a = NULL;
  /* The server takes the lease back after its TTL and grants the index
   * again, with a higher generation. */
  if ((e = shmsem_acquire_for(b, 5000000000ull, &new_lease)) != 0) goto fail;
  resource_write(&res, &new_lease, "second holder");
  /* The first holder wakes up and writes: refused. */
  const int stale = resource_write(&res, &old_lease, "first holder, late");
  printf("release of the expired lease: %s\n",
         shmsem_strerror(shmsem_release(b, &old_lease)));
  shmsem_release(b, &new_lease);
  shmsem_detach(b);
  shmsem_unlink(argv[1]);
  return stale == -EPERM ? 0 : 1;
fail:
  fprintf(stderr, "%s: %s\n", argv[1], shmsem_strerror(e));
  shmsem_detach(a);
  shmsem_detach(b);
  return 1;
}

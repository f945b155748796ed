/* The public headers compile as strict C99 (-pedantic -Werror) and link. */
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include <string.h>

int main(void) {
  shmsem_t *s = 0;
  shmsem_lease_t lease = {0, 0, 0, 0};
  struct shmsem_config cfg;
  shmsem_cancel_t cancel;
  memset(&cfg, 0, sizeof cfg);
  shmsem_cancel_init(&cancel);
  /* Bad name: nothing is created. */
  if (shmsem_create("no-slash", &cfg, SHMSEM_EXCL, &s) != -22) return 1;
  if (shmsem_release(s, &lease) != -22) return 2;
  if (strcmp(shmsem_strerror(-16), "wait queue is full") != 0) return 3;
  {
    struct shmsem_inspection in;
    if (shmsem_inspect(s, &in, NULL, 0, NULL, 0) != -22) return 5;
    if (shmsem_hist_bucket(0) != 0 ||
        shmsem_hold_bound_ns(SHMSEM_HOLD_BUCKETS - 1) != UINT64_MAX)
      return 6;
  }
  return SHMSEM_VERSION_MAJOR >= 0 ? 0 : 4;
}

// Many acquires pending on one io_uring (<shmsem/uring.h>): how many one
// ring holds, what each costs in memory (ours and the kernel's), and how
// fast they drain through the ring in FIFO order.
//   shmsem_ring_bench [PENDING]        (default 10000)
// The kernel's share is read from /proc/slabinfo (io_kiocb: one per
// request, two per pending waiter) and /proc/meminfo (Slab:, everything the
// kernel allocated meanwhile, including the futex data and the timers);
// other activity on the machine adds noise to the latter.
#include <liburing.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

// Active io_kiocb objects and their size, from /proc/slabinfo (root).
bool kiocbs(long *active, long *objsize) {
  FILE *f = fopen("/proc/slabinfo", "r");
  if (!f) return false;
  char line[512];
  bool ok = false;
  while (fgets(line, sizeof line, f)) {
    char name[64];
    long act, num, sz;
    if (sscanf(line, "%63s %ld %ld %ld", name, &act, &num, &sz) == 4 &&
        strcmp(name, "io_kiocb") == 0) {
      *active = act;
      *objsize = sz;
      ok = true;
    }
  }
  fclose(f);
  return ok;
}

long slab_kb() {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Slab: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

int fail(const char *what, int r) {
  fprintf(stderr, "ring_scale: %s: %s\n", what, shmsem_strerror(r));
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  const long n = argc > 1 ? atol(argv[1]) : 10000;
  if (n < 1 || n > long(SHMSEM_MAX_WAITERS)) return 2;
  if (shmsem_uring_probe() != 0) {
    printf("ring_scale: skipped: no IORING_OP_FUTEX_WAIT on this kernel\n");
    return 0;
  }
  char name[64];
  snprintf(name, sizeof name, "/shmsem-ring-bench-%d", int(getpid()));
  shmsem_config cfg{};
  cfg.permits = 1;
  cfg.max_waiters = uint32_t(n);
  shmsem_t *s;
  int r = shmsem_create(name, &cfg, SHMSEM_EXCL, &s);
  if (r) return fail("create", r);
  shmsem_unlink(name);  // the mapping stays; nothing left behind
  io_uring ring;
  if ((r = io_uring_queue_init(4096, &ring, 0)) < 0) return fail("ring", r);
  shmsem_lease_t held;
  if ((r = shmsem_acquire(s, &held))) return fail("acquire", r);
  std::vector<shmsem_waiter_t> w(static_cast<size_t>(n));

  long k0 = 0, ksz = 0, k1 = 0;
  bool have_slab = kiocbs(&k0, &ksz);
  long s0 = slab_kb();
  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    shmsem_lease_t unused;
    r = shmsem_waiter_start(s, &w[size_t(i)], nullptr, &unused);
    if (r != SHMSEM_QUEUED) return fail("waiter_start", r < 0 ? r : -EPROTO);
    r = shmsem_uring_prep_wait(&ring, &w[size_t(i)], uint64_t(i));
    if (r == -EBUSY) {
      io_uring_submit(&ring);
      r = shmsem_uring_prep_wait(&ring, &w[size_t(i)], uint64_t(i));
    }
    if (r) return fail("prep_wait", r);
  }
  io_uring_submit(&ring);
  double t_start = now_s() - t0;
  usleep(100'000);  // let the slab counters settle
  if (have_slab) kiocbs(&k1, &ksz);
  long s1 = slab_kb();
  struct shmsem_stat st;
  shmsem_stat(s, &st);

  // Drain: each completion releases, which grants the next.
  t0 = now_s();
  if ((r = shmsem_release(s, &held))) return fail("release", r);
  long next = 0, spurious = 0, order_errors = 0, fired = 0;
  while (next < n) {
    io_uring_cqe *cqe;
    io_uring_submit(&ring);
    if (io_uring_wait_cqe(&ring, &cqe)) continue;
    uint64_t tag = io_uring_cqe_get_data64(cqe);
    int cqe_res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (tag == SHMSEM_URING_IGNORE) {
      // A linked timeout that was disarmed by its wait's completion ends
      // with -ECANCELED; one that fired ends with the number of requests
      // it cancelled (1), or -ETIME.
      if (cqe_res != -ECANCELED) fired++;
      continue;
    }
    shmsem_lease_t l;
    r = shmsem_waiter_poll(&w[tag], &l);
    if (r == -EINPROGRESS) {
      spurious++;
      while (shmsem_uring_prep_wait(&ring, &w[tag], tag) == -EBUSY)
        io_uring_submit(&ring);
      continue;
    }
    if (r) return fail("poll", r);
    if (long(tag) != next) order_errors++;
    next++;
    if ((r = shmsem_release(s, &l))) return fail("release", r);
  }
  double t_drain = now_s() - t0;
  printf("ring_scale: %ld acquires pending on one ring (stat: %u waiting)\n", n,
         st.waiting);
  printf(
      "  ours: %zu B of shmsem_waiter_t + %u B in the segment per waiter "
      "(a slot and its index)\n",
      sizeof(shmsem_waiter_t), 132u);
  if (have_slab)
    printf("  kernel: %.2f io_kiocb x %ld B per waiter (%ld more active)\n",
           double(k1 - k0) / double(n), ksz, k1 - k0);
  else
    printf("  kernel: /proc/slabinfo unreadable (not root?)\n");
  if (s0 >= 0 && s1 >= 0)
    printf("  kernel: Slab grew %ld kB, %.0f B per waiter (all kernel slabs)\n",
           s1 - s0, double(s1 - s0) * 1024.0 / double(n));
  printf("  start+prep+submit: %.1f ms (%.2f us each)\n", t_start * 1e3,
         t_start * 1e6 / double(n));
  printf(
      "  drain in FIFO order: %.1f ms (%.2f us per grant-to-completion-"
      "to-release), %ld out of order, %ld polls still queued, %ld ring "
      "timeouts fired\n",
      t_drain * 1e3, t_drain * 1e6 / double(n), order_errors, spurious, fired);
  io_uring_queue_exit(&ring);
  shmsem_detach(s);
  return order_errors ? 1 : 0;
}

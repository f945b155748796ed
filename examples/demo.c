/*
 * shmsem demo (`make demo`): a pool of 2 permits in shared memory and six
 * worker processes that contend for it. Workers 0-3 wait as long as needed,
 * workers 4 and 5 give up after 150 ms, and worker 3 is cancelled by a
 * thread of its own after 100 ms. Every worker finishes; the demo prints who
 * got a permit in which order, the final counters and wait times, and removes
 * the segment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 6
#define PERMITS 2

struct event {
  int worker;
  int result; /* 0 or a negative errno */
  long at_ms; /* since the start */
};

struct board {
  atomic_int n;
  struct event ev[WORKERS];
};

static struct timespec t0;

static long ms_since_start(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
}

static struct timespec in_ms(long ms) {
  struct timespec d;
  clock_gettime(CLOCK_MONOTONIC, &d);
  d.tv_sec += ms / 1000;
  d.tv_nsec += (ms % 1000) * 1000000;
  if (d.tv_nsec >= 1000000000) {
    d.tv_sec++;
    d.tv_nsec -= 1000000000;
  }
  return d;
}

/* A wait time for people: "0 (did not wait)", "950 ns", "12.5 µs",
 * "3.41 ms", "1.25 s" (three significant digits in the largest unit that
 * keeps the number at 1 or more). */
static const char *wait_text(uint64_t ns, char *buf, size_t len) {
  if (ns == 0)
    (void)snprintf(buf, len, "0 (did not wait)");
  else if (ns < 1000)
    (void)snprintf(buf, len, "%llu ns", (unsigned long long)ns);
  else if (ns < 1000000)
    (void)snprintf(buf, len, "%.3g µs", (double)ns / 1e3);
  else if (ns < 1000000000)
    (void)snprintf(buf, len, "%.3g ms", (double)ns / 1e6);
  else
    (void)snprintf(buf, len, "%.3g s", (double)ns / 1e9);
  return buf;
}

static void *cancel_after_100ms(void *arg) {
  usleep(100 * 1000);
  shmsem_cancel(arg);
  return NULL;
}

static int worker(const char *name, int id, struct board *b) {
  shmsem_t *s;
  shmsem_lease_t lease;
  shmsem_cancel_t cancel;
  pthread_t canceller;
  struct timespec deadline = in_ms(150);
  int r = shmsem_open(name, 0, &s);

  if (r < 0) return 1;
  shmsem_cancel_init(&cancel);
  if (id == 3) pthread_create(&canceller, NULL, cancel_after_100ms, &cancel);
  r = shmsem_acquire_ex(s, id >= 4 ? &deadline : NULL, id == 3 ? &cancel : NULL,
                        0, &lease);
  b->ev[atomic_fetch_add(&b->n, 1)] = (struct event){id, r, ms_since_start()};
  if (r == 0) {
    usleep(200 * 1000); /* the work the permit stands for */
    shmsem_release(s, &lease);
  }
  if (id == 3) pthread_join(canceller, NULL);
  shmsem_detach(s);
  return 0;
}

int main(void) {
  char name[64];
  struct shmsem_config cfg = {.permits = PERMITS, .max_waiters = 16};
  struct shmsem_stat st;
  shmsem_t *s;
  struct board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int r, i;
  uint64_t p50, p99;
  char p50_text[32], p99_text[32];

  (void)snprintf(name, sizeof name, "/shmsem-demo-%d",
                 (int)getpid()); /* fits */
  r = shmsem_create(name, &cfg, SHMSEM_EXCL, &s);
  if (r < 0) {
    fprintf(stderr, "demo: cannot create %s: %s\n", name, shmsem_strerror(r));
    return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  printf(
      "semaphore %s: %d permits; %d workers (4 and 5 wait at most 150 ms, "
      "3 is cancelled after 100 ms)\n\n",
      name, PERMITS, WORKERS);
  for (i = 0; i < WORKERS; i++) {
    if (fork() == 0) _exit(worker(name, i, b));
    usleep(5 * 1000); /* arrive in order: 0 first, 5 last */
  }
  for (i = 0; i < WORKERS; i++) wait(NULL);

  printf("  %8s  %-6s %s\n", "time", "worker", "outcome");
  for (i = 0; i < atomic_load(&b->n); i++)
    printf("  %5ld ms  %-6d %s\n", b->ev[i].at_ms, b->ev[i].worker,
           b->ev[i].result == 0 ? "granted a permit"
                                : shmsem_strerror(b->ev[i].result));

  shmsem_stat(s, &st);
  p50 = shmsem_stat_wait_quantile(&st, 0.5);
  p99 = shmsem_stat_wait_quantile(&st, 0.99);
  printf(
      "\ncounters: acquisitions %llu, timeouts %llu, cancellations %llu, "
      "available %u of %u, held %u, waiting %u\n",
      (unsigned long long)st.acquisitions, (unsigned long long)st.timeouts,
      (unsigned long long)st.cancellations, st.available, st.permits, st.held,
      st.waiting);
  /* Quantiles of the log-linear wait histogram (8 buckets per doubling):
   * the upper bound of the bucket, at most 12.5% above the true value. */
  printf(
      "wait of the granted acquires: p50 %s%s, p99 %s%s (upper bounds of "
      "log-linear buckets, within 12.5%%)\n",
      p50 ? "<= " : "", wait_text(p50, p50_text, sizeof p50_text),
      p99 ? "<= " : "", wait_text(p99, p99_text, sizeof p99_text));
  printf("invariant check: %s\n", shmsem_check(s) == 0 ? "ok" : "BROKEN");
  shmsem_detach(s);
  shmsem_unlink(name);
  printf("removed %s\n", name);
  return 0;
}

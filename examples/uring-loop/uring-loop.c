/*
 * uring-loop: thousands of acquires pending in one io_uring per process,
 * across several processes, completed in FIFO order (<shmsem/uring.h>).
 *
 *   shmsem-uring-loop [PROCESSES [PENDING_PER_PROCESS]]   (default 3 2000)
 *
 * The parent creates a semaphore with one permit and holds it. Each child
 * runs one event loop: it starts PENDING acquires that do not block
 * (shmsem_waiter_start), in turns with the other children so that the
 * global order of the queue is known (start i is child i % PROCESSES), and
 * parks each in its ring (shmsem_uring_prep_wait). Then the parent lets
 * the permit go. Every completion is logged with its start index, and its
 * lease is released at once, which grants the next waiter: the log must
 * read 0, 1, 2, ... Exits 0 if it does, 1 if not, 77 if the kernel cannot
 * wait on futexes in a ring (Linux < 6.7, or io_uring disabled).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <sched.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 100 /* starts per turn */

struct board {
  atomic_int turn;    /* next batch to start */
  atomic_int started; /* waits queued */
  atomic_int failed;  /* a child hit an error */
  atomic_int n;       /* completions logged */
  int log[];          /* start index of each completion, in order */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(struct board *b, const char *what, int err) {
  fprintf(stderr, "uring-loop: %s: %s\n", what, shmsem_strerror(err));
  atomic_store(&b->failed, 1);
  return 1;
}

/* One child's loop: start its share of the waits in turn, then complete
 * them as the ring reports. */
static int child(shmsem_t *s, struct board *b, int procs, int me, int pending) {
  struct io_uring ring;
  shmsem_waiter_t *w = calloc((size_t)pending, sizeof *w);
  int *global = calloc((size_t)pending, sizeof *global);
  int r, done = 0;

  if (!w || !global) {
    free(w);
    free(global);
    return fail(b, "calloc", -ENOMEM);
  }
  r = io_uring_queue_init(4096, &ring, 0);
  if (r < 0) {
    free(w);
    free(global);
    return fail(b, "io_uring_queue_init", r);
  }
  /* From here a failure returns at once: the child _exits, which frees
   * everything (and its pending waits are reclaimed as a dead thread's). */

  /* Batch k of the whole queue belongs to child k % procs. */
  int batches = (pending + BATCH - 1) / BATCH;
  for (int k = 0; k < batches; k++) {
    int batch = k * procs + me;
    while (atomic_load(&b->turn) != batch) {
      if (atomic_load(&b->failed)) return 1;
      sched_yield();
    }
    for (int j = k * BATCH; j < pending && j < (k + 1) * BATCH; j++) {
      shmsem_lease_t unused;
      r = shmsem_waiter_start(s, &w[j], NULL, &unused);
      if (r != SHMSEM_QUEUED)
        return fail(b, "shmsem_waiter_start", r < 0 ? r : -EPROTO);
      global[j] = batch * BATCH + (j - k * BATCH);
      r = shmsem_uring_prep_wait(&ring, &w[j], (uint64_t)j);
      if (r == -EBUSY) {
        io_uring_submit(&ring);
        r = shmsem_uring_prep_wait(&ring, &w[j], (uint64_t)j);
      }
      if (r < 0) return fail(b, "shmsem_uring_prep_wait", r);
    }
    io_uring_submit(&ring);
    atomic_fetch_add(&b->started,
                     pending - k * BATCH < BATCH ? pending - k * BATCH : BATCH);
    atomic_store(&b->turn, batch + 1);
  }
  while (done < pending) {
    struct io_uring_cqe *cqe;
    io_uring_submit(&ring);
    r = io_uring_wait_cqe(&ring, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) return fail(b, "io_uring_wait_cqe", r);
    uint64_t tag = io_uring_cqe_get_data64(cqe);
    io_uring_cqe_seen(&ring, cqe);
    if (tag == SHMSEM_URING_IGNORE) continue;
    shmsem_lease_t lease;
    r = shmsem_waiter_poll(&w[tag], &lease);
    if (r == -EINPROGRESS) { /* a timer share or a spurious wake */
      r = shmsem_uring_prep_wait(&ring, &w[tag], tag);
      if (r == -EBUSY) {
        io_uring_submit(&ring);
        r = shmsem_uring_prep_wait(&ring, &w[tag], tag);
      }
      if (r < 0) return fail(b, "shmsem_uring_prep_wait", r);
      continue;
    }
    if (r < 0) return fail(b, "shmsem_waiter_poll", r);
    b->log[atomic_fetch_add(&b->n, 1)] = global[tag];
    r = shmsem_release(s, &lease); /* grants the next waiter */
    if (r < 0) return fail(b, "shmsem_release", r);
    done++;
  }
  io_uring_queue_exit(&ring);
  free(global);
  free(w);
  return 0;
}

/* A whole decimal number within [lo, hi], else -1. */
static long number(const char *arg, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(arg, &end, 10);
  return errno || end == arg || *end || v < lo || v > hi ? -1 : v;
}

// An example read top to bottom: the function-size rule is for the library
// and the command (issue 26), not for a program meant to be read whole.
// NOLINTNEXTLINE(readability-function-size)
int main(int argc, char **argv) {
  int procs = argc > 1 ? (int)number(argv[1], 1, 64) : 3;
  int pending = argc > 2 ? (int)number(argv[2], 1, 100000) : 2000;
  if (argc > 3 || procs < 0 || pending < 0 || pending % BATCH) {
    fprintf(stderr,
            "usage: %s [PROCESSES (1-64) [PENDING (a multiple of %d)]]\n",
            argv[0], BATCH);
    return 2;
  }
  if (shmsem_uring_probe() != 0) {
    printf("uring-loop: skipped: this kernel has no IORING_OP_FUTEX_WAIT\n");
    return 77;
  }
  int total = procs * pending;
  char name[64];
  (void)snprintf(name, sizeof name, "/shmsem-uring-loop-%d",
                 (int)getpid()); /* fits */
  struct shmsem_config cfg = {.permits = 1, .max_waiters = (uint32_t)total};
  shmsem_t *s;
  int r = shmsem_create(name, &cfg, SHMSEM_EXCL, &s);
  if (r < 0) {
    fprintf(stderr, "uring-loop: create %s: %s\n", name, shmsem_strerror(r));
    return 1;
  }
  size_t size = sizeof(struct board) + (size_t)total * sizeof(int);
  struct board *b = mmap(NULL, size, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) {
    perror("mmap");
    shmsem_unlink(name);
    return 1;
  }
  shmsem_lease_t held;
  r = shmsem_acquire(s, &held);
  pid_t pids[64];
  int nkids = 0, ok = r == 0;
  for (int p = 0; ok && p < procs; p++) {
    pid_t pid = fork();
    if (pid == 0) _exit(child(s, b, procs, p, pending));
    if (pid < 0)
      ok = 0;
    else
      pids[nkids++] = pid;
  }
  /* Every wait queued, then the permit goes. */
  while (ok && atomic_load(&b->started) < total && !atomic_load(&b->failed))
    usleep(1000);
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  printf(
      "uring-loop: %d processes, %u acquires pending in %d rings "
      "(%zu bytes of waiter each, plus %u bytes in the segment)\n",
      procs, st.waiting, procs, sizeof(shmsem_waiter_t), 132u);
  double t0 = now_s();
  if (ok) shmsem_release(s, &held);
  /* Reap; on any failure stop the others (they may wait for ever). */
  for (int left = nkids; left > 0;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      left--;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = 0;
    } else if (pid < 0) {
      break;
    } else {
      usleep(1000);
    }
    if (!ok || atomic_load(&b->failed))
      for (int i = 0; i < nkids; i++) kill(pids[i], SIGKILL);
  }
  double secs = now_s() - t0;
  int n = atomic_load(&b->n), in_order = n == total;
  for (int i = 0; in_order && i < n; i++)
    if (b->log[i] != i) {
      fprintf(stderr, "uring-loop: completion %d was start %d\n", i, b->log[i]);
      in_order = 0;
    }
  shmsem_stat(s, &st);
  int checked = shmsem_check(s);
  printf(
      "uring-loop: %d of %d completed %s in %.3f s (%.0f hand-offs/s); "
      "available %u, held %u, waiting %u; check %s\n",
      n, total, in_order ? "in FIFO order" : "OUT OF ORDER", secs,
      secs > 0 ? n / secs : 0.0, st.available, st.held, st.waiting,
      checked == 0 ? "ok" : shmsem_strerror(checked));
  ok = ok && in_order && checked == 0 && st.available == 1 && st.waiting == 0;
  shmsem_detach(s);
  shmsem_unlink(name);
  munmap(b, size);
  return ok ? 0 : 1;
}

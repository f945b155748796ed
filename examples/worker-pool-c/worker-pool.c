/*
 * worker-pool: a daemon-style worker pool limited by one shmsem semaphore.
 *
 *   worker-pool [-p PERMITS] [-j JOBS] [-t MS] /name
 *
 * Forks one process per job. Every job takes a permit of /name before its
 * "work" (a short sleep) and releases it afterwards, so at most PERMITS jobs
 * run at once across this pool and any other process using /name (try
 * `shmsem status /name` while it runs). SIGINT/SIGTERM shut the semaphore
 * down: queued jobs stop with -ESHUTDOWN, running ones finish.
 *
 * Build: make (uses `pkg-config --cflags --libs shmsem`).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmsem/shmsem.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
  (void)sig;
  stop_requested = 1;
}

/* One job: permit, work, release. Exit status 0 done, 1 failed, 2 stopped. */
static int job(const char *name, int id, long work_ms) {
  shmsem_t *sem;
  shmsem_lease_t lease;
  struct timespec work = {work_ms / 1000, (work_ms % 1000) * 1000000L};
  int ret;

  ret = shmsem_open(name, 0, &sem);
  if (ret < 0) {
    fprintf(stderr, "job %d: open %s: %s\n", id, name, shmsem_strerror(ret));
    return 1;
  }
  ret = shmsem_acquire(sem, &lease);
  if (ret == -ESHUTDOWN) {
    shmsem_detach(sem);
    return 2;
  }
  if (ret < 0) {
    fprintf(stderr, "job %d: acquire: %s\n", id, shmsem_strerror(ret));
    shmsem_detach(sem);
    return 1;
  }
  nanosleep(&work, NULL); /* the work */
  ret = shmsem_release(sem, &lease);
  if (ret < 0)
    fprintf(stderr, "job %d: release: %s\n", id, shmsem_strerror(ret));
  shmsem_detach(sem);
  return ret < 0;
}

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [-p PERMITS] [-j JOBS] [-t MS] /name\n", argv0);
  exit(2);
}

int main(int argc, char **argv) {
  struct shmsem_config cfg;
  struct shmsem_stat st;
  struct sigaction sa;
  shmsem_t *sem;
  const char *name;
  int permits = 2, jobs = 6, done = 0, failed = 0, stopped = 0, opt, i, ret;
  long work_ms = 100;

  while ((opt = getopt(argc, argv, "p:j:t:")) != -1) {
    switch (opt) {
      case 'p':
        permits = atoi(optarg);
        break;
      case 'j':
        jobs = atoi(optarg);
        break;
      case 't':
        work_ms = atol(optarg);
        break;
      default:
        usage(argv[0]);
    }
  }
  if (optind + 1 != argc || permits < 1 || jobs < 1 || work_ms < 0)
    usage(argv[0]);
  name = argv[optind];

  memset(&cfg, 0, sizeof cfg);
  cfg.permits = (uint32_t)permits;
  ret = shmsem_create(name, &cfg, 0, &sem);
  if (ret < 0) {
    fprintf(stderr, "worker-pool: create %s: %s\n", name, shmsem_strerror(ret));
    return 1;
  }

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  for (i = 0; i < jobs; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      /* The job must not see the pool's stop handler. */
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      _exit(job(name, i, work_ms));
    }
    if (pid < 0) {
      perror("worker-pool: fork");
      break;
    }
  }

  /* Reap jobs; on SIGINT/SIGTERM close the semaphore once. */
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) {
      if (stop_requested == 1) {
        stop_requested = 2;
        ret = shmsem_shutdown(sem);
        fprintf(stderr, "worker-pool: stopping, %d queued jobs cancelled\n",
                ret < 0 ? 0 : ret);
      }
      continue;
    }
    if (pid < 0) break; /* ECHILD: all jobs reaped */
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      done++;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
      stopped++;
    else
      failed++;
  }

  if (shmsem_stat(sem, &st) == 0)
    printf(
        "worker-pool: %d jobs done, %d stopped, %d failed; %llu acquisitions, "
        "p99 wait <= %llu ms\n",
        done, stopped, failed, (unsigned long long)st.acquisitions,
        (unsigned long long)(shmsem_stat_wait_quantile(&st, 0.99) / 1000000));
  shmsem_detach(sem);
  return failed ? 1 : 0;
}

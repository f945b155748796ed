/*
 * shmsem demo (`make demo`): a pool of 2 permits in shared memory and six
 * worker processes that contend for it. Workers 0-3 wait as long as needed,
 * workers 4 and 5 give up after 150 ms, and worker 3 is cancelled by a
 * thread of its own after 100 ms. Every worker finishes; the demo prints who
 * got a permit in which order, the final counters, and removes the segment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <stdatomic.h>
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
	int result;       /* 0 or a negative errno */
	long at_ms;       /* since the start */
};

struct board {
	atomic_int n;
	struct event ev[WORKERS];
};

static struct timespec t0;

static long ms_since_start(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
}

static struct timespec in_ms(long ms)
{
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

static void *cancel_after_100ms(void *arg)
{
	usleep(100 * 1000);
	shmsem_cancel(arg);
	return NULL;
}

static int worker(const char *name, int id, struct board *b)
{
	shmsem_t *s;
	shmsem_lease_t lease;
	shmsem_cancel_t cancel;
	pthread_t canceller;
	struct timespec deadline = in_ms(150);
	int r = shmsem_open(name, 0, &s);

	if (r < 0)
		return 1;
	shmsem_cancel_init(&cancel);
	if (id == 3)
		pthread_create(&canceller, NULL, cancel_after_100ms, &cancel);
	r = shmsem_acquire_ex(s, id >= 4 ? &deadline : NULL,
			      id == 3 ? &cancel : NULL, 0, &lease);
	b->ev[atomic_fetch_add(&b->n, 1)] = (struct event){id, r, ms_since_start()};
	if (r == 0) {
		usleep(200 * 1000); /* the work the permit stands for */
		shmsem_release(s, &lease);
	}
	if (id == 3)
		pthread_join(canceller, NULL);
	shmsem_detach(s);
	return 0;
}

int main(void)
{
	char name[64];
	struct shmsem_config cfg = {.permits = PERMITS, .max_waiters = 16};
	struct shmsem_stat st;
	shmsem_t *s;
	struct board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int r, i;

	(void)snprintf(name, sizeof name, "/shmsem-demo-%d", (int)getpid()); /* fits */
	r = shmsem_create(name, &cfg, SHMSEM_EXCL, &s);
	if (r < 0) {
		fprintf(stderr, "demo: cannot create %s: %s\n", name, shmsem_strerror(r));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("semaphore %s: %d permits; %d workers (4 and 5 wait at most 150 ms, "
	       "3 is cancelled after 100 ms)\n\n", name, PERMITS, WORKERS);
	for (i = 0; i < WORKERS; i++) {
		if (fork() == 0)
			_exit(worker(name, i, b));
		usleep(5 * 1000); /* arrive in order: 0 first, 5 last */
	}
	for (i = 0; i < WORKERS; i++)
		wait(NULL);

	printf("  %-8s %-7s %s\n", "time", "worker", "outcome");
	for (i = 0; i < atomic_load(&b->n); i++)
		printf("  %5ld ms  %-6d %s\n", b->ev[i].at_ms, b->ev[i].worker,
		       b->ev[i].result == 0 ? "granted a permit" :
		       shmsem_strerror(b->ev[i].result));

	shmsem_stat(s, &st);
	printf("\ncounters: acquisitions %llu, timeouts %llu, cancellations %llu, "
	       "available %u of %u, held %u, waiting %u\n",
	       (unsigned long long)st.acquisitions, (unsigned long long)st.timeouts,
	       (unsigned long long)st.cancellations, st.available, st.permits,
	       st.held, st.waiting);
	printf("wait p50 <= %.3f ms, p99 <= %.3f ms (log2 buckets); invariant check: %s\n",
	       (double)shmsem_stat_wait_quantile(&st, 0.5) / 1e6,
	       (double)shmsem_stat_wait_quantile(&st, 0.99) / 1e6,
	       shmsem_check(s) == 0 ? "ok" : "BROKEN");
	shmsem_detach(s);
	shmsem_unlink(name);
	printf("removed %s\n", name);
	return 0;
}

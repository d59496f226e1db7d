// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Threads the library starts (the handler's, the watchdog's, the owner's,
 * the uffd-wp tracker's) and the clock they share.  Below every other
 * file: it calls none of them.
 */
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "internal.h"

/*
 * The library's threads take none of the application's signals: a
 * process-directed SIGINT or SIGALRM goes to a thread of the application,
 * whose handler may expect to run there (and to interrupt its own calls).
 */
int uffdm__thread_start(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

uint64_t uffdm__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

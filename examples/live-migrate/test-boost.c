// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * wl_pause_boosted(): the workload parks, its threads are ordinary again
 * once parked, the caller stays at SCHED_FIFO until wl_unboost_self(), the
 * workload runs again after wl_resume() with its invariants intact; and a
 * user without the right to SCHED_FIFO gets -EPERM after a plain pause.
 */
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define SIZE	(4u << 20)
#define THREADS	4

static uint8_t *mem;
static struct workload wl;

static int policy_of(pthread_t t)
{
	struct sched_param p;
	int pol = -1;

	pthread_getschedparam(t, &pol, &p);
	return pol;
}

static void sleep_ms(unsigned int ms)
{
	lm_sleep_until(lm_now_ns() + ms * 1000000ull);
}

static void start(void)
{
	struct wl_opts o = { .threads = THREADS, .pattern = WL_UNIFORM };

	mem = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	wl_format(mem, SIZE, &o);
	memset(&wl, 0, sizeof(wl));
	assert_int_equal(wl_start(&wl, mem, SIZE, mem), 0);
	sleep_ms(20);
}

static void finish(void)
{
	char err[160];

	wl_pause(&wl);
	wl_stop(&wl);
	assert_int_equal(wl_check(mem, SIZE, err, sizeof(err)), 0);
	munmap(mem, SIZE);
}

static void boost_parks_and_restores(void **state)
{
	uint64_t ops;
	int ret;

	(void)state;
	start();
	ret = wl_pause_boosted(&wl);
	if (ret == -EPERM) {
		finish();
		K513_SKIP("SCHED_FIFO refused to this process (no CAP_SYS_NICE, RLIMIT_RTPRIO 0): "
			  "run the test as root to cover the boosted pause");
	}
	assert_int_equal(ret, 0);
	assert_int_equal(policy_of(pthread_self()), SCHED_FIFO);
	for (unsigned int t = 0; t < THREADS; t++)
		assert_int_equal(policy_of(wl.tid[t]), SCHED_OTHER);
	ops = wl_ops(&wl);
	sleep_ms(20);
	assert_int_equal(wl_ops(&wl), ops);	/* parked: no op ran */
	wl_unboost_self(&wl);
	assert_int_equal(policy_of(pthread_self()), SCHED_OTHER);
	wl_unboost_self(&wl);			/* twice is harmless */
	assert_int_equal(policy_of(pthread_self()), SCHED_OTHER);
	wl_resume(&wl);
	sleep_ms(20);
	assert_true(wl_ops(&wl) > ops);
	finish();
}

/* A normal user without RLIMIT_RTPRIO: refused, but paused all the same. */
static int refused_child(void)
{
	struct rlimit none = { 0, 0 };
	uint64_t ops;

	if (setrlimit(RLIMIT_RTPRIO, &none))
		return 10;
	if (getuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
		return 11;
	start();
	if (wl_pause_boosted(&wl) != -EPERM)
		return 12;
	if (policy_of(pthread_self()) != SCHED_OTHER)
		return 13;
	ops = wl_ops(&wl);
	sleep_ms(20);
	if (wl_ops(&wl) != ops)
		return 14;
	wl_unboost_self(&wl);
	wl_resume(&wl);
	sleep_ms(20);
	if (wl_ops(&wl) == ops)
		return 15;
	finish();
	return 0;
}

static void unprivileged_refused(void **state)
{
	pid_t pid;

	(void)state;
	pid = lmt_fork();
	if (pid == 0)
		_exit(refused_child());
	assert_int_equal(lmt_status(pid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(boost_parks_and_restores),
		cmocka_unit_test(unprivileged_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What a faulting thread sees when nobody serves its fault any more, and
 * uffdm_range_fail, the VMM's answer.  The kernel (fs/userfaultfd.c,
 * userfaultfd_release, the same from 4.3 to 6.18):
 *  - while any reference to the descriptor is open, an unserved fault
 *    sleeps for ever (a dead pager whose VMM still holds the descriptor);
 *  - when the last one closes, the registration is dropped and the
 *    sleepers are woken: they refault on an unregistered mapping and get
 *    whatever the page cache holds (stale or zero), never SIGBUS.
 * So the VMM keeps its reference, notices the pager die, and fails the
 * range itself.  Each case runs in a child under an alarm() watchdog.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define STALE 0x5a

struct sleeper {
	volatile char *addr;
	pthread_t tid;
	int done;		/* 1 read, 2 SIGBUS */
	char seen;
};

/* 1 read, 2 SIGBUS */
static int touch(volatile char *p, char *seen)
{
	sigjmp_buf jb;

	sigbus_jmp = &jb;
	if (sigsetjmp(jb, 1)) {
		sigbus_jmp = NULL;
		return 2;
	}
	*seen = *p;
	sigbus_jmp = NULL;
	return 1;
}

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;
	int r = touch(s->addr, &s->seen);

	__atomic_store_n(&s->done, r, __ATOMIC_RELEASE);
	return NULL;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Start a thread on addr and return once its fault is queued (its message read). */
static int sleep_on(struct sleeper *s, struct uffdm *u, char *addr)
{
	struct uffdm_event ev;

	s->addr = addr;
	if (pthread_create(&s->tid, NULL, sleeper_run, s))
		return -1;
	return uffdm_events_read(u, &ev, 1, 0) == 1 && ev.kind == UFFDM_EVENT_MINOR ? 0 : -1;
}

struct rel_case {
	const struct mem_case *mc;
	unsigned int fail_flags;
};

static int setup(const struct mem_case *mc, struct uffdm_region **r, struct uffdm **u)
{
	struct sigaction sa = { .sa_handler = sigbus_jump, .sa_flags = SA_NODEFER };

	sigaction(SIGBUS, &sa, NULL);
	if (uffdm_region_create(r, mc->backing, 3 * case_page_size(mc)) ||
	    uffdm_region_populate(*r, 0, uffdm_region_size(*r)))
		return -1;
	memset(uffdm_region_backing(*r), STALE, uffdm_region_size(*r));
	return uffdm_open(u, 0, 0) || uffdm_region_register(*u, *r, 0, NULL) ? -1 : 0;
}

/* The last reference closes with a fault asleep: it reads the stale page. */
static int last_close(void *arg)
{
	const struct rel_case *rc = arg;
	struct uffdm_region *r;
	struct sleeper s = { 0 };
	struct uffdm *u;

	if (setup(rc->mc, &r, &u) || sleep_on(&s, u, uffdm_region_view(r)))
		return 10;
	uffdm_close(u);
	pthread_join(s.tid, NULL);
	if (s.done == 2)
		return 11;	/* SIGBUS: the kernel changed; update the docs */
	return s.seen == STALE ? 0 : 12;
}

static int fail_one(struct uffdm *u, char *p, size_t page)
{
	int fd = uffdm_sigbus_fd(u);
	struct uffdm *s;

	if (fd < 0 || (fd = dup(fd)) < 0 || uffdm_adopt(&s, fd, UFFD_FEATURE_SIGBUS, 0))
		return -1;
	if (uffdm_range_unregister(u, p, page) ||
	    uffdm_range_register(s, p, page, UFFDM_REGISTER_MISSING, NULL))
		return -1;
	uffdm_close(s);	/* a duplicate: the registration stays with the context */
	return 0;
}

/*
 * Another reference open (the VMM's own) and nobody serving: asleep.
 * uffdm_range_fail then wakes it into SIGBUS, leaves the mapped page
 * readable and makes an untouched page SIGBUS too.
 */
static int fail_range(void *arg)
{
	const struct rel_case *rc = arg;
	size_t page = case_page_size(rc->mc);
	struct uffdm_region *r;
	struct sleeper s = { 0 };
	struct uffdm *u;
	char *view, seen;

	if (setup(rc->mc, &r, &u))
		return 10;
	view = uffdm_region_view(r);
	if (uffdm_continue(u, view, page, 0) != (ssize_t)page)	/* page 0 served */
		return 11;
	if (sleep_on(&s, u, view + page))
		return 12;
	/*
	 * On the descriptor path, page 2 was failed already (as a pager does:
	 * moved to a duplicate of the SIGBUS descriptor): failing the whole
	 * range over it must keep it failed.
	 */
	if ((rc->fail_flags & UFFDM_FAIL_SIGBUS_FD) && fail_one(u, view + 2 * page, page))
		return 18;
	nap_ms(200);
	if (__atomic_load_n(&s.done, __ATOMIC_ACQUIRE))
		return 13;	/* not asleep: the kernel changed */
	if (uffdm_range_fail(u, view, uffdm_region_size(r), page, rc->fail_flags))
		return 14;
	pthread_join(s.tid, NULL);
	if (s.done != 2)
		return 15;
	if (touch(view, &seen) != 1 || seen != STALE)
		return 16;	/* the served page must stay */
	if (touch(view + 2 * page, &seen) != 2)
		return 17;	/* never touched: SIGBUS too */
	return 0;
}

static void run(const struct rel_case *rc, int (*fn)(void *))
{
	struct child_result res;

	put_region(make_region(rc->mc, 3));	/* skip on a short pool */
	res = run_child(fn, (void *)rc, 20);
	if (res.signal == SIGALRM)
		fail_msg("a faulting thread hung: the watchdog fired");
	if (res.signal)
		fail_msg("child died of signal %d", res.signal);
	if (res.status == 11 && fn == last_close)
		fail_msg("the last close delivered SIGBUS: the kernel changed, update uffdm_range_fail(3)");
	assert_int_equal(res.status, 0);
}

static void test_release_last_close(void **state)
{
	struct rel_case rc = { need_case(state), 0 };

	run(&rc, last_close);
}

static void test_range_fail_poison(void **state)
{
	struct rel_case rc = { need_case(state), 0 };
	struct uffdm_probe p = probe();

	if (!uffdm_probe_poison(&p))
		SKIP_BECAUSE("kernel lacks UFFDIO_POISON (Linux 6.6+); the SIGBUS-fd case covers it");
	run(&rc, fail_range);
}

static void test_range_fail_sigbus_fd(void **state)
{
	struct rel_case rc = { need_case(state), UFFDM_FAIL_SIGBUS_FD };

	run(&rc, fail_range);
}

static void test_range_fail_args(void **state)
{
	struct uffdm *u = open_uffd(0, 0);
	char *p = (char *)0x100000;

	(void)state;
	assert_int_equal(uffdm_range_fail(NULL, p, 4096, 4096, 0), -EINVAL);
	assert_int_equal(uffdm_range_fail(u, p + 1, 4096, 4096, 0), -EINVAL);
	assert_int_equal(uffdm_range_fail(u, p, 4095, 4096, 0), -EINVAL);
	assert_int_equal(uffdm_range_fail(u, p, 4096, 3000, 0), -EINVAL);
	assert_int_equal(uffdm_range_fail(u, p, 4096, 4096, 1u << 9), -EINVAL);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_release_last_close),
		CROSS(test_range_fail_poison),
		CROSS(test_range_fail_sigbus_fd),
		cmocka_unit_test(test_range_fail_args),
	};

	return cmocka_run_group_tests_name("release", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Events by hand (no handler): batch reads, blocking and not, decoded
 * faults (minor / missing, write, thread id when asked for).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

struct toucher {
	char *addr;
	bool write;
	pid_t tid;
	uint64_t seen;
	pthread_t pt;
};

static void *touch(void *arg)
{
	struct toucher *t = arg;

	t->tid = (pid_t)syscall(SYS_gettid);
	if (t->write)
		*(volatile char *)t->addr = 1;
	else
		t->seen = *(volatile uint64_t *)t->addr;
	return NULL;
}

static struct uffdm_event wait_fault(struct uffdm *u)
{
	struct uffdm_event ev[4];
	int n = uffdm_events_read(u, ev, 4, 0);

	assert_int_equal(n, 1);
	return ev[0];
}

static void test_fault_decode(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(UFFDM_OPEN_NONBLOCK, UFFD_FEATURE_THREAD_ID);
	struct uffdm_region *r = registered_region(u, mc, 2, 0);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);
	struct toucher rd = { .addr = view }, wr = { .addr = view + page + 8, .write = true };
	struct uffdm_event ev;

	assert_int_equal(uffdm_events_read(u, &ev, 1, UFFDM_READ_NONBLOCK), 0);
	fill_page(uffdm_region_backing(r), page, 0);
	pthread_create(&rd.pt, NULL, touch, &rd);
	ev = wait_fault(u);
	assert_int_equal(ev.kind, UFFDM_EVENT_MINOR);
	assert_int_equal(ev.flags & UFFDM_FAULT_WRITE, 0);
	assert_int_equal(ev.addr & ~(uint64_t)(page - 1), (uintptr_t)view);
	assert_int_equal(uffdm_resolve(u, view, page, NULL, 0, NULL), 0);
	pthread_join(rd.pt, NULL);
	assert_int_equal(ev.tid, rd.tid);
	assert_int_equal(rd.seen, 0x5546464d00000000ull);

	pthread_create(&wr.pt, NULL, touch, &wr);
	ev = wait_fault(u);
	assert_int_equal(ev.kind, UFFDM_EVENT_MINOR);
	assert_int_equal(ev.flags & UFFDM_FAULT_WRITE, UFFDM_FAULT_WRITE);
	assert_int_equal(uffdm_resolve(u, view + page, page, NULL, 0, NULL), 0);
	pthread_join(wr.pt, NULL);
	assert_int_equal(ev.tid, wr.tid);
	put_region(r);
	put_uffd(u);
}

/* With MISSING too, a hole faults as MISSING; filling the cache lets CONTINUE map it. */
static void test_missing_decode(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, UFFDM_REGISTER_MISSING);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);
	struct toucher rd = { .addr = view };
	struct uffdm_event ev;

	assert_int_equal(uffdm_region_discard(r, 0, page), 0);
	pthread_create(&rd.pt, NULL, touch, &rd);
	ev = wait_fault(u);
	assert_int_equal(ev.kind, UFFDM_EVENT_MISSING);
	fill_page(uffdm_region_backing(r), page, 0);
	assert_int_equal(uffdm_resolve(u, view, page, NULL, 0, NULL), 0);
	pthread_join(rd.pt, NULL);
	assert_int_equal(rd.seen, 0x5546464d00000000ull);
	put_region(r);
	put_uffd(u);
}

static void test_decode_unknown(void **state)
{
	struct uffd_msg m = { .event = 0x7f };
	struct uffdm_event ev;

	(void)state;
	assert_int_equal(uffdm_event_decode(&m, &ev), 0);
	assert_int_equal(ev.kind, UFFDM_EVENT_UNKNOWN);
	assert_int_equal(ev.raw.event, 0x7f);
	m.event = UFFD_EVENT_REMAP;
	m.arg.remap.from = 1;
	m.arg.remap.to = 2;
	m.arg.remap.len = 3;
	assert_int_equal(uffdm_event_decode(&m, &ev), 0);
	assert_int_equal(ev.kind, UFFDM_EVENT_REMAP);
	assert_true(ev.addr == 1 && ev.end == 2 && ev.len == 3);
	m.event = UFFD_EVENT_FORK;
	m.arg.fork.ufd = 9;
	assert_int_equal(uffdm_event_decode(&m, &ev), 0);
	assert_int_equal(ev.kind, UFFDM_EVENT_FORK);
	assert_int_equal(ev.fork_fd, 9);
}

static void on_usr1(int sig)
{
	(void)sig;
}

struct blocked_read {
	struct uffdm *u;
	struct uffdm_event ev;
	int ret;
	bool started;
	pthread_t pt;
};

static void *read_blocking(void *arg)
{
	struct blocked_read *b = arg;

	__atomic_store_n(&b->started, true, __ATOMIC_RELEASE);
	b->ret = uffdm_events_read(b->u, &b->ev, 1, 0);
	return NULL;
}

/*
 * A signal without SA_RESTART interrupts the blocking read: the library
 * retries (as QEMU's loop does) instead of returning -EINTR, on a blocking
 * and on a non-blocking descriptor.
 */
static void eintr_case(void **state, unsigned int open_flags)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(open_flags, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct blocked_read b = { .u = u };
	struct toucher t = { .addr = uffdm_region_view(r) };
	struct timespec ms = { 0, 20 * 1000 * 1000 };

	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	assert_int_equal(pthread_create(&b.pt, NULL, read_blocking, &b), 0);
	while (!__atomic_load_n(&b.started, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
	for (int i = 0; i < 3; i++) {
		nanosleep(&ms, NULL);
		pthread_kill(b.pt, SIGUSR1);
	}
	nanosleep(&ms, NULL);
	assert_int_equal(pthread_create(&t.pt, NULL, touch, &t), 0);
	pthread_join(b.pt, NULL);
	assert_int_equal(b.ret, 1);
	assert_int_equal(b.ev.kind, UFFDM_EVENT_MINOR);
	assert_int_equal(uffdm_resolve(u, uffdm_region_view(r), uffdm_region_page_size(r),
				       NULL, 0, NULL), 0);
	pthread_join(t.pt, NULL);
	sigaction(SIGUSR1, &old, NULL);
	put_region(r);
	put_uffd(u);
}

static void test_eintr_retried(void **state)
{
	eintr_case(state, 0);
}

static void test_eintr_retried_nonblock(void **state)
{
	eintr_case(state, UFFDM_OPEN_NONBLOCK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_eintr_retried),
		CROSS(test_eintr_retried_nonblock),
		CROSS(test_fault_decode),
		CROSS(test_missing_decode),
		cmocka_unit_test(test_decode_unknown),
	};

	return cmocka_run_group_tests_name("events", tests, NULL, NULL);
}

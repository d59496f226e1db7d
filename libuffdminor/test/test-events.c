// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Events by hand (no handler): batch reads, blocking and not, decoded
 * faults (minor / missing, write, thread id when asked for).
 */
#include <errno.h>
#include <pthread.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_fault_decode),
		CROSS(test_missing_decode),
		cmocka_unit_test(test_decode_unknown),
	};

	return cmocka_run_group_tests_name("events", tests, NULL, NULL);
}

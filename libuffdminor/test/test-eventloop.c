// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Event-loop mode (UFFDM_HANDLER_EVENT_LOOP) and the region's user pointer:
 * the epoll example end to end (compiled from the very file), the budget,
 * a serve with nothing ready, and the calls refused.  The failure matrix
 * (test-failmatrix.c) runs every failure cell in this mode too.
 */
#define main epoll_main
#include "../examples/epoll.c"
#undef main

#include <poll.h>

#include "common.h"

static void test_epoll_example(void **state)
{
	need_case(state);
	assert_int_equal(epoll_main(), 0);
}

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	size_t page = uffdm_region_page_size(r);

	(void)ev;
	assert_ptr_equal(uffdm_region_user(r), arg);
	fill_page((char *)uffdm_region_backing(r) + off, page, off / page);
	return 0;
}

#define NT 6

/* One fault per serve with budget 1; nothing ready: 0 at once. */
static void test_budget(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, NT, 0);
	int cookie;
	struct uffdm_handler_config cfg = {
		.flags = UFFDM_HANDLER_EVENT_LOOP, .fault = stamp, .arg = &cookie,
	};
	struct uffdm_handler *h;
	struct page_reader t[NT];
	struct uffdm_stats st;
	unsigned int served = 0;

	assert_null(uffdm_region_user(r));
	uffdm_region_set_user(r, &cookie);
	assert_ptr_equal(uffdm_region_user(r), &cookie);
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(uffdm_handler_fd(h), uffdm_fd(u));
	assert_int_equal(uffdm_handler_serve(h, 8), 0);	/* nothing queued */
	assert_int_equal(uffdm_handler_serve(h, 0), -EINVAL);
	for (size_t i = 0; i < NT; i++)
		start_reader(&t[i], r, i);
	while (served < NT) {
		struct pollfd pfd = { .fd = uffdm_handler_fd(h), .events = POLLIN };
		int n;

		assert_true(poll(&pfd, 1, -1) >= 0);
		n = uffdm_handler_serve(h, 1);
		assert_true(n == 0 || n == 1);
		served += (unsigned int)n;
	}
	for (size_t i = 0; i < NT; i++)
		assert_true(join_reader(&t[i]));
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	assert_int_equal(st.fills, NT);
	assert_int_equal(st.messages, NT);
	assert_int_equal(st.resolved, NT);
	put_region(r);
	put_uffd(u);
}

static void test_refused(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	struct uffdm_handler_config cfg = { .fault = stamp };
	struct uffdm_handler *h;

	/* no thread and no loop; a loop with threads */
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	cfg.flags = UFFDM_HANDLER_EVENT_LOOP;
	cfg.threads = 1;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	/* a threaded handler has no loop to serve from */
	cfg.flags = 0;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(uffdm_handler_fd(h), -EINVAL);
	assert_int_equal(uffdm_handler_serve(h, 1), -EINVAL);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	assert_int_equal(uffdm_handler_serve(NULL, 1), -EINVAL);
	assert_int_equal(uffdm_handler_fd(NULL), -EINVAL);
	assert_null(uffdm_region_user(NULL));
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		{ "epoll_example/shmem", test_epoll_example, NULL, NULL, (void *)&shmem_case },
		CROSS(test_budget),
		CROSS(test_refused),
	};

	return cmocka_run_group_tests_name("eventloop", tests, NULL, NULL);
}

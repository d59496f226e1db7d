// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm_range_fail(3) fails only the pages nobody served, whatever
 * protected them (issue 31, item 4).  A pagemap-scan tracker shares the
 * handler's descriptor (WP_ASYNC) and write-protects every page it
 * collected: a served page then looks, in pagemap, like one a write would
 * wait on, and 0.3 fenced it - the served bytes lost.  With WP_ASYNC a
 * write never waits, so only unmapped pages fail: served pages keep their
 * bytes and take writes, the others raise SIGBUS.
 */
#include <signal.h>

#include "common.h"

#define NPAGES	16

static void test_fail_keeps_tracked(void **state)
{
	const struct track_case *c = *state;
	struct sigaction sa = { .sa_handler = sigbus_jump, .sa_flags = SA_NODEFER }, old;
	uint8_t bm[NPAGES / 8];
	struct served s;
	uint8_t *view;
	size_t page;

	served_start(&s, c, NPAGES);
	view = uffdm_region_view(s.r);
	page = uffdm_region_page_size(s.r);
	for (unsigned int i = 0; i < NPAGES; i += 2) {	/* served: the even pages */
		assert_true(check_page(view + i * page, page, i));
		write_pages(view, page, &i, 1);
	}
	/* collected: every even page is write-protected now (async) */
	assert_int_equal(uffdm_tracker_collect(s.t, bm, 0), 0);
	assert_int_equal(uffdm_range_fail(s.u, view, NPAGES * page, page, 0), 0);
	sigaction(SIGBUS, &sa, &old);
	for (unsigned int i = 0; i < NPAGES; i++) {
		struct page_reader t;
		int got;

		start_reader(&t, s.r, i);
		got = join_reader_within(&t, 10);
		if (got != (i % 2 ? READ_SIGBUS : READ_OK))
			fail_msg("page %u (%s): read %s", i, i % 2 ? "never served" : "served",
				 got == READ_OK ? "right" : got == READ_SIGBUS ? "SIGBUS" : "wrong");
	}
	for (unsigned int i = 0; i < NPAGES; i += 2)
		write_pages(view, page, &i, 1);	/* a served page still takes writes */
	sigaction(SIGBUS, &old, NULL);
	served_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_ROW(test_fail_keeps_tracked, scan_shmem),
		TRACK_ROW(test_fail_keeps_tracked, scan_hugetlb),
	};

	return cmocka_run_group_tests_name("track-fail", tests, NULL, NULL);
}

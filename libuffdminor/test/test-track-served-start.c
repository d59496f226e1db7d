// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What uffdm_tracker_start(3) guarantees for memory a handler serves while
 * it runs (issue 31, item 4): the first collection reports every page
 * mapped when the start returned, served before or during the call, and
 * every page served or written after it.  A reader serves the pages one by
 * one, before, across and after the start; every page filled when the
 * start returned must be in the first collection.  Before, a page served
 * during the call was reported or not by timing (151 vs 873 of 1024).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common.h"

struct serving {
	struct served *s;
	size_t npages;
	int bad;
};

/* Reads every page in order, a little apart: the handler serves each. */
static void *serve_in_order(void *arg)
{
	struct serving *sv = arg;
	struct timespec gap = { 0, 50 * 1000 };
	size_t page = uffdm_region_page_size(sv->s->r);

	for (size_t i = 0; i < sv->npages; i++) {
		if (!check_page((char *)uffdm_region_view(sv->s->r) + i * page, page, i))
			sv->bad++;
		nanosleep(&gap, NULL);
	}
	return NULL;
}

static void test_track_served_start(void **state)
{
	const struct track_case *c = *state;
	struct serving sv = { .npages = c->mc->backing == UFFDM_SHMEM ? 512 : 8 };
	uint8_t bm[64] = { 0 }, filled[64] = { 0 };
	struct served s;
	size_t missed = 0, n = 0;
	pthread_t tid;
	int ret;

	served_setup(&s, c->mc, c->kind == UFFDM_TRACK_PAGEMAP_SCAN, sv.npages);
	sv.s = &s;
	assert_int_equal(pthread_create(&tid, NULL, serve_in_order, &sv), 0);
	while (served_fills(&s) < sv.npages / 8)
		sched_yield();
	ret = uffdm_tracker_start(&s.t, c->kind, uffdm_region_view(s.r), uffdm_region_size(s.r),
				  uffdm_region_page_size(s.r), 0);
	for (size_t i = 0; !ret && i < sv.npages; i++)
		if (uffdm_region_page_state(s.r, i * uffdm_region_page_size(s.r)) ==
		    UFFDM_PAGE_FILLED)
			filled[i / 8] |= 1 << i % 8;
	pthread_join(tid, NULL);
	if (ret == -EOPNOTSUPP && c->kind == UFFDM_TRACK_SOFT_DIRTY) {
		served_stop(&s);
		SKIP_BECAUSE("soft-dirty tracking does not work on %s here", c->mc->name);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(sv.bad, 0);
	assert_int_equal(uffdm_tracker_collect(s.t, bm, 0), 0);
	for (size_t i = 0; i < sv.npages; i++) {
		n += bit_is_set(filled, i);
		missed += bit_is_set(filled, i) && !bit_is_set(bm, i);
	}
	print_message("# %s: %zu of %zu pages filled at the start's return, %zu not reported\n",
		      uffdm_track_name(c->kind), n, sv.npages, missed);
	assert_true(n > 0);
	assert_int_equal(missed, 0);
	served_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_SERVED_ROWS(test_track_served_start),
	};

	return cmocka_run_group_tests_name("track-served-start", tests, NULL, NULL);
}

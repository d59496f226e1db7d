// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * UFFDM_TRACK_AUTO picks the best the kernel offers and names it: with
 * WP_ASYNC, pagemap-scan; else never none where uffd-wp works (on 6.1
 * hugetlb, without PAGEMAP_SCAN and with soft-dirty failing its probe,
 * it must pick uffd-wp).
 */
#include <errno.h>
#include <string.h>

#include "common.h"

static void test_track_auto(void **state)
{
	const struct mem_case *mc = *state;
	struct uffdm_region *r = make_region(mc, mc->backing == UFFDM_SHMEM ? 64 : 2);
	struct uffdm_probe p = probe();
	struct uffdm_tracker *t;
	enum uffdm_track_kind k;

	assert_int_equal(uffdm_tracker_start(&t, UFFDM_TRACK_AUTO, uffdm_region_view(r),
					     uffdm_region_size(r), uffdm_region_page_size(r), 0), 0);
	k = uffdm_tracker_kind(t);
	print_message("# auto on %s: %s\n", mc->name, uffdm_track_name(k));
	assert_int_not_equal(k, UFFDM_TRACK_AUTO);
	if (uffdm_probe_has(&p, UFFD_FEATURE_WP_ASYNC))
		assert_int_equal(k, UFFDM_TRACK_PAGEMAP_SCAN);
	else if (uffdm_probe_has(&p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		assert_true(k == UFFDM_TRACK_SOFT_DIRTY || k == UFFDM_TRACK_UFFD_WP);
	assert_int_equal(uffdm_tracker_needs_quiesce(t),
			 k == UFFDM_TRACK_SOFT_DIRTY || k == UFFDM_TRACK_UFFD_WP);
	uffdm_tracker_stop(t);
	put_region(r);
}

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	size_t page = uffdm_region_page_size(r);

	(void)arg;
	(void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, page, off / page);
	return 0;
}

/*
 * On memory a handler serves (registered on another userfaultfd), auto
 * either starts a kind that works there or fails saying why: never "none"
 * in silence, which reports every page dirty every round.
 */
static void test_track_auto_served(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 4, 0);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = stamp };
	struct uffdm_handler *h;
	struct uffdm_tracker *t = NULL;
	int ret;

	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	ret = uffdm_tracker_start(&t, UFFDM_TRACK_AUTO, uffdm_region_view(r),
				  uffdm_region_size(r), uffdm_region_page_size(r), 0);
	print_message("# auto on served %s: %s\n", mc->name,
		      ret ? strerror(-ret) : uffdm_track_name(uffdm_tracker_kind(t)));
	if (ret)
		assert_int_equal(ret, -EBUSY);
	else
		assert_int_not_equal(uffdm_tracker_kind(t), UFFDM_TRACK_NONE);
	uffdm_tracker_stop(t);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_track_auto),
		CROSS(test_track_auto_served),
	};

	return cmocka_run_group_tests_name("track-auto", tests, NULL, NULL);
}

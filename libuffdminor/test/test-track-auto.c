// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * UFFDM_TRACK_AUTO picks the best the kernel offers and names it: with
 * WP_ASYNC, pagemap-scan; else never none where uffd-wp works (on 6.1
 * hugetlb, without PAGEMAP_SCAN and with soft-dirty failing its probe,
 * it must pick uffd-wp).  On memory a handler serves: what works beside
 * the handler, or -EBUSY.
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

/* Whether soft-dirty starts on mc's memory here, asked on memory nobody serves. */
static bool soft_dirty_works(const struct mem_case *mc)
{
	struct uffdm_region *r = make_region(mc, 1);
	struct uffdm_tracker *t;
	int ret = uffdm_tracker_start(&t, UFFDM_TRACK_SOFT_DIRTY, uffdm_region_view(r),
				      uffdm_region_size(r), uffdm_region_page_size(r), 0);

	if (!ret)
		uffdm_tracker_stop(t);
	put_region(r);
	return !ret;
}

/*
 * On memory a handler serves with a descriptor of its own (no WP_ASYNC),
 * auto picks soft-dirty where it works, else fails with -EBUSY: never
 * "none" in silence, which reports every page dirty every round.  uffd-wp
 * cannot register there and refuses without faulting a page in.
 */
static void test_track_auto_served(void **state)
{
	const struct mem_case *mc = *state;
	bool sd = soft_dirty_works(mc);	/* first: a skip must find no handler running */
	struct served s;
	int ret;

	served_setup(&s, mc, false, 4);
	ret = uffdm_tracker_start(&s.t, UFFDM_TRACK_AUTO, uffdm_region_view(s.r),
				  uffdm_region_size(s.r), uffdm_region_page_size(s.r), 0);
	print_message("# auto on served %s: %s\n", mc->name,
		      ret ? strerror(-ret) : uffdm_track_name(uffdm_tracker_kind(s.t)));
	if (sd) {
		assert_int_equal(ret, 0);
		assert_int_equal(uffdm_tracker_kind(s.t), UFFDM_TRACK_SOFT_DIRTY);
		uffdm_tracker_stop(s.t);
	} else {
		assert_int_equal(ret, -EBUSY);
	}
	s.t = NULL;
	assert_int_equal(uffdm_tracker_start(&s.t, UFFDM_TRACK_UFFD_WP, uffdm_region_view(s.r),
					     uffdm_region_size(s.r), uffdm_region_page_size(s.r),
					     0), -EBUSY);
	assert_int_equal(served_fills(&s), 0);
	served_stop(&s);
}

/* The handler's descriptor with WP_ASYNC, the region MINOR|WP: auto shares it. */
static void test_track_auto_served_async(void **state)
{
	const struct mem_case *mc = *state;
	struct served s;

	served_setup(&s, mc, true, 4);
	assert_int_equal(uffdm_tracker_start(&s.t, UFFDM_TRACK_AUTO, uffdm_region_view(s.r),
					     uffdm_region_size(s.r), uffdm_region_page_size(s.r),
					     0), 0);
	print_message("# auto on served %s, WP_ASYNC: %s\n", mc->name,
		      uffdm_track_name(uffdm_tracker_kind(s.t)));
	assert_int_equal(uffdm_tracker_kind(s.t), UFFDM_TRACK_PAGEMAP_SCAN);
	assert_false(uffdm_tracker_needs_quiesce(s.t));
	assert_int_equal(served_fills(&s), 0);
	served_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_track_auto),
		CROSS(test_track_auto_served),
		CROSS(test_track_auto_served_async),
	};

	return cmocka_run_group_tests_name("track-auto", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Dirty tracking returns exactly the set written, round after round: a
 * page written twice in a round is one bit, a round with no writes is an
 * empty set (the view was protected again), and after stop the memory is
 * plain memory.  Each kind forced, on shmem and hugetlb.
 */
#include <errno.h>
#include <string.h>

#include "common.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Collect and compare with exactly set[0..n). */
static void expect(struct uffdm_tracker *t, size_t npages, const unsigned int *set, size_t n,
		   unsigned int flags)
{
	uint8_t bm[64] = { 0 };

	assert_true(npages <= sizeof(bm) * 8);
	assert_int_equal(uffdm_tracker_collect(t, bm, flags), 0);
	for (unsigned int p = 0; p < npages; p++)
		if (bit_is_set(bm, p) != in_set(p, set, n))
			fail_msg("%s: page %u: bit %d, written %d",
				 uffdm_track_name(uffdm_tracker_kind(t)), p, bit_is_set(bm, p),
				 in_set(p, set, n));
}

static void test_track_sets(void **state)
{
	const struct track_case *c = *state;
	size_t npages = c->mc->backing == UFFDM_SHMEM ? 64 : 4;
	unsigned int a[] = { 0, 3, 5, npages - 1 }, b[] = { 1, 3, npages - 2 }, c3[] = { 2 };
	struct uffdm_region *r = make_region(c->mc, npages);
	uint8_t *view = uffdm_region_view(r);
	size_t page = uffdm_region_page_size(r);
	struct uffdm_tracker *t;

	if (npages == 4)	/* 0 3 5 3 -> 0 3; 1 3 2: a page again, a page new */
		a[2] = 0;
	t = start_tracker(c, r);
	write_pages(view, page, a, N(a));
	write_pages(view, page, a, N(a));	/* twice in a round: one bit */
	expect(t, npages, a, N(a), 0);
	write_pages(view, page, b, N(b));
	expect(t, npages, b, N(b), 0);
	expect(t, npages, NULL, 0, 0);		/* protected again, nothing written */
	write_pages(view, page, c3, N(c3));
	expect(t, npages, c3, N(c3), UFFDM_TRACK_LAST);
	uffdm_tracker_stop(t);
	write_pages(view, page, a, N(a));	/* after stop: plain memory */
	put_region(r);
}

/* none: every page, every round; and the arguments refused. */
static void test_track_none(void **state)
{
	struct uffdm_region *r = make_region(&shmem_case, 16);
	uint8_t bm[2] = { 0 };
	struct uffdm_tracker *t;
	size_t page = uffdm_region_page_size(r);
	void *v = uffdm_region_view(r);

	(void)state;
	assert_int_equal(uffdm_tracker_start(&t, UFFDM_TRACK_NONE, v, 16 * page, page, 0), 0);
	assert_int_equal(uffdm_tracker_kind(t), UFFDM_TRACK_NONE);
	assert_false(uffdm_tracker_needs_quiesce(t));
	assert_int_equal(uffdm_tracker_collect(t, bm, 0), 0);
	assert_int_equal(bm[0] & bm[1], 0xff);
	assert_int_equal(uffdm_tracker_collect(t, bm, 1u << 5), -EINVAL);
	assert_int_equal(uffdm_tracker_collect(t, NULL, 0), -EINVAL);
	uffdm_tracker_stop(t);
	assert_int_equal(uffdm_tracker_start(&t, 99, v, page, page, 0), -EINVAL);
	assert_int_equal(uffdm_tracker_start(&t, UFFDM_TRACK_NONE, v, page + 1, page, 0), -EINVAL);
	assert_int_equal(uffdm_tracker_start(&t, UFFDM_TRACK_NONE, v, page, 3000, 0), -EINVAL);
	assert_int_equal(uffdm_tracker_start(&t, UFFDM_TRACK_NONE, (char *)v + 1, page, page, 0),
			 -EINVAL);
	assert_int_equal(uffdm_tracker_start(&t, UFFDM_TRACK_NONE, v, page, page, 1), -EINVAL);
	assert_int_equal(uffdm_track_parse("uffd-wp"), UFFDM_TRACK_UFFD_WP);
	assert_int_equal(uffdm_track_parse("auto"), UFFDM_TRACK_AUTO);
	assert_int_equal(uffdm_track_parse("bogus"), -EINVAL);
	assert_string_equal(uffdm_track_name(UFFDM_TRACK_PAGEMAP_SCAN), "pagemap-scan");
	assert_null(uffdm_track_name(99));
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_ROWS(test_track_sets),
		cmocka_unit_test(test_track_none),
	};

	return cmocka_run_group_tests_name("track-sets", tests, NULL, NULL);
}

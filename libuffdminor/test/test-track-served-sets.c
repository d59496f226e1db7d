// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Dirty tracking of memory a fill-once handler serves returns exactly the
 * set written, round after round, while the pages are still being served:
 * a write to a page not served yet (the handler fills it, then the write
 * lands), a write to a served page, a round with no writes (empty).  A page
 * served by a mere read counts as written in its round (the kernel maps it
 * dirty: conservative) and never again.  Starting the tracker serves no
 * page: its probe does not touch the caller's memory.  Each kind that can
 * work beside a handler, on shmem and hugetlb.
 */
#include <string.h>

#include "common.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void expect(struct served *s, size_t npages, const unsigned int *set, size_t n,
		   unsigned int flags, const char *round)
{
	uint8_t bm[8] = { 0 };

	assert_true(npages <= sizeof(bm) * 8);
	assert_int_equal(uffdm_tracker_collect(s->t, bm, flags), 0);
	for (unsigned int p = 0; p < npages; p++)
		if (bit_is_set(bm, p) != in_set(p, set, n))
			fail_msg("%s, round %s: page %u: bit %d, expected %d",
				 uffdm_track_name(uffdm_tracker_kind(s->t)), round, p,
				 bit_is_set(bm, p), in_set(p, set, n));
}

static void test_track_served_sets(void **state)
{
	const struct track_case *c = *state;
	size_t npages = c->mc->backing == UFFDM_SHMEM ? 64 : 8;
	const unsigned int a[] = { 0, 3, 5, npages - 1 }, b[] = { 1, 3, npages - 2 };
	const unsigned int read_new[] = { 2 }, d[] = { 2, 4 };
	struct served s;
	uint8_t *view;
	size_t page;

	served_start(&s, c, npages);
	view = uffdm_region_view(s.r);
	page = uffdm_region_page_size(s.r);
	assert_int_equal(served_fills(&s), 0);	/* the start served nothing */

	write_pages(view, page, a, N(a));	/* every page of a served by the write */
	write_pages(view, page, a, N(a));
	expect(&s, npages, a, N(a), 0, "write unserved");
	assert_int_equal(served_fills(&s), N(a));
	write_pages(view, page, b, N(b));	/* 3 served already, 1 and n-2 not */
	expect(&s, npages, b, N(b), 0, "write served and unserved");
	assert_true(check_page(view + 2 * page, page, 2));	/* served by a read ... */
	assert_true(check_page(view + 0 * page, page, 0));	/* ... and a served page read */
	expect(&s, npages, read_new, N(read_new), 0, "read");
	expect(&s, npages, NULL, 0, 0, "nothing");
	write_pages(view, page, d, N(d));
	expect(&s, npages, d, N(d), UFFDM_TRACK_LAST, "last");
	assert_int_equal(served_fills(&s), 8);	/* 0 1 2 3 4 5 n-2 n-1, once each */
	for (unsigned int p = 0; p < npages; p++)
		if (in_set(p, a, N(a)) || in_set(p, b, N(b)) || in_set(p, d, N(d)))
			assert_true(check_page(view + p * page, page, p));
	served_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_SERVED_ROWS(test_track_served_sets),
	};

	return cmocka_run_group_tests_name("track-served-sets", tests, NULL, NULL);
}

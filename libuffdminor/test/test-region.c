// SPDX-License-Identifier: LGPL-2.1-or-later
/* Region: two views of one memfd; populate, discard and zap do what they say. */
#include <errno.h>
#include <string.h>

#include "common.h"

static void test_region_views(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_region *r = make_region(mc, 4);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r), *back = uffdm_region_backing(r);

	assert_int_equal(page, case_page_size(mc));
	assert_int_equal(uffdm_region_size(r), 4 * page);
	assert_true(uffdm_region_fd(r) >= 0);
	assert_non_null(view);
	assert_non_null(back);
	assert_ptr_not_equal(view, back);
	/* Unregistered, the two views are one memory. */
	fill_page(back + 3 * page, page, 3);
	assert_true(check_page(view + 3 * page, page, 3));
	put_region(r);
}

static void test_region_discard(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_region *r = make_region(mc, 2);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r), *back = uffdm_region_backing(r);

	assert_int_equal(uffdm_region_populate(r, 0, 2 * page), 0);
	fill_page(back + page, page, 1);
	/* Zap unmaps the view only: the page cache keeps the data. */
	assert_int_equal(uffdm_region_zap(r, page, page), 0);
	assert_true(check_page(view + page, page, 1));
	/* Discard drops it: it reads back as zeroes. */
	assert_int_equal(uffdm_region_discard(r, page, page), 0);
	assert_false(check_page(view + page, page, 1));
	assert_int_equal(*(volatile uint64_t *)(view + page), 0);
	put_region(r);
}

static void test_region_sizes(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_region *r;
	size_t page = case_page_size(mc);
	int ret;

	/* Explicit sizes: 2 MiB is the default on x86; 1 GiB pools are rare. */
	if (mc->backing == UFFDM_SHMEM) {
		r = make_region(mc, 1);
		assert_int_equal(uffdm_region_page_size(r), page);
		put_region(r);
		return;
	}
	r = make_region(mc, 1);
	put_region(r);
	ret = uffdm_region_create(&r, UFFDM_HUGETLB_2M, 2u << 20);
	if (ret == -ENOMEM || ret == -EINVAL)
		SKIP_BECAUSE("no 2 MiB huge pages (%s)", strerror(-ret));
	assert_int_equal(ret, 0);
	assert_int_equal(uffdm_region_page_size(r), 2u << 20);
	put_region(r);
	assert_int_equal(uffdm_region_create(&r, UFFDM_HUGETLB_1G, 2u << 20), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_region_views),
		CROSS(test_region_discard),
		CROSS(test_region_sizes),
	};

	return cmocka_run_group_tests_name("region", tests, NULL, NULL);
}

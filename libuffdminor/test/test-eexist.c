// SPDX-License-Identifier: LGPL-2.1-or-later
/* A second CONTINUE of a mapped page is EEXIST; resolving treats it as done. */
#include <errno.h>

#include "common.h"

static void test_double_continue(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 2, 0);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);

	fill_page((char *)uffdm_region_backing(r) + page, page, 1);
	assert_int_equal(uffdm_continue(u, view + page, page, 0), (ssize_t)page);
	assert_int_equal(uffdm_continue(u, view + page, page, 0), -EEXIST);
	assert_int_equal(uffdm_resolve(u, view + page, page, NULL, 0, NULL), 1);
	/* Mapped by CONTINUE, not by a fault: reading it faults nothing. */
	assert_true(check_page(view + page, page, 1));
	/* Over a range part mapped, the rest gets mapped and all is woken. */
	assert_int_equal(uffdm_resolve(u, view, 2 * page, NULL, 0, NULL), 1);
	put_region(r);
	put_uffd(u);
}

/*
 * The first page mapped already: uffdm_resolve still maps the pages after
 * it (it returned 1 and left them unmapped, against its man page).  A
 * page left unmapped would CONTINUE again instead of EEXIST.
 */
static void test_resolve_first_mapped(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 4, 0);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);

	assert_int_equal(uffdm_continue(u, view, page, 0), (ssize_t)page);
	assert_int_equal(uffdm_continue(u, view + 2 * page, page, 0), (ssize_t)page);
	assert_int_equal(uffdm_resolve(u, view, 4 * page, NULL, 0, NULL), 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(uffdm_continue(u, view + i * page, page, 0), -EEXIST);
	put_region(r);
	put_uffd(u);
}

/* CONTINUE needs a page in the page cache: a hole is EFAULT. */
static void test_continue_hole(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	size_t page = uffdm_region_page_size(r);

	assert_int_equal(uffdm_region_discard(r, 0, page), 0);
	assert_int_equal(uffdm_continue(u, uffdm_region_view(r), page, 0), -EFAULT);
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_double_continue),
		CROSS(test_continue_hole),
		CROSS(test_resolve_first_mapped),
	};

	return cmocka_run_group_tests_name("eexist", tests, NULL, NULL);
}

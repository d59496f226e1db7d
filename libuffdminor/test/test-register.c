// SPDX-License-Identifier: LGPL-2.1-or-later
/* Register: MINOR on shmem/hugetlb, with MISSING/WP; refused on anonymous memory. */
#include <errno.h>
#include <sys/mman.h>

#include "common.h"

static void test_register_minor(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = make_region(mc, 2);
	uint64_t ioctls = 0;

	assert_int_equal(uffdm_region_register(u, r, 0, &ioctls), 0);
	assert_true(ioctls & (1ull << _UFFDIO_CONTINUE));
	assert_true(ioctls & (1ull << _UFFDIO_WAKE));
	/* A second registration of the same range is a no-op, not an error. */
	assert_int_equal(uffdm_region_register(u, r, 0, NULL), 0);
	assert_int_equal(uffdm_region_unregister(u, r), 0);
	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_MISSING, &ioctls), 0);
	assert_true(ioctls & (1ull << _UFFDIO_COPY));
	assert_int_equal(uffdm_region_unregister(u, r), 0);
	put_region(r);
	put_uffd(u);
}

static void test_register_wp(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_probe p = probe();
	struct uffdm *u;
	struct uffdm_region *r;
	uint64_t ioctls = 0;

	if (!uffdm_probe_has(&p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		SKIP_BECAUSE("kernel lacks WP on shmem/hugetlbfs (Linux 5.19+, PTE_MARKER_UFFD_WP)");
	u = open_uffd(0, UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM);
	r = make_region(mc, 2);
	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_WP, &ioctls), 0);
	assert_true(ioctls & (1ull << _UFFDIO_WRITEPROTECT));
	assert_int_equal(uffdm_region_unregister(u, r), 0);
	put_region(r);
	put_uffd(u);
}

/* MISSING without MINOR: a cached page is mapped with no fault at all. */
static void test_register_no_minor(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = make_region(mc, 2);
	uint64_t ioctls = 0;

	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_NO_MINOR, NULL), -EINVAL);
	assert_int_equal(uffdm_region_populate(r, 0, uffdm_region_page_size(r)), 0);
	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_MISSING |
					       UFFDM_REGISTER_NO_MINOR, &ioctls), 0);
	assert_true(ioctls & (1ull << _UFFDIO_COPY));
	/* would block forever on a minor fault with nobody serving it */
	assert_int_equal(*(volatile char *)uffdm_region_view(r), 0);
	assert_int_equal(uffdm_region_unregister(u, r), 0);
	put_region(r);
	put_uffd(u);
}

/* Minor faults need a page cache: anonymous memory has none. */
static void test_register_anon_refused(void **state)
{
	const struct mem_case *mc = need_case(state);
	size_t page = case_page_size(mc);
	struct uffdm *u = open_uffd(0, 0);
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	if (mc->backing != UFFDM_SHMEM)
		page = 2 * page;	/* anonymous, but large enough to hold a huge page */
	p = mmap(NULL, page, PROT_READ | PROT_WRITE, flags, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(uffdm_range_register(u, p, page, 0, NULL), -EINVAL);
	munmap(p, page);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_register_minor),
		CROSS(test_register_wp),
		CROSS(test_register_no_minor),
		CROSS(test_register_anon_refused),
	};

	return cmocka_run_group_tests_name("register", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The newer resolving ioctls: CONTINUE_MODE_WP (6.4+) and POISON (6.6+)
 * work where the probe says so and are -EOPNOTSUPP elsewhere (then the
 * case says which kernel it needs and skips).
 */
#include <errno.h>
#include <pthread.h>

#include "common.h"

static void *write_page(void *arg)
{
	*(volatile char *)arg = 7;
	return NULL;
}

static void test_continue_wp(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_probe p = probe();
	uint64_t feat = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_event ev;
	size_t page;
	char *view;
	pthread_t t;

	if (!uffdm_probe_continue_wp(&p)) {
		u = open_uffd(0, 0);
		r = registered_region(u, mc, 1, 0);
		assert_int_equal(uffdm_continue(u, uffdm_region_view(r), uffdm_region_page_size(r),
						UFFDM_WP), -EOPNOTSUPP);
		put_region(r);
		put_uffd(u);
		SKIP_BECAUSE("kernel lacks UFFDIO_CONTINUE_MODE_WP (Linux 6.4+): -EOPNOTSUPP checked");
	}
	u = open_uffd(0, feat);
	r = registered_region(u, mc, 1, UFFDM_REGISTER_WP);
	page = uffdm_region_page_size(r);
	view = uffdm_region_view(r);
	assert_int_equal(uffdm_continue(u, view, page, UFFDM_WP), (ssize_t)page);
	/* Mapped write-protected: a read passes, a write is a WP fault. */
	assert_int_equal(*(volatile char *)view, 0);
	pthread_create(&t, NULL, write_page, view);
	assert_int_equal(uffdm_events_read(u, &ev, 1, 0), 1);
	assert_int_equal(ev.kind, UFFDM_EVENT_WP);
	assert_int_equal(ev.flags & UFFDM_FAULT_WRITE, UFFDM_FAULT_WRITE);
	assert_int_equal(uffdm_writeprotect(u, view, page, false), 0);
	pthread_join(t, NULL);
	assert_int_equal(((volatile char *)uffdm_region_backing(r))[0], 7);
	put_region(r);
	put_uffd(u);
}

static void test_poison(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_probe p = probe();
	struct uffdm *u = open_uffd(0, uffdm_probe_poison(&p) ? UFFD_FEATURE_POISON : 0);
	struct uffdm_region *r = registered_region(u, mc, 2, 0);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);

	if (!uffdm_probe_poison(&p)) {
		assert_int_equal(uffdm_poison(u, view, page, 0), -EOPNOTSUPP);
		put_region(r);
		put_uffd(u);
		SKIP_BECAUSE("kernel lacks UFFDIO_POISON (Linux 6.6+): -EOPNOTSUPP checked");
	}
	assert_int_equal(uffdm_poison(u, view, page, 0), (ssize_t)page);
	/* Poisoned once is enough; CONTINUE replaces the marker (recovery). */
	assert_int_equal(uffdm_poison(u, view, page, 0), -EEXIST);
	fill_page(uffdm_region_backing(r), page, 0);
	assert_int_equal(uffdm_continue(u, view, page, 0), (ssize_t)page);
	assert_true(check_page(view, page, 0));
	assert_int_equal(uffdm_continue(u, view + page, page, 0), (ssize_t)page);
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_continue_wp),
		CROSS(test_poison),
	};

	return cmocka_run_group_tests_name("features", tests, NULL, NULL);
}

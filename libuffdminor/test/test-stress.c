// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Stress: 8 threads fault 10k pages each (shmem; hugetlb takes what a
 * small pool allows) on 4 handler threads: no fault lost or doubled.
 * UFFDM_STRESS_PAGES overrides the shmem pages per thread, for a slow
 * emulator.
 */
#include <stdlib.h>

#include "common.h"

static size_t shmem_pages(void)
{
	const char *env = getenv("UFFDM_STRESS_PAGES");
	size_t n = env ? strtoul(env, NULL, 0) : 0;

	return n ? n : 10000;
}

static void test_stress(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct e2e e = {
		.pages_per_thread = mc->backing == UFFDM_SHMEM ? shmem_pages() : 8,
		.fault_threads = 8, .handler_threads = 4,
	};

	e2e_check(mc, &e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_stress),
	};

	return cmocka_run_group_tests_name("stress", tests, NULL, NULL);
}

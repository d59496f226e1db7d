// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Stress: 8 threads fault 10k pages each (shmem; hugetlb takes what a
 * small pool allows) on 4 handler threads: no fault lost or doubled.
 */
#include "common.h"

static void test_stress(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct e2e e = {
		.pages_per_thread = mc->backing == UFFDM_SHMEM ? 10000 : 8,
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

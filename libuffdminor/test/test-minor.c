// SPDX-License-Identifier: LGPL-2.1-or-later
/* End to end: every page faulted once, made right by the callback, contents checked. */
#include "common.h"

static void test_minor_one_handler(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct e2e e = {
		.pages_per_thread = mc->backing == UFFDM_SHMEM ? 256 : 8,
		.fault_threads = 1, .handler_threads = 1,
	};

	e2e_check(mc, &e);
}

static void test_minor_two_handlers(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct e2e e = {
		.pages_per_thread = mc->backing == UFFDM_SHMEM ? 256 : 4,
		.fault_threads = 2, .handler_threads = 2,
	};

	e2e_check(mc, &e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_minor_one_handler),
		CROSS(test_minor_two_handlers),
	};

	return cmocka_run_group_tests_name("minor", tests, NULL, NULL);
}

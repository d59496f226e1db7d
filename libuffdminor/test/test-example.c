// SPDX-License-Identifier: LGPL-2.1-or-later
/* The example of uffdminor(7), compiled from the very file the page shows. */
#define main example_main
#include "../doc/example.c"
#undef main

#include "common.h"

static void test_example(void **state)
{
	need_case(state);
	assert_int_equal(example_main(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		{ "example/shmem", test_example, NULL, NULL, (void *)&shmem_case },
	};

	return cmocka_run_group_tests_name("example", tests, NULL, NULL);
}

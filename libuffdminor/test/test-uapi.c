// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The vendored UAPI header after a stale system one: it must add the
 * post-6.1 definitions without clashing, with the kernel's values (and
 * UFFDIO_CONTINUE's _IOWR number, not the first header's _IOR).
 */
#include <linux/userfaultfd.h>

#include "common.h"

_Static_assert(UFFDIO_CONTINUE == 0xc020aa07, "UFFDIO_CONTINUE is _IOWR");
_Static_assert(UFFDIO_POISON == 0xc020aa08, "UFFDIO_POISON");
_Static_assert(UFFDIO_MOVE == 0xc028aa05, "UFFDIO_MOVE");
_Static_assert(UFFDIO_CONTINUE_MODE_WP == 2, "CONTINUE_MODE_WP");
_Static_assert(UFFD_FEATURE_POISON == 1 << 14 && UFFD_FEATURE_WP_ASYNC == 1 << 15 &&
	       UFFD_FEATURE_MOVE == 1 << 16, "features");
_Static_assert(sizeof(struct uffd_msg) == 32, "uffd_msg");

static void test_uapi_sizes(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct uffdio_continue), 32);
	assert_int_equal(sizeof(struct uffdio_poison), 32);
	assert_int_equal(sizeof(struct uffdio_move), 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uapi_sizes),
	};

	return cmocka_run_group_tests_name("uapi", tests, NULL, NULL);
}

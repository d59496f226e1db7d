// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Unprivileged use: as uid/gid 65534 (a root run forks and drops there)
 * the default open must work where /dev/userfaultfd is root-only and
 * vm.unprivileged_userfaultfd=0, through the syscall with
 * UFFD_USER_MODE_ONLY; asking for kernel faults there is refused with a
 * message naming the paths and the sysctl.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static int as_nobody(void *arg)
{
	struct e2e *e = arg;
	int ret = drop_privileges();

	if (ret) {
		fprintf(stderr, "cannot drop to 65534: %s\n", strerror(-ret));
		return 10;
	}
	ret = e2e_run(e);
	if (ret) {
		fprintf(stderr, "unprivileged run failed: %s\n", e->why);
		return 11;
	}
	if (e->lost || e->dup || e->bad || e->stats.minor != e->pages_per_thread)
		return 12;
	return 0;
}

static void test_unpriv_faults(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct e2e e = {
		.backing = mc->backing, .pages_per_thread = 16,
		.fault_threads = 1, .handler_threads = 1,
	};
	struct child_result res;

	put_region(make_region(mc, e.pages_per_thread));
	res = run_child(as_nobody, &e, 30);
	assert_int_equal(res.signal, 0);
	assert_int_equal(res.status, 0);
}

static int explain_as_nobody(void *arg)
{
	struct uffdm *u;
	char why[1024];
	int ret;

	(void)arg;
	if (drop_privileges())
		return 10;
	ret = uffdm_open(&u, UFFDM_OPEN_KERNEL_FAULTS, 0);
	if (!ret)
		return 20;	/* the administrator allowed it: nothing to explain */
	uffdm_open_explain(why, sizeof(why));
	fprintf(stderr, "refused (%s): %s\n", strerror(-ret), why);
	if (!strstr(why, "/dev/userfaultfd") || !strstr(why, "vm.unprivileged_userfaultfd") ||
	    !strstr(why, "userfaultfd(2)"))
		return 13;
	return 0;
}

static void test_unpriv_explain(void **state)
{
	struct child_result res;

	(void)state;
	probe();
	res = run_child(explain_as_nobody, NULL, 10);
	if (res.status == 20)
		SKIP_BECAUSE("kernel-mode faults are allowed to uid 65534 here (device mode or sysctl)");
	assert_int_equal(res.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_unpriv_faults),
		cmocka_unit_test(test_unpriv_explain),
	};

	return cmocka_run_group_tests_name("unpriv", tests, NULL, NULL);
}

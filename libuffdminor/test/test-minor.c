// SPDX-License-Identifier: LGPL-2.1-or-later
/* End to end: every page faulted once, made right by the callback, contents checked. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

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

static int stamp_page(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, uffdm_region_page_size(r), 0);
	return 0;
}

/* write(2) from the view: the kernel, not the thread, takes the fault. */
static ssize_t write_from_view(struct uffdm_region *r)
{
	int p[2];
	ssize_t n;
	uint64_t got = 0;

	assert_int_equal(pipe(p), 0);
	n = write(p[1], uffdm_region_view(r), sizeof(got));
	if (n < 0)
		n = -errno;
	else
		assert_int_equal(read(p[0], &got, sizeof(got)), sizeof(got));
	close(p[0]);
	close(p[1]);
	if (n > 0)
		assert_int_equal(got, 0x5546464d00000000ull);
	return n;
}

/*
 * User-mode only (the default): a system call touching an unresolved page
 * fails with EFAULT.  With UFFDM_OPEN_KERNEL_FAULTS it waits for the handler.
 */
static void test_kernel_access(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = stamp_page };
	struct uffdm_handler *h;
	struct uffdm_region *r;
	struct uffdm *u;
	int ret;

	u = open_uffd(0, 0);
	r = registered_region(u, mc, 1, 0);
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(write_from_view(r), -EFAULT);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	put_region(r);
	put_uffd(u);

	ret = uffdm_open(&u, UFFDM_OPEN_KERNEL_FAULTS, 0);
	if (ret == -EPERM || ret == -EACCES)
		SKIP_BECAUSE("kernel-mode faults need CAP_SYS_PTRACE, vm.unprivileged_userfaultfd=1 "
			     "or access to /dev/userfaultfd (%s)", strerror(-ret));
	assert_int_equal(ret, 0);
	r = registered_region(adopt_uffd(u), mc, 1, 0);
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(write_from_view(r), 8);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_minor_one_handler),
		CROSS(test_minor_two_handlers),
		CROSS(test_kernel_access),
	};

	return cmocka_run_group_tests_name("minor", tests, NULL, NULL);
}

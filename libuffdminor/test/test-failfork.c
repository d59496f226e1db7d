// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A range failed in one mapping (uffdm_range_fail(3): several runs, served
 * pages between) is a view registered on a SIGBUS descriptor without
 * UFFD_FEATURE_EVENT_FORK (it needs CAP_SYS_PTRACE), so a child of fork(2)
 * would get a copy without the registration and read the page cache: a
 * hole's zeroes.  The view is not copied (MADV_DONTFORK): in the child a
 * failed page must never read; here it dies of a signal.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define PAGES	8	/* even pages served, odd ones failed */

static int fork_run(void *arg)
{
	const struct mem_case *mc = arg;
	size_t page = case_page_size(mc);
	struct uffdm_region *r;
	struct uffdm *u;
	char *view;
	pid_t pid;
	int st;

	if (uffdm_region_create(&r, mc->backing, PAGES * page) || uffdm_open(&u, 0, 0))
		return 3;
	view = uffdm_region_view(r);
	for (size_t i = 0; i < PAGES; i += 2)
		fill_page(view + i * page, page, i);
	if (uffdm_region_register(u, r, UFFDM_REGISTER_MISSING, NULL) ||
	    uffdm_range_fail(u, view, PAGES * page, page, UFFDM_FAIL_SIGBUS_FD))
		return 4;
	pid = fork();
	if (pid < 0)
		return 3;
	if (pid == 0) {
		volatile char *p = view + page;

		_exit(*p == 0 ? 10 : 11);	/* read: wrong, whatever it read */
	}
	if (waitpid(pid, &st, 0) != pid)
		return 3;
	return WIFSIGNALED(st) ? 0 : WEXITSTATUS(st);
}

static void test_fork_child_never_reads(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct child_result res;

	put_region(make_region(mc, PAGES));	/* skip on a small pool */
	res = run_child(fork_run, (void *)mc, 20);
	if (res.signal)
		fail_msg("the parent died of signal %d", res.signal);
	if (res.status)
		fail_msg("step %d failed: 3 setup, 4 uffdm_range_fail, 10 the child read zeroes, "
			 "11 the child read a failed page", res.status);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_fork_child_never_reads),
	};

	return cmocka_run_group_tests_name("failfork", tests, NULL, NULL);
}

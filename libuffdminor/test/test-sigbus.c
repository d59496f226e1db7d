// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * When the callback cannot make a page right, the faulting thread gets
 * SIGBUS and never hangs: by UFFDIO_POISON (6.6+) or by moving the page
 * to a UFFD_FEATURE_SIGBUS descriptor.  Run in a child under alarm().
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "common.h"

struct sigbus_case {
	const struct mem_case *mc;
	unsigned int handler_flags;
};

static int refuse(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return -EIO;
}

static int fault_and_die(void *arg)
{
	const struct sigbus_case *sc = arg;
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = refuse, .flags = sc->handler_flags,
	};
	struct uffdm_handler *h;
	struct uffdm_region *r;
	struct uffdm *u;

	if (uffdm_region_create(&r, sc->mc->backing, case_page_size(sc->mc)) ||
	    uffdm_region_populate(r, 0, uffdm_region_size(r)) ||
	    uffdm_open(&u, 0, 0) || uffdm_region_register(u, r, 0, NULL) ||
	    uffdm_handler_start(&h, u, r, &cfg))
		return 3;
	/* Should not come back from this read. */
	return *(volatile char *)uffdm_region_view(r) == 0 ? 1 : 2;
}

static void expect_sigbus(const struct mem_case *mc, unsigned int handler_flags)
{
	struct sigbus_case sc = { mc, handler_flags };
	struct child_result res;

	put_region(make_region(mc, 1));	/* skip on an empty pool */
	res = run_child(fault_and_die, &sc, 20);
	if (res.signal == SIGALRM)
		fail_msg("faulting thread hung: the watchdog fired");
	if (res.exited)
		fail_msg("child exited with status %d instead of dying of SIGBUS", res.status);
	assert_int_equal(res.signal, SIGBUS);
}

static void test_sigbus_poison(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_probe p = probe();

	if (!uffdm_probe_poison(&p))
		SKIP_BECAUSE("kernel lacks UFFDIO_POISON (Linux 6.6+); the SIGBUS-fd case covers it");
	expect_sigbus(mc, 0);
}

static void test_sigbus_fd(void **state)
{
	expect_sigbus(need_case(state), UFFDM_HANDLER_SIGBUS_FD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_sigbus_poison),
		CROSS(test_sigbus_fd),
	};

	return cmocka_run_group_tests_name("sigbus", tests, NULL, NULL);
}

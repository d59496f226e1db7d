// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A program as a user writes it from the man pages alone (uffdm_open,
 * uffdm_region_create, uffdm_adopt, uffdm_sigbus_adopt,
 * uffdm_region_from_fd, uffdm_region_adopt_state, uffdm_handler_start,
 * uffdm_watchdog_start): a VMM registers a region, forks a pager that
 * adopts the userfaultfd and serves pages, and the pager dies with a fault
 * in hand after a few pages. Without a spare, every page it never served
 * raises SIGBUS; with a spare that the watchdog's lost() wakes, every page
 * arrives. Either way the documented teardown succeeds. Only the memory
 * comes from the test harness (it skips on an empty huge-page pool).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define PAGES		32
#define DIE_AFTER	8

static struct uffdm *u;
static struct uffdm_region *r;
static int served, die_after;
static int spare_go[2], spare_pidfd = -1;

static int fill(void *arg, struct uffdm_region *reg, size_t off, const struct uffdm_event *ev)
{
	size_t ps = uffdm_region_page_size(reg);

	(void)arg;
	(void)ev;
	if (die_after && served == die_after)
		_exit(9);	/* the pager dies with a fault in hand */
	memset((char *)uffdm_region_backing(reg) + off, (int)(off / ps) + 1, ps);
	served++;
	return 0;
}

/* The pager process: adopt everything the VMM made, serve until SIGTERM. */
static void pager(unsigned int state_flags, int go)
{
	struct uffdm_handler_config cfg = { .threads = 1, .fault = fill };
	struct uffdm_region *mine;
	struct uffdm_handler *h;
	struct uffdm *pu;
	char c;
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (go >= 0 && read(go, &c, 1) != 1)
		_exit(0);
	ret = uffdm_adopt(&pu, dup(uffdm_fd(u)), 0, 0);
	if (!ret)
		ret = uffdm_sigbus_adopt(pu, dup(uffdm_sigbus_fd(u)));
	if (!ret)
		ret = uffdm_region_from_fd(&mine, uffdm_region_fd(r), 0, uffdm_region_size(r),
					   (uintptr_t)uffdm_region_view(r), 0);
	if (!ret)
		ret = uffdm_region_adopt_state(mine, dup(uffdm_region_state_fd(r)), state_flags);
	if (!ret)
		ret = uffdm_handler_start(&h, pu, mine, &cfg);
	if (ret) {
		fprintf(stderr, "pager: %s\n", strerror(-ret));
		_exit(3);
	}
	for (;;)
		pause();
}

static int lost(enum uffdm_server_loss why, void *arg)
{
	(void)arg;
	print_message("# vmm: pager lost (%s)\n", why == UFFDM_SERVER_DIED ? "died" : "stalled");
	if (spare_pidfd < 0 || write(spare_go[1], "g", 1) != 1)
		return -1;
	return spare_pidfd;
}

static sigjmp_buf jb;

static void on_bus(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static void run(void **state, int replace)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_watchdog_params p = { .size = sizeof(p), .stall_ms = 1000, .lost = lost };
	struct uffdm_watchdog_report rep = { .size = sizeof(rep) };
	struct uffdm_watchdog *w;
	/* volatile: read after siglongjmp, and i may be kept in memory a step ahead */
	volatile int ok = 0, bus = 0, bad = 0;
	volatile size_t i;
	pid_t a, b = -1;
	size_t ps;
	int st;

	served = 0;
	spare_pidfd = -1;
	r = make_region(mc, PAGES);
	u = open_uffd(0, 0);
	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_MISSING, NULL), 0);
	/* the page states the servers share, made before the first fork */
	assert_true(uffdm_region_state_fd(r) >= 0);
	ps = uffdm_region_page_size(r);
	if (replace) {
		assert_int_equal(pipe(spare_go), 0);
		b = fork();
		assert_true(b >= 0);
		if (!b) {
			close(spare_go[1]);
			pager(UFFDM_STATE_TAKEOVER, spare_go[0]);
		}
		close(spare_go[0]);
		spare_pidfd = (int)syscall(SYS_pidfd_open, b, 0);
		assert_true(spare_pidfd >= 0);
	}
	die_after = DIE_AFTER;
	a = fork();
	assert_true(a >= 0);
	if (!a)
		pager(0, -1);
	die_after = 0;
	p.server_fd = (int)syscall(SYS_pidfd_open, a, 0);
	assert_true(p.server_fd >= 0);
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), 0);

	signal(SIGBUS, on_bus);
	for (i = 0; i < PAGES; i++) {
		volatile char *q = (char *)uffdm_region_view(r) + i * ps;

		if (sigsetjmp(jb, 1)) {
			bus++;
			continue;
		}
		if (q[0] == (char)(i + 1) && q[ps - 1] == (char)(i + 1))
			ok++;
		else
			bad++;
	}
	signal(SIGBUS, SIG_DFL);
	assert_int_equal(uffdm_watchdog_stop(w, &rep), 0);
	print_message("# %s: ok %d sigbus %d wrong %d; died %u replaced %u takeover %.3f ms\n",
		      replace ? "replace" : "fail", ok, bus, bad, rep.died, rep.replaced,
		      rep.takeover_ns / 1e6);
	assert_int_equal(waitpid(a, &st, 0), a);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 9);
	if (b > 0) {
		kill(b, SIGTERM);
		waitpid(b, &st, 0);
		close(spare_go[1]);
		close(spare_pidfd);
	}
	close(p.server_fd);
	assert_int_equal(bad, 0);
	assert_int_equal(rep.died, 1);
	if (replace) {
		assert_int_equal(ok, PAGES);
		assert_int_equal(rep.replaced, 1);
	} else {
		assert_int_equal(ok, DIE_AFTER);
		assert_int_equal(bus, PAGES - DIE_AFTER);
	}
	assert_int_equal(uffdm_region_unregister(u, r), 0);
	put_all();
}

static void test_pager_dies_fail(void **state)
{
	run(state, 0);
}

static void test_pager_dies_replace(void **state)
{
	run(state, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_pager_dies_fail),
		CROSS(test_pager_dies_replace),
	};

	return cmocka_run_group_tests_name("manpage", tests, NULL, NULL);
}

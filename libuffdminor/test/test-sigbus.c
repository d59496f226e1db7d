// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * When the callback cannot make a page right, the faulting thread gets
 * SIGBUS and never hangs, never reads stale or zero data, and a refused
 * write never lands: by UFFDIO_POISON (6.6+) or by moving the page to a
 * UFFD_FEATURE_SIGBUS descriptor.  Each case for both paths, in a child
 * under alarm().
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

enum scenario {
	S_MINOR,	/* a minor fault refused */
	S_WP,		/* a write-protect fault refused: the write must not land */
	S_HOLE,		/* a missing fault on a hole refused: no zeroes */
	S_HOLE_LATER,	/* the same; the first touch may race, later ones must not */
	S_AFTER_STOP,	/* refused, then the handler stops: still SIGBUS */
	S_SICODE,	/* a minor fault refused: which si_code arrives (exit 100 + it) */
};

struct sigbus_case {
	const struct mem_case *mc;
	unsigned int handler_flags;
	enum scenario s;
};

static int refuse(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return -EIO;
}

static sigjmp_buf env;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

/* 1 when reading p raised SIGBUS (caught), 0 when it read. */
static int read_sigbus(volatile char *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int got = 1;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(env, 1)) {
		(void)*p;
		got = 0;
	}
	sigaction(SIGBUS, &old, NULL);
	return got;
}

static void on_sigbus_info(int sig, siginfo_t *si, void *uc)
{
	(void)sig; (void)uc;
	_exit(100 + si->si_code);
}

static unsigned int reg_flags(enum scenario s)
{
	return s == S_WP ? UFFDM_REGISTER_WP :
	       s == S_HOLE || s == S_HOLE_LATER ? UFFDM_REGISTER_MISSING : 0;
}

static uint64_t features(enum scenario s)
{
	return s == S_WP ? UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0;
}

static int fault_and_die(void *arg)
{
	const struct sigbus_case *sc = arg;
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = refuse, .flags = sc->handler_flags,
	};
	struct uffdm_handler *h;
	struct uffdm_region *r;
	volatile char *view;
	struct uffdm *u;
	size_t page = case_page_size(sc->mc);

	if (uffdm_region_create(&r, sc->mc->backing, page) ||
	    uffdm_region_populate(r, 0, page) || uffdm_open(&u, 0, features(sc->s)) ||
	    uffdm_region_register(u, r, reg_flags(sc->s), NULL))
		return 3;
	view = uffdm_region_view(r);
	((char *)uffdm_region_backing(r))[0] = 's';	/* stale: must never be seen */
	if ((sc->s == S_HOLE || sc->s == S_HOLE_LATER) && uffdm_region_discard(r, 0, page))
		return 3;
	/* Mapped and write-protected before the handler knows the page. */
	if (sc->s == S_WP && (uffdm_continue(u, (void *)view, page, 0) != (ssize_t)page ||
			      uffdm_writeprotect(u, (void *)view, page, true)))
		return 3;
	if (uffdm_handler_start(&h, u, r, &cfg))
		return 3;
	switch (sc->s) {
	case S_WP:
		view[0] = 'w';		/* should not come back */
		return ((char *)uffdm_region_backing(r))[0] == 'w' ? 4 : 1;
	case S_SICODE: {
		struct sigaction sa = { .sa_sigaction = on_sigbus_info, .sa_flags = SA_SIGINFO };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, NULL);
		return view[0] == 0 ? 1 : 2;
	}
	case S_AFTER_STOP:
		if (!read_sigbus(view))
			return 5;
		if (uffdm_handler_stop(h, NULL))
			return 3;
		return read_sigbus(view) ? 0 : 6;
	case S_HOLE_LATER:
		/*
		 * The first touch may read a zero page (the kernel's UNREGISTER
		 * wakes it early, see uffdm_handler_start(3)); the page is failed
		 * for good all the same: a hole there again is SIGBUS.
		 */
		if (!read_sigbus(view)) {
			struct uffdm_stats st = { 0 };

			/* the handler is still moving the page: let it finish */
			while (!st.failed && !uffdm_handler_stats(h, &st))
				usleep(1000);
			if (uffdm_region_discard(r, 0, page) ||
			    madvise((void *)view, page, MADV_DONTNEED))
				return 3;
		}
		return view[0] == 0 ? 1 : 2;	/* should not come back */
	default:
		return view[0] == 0 ? 1 : 2;	/* should not come back */
	}
}

static int last_si_code;

static void expect_sigbus(const struct mem_case *mc, unsigned int handler_flags,
			  enum scenario s)
{
	struct sigbus_case sc = { mc, handler_flags, s };
	struct child_result res;

	put_region(make_region(mc, 1));	/* skip on an empty pool */
	res = run_child(fault_and_die, &sc, 20);
	if (res.signal == SIGALRM)
		fail_msg("faulting thread hung (or livelocked): the watchdog fired");
	if (s == S_SICODE) {
		if (!res.exited || res.status < 100)
			fail_msg("status %d signal %d: no SIGBUS caught", res.status, res.signal);
		last_si_code = res.status - 100;
		return;
	}
	if (s == S_AFTER_STOP) {
		if (!res.exited || res.status)
			fail_msg("status %d signal %d: 5 = no SIGBUS at first, 6 = none after stop",
				 res.status, res.signal);
		return;
	}
	if (res.exited)
		fail_msg("child exited with status %d instead of dying of SIGBUS "
			 "(1: read the unserved page, 2: stale data, 4: refused write landed)",
			 res.status);
	assert_int_equal(res.signal, SIGBUS);
}

static void need_poison(void)
{
	struct uffdm_probe p = probe();

	if (!uffdm_probe_poison(&p))
		SKIP_BECAUSE("kernel lacks UFFDIO_POISON (Linux 6.6+); the SIGBUS-fd case covers it");
}

static void need_wp(void)
{
	struct uffdm_probe p = probe();

	if (!uffdm_probe_has(&p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		SKIP_BECAUSE("kernel lacks WP on shmem/hugetlbfs (Linux 5.19+, PTE_MARKER_UFFD_WP)");
}

static void test_sigbus_poison(void **state)
{
	const struct mem_case *mc = need_case(state);

	need_poison();
	expect_sigbus(mc, 0, S_MINOR);
}

static void test_sigbus_fd(void **state)
{
	expect_sigbus(need_case(state), UFFDM_HANDLER_SIGBUS_FD, S_MINOR);
}

/* It livelocked on the POISON path (POISON cannot replace a mapped page). */
static void test_wp_poison(void **state)
{
	const struct mem_case *mc = need_case(state);

	need_poison();
	need_wp();
	expect_sigbus(mc, 0, S_WP);
}

/* It let the refused write through on the SIGBUS-descriptor path. */
static void test_wp_fd(void **state)
{
	const struct mem_case *mc = need_case(state);

	need_wp();
	expect_sigbus(mc, UFFDM_HANDLER_SIGBUS_FD, S_WP);
}

static void test_hole_poison(void **state)
{
	const struct mem_case *mc = need_case(state);

	need_poison();
	expect_sigbus(mc, 0, S_HOLE);
}

/*
 * It read zeroes for good: the SIGBUS descriptor was registered MINOR only.
 * The first touch can still race with UNREGISTER's wake (documented).
 */
static void test_hole_fd(void **state)
{
	expect_sigbus(need_case(state), UFFDM_HANDLER_SIGBUS_FD, S_HOLE_LATER);
}

static void test_after_stop_poison(void **state)
{
	const struct mem_case *mc = need_case(state);

	need_poison();
	expect_sigbus(mc, 0, S_AFTER_STOP);
}

/* The SIGBUS descriptor closed with the handler: the page showed its stale content. */
static void test_after_stop_fd(void **state)
{
	expect_sigbus(need_case(state), UFFDM_HANDLER_SIGBUS_FD, S_AFTER_STOP);
}

/*
 * POISON faults are VM_FAULT_HWPOISON: arm64 signals BUS_MCEERR_AR, x86
 * only with CONFIG_MEMORY_FAILURE (its sysctl is the sign), else
 * BUS_ADRERR.  A SIGBUS descriptor's fault is VM_FAULT_SIGBUS: BUS_ADRERR.
 * As uffdm_handler_start(3) documents.
 */
static int poison_si_code(void)
{
#if defined(__aarch64__)
	return BUS_MCEERR_AR;
#else
	return access("/proc/sys/vm/memory_failure_early_kill", F_OK) ? BUS_ADRERR : BUS_MCEERR_AR;
#endif
}

static void test_si_code_poison(void **state)
{
	const struct mem_case *mc = need_case(state);

	need_poison();
	expect_sigbus(mc, 0, S_SICODE);
	print_message("si_code %d\n", last_si_code);
	assert_int_equal(last_si_code, poison_si_code());
}

static void test_si_code_fd(void **state)
{
	expect_sigbus(need_case(state), UFFDM_HANDLER_SIGBUS_FD, S_SICODE);
	assert_int_equal(last_si_code, BUS_ADRERR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_sigbus_poison),
		CROSS(test_sigbus_fd),
		CROSS(test_wp_poison),
		CROSS(test_wp_fd),
		CROSS(test_hole_poison),
		CROSS(test_hole_fd),
		CROSS(test_after_stop_poison),
		CROSS(test_after_stop_fd),
		CROSS(test_si_code_poison),
		CROSS(test_si_code_fd),
	};

	return cmocka_run_group_tests_name("sigbus", tests, NULL, NULL);
}

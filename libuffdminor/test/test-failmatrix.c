// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The failure guarantee as a table of adversaries (kernel-selftest style):
 * fault kind x cause x failure path x handler mode (its own threads, or
 * the application's event loop), for each memory type.  Every cell
 * fails one page and asserts the five properties uffdm_handler_start(3)
 * promises for a failed page:
 *
 *   sigbus   every thread touching it gets SIGBUS, the first ones and the
 *            later ones (read and write);
 *   write    a refused write never lands (the backing page is unchanged);
 *   msgs     the fault messages for the page are bounded (no livelock),
 *            and a thread waiting on a deferred page does not refault;
 *   time     every step ends: a child silent for CELL_SILENCE_S seconds is
 *            killed and its cell fails (cells.c) (the limit follows progress);
 *   teardown stop, unregister, destroy, close succeed in that order.
 *
 * Each cell runs in its own forked child, several at once, so a hang or a
 * crash is one failed cell, not a hung suite.  The table is printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "cells.h"

enum kind { K_MINOR_READ, K_MINOR_WRITE, K_HOLE, K_WP, K_NR };
enum cause { C_CB_ERR, C_CB_NOWRITE, C_DEFER_ERR, C_DEFER_STOP, C_AFTER_STOP, C_GONE, C_NR };
enum path { P_POISON, P_SIGBUS_FD, P_NR };
enum mode { M_THREADS, M_LOOP, M_NR };

static const char *const kind_name[] = { "minor-read", "minor-write", "missing-hole", "wp" };
static const char *const cause_name[] = {
	"cb-error", "cb-no-write", "deferred-error", "deferred-stop", "after-stop", "server-gone",
};
static const char *const path_name[] = { "poison", "sigbus-fd" };
static const char *const mode_name[] = { "threads", "loop" };

#define NCELLS		(K_NR * C_NR * P_NR * M_NR)
#define PARALLEL	6
#define MAX_MSGS	16	/* fault messages one failed page may cost, all threads */
#define MAX_BUSY	3	/* messages while two threads wait on a deferred page */

struct cell {
	enum kind k;
	enum cause c;
	enum path p;
	enum mode m;
	const struct mem_case *mc;
};

/* ---- the child: one cell ---------------------------------------------- */

struct ctx {
	const struct cell *cell;
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_handler *h;
	size_t page;
	char *view, *backing;
	int calls;
	pthread_t loop;		/* M_LOOP: the application's event loop */
	int quit_fd;
};

static int callback(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct ctx *c = arg;

	(void)r; (void)off; (void)ev;
	__atomic_add_fetch(&c->calls, 1, __ATOMIC_ACQ_REL);
	switch (c->cell->c) {
	case C_CB_NOWRITE:
		return 0;	/* "done", without a byte written: a hole stays a hole */
	case C_DEFER_ERR:
	case C_DEFER_STOP:
		return UFFDM_FILL_LATER;
	default:
		return -EIO;
	}
}

static bool writes(enum kind k)
{
	return k == K_MINOR_WRITE || k == K_WP;
}

static unsigned int reg_flags(enum kind k)
{
	/* WP with MINOR and MISSING: where the refused write used to land */
	return k == K_WP ? UFFDM_REGISTER_WP | UFFDM_REGISTER_MISSING :
	       k == K_HOLE ? UFFDM_REGISTER_MISSING : 0;
}

static uint64_t features(enum kind k)
{
	return k == K_WP ? UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0;
}

/* The page as the cell needs it before any fault: SKIP/FAIL said, or 0. */
static int setup(struct ctx *c)
{
	const struct cell *cl = c->cell;
	struct uffdm_probe pr;
	int ret;

	if (uffdm_probe(&pr))
		CELL_FAIL("uffdm_probe");
	if (cl->p == P_POISON && !uffdm_probe_poison(&pr))
		CELL_SKIP("no UFFDIO_POISON (Linux 6.6+)");
	if (cl->k == K_WP && !uffdm_probe_has(&pr, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		CELL_SKIP("no uffd-wp on shmem/hugetlbfs (5.19+, x86 or arm64 6.10+)");
	c->page = uffdm_backing_page_size(cl->mc->backing);
	ret = uffdm_region_create(&c->r, cl->mc->backing, c->page);
	if (ret == -ENOMEM || ret == -ENOSPC)
		CELL_SKIP("no huge page in the pool (vm.nr_hugepages)");
	if (ret)
		CELL_FAIL("uffdm_region_create: %s", strerror(-ret));
	ret = uffdm_open(&c->u, 0, features(cl->k));
	if (ret)
		CELL_SKIP("uffdm_open: %s", strerror(-ret));
	c->view = uffdm_region_view(c->r);
	c->backing = uffdm_region_backing(c->r);
	if (uffdm_region_populate(c->r, 0, c->page))
		CELL_FAIL("populate");
	memset(c->backing, 's', c->page);	/* stale: never to be read through the view */
	ret = uffdm_region_register(c->u, c->r, reg_flags(cl->k), NULL);
	if (ret)
		CELL_FAIL("register: %s", strerror(-ret));
	if (cl->k == K_HOLE && uffdm_region_discard(c->r, 0, c->page))
		CELL_FAIL("discard");
	/* mapped and write-protected before the handler knows the page */
	if (cl->k == K_WP && (uffdm_continue(c->u, c->view, c->page, 0) != (ssize_t)c->page ||
			      uffdm_writeprotect(c->u, c->view, c->page, true)))
		CELL_FAIL("map write-protected");
	return 0;
}

/* An application's loop: epoll on the handler's descriptor and a quit eventfd. */
static void *event_loop(void *arg)
{
	struct ctx *c = arg;
	struct epoll_event ev = { .events = EPOLLIN }, out[2];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ev.data.fd = uffdm_handler_fd(c->h);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev))
		_exit(3);
	ev.data.fd = c->quit_fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->quit_fd, &ev))
		_exit(3);
	for (;;) {
		int n = epoll_wait(ep, out, 2, -1);

		for (int i = 0; i < n; i++) {
			if (out[i].data.fd == c->quit_fd) {
				close(ep);
				return NULL;
			}
			if (uffdm_handler_serve(c->h, 16) < 0)
				_exit(3);
		}
	}
}

static int start_handler(struct ctx *c)
{
	struct uffdm_handler_config cfg = {
		.threads = c->cell->m == M_LOOP ? 0 : 1, .fault = callback, .arg = c,
		.flags = (c->cell->p == P_SIGBUS_FD ? UFFDM_HANDLER_SIGBUS_FD : 0) |
			 (c->cell->m == M_LOOP ? UFFDM_HANDLER_EVENT_LOOP : 0),
	};
	int ret = uffdm_handler_start(&c->h, c->u, c->r, &cfg);

	if (ret)
		CELL_FAIL("uffdm_handler_start: %s", strerror(-ret));
	if (c->cell->m == M_LOOP) {
		c->quit_fd = eventfd(0, EFD_CLOEXEC);
		if (c->quit_fd < 0 || pthread_create(&c->loop, NULL, event_loop, c))
			CELL_FAIL("event loop");
	}
	return 0;
}

/* The loop ends first (it must not serve a freed handler); stop serves what it left. */
static int stop_handler(struct ctx *c, struct uffdm_stats *st)
{
	uint64_t one = 1;
	int ret;

	if (c->cell->m == M_LOOP) {
		if (write(c->quit_fd, &one, sizeof(one)) != sizeof(one))
			return -errno;
		pthread_join(c->loop, NULL);
		close(c->quit_fd);
	}
	ret = uffdm_handler_stop(c->h, st);
	c->h = NULL;
	return ret;
}

static uint64_t messages(struct ctx *c)
{
	struct uffdm_stats st = { 0 };

	uffdm_handler_stats(c->h, &st);
	return st.messages;
}

static void pause_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Until the page is deferred and a second thread's fault is read too. */
static int wait_deferred(struct ctx *c, struct toucher *b)
{
	struct uffdm_stats st = { 0 };
	uint64_t m0;

	cell_say("phase wait-deferred");
	while (uffdm_region_page_state(c->r, 0) != UFFDM_PAGE_DEFERRED)
		pause_ms(1);
	start_touch(b, c->view, writes(c->cell->k));
	cell_say("phase wait-second-fault");
	while (!uffdm_handler_stats(c->h, &st) && !st.duplicates)
		pause_ms(1);
	/* both wait now: a busy refault loop shows as messages */
	m0 = messages(c);
	pause_ms(50);
	if (messages(c) - m0 > MAX_BUSY)
		CELL_FAIL("busy refault loop: %llu messages in 50 ms while deferred",
		     (unsigned long long)(messages(c) - m0));
	return 0;
}

/* The first faults and the failure, by the cell's cause. */
static int first_faults(struct ctx *c, struct toucher *a, struct toucher *b)
{
	const struct cell *cl = c->cell;
	struct pollfd pfd;
	int ret;

	b->tid = 0;
	if (cl->c == C_AFTER_STOP) {
		ret = stop_handler(c, NULL);
		if (ret)
			CELL_FAIL("stop before any fault: %s", strerror(-ret));
	}
	cell_say("phase first-touch");
	start_touch(a, c->view, writes(cl->k));
	switch (cl->c) {
	case C_DEFER_ERR:
		if (wait_deferred(c, b))
			return 1;
		cell_say("phase complete-error");
		ret = uffdm_handler_complete(c->h, c->r, 0, c->page, -EIO);
		if (ret)
			CELL_FAIL("uffdm_handler_complete(-EIO): %s", strerror(-ret));
		break;
	case C_DEFER_STOP:
		if (wait_deferred(c, b))
			return 1;
		cell_say("phase stop-deferred");
		ret = stop_handler(c, NULL);
		if (ret)
			CELL_FAIL("stop with a deferred page: %s", strerror(-ret));
		break;
	case C_GONE:
		/* the server died before reading the fault: the VMM fails the range */
		cell_say("phase wait-queued");
		pfd = (struct pollfd){ .fd = uffdm_fd(c->u), .events = POLLIN };
		while (poll(&pfd, 1, 1000) <= 0)
			cell_say("phase wait-queued");
		cell_say("phase range-fail");
		ret = uffdm_range_fail(c->u, c->view, c->page, c->page,
				       cl->p == P_SIGBUS_FD ? UFFDM_FAIL_SIGBUS_FD : 0);
		if (ret)
			CELL_FAIL("uffdm_range_fail: %s", strerror(-ret));
		break;
	default:
		break;
	}
	cell_say("phase join-first");
	pthread_join(a->tid, NULL);
	if (b->tid)
		pthread_join(b->tid, NULL);
	if (!a->sigbus || (b->tid && !b->sigbus))
		CELL_FAIL("no SIGBUS on the first touch%s", b->tid && a->sigbus ? " (second thread)" : "");
	return 0;
}

/* Later touches, by new threads and this one, read and write: SIGBUS each. */
static int later_touches(struct ctx *c)
{
	struct toucher t;

	cell_say("phase later");
	for (int wr = 0; wr < 2; wr++) {
		/* a write-protected page may be read: only writes are refused */
		if (c->cell->k == K_WP && !wr)
			continue;
		start_touch(&t, c->view, wr);
		pthread_join(t.tid, NULL);
		if (!t.sigbus)
			CELL_FAIL("a later %s by another thread did not raise SIGBUS",
			     wr ? "write" : "read");
		if (!touch(c->view, wr, NULL))
			CELL_FAIL("a later %s did not raise SIGBUS", wr ? "write" : "read");
	}
	return 0;
}

static int teardown(struct ctx *c)
{
	struct uffdm_stats st = { 0 };
	int ret;

	cell_say("phase teardown");
	if (c->h) {
		ret = stop_handler(c, &st);
		if (ret)
			CELL_FAIL("uffdm_handler_stop: %s", strerror(-ret));
		if (st.messages > MAX_MSGS)
			CELL_FAIL("%llu fault messages for one failed page", (unsigned long long)st.messages);
	}
	ret = uffdm_region_unregister(c->u, c->r);
	if (ret)
		CELL_FAIL("uffdm_region_unregister after the failure: %s", strerror(-ret));
	uffdm_region_destroy(c->r);
	uffdm_close(c->u);
	return 0;
}

static int run_cell(const struct cell *cl)
{
	struct ctx c = { .cell = cl };
	struct toucher a, b;
	int ret;

	if (cl->c == C_CB_NOWRITE && cl->k != K_HOLE)
		CELL_SKIP("n/a: the page has content, the callback's 0 maps it");
	ret = setup(&c);
	if (ret || !c.r || !c.u)
		return ret;
	if (cl->c != C_GONE && start_handler(&c))
		return 1;
	if (first_faults(&c, &a, &b) || later_touches(&c))
		return 1;
	if (__atomic_load_n(c.backing, __ATOMIC_RELAXED) == 'W')
		CELL_FAIL("the refused write landed");
	if (c.h && messages(&c) > MAX_MSGS)
		CELL_FAIL("%llu fault messages for one failed page", (unsigned long long)messages(&c));
	if (teardown(&c))
		return 1;
	cell_say("PASS");
	return 0;
}

/* ---- the parent: cells in parallel (cells.c) ---------------------------- */

static int run_one(const void *cell)
{
	return run_cell(cell);
}

static void cell_name(const struct cell *cl, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/%s/%s", kind_name[cl->k], cause_name[cl->c], path_name[cl->p],
		 mode_name[cl->m]);
}

static void test_failure_matrix(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct cell cells[NCELLS];
	struct verdict v[NCELLS] = { 0 };
	size_t n = 0;

	put_region(make_region(mc, 1));	/* skip the lot on an empty pool */
	for (int m = 0; m < M_NR; m++)
		for (int p = 0; p < P_NR; p++)
			for (int k = 0; k < K_NR; k++)
				for (int c = 0; c < C_NR; c++)
					cells[n++] = (struct cell){ k, c, p, m, mc };
	for (size_t i = 0; i < n; i++)
		cell_name(&cells[i], v[i].name, sizeof(v[i].name));
	cells_run(cells, sizeof(cells[0]), n, run_one, PARALLEL, v);
	cells_report(mc->name, n, v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_failure_matrix),
	};

	return cmocka_run_group_tests_name("failmatrix", tests, NULL, NULL);
}

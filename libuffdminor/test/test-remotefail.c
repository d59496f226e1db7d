// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The failure guarantee where a VMM deploys the library (issue 31): the
 * page server in the VMM's process (a handler thread) or in another
 * process that adopted the VMM's descriptors as uffdminor(7) says
 * (uffdm_adopt, uffdm_sigbus_adopt, uffdm_region_from_fd,
 * uffdm_region_adopt_state; the VMM watches it with uffdm_watchdog_start)
 * x failure path (POISON, SIGBUS descriptor: 6.1's only one, forced with
 * UFFDM_HANDLER_SIGBUS_FD) x fault kind (MINOR read, MISSING hole, WP
 * write) x cause (the callback's error, a 0 without writing) x where
 * (inside the server's region, outside every region it serves), per
 * memory type, kernel-selftest style.  "remote-bare" is a server that did
 * not adopt the states and a VMM without a watchdog: on the SIGBUS path
 * the handler must refuse the region (-EOPNOTSUPP); with POISON a refused
 * write sleeps until the VMM's own uffdm_range_fail (here 300 ms after the
 * first touch), and never makes the server spin (its messages counted).  Every range is registered
 * MINOR|MISSING (|WP), as a VMM that restores lazily registers it.  Each
 * cell asserts:
 *
 *   sigbus   the first touch and later ones (another thread, the same one,
 *            read and write) raise SIGBUS: no byte is ever read;
 *   write    a refused write never lands (the backing page is unchanged);
 *   time     every touch ends within TOUCH_S (and cells.c kills a child
 *            silent for CELL_SILENCE_S);
 *   teardown watchdog stop, server stop, unregister, close, destroy: 0.
 *
 * Each cell is a child (the VMM) with a second child (the server) for the
 * remote rows; a few run side by side.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "cells.h"

enum where { W_THREAD, W_REMOTE, W_BARE, W_NR };
enum path { P_POISON, P_SIGBUS_FD, P_NR };
enum kind { K_MINOR_READ, K_HOLE, K_WP, K_NR };
enum cause { C_CB_ERR, C_CB_NOWRITE, C_NR };
enum at { A_INSIDE, A_OUTSIDE, A_NR };

static const char *const where_name[] = { "thread", "remote", "remote-bare" };
static const char *const path_name[] = { "poison", "sigbus-fd" };
static const char *const kind_name[] = { "minor-read", "missing-hole", "wp-write" };
static const char *const cause_name[] = { "cb-error", "cb-no-write" };
static const char *const at_name[] = { "inside", "outside" };

#define NCELLS		(W_NR * P_NR * K_NR * C_NR * A_NR)
#define PARALLEL	4
#define TOUCH_S		5
#define BARE_FAIL_MS	300	/* remote-bare: the VMM fails the range itself */
#define MAX_MSGS	64	/* fault messages the server may read in a cell */
/*
 * Pages per region, a thread each at once (the old window is a race):
 * fewer huge pages, so PARALLEL cells fit a guest's pool beside others.
 */
#define NPAGES(mc)	((mc)->backing == UFFDM_SHMEM ? 8u : 4u)
#define MAX_NPAGES	8

struct cell {
	enum where w;
	enum path p;
	enum kind k;
	enum cause c;
	enum at a;
	const struct mem_case *mc;
};

/*
 * Two regions of NPAGES pages on one descriptor: the server serves `in`;
 * `out` is registered too, the VMM's, outside every region the server has.
 */
struct ctx {
	const struct cell *cell;
	struct uffdm *u;
	struct uffdm_region *in, *out;
	size_t page, npages;
	struct uffdm_handler *h;	/* W_THREAD */
	pid_t server;			/* W_REMOTE, W_BARE */
	int ctl, pidfd;
	pthread_t failer;		/* W_BARE: the VMM's own uffdm_range_fail */
	struct uffdm_watchdog *wd;
};

static int callback(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	const struct cell *cl = arg;

	(void)r; (void)off; (void)ev;
	return cl->c == C_CB_NOWRITE ? 0 : -EIO;
}

static struct uffdm_region *target(const struct ctx *c)
{
	return c->cell->a == A_INSIDE ? c->in : c->out;
}

static unsigned int reg_flags(enum kind k)
{
	return UFFDM_REGISTER_MISSING | (k == K_WP ? UFFDM_REGISTER_WP : 0);
}

static uint64_t features(enum kind k)
{
	return k == K_WP ? UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0;
}

/* NPAGES pages with stale content, registered; holes, or mapped write-protected, by kind. */
static int make_page(struct ctx *c, struct uffdm_region **rp)
{
	enum kind k = c->cell->k;
	struct uffdm_region *r;
	size_t len = c->npages * c->page;
	int ret = uffdm_region_create(rp, c->cell->mc->backing, len);

	if (ret == -ENOMEM || ret == -ENOSPC)
		CELL_SKIP("no huge page in the pool (vm.nr_hugepages)");
	if (ret)
		CELL_FAIL("uffdm_region_create: %s", strerror(-ret));
	r = *rp;
	if (uffdm_region_populate(r, 0, len))
		CELL_FAIL("populate");
	memset(uffdm_region_backing(r), 's', len);	/* stale: never to be read */
	ret = uffdm_region_register(c->u, r, reg_flags(k), NULL);
	if (ret)
		CELL_FAIL("register: %s", strerror(-ret));
	if (k == K_HOLE && uffdm_region_discard(r, 0, len))
		CELL_FAIL("discard");
	if (k == K_WP && (uffdm_continue(c->u, uffdm_region_view(r), len, 0) != (ssize_t)len ||
			  uffdm_writeprotect(c->u, uffdm_region_view(r), len, true)))
		CELL_FAIL("map write-protected");
	return 0;
}

static int setup(struct ctx *c)
{
	const struct cell *cl = c->cell;
	struct uffdm_probe pr;
	int ret;

	if (cl->c == C_CB_NOWRITE && cl->a == A_OUTSIDE)
		CELL_SKIP("n/a: no callback runs outside every region");
	if (cl->c == C_CB_NOWRITE && cl->k != K_HOLE)
		CELL_SKIP("n/a: the page has content, the callback's 0 maps it");
	if (uffdm_probe(&pr))
		CELL_FAIL("uffdm_probe");
	if (cl->p == P_POISON && !uffdm_probe_poison(&pr))
		CELL_SKIP("no UFFDIO_POISON (Linux 6.6+)");
	if (cl->k == K_WP && !uffdm_probe_has(&pr, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		CELL_SKIP("no uffd-wp on shmem/hugetlbfs (5.19+, x86 or arm64 6.10+)");
	c->page = uffdm_backing_page_size(cl->mc->backing);
	c->npages = NPAGES(cl->mc);
	ret = uffdm_open(&c->u, 0, features(cl->k));
	if (ret)
		CELL_SKIP("uffdm_open: %s", strerror(-ret));
	if (make_page(c, &c->in) || make_page(c, &c->out))
		return 1;
	/* made before the server forks, as uffdm_region_state_fd(3) says */
	if (uffdm_region_state_fd(c->in) < 0 || uffdm_sigbus_fd(c->u) < 0)
		CELL_FAIL("state memfd or SIGBUS descriptor");
	return 0;
}

static unsigned int handler_flags(const struct cell *cl)
{
	return cl->p == P_SIGBUS_FD ? UFFDM_HANDLER_SIGBUS_FD : 0;
}

/*
 * The server process: what it was sent (here inherited: the same open
 * files SCM_RIGHTS would give), adopted as uffdminor(7) says; serves
 * until its control pipe closes, then stops: its exit status is the stop's.
 */
static void serve_remote(struct ctx *c, int ctl, int ready)
{
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = callback, .arg = (void *)c->cell,
		.flags = handler_flags(c->cell),
	};
	struct uffdm_stats st = { 0 };
	struct uffdm_region *mine;
	struct uffdm_handler *h;
	struct uffdm *u;
	char ch;
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	ret = uffdm_adopt(&u, dup(uffdm_fd(c->u)), 0, 0);
	if (!ret)
		ret = uffdm_sigbus_adopt(u, dup(uffdm_sigbus_fd(c->u)));
	if (!ret)
		ret = uffdm_region_from_fd(&mine, uffdm_region_fd(c->in), 0, c->npages * c->page,
					   (uintptr_t)uffdm_region_view(c->in), 0);
	if (!ret && c->cell->w == W_REMOTE)
		ret = uffdm_region_adopt_state(mine, dup(uffdm_region_state_fd(c->in)), 0);
	if (!ret)
		ret = uffdm_handler_start(&h, u, mine, &cfg);
	if (ret == -EOPNOTSUPP && c->cell->w == W_BARE)
		_exit(write(ready, "n", 1) == 1 ? 0 : 5);	/* refused, as documented */
	if (ret) {
		fprintf(stderr, "server: %s\n", strerror(-ret));
		_exit(3);
	}
	if (write(ready, "r", 1) != 1 || read(ctl, &ch, 1) < 0)
		_exit(5);
	if (uffdm_handler_stop(h, &st))
		_exit(4);
	if (st.messages > MAX_MSGS) {
		fprintf(stderr, "server: %llu fault messages\n", (unsigned long long)st.messages);
		_exit(6);
	}
	_exit(0);
}

#define REFUSED	2	/* start_remote(): the server refused the region, as documented */

/* The VMM: fork the server, wait until it serves, watch it. */
static int start_remote(struct ctx *c)
{
	struct uffdm_watchdog_params p = { .size = sizeof(p) };
	struct uffdm_region *both[2] = { c->in, c->out };
	int ctl[2], ready[2], ret;
	char ch;

	if (pipe(ctl) || pipe(ready))
		CELL_FAIL("pipe");
	fflush(NULL);
	c->server = fork();
	if (c->server < 0)
		CELL_FAIL("fork");
	if (!c->server) {
		close(ctl[1]);
		close(ready[0]);
		serve_remote(c, ctl[0], ready[1]);
	}
	close(ctl[0]);
	close(ready[1]);
	c->ctl = ctl[1];
	if (read(ready[0], &ch, 1) != 1)
		CELL_FAIL("the server did not start (its stderr says why)");
	close(ready[0]);
	if (ch == 'n' && c->cell->p == P_SIGBUS_FD)
		return REFUSED;
	if (ch == 'n' || (c->cell->w == W_BARE && c->cell->p == P_SIGBUS_FD))
		CELL_FAIL("a region without shared states: %s on the %s path",
			  ch == 'n' ? "refused" : "served", path_name[c->cell->p]);
	if (c->cell->w == W_BARE)
		return 0;	/* no watchdog: the VMM fails the range itself */
	c->pidfd = (int)syscall(SYS_pidfd_open, c->server, 0);
	if (c->pidfd < 0)
		CELL_FAIL("pidfd_open: %s", strerror(errno));
	p.server_fd = c->pidfd;
	ret = uffdm_watchdog_start(&c->wd, c->u, both, 2, &p);
	if (ret)
		CELL_FAIL("uffdm_watchdog_start: %s", strerror(-ret));
	return 0;
}

static int start_server(struct ctx *c)
{
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = callback, .arg = (void *)c->cell,
		.flags = handler_flags(c->cell),
	};
	int ret;

	if (c->cell->w != W_THREAD)
		return start_remote(c);
	ret = uffdm_handler_start(&c->h, c->u, c->in, &cfg);
	if (ret)
		CELL_FAIL("uffdm_handler_start: %s", strerror(-ret));
	return 0;
}

static volatile char *page_at(const struct ctx *c, size_t i)
{
	return (char *)uffdm_region_view(target(c)) + i * c->page;
}

/* A touch of every page at once, a thread each, bounded: SIGBUS each. */
static int touch_all(struct ctx *c, bool wr, const char *which)
{
	struct toucher t[MAX_NPAGES];

	for (size_t i = 0; i < c->npages; i++)
		start_touch(&t[i], page_at(c, i), wr);
	for (size_t i = 0; i < c->npages; i++) {
		if (join_touch(&t[i], TOUCH_S))
			CELL_FAIL("the %s %s of page %zu still sleeps after %d s", which,
				  wr ? "write" : "read", i, TOUCH_S);
		if (!t[i].sigbus && wr)
			CELL_FAIL("the %s write of page %zu completed, no SIGBUS", which, i);
		if (!t[i].sigbus)
			CELL_FAIL("the %s read of page %zu returned 0x%02x, no SIGBUS", which, i,
				  (unsigned char)t[i].got);
	}
	return 0;
}

/* remote-bare: what a VMM without a watchdog does when its server is silent. */
static void *vmm_fails(void *arg)
{
	struct ctx *c = arg;
	struct timespec ts = { 0, BARE_FAIL_MS * 1000000L };

	nanosleep(&ts, NULL);
	uffdm_range_fail(c->u, uffdm_region_view(target(c)), c->npages * c->page, c->page, 0);
	return NULL;
}

/* First touches, then later ones by other threads and this one, read and write. */
static int touches(struct ctx *c)
{
	bool wp = c->cell->k == K_WP;
	char got;

	cell_say("phase first-touch");
	if (c->cell->w == W_BARE && pthread_create(&c->failer, NULL, vmm_fails, c))
		CELL_FAIL("pthread_create");
	if (touch_all(c, wp, "first"))
		return 1;
	cell_say("phase later");
	for (int wr = 0; wr < 2; wr++) {
		/* a write-protected page may be read: only writes are refused */
		if (wp && !wr)
			continue;
		if (touch_all(c, wr, "second"))
			return 1;
		for (size_t i = 0; i < c->npages; i++)
			if (!touch(page_at(c, i), wr, &got))
				CELL_FAIL("a later %s of page %zu by the test's thread completed "
					  "(0x%02x)", wr ? "write" : "read", i, (unsigned char)got);
	}
	for (size_t i = 0; wp && i < c->npages; i++)
		if (((char *)uffdm_region_backing(target(c)))[i * c->page] == 'W')
			CELL_FAIL("the refused write of page %zu landed", i);
	return 0;
}

/* The documented order: watchdog, server, unregister, close, destroy. */
static int teardown(struct ctx *c)
{
	int ret, st;

	cell_say("phase teardown");
	if (c->failer)
		pthread_join(c->failer, NULL);
	if (c->wd && (ret = uffdm_watchdog_stop(c->wd, NULL)))
		CELL_FAIL("uffdm_watchdog_stop: %s", strerror(-ret));
	if (c->h && (ret = uffdm_handler_stop(c->h, NULL)))
		CELL_FAIL("uffdm_handler_stop: %s", strerror(-ret));
	if (c->server > 0) {
		close(c->ctl);
		if (waitpid(c->server, &st, 0) != c->server || !WIFEXITED(st) || WEXITSTATUS(st))
			CELL_FAIL("the server's stop: status 0x%x (6: over %d messages)", st, MAX_MSGS);
		if (c->pidfd > 0)
			close(c->pidfd);
	}
	ret = uffdm_region_unregister(c->u, c->in);
	if (!ret)
		ret = uffdm_region_unregister(c->u, c->out);
	if (ret)
		CELL_FAIL("uffdm_region_unregister after the failure: %s", strerror(-ret));
	uffdm_close(c->u);
	uffdm_region_destroy(c->in);
	uffdm_region_destroy(c->out);
	return 0;
}

static int run_cell(const void *arg)
{
	struct ctx c = { .cell = arg };
	int ret = setup(&c);

	if (ret || !c.out)
		return ret;
	ret = start_server(&c);
	if (ret == REFUSED) {
		if (teardown(&c))
			return 1;
		cell_say("PASS refused (-EOPNOTSUPP), as uffdm_handler_start(3) says");
		return 0;
	}
	if (ret || touches(&c) || teardown(&c))
		return 1;
	cell_say("PASS");
	return 0;
}

static void cell_name(const struct cell *cl, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/%s/%s/%s", where_name[cl->w], path_name[cl->p],
		 kind_name[cl->k], cause_name[cl->c], at_name[cl->a]);
}

static void test_remote_failure(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct cell cells[NCELLS];
	struct verdict v[NCELLS] = { 0 };
	size_t n = 0;

	put_region(make_region(mc, 2 * NPAGES(mc)));	/* skip the lot on an empty pool */
	for (int w = 0; w < W_NR; w++)
		for (int p = 0; p < P_NR; p++)
			for (int k = 0; k < K_NR; k++)
				for (int ca = 0; ca < C_NR; ca++)
					for (int a = 0; a < A_NR; a++)
						cells[n++] = (struct cell){ w, p, k, ca, a, mc };
	for (size_t i = 0; i < n; i++)
		cell_name(&cells[i], v[i].name, sizeof(v[i].name));
	cells_run(cells, sizeof(cells[0]), n, run_cell, PARALLEL, v);
	cells_report(mc->name, n, v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_remote_failure),
	};

	return cmocka_run_group_tests_name("remotefail", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The VMM's watchdog (uffdm_watchdog_start) against each way a page server
 * in another process is lost or only looks lost, each row asserting the
 * whole outcome: every page read (right, or SIGBUS now and on a later
 * touch), what the report says, whether the stalled server was killed,
 * and that the documented teardown still works.
 *
 *   row              server                             watchdog   outcome
 *   died_fail        killed, one fault deferred          death      SIGBUS on the waiting and the unserved
 *   stopped_fail     SIGSTOPped, a fault queued unread   stall      killed by the watchdog, SIGBUS
 *   stopped_read     stopped right out of the read()      stall      killed by the watchdog, SIGBUS
 *                    that returned the fault
 *   hung_fail        callback never returns               stall      killed by the watchdog, SIGBUS
 *   deferred_fail    defers a page, never completes       stall      SIGBUS (within two periods)
 *   slow_ok          every page slow, all of them slower  stall      no loss: every page right
 *   idle_ok          no fault for three periods, a slow   stall      no loss: every page right
 *   died_replace     killed with a fault deferred         lost()     the new server serves every page once
 *   hung_replace     killed in a callback, then idle      lost()     served once each; what the dead
 *                    for three stall limits                          held is no stall of the new one
 *   marked_replace   fails page 1 for the VMM to fence     lost()     page 1 SIGBUS (the VMM fenced it:
 *                    and dies before asking                          no one asked), the rest served
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "../src/internal.h"	/* UFFDM_PS_OWNER, the states of a region */
#include "server.h"

/* The library's internal test hook (src/handler.h; the static library keeps it). */
extern void (*uffdm__test_after_read)(const struct uffdm_event *ev, int n);

#define NPAGES		8
#define STALL_MS	300
#define SLOW_MS		200	/* slow_ok: each page under the limit, all of them over it */
#define READ_LIMIT_S	20	/* a read not back by then hung */

enum act { FILL, DEFER, HANG, SLOW, MARK_DIE };

/* What the servers did, seen by the VMM (shared memory). */
struct board {
	int fills[NPAGES];
	int began[NPAGES];
};

/* A server's part: what it does on each page (set before it is forked). */
struct script {
	struct board *b;
	enum act act[NPAGES];
};

static int script_cb(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	const struct script *s = arg;
	size_t page = uffdm_region_page_size(r), i = off / page;
	struct timespec slow = { 0, SLOW_MS * 1000000L };

	(void)ev;
	__atomic_add_fetch(&s->b->began[i], 1, __ATOMIC_ACQ_REL);
	switch (s->act[i]) {
	case DEFER:
		return UFFDM_FILL_LATER;
	case HANG:
		for (;;)
			pause();
	case SLOW:
		nanosleep(&slow, NULL);
		break;
	case MARK_DIE:
		/*
		 * A remote server failing the page: marked for the VMM's fence
		 * (pagestate.c fail_run()), and killed before it bumps the
		 * futex that tells the VMM.
		 */
		__atomic_store_n(&r->pstate[i], (r->pstate[i] & ~UFFDM_PS_MASK) | UFFDM_PS_OWNER,
				 __ATOMIC_RELEASE);
		_exit(9);
	case FILL:
		break;
	}
	fill_page((char *)uffdm_region_backing(r) + off, page, i);
	__atomic_add_fetch(&s->b->fills[i], 1, __ATOMIC_ACQ_REL);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int read_page(struct uffdm_region *r, size_t i)
{
	struct page_reader t;

	start_reader(&t, r, i);
	return join_reader_within(&t, READ_LIMIT_S);
}

/* ---- one row ------------------------------------------------------------- */

struct row {
	enum act act[NPAGES];		/* the first server's script */
	unsigned int stall_ms;
	bool replace;
	void (*adversary)(pid_t server, struct board *b);
	bool first;			/* the adversary acts before the fault, not during it */
	bool stop_on_read;		/* the server stops itself once it read page 1's fault */
	unsigned int idle_ms;		/* before the reads after page 0 */
	unsigned int idle_after_ms;	/* after every page was read */
	/* expected */
	bool lost;			/* pages 1.. fail (else every page reads right) */
	bool only_1;			/* with replace: page 1 fails, the rest read right */
	unsigned int died, stalled;
	bool killed;			/* the watchdog killed the first server */
};

struct vmm {
	struct uffdm *u;
	struct uffdm_region *r;
	struct board *b;
	struct script sa, sb;
	pid_t a, b_pid;
	int ctl_a, ctl_b;
	unsigned int took_over;
	struct sigaction old_bus;
};

/* lost(): the spare server (forked before any thread) takes over. */
static int take_over(enum uffdm_server_loss why, void *arg)
{
	struct vmm *v = arg;

	(void)why;
	if (v->took_over++)	/* one spare: a second loss fails the pages */
		return -1;
	page_server_go(v->ctl_b);
	return (int)syscall(SYS_pidfd_open, v->b_pid, 0);
}

static int pidfd_of(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		fail_msg("pidfd_open: %s (Linux 5.3+, every kernel of the matrix)", strerror(errno));
	return fd;
}

static void wait_began(struct board *b, size_t i)
{
	while (!__atomic_load_n(&b->began[i], __ATOMIC_ACQUIRE))
		usleep(1000);
}

static void adv_kill(pid_t server, struct board *b)
{
	wait_began(b, 1);	/* page 1 is in the server's hands */
	kill(server, SIGKILL);
}

static void adv_stop(pid_t server, struct board *b)
{
	int st;

	(void)b;
	kill(server, SIGSTOP);
	/* kill() only sends it: the fault must find every server thread stopped */
	assert_int_equal(waitpid(server, &st, WUNTRACED), server);
	assert_true(WIFSTOPPED(st));
}

/*
 * The window no signal sent from outside can aim at: the fault is read,
 * not yet served.  A SIGSTOP is taken right there, on the way out of the
 * read() that returned it; the server's one handler thread stops there
 * instead, in the library's hook (inherited by the forked server), and
 * for good: job control cannot continue it as it can a stopped process.
 */
static uint64_t stop_lo, stop_hi;

static void stop_after_read(const struct uffdm_event *ev, int n)
{
	for (int i = 0; i < n; i++)
		while (ev[i].addr >= stop_lo && ev[i].addr < stop_hi)
			pause();
}

static void adv_none(pid_t server, struct board *b)
{
	(void)server;
	(void)b;
}

static void vmm_start(struct vmm *v, const struct mem_case *mc, const struct row *row)
{
	struct sigaction sa = { .sa_handler = sigbus_jump, .sa_flags = SA_NODEFER };
	struct page_server pa = { .fault = script_cb, .arg = &v->sa };
	struct page_server pb = { .fault = script_cb, .arg = &v->sb,
				  .state_flags = UFFDM_STATE_TAKEOVER };

	v->u = open_uffd(0, 0);
	v->r = registered_region(v->u, mc, NPAGES, 0);
	v->b = mmap(NULL, sizeof(*v->b), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(v->b != MAP_FAILED);
	assert_true(uffdm_region_state_fd(v->r) >= 0);
	v->sa = (struct script){ .b = v->b };
	memcpy(v->sa.act, row->act, sizeof(row->act));
	v->sb = (struct script){ .b = v->b };	/* the spare fills every page */
	if (row->stop_on_read) {	/* the server inherits it */
		stop_lo = (uintptr_t)uffdm_region_view(v->r) + uffdm_region_page_size(v->r);
		stop_hi = stop_lo + uffdm_region_page_size(v->r);
		uffdm__test_after_read = stop_after_read;
	}
	v->a = page_server_fork(v->u, v->r, &pa, &v->ctl_a);
	uffdm__test_after_read = NULL;
	v->b_pid = -1;
	if (row->replace)
		v->b_pid = page_server_fork(v->u, v->r, &pb, &v->ctl_b);
	sigaction(SIGBUS, &sa, &v->old_bus);
	page_server_go(v->ctl_a);
}

/* Teardown in the documented order works after any outcome. */
static void vmm_end(struct vmm *v)
{
	int st;

	kill(v->a, SIGKILL);
	waitpid(v->a, &st, 0);
	if (v->b_pid > 0) {
		close(v->ctl_b);
		assert_int_equal(waitpid(v->b_pid, &st, 0), v->b_pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	close(v->ctl_a);
	sigaction(SIGBUS, &v->old_bus, NULL);
	assert_int_equal(uffdm_region_unregister(v->u, v->r), 0);
	munmap(v->b, sizeof(*v->b));
	put_uffd(v->u);
	put_region(v->r);
}

static void check_report(const struct uffdm_watchdog_report *rep, const struct row *row)
{
	print_message("# report: died %u stalled %u replaced %u failed %d takeover %llu ns\n",
		      rep->died, rep->stalled, rep->replaced, rep->failed,
		      (unsigned long long)rep->takeover_ns);
	assert_int_equal(rep->died, row->died);
	assert_int_equal(rep->stalled, row->stalled);
	assert_int_equal(rep->replaced, row->replace);
	assert_int_equal(rep->failed, row->lost && !row->replace);
	if (row->replace)
		assert_true(rep->takeover_ns > 0);
}

/* Every page: right, or (lost) page 0 right and the rest SIGBUS, now and again. */
static void check_pages(struct vmm *v, const struct row *row, struct page_reader *waiting)
{
	int want = row->lost && !row->replace ? READ_SIGBUS : READ_OK;
	int want_1 = row->only_1 ? READ_SIGBUS : want;

	assert_int_equal(join_reader_within(waiting, READ_LIMIT_S), want_1);
	for (size_t i = 2; i < NPAGES; i++)
		assert_int_equal(read_page(v->r, i), want);
	assert_int_equal(read_page(v->r, 1), want_1);	/* later touches too */
	assert_int_equal(read_page(v->r, 0), READ_OK);	/* served before: stays */
	if (want == READ_OK)
		for (size_t i = 0; i < NPAGES; i++)
			assert_int_equal(v->b->fills[i], i != 1 || !row->only_1);	/* none twice */
}

/* A stalled server never serves again: the watchdog killed it. */
static void expect_killed(pid_t pid)
{
	int st;

	for (int i = 0; i < READ_LIMIT_S * 100; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
			return;
		}
		usleep(10000);
	}
	fail_msg("the stalled server is still there: the watchdog did not kill it");
}

static void run_row(void **state, const struct row *row)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_watchdog_report rep = { .size = sizeof(rep) };
	struct uffdm_watchdog_params p = { .size = sizeof(p), .stall_ms = row->stall_ms };
	struct uffdm_watchdog *w;
	struct page_reader waiting;
	struct vmm v = { 0 };
	uint64_t t0;

	vmm_start(&v, mc, row);
	p.server_fd = pidfd_of(v.a);
	if (row->replace) {
		p.lost = take_over;
		p.arg = &v;
	}
	assert_int_equal(uffdm_watchdog_start(&w, v.u, &v.r, 1, &p), 0);
	assert_int_equal(read_page(v.r, 0), READ_OK);
	if (row->idle_ms)
		usleep(row->idle_ms * 1000);
	t0 = now_ms();
	if (row->first)
		row->adversary(v.a, v.b);
	start_reader(&waiting, v.r, 1);
	if (!row->first)
		row->adversary(v.a, v.b);
	check_pages(&v, row, &waiting);
	print_message("# every page read %llu ms after the adversary started\n",
		      (unsigned long long)(now_ms() - t0));
	if (row->idle_after_ms)
		usleep(row->idle_after_ms * 1000);
	assert_int_equal(uffdm_watchdog_stop(w, &rep), 0);
	check_report(&rep, row);
	if (row->killed)
		expect_killed(v.a);
	close(p.server_fd);
	vmm_end(&v);
}

static void test_died_fail(void **state)
{
	static const struct row row = {
		.act = { [1] = DEFER }, .adversary = adv_kill, .lost = true, .died = 1,
	};

	run_row(state, &row);
}

static void test_stopped_fail(void **state)
{
	static const struct row row = {
		.stall_ms = STALL_MS, .adversary = adv_stop, .first = true, .lost = true,
		.stalled = 1, .killed = true,
	};

	run_row(state, &row);
}

static void test_stopped_read(void **state)
{
	static const struct row row = {
		.stall_ms = STALL_MS, .stop_on_read = true, .adversary = adv_none, .lost = true,
		.stalled = 1, .killed = true,
	};

	run_row(state, &row);
}

static void test_hung_fail(void **state)
{
	static const struct row row = {
		.act = { [1] = HANG }, .stall_ms = STALL_MS, .adversary = adv_none, .lost = true,
		.stalled = 1, .killed = true,
	};

	run_row(state, &row);
}

static void test_deferred_fail(void **state)
{
	static const struct row row = {
		.act = { [1] = DEFER }, .stall_ms = STALL_MS, .adversary = adv_none, .lost = true,
		.stalled = 1, .killed = true,
	};

	run_row(state, &row);
}

/* Each page 200 ms, under the 1 s limit; all of them 1.6 s, over it. */
static void test_slow_ok(void **state)
{
	static const struct row row = {
		.act = { SLOW, SLOW, SLOW, SLOW, SLOW, SLOW, SLOW, SLOW },
		.stall_ms = 1000, .adversary = adv_none,
	};

	run_row(state, &row);
}

/* Idle for three periods, then a fault that takes 200 ms: not a stall. */
static void test_idle_ok(void **state)
{
	static const struct row row = {
		.act = { [1] = SLOW }, .stall_ms = 500, .idle_ms = 1400, .adversary = adv_none,
	};

	run_row(state, &row);
}

static void test_died_replace(void **state)
{
	static const struct row row = {
		.act = { [1] = DEFER }, .stall_ms = 5000, .replace = true, .adversary = adv_kill,
		.lost = true, .died = 1,
	};

	run_row(state, &row);
}

/*
 * Killed inside page 1's callback: the fault it had begun, and the batch it
 * held, stay counted in the shared states for ever.  They are the dead
 * server's, not work waiting on the new one: idle afterwards, no stall.
 */
static void test_hung_replace(void **state)
{
	static const struct row row = {
		.act = { [1] = HANG }, .stall_ms = STALL_MS, .replace = true,
		.adversary = adv_kill, .idle_after_ms = 3 * STALL_MS, .lost = true, .died = 1,
	};

	run_row(state, &row);
}

/*
 * A server marks page 1 failed for the VMM to fence and is killed before
 * it asks: the watchdog, seeing it lost, has its owner thread look, so the
 * waiting thread gets SIGBUS though a replacement serves the rest.
 */
static void test_marked_replace(void **state)
{
	static const struct row row = {
		.act = { [1] = MARK_DIE }, .stall_ms = 5000, .replace = true,
		.adversary = adv_none, .lost = true, .only_1 = true, .died = 1,
	};

	run_row(state, &row);
}

/* Wrong arguments are refused and nothing is started. */
static void test_args(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	struct uffdm_watchdog_params p = { .size = sizeof(p), .stall_ms = 100 };
	struct uffdm_watchdog_report rep = { .size = 1 };
	struct uffdm_watchdog *w;
	int ev = eventfd(0, EFD_CLOEXEC);

	p.server_fd = pidfd_of(getpid());
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), -EINVAL);	/* states not shared */
	assert_true(uffdm_region_state_fd(r) >= 0);
	assert_int_equal(uffdm_watchdog_start(&w, u, NULL, 1, &p), -EINVAL);
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 0, &p), -EINVAL);
	assert_int_equal(uffdm_watchdog_start(&w, NULL, &r, 1, &p), -EINVAL);
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, NULL), -EINVAL);
	p.size = 8;
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), -EINVAL);	/* size */
	p.size = sizeof(p);
	p.fail_flags = 8;
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), -EINVAL);	/* flags */
	p.fail_flags = 0;
	close(p.server_fd);
	p.server_fd = ev;
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), -EINVAL);	/* not a pidfd */
	p.server_fd = -1;
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), -EBADF);
	p.server_fd = pidfd_of(getpid());
	assert_int_equal(uffdm_watchdog_start(&w, u, &r, 1, &p), 0);
	assert_int_equal(uffdm_watchdog_stop(w, &rep), -EINVAL);	/* report size: not stopped */
	rep.size = sizeof(rep);
	assert_int_equal(uffdm_watchdog_stop(w, &rep), 0);
	assert_int_equal(rep.died + rep.stalled + rep.replaced + rep.failed, 0);
	assert_int_equal(uffdm_watchdog_stop(NULL, NULL), -EINVAL);
	close(p.server_fd);
	close(ev);
	put_uffd(u);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_died_fail),
		CROSS(test_stopped_fail),
		CROSS(test_stopped_read),
		CROSS(test_hung_fail),
		CROSS(test_deferred_fail),
		CROSS(test_slow_ok),
		CROSS(test_idle_ok),
		CROSS(test_died_replace),
		CROSS(test_hung_replace),
		CROSS(test_marked_replace),
		CROSS(test_args),
	};

	return cmocka_run_group_tests_name("watchdog", tests, NULL, NULL);
}

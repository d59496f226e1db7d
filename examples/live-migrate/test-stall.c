// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A peer that stops answering (SIGSTOP: it keeps its sockets open and reads
 * nothing) at each phase.  Before the commit (RESUMED) the source resumes
 * its workload within --timeout and exits 2, also while stop-copy's paused
 * send is blocked; a stopped destination that is continued after that does
 * not run a second copy.  After the commit the source reports and exits 6.
 * A stopped source makes the destination give up (6 before the switch-over,
 * 3 during postcopy, the workload stopped).  SIGINT at a phase (sent while
 * the process is stopped there, then continued): before the commit the
 * source resumes at home (2) and the destination leaves (130); after it
 * both say so and finish.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define TIMEOUT_MS 1500
#define TIMEOUT_S "1500"
#define DERR lmt_path("stall-dest.err")
#define SERR lmt_path("stall-src.err")

struct run {
	pid_t d, s;
	int d_rc, s_rc;
	double t_stop, t_exit;	/* when the stopped side stopped; the other exited */
};

static const char *src_extra;	/* one more source option, or NULL */

/* Start both; the side told to stop-PHASE stops itself there. */
static void start(struct run *r, const char *mode, const char *dinj, const char *sinj)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode", mode, "--inject", dinj,
			     "--verify", "--timeout", TIMEOUT_S, "--size", "4M", "-q", NULL };
	const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--mode", mode, "--inject", sinj,
			     "--verify", "--timeout", TIMEOUT_S, "--size", "4M", "--stale", "0.2",
			     "--precopy", "0.2", "--after", "0.3", "--rounds", "2", "-q", src_extra,
			     NULL };

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	memset(r, 0, sizeof(*r));
	r->d = lmt_spawn(DERR, NULL, da);
	close(lfd);
	r->s = lmt_spawn(SERR, NULL, sa);
}

/* Wait for pid to stop itself; then for the other to exit. */
static void stopped_then_exit(struct run *r, pid_t stopped, pid_t other, int *other_rc)
{
	int st;

	assert_int_equal(waitpid(stopped, &st, WUNTRACED), stopped);
	if (!WIFSTOPPED(st)) {
		/* it ended before its phase: say how, with both sides' words */
		print_message("# the %s did not stop itself: %s %d\n",
			      stopped == r->s ? "source" : "destination",
			      WIFEXITED(st) ? "exit" : "signal",
			      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		lmt_file_has(SERR, "@");
		lmt_file_has(DERR, "@");
	}
	assert_true(WIFSTOPPED(st));
	r->t_stop = lmt_now();
	*other_rc = lmt_status(other);
	r->t_exit = lmt_now();
	print_message("# %s exited %d, %.2f s after its peer stopped (--timeout %.1f s)\n",
		      other == r->s ? "source" : "destination", *other_rc, r->t_exit - r->t_stop,
		      TIMEOUT_MS / 1000.0);
	/*
	 * Within the deadline, with room for a loaded machine: a stall is seen
	 * after --timeout; after the commit the other side then waits up to
	 * --timeout for a rejoin, whose handshake may take one more.
	 */
	assert_true(r->t_exit - r->t_stop < TIMEOUT_MS / 1000.0 * 4 + 20);
}

static void kill_stopped(pid_t pid)
{
	kill(pid, SIGKILL);
	assert_true(lmt_expect(pid, 128 + SIGKILL));
}

/* Destination stops at phase: the source resumes at home. */
static void dest_stops_before_commit(const char *mode, const char *phase)
{
	struct run r;

	start(&r, mode, phase, "none");
	stopped_then_exit(&r, r.d, r.s, &r.s_rc);
	assert_int_equal(r.s_rc, LM_EXIT_ABORTED);
	assert_true(lmt_file_has(SERR, "migration aborted"));
	assert_true(lmt_file_has(SERR, "invariants hold"));
	kill_stopped(r.d);
}

static void test_dest_stops_precopy_minor(void **state)
{
	(void)state;
	dest_stops_before_commit("minor", "stop-precopy");
}

static void test_dest_stops_precopy_stopcopy(void **state)
{
	(void)state;
	dest_stops_before_commit("stop-copy", "stop-precopy");
}

/* The workload is paused while stop-copy sends: that send is bounded too. */
static void test_dest_stops_paused_stopcopy(void **state)
{
	struct run r;

	(void)state;
	start(&r, "stop-copy", "stop-paused", "none");
	stopped_then_exit(&r, r.d, r.s, &r.s_rc);
	/* SWITCH may have fit in the socket buffers: then it counts as sent */
	if (r.s_rc == LM_EXIT_UNDECIDED) {
		kill(r.d, SIGCONT);
		assert_true(lmt_expect(r.d, LM_EXIT_PEER_LOST));
		return;
	}
	assert_int_equal(r.s_rc, LM_EXIT_ABORTED);
	assert_true(lmt_file_has(SERR, "invariants hold"));
	kill_stopped(r.d);
}

/*
 * SWITCH arrived, then the destination stopped: it may run the workload
 * when continued, so the source never resumes on its own.  It asks (a
 * rejoin) until --rejoin, then stays paused and exits 8 for the operator;
 * continued later, the destination finds the link gone and does not
 * resume either.
 */
static void dest_stops_at_switch(const char *mode)
{
	struct run r;

	start(&r, mode, "stop-switch", "none");
	stopped_then_exit(&r, r.d, r.s, &r.s_rc);
	assert_int_equal(r.s_rc, LM_EXIT_UNDECIDED);
	assert_true(lmt_file_has(SERR, "OUTCOME UNKNOWN"));
	assert_false(lmt_file_has(SERR, "resumes on the source"));
	kill(r.d, SIGCONT);
	r.d_rc = lmt_status(r.d);
	assert_int_equal(r.d_rc, LM_EXIT_PEER_LOST);
	assert_true(lmt_file_has(DERR, "does not, and tells the source so"));
}

/*
 * The same with --rejoin wait: the source asks until an answer comes.  The
 * destination, continued, does not resume and says so, signed: only then
 * does the source take its workload back.
 */
static void dest_stops_at_switch_wait(const char *mode)
{
	struct run r;
	int st;

	src_extra = "--rejoin=wait";
	start(&r, mode, "stop-switch", "none");
	src_extra = NULL;
	assert_int_equal(waitpid(r.d, &st, WUNTRACED), r.d);
	assert_true(WIFSTOPPED(st));
	assert_true(lmt_wait_for(SERR, "staying paused and asking", 20));
	usleep(500000);
	kill(r.d, SIGCONT);
	assert_true(lmt_expect(r.s, LM_EXIT_ABORTED));
	assert_true(lmt_expect(r.d, LM_EXIT_PEER_LOST));
	assert_true(lmt_file_has(SERR, "did not resume"));
	assert_true(lmt_file_has(DERR, "told the rejoining source"));
}

static void test_dest_stops_switch_wait_minor(void **state)
{
	(void)state;
	dest_stops_at_switch_wait("minor");
}

static void test_dest_stops_switch_wait_missing(void **state)
{
	(void)state;
	dest_stops_at_switch_wait("postcopy-missing");
}

static void test_dest_stops_switch_stopcopy(void **state)
{
	(void)state;
	dest_stops_at_switch("stop-copy");
}

static void test_dest_stops_switch_minor(void **state)
{
	(void)state;
	dest_stops_at_switch("minor");
}

static void test_dest_stops_switch_missing(void **state)
{
	(void)state;
	dest_stops_at_switch("postcopy-missing");
}

/*
 * After the commit, the destination stops mid-postcopy: it lacks pages only
 * the source has, so the source keeps them -- its region, in a checkpoint
 * -- and exits 8 (before: 6, its memory freed).
 */
static void test_dest_stops_postcopy_minor(void **state)
{
	struct run r;

	(void)state;
	start(&r, "minor", "stop-postcopy", "none");
	stopped_then_exit(&r, r.d, r.s, &r.s_rc);
	assert_int_equal(r.s_rc, LM_EXIT_UNDECIDED);
	assert_true(lmt_file_has(SERR, "destination lost after the switch-over"));
	assert_true(lmt_file_has(SERR, "kept paused in"));
	kill_stopped(r.d);
}

static void test_source_stops_precopy(void **state)
{
	struct run r;

	(void)state;
	start(&r, "minor", "none", "stop-precopy");
	stopped_then_exit(&r, r.s, r.d, &r.d_rc);
	assert_int_equal(r.d_rc, LM_EXIT_PEER_LOST);
	assert_true(lmt_file_has(DERR, "nothing received"));
	kill_stopped(r.s);
}

static void source_stops_postcopy(const char *mode)
{
	struct run r;

	start(&r, mode, "none", "stop-postcopy");
	stopped_then_exit(&r, r.s, r.d, &r.d_rc);
	/* no page stale by the pause (a busy machine slows the workload's
	 * writes, and missing mode sends the stale list before the commit):
	 * the destination holds every page and must run on (issue 37) */
	if (r.d_rc == 0 && lmt_file_has(DERR, "holds every page: the workload runs on")) {
		print_message("# no page was missing: the destination ran on\n");
	} else {
		assert_int_equal(r.d_rc, LM_EXIT_SOURCE_LOST);
		assert_true(lmt_file_has(DERR, "source lost during postcopy"));
	}
	kill_stopped(r.s);
}

static void test_source_stops_postcopy_minor(void **state)
{
	(void)state;
	source_stops_postcopy("minor");
}

static void test_source_stops_postcopy_missing(void **state)
{
	(void)state;
	source_stops_postcopy("postcopy-missing");
}

/* Stop side at phase, interrupt it there, let it go on. */
static void interrupt_at(struct run *r, bool dest_side, const char *mode, const char *phase)
{
	int st;
	pid_t who;

	start(r, mode, dest_side ? phase : "none", dest_side ? "none" : phase);
	who = dest_side ? r->d : r->s;
	assert_int_equal(waitpid(who, &st, WUNTRACED), who);
	if (!WIFSTOPPED(st)) {
		print_message("# the %s ended before %s (status 0x%x): its log and its peer's\n",
			      dest_side ? "destination" : "source", phase, st);
		lmt_file_has(SERR, "@");
		lmt_file_has(DERR, "@");
	}
	assert_true(WIFSTOPPED(st));
	kill(who, SIGINT);
	kill(who, SIGCONT);
	r->s_rc = lmt_status(r->s);
	r->d_rc = lmt_status(r->d);
	print_message("# SIGINT to the %s at %s: source %d, destination %d\n",
		      dest_side ? "destination" : "source", phase, r->s_rc, r->d_rc);
}

static void test_sigint_source_precopy(void **state)
{
	struct run r;

	(void)state;
	interrupt_at(&r, false, "stop-copy", "stop-precopy");
	assert_int_equal(r.s_rc, LM_EXIT_ABORTED);
	assert_true(lmt_file_has(SERR, "interrupted"));
	assert_true(lmt_file_has(SERR, "invariants hold"));
	assert_int_equal(r.d_rc, LM_EXIT_PEER_LOST);
}

static void test_sigint_dest_precopy(void **state)
{
	struct run r;

	(void)state;
	interrupt_at(&r, true, "minor", "stop-precopy");
	assert_int_equal(r.d_rc, LM_EXIT_INTERRUPTED);
	assert_int_equal(r.s_rc, LM_EXIT_ABORTED);
}

static void test_sigint_dest_switch(void **state)
{
	struct run r;

	(void)state;
	interrupt_at(&r, true, "stop-copy", "stop-switch");
	assert_int_equal(r.s_rc, LM_EXIT_ABORTED);
	assert_true(r.d_rc == LM_EXIT_INTERRUPTED || r.d_rc == LM_EXIT_PEER_LOST);
}

/* After the commit an interrupt does not lose the workload. */
static void test_sigint_source_postcopy(void **state)
{
	struct run r;

	(void)state;
	interrupt_at(&r, false, "minor", "stop-postcopy");
	assert_int_equal(r.s_rc, LM_EXIT_OK);
	assert_int_equal(r.d_rc, LM_EXIT_OK);
	assert_true(lmt_file_has(SERR, "interrupted after the switch-over"));
}

static void test_sigint_dest_postcopy(void **state)
{
	struct run r;

	(void)state;
	interrupt_at(&r, true, "minor", "stop-postcopy");
	assert_int_equal(r.s_rc, LM_EXIT_OK);
	assert_int_equal(r.d_rc, LM_EXIT_OK);
	assert_true(lmt_file_has(DERR, "interrupted after the switch-over"));
}

/* A destination waiting for its first source leaves at once. */
static void test_sigint_dest_waiting(void **state)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, NULL };
	double t0;
	pid_t d;

	(void)state;
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	d = lmt_spawn(DERR, NULL, da);
	close(lfd);
	assert_true(lmt_wait_catching(d, 10));
	t0 = lmt_now();
	kill(d, SIGINT);
	assert_true(lmt_expect(d, LM_EXIT_INTERRUPTED));
	assert_true(lmt_now() - t0 < 3);
	assert_true(lmt_file_has(DERR, "interrupted while waiting"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dest_stops_precopy_minor),
		cmocka_unit_test(test_dest_stops_precopy_stopcopy),
		cmocka_unit_test(test_dest_stops_paused_stopcopy),
		cmocka_unit_test(test_dest_stops_switch_wait_minor),
		cmocka_unit_test(test_dest_stops_switch_wait_missing),
		cmocka_unit_test(test_dest_stops_switch_stopcopy),
		cmocka_unit_test(test_dest_stops_switch_minor),
		cmocka_unit_test(test_dest_stops_switch_missing),
		cmocka_unit_test(test_dest_stops_postcopy_minor),
		cmocka_unit_test(test_source_stops_precopy),
		cmocka_unit_test(test_source_stops_postcopy_minor),
		cmocka_unit_test(test_source_stops_postcopy_missing),
		cmocka_unit_test(test_sigint_source_precopy),
		cmocka_unit_test(test_sigint_dest_precopy),
		cmocka_unit_test(test_sigint_dest_switch),
		cmocka_unit_test(test_sigint_source_postcopy),
		cmocka_unit_test(test_sigint_dest_postcopy),
		cmocka_unit_test(test_sigint_dest_waiting),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

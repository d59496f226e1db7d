// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The outcome table (issue 37, item 1), generated: every mode x every phase
 * of a migration x every fault a relay between the two ends can make there,
 * each row a real migration of a 2 MiB region asserting both exit codes and
 * where the workload is afterwards -- and, for every row, the rule:
 *
 *   never on neither end while one end holds every page.
 *
 * The source holds every page (as at the pause) until it exits; the
 * destination holds them all once it has mapped each one (stop-copy: from
 * its resume).  So after SWITCH a source without a verdict keeps its
 * region in a checkpoint (exit 8), and the row resumes the workload from
 * it (`lm resume`), its hash and invariants checked, and its line must
 * be right about the destination (check_message).  Where the destination
 * runs on, --verify has checked every page it has.  A destination that
 * will not resume after the source may have sent SWITCH tells the
 * rejoining source so, sealed: it resumes at home (exit 2).
 *
 * The relay (drill-relay.c) reads frame headers to know the phase:
 *   before SWITCH  the first precopy PAGES frame (withheld)
 *   SWITCH sent    right after SWITCH went through
 *   RESUMED lost   the destination's RESUMED (withheld)
 *   postcopy       the first background push (withheld; no stop-copy row)
 *   DONE           right after DONE went through
 *   FIN            the destination's FIN (withheld)
 * and there makes its fault:
 *   stalled        every connection held, never read again; a rejoin
 *                  connects and is never answered (as a blackholed route)
 *   reset          every connection reset, and every later one: the link
 *                  is lost for good, both ends alive
 *   source killed, destination killed   SIGKILL, then the link closes
 *   forged         the frame's last tag byte flipped: it fails
 *                  authentication; the link is dropped and rejoined
 * Blackholed routes (network namespaces, root) are lm-drills' rows; seen
 * from either end they are the stall: no FIN, no reset, silence.
 *
 * `lm-outcome MODE` runs that mode's rows; with no MODE the three modes run
 * side by side, each in a process of its own (each row mostly waits out a
 * deadline, so one test slot holds the table for one mode's time), and
 * their outputs follow one another.  LM_OUTCOME=minor/SWITCH runs the rows
 * whose "mode/phase/fault" contains it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"
#include "drill-relay.h"

#define DERR lmt_path("outcome-dest.err")
#define SERR lmt_path("outcome-src.err")
static const char *ckpt_at;	/* --checkpoint: CKPT unless a test says */
#define CKPT lmt_path("outcome.ckpt")

enum phase { P_PRECOPY, P_SWITCH, P_RESUMED, P_POSTCOPY, P_DONE, P_FIN, P_END };
enum fault { F_STALL, F_RESET, F_KILL_SRC, F_KILL_DST, F_FORGE, F_END };

static const char *const modes[] = { "minor", "stop-copy", "postcopy-missing" };
static const char *const phases[] = { "before SWITCH", "SWITCH sent", "RESUMED lost",
				      "postcopy", "DONE", "FIN" };
static const char *const faults[] = { "stalled", "reset", "source killed",
				      "destination killed", "forged" };

/* Each phase's frame: its direction (0 source to destination), type, and
 * whether the fault comes before it (withheld) or right after it. */
static const struct {
	int dir;
	unsigned int type, flags;
	bool after;
} trig[P_END] = {
	[P_PRECOPY] = { 0, LM_PAGES, 0, false },
	[P_SWITCH] = { 0, LM_SWITCH, 0, true },
	[P_RESUMED] = { 1, LM_RESUMED, 0, false },
	[P_POSTCOPY] = { 0, LM_PAGES, LM_F_PUSH, false },
	[P_DONE] = { 0, LM_DONE, 0, true },
	[P_FIN] = { 1, LM_FIN, 0, false },
};

struct relay {
	struct dr c;		/* first: the hooks get &c */
	enum phase phase;
	enum fault fault;
	atomic_bool fired;
	atomic_bool release;	/* kills: the victim is dead, close the link */
	bool closed;
};

static void fire(struct dr *c)
{
	struct relay *r = (struct relay *)c;

	atomic_store(&r->fired, true);
	if (r->fault == F_RESET) {
		dr_close_all(c, true);
		return;
	}
	/* stalled, or held until the victim is dead */
	for (int i = 0; i < 2 * c->nconn; i++)
		c->leg[i].held = true;
}

/* Walk n bytes of leg i frame by frame; how many go on before the fault
 * (*now set), or n.  A forged row flips the trigger frame's last byte. */
static size_t scan(struct dr *c, int i, uint8_t *b, size_t n, bool *now)
{
	struct relay *r = (struct relay *)c;
	struct dr_leg *g = &c->leg[i];
	bool mine = i < 2 && i % 2 == trig[r->phase].dir;

	for (size_t k = 0; k < n; ) {
		struct lm_hdr h;

		if (g->left) {
			size_t take = n - k < g->left ? n - k : (size_t)g->left;

			if (g->mark && r->fault == F_FORGE && take == g->left) {
				b[k + take - 1] ^= 0x01;
				atomic_store(&r->fired, true);
			}
			g->left -= take;
			k += take;
			if (!g->left && g->mark && r->fault != F_FORGE) {
				*now = true;
				return k;
			}
			continue;
		}
		if (!dr_header(g, i, b[k++], &h))
			continue;
		g->mark = mine && !atomic_load(&r->fired) && h.type == trig[r->phase].type &&
			  (h.flags & (LM_F_PUSH | LM_F_STOPCOPY)) == trig[r->phase].flags;
		if (g->mark && !trig[r->phase].after && r->fault != F_FORGE) {
			*now = true;
			return k >= sizeof(h) ? k - sizeof(h) : 0;
		}
	}
	return n;
}

/* After the fault: a stalled link answers no one; a reset one is gone. */
static bool admit(struct dr *c, int fd)
{
	struct relay *r = (struct relay *)c;

	if (!atomic_load(&r->fired) || r->fault == F_FORGE)
		return true;
	if (r->fault == F_STALL && c->nsink < DR_MAXC) {
		c->sink[c->nsink++] = fd;
		return false;
	}
	if (r->fault != F_RESET)
		return true;
	dr_reset(fd);
	return false;
}

/* kills: once the victim is dead, close the link as its kernel would */
static void tick(struct dr *c)
{
	struct relay *r = (struct relay *)c;

	if (atomic_load(&r->release) && !r->closed) {
		dr_close_all(c, false);
		r->closed = true;
	}
}

/* ---- one row ------------------------------------------------------------ */

/* Where the workload is afterwards. */
enum where { W_NEITHER, W_DEST, W_SOURCE, W_CKPT, W_DEST_CKPT, W_DIED };
static const char *const where_name[] = {
	"NEITHER", "destination (verified)", "source (resumed there)",
	"source: checkpoint, resumed from it", "destination; the source kept a checkpoint",
	"none: the pages only the killed source had died with it",
};

struct row {
	int mode;
	enum phase phase;
	enum fault fault;
	int src, dst;		/* exits */
	enum where where;
	bool fired;
	const char *note;
};

static struct row rows[128];
static unsigned int nrows;

/* The checkpoint: resumed with lm resume, its hash and invariants checked. */
static bool resumes(void)
{
	const char *args[] = { "resume", CKPT, "--after", "0.2", NULL };
	const char *err = lmt_path("outcome-resume.err");

	if (access(CKPT, R_OK))
		return false;
	if (lmt_status(lmt_spawn(err, NULL, args)) != LM_EXIT_OK)
		return false;
	return lmt_file_has(err, "matches its hash") && lmt_file_has(err, "invariants hold");
}

static enum where where_now(const struct row *w)
{
	bool ckpt = w->src == LM_EXIT_UNDECIDED && resumes();

	if (w->dst == LM_EXIT_OK)
		return ckpt ? W_DEST_CKPT : W_DEST;
	if (w->src == LM_EXIT_ABORTED)
		return W_SOURCE;
	return ckpt ? W_CKPT : W_NEITHER;
}

static void run_row(struct row *w)
{
	char daddr[64], raddr[64], lfd_s[16];
	const char *mode = modes[w->mode];
	int lfd = lmt_listener(daddr, sizeof(daddr));
	struct relay r = { .c = { .scan = scan, .fire = fire, .admit = admit, .tick = tick },
			   .phase = w->phase, .fault = w->fault };
	pid_t d, s, victim;

	unlink(CKPT);
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(r.c.dest, sizeof(r.c.dest), "%s", daddr);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode", mode,
				     "--verify", "--timeout", "1000", "--rejoin", "1000", "--size",
				     "2M", "-q", NULL };

		d = lmt_spawn(DERR, NULL, da);
	}
	close(lfd);
	r.c.lfd = lmt_listener(raddr, sizeof(raddr));
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", raddr, "--mode", mode,
				     "--verify", "--timeout", "1000", "--rejoin", "1000", "--size",
				     "2M", "--stale", "0.5", "--bandwidth", "40M", "--precopy", "0.1",
				     "--after", "0.3", "--rounds", "1", "--checkpoint",
				     ckpt_at ? ckpt_at : CKPT, "-q",
				     NULL };

		s = lmt_spawn(SERR, NULL, sa);
	}
	assert_int_equal(dr_start(&r.c), 0);
	victim = w->fault == F_KILL_SRC ? s : w->fault == F_KILL_DST ? d : 0;
	if (victim) {
		double end = lmt_now() + 20;

		while (!atomic_load(&r.fired) && lmt_now() < end)
			usleep(2000);
		kill(victim, SIGKILL);
		if (victim == s)
			w->src = lmt_status(s);
		else
			w->dst = lmt_status(d);
		atomic_store(&r.release, true);
	}
	if (victim != s)
		w->src = lmt_status_within(s, 30);
	if (victim != d)
		w->dst = lmt_status_within(d, 30);
	dr_stop(&r.c);
	w->fired = atomic_load(&r.fired);
	w->where = where_now(w);
	/* the one way to neither end the rule allows: no end held every page */
	if (w->where == W_NEITHER && w->fault == F_KILL_SRC && !lmt_dest_holds_all(DERR))
		w->where = W_DIED;
}

#define KILLED 137	/* lmt_status of a SIGKILLed child */

/* Whether the destination holds every page at this phase. */
static bool dest_whole(int mode, enum phase p)
{
	if (!strcmp(modes[mode], "stop-copy"))
		return p >= P_SWITCH;
	return p >= P_DONE;
}

/* What the ends must exit with; the destination may exit dst or dst_or. */
struct want {
	int src, dst, dst_or;
};

/*
 * The destination holds every page from DONE on, but for a page whose
 * urgent answer the fault caught in the relay (then it stops: 3, and the
 * source's checkpoint holds the workload).
 * A reset right after SWITCH may or may not discard SWITCH in the relay's
 * socket (SO_LINGER 0 drops unsent bytes): the destination then never
 * resumed (6), or resumed (stop-copy: runs on, 0; minor: stops, 3, its
 * stale pages unsent).  Missing mode's destination resumes only on the
 * stale list that follows SWITCH, which a fault there never lets through.
 */
static struct want expect(const struct row *w)
{
	bool missing = !strcmp(modes[w->mode], "postcopy-missing");
	enum phase p = w->phase;
	struct want x = { .src = LM_EXIT_UNDECIDED, .dst = LM_EXIT_SOURCE_LOST, .dst_or = -1 };

	if (p == P_PRECOPY)
		x = (struct want){ LM_EXIT_ABORTED, LM_EXIT_PEER_LOST, -1 };
	else if (w->fault == F_FORGE && p == P_SWITCH)	/* refused: never resumed, */
		x = (struct want){ LM_EXIT_ABORTED, LM_EXIT_PEER_LOST, -1 };	/* says so */
	else if (w->fault == F_FORGE)
		x = (struct want){ LM_EXIT_OK, LM_EXIT_OK, -1 };
	else if (dest_whole(w->mode, p))
		x.dst = LM_EXIT_OK;
	else if (p == P_SWITCH && missing)
		x.dst = LM_EXIT_PEER_LOST;
	if (p == P_SWITCH && w->fault == F_RESET)
		x.dst_or = LM_EXIT_PEER_LOST;
	/* an urgent answer still in the relay when DONE passed never comes:
	 * that page is missing, and the destination cannot run on */
	if (p == P_DONE && !dest_whole(w->mode, P_SWITCH) &&
	    (w->fault == F_STALL || w->fault == F_RESET))
		x.dst_or = LM_EXIT_SOURCE_LOST;
	if (w->fault == F_KILL_SRC)
		x.src = KILLED;
	if (w->fault == F_KILL_DST)
		x.dst = KILLED;
	return x;
}

/*
 * Exit 8's message must be right about the destination: "cannot run the
 * workload on" (pages it lacks were never sent) never beside a destination
 * that ran it on; and where the destination holds every page (DONE went
 * through; stop-copy from SWITCH) or ran on, the checkpoint is called what
 * it then is: a second copy, to resume only if the destination did not.
 */
static unsigned int broken;

static void check_message(const struct row *w)
{
	bool unsent = lmt_file_says(SERR, "cannot run the workload on");
	bool second = lmt_file_says(SERR, "a second copy");

	if (w->src != LM_EXIT_UNDECIDED)
		return;
	if ((unsent && w->dst == LM_EXIT_OK) || unsent == second ||
	    ((dest_whole(w->mode, w->phase) || w->dst == LM_EXIT_OK) && !second)) {
		print_message("# WRONG MESSAGE: %s / %s / %s: destination %d, but the source "
			      "says %s\n", modes[w->mode], phases[w->phase], faults[w->fault],
			      w->dst, unsent ? "it cannot run the workload on" : second ?
			      "the checkpoint may be a second copy" : "neither");
		lmt_file_has(SERR, "@");	/* the log, for the record */
		broken++;
	}
}

/*
 * The rule, for every row: the workload somewhere, unless no end held
 * every page -- only a source killed while the destination still lacked
 * pages (postcopy's own risk: the pages that were only there are gone) --
 * and never resumed on both ends.
 */
static void check_rule(const struct row *w)
{
	struct want x = expect(w);

	if (!w->fired || w->src != x.src || (w->dst != x.dst && w->dst != x.dst_or)) {
		print_message("# WRONG EXITS: %s / %s / %s: source %d, destination %d; expected "
			      "%d and %d (or %d)%s\n", modes[w->mode], phases[w->phase],
			      faults[w->fault], w->src, w->dst, x.src, x.dst, x.dst_or,
			      w->fired ? "" : " (the fault never fired)");
		broken++;
	}
	if (w->where == W_NEITHER) {
		lmt_file_has(SERR, "@");	/* both logs, for the record */
		lmt_file_has(DERR, "@");
		print_message("# RULE BROKEN: %s / %s / %s: the workload is on neither end (source "
			      "%d, destination %d) while one end held every page\n", modes[w->mode],
			      phases[w->phase], faults[w->fault], w->src, w->dst);
		broken++;
	}
	/* exit 8 says the workload is kept: its checkpoint must resume */
	if (w->src == LM_EXIT_UNDECIDED && w->where != W_CKPT && w->where != W_DEST_CKPT) {
		print_message("# NOT KEPT: %s / %s / %s: exit 8 without a checkpoint that "
			      "resumes\n", modes[w->mode], phases[w->phase], faults[w->fault]);
		broken++;
	}
	if (w->dst == LM_EXIT_SOURCE_LOST && !lmt_file_has(DERR, "holds it whole as at the pause"))
		broken++;
	check_message(w);
	if (w->dst == LM_EXIT_OK && w->src == LM_EXIT_ABORTED) {
		print_message("# RULE BROKEN: %s / %s / %s: resumed on both ends\n",
			      modes[w->mode], phases[w->phase], faults[w->fault]);
		broken++;
	}
}

static void table_print(void)
{
	print_message("# %-17s %-14s %-19s %6s %6s  %s\n", "mode", "phase", "fault", "source",
		      "dest", "workload afterwards");
	for (unsigned int i = 0; i < nrows; i++) {
		const struct row *w = &rows[i];

		print_message("# %-17s %-14s %-19s %6d %6d  %s%s%s\n", modes[w->mode],
			      phases[w->phase], faults[w->fault], w->src, w->dst,
			      w->note ? "-- " : where_name[w->where], w->note ? w->note : "",
			      w->fired || w->note ? "" : " (the fault never fired)");
	}
}

/* Rows no relay can make here, with the reason. */
static const char *not_made(int mode, enum phase p, enum fault f)
{
	(void)f;
	if (p == P_POSTCOPY && !strcmp(modes[mode], "stop-copy"))
		return "not a phase of stop-copy: every page is sent before SWITCH";
	return NULL;
}

static const char *only_mode;	/* argv[1]: one mode's rows */

static bool selected(const char *name)
{
	const char *want = getenv("LM_OUTCOME");

	if (only_mode && strncmp(name, only_mode, strlen(only_mode)))
		return false;
	return !want || strstr(name, want);
}

static void test_table(void **state)
{
	(void)state;
	for (int m = 0; m < 3; m++)
		for (int p = 0; p < P_END; p++)
			for (int f = 0; f < F_END; f++) {
				struct row *w = &rows[nrows];
				char name[96];
				double t0 = lmt_now();

				snprintf(name, sizeof(name), "%s/%s/%s", modes[m], phases[p],
					 faults[f]);
				if (!selected(name))
					continue;
				*w = (struct row){ .mode = m, .phase = p, .fault = f,
						   .note = not_made(m, p, f) };
				nrows++;
				if (w->note)
					continue;
				run_row(w);
				print_message("# %s: source %d, destination %d, %s (%.1f s)\n",
					      name, w->src, w->dst, where_name[w->where],
					      lmt_now() - t0);
				check_rule(w);
			}
	assert_int_equal(broken, 0);
}

/* lm resume FILE: its exit and whether its message has word */
static int resume_rc(const char *file, const char *word)
{
	const char *args[] = { "resume", file, "--after", "0.1", NULL };
	const char *err = lmt_path("outcome-resume.err");
	int rc = lmt_status(lmt_spawn(err, NULL, args));

	assert_true(lmt_file_has(err, word));
	return rc;
}

static void flip_byte(const char *file, off_t at)
{
	FILE *f = fopen(file, "r+");
	int c;

	assert_non_null(f);
	fseek(f, at, SEEK_SET);
	c = fgetc(f);
	fseek(f, at, SEEK_SET);
	fputc(c ^ 0x20, f);
	fclose(f);
}

/*
 * The checkpoint cannot be written (its directory does not exist): the
 * source says the workload is lost on its side and exits 11, not 8.  And
 * lm resume refuses what it cannot trust: a page changed (4), a file cut
 * short (4), no file (1).
 */
static void test_checkpoint_refusals(void **state)
{
	struct row w = { .mode = 0, .phase = P_SWITCH, .fault = F_STALL };
	char cut[160];

	(void)state;
	if (only_mode && strcmp(only_mode, "minor"))
		skip();
	ckpt_at = lmt_path("no-such-dir/outcome.ckpt");
	run_row(&w);
	ckpt_at = NULL;
	assert_int_equal(w.src, LM_EXIT_LOST);
	assert_true(lmt_file_has(SERR, "WORKLOAD LOST on this side"));
	assert_int_equal(w.dst, LM_EXIT_SOURCE_LOST);

	run_row(&w);
	assert_int_equal(w.src, LM_EXIT_UNDECIDED);
	assert_int_equal(w.where, W_CKPT);
	assert_true(lmt_file_has(SERR, "resume it with: lm resume"));
	flip_byte(CKPT, 4096 * 7 + 100);
	assert_int_equal(resume_rc(CKPT, "does not match its hash"), LM_EXIT_VERIFY);
	snprintf(cut, sizeof(cut), "%s", CKPT);
	assert_int_equal(truncate(cut, 4096), 0);
	assert_int_equal(resume_rc(CKPT, "not a whole lm checkpoint"), LM_EXIT_VERIFY);
	unlink(CKPT);
	assert_int_equal(resume_rc(CKPT, "cannot open"), LM_EXIT_USAGE);
}

/*
 * Every mode at once: this program again for each, its output in a file
 * of its own (unnamed: tmpfile), printed in order once all have ended.
 * Fails if any did.
 */
static int side_by_side(void)
{
	static const char *const mode_args[] = { "minor", "stop-copy", "postcopy-missing" };
	FILE *out[3];
	char buf[4096];
	pid_t pid[3];
	int rc = 0, st = 0;
	size_t n;

	fflush(stdout);
	for (int m = 0; m < 3; m++) {
		out[m] = tmpfile();
		pid[m] = out[m] ? fork() : -1;
		if (pid[m] == 0) {
			dup2(fileno(out[m]), 1);
			dup2(fileno(out[m]), 2);
			execl("/proc/self/exe", "lm-outcome", mode_args[m], (char *)NULL);
			_exit(127);
		}
		if (pid[m] < 0)
			return 1;
	}
	for (int m = 0; m < 3; m++) {
		bool ok = waitpid(pid[m], &st, 0) == pid[m] && WIFEXITED(st) && !WEXITSTATUS(st);

		rc |= !ok;
		printf("# ---- mode %s: %s (status 0x%x)\n", mode_args[m], ok ? "ok" : "FAILED", st);
		rewind(out[m]);
		while ((n = fread(buf, 1, sizeof(buf), out[m])) > 0)
			fwrite(buf, 1, n, stdout);
		fclose(out[m]);
	}
	return rc;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_checkpoint_refusals),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 && !getenv("LM_OUTCOME"))
		return side_by_side();
	only_mode = argc > 1 ? argv[1] : NULL;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	table_print();
	return rc;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The live-migrate drills: a relay between source and destination that
 * misbehaves the way a network does -- stalls every connection, stalls the
 * urgent one alone, resets, drops and comes back later, carries one
 * direction only, lets fifty strangers hold the door, or rewrites a page on
 * the way -- once the postcopy is under way.  Each drill is a row of the
 * table of adversaries: what both ends must say, and that they agree.
 *
 * The relay (drill-relay.c) reads frame headers to know where it is: the
 * first one or two frames each way are the handshake (lm_clear_frames),
 * every later one carries a tag.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <dirent.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"
#include "drill-relay.h"

#define DERR lmt_path("drill-dest.err")
#define SERR lmt_path("drill-src.err")

enum drill { STALL_ALL, STALL_URGENT, RESET, DROP_RETURN, ONE_WAY, SLOWLORIS, MITM,
	FORGED_REFUSE, LOST_RESUMED, DOOR_LAST, LOST_RESUMED_SILENT };

/* the door's slots less one: strangers that leave the source the last slot */
#define DOOR_STRANGERS (LM_DOOR_SLOTS - 1)

struct relay {
	struct dr c;		/* first: the hooks get &c */
	enum drill drill;
	bool fired;		/* the drill happened */
	uint64_t down_until;	/* DROP_RETURN: refuse connections until then */
	int forge;		/* FORGED_REFUSE: connections still to answer so */
	double t_fired;		/* lmt_now() at the drill's moment */
};

/* The drill, at its moment: the first postcopy push on the main connection,
 * or (STALL_URGENT) the first answer on the urgent one. */
static void fire(struct dr *c)
{
	struct relay *r = (struct relay *)c;

	r->fired = true;
	r->t_fired = lmt_now();
	switch (r->drill) {
	case STALL_ALL:
	case LOST_RESUMED_SILENT:
		for (int i = 0; i < 2 * c->nconn; i++)
			c->leg[i].held = true;
		break;
	case STALL_URGENT:
		c->leg[2].held = c->leg[3].held = true;
		break;
	case RESET:
	case SLOWLORIS:
	case LOST_RESUMED:
		dr_close_all(c, true);
		break;
	case FORGED_REFUSE:
		dr_close_all(c, true);
		r->forge = 3;
		break;
	case DROP_RETURN:
		dr_close_all(c, false);
		r->down_until = lm_now_ns() + 1500000000ull;
		break;
	case ONE_WAY:
		for (int i = 1; i < 2 * c->nconn; i += 2)
			c->leg[i].held = true;
		break;
	case MITM:
	case DOOR_LAST:
		break;
	}
}

/*
 * Walk n bytes of leg i frame by frame; how many go on.  At the drill's
 * moment -- the header of the first postcopy push on the main connection,
 * or (STALL_URGENT) the first answer carrying a page on the urgent one --
 * *now is set and the bytes up to there go on (a stall lets all of them
 * go on; a cut does not).  g->mark: the current frame is a push.
 */
static size_t scan_frames(struct relay *r, int i, uint8_t *b, size_t n, bool *now)
{
	struct dr_leg *g = &r->c.leg[i];

	for (size_t k = 0; k < n; ) {
		struct lm_hdr h;
		bool resp;

		if (g->left) {
			size_t take = n - k < g->left ? n - k : (size_t)g->left;

			/* MITM: the push's last page byte, just before its tag */
			if (r->drill == MITM && g->mark && !r->fired && g->left > LM_TAGLEN &&
			    g->left - LM_TAGLEN <= take) {
				b[k + g->left - LM_TAGLEN - 1] ^= 0x40;
				r->fired = true;
			}
			g->left -= take;
			k += take;
			continue;
		}
		if (!dr_header(g, i, b[k++], &h))
			continue;
		g->mark = i == 0 && h.type == LM_PAGES && (h.flags & LM_F_PUSH);
		/* STALL_URGENT: an answer with data, which nothing else brings
		 * (its length says so: the payload is encrypted) */
		resp = r->drill == STALL_URGENT && i == 2 && h.type == LM_RESP &&
		       h.len > sizeof(struct lm_resp);
		if (resp && !r->fired) {
			*now = true;
			return k;
		}
		/* LOST_RESUMED: not a byte of RESUMED goes on (a header split
		 * across reads has had its start passed: garbage before a reset) */
		if ((r->drill == LOST_RESUMED || r->drill == LOST_RESUMED_SILENT) && !r->fired &&
		    i % 2 && h.type == LM_RESUMED) {
			*now = true;
			return k >= sizeof(h) ? k - sizeof(h) : 0;
		}
		if (r->fired || r->drill == MITM || r->drill == STALL_URGENT ||
		    r->drill == LOST_RESUMED || r->drill == LOST_RESUMED_SILENT)
			continue;
		if (g->mark) {
			*now = true;
			return k;
		}
	}
	return n;
}

static size_t scan(struct dr *c, int i, uint8_t *b, size_t n, bool *now)
{
	struct relay *r = (struct relay *)c;
	size_t pass = scan_frames(r, i, b, n, now);

	return *now && (r->drill == STALL_ALL || r->drill == ONE_WAY) ? n : pass;
}

/*
 * FORGED_REFUSE: the relay answers a rejoin itself, with a refusal it made
 * up (no key, so no MAC, no seal): the destination "has no such session",
 * "refuses the key", "did not resume".  Each must count as no answer.
 */
static void forge_refuse(struct relay *r, int fd)
{
	static const unsigned int whys[] = { LM_REFUSE_SESSION, LM_REFUSE_KEY,
					     LM_REFUSE_NOT_RESUMED };
	struct lm_refuse rf = { .why = whys[(3 - r->forge--) % 3] };
	uint8_t b[256];
	size_t n = lm_frame_encode(b, sizeof(b), LM_REFUSE, 0, &rf, NULL, 0);

	if (write(fd, b, n) != (ssize_t)n)
		print_message("# the forged refusal did not go out whole\n");
	close(fd);
}

static bool admit(struct dr *c, int fd)
{
	struct relay *r = (struct relay *)c;

	if (r->forge > 0) {
		forge_refuse(r, fd);
		return false;
	}
	/* silence: the rejoin connects, and nothing ever answers it */
	if (r->drill == LOST_RESUMED_SILENT && r->fired && c->nsink < DR_MAXC) {
		c->sink[c->nsink++] = fd;
		return false;
	}
	if (lm_now_ns() < r->down_until) {
		close(fd);
		return false;
	}
	return true;
}

/* Whether pid holds at least n TCP connections (its listener aside) within seconds. */
static bool door_holds(pid_t pid, int n, double seconds)
{
	char path[64];
	double end = lmt_now() + seconds;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	while (lmt_now() < end) {
		struct dirent *e;
		DIR *dir = opendir(path);
		int socks = 0;

		while (dir && (e = readdir(dir))) {
			char fd[400], to[64];
			ssize_t len;

			snprintf(fd, sizeof(fd), "%s/%s", path, e->d_name);
			len = readlink(fd, to, sizeof(to) - 1);
			if (len > 0 && (to[len] = 0, !strncmp(to, "socket:", 7)))
				socks++;
		}
		if (dir)
			closedir(dir);
		if (socks >= n + 1)
			return true;
		usleep(20000);
	}
	return false;
}

/*
 * ---- the outcome table (issue 37, item 1), begun with the deadline rows --
 * Each row: a mode, a phase and a fault, what each end exited with, and
 * where the workload is afterwards -- checked against the one rule no row
 * may break: the workload on neither end while the destination holds
 * every page (a source that sent no SWITCH holds its own and resumes it:
 * exit 2).  The rows print as a table when the program ends.
 */
struct outcome {
	const char *mode, *phase, *fault;
	int src, dst;		/* -1: that end never started */
	const char *where;
};

static struct outcome table[32];
static unsigned int nrows;

/* Record a row from both exits and logs, and hold it to the rule. */
static void outcome(const char *mode, const char *phase, const char *fault, int src, int dst,
		    const char *slog, const char *dlog)
{
	struct outcome *o = &table[nrows < 32 ? nrows++ : 31];
	bool holds = dst >= 0 && lmt_dest_holds_all(dlog);

	*o = (struct outcome){ mode, phase, fault, src, dst, "neither" };
	if (dst == LM_EXIT_OK)
		o->where = "destination";
	else if (src == LM_EXIT_UNDECIDED && lmt_wait_for(slog, "kept paused in", 0))
		o->where = "source (checkpoint)";
	else if (src == LM_EXIT_ABORTED)
		o->where = "source";
	else if (dst < 0)
		o->where = "source (never left)";
	if (!strcmp(o->where, "neither") && holds)
		fail_msg("%s %s %s: the destination held every page and the workload is on "
			 "neither end (source %d, destination %d)", mode, phase, fault, src, dst);
}

static void table_print(void)
{
	print_message("# %-17s %-13s %-24s %6s %6s  %s\n", "mode", "phase", "fault", "source",
		      "dest", "workload afterwards");
	for (unsigned int i = 0; i < nrows; i++) {
		const struct outcome *o = &table[i];
		char dst[16];

		snprintf(dst, sizeof(dst), o->dst < 0 ? "-" : "%d", o->dst);
		print_message("# %-17s %-13s %-24s %6d %6s  %s\n", o->mode, o->phase, o->fault,
			      o->src, dst, o->where);
	}
}

/* The last drill's source: seconds from the drill's moment to its exit. */
static double drill_src_took;
/* Both ends' --rejoin */
static const char *drill_rejoin = "8000";

/* A drill run: its exit statuses; both logs printed for the record. */
static void drill(enum drill what, const char *mode, int *s_rc, int *d_rc)
{
	char daddr[64], raddr[64], lfd_s[16];
	int lfd = lmt_listener(daddr, sizeof(daddr));
	struct relay r = { .c = { .scan = scan, .fire = fire, .admit = admit }, .drill = what };
	pid_t d, s, slow = 0;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(r.c.dest, sizeof(r.c.dest), "%s", daddr);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode", mode,
				     "--verify", "--timeout", "3000", "--rejoin", drill_rejoin, "--size",
				     "4M", NULL };

		d = lmt_spawn(DERR, NULL, da);
	}
	close(lfd);
	if (what == SLOWLORIS)
		slow = lmt_slowloris_start(daddr, 50);
	if (what == DOOR_LAST) {
		r.fired = true;	/* the strangers are the drill: the relay only relays */
		slow = lmt_slowloris_start(daddr, DOOR_STRANGERS);
		/* the door full but for one slot before the source knocks (a
		 * door with fewer slots never holds them all); the source then
		 * knocks well within the strangers' 3 s handshake deadline */
		if (!door_holds(d, DOOR_STRANGERS, 10)) {
			print_message("# the door never held %d strangers at once\n",
				      DOOR_STRANGERS);
			kill(d, SIGKILL);
			lmt_slowloris_stop(slow);
			fail();
		}
	}
	r.c.lfd = lmt_listener(raddr, sizeof(raddr));
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", raddr, "--mode", mode,
				     "--verify", "--timeout", "3000", "--rejoin", drill_rejoin, "--size",
				     "4M", "--stale", "0.5", "--bandwidth", "100M", "--precopy", "0.2",
				     "--after", "0.3", "--rounds", "2", NULL };

		s = lmt_spawn(SERR, NULL, sa);
	}
	/* the relay's thread only after both forks (a fork copies held locks) */
	assert_int_equal(dr_start(&r.c), 0);
	*s_rc = lmt_status(s);
	drill_src_took = lmt_now() - r.t_fired;
	*d_rc = lmt_status(d);
	dr_stop(&r.c);
	if (slow)
		print_message("# the strangers were cut off %d times\n", lmt_slowloris_stop(slow));
	print_message("# drill %d (%s): source %d, destination %d\n", what, mode, *s_rc, *d_rc);
	if (!r.fired) {
		print_message("# the drill never fired: the run ended before its point\n");
		lmt_file_has(SERR, "@");	/* both logs say why */
		lmt_file_has(DERR, "@");
	}
	assert_true(r.fired);
}

/* The link came back (or another one did): both finished, the same verdict. */
static void recovered(enum drill what, int s, int d)
{
	if (s || d) {
		lmt_file_has(SERR, "@");	/* both logs, for the record */
		lmt_file_has(DERR, "@");
	}
	assert_int_equal(s, LM_EXIT_OK);
	assert_int_equal(d, LM_EXIT_OK);
	/* DOOR_LAST cuts nothing: nothing to rejoin */
	assert_true(what == DOOR_LAST || lmt_file_has(SERR, "rejoined the destination") ||
		    lmt_file_has(SERR, "verdict came with"));
	assert_true(lmt_file_has(SERR, "result      ok (exit 0)"));
	assert_true(lmt_file_has(DERR, "result      ok (exit 0)"));
}

static void recovers(enum drill what, const char *mode)
{
	int s, d;

	drill(what, mode, &s, &d);
	recovered(what, s, d);
}

static void test_stall_all(void **state)
{
	(void)state;
	recovers(STALL_ALL, "minor");
}

/* Only the urgent connection stalls: the destination sees its pages stop
 * coming (not silence: the main connection still talks) and drops the link. */
static void test_stall_urgent(void **state)
{
	(void)state;
	recovers(STALL_URGENT, "minor");
	assert_true(lmt_file_has(DERR, "a stalled link"));
}

static void test_reset(void **state)
{
	(void)state;
	recovers(RESET, "postcopy-missing");
}

static void test_drop_and_return(void **state)
{
	(void)state;
	recovers(DROP_RETURN, "minor");
}

/* Nothing comes back (FIN neither): the verdict reaches the source anyway. */
static void test_one_way(void **state)
{
	(void)state;
	recovers(ONE_WAY, "minor");
}

static void test_slowloris(void **state)
{
	(void)state;
	recovers(SLOWLORIS, "minor");
}

/*
 * RESUMED lost with the link, in each mode: the source, paused since
 * SWITCH, must not take the workload back on a guess -- it asks by
 * rejoining and finishes with the destination.  Before that fix it resumed
 * at home while the destination ran too (source 2, destination 0 or 3).
 */
static void lost_resumed(const char *mode)
{
	int s, d;

	drill(LOST_RESUMED, mode, &s, &d);
	outcome(mode, "RESUMED lost", "reset", s, d, SERR, DERR);
	recovered(LOST_RESUMED, s, d);
	assert_true(lmt_file_has(SERR, "no RESUMED after SWITCH"));
	assert_false(lmt_file_has(SERR, "resumes on the source"));
}

static void test_lost_resumed_minor(void **state)
{
	(void)state;
	lost_resumed("minor");
}

static void test_lost_resumed_stopcopy(void **state)
{
	(void)state;
	lost_resumed("stop-copy");
}

static void test_lost_resumed_missing(void **state)
{
	(void)state;
	lost_resumed("postcopy-missing");
}

/*
 * RESUMED lost in stop-copy mode, and then silence: the link stalls and
 * every rejoin connects to something that never answers.  The destination
 * holds every page: it runs on and finishes (exit 0); the source, paused
 * since SWITCH, gives up at --timeout plus --rejoin (3 + 3 s), handshakes
 * included, and stays paused saying so (exit 8).  Before the destination
 * ran on (it stopped a workload it had whole: exit 3) the workload ended
 * on neither end.
 */
static void test_lost_resumed_silent_stopcopy(void **state)
{
	int s, d;

	(void)state;
	drill_rejoin = "3000";
	drill(LOST_RESUMED_SILENT, "stop-copy", &s, &d);
	drill_rejoin = "8000";
	outcome("stop-copy", "RESUMED lost", "stalled, rejoins silent", s, d, SERR, DERR);
	print_message("# the source exited %.2f s after RESUMED was lost\n", drill_src_took);
	if (s != LM_EXIT_UNDECIDED || d != LM_EXIT_OK) {
		lmt_file_has(SERR, "@");	/* both logs, for the record */
		lmt_file_has(DERR, "@");
	}
	assert_int_equal(d, LM_EXIT_OK);
	assert_true(lmt_file_has(DERR, "holds every page"));
	assert_int_equal(s, LM_EXIT_UNDECIDED);
	assert_true(lmt_file_has(SERR, "OUTCOME UNKNOWN"));
	assert_true(lmt_file_has(SERR, "no rejoin within 3000 ms"));
	assert_true(drill_src_took < 3 + 3 + 4);
}

/*
 * Strangers hold every handshake slot but the last -- 1023 of the door's
 * 1024 (LM_DOOR_SLOTS), all at once before the source knocks: the source
 * takes the last, and no handshake is dropped to make room.  A door that
 * mishandles its last slot (never hands it out, or has one fewer) must
 * drop the oldest handshake for the source, and says so: the source still
 * gets in there (its handshake is the newest, and done in a round trip),
 * so the drop is what this drill sees.  Needs RLIMIT_NOFILE room for the
 * strangers and the door's table, else it skips.
 */
static void test_door_last_slot(void **state)
{
	(void)state;
	if (!lmt_nofile(LM_DOOR_SLOTS + 64)) {
		print_message("# skip: RLIMIT_NOFILE's hard limit has no room for %d "
			      "strangers and the door's %d slots\n", DOOR_STRANGERS,
			      LM_DOOR_SLOTS);
		skip();
	}
	recovers(DOOR_LAST, "minor");
	assert_false(lmt_file_has(DERR, "oldest of a full table"));
}

/* A page changed on the way: refused by name, the link dropped as if cut;
 * the source rejoins under fresh keys and every page matches. */
static void test_mitm(void **state)
{
	(void)state;
	recovers(MITM, "minor");
	assert_true(lmt_file_has(DERR, "fails authentication"));
}

/*
 * Issue 36: an on-path relay resets the link mid-postcopy and answers the
 * source's rejoins with forged refusals.  Before: the source gave up at the
 * first (171 ms) and the destination stopped the workload with SIGBUS.  Now
 * nothing unauthenticated ends a rejoin: the source asks again and gets in.
 */
static void test_forged_refuse(void **state)
{
	(void)state;
	recovers(FORGED_REFUSE, "minor");
	assert_true(lmt_file_has(SERR, "rejoined the destination"));
}

/*
 * Blackholed links: the source in one network namespace, the destination
 * in another, a veth pair between them -- and then, in the destination's,
 * a blackhole route back to the source.  Nothing is refused or reset:
 * the source's packets arrive, every answer is dropped, so a connect()
 * hears nothing (the kernel retries its SYN for two minutes) and an
 * established link goes silent, as behind a router that drops.
 */
#define NET_A "10.213.0.1"
#define NET_B "10.213.0.2"
#define IP "PATH=/usr/sbin:/sbin:$PATH ip "

struct nets {
	int home, a, b;		/* network namespaces: ours, the source's, the destination's */
};

/* A new network namespace, held by an fd; the caller stays in home. */
static int ns_new(int home)
{
	int fd;

	if (unshare(CLONE_NEWNET))
		return -1;
	fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_int_equal(setns(home, CLONE_NEWNET), 0);
	return fd;
}

static void ns_enter(const struct nets *n, int ns)
{
	assert_int_equal(setns(ns, CLONE_NEWNET), 0);
	(void)n;
}

static void ns_leave(const struct nets *n)
{
	assert_int_equal(setns(n->home, CLONE_NEWNET), 0);
}

/* A shell command inside ns: whether it succeeded. */
static bool ns_sh(const struct nets *n, int ns, const char *cmd)
{
	int rc;

	ns_enter(n, ns);
	rc = system(cmd);
	ns_leave(n);
	if (rc && !strstr(cmd, "grep -q"))
		print_message("# '%s' failed (%d)\n", cmd, rc);
	return rc == 0;
}

/* Both namespaces and the link between them; skips without the rights. */
static void nets_up(struct nets *n)
{
	char cmd[512];

	n->home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(n->home >= 0);
	n->a = ns_new(n->home);
	n->b = n->a < 0 ? -1 : ns_new(n->home);
	if (n->b < 0) {
		print_message("# skip: no network namespace (%s): root is needed\n",
			      strerror(errno));
		skip();
	}
	snprintf(cmd, sizeof(cmd), IP "link set lo up && " IP "link add vA type veth peer name vB "
		 "netns /proc/%d/fd/%d && " IP "addr add " NET_A "/24 dev vA && " IP "link set vA up",
		 (int)getpid(), n->b);
	if (!ns_sh(n, n->a, cmd) || !ns_sh(n, n->b, IP "link set lo up && " IP "addr add " NET_B
					   "/24 dev vB && " IP "link set vB up")) {
		print_message("# skip: cannot make a veth pair (iproute2, CONFIG_VETH)\n");
		skip();
	}
	/*
	 * Until the kernel's link watch activates a device -- up to a second
	 * later -- its queue drops every packet: a connect then would wait for
	 * the SYN's retry, the drill's own blackhole.  Wait for "state UP".
	 */
	for (int i = 0; i < 250; i++) {
		if (ns_sh(n, n->a, IP "-o link show vA | grep -q 'state UP'") &&
		    ns_sh(n, n->b, IP "-o link show vB | grep -q 'state UP'"))
			return;
		usleep(20000);
	}
	fail_msg("the veth pair never came up");
}

static void nets_down(struct nets *n)
{
	close(n->a);
	close(n->b);
	close(n->home);
}

/* From now on the destination's side drops everything it sends back. */
static void blackhole(const struct nets *n)
{
	assert_true(ns_sh(n, n->b, IP "route add blackhole " NET_A "/32"));
}

/* lm in a child inside ns */
static pid_t spawn_in(const struct nets *n, int ns, const char *err, const char *const *args)
{
	pid_t pid;

	ns_enter(n, ns);
	pid = lmt_spawn(err, NULL, args);
	ns_leave(n);
	return pid;
}

/* A destination that drops every answer: connect() gives up at --timeout. */
static void test_blackhole_connect(void **state)
{
	struct nets n;
	const char *sa[] = { "source", "--key", lmt_key(), "--to", NET_B ":4513", "--timeout",
			     "1500", "--size", "4M", NULL };
	double t0, took;
	int rc;

	(void)state;
	nets_up(&n);
	blackhole(&n);
	t0 = lmt_now();
	rc = lmt_status_within(spawn_in(&n, n.a, SERR, sa), 15);
	took = lmt_now() - t0;
	print_message("# source to a blackholed destination: exit %d after %.2f s\n", rc, took);
	nets_down(&n);
	outcome("minor", "connect", "blackholed", rc, -1, SERR, DERR);
	assert_int_equal(rc, LM_EXIT_PEER_LOST);
	/* --timeout and a loaded machine's start-up, not the kernel's SYN retries */
	assert_true(took < 1.5 + 3);
	assert_true(lmt_file_has(SERR, "no answer within 1500 ms"));
}

/*
 * A resolver that never answers (its nameserver behind the blackhole):
 * the name's lookup gives up at --timeout too.  The child sees its own
 * /etc/resolv.conf, in a mount namespace of its own.
 */
static void test_blackhole_dns(void **state)
{
	const char *conf = lmt_path("resolv.conf");
	struct nets n;
	double t0, took;
	FILE *f;
	pid_t pid;
	int rc;

	(void)state;
	nets_up(&n);
	blackhole(&n);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "nameserver " NET_B "\noptions timeout:20 attempts:2\n");
	fclose(f);
	t0 = lmt_now();
	ns_enter(&n, n.a);
	pid = lmt_fork();
	if (!pid) {
		char *argv[] = { "lm", "source", "--key", (char *)lmt_key(), "--to",
				 "lm-drill.example:4513", "--timeout", "1500", "--size", "4M", NULL };

		if (!freopen(SERR, "w", stderr))
			_exit(100);
		setvbuf(stderr, NULL, _IONBF, 0);
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL))
			_exit(77);
		_exit(lm_main(10, argv));
	}
	ns_leave(&n);
	rc = lmt_status_within(pid, 15);
	took = lmt_now() - t0;
	print_message("# source to a name no resolver answers: exit %d after %.2f s\n", rc, took);
	nets_down(&n);
	outcome("minor", "name lookup", "resolver blackholed", rc, -1, SERR, DERR);
	if (rc == 77) {
		print_message("# skip: no mount namespace for a resolv.conf of the test's own\n");
		skip();
	}
	assert_int_equal(rc, LM_EXIT_PEER_LOST);
	assert_true(took < 1.5 + 3);
	assert_true(lmt_file_has(SERR, "no answer from the resolver within 1500 ms"));
}

/* A listening socket on NET_B:0 in the destination's namespace. */
static int listener_in(const struct nets *n, char *addr, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd;

	inet_pton(AF_INET, NET_B, &sa.sin_addr);
	ns_enter(n, n->b);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ns_leave(n);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 128), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, len, NET_B ":%u", ntohs(sa.sin_port));
	return fd;
}

/*
 * The link blackholed mid-postcopy for good: each side gives up within
 * --timeout plus --rejoin -- the source's rejoin connects included --
 * and says which deadline passed.  The push runs at 1 MB/s, so the
 * postcopy lasts about 2 s after the destination resumes.
 */
static void test_blackhole_postcopy(void **state)
{
	struct nets n;
	char addr[64], lfd_s[16];
	double t0, ts, td;
	int lfd, s_rc, d_rc;
	pid_t d, s;

	(void)state;
	/* the last drill's logs say "resumed" too: not until this one's do */
	unlink(DERR);
	unlink(SERR);
	nets_up(&n);
	lfd = listener_in(&n, addr, sizeof(addr));
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--verify",
				     "--timeout", "1500", "--rejoin", "3000", "--size", "2M", NULL };

		d = spawn_in(&n, n.b, DERR, da);
	}
	close(lfd);
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--verify",
				     "--timeout", "1500", "--rejoin", "3000", "--size", "2M",
				     "--stale", "0.9", "--bandwidth", "8M", "--precopy", "0.2",
				     "--after", "0.3", "--rounds", "1", NULL };

		s = spawn_in(&n, n.a, SERR, sa);
	}
	if (!lmt_wait_for(DERR, "destination: resumed", 30)) {
		lmt_file_has(SERR, "@");
		fail_msg("the destination never resumed");
	}
	blackhole(&n);
	t0 = lmt_now();
	s_rc = lmt_status_within(s, 20);
	ts = lmt_now() - t0;
	d_rc = lmt_status_within(d, 20);
	td = lmt_now() - t0;
	print_message("# blackholed mid-postcopy: source %d after %.2f s, destination %d after "
		      "%.2f s\n", s_rc, ts, d_rc, td);
	nets_down(&n);
	outcome("minor", "postcopy", "blackholed", s_rc, d_rc, SERR, DERR);
	if (s_rc != LM_EXIT_UNDECIDED || d_rc != LM_EXIT_SOURCE_LOST) {
		lmt_file_has(SERR, "@");	/* both logs, for the record */
		lmt_file_has(DERR, "@");
	}
	assert_true(lmt_file_has(DERR, "the link broke mid-postcopy"));
	/* the destination lacked pages: the source keeps them (before: 6, freed) */
	assert_int_equal(s_rc, LM_EXIT_UNDECIDED);
	assert_true(lmt_file_has(SERR, "kept paused in"));
	assert_int_equal(d_rc, LM_EXIT_SOURCE_LOST);
	/* silence for --timeout, then --rejoin, and a loaded machine's slack */
	assert_true(ts < 1.5 + 3 + 3);
	assert_true(td < 1.5 + 3 + 3);
	assert_true(lmt_file_has(SERR, "no rejoin within 3000 ms"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stall_all),
		cmocka_unit_test(test_stall_urgent),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_drop_and_return),
		cmocka_unit_test(test_one_way),
		cmocka_unit_test(test_slowloris),
		cmocka_unit_test(test_mitm),
		cmocka_unit_test(test_forged_refuse),
		cmocka_unit_test(test_lost_resumed_minor),
		cmocka_unit_test(test_lost_resumed_stopcopy),
		cmocka_unit_test(test_lost_resumed_missing),
		cmocka_unit_test(test_lost_resumed_silent_stopcopy),
		cmocka_unit_test(test_door_last_slot),
		cmocka_unit_test(test_blackhole_connect),
		cmocka_unit_test(test_blackhole_dns),
		cmocka_unit_test(test_blackhole_postcopy),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	/* LM_DRILL=test_blackhole* runs those alone */
	if (getenv("LM_DRILL"))
		cmocka_set_test_filter(getenv("LM_DRILL"));
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	table_print();
	return rc;
}

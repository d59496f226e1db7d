// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A link cut from outside: a proxy between source and destination reads
 * the frames going by and resets every connection at a chosen frame.  Cut
 * mid-postcopy while both ends live, they rejoin with the same key and
 * session and finish, every page verified.  Cut before the commit, the
 * source resumes at home and the destination never runs on its own.
 */
#include <errno.h>
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
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

static char DERR[128], SERR[128];
#define MAXP 16		/* connections: main, urgent, a few rejoins */

enum cut_at { CUT_PRECOPY, CUT_SWITCH, CUT_PUSH, CUT_RESUMED };

struct leg {
	int from, to;
	uint8_t hdr[sizeof(struct lm_hdr)];
	size_t hgot;
	uint64_t left;		/* payload bytes of the current frame still to come */
	unsigned int nframes;	/* the handshake's first ones carry no tag (lm_clear_frames) */
	bool cut_after;		/* cut when this frame is through */
	bool parse;		/* read the frames */
	bool back;		/* destination -> source */
};

struct proxy {
	int lfd;
	char dest[64];
	enum cut_at at;
	int down_ms;		/* after the cut: refuse every connection this long */
	int refuse_first;	/* and at least this many reconnects */
	/* and until this word is in this file (the destination's log) */
	const char *down_file, *down_word;
	uint64_t down_until, cut_ns;
	atomic_int stop, cuts, refused;
	struct leg leg[2 * MAXP];
	int nleg;
	pthread_t tid;
};

/* the destination may be gone: the source's log tells what that did */
static int dial(const char *addr)
{
	return lm_connect_quiet(addr, true);
}

/* Whether path has word yet, saying nothing when not. */
static bool file_has_quiet(const char *path, const char *word)
{
	char buf[16384];
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
	fclose(f);
	return strstr(buf, word) != NULL;
}

/* After the cut: is the link still down? */
static bool link_down(struct proxy *p)
{
	if (lm_now_ns() < p->down_until || atomic_load(&p->refused) < p->refuse_first)
		return true;
	/* an end's log says it got there, or it never will (the test's deadline) */
	return p->down_word && !file_has_quiet(p->down_file, p->down_word) &&
	       lm_now_ns() - p->cut_ns < 30000000000ull;
}

static void reset_all(struct proxy *p)
{
	struct linger l = { 1, 0 };

	for (int i = 0; i < p->nleg; i++) {
		if (p->leg[i].from < 0)
			continue;
		setsockopt(p->leg[i].from, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		close(p->leg[i].from);
		p->leg[i].from = p->leg[i + (i % 2 ? -1 : 1)].to = -1;
	}
	p->nleg = 0;
	p->cut_ns = lm_now_ns();
	p->down_until = p->cut_ns + (uint64_t)p->down_ms * 1000000ull;
	atomic_fetch_add(&p->cuts, 1);
}

/* How many of the n bytes to pass before cutting; n when no cut. */
static size_t scan(struct proxy *p, struct leg *g, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; ) {
		if (g->left) {
			size_t k = n - i < g->left ? n - i : (size_t)g->left;

			g->left -= k;
			i += k;
			if (!g->left && g->cut_after)
				return i;
			continue;
		}
		g->hdr[g->hgot++] = b[i++];
		if (g->hgot < sizeof(g->hdr))
			continue;
		g->hgot = 0;
		{
			struct lm_hdr h;

			memcpy(&h, g->hdr, sizeof(h));
			g->left = h.len + (g->nframes++ >= lm_clear_frames(!g->back) ? LM_TAGLEN : 0);
			if (atomic_load(&p->cuts))
				continue;
			/* RESUMED is lost: not a byte of it goes on */
			if (g->back) {
				if (p->at == CUT_RESUMED && h.type == LM_RESUMED)
					return i >= sizeof(h) ? i - sizeof(h) : 0;
				continue;
			}
			if ((p->at == CUT_PUSH && h.type == LM_PAGES && (h.flags & LM_F_PUSH)) ||
			    (p->at == CUT_PRECOPY && h.type == LM_PAGES))
				return i;	/* mid-frame: the header goes, the rest not */
			if (p->at == CUT_SWITCH && h.type == LM_SWITCH)
				g->cut_after = true;
		}
	}
	return n;
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;
	static uint8_t buf[1 << 16];

	while (!atomic_load(&p->stop)) {
		struct pollfd pf[1 + 2 * MAXP];
		int n = 0;

		pf[n++] = (struct pollfd){ .fd = p->lfd, .events = POLLIN };
		for (int i = 0; i < p->nleg; i++)
			pf[n++] = (struct pollfd){ .fd = p->leg[i].from, .events = POLLIN };
		if (poll(pf, (nfds_t)n, 50) <= 0)
			continue;
		if ((pf[0].revents & POLLIN) && p->nleg + 2 <= 2 * MAXP) {
			int c = accept(p->lfd, NULL, NULL), d;

			/* the link is down: the reconnect fails in its handshake */
			if (c >= 0 && atomic_load(&p->cuts) && link_down(p)) {
				atomic_fetch_add(&p->refused, 1);
				close(c);
				continue;
			}
			d = c >= 0 ? dial(p->dest) : -1;

			if (c >= 0 && d >= 0) {
				p->leg[p->nleg++] = (struct leg){ .from = c, .to = d, .parse = true };
				p->leg[p->nleg++] = (struct leg){ .from = d, .to = c, .parse = true,
								  .back = true };
				continue;
			}
			if (c >= 0)
				close(c);
		}
		for (int i = 0; i < p->nleg; i++) {
			struct leg *g = &p->leg[i];
			ssize_t r, w;
			size_t pass;

			if (!(pf[1 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(g->from, buf, sizeof(buf));
			if (r <= 0) {
				/* one end closed: close the pair */
				int o = i + (i % 2 ? -1 : 1);

				shutdown(p->leg[o].from, SHUT_RDWR);
				shutdown(g->to, SHUT_WR);
				continue;
			}
			pass = g->parse ? scan(p, g, buf, (size_t)r) : (size_t)r;
			/*
			 * The cut comes whether or not what goes before it gets
			 * through: an end already gone (a failed write) must not
			 * let a RESUMED seen here pass uncut.
			 */
			w = pass ? write(g->to, buf, pass) : 0;
			(void)w;
			if (pass < (size_t)r || (g->cut_after && !g->left)) {
				g->cut_after = false;
				reset_all(p);
				break;
			}
		}
	}
	return NULL;
}

/*
 * The proxy's thread starts only after both ends are spawned: a fork while
 * another thread runs may copy a lock (the allocator's, a sanitizer's)
 * that thread holds, and the child would hang on it.
 */
static void proxy_listen(struct proxy *p, const char *dest, enum cut_at at, int down_ms,
			 char *addr, size_t alen)
{
	memset(p, 0, sizeof(*p));
	p->down_ms = down_ms;
	p->refuse_first = down_ms ? 2 : 0;
	snprintf(p->dest, sizeof(p->dest), "%s", dest);
	p->at = at;
	p->lfd = lmt_listener(addr, alen);
}

static void proxy_run(struct proxy *p)
{
	assert_int_equal(pthread_create(&p->tid, NULL, proxy_main, p), 0);
}

static void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->tid, NULL);
	for (int i = 0; i < p->nleg; i++)
		if (p->leg[i].from >= 0)
			close(p->leg[i].from);
	close(p->lfd);
}

/* How a cut goes, beyond where. */
struct cut_how {
	int down_ms;		/* the link stays down this long after the cut */
	int nslow;		/* strangers dripping bytes at the destination meanwhile */
	const char *timeout;	/* both ends' --timeout (default 3000) */
	const char *dst_rejoin;	/* the destination's --rejoin (default: --timeout) */
	const char *down_word;	/* and until the destination's log says this */
};

/* dest behind the proxy; both exit statuses */
static void cut_down(const char *mode, enum cut_at at, const struct cut_how *how, int *src_rc,
		     int *dst_rc)
{
	const char *tmo = how->timeout ? how->timeout : "3000";
	int nslow = how->nslow;
	pid_t slow = 0;
	double t_src;
	char daddr[64], paddr[64], lfd_s[16];
	int lfd = lmt_listener(daddr, sizeof(daddr));
	struct proxy p;
	pid_t d, s;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(DERR, sizeof(DERR), "rejoin-%s-%d-dest.err", mode, (int)at);
	snprintf(SERR, sizeof(SERR), "rejoin-%s-%d-src.err", mode, (int)at);
	snprintf(DERR, sizeof(DERR), "%s", lmt_path(DERR));
	snprintf(SERR, sizeof(SERR), "%s", lmt_path(SERR));
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode", mode,
				     "--verify", "--timeout", tmo, "--size", "4M",
				     how->dst_rejoin ? "--rejoin" : NULL, how->dst_rejoin, NULL };

		d = lmt_spawn(DERR, NULL, da);
	}
	close(lfd);
	if (nslow)
		slow = lmt_slowloris_start(daddr, nslow);
	proxy_listen(&p, daddr, at, how->down_ms, paddr, sizeof(paddr));
	p.down_file = DERR;
	p.down_word = how->down_word;
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", paddr, "--mode", mode,
				     "--verify", "--timeout", tmo, "--size", "4M", "--stale", "0.3",
				     "--bandwidth", "100M", "--precopy", "0.2", "--after", "0.3",
				     "--rounds", "2", NULL };

		s = lmt_spawn(SERR, NULL, sa);
	}
	proxy_run(&p);
	*src_rc = lmt_status(s);
	t_src = lmt_now();
	*dst_rc = lmt_status(d);
	if (slow)
		print_message("# %d slowloris cut off %d times; the destination exited %.2f s "
			      "after the source\n", nslow, lmt_slowloris_stop(slow),
			      lmt_now() - t_src);
	/* before any assert: a failed case must not leave its proxy running */
	proxy_stop(&p);
	print_message("# cut %d time(s), %d reconnect(s) refused; source %d, destination %d\n",
		      atomic_load(&p.cuts), atomic_load(&p.refused), *src_rc, *dst_rc);
	if (atomic_load(&p.cuts) != 1) {
		lmt_file_has(SERR, "@");	/* both logs: why the cut never came */
		lmt_file_has(DERR, "@");
	}
	assert_int_equal(atomic_load(&p.cuts), 1);
	assert_true(atomic_load(&p.refused) >= p.refuse_first);
}

static void cut(const char *mode, enum cut_at at, int *src_rc, int *dst_rc)
{
	cut_down(mode, at, &(struct cut_how){ 0 }, src_rc, dst_rc);
}

static void cut_mid_postcopy(const char *mode)
{
	int s, d;

	cut(mode, CUT_PUSH, &s, &d);
	assert_true(lmt_file_has(DERR, "the source rejoined"));
	assert_true(lmt_file_has(SERR, "rejoined the destination"));
	assert_int_equal(d, LM_EXIT_OK);
	assert_int_equal(s, LM_EXIT_OK);
}

static void test_cut_postcopy_minor(void **state)
{
	(void)state;
	cut_mid_postcopy("minor");
}

static void test_cut_postcopy_missing(void **state)
{
	(void)state;
	cut_mid_postcopy("postcopy-missing");
}

/*
 * The link stays down 1.5 s after the cut -- many retries long -- and the
 * first reconnects fail in their handshake: the source retries until its
 * deadline (--timeout 3000) and the destination serves from the new link.
 */
static void down_mid_postcopy(const char *mode, int nslow)
{
	int s, d;

	cut_down(mode, CUT_PUSH, &(struct cut_how){ .down_ms = 1500, .nslow = nslow }, &s, &d);
	assert_true(lmt_file_has(DERR, "the source rejoined"));
	assert_true(lmt_file_has(SERR, "rejoined the destination"));
	assert_int_equal(d, LM_EXIT_OK);
	assert_int_equal(s, LM_EXIT_OK);
}

static void test_down_postcopy_minor(void **state)
{
	(void)state;
	down_mid_postcopy("minor", 0);
}

static void test_down_postcopy_missing(void **state)
{
	(void)state;
	down_mid_postcopy("postcopy-missing", 0);
}

/* The same while strangers hold connections to the destination's door. */
static void test_down_slowloris_1(void **state)
{
	(void)state;
	down_mid_postcopy("minor", 1);
}

static void test_down_slowloris_50(void **state)
{
	(void)state;
	down_mid_postcopy("minor", 50);
}

/*
 * Cut right after SWITCH went through: the destination may or may not
 * have resumed, and RESUMED is lost either way.  One outcome whatever the
 * timing: both finish (it resumed; the source rejoined), or the source
 * takes the workload back only on the destination's signed word that it
 * did not resume.  Never both running (source 2 with destination 3).
 */
static void cut_at_switch(const char *mode)
{
	int s, d;

	cut(mode, CUT_SWITCH, &s, &d);
	lmt_file_has(SERR, "@");	/* both logs, for the record */
	lmt_file_has(DERR, "@");
	if (s == LM_EXIT_OK) {
		assert_int_equal(d, LM_EXIT_OK);
		assert_true(lmt_file_has(SERR, "rejoined the destination"));
	} else {
		assert_int_equal(s, LM_EXIT_ABORTED);
		assert_int_equal(d, LM_EXIT_PEER_LOST);
		assert_true(lmt_file_has(DERR, "did not resume"));
		assert_true(lmt_file_has(SERR, "did not resume"));
	}
	assert_false(lmt_file_has(DERR, "VERIFY"));
}

static void test_cut_at_switch_minor(void **state)
{
	(void)state;
	cut_at_switch("minor");
}

static void test_cut_at_switch_stopcopy(void **state)
{
	(void)state;
	cut_at_switch("stop-copy");
}

static void test_cut_at_switch_missing(void **state)
{
	(void)state;
	cut_at_switch("postcopy-missing");
}

/*
 * The destination resumed and its RESUMED is lost with the link: in every
 * mode the source stays paused, rejoins and finishes; never both running.
 * The cut is a reset, seen at once by both ends, so a long --timeout costs
 * nothing here -- and on a slow machine (a TCG guest) a short one let the
 * source give up waiting for RESUMED before the destination sent it: the
 * source asked, the destination had not resumed, the source took the
 * workload back, and the proxy never saw a RESUMED to cut.
 */
static void lost_resumed_how(const char *mode, const struct cut_how *how)
{
	int s, d;

	cut_down(mode, CUT_RESUMED, how, &s, &d);
	assert_int_equal(s, LM_EXIT_OK);
	assert_int_equal(d, LM_EXIT_OK);
	assert_true(lmt_file_has(SERR, "no RESUMED after SWITCH"));
	assert_true(lmt_file_has(SERR, "rejoined the destination"));
	assert_false(lmt_file_has(SERR, "resumes on the source"));
}

static void lost_resumed(const char *mode)
{
	lost_resumed_how(mode, &(struct cut_how){ .timeout = "10000" });
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
 * Stop-copy's destination holds every page once it resumes: a source that
 * comes back only after the destination stopped waiting for it (--rejoin
 * 1000, the link down until the destination's log says so) finds the
 * workload still running there, or finished, and learns the verdict.  The
 * destination must not stop a workload it has whole (exit 3) while the
 * source, paused, gives up too (exit 8): the workload on neither end.
 */
static void test_lost_resumed_stopcopy_late(void **state)
{
	(void)state;
	lost_resumed_how("stop-copy", &(struct cut_how){ .timeout = "10000",
			 .dst_rejoin = "1000", .down_word = "no rejoin within" });
	assert_true(lmt_file_has(DERR, "holds every page"));
}

static void test_cut_precopy(void **state)
{
	int s, d;

	(void)state;
	cut("minor", CUT_PRECOPY, &s, &d);
	assert_int_equal(s, LM_EXIT_ABORTED);
	assert_int_equal(d, LM_EXIT_PEER_LOST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cut_postcopy_minor),
		cmocka_unit_test(test_cut_postcopy_missing),
		cmocka_unit_test(test_down_postcopy_minor),
		cmocka_unit_test(test_down_postcopy_missing),
		cmocka_unit_test(test_down_slowloris_1),
		cmocka_unit_test(test_down_slowloris_50),
		cmocka_unit_test(test_cut_at_switch_minor),
		cmocka_unit_test(test_cut_at_switch_stopcopy),
		cmocka_unit_test(test_cut_at_switch_missing),
		cmocka_unit_test(test_lost_resumed_minor),
		cmocka_unit_test(test_lost_resumed_stopcopy),
		cmocka_unit_test(test_lost_resumed_missing),
		cmocka_unit_test(test_lost_resumed_stopcopy_late),
		cmocka_unit_test(test_cut_precopy),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

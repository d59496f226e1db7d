// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The live-migrate drills: a relay between source and destination that
 * misbehaves the way a network does -- stalls every connection, stalls the
 * urgent one alone, resets, drops and comes back later, carries one
 * direction only, lets fifty strangers hold the door, or rewrites a page on
 * the way -- once the postcopy is under way.  Each drill is a row of the
 * table of adversaries: what both ends must say, and that they agree.
 *
 * One thread relays every connection (poll, non-blocking reads, no thread
 * per leg), reading frame headers to know where it is: the first one or two
 * frames each way are the handshake (lm_clear_frames), every later one
 * carries a tag.
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
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define DERR lmt_path("drill-dest.err")
#define SERR lmt_path("drill-src.err")
#define MAXC 16			/* connections: main, urgent, rejoins */

enum drill { STALL_ALL, STALL_URGENT, RESET, DROP_RETURN, ONE_WAY, SLOWLORIS, MITM,
	FORGED_REFUSE };

struct leg {
	int from, to;
	uint8_t hdr[sizeof(struct lm_hdr)];
	size_t hgot;
	uint64_t left;		/* bytes of the current frame still to come */
	unsigned int nframes;
	bool push;		/* the current frame is a postcopy push */
	bool resp;		/* ... an answer with a page on the urgent connection */
	bool held;		/* stalled: never read again */
};

struct relay {
	int lfd;
	char dest[64];
	enum drill drill;
	bool fired;		/* the drill happened */
	uint64_t down_until;	/* DROP_RETURN: refuse connections until then */
	int forge;		/* FORGED_REFUSE: connections still to answer so */
	struct leg leg[2 * MAXC];	/* 2k: source to destination, 2k+1 back */
	int nconn;
	atomic_int stop;
	pthread_t tid;
};

static void close_all(struct relay *r, bool rst)
{
	struct linger l = { 1, 0 };

	for (int i = 0; i < 2 * r->nconn; i += 2) {
		if (r->leg[i].from < 0)
			continue;
		if (rst) {
			setsockopt(r->leg[i].from, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
			setsockopt(r->leg[i].to, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		}
		close(r->leg[i].from);
		close(r->leg[i].to);
		r->leg[i].from = r->leg[i].to = r->leg[i + 1].from = r->leg[i + 1].to = -1;
	}
}

/* The drill, at its moment: the first postcopy push on the main connection,
 * or (STALL_URGENT) the first answer on the urgent one. */
static void fire(struct relay *r)
{
	r->fired = true;
	switch (r->drill) {
	case STALL_ALL:
		for (int i = 0; i < 2 * r->nconn; i++)
			r->leg[i].held = true;
		break;
	case STALL_URGENT:
		r->leg[2].held = r->leg[3].held = true;
		break;
	case RESET:
	case SLOWLORIS:
		close_all(r, true);
		break;
	case FORGED_REFUSE:
		close_all(r, true);
		r->forge = 3;
		break;
	case DROP_RETURN:
		close_all(r, false);
		r->down_until = lm_now_ns() + 1500000000ull;
		break;
	case ONE_WAY:
		for (int i = 1; i < 2 * r->nconn; i += 2)
			r->leg[i].held = true;
		break;
	case MITM:
		break;
	}
}

/*
 * Walk n bytes of leg i frame by frame; how many go on.  At the drill's
 * moment -- the header of the first postcopy push on the main connection,
 * or (STALL_URGENT) the first answer carrying a page on the urgent one --
 * *now is set and the bytes up to there go on.
 */
static size_t scan(struct relay *r, int i, uint8_t *b, size_t n, bool *now)
{
	struct leg *g = &r->leg[i];

	for (size_t k = 0; k < n; ) {
		struct lm_hdr h;

		if (g->left) {
			size_t take = n - k < g->left ? n - k : (size_t)g->left;

			/* MITM: the push's last page byte, just before its tag */
			if (r->drill == MITM && g->push && !r->fired && g->left > LM_TAGLEN &&
			    g->left - LM_TAGLEN <= take) {
				b[k + g->left - LM_TAGLEN - 1] ^= 0x40;
				r->fired = true;
			}
			g->left -= take;
			k += take;
			continue;
		}
		g->hdr[g->hgot++] = b[k++];
		if (g->hgot < sizeof(g->hdr))
			continue;
		g->hgot = 0;
		memcpy(&h, g->hdr, sizeof(h));
		g->left = h.len + (g->nframes++ >= lm_clear_frames(i % 2 == 0) ? LM_TAGLEN : 0);
		g->push = i == 0 && h.type == LM_PAGES && (h.flags & LM_F_PUSH);
		/* STALL_URGENT: an answer with data, which nothing else brings
		 * (its length says so: the payload is encrypted) */
		g->resp = r->drill == STALL_URGENT && i == 2 && h.type == LM_RESP &&
			  h.len > sizeof(struct lm_resp);
		if (g->resp && !r->fired) {
			*now = true;
			return k;
		}
		if (r->fired || r->drill == MITM || r->drill == STALL_URGENT)
			continue;
		if (g->push) {
			*now = true;
			return k;
		}
	}
	return n;
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

static void accept_one(struct relay *r)
{
	int c = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK), d;

	if (c < 0)
		return;
	if (r->forge > 0) {
		forge_refuse(r, c);
		return;
	}
	if (r->nconn >= MAXC || lm_now_ns() < r->down_until) {
		close(c);
		return;
	}
	d = lm_connect(r->dest);
	if (d < 0) {
		close(c);
		return;
	}
	fcntl(d, F_SETFL, fcntl(d, F_GETFL) | O_NONBLOCK);
	r->leg[2 * r->nconn] = (struct leg){ .from = c, .to = d };
	r->leg[2 * r->nconn + 1] = (struct leg){ .from = d, .to = c };
	r->nconn++;
}

/* Write all of it: the far side reads (a small wait now and then is fine). */
static void put(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (poll(&p, 1, 1000) <= 0)
				return;
			continue;
		}
		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

static void *relay_main(void *arg)
{
	static uint8_t buf[1 << 16];
	struct relay *r = arg;

	while (!atomic_load(&r->stop)) {
		struct pollfd pf[1 + 2 * MAXC];
		int idx[2 * MAXC], n = 1;

		pf[0] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
		for (int i = 0; i < 2 * r->nconn; i++) {
			if (r->leg[i].from < 0 || r->leg[i].held)
				continue;
			idx[n - 1] = i;
			pf[n++] = (struct pollfd){ .fd = r->leg[i].from, .events = POLLIN };
		}
		if (poll(pf, (nfds_t)n, 50) <= 0)
			continue;
		if (pf[0].revents & POLLIN)
			accept_one(r);
		for (int k = 1; k < n; k++) {
			int i = idx[k - 1];
			struct leg *g = &r->leg[i];
			bool now = false;
			ssize_t got;
			size_t pass;

			if (!pf[k].revents || g->from < 0 || g->held)
				continue;
			got = read(g->from, buf, sizeof(buf));
			if (got <= 0) {
				if (got < 0 && errno == EAGAIN)
					continue;
				shutdown(g->to, SHUT_WR);
				g->held = true;	/* read no more: its end is gone */
				continue;
			}
			pass = scan(r, i, buf, (size_t)got, &now);
			/* a stall lets what was read go on; a cut does not */
			if (now && (r->drill == STALL_ALL || r->drill == ONE_WAY))
				pass = (size_t)got;
			put(g->to, buf, pass);
			if (now) {
				fire(r);
				break;	/* the legs changed */
			}
		}
	}
	close_all(r, false);
	return NULL;
}

/* A drill run: its exit statuses; both logs printed for the record. */
static void drill(enum drill what, const char *mode, int *s_rc, int *d_rc)
{
	char daddr[64], raddr[64], lfd_s[16];
	int lfd = lmt_listener(daddr, sizeof(daddr));
	struct relay r = { .drill = what };
	pid_t d, s, slow = 0;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(r.dest, sizeof(r.dest), "%s", daddr);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode", mode,
				     "--verify", "--timeout", "3000", "--rejoin", "8000", "--size", "4M",
				     NULL };

		d = lmt_spawn(DERR, NULL, da);
	}
	close(lfd);
	if (what == SLOWLORIS)
		slow = lmt_slowloris_start(daddr, 50);
	r.lfd = lmt_listener(raddr, sizeof(raddr));
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", raddr, "--mode", mode,
				     "--verify", "--timeout", "3000", "--rejoin", "8000", "--size", "4M",
				     "--stale", "0.5", "--bandwidth", "100M", "--precopy", "0.2",
				     "--after", "0.3", "--rounds", "2", NULL };

		s = lmt_spawn(SERR, NULL, sa);
	}
	/* the relay's thread only after both forks (a fork copies held locks) */
	assert_int_equal(pthread_create(&r.tid, NULL, relay_main, &r), 0);
	*s_rc = lmt_status(s);
	*d_rc = lmt_status(d);
	atomic_store(&r.stop, 1);
	pthread_join(r.tid, NULL);
	close(r.lfd);
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

/* The link comes back (or another one does): both finish, the same verdict. */
static void recovers(enum drill what, const char *mode)
{
	int s, d;

	drill(what, mode, &s, &d);
	if (s || d) {
		lmt_file_has(SERR, "@");	/* both logs, for the record */
		lmt_file_has(DERR, "@");
	}
	assert_int_equal(s, LM_EXIT_OK);
	assert_int_equal(d, LM_EXIT_OK);
	assert_true(lmt_file_has(SERR, "rejoined the destination") ||
		    lmt_file_has(SERR, "verdict came with"));
	assert_true(lmt_file_has(SERR, "result      ok (exit 0)"));
	assert_true(lmt_file_has(DERR, "result      ok (exit 0)"));
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
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The door drills (issue 36, item 3): a crowd of a thousand strangers at the
 * destination's door while the real source migrates -- once as a flood (each
 * stranger connects, hangs up with a reset and dials again, as fast as the
 * loopback takes it), once as a slowloris crowd (half silent, half dripping
 * an AUTH frame a byte per 100 ms that never ends), once as a slowloris crowd
 * larger than the door's table.  The source's AUTH arrives 20 ms after its
 * CHALLENGE went out (a hop holds it), as from a source some way off: a door
 * that turns its table over faster drops it.  The source must finish
 * with every page verified, and the destination must stay inside the bounds
 * its man page states: at most LM_DOOR_SLOTS handshakes, so that many fds
 * beyond a quiet run's, and no memory beyond a quiet run's plus the slack
 * below (the handshake table is allocated whole when the door opens).
 *
 * The switch-over's downtime is printed beside a quiet run's, for the record:
 * on a loaded machine it is not asserted.
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
#include <dirent.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define DERR lmt_path("door-dest.err")
#define SERR lmt_path("door-src.err")
#define DOUT lmt_path("door-dest.out")	/* its report: the downtime */
#define CROWD 1000
/* more than the door's slots: it must drop some, and the right ones */
#define CROWD_OVER 1536
_Static_assert(CROWD_OVER > LM_DOOR_SLOTS && CROWD_OVER > CROWD, "a crowd over the slots");
/* the newcomer's fd, accepted before the oldest's is closed, and fds of the
 * migration's own that a quiet run's 5 ms samples may miss */
#define FD_SLACK 4
/* what a crowd may add to the destination's peak RSS beyond the quiet run's:
 * the handshake table (1024 slots of 528 bytes on x86_64, its pages touched
 * as slots are first used) and allocator noise; nothing grows with the crowd */
#define RSS_SLACK_KB 1024

enum crowd { QUIET, FLOOD, SLOWLORIS, SLOWLORIS_OVER };

static const char *const crowd_name[] = { "quiet", "flood", "slowloris",
	"slowloris over the slots" };

/* ---- the crowd: a child with CROWD sockets in one poll loop ------------ */

static volatile sig_atomic_t crowd_quit;

static void crowd_stop(int sig)
{
	(void)sig;
	crowd_quit = 1;
}

/* A reset, not a FIN: no TIME_WAIT, so the flood never runs out of ports. */
static void hang_up(int fd)
{
	struct linger l = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

struct stranger {
	int fd;
	bool up;		/* connected */
	size_t at;		/* slowloris: bytes of AUTH sent */
};

/* One stranger's turn; false: it was cut off (or hung up) and dials again. */
static bool stranger_turn(struct stranger *s, short revents, enum crowd kind, int k,
			  const uint8_t *frame, size_t len, bool drip)
{
	uint8_t junk[256];
	int err = 0;
	socklen_t el = sizeof(err);

	if (!s->up) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return true;
		getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err)
			return false;
		s->up = true;
		return kind != FLOOD;	/* the flood hangs up at once */
	}
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		ssize_t r = recv(s->fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (r == 0 || (r < 0 && errno != EAGAIN))
			return false;	/* the door hung up */
	}
	/* odd strangers are silent; even ones drip, never the last byte */
	if (drip && k % 2 == 0) {
		if (send(s->fd, frame + s->at, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
		    errno != EAGAIN)
			return false;
		s->at = (s->at + 1) % (len - 1);
	}
	return true;
}

/* A stranger's poll result, counted: connected, or cut off (and dialing again). */
static void crowd_step(struct stranger *s, struct pollfd *pf, enum crowd kind, int k,
		       const uint8_t *frame, size_t len, bool drip,
		       unsigned long long *connects, unsigned long long *cuts)
{
	bool was_up = s->up, go_on;

	if (!pf->revents && !(drip && was_up))
		return;
	go_on = stranger_turn(s, pf->revents, kind, k, frame, len, drip);
	*connects += !was_up && s->up;
	if (go_on) {
		pf->events = s->up ? POLLIN : POLLOUT;
		return;
	}
	*cuts += s->up && kind != FLOOD;
	hang_up(s->fd);
	s->fd = pf->fd = -1;
}

static void crowd_child(const char *addr, enum crowd kind, int n, const char *countfile)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)atoi(strchr(addr, ':') + 1)) };
	static struct stranger st[CROWD_OVER];
	static struct pollfd pf[CROWD_OVER];
	struct lm_auth a = { .kind = LM_AUTH_MAIN };
	uint8_t frame[256];
	size_t len = lm_frame_encode(frame, sizeof(frame), LM_AUTH, 0, &a, NULL, 0);
	unsigned long long connects = 0, cuts = 0, dial_err = 0;
	double next_drip = lmt_now();
	FILE *f;

	signal(SIGTERM, crowd_stop);
	for (int k = 0; k < n; k++)
		st[k].fd = -1;
	while (!crowd_quit) {
		bool drip = lmt_now() >= next_drip;

		if (drip)
			next_drip = lmt_now() + 0.1;
		for (int k = 0; k < n; k++) {
			if (st[k].fd < 0) {
				st[k] = (struct stranger){ .fd = lmt_dial(&sa) };
				if (st[k].fd < 0 && !dial_err++)
					fprintf(stderr, "# crowd: dial: %s\n", strerror(errno));
				pf[k] = (struct pollfd){ .fd = st[k].fd, .events = POLLOUT };
				continue;
			}
			crowd_step(&st[k], &pf[k], kind, k, frame, len, drip, &connects, &cuts);
		}
		if (poll(pf, (nfds_t)n, 10) < 0 && errno != EINTR)
			break;
	}
	f = fopen(countfile, "w");
	if (!f)
		fprintf(stderr, "# crowd: cannot write %s: %s\n", countfile, strerror(errno));
	if (f) {
		fprintf(f, "%llu %llu\n", connects, cuts);
		fclose(f);
	}
	_exit(0);
}

/* ---- the destination's fds and memory, sampled through the run --------- */

struct sampler {
	pid_t pid;
	int max_fds;
	long max_rss_kb, hwm_kb;
	atomic_int stop;
	pthread_t tid;
};

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* VmRSS and VmHWM of pid, in KiB; false once it is gone */
static bool status_kb(pid_t pid, long *rss, long *hwm)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", rss);
		sscanf(line, "VmHWM: %ld", hwm);
	}
	fclose(f);
	return true;
}

static void *sample(void *p)
{
	struct sampler *s = p;

	while (!atomic_load(&s->stop)) {
		long rss = 0, hwm = 0;
		int n = count_fds(s->pid);

		/* a zombie has no fds and no memory: keep what was seen alive */
		if (n > s->max_fds)
			s->max_fds = n;
		if (status_kb(s->pid, &rss, &hwm) && rss > 0) {
			if (rss > s->max_rss_kb)
				s->max_rss_kb = rss;
			if (hwm > s->hwm_kb)
				s->hwm_kb = hwm;
		}
		usleep(5000);
	}
	return NULL;
}

/* ---- the source's hop: its first words arrive HOP_MS late ---------------- */

/*
 * A source some way off (or busy) answers the CHALLENGE a while after it
 * went out; meanwhile the crowd keeps coming.  The hop relays each of the
 * source's connections and holds the first bytes it sends (its AUTH) for
 * HOP_MS: a door whose table turns over faster than that drops the source.
 */
#define HOP_MS 20
#define HOP_CONNS 4		/* main, urgent, and room */

struct hop {
	int lfd;
	struct sockaddr_in dest;
	int fd[HOP_CONNS][2];	/* [k][0] the source's side, [k][1] the destination's */
	bool held[HOP_CONNS];	/* the first bytes from the source went late */
	int n;
	atomic_int stop;
	pthread_t tid;
};

static void hop_accept(struct hop *h)
{
	int s = accept(h->lfd, NULL, NULL), d;

	if (s < 0)
		return;
	d = socket(AF_INET, SOCK_STREAM, 0);
	if (h->n == HOP_CONNS || d < 0 ||
	    connect(d, (const struct sockaddr *)&h->dest, sizeof(h->dest))) {
		close(s);
		if (d >= 0)
			close(d);
		return;
	}
	h->fd[h->n][0] = s;
	h->fd[h->n][1] = d;
	h->held[h->n++] = false;
}

/* Bytes from one side to the other; false at the end of that connection. */
static bool hop_pass(struct hop *h, int k, int side)
{
	char buf[65536];
	ssize_t r = read(h->fd[k][side], buf, sizeof(buf));

	if (r <= 0)
		return false;
	if (side == 0 && !h->held[k]) {
		h->held[k] = true;
		usleep(HOP_MS * 1000);
	}
	return send(h->fd[k][!side], buf, (size_t)r, MSG_NOSIGNAL) == r;
}

static void *hop_main(void *p)
{
	struct hop *h = p;

	while (!atomic_load(&h->stop)) {
		struct pollfd pf[1 + 2 * HOP_CONNS] = { { .fd = h->lfd, .events = POLLIN } };

		for (int k = 0; k < h->n; k++)
			for (int side = 0; side < 2; side++)
				pf[1 + 2 * k + side] = (struct pollfd){ .fd = h->fd[k][side],
									.events = POLLIN };
		if (poll(pf, (nfds_t)(1 + 2 * h->n), 20) <= 0)
			continue;
		if (pf[0].revents)
			hop_accept(h);
		for (int i = 1; i < 1 + 2 * h->n; i++) {
			int k = (i - 1) / 2;

			if (!pf[i].revents || h->fd[k][0] < 0 || hop_pass(h, k, (i - 1) % 2))
				continue;
			close(h->fd[k][0]);
			close(h->fd[k][1]);
			h->fd[k][0] = h->fd[k][1] = -1;
		}
	}
	for (int k = 0; k < h->n; k++)
		for (int side = 0; side < 2; side++)
			if (h->fd[k][side] >= 0)
				close(h->fd[k][side]);
	return NULL;
}

/* ---- one run: destination, crowd, source --------------------------------- */

struct run {
	int s, d;
	double downtime_ms, rate;	/* rate: the crowd's connects per second */
	unsigned long long connects, cuts;
	struct sampler smp;
};

static double downtime_of(const char *out)
{
	char line[256];
	double ms = -1;
	FILE *f = fopen(out, "r");

	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "downtime %lf", &ms);
	if (f)
		fclose(f);
	return ms;
}

static void crowd_end(pid_t c, double t0, struct run *r)
{
	FILE *f;

	kill(c, SIGTERM);
	assert_int_equal(lmt_status(c), 0);
	/* missing when a failed child removed the test's directory on its way out:
	 * then the exits say what failed, and the count is 0 */
	f = fopen(lmt_path("crowd.count"), "r");
	if (f && fscanf(f, "%llu %llu", &r->connects, &r->cuts) != 2)
		r->connects = r->cuts = 0;
	if (f)
		fclose(f);
	r->rate = (double)r->connects / (lmt_now() - t0);
}

static void door_run(enum crowd kind, struct run *r)
{
	char daddr[64], haddr[64], lfd_s[16];
	int lfd = lmt_listener(daddr, sizeof(daddr));
	struct hop hop = { .lfd = lmt_listener(haddr, sizeof(haddr)),
			   .dest = { .sin_family = AF_INET,
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				     .sin_port = htons((uint16_t)atoi(strchr(daddr, ':') + 1)) } };
	pid_t d, s, c = 0;
	double t0 = lmt_now();

	memset(r, 0, sizeof(*r));
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode",
				     "minor", "--verify", "--timeout", "3000", "--size", "4M", NULL };

		d = lmt_spawn(DERR, DOUT, da);
	}
	close(lfd);
	if (kind != QUIET) {
		c = lmt_fork();
		if (!c)
			crowd_child(daddr, kind, kind == SLOWLORIS_OVER ? CROWD_OVER : CROWD,
				    lmt_path("crowd.count"));
		usleep(500000);	/* the crowd at the door before the source knocks */
	}
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", haddr, "--mode", "minor",
				     "--verify", "--timeout", "3000", "--size", "4M", "--precopy",
				     "0.2", "--after", "0.3", NULL };

		s = lmt_spawn(SERR, NULL, sa);
	}
	/* the threads only after every fork (a fork copies held locks) */
	r->smp.pid = d;
	assert_int_equal(pthread_create(&r->smp.tid, NULL, sample, &r->smp), 0);
	assert_int_equal(pthread_create(&hop.tid, NULL, hop_main, &hop), 0);
	/* bounded: a source shut out leaves the destination waiting */
	r->s = lmt_status_within(s, 30);
	atomic_store(&hop.stop, 1);
	pthread_join(hop.tid, NULL);
	close(hop.lfd);
	/* counted while the source ran: the destination's exit cuts them all */
	if (c)
		crowd_end(c, t0, r);
	r->d = lmt_status_within(d, 10);
	atomic_store(&r->smp.stop, 1);
	pthread_join(r->smp.tid, NULL);
	r->downtime_ms = downtime_of(DOUT);
	print_message("# %s: source %d, destination %d, downtime %.3f ms; destination: "
		      "at most %d fds, VmRSS %ld KiB, VmHWM %ld KiB; crowd: %llu connects "
		      "(%.0f/s), %llu cut off\n", crowd_name[kind], r->s, r->d, r->downtime_ms, r->smp.max_fds,
		      r->smp.max_rss_kb, r->smp.hwm_kb, r->connects, r->rate, r->cuts);
	if (r->s || r->d) {
		lmt_file_has(SERR, "@");	/* both logs, for the record */
		lmt_file_has(DERR, "@");
	}
}

static struct run quiet;

static int quiet_setup(void **state)
{
	struct rlimit rl;

	(void)state;
	/* the crowd's thousand sockets live in this process's child */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max < CROWD_OVER + 64) {
		print_message("# skip: RLIMIT_NOFILE's hard limit is below %d\n", CROWD_OVER + 64);
		return -1;
	}
	rl.rlim_cur = rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	door_run(QUIET, &quiet);
	assert_int_equal(quiet.s, LM_EXIT_OK);
	assert_int_equal(quiet.d, LM_EXIT_OK);
	return 0;
}

/* The source in, every page checked; the destination inside its bounds. */
static void holds(enum crowd kind)
{
	struct run r;

	door_run(kind, &r);
	assert_int_equal(r.s, LM_EXIT_OK);
	assert_int_equal(r.d, LM_EXIT_OK);
	assert_true(lmt_file_has(SERR, "result      ok (exit 0)"));
	assert_true(lmt_file_has(DERR, "result      ok (exit 0)"));
	assert_true(r.connects >= CROWD);	/* the crowd did come */
	print_message("# downtime: quiet %.3f ms, with the crowd %.3f ms\n", quiet.downtime_ms,
		      r.downtime_ms);
	assert_true(r.smp.max_fds <= quiet.smp.max_fds + LM_DOOR_SLOTS + FD_SLACK);
	assert_true(r.smp.hwm_kb <= quiet.smp.hwm_kb + RSS_SLACK_KB);
}

static void test_flood(void **state)
{
	(void)state;
	holds(FLOOD);
}

static void test_slowloris_crowd(void **state)
{
	(void)state;
	holds(SLOWLORIS);
}

/*
 * More strangers than slots, every one holding on: the door drops the
 * oldest for each newcomer (and says so), never the source, whose
 * handshake is a round trip; its fds stay at the table's size.
 */
static void test_slowloris_over_slots(void **state)
{
	(void)state;
	holds(SLOWLORIS_OVER);
	assert_true(lmt_file_has(DERR, "oldest of a full table"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flood),
		cmocka_unit_test(test_slowloris_crowd),
		cmocka_unit_test(test_slowloris_over_slots),
	};

	return cmocka_run_group_tests(tests, quiet_setup, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm-relay, the link lm-qemu-anchor puts between two QEMUs: every byte
 * arrives in order both ways, no faster than --bandwidth and no sooner
 * than --rtt/2, the end of each direction is passed on, and bad options
 * are refused by name.  The upper time bounds are loose: the machine is
 * shared; the lower ones are what the relay promises.
 *
 *   lm-test-relay PATH-TO-lm-relay
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#include "test-util.h"

static const char *relay_path;

struct link {
	pid_t pid;
	int client, server;	/* our two ends: client -> relay -> server */
};

/* The relay's stdout line names its port; stderr goes to a file. */
static int relay_port(int fd)
{
	char buf[256] = { 0 }, *colon;
	size_t n = 0;

	while (n < sizeof(buf) - 1 && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
		n++;
	colon = strrchr(buf, ':');
	assert_non_null(strstr(buf, "listening on"));
	assert_non_null(colon);
	return atoi(colon + 1);
}

static pid_t spawn(const char *const *extra, int out_fd)
{
	char *argv[32] = { (char *)relay_path };
	const char *err = lmt_path("relay.err");	/* made here: a child's would be its own */
	int n = 1;
	pid_t pid;

	while (*extra && n < 31)
		argv[n++] = (char *)*extra++;
	pid = lmt_fork();
	if (pid)
		return pid;
	dup2(out_fd, 1);
	if (!freopen(err, "w", stderr))
		_exit(100);
	execv(relay_path, argv);
	_exit(127);
}

static void link_open(struct link *l, const char *bw, const char *rtt)
{
	char to[64], port[16];
	int lfd = lmt_listener(to, sizeof(to)), p[2];
	const char *args[] = { "--listen", "127.0.0.1:0", "--to", to, "--rtt", rtt,
			       bw ? "--bandwidth" : NULL, bw, NULL };
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;

	assert_int_equal(pipe(p), 0);
	l->pid = spawn(args, p[1]);
	close(p[1]);
	snprintf(port, sizeof(port), "%d", relay_port(p[0]));
	close(p[0]);
	sa.sin_port = htons((uint16_t)atoi(port));
	l->client = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(l->client, (struct sockaddr *)&sa, sizeof(sa)), 0);
	l->server = accept(lfd, NULL, NULL);
	assert_true(l->server >= 0);
	close(lfd);
	setsockopt(l->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(l->server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Byte i of a stream: a pattern in which a lost, doubled or moved block shows. */
static uint8_t pattern(uint64_t i, unsigned int seed)
{
	uint64_t x = (i >> 3) * 0x9e3779b97f4a7c15ull + seed;

	return (uint8_t)(x >> (8 * (i & 7)));
}

struct stream {
	int fd;
	size_t len;
	unsigned int seed;
	size_t bad;	/* bytes received that differ from the pattern */
	size_t got;
	double done;	/* when the last byte (or EOF) came */
};

static void *sink(void *arg)
{
	struct stream *s = arg;
	static __thread uint8_t buf[65536];
	ssize_t n;

	while ((n = read(s->fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			s->bad += buf[i] != pattern(s->got + (size_t)i, s->seed);
		s->got += (size_t)n;
	}
	s->done = lmt_now();
	return NULL;
}

static void *source(void *arg)
{
	struct stream *s = arg;
	static __thread uint8_t buf[65536];

	for (size_t off = 0; off < s->len;) {
		size_t n = s->len - off < sizeof(buf) ? s->len - off : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i, s->seed);
		if (write(s->fd, buf, n) != (ssize_t)n) {
			s->bad = 1;	/* a short write: the receiver shows the gap */
			break;
		}
		off += n;
	}
	shutdown(s->fd, SHUT_WR);
	return NULL;
}

/*
 * 8 MiB forward and 2 MiB back at once through 160 Mbit/s: each intact,
 * each end passed on, the forward one no sooner than the link allows
 * (less the bucket's 1 ms), and the relay then exits 0.
 */
static void test_both_ways_at_the_rate(void **state)
{
	struct link l;
	struct stream fw_tx, fw_rx, bw_tx, bw_rx;
	pthread_t t[4];
	double t0, ideal = 8.0 * (8 << 20) / 160e6;

	(void)state;
	link_open(&l, "160M", "0");
	fw_tx = (struct stream){ .fd = l.client, .len = 8 << 20, .seed = 1 };
	fw_rx = (struct stream){ .fd = l.server, .seed = 1 };
	bw_tx = (struct stream){ .fd = l.server, .len = 2 << 20, .seed = 2 };
	bw_rx = (struct stream){ .fd = l.client, .seed = 2 };
	t0 = lmt_now();
	pthread_create(&t[0], NULL, sink, &fw_rx);
	pthread_create(&t[1], NULL, sink, &bw_rx);
	pthread_create(&t[2], NULL, source, &fw_tx);
	pthread_create(&t[3], NULL, source, &bw_tx);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	print_message("# 8 MiB at 160 Mbit/s: %.3f s (ideal %.3f)\n", fw_rx.done - t0, ideal);
	assert_int_equal(fw_rx.got, 8 << 20);
	assert_int_equal(bw_rx.got, 2 << 20);
	assert_int_equal(fw_rx.bad, 0);
	assert_int_equal(bw_rx.bad, 0);
	assert_true(fw_rx.done - t0 >= ideal * 0.95 - 0.001);
	assert_true(fw_rx.done - t0 <= ideal * 5 + 5);
	close(l.client);
	close(l.server);
	assert_true(lmt_expect(l.pid, 0));
	assert_true(lmt_file_has(lmt_path("relay.err"), "forward 8388608 bytes"));
}

/* One byte there and back through a 40 ms RTT takes at least 40 ms. */
static void test_round_trip_delay(void **state)
{
	struct link l;
	char c = 'x';
	double t0, rtt;

	(void)state;
	link_open(&l, NULL, "40ms");
	for (int i = 0; i < 3; i++) {
		t0 = lmt_now();
		assert_int_equal(write(l.client, &c, 1), 1);
		assert_int_equal(read(l.server, &c, 1), 1);
		assert_int_equal(write(l.server, &c, 1), 1);
		assert_int_equal(read(l.client, &c, 1), 1);
		rtt = lmt_now() - t0;
		print_message("# round trip %.2f ms\n", rtt * 1e3);
		assert_true(rtt >= 0.040);
		assert_true(rtt <= 2.0);
	}
	close(l.client);
	close(l.server);
	assert_true(lmt_expect(l.pid, 0));
}

static void refused(const char *const *args, const char *word)
{
	int devnull = open("/dev/null", O_WRONLY);
	pid_t pid = spawn(args, devnull);

	close(devnull);
	assert_true(lmt_expect(pid, 1));
	assert_true(lmt_file_has(lmt_path("relay.err"), word));
}

static void test_bad_input(void **state)
{
	char closed[64];
	int lfd = lmt_listener(closed, sizeof(closed));

	(void)state;
	close(lfd);	/* nobody listens there now */
	refused((const char *[]){ "--listen", "127.0.0.1:0", NULL }, "--to");
	refused((const char *[]){ "--listen", "127.0.0.1:0", "--to", closed,
				  "--bandwidth", "0", NULL }, "--bandwidth must be in");
	refused((const char *[]){ "--listen", "127.0.0.1:0", "--to", closed,
				  "--bandwidth", "nan", NULL }, "--bandwidth needs a number");
	refused((const char *[]){ "--listen", "127.0.0.1:0", "--to", closed,
				  "--rtt", "5parsecs", NULL }, "--rtt needs a time");
	refused((const char *[]){ "--listen", "127.0.0.1:0", "--to", closed,
				  "--queue", "1", NULL }, "--queue must be in");
	refused((const char *[]){ "--listen", "nowhere", "--to", closed, NULL },
		"not HOST:PORT");
	refused((const char *[]){ "--listen", "127.0.0.1:0", "--to", closed,
				  "--connect-timeout", "11min", NULL }, "--connect-timeout needs a time");
	refused((const char *[]){ "--listen", "127.0.0.1:0", "--to", closed,
				  "--connect-timeout", "601s", NULL }, "--connect-timeout must be at most");
}

/* A relay started with args, and a connection it accepted: our end in *fd. */
static pid_t relay_accepted(const char *const *args, int *fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = spawn(args, p[1]);
	close(p[1]);
	sa.sin_port = htons((uint16_t)relay_port(p[0]));
	close(p[0]);
	*fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(*fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return pid;
}

/* The far end is gone: one message naming it, exit 1, after the accept. */
static void test_far_end_gone(void **state)
{
	char closed[64];
	int lfd = lmt_listener(closed, sizeof(closed)), fd;
	const char *args[] = { "--listen", "127.0.0.1:0", "--to", closed, NULL };
	pid_t pid;

	(void)state;
	close(lfd);
	pid = relay_accepted(args, &fd);
	assert_true(lmt_expect(pid, 1));
	assert_true(lmt_file_has(lmt_path("relay.err"), "cannot connect to"));
	close(fd);
}

/*
 * The far end drops SYNs (a listener whose one-deep backlog is full: the
 * kernel drops the next SYN and the connect retries it for over a minute,
 * as toward a host behind a blackhole): the relay gives up at
 * --connect-timeout, says so, exit 1.  Before, connect() blocked.
 */
static void test_far_end_silent(void **state)
{
	char silent[64];
	int lfd = lmt_listener(silent, sizeof(silent)), fd, filler, rc;
	const char *args[] = { "--listen", "127.0.0.1:0", "--to", silent,
			       "--connect-timeout", "500ms", NULL };
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)atoi(strrchr(silent, ':') + 1)) };
	double t0;
	pid_t pid;

	(void)state;
	assert_int_equal(listen(lfd, 0), 0);
	filler = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(filler, (struct sockaddr *)&sa, sizeof(sa)), 0);
	pid = relay_accepted(args, &fd);
	t0 = lmt_now();
	rc = lmt_status_within(pid, 10);
	print_message("# exit %d, %.2f s after the accept\n", rc, lmt_now() - t0);
	assert_int_equal(rc, 1);
	assert_true(lmt_now() - t0 >= 0.45);
	assert_true(lmt_file_has(lmt_path("relay.err"), "no answer within 500 ms"));
	close(fd);
	close(filler);
	close(lfd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_both_ways_at_the_rate),
		cmocka_unit_test(test_round_trip_delay),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_far_end_gone),
		cmocka_unit_test(test_far_end_silent),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: lm-test-relay PATH-TO-lm-relay\n");
		return 1;
	}
	relay_path = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

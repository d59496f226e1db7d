// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm-relay: one TCP connection through an emulated link, outside the
 * programs that use it.
 *
 *   lm-relay --listen H:P --to H:P [--bandwidth R] [--rtt T] [--queue N]
 *            [--sockbuf N] [--connect-timeout T] [-q]
 *
 * lm shapes its own link (lm_link in proto.c), but QEMU's max-bandwidth is
 * lifted for the final stop-and-copy, so a QEMU migration shaped by QEMU
 * itself looks faster than the same link allows.  lm-relay shapes it from
 * outside: each direction is paced at --bandwidth by a token bucket (a
 * chunk leaves when the link is free and takes len/rate of it; idle time
 * earns at most --burst of credit, so a relay that waited for a busy CPU
 * catches up instead of losing link time, while a long-idle link gives no
 * more than that burst) and each chunk is held back another --rtt/2
 * before it is written on, the way lm's receiver holds frames.  Bytes read and not yet written are bounded by the queue, so
 * the relay adds no buffer a real link would not have.
 *
 * It accepts one connection, relays both directions until both have
 * ended, prints what it moved on stderr and exits 0; 1 usage or setup
 * (--to not reached within --connect-timeout, name lookup included),
 * 2 a peer reset the connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* Largest single read: 0.5 ms of a 1 Gbit/s link, so pacing stays fine. */
#define CHUNK_MAX	(64 << 10)
#define CHUNKS_MAX	4096

struct chunk {
	uint32_t len;
	uint64_t due_ns;	/* when it may be written on */
};

/* One direction of the link: what was read from in and not yet written to out. */
struct dir {
	const char *name;
	int in, out;
	char *ring;
	size_t cap, rd, wr, used;	/* ring: bytes at [wr, rd) mod cap */
	struct chunk q[CHUNKS_MAX];
	unsigned int qh, qn;
	uint64_t free_ns;	/* the link is busy until then */
	uint64_t bytes, first_ns, last_ns;
	bool eof, shut;
};

struct relay {
	uint64_t bps;		/* bytes per second, 0: unlimited */
	uint64_t owd_ns;	/* one-way delay: half the RTT */
	uint64_t burst_ns;	/* the bucket's depth, in link time */
	uint64_t connect_ns;	/* --to's lookup and connect, at most */
	size_t queue, sockbuf;
	const char *listen, *to;
	bool quiet;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("lm-relay: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("; see lm-relay --help\n", stderr);
	exit(1);
}

/*
 * A rate or a size: "1G", "100M", "256K" with decimal (rate) or binary
 * (size) multipliers, in [lo, hi].  NaN and infinities never pass.
 */
static double number(const char *s, const char *opt, double unit, double lo, double hi)
{
	static const char suffixes[] = "kmgt";
	const char *p;
	char *end;
	double v = strtod(s, &end);

	if (end == s || !isfinite(v))
		usage_error("%s needs a number, not '%s'", opt, s);
	if (*end && (p = strchr(suffixes, end[0] | 0x20)) && !end[1])
		v *= pow(unit, (double)(p - suffixes + 1));
	else if (*end)
		usage_error("%s: bad suffix in '%s'", opt, s);
	if (!(v >= lo && v <= hi))
		usage_error("%s must be in %.15g..%.15g, not '%s'", opt, lo, hi, s);
	return v;
}

/* "100us", "2ms", "0.1s"; a bare number is milliseconds, as lm takes it. */
static uint64_t duration_ns(const char *s, const char *opt, double max_s)
{
	static const struct { const char *unit; double ns; } units[] = {
		{ "us", 1e3 }, { "ms", 1e6 }, { "", 1e6 }, { "s", 1e9 },
	};
	char *end;
	double v = strtod(s, &end);

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (end == s || !isfinite(v) || v < 0 || strcmp(end, units[i].unit))
			continue;
		if (v * units[i].ns > max_s * 1e9)
			usage_error("%s must be at most %g s, not '%s'", opt, max_s, s);
		return (uint64_t)(v * units[i].ns);
	}
	usage_error("%s needs a time like 100us or 2ms, not '%s'", opt, s);
}

/*
 * A name through getaddrinfo_a, abandoned at end: a resolver that never
 * answers must not hold the relay past --connect-timeout.  The request
 * outlives an abandoned lookup (the resolver's thread writes to it), so
 * it is static: one lookup per run.
 */
static int lookup_until(const char *host, const char *port, uint64_t end, struct addrinfo **ai)
{
	static struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	static char h[256], p[32];
	static struct gaicb cb;
	struct gaicb *list[1] = { &cb };
	int rc;

	snprintf(h, sizeof(h), "%s", host);
	snprintf(p, sizeof(p), "%s", port);
	cb = (struct gaicb){ .ar_name = h, .ar_service = p, .ar_request = &hints };
	rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
	while (!rc && (rc = gai_error(&cb)) == EAI_INPROGRESS && now_ns() < end) {
		uint64_t left = end - now_ns();
		struct timespec ts = { .tv_sec = (time_t)(left / 1000000000ull),
				       .tv_nsec = (long)(left % 1000000000ull) };

		gai_suspend((const struct gaicb *const *)list, 1, &ts);
	}
	if (!rc)
		*ai = cb.ar_result;
	return rc;
}

/*
 * "HOST:PORT" into an address; the last colon splits, so [::1]:P is not
 * taken.  A numeric host never reaches a resolver; a name gets until end.
 */
static int resolve(const char *hp, struct sockaddr_storage *ss, socklen_t *len, uint64_t end)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST }, *ai;
	char host[256];
	const char *colon = strrchr(hp, ':');
	int rc;

	if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof(host)) {
		fprintf(stderr, "lm-relay: '%s' is not HOST:PORT\n", hp);
		return -1;
	}
	memcpy(host, hp, (size_t)(colon - hp));
	host[colon - hp] = 0;
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc == EAI_NONAME)
		rc = lookup_until(host, colon + 1, end, &ai);
	if (rc == EAI_INPROGRESS) {
		fprintf(stderr, "lm-relay: %s: no answer from the resolver within the "
			"--connect-timeout\n", hp);
		return -1;
	}
	if (rc) {
		fprintf(stderr, "lm-relay: %s: %s\n", hp, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/*
 * Socket buffers are set before listen or connect: the window scale is
 * agreed in the handshake, and a fixed size turns off the autotuning that
 * would otherwise grow a few MiB of queue in front of the link.
 */
static int tcp_socket(const struct relay *r, struct sockaddr_storage *ss, socklen_t *len,
		      const char *addr, uint64_t end)
{
	int fd, one = 1, buf = (int)r->sockbuf;

	if (resolve(addr, ss, len, end))
		return -1;
	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (buf) {
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	return fd;
}

/* Print the bound address on stdout: with port 0 the caller learns the port. */
static int listen_on(const struct relay *r)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char host[NI_MAXHOST], port[NI_MAXSERV];
	int fd = tcp_socket(r, &ss, &len, r->listen, now_ns() + r->connect_ns);

	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV)) {
		fprintf(stderr, "lm-relay: cannot listen on %s: %s\n", r->listen, strerror(errno));
		return -1;
	}
	printf("lm-relay: listening on %s:%s\n", host, port);
	fflush(stdout);
	return fd;
}

/*
 * connect() polled to end: a host that drops SYNs silently would keep a
 * blocking one waiting for the kernel's retries, over a minute.
 */
static int connect_until(int fd, const struct sockaddr *sa, socklen_t len, uint64_t end)
{
	int err = 0, fl = fcntl(fd, F_GETFL);
	socklen_t elen = sizeof(err);
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return -errno;
	if (connect(fd, sa, len) && errno != EINPROGRESS)
		return -errno;
	for (;;) {
		uint64_t now = now_ns();
		int wait = now < end ? (int)((end - now) / 1000000ull) + 1 : 0;

		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return -errno;
		if (p.revents)
			break;
		if (now >= end)
			return -ETIMEDOUT;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen))
		return -errno;
	return err ? -err : 0;
}

static int connect_to(const struct relay *r)
{
	struct sockaddr_storage ss;
	socklen_t len;
	uint64_t end = now_ns() + r->connect_ns;
	int fd = tcp_socket(r, &ss, &len, r->to, end), ret;

	if (fd < 0)
		return -1;
	ret = connect_until(fd, (struct sockaddr *)&ss, len, end);
	if (ret == -ETIMEDOUT)
		fprintf(stderr, "lm-relay: cannot connect to %s: no answer within %.0f ms "
			"(--connect-timeout)\n", r->to, (double)r->connect_ns / 1e6);
	else if (ret)
		fprintf(stderr, "lm-relay: cannot connect to %s: %s\n", r->to, strerror(-ret));
	if (ret) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Small writes (a page request, a SWITCH) leave at once, as on lm's sockets. */
static void nonblocking_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int dir_init(struct dir *d, const char *name, int in, int out, size_t cap)
{
	*d = (struct dir){ .name = name, .in = in, .out = out, .cap = cap };
	d->ring = malloc(cap);
	return d->ring ? 0 : -1;
}

/*
 * Read what the ring has room for, in one contiguous piece, and give it
 * its place on the link: it starts when the link is free, or up to the
 * bucket's depth earlier than now if the link has been idle, and arrives
 * owd after it has left.
 * Returns -1 on a reset, 0 otherwise.
 */
static int dir_read(struct dir *d, const struct relay *r)
{
	size_t room = d->cap - d->used, n = d->cap - d->rd;
	uint64_t now, start;
	ssize_t got;

	if (n > room)
		n = room;
	if (n > CHUNK_MAX)
		n = CHUNK_MAX;
	if (d->eof || !n || d->qn == CHUNKS_MAX)
		return 0;
	got = read(d->in, d->ring + d->rd, n);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (!got) {
		d->eof = true;
		return 0;
	}
	now = now_ns();
	start = now > r->burst_ns ? now - r->burst_ns : 0;
	if (d->free_ns > start)
		start = d->free_ns;
	d->free_ns = start + (r->bps ? (uint64_t)got * 1000000000ull / r->bps : 0);
	/* credit shortens the queue, never the delay: nothing arrives before now + owd */
	d->q[(d->qh + d->qn++) % CHUNKS_MAX] = (struct chunk){
		.len = (uint32_t)got, .due_ns = (d->free_ns > now ? d->free_ns : now) + r->owd_ns,
	};
	d->rd = (d->rd + (size_t)got) % d->cap;
	d->used += (size_t)got;
	if (!d->first_ns)
		d->first_ns = now;
	return 0;
}

/* Write every chunk that is due; -1 on a reset. */
static int dir_write(struct dir *d)
{
	while (d->qn && d->q[d->qh].due_ns <= now_ns()) {
		struct chunk *c = &d->q[d->qh];
		size_t n = d->cap - d->wr;
		ssize_t put;

		if (n > c->len)
			n = c->len;
		put = write(d->out, d->ring + d->wr, n);
		if (put < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		d->wr = (d->wr + (size_t)put) % d->cap;
		d->used -= (size_t)put;
		d->bytes += (uint64_t)put;
		d->last_ns = now_ns();
		c->len -= (uint32_t)put;
		if (!c->len) {
			d->qh = (d->qh + 1) % CHUNKS_MAX;
			d->qn--;
		}
	}
	if (d->eof && !d->qn && !d->shut) {
		shutdown(d->out, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

/* What to poll for, and the nearest due time (0: none). */
static uint64_t dir_poll(const struct dir *d, struct pollfd *in, struct pollfd *out)
{
	bool blocked = d->qn && d->q[d->qh].due_ns <= now_ns();

	if (!d->eof && d->used < d->cap && d->qn < CHUNKS_MAX)
		in->events |= POLLIN;
	if (blocked)
		out->events |= POLLOUT;
	return d->qn && !blocked ? d->q[d->qh].due_ns : 0;
}

static void wait_events(struct dir *d, int fd[2])
{
	struct pollfd p[2] = { { .fd = fd[0] }, { .fd = fd[1] } };
	uint64_t due = 0, t;
	struct timespec ts, *tp = NULL;

	for (int i = 0; i < 2; i++) {
		t = dir_poll(&d[i], &p[i], &p[!i]);
		if (t && (!due || t < due))
			due = t;
	}
	if (due) {
		t = now_ns();
		t = due > t ? due - t : 0;
		ts = (struct timespec){ .tv_sec = (time_t)(t / 1000000000ull),
					.tv_nsec = (long)(t % 1000000000ull) };
		tp = &ts;
	}
	ppoll(p, 2, tp, NULL);
}

static void report(const struct dir *d)
{
	double s = d->last_ns > d->first_ns ? (double)(d->last_ns - d->first_ns) / 1e9 : 0;

	fprintf(stderr, "lm-relay: %s %llu bytes in %.3f s (%.1f Mbit/s)\n", d->name,
		(unsigned long long)d->bytes, s, s > 0 ? (double)d->bytes * 8 / s / 1e6 : 0);
}

/* Both directions until both ended; 2 when a peer reset the connection. */
static int relay(const struct relay *r, int a, int b)
{
	struct dir d[2];
	int fd[2] = { a, b }, rc = 0;

	if (dir_init(&d[0], "forward", a, b, r->queue) ||
	    dir_init(&d[1], "backward", b, a, r->queue)) {
		fprintf(stderr, "lm-relay: no memory for a %zu-byte queue\n", r->queue);
		return 1;
	}
	nonblocking_nodelay(a);
	nonblocking_nodelay(b);
	while (!d[0].shut || !d[1].shut) {
		for (int i = 0; i < 2 && !rc; i++) {
			if (dir_read(&d[i], r) || dir_write(&d[i])) {
				fprintf(stderr, "lm-relay: %s: %s\n", d[i].name, strerror(errno));
				rc = 2;
			}
		}
		if (rc)
			break;
		wait_events(d, fd);
	}
	if (!r->quiet)
		for (int i = 0; i < 2; i++)
			report(&d[i]);
	free(d[0].ring);
	free(d[1].ring);
	return rc;
}

static void usage(FILE *f)
{
	fputs("usage: lm-relay --listen HOST:PORT --to HOST:PORT [options]\n"
	      "  relay one TCP connection through an emulated link, both directions\n"
	      "  --listen HOST:PORT   where to accept it (port 0: any; the address is\n"
	      "                       printed on stdout as 'lm-relay: listening on H:P')\n"
	      "  --to HOST:PORT       where to connect once it is accepted\n"
	      "  --bandwidth R[kMG]   link rate in bits/s, each direction (default unlimited)\n"
	      "  --rtt T[us|ms|s]     round trip added: T/2 each way (default 0)\n"
	      "  --burst T[us|ms|s]   the token bucket's depth in link time: credit an idle\n"
	      "                       link earns (default 1ms)\n"
	      "  --queue N[KMG]       bytes held between reading and writing, beyond those\n"
	      "                       in flight (default 64K)\n"
	      "  --sockbuf N[KMG]     SO_RCVBUF and SO_SNDBUF of both sockets; 0 leaves the\n"
	      "                       kernel's autotuning (default 64K)\n"
	      "  --connect-timeout T  give up on --to (name lookup and connect) after T\n"
	      "                       (default 5s, at most 600s)\n"
	      "  -q, --quiet          no byte counts at the end\n"
	      "exit: 0 both directions ended, 1 usage or setup, 2 a peer reset it\n", f);
}

static void parse(struct relay *r, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", 1, NULL, 'l' }, { "to", 1, NULL, 't' },
		{ "bandwidth", 1, NULL, 'b' }, { "rtt", 1, NULL, 'r' },
		{ "queue", 1, NULL, 'Q' }, { "sockbuf", 1, NULL, 's' },
		{ "burst", 1, NULL, 'B' }, { "connect-timeout", 1, NULL, 'C' },
		{ "quiet", 0, NULL, 'q' }, { "help", 0, NULL, 'h' }, { 0 }
	};
	uint64_t rtt = 0;
	int c;

	*r = (struct relay){ .queue = 64 << 10, .sockbuf = 64 << 10, .burst_ns = 1000000,
			     .connect_ns = 5000000000ull };
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'l': r->listen = optarg; break;
		case 't': r->to = optarg; break;
		case 'b': r->bps = (uint64_t)(number(optarg, "--bandwidth", 1000, 8, 1e15) / 8); break;
		case 'r': rtt = duration_ns(optarg, "--rtt", 10); break;
		case 'Q': r->queue = (size_t)number(optarg, "--queue", 1024, 4096, 1 << 30); break;
		case 's': r->sockbuf = (size_t)number(optarg, "--sockbuf", 1024, 0, 1 << 30); break;
		case 'B': r->burst_ns = duration_ns(optarg, "--burst", 10); break;
		case 'C': r->connect_ns = duration_ns(optarg, "--connect-timeout", 600); break;
		case 'q': r->quiet = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(1);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!r->listen || !r->to)
		usage_error("both --listen and --to are needed");
	r->owd_ns = rtt / 2;
	/* the bytes in flight on the emulated wire are not queue */
	r->queue += r->bps ? (size_t)(r->bps * r->owd_ns / 1000000000ull) : 0;
}

int main(int argc, char **argv)
{
	struct relay r;
	int lfd, a, b;

	parse(&r, argc, argv);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(&r);
	if (lfd < 0)
		return 1;
	a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (a < 0) {
		fprintf(stderr, "lm-relay: accept: %s\n", strerror(errno));
		return 1;
	}
	close(lfd);
	b = connect_to(&r);
	if (b < 0)
		return 1;
	return relay(&r, a, b);
}

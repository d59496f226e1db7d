// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm: names and connections within a deadline.  A blocking getaddrinfo()
 * waits for a resolver that may never answer, and a blocking connect() to
 * a host that drops packets silently waits for the kernel's SYN retries
 * (over a minute): neither may outlast --timeout or --rejoin.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "lm.h"

/* The request and its strings outlive an abandoned lookup: heap, and
 * leaked when the resolver's thread still holds them. */
struct lookup {
	struct gaicb cb;
	struct addrinfo hints;
	char host[256], port[32];
};

/* A name: getaddrinfo_a's thread, waited for until end, then abandoned. */
static int resolve_async(struct lookup *l, uint64_t end, struct addrinfo **ai)
{
	struct gaicb *list[1] = { &l->cb };
	int ret = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);

	if (ret)
		return ret;
	while ((ret = gai_error(&l->cb)) == EAI_INPROGRESS) {
		uint64_t now = lm_now_ns(), left = now < end ? end - now : 0;
		struct timespec ts = { .tv_sec = (time_t)(left / 1000000000ull),
				       .tv_nsec = (long)(left % 1000000000ull) };

		/* slices, so an interrupt is seen (lm_wait_fd's rule) */
		if (left > 100000000ull)
			ts = (struct timespec){ .tv_nsec = 100000000 };
		if (!left || lm_interrupted)
			break;
		gai_suspend((const struct gaicb *const *)list, 1, &ts);
	}
	if (ret == EAI_INPROGRESS && gai_cancel(&l->cb) != EAI_CANCELED)
		return EAI_INPROGRESS;		/* still running: l stays its */
	if (!ret)
		*ai = l->cb.ar_result;
	return ret == EAI_INPROGRESS ? EAI_CANCELED : ret;
}

/*
 * "HOST:PORT" to a socket address within wait_ms.  A numeric host (or
 * none: loopback) never reaches a resolver; a name does, abandoned at the
 * deadline.  0; -ETIMEDOUT, -ECANCELED (interrupted), or -EINVAL after a
 * message.
 */
int lm_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *len, int wait_ms,
	       bool quiet)
{
	struct lookup *l = calloc(1, sizeof(*l));
	struct addrinfo *ai = NULL;
	char *colon;
	int ret;

	if (!l)
		return -ENOMEM;
	snprintf(l->host, sizeof(l->host), "%s", addr);
	colon = strrchr(l->host, ':');
	if (!colon) {
		free(l);
		fprintf(stderr, "lm: address '%s' needs HOST:PORT (try lm --help)\n", addr);
		return -EINVAL;
	}
	*colon = 0;
	snprintf(l->port, sizeof(l->port), "%s", colon + 1);
	l->hints = (struct addrinfo){ .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				      .ai_flags = AI_NUMERICHOST };
	ret = getaddrinfo(l->host[0] ? l->host : NULL, l->port, &l->hints, &ai);
	if (ret == EAI_NONAME && l->host[0]) {
		l->hints.ai_flags = 0;
		l->cb = (struct gaicb){ .ar_name = l->host, .ar_service = l->port,
					.ar_request = &l->hints };
		ret = resolve_async(l, lm_now_ns() + (uint64_t)wait_ms * 1000000ull, &ai);
		if (ret == EAI_INPROGRESS)
			l = NULL;	/* the resolver's thread still writes to it */
	}
	if (!ret) {
		memcpy(ss, ai->ai_addr, ai->ai_addrlen);
		*len = ai->ai_addrlen;
		freeaddrinfo(ai);
	}
	free(l);
	if (ret == EAI_INPROGRESS || ret == EAI_CANCELED) {
		if (!quiet)
			fprintf(stderr, "lm: %s: no answer from the resolver within %d ms\n", addr,
				wait_ms);
		return lm_interrupted ? -ECANCELED : -ETIMEDOUT;
	}
	if (ret && !quiet)
		fprintf(stderr, "lm: %s: %s\n", addr, gai_strerror(ret));
	return ret ? -EINVAL : 0;
}

/* connect() that gives up at wait_ms: 0 or -errno (-ETIMEDOUT, -ECANCELED). */
static int connect_within(int fd, const struct sockaddr *sa, socklen_t len, int wait_ms)
{
	int fl = fcntl(fd, F_GETFL), err = 0, pr;
	socklen_t elen = sizeof(err);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return -errno;
	if (!connect(fd, sa, len))
		return fcntl(fd, F_SETFL, fl) ? -errno : 0;
	if (errno != EINPROGRESS)
		return -errno;
	pr = lm_wait_fd(fd, POLLOUT, wait_ms > 0 ? wait_ms : 1);
	if (pr < 0)
		return pr;
	if (!pr)
		return -ETIMEDOUT;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen))
		return -errno;
	if (err)
		return -err;
	return fcntl(fd, F_SETFL, fl) ? -errno : 0;
}

/*
 * A TCP connection to "HOST:PORT" within wait_ms, name lookup included,
 * TCP_NODELAY; its fd, or -errno after saying why (unless quiet).
 */
int lm_connect_within(const char *addr, int wait_ms, bool quiet)
{
	uint64_t end = lm_now_ns() + (uint64_t)wait_ms * 1000000ull;
	struct sockaddr_storage ss;
	int fd, one = 1, buf = lm_sockbuf(), ret;
	socklen_t len;

	ret = lm_resolve(addr, &ss, &len, wait_ms, quiet);
	if (ret)
		return ret;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		if (!quiet)
			fprintf(stderr, "lm: socket: %s\n", strerror(-ret));
		return ret;
	}
	if (buf > 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	/* what the lookup took comes off the connect's share */
	ret = connect_within(fd, (struct sockaddr *)&ss, len, lm_ms_until(end));
	if (ret) {
		close(fd);
		if (!quiet && ret == -ETIMEDOUT)
			fprintf(stderr, "lm: cannot connect to %s: no answer within %d ms\n", addr,
				wait_ms);
		else if (!quiet)
			fprintf(stderr, "lm: cannot connect to %s: %s\n", addr, strerror(-ret));
		return ret;
	}
	/* page requests are small and latency-bound */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int lm_connect(const char *addr)
{
	return lm_connect_within(addr, LM_CONNECT_MS, false);
}

int lm_connect_quiet(const char *addr, bool quiet)
{
	return lm_connect_within(addr, LM_CONNECT_MS, quiet);
}

/* ms from now until end, at least 1 while it is ahead; 0 once past. */
int lm_ms_until(uint64_t end)
{
	uint64_t now = lm_now_ns();

	return now >= end ? 0 : (int)((end - now) / 1000000ull) + 1;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The destination's door: accept a connection, make the peer prove the key
 * (auth.c) before reading anything else, then check what it asks for --
 * mode, and a region no larger than --max-size -- before anything is
 * allocated.  Strangers are refused and the door stays open for the real
 * source; once a migration is admitted a doorman thread refuses every other
 * source ("busy") and hands a rejoining connection of this migration's
 * session to the destination.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "lm.h"

static void peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[64] = "?";
	unsigned int port = 0;

	if (!getpeername(fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *in = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
			port = ntohs(in->sin6_port);
		}
	}
	snprintf(buf, len, "%s:%u", host, port);
}

/* The first few refusals by name, then one line per thousand. */
static void say_refused(struct lm_door *door, const char *peer, const char *why)
{
	uint64_t n = atomic_fetch_add(&door->refused, 1) + 1;

	if (n <= 5 || n % 1000 == 0)
		fprintf(stderr, "lm: destination: refused %s: %s%s\n", peer, why,
			n == 5 ? " (further refusals: one line per thousand)" :
			n % 1000 == 0 ? " (a thousand more)" : "");
}

void lm_door_init(struct lm_door *door, const struct lm_opts *o, int lfd, uint64_t max_size)
{
	memset(door, 0, sizeof(*door));
	door->o = o;
	door->lfd = lfd;
	door->max_size = max_size;
	door->rejoin_fd[0] = door->rejoin_fd[1] = -1;
	pthread_mutex_init(&door->lock, NULL);
	pthread_cond_init(&door->cond, NULL);
}

/* One accepted, authenticated connection in c, its AUTH in a; -EAGAIN: a
 * stranger was refused; -ETIMEDOUT: nobody came within wait_ms. */
static int admit_one(struct lm_door *door, struct lm_conn *c, const char *name,
		     struct lm_link *link, int wait_ms, struct lm_auth *a, struct lm_challenge *ch,
		     char *peer, size_t plen)
{
	int fd, ret, pr;

	pr = lm_wait_fd(door->lfd, POLLIN, wait_ms);
	if (pr <= 0)
		return pr < 0 ? pr : -ETIMEDOUT;
	fd = accept4(door->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return errno == EMFILE || errno == ENFILE ? -errno : -EAGAIN;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	peer_name(fd, peer, plen);
	ret = lm_conn_init(c, fd, name, link, door->o->timeout_ms);
	if (ret) {
		close(fd);
		return ret;
	}
	ret = lm_auth_server(c, door->o->key, door->o->verify ? LM_CHAL_VERIFY : 0, a, ch);
	if (ret) {
		say_refused(door, peer, c->err);
		lm_conn_close(c);
		return -EAGAIN;
	}
	return 0;
}

static bool same_session(const struct lm_door *door, const struct lm_auth *a)
{
	return !memcmp(door->session, a->session, LM_SESSION);
}

/* HELLO after AUTH: what the source asks for, checked before any allocation. */
static int check_hello(struct lm_door *door, struct lm_conn *c, const char *peer,
		       unsigned int kind, struct lm_hello *hello)
{
	static const struct lm_geom none;
	struct lm_frame f;
	char why[200];
	int ret = lm_recv(c, &none, &f);

	if (!ret && (f.h.type != LM_HELLO ||
		     !!(f.h.flags & LM_F_URGENT) != (kind == LM_AUTH_URGENT))) {
		snprintf(c->err, sizeof(c->err), "expected HELLO, got %s", lm_type_name(f.h.type));
		ret = -EBADMSG;
	}
	if (ret) {
		say_refused(door, peer, c->err);
		return ret;
	}
	*hello = *(const struct lm_hello *)f.fixed;
	if (hello->mode != door->o->mode) {
		snprintf(why, sizeof(why), "it asks for --mode %s; this destination runs %s",
			 lm_mode_name(hello->mode), lm_mode_name(door->o->mode));
		say_refused(door, peer, why);
		lm_refuse(c, LM_REFUSE_MODE, door->o->mode, 0);
		return -EINVAL;
	}
	if (hello->size > door->max_size || hello->backing > UFFDM_HUGETLB_1G) {
		snprintf(why, sizeof(why), "it asks for a %llu-byte region, more than this "
			 "destination's --max-size %llu", (unsigned long long)hello->size,
			 (unsigned long long)door->max_size);
		say_refused(door, peer, why);
		lm_refuse(c, LM_REFUSE_SIZE, 0, door->max_size);
		return -EFBIG;
	}
	return 0;
}

int lm_door_admit(struct lm_door *door, struct lm_conn *c, const char *name,
		  struct lm_link *link, unsigned int kind, int wait_ms, struct lm_hello *hello)
{
	uint64_t t_end = wait_ms < 0 ? 0 : lm_now_ns() + (uint64_t)wait_ms * 1000000ull;

	for (;;) {
		struct lm_challenge ch;
		struct lm_auth a;
		char peer[80];
		int left = -1, ret;

		if (t_end) {
			uint64_t now = lm_now_ns();

			if (now >= t_end) {
				fprintf(stderr, "lm: destination: no %s connection within %d ms\n",
					name, wait_ms);
				return -ETIMEDOUT;
			}
			left = (int)((t_end - now) / 1000000ull) + 1;
		}
		ret = admit_one(door, c, name, link, left, &a, &ch, peer, sizeof(peer));
		if (ret == -EAGAIN)
			continue;
		if (ret == -ETIMEDOUT)
			fprintf(stderr, "lm: destination: no %s connection within %d ms\n", name,
				wait_ms);
		if (ret)
			return ret;
		if (a.kind != kind || (kind != LM_AUTH_MAIN && !same_session(door, &a))) {
			say_refused(door, peer, kind == LM_AUTH_MAIN ? "it asks to rejoin a migration "
				    "this destination does not have" : "another source's connection "
				    "while one migration is being set up");
			lm_refuse(c, kind == LM_AUTH_MAIN ? LM_REFUSE_SESSION : LM_REFUSE_BUSY, 0, 0);
			lm_conn_close(c);
			continue;
		}
		ret = check_hello(door, c, peer, kind, hello);
		if (!ret)
			ret = lm_auth_accept(c, door->o->key, &ch, &a);
		if (ret) {
			lm_conn_close(c);
			continue;
		}
		if (kind == LM_AUTH_MAIN)
			memcpy(door->session, a.session, LM_SESSION);
		return 0;
	}
}

/* A rejoining connection of our session: kept until dest.c takes it. */
static bool lm_door_rejoin_offer(struct lm_door *door, struct lm_conn *c, const char *peer,
				 const struct lm_challenge *ch, const struct lm_auth *a)
{
	bool urgent = a->kind == LM_AUTH_REJOIN_URGENT;
	struct lm_hello hello;

	if (!atomic_load(&door->rejoin_ok) ||
	    check_hello(door, c, peer, urgent ? LM_AUTH_URGENT : LM_AUTH_MAIN, &hello) ||
	    lm_auth_accept(c, door->o->key, ch, a))
		return false;
	pthread_mutex_lock(&door->lock);
	if (door->rejoin_fd[urgent] >= 0)
		close(door->rejoin_fd[urgent]);
	door->rejoin_fd[urgent] = c->fd;
	c->fd = -1;
	pthread_cond_broadcast(&door->cond);
	pthread_mutex_unlock(&door->lock);
	lm_conn_close(c);
	return true;
}

int lm_door_rejoin_take(struct lm_door *door, int *mfd, int *ufd, int wait_ms)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += wait_ms / 1000;
	ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&door->lock);
	while ((door->rejoin_fd[0] < 0 || door->rejoin_fd[1] < 0) && !ret)
		ret = pthread_cond_timedwait(&door->cond, &door->lock, &ts);
	if (door->rejoin_fd[0] >= 0 && door->rejoin_fd[1] >= 0) {
		*mfd = door->rejoin_fd[0];
		*ufd = door->rejoin_fd[1];
		door->rejoin_fd[0] = door->rejoin_fd[1] = -1;
		ret = 0;
	} else {
		ret = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&door->lock);
	return ret;
}

/* While a migration runs: refuse other sources, keep rejoins for dest.c. */
static void *doorman(void *p)
{
	struct lm_door *door = p;

	while (!atomic_load(&door->stop)) {
		struct lm_challenge ch;
		struct lm_conn c;
		struct lm_auth a;
		char peer[80];
		int ret = admit_one(door, &c, "rejoin", NULL, 100, &a, &ch, peer, sizeof(peer));

		if (ret == -ETIMEDOUT || ret == -EAGAIN)
			continue;
		if (ret)
			break;
		if ((a.kind == LM_AUTH_REJOIN_MAIN || a.kind == LM_AUTH_REJOIN_URGENT) &&
		    same_session(door, &a)) {
			if (lm_door_rejoin_offer(door, &c, peer, &ch, &a))
				continue;
			lm_conn_close(&c);
			continue;
		}
		say_refused(door, peer, "a migration is in progress (busy)");
		lm_refuse(&c, LM_REFUSE_BUSY, 0, 0);
		lm_conn_close(&c);
	}
	return NULL;
}

int lm_door_start(struct lm_door *door)
{
	if (lm_thread_start(&door->tid, doorman, door))
		return -EAGAIN;
	door->running = true;
	return 0;
}

void lm_door_stop(struct lm_door *door)
{
	if (!door->running)
		return;
	atomic_store(&door->stop, 1);
	pthread_join(door->tid, NULL);
	door->running = false;
	for (int k = 0; k < 2; k++)
		if (door->rejoin_fd[k] >= 0) {
			close(door->rejoin_fd[k]);
			door->rejoin_fd[k] = -1;
		}
}

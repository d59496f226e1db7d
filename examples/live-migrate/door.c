// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The destination's door: one doorman thread, from the first accept to the
 * exit, runs every handshake at once -- up to LM_DOOR_SLOTS of them, each a
 * small state machine on a non-blocking socket with a TOTAL deadline
 * (--timeout from its accept, however the bytes trickle in) -- and never
 * sleeps for a peer: no --rtt delay, no pacing before the key is proven.
 * Each connection gets a CHALLENGE and must answer with AUTH, whose MAC
 * proves the key (auth.c); only then does the door prove the key back
 * (AUTH_OK) and read the HELLO, the first sealed frame (a fixed few hundred
 * bytes read into the slot: nothing allocated).  Every answer to it --
 * ADMIT or a refusal -- is sealed too: only the key's holder can say it.
 * What the source asks for -- mode, a region no larger than --max-size --
 * is checked before dest.c allocates anything.  The first main connection admitted fixes the session; its
 * urgent connection and later rejoins must carry it; every other source is
 * refused ("busy").  A full table drops its oldest handshake that has not
 * proven the key: a real source proves it in a round trip, so it is safe for
 * LM_DOOR_SLOTS connects after its own, however many strangers come, fast
 * (a flood) or slow (a slowloris crowd); a stranger can never prove it.
 * Strangers cost a slot of the table (allocated whole at the start), an fd
 * and a kernel socket each, and at most LM_DOOR_SLOTS of each at once.  The
 * door accepts until the backlog is empty (a batch per turn, the handshakes
 * under way read first) and learns which sockets are ready from epoll, so a
 * turn costs what is ready, not what is held.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sodium.h>

#include "lm.h"

/* accept4's address: it is there even when the peer has already reset */
static void peer_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[64] = "?";
	unsigned int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
		port = ntohs(in->sin6_port);
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


#define HS_BUF		256	/* AUTH and the sealed HELLO, with room */
#define HS_ACCEPTS	64	/* accepts per turn, the handshakes under way read between */
#define HS_EVENTS	64
#define DOOR_SPARE	64	/* fds for the migration itself: region, uffd, links, stdio */
#define DOOR_KNOCK	LM_DOOR_SLOTS	/* the listener's epoll tag */

/* One handshake in progress. */
struct hs {
	int fd;
	uint64_t deadline;
	struct lm_challenge ch;
	struct lm_auth auth;
	struct lm_sealkey sk;		/* once AUTH checked out */
	unsigned int nframes;		/* 0: reading AUTH, 1: HELLO (sealed) */
	_Alignas(8) uint8_t buf[HS_BUF];	/* frames cast in place: aligned */
	size_t got;
	char peer[80];
};

struct lm_door_slots {
	int epfd;			/* the listener and every handshake */
	struct hs hs[LM_DOOR_SLOTS];
};

void lm_door_init(struct lm_door *door, const struct lm_opts *o, int lfd, uint64_t max_size)
{
	pthread_condattr_t ca;

	memset(door, 0, sizeof(*door));
	door->o = o;
	door->lfd = lfd;
	door->max_size = max_size;
	door->rejoin_fd[0] = door->rejoin_fd[1] = -1;
	door->given_fd[0] = door->given_fd[1] = -1;
	pthread_mutex_init(&door->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&door->cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* A handshake frame, whole or not at all: the socket is fresh, so it fits. */
static void hs_put(int fd, const uint8_t *b, size_t n)
{
	if (n && send(fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n)
		shutdown(fd, SHUT_RDWR);
}

/* In clear: CHALLENGE, AUTH_OK and a KEY refusal (before any key is shared). */
static void hs_send(int fd, unsigned int type, const void *fixed)
{
	uint8_t b[128];

	hs_put(fd, b, lm_frame_encode(b, sizeof(b), type, 0, fixed, NULL, 0));
}

/* The door's one sealed frame on this connection, ADMIT or a refusal: number 0. */
static void hs_send_sealed(const struct hs *h, unsigned int type, const void *fixed)
{
	uint8_t b[128];

	hs_put(h->fd, b, lm_frame_seal(b, sizeof(b), &h->sk, false, 0, type, 0, fixed));
}

/* Why not: sealed, except KEY (the peer could not read it). */
static void hs_refuse(const struct hs *h, unsigned int why, unsigned int mode,
		      uint64_t max_size)
{
	struct lm_refuse r = { .why = why, .mode = mode, .max_size = max_size };

	if (why == LM_REFUSE_KEY)
		hs_send(h->fd, LM_REFUSE, &r);
	else
		hs_send_sealed(h, LM_REFUSE, &r);
}

static void hs_drop(struct hs *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

static bool same_session(const struct lm_door *door, const struct lm_auth *a)
{
	return door->have_session && !memcmp(door->session, a->session, LM_SESSION);
}

/* HELLO: what the source asks for, checked before any allocation. */
static int check_hello(struct lm_door *door, struct hs *h, const struct lm_hello *hello)
{
	bool urgent = h->auth.kind == LM_AUTH_URGENT || h->auth.kind == LM_AUTH_REJOIN_URGENT;
	const struct lm_hdr *hd = (const void *)(h->buf + sizeof(struct lm_hdr) +
						 sizeof(struct lm_auth));
	char why[200];

	if (!!(hd->flags & LM_F_URGENT) != urgent) {
		say_refused(door, h->peer, "HELLO's urgent flag does not match its AUTH");
		return -EBADMSG;
	}
	if (hello->mode != door->o->mode) {
		snprintf(why, sizeof(why), "it asks for --mode %s; this destination runs %s",
			 lm_mode_name(hello->mode), lm_mode_name(door->o->mode));
		say_refused(door, h->peer, why);
		hs_refuse(h, LM_REFUSE_MODE, door->o->mode, 0);
		return -EINVAL;
	}
	if (hello->size > door->max_size || hello->backing > UFFDM_HUGETLB_1G) {
		snprintf(why, sizeof(why), "it asks for a %llu-byte region, more than this "
			 "destination takes: %llu bytes (%s)", (unsigned long long)hello->size,
			 (unsigned long long)door->max_size, lm_limit_name(door->max_kind));
		say_refused(door, h->peer, why);
		hs_refuse(h, LM_REFUSE_SIZE, door->max_kind, door->max_size);
		return -EFBIG;
	}
	return 0;
}

/* Accepted: ADMIT, and the socket goes to dest.c (the lock is held). */
static void give(struct lm_door *door, struct hs *h, int *slot, struct lm_sealkey *key)
{
	*key = h->sk;
	hs_send_sealed(h, LM_ADMIT, NULL);
	epoll_ctl(door->t->epfd, EPOLL_CTL_DEL, h->fd, NULL);	/* dest.c's now */
	if (*slot >= 0)
		close(*slot);
	*slot = h->fd;
	h->fd = -1;
	pthread_cond_broadcast(&door->cond);
}

/* A proven peer: which connection is it, and is it welcome? */
static void dispatch(struct lm_door *door, struct hs *h, const struct lm_hello *hello)
{
	unsigned int kind = h->auth.kind;
	const char *busy = NULL;
	unsigned int why = LM_REFUSE_BUSY;

	pthread_mutex_lock(&door->lock);
	if (kind == LM_AUTH_MAIN && !door->have_session) {
		if (!check_hello(door, h, hello)) {
			memcpy(door->session, h->auth.session, LM_SESSION);
			door->have_session = true;
			door->hello = *hello;
			give(door, h, &door->given_fd[0], &door->given_key[0]);
		}
	} else if (kind == LM_AUTH_URGENT && same_session(door, &h->auth) && !door->urgent_given) {
		if (!check_hello(door, h, hello)) {
			door->urgent_given = true;
			give(door, h, &door->given_fd[1], &door->given_key[1]);
		}
	} else if ((kind == LM_AUTH_REJOIN_MAIN || kind == LM_AUTH_REJOIN_URGENT) &&
		   same_session(door, &h->auth) && atomic_load(&door->rejoin_ok)) {
		if (!check_hello(door, h, hello))
			give(door, h, &door->rejoin_fd[kind == LM_AUTH_REJOIN_URGENT],
			     &door->rejoin_key[kind == LM_AUTH_REJOIN_URGENT]);
	} else if (kind == LM_AUTH_REJOIN_MAIN && same_session(door, &h->auth) &&
		   (atomic_load(&door->not_resumed) || atomic_load(&door->finished))) {
		struct lm_refuse r = { .why = atomic_load(&door->finished) ? LM_REFUSE_FINISHED :
					      LM_REFUSE_NOT_RESUMED, .fin = door->fin };

		/* sealed: the destination's word, which no one else can give */
		hs_send_sealed(h, LM_REFUSE, &r);
		fprintf(stderr, "lm: destination: told the rejoining source %s %s\n", h->peer,
			r.why == LM_REFUSE_FINISHED ? "the verdict its FIN carried (lost, or never "
			"sent: the source was gone)" :
			"that this destination did not resume: the workload is the source's");
		atomic_store(&door->told, 1);
		pthread_cond_broadcast(&door->cond);
	} else if ((kind == LM_AUTH_REJOIN_MAIN || kind == LM_AUTH_REJOIN_URGENT) &&
		   same_session(door, &h->auth)) {
		/* SWITCH is here, the decision not yet made (or the
		 * destination finishes without the source): it asks again */
		busy = "it rejoins before this destination decided whether it resumes, or "
		       "while it finishes: it asks again";
	} else if (kind == LM_AUTH_REJOIN_MAIN || kind == LM_AUTH_REJOIN_URGENT) {
		busy = "it asks to rejoin a migration this destination does not have (or not yet)";
		why = LM_REFUSE_SESSION;
	} else {
		busy = door->urgent_given ? "a migration is in progress (busy)" :
		       "another source's connection while one migration is being set up";
	}
	pthread_mutex_unlock(&door->lock);
	if (busy) {
		say_refused(door, h->peer, busy);
		hs_refuse(h, why, 0, 0);
	}
	hs_drop(h);
}

/* AUTH is whole: a stranger is refused here; a peer with the key gets AUTH_OK. */
static int hs_auth(struct lm_door *door, struct hs *h, const struct lm_hdr *hd,
		   const void *body)
{
	static const struct lm_geom none;
	struct lm_auth_ok ok;
	struct lm_frame f;
	char err[160];

	if (hd->type != LM_AUTH) {
		snprintf(err, sizeof(err), "expected AUTH, got %s (not an lm source of this "
			 "version, or no key)", lm_type_name(hd->type));
		say_refused(door, h->peer, err);
		hs_refuse(h, LM_REFUSE_KEY, 0, 0);
		return -EACCES;
	}
	if (lm_payload_check(hd, body, &none, &f, err, sizeof(err))) {
		say_refused(door, h->peer, err);
		return -EBADMSG;
	}
	h->auth = *(const struct lm_auth *)f.fixed;
	if (lm_auth_check(door->o->key, &h->ch, &h->auth)) {
		say_refused(door, h->peer, "wrong key");
		hs_refuse(h, LM_REFUSE_KEY, 0, 0);
		return -EACCES;
	}
	lm_conn_key(&h->sk, door->o->key, &h->ch, &h->auth);
	lm_auth_ok_make(&ok, door->o->key, &h->ch, &h->auth);
	hs_send(h->fd, LM_AUTH_OK, &ok);
	return 1;
}

/* Frame k of the handshake is whole in h->buf: check it. 1: go on, 0: done, <0: refused. */
static int hs_frame(struct lm_door *door, struct hs *h, size_t at)
{
	static const struct lm_geom none;
	struct lm_hdr *hd = (void *)(h->buf + at);
	void *body = h->buf + at + sizeof(*hd);
	struct lm_frame f;
	char err[160];

	if (!h->nframes++)
		return hs_auth(door, h, hd, body);
	/* sealed: whatever fails here is not the source's; no answer */
	if (lm_frame_open(hd, h->got - at, &h->sk, false, 0, err, sizeof(err))) {
		say_refused(door, h->peer, err);
		return -EKEYREJECTED;
	}
	if (hd->type != LM_HELLO) {
		snprintf(err, sizeof(err), "expected HELLO, got %s", lm_type_name(hd->type));
		say_refused(door, h->peer, err);
		return -EBADMSG;
	}
	if (lm_payload_check(hd, body, &none, &f, err, sizeof(err))) {
		say_refused(door, h->peer, err);
		return -EBADMSG;
	}
	dispatch(door, h, f.fixed);
	return 0;
}

/* Bytes the current frame still needs: its header first, then its length. */
static size_t hs_need(const struct hs *h, size_t *at)
{
	size_t start = h->nframes ? sizeof(struct lm_hdr) + sizeof(struct lm_auth) : 0;
	const struct lm_hdr *hd = (const void *)(h->buf + start);

	*at = start;
	if (h->got < start + sizeof(*hd))
		return start + sizeof(*hd) - h->got;
	return start + sizeof(*hd) + hd->len + (h->nframes ? LM_TAGLEN : 0) - h->got;
}

static void hs_eof(struct lm_door *door, struct hs *h, size_t at, int err)
{
	const struct lm_hdr *hd = (const void *)(h->buf + at);
	size_t in = h->got - at;
	char why[200];

	if (in == 0 && !err)
		snprintf(why, sizeof(why), "incoming connection closed by the peer");
	else if (in < sizeof(*hd))
		snprintf(why, sizeof(why), "incoming connection: truncated frame header (%zu of "
			 "%zu bytes): %s", in, sizeof(*hd), err ? strerror(err) : "closed by the peer");
	else
		snprintf(why, sizeof(why), "incoming connection: truncated %s frame (%zu of %u "
			 "bytes): %s", lm_type_name(hd->type), in - sizeof(*hd), hd->len,
			 err ? strerror(err) : "closed by the peer");
	say_refused(door, h->peer, why);
}

/* The peer sent something: read what the current frame needs, no more. */
static void hs_read(struct lm_door *door, struct hs *h)
{
	for (;;) {
		size_t at, need = hs_need(h, &at);
		const struct lm_hdr *hd = (const void *)(h->buf + at);
		char err[160];
		ssize_t r;
		int ret;

		if (h->got - at == sizeof(*hd) && need) {
			/* a whole header: refuse what no handshake frame can be */
			if ((ret = lm_hdr_check(hd, err, sizeof(err))) ||
			    hd->len + LM_TAGLEN > HS_BUF - h->got) {
				if (!ret)
					snprintf(err, sizeof(err), "oversized %s frame in a "
						 "handshake: %u bytes", lm_type_name(hd->type),
						 hd->len);
				say_refused(door, h->peer, err);
				hs_drop(h);
				return;
			}
		}
		if (!need) {
			if (hs_frame(door, h, at) <= 0) {
				hs_drop(h);
				return;
			}
			continue;
		}
		r = recv(h->fd, h->buf + h->got, need, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r <= 0) {
			hs_eof(door, h, at, r < 0 ? errno : 0);
			hs_drop(h);
			return;
		}
		h->got += (size_t)r;
	}
}

/*
 * Room for a newcomer: the oldest handshake that has not proven the key
 * dropped (a stranger never proves it; a source that did is a round trip
 * from done).  False: every handshake is a proven source's.
 */
static bool hs_make_room(struct lm_door *door, struct lm_door_slots *t)
{
	struct hs *h = NULL;

	for (unsigned int k = 0; k < door->nslots; k++) {
		struct hs *c = &t->hs[k];

		if (c->fd >= 0 && !c->nframes && (!h || c->deadline < h->deadline))
			h = c;
	}
	if (!h)
		return false;
	say_refused(door, h->peer, "its handshake was the oldest of a full table");
	hs_drop(h);
	return true;
}

/* The newcomer's slot: a free one, else one made free; NULL: none. */
static struct hs *hs_slot(struct lm_door *door, struct lm_door_slots *t)
{
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned int k = 0; k < door->nslots; k++)
			if (t->hs[k].fd < 0)
				return &t->hs[k];
		if (!hs_make_room(door, t))
			break;
	}
	return NULL;
}

/* One connection off the backlog into a slot: false when the backlog is empty. */
static bool hs_accept(struct lm_door *door, struct lm_door_slots *t)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);
	int fd = accept4(door->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN };
	struct hs *h;

	if (fd < 0) {
		int err = errno;

		/* out of fds (RLIMIT_NOFILE is the migration's too): room by
		 * the same rule, or the backlog waits a moment */
		if ((err == EMFILE || err == ENFILE) && !hs_make_room(door, t))
			usleep(10000);
		return err == ECONNABORTED || err == EINTR;
	}
	h = hs_slot(door, t);
	if (!h) {
		close(fd);
		return true;
	}
	memset(h, 0, sizeof(*h));
	h->fd = fd;
	h->deadline = lm_now_ns() + (uint64_t)door->o->timeout_ms * 1000000ull;
	peer_name(&ss, h->peer, sizeof(h->peer));
	ev.data.u32 = (uint32_t)(h - t->hs);
	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		say_refused(door, h->peer, "no room to watch its socket (epoll)");
		hs_drop(h);
		return true;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	h->ch = (struct lm_challenge){ .version = LM_VERSION,
				       .flags = (door->o->verify ? LM_CHAL_VERIFY : 0) |
						(door->o->plaintext ? LM_CHAL_PLAIN : 0) };
	randombytes_buf(h->ch.nonce, LM_NONCE);
	hs_send(fd, LM_CHALLENGE, &h->ch);
	return true;
}

/*
 * A handshake not done by its deadline is refused - but only after what has
 * arrived was read: a door thread that was late (a busy machine) must not
 * count its own delay against a peer that answered in time.
 */
static void door_expire(struct lm_door *door, struct lm_door_slots *t)
{
	uint64_t now = lm_now_ns();
	char why[120];

	for (unsigned int k = 0; k < door->nslots; k++) {
		struct hs *h = &t->hs[k];

		if (h->fd < 0 || now < h->deadline)
			continue;
		snprintf(why, sizeof(why), "no handshake within %d ms of its connect",
			 door->o->timeout_ms);
		say_refused(door, h->peer, why);
		hs_drop(h);
	}
}

/* Until the nearest deadline, 100 ms at most (a stop is seen); 0 once one passed. */
static int door_wait_ms(const struct lm_door *door, const struct lm_door_slots *t)
{
	uint64_t now = lm_now_ns();
	int wait = 100;

	for (unsigned int k = 0; k < door->nslots; k++) {
		const struct hs *h = &t->hs[k];

		if (h->fd < 0)
			continue;
		if (now >= h->deadline)
			return 0;	/* read what came, then judge */
		if ((h->deadline - now) / 1000000 < (uint64_t)wait)
			wait = (int)((h->deadline - now) / 1000000) + 1;
	}
	return wait;
}

/* One turn: the handshakes that have news, then the backlog, then the deadlines. */
static void door_turn(struct lm_door *door, struct lm_door_slots *t)
{
	struct epoll_event ev[HS_EVENTS];
	int n = epoll_wait(t->epfd, ev, HS_EVENTS, door_wait_ms(door, t));
	bool knock = false;

	for (int i = 0; i < n; i++) {
		uint32_t k = ev[i].data.u32;

		if (k == DOOR_KNOCK)
			knock = true;
		else if (t->hs[k].fd >= 0)
			hs_read(door, &t->hs[k]);
	}
	for (int i = 0; knock && i < HS_ACCEPTS; i++)
		knock = hs_accept(door, t);
	door_expire(door, t);
}

static void *doorman(void *p)
{
	struct lm_door *door = p;
	struct lm_door_slots *t = door->t;

	while (!atomic_load(&door->stop))
		door_turn(door, t);
	for (unsigned int k = 0; k < door->nslots; k++)
		hs_drop(&t->hs[k]);
	return NULL;
}

/* Until cond holds, in 100 ms slices (an interrupt is seen); wait_ms < 0: no limit. */
static int door_wait(struct lm_door *door, int *slot, const struct lm_sealkey *key,
		     struct lm_sealkey *out, int wait_ms)
{
	uint64_t end = wait_ms < 0 ? 0 : lm_now_ns() + (uint64_t)wait_ms * 1000000ull;
	int fd;

	pthread_mutex_lock(&door->lock);
	while (*slot < 0) {
		uint64_t t = lm_now_ns() + 100000000ull;
		struct timespec ts;

		if (lm_interrupted || (end && lm_now_ns() >= end))
			break;
		if (end && t > end)
			t = end;
		/* the condition variable runs on CLOCK_MONOTONIC (lm_door_init) */
		ts.tv_sec = (time_t)(t / 1000000000ull);
		ts.tv_nsec = (long)(t % 1000000000ull);
		pthread_cond_timedwait(&door->cond, &door->lock, &ts);
	}
	fd = *slot;
	*slot = -1;
	*out = *key;
	pthread_mutex_unlock(&door->lock);
	if (fd >= 0)
		return fd;
	return lm_interrupted ? -ECANCELED : -ETIMEDOUT;
}

int lm_door_admit(struct lm_door *door, struct lm_conn *c, const char *name,
		  struct lm_link *link, unsigned int kind, int wait_ms, struct lm_hello *hello)
{
	unsigned int k = kind == LM_AUTH_URGENT;
	struct lm_sealkey key;
	int fd = door_wait(door, &door->given_fd[k], &door->given_key[k], &key, wait_ms), ret;

	if (fd == -ETIMEDOUT)
		fprintf(stderr, "lm: destination: no %s connection within %d ms\n", name, wait_ms);
	if (fd < 0)
		return fd;
	/* the door's socket was non-blocking; lm_conn waits with poll */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	ret = lm_conn_init(c, fd, name, link, door->o->timeout_ms);
	if (ret) {
		close(fd);
		return ret;
	}
	/* the door used number 0 each way: HELLO in, ADMIT out */
	lm_conn_seal(c, &key, false, 1);
	sodium_memzero(&key, sizeof(key));
	pthread_mutex_lock(&door->lock);
	*hello = door->hello;
	pthread_mutex_unlock(&door->lock);
	return 0;
}

int lm_door_rejoin_take(struct lm_door *door, int *mfd, int *ufd, struct lm_sealkey keys[2],
			int wait_ms)
{
	uint64_t end = lm_now_ns() + (uint64_t)wait_ms * 1000000ull;
	int m = door_wait(door, &door->rejoin_fd[0], &door->rejoin_key[0], &keys[0], wait_ms), u;

	if (m < 0)
		return m;
	u = door_wait(door, &door->rejoin_fd[1], &door->rejoin_key[1], &keys[1],
		      (int)((end - lm_now_ns()) / 1000000ull) + 100);
	if (u < 0) {
		close(m);
		return u;
	}
	fcntl(m, F_SETFL, fcntl(m, F_GETFL) & ~O_NONBLOCK);
	fcntl(u, F_SETFL, fcntl(u, F_GETFL) & ~O_NONBLOCK);
	*mfd = m;
	*ufd = u;
	return 0;
}

void lm_door_rejoin_end(struct lm_door *door)
{
	pthread_mutex_lock(&door->lock);
	atomic_store(&door->rejoin_ok, 0);
	for (int k = 0; k < 2; k++) {
		if (door->rejoin_fd[k] >= 0)
			close(door->rejoin_fd[k]);
		door->rejoin_fd[k] = -1;
	}
	pthread_mutex_unlock(&door->lock);
}

bool lm_door_tell(struct lm_door *door, const struct lm_fin *fin, int wait_ms)
{
	uint64_t end = lm_now_ns() + (uint64_t)wait_ms * 1000000ull;

	pthread_mutex_lock(&door->lock);
	if (fin)
		door->fin = *fin;
	pthread_mutex_unlock(&door->lock);
	atomic_store(fin ? &door->finished : &door->not_resumed, 1);
	while (door->running && !atomic_load(&door->told) && lm_now_ns() < end)
		usleep(20000);
	return atomic_load(&door->told);
}

/*
 * Room for every slot beside the migration's own fds: the soft
 * RLIMIT_NOFILE raised toward the hard one, fewer slots when the hard
 * limit is lower (a full table then drops its oldest sooner).
 */
static unsigned int door_room(void)
{
	rlim_t want = LM_DOOR_SLOTS + DOOR_SPARE;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 64;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur >= want)
		return LM_DOOR_SLOTS;
	return rl.rlim_cur > DOOR_SPARE + 8 ? (unsigned int)(rl.rlim_cur - DOOR_SPARE) : 8;
}

static int door_open(struct lm_door *door)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = DOOR_KNOCK };
	struct lm_door_slots *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	/*
	 * A backlog as deep as the table (an inherited listener's too: listen()
	 * again only resizes it): a crowd dialing at once waits there instead of
	 * having its SYNs dropped -- and the source's with them, which the
	 * kernel retries only after 1 s, then 3 s.
	 */
	listen(door->lfd, LM_DOOR_SLOTS);
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	/* accept until the backlog is empty: never a wait for the next peer */
	if (t->epfd < 0 || fcntl(door->lfd, F_SETFL, fcntl(door->lfd, F_GETFL) | O_NONBLOCK) || epoll_ctl(t->epfd, EPOLL_CTL_ADD, door->lfd, &ev)) {
		int err = -errno;

		if (t->epfd >= 0)
			close(t->epfd);
		free(t);
		return err;
	}
	for (int k = 0; k < LM_DOOR_SLOTS; k++)
		t->hs[k].fd = -1;
	door->nslots = door_room();
	door->t = t;
	return 0;
}

static void door_close(struct lm_door *door)
{
	if (!door->t)
		return;
	close(door->t->epfd);
	free(door->t);
	door->t = NULL;
}

int lm_door_start(struct lm_door *door)
{
	int ret = door_open(door);

	if (!ret && lm_thread_start(&door->tid, doorman, door))
		ret = -EAGAIN;
	if (ret) {
		fprintf(stderr, "lm: destination: cannot open the door: %s\n", strerror(-ret));
		door_close(door);
		return ret;
	}
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
	door_close(door);
	for (int k = 0; k < 2; k++) {
		if (door->rejoin_fd[k] >= 0)
			close(door->rejoin_fd[k]);
		if (door->given_fd[k] >= 0)
			close(door->given_fd[k]);
		door->rejoin_fd[k] = door->given_fd[k] = -1;
	}
}

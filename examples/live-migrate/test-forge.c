// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * No unauthenticated frame changes state.  A table generated from the frame
 * types of proto.h (1 .. LM_TYPE_END - 1: a new type is a new row by
 * itself) x every phase of the handshake and of the stream x a forged, a
 * replayed and a cut version of that frame, and what each end must do.
 *
 * The source's end (lm_auth_client, then lm_recv) against a scripted
 * destination that speaks the real handshake up to the phase:
 *   challenge  in place of CHALLENGE (clear)   the connect fails, and
 *   auth-ok    in place of AUTH_OK (clear)     lm_auth_answered() says it is
 *   admit      in place of ADMIT (sealed)      not the destination's word:
 *                                              a rejoin asks again
 *   stream     after ADMIT (sealed)            lm_recv refuses it
 *                                              (-EKEYREJECTED) or it is cut
 *                                              (-EPIPE); nothing is returned
 * A REFUSE row is run once for every reason it can carry.  That a rejoin
 * goes on when lm_auth_answered() is false is source.c's rule; the
 * FORGED_REFUSE drill (tests/drills) shows it end to end.
 *
 * The destination's end (the door, run in this process):
 *   auth       in place of AUTH (clear)        no AUTH_OK, nothing admitted
 *   hello      in place of HELLO (sealed)      no answer at all, nothing
 *                                              admitted
 * and afterwards a real source still gets in.
 *
 * And before any of it: a source facing a stranger that cannot prove the
 * key sends it AUTH and nothing else -- no HELLO.
 *
 * forged: made up by someone without the key (clear, or sealed under a key
 * of its own).  replayed: a genuine frame of an earlier connection (the same
 * shared key, other nonces), or on the stream this connection's own
 * earlier number.  cut: the forged frame's first half, then EOF.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <sodium.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

static const uint8_t key[LM_KEYLEN] = { 36, 37, 1, 2, 3 };

enum variant { FORGED, REPLAYED, CUT, NVARIANT };
static const char *const vname[NVARIANT] = { "forged", "replayed", "cut" };

enum phase { P_CHALLENGE, P_AUTH_OK, P_ADMIT, P_STREAM, NPHASE };
static const char *const pname[NPHASE] = { "challenge", "auth-ok", "admit", "stream" };

static bool put(int fd, const void *b, size_t n)
{
	return send(fd, b, n, MSG_NOSIGNAL) == (ssize_t)n;
}

static bool get(int fd, void *b, size_t n)
{
	for (size_t k = 0; k < n; ) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, 5000) <= 0)
			return false;
		r = read(fd, (char *)b + k, n - k);
		if (r <= 0)
			return false;
		k += (size_t)r;
	}
	return true;
}

/* The fixed part a frame of type t carries: zeros, the right version, why. */
static void fill(unsigned int t, unsigned int why, uint8_t *fixed)
{
	memset(fixed, 0, 512);
	if (t == LM_CHALLENGE)
		((struct lm_challenge *)fixed)->version = LM_VERSION;
	if (t == LM_REFUSE)
		((struct lm_refuse *)fixed)->why = why;
	if (t == LM_HELLO)
		*(struct lm_hello *)fixed = (struct lm_hello){
			.version = LM_VERSION, .mode = LM_MODE_MINOR, .size = 65536,
			.page_size = 4096, .nthreads = 1 };
}

/* A connection key of an earlier handshake: genuine, and not this one's. */
static void earlier_key(struct lm_sealkey *sk)
{
	struct lm_challenge ch = { .version = LM_VERSION };
	struct lm_auth a = { .kind = LM_AUTH_MAIN };

	randombytes_buf(ch.nonce, LM_NONCE);
	randombytes_buf(a.nonce, LM_NONCE);
	lm_conn_key(sk, key, &ch, &a);
}

/* A genuine clear frame of an earlier handshake where one exists (AUTH_OK,
 * AUTH), else what a forger makes. */
static size_t earlier_clear(uint8_t *b, size_t cap, unsigned int t, const uint8_t *fixed)
{
	struct lm_challenge ch = { .version = LM_VERSION };
	struct lm_auth a = { .kind = LM_AUTH_MAIN };
	struct lm_auth_ok ok;

	randombytes_buf(ch.nonce, LM_NONCE);
	randombytes_buf(a.nonce, LM_NONCE);
	if (t == LM_AUTH_OK) {
		lm_auth_ok_make(&ok, key, &ch, &a);
		return lm_frame_encode(b, cap, t, 0, &ok, NULL, 0);
	}
	if (t == LM_AUTH) {
		lm_auth_sign(&a, key, &ch);
		return lm_frame_encode(b, cap, t, 0, &a, NULL, 0);
	}
	return lm_frame_encode(b, cap, t, 0, fixed, NULL, 0);
}

/*
 * The bad frame of type t from the given end (source: true) into b: its
 * length.  sealed: the phase expects a sealed frame, numbered n under cur.
 */
static size_t bad_frame(uint8_t *b, size_t cap, unsigned int t, unsigned int why, enum variant v,
			bool from_source, bool sealed, const struct lm_sealkey *cur, uint64_t n)
{
	uint8_t fixed[512];
	struct lm_sealkey other;
	size_t len;

	fill(t, why, fixed);
	if (v == REPLAYED && sealed && n > 0) {
		len = lm_frame_seal(b, cap, cur, from_source, n - 1, t, 0, fixed);
	} else if (v == REPLAYED && sealed) {
		earlier_key(&other);
		len = lm_frame_seal(b, cap, &other, from_source, n, t, 0, fixed);
	} else if (v == REPLAYED) {
		len = earlier_clear(b, cap, t, fixed);
	} else if (sealed) {
		randombytes_buf(other.k, sizeof(other.k));
		other.plain = false;
		len = lm_frame_seal(b, cap, &other, from_source, n, t, 0, fixed);
	} else {
		len = lm_frame_encode(b, cap, t, 0, fixed, NULL, 0);
	}
	assert_true(len > 0);
	return v == CUT ? len / 2 : len;
}

/* Everything until EOF (or 3 s of silence), into b: its length. */
static size_t read_all_of(int fd, uint8_t *b, size_t cap)
{
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (n == cap || poll(&p, 1, 3000) <= 0)
			return n;
		r = read(fd, b + n, cap - n);
		if (r <= 0)
			return n;
		n += (size_t)r;
	}
}

/* ---- the source's end ------------------------------------------------ */

struct cell {
	int fd;
	enum phase ph;
	unsigned int t, why;
	enum variant v;
};

/* The destination, honest up to the phase, then the bad frame and EOF. */
static void *fake_dest(void *arg)
{
	struct cell *c = arg;
	struct lm_challenge ch = { .version = LM_VERSION };
	struct {
		struct lm_hdr h;
		struct lm_auth a;
	} in;
	struct lm_sealkey sk = { 0 };
	struct lm_auth_ok ok;
	struct lm_hdr h;
	uint8_t b[1024];
	uint64_t n = 0;

	randombytes_buf(ch.nonce, LM_NONCE);
	if (c->ph == P_CHALLENGE)
		goto bad;
	put(c->fd, b, lm_frame_encode(b, sizeof(b), LM_CHALLENGE, 0, &ch, NULL, 0));
	if (!get(c->fd, &in, sizeof(in)))
		goto out;
	if (c->ph == P_AUTH_OK)
		goto bad;
	lm_auth_ok_make(&ok, key, &ch, &in.a);
	put(c->fd, b, lm_frame_encode(b, sizeof(b), LM_AUTH_OK, 0, &ok, NULL, 0));
	lm_conn_key(&sk, key, &ch, &in.a);
	/* the sealed HELLO */
	if (!get(c->fd, &h, sizeof(h)) || h.len + LM_TAGLEN > sizeof(b) ||
	    !get(c->fd, b, h.len + LM_TAGLEN))
		goto out;
	if (c->ph == P_STREAM) {
		put(c->fd, b, lm_frame_seal(b, sizeof(b), &sk, false, 0, LM_ADMIT, 0, NULL));
		n = 1;
	}
bad:
	put(c->fd, b, bad_frame(b, sizeof(b), c->t, c->why, c->v, false, c->ph >= P_ADMIT, &sk,
				n));
out:
	shutdown(c->fd, SHUT_WR);
	return NULL;
}

/* One cell: 1 when it went as it must, else 0 with why on the output. */
static int source_cell(enum phase ph, unsigned int t, unsigned int why, enum variant v)
{
	const uint8_t session[LM_SESSION] = { 7 };
	const struct lm_geom g = { .npages = 16, .page_size = 4096 };
	struct lm_hello hello = { .version = LM_VERSION, .mode = LM_MODE_MINOR, .size = 65536,
				  .page_size = 4096, .nthreads = 1 };
	struct cell c = { .ph = ph, .t = t, .why = why, .v = v };
	struct lm_fin fin = { 0 };
	struct lm_conn conn;
	struct lm_frame f;
	pthread_t tid;
	int sv[2], ret, ok;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c.fd = sv[1];
	assert_int_equal(lm_conn_init(&conn, sv[0], "main", NULL, 5000), 0);
	assert_int_equal(pthread_create(&tid, NULL, fake_dest, &c), 0);
	ret = lm_auth_client(&conn, key, LM_AUTH_REJOIN_MAIN, 0, session, &g, &hello, &fin);
	if (ph == P_STREAM) {
		/* the handshake was honest: it went through */
		ok = ret == 0;
		if (ok)
			ret = lm_recv(&conn, &g, &f);
		ok = ok && (ret == -EKEYREJECTED || (v == CUT && ret == -EPIPE));
	} else {
		ok = ret && !lm_auth_answered(&conn, ret) && !fin.npages;
	}
	if (!ok)
		print_message("# source, %s phase: %s %s (why %u): %d (%s), the destination's "
			      "word: %s\n", pname[ph], vname[v], lm_type_name(t), why, ret,
			      conn.err, lm_auth_answered(&conn, ret) ? "yes" : "no");
	pthread_join(tid, NULL);
	close(sv[1]);
	lm_conn_close(&conn);
	return ok;
}

static void test_source_table(void **state)
{
	unsigned int cells = 0, good = 0;

	(void)state;
	for (int ph = 0; ph < NPHASE; ph++)
		for (unsigned int t = 1; t < LM_TYPE_END; t++)
			for (unsigned int why = 0; why < (t == LM_REFUSE ? LM_REFUSE_END : 1u);
			     why++)
				for (int v = 0; v < NVARIANT; v++) {
					cells++;
					good += (unsigned int)source_cell(ph, t, why, v);
				}
	print_message("# source's end: %u of %u cells as they must be\n", good, cells);
	assert_int_equal(good, cells);
}

/* A stranger in the destination's place: it sends a CHALLENGE, reads AUTH and
 * answers with an AUTH_OK it cannot make right.  All it may have seen is AUTH:
 * the source says nothing of substance before the proof (issue 37). */
static void *stranger(void *arg)
{
	int fd = *(int *)arg;
	struct lm_challenge ch = { .version = LM_VERSION };
	struct lm_auth_ok ok = { { 0 } };
	struct {
		struct lm_hdr h;
		struct lm_auth a;
	} in;
	static uint8_t b[65536];
	size_t n = 0;

	randombytes_buf(ch.nonce, LM_NONCE);
	put(fd, b, lm_frame_encode(b, sizeof(b), LM_CHALLENGE, 0, &ch, NULL, 0));
	if (get(fd, &in, sizeof(in)) && in.h.type == LM_AUTH) {
		put(fd, b, lm_frame_encode(b, sizeof(b), LM_AUTH_OK, 0, &ok, NULL, 0));
		n = read_all_of(fd, b, sizeof(b));
	} else {
		n = sizeof(b);
	}
	shutdown(fd, SHUT_WR);
	return (void *)(uintptr_t)n;
}

static void test_nothing_before_proof(void **state)
{
	const uint8_t session[LM_SESSION] = { 3 };
	struct lm_hello hello = { .mode = LM_MODE_MINOR, .size = 65536, .page_size = 4096,
				  .nthreads = 1 };
	struct lm_conn c;
	pthread_t tid;
	void *after_auth;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(lm_conn_init(&c, sv[0], "main", NULL, 5000), 0);
	assert_int_equal(pthread_create(&tid, NULL, stranger, &sv[1]), 0);
	assert_int_equal(lm_auth_client(&c, key, LM_AUTH_MAIN, 0, session, NULL, &hello, NULL),
			 -EACCES);
	assert_true(strstr(c.err, "did not prove the key") != NULL);
	lm_conn_close(&c);
	pthread_join(tid, &after_auth);
	close(sv[1]);
	print_message("# the stranger got %zu bytes after AUTH\n", (size_t)(uintptr_t)after_auth);
	assert_int_equal((size_t)(uintptr_t)after_auth, 0);
}

/* ---- the destination's end ------------------------------------------- */

static struct lm_opts dopts;
static struct lm_door door;
static char daddr[64];

static bool door_admitted(void)
{
	bool yes;

	pthread_mutex_lock(&door.lock);
	yes = door.have_session || door.given_fd[0] >= 0;
	pthread_mutex_unlock(&door.lock);
	return yes;
}

/* Whether a frame of type t starts anywhere at a frame boundary in b. */
static bool says(const uint8_t *b, size_t n, unsigned int t, bool sealed)
{
	for (size_t at = 0; at + sizeof(struct lm_hdr) <= n; ) {
		struct lm_hdr h;

		memcpy(&h, b + at, sizeof(h));
		if (h.type == t)
			return true;
		at += sizeof(h) + h.len + (sealed ? LM_TAGLEN : 0);
	}
	return false;
}

enum { D_AUTH, D_HELLO, NDPHASE };
static const char *const dname[NDPHASE] = { "auth", "hello" };

static int door_cell(int ph, unsigned int t, enum variant v)
{
	struct {
		struct lm_hdr h;
		struct lm_challenge ch;
	} in;
	struct lm_auth a = { .kind = LM_AUTH_MAIN };
	struct lm_sealkey sk;
	uint8_t b[1024];
	int fd = lm_connect(daddr), ok = 1;
	size_t n;

	assert_true(fd >= 0);
	assert_true(get(fd, &in, sizeof(in)));
	assert_int_equal(in.h.type, LM_CHALLENGE);
	if (ph == D_HELLO) {
		struct {
			struct lm_hdr h;
			struct lm_auth_ok ok;
		} okf;

		randombytes_buf(a.session, LM_SESSION);
		randombytes_buf(a.nonce, LM_NONCE);
		lm_auth_sign(&a, key, &in.ch);
		assert_true(put(fd, b, lm_frame_encode(b, sizeof(b), LM_AUTH, 0, &a, NULL, 0)));
		/* the door proves the key first */
		assert_true(get(fd, &okf, sizeof(okf)));
		assert_int_equal(okf.h.type, LM_AUTH_OK);
		lm_conn_key(&sk, key, &in.ch, &a);
	}
	n = bad_frame(b, sizeof(b), t, 0, v, true, ph == D_HELLO, &sk, 0);
	put(fd, b, n);
	shutdown(fd, SHUT_WR);
	n = read_all_of(fd, b, sizeof(b));
	close(fd);
	if (ph == D_AUTH && says(b, n, LM_AUTH_OK, false)) {
		print_message("# door, auth phase: %s %s got AUTH_OK\n", vname[v],
			      lm_type_name(t));
		ok = 0;
	}
	if (ph == D_HELLO && n) {
		print_message("# door, hello phase: %s %s got an answer (%zu bytes)\n", vname[v],
			      lm_type_name(t), n);
		ok = 0;
	}
	if (door_admitted()) {
		print_message("# door, %s phase: %s %s was admitted\n", dname[ph], vname[v],
			      lm_type_name(t));
		ok = 0;
	}
	return ok;
}

static void test_door_table(void **state)
{
	const uint8_t session[LM_SESSION] = { 9 };
	struct lm_hello hello = { .mode = LM_MODE_MINOR, .size = 65536, .page_size = 4096,
				  .nthreads = 1 };
	unsigned int cells = 0, good = 0;
	struct lm_conn c;
	int lfd = lmt_listener(daddr, sizeof(daddr));

	(void)state;
	dopts = (struct lm_opts){ .mode = LM_MODE_MINOR, .timeout_ms = 2000, .have_key = true };
	memcpy(dopts.key, key, LM_KEYLEN);
	lm_door_init(&door, &dopts, lfd, 1u << 20);
	assert_int_equal(lm_door_start(&door), 0);
	for (int ph = 0; ph < NDPHASE; ph++)
		for (unsigned int t = 1; t < LM_TYPE_END; t++)
			for (int v = 0; v < NVARIANT; v++) {
				cells++;
				good += (unsigned int)door_cell(ph, t, v);
			}
	print_message("# destination's end: %u of %u cells as they must be\n", good, cells);
	assert_int_equal(good, cells);
	/* and the door still lets the real source in */
	assert_int_equal(lm_conn_init(&c, lm_connect(daddr), "main", NULL, 5000), 0);
	assert_int_equal(lm_auth_client(&c, key, LM_AUTH_MAIN, 0, session, NULL, &hello, NULL), 0);
	assert_true(door_admitted());
	lm_conn_close(&c);
	lm_door_stop(&door);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_before_proof),
		cmocka_unit_test(test_source_table),
		cmocka_unit_test(test_door_table),
	};

	signal(SIGPIPE, SIG_IGN);
	if (lm_crypto_init())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/* lm wire format: frame checks and paced, delayed connections. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sodium.h>

#include "proto.h"

static const char *const type_names[LM_TYPE_END] = {
	[LM_HELLO] = "HELLO", [LM_PAGES] = "PAGES", [LM_ROUND] = "ROUND",
	[LM_SWITCH] = "SWITCH", [LM_STALE] = "STALE", [LM_REQ] = "REQ",
	[LM_RESP] = "RESP", [LM_HASHES] = "HASHES", [LM_DONE] = "DONE",
	[LM_RESUMED] = "RESUMED", [LM_FIN] = "FIN", [LM_CHALLENGE] = "CHALLENGE",
	[LM_AUTH] = "AUTH", [LM_AUTH_OK] = "AUTH_OK", [LM_REFUSE] = "REFUSE", [LM_NEED] = "NEED",
	[LM_PROGRESS] = "PROGRESS", [LM_BYE] = "BYE", [LM_ADMIT] = "ADMIT",
};

static const size_t fixed_lens[LM_TYPE_END] = {
	[LM_HELLO] = sizeof(struct lm_hello), [LM_PAGES] = sizeof(struct lm_pages),
	[LM_ROUND] = sizeof(struct lm_round), [LM_SWITCH] = sizeof(struct lm_switch),
	[LM_STALE] = sizeof(struct lm_stale), [LM_REQ] = sizeof(struct lm_req),
	[LM_RESP] = sizeof(struct lm_resp), [LM_HASHES] = sizeof(struct lm_hashes),
	[LM_DONE] = sizeof(struct lm_done), [LM_RESUMED] = sizeof(struct lm_resumed),
	[LM_FIN] = sizeof(struct lm_fin), [LM_PROGRESS] = sizeof(struct lm_progress),
	[LM_BYE] = 0, [LM_ADMIT] = 0,
	[LM_CHALLENGE] = sizeof(struct lm_challenge),
	[LM_AUTH] = sizeof(struct lm_auth), [LM_AUTH_OK] = sizeof(struct lm_auth_ok),
	[LM_REFUSE] = sizeof(struct lm_refuse), [LM_NEED] = sizeof(struct lm_need),
};

static const char *const mode_names[LM_MODE_END] = {
	[LM_MODE_MINOR] = "minor", [LM_MODE_STOPCOPY] = "stop-copy",
	[LM_MODE_MISSING] = "postcopy-missing",
};

const char *lm_type_name(unsigned int type)
{
	return type > 0 && type < LM_TYPE_END ? type_names[type] : "unknown";
}

const char *lm_mode_name(unsigned int mode)
{
	return mode < LM_MODE_END ? mode_names[mode] : "unknown";
}

const char *lm_limit_name(unsigned int limit)
{
	static const char *const names[LM_LIMIT_END] = {
		[LM_LIMIT_OPTION] = "its --max-size",
		[LM_LIMIT_SIZE] = "its --size",
		[LM_LIMIT_MEMAVAIL] = "its MemAvailable",
		[LM_LIMIT_HUGEPAGES] = "its free huge pages",
		[LM_LIMIT_CGROUP] = "the room left in its cgroup: memory.max less memory.current",
		[LM_LIMIT_CGROUP_HUGETLB] = "the room left under its cgroup's hugetlb limit",
		[LM_LIMIT_CGROUP_V1] = "the room left in its cgroup: memory.limit_in_bytes less "
				       "memory.usage_in_bytes",
	};

	return limit < LM_LIMIT_END ? names[limit] : "its limit";
}

int lm_mode_parse(const char *s)
{
	for (int m = 0; m < LM_MODE_END; m++)
		if (!strcmp(s, mode_names[m]))
			return m;
	return -EINVAL;
}

/* The handshake comes before any geometry is known. */
bool lm_type_before_hello(unsigned int type)
{
	return type == LM_CHALLENGE || type == LM_AUTH || type == LM_AUTH_OK || type == LM_REFUSE ||
	       type == LM_ADMIT;
}

size_t lm_fixed_len(unsigned int type)
{
	return type > 0 && type < LM_TYPE_END ? fixed_lens[type] : 0;
}

/* Largest payload a type may carry: bounds what a peer can make us read. */
static size_t max_len(unsigned int type)
{
	switch (type) {
	case LM_PAGES:
	case LM_RESP:
		return LM_MAX_PAYLOAD;
	case LM_STALE:
	case LM_HASHES:
	case LM_NEED:
		return sizeof(struct lm_stale) + 65536;
	default:
		return fixed_lens[type];
	}
}

int lm_hdr_check(const struct lm_hdr *h, char *err, size_t errlen)
{
	if (h->magic != LM_MAGIC) {
		snprintf(err, errlen, "bad frame magic 0x%08x (type %u)", h->magic, h->type);
		return -EBADMSG;
	}
	if (h->type == 0 || h->type >= LM_TYPE_END) {
		snprintf(err, errlen, "unknown frame type %u", h->type);
		return -EBADMSG;
	}
	if (h->flags & ~LM_F_ALL) {
		snprintf(err, errlen, "%s frame: unknown flags 0x%x", type_names[h->type], h->flags);
		return -EBADMSG;
	}
	if (h->len > max_len(h->type)) {
		snprintf(err, errlen, "oversized %s frame: %u bytes, at most %zu",
			 type_names[h->type], h->len, max_len(h->type));
		return -EMSGSIZE;
	}
	if (h->len < fixed_lens[h->type]) {
		snprintf(err, errlen, "short %s frame: %u bytes, need %zu", type_names[h->type],
			 h->len, fixed_lens[h->type]);
		return -EBADMSG;
	}
	return 0;
}

static int bad(char *err, size_t errlen, const char *type, const char *what)
{
	snprintf(err, errlen, "malformed %s frame: %s", type, what);
	return -EBADMSG;
}

static int check_hello(const struct lm_hello *m, char *err, size_t n)
{
	if (m->version != LM_VERSION)
		return bad(err, n, "HELLO", "protocol version differs");
	if (m->mode >= LM_MODE_END)
		return bad(err, n, "HELLO", "unknown mode");
	if (m->page_size < 4096 || m->page_size > LM_MAX_PAGE ||
	    (m->page_size & (m->page_size - 1)))
		return bad(err, n, "HELLO", "page size not a power of two in 4 KiB..2 MiB");
	if (!m->size || m->size % m->page_size || m->size / m->page_size > LM_MAX_NPAGES)
		return bad(err, n, "HELLO", "size not a non-zero multiple of the page size");
	if (m->nthreads < 1 || m->nthreads > 64)
		return bad(err, n, "HELLO", "threads not in 1..64");
	return 0;
}

/* first + count pages within the region, count in 1..max */
static bool span_ok(const struct lm_geom *g, uint64_t first, uint64_t count, uint64_t max)
{
	return count >= 1 && count <= max && first < g->npages && count <= g->npages - first;
}

static int check_body(const struct lm_hdr *h, const void *p, const struct lm_geom *g,
		      size_t rest, char *err, size_t n)
{
	const char *name = type_names[h->type];

	switch (h->type) {
	case LM_HELLO:
		return check_hello(p, err, n);
	case LM_PAGES: {
		const struct lm_pages *m = p;

		if (!span_ok(g, m->first, m->count, LM_MAX_PAGES) ||
		    rest != (size_t)m->count * g->page_size)
			return bad(err, n, name, "page span outside the region or wrong length");
		return 0;
	}
	case LM_STALE: {
		const struct lm_stale *m = p;

		if (!span_ok(g, m->first, m->nbits, 65536 * 8) || rest != (m->nbits + 7u) / 8)
			return bad(err, n, name, "bitmap outside the region or wrong length");
		return 0;
	}
	case LM_HASHES: {
		const struct lm_hashes *m = p;

		if (!span_ok(g, m->first, m->count, 8192) || rest != (size_t)m->count * 8)
			return bad(err, n, name, "hash span outside the region or wrong length");
		return 0;
	}
	case LM_NEED: {
		const struct lm_need *m = p;

		if (!span_ok(g, m->first, m->nbits, 65536 * 8) || rest != (m->nbits + 7u) / 8)
			return bad(err, n, name, "bitmap outside the region or wrong length");
		return 0;
	}
	case LM_CHALLENGE: {
		const struct lm_challenge *m = p;

		if (m->version != LM_VERSION)
			return bad(err, n, name, "protocol version differs");
		if (m->flags & ~(LM_CHAL_VERIFY | LM_CHAL_PLAIN))
			return bad(err, n, name, "unknown flags");
		return 0;
	}
	case LM_FIN: {
		const struct lm_fin *m = p;

		if (m->npages != g->npages || m->mapped > m->npages || m->verified > m->npages ||
		    m->mismatched > m->npages || m->rc > 255 ||
		    m->flags & ~(LM_FIN_VERIFY | LM_FIN_INVARIANTS | LM_FIN_SIGBUS))
			return bad(err, n, name, "a verdict that cannot be");
		return 0;
	}
	case LM_PROGRESS: {
		const struct lm_progress *m = p;

		if (m->mapped > g->npages || m->phase > LM_PHASE_CHECKING)
			return bad(err, n, name, "progress that cannot be");
		return 0;
	}
	case LM_AUTH:
		if (((const struct lm_auth *)p)->kind >= LM_AUTH_KIND_END)
			return bad(err, n, name, "unknown connection kind");
		if (((const struct lm_auth *)p)->flags & ~LM_AUTH_PLAIN)
			return bad(err, n, name, "unknown flags");
		return 0;
	case LM_REFUSE:
		if (((const struct lm_refuse *)p)->why >= LM_REFUSE_END)
			return bad(err, n, name, "unknown reason");
		return 0;
	case LM_REQ:
		if (((const struct lm_req *)p)->page >= g->npages)
			return bad(err, n, name, "page outside the region");
		return 0;
	case LM_RESP: {
		const struct lm_resp *m = p;
		size_t want = m->status == LM_RESP_DATA ? g->page_size : 0;

		if (m->page >= g->npages || m->status > LM_RESP_PUSHED || rest != want)
			return bad(err, n, name, "page outside the region, bad status or length");
		return 0;
	}
	default:
		return 0;
	}
}

int lm_payload_check(const struct lm_hdr *h, const void *payload, const struct lm_geom *g,
		     struct lm_frame *f, char *err, size_t errlen)
{
	size_t fl = fixed_lens[h->type];
	int ret;

	if (!g->page_size && h->type != LM_HELLO && !lm_type_before_hello(h->type)) {
		snprintf(err, errlen, "%s frame before HELLO", type_names[h->type]);
		return -EBADMSG;
	}
	if (h->type != LM_PAGES && h->type != LM_RESP && h->type != LM_STALE &&
	    h->type != LM_HASHES && h->type != LM_NEED && h->len != fl)
		return bad(err, errlen, type_names[h->type], "trailing bytes");
	ret = check_body(h, payload, g, h->len - fl, err, errlen);
	if (ret)
		return ret;
	f->h = *h;
	f->fixed = payload;
	f->data = (const uint8_t *)payload + fl;
	f->data_len = h->len - fl;
	return 0;
}

int lm_frame_decode(const void *buf, size_t len, const struct lm_geom *g, struct lm_frame *f,
		    char *err, size_t errlen)
{
	struct lm_hdr h;
	int ret;

	if (len < sizeof(h)) {
		snprintf(err, errlen, "truncated frame header: %zu of %zu bytes", len, sizeof(h));
		return -EBADMSG;
	}
	memcpy(&h, buf, sizeof(h));
	ret = lm_hdr_check(&h, err, errlen);
	if (ret)
		return ret;
	if (len - sizeof(h) != h.len) {
		snprintf(err, errlen, "truncated %s frame: %zu of %u payload bytes",
			 type_names[h.type], len - sizeof(h), h.len);
		return -EBADMSG;
	}
	return lm_payload_check(&h, (const uint8_t *)buf + sizeof(h), g, f, err, errlen);
}

size_t lm_frame_encode(void *buf, size_t cap, unsigned int type, unsigned int flags,
		       const void *fixed, const void *data, size_t data_len)
{
	size_t fl = lm_fixed_len(type);
	struct lm_hdr h = {
		.magic = LM_MAGIC, .type = type, .flags = flags,
		.len = (uint32_t)(fl + data_len),
	};

	if (sizeof(h) + fl + data_len > cap)
		return 0;
	memcpy(buf, &h, sizeof(h));
	if (fl)
		memcpy((char *)buf + sizeof(h), fixed, fl);
	if (data_len)
		memcpy((char *)buf + sizeof(h) + fl, data, data_len);
	return sizeof(h) + fl + data_len;
}

/* ---- time and links ------------------------------------------------ */

volatile sig_atomic_t lm_interrupted;
volatile sig_atomic_t lm_committed;
static volatile sig_atomic_t interrupts;

/*
 * SIGINT/SIGTERM: before the commit every wait gives up (-ECANCELED) and the
 * source resumes its workload; after it the workload lives on the
 * destination and needs both ends, so the first one only says so and a
 * second one abandons it.
 */
static void on_interrupt(int sig)
{
	static const char msg[] = "lm: interrupted after the switch-over: the workload runs on "
				  "the destination and needs both ends; finishing (interrupt "
				  "again to abandon it)\n";

	(void)sig;
	if (!lm_committed) {
		lm_interrupted = 1;
		return;
	}
	if (interrupts++)
		_exit(130);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		interrupts++;
}

void lm_catch_interrupts(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * Every thread but the main one is started with SIGINT and SIGTERM blocked,
 * so an interrupt is handled by the main thread, on its way back from the
 * call it interrupted: it sees lm_interrupted at its next check, not at
 * some other thread's (the tests stop a side, interrupt it and continue it,
 * and expect that interrupt to count where it stopped).
 */
int lm_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	sigset_t mask, old;
	int ret;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	ret = pthread_create(tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret ? -ret : 0;
}

/*
 * poll one fd in slices of 100 ms, so an interrupt is seen whichever thread
 * took the signal: 1 ready, 0 timed out (timeout_ms <= 0: never),
 * -ECANCELED interrupted.
 */
int lm_wait_fd(int fd, short events, int timeout_ms)
{
	uint64_t end = timeout_ms > 0 ? lm_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int slice = 100, pr;

		if (lm_interrupted)
			return -ECANCELED;
		if (end) {
			uint64_t now = lm_now_ns();

			if (now >= end)
				return 0;
			if (end - now < 100000000ull)
				slice = (int)((end - now) / 1000000ull) + 1;
		}
		pr = poll(&p, 1, slice);
		if (pr > 0)
			return 1;
		if (pr < 0 && errno != EINTR)
			return -errno;
	}
}

uint64_t lm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void lm_trace(const char *fmt, ...)
{
	static int fd = -2;
	char buf[200];
	va_list ap;
	int n;

	if (fd == -2) {
		const char *path = getenv("LM_TRACE");

		fd = path && *path ? open(path, O_WRONLY | O_CLOEXEC) : -1;
	}
	if (fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && write(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		fd = -1;
}

void lm_sleep_until(uint64_t t_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(t_ns / 1000000000ull),
		.tv_nsec = (long)(t_ns % 1000000000ull),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
	       !lm_interrupted)
		;
}

void lm_link_init(struct lm_link *l, uint64_t bps, uint64_t rtt_ns)
{
	pthread_mutex_init(&l->lock, NULL);
	l->bps = bps;
	l->free_at_ns = 0;
	l->rtt_ns = rtt_ns;
}

/*
 * A wait shorter than this is not slept: a timer wake-up costs more than
 * that under TCG (~0.1-0.3 ms), and a 64-byte SWITCH at 1 Gbit/s would pay
 * it for 0.5 us of wire time.  The reservation still moves, so the next
 * frame waits for both and the long-run rate holds.
 */
#define LM_PACE_MIN_SLEEP_NS 200000ull

static void pace_wait(uint64_t done)
{
	if (done > lm_now_ns() + LM_PACE_MIN_SLEEP_NS)
		lm_sleep_until(done);
}

/* When n bytes started at start would have left (l->bps set). */
static uint64_t wire_done(const struct lm_link *l, uint64_t start, size_t n)
{
	return start + (uint64_t)((double)n * 1e9 / (double)l->bps);
}

/*
 * Reserve the wire for n bytes (l->lock held); when they will have left.
 * An urgent frame does not wait for the bulk already queued: on a real
 * link its packets interleave with the other connection's, so it only
 * pushes the bulk back by its own length.
 */
static uint64_t link_reserve(struct lm_link *l, uint64_t now, size_t n, bool urgent)
{
	uint64_t start = l->free_at_ns > now && !urgent ? l->free_at_ns : now;
	uint64_t done = wire_done(l, start, n);

	if (urgent && l->free_at_ns > now)
		l->free_at_ns += done - now;
	else
		l->free_at_ns = done;
	return done;
}

/* Reserve the wire for n bytes; return when they would have left. */
static void link_pace(struct lm_link *l, size_t n, bool urgent)
{
	uint64_t done;

	if (!l || !l->bps)
		return;
	pthread_mutex_lock(&l->lock);
	done = link_reserve(l, lm_now_ns(), n, urgent);
	pthread_mutex_unlock(&l->lock);
	pace_wait(done);
}

/* link_pace for a sender that must not wait: false, nothing reserved, when it would. */
static bool link_pace_nowait(struct lm_link *l, size_t n, bool urgent)
{
	uint64_t now;
	bool ok;

	if (!l || !l->bps)
		return true;
	if (pthread_mutex_trylock(&l->lock))
		return false;
	now = lm_now_ns();
	ok = wire_done(l, urgent || l->free_at_ns <= now ? now : l->free_at_ns, n) <=
	     now + LM_PACE_MIN_SLEEP_NS;
	if (ok)
		link_reserve(l, now, n, urgent);
	pthread_mutex_unlock(&l->lock);
	return ok;
}

int lm_conn_init(struct lm_conn *c, int fd, const char *name, struct lm_link *link,
		 int timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->name = name;
	c->urgent = !strcmp(name, "urgent");
	c->link = link;
	c->rx_delay_ns = link ? link->rtt_ns / 2 : 0;
	c->timeout_ms = timeout_ms;
	c->tx_timeout_ms = timeout_ms;
	pthread_mutex_init(&c->wlock, NULL);
	c->buf = malloc(LM_MAX_PAYLOAD);
	c->txbuf = malloc(LM_MAX_PAYLOAD);
	return c->buf && c->txbuf ? 0 : -ENOMEM;
}

static void seal_locked(struct lm_conn *c, const struct lm_sealkey *sk, bool source,
			uint64_t next);

void lm_conn_replace(struct lm_conn *c, int fd, const struct lm_sealkey *sk)
{
	pthread_mutex_lock(&c->wlock);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = fd;
	c->err[0] = 0;
	c->pend_len = 0;	/* the old stream's */
	/* sealed before any sender can see the new socket; the door used
	 * number 0 each way (HELLO in, ADMIT out) */
	seal_locked(c, sk, false, 1);
	pthread_mutex_unlock(&c->wlock);
}

/* One direction's key: the connection's, narrowed by a label. */
static void dir_key(uint8_t out[32], const uint8_t k[32], bool to_dest)
{
	static const char s2d[] = "lm-frames-5 source to destination",
			  d2s[] = "lm-frames-5 destination to source";
	const char *label = to_dest ? s2d : d2s;

	crypto_generichash(out, 32, (const uint8_t *)label, strlen(label), k, 32);
}

/*
 * Nonces.  Each direction of each connection has a key of its own, derived
 * from the shared key and both ends' fresh nonces of that connection's
 * handshake (lm_conn_key); a frame's nonce is its number under that key,
 * counted from 0 and never reset while the key lives.  A rejoin is a new
 * connection with a new handshake -- two new random 32-byte nonces -- so a
 * new key: numbers start again from 0 under a key never used before.  A
 * (key, nonce) pair can repeat only if a 256-bit key derived from 64 random
 * bytes repeats, or a 64-bit counter wraps.
 */
static void seal_locked(struct lm_conn *c, const struct lm_sealkey *sk, bool source,
			uint64_t next)
{
	dir_key(c->tx_key, sk->k, source);
	dir_key(c->rx_key, sk->k, !source);
	c->seq = next;
	c->rx_seq = next;
	c->plain = sk->plain;
	c->sealed = true;
}

void lm_conn_seal(struct lm_conn *c, const struct lm_sealkey *sk, bool source, uint64_t next)
{
	pthread_mutex_lock(&c->wlock);
	seal_locked(c, sk, source, next);
	pthread_mutex_unlock(&c->wlock);
}

static void frame_nonce(uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES],
			uint64_t n)
{
	memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
	for (int i = 0; i < 8; i++)
		nonce[i] = (uint8_t)(n >> (8 * i));
}

/*
 * Seal the payload p (len bytes) of frame number n in place: encrypt it
 * with XChaCha20-Poly1305 (libsodium's AEAD), the header as associated
 * data, so the tag covers both; --plaintext: the payload stays as it is and
 * the tag is a keyed BLAKE2b over the number, the header and the payload.
 */
static void seal_payload(const uint8_t key[32], bool plain, uint64_t n, const struct lm_hdr *h,
			 uint8_t *p, size_t len, uint8_t tag[LM_TAGLEN])
{
	uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];

	frame_nonce(nonce, n);
	if (plain) {
		crypto_generichash_state st;

		crypto_generichash_init(&st, key, 32, LM_TAGLEN);
		crypto_generichash_update(&st, nonce, 8);
		crypto_generichash_update(&st, (const uint8_t *)h, sizeof(*h));
		crypto_generichash_update(&st, p, len);
		crypto_generichash_final(&st, tag, LM_TAGLEN);
		return;
	}
	crypto_aead_xchacha20poly1305_ietf_encrypt_detached(p, tag, NULL, p, len,
							     (const uint8_t *)h, sizeof(*h),
							     NULL, nonce, key);
}

/* The reverse: 0 with p in clear, or -EKEYREJECTED (p is then garbage). */
static int open_payload(const uint8_t key[32], bool plain, uint64_t n, const struct lm_hdr *h,
			uint8_t *p, size_t len, const uint8_t tag[LM_TAGLEN])
{
	uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES], want[LM_TAGLEN];

	if (plain) {
		seal_payload(key, true, n, h, p, len, want);
		return sodium_memcmp(want, tag, LM_TAGLEN) ? -EKEYREJECTED : 0;
	}
	frame_nonce(nonce, n);
	return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(p, NULL, p, len, tag,
								    (const uint8_t *)h, sizeof(*h),
								    nonce, key) ? -EKEYREJECTED : 0;
}

/* Why frame h, expected as number n, failed: into err. */
static void open_failed(char *err, size_t errlen, const char *conn, const struct lm_hdr *h,
			uint64_t n)
{
	uint32_t want = (uint32_t)n;

	if (h->seq == want)
		snprintf(err, errlen, "%s%s frame (seq %u) fails authentication: changed on the "
			 "way or not from our peer; refused", conn, lm_type_name(h->type), h->seq);
	else
		snprintf(err, errlen, "%s%s frame out of sequence (seq %u, expected %u): %s; "
			 "refused", conn, lm_type_name(h->type), h->seq, want,
			 h->seq < want ? "replayed or reordered" :
			 "a frame before it was dropped or reordered");
}

void lm_conn_close(struct lm_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	free(c->txbuf);
	c->buf = c->txbuf = NULL;
}

/*
 * Write it all, or fail when the peer takes nothing for timeout_ms: a
 * stopped peer's window fills and a blocking write would wait for good.
 */
static int write_all(int fd, struct iovec *iov, int n, int timeout_ms)
{
	while (n > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int pr = lm_wait_fd(fd, POLLOUT, timeout_ms);

			if (pr < 0)
				return pr;
			if (pr == 0)
				return -ETIMEDOUT;
			continue;
		}
		if (w < 0)
			return -errno;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

void lm_conn_lock(struct lm_conn *c)
{
	pthread_mutex_lock(&c->wlock);
}

bool lm_conn_trylock(struct lm_conn *c)
{
	return !pthread_mutex_trylock(&c->wlock);
}

void lm_conn_unlock(struct lm_conn *c)
{
	pthread_mutex_unlock(&c->wlock);
}

/* ret, with c->err saying what failed sending what. */
static int send_result(struct lm_conn *c, const char *what, int ret)
{
	if (ret == -ECANCELED)
		snprintf(c->err, sizeof(c->err), "%s connection: interrupted", c->name);
	else if (ret == -ETIMEDOUT)
		snprintf(c->err, sizeof(c->err), "%s connection: sending %s: the peer took "
			 "nothing for %d ms (stopped or unreachable)", c->name, what,
			 c->tx_timeout_ms);
	else if (ret)
		snprintf(c->err, sizeof(c->err), "%s connection: sending %s: %s", c->name,
			 what, strerror(-ret));
	return ret;
}

/* iov[0..n), len bytes of whole frames, after what a nowait send left. */
static int write_frames(struct lm_conn *c, const struct iovec *iov, int n, size_t len)
{
	struct iovec all[5];
	int k = 0, ret;

	if (c->pend_len)
		all[k++] = (struct iovec){ c->pend, c->pend_len };
	if (n)
		memcpy(all + k, iov, (size_t)n * sizeof(*iov));
	ret = write_all(c->fd, all, k + n, c->tx_timeout_ms);
	if (!ret) {
		c->pend_len = 0;
		c->tx_bytes += len;
	}
	return ret;
}

int lm_send_locked(struct lm_conn *c, unsigned int type, unsigned int flags, const void *fixed,
		   const void *data, size_t data_len)
{
	size_t fl = lm_fixed_len(type);
	struct lm_hdr h = {
		.magic = LM_MAGIC, .type = type, .flags = flags,
		.len = (uint32_t)(fl + data_len),
	};
	uint8_t tag[LM_TAGLEN];
	int n;
	struct iovec iov[4] = {
		{ &h, sizeof(h) }, { (void *)fixed, fl }, { (void *)data, data_len },
		{ tag, sizeof(tag) },
	};

	if (lm_interrupted)
		return send_result(c, lm_type_name(type), -ECANCELED);
	link_pace(c->link, sizeof(h) + fl + data_len, c->urgent);
	h.seq = (uint32_t)c->seq;
	h.ts_ns = lm_now_ns();
	n = data_len ? 3 : 2;
	if (c->sealed && c->txbuf) {
		/*
		 * Sealed in a copy: encryption needs a buffer of its own, and
		 * others write what goes out while it goes out (the workload a
		 * precopy page, the urgent server DONE's counters), which
		 * --plaintext's tag must match.
		 */
		if (fl)
			memcpy(c->txbuf, fixed, fl);
		if (data_len)
			memcpy(c->txbuf + fl, data, data_len);
		seal_payload(c->tx_key, c->plain, c->seq, &h, c->txbuf, fl + data_len, tag);
		iov[1] = (struct iovec){ c->txbuf, fl + data_len };
		iov[2] = iov[3];
		n = 3;
	}
	c->seq++;
	return send_result(c, lm_type_name(type),
			   write_frames(c, iov, n, sizeof(h) + fl + data_len +
					(c->sealed ? LM_TAGLEN : 0)));
}

int lm_send(struct lm_conn *c, unsigned int type, unsigned int flags, const void *fixed,
	    const void *data, size_t data_len)
{
	int ret;

	pthread_mutex_lock(&c->wlock);
	ret = lm_send_locked(c, type, flags, fixed, data, data_len);
	pthread_mutex_unlock(&c->wlock);
	return ret;
}

/*
 * One whole frame numbered seq into out -- header with the time, fixed part,
 * data, sealed under key unless it is NULL -- for the callers that send
 * bytes already built: its length, 0 when it is longer than cap.
 */
static size_t frame_build(const uint8_t *key, bool plain, uint8_t *out, size_t cap,
			  uint64_t seq, unsigned int type, unsigned int flags, const void *fixed,
			  const void *data, size_t data_len)
{
	size_t fl = lm_fixed_len(type);
	struct lm_hdr h = {
		.magic = LM_MAGIC, .type = type, .flags = flags,
		.len = (uint32_t)(fl + data_len), .seq = (uint32_t)seq, .ts_ns = lm_now_ns(),
	};
	size_t len = sizeof(h) + fl + data_len;

	if (len + (key ? LM_TAGLEN : 0) > cap)
		return 0;
	memcpy(out, &h, sizeof(h));
	if (fl)
		memcpy(out + sizeof(h), fixed, fl);
	if (data_len)
		memcpy(out + sizeof(h) + fl, data, data_len);
	if (!key)
		return len;
	seal_payload(key, plain, seq, &h, out + sizeof(h), fl + data_len, out + len);
	return len + LM_TAGLEN;
}

static size_t conn_frame_build(const struct lm_conn *c, uint8_t *out, size_t cap,
			       unsigned int type, unsigned int flags, const void *fixed,
			       const void *data, size_t data_len)
{
	return frame_build(c->sealed ? c->tx_key : NULL, c->plain, out, cap, c->seq, type,
			   flags, fixed, data, data_len);
}

size_t lm_frame_seal(void *out, size_t cap, const struct lm_sealkey *sk, bool source,
		     uint64_t n, unsigned int type, unsigned int flags, const void *fixed)
{
	uint8_t key[32];
	size_t len;

	dir_key(key, sk->k, source);
	len = frame_build(key, sk->plain, out, cap, n, type, flags, fixed, NULL, 0);
	sodium_memzero(key, sizeof(key));
	return len;
}

int lm_frame_open(void *frame, size_t len, const struct lm_sealkey *sk, bool source,
		  uint64_t n, char *err, size_t errlen)
{
	struct lm_hdr h;
	uint8_t key[32], *p = (uint8_t *)frame + sizeof(h);
	int ret;

	memcpy(&h, frame, sizeof(h));
	if (len != sizeof(h) + h.len + LM_TAGLEN) {
		snprintf(err, errlen, "%s frame of the wrong length", lm_type_name(h.type));
		return -EKEYREJECTED;
	}
	/* what the other end sent: its direction's key */
	dir_key(key, sk->k, !source);
	ret = open_payload(key, sk->plain, n, &h, p, h.len, p + h.len);
	sodium_memzero(key, sizeof(key));
	if (ret)
		open_failed(err, errlen, "", &h, n);
	return ret;
}

int lm_send_many_locked(struct lm_conn *c, unsigned int type, unsigned int flags,
			const void *fixed, size_t stride, unsigned int n)
{
	size_t wire = sizeof(struct lm_hdr) + lm_fixed_len(type);
	size_t one = wire + (c->sealed ? LM_TAGLEN : 0), len = 0;
	struct iovec iov;

	if (lm_interrupted)
		return send_result(c, lm_type_name(type), -ECANCELED);
	if (!c->txbuf || one * n > LM_MAX_PAYLOAD)
		return send_result(c, lm_type_name(type), -EMSGSIZE);
	link_pace(c->link, wire * n, c->urgent);
	for (unsigned int k = 0; k < n; k++, c->seq++)
		len += conn_frame_build(c, c->txbuf + len, one, type, flags,
					(const uint8_t *)fixed + k * stride, NULL, 0);
	iov = (struct iovec){ c->txbuf, len };
	return send_result(c, lm_type_name(type), write_frames(c, &iov, 1, len));
}

size_t lm_nowait_max;

int lm_send_nowait_locked(struct lm_conn *c, unsigned int type, unsigned int flags,
			  const void *fixed, const void *data, size_t data_len)
{
	uint8_t frame[LM_PEND_MAX];
	size_t len;
	ssize_t w;

	if (lm_interrupted)
		return send_result(c, lm_type_name(type), -ECANCELED);
	if (c->pend_len)
		return -EBUSY;		/* behind the rest of the last one */
	len = conn_frame_build(c, frame, sizeof(frame), type, flags, fixed, data, data_len);
	if (!len)
		return send_result(c, lm_type_name(type), -EMSGSIZE);
	if (!link_pace_nowait(c->link, sizeof(struct lm_hdr) + lm_fixed_len(type) + data_len,
			      c->urgent))
		return -EBUSY;
	do
		w = send(c->fd, frame, lm_nowait_max && lm_nowait_max < len ? lm_nowait_max : len,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -EAGAIN;
	if (w < 0)
		return send_result(c, lm_type_name(type), -errno);
	/* some of it is on the wire: the frame exists, its seq is used */
	c->seq++;
	c->tx_bytes += len;
	if ((size_t)w == len)
		return 0;
	memcpy(c->pend, frame + w, len - (size_t)w);
	c->pend_len = len - (size_t)w;
	return 1;
}

int lm_flush_locked(struct lm_conn *c)
{
	if (!c->pend_len)
		return 0;
	return send_result(c, "the rest of a frame", write_frames(c, NULL, 0, 0));
}

/* Read exactly n bytes; -EPIPE on EOF, -ETIMEDOUT when idle too long. */
static int read_all(struct lm_conn *c, void *buf, size_t n, size_t *got)
{
	*got = 0;
	while (*got < n) {
		int pr = 1;
		ssize_t r;

		if (c->spin_until_ns && lm_now_ns() < c->spin_until_ns) {
			r = recv(c->fd, (char *)buf + *got, n - *got, MSG_DONTWAIT);
			if (r > 0) {
				*got += (size_t)r;
				continue;
			}
			if (r == 0)
				return -EPIPE;
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		pr = lm_wait_fd(c->fd, POLLIN, c->timeout_ms);

		if (pr < 0)
			return pr;
		if (pr == 0)
			return -ETIMEDOUT;
		r = read(c->fd, (char *)buf + *got, n - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EPIPE;
		*got += (size_t)r;
	}
	return 0;
}

static const char *why(int ret)
{
	if (ret == -ECANCELED)
		return "interrupted";
	if (ret == -ETIMEDOUT)
		return "no data within --timeout (the peer stopped or is unreachable)";
	return ret == -EPIPE ? "closed by the peer" : strerror(-ret);
}

bool lm_err_is_protocol(int err)
{
	return err == -EBADMSG || err == -EMSGSIZE || err == -EPROTO;
}

/* Drop the connection with a reset: a stopped peer that wakes up finds an
 * error, not the frames still queued for it. */
void lm_conn_reset(struct lm_conn *c)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	if (c->fd < 0)
		return;
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	shutdown(c->fd, SHUT_RDWR);
}

/*
 * A sealed frame: its tag read, then the payload opened in place under the
 * number expected next, before anything in it is used.  An altered frame
 * fails, and so does a replayed, reordered or dropped one (its number, the
 * nonce, is not the one expected): refused by name, -EKEYREJECTED.
 */
static int check_seal(struct lm_conn *c, const struct lm_hdr *h)
{
	uint8_t tag[LM_TAGLEN];
	char conn[40];
	size_t got;
	int ret = read_all(c, tag, sizeof(tag), &got);

	if (ret) {
		snprintf(c->err, sizeof(c->err), "%s connection: truncated %s frame (its tag, %zu "
			 "of %d bytes): %s", c->name, lm_type_name(h->type), got, LM_TAGLEN,
			 why(ret));
		return ret;
	}
	c->rx_bytes += sizeof(tag);
	if (open_payload(c->rx_key, c->plain, c->rx_seq, h, c->buf, h->len, tag) ||
	    h->seq != (uint32_t)c->rx_seq) {
		snprintf(conn, sizeof(conn), "%s connection: ", c->name);
		open_failed(c->err, sizeof(c->err), conn, h, c->rx_seq);
		return -EKEYREJECTED;
	}
	c->rx_seq++;
	return 0;
}

int lm_recv(struct lm_conn *c, const struct lm_geom *g, struct lm_frame *f)
{
	struct lm_hdr h;
	size_t got;
	int ret;

	ret = read_all(c, &h, sizeof(h), &got);
	if (ret == -EPIPE && got == 0) {
		snprintf(c->err, sizeof(c->err), "%s connection closed by the peer", c->name);
		return ret;
	}
	if (ret == -ECANCELED) {
		snprintf(c->err, sizeof(c->err), "%s connection: interrupted", c->name);
		return ret;
	}
	if (ret == -ETIMEDOUT && got == 0) {
		snprintf(c->err, sizeof(c->err), "%s connection: nothing received for %d ms "
			 "(the peer stopped or is unreachable)", c->name, c->timeout_ms);
		return ret;
	}
	if (ret) {
		snprintf(c->err, sizeof(c->err), "%s connection: truncated frame header "
			 "(%zu of %zu bytes): %s", c->name, got, sizeof(h), why(ret));
		return ret;
	}
	ret = lm_hdr_check(&h, c->err, sizeof(c->err));
	if (ret)
		return ret;
	ret = read_all(c, c->buf, h.len, &got);
	if (ret) {
		snprintf(c->err, sizeof(c->err), "%s connection: truncated %s frame "
			 "(%zu of %u bytes): %s", c->name, lm_type_name(h.type), got, h.len,
			 why(ret));
		return ret;
	}
	c->rx_bytes += sizeof(h) + h.len;
	if (c->sealed && (ret = check_seal(c, &h)))
		return ret;
	/* --rtt: never longer than rtt/2 from now, whatever the send time says */
	if (c->rx_delay_ns) {
		uint64_t due = h.ts_ns + c->rx_delay_ns, cap = lm_now_ns() + c->rx_delay_ns;

		lm_sleep_until(due < cap ? due : cap);
	}
	return lm_payload_check(&h, c->buf, g, f, c->err, sizeof(c->err));
}

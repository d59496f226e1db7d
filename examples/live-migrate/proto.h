/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lm wire format: a fixed little-endian header, then a payload whose
 * fixed part depends on the type.  Every frame is checked against the
 * geometry announced in HELLO before anything in it is used.
 */
#ifndef LM_PROTO_H
#define LM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#define LM_MAGIC	0x314d4c4bu	/* "KLM1" */
#define LM_VERSION	5
#define LM_MAX_PAGES	64		/* pages per PAGES frame */
#define LM_MAX_PAGE	(2u << 20)	/* 2 MiB huge pages at most */
#define LM_MAX_PAYLOAD	(16u + (4u << 20))
#define LM_MAX_NPAGES	(1ull << 32)
#define LM_PEND_MAX	128		/* lm_send_nowait_locked's largest frame */

enum lm_type {
	LM_HELLO = 1,	/* src -> dst: geometry; flags URGENT on the 2nd conn */
	LM_PAGES,	/* src -> dst: page contents */
	LM_ROUND,	/* src -> dst: a precopy round ended; LAST: echo it (drained) */
	LM_SWITCH,	/* src -> dst: paused; resume now */
	LM_STALE,	/* src -> dst: a chunk of the stale bitmap */
	LM_REQ,		/* dst -> src (urgent): is this page stale? */
	LM_RESP,	/* src -> dst (urgent): clean, data, or being pushed */
	LM_HASHES,	/* src -> dst: per-page hashes at pause */
	LM_DONE,	/* src -> dst: all sent; source statistics */
	LM_RESUMED,	/* dst -> src: the workload runs on the destination */
	LM_FIN,		/* dst -> src: verified; the source may go */
	LM_CHALLENGE,	/* dst -> src, first on every connection: a nonce (clear) */
	LM_AUTH,	/* src -> dst: MAC over both nonces with the shared key (clear) */
	LM_AUTH_OK,	/* dst -> src: the destination's MAC: it has the key too (clear) */
	LM_REFUSE,	/* dst -> src: why this connection is refused; then close.
			 * Sealed, except KEY: a peer without the key cannot read it */
	LM_NEED,	/* dst -> src, after a reconnect: pages still wanted */
	LM_PROGRESS,	/* dst -> src, after DONE: still working, and how far */
	LM_BYE,		/* src -> dst: FIN came; the destination may go */
	LM_ADMIT,	/* dst -> src, sealed: HELLO accepted; the connection is in use */
	LM_TYPE_END,
};

/* header flags */
#define LM_F_URGENT	(1u << 0)	/* HELLO: this is the urgent connection */
#define LM_F_LAST	(1u << 1)	/* STALE/HASHES: the final chunk */
#define LM_F_PUSH	(1u << 2)	/* PAGES: postcopy background push */
#define LM_F_STOPCOPY	(1u << 3)	/* PAGES: sent while paused */
#define LM_F_ALL	(LM_F_URGENT | LM_F_LAST | LM_F_PUSH | LM_F_STOPCOPY)

struct lm_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t flags;
	uint32_t len;		/* payload bytes after the header */
	uint32_t seq;
	uint64_t ts_ns;		/* sender's CLOCK_MONOTONIC: --rtt emulation */
};

enum lm_mode { LM_MODE_MINOR, LM_MODE_STOPCOPY, LM_MODE_MISSING, LM_MODE_END };

struct lm_hello {
	uint32_t version;
	uint32_t mode;
	uint64_t size;
	uint32_t page_size;
	uint32_t backing;
	uint32_t nthreads;
	uint32_t verify;
	uint64_t boot;		/* hash of boot_id: are the clocks comparable? */
	uint64_t t_start_ns;
};

struct lm_pages {
	uint64_t first;
	uint32_t count;
	uint32_t pad;
};

struct lm_round {
	uint32_t round;
	uint32_t pad;
	uint64_t pages;
};

struct lm_switch {
	uint64_t t_pause_ns;
	uint64_t nstale;
	double ops_before;	/* workload ops/s before pause */
	uint64_t t_send_ns;	/* when the source sent this */
	uint64_t ops_total;	/* workload ops done at pause */
};

struct lm_stale {
	uint64_t first;
	uint32_t nbits;
	uint32_t pad;
};

struct lm_req {
	uint64_t page;
};

enum lm_resp_status { LM_RESP_CLEAN, LM_RESP_DATA, LM_RESP_PUSHED };

struct lm_resp {
	uint64_t page;
	uint32_t status;
	uint32_t pad;
};

struct lm_hashes {
	uint64_t first;
	uint32_t count;
	uint32_t pad;
};

struct lm_done {
	uint64_t bytes_precopy, bytes_paused, bytes_push, bytes_demand;
	uint64_t pages_precopy, pages_paused, pages_push, pages_demand;
	uint64_t requests, rounds;
	uint64_t t_precopy_ns;		/* start -> pause */
	uint32_t track;			/* enum lm_track_kind */
	uint32_t pad;
	uint64_t track_pause_ns;	/* workload quiesced for tracking */
	uint64_t drain_ns;		/* waiting for the link to empty before the pause */
	uint64_t rtt_ns;		/* a small frame's round trip on the empty link */
};

struct lm_resumed {
	uint64_t t_resume_ns;
};

/* FIN: the destination's verdict, which the source reports and exits with */
#define LM_FIN_VERIFY		(1u << 0)	/* pages were hashed and compared */
#define LM_FIN_INVARIANTS	(1u << 1)	/* the workload's invariants hold */
#define LM_FIN_SIGBUS		(1u << 2)	/* a workload thread got SIGBUS */

struct lm_fin {
	uint64_t npages, mapped, verified, mismatched;
	uint32_t flags;
	uint32_t rc;		/* the destination's exit status */
};

enum lm_progress_phase { LM_PHASE_MAPPING, LM_PHASE_RUNNING, LM_PHASE_CHECKING };

struct lm_progress {
	uint64_t mapped;
	uint32_t phase;
	uint32_t pad;
};

/* a sealed frame's tag: XChaCha20-Poly1305's (or keyed BLAKE2b's, --plaintext) */
#define LM_TAGLEN	16
#define LM_NONCE	32
#define LM_MACLEN	32	/* crypto_auth (HMAC-SHA-512-256) */
#define LM_SESSION	16
#define LM_KEYLEN	32

/* CHALLENGE flags */
#define LM_CHAL_VERIFY	(1u << 0)	/* the destination asks for --verify */
#define LM_CHAL_PLAIN	(1u << 1)	/* the destination allows --plaintext */

struct lm_challenge {
	uint32_t version;
	uint32_t flags;
	uint8_t nonce[LM_NONCE];
};

/* what an AUTH connection is for */
enum lm_auth_kind { LM_AUTH_MAIN, LM_AUTH_URGENT, LM_AUTH_REJOIN_MAIN, LM_AUTH_REJOIN_URGENT,
	LM_AUTH_KIND_END };

/* AUTH flags */
#define LM_AUTH_PLAIN	(1u << 0)	/* the source asks for --plaintext */

struct lm_auth {
	uint32_t kind;
	uint32_t flags;
	uint8_t session[LM_SESSION];	/* the source's; binds urgent and rejoins to main */
	uint8_t nonce[LM_NONCE];
	uint8_t mac[LM_MACLEN];
};

struct lm_auth_ok {
	uint8_t mac[LM_MACLEN];
};

enum lm_refuse_why { LM_REFUSE_KEY, LM_REFUSE_BUSY, LM_REFUSE_SIZE, LM_REFUSE_MODE,
	LM_REFUSE_SESSION, LM_REFUSE_NOT_RESUMED, LM_REFUSE_FINISHED, LM_REFUSE_END };

/* which limit a SIZE refusal met (its mode field) */
enum lm_limit { LM_LIMIT_OPTION, LM_LIMIT_SIZE, LM_LIMIT_MEMAVAIL, LM_LIMIT_HUGEPAGES,
	LM_LIMIT_CGROUP, LM_LIMIT_CGROUP_HUGETLB, LM_LIMIT_CGROUP_V1, LM_LIMIT_END };

struct lm_refuse {
	uint32_t why;
	uint32_t mode;		/* MODE: the destination's; SIZE: enum lm_limit */
	uint64_t max_size;	/* SIZE: the destination's cap */
	struct lm_fin fin;	/* FINISHED: the verdict a lost FIN carried */
};

/* followed by a bitmap of nbits pages from first, like STALE */
struct lm_need {
	uint64_t first;
	uint32_t nbits;
	uint32_t pad;
};

/* What the receiver knows, to check frames against. */
struct lm_geom {
	uint64_t npages;
	uint32_t page_size;	/* 0 before HELLO */
};

/* A decoded frame: pointers into the caller's buffer. */
struct lm_frame {
	struct lm_hdr h;
	const void *fixed;	/* the type's fixed part */
	const uint8_t *data;	/* what follows it */
	size_t data_len;
};

/*
 * How many frames open a connection in clear, each way: the source's AUTH;
 * the destination's CHALLENGE and AUTH_OK.  Every later frame is sealed and
 * carries LM_TAGLEN bytes after its payload (a relay that walks frames
 * needs this).
 */
static inline unsigned int lm_clear_frames(bool from_source)
{
	return from_source ? 1 : 2;
}

const char *lm_type_name(unsigned int type);
const char *lm_mode_name(unsigned int mode);
/* "its --max-size", "the room left in its cgroup (memory.max less memory.current)", ... */
const char *lm_limit_name(unsigned int limit);
int lm_mode_parse(const char *s);
size_t lm_fixed_len(unsigned int type);
bool lm_type_before_hello(unsigned int type);
/* 0 or -EBADMSG/-EMSGSIZE with a message naming the frame in err. */
int lm_hdr_check(const struct lm_hdr *h, char *err, size_t errlen);
int lm_payload_check(const struct lm_hdr *h, const void *payload, const struct lm_geom *g,
		     struct lm_frame *f, char *err, size_t errlen);
/* Decode one whole frame from memory (the fuzz target). */
int lm_frame_decode(const void *buf, size_t len, const struct lm_geom *g, struct lm_frame *f,
		    char *err, size_t errlen);
size_t lm_frame_encode(void *buf, size_t cap, unsigned int type, unsigned int flags,
		       const void *fixed, const void *data, size_t data_len);

/* ---- connections --------------------------------------------------- */

/* One direction of an emulated link: --bandwidth paces the sender,
 * --rtt delays the receiver by half a round trip. */
struct lm_link {
	pthread_mutex_t lock;
	uint64_t bps;		/* bytes per second, 0 = unlimited */
	uint64_t free_at_ns;
	uint64_t rtt_ns;
};

struct lm_conn {
	int fd;
	const char *name;	/* "main" or "urgent" */
	bool urgent;		/* paced ahead of queued bulk */
	struct lm_link *link;	/* pacing of what we send */
	uint64_t rx_delay_ns;	/* rtt/2 added to what we receive */
	int timeout_ms;		/* a receive this idle is an error; 0: wait */
	int tx_timeout_ms;	/* a send that makes no progress this long */
	uint64_t spin_until_ns;	/* read without sleeping until then (probe knob) */
	pthread_mutex_t wlock;
	/*
	 * The next frame's number each way; from 0 again once sealed.  A
	 * sealed frame's nonce is its number: see lm_conn_seal for why one
	 * never repeats under a key.  The header carries its low 32 bits.
	 */
	uint64_t seq, rx_seq;
	/* after the handshake: every frame's payload is encrypted and, with its
	 * header, authenticated (LM_TAGLEN bytes after it) under a key of this
	 * connection and direction, and its number must be the next one */
	bool sealed;
	bool plain;		/* --plaintext on both ends: authenticated only */
	uint8_t tx_key[32], rx_key[32];
	uint64_t tx_bytes, rx_bytes;
	uint8_t *buf;		/* LM_MAX_PAYLOAD */
	uint8_t *txbuf;		/* LM_MAX_PAYLOAD: what a sealed frame's MAC covers */
	/* the tail of a frame lm_send_nowait_locked() could not write whole:
	 * the next write sends it first (never a partial frame) */
	uint8_t pend[LM_PEND_MAX];
	size_t pend_len;
	char err[160];
};

#include <signal.h>
extern volatile sig_atomic_t lm_interrupted;	/* SIGINT/SIGTERM before the commit */
extern volatile sig_atomic_t lm_committed;	/* past it, an interrupt only warns */
void lm_catch_interrupts(void);
int lm_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg);
int lm_wait_fd(int fd, short events, int timeout_ms);
uint64_t lm_now_ns(void);
/* A line in the kernel's trace buffer when LM_TRACE names trace_marker: lets
 * ftrace's sched events be read against lm's own steps. */
void lm_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void lm_sleep_until(uint64_t t_ns);
void lm_link_init(struct lm_link *l, uint64_t bps, uint64_t rtt_ns);
int lm_conn_init(struct lm_conn *c, int fd, const char *name, struct lm_link *link,
		 int timeout_ms);
void lm_conn_close(struct lm_conn *c);
void lm_conn_reset(struct lm_conn *c);
/* A connection's frame key, and whether both ends asked for --plaintext. */
struct lm_sealkey {
	uint8_t k[32];
	bool plain;
};

/* A new socket for the same connection (a rejoin), sealed with its frame
 * key (destination side, the handshake's one sealed frame each way done);
 * senders wait for it. */
void lm_conn_replace(struct lm_conn *c, int fd, const struct lm_sealkey *sk);
/*
 * From now on every frame is sealed: sk is this connection's key (auth.c),
 * source says which end this is (the two directions have keys of their
 * own), next how many sealed frames each way the handshake already used.
 */
void lm_conn_seal(struct lm_conn *c, const struct lm_sealkey *sk, bool source, uint64_t next);
/*
 * The same sealing without a connection, for the door's handshake: one
 * frame numbered n into out (its length, 0 when longer than cap); or
 * opened in place (0, or -EKEYREJECTED with err set).
 */
size_t lm_frame_seal(void *out, size_t cap, const struct lm_sealkey *sk, bool source,
		     uint64_t n, unsigned int type, unsigned int flags, const void *fixed);
int lm_frame_open(void *frame, size_t len, const struct lm_sealkey *sk, bool source,
		  uint64_t n, char *err, size_t errlen);
/*
 * A malformed frame (exit 5), not a lost peer (exit 6)?  A sealed frame
 * that fails authentication (-EKEYREJECTED) is not: nobody can say the
 * peer sent it, so it is what a cut link is -- dropped, and rejoined.
 */
bool lm_err_is_protocol(int err);
int lm_send(struct lm_conn *c, unsigned int type, unsigned int flags, const void *fixed,
	    const void *data, size_t data_len);
/*
 * The send lock, for callers that must not wait for it (trylock: true when
 * taken) or send several frames under one hold.  The *_locked calls need it.
 */
void lm_conn_lock(struct lm_conn *c);
bool lm_conn_trylock(struct lm_conn *c);
void lm_conn_unlock(struct lm_conn *c);
int lm_send_locked(struct lm_conn *c, unsigned int type, unsigned int flags, const void *fixed,
		   const void *data, size_t data_len);
/* n frames of one type without data, fixed part k at fixed + k * stride,
 * sealed in sequence and written in one go, waiting like lm_send. */
int lm_send_many_locked(struct lm_conn *c, unsigned int type, unsigned int flags,
			const void *fixed, size_t stride, unsigned int n);
/*
 * A small frame (LM_PEND_MAX bytes at most), never waiting: when it cannot
 * go at once it does not exist, its seq is not used: -EAGAIN, the socket is
 * full; -EBUSY, bytes are still pending or pacing would sleep.  0 when it went out
 * whole; 1 when the socket took part of it: the rest is kept and goes ahead
 * of the next frame, so a thread that may wait must lm_flush_locked() soon.
 * Another -errno: the connection is broken, nothing was written.
 */
int lm_send_nowait_locked(struct lm_conn *c, unsigned int type, unsigned int flags,
			  const void *fixed, const void *data, size_t data_len);
/* Tests: lm_send_nowait_locked() writes at most this much at once (0: no
 * cap), to take the partial-frame path a full socket takes rarely. */
extern size_t lm_nowait_max;
/* Write what lm_send_nowait_locked() left, waiting like lm_send. */
int lm_flush_locked(struct lm_conn *c);
/* 0 with f filled (valid until the next recv), -errno with c->err set. */
int lm_recv(struct lm_conn *c, const struct lm_geom *g, struct lm_frame *f);

#endif

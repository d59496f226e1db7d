/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lm: live migration of a workload's memory over libuffdminor. */
#ifndef LM_H
#define LM_H

#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include <uffdminor.h>

#include "proto.h"

/* exit statuses */
enum {
	LM_EXIT_OK = 0,
	LM_EXIT_USAGE = 1,
	LM_EXIT_ABORTED = 2,	/* source: destination lost, resumed locally */
	LM_EXIT_SOURCE_LOST = 3, /* destination: source lost mid-postcopy */
	LM_EXIT_VERIFY = 4,	/* a page or an invariant did not match */
	LM_EXIT_PROTOCOL = 5,	/* a malformed frame: the peer broke the protocol */
	LM_EXIT_PEER_LOST = 6,	/* the peer closed or stopped answering (--timeout) */
	LM_EXIT_AUTH = 7,	/* the peer did not prove the key, or refused ours */
	LM_EXIT_UNDECIDED = 8,	/* source: after SWITCH, no verdict from the destination:
				 * the workload kept paused in --checkpoint FILE
				 * (lm resume FILE); the operator decides */
	LM_EXIT_LOST = 11,	/* source: as 8, but the checkpoint could not be
				 * written: the pages the destination lacked are gone */
	LM_EXIT_NOMEM = 10,	/* the region does not fit: the cgroup's room, the
				 * huge page pool (mem.c) */
	LM_EXIT_INTERRUPTED = 130, /* SIGINT/SIGTERM before the commit (dest) */
};

/* ---- workload -------------------------------------------------------- */

#define WL_REC		4096u
#define WL_WORDS	(WL_REC / 8 - 3)
#define WL_MAX_THREADS	64

enum wl_pattern { WL_UNIFORM, WL_HOT };

/* Record 0 of the region: all the workload's state lives in the region. */
struct wl_thread_state {
	uint64_t ops;
	uint64_t rng;
};

struct wl_hdr {
	uint64_t magic;
	uint32_t nthreads;
	uint32_t pattern;
	uint64_t nrec;
	uint64_t hot_nrec;	/* records 1..hot_nrec are the hot set */
	uint32_t hot_share;	/* percent of writes that go to the hot set */
	uint32_t pad;
	struct wl_thread_state th[WL_MAX_THREADS];
};

struct wl_rec {
	uint64_t counter;	/* writes to this record */
	uint64_t owner;
	uint64_t csum;		/* xor of data[] and counter, kept incrementally */
	uint64_t data[WL_WORDS];
};

struct wl_opts {
	unsigned int threads;
	enum wl_pattern pattern;
	double hot_frac;
	unsigned int hot_share;
	uint64_t rate;		/* ops/s per thread, 0 = flat out */
};

struct workload {
	uint8_t *mem;
	size_t size;
	unsigned int n;
	uint64_t rate;
	pthread_t tid[WL_MAX_THREADS];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_int pause_req;
	atomic_int quit;
	int parked;
	atomic_int failed;	/* a thread got SIGBUS */
	atomic_uintptr_t fail_addr;
	/* when a thread first ran again after the last wl_resume(), 0 before */
	_Atomic uint64_t t_running;
	bool running;
	/* wl_pause_boosted(): the caller's scheduling before it was boosted */
	bool self_boosted;
	int self_policy;
	struct sched_param self_param;
};

void wl_format(uint8_t *mem, size_t size, const struct wl_opts *o);
/* hdr_mem: where to read the static header fields without touching mem,
 * which on the destination may fault into a handler this thread serves. */
int wl_start(struct workload *w, uint8_t *mem, size_t size, const uint8_t *hdr_mem);
/* 0 if record 0 is a workload header of this size and thread count. */
int wl_hdr_check(const struct wl_hdr *h, size_t size, unsigned int nthreads);
/* Threads made now and parked: the switch-over only wakes them. */
int wl_start_parked(struct workload *w, uint8_t *mem, size_t size, unsigned int nthreads);
void wl_pause(struct workload *w);
void wl_resume(struct workload *w);
/*
 * wl_pause() with the workload's threads and the caller at SCHED_FIFO until
 * the threads park: the pause does not wait for a busy machine's CPUs.  The
 * threads drop back when parked; the caller stays boosted until
 * wl_unboost_self().  0, or -EPERM (no CAP_SYS_NICE, RLIMIT_RTPRIO 0) after
 * a plain wl_pause().
 */
int wl_pause_boosted(struct workload *w);
void wl_unboost_self(struct workload *w);
/* When the workload ran again after wl_resume(): its first thread out of park; 0 not yet. */
uint64_t wl_running_since(struct workload *w);
void wl_stop(struct workload *w);
/* wl_stop for threads that may sleep in a fault: kick() every 20 ms until
 * each is joined (it fails what they wait for). */
void wl_stop_kick(struct workload *w, void (*kick)(void *), void *arg);
uint64_t wl_ops(const struct workload *w);
/* 0, or -EBADMSG with a message: checksums and counters agree. */
int wl_check(const uint8_t *mem, size_t size, char *err, size_t errlen);
uint64_t lm_hash(const void *p, size_t n);

/* ---- dirty tracking --------------------------------------------------- */

/* The values go on the wire (lm_done.track): add before LM_TRACK_END only. */
enum lm_track_kind {
	LM_TRACK_PAGEMAP_SCAN, LM_TRACK_SOFT_DIRTY, LM_TRACK_NONE, LM_TRACK_UFFD_WP,
	LM_TRACK_END
};

/* The library's tracker (uffdm_tracker_start(3)), with lm's wire value of its kind. */
struct lm_tracker {
	enum lm_track_kind kind;
	struct uffdm_tracker *t;
};

const char *lm_track_name(unsigned int kind);
int lm_track_parse(const char *s);
/* want == LM_TRACK_END: the best the kernel offers. */
int lm_track_start(struct lm_tracker *t, unsigned int want, uint8_t *view, size_t size,
		   size_t page);
/* Set bits of pages written since the last call, and start over (unless
 * last); the caller quiesces writers when lm_track_needs_quiesce(). */
int lm_track_collect(struct lm_tracker *t, uint8_t *bitmap, bool last);
bool lm_track_needs_quiesce(const struct lm_tracker *t);
void lm_track_stop(struct lm_tracker *t);

/* ---- ask.c: the destination's page requests, never waited for ---------- */

/* a page's request: none, queued (or going out), sent on the current link */
enum { LM_ASK_NO, LM_ASK_QUEUED, LM_ASK_SENT };

struct lm_asker {
	struct lm_conn *c;		/* the urgent connection */
	uint64_t npages;
	_Atomic uint8_t *st;		/* per page: LM_ASK_* */
	_Atomic uint64_t *ring;		/* npages slots: page + 1, 0 free */
	_Atomic uint64_t head, tail;	/* the sender takes at head */
	_Atomic uint32_t wake;		/* futex word: moves on every kick */
	atomic_int sleeping, stop;
	atomic_int up;			/* the link is up: send */
	atomic_int flush;		/* a frame's tail waits in c->pend */
	pthread_t tid;
	bool running;
	/* a send failed (send lock held): the link is down until lm_asker_up */
	void (*broke)(void *arg, int err);
	void *arg;
	/* requests sent by the asking thread, queued for the sender; how often
	 * the socket was full for one; writes of the sender; links broken */
	atomic_uint_fast64_t direct, queued, full, batches, breaks;
};

int lm_asker_init(struct lm_asker *a, struct lm_conn *c, uint64_t npages,
		  void (*broke)(void *arg, int err), void *arg);
int lm_asker_start(struct lm_asker *a);
void lm_asker_stop(struct lm_asker *a);
/* Stopped, and its arrays freed. */
void lm_asker_free(struct lm_asker *a);
/* Ask the source about page i, unless it was and is not forgotten: never
 * waits.  Whether this call asked. */
bool lm_ask(struct lm_asker *a, uint64_t i);
/* The link is down: nothing goes out until lm_asker_up; on return no send
 * is under way (shut the socket down first, or this waits for it). */
void lm_asker_down(struct lm_asker *a);
void lm_asker_up(struct lm_asker *a);
/* Page i's request went out on a link now gone: it may be asked again
 * (queued ones go out on the next link).  Whether it had been sent. */
bool lm_asker_forget(struct lm_asker *a, uint64_t i);

/* ---- options and report ------------------------------------------------ */

struct lm_opts {
	enum lm_mode mode;
	enum uffdm_backing backing;
	size_t size;
	struct wl_opts wl;
	unsigned int rounds;
	unsigned int track;		/* LM_TRACK_END = auto */
	uint64_t bandwidth;		/* bytes/s */
	uint64_t rtt_ns;
	double precopy_s;		/* workload time before the first round */
	double after_s;			/* workload time after resume */
	bool verify, json, quiet, row;
	bool no_drain;			/* pause without waiting for the link to empty */
	const char *plot;
	const char *addr;		/* host:port */
	int timeout_ms;
	int rejoin_ms;			/* a broken link comes back within; <0: the operator's */
	const char *inject;		/* test hooks: die-precopy, die-postcopy */
	unsigned int handler_threads;
	int listen_fd;			/* dest: inherited, or -1 */
	uint8_t key[LM_KEYLEN];
	bool have_key;
	bool plaintext;			/* --plaintext: frames authenticated, not encrypted */
	bool size_given;		/* dest: --size is what it expects */
	uint64_t max_size;		/* dest: 0 = what it expects, else free memory */
	const char *checkpoint;		/* source: where a paused workload is kept */
};

/* How long a rejoin may take: --rejoin, else --timeout; -1: no limit. */
static inline int lm_rejoin_ms(const struct lm_opts *o)
{
	return o->rejoin_ms ? o->rejoin_ms : o->timeout_ms;
}

struct lm_report {
	enum lm_mode mode;
	struct lm_done src;
	uint64_t npages, page_size, size;
	uint64_t stale;
	double downtime_ms, total_ms, postcopy_ms;
	double ops_before, ops_after;
	double src_pause_ms, dst_resume_ms;	/* parts of the downtime */
	double transit_ms;	/* SWITCH queued, paced and in flight; -1: clocks differ */
	/* without a shared clock: half the source's rtt_ns stands for the transit */
	double downtime_est_ms, transit_est_ms;
	uint64_t faults, faults_demand;
	uint64_t lat_p50_ns, lat_p99_ns, lat_max_ns;
	uint64_t callback_max_ns;	/* the longest fault callback (postcopy modes) */
	/* requests sent by the fault, or by the sender; how often the socket was full */
	uint64_t asks_direct, asks_queued, asks_full;
	uint64_t verified, mismatched;
	bool verify, invariants_ok, clocks_shared;
};

void lm_report_print(const struct lm_report *r, const struct lm_opts *o);
void lm_outcome_print(const struct lm_fin *f, const struct lm_opts *o, const char *side);
int lm_report_plot(const char *png, const char *data, uint64_t t_resume_ns, uint64_t nfaults);

/* ---- auth.c: the shared key and the handshake ---------------------------- */

int lm_crypto_init(void);
void lm_key_generate(uint8_t key[LM_KEYLEN]);
void lm_key_hex(const uint8_t key[LM_KEYLEN], char hex[2 * LM_KEYLEN + 1]);
int lm_key_load(const char *path, uint8_t key[LM_KEYLEN], char *err, size_t errlen);
int lm_key_write(const char *path, const uint8_t key[LM_KEYLEN]);
/*
 * Source: answer the CHALLENGE with AUTH (flags: LM_AUTH_PLAIN for
 * --plaintext), check AUTH_OK, then send hello sealed (its verify set when
 * the destination asks) and wait for ADMIT; -EACCES, -EBUSY, -EFBIG,
 * -EINVAL (mode), -ESRCH (no such session), -ENOLINK (not resumed),
 * -EALREADY (finished: its verdict in fin) when refused; c->err says why.
 * A failure while !c->sealed came before the destination proved the key:
 * nothing in it is the destination's word.
 */
int lm_auth_client(struct lm_conn *c, const uint8_t *key, unsigned int kind, unsigned int flags,
		   const uint8_t session[LM_SESSION], const struct lm_geom *g,
		   struct lm_hello *hello, struct lm_fin *fin);
/*
 * Whether lm_auth_client's failure ret on c is the destination's own word
 * (a sealed refusal, a malformed sealed frame), which may end a rejoin;
 * anything before its proof of the key, or failing authentication, may be
 * anyone's, and a lost link is no answer either.
 */
bool lm_auth_answered(const struct lm_conn *c, int ret);
/* AUTH's MAC, the source's proof of the key over ch and the rest of a. */
void lm_auth_sign(struct lm_auth *a, const uint8_t *key, const struct lm_challenge *ch);
/* Destination: 0 if AUTH's MAC binds this challenge to the key, else -EACCES. */
int lm_auth_check(const uint8_t *key, const struct lm_challenge *ch, const struct lm_auth *a);
/* AUTH_OK: the destination's proof of the key over the same. */
void lm_auth_ok_make(struct lm_auth_ok *ok, const uint8_t *key, const struct lm_challenge *ch,
		     const struct lm_auth *a);
/* Both ends asked for --plaintext: frames authenticated, not encrypted. */
bool lm_auth_plain(const struct lm_challenge *ch, const struct lm_auth *a);
/* A connection's frame key, from the shared key and this handshake's nonces. */
void lm_conn_key(struct lm_sealkey *out, const uint8_t *key, const struct lm_challenge *ch,
		 const struct lm_auth *a);
/* --verify's page hash is keyed (SipHash): the network cannot forge a page and its hash. */
void lm_verify_key(uint8_t out[16], const uint8_t *key, const uint8_t session[LM_SESSION]);
uint64_t lm_page_hash(const uint8_t vkey[16], const void *p, size_t n);

/* ---- door.c: the destination's accept, authenticate, refuse ------------- */

/*
 * Handshakes in progress at most: the door's fds beyond the migration's own
 * (fewer when RLIMIT_NOFILE's hard limit cannot make room).  A full table
 * drops its oldest unproven handshake, so a source is safe for this many
 * connects after its own: 1024 at a loopback flood's ~10 000/s is ~100 ms
 * for a round trip.  Their table is allocated whole when the door opens.
 */
#define LM_DOOR_SLOTS	1024

struct lm_door_slots;

struct lm_door {
	const struct lm_opts *o;
	struct lm_door_slots *t;	/* the handshake table, from lm_door_start */
	int lfd;
	unsigned int nslots;		/* LM_DOOR_SLOTS, or what RLIMIT_NOFILE allows */
	uint64_t max_size;
	unsigned int max_kind;		/* which limit set max_size: enum lm_limit */
	pthread_t tid;
	bool running;
	atomic_int stop;
	pthread_mutex_t lock;		/* with cond: what the doorman hands over */
	pthread_cond_t cond;
	bool have_session, urgent_given;
	uint8_t session[LM_SESSION];	/* the admitted migration's */
	struct lm_hello hello;		/* its main connection's */
	atomic_uint_fast64_t refused;
	atomic_int rejoin_ok;		/* the destination resumed: rejoins welcome */
	atomic_int not_resumed;		/* it never will: a rejoin is told so */
	atomic_int finished;		/* FIN went out: a rejoin is told the verdict */
	struct lm_fin fin;
	atomic_int told;		/* a rejoining source was told */
	int given_fd[2];		/* main, urgent: admitted, not yet taken */
	int rejoin_fd[2];		/* main, urgent: a rejoin's connections */
	struct lm_sealkey given_key[2], rejoin_key[2];	/* their frame keys */
};

void lm_door_init(struct lm_door *door, const struct lm_opts *o, int lfd, uint64_t max_size);
/* The admitted connection of this kind (main's HELLO in hello), from the
 * doorman (lm_door_start first); wait_ms < 0: no limit. */
int lm_door_admit(struct lm_door *door, struct lm_conn *c, const char *name,
		  struct lm_link *link, unsigned int kind, int wait_ms, struct lm_hello *hello);
int lm_door_start(struct lm_door *door);
/* Both connections of a rejoin of this session, within wait_ms; their
 * frame keys in keys (lm_conn_seal). */
int lm_door_rejoin_take(struct lm_door *door, int *mfd, int *ufd, struct lm_sealkey keys[2],
			int wait_ms);
void lm_door_stop(struct lm_door *door);
/*
 * No more rejoins taken: a rejoin is told "busy" until lm_door_tell, and
 * one handed over but not taken is closed, so its source asks again at
 * once rather than wait for a NEED that never comes.
 */
void lm_door_rejoin_end(struct lm_door *door);
/* The destination will not resume, or (fin) has finished: tell a rejoining
 * source so (signed), waiting up to wait_ms for it to ask; whether it was. */
bool lm_door_tell(struct lm_door *door, const struct lm_fin *fin, int wait_ms);

/* ---- mem.c: the room a region has --------------------------------------- */

struct lm_room {
	uint64_t bytes;			/* what fits */
	unsigned int limit;		/* enum lm_limit: which one set it */
	size_t pool_page;		/* hugetlb: the pool's page size */
	char where[4400];		/* the file(s) that say so */
};

/* MemAvailable or the huge page pool, and the cgroups' limits less usage. */
void lm_mem_room(struct lm_room *r, unsigned int backing);
/* Whether size fits; else one line saying which limit and its file. */
bool lm_mem_fits(const struct lm_room *r, uint64_t size, const char *who);
/* Parts, for tests on fixture files: */
void lm_cgroup_room(struct lm_room *r, const char *root, const char *path, const char *max_f,
		    const char *cur_f, unsigned int limit);
bool lm_cgroup_path(const char *text, const char *ctrl, char *out, size_t len);
int64_t lm_hugepages_free(const char *sysfs, size_t page);

/* ---- net.c: names and connections within a deadline ------------------- */

/* lm_connect's wait, when the caller has no deadline of its own */
#define LM_CONNECT_MS 10000

/* "HOST:PORT" within wait_ms (a numeric host never waits): 0, -ETIMEDOUT,
 * -ECANCELED or -EINVAL, with a message unless quiet. */
int lm_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *len, int wait_ms,
	       bool quiet);
/* A TCP connection to "HOST:PORT" within wait_ms, lookup included,
 * TCP_NODELAY; its fd, or -errno (-ETIMEDOUT: no answer) after saying why. */
int lm_connect_within(const char *addr, int wait_ms, bool quiet);
int lm_connect(const char *addr);
int lm_connect_quiet(const char *addr, bool quiet);
/* ms from now until end (lm_now_ns), at least 1 before it, 0 after. */
int lm_ms_until(uint64_t end);
/* The socket buffer size (LM_SOCKBUF overrides; 0: the kernel's). */
int lm_sockbuf(void);
int lm_source(const struct lm_opts *o, const char *addr);
int lm_dest(const struct lm_opts *o, int listen_fd);
/* ckpt.c: the source's region kept in a file, and run again from it */
int lm_ckpt_write(const char *path, const uint8_t *mem, size_t size, size_t page,
		  enum lm_mode mode);
int lm_resume(const struct lm_opts *o, const char *path);
int lm_main(int argc, char **argv);

/* bitmaps */
static inline bool bit_get(const uint8_t *b, uint64_t i)
{
	return b[i / 8] & (1u << (i % 8));
}

static inline void bit_set(uint8_t *b, uint64_t i)
{
	b[i / 8] |= (uint8_t)(1u << (i % 8));
}

/*
 * A write that changes nothing, for probes: the page sees a write fault.
 * The zero is hidden from the compiler: clang turns an atomic add of a
 * constant 0 into a fenced load, which writes nothing.
 */
static inline void lm_write_same(void *p)
{
	uint64_t zero = 0;

	__asm__("" : "+r"(zero));
	__atomic_fetch_add((uint64_t *)p, zero, __ATOMIC_SEQ_CST);
}

uint64_t lm_boot_hash(void);
void lm_inject(const struct lm_opts *o, const char *side, const char *what);
void lm_msg(const struct lm_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

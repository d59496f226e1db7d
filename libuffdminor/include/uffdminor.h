/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libuffdminor: userfaultfd minor faults made small and correct.
 *
 * The model: a memfd mapped twice.  One view is registered for MINOR faults;
 * a thread touching it stops until a handler makes the page right through
 * the other (backing) view and issues UFFDIO_CONTINUE.
 *
 * Every call that can fail returns a negated errno (never -1 with errno).
 * See uffdminor(7).
 */
#ifndef UFFDMINOR_H
#define UFFDMINOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uffdminor/userfaultfd.h>

#ifdef __cplusplus
extern "C" {
#endif

struct uffdm;
struct uffdm_region;
struct uffdm_handler;

/* ---- probe ---------------------------------------------------------- */

/* What the running kernel offers; unknown bits are kept as reported. */
struct uffdm_probe {
	uint64_t features;	/* UFFD_FEATURE_* */
	uint64_t ioctls;	/* 1 << _UFFDIO_* (fd-level ioctls) */
};

int uffdm_probe(struct uffdm_probe *p);
bool uffdm_probe_has(const struct uffdm_probe *p, uint64_t features);
bool uffdm_probe_minor_shmem(const struct uffdm_probe *p);
bool uffdm_probe_minor_hugetlbfs(const struct uffdm_probe *p);
bool uffdm_probe_poison(const struct uffdm_probe *p);
bool uffdm_probe_continue_wp(const struct uffdm_probe *p);
bool uffdm_probe_move(const struct uffdm_probe *p);

/* ---- open ----------------------------------------------------------- */

#define UFFDM_OPEN_KERNEL_FAULTS	(1u << 0) /* also trap kernel-mode faults */
#define UFFDM_OPEN_NONBLOCK		(1u << 1) /* O_NONBLOCK on the descriptor */
#define UFFDM_OPEN_NO_CLOEXEC		(1u << 2) /* keep the descriptor over exec */
#define UFFDM_OPEN_NO_DEVICE		(1u << 3) /* skip /dev/userfaultfd */
#define UFFDM_OPEN_NO_SYSCALL		(1u << 4) /* skip userfaultfd(2) */
#define UFFDM_OPEN_ALL			(UFFDM_OPEN_KERNEL_FAULTS | UFFDM_OPEN_NONBLOCK | \
					 UFFDM_OPEN_NO_CLOEXEC | UFFDM_OPEN_NO_DEVICE | \
					 UFFDM_OPEN_NO_SYSCALL)

int uffdm_open(struct uffdm **out, unsigned int flags, uint64_t features);
void uffdm_close(struct uffdm *u);
int uffdm_fd(const struct uffdm *u);
uint64_t uffdm_features(const struct uffdm *u);
uint64_t uffdm_ioctls(const struct uffdm *u);
int uffdm_open_explain(char *buf, size_t len);

/* ---- region --------------------------------------------------------- */

enum uffdm_backing {
	UFFDM_SHMEM = 0,
	UFFDM_HUGETLB,		/* the default huge page size */
	UFFDM_HUGETLB_2M,
	UFFDM_HUGETLB_1G,
};

/* The page size of a backing, 0 when unknown: region sizes are multiples of it. */
size_t uffdm_backing_page_size(enum uffdm_backing backing);
int uffdm_region_create(struct uffdm_region **out, enum uffdm_backing backing, size_t size);
void uffdm_region_destroy(struct uffdm_region *r);
void *uffdm_region_view(const struct uffdm_region *r);
void *uffdm_region_backing(const struct uffdm_region *r);
size_t uffdm_region_size(const struct uffdm_region *r);
size_t uffdm_region_page_size(const struct uffdm_region *r);
int uffdm_region_fd(const struct uffdm_region *r);
int uffdm_region_populate(struct uffdm_region *r, size_t off, size_t len);
int uffdm_region_discard(struct uffdm_region *r, size_t off, size_t len);
int uffdm_region_zap(struct uffdm_region *r, size_t off, size_t len);

/* ---- register ------------------------------------------------------- */

#define UFFDM_REGISTER_MISSING	(1u << 0) /* also MISSING faults */
#define UFFDM_REGISTER_WP	(1u << 1) /* also write-protect faults */
#define UFFDM_REGISTER_NO_MINOR	(1u << 2) /* without MINOR: MISSING and/or WP only */

int uffdm_range_register(struct uffdm *u, void *addr, size_t len, unsigned int flags,
			 uint64_t *ioctls);
int uffdm_range_unregister(struct uffdm *u, void *addr, size_t len);
int uffdm_region_register(struct uffdm *u, struct uffdm_region *r, unsigned int flags,
			  uint64_t *ioctls);
int uffdm_region_unregister(struct uffdm *u, struct uffdm_region *r);

/* ---- events --------------------------------------------------------- */

enum uffdm_event_kind {
	UFFDM_EVENT_UNKNOWN = 0,
	UFFDM_EVENT_MINOR,
	UFFDM_EVENT_MISSING,
	UFFDM_EVENT_WP,
	UFFDM_EVENT_FORK,
	UFFDM_EVENT_REMAP,
	UFFDM_EVENT_REMOVE,
	UFFDM_EVENT_UNMAP,
};

#define UFFDM_FAULT_WRITE	(1u << 0)

struct uffdm_event {
	enum uffdm_event_kind kind;
	unsigned int flags;		/* UFFDM_FAULT_* */
	uint32_t tid;			/* faulting thread, with UFFD_FEATURE_THREAD_ID */
	int fork_fd;			/* FORK: the child's userfaultfd */
	uint64_t addr;			/* fault address; REMOVE/UNMAP start; REMAP from */
	uint64_t end;			/* REMOVE/UNMAP end; REMAP to */
	uint64_t len;			/* REMAP length */
	struct uffd_msg raw;		/* the message as read */
};

#define UFFDM_READ_NONBLOCK	(1u << 0)

int uffdm_event_decode(const struct uffd_msg *msg, struct uffdm_event *ev);
int uffdm_events_read(struct uffdm *u, struct uffdm_event *ev, unsigned int max,
		      unsigned int flags);

/* ---- resolve -------------------------------------------------------- */

#define UFFDM_DONTWAKE	(1u << 0) /* leave the faulting threads asleep */
#define UFFDM_WP	(1u << 1) /* map write-protected (continue, copy) */

/*
 * Bytes done (less than len on partial progress) or a negated errno:
 * -EEXIST already mapped (nobody was woken), -EAGAIN a non-cooperative
 * event is unread, -EOPNOTSUPP the kernel lacks the mode or ioctl.
 */
ssize_t uffdm_continue(struct uffdm *u, void *addr, size_t len, unsigned int flags);
ssize_t uffdm_poison(struct uffdm *u, void *addr, size_t len, unsigned int flags);
ssize_t uffdm_copy(struct uffdm *u, void *dst, const void *src, size_t len,
		   unsigned int flags);
ssize_t uffdm_zeropage(struct uffdm *u, void *addr, size_t len, unsigned int flags);
int uffdm_wake(struct uffdm *u, void *addr, size_t len);
/*
 * 0.2: UFFDIO_MOVE (6.8+; -EOPNOTSUPP before): move src's pages to dst, a
 * range registered for MISSING faults; anonymous private memory only.
 */
#define UFFDM_MOVE_ALLOW_SRC_HOLES	(1u << 2) /* a hole in src is skipped, not -ENOENT */
ssize_t uffdm_move(struct uffdm *u, void *dst, void *src, size_t len, unsigned int flags);
int uffdm_writeprotect(struct uffdm *u, void *addr, size_t len, bool wp);
/*
 * CONTINUE until mapped and woken: EEXIST wakes, EAGAIN reads pending
 * events into spill[*nspill..spill_max) and retries.  0 mapped by us,
 * 1 partly mapped already, -EAGAIN spill full, else the kernel's error.
 */
int uffdm_resolve(struct uffdm *u, void *addr, size_t len, struct uffdm_event *spill,
		  unsigned int spill_max, unsigned int *nspill);

/* ---- another process's memory (0.2) ---------------------------------- */

/*
 * Take over fd, a userfaultfd made by another process (received over
 * SCM_RIGHTS) or this one, with the features its creator negotiated;
 * -EOPNOTSUPP if features are not among them, -EBADF if fd is not a
 * userfaultfd.  On success uffdm_close() closes fd.  flags: 0.
 */
int uffdm_adopt(struct uffdm **out, int fd, uint64_t features, unsigned int flags);
/* The UFFD_FEATURE_SIGBUS descriptor of u's mm (the failure path without POISON). */
int uffdm_sigbus_adopt(struct uffdm *u, int fd);
int uffdm_sigbus_fd(struct uffdm *u);
/*
 * Pages of the range not mapped now raise SIGBUS from here on, and their
 * waiters are woken into it: what a VMM does when its page server is gone.
 */
#define UFFDM_FAIL_SIGBUS_FD	(1u << 0) /* via the SIGBUS descriptor even with POISON */
int uffdm_range_fail(struct uffdm *u, void *addr, size_t len, size_t page, unsigned int flags);
/*
 * A region over [offset, offset+size) of an existing memfd or hugetlbfs
 * file (dup'ed), registered at view in the mm the userfaultfd serves;
 * only the backing view is mapped here (uffdm_region_view() is NULL,
 * uffdm_region_addr() is view).  flags: 0.
 */
int uffdm_region_from_fd(struct uffdm_region **out, int fd, off_t offset, size_t size,
			 uintptr_t view, unsigned int flags);
/* Where the registered view is, in the mm the descriptor serves (any region). */
uintptr_t uffdm_region_addr(const struct uffdm_region *r);
off_t uffdm_region_offset(const struct uffdm_region *r);

/* ---- dirty tracking (0.2) ------------------------------------------- */

/*
 * Which pages of a mapping were written since the last look, by the best
 * mechanism the kernel offers (UFFDM_TRACK_AUTO), or by the one asked for.
 * See uffdm_tracker_start(3).
 */
enum uffdm_track_kind {
	UFFDM_TRACK_AUTO = 0,		/* the first of the next three that starts, else NONE
					   (never NONE on memory a handler serves: -EBUSY) */
	UFFDM_TRACK_PAGEMAP_SCAN,	/* PAGEMAP_SCAN + UFFD_FEATURE_WP_ASYNC (6.7+) */
	UFFDM_TRACK_SOFT_DIRTY,		/* /proc/self/pagemap soft-dirty bit + clear_refs */
	UFFDM_TRACK_UFFD_WP,		/* synchronous uffd-wp faults (5.19+ on shmem/hugetlb) */
	UFFDM_TRACK_NONE,		/* every page is dirty in every round */
};

struct uffdm_tracker;

#define UFFDM_TRACK_LAST	(1u << 0) /* the last collection: do not re-arm */

/* "auto", "pagemap-scan", "soft-dirty", "uffd-wp", "none"; NULL for an unknown kind. */
const char *uffdm_track_name(enum uffdm_track_kind kind);
/* The kind of a name uffdm_track_name() gives, or -EINVAL. */
int uffdm_track_parse(const char *name);
/* Tracks [addr, addr+len) of this process, in pages of page bytes.  flags: 0. */
int uffdm_tracker_start(struct uffdm_tracker **out, enum uffdm_track_kind kind, void *addr,
			size_t len, size_t page, unsigned int flags);
/* What was chosen (never AUTO). */
enum uffdm_track_kind uffdm_tracker_kind(const struct uffdm_tracker *t);
/* Writers must be paused around uffdm_tracker_collect() (soft-dirty, uffd-wp). */
bool uffdm_tracker_needs_quiesce(const struct uffdm_tracker *t);
/*
 * Sets bit i (bitmap[i / 8] & 1 << i % 8) of every page i written since the
 * last call (or the start), leaving other bits alone, and re-arms.
 */
int uffdm_tracker_collect(struct uffdm_tracker *t, uint8_t *bitmap, unsigned int flags);
void uffdm_tracker_stop(struct uffdm_tracker *t);

/* ---- handler -------------------------------------------------------- */

/*
 * Fill-once (0.2).  The library keeps the state of every page of a region:
 * empty, filling (a callback or the application owns it), deferred (its
 * callback returned UFFDM_FILL_LATER), filled or failed; and a generation
 * that uffdm_region_discard() and uffdm_region_zap() advance (the pages are
 * then empty again).  The fault callback runs exactly once per page per
 * generation, however many threads fault on it and however many messages
 * the kernel sends; the other threads wait until the page is mapped.  A
 * fault on a filled page only maps/wakes.  See uffdm_handler_start(3).
 */

/*
 * Called on a handler thread for the first fault on an empty page: make the
 * page at offset (in the region) right through the backing view and return
 * 0; return UFFDM_FILL_LATER to complete it later from any thread with
 * uffdm_handler_complete(); or return a negated errno: every thread faulting
 * on the page gets SIGBUS.  Never block: the other faults wait behind it.
 */
typedef int (*uffdm_fault_fn)(void *arg, struct uffdm_region *r, size_t offset,
			      const struct uffdm_event *ev);
/*
 * Called for every non-cooperative event (REMOVE, UNMAP, REMAP, FORK), and
 * with UFFDM_HANDLER_OUTSIDE_EVENT for a fault outside every region.
 */
typedef void (*uffdm_event_fn)(void *arg, const struct uffdm_event *ev);

/* A fault callback's "the application completes this page later". */
#define UFFDM_FILL_LATER	1

#define UFFDM_HANDLER_SIGBUS_FD	(1u << 0) /* fail faults via a SIGBUS uffd even with POISON */
/*
 * 0.2: a fault outside every region goes to the event callback, which owns
 * it (resolve it, or the thread sleeps).  Without it the fault is failed:
 * the thread gets SIGBUS.  Needs cfg->event.
 */
#define UFFDM_HANDLER_OUTSIDE_EVENT	(1u << 1)

/*
 * 0.3, event-loop mode: the library starts no thread (threads must be 0);
 * the application polls uffdm_handler_fd() and calls uffdm_handler_serve()
 * from its own loop.  Same fill-once contract and failure guarantee.
 */
#define UFFDM_HANDLER_EVENT_LOOP	(1u << 2)

/*
 * The first five fields are 0.1's; binaries linked against 0.1 keep working
 * through the LIBUFFDMINOR_0.1 symbol versions.  reserved must be zero
 * (-EINVAL otherwise): later releases give it meaning without growing the
 * struct.
 */
struct uffdm_handler_config {
	unsigned int threads;	/* 1..64; 0 with UFFDM_HANDLER_EVENT_LOOP */
	unsigned int flags;	/* UFFDM_HANDLER_* */
	uffdm_fault_fn fault;
	uffdm_event_fn event;	/* may be NULL */
	void *arg;
	uint64_t reserved[8];	/* 0.2: must be zero */
};

/* Power-of-two latency buckets: hist[i] counts [2^i, 2^(i+1)) ns; hist[0] [0, 2). */
#define UFFDM_STATS_BUCKETS	40

struct uffdm_stats {
	/* 0.1 fields, same order */
	uint64_t minor, missing, wp;	/* fault messages by kind */
	uint64_t events;		/* non-cooperative events */
	uint64_t resolved;		/* 0.2: pages mapped (by faults, completion and fill) */
	uint64_t failed;		/* pages failed: SIGBUS */
	uint64_t eexist, eagain;	/* benign races and retries */
	uint64_t p50_ns, p99_ns, max_ns; /* read-to-wake latency of fault messages */
	/* 0.2 */
	uint64_t messages;		/* fault messages read (minor + missing + wp) */
	uint64_t fills;			/* fault callbacks run (once per page per generation) */
	uint64_t duplicates;		/* messages for a page already filling/filled: woken only */
	uint64_t deferred;		/* callbacks that returned UFFDM_FILL_LATER */
	uint64_t completed;		/* pages completed by uffdm_handler_complete() */
	uint64_t outside;		/* faults outside every region */
	uint64_t requeued;		/* faults woken unresolved to refault (EAGAIN crowd) */
	uint64_t latency_count;		/* samples in hist */
	uint64_t mean_ns;		/* mean read-to-wake latency */
	uint64_t callback_ns;		/* total time in fault callbacks (sampled 1 in 16) */
	uint64_t ioctl_ns;		/* total time in resolving ioctls, sampled likewise */
	uint64_t hist[UFFDM_STATS_BUCKETS];
	/* 0.3 */
	uint64_t unserved;		/* pages never served that uffdm_handler_stop() failed */
	uint64_t reserved[14];		/* zero; later releases fill it */
};

/* r may be NULL (0.2): start serving no region, add them with uffdm_handler_region_add(). */
int uffdm_handler_start(struct uffdm_handler **out, struct uffdm *u, struct uffdm_region *r,
			const struct uffdm_handler_config *cfg);
int uffdm_handler_stats(const struct uffdm_handler *h, struct uffdm_stats *st);
/*
 * Serves the faults already queued, fails (SIGBUS) pages still deferred,
 * stops and joins the threads; st (may be NULL) gets the final counts.
 */
int uffdm_handler_stop(struct uffdm_handler *h, struct uffdm_stats *st);

/* ---- handler 0.2: many regions, deferred completion, fill-once ------- */

/*
 * Serve r too (while the handler runs).  Regions are looked up by the
 * address of their registered view in O(log n).  -EEXIST: r already served
 * by h; -EBUSY: r served by another handler; -EINVAL: r overlaps a region
 * of h.
 */
int uffdm_handler_region_add(struct uffdm_handler *h, struct uffdm_region *r);
/*
 * Stop serving r: later faults on it are outside every region.  -EBUSY
 * (nothing changed) while a page of r is being filled or deferred;
 * -ENOENT when h does not serve r.
 */
int uffdm_handler_region_remove(struct uffdm_handler *h, struct uffdm_region *r);

/*
 * Complete the pages [off, off+len) of r, each deferred (its callback
 * returned UFFDM_FILL_LATER) or claimed with uffdm_handler_claim(): with
 * err 0 they are filled, mapped and their threads woken; with a negated
 * errno they fail and their threads get SIGBUS.  Any thread, any time
 * before uffdm_handler_stop().  -EINVAL: a page is not owned (empty or in a
 * callback); -EALREADY: a page is already filled or failed (completed
 * twice); in both cases nothing is changed.  -ESTALE: the range was
 * discarded or zapped meanwhile.
 */
int uffdm_handler_complete(struct uffdm_handler *h, struct uffdm_region *r, size_t off,
			   size_t len, int err);

#define UFFDM_CLAIM_WAIT	(1u << 0) /* wait while a callback fills the page */

/* What uffdm_handler_claim() found. */
#define UFFDM_CLAIM_NONE	0 /* filled or failed (or, without WAIT, in a callback) */
#define UFFDM_CLAIM_EMPTY	1 /* was empty: now the caller's */
#define UFFDM_CLAIM_DEFERRED	2 /* a fault waits for it, its callback returned LATER */

/*
 * Take the page at off for filling outside the fault callback (readahead,
 * background fill): on UFFDM_CLAIM_EMPTY the page is the caller's, and on
 * UFFDM_CLAIM_DEFERRED a fault waits for it; either way write it through
 * the backing view, then uffdm_handler_complete().  Inside a fault
 * callback WAIT is ignored (a page in another callback is filled by that
 * callback).  Negated errno for a bad argument.
 */
int uffdm_handler_claim(struct uffdm_handler *h, struct uffdm_region *r, size_t off,
			unsigned int flags);

/*
 * The handler serving r, or NULL.  In a fault callback it is the callback's
 * own handler, set before any fault could reach it (unlike a copy of
 * uffdm_handler_start()'s *out, which a racing fault may not see yet).
 */
struct uffdm_handler *uffdm_region_handler(const struct uffdm_region *r);

/* Fills one page through the backing view for uffdm_handler_fill(): 0 or -errno. */
typedef int (*uffdm_fill_fn)(void *arg, struct uffdm_region *r, size_t offset);
/*
 * Readahead: for every empty page of [off, off+len), claim it, call fill
 * and complete it (mapped, so touching it will not fault).  Filled, failed,
 * deferred pages and pages in a callback are skipped.  Callable from a
 * fault callback.  Pages filled (>= 0), or a negated errno.
 */
ssize_t uffdm_handler_fill(struct uffdm_handler *h, struct uffdm_region *r, size_t off,
			   size_t len, uffdm_fill_fn fill, void *arg);

enum uffdm_page_state {
	UFFDM_PAGE_EMPTY = 0,
	UFFDM_PAGE_FILLING,	/* in a fault callback, or claimed */
	UFFDM_PAGE_DEFERRED,	/* callback returned UFFDM_FILL_LATER */
	UFFDM_PAGE_FILLED,
	UFFDM_PAGE_FAILED,
};

/* The state of the page at off (>= 0), or a negated errno. */
int uffdm_region_page_state(const struct uffdm_region *r, size_t off);

/* ---- 0.3 ------------------------------------------------------------- */

/*
 * Event-loop mode (UFFDM_HANDLER_EVENT_LOOP): the descriptor to poll for
 * POLLIN (level-triggered: readable while faults or events are queued),
 * and the call that serves what is ready, at most budget fault messages
 * and events, without blocking: the number served (0: nothing was ready),
 * -EBUSY (another thread is serving), -ESHUTDOWN (stopping), -EINVAL.
 */
int uffdm_handler_fd(const struct uffdm_handler *h);
int uffdm_handler_serve(struct uffdm_handler *h, unsigned int budget);

/*
 * The application's pointer for a region (NULL until set), for the fault
 * callback to find its own state from r without a lookup.
 */
void uffdm_region_set_user(struct uffdm_region *r, void *user);
void *uffdm_region_user(const struct uffdm_region *r);

/*
 * Page states that outlive a page server: the VMM moves r's states into a
 * memfd (returned; r keeps it, do not close it) to send with the
 * userfaultfd; a page server maps it into its region of the same memory
 * (on success r owns fd).  UFFDM_STATE_TAKEOVER: the previous server is
 * gone; the pages it owned (filling, deferred) are empty again, and its
 * faults already read are woken to fault again once the region is served.
 */
#define UFFDM_STATE_TAKEOVER	(1u << 0)
int uffdm_region_state_fd(struct uffdm_region *r);
int uffdm_region_adopt_state(struct uffdm_region *r, int fd, unsigned int flags);

/*
 * The VMM's watchdog over a page server in another process: a thread that
 * sees the server die (its pidfd readable, or its socket hung up) or stall
 * (a fault waiting stall_ms while no fault is served), then asks lost():
 * a new server's pidfd or socket (it took over: uffdm_region_adopt_state()
 * with UFFDM_STATE_TAKEOVER) to watch on, or a negative value, and then
 * every page of the regions not filled is failed (uffdm_range_fail()).
 * Stall detection reads the regions' shared states (uffdm_region_state_fd()).
 * The structs may grow: set size to sizeof of the one you compiled with.
 */
enum uffdm_server_loss {
	UFFDM_SERVER_DIED = 1,
	UFFDM_SERVER_STALLED,
};

struct uffdm_watchdog_params {
	size_t size;			/* sizeof(struct uffdm_watchdog_params) */
	int server_fd;			/* the server's pidfd, or its connected socket */
	unsigned int stall_ms;		/* 0: never a stall, only death */
	unsigned int fail_flags;	/* for uffdm_range_fail() */
	int (*lost)(enum uffdm_server_loss why, void *arg);	/* NULL: fail */
	void *arg;
};

struct uffdm_watchdog_report {
	size_t size;			/* sizeof(struct uffdm_watchdog_report) */
	unsigned int died, stalled;	/* losses seen, by cause */
	unsigned int replaced;		/* servers that took over */
	bool failed;			/* the pages not filled were failed */
	uint64_t takeover_ns;		/* the last replacement: loss seen -> its first fault served */
};

struct uffdm_watchdog;
int uffdm_watchdog_start(struct uffdm_watchdog **out, struct uffdm *u,
			 struct uffdm_region *const *regions, unsigned int nr,
			 const struct uffdm_watchdog_params *p);
int uffdm_watchdog_stop(struct uffdm_watchdog *w, struct uffdm_watchdog_report *report);

#ifdef __cplusplus
}
#endif

#endif /* UFFDMINOR_H */

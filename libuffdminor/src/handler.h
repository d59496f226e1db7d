/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What handler.c (threads, region table, stats) and pagestate.c (the
 * per-page fill-once state machine, mapping and failing pages) share.
 */
#ifndef UFFDM_HANDLER_H
#define UFFDM_HANDLER_H

#include <pthread.h>

#include "internal.h"

#define BATCH		64
#define TIME_EVERY	16
#define MAX_THREADS	64

/*
 * Log-linear latency histogram: 16 sub-buckets per power of two, so a
 * percentile is within 1/16 of the truth, in 8 KiB per thread.
 */
#define HIST_SUB_BITS	4
#define HIST_SUB	(1u << HIST_SUB_BITS)
#define HIST_BUCKETS	(64 * HIST_SUB)

enum counter {
	C_MINOR, C_MISSING, C_WP, C_EVENTS, C_RESOLVED, C_FAILED, C_EEXIST, C_EAGAIN,
	C_MESSAGES, C_FILLS, C_DUP, C_DEFERRED, C_COMPLETED, C_OUTSIDE, C_REQUEUED,
	C_LAT_SUM, C_CB_NS, C_IOCTL_NS, C_UNSERVED, C_NR
};

struct hthread {
	pthread_t tid;
	struct uffdm_handler *h;
	/*
	 * Timing a fault's steps (callback, ioctls) costs a clock read per
	 * step; in a guest whose clocksource has no vDSO read (hpet under
	 * TCG) each is a system call and an emulated MMIO read, which cost
	 * the handler 10% of its fault rate.  A handler thread times the
	 * steps of 1 fault in TIME_EVERY (timing) and scales them; every
	 * fault still reads the clock once, for its latency.  now: where the
	 * last read left off, the next step's start; fresh: read during this
	 * fault, whose latency then ends there.
	 */
	uint64_t now;
	unsigned int nfaults;
	bool timing, fresh;
	uint64_t count[C_NR];
	uint64_t max_ns;
	uint64_t hist[HIST_BUCKETS];
	struct uffdm_event batch[BATCH];
	struct uffdm_event spill[BATCH];
	unsigned int nspill;
};

struct uffdm_handler {
	struct uffdm *u;
	struct uffdm_handler_config cfg;
	int stop_fd;		/* eventfd: readable once stopping */
	bool poison;		/* fail with UFFDIO_POISON, else a SIGBUS descriptor */
	struct uffdm *sigbus;	/* without POISON: where faults outside every region go */
	bool stopping;
	bool serving;		/* event-loop mode: an application thread is in uffdm_handler_serve() */
	unsigned int nth;	/* serving blocks th[0..nth): cfg.threads, or 1 (event loop) */
	/* The regions served, sorted by uaddr; written under the lock. */
	pthread_rwlock_t lock;
	struct uffdm_region **regions;
	unsigned int nregions, cap;
	unsigned int started;
	struct hthread *ext;	/* counters of application threads: th[threads] */
	struct hthread th[];
};

/* handler.c: the 0.2 (default) versions of the public calls */
int uffdm__handler_start(struct uffdm_handler **out, struct uffdm *u, struct uffdm_region *r,
			 const struct uffdm_handler_config *cfg);
int uffdm__handler_stats(const struct uffdm_handler *h, struct uffdm_stats *st);
int uffdm__handler_stop(struct uffdm_handler *h, struct uffdm_stats *st);
uint64_t uffdm__now_ns(void);
/* A timed step's start on t; then uffdm__step_time() adds its time to counter c. */
uint64_t uffdm__step_start(struct hthread *t);
void uffdm__step_time(struct hthread *t, enum counter c, uint64_t t0);
void uffdm__count(struct hthread *t, enum counter c, uint64_t n);
struct hthread *uffdm__current(const struct uffdm_handler *h);
void uffdm__serve_event(struct hthread *t, const struct uffdm_event *ev);

/* pagestate.c */
/*
 * Tests only (test-zaprace.c links the static library; the shared one does
 * not export it): called between a run's "filled" and its mapping, the
 * window a zap can fall into.
 */
extern void (*uffdm__test_after_fill)(struct uffdm_region *r, size_t off, size_t len);
void uffdm__serve_page(struct hthread *t, struct uffdm_region *r, const struct uffdm_event *ev);
void uffdm__fail_outside(struct hthread *t, uint64_t addr);
void uffdm__fail_deferred(struct uffdm_handler *h, struct uffdm_region *r);
void uffdm__fail_unserved(struct uffdm_handler *h, struct uffdm_region *r);
bool uffdm__region_busy(const struct uffdm_region *r);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The handler (handler.c): threads or an application's event loop, the
 * region table, counters.  It serves through the page-state machine
 * (pagestate.h), which knows nothing of it.
 */
#ifndef UFFDM_HANDLER_H
#define UFFDM_HANDLER_H

#include <pthread.h>

#include "internal.h"
#include "pagestate.h"

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
	/* holding one fault begun on each watched region (handler.c hold_batch) */
	bool held;
};

struct uffdm_handler {
	struct uffdm *u;
	struct uffdm_handler_config cfg;
	int stop_fd;		/* eventfd: readable once stopping */
	bool poison;		/* fail with UFFDIO_POISON, else a SIGBUS descriptor */
	struct ps_server srv;	/* what the page-state machine serves with */
	struct uffdm *sigbus;	/* without POISON: where faults outside every region go */
	bool stopping;
	bool serving;		/* event-loop mode: an application thread is in uffdm_handler_serve() */
	unsigned int nth;	/* serving blocks th[0..nth): cfg.threads, or 1 (event loop) */
	/* The regions served, sorted by uaddr; written under the lock. */
	pthread_rwlock_t lock;
	struct uffdm_region **regions;
	unsigned int nregions, cap;
	unsigned int nwatched;	/* regions with shared states (a watchdog's) */
	unsigned int started;
	struct hthread *ext;	/* counters of application threads: th[threads] */
	struct hthread th[];
};

/* handler.c: the 0.2 (default) versions of the public calls */
int uffdm__handler_start(struct uffdm_handler **out, struct uffdm *u, struct uffdm_region *r,
			 const struct uffdm_handler_config *cfg);
int uffdm__handler_stats(const struct uffdm_handler *h, struct uffdm_stats *st);
int uffdm__handler_stop(struct uffdm_handler *h, struct uffdm_stats *st);

/* Tests only (test-watchdog.c): called with what a handler thread's read returned. */
extern void (*uffdm__test_after_read)(const struct uffdm_event *ev, int n);

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault-service loop: N threads read events, call the user's callback
 * to make each page right through the backing view, then map and wake.
 * Everything a thread needs on the fault path is allocated at start.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define BATCH		64
#define MAX_THREADS	64

/*
 * Log-linear latency histogram: 16 sub-buckets per power of two, so a
 * percentile is within 1/16 of the truth, in 8 KiB per thread.
 */
#define HIST_SUB_BITS	4
#define HIST_SUB	(1u << HIST_SUB_BITS)
#define HIST_BUCKETS	(64 * HIST_SUB)

enum counter {
	C_MINOR, C_MISSING, C_WP, C_EVENTS, C_RESOLVED, C_FAILED, C_EEXIST, C_EAGAIN, C_NR
};

struct hthread {
	pthread_t tid;
	struct uffdm_handler *h;
	uint64_t count[C_NR];
	uint64_t max_ns;
	uint64_t hist[HIST_BUCKETS];
	struct uffdm_event batch[BATCH];
	struct uffdm_event spill[BATCH];
	unsigned int nspill;
};

struct uffdm_handler {
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_handler_config cfg;
	int stop_fd;		/* eventfd: readable once stopping */
	struct uffdm *sigbus;	/* failure path without POISON; u's, not ours */
	bool poison;
	unsigned int started;
	struct hthread th[];
};

static unsigned int hist_index(uint64_t ns)
{
	unsigned int msb;

	if (ns < HIST_SUB)
		return (unsigned int)ns;
	msb = 63u - (unsigned int)__builtin_clzll(ns);
	return (msb - HIST_SUB_BITS + 1) * HIST_SUB +
	       (unsigned int)((ns >> (msb - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

/* The middle of a bucket, to report it. */
static uint64_t hist_value(unsigned int idx)
{
	unsigned int shift;
	uint64_t lo;

	if (idx < HIST_SUB)
		return idx;
	shift = idx / HIST_SUB - 1;
	lo = (uint64_t)(HIST_SUB + idx % HIST_SUB) << shift;
	return lo + ((1ull << shift) >> 1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Relaxed atomics: one writer per thread, readers in uffdm_handler_stats(). */
static void count(struct hthread *t, enum counter c)
{
	__atomic_fetch_add(&t->count[c], 1, __ATOMIC_RELAXED);
}

static void record_latency(struct hthread *t, uint64_t ns)
{
	__atomic_fetch_add(&t->hist[hist_index(ns)], 1, __ATOMIC_RELAXED);
	if (ns > __atomic_load_n(&t->max_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&t->max_ns, ns, __ATOMIC_RELAXED);
}

static bool is_fault(const struct uffdm_event *ev)
{
	return ev->kind == UFFDM_EVENT_MINOR || ev->kind == UFFDM_EVENT_MISSING ||
	       ev->kind == UFFDM_EVENT_WP;
}

static char *fault_page(const struct uffdm_handler *h, const struct uffdm_event *ev)
{
	return (char *)(uintptr_t)(ev->addr & ~((uint64_t)h->r->page - 1));
}

static void serve_event(struct hthread *t, const struct uffdm_event *ev)
{
	count(t, C_EVENTS);
	if (t->h->cfg.event)
		t->h->cfg.event(t->h->cfg.arg, ev);
}

/*
 * The spill is full and the kernel still refuses: the event it waits for
 * is queued behind faults (it hands out faults first).  Empty the spill
 * without resolving: events are served, faults are woken unresolved, so
 * their threads fault again and come back as fresh events later.
 */
static void requeue_spill(struct hthread *t)
{
	struct uffdm_handler *h = t->h;

	for (unsigned int i = 0; i < t->nspill; i++) {
		if (is_fault(&t->spill[i]))
			uffdm_wake(h->u, fault_page(h, &t->spill[i]), h->r->page);
		else
			serve_event(t, &t->spill[i]);
	}
	t->nspill = 0;
}

/* A resolving ioctl got EAGAIN: read the pending event so the kernel lets us. */
static void drain(struct hthread *t)
{
	int n;

	count(t, C_EAGAIN);
	if (t->nspill == BATCH)
		requeue_spill(t);
	n = uffdm_events_read(t->h->u, t->spill + t->nspill, BATCH - t->nspill,
			      UFFDM_READ_NONBLOCK);
	if (n > 0)
		t->nspill += (unsigned int)n;
	else
		sched_yield();	/* another handler thread is reading it */
}

static int poison_page(struct hthread *t, char *page, size_t len)
{
	ssize_t done;

	for (;;) {
		done = uffdm_poison(t->h->u, page, len, 0);
		if (done != -EAGAIN)
			break;
		drain(t);
	}
	if (done == -EEXIST)	/* mapped meanwhile: nothing to refuse */
		return uffdm_wake(t->h->u, page, len);
	return done < 0 ? (int)done : 0;
}

/*
 * The callback could not make the page right.  Never leave the faulting
 * thread asleep: poison the page (6.6+), so its retry gets SIGBUS; or move
 * the page to a descriptor opened with UFFD_FEATURE_SIGBUS, whose faults
 * are SIGBUS without an event, and wake the thread into it.  The wake comes
 * last whatever failed before it: a thread refaulting is better than one
 * asleep for ever.
 */
static int fail_page(struct hthread *t, char *page, size_t len)
{
	struct uffdm_handler *h = t->h;
	int ret, woke;

	if (h->poison)
		return poison_page(t, page, len);
	/* A MINOR-only range is not woken by UNREGISTER, so no window opens. */
	ret = uffdm_range_unregister(h->u, page, len);
	if (!ret)
		ret = uffdm_range_register(h->sigbus, page, len, 0, NULL);
	woke = uffdm_wake(h->u, page, len);
	return ret ? ret : woke;
}

static enum counter kind_counter(enum uffdm_event_kind k)
{
	switch (k) {
	case UFFDM_EVENT_MINOR:
		return C_MINOR;
	case UFFDM_EVENT_MISSING:
		return C_MISSING;
	default:
		return C_WP;
	}
}

static int unprotect(struct hthread *t, char *page)
{
	int ret;

	for (;;) {
		ret = uffdm_writeprotect(t->h->u, page, t->h->r->page, false);
		if (ret != -EAGAIN)
			return ret;
		drain(t);
	}
}

static int map_page(struct hthread *t, char *page)
{
	unsigned int before;
	int ret;

	for (;;) {
		before = t->nspill;
		ret = uffdm_resolve(t->h->u, page, t->h->r->page, t->spill, BATCH, &t->nspill);
		if (t->nspill != before)
			count(t, C_EAGAIN);
		if (ret == 1)
			count(t, C_EEXIST);
		if (ret != -EAGAIN)
			return ret < 0 ? ret : 0;
		requeue_spill(t);
	}
}

static int make_right(struct hthread *t, char *page, const struct uffdm_event *ev)
{
	struct uffdm_handler *h = t->h;
	struct uffdm_region *r = h->r;
	size_t off = (size_t)(page - (char *)r->view);
	int ret;

	if ((uintptr_t)page < (uintptr_t)r->view || off >= r->size)
		return -EFAULT;
	ret = h->cfg.fault(h->cfg.arg, r, off, ev);
	if (ret)
		return ret < 0 ? ret : -EIO;
	if (ev->kind == UFFDM_EVENT_WP)
		return unprotect(t, page);
	return map_page(t, page);
}

static void serve_fault(struct hthread *t, const struct uffdm_event *ev, uint64_t t0)
{
	char *page = fault_page(t->h, ev);

	count(t, kind_counter(ev->kind));
	if (make_right(t, page, ev)) {
		count(t, C_FAILED);
		fail_page(t, page, t->h->r->page);
	} else {
		count(t, C_RESOLVED);
	}
	record_latency(t, now_ns() - t0);
}

static void serve(struct hthread *t, const struct uffdm_event *ev, uint64_t t0)
{
	if (is_fault(ev))
		serve_fault(t, ev, t0);
	else
		serve_event(t, ev);
}

/* Events read while resolving: served last-in first-out, each may spill more. */
static void serve_spill(struct hthread *t, uint64_t t0)
{
	struct uffdm_event ev;

	while (t->nspill) {
		ev = t->spill[--t->nspill];
		serve(t, &ev, t0);
	}
}

static void *handler_thread(void *arg)
{
	struct hthread *t = arg;
	struct uffdm_handler *h = t->h;
	struct pollfd pfd[2] = {
		{ .fd = h->u->fd, .events = POLLIN },
		{ .fd = h->stop_fd, .events = POLLIN },
	};
	uint64_t t0;
	int n;

	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		n = uffdm_events_read(h->u, t->batch, BATCH, UFFDM_READ_NONBLOCK);
		if (n <= 0)
			continue;
		t0 = now_ns();
		for (int i = 0; i < n; i++) {
			serve(t, &t->batch[i], t0);
			serve_spill(t, t0);
		}
	}
	return NULL;
}

static int check_config(const struct uffdm *u, const struct uffdm_region *r,
			const struct uffdm_handler_config *cfg)
{
	if (!u || !r || !cfg || !cfg->fault)
		return -EINVAL;
	if (!cfg->threads || cfg->threads > MAX_THREADS)
		return -EINVAL;
	if (cfg->flags & ~UFFDM_HANDLER_SIGBUS_FD)
		return -EINVAL;
	return 0;
}

static int prepare(struct uffdm_handler *h)
{
	int fl = fcntl(h->u->fd, F_GETFL);

	/* Several threads poll one descriptor: a read must never block. */
	if (fl < 0 || fcntl(h->u->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	h->u->nonblock = true;
	h->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (h->stop_fd < 0)
		return -errno;
	h->poison = !(h->cfg.flags & UFFDM_HANDLER_SIGBUS_FD) &&
		    (h->u->avail & UFFD_FEATURE_POISON);
	if (h->poison)
		return 0;
	/* u owns it: an adopted u brings the one of its own mm */
	return uffdm__sigbus(h->u, &h->sigbus);
}

int uffdm_handler_start(struct uffdm_handler **out, struct uffdm *u, struct uffdm_region *r,
			const struct uffdm_handler_config *cfg)
{
	struct uffdm_handler *h;
	int ret;

	if (!out)
		return -EINVAL;
	ret = check_config(u, r, cfg);
	if (ret)
		return ret;
	h = calloc(1, sizeof(*h) + cfg->threads * sizeof(h->th[0]));
	if (!h)
		return -ENOMEM;
	h->u = u;
	h->r = r;
	h->cfg = *cfg;
	h->stop_fd = -1;
	ret = prepare(h);
	for (unsigned int i = 0; !ret && i < cfg->threads; i++) {
		h->th[i].h = h;
		ret = -pthread_create(&h->th[i].tid, NULL, handler_thread, &h->th[i]);
		if (!ret)
			h->started++;
	}
	if (ret) {
		uffdm_handler_stop(h, NULL);
		return ret;
	}
	*out = h;
	return 0;
}

/*
 * A bucket's value is its upper edge, which may lie above the largest
 * sample: never report a percentile above the exact maximum.
 */
static uint64_t percentile(const uint64_t *hist, uint64_t total, unsigned int pct,
			   uint64_t max)
{
	uint64_t want = (total * pct + 99) / 100, seen = 0;

	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= want && seen)
			return hist_value(i) < max ? hist_value(i) : max;
	}
	return 0;
}

/* Sums the threads' counters; a snapshot, consistent enough while running. */
int uffdm_handler_stats(const struct uffdm_handler *h, struct uffdm_stats *st)
{
	uint64_t hist[HIST_BUCKETS] = { 0 };
	uint64_t c[C_NR] = { 0 }, total = 0, max = 0;

	if (!h || !st)
		return -EINVAL;
	for (unsigned int i = 0; i < h->started; i++) {
		const struct hthread *t = &h->th[i];
		uint64_t m = __atomic_load_n(&t->max_ns, __ATOMIC_RELAXED);

		for (int k = 0; k < C_NR; k++)
			c[k] += __atomic_load_n(&t->count[k], __ATOMIC_RELAXED);
		for (unsigned int b = 0; b < HIST_BUCKETS; b++)
			hist[b] += __atomic_load_n(&t->hist[b], __ATOMIC_RELAXED);
		if (m > max)
			max = m;
	}
	for (unsigned int b = 0; b < HIST_BUCKETS; b++)
		total += hist[b];
	*st = (struct uffdm_stats){
		.minor = c[C_MINOR], .missing = c[C_MISSING], .wp = c[C_WP],
		.events = c[C_EVENTS], .resolved = c[C_RESOLVED], .failed = c[C_FAILED],
		.eexist = c[C_EEXIST], .eagain = c[C_EAGAIN],
		.p50_ns = percentile(hist, total, 50, max),
		.p99_ns = percentile(hist, total, 99, max),
		.max_ns = max,
	};
	return 0;
}

/*
 * Counts are taken after the threads are joined: a fault's thread runs on
 * as soon as it is woken, before its handler has counted it.
 */
int uffdm_handler_stop(struct uffdm_handler *h, struct uffdm_stats *st)
{
	uint64_t one = 1;
	int ret = 0;

	if (!h)
		return -EINVAL;
	if (h->stop_fd >= 0 && write(h->stop_fd, &one, sizeof(one)) < 0)
		ret = -errno;
	for (unsigned int i = 0; i < h->started; i++)
		pthread_join(h->th[i].tid, NULL);
	if (st)
		uffdm_handler_stats(h, st);
	if (h->stop_fd >= 0)
		close(h->stop_fd);
	free(h);
	return ret;
}

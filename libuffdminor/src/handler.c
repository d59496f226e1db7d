// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fault-service loop: N threads read events, look the fault up in the
 * handler's set of regions, and take its page through the region's state
 * machine (pagestate.c): only the first fault on an empty page runs the
 * user's callback; the others wait in the kernel until that page is
 * mapped.  Everything a thread needs on the fault path is allocated at
 * start (the region table only changes on add/remove).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "handler.h"

static __thread struct hthread *cur_thread;

/* The handler thread running a callback right now on this thread, or NULL. */
static struct hthread *current(const struct uffdm_handler *h)
{
	return cur_thread && cur_thread->h == h ? cur_thread : NULL;
}

/* ---- counters and latency ------------------------------------------- */

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

/* The power of two a fine bucket lies in: the exported bucket. */
static unsigned int hist_pow2(unsigned int idx)
{
	if (idx < HIST_SUB)
		return idx < 2 ? 0 : 31u - (unsigned int)__builtin_clz(idx);
	return idx / HIST_SUB + HIST_SUB_BITS - 1;
}

/*
 * Add n to a counter of t.  A handler thread is the one writer of its own
 * block: a relaxed load and store, no locked instruction (a fault adds to
 * eight counters; under TCG each locked add is dear).  The shared block
 * of application threads (completion, fill) has many writers: an atomic
 * add.  Readers, in uffdm_handler_stats(), load each word whole.
 */
static void add(const struct hthread *t, uint64_t *w, uint64_t n)
{
	if (t == t->h->ext)
		__atomic_fetch_add(w, n, __ATOMIC_RELAXED);
	else
		__atomic_store_n(w, __atomic_load_n(w, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static void count(struct hthread *t, enum counter c, uint64_t n)
{
	add(t, &t->count[c], n);
}

/*
 * Application threads share one hthread (h->ext) and time every step; a
 * handler thread only the faults it samples (timing), from where its last
 * clock read left off.
 */
static uint64_t step_start(struct hthread *t)
{
	if (t == t->h->ext)
		return uffdm__now_ns();
	return t->timing ? t->now : 0;
}

static void step_time(struct hthread *t, enum counter c, uint64_t t0)
{
	uint64_t now;

	if (t == t->h->ext) {
		count(t, c, uffdm__now_ns() - t0);
		return;
	}
	if (!t->timing)
		return;
	now = uffdm__now_ns();
	count(t, c, (now - t0) * TIME_EVERY);
	t->now = now;
	t->fresh = true;
}

static void record_latency(struct hthread *t, uint64_t ns)
{
	add(t, &t->hist[hist_index(ns)], 1);
	count(t, C_LAT_SUM, ns);
	if (ns > __atomic_load_n(&t->max_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&t->max_ns, ns, __ATOMIC_RELAXED);
}

/* ---- region table ----------------------------------------------------- */

/* The region whose registered view holds addr; the caller holds the lock. */
static struct uffdm_region *lookup(const struct uffdm_handler *h, uint64_t addr)
{
	unsigned int lo = 0, hi = h->nregions;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct uffdm_region *r = h->regions[mid];

		if (addr < r->uaddr)
			hi = mid;
		else if (addr - r->uaddr >= r->size)
			lo = mid + 1;
		else
			return h->regions[mid];
	}
	return NULL;
}

/* Where r goes in the sorted table, or -EINVAL when it overlaps a neighbour. */
static int insert_pos(const struct uffdm_handler *h, const struct uffdm_region *r)
{
	unsigned int i = 0;

	while (i < h->nregions && h->regions[i]->uaddr < r->uaddr)
		i++;
	if (i > 0 && h->regions[i - 1]->uaddr + h->regions[i - 1]->size > r->uaddr)
		return -EINVAL;
	if (i < h->nregions && r->uaddr + r->size > h->regions[i]->uaddr)
		return -EINVAL;
	return (int)i;
}

static int check_region(const struct uffdm_region *r)
{
	if (!r || !r->pstate || !r->uaddr || r->uaddr % r->page)
		return -EINVAL;
	return 0;
}

/*
 * A local view's failed pages are fenced (fence.c) from a memfd the
 * descriptor owns; with EVENT_UNMAP (no fence) they move to a SIGBUS
 * descriptor the region owns.  Both opened here, not on the fault path,
 * so failing needs no descriptor.  WP on shmem and hugetlbfs needs its
 * feature asked for on the SIGBUS descriptor.
 */
static int prepare_region(struct uffdm_handler *h, struct uffdm_region *r)
{
	uint64_t feat = UFFD_FEATURE_SIGBUS | (h->u->avail & UFFD_FEATURE_WP_HUGETLBFS_SHMEM);
	int ret;

	if (r->sigbus)
		return 0;
	if (uffdm__region_local(r)) {
		ret = uffdm__fence_prepare(h->u);
		if (!ret && uffdm__fence_usable(h->u))
			return 0;
		return uffdm_open(&r->sigbus, h->u->flags & ~UFFDM_OPEN_NONBLOCK, feat);
	}
	/*
	 * Another mm's view: POISON fails its holes; what POISON cannot (every
	 * page without it, a refused write) only that mm's owner can fence
	 * without a window, so its states must be shared with the owner's
	 * watchdog (owner.c).  A SIGBUS descriptor is not used: moving a page
	 * there reads a hole as zeroes or lands a refused write in between.
	 */
	return !h->poison && !r->tail ? -EOPNOTSUPP : 0;
}

/* r joins (true) or leaves the table, under the write lock: holders' counts follow. */
static void hold_region(struct uffdm_handler *h, struct uffdm_region *r, bool joins)
{
	if (!r->tail)
		return;
	for (unsigned int i = 0; i < h->nth; i++)
		if (h->th[i].held)
			uffdm__ps_hold(r, joins);
	__atomic_store_n(&h->nwatched, h->nwatched + (joins ? 1 : UINT_MAX), __ATOMIC_RELAXED);
}

int uffdm_handler_region_add(struct uffdm_handler *h, struct uffdm_region *r)
{
	struct uffdm_region **grown;
	int pos, ret;

	if (!h || check_region(r))
		return -EINVAL;
	pthread_rwlock_wrlock(&h->lock);
	ret = uffdm_region_handler(r) == h ? -EEXIST : uffdm_region_handler(r) ? -EBUSY : 0;
	pos = ret ? ret : insert_pos(h, r);
	if (pos < 0)
		goto out;
	ret = prepare_region(h, r);
	if (ret)
		goto out;
	if (h->nregions == h->cap) {
		grown = realloc(h->regions, (h->cap * 2 + 4) * sizeof(*grown));
		ret = grown ? 0 : -ENOMEM;
		if (ret)
			goto out;
		h->regions = grown;
		h->cap = h->cap * 2 + 4;
	}
	memmove(h->regions + pos + 1, h->regions + pos,
		(h->nregions - (unsigned int)pos) * sizeof(*h->regions));
	h->regions[pos] = r;
	h->nregions++;
	hold_region(h, r, true);
	__atomic_store_n(&r->handler, h, __ATOMIC_RELEASE);
	/* a taken-over region: the dead server's faults come back, to us */
	if (r->rewake) {
		r->rewake = false;
		uffdm_wake(h->u, (void *)r->uaddr, r->size);
	}
out:
	pthread_rwlock_unlock(&h->lock);
	return pos < 0 ? pos : ret;
}

struct uffdm_handler *uffdm_region_handler(const struct uffdm_region *r)
{
	return r ? __atomic_load_n(&r->handler, __ATOMIC_ACQUIRE) : NULL;
}

int uffdm_handler_region_remove(struct uffdm_handler *h, struct uffdm_region *r)
{
	unsigned int i;
	int ret = 0;

	if (!h || !r)
		return -EINVAL;
	pthread_rwlock_wrlock(&h->lock);
	for (i = 0; i < h->nregions && h->regions[i] != r; i++)
		;
	if (i == h->nregions)
		ret = -ENOENT;
	else if (uffdm__region_busy(r))
		ret = -EBUSY;
	if (!ret) {
		memmove(h->regions + i, h->regions + i + 1,
			(h->nregions - i - 1) * sizeof(*h->regions));
		h->nregions--;
		hold_region(h, r, false);
		__atomic_store_n(&r->handler, NULL, __ATOMIC_RELEASE);
	}
	pthread_rwlock_unlock(&h->lock);
	return ret;
}

/* ---- events ------------------------------------------------------------ */

static bool is_fault(const struct uffdm_event *ev)
{
	return ev->kind == UFFDM_EVENT_MINOR || ev->kind == UFFDM_EVENT_MISSING ||
	       ev->kind == UFFDM_EVENT_WP;
}

/*
 * Nobody to hand a FORK's child descriptor to: close it, or it leaks (and
 * keeps the child's registered ranges waiting on a descriptor no one reads).
 */
static void serve_event(struct hthread *t, const struct uffdm_event *ev)
{
	struct uffdm_handler *h = t->h;

	count(t, C_EVENTS, 1);
	if (h->cfg.event)
		h->cfg.event(h->cfg.arg, ev);
	else if (ev->kind == UFFDM_EVENT_FORK && ev->fork_fd >= 0)
		close(ev->fork_fd);
}

/* ---- what the page-state machine is given ------------------------------ */

static void ps_count(void *who, enum counter c, uint64_t n)
{
	count(who, c, n);
}

static uint64_t ps_step_start(void *who)
{
	return step_start(who);
}

static void ps_step_time(void *who, enum counter c, uint64_t t0)
{
	step_time(who, c, t0);
}

static void ps_event(void *who, const struct uffdm_event *ev)
{
	serve_event(who, ev);
}

static const struct ps_ops ps_ops = {
	.count = ps_count,
	.step_start = ps_step_start,
	.step_time = ps_step_time,
	.event = ps_event,
};

/*
 * Who serves now: the handler thread (or event loop) this runs on, whose
 * spill takes the events read while resolving; else an application
 * thread, counted in h->ext, with no spill.
 */
static void caller_init(struct ps_caller *c, struct uffdm_handler *h)
{
	struct hthread *t = current(h);

	*c = (struct ps_caller){ .srv = &h->srv, .who = t ? t : h->ext };
	if (t) {
		c->spill = t->spill;
		c->nspill = &t->nspill;
		c->max = BATCH;
	}
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

/*
 * A region of another mm whose states its owner shares: the owner's
 * fencer reads its slots, for a fault outside every region (under the
 * table's read lock).
 */
static struct uffdm_region *owner_region(const struct uffdm_handler *h)
{
	for (unsigned int i = 0; i < h->nregions; i++)
		if (h->regions[i]->tail && !uffdm__region_local(h->regions[i]))
			return h->regions[i];
	return NULL;
}

/*
 * No region holds the address.  It is never another region's business, so
 * it is either the application's (OUTSIDE_EVENT) or failed.
 */
static void serve_outside(struct hthread *t, const struct uffdm_event *ev)
{
	struct uffdm_handler *h = t->h;
	struct ps_caller c;

	count(t, C_OUTSIDE, 1);
	if (h->cfg.flags & UFFDM_HANDLER_OUTSIDE_EVENT) {
		h->cfg.event(h->cfg.arg, ev);
		return;
	}
	count(t, C_FAILED, 1);
	caller_init(&c, h);
	uffdm__ps_fail_outside(&c, h->sigbus, owner_region(h), ev);
}

static void serve_fault(struct hthread *t, const struct uffdm_event *ev, uint64_t t0)
{
	struct uffdm_handler *h = t->h;
	struct uffdm_region *r;
	struct ps_caller c;

	t->fresh = false;
	t->timing = t->nfaults++ % TIME_EVERY == 0;
	count(t, kind_counter(ev->kind), 1);
	count(t, C_MESSAGES, 1);
	/* Held across the callback: a region cannot leave while its page is served. */
	pthread_rwlock_rdlock(&h->lock);
	r = lookup(h, ev->addr);
	caller_init(&c, h);
	if (r)
		uffdm__ps_serve(&c, r, ev);
	else
		serve_outside(t, ev);
	pthread_rwlock_unlock(&h->lock);
	/* a timed fault's last step was its CONTINUE (or wake): it ended there */
	if (!t->fresh)
		t->now = uffdm__now_ns();
	record_latency(t, t->now - t0);
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

/*
 * The VMM's watchdog (watchdog.c) sees a fault waiting only while it is
 * queued, or begun and not ended.  One this thread has read and not yet
 * served is neither, and a SIGSTOP is taken on the way out of the very
 * read() that returned it: the vCPU would sleep for ever beside a server
 * that looks idle.  So a thread holds one fault begun on every watched
 * region from before its read until the batch is served.  Regions come
 * and go under the write lock, which gives a holder's count back or adds
 * it (hold_region); a region's states cannot change while it is served.
 */
static void hold_batch(struct hthread *t, bool hold)
{
	struct uffdm_handler *h = t->h;

	/* held is only ever written by its own thread */
	if (t->held == hold || (hold && !__atomic_load_n(&h->nwatched, __ATOMIC_RELAXED)))
		return;
	pthread_rwlock_rdlock(&h->lock);
	for (unsigned int i = 0; i < h->nregions; i++)
		uffdm__ps_hold(h->regions[i], hold);
	t->held = hold;
	pthread_rwlock_unlock(&h->lock);
}

void (*uffdm__test_after_read)(const struct uffdm_event *ev, int n);

/* Serve one batch of at most max events; 0 when nothing was queued. */
/* A fault among batch[from, n) or the spill: still in hand. */
static bool faults_left(const struct hthread *t, int from, int n)
{
	for (int i = from; i < n; i++)
		if (is_fault(&t->batch[i]))
			return true;
	for (unsigned int i = 0; i < t->nspill; i++)
		if (is_fault(&t->spill[i]))
			return true;
	return false;
}

static void serve_read(struct hthread *t, int n)
{
	uint64_t t0 = uffdm__now_ns();

	if (uffdm__test_after_read)
		uffdm__test_after_read(t->batch, n);
	t->now = t0;
	for (int i = 0; i < n; i++) {
		/* an application's slow event callback with no fault behind it is no stall */
		if (t->held && !is_fault(&t->batch[i]) && !faults_left(t, i + 1, n))
			hold_batch(t, false);
		serve(t, &t->batch[i], t0);
		serve_spill(t, t0);
	}
}

static int serve_batch(struct hthread *t, unsigned int max)
{
	int n;

	hold_batch(t, true);
	n = uffdm_events_read(t->h->u, t->batch, max < BATCH ? max : BATCH, UFFDM_READ_NONBLOCK);
	if (n > 0)
		serve_read(t, n);
	hold_batch(t, false);
	return n > 0 ? n : 0;
}

static void *handler_thread(void *arg)
{
	struct hthread *t = arg;
	struct uffdm_handler *h = t->h;
	struct pollfd pfd[2] = {
		{ .fd = h->u->fd, .events = POLLIN },
		{ .fd = h->stop_fd, .events = POLLIN },
	};

	cur_thread = t;
	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		serve_batch(t, BATCH);
	}
	/* Stopping: what is already queued is served, never left asleep. */
	while (serve_batch(t, BATCH))
		;
	cur_thread = NULL;
	return NULL;
}

/*
 * Event-loop mode: the application's thread is the handler thread th[0]
 * while it serves (the callbacks see it as their own handler's), one at a
 * time.  It reads only what is ready; nothing here blocks.
 */
static int serve_ready(struct uffdm_handler *h, unsigned int budget)
{
	struct hthread *t = &h->th[0], *was = cur_thread;
	unsigned int done = 0;
	int n;

	if (__atomic_exchange_n(&h->serving, true, __ATOMIC_ACQUIRE))
		return -EBUSY;
	cur_thread = t;
	do {
		n = serve_batch(t, budget - done);
		done += (unsigned int)n;
	} while (n > 0 && done < budget);
	cur_thread = was;
	__atomic_store_n(&h->serving, false, __ATOMIC_RELEASE);
	return (int)done;
}

int uffdm_handler_serve(struct uffdm_handler *h, unsigned int budget)
{
	if (!h || !budget || !(h->cfg.flags & UFFDM_HANDLER_EVENT_LOOP))
		return -EINVAL;
	if (__atomic_load_n(&h->stopping, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	return serve_ready(h, budget > INT_MAX ? INT_MAX : budget);
}

int uffdm_handler_fd(const struct uffdm_handler *h)
{
	if (!h || !(h->cfg.flags & UFFDM_HANDLER_EVENT_LOOP))
		return -EINVAL;
	return h->u->fd;
}

/* ---- start, stats, stop ---------------------------------------------- */

static int check_config(const struct uffdm *u, const struct uffdm_handler_config *cfg)
{
	bool loop = cfg && (cfg->flags & UFFDM_HANDLER_EVENT_LOOP);

	if (!u || !cfg || !cfg->fault)
		return -EINVAL;
	/* the application's loop is the one handler thread: the library starts none */
	if (loop ? cfg->threads : !cfg->threads || cfg->threads > MAX_THREADS)
		return -EINVAL;
	if (cfg->flags & ~(UFFDM_HANDLER_SIGBUS_FD | UFFDM_HANDLER_OUTSIDE_EVENT |
			   UFFDM_HANDLER_EVENT_LOOP))
		return -EINVAL;
	if ((cfg->flags & UFFDM_HANDLER_OUTSIDE_EVENT) && !cfg->event)
		return -EINVAL;
	for (size_t i = 0; i < UFFDM_ARRAY_SIZE(cfg->reserved); i++)
		if (cfg->reserved[i])
			return -EINVAL;
	return 0;
}

static int prepare(struct uffdm_handler *h)
{
	int fl = fcntl(h->u->fd, F_GETFL), ret;

	/* Several threads poll one descriptor: a read must never block. */
	if (fl < 0 || fcntl(h->u->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	h->u->nonblock = true;
	h->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (h->stop_fd < 0)
		return -errno;
	h->poison = !(h->cfg.flags & UFFDM_HANDLER_SIGBUS_FD) &&
		    (h->u->avail & UFFD_FEATURE_POISON);
	h->srv = (struct ps_server){
		.u = h->u, .poison = h->poison, .fault = h->cfg.fault, .arg = h->cfg.arg,
		.ops = &ps_ops,
	};
	if (h->u->adopted)
		return 0;	/* another mm: POISON, or its owner (owner.c) */
	/* a fault outside every region of this mm is fenced */
	ret = uffdm__fence_prepare(h->u);
	if (ret || h->poison || uffdm__fence_usable(h->u))
		return ret;
	/* with EVENT_UNMAP, where no fence can be made */
	return uffdm__sigbus_open(h->u, UFFD_FEATURE_SIGBUS, &h->sigbus);
}

static void handler_free(struct uffdm_handler *h)
{
	for (unsigned int i = 0; i < h->nregions; i++)
		__atomic_store_n(&h->regions[i]->handler, NULL, __ATOMIC_RELEASE);
	free(h->regions);
	if (h->stop_fd >= 0)
		close(h->stop_fd);
	uffdm_close(h->sigbus);
	__atomic_store_n(&h->u->served, false, __ATOMIC_RELEASE);
	pthread_rwlock_destroy(&h->lock);
	free(h);
}

int uffdm__handler_start(struct uffdm_handler **out, struct uffdm *u, struct uffdm_region *r,
			const struct uffdm_handler_config *cfg)
{
	struct uffdm_handler *h;
	unsigned int nth;
	int ret;

	if (!out)
		return -EINVAL;
	ret = check_config(u, cfg);
	if (ret)
		return ret;
	/* th[nth] is the block application threads count into; th[0] an event loop's. */
	nth = cfg->threads ? cfg->threads : 1;
	h = calloc(1, sizeof(*h) + (nth + 1) * sizeof(h->th[0]));
	if (!h)
		return -ENOMEM;
	/* Two readers of one descriptor would each fail the other's faults. */
	if (__atomic_exchange_n(&u->served, true, __ATOMIC_ACQ_REL)) {
		free(h);
		return -EBUSY;
	}
	h->u = u;
	h->cfg = *cfg;
	h->stop_fd = -1;
	h->nth = nth;
	h->ext = &h->th[nth];
	h->ext->h = h;
	h->th[0].h = h;
	pthread_rwlock_init(&h->lock, NULL);
	ret = prepare(h);
	if (!ret && r)
		ret = uffdm_handler_region_add(h, r);
	if (ret) {
		handler_free(h);
		return ret;
	}
	for (unsigned int i = 0; !ret && i < cfg->threads; i++) {
		h->th[i].h = h;
		ret = uffdm__thread_start(&h->th[i].tid, handler_thread, &h->th[i]);
		if (!ret)
			h->started++;
	}
	if (ret) {
		uffdm__handler_stop(h, NULL);
		return ret;
	}
	if (!cfg->threads)
		h->started = 1;	/* th[0], the event loop's, counts */
	*out = h;
	return 0;
}

/*
 * A bucket's value is its middle, which may lie above the largest sample:
 * never report a percentile above the exact maximum.
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

static void sum_threads(const struct uffdm_handler *h, uint64_t *c, uint64_t *hist,
			uint64_t *max)
{
	for (unsigned int i = 0; i <= h->nth; i++) {
		const struct hthread *t = &h->th[i];
		uint64_t m = __atomic_load_n(&t->max_ns, __ATOMIC_RELAXED);

		if (i < h->nth && i >= h->started)
			continue;
		for (int k = 0; k < C_NR; k++)
			c[k] += __atomic_load_n(&t->count[k], __ATOMIC_RELAXED);
		for (unsigned int b = 0; b < HIST_BUCKETS; b++)
			hist[b] += __atomic_load_n(&t->hist[b], __ATOMIC_RELAXED);
		if (m > *max)
			*max = m;
	}
}

/* Sums the threads' counters; a snapshot, consistent enough while running. */
int uffdm__handler_stats(const struct uffdm_handler *h, struct uffdm_stats *st)
{
	uint64_t hist[HIST_BUCKETS] = { 0 };
	uint64_t c[C_NR] = { 0 }, total = 0, max = 0;

	if (!h || !st)
		return -EINVAL;
	sum_threads(h, c, hist, &max);
	memset(st, 0, sizeof(*st));
	for (unsigned int b = 0; b < HIST_BUCKETS; b++) {
		total += hist[b];
		st->hist[hist_pow2(b) < UFFDM_STATS_BUCKETS ? hist_pow2(b) :
			 UFFDM_STATS_BUCKETS - 1] += hist[b];
	}
	st->minor = c[C_MINOR];
	st->missing = c[C_MISSING];
	st->wp = c[C_WP];
	st->events = c[C_EVENTS];
	st->resolved = c[C_RESOLVED];
	st->failed = c[C_FAILED];
	st->eexist = c[C_EEXIST];
	st->eagain = c[C_EAGAIN];
	st->p50_ns = percentile(hist, total, 50, max);
	st->p99_ns = percentile(hist, total, 99, max);
	st->max_ns = max;
	st->messages = c[C_MESSAGES];
	st->fills = c[C_FILLS];
	st->duplicates = c[C_DUP];
	st->deferred = c[C_DEFERRED];
	st->completed = c[C_COMPLETED];
	st->outside = c[C_OUTSIDE];
	st->requeued = c[C_REQUEUED];
	st->latency_count = total;
	st->mean_ns = total ? c[C_LAT_SUM] / total : 0;
	st->callback_ns = c[C_CB_NS];
	st->ioctl_ns = c[C_IOCTL_NS];
	st->unserved = c[C_UNSERVED];
	return 0;
}

/*
 * Counts are taken after the threads are joined: a fault's thread runs on
 * as soon as it is woken, before its handler has counted it.  The threads
 * serve what is queued before they leave; pages still deferred then have
 * no one to complete them and fail, so no thread sleeps on past the stop.
 */
int uffdm__handler_stop(struct uffdm_handler *h, struct uffdm_stats *st)
{
	struct ps_caller c;
	uint64_t one = 1;
	int ret = 0;

	if (!h)
		return -EINVAL;
	__atomic_store_n(&h->stopping, true, __ATOMIC_RELEASE);
	if (h->stop_fd >= 0 && write(h->stop_fd, &one, sizeof(one)) < 0)
		ret = -errno;
	if (!h->cfg.threads) {
		/* the loop's last turn, here: what is queued is served, never left asleep */
		while (serve_ready(h, BATCH) == -EBUSY)
			sched_yield();
		while (serve_ready(h, BATCH) > 0)
			;
	}
	for (unsigned int i = 0; i < h->cfg.threads && i < h->started; i++)
		pthread_join(h->th[i].tid, NULL);
	caller_init(&c, h);
	for (unsigned int i = 0; i < h->nregions; i++) {
		uffdm__ps_fail_deferred(&c, h->regions[i]);
		uffdm__ps_fail_unserved(&c, h->regions[i]);
	}
	if (st)
		uffdm__handler_stats(h, st);
	handler_free(h);
	return ret;
}

/* ---- completion, claims, readahead: the handler checked, then the pages ---- */

/* r is served by h: the page-state machine then checks the span. */
static int check_owner(const struct uffdm_handler *h, const struct uffdm_region *r)
{
	return h && uffdm_region_handler(r) == h ? 0 : -EINVAL;
}

int uffdm_handler_complete(struct uffdm_handler *h, struct uffdm_region *r, size_t off,
			   size_t len, int err)
{
	struct ps_caller c;
	int ret = check_owner(h, r);

	if (ret)
		return ret;
	caller_init(&c, h);
	return uffdm__ps_complete(&c, r, off, len, err);
}

int uffdm_handler_claim(struct uffdm_handler *h, struct uffdm_region *r, size_t off,
			unsigned int flags)
{
	int ret = check_owner(h, r);

	if (!ret)
		ret = uffdm__ps_check_span(r, off, r->page);
	if (!ret && (flags & ~UFFDM_CLAIM_WAIT))
		ret = -EINVAL;
	if (ret)
		return ret;
	/* inside a callback a page in another callback is that callback's to fill */
	return uffdm__ps_claim(r, off, (flags & UFFDM_CLAIM_WAIT) && !current(h));
}

/* Complete the claimed run [start, end); its pages filled or the fill's error. */
static int flush_run(struct uffdm_handler *h, struct uffdm_region *r, size_t start, size_t end,
		     int err)
{
	return start < end ? uffdm_handler_complete(h, r, start, end - start, err) : 0;
}

ssize_t uffdm_handler_fill(struct uffdm_handler *h, struct uffdm_region *r, size_t off,
			   size_t len, uffdm_fill_fn fill, void *arg)
{
	size_t start = off, filled = 0;
	int ret = check_owner(h, r);

	if (!ret)
		ret = uffdm__ps_check_span(r, off, len);

	if (ret || !fill)
		return ret ? ret : -EINVAL;
	for (size_t o = off; o < off + len; o += r->page) {
		int err;

		if (uffdm_handler_claim(h, r, o, 0) != UFFDM_CLAIM_EMPTY) {
			flush_run(h, r, start, o, 0);
			start = o + r->page;
			continue;
		}
		err = fill(arg, r, o);
		if (err) {
			flush_run(h, r, start, o, 0);
			flush_run(h, r, o, o + r->page, err < 0 ? err : -EIO);
			start = o + r->page;
			continue;
		}
		filled++;
	}
	flush_run(h, r, start, off + len, 0);
	return (ssize_t)filled;
}

/* The 0.2 layouts are the default versions; src/compat.c keeps 0.1's. */
__asm__(".symver uffdm__handler_start,uffdm_handler_start@@LIBUFFDMINOR_0.2");
__asm__(".symver uffdm__handler_stats,uffdm_handler_stats@@LIBUFFDMINOR_0.2");
__asm__(".symver uffdm__handler_stop,uffdm_handler_stop@@LIBUFFDMINOR_0.2");

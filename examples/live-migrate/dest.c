// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The destination: take the precopy stream into the backing view, and at
 * the switch-over run the workload on the other view at once.
 *
 * Minor mode keeps no page states of its own: libuffdminor's handler owns
 * them (fill-once, deferred completion).  The first fault on a page whose
 * content is not known good asks the source and returns UFFDM_FILL_LATER:
 * the request goes out at once when that cannot wait, else it is queued
 * for the asker's sender thread (ask.c) -- a fault callback never waits for
 * the urgent connection, a full socket or its send lock.  Whatever makes a
 * page good -- the stale list saying it is clean (the background walker
 * fills those runs), an answer, a pushed copy -- claims it, writes it if
 * there is data, hashes it for --verify and completes it.  A
 * page is hashed exactly as the workload first sees it, and nothing unknown
 * is ever mapped.  Missing mode (the QEMU-style baseline) keeps a two-state
 * byte per page: stale until UFFDIO_COPY, then mapped.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "lm.h"

/* missing mode only: st[] */
enum { M_UNKNOWN, M_STALE, M_MAPPED };

#define MAX_SAMPLES (1u << 20)

struct dst {
	const struct lm_opts *o;
	struct lm_hello hello;
	struct lm_door door;
	bool verify;		/* as HELLO says: the source hashes only then */
	uint8_t vkey[16];	/* --verify's hash key, of the key and session */
	bool resumed;		/* the workload runs here */
	/* a LAST ROUND was echoed: from then on the source may pause and send
	 * SWITCH (it pauses only once its drain and RTT probes came back) */
	bool may_switch;
	atomic_int rejoinable;	/* a broken link waits for the source to rejoin */
	bool stale_done;	/* the whole stale list came (counted once) */
	bool hashes_done;	/* the source's page hashes came, all of them */
	bool source_gone;	/* it did not come back: this end runs on alone */
	unsigned int rejoins;
	bool got_pages;
	struct lm_switch sw;
	struct lm_done done;
	struct uffdm_region *r;
	uint8_t *view, *back;
	size_t size, page;
	uint64_t npages;
	struct lm_geom g;
	struct lm_link link;
	struct lm_conn m, urg;
	_Atomic uint8_t *st;		/* missing mode: M_* */
	uint8_t *stale_bits;		/* the stale list */
	struct lm_asker ask;		/* page requests on urg */
	uint64_t *recv_hash, *vis_hash, *src_hash, *fault_t0;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_int dead, stop;
	char dead_msg[200];
	struct uffdm *u;
	struct uffdm_handler *h;
	struct workload wl;
	pthread_t urg_tid, walk_tid, fault_tid, sample_tid, beat_tid;
	bool urg_running, walk_running, fault_running, sample_running, beat_running;
	atomic_int beat_stop;
	_Atomic uint64_t tick;		/* bumped by every step of progress after DONE */
	atomic_uint phase;		/* enum lm_progress_phase */
	atomic_uint_fast64_t mapped, faults, demand, nsamples;
	_Atomic uint64_t cb_max_ns;	/* the longest fault callback (it must not wait) */
	uint64_t *lat, *lat_t;		/* fault latency samples and when */
	uint64_t t_resume, t_switch, t_hello, t_done, ops_resume;
	uint64_t nstale;		/* from the stale list */
	struct uffdm_stats hst;
	FILE *rate_log;
};

static void wake_all(struct dst *d)
{
	pthread_mutex_lock(&d->lock);
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void set_dead(struct dst *d, const char *why)
{
	pthread_mutex_lock(&d->lock);
	if (!atomic_load(&d->dead) && !atomic_load(&d->stop)) {
		snprintf(d->dead_msg, sizeof(d->dead_msg), "%s", why);
		atomic_store(&d->dead, 1);
	}
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void mark_mapped(struct dst *d, uint64_t i, uint64_t hash)
{
	d->vis_hash[i] = hash;
	atomic_store(&d->st[i], M_MAPPED);
	atomic_fetch_add(&d->mapped, 1);
}

static void sample(struct dst *d, uint64_t i)
{
	uint64_t t0 = d->fault_t0 ? __atomic_load_n(&d->fault_t0[i], __ATOMIC_RELAXED) : 0;
	uint64_t n, now;

	if (!t0)
		return;
	now = lm_now_ns();
	n = atomic_fetch_add(&d->nsamples, 1);
	if (n < MAX_SAMPLES) {
		d->lat[n] = now - t0;
		d->lat_t[n] = now;
	}
}

static uint64_t page_hash(struct dst *d, const void *p)
{
	return d->verify ? lm_page_hash(d->vkey, p, d->page) : 0;
}

/* missing mode: page i's content arrived; copy it in, which wakes its faults */
static int copy_page(struct dst *d, uint64_t i, const uint8_t *data)
{
	ssize_t n;

	if (atomic_load(&d->st[i]) == M_MAPPED) {
		set_dead(d, "protocol error: a page was sent twice");
		return -EBADMSG;
	}
	n = uffdm_copy(d->u, d->view + i * d->page, data, d->page, 0);
	if (n < 0 && n != -EEXIST)
		return (int)n;
	sample(d, i);
	mark_mapped(d, i, page_hash(d, data));
	return 0;
}

/* ---- minor mode: pages made good, completed through the library ------- */

/* Page i of the backing view holds the source's content at pause: map it. */
static int complete_page(struct dst *d, uint64_t i)
{
	int ret;

	d->vis_hash[i] = page_hash(d, d->back + i * d->page);
	ret = uffdm_handler_complete(d->h, d->r, i * d->page, d->page, 0);
	if (!ret) {
		atomic_fetch_add(&d->mapped, 1);
		sample(d, i);
	}
	return ret;
}

/*
 * Page i is good: data is its fresh copy, or NULL when the precopy content
 * is (an answer "clean").  A fault may wait for it (deferred) or not
 * (empty); a callback deciding about it right now is waited for.
 */
static int make_good(struct dst *d, uint64_t i, const uint8_t *data)
{
	int c = uffdm_handler_claim(d->h, d->r, i * d->page, UFFDM_CLAIM_WAIT);

	if (c < 0)
		return c;
	if (c == UFFDM_CLAIM_NONE) {
		if (!data)
			return 0;	/* clean, and the walker got there first */
		set_dead(d, "protocol error: a page was sent twice");
		return -EBADMSG;
	}
	if (data)
		memcpy(d->back + i * d->page, data, d->page);
	return complete_page(d, i);
}

static int take_fresh(struct dst *d, uint64_t i, const uint8_t *data)
{
	return d->o->mode == LM_MODE_MISSING ? copy_page(d, i, data) : make_good(d, i, data);
}

/* uffdm_handler_fill's callback: a clean page's precopy content is right. */
static int fill_clean(void *arg, struct uffdm_region *r, size_t off)
{
	struct dst *d = arg;

	(void)r;
	d->vis_hash[off / d->page] = page_hash(d, d->back + off);
	return 0;
}

/*
 * Proactive CONTINUE: once the stale list is in, map every clean page ahead
 * of the workload, in runs.  Each page is looked at once: an empty one is
 * filled here; one a fault already asked about is completed by the answer.
 */
static void *walker(void *p)
{
	struct dst *d = p;

	for (uint64_t i = 0; i < d->npages && !atomic_load(&d->stop); ) {
		uint64_t n = 0;
		ssize_t got;

		while (i + n < d->npages && n < 512 && !bit_get(d->stale_bits, i + n))
			n++;
		if (!n) {
			i++;
			continue;
		}
		got = uffdm_handler_fill(d->h, d->r, i * d->page, n * d->page, fill_clean, d);
		if (got < 0) {
			set_dead(d, "UFFDIO_CONTINUE failed in the background mapper");
			return NULL;
		}
		atomic_fetch_add(&d->mapped, (uint64_t)got);
		i += n;
	}
	return NULL;
}

/* Ask the source about page i, once, never waiting (ask.c). */
static void request(struct dst *d, uint64_t i)
{
	if (lm_ask(&d->ask, i))
		atomic_fetch_add(&d->demand, 1);
}

/*
 * The asker's send failed (its send lock held): the link broke, or the
 * peer took nothing for --timeout.  Its socket is shut down, so the
 * receivers see the break; the pages are asked again after a rejoin.
 */
static void urgent_broke(void *arg, int err)
{
	struct dst *d = arg;

	(void)err;
	if (!atomic_load(&d->rejoinable))
		set_dead(d, d->urg.err);
}

/* The longest a fault callback took, for the report: it must not wait. */
static void callback_took(struct dst *d, uint64_t t0)
{
	uint64_t ns = lm_now_ns() - t0, max = atomic_load(&d->cb_max_ns);

	while (ns > max && !atomic_compare_exchange_weak(&d->cb_max_ns, &max, ns))
		;
}

/*
 * Handler callback, once per page: the first fault on a page nothing has
 * made good yet.  Ask the source (never waiting: the handler's other
 * faults would wait behind this one) and let the answer complete it.
 */
static int minor_fault(void *arg, struct uffdm_region *r, size_t off,
		       const struct uffdm_event *ev)
{
	struct dst *d = arg;
	uint64_t i = off / d->page, t0 = lm_now_ns();

	(void)r;
	(void)ev;
	atomic_fetch_add(&d->faults, 1);
	if (atomic_load(&d->dead))
		return -EIO;	/* never show the precopy copy */
	/* --plot: this fault's latency, sampled when its page is completed */
	__atomic_store_n(&d->fault_t0[i], t0, __ATOMIC_RELAXED);
	request(d, i);
	callback_took(d, t0);
	return UFFDM_FILL_LATER;
}

/* Source lost: every page a fault waits for fails (the thread gets SIGBUS). */
static void fail_deferred(void *arg)
{
	struct dst *d = arg;

	for (uint64_t i = 0; d->h && i < d->npages; i++)
		if (uffdm_region_page_state(d->r, i * d->page) == UFFDM_PAGE_DEFERRED)
			uffdm_handler_complete(d->h, d->r, i * d->page, d->page, -EIO);
}

/* ---- postcopy-missing: fault loop ---------------------------------------- */

static void *missing_faults(void *p)
{
	struct dst *d = p;
	struct uffdm_event ev[16];

	while (!atomic_load(&d->stop)) {
		struct pollfd pf = { .fd = uffdm_fd(d->u), .events = POLLIN };
		int n;

		if (poll(&pf, 1, 50) <= 0)
			continue;
		n = uffdm_events_read(d->u, ev, 16, UFFDM_READ_NONBLOCK);
		for (int k = 0; k < n; k++) {
			uint64_t i = (ev[k].addr - (uintptr_t)d->view) / d->page;
			uint64_t t0 = lm_now_ns();

			if (ev[k].kind != UFFDM_EVENT_MISSING || i >= d->npages)
				continue;
			atomic_fetch_add(&d->faults, 1);
			if (atomic_load(&d->st[i]) == M_MAPPED) {
				uffdm_wake(d->u, d->view + i * d->page, d->page);
				continue;
			}
			__atomic_store_n(&d->fault_t0[i], t0, __ATOMIC_RELAXED);
			/* the copy of the answer, or of the push, wakes it; the
			 * faults after it in ev[] do not wait for the request */
			request(d, i);
			callback_took(d, t0);
		}
	}
	return NULL;
}

/* ---- receiving ------------------------------------------------------------ */

static void *urgent_rx(void *p)
{
	struct dst *d = p;
	struct lm_frame f;

	int ret;

	while (!(ret = lm_recv(&d->urg, &d->g, &f))) {
		const struct lm_resp *r = f.fixed;

		if (f.h.type != LM_RESP) {
			snprintf(d->urg.err, sizeof(d->urg.err), "urgent connection: unexpected "
				 "%s frame", lm_type_name(f.h.type));
			ret = -EBADMSG;
			break;
		}
		/* PUSHED: the background push will bring it */
		if (r->status != LM_RESP_PUSHED &&
		    (ret = take_fresh(d, r->page, r->status == LM_RESP_DATA ? f.data : NULL)))
			break;
	}
	/* a broken link, while the source may rejoin: the main thread waits for it */
	if (!lm_err_is_protocol(ret) && atomic_load(&d->rejoinable) && !atomic_load(&d->stop)) {
		shutdown(d->m.fd, SHUT_RDWR);
		return NULL;
	}
	set_dead(d, d->urg.err);
	return NULL;
}

static void take_precopy(struct dst *d, const struct lm_frame *f)
{
	const struct lm_pages *p = f->fixed;

	memcpy(d->back + p->first * d->page, f->data, f->data_len);
	/* minor mode hashes a page when it maps it; the others map at resume */
	for (uint64_t k = 0; d->o->mode != LM_MODE_MINOR && k < p->count; k++)
		d->recv_hash[p->first + k] = page_hash(d, f->data + k * d->page);
}

/* The stale list: minor mode keeps the bits for the walker; missing mode
 * copies clean pages in at resume and waits for the stale ones. */
static void take_stale(struct dst *d, const struct lm_frame *f)
{
	const struct lm_stale *s = f->fixed;

	for (uint64_t k = 0; k < s->nbits; k++) {
		uint64_t i = s->first + k;
		bool stale = bit_get(f->data, k);

		if (d->stale_done)
			continue;	/* sent again after a rejoin: known */
		d->nstale += stale;
		if (stale)
			bit_set(d->stale_bits, i);
		if (d->o->mode != LM_MODE_MISSING || atomic_load(&d->st[i]) != M_UNKNOWN)
			continue;
		if (stale)
			atomic_store(&d->st[i], M_STALE);
		else
			mark_mapped(d, i, d->recv_hash[i]);
	}
	if (f->h.flags & LM_F_LAST)
		d->stale_done = true;
}

/* Pushed pages: each made good (minor) or copied in (missing) at once. */
static int take_push(struct dst *d, const struct lm_frame *f)
{
	const struct lm_pages *p = f->fixed;

	for (uint64_t k = 0; k < p->count; k++) {
		int ret = take_fresh(d, p->first + k, f->data + k * d->page);

		if (ret)
			return ret;
	}
	return 0;
}

static int bad_frame(struct dst *d, const struct lm_frame *f, const char *phase)
{
	snprintf(d->m.err, sizeof(d->m.err), "main connection: unexpected %s frame %s",
		 lm_type_name(f->h.type), phase);
	return -EBADMSG;
}

static void inject(const struct dst *d, const char *what)
{
	lm_inject(d->o, "destination", what);
}

/* Until SWITCH: precopy (and stop-copy) pages into the backing view. */
static int receive_precopy(struct dst *d)
{
	struct lm_frame f;
	int ret;

	while (!(ret = lm_recv(&d->m, &d->g, &f))) {
		switch (f.h.type) {
		case LM_PAGES:
			if (f.h.flags & LM_F_PUSH)
				return bad_frame(d, &f, "before the switch-over");
			take_precopy(d, &f);
			inject(d, "die-precopy");
			inject(d, "stop-precopy");
			if (f.h.flags & LM_F_STOPCOPY)
				inject(d, "stop-paused");
			break;
		case LM_ROUND:
			lm_trace("lm dst: ROUND received");
			/* everything before it is in: the source may pause */
			if ((f.h.flags & LM_F_LAST) &&
			    (ret = lm_send(&d->m, LM_ROUND, 0, f.fixed, NULL, 0)))
				return ret;
			d->may_switch |= (f.h.flags & LM_F_LAST) != 0;
			/* probe knob: wait for SWITCH spinning, not asleep */
			if ((f.h.flags & LM_F_LAST) && getenv("LM_SPIN_MS"))
				d->m.spin_until_ns = lm_now_ns() +
						     (uint64_t)atoi(getenv("LM_SPIN_MS")) * 1000000ull;
			break;
		case LM_SWITCH:
			d->t_switch = lm_now_ns();
			d->m.spin_until_ns = 0;
			lm_trace("lm dst: SWITCH received");
			d->sw = *(const struct lm_switch *)f.fixed;
			return 0;
		default:
			return bad_frame(d, &f, "during precopy");
		}
	}
	return ret;
}

/* postcopy-missing: the stale list comes before the resume. */
static int receive_stale_list(struct dst *d)
{
	struct lm_frame f;
	int ret;

	while (!(ret = lm_recv(&d->m, &d->g, &f))) {
		if (f.h.type != LM_STALE)
			return bad_frame(d, &f, "instead of the stale list");
		take_stale(d, &f);
		if (f.h.flags & LM_F_LAST)
			break;
	}
	if (ret)
		return ret;
	/* drop the stale pages so their first touch is a missing fault */
	for (uint64_t i = 0; i < d->npages; ) {
		uint64_t n = 0;

		while (i + n < d->npages && atomic_load(&d->st[i + n]) == M_STALE)
			n++;
		if (!n) {
			i++;
			continue;
		}
		ret = uffdm_region_discard(d->r, i * d->page, n * d->page);
		if (ret)
			return ret;
		i += n;
	}
	return 0;
}

static bool page_wanted(struct dst *d, uint64_t i)
{
	if (d->o->mode == LM_MODE_MISSING)
		return atomic_load(&d->st[i]) != M_MAPPED;
	return uffdm_region_page_state(d->r, i * d->page) != UFFDM_PAGE_FILLED;
}

/* Faults the broken link left unanswered: asked again on the new one. */
static void ask_again(struct dst *d)
{
	for (uint64_t i = 0; d->o->mode == LM_MODE_MINOR && i < d->npages; i++)
		if (uffdm_region_page_state(d->r, i * d->page) == UFFDM_PAGE_DEFERRED)
			request(d, i);
}

/* Pages this destination still lacks, for a rejoining source. */
static int send_need(struct dst *d)
{
	const uint64_t chunk = 65536 * 8;
	uint8_t *b = malloc(chunk / 8);
	int ret = 0;

	if (!b)
		return -ENOMEM;
	for (uint64_t first = 0; !ret && first < d->npages; first += chunk) {
		uint64_t n = d->npages - first < chunk ? d->npages - first : chunk;
		struct lm_need nf = { .first = first, .nbits = (uint32_t)n };

		memset(b, 0, (n + 7) / 8);
		for (uint64_t k = 0; k < n; k++) {
			if (page_wanted(d, first + k)) {
				bit_set(b, k);
				/* sent, unanswered: asked again (queued ones go out
				 * on the new link as they are) */
				lm_asker_forget(&d->ask, first + k);
			}
		}
		ret = lm_send(&d->m, LM_NEED, first + n >= d->npages ? LM_F_LAST : 0, &nf, b,
			      (n + 7) / 8);
	}
	free(b);
	return ret;
}

/*
 * The link broke mid-postcopy: faults wait (their requests are asked
 * again), nothing unknown is mapped, and the source has --timeout to come
 * back with the same key and session; then it learns what is still needed.
 */
static int rejoin(struct dst *d)
{
	int limit = lm_rejoin_ms(d->o), mfd, ufd, ret = -ETIMEDOUT;
	struct lm_sealkey keys[2];
	uint64_t t0 = lm_now_ns(), end = t0 + (uint64_t)(limit < 0 ? 0 : limit) * 1000000ull;

	if (limit < 0)
		fprintf(stderr, "lm: destination: the link broke mid-postcopy (%s); waiting for "
			"the source to rejoin (--rejoin wait)\n", d->m.err[0] ? d->m.err : "closed");
	else
		fprintf(stderr, "lm: destination: the link broke mid-postcopy (%s); waiting %d ms "
			"for the source to rejoin\n", d->m.err[0] ? d->m.err : "closed", limit);
	if (d->urg_running) {
		shutdown(d->urg.fd, SHUT_RDWR);
		pthread_join(d->urg_tid, NULL);
		d->urg_running = false;
	}
	/* requests queue up until the new link is in (NEED first) */
	lm_asker_down(&d->ask);
	/* a pair that breaks before NEED is through: wait for the next */
	for (;;) {
		uint64_t now = lm_now_ns();

		if (limit >= 0 && now >= end)
			break;
		ret = lm_door_rejoin_take(&d->door, &mfd, &ufd, keys, limit < 0 ? 200 :
					  (int)((end - now) / 1000000ull) + 1);
		if (ret && limit < 0 && !atomic_load(&d->dead))
			continue;
		if (ret)
			break;
		lm_conn_replace(&d->m, mfd, &keys[0]);
		lm_conn_replace(&d->urg, ufd, &keys[1]);
		d->urg.timeout_ms = 0;
		ret = send_need(d);
		if (!ret)
			break;
	}
	if (ret) {
		snprintf(d->m.err, sizeof(d->m.err), "no rejoin within %d ms", limit);
		return ret;
	}
	if (lm_thread_start(&d->urg_tid, urgent_rx, d))
		return -EAGAIN;
	d->urg_running = true;
	d->rejoins++;
	lm_asker_up(&d->ask);
	ask_again(d);
	wake_all(d);
	fprintf(stderr, "lm: destination: the source rejoined %.1f ms after the break\n",
		(double)(lm_now_ns() - t0) / 1e6);
	return 0;
}

/* After resume: stale list, pushes, hashes, DONE. */
static int receive_postcopy(struct dst *d)
{
	struct lm_frame f;
	int ret;

	inject(d, "stop-postcopy");
	while (!(ret = lm_recv(&d->m, &d->g, &f))) {
		switch (f.h.type) {
		case LM_STALE:
			take_stale(d, &f);
			wake_all(d);
			if ((f.h.flags & LM_F_LAST) && d->o->mode == LM_MODE_MINOR &&
			    !d->walk_running) {
				if (lm_thread_start(&d->walk_tid, walker, d))
					return -EAGAIN;
				d->walk_running = true;
			}
			break;
		case LM_PAGES:
			if (!(f.h.flags & LM_F_PUSH))
				return bad_frame(d, &f, "after the switch-over");
			ret = take_push(d, &f);
			if (ret)
				return ret;
			break;
		case LM_HASHES: {
			const struct lm_hashes *h = f.fixed;

			memcpy(d->src_hash + h->first, f.data, f.data_len);
			if (f.h.flags & LM_F_LAST)
				d->hashes_done = true;
			break;
		}
		case LM_DONE:
			d->done = *(const struct lm_done *)f.fixed;
			return 0;
		default:
			return bad_frame(d, &f, "after the switch-over");
		}
	}
	return ret;
}

/* ---- switch-over ------------------------------------------------------------ */

static int start_minor(struct dst *d)
{
	uint64_t f = d->hello.backing == UFFDM_SHMEM ? UFFD_FEATURE_MINOR_SHMEM :
		     UFFD_FEATURE_MINOR_HUGETLBFS;
	struct uffdm_handler_config cfg = {
		.threads = d->o->handler_threads, .fault = minor_fault, .arg = d,
	};
	int ret = uffdm_open(&d->u, 0, f);

	if (!ret)
		ret = uffdm_region_register(d->u, d->r, 0, NULL);
	if (!ret)
		ret = uffdm_handler_start(&d->h, d->u, d->r, &cfg);
	return ret;
}

static int start_missing(struct dst *d)
{
	uint64_t f = d->hello.backing == UFFDM_SHMEM ? UFFD_FEATURE_MISSING_SHMEM :
		     UFFD_FEATURE_MISSING_HUGETLBFS;
	int ret = uffdm_open(&d->u, UFFDM_OPEN_NONBLOCK, f);

	if (!ret)
		ret = uffdm_region_register(d->u, d->r, UFFDM_REGISTER_MISSING |
					    UFFDM_REGISTER_NO_MINOR, NULL);
	if (!ret && lm_thread_start(&d->fault_tid, missing_faults, d))
		ret = -EAGAIN;
	if (!ret)
		d->fault_running = true;
	return ret;
}

/*
 * Nobody touches the view before the switch-over, so both postcopy modes
 * register it and start their fault threads during precopy: none of that
 * is downtime.
 */
static int prepare_postcopy(struct dst *d)
{
	int ret = 0;

	if (d->o->mode == LM_MODE_MINOR)
		ret = start_minor(d);
	if (d->o->mode == LM_MODE_MISSING)
		ret = start_missing(d);
	if (!ret && d->o->mode != LM_MODE_STOPCOPY) {
		if (lm_thread_start(&d->urg_tid, urgent_rx, d))
			return -EAGAIN;
		d->urg_running = true;
		if (lm_asker_start(&d->ask))
			return -EAGAIN;
	}
	/* thread creation is slow under TCG: not at the switch-over */
	d->wl.rate = d->o->wl.rate;
	if (!ret)
		ret = wl_start_parked(&d->wl, d->view, d->size, d->hello.nthreads);
	return ret;
}

/*
 * The source resumes at home when RESUMED does not come within --timeout,
 * and resets the connection: a destination that was stopped and woke up
 * finds SWITCH still queued, then the reset.  Running then would be a
 * second copy of the workload.
 */
static bool source_gave_up(struct dst *d)
{
	struct pollfd p = { .fd = d->m.fd, .events = POLLRDHUP };

	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
		snprintf(d->m.err, sizeof(d->m.err), "the link to the source broke before this "
			 "destination resumed: it does not, and tells the source so");
		return true;
	}
	return false;
}

static int resume(struct dst *d)
{
	struct wl_hdr hdr;
	struct lm_resumed rs;
	int ret = 0;

	/* before any discard: a read of a punched hole would fill it */
	memcpy(&hdr, d->back, sizeof(hdr));
	if (d->o->mode == LM_MODE_STOPCOPY)
		for (uint64_t i = 0; i < d->npages; i++)
			mark_mapped(d, i, d->recv_hash[i]);
	else if (d->o->mode == LM_MODE_MISSING)
		ret = receive_stale_list(d);
	if (ret)
		return ret;
	inject(d, "stop-switch");
	if (source_gave_up(d))
		return -ECONNRESET;
	if (lm_interrupted)
		return -ECANCELED;	/* not committed: the source keeps it */
	/* the threads exist and are parked (prepare_postcopy): only wake them */
	if (wl_hdr_check(&hdr, d->size, d->hello.nthreads)) {
		snprintf(d->m.err, sizeof(d->m.err), "the workload's header in the copied memory "
			 "is not the one HELLO announced");
		return -EBADMSG;
	}
	d->resumed = true;
	lm_committed = 1;	/* an interrupt no longer cancels */
	atomic_store(&d->rejoinable, 1);
	atomic_store(&d->door.rejoin_ok, 1);
	wl_resume(&d->wl);
	d->t_resume = lm_now_ns();
	/*
	 * A woken workload thread queued on this CPU does not preempt us at
	 * once (the guest's trace: 1.3 ms while we sent RESUMED and read on);
	 * let it run first.
	 */
	sched_yield();
	lm_trace("lm dst: resumed");
	rs.t_resume_ns = d->t_resume;
	/* never touch the view here: this thread receives the pushes */
	d->ops_resume = d->sw.ops_total;
	return lm_send(&d->m, LM_RESUMED, 0, &rs, NULL, 0);
}

/* ---- after DONE: progress both ends can see ----------------------------- */

/*
 * PROGRESS to the source each third of --timeout while the destination
 * gets on -- a page mapped, a slice of --after run -- or checks (CPU work
 * bounded by the memory size): the source's wait for FIN follows this
 * side's progress, not a fixed time, and a destination that stops getting
 * on goes silent, so the source sees the stall within --timeout.
 */
static void *heartbeat(void *p)
{
	struct dst *d = p;
	uint64_t sent = atomic_load(&d->tick);
	uint64_t every = (uint64_t)d->o->timeout_ms * 1000000ull / 3;

	while (!atomic_load(&d->beat_stop)) {
		uint64_t t = lm_now_ns() + every, now;

		while (!atomic_load(&d->beat_stop) && (now = lm_now_ns()) < t)
			lm_sleep_until(now + 20000000ull < t ? now + 20000000ull : t);
		if (atomic_load(&d->beat_stop))
			break;
		if (atomic_load(&d->tick) != sent || atomic_load(&d->phase) == LM_PHASE_CHECKING) {
			struct lm_progress pr = { .mapped = atomic_load(&d->mapped),
						  .phase = atomic_load(&d->phase) };

			sent = atomic_load(&d->tick);
			if (lm_send(&d->m, LM_PROGRESS, 0, &pr, NULL, 0))
				break;
		}
	}
	return NULL;
}

static void beat_start(struct dst *d)
{
	atomic_store(&d->beat_stop, 0);
	d->beat_running = !lm_thread_start(&d->beat_tid, heartbeat, d);
}

static void beat_stop(struct dst *d)
{
	if (!d->beat_running)
		return;
	atomic_store(&d->beat_stop, 1);
	pthread_join(d->beat_tid, NULL);
	d->beat_running = false;
}

/*
 * Every page mapped, or -ETIMEDOUT when none was for --timeout with pages
 * still missing (a stalled link, the urgent one perhaps alone): then the
 * connections are dropped and the source rejoins to send what is missing.
 */
static int wait_mapped(struct dst *d)
{
	uint64_t last = atomic_load(&d->mapped), t_last = lm_now_ns();
	uint64_t limit = (uint64_t)d->o->timeout_ms * 1000000ull;

	atomic_store(&d->phase, LM_PHASE_MAPPING);
	while (last < d->npages && !atomic_load(&d->dead)) {
		uint64_t now, m;

		usleep(200);
		now = lm_now_ns();
		m = atomic_load(&d->mapped);
		if (m != last) {
			last = m;
			t_last = now;
			atomic_fetch_add(&d->tick, 1);
		} else if (now - t_last > limit) {
			snprintf(d->m.err, sizeof(d->m.err), "no page mapped for %d ms with %llu of "
				 "%llu still missing (a stalled link)", d->o->timeout_ms,
				 (unsigned long long)(d->npages - m), (unsigned long long)d->npages);
			return -ETIMEDOUT;
		}
	}
	return atomic_load(&d->dead) ? -EPIPE : 0;
}

/* ---- end ------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void latency(struct dst *d, struct lm_report *rep)
{
	uint64_t n = atomic_load(&d->nsamples);
	uint64_t *s;

	if (n > MAX_SAMPLES)
		n = MAX_SAMPLES;
	if (d->o->mode == LM_MODE_MINOR && d->hst.minor) {
		/* the library's read-to-wake clock: the whole fault */
		rep->lat_p50_ns = d->hst.p50_ns;
		rep->lat_p99_ns = d->hst.p99_ns;
		rep->lat_max_ns = d->hst.max_ns;
		return;
	}
	if (!n || !(s = malloc(n * 8)))
		return;
	memcpy(s, d->lat, n * 8);
	qsort(s, n, 8, cmp_u64);
	rep->lat_p50_ns = s[n / 2];
	rep->lat_p99_ns = s[n * 99 / 100];
	rep->lat_max_ns = s[n - 1];
	free(s);
}

static void write_plot_data(struct dst *d, const char *path)
{
	FILE *f = fopen(path, "a");
	uint64_t n = atomic_load(&d->nsamples);

	if (!f)
		return;
	fprintf(f, "\n\n# fault latency: seconds since resume, microseconds\n");
	for (uint64_t k = 0; k < n && k < MAX_SAMPLES; k++)
		fprintf(f, "%.6f %.1f\n", (double)(d->lat_t[k] - d->t_resume) / 1e9,
			(double)d->lat[k] / 1e3);
	fclose(f);
}

static void *rate_sampler(void *p)
{
	struct dst *d = p;
	uint64_t last = 0, t_last = lm_now_ns();

	fprintf(d->rate_log, "# CLOCK_MONOTONIC ns, MB/s received\n");
	while (!atomic_load(&d->stop)) {
		uint64_t now, b;

		usleep(20000);
		now = lm_now_ns();
		b = d->m.rx_bytes + d->urg.rx_bytes;
		fprintf(d->rate_log, "%llu %.2f\n", (unsigned long long)now,
			(double)(b - last) / ((double)(now - t_last) / 1e9) / 1e6);
		last = b;
		t_last = now;
	}
	return NULL;
}

static void stop_threads(struct dst *d)
{
	atomic_store(&d->stop, 1);
	wake_all(d);
	if (d->walk_running)
		pthread_join(d->walk_tid, NULL);
	if (d->fault_running)
		pthread_join(d->fault_tid, NULL);
	if (d->h)
		uffdm_handler_stop(d->h, &d->hst);
	d->h = NULL;
	if (d->urg_running) {
		shutdown(d->urg.fd, SHUT_RDWR);
		pthread_join(d->urg_tid, NULL);
	}
	/* no fault asks any more; requests still queued for a stopped peer
	 * (their pages came by push) fail at once on the shut socket */
	lm_asker_stop(&d->ask);
	if (d->sample_running)
		pthread_join(d->sample_tid, NULL);
	d->walk_running = d->fault_running = d->urg_running = d->sample_running = false;
}

/*
 * The source did not come back (err), and this destination holds every
 * page -- stop-copy's from the resume on, a postcopy's once all are mapped:
 * nothing it runs can be stale, so the workload runs on here and finishes,
 * and the verdict waits for the source's rejoin (deliver_verdict).
 * Stopping it would leave the workload on neither end: the source, paused
 * since SWITCH, never resumes on its own.  Whether it runs on.
 */
static bool runs_on(struct dst *d, int err)
{
	if (lm_err_is_protocol(err) || atomic_load(&d->dead) ||
	    atomic_load(&d->mapped) < d->npages)
		return false;
	fprintf(stderr, "lm: destination: the source is lost (%s), but this destination holds "
		"every page: the workload runs on here\n", d->m.err[0] ? d->m.err : strerror(-err));
	atomic_store(&d->rejoinable, 0);
	lm_door_rejoin_end(&d->door);
	d->source_gone = true;
	return true;
}

/* The source is gone mid-postcopy: stop the workload, show nothing stale. */
static int source_lost(struct dst *d, const char *why, int err)
{
	set_dead(d, why);
	/*
	 * Minor mode: the handler fails every fault (SIGBUS or poison), so
	 * each thread stops and is joined.  Missing mode has no such path on
	 * 6.1: a thread asleep in a missing fault stays there, so only tell
	 * the threads to stop and leave.
	 */
	if (d->o->mode == LM_MODE_MISSING)
		atomic_store(&d->wl.quit, 1);
	else
		wl_stop_kick(&d->wl, fail_deferred, d);
	fprintf(stderr, "lm: destination: %s during postcopy (%s); workload stopped "
		"with %llu of %llu pages mapped%s\n", lm_err_is_protocol(err) ?
		"protocol error" : "source lost", d->dead_msg,
		(unsigned long long)atomic_load(&d->mapped), (unsigned long long)d->npages,
		atomic_load(&d->wl.failed) ? ", a thread got SIGBUS on a page it could not have" :
		"");
	/* this side lacks pages: the only whole copy is the source's */
	fprintf(stderr, "lm: destination: the workload stopped here and cannot run on (pages "
		"are missing); the source, if it lives, holds it whole as at the pause and keeps "
		"it paused (its checkpoint: 'lm resume FILE', as the source says)\n");
	/* threads blocked in missing faults cannot be woken: leave now */
	fflush(NULL);
	_exit(lm_err_is_protocol(err) ? LM_EXIT_PROTOCOL : LM_EXIT_SOURCE_LOST);
}

static uint64_t verify_pages(struct dst *d, struct lm_report *rep)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < d->npages; i++) {
		if (d->vis_hash[i] == d->src_hash[i])
			continue;
		if (bad++ < 5)
			fprintf(stderr, "lm: VERIFY: page %llu differs from the source's at pause\n",
				(unsigned long long)i);
	}
	rep->verified = d->npages - bad;
	return bad;
}

/*
 * FIN is out; BYE says it arrived.  Without BYE within --timeout (FIN lost,
 * or the way back stalled) the door answers the source's rejoin with the
 * verdict, sealed, for as long as a rejoin may take: both ends exit with
 * the same outcome.
 */
static void deliver_verdict(struct dst *d, const struct lm_fin *fin)
{
	static const struct lm_geom any;
	int wait = lm_rejoin_ms(d->o) < 0 ? d->o->timeout_ms : lm_rejoin_ms(d->o);
	struct lm_frame f;
	int ret;

	if (d->source_gone) {
		fprintf(stderr, "lm: destination: the verdict waits %d ms for the source to "
			"rejoin\n", 2 * wait);
	} else {
		d->m.timeout_ms = d->o->timeout_ms;
		while (!(ret = lm_recv(&d->m, d->g.npages ? &d->g : &any, &f)) &&
		       f.h.type != LM_BYE)
			;
		if (!ret) {
			lm_door_stop(&d->door);
			return;
		}
		fprintf(stderr, "lm: destination: no BYE after FIN (%s); the verdict waits %d ms "
			"for the source to rejoin\n", d->m.err, 2 * wait);
	}
	lm_conn_reset(&d->m);
	lm_conn_reset(&d->urg);
	if (!lm_door_tell(&d->door, fin, 2 * wait))
		fprintf(stderr, "lm: destination: the source did not come back for the verdict\n");
	lm_door_stop(&d->door);
}

static int finish(struct dst *d)
{
	struct lm_report rep = { 0 };
	struct lm_fin fin = { 0 };
	uint64_t t_end, t_run, t_after;
	char err[160];
	int rc = LM_EXIT_OK;

	d->t_done = lm_now_ns();
	rep.postcopy_ms = (double)(d->t_done - d->t_resume) / 1e6;
	/* --after: in slices, each one progress the source hears of */
	atomic_store(&d->phase, LM_PHASE_RUNNING);
	t_after = d->t_resume + (uint64_t)(d->o->after_s * 1e9);
	for (uint64_t now = lm_now_ns(); now < t_after; now = lm_now_ns()) {
		lm_sleep_until(t_after - now > 100000000ull ? now + 100000000ull : t_after);
		atomic_fetch_add(&d->tick, 1);
	}
	wl_pause(&d->wl);
	atomic_store(&d->phase, LM_PHASE_CHECKING);
	t_end = lm_now_ns();
	rep.ops_after = (double)(wl_ops(&d->wl) - d->ops_resume) * 1e9 /
			(double)(t_end - d->t_resume);
	stop_threads(d);
	wl_stop(&d->wl);
	if (atomic_load(&d->wl.failed)) {
		fprintf(stderr, "lm: destination: a workload thread got SIGBUS\n");
		fin.flags |= LM_FIN_SIGBUS;
		rc = LM_EXIT_VERIFY;
	}
	rep.invariants_ok = !wl_check(d->view, d->size, err, sizeof(err));
	if (!rep.invariants_ok) {
		fprintf(stderr, "lm: VERIFY: workload invariant broken after resume: %s\n", err);
		rc = LM_EXIT_VERIFY;
	}
	/* test hook: one page seen other than the source had it */
	if (d->o->inject && !strcmp(d->o->inject, "verify-fail"))
		d->vis_hash[d->npages - 1] ^= 1;
	/* the source lost before its hashes came: nothing to check against */
	if (d->verify && !d->hashes_done)
		fprintf(stderr, "lm: destination: verify not done: the source's page hashes "
			"never came\n");
	if (d->verify && d->hashes_done && (rep.mismatched = verify_pages(d, &rep))) {
		fprintf(stderr, "lm: VERIFY FAILED: %llu pages differed when first visible\n",
			(unsigned long long)rep.mismatched);
		rc = LM_EXIT_VERIFY;
	}
	beat_stop(d);
	fin = (struct lm_fin){
		.npages = d->npages, .mapped = atomic_load(&d->mapped), .verified = rep.verified,
		.mismatched = rep.mismatched, .rc = (uint32_t)rc,
		.flags = fin.flags | (d->verify && d->hashes_done ? LM_FIN_VERIFY : 0) |
			 (rep.invariants_ok ? LM_FIN_INVARIANTS : 0),
	};
	if (!d->source_gone)
		lm_send(&d->m, LM_FIN, 0, &fin, NULL, 0);
	lm_outcome_print(&fin, d->o, "destination");
	deliver_verdict(d, &fin);
	rep.mode = d->o->mode;
	rep.src = d->done;
	rep.npages = d->npages;
	rep.page_size = d->page;
	rep.size = d->size;
	rep.stale = d->o->mode == LM_MODE_STOPCOPY ? d->sw.nstale : d->nstale;
	rep.verify = d->verify;
	/* LM_SEPARATE_CLOCKS: a test knob, two machines' arithmetic on one */
	rep.clocks_shared = d->hello.boot == lm_boot_hash() && !getenv("LM_SEPARATE_CLOCKS");
	/* the downtime ends when a workload thread runs again */
	t_run = wl_running_since(&d->wl);
	if (t_run < d->t_switch)
		t_run = d->t_resume;
	rep.src_pause_ms = (double)(d->sw.t_send_ns - d->sw.t_pause_ns) / 1e6;
	rep.dst_resume_ms = (double)(t_run - d->t_switch) / 1e6;
	rep.transit_est_ms = (double)d->done.rtt_ns / 2e6;
	rep.downtime_est_ms = rep.src_pause_ms + rep.transit_est_ms + rep.dst_resume_ms;
	rep.downtime_ms = rep.clocks_shared ? (double)(t_run - d->sw.t_pause_ns) / 1e6 :
					      rep.downtime_est_ms;
	rep.total_ms = (double)(d->t_done - (rep.clocks_shared ? d->hello.t_start_ns :
					     d->t_hello)) / 1e6;
	rep.ops_before = d->sw.ops_before;
	rep.transit_ms = rep.clocks_shared ? (double)(d->t_switch - d->sw.t_send_ns) / 1e6 : -1;
	/* minor: fault messages; the callback runs once per page */
	rep.faults = d->o->mode == LM_MODE_MINOR ? d->hst.messages : atomic_load(&d->faults);
	rep.faults_demand = atomic_load(&d->demand);
	rep.callback_max_ns = atomic_load(&d->cb_max_ns);
	rep.asks_direct = atomic_load(&d->ask.direct);
	rep.asks_queued = atomic_load(&d->ask.queued);
	rep.asks_full = atomic_load(&d->ask.full);
	latency(d, &rep);
	lm_report_print(&rep, d->o);
	if (d->o->plot) {
		char data[4096];

		snprintf(data, sizeof(data), "%s.dat", d->o->plot);
		fclose(d->rate_log);
		d->rate_log = NULL;
		write_plot_data(d, data);
		if (lm_report_plot(d->o->plot, data, d->t_resume, atomic_load(&d->nsamples)))
			fprintf(stderr, "lm: --plot: gnuplot failed; the data is in %s\n", data);
	}
	return rc;
}

/* ---- setup ------------------------------------------------------------------ */

/*
 * The largest region to take, and which limit says so: --max-size, else
 * --size, else the room (lm_mem_room) -- and never more than the room: a
 * region past the cgroup's limit is an OOM kill, not a refusal.  0 when
 * nothing fits at all (no free huge pages).
 */
static uint64_t max_size(const struct lm_opts *o, unsigned int *why)
{
	uint64_t want = o->max_size ? o->max_size : o->size;
	struct lm_room r;

	lm_mem_room(&r, o->backing);
	*why = r.limit;
	if (!o->max_size && !o->size_given)
		return r.bytes;
	if (want > r.bytes) {
		fprintf(stderr, "lm: destination: %s %llu is more than its room: it takes at most "
			"%llu bytes (%s)\n", o->max_size ? "--max-size" : "--size",
			(unsigned long long)want, (unsigned long long)r.bytes, r.where);
		return r.bytes;
	}
	*why = o->max_size ? LM_LIMIT_OPTION : LM_LIMIT_SIZE;
	return want;
}

static int setup(struct dst *d)
{
	int ret;

	d->t_hello = lm_now_ns();
	d->verify = d->hello.verify;
	lm_verify_key(d->vkey, d->o->key, d->door.session);
	if (d->hello.mode != d->o->mode || d->hello.backing > UFFDM_HUGETLB_1G) {
		fprintf(stderr, "lm: destination: the source asks for mode %s, backing %u; "
			"this destination runs %s\n", lm_mode_name(d->hello.mode),
			d->hello.backing, lm_mode_name(d->o->mode));
		return -EINVAL;
	}
	ret = uffdm_region_create(&d->r, d->hello.backing, d->hello.size);
	if (ret || uffdm_region_page_size(d->r) != d->hello.page_size) {
		fprintf(stderr, "lm: destination: cannot create a matching %llu-byte region: %s\n",
			(unsigned long long)d->hello.size, ret ? strerror(-ret) : "page size");
		return ret ? ret : -EINVAL;
	}
	d->view = uffdm_region_view(d->r);
	d->back = uffdm_region_backing(d->r);
	d->size = d->hello.size;
	d->page = d->hello.page_size;
	d->npages = d->size / d->page;
	d->g = (struct lm_geom){ .npages = d->npages, .page_size = (uint32_t)d->page };
	d->st = calloc(d->npages, 1);
	d->stale_bits = calloc(1, (d->npages + 7) / 8);
	d->recv_hash = calloc(d->npages, 8);
	d->vis_hash = calloc(d->npages, 8);
	d->src_hash = calloc(d->npages, 8);
	d->fault_t0 = calloc(d->npages, 8);
	d->lat = calloc(MAX_SAMPLES, 8);
	d->lat_t = calloc(MAX_SAMPLES, 8);
	if (lm_asker_init(&d->ask, &d->urg, d->npages, urgent_broke, d) ||
	    !d->st || !d->stale_bits || !d->recv_hash || !d->vis_hash || !d->src_hash ||
	    !d->fault_t0 || !d->lat || !d->lat_t)
		return -ENOMEM;
	/* the whole region in the page cache: the precopy writes it anyway */
	return uffdm_region_populate(d->r, 0, d->size);
}

static int start_sampler(struct dst *d)
{
	char path[4096];

	if (!d->o->plot)
		return 0;
	snprintf(path, sizeof(path), "%s.dat", d->o->plot);
	d->rate_log = fopen(path, "w");
	if (!d->rate_log)
		return -errno;
	if (lm_thread_start(&d->sample_tid, rate_sampler, d))
		return -EAGAIN;
	d->sample_running = true;
	return 0;
}

static int fail(struct dst *d, const char *phase, int ret)
{
	const char *why = d->m.err[0] ? d->m.err : strerror(-ret);

	fprintf(stderr, "lm: destination: %s: %s\n", phase, why);
	/*
	 * The source may have sent SWITCH -- it came, or the link failed after
	 * the source could pause: a frame that failed authentication may have
	 * been SWITCH itself -- but this side will not run the workload.  A
	 * paused source stays paused until told so (it never resumes on a
	 * guess): drop the link so it asks at once, and answer its rejoin,
	 * sealed, so it resumes at home instead of keeping a checkpoint.
	 */
	if ((d->t_switch || d->may_switch) && !d->resumed) {
		int wait = lm_rejoin_ms(d->o) < 0 ? d->o->timeout_ms : lm_rejoin_ms(d->o);

		lm_conn_reset(&d->m);
		lm_conn_reset(&d->urg);
		if (!lm_door_tell(&d->door, NULL, wait * 2))
			fprintf(stderr, "lm: destination: the source did not ask within %d ms "
				"whether this destination resumed (it did not)%s\n", wait * 2,
				d->t_switch ? "" : "; it may never have paused");
	}
	stop_threads(d);
	lm_door_stop(&d->door);
	if (d->wl.running)
		wl_stop(&d->wl);	/* parked, never run */
	if (ret == -ENOMEM || ret == -EINVAL)
		return LM_EXIT_USAGE;
	if (ret == -ECANCELED)
		return LM_EXIT_INTERRUPTED;
	return lm_err_is_protocol(ret) ? LM_EXIT_PROTOCOL : LM_EXIT_PEER_LOST;
}

int lm_dest(const struct lm_opts *o, int lfd)
{
	struct dst *d = calloc(1, sizeof(*d));
	int ret;

	if (!d)
		return LM_EXIT_USAGE;
	d->o = o;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	lm_link_init(&d->link, o->bandwidth, o->rtt_ns);
	d->m.fd = d->urg.fd = -1;
	{
		unsigned int why = LM_LIMIT_OPTION;
		uint64_t max = max_size(o, &why);
		size_t page = uffdm_backing_page_size(o->backing);

		/* no room for one huge page: no source could be taken */
		if (max < page && o->backing != UFFDM_SHMEM) {
			struct lm_room r;

			lm_mem_room(&r, o->backing);
			lm_mem_fits(&r, page, "destination");
			free(d);
			return LM_EXIT_NOMEM;
		}
		lm_door_init(&d->door, o, lfd, max);
		d->door.max_kind = why;
	}
	if (lm_door_start(&d->door))
		return LM_EXIT_USAGE;
	/* like any server, it waits for its source without limit */
	ret = lm_door_admit(&d->door, &d->m, "main", &d->link, LM_AUTH_MAIN, -1, &d->hello);
	if (ret == -ECANCELED)
		fprintf(stderr, "lm: destination: interrupted while waiting for a source\n");
	if (ret) {
		lm_door_stop(&d->door);
		return ret == -ECANCELED ? LM_EXIT_INTERRUPTED : LM_EXIT_USAGE;
	}
	ret = setup(d);
	if (ret) {
		lm_door_stop(&d->door);
		return LM_EXIT_USAGE;
	}
	/* the urgent connection follows at once, or the source is gone */
	ret = lm_door_admit(&d->door, &d->urg, "urgent", &d->link, LM_AUTH_URGENT,
			    o->timeout_ms, &(struct lm_hello){ 0 });
	if (ret) {
		lm_door_stop(&d->door);
		return ret == -ECANCELED ? LM_EXIT_INTERRUPTED : LM_EXIT_PEER_LOST;
	}
	d->urg.timeout_ms = 0;	/* idle until the switch-over */
	ret = start_sampler(d);
	if (!ret)
		ret = prepare_postcopy(d);
	if (!ret)
		ret = receive_precopy(d);
	if (ret)
		return fail(d, "before the switch-over (the source keeps the workload)", ret);
	ret = resume(d);
	/* RESUMED lost with the link: the source rejoins (receive_postcopy fails first) */
	if (ret && d->resumed && !lm_err_is_protocol(ret) && ret != -ECANCELED)
		ret = 0;
	if (ret && d->resumed)
		return source_lost(d, d->m.err[0] ? d->m.err : strerror(-ret), ret);
	if (ret)
		return fail(d, "at the switch-over (the source keeps the workload)", ret);
	lm_msg(o, "destination: resumed %.3f ms after the switch frame\n",
	       (double)(d->t_resume - d->t_switch) / 1e6);
	for (;;) {
		while ((ret = receive_postcopy(d)) && !lm_err_is_protocol(ret) &&
		       d->rejoins < 16 && !atomic_load(&d->dead) && !rejoin(d))
			;
		if (ret && runs_on(d, ret))
			break;
		if (ret)
			return source_lost(d, d->m.err[0] ? d->m.err : strerror(-ret), ret);
		beat_start(d);
		ret = wait_mapped(d);
		if (!ret)
			break;
		beat_stop(d);
		if (ret != -ETIMEDOUT || d->rejoins >= 16)
			return source_lost(d, d->m.err[0] ? d->m.err : strerror(-ret), ret);
		/* stalled: drop both connections; the source rejoins and resends */
		shutdown(d->m.fd, SHUT_RDWR);
		shutdown(d->urg.fd, SHUT_RDWR);
		ret = rejoin(d);
		if (ret)
			return source_lost(d, d->m.err[0] ? d->m.err : strerror(-ret), ret);
	}
	atomic_store(&d->rejoinable, 0);
	/* a rejoin now waits ("busy") for the verdict (deliver_verdict) */
	atomic_store(&d->door.rejoin_ok, 0);
	return finish(d);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The source: run the workload, copy its memory in precopy rounds, pause,
 * and then -- by mode -- send the stale pages before the switch-over
 * (stop-copy), or after it: the stale list and then the pages in the
 * background, answering the destination's urgent requests on a connection
 * of their own so they never queue behind the background stream.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sodium.h>

#include "lm.h"

enum { S_CLEAN, S_STALE, S_SENT };

struct src {
	const struct lm_opts *o;
	struct uffdm_region *r;
	uint8_t *view, *back;
	size_t size, page;
	uint64_t npages, nstale;
	struct workload wl;
	struct lm_tracker tr;
	struct lm_link link;
	struct lm_conn m, urg;
	struct lm_geom g;
	uint8_t *dirty;
	_Atomic uint8_t *state;
	struct lm_done st;
	pthread_t urg_tid;
	bool urg_running;
	atomic_int stale_ready;		/* 1: committed, state[] final; -1: aborted */
	pthread_mutex_t stale_mu;	/* with stale_cv: the urgent server waits for it */
	pthread_cond_t stale_cv;
	atomic_int urg_stop;		/* the urgent server is being stopped */
	const char *addr;
	unsigned int rejoins;
	bool rejoining;			/* connect quietly: the link is coming back */
	/* the last connect failed with the destination's own word (a sealed
	 * refusal: lm_auth_answered), not with anyone's */
	bool answered;
	bool switched;			/* SWITCH went out whole: never resume here alone */
	bool stale_taken;
	struct lm_fin fin;		/* the destination's verdict */
	bool verify;			/* both ends agreed, from HELLO */
	uint8_t session[LM_SESSION];
	uint8_t vkey[16];		/* --verify's hash key */
	struct lm_hello hello;		/* as sent on the main connection */
	uint64_t t_start, t_pause, ops_start;
	double ops_before;
};

static void inject(const struct src *s, const char *what)
{
	lm_inject(s->o, "source", what);
}

static unsigned int per_frame(const struct src *s)
{
	size_t n = (LM_MAX_PAYLOAD - sizeof(struct lm_pages)) / s->page;

	return n < LM_MAX_PAGES ? (unsigned int)n : LM_MAX_PAGES;
}

static int send_run(struct src *s, uint64_t first, unsigned int count, unsigned int flags)
{
	struct lm_pages p = { .first = first, .count = count };

	return lm_send(&s->m, LM_PAGES, flags, &p, s->back + first * s->page, count * s->page);
}

/* A progress line each second while pages go out. */
static void progress(struct src *s, uint64_t i, uint64_t *t_last)
{
	uint64_t now = lm_now_ns();

	if (s->o->quiet || now - *t_last < 1000000000ull)
		return;
	*t_last = now;
	lm_msg(s->o, "source: %5.1f s: at page %llu of %llu, %.1f MiB sent, workload %.0f ops/s\n",
	       (double)(now - s->t_start) / 1e9, (unsigned long long)i,
	       (unsigned long long)s->npages, (double)s->m.tx_bytes / 1048576.0,
	       (double)(wl_ops(&s->wl) - s->ops_start) * 1e9 / (double)(now - s->t_start));
}

/* Send the pages whose bit is set (all when bitmap is NULL), in runs. */
static int send_pages(struct src *s, const uint8_t *bitmap, unsigned int flags, uint64_t *bytes,
		      uint64_t *pages)
{
	unsigned int max = per_frame(s);
	uint64_t i = 0, t_last = lm_now_ns();

	while (i < s->npages) {
		unsigned int n = 0;
		int ret;

		while (i + n < s->npages && n < max && (!bitmap || bit_get(bitmap, i + n)))
			n++;
		if (!n) {
			i++;
			continue;
		}
		ret = send_run(s, i, n, flags);
		if (ret)
			return ret;
		*bytes += (uint64_t)n * s->page;
		*pages += n;
		i += n;
		progress(s, i, &t_last);
	}
	return 0;
}

static int collect(struct src *s, uint8_t *bitmap)
{
	uint64_t t0 = lm_now_ns();
	bool q = lm_track_needs_quiesce(&s->tr);
	int ret;

	memset(bitmap, 0, (s->npages + 7) / 8);
	if (q)
		wl_pause(&s->wl);
	ret = lm_track_collect(&s->tr, bitmap, false);
	if (q) {
		wl_resume(&s->wl);
		s->st.track_pause_ns += lm_now_ns() - t0;
	}
	return ret;
}

static uint64_t count_bits(const uint8_t *b, uint64_t n)
{
	uint64_t c = 0;

	for (uint64_t i = 0; i < n; i++)
		c += bit_get(b, i);
	return c;
}

static int wait_for(struct src *s, unsigned int type);

/*
 * Pause only once the destination has taken everything sent: a receiver
 * slower than the link (a TCG guest copying pages) leaves up to both socket
 * buffers of bulk queued, and SWITCH would wait behind it -- 10-30 ms in
 * the guest at 1% stale, where the last round is small and the pause comes
 * right after it.  The workload runs meanwhile: not downtime.
 */
static int drain(struct src *s)
{
	struct lm_round last = { .round = s->o->rounds };
	uint64_t t0 = lm_now_ns();
	int ret = lm_send(&s->m, LM_ROUND, LM_F_LAST, &last, NULL, 0);

	if (!ret)
		ret = wait_for(s, LM_ROUND);
	s->st.drain_ns = lm_now_ns() - t0;
	lm_trace("lm src: drained");
	return ret;
}

/*
 * The round trip of a small frame on the empty link, the best of three,
 * just before the pause: with no clock shared with the destination (two
 * machines), half of it stands for SWITCH's one-way time.  Not downtime.
 */
static int measure_rtt(struct src *s)
{
	struct lm_round ping = { .round = s->o->rounds };
	int ret = 0;

	for (int i = 0; i < 3 && !ret; i++) {
		uint64_t t0 = lm_now_ns(), rtt;

		ret = lm_send(&s->m, LM_ROUND, LM_F_LAST, &ping, NULL, 0);
		if (!ret)
			ret = wait_for(s, LM_ROUND);
		rtt = lm_now_ns() - t0;
		if (!ret && (!s->st.rtt_ns || rtt < s->st.rtt_ns))
			s->st.rtt_ns = rtt;
	}
	return ret;
}

static int precopy(struct src *s)
{
	int ret;

	uint64_t end = lm_now_ns() + (uint64_t)(s->o->precopy_s * 1e9);
	uint64_t beat = (uint64_t)s->o->timeout_ms * 1000000ull / 3;

	/* a ROUND 0 now and then: the destination counts silence as death */
	for (uint64_t now = lm_now_ns(); now < end; now = lm_now_ns()) {
		struct lm_round idle = { 0 };

		lm_sleep_until(end - now > beat ? now + beat : end);
		if (lm_now_ns() < end && (ret = lm_send(&s->m, LM_ROUND, 0, &idle, NULL, 0)))
			return ret;
	}
	ret = send_pages(s, NULL, 0, &s->st.bytes_precopy, &s->st.pages_precopy);
	inject(s, "stop-precopy");
	if (!ret && s->o->inject && !strcmp(s->o->inject, "bad-frame")) {
		/* a page past the region: the destination must refuse it by name */
		struct lm_pages bad = { .first = s->npages, .count = 1 };

		ret = lm_send(&s->m, LM_PAGES, 0, &bad, s->back, s->page);
	}
	for (unsigned int round = 1; !ret && round < s->o->rounds; round++) {
		struct lm_round rf = { .round = round };

		ret = collect(s, s->dirty);
		if (ret)
			return ret;
		rf.pages = count_bits(s->dirty, s->npages);
		lm_msg(s->o, "source: round %u: %llu dirty pages of %llu\n", round,
		       (unsigned long long)rf.pages, (unsigned long long)s->npages);
		ret = send_pages(s, s->dirty, 0, &s->st.bytes_precopy, &s->st.pages_precopy);
		if (!ret)
			ret = lm_send(&s->m, LM_ROUND, 0, &rf, NULL, 0);
		lm_trace("lm src: ROUND %u sent, %llu pages", round, (unsigned long long)rf.pages);
		s->st.rounds = round;
	}
	if (!ret && !s->o->no_drain)
		ret = drain(s);
	if (!ret)
		ret = measure_rtt(s);
	return ret;
}

/* Stop the workload for good. */
static void pause_workload(struct src *s)
{
	uint64_t now;
	int ret = 0;

	now = lm_now_ns();
	s->ops_before = (double)(wl_ops(&s->wl) - s->ops_start) * 1e9 /
			(double)(now - s->t_start);
	/* downtime starts when the workload is asked to stop */
	s->t_pause = lm_now_ns();
	lm_trace("lm src: pause");
	if (getenv("LM_NO_BOOST")) {
		wl_pause(&s->wl);
	} else if ((ret = wl_pause_boosted(&s->wl))) {
		lm_msg(s->o, "source: paused at normal priority (SCHED_FIFO refused: %s); on a busy "
		       "machine the pause waits for CPUs -- CAP_SYS_NICE or an RLIMIT_RTPRIO of 1 "
		       "makes it immediate\n", strerror(-ret));
	}
	lm_trace("lm src: paused");
	s->st.t_precopy_ns = s->t_pause - s->t_start;
}

/*
 * The last dirty collection: O(memory).  Minor mode does it after SWITCH,
 * so it is not downtime; the urgent server holds its answers until then.
 */
static int take_stale(struct src *s)
{
	int ret;

	memset(s->dirty, 0, (s->npages + 7) / 8);
	s->stale_taken = true;
	ret = lm_track_collect(&s->tr, s->dirty, true);
	for (uint64_t i = 0; !ret && i < s->npages; i++)
		if (bit_get(s->dirty, i)) {
			s->state[i] = S_STALE;
			s->nstale++;
		}
	if (ret) {
		fprintf(stderr, "lm: source: dirty tracking failed: %s\n", strerror(-ret));
		return ret;
	}
	lm_msg(s->o, "source: paused, %llu of %llu pages stale (%s tracking)\n",
	       (unsigned long long)s->nstale, (unsigned long long)s->npages,
	       lm_track_name(s->tr.kind));
	return 0;
}

/*
 * Committed, but the tracker failed: which pages changed is unknown, so
 * every page is stale and comes from here, never from the precopy copy.
 */
static void all_stale(struct src *s)
{
	fprintf(stderr, "lm: source: every page counts as stale (the tracker failed after the "
		"switch-over)\n");
	s->nstale = 0;
	for (uint64_t i = 0; i < s->npages; i++) {
		s->state[i] = S_STALE;
		s->nstale++;
	}
}

static int send_switch(struct src *s)
{
	struct lm_switch sw = {
		.t_pause_ns = s->t_pause, .nstale = s->nstale, .ops_before = s->ops_before,
		.t_send_ns = lm_now_ns(), .ops_total = wl_ops(&s->wl),
	};

	int ret;

	lm_trace("lm src: SWITCH send");
	ret = lm_send(&s->m, LM_SWITCH, 0, &sw, NULL, 0);
	lm_trace("lm src: SWITCH sent");
	return ret;
}

static int send_stale_list(struct src *s, uint64_t *bytes)
{
	const uint64_t chunk = 65536 * 8;

	for (uint64_t first = 0; first < s->npages; first += chunk) {
		uint64_t n = s->npages - first < chunk ? s->npages - first : chunk;
		struct lm_stale st = { .first = first, .nbits = (uint32_t)n };
		uint8_t *b = calloc(1, (n + 7) / 8);
		int ret;

		if (!b)
			return -ENOMEM;
		for (uint64_t i = 0; i < n; i++)
			if (bit_get(s->dirty, first + i))
				bit_set(b, i);
		ret = lm_send(&s->m, LM_STALE, first + n >= s->npages ? LM_F_LAST : 0, &st, b,
			      (n + 7) / 8);
		free(b);
		if (ret)
			return ret;
		*bytes += (n + 7) / 8;
	}
	return 0;
}

static void set_stale_ready(struct src *s, int v)
{
	pthread_mutex_lock(&s->stale_mu);
	atomic_store(&s->stale_ready, v);
	pthread_cond_broadcast(&s->stale_cv);
	pthread_mutex_unlock(&s->stale_mu);
}

/*
 * A request can come as soon as the destination runs, before the stale
 * set is taken: wait asleep, not polling (the destination's workload may
 * be waiting for a CPU of this same machine).
 */
static int wait_stale_ready(struct src *s)
{
	int v;

	pthread_mutex_lock(&s->stale_mu);
	while (!(v = atomic_load(&s->stale_ready)))
		pthread_cond_wait(&s->stale_cv, &s->stale_mu);
	pthread_mutex_unlock(&s->stale_mu);
	return v;
}

/* Urgent connection: one answer per request, exactly-once page data. */
static void *urgent_server(void *p)
{
	struct src *s = p;
	struct lm_frame f;

	while (!lm_recv(&s->urg, &s->g, &f)) {
		struct lm_resp r;

		if (wait_stale_ready(s) < 0)
			break;
		uint8_t want = S_STALE;

		if (f.h.type != LM_REQ)
			break;
		r = (struct lm_resp){ .page = ((const struct lm_req *)f.fixed)->page };
		__atomic_fetch_add(&s->st.requests, 1, __ATOMIC_RELAXED);
		if (s->state[r.page] == S_CLEAN) {
			r.status = LM_RESP_CLEAN;
		} else if (atomic_compare_exchange_strong(&s->state[r.page], &want, S_SENT)) {
			r.status = LM_RESP_DATA;
			__atomic_fetch_add(&s->st.pages_demand, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->st.bytes_demand, s->page, __ATOMIC_RELAXED);
		} else {
			r.status = LM_RESP_PUSHED;
		}
		if (lm_send(&s->urg, LM_RESP, 0, &r, r.status == LM_RESP_DATA ?
			    s->back + r.page * s->page : NULL,
			    r.status == LM_RESP_DATA ? s->page : 0))
			break;
	}
	/* a broken link: the destination sees it too and closes the main one */
	return NULL;
}

/* Background push: every stale page the urgent server has not sent. */
static int push(struct src *s)
{
	unsigned int max = per_frame(s);

	for (uint64_t i = 0; i < s->npages; ) {
		unsigned int n = 0;
		int ret;

		for (uint8_t want = S_STALE; i + n < s->npages && n < max; want = S_STALE) {
			if (!atomic_compare_exchange_strong(&s->state[i + n], &want, S_SENT))
				break;
			n++;
		}
		if (!n) {
			i++;
			continue;
		}
		ret = send_run(s, i, n, LM_F_PUSH);
		if (ret)
			return ret;
		s->st.pages_push += n;
		s->st.bytes_push += (uint64_t)n * s->page;
		i += n;
	}
	return 0;
}

static int send_hashes(struct src *s)
{
	uint64_t *h = malloc(8192 * 8);

	if (!h)
		return -ENOMEM;
	for (uint64_t first = 0; first < s->npages; first += 8192) {
		uint64_t n = s->npages - first < 8192 ? s->npages - first : 8192;
		struct lm_hashes hf = { .first = first, .count = (uint32_t)n };
		int ret;

		for (uint64_t i = 0; i < n; i++)
			h[i] = lm_page_hash(s->vkey, s->back + (first + i) * s->page, s->page);
		ret = lm_send(&s->m, LM_HASHES, first + n >= s->npages ? LM_F_LAST : 0, &hf, h,
			      n * 8);
		if (ret) {
			free(h);
			return ret;
		}
	}
	free(h);
	return 0;
}

/* FIN, with the destination's verdict; PROGRESS frames keep the wait alive. */
static int wait_fin(struct src *s)
{
	struct lm_frame f;
	int ret;

	while (!(ret = lm_recv(&s->m, &s->g, &f)))
		if (f.h.type == LM_FIN) {
			s->fin = *(const struct lm_fin *)f.fixed;
			/* the destination may go; if BYE is lost it tells a rejoin */
			lm_send(&s->m, LM_BYE, 0, NULL, NULL, 0);
			return 0;
		}
	return ret;
}

static int wait_for(struct src *s, unsigned int type)
{
	struct lm_frame f;
	int ret;

	while (!(ret = lm_recv(&s->m, &s->g, &f)))
		if (f.h.type == type)
			return 0;
	return ret;
}

static void stop_urgent(struct src *s)
{
	if (!s->urg_running)
		return;
	if (atomic_load(&s->stale_ready) == 0)
		set_stale_ready(s, -1);
	atomic_store(&s->urg_stop, 1);
	shutdown(s->urg.fd, SHUT_RDWR);
	pthread_join(s->urg_tid, NULL);
	s->urg_running = false;
	atomic_store(&s->urg_stop, 0);
}

/* The destination went away before it ran the workload: keep it here. */
static int abort_locally(struct src *s, const char *why)
{
	char err[160];

	fprintf(stderr, "lm: migration aborted: %s; the workload resumes on the source\n", why);
	/* a destination that wakes up later finds a reset, not SWITCH */
	lm_conn_reset(&s->m);
	lm_conn_reset(&s->urg);
	stop_urgent(s);
	wl_resume(&s->wl);
	lm_sleep_until(lm_now_ns() + (uint64_t)(s->o->after_s * 1e9));
	wl_pause(&s->wl);
	wl_stop(&s->wl);
	if (wl_check(s->view, s->size, err, sizeof(err))) {
		fprintf(stderr, "lm: source: workload invariant broken: %s\n", err);
		return LM_EXIT_VERIFY;
	}
	fprintf(stderr, "lm: source: workload ran on, %llu ops, invariants hold\n",
		(unsigned long long)wl_ops(&s->wl));
	return LM_EXIT_ABORTED;
}


/* Everything after the commit, from the start: a rejoin repeats it all,
 * and the destination takes each part once. */
static int postcopy_pass(struct src *s)
{
	int ret = 0;

	/* missing mode sent it before the commit; again after a rejoin */
	if (s->o->mode == LM_MODE_MINOR || (s->o->mode == LM_MODE_MISSING && s->rejoins))
		ret = send_stale_list(s, &s->st.bytes_push);
	inject(s, "stop-postcopy");
	if (!ret && s->o->mode != LM_MODE_STOPCOPY)
		ret = push(s);
	if (!ret && s->verify)
		ret = send_hashes(s);
	s->st.track = s->tr.kind;
	if (!ret)
		ret = lm_send(&s->m, LM_DONE, 0, &s->st, NULL, 0);
	/* the destination maps, runs --after seconds and checks, saying
	 * PROGRESS while it gets on: silence for --timeout is a stall */
	if (!ret)
		ret = wait_fin(s);
	return ret;
}

static int connect_one(struct src *s, struct lm_conn *c, const char *addr, const char *name,
		       unsigned int kind, int timeout_ms);

/* What the destination still lacks after a rejoin: to be sent again. */
static int take_need(struct src *s)
{
	uint64_t again = 0;
	struct lm_frame f;
	int ret;

	while (!(ret = lm_recv(&s->m, &s->g, &f))) {
		const struct lm_need *n = f.fixed;

		if (f.h.type != LM_NEED) {
			snprintf(s->m.err, sizeof(s->m.err), "main connection: expected NEED after "
				 "the rejoin, got %s", lm_type_name(f.h.type));
			return -EBADMSG;
		}
		for (uint64_t k = 0; k < n->nbits; k++) {
			uint8_t sent = S_SENT;

			if (bit_get(f.data, k) &&
			    atomic_compare_exchange_strong(&s->state[n->first + k], &sent, S_STALE))
				again++;
		}
		if (f.h.flags & LM_F_LAST)
			break;
	}
	lm_msg(s->o, "source: %llu pages sent before the break are sent again\n",
	       (unsigned long long)again);
	return ret;
}

/* ms left before the rejoin's deadline end (0: none), at least 1; 0 when past. */
static int ms_left(uint64_t end)
{
	uint64_t now = lm_now_ns();

	if (!end)
		return INT32_MAX;
	return now >= end ? 0 : (int)((end - now) / 1000000ull) + 1;
}

/* One attempt: both connections authenticated, each within the time left. */
static int rejoin_once(struct src *s, uint64_t end)
{
	int ret;

	s->answered = false;
	ret = connect_one(s, &s->m, s->addr, "main", LM_AUTH_REJOIN_MAIN, ms_left(end));
	if (!ret)
		ret = connect_one(s, &s->urg, s->addr, "urgent", LM_AUTH_REJOIN_URGENT,
				  ms_left(end));
	/* a link that drops again before NEED is through: one more attempt;
	 * a malformed one (it opened: it is the destination's) ends it; NEED
	 * too comes within the rejoin's deadline */
	if (!ret) {
		s->m.timeout_ms = ms_left(end) < s->o->timeout_ms ? ms_left(end) :
				  s->o->timeout_ms;
		ret = take_need(s);
		s->m.timeout_ms = s->o->timeout_ms;
		s->answered = lm_err_is_protocol(ret);
	}
	if (ret) {
		lm_conn_close(&s->m);
		lm_conn_close(&s->urg);
	}
	return ret;
}

/*
 * The link broke after the commit while both ends live: connect again with
 * the same key and session, learn what the destination still needs, and
 * go on.  Every failed attempt -- refused, reset, a handshake cut short --
 * is retried, a little slower each time, until --rejoin (default
 * --timeout) has passed, or without limit (--rejoin wait) until the
 * operator interrupts twice.  Only an answer that cannot change ends it
 * early, and only the destination's own -- sealed, after it proved the key:
 * a refusal (wrong key, no such session, not resumed, finished) or a
 * malformed frame.  Anything said before that proof, or in a frame that
 * fails authentication, may be anyone's: it counts as no answer.
 */
static int rejoin(struct src *s)
{
	int limit = lm_rejoin_ms(s->o), ret = -ETIMEDOUT;
	uint64_t t0 = lm_now_ns(), end = limit < 0 ? 0 : t0 + (uint64_t)limit * 1000000ull;
	unsigned int tries = 0, pause_ms = 50;
	int left;

	stop_urgent(s);
	lm_conn_close(&s->m);
	lm_conn_close(&s->urg);
	s->rejoining = true;
	while (ms_left(end)) {
		tries++;
		ret = rejoin_once(s, end);
		if (!ret || lm_interrupted)
			break;
		if (s->answered && (ret == -EACCES || ret == -ESRCH || ret == -ENOLINK ||
				    ret == -EALREADY || lm_err_is_protocol(ret)))
			break;
		if (pause_ms < 800)
			pause_ms *= 2;
		/* the last attempt is made at the deadline, not after it */
		left = ms_left(end);
		lm_sleep_until(lm_now_ns() + (uint64_t)(left > (int)pause_ms ? (int)pause_ms :
							left - 1) * 1000000ull);
	}
	s->rejoining = false;
	/* it resumed and finished: its FIN lost, or it ran on without this side */
	if (ret == -EALREADY)
		fprintf(stderr, "lm: source: rejoined the destination %.1f ms after the break "
			"(attempt %u): it had resumed and finished; its verdict came with the "
			"rejoin's refusal\n", (double)(lm_now_ns() - t0) / 1e6, tries);
	if (ret && ret != -ENOLINK && ret != -EALREADY)
		fprintf(stderr, "lm: source: no rejoin within %d ms (%u attempts): %s\n", limit,
			tries, s->m.err[0] ? s->m.err : strerror(-ret));
	if (ret)
		return ret;
	s->urg.timeout_ms = 0;
	if (lm_thread_start(&s->urg_tid, urgent_server, s))
		return -EAGAIN;
	s->urg_running = true;
	s->rejoins++;
	fprintf(stderr, "lm: source: rejoined the destination %.1f ms after the break "
		"(attempt %u)\n", (double)(lm_now_ns() - t0) / 1e6, tries);
	return 0;
}

/* Everything after the commit; the destination owns the workload. */
static int postcopy(struct src *s)
{
	int ret;

	inject(s, "die-postcopy");
	for (;;) {
		ret = postcopy_pass(s);
		if (!ret || lm_err_is_protocol(ret) || s->rejoins >= 16)
			break;
		fprintf(stderr, "lm: source: the link broke after the switch-over (%s); "
			"rejoining\n", s->m.err[0] ? s->m.err : strerror(-ret));
		ret = rejoin(s);
		if (ret == -EALREADY)
			ret = 0;	/* finished: the verdict is in s->fin */
		if (ret)
			break;
		if (s->fin.npages)
			break;
	}
	stop_urgent(s);
	return ret;
}

/*
 * The switch-over.  The commit point is RESUMED: until it arrives the
 * destination has run nothing the source cannot take back -- in minor and
 * missing mode it cannot get past its first fault, since no request is
 * answered and (minor) no stale list sent before it -- so a destination that
 * stops answering makes the source resume at home within --timeout.
 */
static int switch_over(struct src *s)
{
	int ret = 0;

	/*
	 * The urgent server starts while the workload still runs: it only
	 * waits for requests until the destination resumes.  Started after
	 * SWITCH, its creation (clone, a stack) kept the CPU the destination's
	 * receiver had just been woken on, up to 1.4 ms in the guest.
	 */
	if (s->o->mode != LM_MODE_STOPCOPY) {
		if (lm_thread_start(&s->urg_tid, urgent_server, s))
			return -EAGAIN;
		s->urg_running = true;
	}
	pause_workload(s);
	/*
	 * Boosted for the pause and, in minor mode, for the SWITCH that
	 * follows at once; nothing O(memory) runs at SCHED_FIFO.
	 */
	if (s->o->mode != LM_MODE_MINOR) {
		wl_unboost_self(&s->wl);
		if (take_stale(s))
			return -EIO;
	}
	if (s->o->mode == LM_MODE_STOPCOPY)
		ret = send_pages(s, s->dirty, LM_F_STOPCOPY, &s->st.bytes_paused,
				 &s->st.pages_paused);
	if (!ret)
		ret = send_switch(s);
	wl_unboost_self(&s->wl);
	if (ret)
		return ret;
	/*
	 * SWITCH is out whole: the destination may run the workload from now
	 * on, so this side never resumes it on its own (see recover()); an
	 * interrupt only warns.
	 */
	s->switched = true;
	lm_committed = 1;
	if (s->o->mode == LM_MODE_MISSING)
		ret = send_stale_list(s, &s->st.bytes_paused);
	if (!ret)
		ret = wait_for(s, LM_RESUMED);
	if (ret)
		return ret;
	/*
	 * Minor mode collects after RESUMED: O(memory), so not in the
	 * downtime, and not while the destination's workload wakes either
	 * (on one machine the collection held a CPU the woken threads then
	 * waited 1.4 ms for).  Requests wait for it; faults wait meanwhile.
	 */
	if (s->o->mode == LM_MODE_MINOR && take_stale(s))
		all_stale(s);
	lm_trace("lm src: stale taken");
	set_stale_ready(s, 1);
	return 0;
}

/*
 * Stale pages never sent: the destination cannot have them, so it cannot
 * run the workload on.  Stop-copy sent every page before SWITCH.
 */
static uint64_t never_sent(const struct src *s)
{
	uint64_t n = 0;

	for (uint64_t i = 0; s->o->mode != LM_MODE_STOPCOPY && i < s->npages; i++)
		n += atomic_load(&s->state[i]) == S_STALE;
	return n;
}

/*
 * After SWITCH, and no verdict: the destination may run the workload on
 * (it holds every page), or may lack pages only this side holds (minor and
 * missing mode before their postcopy ends) and stop.  Its region -- every
 * page as it was at the pause -- is the only whole copy in the second case:
 * it goes to the checkpoint file before anything is freed, and the
 * workload stays paused there for the operator.  The message says which
 * case this side can rule out: with every page sent the checkpoint may be
 * a second copy beside a destination that runs on.
 */
static int keep(struct src *s)
{
	const char *path = s->o->checkpoint;
	uint64_t unsent = never_sent(s);
	char def[64];
	int ret;

	stop_urgent(s);
	if (!path) {
		snprintf(def, sizeof(def), "lm-checkpoint-%d", (int)getpid());
		path = def;
	}
	ret = lm_ckpt_write(path, s->back, s->size, s->page, s->o->mode);
	if (ret) {
		fprintf(stderr, "lm: source: WORKLOAD LOST on this side: cannot write the "
			"checkpoint %s: %s\n", path, strerror(-ret));
		return LM_EXIT_LOST;
	}
	if (unsent)
		fprintf(stderr, "lm: source: OUTCOME UNKNOWN, but the destination cannot run the "
			"workload on: %llu of %llu pages it lacks were never sent; the workload is "
			"kept paused in %s (every page as at the pause): once the destination has "
			"stopped, resume it with: lm resume %s\n", (unsigned long long)unsent,
			(unsigned long long)s->npages, path, path);
	else
		fprintf(stderr, "lm: source: OUTCOME UNKNOWN: every page was sent, so the "
			"destination may hold them all and run the workload on; it is also kept "
			"paused in %s (every page as at the pause), a second copy: only if the "
			"destination did not run it on (it did not exit 0), resume it with: lm "
			"resume %s\n", path, path);
	return LM_EXIT_UNDECIDED;
}

/* The link broke for good after RESUMED: the verdict never came. */
static int lost_after_switch(struct src *s, int ret)
{
	fprintf(stderr, "lm: source: destination lost after the switch-over (the workload was "
		"committed to it): %s\n", s->m.err[0] ? s->m.err : strerror(-ret));
	return keep(s);
}

/*
 * SWITCH went out, RESUMED did not come: the destination may run the
 * workload, so it is never resumed here on a guess.  Ask the destination
 * (a rejoin of this session): if it resumed, carry on from where it is; if
 * it answers, sealed, that it did not and never will, take the workload
 * back; if it cannot be reached within --rejoin, keep the workload paused
 * in a checkpoint and leave the decision to the operator (exit 8).
 */
static int recover(struct src *s, int why)
{
	int ret;

	fprintf(stderr, "lm: source: no RESUMED after SWITCH (%s): the destination may be "
		"running the workload; staying paused and asking it\n",
		s->m.err[0] ? s->m.err : strerror(-why));
	if (!s->stale_taken && take_stale(s))
		all_stale(s);
	set_stale_ready(s, 1);
	ret = rejoin(s);
	if (ret == -ENOLINK)
		return abort_locally(s, "the destination says, sealed, that it did not resume "
				     "the workload and never will");
	if (ret == -EALREADY)
		return 0;	/* it resumed, and finished: the verdict is in s->fin */
	if (!ret)
		fprintf(stderr, "lm: source: the destination had resumed: the workload is its\n");
	if (ret) {
		fprintf(stderr, "lm: source: no word from the destination since SWITCH; the "
			"workload is not resumed here (the destination may run it)\n");
		return keep(s);
	}
	ret = postcopy(s);
	if (ret)
		return lost_after_switch(s, ret);
	return LM_EXIT_OK;
}

static int migrate(struct src *s)
{
	int ret = precopy(s);

	if (!ret)
		ret = switch_over(s);
	if (ret && s->switched)
		ret = recover(s, ret);
	else if (ret == -EIO)
		return abort_locally(s, "dirty tracking failed");
	else if (ret)
		return abort_locally(s, s->m.err[0] ? s->m.err : strerror(-ret));
	else
		ret = postcopy(s);
	if (ret < 0)
		return lost_after_switch(s, ret);
	if (ret)
		return ret;
	/* the destination's verdict is this side's too */
	lm_outcome_print(&s->fin, s->o, "source");
	return (int)s->fin.rc;
}

static int setup(struct src *s, const struct lm_opts *o)
{
	int ret;

	memset(s, 0, sizeof(*s));
	s->o = o;
	s->verify = o->verify;
	s->m.fd = s->urg.fd = -1;
	pthread_mutex_init(&s->stale_mu, NULL);
	pthread_cond_init(&s->stale_cv, NULL);
	ret = uffdm_region_create(&s->r, o->backing, o->size);
	if (ret) {
		fprintf(stderr, "lm: source: cannot create a %zu-byte region: %s\n", o->size,
			strerror(-ret));
		return ret;
	}
	s->view = uffdm_region_view(s->r);
	s->back = uffdm_region_backing(s->r);
	s->size = o->size;
	s->page = uffdm_region_page_size(s->r);
	s->npages = s->size / s->page;
	s->g = (struct lm_geom){ .npages = s->npages, .page_size = (uint32_t)s->page };
	s->dirty = calloc(1, (s->npages + 7) / 8);
	s->state = calloc(s->npages, 1);
	if (!s->dirty || !s->state)
		return -ENOMEM;
	lm_link_init(&s->link, o->bandwidth, o->rtt_ns);
	return 0;
}

/*
 * Connect only once the memory is formatted and tracked: for gigabytes that
 * takes seconds, and the destination counts a silent connection as dead
 * after --timeout.
 */
static int connect_one(struct src *s, struct lm_conn *c, const char *addr, const char *name,
		       unsigned int kind, int timeout_ms)
{
	int wait = timeout_ms < s->o->timeout_ms ? timeout_ms : s->o->timeout_ms;
	int fd = lm_connect_within(addr, wait, s->rejoining), ret;

	/* connect and lookup within the wait: a host that drops SYNs is no hang */
	if (fd < 0) {
		snprintf(s->m.err, sizeof(s->m.err), "%s connection to %s: %s", name, addr,
			 fd == -ETIMEDOUT ? "no answer" : "cannot connect");
		return fd == -ETIMEDOUT || fd == -ECANCELED ? fd : -ECONNREFUSED;
	}
	ret = lm_conn_init(c, fd, name, &s->link, wait);
	if (ret) {
		close(fd);
		return ret;
	}
	ret = lm_auth_client(c, s->o->key, kind, s->o->plaintext ? LM_AUTH_PLAIN : 0, s->session,
			     &s->g, &s->hello, &s->fin);
	c->timeout_ms = s->o->timeout_ms;
	s->answered = ret && lm_auth_answered(c, ret);
	/* a rejoin retries quietly: only its last failure is told */
	if (ret && !s->rejoining)
		fprintf(stderr, "lm: source: %s connection to %s: %s\n", name, addr, c->err);
	if (ret && c != &s->m)
		memcpy(s->m.err, c->err, sizeof(s->m.err));
	if (ret)
		return ret;
	s->verify = s->hello.verify;
	return 0;
}

static int connect_both(struct src *s, const char *addr)
{
	int ret;

	randombytes_buf(s->session, sizeof(s->session));
	lm_verify_key(s->vkey, s->o->key, s->session);
	s->hello = (struct lm_hello){
		.version = LM_VERSION, .mode = s->o->mode, .size = s->size,
		.page_size = (uint32_t)s->page, .backing = s->o->backing,
		.nthreads = s->o->wl.threads, .verify = s->verify, .boot = lm_boot_hash(),
		.t_start_ns = s->t_start,
	};
	ret = connect_one(s, &s->m, addr, "main", LM_AUTH_MAIN, s->o->timeout_ms);
	if (!ret)
		ret = connect_one(s, &s->urg, addr, "urgent", LM_AUTH_URGENT, s->o->timeout_ms);
	s->urg.timeout_ms = 0;	/* requests come when they come */
	return ret;
}

int lm_source(const struct lm_opts *o, const char *addr)
{
	struct src *s;
	struct lm_room room;
	int ret;

	/* past the cgroup's room the kernel OOM-kills while formatting: ask first */
	lm_mem_room(&room, o->backing);
	if (!lm_mem_fits(&room, o->size, "source"))
		return LM_EXIT_NOMEM;
	s = malloc(sizeof(*s));
	if (!s || setup(s, o))
		return LM_EXIT_USAGE;
	wl_format(s->view, s->size, &o->wl);
	ret = lm_track_start(&s->tr, o->track, s->view, s->size, s->page);
	if (ret) {
		fprintf(stderr, "lm: source: dirty tracking '%s' unavailable: %s\n",
			lm_track_name(o->track), strerror(-ret));
		return LM_EXIT_USAGE;
	}
	s->t_start = lm_now_ns();
	s->addr = addr;
	ret = connect_both(s, addr);
	if (ret)
		return ret == -EACCES ? LM_EXIT_AUTH : ret == -ETIMEDOUT || ret == -EPIPE ?
		       LM_EXIT_PEER_LOST : LM_EXIT_USAGE;
	lm_msg(o, "source: %zu MiB %s, %llu pages of %zu bytes, tracking %s\n",
	       s->size >> 20, o->backing == UFFDM_SHMEM ? "shmem" : "hugetlb",
	       (unsigned long long)s->npages, s->page, lm_track_name(s->tr.kind));
	s->wl.rate = o->wl.rate;
	ret = wl_start(&s->wl, s->view, s->size, s->back);
	if (ret) {
		fprintf(stderr, "lm: source: cannot start the workload: %s\n", strerror(-ret));
		return LM_EXIT_USAGE;
	}
	ret = migrate(s);
	if (s->wl.running)
		wl_stop(&s->wl);
	lm_track_stop(&s->tr);
	lm_conn_close(&s->m);
	lm_conn_close(&s->urg);
	uffdm_region_destroy(s->r);
	return ret;
}

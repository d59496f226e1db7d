// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The migrated workload.  Everything it needs to continue lives in the
 * region: per-thread op counters and random state in record 0, and records
 * whose checksum and counter are kept in step.  So after migration the
 * destination's threads pick up exactly where the source's stopped, and
 * a stale page breaks an invariant that wl_check() sees.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lm.h"

#define WL_MAGIC 0x4b353133574c3031ull

static __thread sigjmp_buf wl_jmp;
static __thread volatile sig_atomic_t wl_armed;
static __thread struct workload *wl_self;

uint64_t lm_hash(const void *p, size_t n)
{
	const uint64_t *w = p;
	uint64_t h = 0x243f6a8885a308d3ull ^ n;

	for (size_t i = 0; i < n / 8; i++) {
		h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return h;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = (a ^ (b * 0xbf58476d1ce4e5b9ull)) * 0x94d049bb133111ebull;

	return h ^ (h >> 31);
}

static struct wl_hdr *hdr(uint8_t *mem)
{
	return (struct wl_hdr *)mem;
}

static uint64_t owned(uint64_t nrec_used, unsigned int t, unsigned int n)
{
	return nrec_used > t ? (nrec_used - t + n - 1) / n : 0;
}

void wl_format(uint8_t *mem, size_t size, const struct wl_opts *o)
{
	struct wl_hdr *h = hdr(mem);
	uint64_t nrec = size / WL_REC;

	memset(mem, 0, size);
	h->magic = WL_MAGIC;
	h->nthreads = o->threads;
	h->pattern = o->pattern;
	h->nrec = nrec;
	h->hot_nrec = o->pattern == WL_HOT ? (uint64_t)((double)(nrec - 1) * o->hot_frac) : 0;
	if (o->pattern == WL_HOT && h->hot_nrec < o->threads)
		h->hot_nrec = o->threads;
	h->hot_share = o->hot_share;
	for (unsigned int t = 0; t < o->threads; t++)
		h->th[t].rng = mix(t + 1, 0x5eed);
	for (uint64_t r = 1; r < nrec; r++)
		((struct wl_rec *)(mem + r * WL_REC))->owner = (r - 1) % o->threads;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* One write: a few words of one of this thread's records. */
static void wl_op(uint8_t *mem, unsigned int t)
{
	struct wl_hdr *h = hdr(mem);
	struct wl_thread_state *st = &h->th[t];
	uint64_t rng = st->rng, pick, k, c;
	unsigned int n = h->nthreads;
	struct wl_rec *rec;

	pick = xorshift(&rng);
	if (h->pattern == WL_HOT && pick % 100 < h->hot_share)
		k = (pick >> 8) % owned(h->hot_nrec, t, n);
	else
		k = (pick >> 8) % owned(h->nrec - 1, t, n);
	rec = (struct wl_rec *)(mem + (1 + t + k * n) * WL_REC);
	c = rec->counter + 1;
	for (unsigned int j = 0; j < 4; j++) {
		uint64_t v = mix(c, j), idx = mix(v, t) % WL_WORDS;

		rec->csum ^= rec->data[idx] ^ v;
		rec->data[idx] = v;
	}
	rec->csum ^= rec->counter ^ c;
	rec->counter = c;
	st->rng = rng;
	st->ops++;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!wl_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	atomic_store(&wl_self->fail_addr, (uintptr_t)si->si_addr);
	siglongjmp(wl_jmp, 1);
}

static void park(struct workload *w)
{
	pthread_mutex_lock(&w->lock);
	w->parked++;
	pthread_cond_broadcast(&w->cond);
	while (atomic_load(&w->pause_req) && !atomic_load(&w->quit))
		pthread_cond_wait(&w->cond, &w->lock);
	w->parked--;
	pthread_mutex_unlock(&w->lock);
	/* the first thread out: the workload runs again */
	uint64_t none = 0;

	atomic_compare_exchange_strong(&w->t_running, &none, lm_now_ns());
}

struct wl_arg {
	struct workload *w;
	unsigned int t;
};

static struct wl_arg wl_args[WL_MAX_THREADS];

static void *wl_thread(void *p)
{
	struct wl_arg *a = p;
	struct workload *w = a->w;
	uint64_t t0 = lm_now_ns(), done = 0;

	wl_self = w;
	if (sigsetjmp(wl_jmp, 1)) {
		/* The page could not be made right: this thread stops here,
		 * counted as parked so pausers never wait for it. */
		wl_armed = 0;
		atomic_store(&w->failed, 1);
		pthread_mutex_lock(&w->lock);
		w->parked++;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		return NULL;
	}
	wl_armed = 1;
	while (!atomic_load_explicit(&w->quit, memory_order_relaxed)) {
		if (atomic_load_explicit(&w->pause_req, memory_order_relaxed)) {
			park(w);
			t0 = lm_now_ns();
			done = 0;
			continue;
		}
		wl_op(w->mem, a->t);
		if (w->rate && ++done % 16 == 0) {
			uint64_t due = t0 + done * 1000000000ull / w->rate;

			if (due > lm_now_ns())
				lm_sleep_until(due);
		}
	}
	wl_armed = 0;
	return NULL;
}

static int spawn(struct workload *w)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
	int ret;

	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	sigaction(SIGBUS, &sa, NULL);
	for (unsigned int t = 0; t < w->n; t++) {
		wl_args[t] = (struct wl_arg){ w, t };
		ret = lm_thread_start(&w->tid[t], wl_thread, &wl_args[t]);
		if (ret) {
			w->n = t;
			wl_stop(w);
			return ret;
		}
	}
	w->running = true;
	return 0;
}

int wl_hdr_check(const struct wl_hdr *h, size_t size, unsigned int nthreads)
{
	return h->magic == WL_MAGIC && h->nthreads == nthreads && h->nrec == size / WL_REC ?
	       0 : -EBADMSG;
}

int wl_start_parked(struct workload *w, uint8_t *mem, size_t size, unsigned int nthreads)
{
	uint64_t rate = w->rate;

	if (nthreads < 1 || nthreads > WL_MAX_THREADS)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->rate = rate;
	w->mem = mem;
	w->size = size;
	w->n = nthreads;
	/* parked before the first op: they touch nothing until wl_resume() */
	atomic_store(&w->pause_req, 1);
	return spawn(w);
}

int wl_start(struct workload *w, uint8_t *mem, size_t size, const uint8_t *hdr_mem)
{
	const struct wl_hdr *h = (const struct wl_hdr *)hdr_mem;
	uint64_t rate = w->rate;

	if (h->magic != WL_MAGIC || h->nthreads < 1 || h->nthreads > WL_MAX_THREADS ||
	    h->nrec != size / WL_REC)
		return -EBADMSG;
	memset(w, 0, sizeof(*w));
	w->rate = rate;
	w->mem = mem;
	w->size = size;
	w->n = h->nthreads;
	return spawn(w);
}

void wl_pause(struct workload *w)
{
	atomic_store(&w->pause_req, 1);
	pthread_mutex_lock(&w->lock);
	while (w->parked < (int)w->n)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/*
 * Under load a CPU-bound workload thread can wait a whole time slice for a
 * CPU before it sees the pause flag: with two busy loops on two CPUs the
 * source's pause took up to 17 ms.  At SCHED_FIFO it preempts the loops at
 * once and parks in microseconds.  The flag is set before anyone is
 * boosted: a thread at FIFO that cannot see it yet would run ops and keep
 * the pauser off its CPU.  RT throttling bounds a runaway.
 */
int wl_pause_boosted(struct workload *w)
{
	struct sched_param rt = { .sched_priority = 1 };
	struct sched_param param[WL_MAX_THREADS];
	int policy[WL_MAX_THREADS], ret;

	atomic_store(&w->pause_req, 1);
	pthread_getschedparam(pthread_self(), &w->self_policy, &w->self_param);
	ret = pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
	if (ret) {
		wl_pause(w);
		return -ret;
	}
	w->self_boosted = true;
	for (unsigned int t = 0; t < w->n; t++) {
		pthread_getschedparam(w->tid[t], &policy[t], &param[t]);
		pthread_setschedparam(w->tid[t], SCHED_FIFO, &rt);
	}
	wl_pause(w);
	/* parked: asleep until wl_resume(), which must find them ordinary */
	for (unsigned int t = 0; t < w->n; t++)
		pthread_setschedparam(w->tid[t], policy[t], &param[t]);
	return 0;
}

void wl_unboost_self(struct workload *w)
{
	if (!w->self_boosted)
		return;
	pthread_setschedparam(pthread_self(), w->self_policy, &w->self_param);
	w->self_boosted = false;
}

/*
 * Broadcast after unlocking: woken threads would otherwise block on the
 * mutex we still hold and need a second wake-up each -- the probe trace
 * showed two cross-CPU wake-ups per thread at the destination's resume.  A
 * thread that saw pause_req set under the lock is in cond_wait by now.
 */
void wl_resume(struct workload *w)
{
	atomic_store(&w->t_running, 0);
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->pause_req, 0);
	pthread_mutex_unlock(&w->lock);
	pthread_cond_broadcast(&w->cond);
}

/*
 * The end of the downtime as the workload sees it.  The resumer's own
 * clock after wl_resume() is later: a woken thread may preempt it (the
 * guest's trace showed the resumer off its CPU for 1 ms while the
 * workload already ran).
 */
uint64_t wl_running_since(struct workload *w)
{
	return atomic_load(&w->t_running);
}

void wl_stop_kick(struct workload *w, void (*kick)(void *), void *arg)
{
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->quit, 1);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	kick(arg);
	for (unsigned int t = 0; t < w->n; t++) {
		for (;;) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 20000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(w->tid[t], NULL, &ts) != ETIMEDOUT)
				break;
			kick(arg);
		}
	}
	w->running = false;
}

void wl_stop(struct workload *w)
{
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->quit, 1);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned int t = 0; t < w->n; t++)
		pthread_join(w->tid[t], NULL);
	w->running = false;
}

uint64_t wl_ops(const struct workload *w)
{
	const struct wl_hdr *h = (const struct wl_hdr *)w->mem;
	uint64_t sum = 0;

	for (unsigned int t = 0; t < w->n; t++)
		sum += __atomic_load_n(&h->th[t].ops, __ATOMIC_RELAXED);
	return sum;
}

int wl_check(const uint8_t *mem, size_t size, char *err, size_t errlen)
{
	const struct wl_hdr *h = (const struct wl_hdr *)mem;
	uint64_t sums[WL_MAX_THREADS] = { 0 };

	if (h->magic != WL_MAGIC || h->nthreads < 1 || h->nthreads > WL_MAX_THREADS ||
	    h->nrec != size / WL_REC) {
		snprintf(err, errlen, "workload header damaged");
		return -EBADMSG;
	}
	for (uint64_t r = 1; r < h->nrec; r++) {
		const struct wl_rec *rec = (const struct wl_rec *)(mem + r * WL_REC);
		uint64_t x = rec->counter;

		for (unsigned int i = 0; i < WL_WORDS; i++)
			x ^= rec->data[i];
		if (x != rec->csum || rec->owner != (r - 1) % h->nthreads) {
			snprintf(err, errlen, "record %llu: checksum or owner wrong",
				 (unsigned long long)r);
			return -EBADMSG;
		}
		sums[rec->owner] += rec->counter;
	}
	for (unsigned int t = 0; t < h->nthreads; t++)
		if (sums[t] != h->th[t].ops) {
			snprintf(err, errlen, "thread %u: %llu ops counted, records say %llu", t,
				 (unsigned long long)h->th[t].ops, (unsigned long long)sums[t]);
			return -EBADMSG;
		}
	return 0;
}

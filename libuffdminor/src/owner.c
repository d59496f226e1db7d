// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The owner's side of failing a page a server in another process cannot
 * fail for good (issue 31).
 *
 * A page server in another process acts on the VMM's mm through the
 * userfaultfd, and no ioctl of it makes a page SIGBUS for good except
 * POISON (6.6+), which takes holes only.  A refused write (a mapped page)
 * and, without POISON, every page can only be fenced (fence.c), and a
 * fence is a mapping: only the process whose memory it is can make it.
 * Moving the page to a SIGBUS descriptor instead, as 0.3 did, unregisters
 * it first, and UNREGISTER wakes the waiters of a MISSING range into a
 * window where a hole reads as zeroes and a refused write lands.
 *
 * So the server leaves the faulting thread asleep and says so in the
 * shared page states (uffdm_region_state_fd(3)): the page's state becomes
 * UFFDM_PS_OWNER, or a fault outside every region it serves takes a slot
 * in a tail; then it bumps the tail's fence_seq and wakes it (a futex in
 * the shared memfd: it works across processes).  The owner's thread here
 * (started by uffdm_watchdog_start(3)) waits on every region's fence_seq,
 * fails what is asked with uffdm_range_fail(3) in its own mm (POISON or a
 * fence, no window) and wakes the sleepers into SIGBUS.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define PS(w)		((w) & UFFDM_PS_MASK)
#define GEN(w)		((w) & ~UFFDM_PS_MASK)

struct uffdm__owner {
	struct uffdm *u;
	struct uffdm_region **r;
	unsigned int nr;
	unsigned int fail_flags;
	uint32_t kick;			/* a private futex: bumped to make a pass */
	bool stopping;
	struct futex_waitv *w;		/* one per region with states, then kick */
	unsigned int nw;
	pthread_t tid;
};

static void futex_wake(uint32_t *addr, bool shared)
{
	syscall(SYS_futex, addr, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void uffdm__owner_ask(struct uffdm_region *r)
{
	__atomic_add_fetch(&r->tail->fence_seq, 1, __ATOMIC_RELEASE);
	futex_wake(&r->tail->fence_seq, true);
}

/* A slot for addr (one already holding it will do); false when all are taken. */
bool uffdm__owner_post(struct uffdm_region *r, uint64_t addr)
{
	for (unsigned int i = 0; i < UFFDM_OUTSIDE_SLOTS; i++) {
		uint64_t free = 0;

		if (__atomic_load_n(&r->tail->outside[i], __ATOMIC_ACQUIRE) == addr ||
		    __atomic_compare_exchange_n(&r->tail->outside[i], &free, addr, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			uffdm__owner_ask(r);
			return true;
		}
	}
	return false;
}

static bool marked(const struct uffdm_region *r, size_t i)
{
	return PS(__atomic_load_n(&r->pstate[i], __ATOMIC_ACQUIRE)) == UFFDM_PS_OWNER;
}

/* Marked pages from i on are failed here, in one call a run, then marked failed. */
static size_t fail_run_at(struct uffdm__owner *o, struct uffdm_region *r, size_t i)
{
	size_t n = r->size / r->page, j = i + 1;

	while (j < n && marked(r, j))
		j++;
	uffdm_range_fail(o->u, (char *)r->view + i * r->page, (j - i) * r->page, r->page,
			 o->fail_flags);
	for (size_t k = i; k < j; k++) {
		uint32_t old = __atomic_load_n(&r->pstate[k], __ATOMIC_ACQUIRE);

		if (PS(old) == UFFDM_PS_OWNER)
			__atomic_compare_exchange_n(&r->pstate[k], &old, GEN(old) | UFFDM_PAGE_FAILED,
						    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	}
	return j;
}

static void fail_marked(struct uffdm__owner *o, struct uffdm_region *r)
{
	for (size_t i = 0; i < r->size / r->page;)
		i = marked(r, i) ? fail_run_at(o, r, i) : i + 1;
}

static struct uffdm_region *holding(const struct uffdm__owner *o, uint64_t addr)
{
	for (unsigned int i = 0; i < o->nr; i++) {
		uintptr_t v = (uintptr_t)o->r[i]->view;

		if (addr >= v && addr - v < o->r[i]->size)
			return o->r[i];
	}
	return NULL;
}

/*
 * Faults outside every region a server serves: failed when one of ours
 * holds the address.  Else nobody here knows its page: it sleeps until
 * the application's uffdm_range_fail(3) (documented).
 */
static void fail_posted(struct uffdm__owner *o, struct uffdm_region *r)
{
	for (unsigned int i = 0; i < UFFDM_OUTSIDE_SLOTS; i++) {
		uint64_t addr = __atomic_load_n(&r->tail->outside[i], __ATOMIC_ACQUIRE);
		struct uffdm_region *in = addr ? holding(o, addr) : NULL;

		if (in)
			uffdm_range_fail(o->u, (void *)(uintptr_t)(addr & ~(uint64_t)(in->page - 1)),
					 in->page, in->page, o->fail_flags);
		if (addr)
			__atomic_compare_exchange_n(&r->tail->outside[i], &addr, 0, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	}
}

static void pass(struct uffdm__owner *o)
{
	for (unsigned int i = 0; i < o->nr; i++) {
		if (!o->r[i]->tail)
			continue;
		fail_marked(o, o->r[i]);
		fail_posted(o, o->r[i]);
	}
}

/*
 * Until a fence_seq or stop moves from what was read (at once if one did).
 * Before 5.16 (no futex_waitv), or beyond the regions one wait takes: a
 * look every 10 ms.
 */
static void wait_asked(struct uffdm__owner *o)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	if (o->nw > FUTEX_WAITV_MAX ||
	    (syscall(SYS_futex_waitv, o->w, o->nw, 0, NULL, 0) < 0 && errno == ENOSYS))
		nanosleep(&ts, NULL);
}

static void *run(void *arg)
{
	struct uffdm__owner *o = arg;

	for (;;) {
		/* read first: a request made after the pass moves them */
		for (unsigned int i = 0, k = 0; i < o->nr; i++)
			if (o->r[i]->tail)
				o->w[k++].val = __atomic_load_n(&o->r[i]->tail->fence_seq,
								__ATOMIC_ACQUIRE);
		o->w[o->nw - 1].val = __atomic_load_n(&o->kick, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&o->stopping, __ATOMIC_ACQUIRE)) {
			pass(o);	/* the last */
			return NULL;
		}
		pass(o);
		wait_asked(o);
	}
}

static void owner_free(struct uffdm__owner *o)
{
	free(o->w);
	free(o->r);
	free(o);
}

int uffdm__owner_start(struct uffdm__owner **out, struct uffdm *u, struct uffdm_region *const *r,
		       unsigned int nr, unsigned int fail_flags)
{
	struct uffdm__owner *o = calloc(1, sizeof(*o));
	int ret = -ENOMEM;

	*out = NULL;
	if (!o)
		return -ENOMEM;
	*o = (struct uffdm__owner){ .u = u, .nr = nr, .fail_flags = fail_flags, .nw = 1 };
	for (unsigned int i = 0; i < nr; i++)
		o->nw += !!r[i]->tail;
	if (o->nw == 1) {
		free(o);	/* no states shared: nothing can be asked */
		return 0;
	}
	o->r = malloc(nr * sizeof(*o->r));
	o->w = calloc(o->nw, sizeof(*o->w));
	if (!o->r || !o->w)
		goto err;
	memcpy(o->r, r, nr * sizeof(*o->r));
	for (unsigned int i = 0, k = 0; i < nr; i++)
		if (r[i]->tail)
			o->w[k++] = (struct futex_waitv){
				.uaddr = (uintptr_t)&r[i]->tail->fence_seq, .flags = FUTEX_32,
			};
	o->w[o->nw - 1] = (struct futex_waitv){
		.uaddr = (uintptr_t)&o->kick, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
	};
	ret = uffdm__thread_start(&o->tid, run, o);
	if (ret)
		goto err;
	*out = o;
	return 0;
err:
	owner_free(o);
	return ret;
}

/*
 * A pass now.  A server that died between marking a page and waking us
 * left it asleep; the watchdog kicks when it sees a server lost.
 */
void uffdm__owner_kick(struct uffdm__owner *o)
{
	if (!o)
		return;
	__atomic_add_fetch(&o->kick, 1, __ATOMIC_RELEASE);
	futex_wake(&o->kick, false);
}

void uffdm__owner_stop(struct uffdm__owner *o)
{
	if (!o)
		return;
	__atomic_store_n(&o->stopping, true, __ATOMIC_RELEASE);
	uffdm__owner_kick(o);
	pthread_join(o->tid, NULL);
	owner_free(o);
}

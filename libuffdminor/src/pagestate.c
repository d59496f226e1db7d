// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Fill-once: every page of a region has one state word, generation << 3 |
 * state, changed only by compare-and-swap.  The thread that moves a page
 * from EMPTY to FILLING owns it: it alone writes the backing view (through
 * the user's callback, or as a claimer) until the page is FILLED or
 * FAILED.  Other faults on the page wait in the kernel: the owner's
 * CONTINUE wakes every thread waiting on the range.  A discard or zap
 * starts a new generation (region.c), so an owner of the old one cannot
 * mark the new one filled.
 *
 * Mapping, unprotecting and failing pages live here too, with the timing
 * of their ioctls.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pagestate.h"

/* Internal: a completion is mapping the page; reported as FILLING. */
#define PS_COMPLETING	5u
#define PS(w)		((w) & UFFDM_PS_MASK)
#define GEN(w)		((w) & ~UFFDM_PS_MASK)
#define APP_SPILL	16

/*
 * Who is serving: a handler thread, whose spill holds the events read
 * while resolving (served after its fault), or an application thread,
 * which has none.  Faults read beyond the spill are parked: read but not
 * woken, so they cannot come back and crowd out the event the kernel waits
 * for (it hands out faults before events, and woken faults refault at
 * once); svc_end() wakes them, and they fault again as fresh messages.
 */
struct svc {
	const struct ps_caller *c;
	uint64_t *parked;
	size_t nparked, cap;
};

static void svc_init(struct svc *s, const struct ps_caller *c)
{
	*s = (struct svc){ .c = c };
}

static struct uffdm *svc_u(const struct svc *s)
{
	return s->c->srv->u;
}

static void count(const struct svc *s, enum counter c, uint64_t n)
{
	s->c->srv->ops->count(s->c->who, c, n);
}

static uint64_t step_start(const struct svc *s)
{
	return s->c->srv->ops->step_start(s->c->who);
}

static void step_time(const struct svc *s, enum counter c, uint64_t t0)
{
	s->c->srv->ops->step_time(s->c->who, c, t0);
}

static void wake_fault(struct svc *s, uint64_t addr)
{
	size_t small = (size_t)sysconf(_SC_PAGESIZE);

	count(s, C_REQUEUED, 1);
	uffdm_wake(svc_u(s), (void *)(uintptr_t)(addr & ~(uint64_t)(small - 1)), small);
}

/* Without room to park it (no memory), a fault is woken now, as before. */
static void park(struct svc *s, uint64_t addr)
{
	if (s->nparked == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		uint64_t *grown = realloc(s->parked, cap * sizeof(*grown));

		if (!grown) {
			wake_fault(s, addr);
			return;
		}
		s->parked = grown;
		s->cap = cap;
	}
	s->parked[s->nparked++] = addr;
}

static void svc_end(struct svc *s)
{
	for (size_t i = 0; i < s->nparked; i++)
		wake_fault(s, s->parked[i]);
	free(s->parked);
	s->parked = NULL;
	s->nparked = s->cap = 0;
}

static bool is_fault(const struct uffdm_event *ev)
{
	return ev->kind == UFFDM_EVENT_MINOR || ev->kind == UFFDM_EVENT_MISSING ||
	       ev->kind == UFFDM_EVENT_WP;
}

/*
 * An ioctl said EAGAIN: a non-cooperative event is unread.  Read into the
 * spill while it has room; beyond it, serve events now and park faults.
 */
static void svc_drain(struct svc *s)
{
	struct uffdm *u = svc_u(s);
	struct uffdm_event buf[16];
	int n;

	count(s, C_EAGAIN, 1);
	if (s->c->max && *s->c->nspill < s->c->max) {
		n = uffdm_events_read(u, s->c->spill + *s->c->nspill, s->c->max - *s->c->nspill,
				      UFFDM_READ_NONBLOCK);
		if (n > 0)
			*s->c->nspill += (unsigned int)n;
		else
			sched_yield();	/* another thread is reading it */
		return;
	}
	n = uffdm_events_read(u, buf, UFFDM_ARRAY_SIZE(buf), UFFDM_READ_NONBLOCK);
	if (n <= 0)
		sched_yield();
	for (int i = 0; i < n; i++) {
		if (is_fault(&buf[i]))
			park(s, buf[i].addr);
		else
			s->c->srv->ops->event(s->c->who, &buf[i]);
	}
}

static void time_ioctl(struct svc *s, uint64_t t0)
{
	step_time(s, C_IOCTL_NS, t0);
}

static uint32_t *word(const struct uffdm_region *r, size_t off)
{
	return &r->pstate[off / r->page];
}

static char *uaddr(const struct uffdm_region *r, size_t off)
{
	return (char *)(r->uaddr + off);
}

static bool cas(uint32_t *w, uint32_t *old, uint32_t new)
{
	return __atomic_compare_exchange_n(w, old, new, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

/*
 * CONTINUE the whole run and wake its waiters.  EEXIST is per page (one
 * already mapped: CONTINUE then wakes no one, so we do) and the rest of
 * the run is still mapped; EAGAIN reads the pending event and retries.
 * *mapped grows by the pages this CONTINUE mapped, not those found mapped.
 */
static int map_run(struct svc *s, struct uffdm_region *r, size_t off, size_t len,
		   size_t *mapped)
{
	struct uffdm *u = svc_u(s);
	char *p = uaddr(r, off);
	uint64_t t0 = step_start(s);
	ssize_t done;
	int ret = 0;

	while (len) {
		done = uffdm_continue(u, p, len, 0);
		if (done > 0) {
			p += done;
			len -= (size_t)done;
			*mapped += (size_t)done / r->page;
		} else if (done == -EEXIST) {
			count(s, C_EEXIST, 1);
			uffdm_wake(u, p, r->page);
			p += r->page;
			len -= r->page;
		} else if (done == -EAGAIN) {
			svc_drain(s);
		} else {
			ret = done ? (int)done : -EIO;
			break;
		}
	}
	time_ioctl(s, t0);
	return ret;
}

/* Clearing write protection also wakes the threads waiting on it. */
static int unprotect(struct svc *s, struct uffdm_region *r, size_t off, size_t len)
{
	uint64_t t0 = step_start(s);
	int ret;

	for (;;) {
		ret = uffdm_writeprotect(svc_u(s), uaddr(r, off), len, false);
		if (ret != -EAGAIN)
			break;
		svc_drain(s);
	}
	time_ioctl(s, t0);
	return ret;
}

/* 0 poisoned (and woken), -EEXIST mapped (nobody woken), or the kernel's error. */
static int poison_hole(struct svc *s, char *p, size_t len)
{
	struct uffdm *u = svc_u(s);
	ssize_t done;

	for (;;) {
		done = uffdm_poison(u, p, len, 0);
		if (done != -EAGAIN)
			break;
		svc_drain(s);
	}
	return done < 0 ? (int)done : 0;
}

/*
 * Move the page to a descriptor opened with UFFD_FEATURE_SIGBUS, whose
 * faults are SIGBUS without an event, and wake the thread into it.  It is
 * registered for MISSING too (a failed hole must not read zeroes later),
 * and for a refused write the page is write-protected there (so the write
 * does not land).  The kernel's UNREGISTER wakes the waiters of a range
 * registered for MISSING faults, under the mmap lock but before we can
 * register the page again: such a thread may map a zero page (a hole) or
 * the unserved page in that window.  No ordering avoids it (re-registering
 * without MISSING is a no-op); POISON has no window.  The wake comes last
 * whatever failed before it: a thread refaulting is better than one asleep.
 */
static int move_to_sigbus(struct uffdm *u, struct uffdm *sigbus, char *p, size_t len, bool wp)
{
	unsigned int keep = wp ? UFFDM_REGISTER_WP : 0;
	int ret, woke;

	ret = uffdm_range_unregister(u, p, len);
	if (!ret)
		ret = uffdm_range_register(sigbus, p, len, UFFDM_REGISTER_MISSING | keep, NULL);
	if (!ret && wp)
		ret = uffdm_writeprotect(sigbus, p, len, true);
	woke = uffdm_wake(u, p, len);
	return ret ? ret : woke;
}

/* fail_page(): the page is left to the owner of its mm (owner.c), not woken. */
#define TO_OWNER	1

/*
 * One page fails for good.  POISON (6.6+) where it can: a page not mapped.
 * A mapped page (a refused write, or a deferred WP page completed with an
 * error) and every page without POISON: a fence in this process's view
 * (fence.c), no window.  Another process's view cannot be fenced from
 * here, and moving the page to a SIGBUS descriptor has a window (a hole
 * read as zeroes, a refused write landing): the page is left to that
 * process, asleep, and its owner fences it (TO_OWNER).  With EVENT_UNMAP
 * (no fence) a local view's page still moves, with its window.
 */
static int fail_page(struct svc *s, struct uffdm_region *r, char *p, bool wp)
{
	const struct ps_server *h = s->c->srv;
	int ret;

	if (h->poison && !wp) {
		ret = poison_hole(s, p, r->page);
		if (ret != -EEXIST)
			return ret;
		wp = true;	/* mapped: only a write faults on it */
	}
	if (uffdm__region_local(r) && uffdm__fence_usable(h->u))
		return uffdm__fence(h->u, p, r->page);
	if (!uffdm__region_local(r) && r->tail)
		return TO_OWNER;
	if (r->sigbus)
		return move_to_sigbus(h->u, r->sigbus, p, r->page, wp);
	/*
	 * A mapped page of another process's view whose states that process
	 * does not share: nothing here can refuse a write.  Woken (a reader of
	 * a page mapped meanwhile goes on), a writer faults once more and then
	 * sleeps (see refused()) until that process fails the page:
	 * uffdm_range_fail(3) there fences it and wakes it.
	 */
	uffdm_wake(h->u, p, r->page);
	return -EOPNOTSUPP;
}

/* A page of r that failed: refused for good, or (see fail_page()) not. */
static bool refused(const struct uffdm_region *r, const struct ps_server *h, bool wp)
{
	return !wp || r->sigbus || (uffdm__region_local(r) && uffdm__fence_usable(h->u));
}

static void settle(struct uffdm_region *r, size_t off, size_t len, const uint32_t *gen,
		   unsigned int to, bool final_too);

/*
 * The pages (of generation gen[i]) cannot be made right: their threads
 * get SIGBUS, now and on every later touch.  Each ends FAILED, or
 * UFFDM_PS_OWNER when its owner must fence it; the owner is asked once
 * the states say which (final_too: even from FILLED, see settle()).
 */
static int fail_run(struct svc *s, struct uffdm_region *r, size_t off, size_t len, bool wp,
		    const uint32_t *gen, bool final_too)
{
	uint64_t t0 = step_start(s);
	bool ask = false;
	int ret = 0;

	for (size_t o = off, i = 0; o < off + len; o += r->page, i++) {
		int one = fail_page(s, r, uaddr(r, o), wp);

		settle(r, o, r->page, &gen[i], one == TO_OWNER ? UFFDM_PS_OWNER : UFFDM_PAGE_FAILED,
		       final_too);
		ask |= one == TO_OWNER;
		if (!ret && one != TO_OWNER)
			ret = one;
	}
	if (ask)
		uffdm__owner_ask(r);
	time_ioctl(s, t0);
	count(s, C_FAILED, len / r->page);
	return ret;
}

/*
 * Pages [off, off+len) of generation gen[i] move to `to` unless they are
 * already final (or, with final_too, even from FILLED); a page whose
 * generation moved on is left alone.
 */
static void settle(struct uffdm_region *r, size_t off, size_t len, const uint32_t *gen,
		   unsigned int to, bool final_too)
{
	for (size_t o = off, i = 0; o < off + len; o += r->page, i++) {
		uint32_t old = __atomic_load_n(word(r, o), __ATOMIC_ACQUIRE);

		while (GEN(old) == gen[i] && PS(old) != to && PS(old) != UFFDM_PAGE_EMPTY &&
		       (final_too || (PS(old) != UFFDM_PAGE_FILLED &&
				      PS(old) != UFFDM_PAGE_FAILED)) &&
		       !cas(word(r, o), &old, gen[i] | to))
			;
	}
}

void (*uffdm__test_after_fill)(struct uffdm_region *r, size_t off, size_t len);

/* Page i of the run at off is still filled in generation gen[i]. */
static bool current(const struct uffdm_region *r, size_t off, size_t i, const uint32_t *gen)
{
	uint32_t w = __atomic_load_n(word(r, off + i * r->page), __ATOMIC_ACQUIRE);

	return w == (gen[i] | UFFDM_PAGE_FILLED);
}

/*
 * Map the pages of [off, off+len) still filled in their generation gen[i]
 * and only wake the others.  A zap or discard that started a new
 * generation since they were filled has emptied and unmapped them; mapping
 * one again would let threads write a page the new generation's fill then
 * overwrites, or skip that fill.  The generation is checked under the read
 * side of zap_lock, which zap and discard hold for writing across the
 * change and the unmap; a page it emptied is only woken, and its threads
 * fault again, into the new generation.  Pages mapped, or the kernel's
 * error.
 */
static ssize_t map_current(struct svc *s, struct uffdm_region *r, size_t off, size_t len,
			   const uint32_t *gen)
{
	struct uffdm *u = svc_u(s);
	size_t n = len / r->page, mapped = 0;
	int ret = 0;

	/*
	 * A zap holding it may wait for its REMOVE event to be read: read
	 * pending events as on EAGAIN (faults read meanwhile are parked).
	 */
	while (pthread_rwlock_tryrdlock(&r->zap_lock))
		svc_drain(s);
	for (size_t i = 0, j; i < n && !ret; i = j) {
		bool cur = current(r, off, i, gen);

		for (j = i + 1; j < n && current(r, off, j, gen) == cur; j++)
			;
		if (!cur) {
			uffdm_wake(u, uaddr(r, off + i * r->page), (j - i) * r->page);
			continue;
		}
		ret = map_run(s, r, off + i * r->page, (j - i) * r->page, &mapped);
	}
	pthread_rwlock_unlock(&r->zap_lock);
	return ret ? ret : (ssize_t)mapped;
}

/*
 * An owned run is right in the backing view: filled, then mapped (or
 * failed when mapping fails).  Filled first: the content is final once the
 * filler is done, and a thread woken by the CONTINUE then finds its page
 * filled.  A message read in between maps the page itself (CONTINUE on a
 * mapped page is EEXIST, which wakes).
 */
static int finish_run(struct svc *s, struct uffdm_region *r, size_t off, size_t len,
		      const uint32_t *gen, bool wp)
{
	ssize_t done;

	settle(r, off, len, gen, UFFDM_PAGE_FILLED, false);
	if (uffdm__test_after_fill)
		uffdm__test_after_fill(r, off, len);
	done = wp ? unprotect(s, r, off, len) : map_current(s, r, off, len, gen);
	if (done < 0) {
		fail_run(s, r, off, len, wp, gen, true);
		return (int)done;
	}
	count(s, C_RESOLVED, wp ? len / r->page : (size_t)done);
	return 0;
}

/* We own the page (EMPTY -> FILLING): the one callback of this generation. */
static void fill_by_callback(struct svc *s, struct uffdm_region *r, size_t off,
			     const struct uffdm_event *ev, uint32_t gen)
{
	const struct ps_server *h = s->c->srv;
	bool wp = ev->kind == UFFDM_EVENT_WP;
	uint64_t t0 = step_start(s);
	uint32_t old;
	int ret;

	ret = h->fault(h->arg, r, off, ev);
	step_time(s, C_CB_NS, t0);
	count(s, C_FILLS, 1);
	if (ret == UFFDM_FILL_LATER) {
		count(s, C_DEFERRED, 1);
		/* Fails harmlessly if completed or discarded meanwhile. */
		old = gen | UFFDM_PAGE_FILLING;
		cas(word(r, off), &old, gen | UFFDM_PAGE_DEFERRED);
		return;
	}
	if (ret) {
		fail_run(s, r, off, r->page, wp, &gen, false);
		return;
	}
	finish_run(s, r, off, r->page, &gen, wp);
}

/* A fault message for a page of r: the state decides who does what. */
static void serve_page(struct svc *sv, struct uffdm_region *r, const struct uffdm_event *ev)
{
	size_t off = (size_t)(ev->addr - r->uaddr) & ~(r->page - 1);
	bool wp = ev->kind == UFFDM_EVENT_WP;
	uint32_t *w = word(r, off), old, gen;
	struct svc *s = sv;
	ssize_t done;

	old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	for (;;) {
		switch (PS(old)) {
		case UFFDM_PAGE_EMPTY:
			if (!cas(w, &old, GEN(old) | UFFDM_PAGE_FILLING))
				continue;
			fill_by_callback(s, r, off, ev, GEN(old));
			return;
		case UFFDM_PAGE_FILLED:
			/*
			 * A late duplicate (or unmapped behind our back): map or
			 * unprotect, no callback; map_current() only wakes if a
			 * zap made the page empty meanwhile.
			 */
			count(s, C_DUP, 1);
			gen = GEN(old);
			done = wp ? unprotect(s, r, off, r->page) : map_current(s, r, off, r->page, &gen);
			if (done < 0)
				fail_run(s, r, off, r->page, wp, &gen, true);
			else
				count(s, C_RESOLVED, wp ? 1 : (size_t)done);
			return;
		case UFFDM_PAGE_FAILED:
			/* Queued before the failure; the failure woke it into SIGBUS already. */
			count(s, C_DUP, 1);
			if (refused(r, s->c->srv, wp))
				uffdm_wake(svc_u(s), uaddr(r, off), r->page);
			return;
		default:
			/*
			 * Filling, deferred or completing: the owner's end wakes
			 * this thread too, a write fault included: unprotecting
			 * wakes it, and so does a completion's CONTINUE (EEXIST on
			 * the mapped page: woken, it refaults into FILLED) or a
			 * failure.  It waits asleep; no refault loop.
			 */
			count(s, C_DUP, 1);
			return;
		}
	}
}

/* Shared states only: what the VMM's watchdog sees of its server (internal.h). */
static void tally(struct uffdm_region *r, size_t offset)
{
	uint64_t asked = 0;

	if (!r->tail)
		return;
	__atomic_add_fetch((uint64_t *)((char *)r->tail + offset), 1, __ATOMIC_RELEASE);
	if (offset != offsetof(struct uffdm_state_tail, begun) &&
	    !__atomic_load_n(&r->tail->first_ns, __ATOMIC_RELAXED))
		__atomic_compare_exchange_n(&r->tail->first_ns, &asked, uffdm__now_ns(), false,
					    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/*
 * Work in hand that no count shows yet - fault messages read and not yet
 * served, faults parked while pages are completed - held as one fault
 * begun on r, and given back as begun, never as ended: it is no progress.
 * begun >= ended holds at every instant, so the watchdog's difference of
 * the two (ended loaded first) never underflows.
 */
void uffdm__ps_hold(struct uffdm_region *r, bool hold)
{
	if (r->tail)
		__atomic_add_fetch(&r->tail->begun, hold ? 1 : UINT64_MAX, __ATOMIC_RELEASE);
}

void uffdm__ps_serve(const struct ps_caller *c, struct uffdm_region *r,
		     const struct uffdm_event *ev)
{
	struct svc s;

	tally(r, offsetof(struct uffdm_state_tail, begun));
	svc_init(&s, c);
	serve_page(&s, r, ev);
	svc_end(&s);
	tally(r, offsetof(struct uffdm_state_tail, ended));
}

/*
 * One try at failing the outside fault at p, as if its page were len long
 * (-EINVAL: it is not), as fail_page() fails a page: POISON for a hole;
 * what POISON cannot take (a refused write; every page without POISON) a
 * fence in this process, else the owner of that mm through owner's
 * states (TO_OWNER), else the SIGBUS descriptor, with its window.
 */
static int fail_outside_as(struct svc *s, struct uffdm *sigbus, struct uffdm_region *owner,
			   char *p, size_t len, bool wp)
{
	const struct ps_server *h = s->c->srv;
	int ret;

	if (h->poison && !wp) {
		ret = poison_hole(s, p, len);
		if (ret != -EEXIST)
			return ret;
	}
	if (!h->u->adopted && uffdm__fence_usable(h->u))
		return uffdm__fence(h->u, p, len);
	if (owner)
		return TO_OWNER;
	return sigbus ? move_to_sigbus(h->u, sigbus, p, len, wp) : -EOPNOTSUPP;
}

/*
 * A fault outside every region.  The page size is not known: each is tried
 * until one fits the mapping.  Left to the owner, the thread sleeps until
 * the owner fences the page (a full set of slots: woken, it faults again).
 */
void uffdm__ps_fail_outside(const struct ps_caller *c, struct uffdm *sigbus,
			    struct uffdm_region *owner, const struct uffdm_event *ev)
{
	static const size_t sizes[] = { 4096, 2UL << 20, 1UL << 30 };
	bool wp = ev->kind == UFFDM_EVENT_WP;
	struct svc s;
	int ret = -EINVAL;

	svc_init(&s, c);
	for (size_t i = 0; i < UFFDM_ARRAY_SIZE(sizes) && ret == -EINVAL; i++) {
		char *p = (char *)(uintptr_t)(ev->addr & ~(uint64_t)(sizes[i] - 1));

		ret = fail_outside_as(&s, sigbus, owner, p, sizes[i], wp);
	}
	if (ret == TO_OWNER && uffdm__owner_post(owner, ev->addr & ~4095ull))
		ret = 0;
	/*
	 * Nothing here can fail it (a refused write of another mm whose states
	 * are not shared): woken, it would only fault again, for ever.  It
	 * sleeps until that process's uffdm_range_fail(3), as a refused write
	 * inside a region does.
	 */
	else if (ret && ret != -EOPNOTSUPP)
		uffdm_wake(c->srv->u, (void *)(uintptr_t)(ev->addr & ~4095ull), 4096);
	svc_end(&s);
}

bool uffdm__region_busy(const struct uffdm_region *r)
{
	for (size_t i = 0; i < r->size / r->page; i++) {
		unsigned int st = PS(__atomic_load_n(&r->pstate[i], __ATOMIC_ACQUIRE));

		if (st == UFFDM_PAGE_FILLING || st == UFFDM_PAGE_DEFERRED || st == PS_COMPLETING)
			return true;
	}
	return false;
}

int uffdm__ps_check_span(const struct uffdm_region *r, size_t off, size_t len)
{
	if (!r || !r->pstate || !len || off % r->page || len % r->page)
		return -EINVAL;
	if (off > r->size || len > r->size - off)
		return -ERANGE;
	return 0;
}

/* Undo the first n pages taken for completion: back to what they were. */
static void untake(struct uffdm_region *r, size_t off, size_t n, const uint32_t *was)
{
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(word(r, off + i * r->page), was[i], __ATOMIC_RELEASE);
}

/*
 * Take up to 64 pages for completion: each must be owned (filling or
 * deferred); all or none move to COMPLETING, so a refused call changes
 * nothing and two completers cannot both map a page.
 */
static int take(struct uffdm_region *r, size_t off, size_t n, uint32_t *gen)
{
	uint32_t was[64];

	for (size_t i = 0; i < n; i++) {
		uint32_t *w = word(r, off + i * r->page), old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		int err = 0;

		do {
			switch (PS(old)) {
			case UFFDM_PAGE_FILLING:
			case UFFDM_PAGE_DEFERRED:
				break;
			case UFFDM_PAGE_EMPTY:
				err = -EINVAL;
				break;
			default:	/* filled, failed, or another completion has it */
				err = -EALREADY;
				break;
			}
		} while (!err && !cas(w, &old, GEN(old) | PS_COMPLETING));
		if (err) {
			untake(r, off, i, was);
			return err;
		}
		was[i] = old;
		gen[i] = GEN(old);
	}
	return 0;
}

/* Pages whose generation moved on while they were taken: not ours to mark. */
static bool stale(const struct uffdm_region *r, size_t off, size_t n, const uint32_t *gen)
{
	for (size_t i = 0; i < n; i++)
		if (GEN(__atomic_load_n(word(r, off + i * r->page), __ATOMIC_ACQUIRE)) != gen[i])
			return true;
	return false;
}

static int complete_chunk(struct svc *s, struct uffdm_region *r, size_t off, size_t n, int err)
{
	uint32_t gen[64];
	int ret = take(r, off, n, gen);

	if (ret)
		return ret;
	count(s, C_COMPLETED, n);
	if (err) {
		fail_run(s, r, off, n * r->page, false, gen, false);
	} else {
		ret = finish_run(s, r, off, n * r->page, gen, false);
	}
	return !ret && stale(r, off, n, gen) ? -ESTALE : ret;
}

/* In chunks of 64 pages: all-or-nothing holds per chunk, checked whole first. */
int uffdm__ps_complete(const struct ps_caller *c, struct uffdm_region *r, size_t off,
		       size_t len, int err)
{
	struct svc s;
	int ret = uffdm__ps_check_span(r, off, len);

	if (ret)
		return ret;
	if (err > 0)
		return -EINVAL;
	for (size_t o = off; o < off + len; o += r->page) {
		unsigned int st = PS(__atomic_load_n(word(r, o), __ATOMIC_ACQUIRE));

		if (st == UFFDM_PAGE_EMPTY)
			return -EINVAL;
		if (st == UFFDM_PAGE_FILLED || st == UFFDM_PAGE_FAILED || st == PS_COMPLETING)
			return -EALREADY;
	}
	/* faults read while completing are parked, then woken: in hand till then */
	uffdm__ps_hold(r, true);
	svc_init(&s, c);
	for (size_t o = off; o < off + len && !ret; o += 64 * r->page) {
		size_t n = (off + len - o) / r->page;

		ret = complete_chunk(&s, r, o, n < 64 ? n : 64, err);
	}
	svc_end(&s);
	uffdm__ps_hold(r, false);
	tally(r, offsetof(struct uffdm_state_tail, completed));
	return ret;
}

static void pause_briefly(void)
{
	struct timespec ts = { 0, 20000 };

	nanosleep(&ts, NULL);
}

int uffdm__ps_claim(struct uffdm_region *r, size_t off, bool wait)
{
	uint32_t *w, old;
	int ret = uffdm__ps_check_span(r, off, r ? r->page : 0);

	if (ret)
		return ret;
	w = word(r, off);
	old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	for (;;) {
		switch (PS(old)) {
		case UFFDM_PAGE_EMPTY:
			if (cas(w, &old, GEN(old) | UFFDM_PAGE_FILLING))
				return UFFDM_CLAIM_EMPTY;
			continue;
		case UFFDM_PAGE_DEFERRED:
			return UFFDM_CLAIM_DEFERRED;
		case UFFDM_PAGE_FILLED:
		case UFFDM_PAGE_FAILED:
			return UFFDM_CLAIM_NONE;
		default:
			if (!wait)
				return UFFDM_CLAIM_NONE;
			pause_briefly();
			old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		}
	}
}

/* Stopping: deferred pages will never be completed; fail them so no thread sleeps. */
void uffdm__ps_fail_deferred(const struct ps_caller *c, struct uffdm_region *r)
{
	struct svc s;

	svc_init(&s, c);
	for (size_t o = 0; o < r->size; o += r->page) {
		uint32_t *w = word(r, o), old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		uint32_t gen = GEN(old);

		if (PS(old) != UFFDM_PAGE_DEFERRED || !cas(w, &old, gen | PS_COMPLETING))
			continue;
		fail_run(&s, r, o, r->page, false, &gen, false);
	}
	svc_end(&s);
}

/*
 * Take the empty page at o for failing at stop, when a touch would wait on
 * it (not mapped, or write-protected); *wp: it is mapped.  Another
 * process's view is not ours to look at: only its holes, by POISON.
 */
static bool take_unserved(struct svc *s, struct uffdm_region *r, size_t o, bool local, int pm,
			  bool *wp)
{
	uint32_t *w = word(r, o), old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	bool mapped = false, prot = false;
	int ret;

	if (PS(old) != UFFDM_PAGE_EMPTY)
		return false;
	if (local)
		mapped = uffdm__page_mapped(pm, uaddr(r, o), &prot);
	if (mapped && !prot)
		return false;
	if (!cas(w, &old, GEN(old) | PS_COMPLETING))
		return false;
	*wp = mapped;
	if (local)
		return true;
	ret = poison_hole(s, uaddr(r, o), r->page);
	if (ret) {
		__atomic_store_n(w, old, __ATOMIC_RELEASE);	/* mapped: it works */
		return false;
	}
	count(s, C_UNSERVED, 1);
	settle(r, o, r->page, &(uint32_t){ GEN(old) }, UFFDM_PAGE_FAILED, false);
	return false;
}

/*
 * Stopping: no one will serve r's empty pages any more, so a later touch
 * would sleep for ever (and after uffdm_close() read stale data): they
 * fail now, as pages of a server gone.  Pages mapped writable are kept.
 * Then every waiter on r is woken: a fault queued after the threads left
 * comes back to a failed page or a mapped one.
 */
void uffdm__ps_fail_unserved(const struct ps_caller *c, struct uffdm_region *r)
{
	const struct ps_server *h = c->srv;
	bool local = uffdm__region_local(r);
	int pm = local ? uffdm__pagemap_open() : -1;
	struct svc s;

	if (!local && !h->poison)
		return;	/* nothing fails another process's page: documented */
	svc_init(&s, c);
	for (size_t o = 0; o < r->size; o += r->page) {
		uint32_t gen;
		bool wp;

		if (!take_unserved(&s, r, o, local, pm, &wp))
			continue;
		gen = GEN(__atomic_load_n(word(r, o), __ATOMIC_ACQUIRE));
		fail_page(&s, r, uaddr(r, o), wp);
		count(&s, C_UNSERVED, 1);
		settle(r, o, r->page, &gen, UFFDM_PAGE_FAILED, false);
	}
	svc_end(&s);
	if (pm >= 0)
		close(pm);
	uffdm_wake(h->u, uaddr(r, 0), r->size);
}

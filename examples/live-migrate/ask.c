// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The destination's page requests, asked from fault callbacks that must
 * never wait (libuffdminor's contract: the faults behind a callback wait for
 * it).  A request goes out at once when that cannot wait -- nothing queued
 * ahead of it, the send lock free, the socket taking the frame -- and is
 * queued otherwise, for a sender thread that may wait on a full socket or a
 * stopped peer while the callbacks go on returning.
 *
 * Each page is asked at most once until its request is forgotten (it went
 * out on a link now gone), so the queue -- a ring of npages slots, filled
 * by many threads and emptied by the sender -- cannot overflow: a page is
 * in it only in state QUEUED, which only the sender ends, after taking the
 * page out.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "lm.h"

/* requests per write: a burst of faults costs the sender one syscall */
#define ASK_BATCH 64

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Something for the sender: the wake word moves, and it is woken if asleep. */
static void kick(struct lm_asker *a)
{
	atomic_fetch_add(&a->wake, 1);
	if (atomic_load(&a->sleeping))
		futex_wake(&a->wake);
}

static bool has_work(struct lm_asker *a)
{
	uint64_t h = atomic_load(&a->head);

	return atomic_load(&a->stop) || (atomic_load(&a->up) &&
		(atomic_load(&a->flush) || atomic_load(&a->ring[h % a->npages])));
}

/* Send lock held: the link broke under this send; its pages may be asked again. */
static void broke(struct lm_asker *a, const uint64_t *pages, unsigned int n, int err)
{
	for (unsigned int k = 0; k < n; k++)
		atomic_store(&a->st[pages[k]], LM_ASK_NO);
	atomic_store(&a->up, 0);
	atomic_store(&a->flush, 0);
	/* a frame may be half out: nothing more can go on this stream */
	shutdown(a->c->fd, SHUT_RDWR);
	atomic_fetch_add(&a->breaks, 1);
	if (a->broke)
		a->broke(a->arg, err);
}

/* The oldest queued pages, at most max, taken out of the ring. */
static unsigned int take(struct lm_asker *a, uint64_t *pages, unsigned int max)
{
	unsigned int n = 0;

	while (n < max) {
		uint64_t h = atomic_load(&a->head);
		_Atomic uint64_t *slot = &a->ring[h % a->npages];
		uint64_t v = atomic_load(slot);

		/* 0: empty, or a producer between taking the slot and filling it
		 * (it kicks when it has) */
		if (!v)
			break;
		atomic_store(slot, 0);
		atomic_store(&a->head, h + 1);
		pages[n++] = v - 1;
	}
	return n;
}

/* Send lock held: what is pending, then one batch; whether there was work. */
static bool send_batch(struct lm_asker *a)
{
	uint64_t pages[ASK_BATCH];
	struct lm_req req[ASK_BATCH];
	unsigned int n;
	int ret;

	if (!atomic_load(&a->up))
		return false;
	if (atomic_exchange(&a->flush, 0) && (ret = lm_flush_locked(a->c))) {
		broke(a, NULL, 0, ret);
		return true;
	}
	n = take(a, pages, ASK_BATCH);
	if (!n)
		return false;
	for (unsigned int k = 0; k < n; k++)
		req[k] = (struct lm_req){ .page = pages[k] };
	ret = lm_send_many_locked(a->c, LM_REQ, 0, req, sizeof(req[0]), n);
	if (ret) {
		broke(a, pages, n, ret);
		return true;
	}
	for (unsigned int k = 0; k < n; k++)
		atomic_store(&a->st[pages[k]], LM_ASK_SENT);
	atomic_fetch_add(&a->batches, 1);
	return true;
}

static void *sender(void *p)
{
	struct lm_asker *a = p;

	while (!atomic_load(&a->stop)) {
		uint32_t w = atomic_load(&a->wake);
		bool worked;

		lm_conn_lock(a->c);
		worked = send_batch(a);
		lm_conn_unlock(a->c);
		if (worked)
			continue;
		/* asleep until kicked: a kick after w was read makes this return */
		atomic_store(&a->sleeping, 1);
		if (!has_work(a))
			futex_wait(&a->wake, w);
		atomic_store(&a->sleeping, 0);
	}
	return NULL;
}

int lm_asker_init(struct lm_asker *a, struct lm_conn *c, uint64_t npages,
		  void (*broke_fn)(void *arg, int err), void *arg)
{
	*a = (struct lm_asker){ .c = c, .npages = npages, .broke = broke_fn, .arg = arg };
	a->st = calloc(npages, sizeof(*a->st));
	a->ring = calloc(npages, sizeof(*a->ring));
	atomic_store(&a->up, 1);
	return a->st && a->ring ? 0 : -ENOMEM;
}

int lm_asker_start(struct lm_asker *a)
{
	int ret = lm_thread_start(&a->tid, sender, a);

	a->running = !ret;
	return ret;
}

void lm_asker_stop(struct lm_asker *a)
{
	if (!a->running)
		return;
	atomic_store(&a->stop, 1);
	kick(a);
	pthread_join(a->tid, NULL);
	a->running = false;
}

void lm_asker_free(struct lm_asker *a)
{
	lm_asker_stop(a);
	free(a->st);
	free(a->ring);
	a->st = NULL;
	a->ring = NULL;
}

/* Out now, if that cannot wait: nothing queued ahead, the lock free, the socket willing. */
static bool send_now(struct lm_asker *a, uint64_t i)
{
	struct lm_req r = { .page = i };
	int ret = -EBUSY;

	if (atomic_load(&a->head) != atomic_load(&a->tail) || !lm_conn_trylock(a->c))
		return false;
	if (atomic_load(&a->up))
		ret = lm_send_nowait_locked(a->c, LM_REQ, 0, &r, NULL, 0);
	if (ret >= 0)
		atomic_store(&a->st[i], LM_ASK_SENT);
	if (ret == 1)
		atomic_store(&a->flush, 1);	/* its tail: the sender writes it */
	lm_conn_unlock(a->c);
	if (ret == 1)
		kick(a);
	if (ret >= 0)
		atomic_fetch_add(&a->direct, 1);
	if (ret == -EAGAIN)
		atomic_fetch_add(&a->full, 1);
	/* any error: the sender tries, and sees the link broken if it is */
	return ret >= 0;
}

bool lm_ask(struct lm_asker *a, uint64_t i)
{
	uint8_t no = LM_ASK_NO;
	uint64_t t;

	if (!atomic_compare_exchange_strong(&a->st[i], &no, LM_ASK_QUEUED))
		return false;
	if (send_now(a, i))
		return true;
	t = atomic_fetch_add(&a->tail, 1);
	atomic_store(&a->ring[t % a->npages], i + 1);
	atomic_fetch_add(&a->queued, 1);
	kick(a);
	return true;
}

void lm_asker_down(struct lm_asker *a)
{
	atomic_store(&a->up, 0);
	/* a send under way ends (its pages' states set) before this returns */
	lm_conn_lock(a->c);
	lm_conn_unlock(a->c);
}

void lm_asker_up(struct lm_asker *a)
{
	atomic_store(&a->up, 1);
	kick(a);
}

bool lm_asker_forget(struct lm_asker *a, uint64_t i)
{
	uint8_t sent = LM_ASK_SENT;

	return atomic_compare_exchange_strong(&a->st[i], &sent, LM_ASK_NO);
}

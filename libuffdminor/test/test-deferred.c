// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Deferred completion: the callback returns UFFDM_FILL_LATER and another
 * thread completes the page (or a run) with uffdm_handler_complete(); the
 * faulting thread waits until then.  Claiming fills a page outside any
 * fault.  Completing what is not owned is refused and changes nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define QLEN 4096

/* Offsets the callback deferred, for the completer thread. */
struct queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t off[QLEN];
	unsigned int head, tail;
	bool closed;
};

struct deferred {
	struct queue q;
	struct uffdm_handler *h;
	struct uffdm_region *r;
	size_t page;
	int complete_err;	/* what the completer completes with */
	unsigned int calls;
};

static int defer(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct deferred *d = arg;

	(void)r; (void)ev;
	__atomic_fetch_add(&d->calls, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&d->q.mu);
	d->q.off[d->q.tail++ % QLEN] = off;
	pthread_cond_signal(&d->q.cv);
	pthread_mutex_unlock(&d->q.mu);
	return UFFDM_FILL_LATER;
}

/* The "I/O completion" thread: fill each deferred page, then complete it. */
static void *completer(void *arg)
{
	struct deferred *d = arg;

	for (;;) {
		size_t off;

		pthread_mutex_lock(&d->q.mu);
		while (d->q.head == d->q.tail && !d->q.closed)
			pthread_cond_wait(&d->q.cv, &d->q.mu);
		if (d->q.head == d->q.tail) {
			pthread_mutex_unlock(&d->q.mu);
			return NULL;
		}
		off = d->q.off[d->q.head++ % QLEN];
		pthread_mutex_unlock(&d->q.mu);
		fill_page((char *)uffdm_region_backing(d->r) + off, d->page, off / d->page);
		if (uffdm_handler_complete(d->h, d->r, off, d->page, d->complete_err))
			abort();
	}
}

static void close_queue(struct deferred *d)
{
	pthread_mutex_lock(&d->q.mu);
	d->q.closed = true;
	pthread_cond_broadcast(&d->q.cv);
	pthread_mutex_unlock(&d->q.mu);
}

static void deferred_init(struct deferred *d)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->q.mu, NULL);
	pthread_cond_init(&d->q.cv, NULL);
}

struct reader {
	struct deferred *d;
	size_t first, n;
	size_t bad;
	pthread_t pt;
};

static void *read_pages(void *arg)
{
	struct reader *x = arg;
	const char *view = uffdm_region_view(x->d->r);

	for (size_t i = x->first; i < x->first + x->n; i++)
		x->bad += !check_page(view + i * x->d->page, x->d->page, i);
	return NULL;
}

/* 4 threads read 64 pages each; every page is completed by another thread. */
static void test_deferred(void **state)
{
	const struct mem_case *mc = need_case(state);
	size_t npages = mc->backing == UFFDM_SHMEM ? 256 : 8;
	struct uffdm *u = open_uffd(0, 0);
	struct deferred d;
	struct uffdm_handler_config cfg = { .threads = 2, .fault = defer, .arg = &d };
	struct reader x[4];
	pthread_t ct;
	struct uffdm_stats st;
	size_t bad = 0;

	deferred_init(&d);
	d.r = registered_region(u, mc, npages, 0);
	d.page = uffdm_region_page_size(d.r);
	assert_int_equal(uffdm_handler_start(&d.h, u, d.r, &cfg), 0);
	assert_int_equal(pthread_create(&ct, NULL, completer, &d), 0);
	for (int i = 0; i < 4; i++) {
		x[i] = (struct reader){ .d = &d, .first = i * npages / 4, .n = npages / 4 };
		assert_int_equal(pthread_create(&x[i].pt, NULL, read_pages, &x[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(x[i].pt, NULL);
		bad += x[i].bad;
	}
	close_queue(&d);
	pthread_join(ct, NULL);
	assert_int_equal(uffdm_handler_stop(d.h, &st), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(d.calls, npages);
	assert_int_equal(st.deferred, npages);
	assert_int_equal(st.completed, npages);
	assert_int_equal(st.failed, 0);
	put_uffd(u);
	put_region(d.r);
}

/* Wait (bounded) until the page at off is in state want. */
static void wait_state(struct uffdm_region *r, size_t off, int want)
{
	for (int i = 0; i < 20000 && uffdm_region_page_state(r, off) != want; i++)
		usleep(500);
	assert_int_equal(uffdm_region_page_state(r, off), want);
}

struct toucher {
	volatile char *p;
	char got;
	pthread_t pt;
};

static void *touch(void *arg)
{
	struct toucher *t = arg;

	t->got = *t->p;
	return NULL;
}

/* Four faults deferred, one call completes the run; refusals change nothing. */
static void test_complete_run(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct deferred d;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = defer, .arg = &d };
	struct toucher t[4];
	char *view, *back;

	deferred_init(&d);
	d.r = registered_region(u, mc, 6, 0);
	d.page = uffdm_region_page_size(d.r);
	view = uffdm_region_view(d.r);
	back = uffdm_region_backing(d.r);
	assert_int_equal(uffdm_handler_start(&d.h, u, d.r, &cfg), 0);
	/* Refused: not deferred, misaligned, out of range, a positive error. */
	assert_int_equal(uffdm_handler_complete(d.h, d.r, 0, d.page, 0), -EINVAL);
	assert_int_equal(uffdm_handler_complete(d.h, d.r, 1, d.page, 0), -EINVAL);
	assert_int_equal(uffdm_handler_complete(d.h, d.r, 6 * d.page, d.page, 0), -ERANGE);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct toucher){ .p = view + (size_t)(i + 1) * d.page };
		assert_int_equal(pthread_create(&t[i].pt, NULL, touch, &t[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		wait_state(d.r, (size_t)(i + 1) * d.page, UFFDM_PAGE_DEFERRED);
	assert_int_equal(uffdm_handler_complete(d.h, d.r, d.page, d.page, 1), -EINVAL);
	/* Page 0 is empty: the whole run is refused and the deferred pages stay so. */
	assert_int_equal(uffdm_handler_complete(d.h, d.r, 0, 5 * d.page, 0), -EINVAL);
	assert_int_equal(uffdm_region_page_state(d.r, d.page), UFFDM_PAGE_DEFERRED);
	assert_int_equal(uffdm_handler_claim(d.h, d.r, d.page, 0), UFFDM_CLAIM_DEFERRED);
	for (int i = 1; i <= 4; i++)
		back[(size_t)i * d.page] = (char)('0' + i);
	assert_int_equal(uffdm_handler_complete(d.h, d.r, d.page, 4 * d.page, 0), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i].pt, NULL);
		assert_int_equal(t[i].got, '1' + i);
	}
	/* Twice: refused. */
	assert_int_equal(uffdm_handler_complete(d.h, d.r, d.page, d.page, 0), -EALREADY);
	/* Claimed and completed without a fault: mapped, so touching does not fault. */
	assert_int_equal(uffdm_handler_claim(d.h, d.r, 5 * d.page, UFFDM_CLAIM_WAIT),
			 UFFDM_CLAIM_EMPTY);
	assert_int_equal(uffdm_handler_claim(d.h, d.r, 5 * d.page, 0), UFFDM_CLAIM_NONE);
	back[5 * d.page] = 'c';
	assert_int_equal(uffdm_handler_complete(d.h, d.r, 5 * d.page, d.page, 0), 0);
	assert_int_equal(((volatile char *)view)[5 * d.page], 'c');
	assert_int_equal(uffdm_handler_claim(d.h, d.r, 5 * d.page, 0), UFFDM_CLAIM_NONE);
	assert_int_equal(uffdm_handler_stop(d.h, NULL), 0);
	assert_int_equal(d.calls, 4);
	put_uffd(u);
	put_region(d.r);
}

/* A child: a deferred page completed with an error, or left deferred at stop. */
struct die_case {
	const struct mem_case *mc;
	bool stop;	/* stop the handler instead of completing */
};

static bool die_by_stop;

static void *stopper(void *arg)
{
	struct deferred *d = arg;

	while (uffdm_region_page_state(d->r, 0) != UFFDM_PAGE_DEFERRED)
		usleep(500);
	if (die_by_stop)
		uffdm_handler_stop(d->h, NULL);
	else
		uffdm_handler_complete(d->h, d->r, 0, d->page, -EIO);
	return NULL;
}

static int fault_deferred(void *arg)
{
	static struct deferred d;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = defer, .arg = &d };
	struct die_case *dc = arg;
	struct uffdm *u;
	pthread_t pt;

	deferred_init(&d);
	die_by_stop = dc->stop;
	if (uffdm_region_create(&d.r, dc->mc->backing, case_page_size(dc->mc)) ||
	    uffdm_region_populate(d.r, 0, uffdm_region_size(d.r)) ||
	    uffdm_open(&u, 0, 0) || uffdm_region_register(u, d.r, 0, NULL) ||
	    uffdm_handler_start(&d.h, u, d.r, &cfg))
		return 3;
	d.page = uffdm_region_page_size(d.r);
	if (pthread_create(&pt, NULL, stopper, &d))
		return 3;
	return *(volatile char *)uffdm_region_view(d.r) == 0 ? 1 : 2;
}

static void expect_sigbus(const struct mem_case *mc, bool stop)
{
	struct die_case dc = { mc, stop };
	struct child_result res;

	put_region(make_region(mc, 1));	/* skip on an empty pool */
	res = run_child(fault_deferred, &dc, 20);
	if (res.signal == SIGALRM)
		fail_msg("faulting thread hung: the watchdog fired");
	if (res.exited)
		fail_msg("child exited with status %d instead of dying of SIGBUS", res.status);
	assert_int_equal(res.signal, SIGBUS);
}

static void test_complete_error(void **state)
{
	expect_sigbus(need_case(state), false);
}

/* Documented: a page still deferred at uffdm_handler_stop() fails (SIGBUS). */
static void test_stop_deferred(void **state)
{
	expect_sigbus(need_case(state), true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_deferred),
		CROSS(test_complete_run),
		CROSS(test_complete_error),
		CROSS(test_stop_deferred),
	};

	return cmocka_run_group_tests_name("deferred", tests, NULL, NULL);
}

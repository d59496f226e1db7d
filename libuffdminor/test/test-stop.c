// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm_handler_stop with faults queued: the documented behaviour is that
 * they are served (the callback runs for them) before the threads leave;
 * none is left asleep, none sees the unserved page.  Before 0.2 those
 * threads slept until uffdm_close and then read stale data.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NT 8

struct stop_ctx {
	struct uffdm_region *r;
	size_t page;
	int in_callback;
};

static int slow_fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct stop_ctx *c = arg;

	(void)ev;
	if (!off) {	/* hold the only handler thread while the others queue up */
		__atomic_store_n(&c->in_callback, 1, __ATOMIC_RELEASE);
		usleep(100 * 1000);
	}
	fill_page((char *)uffdm_region_backing(r) + off, c->page, off / c->page);
	return 0;
}

struct toucher {
	struct stop_ctx *c;
	size_t i;
	int ok;
	pthread_t pt;
};

static void *touch(void *arg)
{
	struct toucher *t = arg;

	t->ok = check_page((char *)uffdm_region_view(t->c->r) + t->i * t->c->page, t->c->page,
			   t->i);
	return NULL;
}

static int stop_with_queue(void *arg)
{
	const struct mem_case *mc = arg;
	static struct stop_ctx c;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = slow_fill, .arg = &c };
	struct toucher t[NT];
	struct uffdm_handler *h;
	struct uffdm_stats st;
	struct uffdm *u;

	c.page = case_page_size(mc);
	if (uffdm_region_create(&c.r, mc->backing, NT * c.page) ||
	    uffdm_region_populate(c.r, 0, NT * c.page) || uffdm_open(&u, 0, 0) ||
	    uffdm_region_register(u, c.r, 0, NULL) || uffdm_handler_start(&h, u, c.r, &cfg))
		return 3;
	t[0] = (struct toucher){ .c = &c, .i = 0 };
	pthread_create(&t[0].pt, NULL, touch, &t[0]);
	while (!__atomic_load_n(&c.in_callback, __ATOMIC_ACQUIRE))
		usleep(1000);
	for (size_t i = 1; i < NT; i++) {
		t[i] = (struct toucher){ .c = &c, .i = i };
		pthread_create(&t[i].pt, NULL, touch, &t[i]);
	}
	usleep(30 * 1000);	/* their faults are queued behind page 0's */
	if (uffdm_handler_stop(h, &st))
		return 3;
	for (size_t i = 0; i < NT; i++) {
		pthread_join(t[i].pt, NULL);
		if (!t[i].ok)
			return 4;
	}
	return st.fills == NT ? 0 : 5;
}

static void test_stop_serves_queue(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct child_result res;

	put_region(make_region(mc, NT));	/* skip on an empty pool */
	res = run_child(stop_with_queue, (void *)mc, 20);
	if (res.signal == SIGALRM)
		fail_msg("a thread with a queued fault slept through the stop: the watchdog fired");
	if (!res.exited || res.status)
		fail_msg("status %d signal %d (4: a thread read an unserved page, 5: fills != %d)",
			 res.status, res.signal, NT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_stop_serves_queue),
	};

	return cmocka_run_group_tests_name("stop", tests, NULL, NULL);
}

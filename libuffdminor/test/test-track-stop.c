// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Collecting and stopping with writers faulting and nobody pausing them
 * (a caller that ignores uffdm_tracker_needs_quiesce, or tears down in a
 * hurry): no hang, and the writers run on as plain memory after stop.
 */
#include <pthread.h>
#include <unistd.h>

#include "common.h"

struct writer {
	uint8_t *view;
	size_t page, npages;
	int quit;
	uint64_t after;		/* writes seen after stop */
	int stopped;
};

static void *writer(void *p)
{
	struct writer *w = p;

	for (uint64_t k = 0; !__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE); k++) {
		__atomic_fetch_add(&w->view[(k * 7 % w->npages) * w->page], 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&w->stopped, __ATOMIC_ACQUIRE))
			__atomic_fetch_add(&w->after, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void test_track_stop_under_writes(void **state)
{
	const struct track_case *c = *state;
	size_t npages = c->mc->backing == UFFDM_SHMEM ? 256 : 4;
	struct uffdm_region *r = make_region(c->mc, npages);
	struct writer wr = { .view = uffdm_region_view(r), .page = uffdm_region_page_size(r),
			     .npages = npages };
	struct uffdm_tracker *t;
	pthread_t tid[2];
	uint8_t bm[32];

	t = start_tracker(c, r);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&tid[i], NULL, writer, &wr), 0);
	for (int i = 0; i < 5; i++) {
		usleep(2000);
		assert_int_equal(uffdm_tracker_collect(t, bm, 0), 0);
	}
	uffdm_tracker_stop(t);
	__atomic_store_n(&wr.stopped, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 200 && !__atomic_load_n(&wr.after, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	__atomic_store_n(&wr.quit, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(tid[i], NULL);
	assert_true(wr.after > 0);	/* nobody left asleep on a protected page */
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_ROWS(test_track_stop_under_writes),
	};

	alarm(120);	/* a hang fails, never waits */
	return cmocka_run_group_tests_name("track-stop", tests, NULL, NULL);
}

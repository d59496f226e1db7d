// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * No write is ever missing from a collection, under writers that race:
 * three threads write a hot set and all of them write page 0 (two writers
 * on one page queue two uffd-wp faults; the first unprotect wakes both,
 * and the second's late unprotect must not open a page with no bit).
 * Some rounds collect right after resuming, with faults still in flight.
 * Every page whose bytes changed since the last look must have its bit.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define WRITERS 3

struct writers {
	uint8_t *view;
	size_t page, npages;
	int pause, parked, quit;
	pthread_t tid[WRITERS];
};

struct writer_arg {
	struct writers *w;
	unsigned int id;
};

static void *writer(void *p)
{
	struct writer_arg *a = p;
	struct writers *w = a->w;
	uint64_t x = 0x9e3779b97f4a7c15ull * (a->id + 1);
	size_t hot = w->npages * 3 / 10 + 1;

	while (!__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE)) {
		size_t pg;

		if (__atomic_load_n(&w->pause, __ATOMIC_ACQUIRE)) {
			__atomic_fetch_add(&w->parked, 1, __ATOMIC_ACQ_REL);
			while (__atomic_load_n(&w->pause, __ATOMIC_ACQUIRE) &&
			       !__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE))
				usleep(50);
			__atomic_fetch_sub(&w->parked, 1, __ATOMIC_ACQ_REL);
			continue;
		}
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		pg = x % 10 == 0 ? 0 : x % 10 < 9 ? x / 10 % hot : x / 10 % w->npages;
		__atomic_fetch_add((uint64_t *)(w->view + pg * w->page) + a->id, 1,
				   __ATOMIC_RELAXED);
	}
	return NULL;
}

static void pause_writers(struct writers *w)
{
	__atomic_store_n(&w->pause, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&w->parked, __ATOMIC_ACQUIRE) < WRITERS)
		usleep(20);
}

static void resume_writers(struct writers *w)
{
	__atomic_store_n(&w->pause, 0, __ATOMIC_RELEASE);
}

static uint64_t check_round(struct uffdm_tracker *t, struct uffdm_region *r, uint8_t *snap,
			    unsigned int flags)
{
	uint8_t *view = uffdm_region_view(r), bm[1024] = { 0 };
	size_t page = uffdm_region_page_size(r), n = uffdm_region_size(r) / page;
	uint64_t changed = 0;

	assert_true(n <= sizeof(bm) * 8);
	assert_int_equal(uffdm_tracker_collect(t, bm, flags), 0);
	for (size_t p = 0; p < n; p++) {
		if (!memcmp(view + p * page, snap + p * page, page))
			continue;
		changed++;
		if (!bit_is_set(bm, p))
			fail_msg("%s: page %zu was written but its bit is clear",
				 uffdm_track_name(uffdm_tracker_kind(t)), p);
	}
	memcpy(snap, view, n * page);
	return changed;
}

static void test_track_no_lost_write(void **state)
{
	const struct track_case *c = *state;
	size_t npages = c->mc->backing == UFFDM_SHMEM ? 1024 : 4;
	struct uffdm_region *r = make_region(c->mc, npages);
	struct writers w = { .view = uffdm_region_view(r), .page = uffdm_region_page_size(r),
			     .npages = npages };
	struct writer_arg args[WRITERS];
	struct uffdm_tracker *t;
	uint64_t changed = 0;
	uint8_t *snap;

	memset(w.view, 0, npages * w.page);	/* every page mapped before tracking */
	t = start_tracker(c, r);
	snap = malloc(npages * w.page);
	assert_non_null(snap);
	memcpy(snap, w.view, npages * w.page);
	for (unsigned int i = 0; i < WRITERS; i++) {
		args[i] = (struct writer_arg){ &w, i };
		assert_int_equal(pthread_create(&w.tid[i], NULL, writer, &args[i]), 0);
	}
	for (int round = 0; round < 100; round++) {
		usleep(round % 4 * 400);
		pause_writers(&w);
		changed += check_round(t, r, snap, 0);
		resume_writers(&w);
	}
	pause_writers(&w);
	changed += check_round(t, r, snap, UFFDM_TRACK_LAST);
	__atomic_store_n(&w.quit, 1, __ATOMIC_RELEASE);
	for (unsigned int i = 0; i < WRITERS; i++)
		pthread_join(w.tid[i], NULL);
	uffdm_tracker_stop(t);
	print_message("# %s on %s: %llu page-rounds changed\n", uffdm_track_name(c->kind),
		      c->mc->name, (unsigned long long)changed);
	assert_true(changed > 0);
	free(snap);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_ROWS(test_track_no_lost_write),
	};

	alarm(300);	/* a hang fails, never waits */
	return cmocka_run_group_tests_name("track-lost", tests, NULL, NULL);
}

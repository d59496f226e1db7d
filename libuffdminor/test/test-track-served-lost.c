// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * No write to memory a handler serves is missing from the collections,
 * while its pages are still being served: three writers start on a region
 * with nothing mapped (their first writes fault, the handler fills) and
 * write on while rounds are collected; they keep running during the
 * collection where the tracker allows it (pagemap-scan) and are paused
 * around it only where it needs that (soft-dirty).
 *
 * Each write is bracketed by the count of collections begun before and
 * after it (b, e): collection b-1 may have begun before the write, and
 * collection e begins after it ended, so page's bit must be set in one of
 * the rounds b-1 .. e.  Every write is checked, logged once per page and b
 * (a later write of that page and b asks less).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define WRITERS 3
#define ROUNDS 100

struct wlog {
	uint32_t page, b, e;
};

struct writers {
	struct served *s;
	uint8_t *view;
	size_t page, npages;
	bool quiesce;
	unsigned int begun;	/* collections begun */
	int pause, parked, quit;
	pthread_t tid[WRITERS];
};

struct writer {
	struct writers *w;
	unsigned int id;
	int32_t *last_b;	/* per page: b of its last logged write */
	struct wlog *log;
	size_t n, cap;
};

static void park(struct writers *w)
{
	__atomic_fetch_add(&w->parked, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&w->pause, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE))
		usleep(50);
	__atomic_fetch_sub(&w->parked, 1, __ATOMIC_ACQ_REL);
}

static void log_write(struct writer *a, uint32_t pg, uint32_t b, uint32_t e)
{
	if (a->last_b[pg] == (int32_t)b || a->n == a->cap)
		return;
	a->last_b[pg] = (int32_t)b;
	a->log[a->n++] = (struct wlog){ pg, b, e };
}

static void *writer(void *p)
{
	struct writer *a = p;
	struct writers *w = a->w;
	uint64_t x = 0x9e3779b97f4a7c15ull * (a->id + 1);
	size_t hot = w->npages * 3 / 10 + 1;

	while (!__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE)) {
		uint32_t pg, b, e;

		if (__atomic_load_n(&w->pause, __ATOMIC_ACQUIRE)) {
			park(w);
			continue;
		}
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		pg = (uint32_t)(x % 10 < 8 ? x / 10 % hot : x / 10 % w->npages);
		b = __atomic_load_n(&w->begun, __ATOMIC_SEQ_CST);
		/* past the stamp's first word; a locked add orders it before e's load */
		__atomic_fetch_add((uint64_t *)(w->view + pg * w->page) + 1 + a->id, 1,
				   __ATOMIC_SEQ_CST);
		e = __atomic_load_n(&w->begun, __ATOMIC_SEQ_CST);
		log_write(a, pg, b, e);
	}
	return NULL;
}

static void pause_writers(struct writers *w)
{
	__atomic_store_n(&w->pause, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&w->parked, __ATOMIC_ACQUIRE) < WRITERS)
		usleep(20);
}

/* Collection k into its own bitmap; writers paused only where the kind needs it. */
static void collect(struct writers *w, uint8_t *bm, unsigned int k, unsigned int flags)
{
	bool pause = w->quiesce && !(flags & UFFDM_TRACK_LAST);

	if (pause)
		pause_writers(w);
	__atomic_store_n(&w->begun, k + 1, __ATOMIC_SEQ_CST);
	assert_int_equal(uffdm_tracker_collect(w->s->t, bm, flags), 0);
	if (pause)
		__atomic_store_n(&w->pause, 0, __ATOMIC_RELEASE);
}

/* Each logged write's page has its bit in a round it may have fallen in. */
static size_t check_logs(const struct writer *a, const uint8_t *bms, size_t bm_len,
			 const char *kind)
{
	size_t checked = 0;

	for (unsigned int i = 0; i < WRITERS; i++)
		for (size_t j = 0; j < a[i].n; j++) {
			const struct wlog *l = &a[i].log[j];
			unsigned int k = l->b ? l->b - 1 : 0;
			bool seen = false;

			for (; k <= l->e && k <= ROUNDS && !seen; k++)
				seen = bit_is_set(bms + k * bm_len, l->page);
			if (!seen)
				fail_msg("%s: writer %u's write to page %u between collections %u "
					 "and %u is in none of rounds %u..%u", kind, i, l->page,
					 l->b, l->e, l->b ? l->b - 1 : 0, l->e);
			checked++;
		}
	return checked;
}

static void start_writers(struct writers *w, struct writer *a)
{
	for (unsigned int i = 0; i < WRITERS; i++) {
		a[i] = (struct writer){ .w = w, .id = i, .cap = w->npages * (ROUNDS + 2) };
		a[i].last_b = malloc(w->npages * sizeof(*a[i].last_b));
		a[i].log = malloc(a[i].cap * sizeof(*a[i].log));
		assert_non_null(a[i].last_b);
		assert_non_null(a[i].log);
		memset(a[i].last_b, 0xff, w->npages * sizeof(*a[i].last_b));
		assert_int_equal(pthread_create(&w->tid[i], NULL, writer, &a[i]), 0);
	}
}

static void test_track_served_no_lost_write(void **state)
{
	const struct track_case *c = *state;
	size_t npages = c->mc->backing == UFFDM_SHMEM ? 1024 : 8;
	size_t bm_len = (npages + 7) / 8;
	struct writer a[WRITERS];
	struct writers w = { .npages = npages };
	const char *kind = uffdm_track_name(c->kind);
	struct served s;
	uint8_t *bms;

	served_start(&s, c, npages);
	w.s = &s;
	w.view = uffdm_region_view(s.r);
	w.page = uffdm_region_page_size(s.r);
	w.quiesce = uffdm_tracker_needs_quiesce(s.t);
	bms = calloc(ROUNDS + 1, bm_len);
	assert_non_null(bms);
	start_writers(&w, a);
	for (unsigned int k = 0; k < ROUNDS; k++) {
		usleep(k % 4 * 400);
		collect(&w, bms + k * bm_len, k, 0);
	}
	__atomic_store_n(&w.quit, 1, __ATOMIC_RELEASE);
	for (unsigned int i = 0; i < WRITERS; i++)
		pthread_join(w.tid[i], NULL);
	collect(&w, bms + ROUNDS * bm_len, ROUNDS, UFFDM_TRACK_LAST);
	print_message("# %s on served %s (writers %s while collecting): %zu writes checked, "
		      "%llu pages served meanwhile\n", kind, c->mc->name,
		      w.quiesce ? "paused" : "running", check_logs(a, bms, bm_len, kind),
		      (unsigned long long)served_fills(&s));
	assert_true(served_fills(&s) > 0);
	for (unsigned int i = 0; i < WRITERS; i++) {
		assert_true(a[i].n > 0);
		for (size_t j = 0; j < a[i].n; j++)	/* filled before written */
			assert_true(check_page(w.view + a[i].log[j].page * w.page, w.page,
					       a[i].log[j].page));
		free(a[i].log);
		free(a[i].last_b);
	}
	free(bms);
	served_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TRACK_SERVED_ROWS(test_track_served_no_lost_write),
	};

	alarm(300);	/* a hang fails, never waits */
	return cmocka_run_group_tests_name("track-served-lost", tests, NULL, NULL);
}

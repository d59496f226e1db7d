// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Fill-once: the callback runs exactly once per page per generation, with
 * writes racing fills; readahead through uffdm_handler_fill() takes pages
 * through the same state machine; discard and zap start a new generation.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define RACERS 8

struct race {
	struct uffdm_region *r;
	struct uffdm_handler *h;
	size_t page, npages, rounds;
	unsigned int *fills;		/* callbacks per page, this round */
	unsigned int round;
	pthread_barrier_t go, done;
	unsigned int readahead;		/* pages the callback also fills after its own */
};

struct racer {
	struct race *rc;
	unsigned int id;
	pthread_t pt;
};

static int fill_one(void *arg, struct uffdm_region *r, size_t off)
{
	struct race *rc = arg;
	char *p = (char *)uffdm_region_backing(r) + off;

	__atomic_fetch_add(&rc->fills[off / rc->page], 1, __ATOMIC_RELAXED);
	/* The whole page: a fill after a write would wipe the racers' markers. */
	memset(p, 0, rc->page);
	/* The round is published to handler threads by the kernel's wake, which TSan cannot see. */
	p[RACERS] = (char)(__atomic_load_n(&rc->round, __ATOMIC_RELAXED) + 1);
	return 0;
}

static int race_fault(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct race *rc = arg;
	size_t ahead = rc->readahead * rc->page;

	(void)ev;
	fill_one(rc, r, off);
	if (ahead && off + rc->page < uffdm_region_size(r)) {
		size_t len = uffdm_region_size(r) - off - rc->page;

		uffdm_handler_fill(uffdm_region_handler(r), r, off + rc->page,
				   len < ahead ? len : ahead, fill_one, rc);
	}
	return 0;
}

/* Each round: touch every page in its own order and write the racer's marker. */
static void *racer(void *arg)
{
	struct racer *x = arg;
	struct race *rc = x->rc;
	volatile char *view = uffdm_region_view(rc->r);

	for (size_t round = 0; round < rc->rounds; round++) {
		pthread_barrier_wait(&rc->go);
		for (size_t i = 0; i < rc->npages; i++) {
			/* steps prime to 10000 and 16: every page, in 8 orders */
			static const size_t step[RACERS] = { 1, 3, 7, 11, 13, 17, 19, 23 };
			size_t p = (i * step[x->id] + x->id * 97) % rc->npages;

			view[p * rc->page + x->id] = (char)(0xb0 + x->id);
		}
		pthread_barrier_wait(&rc->done);
	}
	return NULL;
}

/* After a round: every marker there, every page filled exactly once. */
static void check_round(struct race *rc, size_t *lost, size_t *dup)
{
	const char *view = uffdm_region_view(rc->r);

	for (size_t p = 0; p < rc->npages; p++) {
		for (unsigned int i = 0; i < RACERS; i++)
			*lost += view[p * rc->page + i] != (char)(0xb0 + i);
		*lost += view[p * rc->page + RACERS] != (char)(rc->round + 1);
		*dup += __atomic_load_n(&rc->fills[p], __ATOMIC_RELAXED) != 1;
		__atomic_store_n(&rc->fills[p], 0, __ATOMIC_RELAXED);
	}
}

static void run_race(const struct mem_case *mc, unsigned int readahead)
{
	size_t page = case_page_size(mc);
	/*
	 * 8 threads racing on shmem 1000 pages x 10 generations, hugetlb 16 x
	 * 125: every hugetlb generation clears 16 huge pages twice (fault and
	 * INIT_ON_FREE), which at 625 generations took 120 s under TCG for
	 * races that 125 already run thousands of times.
	 */
	size_t npages = mc->backing == UFFDM_SHMEM ? 1000 : 16;
	struct race rc = {
		.page = page, .npages = npages,
		.rounds = mc->backing == UFFDM_SHMEM ? 10 : 125,
		.readahead = readahead,
	};
	struct uffdm_handler_config cfg = { .threads = 4, .fault = race_fault, .arg = &rc };
	struct uffdm *u = open_uffd(0, 0);
	struct racer x[RACERS];
	struct uffdm_stats st;
	size_t lost = 0, dup = 0;

	rc.r = registered_region(u, mc, npages, 0);
	rc.fills = calloc(npages, sizeof(*rc.fills));
	assert_non_null(rc.fills);
	pthread_barrier_init(&rc.go, NULL, RACERS + 1);
	pthread_barrier_init(&rc.done, NULL, RACERS + 1);
	assert_int_equal(uffdm_handler_start(&rc.h, u, rc.r, &cfg), 0);
	for (unsigned int i = 0; i < RACERS; i++) {
		x[i] = (struct racer){ .rc = &rc, .id = i };
		assert_int_equal(pthread_create(&x[i].pt, NULL, racer, &x[i]), 0);
	}
	for (unsigned int round = 0; round < rc.rounds; round++) {
		pthread_barrier_wait(&rc.go);
		pthread_barrier_wait(&rc.done);
		check_round(&rc, &lost, &dup);
		/*
		 * A new generation: the next round fills every page again.  Its
		 * content is ready first: a duplicate message of this round may
		 * start a fill of the new generation as soon as the zap is done.
		 */
		if (round + 1 < rc.rounds) {
			__atomic_store_n(&rc.round, round + 1, __ATOMIC_RELAXED);
			assert_int_equal(uffdm_region_zap(rc.r, 0, npages * page), 0);
		}
	}
	for (unsigned int i = 0; i < RACERS; i++)
		pthread_join(x[i].pt, NULL);
	assert_int_equal(uffdm_handler_stop(rc.h, &st), 0);
	print_message("%zu pages x %zu rounds, %d racers, readahead %u: %llu messages, "
		      "%llu callbacks, %llu duplicates; %zu lost writes, %zu pages not filled once\n",
		      npages, rc.rounds, RACERS, readahead, (unsigned long long)st.messages,
		      (unsigned long long)st.fills, (unsigned long long)st.duplicates, lost, dup);
	assert_int_equal(lost, 0);
	assert_int_equal(dup, 0);
	assert_int_equal(st.failed, 0);
	if (!readahead)
		assert_int_equal(st.fills, npages * rc.rounds);
	else
		assert_true(st.fills < npages * rc.rounds);
	free(rc.fills);
	put_uffd(u);
	put_region(rc.r);
}

static void test_race(void **state)
{
	run_race(need_case(state), 0);
}

/* The callback also fills the next 7 pages: still once each, fewer faults. */
static void test_readahead(void **state)
{
	run_race(need_case(state), 7);
}

static int count_fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)ev;
	/* Writing the backing view puts a hole's page in the page cache. */
	((char *)uffdm_region_backing(r))[off + 1] = 1;
	__atomic_fetch_add((unsigned int *)arg, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Loaded after the faults: a plain load could be hoisted above them. */
#define CALLS __atomic_load_n(&calls, __ATOMIC_SEQ_CST)

/* Discard and zap advance the generation: the callback runs again, once. */
static void test_generation(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 2, UFFDM_REGISTER_MISSING);
	size_t page = uffdm_region_page_size(r);
	volatile char *view = uffdm_region_view(r);
	unsigned int calls = 0;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = count_fill, .arg = &calls };
	struct uffdm_handler *h;

	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(uffdm_region_page_state(r, 0), UFFDM_PAGE_EMPTY);
	(void)view[0];
	(void)view[1];
	assert_int_equal(CALLS, 1);
	assert_int_equal(uffdm_region_page_state(r, 0), UFFDM_PAGE_FILLED);
	assert_int_equal(uffdm_region_page_state(r, page), UFFDM_PAGE_EMPTY);
	assert_int_equal(uffdm_region_zap(r, 0, page), 0);
	assert_int_equal(uffdm_region_page_state(r, 0), UFFDM_PAGE_EMPTY);
	(void)view[0];
	assert_int_equal(CALLS, 2);
	/* A hole: a MISSING fault; the callback makes the page (zeroes) and it maps. */
	assert_int_equal(uffdm_region_discard(r, 0, page), 0);
	view[0] = 'x';
	assert_int_equal(CALLS, 3);
	assert_int_equal(((char *)uffdm_region_backing(r))[0], 'x');
	assert_int_equal(uffdm_region_page_state(r, 0), UFFDM_PAGE_FILLED);
	assert_int_equal(uffdm_region_page_state(r, 2 * page), -ERANGE);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	put_uffd(u);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_race),
		CROSS(test_readahead),
		CROSS(test_generation),
	};

	return cmocka_run_group_tests_name("fillonce", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The use live migration's destination makes of the handler: a receive
 * thread takes pages as they "arrive" (in order, with urgent ones first)
 * and fills each through the state machine: claimed if nobody asked for
 * it, completed if a fault deferred it, dropped if already there.  The
 * fault callback never blocks: it asks for its page (a queue the receive
 * thread serves first) and returns UFFDM_FILL_LATER.  Four "vCPU" threads
 * touch and write pages meanwhile.  Every page is filled exactly once and
 * no write is lost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define VCPUS 4

struct pc {
	struct uffdm_handler *h;
	struct uffdm_region *r;
	size_t page, npages;
	pthread_mutex_t mu;
	size_t *urgent;		/* offsets the faults asked for */
	size_t nurgent, cap;
	unsigned int *fills;	/* per page, by the receive thread */
	unsigned int asked;
};

/* The fault callback: request the page, do not wait for it. */
static int request(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct pc *pc = arg;

	(void)r; (void)ev;
	pthread_mutex_lock(&pc->mu);
	if (pc->nurgent < pc->cap)
		pc->urgent[pc->nurgent++] = off;
	pc->asked++;
	pthread_mutex_unlock(&pc->mu);
	return UFFDM_FILL_LATER;
}

/* "The page arrived": fill it unless it is there already. */
static void arrive(struct pc *pc, size_t off)
{
	char *dst = (char *)uffdm_region_backing(pc->r) + off;

	switch (uffdm_handler_claim(pc->h, pc->r, off, UFFDM_CLAIM_WAIT)) {
	case UFFDM_CLAIM_EMPTY:
	case UFFDM_CLAIM_DEFERRED:
		fill_page(dst, pc->page, off / pc->page);
		__atomic_fetch_add(&pc->fills[off / pc->page], 1, __ATOMIC_RELAXED);
		if (uffdm_handler_complete(pc->h, pc->r, off, pc->page, 0))
			abort();
		break;
	default:	/* already filled: a stale copy, dropped */
		break;
	}
}

static bool next_urgent(struct pc *pc, size_t *off)
{
	bool got = false;

	pthread_mutex_lock(&pc->mu);
	if (pc->nurgent) {
		*off = pc->urgent[--pc->nurgent];
		got = true;
	}
	pthread_mutex_unlock(&pc->mu);
	return got;
}

/* The background stream in order, urgent requests served before each page. */
static void *receiver(void *arg)
{
	struct pc *pc = arg;
	size_t off;

	for (size_t i = 0; i < pc->npages; i++) {
		while (next_urgent(pc, &off))
			arrive(pc, off);
		usleep(20);	/* the link */
		arrive(pc, i * pc->page);
	}
	while (next_urgent(pc, &off))
		arrive(pc, off);
	return NULL;
}

struct vcpu {
	struct pc *pc;
	unsigned int id;
	size_t bad;
	bool *wrote;
	pthread_t pt;
};

/* Read a page (it must be the source's), then write this vCPU's marker into it. */
static void *run_vcpu(void *arg)
{
	struct vcpu *v = arg;
	struct pc *pc = v->pc;
	char *view = uffdm_region_view(pc->r);
	unsigned int seed = v->id + 1;

	for (size_t n = 0; n < pc->npages; n++) {
		size_t i = (size_t)rand_r(&seed) % pc->npages;
		char *p = view + i * pc->page;

		v->bad += !check_page(p, pc->page, i);	/* the markers leave its words alone */
		((volatile char *)p)[8 + v->id] = 1;
		v->wrote[i] = true;
	}
	return NULL;
}

static void test_postcopy(void **state)
{
	const struct mem_case *mc = need_case(state);
	size_t npages = mc->backing == UFFDM_SHMEM ? 2048 : 16;
	struct uffdm *u = open_uffd(0, 0);
	struct pc pc = { .npages = npages, .cap = 4 * npages };
	struct uffdm_handler_config cfg = { .threads = 2, .fault = request, .arg = &pc };
	struct vcpu v[VCPUS];
	struct uffdm_stats st;
	pthread_t rt;
	size_t bad = 0, twice = 0, lost = 0;

	pthread_mutex_init(&pc.mu, NULL);
	pc.r = registered_region(u, mc, npages, 0);
	pc.page = uffdm_region_page_size(pc.r);
	pc.urgent = calloc(pc.cap, sizeof(*pc.urgent));
	pc.fills = calloc(npages, sizeof(*pc.fills));
	assert_non_null(pc.urgent);
	assert_non_null(pc.fills);
	assert_int_equal(uffdm_handler_start(&pc.h, u, pc.r, &cfg), 0);
	for (unsigned int i = 0; i < VCPUS; i++) {
		v[i] = (struct vcpu){ .pc = &pc, .id = i, .wrote = calloc(npages, sizeof(bool)) };
		assert_non_null(v[i].wrote);
		assert_int_equal(pthread_create(&v[i].pt, NULL, run_vcpu, &v[i]), 0);
	}
	assert_int_equal(pthread_create(&rt, NULL, receiver, &pc), 0);
	for (unsigned int i = 0; i < VCPUS; i++) {
		pthread_join(v[i].pt, NULL);
		bad += v[i].bad;
	}
	pthread_join(rt, NULL);
	assert_int_equal(uffdm_handler_stop(pc.h, &st), 0);
	for (size_t i = 0; i < npages; i++) {
		const char *p = (const char *)uffdm_region_view(pc.r) + i * pc.page;

		twice += pc.fills[i] != 1;
		for (unsigned int c = 0; c < VCPUS; c++)
			lost += v[c].wrote[i] && p[8 + c] != 1;
	}
	for (unsigned int c = 0; c < VCPUS; c++)
		free(v[c].wrote);
	print_message("%zu pages: %u asked by faults, %llu deferred, %llu completed, "
		      "%zu pages not filled once, %zu bad reads, %zu lost writes\n", npages,
		      pc.asked, (unsigned long long)st.deferred, (unsigned long long)st.completed,
		      twice, bad, lost);
	assert_int_equal(bad, 0);
	assert_int_equal(lost, 0);
	assert_int_equal(twice, 0);
	assert_int_equal(st.completed, npages);
	assert_int_equal(st.failed, 0);
	free(pc.urgent);
	free(pc.fills);
	put_uffd(u);
	put_region(pc.r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_postcopy),
	};

	return cmocka_run_group_tests_name("postcopy", tests, NULL, NULL);
}

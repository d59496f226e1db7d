// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Dirty tracking, each kind forced: a known set of written pages comes back
 * exactly, round after round; under the real workload no write is ever
 * missing from a collection; and stopping uffd-wp with writers faulting
 * does not hang.  Each case skips, with its reason, where the kernel or the
 * huge page pool lacks what it needs; where the kernel claims the feature,
 * the tracker must start.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"

#define DEADLINE 120	/* seconds for the whole file: a hang fails, never waits */

struct tcase {
	enum lm_track_kind kind;
	enum uffdm_backing backing;
};

static const struct tcase wp_shmem = { LM_TRACK_UFFD_WP, UFFDM_SHMEM };
static const struct tcase wp_hugetlb = { LM_TRACK_UFFD_WP, UFFDM_HUGETLB };
static const struct tcase scan_shmem = { LM_TRACK_PAGEMAP_SCAN, UFFDM_SHMEM };
static const struct tcase sd_shmem = { LM_TRACK_SOFT_DIRTY, UFFDM_SHMEM };

#define ROW(fn, c) { #fn "/" #c, fn, NULL, NULL, (void *)&c }

static const char *backing_name(enum uffdm_backing b)
{
	return b == UFFDM_SHMEM ? "shmem" : "hugetlb";
}

/* A region of npages pages, or skip: no huge pages configured or free. */
static struct uffdm_region *region(const struct tcase *c, size_t npages)
{
	size_t page = uffdm_backing_page_size(c->backing);
	struct uffdm_region *r;
	int ret;

	if (!page)
		K513_SKIP("no default huge page size here");
	ret = uffdm_region_create(&r, c->backing, npages * page);
	if (ret == -ENOMEM)
		K513_SKIP("%zu free %zu KiB huge pages needed (HugePages_Free)", npages,
			  page >> 10);
	assert_int_equal(ret, 0);
	return r;
}

/* The feature bits a kind needs, 0 when only trying tells. */
static uint64_t kind_features(const struct tcase *c)
{
	switch (c->kind) {
	case LM_TRACK_UFFD_WP:
		return UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
	case LM_TRACK_PAGEMAP_SCAN:
		return UFFD_FEATURE_WP_ASYNC;
	default:
		return 0;
	}
}

/* Start the kind, or skip where the kernel says it lacks it. */
static void start(struct lm_tracker *t, const struct tcase *c, struct uffdm_region *r)
{
	uint64_t need = kind_features(c);
	struct uffdm_probe p;
	int ret;

	if (need && (uffdm_probe(&p) || !uffdm_probe_has(&p, need))) {
		uffdm_region_destroy(r);
		K513_SKIP("the kernel lacks %s tracking on %s (feature 0x%llx)",
			  lm_track_name(c->kind), backing_name(c->backing),
			  (unsigned long long)need);
	}
	ret = lm_track_start(t, c->kind, uffdm_region_view(r), uffdm_region_size(r),
			     uffdm_region_page_size(r));
	if (!need && ret == -EOPNOTSUPP) {
		lm_track_stop(t);
		uffdm_region_destroy(r);
		K513_SKIP("%s tracking does not work on %s here", lm_track_name(c->kind),
			  backing_name(c->backing));
	}
	if (ret)
		fail_msg("%s on %s: %s", lm_track_name(c->kind), backing_name(c->backing),
			 strerror(-ret));
	assert_int_equal(t->kind, c->kind);
}

static void write_pages(uint8_t *view, size_t page, const unsigned int *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		view[set[i] * page + 8]++;
}

static bool in_set(unsigned int p, const unsigned int *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == p)
			return true;
	return false;
}

/* Collect and compare with exactly set[0..n). */
static void expect(struct lm_tracker *t, size_t npages, const unsigned int *set, size_t n,
		   bool last)
{
	uint8_t bm[64] = { 0 };

	assert_true(npages <= sizeof(bm) * 8);
	assert_int_equal(lm_track_collect(t, bm, last), 0);
	for (unsigned int p = 0; p < npages; p++)
		if (bit_get(bm, p) != in_set(p, set, n))
			fail_msg("page %u: bit %d, written %d", p, bit_get(bm, p),
				 in_set(p, set, n));
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_sets(void **state)
{
	const struct tcase *c = *state;
	size_t npages = c->backing == UFFDM_SHMEM ? 64 : 4;
	unsigned int a[] = { 0, 3, 5, npages - 1 }, b[] = { 1, 3, npages - 2 }, c3[] = { 2 };
	struct uffdm_region *r = region(c, npages);
	uint8_t *view = uffdm_region_view(r);
	size_t page = uffdm_region_page_size(r);
	struct lm_tracker t;

	if (npages == 4)	/* 0 3 5 3 -> 0 3; 1 3 2: a page again, a page new */
		a[2] = 0;
	start(&t, c, r);
	write_pages(view, page, a, N(a));
	write_pages(view, page, a, N(a));	/* twice in a round: one bit */
	expect(&t, npages, a, N(a), false);
	write_pages(view, page, b, N(b));
	expect(&t, npages, b, N(b), false);
	expect(&t, npages, NULL, 0, false);	/* protected again, nothing written */
	write_pages(view, page, c3, N(c3));
	expect(&t, npages, c3, N(c3), true);
	lm_track_stop(&t);
	write_pages(view, page, a, N(a));	/* after stop: plain memory */
	uffdm_region_destroy(r);
}

/* Every page whose bytes changed since the last look has its bit. */
static uint64_t check_round(struct lm_tracker *t, struct uffdm_region *r, uint8_t *snap,
			    bool last)
{
	uint8_t *view = uffdm_region_view(r), bm[1024] = { 0 };
	size_t page = uffdm_region_page_size(r), n = uffdm_region_size(r) / page;
	uint64_t changed = 0;

	assert_true(n <= sizeof(bm) * 8);
	assert_int_equal(lm_track_collect(t, bm, last), 0);
	for (size_t p = 0; p < n; p++) {
		if (!memcmp(view + p * page, snap + p * page, page))
			continue;
		changed++;
		if (!bit_get(bm, p))
			fail_msg("page %zu was written but its bit is clear", p);
	}
	memcpy(snap, view, n * page);
	return changed;
}

/* The workload's threads all write record 0: faults on one page race. */
static void test_no_lost_write(void **state)
{
	const struct tcase *c = *state;
	size_t page = uffdm_backing_page_size(c->backing);
	size_t npages = c->backing == UFFDM_SHMEM ? 1024 : 4;
	struct wl_opts o = { .threads = 2, .pattern = WL_HOT, .hot_frac = 0.3, .hot_share = 90 };
	struct uffdm_region *r = region(c, npages);
	uint8_t *view = uffdm_region_view(r), *snap;
	struct workload w = { 0 };
	struct lm_tracker t;
	uint64_t changed = 0;

	wl_format(view, npages * page, &o);
	start(&t, c, r);
	snap = malloc(npages * page);
	assert_non_null(snap);
	memcpy(snap, view, npages * page);
	assert_int_equal(wl_start(&w, view, npages * page, view), 0);
	/* some rounds collect right after resuming: faults still in flight */
	for (int round = 0; round < 100; round++) {
		usleep(round % 4 * 400);
		wl_pause(&w);
		changed += check_round(&t, r, snap, false);
		wl_resume(&w);
	}
	wl_pause(&w);
	changed += check_round(&t, r, snap, true);
	wl_stop(&w);
	lm_track_stop(&t);
	assert_true(changed > 0);
	free(snap);
	uffdm_region_destroy(r);
}

struct writer {
	uint8_t *view;
	size_t page, npages;
	atomic_int quit;
};

static void *writer(void *p)
{
	struct writer *w = p;

	for (uint64_t k = 0; !atomic_load(&w->quit); k++)
		__atomic_fetch_add(&w->view[(k * 7 % w->npages) * w->page], 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Stop with writers faulting and nobody pausing them: no hang, no loss of them. */
static void test_stop_under_writes(void **state)
{
	const struct tcase *c = *state;
	size_t npages = c->backing == UFFDM_SHMEM ? 256 : 4;
	struct uffdm_region *r = region(c, npages);
	struct writer wr = { .view = uffdm_region_view(r), .page = uffdm_region_page_size(r),
			     .npages = npages };
	uint8_t bm[32];
	struct lm_tracker t;
	pthread_t tid[2];

	start(&t, c, r);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&tid[i], NULL, writer, &wr), 0);
	for (int i = 0; i < 5; i++) {
		usleep(2000);
		assert_int_equal(lm_track_collect(&t, bm, false), 0);
	}
	lm_track_stop(&t);
	usleep(2000);
	atomic_store(&wr.quit, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(tid[i], NULL);
	uffdm_region_destroy(r);
}

/*
 * auto never falls to none where uffd-wp works: on 6.1 hugetlb, without
 * PAGEMAP_SCAN and with soft-dirty failing its probe, it must pick uffd-wp.
 */
static void test_auto(void **state)
{
	const struct tcase *c = *state;
	struct uffdm_region *r = region(c, c->backing == UFFDM_SHMEM ? 64 : 2);
	struct lm_tracker t;
	struct uffdm_probe p;

	assert_int_equal(uffdm_probe(&p), 0);
	assert_int_equal(lm_track_start(&t, LM_TRACK_END, uffdm_region_view(r),
					uffdm_region_size(r), uffdm_region_page_size(r)), 0);
	print_message("# auto on %s: %s\n", backing_name(c->backing), lm_track_name(t.kind));
	if (uffdm_probe_has(&p, UFFD_FEATURE_WP_ASYNC))
		assert_int_equal(t.kind, LM_TRACK_PAGEMAP_SCAN);
	else if (uffdm_probe_has(&p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		assert_true(t.kind == LM_TRACK_SOFT_DIRTY || t.kind == LM_TRACK_UFFD_WP);
	lm_track_stop(&t);
	uffdm_region_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		ROW(test_sets, wp_shmem),
		ROW(test_sets, wp_hugetlb),
		ROW(test_sets, scan_shmem),
		ROW(test_sets, sd_shmem),
		ROW(test_no_lost_write, wp_shmem),
		ROW(test_no_lost_write, wp_hugetlb),
		ROW(test_no_lost_write, scan_shmem),
		ROW(test_no_lost_write, sd_shmem),
		ROW(test_stop_under_writes, wp_shmem),
		ROW(test_stop_under_writes, wp_hugetlb),
		ROW(test_auto, wp_shmem),
		ROW(test_auto, wp_hugetlb),
	};

	alarm(DEADLINE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

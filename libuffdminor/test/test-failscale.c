// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Failing many pages costs O(ranges), never a mapping per page (issue 31,
 * item 3): 200 000 pages failed by one uffdm_range_fail(3), every other
 * page of the region served, on both paths.  One mapping per failed page
 * would pass vm.max_map_count (65 530 by default): the call, or the
 * teardown after it, would fail with -ENOMEM.  Asserted: the call returns
 * 0; the region is at most MAX_VMAS mappings afterwards, whatever the
 * count; every unserved page raises SIGBUS on the first and the second
 * touch (a sample in user mode, every page through a kernel copy, which
 * gets EFAULT where a user touch gets SIGBUS); every served page keeps its
 * bytes; uffdm_region_unregister(3) returns 0.
 *
 * hugetlb fails what the pool holds (a few dozen huge pages): the count
 * of mappings is asserted the same way.  UFFDM_SCALE_PAIRS overrides the
 * shmem count of (served, failed) pairs, for measuring.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define SHMEM_PAIRS	200000	/* 200 000 failed pages, past vm.max_map_count */
#define HUGE_PAIRS	24
#define MAX_VMAS	3	/* the region before, the failed range, after */
#define TOUCH_STRIDE	61	/* user-mode touches: every 61st failed page */

struct scale {
	const struct mem_case *mc;
	size_t pairs;
	unsigned int fail_flags;
	uint64_t features;
};

/* A kernel copy from p: EFAULT where a user touch would get SIGBUS. */
static int kernel_efault(int fd, const char *p)
{
	return pwrite(fd, p, 1, 0) < 0 && errno == EFAULT;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Mappings of this process that overlap [p, p+len). */
static unsigned int vmas_in(const char *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, start, end;
	unsigned int n = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return ~0u;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &start, &end) == 2 &&
		    start < a + len && end > a)
			n++;
	fclose(f);
	return n;
}

/* Even pages served (written through the view before registering), odd ones holes. */
static int serve_evens(char *view, size_t pages, size_t page)
{
	for (size_t i = 0; i < pages; i += 2)
		fill_page(view + i * page, page, i);
	return 0;
}

/* Every odd page, n passes: SIGBUS (sampled) in user mode, EFAULT in a kernel copy. */
static int odd_pages_fail(char *view, size_t pages, size_t page, int probe)
{
	for (size_t i = 1; i < pages; i += 2) {
		bool sample = i / 2 % TOUCH_STRIDE == 0 || i == pages - 1;

		if (sample && !read_sigbus_jump(view + i * page)) {
			fprintf(stderr, "page %zu read without SIGBUS\n", i);
			return 0;
		}
		if (!kernel_efault(probe, view + i * page)) {
			fprintf(stderr, "page %zu copied by the kernel without EFAULT\n", i);
			return 0;
		}
	}
	return 1;
}

static int scale_run(void *arg)
{
	const struct scale *sc = arg;
	size_t page = case_page_size(sc->mc), pages = 2 * sc->pairs, len = pages * page;
	int probe = memfd_create("uffdm-probe", MFD_CLOEXEC), ret;
	struct uffdm_region *r;
	struct timespec t0;
	unsigned int vmas;
	struct uffdm *u;
	char *view;

	catch_sigbus();
	if (probe < 0 || uffdm_region_create(&r, sc->mc->backing, len))
		return 3;
	view = uffdm_region_view(r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (serve_evens(view, pages, page) || uffdm_open(&u, 0, sc->features) ||
	    uffdm_region_register(u, r, UFFDM_REGISTER_MISSING, NULL))
		return 3;
	fprintf(stderr, "# setup (serving every other page) %.1f ms\n", ms_since(&t0));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = uffdm_range_fail(u, view, len, page, sc->fail_flags);
	fprintf(stderr, "# %zu pages failed, %zu served: uffdm_range_fail %d in %.1f ms\n",
		sc->pairs, sc->pairs, ret, ms_since(&t0));
	if (ret)
		return 4;
	vmas = vmas_in(view, len);
	fprintf(stderr, "# %u mappings over the region\n", vmas);
	if (vmas > MAX_VMAS)
		return 5;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int pass = 0; pass < 2; pass++)
		if (!odd_pages_fail(view, pages, page, probe))
			return 6;
	for (size_t i = 0; i < pages; i += 2)
		if (!check_page(view + i * page, page, i)) {
			fprintf(stderr, "served page %zu lost its bytes\n", i);
			return 7;
		}
	fprintf(stderr, "# checks (two touches, served bytes) %.1f ms\n", ms_since(&t0));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = uffdm_region_unregister(u, r);
	fprintf(stderr, "# uffdm_region_unregister %d in %.1f ms\n", ret, ms_since(&t0));
	uffdm_region_destroy(r);
	uffdm_close(u);
	fprintf(stderr, "# teardown (unregister, destroy, close) %.1f ms\n", ms_since(&t0));
	return ret ? 8 : 0;
}

static size_t shmem_pairs(void)
{
	const char *s = getenv("UFFDM_SCALE_PAIRS");

	return s && atol(s) > 0 ? (size_t)atol(s) : SHMEM_PAIRS;
}

static void check_scale(void **state, unsigned int fail_flags, uint64_t features)
{
	const struct mem_case *mc = need_case(state);
	struct scale sc = { mc, mc->backing == UFFDM_SHMEM ? shmem_pairs() : HUGE_PAIRS,
			    fail_flags, features };
	struct child_result res;

	put_region(make_region(mc, 2 * sc.pairs));	/* skip on a small pool */
	res = run_child(scale_run, &sc, 120);
	if (res.signal)
		fail_msg("the child died of signal %d", res.signal);
	if (res.status)
		fail_msg("step %d failed: 3 setup, 4 uffdm_range_fail, 5 mappings per page, "
			 "6 an unserved page without SIGBUS, 7 a served page lost, 8 unregister",
			 res.status);
}

static void test_scale_poison(void **state)
{
	struct uffdm_probe p = probe();

	if (!uffdm_probe_poison(&p))
		K513_SKIP("no UFFDIO_POISON (Linux 6.6+)");
	check_scale(state, 0, UFFD_FEATURE_POISON);
}

static void test_scale_fd(void **state)
{
	check_scale(state, UFFDM_FAIL_SIGBUS_FD, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_scale_poison),
		CROSS(test_scale_fd),
	};

	return cmocka_run_group_tests_name("failscale", tests, NULL, NULL);
}

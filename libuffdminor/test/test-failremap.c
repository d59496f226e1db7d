// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A range failed in one mapping (uffdm_range_fail(3): several runs, served
 * pages between) is a view registered on a SIGBUS descriptor that carries
 * UFFD_FEATURE_EVENT_REMAP, so an mremap(2) of it waits until that event
 * is read.  The application moving it later must neither hang (the
 * library's reader thread reads the event) nor lose the failure (without
 * the event the kernel would drop the registration, and the failed pages
 * would read what the page cache holds).  Both threads failing halves of
 * a region at once must also come out right.  In a child under alarm().
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define PAGES	64	/* even pages served, odd ones failed */

struct half {
	struct uffdm *u;
	char *p;
	size_t len, page;
	int ret;
	pthread_t tid;
};

/* Page i at p: odd ones SIGBUS on two touches, even ones keep their bytes. */
static bool page_right(const char *p, size_t page, size_t i)
{
	if (i % 2 == 0)
		return check_page(p, page, i);
	return read_sigbus_jump(p) && read_sigbus_jump(p);
}

static void *fail_half(void *arg)
{
	struct half *h = arg;

	h->ret = uffdm_range_fail(h->u, h->p, h->len, h->page, UFFDM_FAIL_SIGBUS_FD);
	return NULL;
}

/* Both halves failed by two threads at once: 0, or the first error. */
static int fail_halves(struct uffdm *u, char *view, size_t page)
{
	struct half h[2];

	for (int i = 0; i < 2; i++) {
		h[i] = (struct half){ .u = u, .p = view + i * PAGES / 2 * page,
				      .len = PAGES / 2 * page, .page = page };
		if (pthread_create(&h[i].tid, NULL, fail_half, &h[i]))
			return -EAGAIN;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(h[i].tid, NULL);
	return h[0].ret ? h[0].ret : h[1].ret;
}

/* Pages 1..PAGES/2-1 of the first half (one failed view) moved elsewhere: where they went. */
static char *move_first_half(char *view, size_t page)
{
	size_t len = (PAGES / 2 - 1) * page;
	char *res = mmap(NULL, len + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *to;

	if (res == MAP_FAILED)
		return NULL;
	/* hugetlb's mremap wants the new place aligned to the huge page: an
	 * anonymous reservation is only by chance (arm64-6.1 failed here 1
	 * run in 5)
	 */
	to = (char *)(((uintptr_t)res + page - 1) & ~(uintptr_t)(page - 1));
	to = mremap(view + page, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	return to == MAP_FAILED ? NULL : to;
}

static int remap_run(void *arg)
{
	const struct mem_case *mc = arg;
	size_t page = case_page_size(mc);
	struct uffdm_region *r;
	struct uffdm *u;
	char *view, *moved;

	catch_sigbus();
	if (uffdm_region_create(&r, mc->backing, PAGES * page) || uffdm_open(&u, 0, 0))
		return 3;
	view = uffdm_region_view(r);
	for (size_t i = 0; i < PAGES; i += 2)
		fill_page(view + i * page, page, i);
	if (uffdm_region_register(u, r, UFFDM_REGISTER_MISSING, NULL))
		return 3;
	if (fail_halves(u, view, page))
		return 4;
	moved = move_first_half(view, page);	/* hangs without a reader */
	if (!moved)
		return 5;
	/* moved + (i - 1) * page was page i; failed pages touched twice */
	for (size_t i = 1; i < PAGES / 2; i++)
		if (!page_right(moved + (i - 1) * page, page, i))
			return 6;
	for (size_t i = PAGES / 2; i < PAGES; i++)
		if (!page_right(view + i * page, page, i))
			return 7;
	return uffdm_region_unregister(u, r) ? 8 : 0;
}

static void test_remap_keeps_failure(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct child_result res;

	put_region(make_region(mc, PAGES));	/* skip on a small pool */
	res = run_child(remap_run, (void *)mc, 20);
	if (res.signal == SIGALRM)
		fail_msg("hung: the mremap of a failed view waited for ever");
	if (res.signal)
		fail_msg("the child died of signal %d", res.signal);
	if (res.status)
		fail_msg("step %d failed: 3 setup, 4 uffdm_range_fail from two threads, 5 mremap, "
			 "6 a moved page lost its failure or bytes, 7 a page not moved did, "
			 "8 unregister", res.status);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_remap_keeps_failure),
	};

	return cmocka_run_group_tests_name("failremap", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A zap that falls between "filled" and the CONTINUE that maps the page:
 * the filler must not map the page into the new generation (its threads
 * would then read the old content, and the new generation's fill would
 * never run).  The window is held open by an internal hook, so this runs
 * against the static library.  Before the fix the page stayed mapped with
 * its old content and the callback ran once; the hugetlb race test saw it
 * once in 50 generations on the 6.1 guest.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* The library's internal hook (src/handler.h), not part of its API. */
extern void (*uffdm__test_after_fill)(struct uffdm_region *r, size_t off, size_t len);

struct zr {
	struct uffdm_handler *h;
	struct uffdm_region *r;
	size_t page;
	unsigned int calls;
	int zapped;
	char seen;	/* what the faulting thread read */
};

/* Every fill is deferred: the test completes it, from its own thread. */
static int defer(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct zr *z = arg;

	(void)r; (void)off; (void)ev;
	__atomic_fetch_add(&z->calls, 1, __ATOMIC_RELEASE);
	return UFFDM_FILL_LATER;
}

static struct zr *hooked;

/* In the window: the application zaps the page (a new generation). */
static void zap_in_window(struct uffdm_region *r, size_t off, size_t len)
{
	if (r != hooked->r || __atomic_exchange_n(&hooked->zapped, 1, __ATOMIC_ACQ_REL))
		return;
	assert_int_equal(uffdm_region_zap(r, off, len), 0);
}

static void *reader(void *arg)
{
	struct zr *z = arg;

	z->seen = *(volatile char *)uffdm_region_view(z->r);
	return NULL;
}

static void wait_calls(struct zr *z, unsigned int n)
{
	while (__atomic_load_n(&z->calls, __ATOMIC_ACQUIRE) < n ||
	       uffdm_region_page_state(z->r, 0) != UFFDM_PAGE_DEFERRED)
		usleep(1000);
}

/* Bit 63 of /proc/self/pagemap: the page is mapped at addr. */
static bool mapped(const void *addr)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);
	off_t at = (off_t)((uintptr_t)addr / (uintptr_t)sysconf(_SC_PAGESIZE) * 8);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &e, 8, at), 8);
	close(fd);
	return e >> 63;
}

static void test_zap_before_map(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = defer };
	struct zr z = { 0 };
	pthread_t t;
	char *back;

	z.r = registered_region(u, mc, 1, 0);
	z.page = uffdm_region_page_size(z.r);
	back = uffdm_region_backing(z.r);
	cfg.arg = &z;
	assert_int_equal(uffdm_handler_start(&z.h, u, z.r, &cfg), 0);
	assert_int_equal(pthread_create(&t, NULL, reader, &z), 0);

	/* Generation 0: filled with 'A', zapped before it is mapped. */
	wait_calls(&z, 1);
	back[0] = 'A';
	hooked = &z;
	uffdm__test_after_fill = zap_in_window;
	/* documented: the range was zapped meanwhile */
	assert_int_equal(uffdm_handler_complete(z.h, z.r, 0, z.page, 0), -ESTALE);
	uffdm__test_after_fill = NULL;
	assert_int_equal(z.zapped, 1);
	assert_false(mapped(uffdm_region_view(z.r)));

	/* The reader faults again, into generation 1: the callback runs again. */
	wait_calls(&z, 2);
	back[0] = 'B';
	assert_int_equal(uffdm_handler_complete(z.h, z.r, 0, z.page, 0), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(z.seen, 'B');
	assert_int_equal(z.calls, 2);
	assert_int_equal(uffdm_region_page_state(z.r, 0), UFFDM_PAGE_FILLED);
	assert_int_equal(uffdm_handler_stop(z.h, NULL), 0);
	put_uffd(u);
	put_region(z.r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_zap_before_map),
	};

	return cmocka_run_group_tests_name("zaprace", tests, NULL, NULL);
}

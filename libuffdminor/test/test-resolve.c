// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The other resolving calls: COPY and ZEROPAGE for missing faults, and
 * write protection set and cleared (also through the handler).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct toucher {
	volatile char *addr;
	bool write;
	char seen;
	pthread_t pt;
};

static void *touch(void *arg)
{
	struct toucher *t = arg;

	if (t->write)
		*t->addr = 'w';
	else
		t->seen = *t->addr;
	return NULL;
}

static struct uffdm_event next_fault(struct uffdm *u, struct toucher *t)
{
	struct uffdm_event ev;

	assert_int_equal(pthread_create(&t->pt, NULL, touch, t), 0);
	assert_int_equal(uffdm_events_read(u, &ev, 1, 0), 1);
	return ev;
}

/* A hole in a MISSING registration: COPY fills it from our buffer. */
static void test_copy(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, UFFDM_REGISTER_MISSING);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r), *src = malloc(page);
	struct toucher t = { .addr = view };

	assert_non_null(src);
	memset(src, 'c', page);
	assert_int_equal(uffdm_region_discard(r, 0, page), 0);
	assert_int_equal(next_fault(u, &t).kind, UFFDM_EVENT_MISSING);
	assert_int_equal(uffdm_copy(u, view, src, page, 0), (ssize_t)page);
	pthread_join(t.pt, NULL);
	assert_int_equal(t.seen, 'c');
	assert_int_equal(uffdm_copy(u, view, src, page, 0), -EEXIST);
	free(src);
	put_region(r);
	put_uffd(u);
}

static void test_zeropage(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = make_region(mc, 1);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);
	struct toucher t = { .addr = view + 1 };
	uint64_t ioctls = 0;

	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_MISSING, &ioctls), 0);
	if (!(ioctls & (1ull << _UFFDIO_ZEROPAGE))) {
		assert_int_equal(uffdm_zeropage(u, view, page, 0), -EINVAL);
		put_region(r);
		put_uffd(u);
		SKIP_BECAUSE("%s ranges offer no UFFDIO_ZEROPAGE (-EINVAL checked)", mc->name);
	}
	t.seen = 'x';
	assert_int_equal(next_fault(u, &t).kind, UFFDM_EVENT_MISSING);
	assert_int_equal(uffdm_zeropage(u, view, page, 0), (ssize_t)page);
	pthread_join(t.pt, NULL);
	assert_int_equal(t.seen, 0);
	put_region(r);
	put_uffd(u);
}

static struct uffdm *open_wp(void)
{
	struct uffdm_probe p = probe();

	if (!uffdm_probe_has(&p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		SKIP_BECAUSE("kernel lacks WP on shmem/hugetlbfs (Linux 5.19+, PTE_MARKER_UFFD_WP)");
	return open_uffd(0, UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM);
}

static void test_writeprotect(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_wp();
	struct uffdm_region *r = registered_region(u, mc, 1, UFFDM_REGISTER_WP);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);
	struct toucher t = { .addr = view, .write = true };
	struct uffdm_event ev;

	assert_int_equal(uffdm_continue(u, view, page, 0), (ssize_t)page);
	assert_int_equal(uffdm_writeprotect(u, view, page, true), 0);
	ev = next_fault(u, &t);
	assert_int_equal(ev.kind, UFFDM_EVENT_WP);
	assert_int_equal(ev.flags & UFFDM_FAULT_WRITE, UFFDM_FAULT_WRITE);
	assert_int_equal(uffdm_writeprotect(u, view, page, false), 0);
	pthread_join(t.pt, NULL);
	assert_int_equal(((char *)uffdm_region_backing(r))[0], 'w');
	put_region(r);
	put_uffd(u);
}

static int allow(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)r; (void)off;
	if (ev->kind == UFFDM_EVENT_WP)
		__atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
	return 0;
}

/*
 * A minor then a WP fault: the callback fills the page once (on the minor
 * fault); the WP fault on the filled page is only un-protected.
 */
static void test_handler_wp(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_wp();
	struct uffdm_region *r = registered_region(u, mc, 1, UFFDM_REGISTER_WP);
	size_t page = uffdm_region_page_size(r);
	volatile char *view = uffdm_region_view(r);
	int wp_seen = 0;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = allow, .arg = &wp_seen };
	struct uffdm_handler *h;
	struct uffdm_stats st;

	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(view[0], 0);			/* minor: mapped */
	assert_int_equal(uffdm_writeprotect(u, (void *)view, page, true), 0);
	view[0] = 'h';					/* WP: un-protected */
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	assert_int_equal(st.minor, 1);
	assert_int_equal(st.wp, 1);
	assert_int_equal(st.fills, 1);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(wp_seen, 0);
	assert_int_equal(((char *)uffdm_region_backing(r))[0], 'h');
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_copy),
		CROSS(test_zeropage),
		CROSS(test_writeprotect),
		CROSS(test_handler_wp),
	};

	return cmocka_run_group_tests_name("resolve", tests, NULL, NULL);
}

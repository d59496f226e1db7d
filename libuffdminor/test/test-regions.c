// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Many regions on one descriptor (a VMM's memory slots): one handler
 * serves a set of regions added and removed while it runs; each fault goes
 * to its own region's callback; a fault outside every region is failed
 * (SIGBUS) or, with UFFDM_HANDLER_OUTSIDE_EVENT, handed to the event
 * callback; it never touches another region's pages.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define NREG 8

struct seen {
	struct uffdm_region *r[NREG];
	unsigned int calls[NREG];
	unsigned int wrong;	/* callbacks with a region or offset not ours */
};

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct seen *s = arg;
	size_t page = uffdm_region_page_size(r);
	int i = 0;

	while (i < NREG && s->r[i] != r)
		i++;
	if (i == NREG || off >= uffdm_region_size(r) ||
	    (uintptr_t)uffdm_region_view(r) + off != (ev->addr & ~(uint64_t)(page - 1))) {
		__atomic_fetch_add(&s->wrong, 1, __ATOMIC_RELAXED);
		return -EINVAL;
	}
	__atomic_fetch_add(&s->calls[i], 1, __ATOMIC_RELAXED);
	fill_page((char *)uffdm_region_backing(r) + off, page, (size_t)i * 100 + off / page);
	return 0;
}

/* Eight regions, added one by one while the handler runs; every page right. */
static void test_many(void **state)
{
	const struct mem_case *mc = need_case(state);
	size_t npages = mc->backing == UFFDM_SHMEM ? 16 : 1;
	struct uffdm *u = open_uffd(0, 0);
	struct seen s = { 0 };
	struct uffdm_handler_config cfg = { .threads = 2, .fault = stamp, .arg = &s };
	struct uffdm_handler *h, *h2;
	struct uffdm_stats st;
	size_t page = case_page_size(mc);
	int nreg = mc->backing == UFFDM_SHMEM ? NREG : 2;

	for (int i = 0; i < nreg; i++)
		s.r[i] = registered_region(u, mc, npages, 0);
	assert_int_equal(uffdm_handler_start(&h, u, NULL, &cfg), 0);
	/* One reader per descriptor: a second handler would fail the first's faults. */
	assert_int_equal(uffdm_handler_start(&h2, u, s.r[0], &cfg), -EBUSY);
	for (int i = nreg - 1; i >= 0; i--)
		assert_int_equal(uffdm_handler_region_add(h, s.r[i]), 0);
	assert_int_equal(uffdm_handler_region_add(h, s.r[0]), -EEXIST);
	assert_int_equal(uffdm_handler_region_add(h, NULL), -EINVAL);
	for (int i = 0; i < nreg; i++) {
		const char *view = uffdm_region_view(s.r[i]);

		for (size_t p = 0; p < npages; p++)
			if (!check_page(view + p * page, page, (size_t)i * 100 + p))
				fail_msg("region %d page %zu: wrong content", i, p);
	}
	assert_int_equal(uffdm_handler_region_remove(h, s.r[3 % nreg]), 0);
	assert_int_equal(uffdm_handler_region_remove(h, s.r[3 % nreg]), -ENOENT);
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	assert_int_equal(s.wrong, 0);
	for (int i = 0; i < nreg; i++)
		assert_int_equal(s.calls[i], npages);
	assert_int_equal(st.outside, 0);
	assert_int_equal(st.fills, (uint64_t)nreg * npages);
	put_all();
}

static int later(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return UFFDM_FILL_LATER;
}

static void *touch_first(void *arg)
{
	static char seen;

	seen = *(volatile char *)uffdm_region_view(arg);
	return &seen;
}

/* A region with a deferred page cannot leave: -EBUSY, nothing changed. */
static void test_remove_busy(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = later };
	struct uffdm_handler *h;
	pthread_t pt;

	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	assert_int_equal(pthread_create(&pt, NULL, touch_first, r), 0);
	for (int i = 0; i < 20000 && uffdm_region_page_state(r, 0) != UFFDM_PAGE_DEFERRED; i++)
		usleep(500);
	assert_int_equal(uffdm_handler_region_remove(h, r), -EBUSY);
	assert_ptr_equal(uffdm_region_handler(r), h);
	assert_int_equal(uffdm_handler_complete(h, r, 0, uffdm_region_page_size(r), 0), 0);
	pthread_join(pt, NULL);
	assert_int_equal(uffdm_handler_region_remove(h, r), 0);
	assert_null(uffdm_region_handler(r));
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	put_all();
}

/* A region served by one handler cannot join another's. */
static void test_busy(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u1 = open_uffd(0, 0), *u2 = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u1, mc, 1, 0);
	struct seen s = { .r = { r } };
	struct uffdm_handler_config cfg = { .threads = 1, .fault = stamp, .arg = &s };
	struct uffdm_handler *h1, *h2;

	assert_int_equal(uffdm_handler_start(&h1, u1, r, &cfg), 0);
	assert_int_equal(uffdm_handler_start(&h2, u2, NULL, &cfg), 0);
	assert_int_equal(uffdm_handler_region_add(h2, r), -EBUSY);
	assert_int_equal(uffdm_handler_region_remove(h2, r), -ENOENT);
	assert_int_equal(uffdm_handler_stop(h2, NULL), 0);
	assert_int_equal(uffdm_handler_stop(h1, NULL), 0);
	put_all();
}

/* OUTSIDE_EVENT: the event callback gets the fault and owns it (resolves it here). */
struct outside {
	struct uffdm *u;
	uint64_t addr;
	enum uffdm_event_kind kind;
	size_t page;
};

static void on_event(void *arg, const struct uffdm_event *ev)
{
	struct outside *o = arg;

	o->addr = ev->addr;
	o->kind = ev->kind;
	uffdm_resolve(o->u, (void *)(uintptr_t)(ev->addr & ~(uint64_t)(o->page - 1)), o->page,
		      NULL, 0, NULL);
}

static void test_outside_event(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *a = registered_region(u, mc, 1, 0);
	struct uffdm_region *b = registered_region(u, mc, 1, 0);
	struct outside o = { .u = u, .page = case_page_size(mc) };
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = stamp, .event = on_event, .arg = &o,
		.flags = UFFDM_HANDLER_OUTSIDE_EVENT,
	};
	struct uffdm_handler *h;
	struct uffdm_stats st;

	cfg.event = NULL;
	assert_int_equal(uffdm_handler_start(&h, u, a, &cfg), -EINVAL);	/* needs event */
	cfg.event = on_event;
	/* b is nobody's: its fault goes to on_event, never to a's callback */
	assert_int_equal(uffdm_handler_start(&h, u, a, &cfg), 0);
	((char *)uffdm_region_backing(b))[0] = 'b';
	assert_int_equal(*(volatile char *)uffdm_region_view(b), 'b');
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	assert_int_equal(o.addr, (uintptr_t)uffdm_region_view(b));
	assert_int_equal(o.kind, UFFDM_EVENT_MINOR);
	assert_int_equal(st.outside, 1);
	assert_int_equal(st.fills, 0);
	put_all();
}

/* Without OUTSIDE_EVENT a fault outside every region is failed; region a untouched. */
struct fail_case {
	const struct mem_case *mc;
	unsigned int flags;
};

static int noop_fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return 0;
}

static int touch_outside(void *arg)
{
	const struct fail_case *fc = arg;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = noop_fill, .flags = fc->flags };
	struct uffdm_region *a, *b;
	struct uffdm_handler *h;
	struct uffdm *u;

	if (uffdm_open(&u, 0, 0) ||
	    uffdm_region_create(&a, fc->mc->backing, case_page_size(fc->mc)) ||
	    uffdm_region_create(&b, fc->mc->backing, case_page_size(fc->mc)) ||
	    uffdm_region_populate(a, 0, uffdm_region_size(a)) ||
	    uffdm_region_populate(b, 0, uffdm_region_size(b)) ||
	    uffdm_region_register(u, a, 0, NULL) || uffdm_region_register(u, b, 0, NULL) ||
	    uffdm_handler_start(&h, u, a, &cfg))
		return 3;
	if (uffdm_region_page_state(a, 0) != UFFDM_PAGE_EMPTY)
		return 4;
	return *(volatile char *)uffdm_region_view(b) == 0 ? 1 : 2;
}

static void expect_outside_sigbus(const struct mem_case *mc, unsigned int flags)
{
	struct fail_case fc = { mc, flags };

	expect_child_sigbus(mc, 2, touch_outside, &fc);
}

static void test_outside_fails(void **state)
{
	expect_outside_sigbus(need_case(state), 0);
}

static void test_outside_fails_sigbus_fd(void **state)
{
	expect_outside_sigbus(need_case(state), UFFDM_HANDLER_SIGBUS_FD);
}

/*
 * A fault outside every region on hugetlbfs memory, SIGBUS-descriptor
 * path (6.1's only one): the fence must be the whole huge page, aligned
 * (a 4 KiB fence inside a hugetlbfs mapping is refused, and the thread
 * faulted again for ever: 6.1 guests' hang).  Needs no huge page pool: a
 * MAP_NORESERVE hugetlbfs mapping registered MISSING sends its first fault
 * to the userfaultfd before any huge page is allocated.  The child checks
 * after its SIGBUS that the fence is exactly the faulting huge page: the
 * mapping around the address is [huge-aligned, +huge), and the pages
 * either side are still the hugetlbfs mapping.
 */
#define HUGE_2M (2UL << 20)
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)	/* MAP_HUGE_SHIFT */
#endif

static sigjmp_buf outside_jmp;
static void *outside_si_addr;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)sig; (void)uc;
	outside_si_addr = si->si_addr;
	siglongjmp(outside_jmp, 1);
}

/* The mapping holding p in /proc/self/maps: [*start, *end). */
static int mapping_of(uintptr_t p, unsigned long *start, unsigned long *end)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	int ret = -1;

	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", start, end) == 2 && p >= *start && p < *end)
			ret = 0;
	fclose(f);
	return ret;
}

static int touch_outside_huge(void *arg)
{
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = noop_fill, .flags = UFFDM_HANDLER_SIGBUS_FD,
	};
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
	unsigned long s0, e0, s1, e1, s2, e2;
	struct uffdm_region *a;
	struct uffdm_handler *h;
	struct uffdm *u;
	char *huge, *p;

	(void)arg;
	huge = mmap(NULL, 3 * HUGE_2M, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB | MAP_NORESERVE, -1, 0);
	if (huge == MAP_FAILED)
		return 77;	/* no 2 MiB hugetlbfs at all (arm64 with 64 KiB pages) */
	if (uffdm_open(&u, 0, 0) || uffdm_region_create(&a, UFFDM_SHMEM, 4096) ||
	    uffdm_region_populate(a, 0, uffdm_region_size(a)) ||
	    uffdm_region_register(u, a, 0, NULL) ||
	    uffdm_range_register(u, huge, 3 * HUGE_2M,
				 UFFDM_REGISTER_MISSING | UFFDM_REGISTER_NO_MINOR, NULL) ||
	    uffdm_handler_start(&h, u, a, &cfg))
		return 3;
	p = huge + HUGE_2M + 12345;	/* inside the middle huge page, not aligned */
	if (sigaction(SIGBUS, &sa, NULL))
		return 4;
	if (!sigsetjmp(outside_jmp, 1)) {
		(void)*(volatile char *)p;
		return 5;	/* read something: never */
	}
	if (outside_si_addr != p)
		return 6;
	if (mapping_of((uintptr_t)p, &s1, &e1) || mapping_of((uintptr_t)huge, &s0, &e0) ||
	    mapping_of((uintptr_t)huge + 2 * HUGE_2M, &s2, &e2))
		return 7;
	if (s1 != (uintptr_t)huge + HUGE_2M || e1 != (uintptr_t)huge + 2 * HUGE_2M)
		return 8;	/* not the whole huge page, aligned */
	if (e0 != s1 || s2 != e1)
		return 9;	/* a neighbour was taken too */
	if (!sigsetjmp(outside_jmp, 1)) {
		(void)*(volatile char *)(huge + HUGE_2M);	/* later: SIGBUS again */
		return 10;
	}
	return 0;
}

static void test_outside_hugetlb_fence(void **state)
{
	struct child_result res = run_child(touch_outside_huge, NULL, 20);

	(void)state;
	if (res.exited && res.status == 77)
		skip();
	if (res.signal == SIGALRM)
		fail_msg("faulting thread hung: the watchdog fired");
	assert_false(res.signal);
	assert_int_equal(res.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_many),
		CROSS(test_busy),
		CROSS(test_remove_busy),
		CROSS(test_outside_event),
		CROSS(test_outside_fails),
		CROSS(test_outside_fails_sigbus_fd),
		cmocka_unit_test(test_outside_hugetlb_fence),
	};

	return cmocka_run_group_tests_name("regions", tests, NULL, NULL);
}

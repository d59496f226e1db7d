// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * While a REMOVE event is unread the kernel refuses CONTINUE with EAGAIN;
 * uffdm_resolve() reads the event (into the caller's spill) and retries.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include "common.h"

struct zapper {
	struct uffdm_region *r;
	int ret;
	pthread_t pt;
};

/* MADV_DONTNEED posts REMOVE and blocks until someone reads it. */
static void *zap(void *arg)
{
	struct zapper *z = arg;

	z->ret = uffdm_region_zap(z->r, 0, uffdm_region_page_size(z->r));
	return NULL;
}

/* Once the REMOVE is queued (mmap_changing is set first), CONTINUE must refuse. */
static ssize_t continue_until_eagain(struct uffdm *u, char *addr, size_t page)
{
	struct pollfd pfd = { .fd = uffdm_fd(u), .events = POLLIN };

	assert_int_equal(poll(&pfd, 1, 10000), 1);
	return uffdm_continue(u, addr, page, 0);
}

/* A region with a REMOVE event posted for page 0 and not read yet. */
struct fixture {
	struct uffdm *u;
	struct uffdm_region *r;
	size_t page;
	char *view;
	struct zapper z;
};

static void remove_pending(void **state, struct fixture *f)
{
	const struct mem_case *mc = need_case(state);

	f->u = open_uffd(UFFDM_OPEN_NONBLOCK, UFFD_FEATURE_EVENT_REMOVE);
	f->r = registered_region(f->u, mc, 2, 0);
	f->page = uffdm_region_page_size(f->r);
	f->view = uffdm_region_view(f->r);
	f->z = (struct zapper){ .r = f->r };
	assert_int_equal(pthread_create(&f->z.pt, NULL, zap, &f->z), 0);
	assert_int_equal(continue_until_eagain(f->u, f->view + f->page, f->page), -EAGAIN);
}

/* Once the event is read, the zapper's madvise returns; then page 1 maps. */
static void finish(struct fixture *f)
{
	pthread_join(f->z.pt, NULL);
	assert_int_equal(f->z.ret, 0);
	assert_int_equal(uffdm_resolve(f->u, f->view + f->page, f->page, NULL, 0, NULL) >= 0, 1);
	put_region(f->r);
	put_uffd(f->u);
}

static void test_eagain_read_retry(void **state)
{
	struct uffdm_event ev[4];
	struct fixture f;

	remove_pending(state, &f);
	assert_int_equal(uffdm_events_read(f.u, ev, 4, 0), 1);
	assert_int_equal(ev[0].kind, UFFDM_EVENT_REMOVE);
	assert_int_equal(ev[0].addr, (uintptr_t)f.view);
	assert_int_equal(ev[0].end, (uintptr_t)f.view + f.page);
	finish(&f);
}

static void test_eagain_resolve_drains(void **state)
{
	struct uffdm_event spill[4];
	unsigned int n = 0;
	struct fixture f;

	remove_pending(state, &f);
	/* No room to read the event into: refused, not spun on. */
	assert_int_equal(uffdm_resolve(f.u, f.view + f.page, f.page, NULL, 0, NULL), -EAGAIN);
	assert_int_equal(uffdm_resolve(f.u, f.view + f.page, f.page, spill, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(spill[0].kind, UFFDM_EVENT_REMOVE);
	finish(&f);
}

/*
 * The handler meets EAGAIN itself: the callback starts a zap of page 0 and
 * returns only once the REMOVE is queued, so the CONTINUE that follows is
 * refused; the handler must read the REMOVE, pass it to the event
 * callback, and map the page after all.
 */
struct race {
	struct uffdm *u;
	struct zapper z;
	int started;	/* z is set: the kernel orders it, but tools cannot see that */
	int removes;
};

static int zap_first(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct race *rc = arg;
	struct pollfd pfd = { .fd = uffdm_fd(rc->u), .events = POLLIN };

	(void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, uffdm_region_page_size(r), 1);
	rc->z = (struct zapper){ .r = r };
	if (pthread_create(&rc->z.pt, NULL, zap, &rc->z))
		return -EAGAIN;
	__atomic_store_n(&rc->started, 1, __ATOMIC_RELEASE);
	return poll(&pfd, 1, 10000) == 1 ? 0 : -ETIMEDOUT;
}

static void count_remove(void *arg, const struct uffdm_event *ev)
{
	if (ev->kind == UFFDM_EVENT_REMOVE)
		__atomic_fetch_add(&((struct race *)arg)->removes, 1, __ATOMIC_RELAXED);
}

static void test_eagain_handler(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct race rc = { .u = open_uffd(UFFDM_OPEN_NONBLOCK, UFFD_FEATURE_EVENT_REMOVE) };
	struct uffdm_region *r = registered_region(rc.u, mc, 2, 0);
	size_t page = uffdm_region_page_size(r);
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = zap_first, .event = count_remove, .arg = &rc,
	};
	struct uffdm_handler *h;
	struct uffdm_stats st;

	assert_int_equal(uffdm_handler_start(&h, rc.u, r, &cfg), 0);
	assert_true(check_page((char *)uffdm_region_view(r) + page, page, 1));
	assert_int_equal(__atomic_load_n(&rc.started, __ATOMIC_ACQUIRE), 1);
	pthread_join(rc.z.pt, NULL);
	assert_int_equal(rc.z.ret, 0);
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	print_message("# minor %llu eagain %llu events %llu\n", (unsigned long long)st.minor,
		      (unsigned long long)st.eagain, (unsigned long long)st.events);
	assert_int_equal(st.minor, 1);
	assert_int_equal(st.resolved, 1);
	assert_true(st.eagain >= 1);
	assert_int_equal(st.events, 1);
	assert_int_equal(rc.removes, 1);
	put_region(r);
	put_uffd(rc.u);
}

/*
 * More faults pending than the handler's spill holds, behind an unread
 * REMOVE: the kernel hands out faults before events, so the handler must
 * make room (wake spilled faults unresolved) to ever reach the REMOVE.
 * The case asserts that it did (st.requeued), not only that all ended well.
 */
/* More threads than the spill holds even after a first batch took 64. */
#define CROWD 200

struct crowd {
	struct uffdm_region *r;
	struct zapper z;
	int first, started, removes;
	int arrived;	/* crowd members about to touch their page */
};

static int zap_then_stamp(void *arg, struct uffdm_region *r, size_t off,
			  const struct uffdm_event *ev)
{
	struct crowd *c = arg;
	size_t page = uffdm_region_page_size(r);

	(void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, page, off / page);
	if (__atomic_exchange_n(&c->first, 1, __ATOMIC_RELAXED))
		return 0;
	c->z = (struct zapper){ .r = r };
	if (pthread_create(&c->z.pt, NULL, zap, &c->z))
		return -EAGAIN;
	__atomic_store_n(&c->started, 1, __ATOMIC_RELEASE);
	/* Let the whole crowd and the REMOVE queue up (slow under TSan or TCG). */
	for (int i = 0; i < 10000 && __atomic_load_n(&c->arrived, __ATOMIC_ACQUIRE) < CROWD; i++)
		usleep(1000);
	usleep(200000);
	return 0;
}

static void crowd_remove(void *arg, const struct uffdm_event *ev)
{
	if (ev->kind == UFFDM_EVENT_REMOVE)
		__atomic_fetch_add(&((struct crowd *)arg)->removes, 1, __ATOMIC_RELAXED);
}

struct member {
	struct crowd *c;
	struct uffdm_region *r;
	size_t i;
	bool ok;
	pthread_t pt;
};

static void *touch_one(void *arg)
{
	struct member *m = arg;
	size_t page = uffdm_region_page_size(m->r);

	__atomic_fetch_add(&m->c->arrived, 1, __ATOMIC_RELEASE);
	m->ok = check_page((char *)uffdm_region_view(m->r) + m->i * page, page, m->i);
	return NULL;
}

static void test_eagain_crowd(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(UFFDM_OPEN_NONBLOCK, UFFD_FEATURE_EVENT_REMOVE);
	/* threads share pages: each fault is a message all the same */
	size_t npages = mc->backing == UFFDM_SHMEM ? 80 : 16;
	struct uffdm_region *r = registered_region(u, mc, npages + 1, 0);
	struct crowd c = { .r = r };
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = zap_then_stamp, .event = crowd_remove, .arg = &c,
	};
	static struct member m[CROWD];
	struct uffdm_handler *h;
	struct uffdm_stats st;

	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	for (size_t i = 0; i < CROWD; i++) {
		m[i] = (struct member){ .c = &c, .r = r, .i = i % npages + 1 };
		assert_int_equal(pthread_create(&m[i].pt, NULL, touch_one, &m[i]), 0);
	}
	for (size_t i = 0; i < CROWD; i++) {
		pthread_join(m[i].pt, NULL);
		assert_true(m[i].ok);
	}
	assert_int_equal(__atomic_load_n(&c.started, __ATOMIC_ACQUIRE), 1);
	pthread_join(c.z.pt, NULL);
	assert_int_equal(c.z.ret, 0);
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	print_message("# minor %llu resolved %llu eagain %llu events %llu requeued %llu\n",
		      (unsigned long long)st.minor, (unsigned long long)st.resolved,
		      (unsigned long long)st.eagain, (unsigned long long)st.events,
		      (unsigned long long)st.requeued);
	assert_true(st.requeued > 0);
	/* Faults woken unresolved come back: at least one per page, none failed. */
	assert_true(st.minor >= npages);
	assert_int_equal(st.fills, npages);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.events, 1);
	assert_int_equal(c.removes, 1);
	put_region(r);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_eagain_read_retry),
		CROSS(test_eagain_resolve_drains),
		CROSS(test_eagain_handler),
		CROSS(test_eagain_crowd),
	};

	return cmocka_run_group_tests_name("eagain", tests, NULL, NULL);
}

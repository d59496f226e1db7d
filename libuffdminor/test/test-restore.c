// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The "lazy snapshot restore" a new user writes from the man pages alone:
 * a memory image in a file; a region registered for minor faults; the
 * obvious callback (read the page from the file into the backing view,
 * return 0); 4 threads touch every page, then each writes its marker into
 * every page.  With the callback run once per fault message this lost
 * 35-56 thousand of 65 536 markers; fill-once must lose none.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define WRITERS 4

struct restore {
	int image;		/* the snapshot file */
	struct uffdm_region *r;
	size_t page, npages;
	pthread_barrier_t touched;
	unsigned int calls;	/* callbacks run */
};

struct writer {
	struct restore *rs;
	unsigned int id;
	pthread_t pt;
};

/* The obvious callback: fill the page from the image, return 0. */
static int restore_page(void *arg, struct uffdm_region *r, size_t off,
			const struct uffdm_event *ev)
{
	struct restore *rs = arg;
	size_t page = uffdm_region_page_size(r);
	char *dst = (char *)uffdm_region_backing(r) + off;

	(void)ev;
	__atomic_fetch_add(&rs->calls, 1, __ATOMIC_RELAXED);
	return pread(rs->image, dst, page, (off_t)off) == (ssize_t)page ? 0 : -EIO;
}

/* Touch every page (reading it back from the image), then write a marker in each. */
static void *writer(void *arg)
{
	struct writer *w = arg;
	struct restore *rs = w->rs;
	volatile char *view = uffdm_region_view(rs->r);
	unsigned int sum = 0;

	for (size_t i = 0; i < rs->npages; i++) {
		size_t p = (i + w->id * rs->npages / WRITERS) % rs->npages;

		sum += view[p * rs->page + 64];
	}
	(void)sum;
	for (size_t i = 0; i < rs->npages; i++) {
		size_t p = (i * 7 + w->id) % rs->npages;

		view[p * rs->page + w->id] = (char)(0xa0 + w->id);
	}
	return NULL;
}

/* An image whose byte 64 of page i is (char)i, the rest a fixed pattern. */
static int make_image(size_t page, size_t npages)
{
	char tmpl[] = "/tmp/uffdm-image-XXXXXX";
	char *buf = malloc(page);
	int fd = mkstemp(tmpl);

	assert_non_null(buf);
	assert_true(fd >= 0);
	unlink(tmpl);
	memset(buf, 0x5a, page);
	for (size_t i = 0; i < npages; i++) {
		buf[64] = (char)i;
		assert_int_equal(pwrite(fd, buf, page, (off_t)(i * page)), (ssize_t)page);
	}
	free(buf);
	return fd;
}

static void test_restore(void **state)
{
	const struct mem_case *mc = need_case(state);
	size_t page = case_page_size(mc);
	/* 64 MiB of shmem; hugetlb what a small pool holds */
	size_t npages = mc->backing == UFFDM_SHMEM ? (64u << 20) / page : 16;
	struct restore rs = { .page = page, .npages = npages };
	struct uffdm_handler_config cfg = { .threads = 4, .fault = restore_page, .arg = &rs };
	struct writer w[WRITERS];
	struct uffdm_handler *h;
	struct uffdm_stats st;
	struct uffdm *u = open_uffd(0, 0);
	const char *view;
	size_t lost = 0;

	rs.r = registered_region(u, mc, npages, 0);
	rs.image = make_image(page, npages);
	assert_int_equal(uffdm_handler_start(&h, u, rs.r, &cfg), 0);
	for (unsigned int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){ .rs = &rs, .id = i };
		assert_int_equal(pthread_create(&w[i].pt, NULL, writer, &w[i]), 0);
	}
	for (unsigned int i = 0; i < WRITERS; i++)
		pthread_join(w[i].pt, NULL);
	/* The documented teardown: faulting threads, handler, registration, descriptor, region. */
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	view = uffdm_region_view(rs.r);
	for (size_t p = 0; p < npages; p++) {
		for (unsigned int i = 0; i < WRITERS; i++)
			lost += view[p * page + i] != (char)(0xa0 + i);
		if (view[p * page + 64] != (char)p)
			fail_msg("page %zu: image byte lost", p);
	}
	print_message("%zu pages: %u callbacks, %llu fault messages, %llu duplicates, "
		      "%zu of %zu markers lost\n", npages, rs.calls,
		      (unsigned long long)st.messages, (unsigned long long)st.duplicates,
		      lost, npages * WRITERS);
	assert_int_equal(lost, 0);
	assert_int_equal(rs.calls, npages);
	assert_int_equal(st.fills, npages);
	assert_true(st.resolved >= npages);
	assert_int_equal(st.failed, 0);
	close(rs.image);
	assert_int_equal(uffdm_region_unregister(u, rs.r), 0);
	put_uffd(u);
	put_region(rs.r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_restore),
	};

	return cmocka_run_group_tests_name("restore", tests, NULL, NULL);
}

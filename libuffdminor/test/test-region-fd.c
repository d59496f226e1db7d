// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm_region_from_fd: a region over an existing memfd or hugetlbfs file
 * at an offset, with a view address given as a number.  Bad input is a
 * clear errno and leaves no descriptor or mapping behind; a good one
 * serves faults at that offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define NPAGES 4

static int case_memfd(const struct mem_case *mc, size_t size)
{
	unsigned int fl = MFD_CLOEXEC | (mc->backing == UFFDM_SHMEM ? 0 : MFD_HUGETLB);
	int fd = memfd_create("region-fd", fl);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

static void expect_refused(int fd, off_t off, size_t size, uintptr_t view, int err)
{
	unsigned int fds = open_fd_count(), maps = mapping_count();
	struct uffdm_region *r = NULL;

	assert_int_equal(uffdm_region_from_fd(&r, fd, off, size, view, 0), err);
	assert_null(r);
	assert_int_equal(open_fd_count(), fds);
	assert_int_equal(mapping_count(), maps);
}

static void test_region_fd_bad(void **state)
{
	const struct mem_case *mc = *state;
	size_t page = case_page_size(mc);
	uintptr_t view = 0x7f0000000000ul;
	struct uffdm_region *r = NULL;
	int fd, pfd;

	put_region(make_region(mc, NPAGES));	/* skip on a short pool */
	fd = case_memfd(mc, NPAGES * page);
	mapping_count();	/* let stdio make its buffers before we count */
	expect_refused(fd, 0, (NPAGES + 1) * page, view, -ERANGE);	/* file too short */
	expect_refused(fd, (off_t)page, NPAGES * page, view, -ERANGE);
	expect_refused(fd, 0, NPAGES * page, view + page / 2, -EINVAL);	/* view unaligned */
	expect_refused(fd, (off_t)page / 2, page, view, -EINVAL);	/* offset unaligned */
	expect_refused(fd, 0, page + 1, view, -EINVAL);			/* size not whole pages */
	expect_refused(fd, 0, 0, view, -EINVAL);
	expect_refused(fd, 0, page, 0, -EINVAL);
	expect_refused(fd, -(off_t)page, page, view, -EINVAL);
	expect_refused(fd, 0, page, UINTPTR_MAX - page + 1, -EINVAL);	/* wraps */
	expect_refused(-1, 0, page, view, -EBADF);
	pfd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);		/* not shmem/hugetlbfs */
	expect_refused(pfd, 0, page, view, -EINVAL);
	close(pfd);
	assert_int_equal(uffdm_region_from_fd(&r, fd, 0, page, view, 1), -EINVAL);
	assert_int_equal(uffdm_region_from_fd(NULL, fd, 0, page, view, 0), -EINVAL);
	close(fd);
}

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	size_t page = uffdm_region_page_size(r);

	(void)arg; (void)ev;
	/* page numbers of the file, not of the region: the offset must be honoured */
	fill_page((char *)uffdm_region_backing(r) + off, page,
		  (size_t)uffdm_region_offset(r) / page + off / page);
	return 0;
}

/*
 * The last NPAGES-1 pages of a file, mapped here at a view we register
 * ourselves, on either failure path (flags: UFFDM_HANDLER_SIGBUS_FD is
 * 6.1's only one).  The descriptor is this process's, so the view is in
 * this mm and its failed pages can be fenced here: no shared states needed.
 */
static void region_fd_offset(void **state, unsigned int flags)
{
	const struct mem_case *mc = need_case(state);
	size_t page = case_page_size(mc), n = NPAGES - 1;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = stamp, .flags = flags };
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_handler *h;
	struct uffdm_region *r;
	struct uffdm_stats st;
	char *view;
	int fd;

	put_region(make_region(mc, NPAGES));
	fd = case_memfd(mc, NPAGES * page);
	assert_int_equal(fallocate(fd, 0, 0, (off_t)(NPAGES * page)), 0);
	view = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)page);
	assert_true(view != MAP_FAILED);
	assert_int_equal(uffdm_region_from_fd(&r, fd, (off_t)page, n * page, (uintptr_t)view, 0), 0);
	close(fd);	/* the region keeps its own */
	assert_null(uffdm_region_view(r));	/* not mapped by the region */
	assert_true(uffdm_region_addr(r) == (uintptr_t)view);
	assert_int_equal(uffdm_region_offset(r), page);
	assert_int_equal(uffdm_region_page_size(r), page);
	assert_int_equal(uffdm_region_zap(r, 0, page), -EOPNOTSUPP);	/* not our view to zap */
	assert_int_equal(uffdm_region_register(u, r, 0, NULL), 0);
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	for (size_t i = 0; i < n; i++)
		assert_true(check_page(view + i * page, page, i + 1));
	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	assert_int_equal(st.resolved, n);
	put_uffd(u);
	uffdm_region_destroy(r);
	assert_int_equal(munmap(view, n * page), 0);
}

static void test_region_fd_offset(void **state)
{
	region_fd_offset(state, 0);
}

static void test_region_fd_offset_sigbus_fd(void **state)
{
	region_fd_offset(state, UFFDM_HANDLER_SIGBUS_FD);
}

/* Two regions over one file whose views overlap in the other mm: the second is refused. */
static void region_fd_overlap(void **state, unsigned int flags)
{
	const struct mem_case *mc = need_case(state);
	size_t page = case_page_size(mc);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = stamp, .flags = flags };
	uintptr_t view = 0x7f0000000000ul;
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *a, *b;
	struct uffdm_handler *h;
	int fd;

	put_region(make_region(mc, NPAGES));
	fd = case_memfd(mc, NPAGES * page);
	assert_int_equal(uffdm_region_from_fd(&a, fd, 0, 2 * page, view, 0), 0);
	assert_int_equal(uffdm_region_from_fd(&b, fd, (off_t)page, 2 * page, view + page, 0), 0);
	close(fd);
	assert_int_equal(uffdm_handler_start(&h, u, a, &cfg), 0);
	assert_int_equal(uffdm_handler_region_add(h, b), -EINVAL);
	assert_int_equal(uffdm_handler_region_remove(h, b), -ENOENT);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	uffdm_region_destroy(b);
	uffdm_region_destroy(a);
	put_uffd(u);
}

static void test_region_fd_overlap(void **state)
{
	region_fd_overlap(state, 0);
}

static void test_region_fd_overlap_sigbus_fd(void **state)
{
	region_fd_overlap(state, UFFDM_HANDLER_SIGBUS_FD);
}

static int refuse(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return -EIO;
}

/*
 * A page of such a region that the callback fails, SIGBUS-descriptor path:
 * fenced here: SIGBUS, not a hang, not a read (a child dies of it).
 */
static int touch_failed(void *arg)
{
	const struct mem_case *mc = arg;
	size_t page = case_page_size(mc);
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = refuse, .flags = UFFDM_HANDLER_SIGBUS_FD,
	};
	unsigned int fl = MFD_CLOEXEC | (mc->backing == UFFDM_SHMEM ? 0 : MFD_HUGETLB);
	struct uffdm_handler *h;
	struct uffdm_region *r;
	struct uffdm *u;
	char *view;
	int fd = memfd_create("region-fd", fl);

	if (fd < 0 || ftruncate(fd, (off_t)(2 * page)) || fallocate(fd, 0, 0, (off_t)(2 * page)))
		return 3;
	view = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (view == MAP_FAILED || uffdm_open(&u, 0, 0) ||
	    uffdm_region_from_fd(&r, fd, 0, 2 * page, (uintptr_t)view, 0) ||
	    uffdm_region_register(u, r, 0, NULL) || uffdm_handler_start(&h, u, r, &cfg))
		return 4;
	(void)*(volatile char *)view;
	return 1;
}

static void test_region_fd_fails_sigbus_fd(void **state)
{
	const struct mem_case *mc = need_case(state);

	expect_child_sigbus(mc, NPAGES, touch_failed, (void *)mc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_region_fd_bad),
		CROSS(test_region_fd_offset),
		CROSS(test_region_fd_overlap),
		CROSS(test_region_fd_offset_sigbus_fd),
		CROSS(test_region_fd_overlap_sigbus_fd),
		CROSS(test_region_fd_fails_sigbus_fd),
	};

	return cmocka_run_group_tests_name("region-fd", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm_move (UFFDIO_MOVE, 6.8+): a MISSING fault on anonymous private
 * memory resolved by moving a page in, not copying it; the source is left
 * a hole.  Probed: -EOPNOTSUPP on older kernels, and a FAIL on a 6.8+
 * x86_64/arm64 kernel that lacks it.  Shared memory is refused (-EINVAL):
 * the kernel moves anonymous private pages only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

static bool arch_has_move(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

/* A uffd with MOVE, or skip (older kernel) or fail (one that must have it). */
static struct uffdm *move_uffd(void)
{
	struct uffdm_probe p = probe();

	if (!uffdm_probe_move(&p)) {
		if (kernel_at_least(6, 8) && arch_has_move())
			fail_msg("Linux 6.8+ on this architecture must offer UFFD_FEATURE_MOVE");
		SKIP_BECAUSE("kernel lacks UFFDIO_MOVE (Linux 6.8+)");
	}
	return open_uffd(0, UFFD_FEATURE_MOVE);
}

static char *anon(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

struct reader {
	volatile char *addr;
	char seen;
	pthread_t tid;
};

static void *read_one(void *arg)
{
	struct reader *r = arg;

	r->seen = *r->addr;
	return NULL;
}

static void test_move_fault(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct uffdm *u = move_uffd();
	char *src = anon(page), *dst = anon(page);
	struct reader rd = { .addr = dst };
	struct uffdm_event ev;

	(void)state;
	memset(src, 0x6d, page);
	assert_int_equal(uffdm_range_register(u, dst, page, UFFDM_REGISTER_MISSING |
					      UFFDM_REGISTER_NO_MINOR, NULL), 0);
	assert_int_equal(pthread_create(&rd.tid, NULL, read_one, &rd), 0);
	assert_int_equal(uffdm_events_read(u, &ev, 1, 0), 1);
	assert_int_equal(ev.kind, UFFDM_EVENT_MISSING);
	assert_true(ev.addr >= (uintptr_t)dst && ev.addr < (uintptr_t)dst + page);
	assert_int_equal(uffdm_move(u, dst, src, page, 0), page);
	pthread_join(rd.tid, NULL);
	assert_int_equal(rd.seen, 0x6d);
	assert_int_equal(src[0], 0);	/* moved, not copied: a hole now */
	put_uffd(u);
	munmap(src, page);
	munmap(dst, page);
}

static void test_move_errors(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct uffdm *u = move_uffd();
	char *src = anon(3 * page), *dst = anon(3 * page);
	ssize_t n;

	(void)state;
	memset(src, 0x3c, 2 * page);	/* page 2 stays a hole */
	assert_int_equal(uffdm_range_register(u, dst, 3 * page, UFFDM_REGISTER_MISSING |
					      UFFDM_REGISTER_NO_MINOR, NULL), 0);
	assert_int_equal(uffdm_move(u, dst, src, page, 0), page);	/* no fault needed */
	assert_int_equal(dst[0], 0x3c);
	assert_int_equal(uffdm_move(u, dst, src + page, page, 0), -EEXIST);	/* dst mapped */
	assert_int_equal(uffdm_move(u, dst + page, src + 2 * page, page, 0), -ENOENT);	/* hole */
	n = uffdm_move(u, dst + 2 * page, src + 2 * page, page, UFFDM_MOVE_ALLOW_SRC_HOLES);
	assert_int_equal(n, page);	/* the hole is skipped, counted as done */
	assert_int_equal(uffdm_move(u, dst, src, page, 1u << 9), -EINVAL);
	assert_int_equal(uffdm_move(u, dst, NULL, page, 0), -EINVAL);
	assert_int_equal(uffdm_move(NULL, dst, src, page, 0), -EINVAL);
	put_uffd(u);
	munmap(src, 3 * page);
	munmap(dst, 3 * page);
}

/* Shared memory: the kernel moves anonymous private pages only. */
static void test_move_shared_refused(void **state)
{
	struct uffdm *u = move_uffd();
	struct uffdm_region *r = make_region(&shmem_case, 1);
	size_t page = uffdm_region_page_size(r);
	char *src = anon(page);

	(void)state;
	memset(src, 1, page);
	assert_int_equal(uffdm_region_register(u, r, UFFDM_REGISTER_MISSING |
					       UFFDM_REGISTER_NO_MINOR, NULL), 0);
	assert_int_equal(uffdm_move(u, uffdm_region_view(r), src, page, 0), -EINVAL);
	put_uffd(u);
	put_region(r);
	munmap(src, page);
}

/* Without the feature: -EOPNOTSUPP, never a stray ioctl. */
static void test_move_absent(void **state)
{
	struct uffdm_probe p = probe();
	struct uffdm *u;
	char *a = anon(4096);

	(void)state;
	if (uffdm_probe_move(&p))
		SKIP_BECAUSE("the kernel has UFFDIO_MOVE; the other cases test it");
	u = open_uffd(0, 0);
	assert_int_equal(uffdm_move(u, a, a, 4096, 0), -EOPNOTSUPP);
	put_uffd(u);
	munmap(a, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_move_fault),
		cmocka_unit_test(test_move_errors),
		cmocka_unit_test(test_move_shared_refused),
		cmocka_unit_test(test_move_absent),
	};

	return cmocka_run_group_tests_name("move", tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Soft-dirty tracking: bit 55 of /proc/self/pagemap, cleared for the whole
 * process by writing "4" to /proc/self/clear_refs (CONFIG_MEM_SOFT_DIRTY,
 * x86 only here).
 *
 * Whether it works is probed on a scratch page of our own of the tracked
 * memory's page size, never on the caller's pages: a write there may be a
 * fault a handler must serve (memory registered MINOR), or one that never
 * ends (a page the handler defers or failed).  On hugetlbfs the probe always
 * fails: after clear_refs the kernel shows the bit only for a whole VMA
 * (VM_SOFTDIRTY), never for a written huge page (6.1 to 6.18).
 *
 * Served memory needs nothing more: UFFDIO_CONTINUE installs its pte dirty
 * (pte_mkdirty, which on x86 sets the soft-dirty bit too), so a page mapped
 * after a clear shows as written even if only read: conservative.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "track.h"

#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif

#define PM_SOFT_DIRTY	(1ull << 55)

/* Per page size (log2): 0 not known yet, 1 works, -EOPNOTSUPP does not. */
static int verdict[64];

int uffdm__clear_refs(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, "4", 1) != 1)
		ret = -errno;
	close(fd);
	return ret;
}

static int pm_dirty(int pagemap_fd, const void *p)
{
	uint64_t e = 0;
	off_t off = (off_t)((uintptr_t)p / TRACK_BASE_PAGE * 8);

	if (pread(pagemap_fd, &e, 8, off) != 8)
		return -EIO;
	return !!(e & PM_SOFT_DIRTY);
}

/* A page of our own of that size: shmem for 4 KiB, else hugetlbfs. */
static void *scratch_map(size_t page)
{
	unsigned int mfd = MFD_CLOEXEC;
	void *p = MAP_FAILED;
	int fd;

	if (page != TRACK_BASE_PAGE)
		mfd |= MFD_HUGETLB | ((unsigned int)__builtin_ctzl(page) << MFD_HUGE_SHIFT);
	fd = memfd_create("uffdm-soft-dirty-probe", mfd);
	if (fd < 0)
		return NULL;
	if (!ftruncate(fd, (off_t)page))
		p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/*
 * Written, cleared: the bit must be off; written again: on.  1 or
 * -EOPNOTSUPP, the kernel's answer; 0 when no scratch page could be had
 * (no free huge page), which says nothing about the kernel.
 */
static int probe(int pagemap_fd, size_t page)
{
	volatile uint8_t *p = scratch_map(page);
	int ret = -EOPNOTSUPP;

	if (!p)
		return 0;
	p[0] = 1;
	if (!uffdm__clear_refs() && pm_dirty(pagemap_fd, (void *)p) == 0) {
		p[0] = 2;
		if (pm_dirty(pagemap_fd, (void *)p) == 1)
			ret = 1;
	}
	munmap((void *)p, page);
	return ret;
}

/*
 * 0 where soft-dirty works for memory of that page size, else -EOPNOTSUPP.
 * The kernel's answer does not change, so it is probed once per page size:
 * each probe clears every soft-dirty bit of the process.
 */
int uffdm__sd_usable(int pagemap_fd, size_t page)
{
	unsigned int i;
	int v;

	/* a power of two (the caller checked); the bound is for the compiler */
	if (!page)
		return -EINVAL;
	i = (unsigned int)__builtin_ctzl(page);
	if (i >= sizeof(verdict) / sizeof(verdict[0]))
		return -EINVAL;
	v = __atomic_load_n(&verdict[i], __ATOMIC_ACQUIRE);

	if (!v) {
		v = probe(pagemap_fd, page);
		if (v)
			__atomic_store_n(&verdict[i], v, __ATOMIC_RELEASE);
	}
	return v == 1 ? 0 : -EOPNOTSUPP;
}

/* Bit i of every page with a 4 KiB part soft-dirty; buf holds size / 4 KiB entries. */
int uffdm__sd_collect(int pagemap_fd, const uint8_t *view, size_t size, size_t page,
		      uint64_t *buf, uint8_t *bitmap, bool last)
{
	size_t n4k = size / TRACK_BASE_PAGE, per = page / TRACK_BASE_PAGE;
	off_t off = (off_t)((uintptr_t)view / TRACK_BASE_PAGE * 8);

	if (pread(pagemap_fd, buf, n4k * 8, off) != (ssize_t)(n4k * 8))
		return -EIO;
	for (size_t i = 0; i < n4k; i++)
		if (buf[i] & PM_SOFT_DIRTY)
			track_bit_set(bitmap, i / per);
	/* the last look: nothing will be asked again, so no clearing walk */
	return last ? 0 : uffdm__clear_refs();
}

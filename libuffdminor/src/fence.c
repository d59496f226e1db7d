// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Fences: how a failed page of a view in this process fails for good
 * without UFFDIO_POISON, and how a mapped (write-protected) page fails at
 * all.  The page's mapping is replaced, atomically under the mmap lock, by
 * a shared mapping of an empty, sealed memfd: every access to it is beyond
 * the file's end, a SIGBUS (BUS_ADRERR) for every thread, now and later.
 *
 * The SIGBUS descriptor this replaces needed UNREGISTER then REGISTER:
 * between the two a fault was served from the page cache (a hole read as
 * zeroes, a refused write landed, UNREGISTER's own wake sent the waiters
 * straight into that window), and since 6.x the region could not be
 * unregistered whole afterwards.  A fence has no window, keeps no
 * userfaultfd registration, and a later UNREGISTER skips it.
 *
 * The file offset of a fence is its address, so fences of neighbouring
 * pages merge into one mapping instead of one per page.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC		0x0001U
#define MFD_ALLOW_SEALING	0x0002U
#endif

/* Opened once per descriptor, before any failure needs it (no fd to find then). */
int uffdm__fence_prepare(struct uffdm *u)
{
	int fd, none = -1;

	if (__atomic_load_n(&u->fence_fd, __ATOMIC_ACQUIRE) >= 0)
		return 0;
	fd = memfd_create("uffdm-fence", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* never to grow: no page of it can ever be read */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		close(fd);
		return -errno;
	}
	if (!__atomic_compare_exchange_n(&u->fence_fd, &none, fd, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		close(fd);
	return 0;
}

/*
 * Whether u can fence pages in this process.  Not with EVENT_UNMAP: the
 * mapping replaced posts an UNMAP event and mmap() waits until it is read,
 * which a handler's only thread, the one fencing, never would.
 */
bool uffdm__fence_usable(const struct uffdm *u)
{
	return __atomic_load_n(&u->fence_fd, __ATOMIC_ACQUIRE) >= 0 &&
	       !(u->features & UFFD_FEATURE_EVENT_UNMAP);
}

/*
 * Fence [addr, addr+len) of this process and wake the threads waiting on
 * it: they fault again, on the fence.  The wake comes whatever happened.
 */
int uffdm__fence(struct uffdm *u, void *addr, size_t len)
{
	int fd = __atomic_load_n(&u->fence_fd, __ATOMIC_ACQUIRE);
	void *p = MAP_FAILED;
	int woke;

	if (fd >= 0)
		p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
			 (off_t)(uintptr_t)addr);
	woke = uffdm_wake(u, addr, len);
	if (fd < 0)
		return -EOPNOTSUPP;
	return p == MAP_FAILED ? -errno : woke;
}

/*
 * The page size of this process's mapping that holds addr: smaps's
 * KernelPageSize (every kernel since 2.6.29), so a hugetlbfs mapping's
 * huge page, 4 KiB elsewhere (a THP is still mapped at 4 KiB).  A fence
 * must cover whole pages of it: hugetlbfs refuses to split a mapping off a
 * huge page boundary (mm/hugetlb.c, hugetlb_vm_op_split(): -EINVAL, which
 * 6.1's mmap(MAP_FIXED) reports as -ENOMEM).  -ENOENT: nothing mapped there.
 */
long uffdm__vma_page_size(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	unsigned long start, end, kb;
	bool in = false;
	long ret = -ENOENT;
	size_t cap = 0;
	char *line = NULL, c;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		/* a mapping's first line: "start-end perms ..." */
		if (sscanf(line, "%lx-%lx %c", &start, &end, &c) == 3) {
			if (in)
				break;	/* it had no KernelPageSize line */
			in = a >= start && a < end;
		} else if (in && sscanf(line, "KernelPageSize: %lu kB", &kb) == 1) {
			ret = kb && !(kb & (kb - 1)) ? (long)(kb << 10) : -EINVAL;
			break;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

int uffdm__pagemap_open(void)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/*
 * What pagemap (pm, from uffdm__pagemap_open()) says of the (first small)
 * page at addr: it is mapped, and whether it is uffd-wp write-protected
 * (bit 57, 5.13+).  Unreadable, it counts as not mapped: failing a page
 * that worked is better than leaving one a thread would sleep on.
 */
bool uffdm__page_mapped(int pm, const void *addr, bool *wp)
{
	size_t small = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t ent = 0;

	if (pm < 0 || pread(pm, &ent, sizeof(ent),
			    (off_t)((uintptr_t)addr / small * sizeof(ent))) != (ssize_t)sizeof(ent))
		ent = 0;
	*wp = ent >> 57 & 1;
	return ent >> 63 & 1;
}

/*
 * pagemap's word for each small page is 8 bytes: for small pages one read
 * covers many; a huge page's state is its first small page's.
 */
#define PM_CHUNK	4096

void uffdm__pages_mapped(int pm, const char *addr, size_t n, size_t page, uint8_t *st)
{
	size_t small = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t ent[PM_CHUNK];

	for (size_t i = 0; i < n;) {
		size_t k = page == small ? (n - i < PM_CHUNK ? n - i : PM_CHUNK) : 1;
		off_t at = (off_t)((uintptr_t)(addr + i * page) / small * sizeof(ent[0]));
		ssize_t got = pm < 0 ? -1 : pread(pm, ent, k * sizeof(ent[0]), at);

		for (size_t j = 0; j < k; j++) {
			uint64_t e = got >= (ssize_t)((j + 1) * sizeof(ent[0])) ? ent[j] : 0;

			st[i + j] = (e >> 63 & 1 ? UFFDM_PM_MAPPED : 0) |
				    (e >> 57 & 1 ? UFFDM_PM_WP : 0);
		}
		i += k;
	}
}

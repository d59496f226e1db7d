// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A region over memory someone else made: an existing memfd or hugetlbfs
 * file, an offset and a length, whose registered view is at an address
 * of the process the userfaultfd serves, possibly not this one.  Only the
 * backing view is mapped here (view stays NULL, uaddr holds the address);
 * the address is taken on trust as a number: the kernel checks it against
 * the other mm on every ioctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "internal.h"

#define UFFDM_TMPFS_MAGIC	0x01021994
#define UFFDM_HUGETLBFS_MAGIC	0x958458f6

/* The backing and page size of fd's filesystem: minor faults need shmem or hugetlbfs. */
static int fd_geometry(int fd, enum uffdm_backing *b, size_t *page)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) < 0)
		return -errno;
	if ((unsigned long)sfs.f_type == UFFDM_TMPFS_MAGIC) {
		*b = UFFDM_SHMEM;
		*page = (size_t)sysconf(_SC_PAGESIZE);
		return 0;
	}
	if ((unsigned long)sfs.f_type != UFFDM_HUGETLBFS_MAGIC)
		return -EINVAL;
	*page = (size_t)sfs.f_bsize;
	if (!*page)
		return -EINVAL;
	if (*page == uffdm_backing_page_size(UFFDM_HUGETLB))
		*b = UFFDM_HUGETLB;
	else if (*page == uffdm_backing_page_size(UFFDM_HUGETLB_2M))
		*b = UFFDM_HUGETLB_2M;
	else if (*page == uffdm_backing_page_size(UFFDM_HUGETLB_1G))
		*b = UFFDM_HUGETLB_1G;
	else
		return -EINVAL;
	return 0;
}

static int check_geometry(int fd, off_t offset, size_t size, uintptr_t view, size_t page)
{
	struct stat st;

	if (offset < 0 || (size_t)offset % page || size % page || view % page)
		return -EINVAL;
	if (view + size < view || (uint64_t)offset + size < (uint64_t)offset)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < (uint64_t)offset + size)
		return -ERANGE;	/* the file is shorter than the region */
	return 0;
}

int uffdm_region_from_fd(struct uffdm_region **out, int fd, off_t offset, size_t size,
			 uintptr_t view, unsigned int flags)
{
	struct uffdm_region *r;
	enum uffdm_backing b = UFFDM_SHMEM;
	size_t page = 0;
	int ret;

	if (!out || !size || !view || flags)
		return -EINVAL;
	if (fd < 0)
		return -EBADF;
	ret = fd_geometry(fd, &b, &page);
	if (!ret)
		ret = check_geometry(fd, offset, size, view, page);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->backing = b;
	r->size = size;
	r->page = page;
	r->offset = offset;
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0)
		goto fail;
	if (uffdm__region_init_state(r, view)) {
		errno = ENOMEM;
		goto fail;
	}
	r->backing_view = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, offset);
	if (r->backing_view == MAP_FAILED)
		goto fail;
	*out = r;
	return 0;
fail:
	ret = -errno;
	uffdm__region_free(r);
	return ret;
}

uintptr_t uffdm_region_addr(const struct uffdm_region *r)
{
	return r ? r->uaddr : 0;
}

off_t uffdm_region_offset(const struct uffdm_region *r)
{
	return r ? r->offset : -EINVAL;
}

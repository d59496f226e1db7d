// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * UFFDIO_MOVE (6.8): resolve a MISSING fault by moving the source's pages
 * into the faulting range instead of copying them.  Anonymous private
 * memory only, both sides (the kernel says -EINVAL for shmem, hugetlbfs or
 * a shared mapping); the source is left a hole.
 */
#include <errno.h>
#include <sys/ioctl.h>

#include "internal.h"

ssize_t uffdm_move(struct uffdm *u, void *dst, void *src, size_t len, unsigned int flags)
{
	struct uffdio_move m = { 0 };
	int ret;

	if (!u || !src || (flags & ~(UFFDM_DONTWAKE | UFFDM_MOVE_ALLOW_SRC_HOLES)))
		return -EINVAL;
	ret = uffdm__check_range(dst, len);
	if (ret)
		return ret;
	/* 6.7 and older take request 5 for nothing: -EINVAL, unhelpfully */
	if (!(u->avail & UFFD_FEATURE_MOVE))
		return -EOPNOTSUPP;
	m.dst = (uintptr_t)dst;
	m.src = (uintptr_t)src;
	m.len = len;
	if (flags & UFFDM_DONTWAKE)
		m.mode |= UFFDIO_MOVE_MODE_DONTWAKE;
	if (flags & UFFDM_MOVE_ALLOW_SRC_HOLES)
		m.mode |= UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES;
	ret = ioctl(u->fd, UFFDIO_MOVE, &m) < 0 ? -errno : 0;
	/* bytes done win over the EAGAIN of partial progress, as for the others */
	if (m.move > 0)
		return (ssize_t)m.move;
	if (ret)
		return ret;
	return m.move < 0 ? (ssize_t)m.move : 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef UFFDM_INTERNAL_H
#define UFFDM_INTERNAL_H

#include "uffdminor.h"

struct uffdm {
	int fd;
	unsigned int flags;	/* UFFDM_OPEN_* it was opened with */
	uint64_t features;	/* granted by UFFDIO_API */
	uint64_t ioctls;	/* returned by UFFDIO_API */
	uint64_t avail;		/* what the kernel offers, from the probe */
	bool nonblock;		/* O_NONBLOCK is set: a read can be tried blind */
};

struct uffdm_region {
	int fd;
	enum uffdm_backing backing;
	size_t size;
	size_t page;
	void *view;		/* registered: faults happen here */
	void *backing_view;	/* never registered: pages are made right here */
};

/* open.c: a raw descriptor, as uffdm_open would get it, without UFFDIO_API */
int uffdm__raw_open(unsigned int flags);
int uffdm__api(int fd, uint64_t features, struct uffdio_api *api);

/* range.c */
int uffdm__check_range(const void *addr, size_t len);

#define UFFDM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif

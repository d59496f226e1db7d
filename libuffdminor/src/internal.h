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
	/* adopt.c */
	bool adopted;		/* from uffdm_adopt: its mm may be another process's */
	struct uffdm *sigbus;	/* UFFD_FEATURE_SIGBUS descriptor in the same mm, or NULL */
};

struct uffdm_region {
	int fd;
	enum uffdm_backing backing;
	size_t size;
	size_t page;
	void *view;		/* registered: faults happen here */
	void *backing_view;	/* never registered: pages are made right here */
	/* region-fd.c */
	bool foreign;		/* view is in another process: never mapped here */
	off_t offset;		/* of the region in fd */
};

/* open.c: a raw descriptor, as uffdm_open would get it, without UFFDIO_API */
int uffdm__raw_open(unsigned int flags);
int uffdm__api(int fd, uint64_t features, struct uffdio_api *api);

/* region.c */
void uffdm__region_free(struct uffdm_region *r);

/* adopt.c: the failure-path descriptor of u (opened on first use unless adopted) */
int uffdm__sigbus(struct uffdm *u, struct uffdm **out);

/* range.c */
int uffdm__check_range(const void *addr, size_t len);

#define UFFDM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif

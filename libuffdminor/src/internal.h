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
	bool served;		/* a handler reads it (handler.c): one at a time */
};

struct uffdm_region {
	int fd;
	enum uffdm_backing backing;
	size_t size;
	size_t page;
	void *view;		/* registered: faults happen here (NULL if not in this mm) */
	void *backing_view;	/* never registered: pages are made right here */
	/*
	 * The address of the registered view in the mm the descriptor serves:
	 * (uintptr_t)view for uffdm_region_create(), the other process's view
	 * for a region made from its fd.  The handler uses only uaddr for
	 * fault address -> offset and for CONTINUE/WAKE/POISON addresses,
	 * and backing_view for filling.
	 */
	uintptr_t uaddr;
	/* Fill-once (handler.c): one word per page, generation << 3 | state. */
	uint32_t *pstate;
	struct uffdm_handler *handler;	/* serving it, or NULL */
	/*
	 * The UFFD_FEATURE_SIGBUS descriptor failed pages of the local view
	 * are moved to: owned by the region so they keep failing after the
	 * handler stops (closed by uffdm_region_destroy()).
	 */
	struct uffdm *sigbus;
};

/* region.c: page state words */
#define UFFDM_PS_BITS		3
#define UFFDM_PS_MASK		((1u << UFFDM_PS_BITS) - 1)
#define UFFDM_PS_GEN_ONE	(1u << UFFDM_PS_BITS)
/* Allocates r->pstate and sets uaddr; for every region constructor. */
int uffdm__region_init_state(struct uffdm_region *r, uintptr_t uaddr);
/* The registered view is in this process's mm: failed pages can move to r->sigbus. */
static inline bool uffdm__region_local(const struct uffdm_region *r)
{
	return r->view && (uintptr_t)r->view == r->uaddr;
}
/* Frees what uffdm__region_init_state() and the handler attached. */
void uffdm__region_fini_state(struct uffdm_region *r);

/* open.c: a raw descriptor, as uffdm_open would get it, without UFFDIO_API */
int uffdm__raw_open(unsigned int flags);
int uffdm__api(int fd, uint64_t features, struct uffdio_api *api);

/* range.c */
int uffdm__check_range(const void *addr, size_t len);

#define UFFDM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif

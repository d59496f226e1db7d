/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef UFFDM_INTERNAL_H
#define UFFDM_INTERNAL_H

#include <pthread.h>

#include "uffdminor.h"

struct uffdm {
	int fd;
	unsigned int flags;	/* UFFDM_OPEN_* it was opened with */
	uint64_t features;	/* granted by UFFDIO_API */
	uint64_t ioctls;	/* returned by UFFDIO_API */
	uint64_t avail;		/* what the kernel offers, from the probe */
	bool nonblock;		/* O_NONBLOCK is set: a read can be tried blind */
	bool served;		/* a handler reads it (handler.c): one at a time */
	/* adopt.c */
	bool adopted;		/* from uffdm_adopt: its mm may be another process's */
	struct uffdm *sigbus;	/* UFFD_FEATURE_SIGBUS descriptor in the same mm, or NULL */
	/* fence.c: the empty memfd failed pages of this mm are mapped from, or -1 */
	int fence_fd;
};

/* Faults outside every region a remote server can hand its VMM at once. */
#define UFFDM_OUTSIDE_SLOTS	8

/*
 * The end of a region's shared page states (uffdm_region_state_fd()): its
 * shape, the fault messages every server of the region began and ended serving, and
 * the deferred pages it completed.  The VMM's watchdog (watchdog.c) reads
 * them: a fault begun and not ended is in a server's hands; ended or
 * completed moving is the server alive.  When it has asked (first_ns 0),
 * the next server to serve a fault stamps the time there, once.
 */
struct uffdm_state_tail {
	uint64_t pages, page;	/* whose states these are: checked on adoption */
	uint64_t begun;
	uint64_t ended;
	uint64_t completed;
	uint64_t first_ns;	/* 0: the watchdog asks when a fault is next served */
	/*
	 * Failures a server in another process cannot make for good: the
	 * VMM's fencer (owner.c) fences them in its own mm.  A server marks
	 * pages UFFDM_PS_OWNER, or puts the address of a fault outside its
	 * regions in a free slot, then bumps fence_seq and futex-wakes it.
	 */
	uint32_t fence_seq;
	uint32_t pad;
	uint64_t outside[UFFDM_OUTSIDE_SLOTS];	/* 0: free */
};

struct uffdm_region {
	int fd;
	enum uffdm_backing backing;
	size_t size;
	size_t page;
	void *view;		/* registered: faults happen here (NULL if not in this mm) */
	void *backing_view;	/* never registered: pages are made right here */
	off_t offset;		/* of the region in fd (region-fd.c; 0 for uffdm_region_create) */
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
	 * Written by discard/zap across the generation change and the unmap;
	 * read by whoever maps a page (pagestate.c), who checks the page's
	 * generation under it, so no CONTINUE can map a page again after a
	 * zap emptied it.  The handler only tries it, reading events in
	 * between: a zap may be waiting for it to read its REMOVE event.
	 */
	pthread_rwlock_t zap_lock;
	bool lock_init;
	/*
	 * The UFFD_FEATURE_SIGBUS descriptor failed pages of the local view
	 * are moved to: owned by the region so they keep failing after the
	 * handler stops (closed by uffdm_region_destroy()).
	 */
	struct uffdm *sigbus;
	void *user;			/* uffdm_region_set_user() */
	/* 0.3: pstate lives in this memfd (uffdm_region_state_fd/adopt_state), mapped shared */
	int state_fd;
	bool state_shared;
	/* in the shared states, after the words: what servers did, for a watchdog */
	struct uffdm_state_tail *tail;
	bool rewake;		/* taken over: wake the dead server's waiters when served */
	/* failview.c: on the list of regions whose view this process mapped */
	struct uffdm_region *next_local;
	bool listed;
};

/* region.c: page state words */
#define UFFDM_PS_BITS		3
#define UFFDM_PS_MASK		((1u << UFFDM_PS_BITS) - 1)
#define UFFDM_PS_GEN_ONE	(1u << UFFDM_PS_BITS)
/* Failed by a server of another mm, not yet fenced by that mm's owner (owner.c). */
#define UFFDM_PS_OWNER		6u
/* Allocates r->pstate and sets uaddr; for every region constructor. */
int uffdm__region_init_state(struct uffdm_region *r, uintptr_t uaddr);
/* The registered view is in this process's mm: failed pages can be fenced here. */
static inline bool uffdm__region_local(const struct uffdm_region *r)
{
	return r->view && (uintptr_t)r->view == r->uaddr;
}
/*
 * r's registered view, as u serves it, is in this process's mm, so its
 * failed pages can be fenced here: a view this region maps, or any view
 * of a descriptor opened here (a userfaultfd serves its creator's mm), as
 * a uffdm_region_from_fd(3) region over this process's own mapping.
 */
static inline bool uffdm__view_here(const struct uffdm *u, const struct uffdm_region *r)
{
	return uffdm__region_local(r) || !u->adopted;
}
/* Frees what uffdm__region_init_state() and the handler attached. */
void uffdm__region_fini_state(struct uffdm_region *r);

/* open.c: a raw descriptor, as uffdm_open would get it, without UFFDIO_API */
int uffdm__raw_open(unsigned int flags);
int uffdm__api(int fd, uint64_t features, struct uffdio_api *api);

/* region.c */
void uffdm__region_free(struct uffdm_region *r);
/* failview.c: the regions whose view this process mapped (uffdm_region_create()) */
void uffdm__local_add(struct uffdm_region *r);
void uffdm__local_remove(struct uffdm_region *r);
/*
 * failview.c: the file a region made here maps at [addr, addr+len) (its
 * view): a duplicate of its descriptor, *off its offset there; -ENOENT
 * when no region's view holds the whole range.
 */
int uffdm__region_file_at(const void *addr, size_t len, off_t *off);

/* adopt.c: u's own failure-path descriptor (opened on first use unless adopted) */
int uffdm__sigbus(struct uffdm *u, struct uffdm **out);
/*
 * A SIGBUS descriptor of u's mm for the caller to own: a new one for a u
 * this process opened, a duplicate of the one an adopted u brought, or
 * NULL (and 0) when an adopted u brought none.
 */
int uffdm__sigbus_open(struct uffdm *u, uint64_t features, struct uffdm **out);

/* thread.c: a library thread, with every signal blocked */
int uffdm__thread_start(pthread_t *tid, void *(*fn)(void *), void *arg);
/* thread.c: CLOCK_MONOTONIC in ns */
uint64_t uffdm__now_ns(void);

/* fence.c: failing pages of this process's views for good (see there) */
int uffdm__fence_prepare(struct uffdm *u);
bool uffdm__fence_usable(const struct uffdm *u);
int uffdm__fence(struct uffdm *u, void *addr, size_t len);
/* The page size of this process's mapping at addr (a huge page for hugetlbfs), or -errno. */
long uffdm__vma_page_size(const void *addr);
/* /proc/self/pagemap, or a negated errno; then whether a page is mapped (and uffd-wp). */
int uffdm__pagemap_open(void);
bool uffdm__page_mapped(int pm, const void *addr, bool *wp);
/* What pagemap says of n pages from addr, UFFDM_PM_* bits, in a few reads. */
#define UFFDM_PM_MAPPED		1u
#define UFFDM_PM_WP		2u
void uffdm__pages_mapped(int pm, const char *addr, size_t n, size_t page, uint8_t *st);

/*
 * owner.c: in the process whose memory it is, the fences its servers in
 * other processes ask for (UFFDM_PS_OWNER pages, outside slots).  A thread;
 * stopping makes one last pass.
 */
struct uffdm__owner;
int uffdm__owner_start(struct uffdm__owner **out, struct uffdm *u, struct uffdm_region *const *r,
		       unsigned int nr, unsigned int fail_flags);
void uffdm__owner_stop(struct uffdm__owner *o);
/* One pass now (a lost server may have marked pages and died before asking). */
void uffdm__owner_kick(struct uffdm__owner *o);
/* Server side: tell r's owner there is work (after the states say what). */
void uffdm__owner_ask(struct uffdm_region *r);
/* Server side: a fault outside every region, for the owner of r's mm; false when full. */
bool uffdm__owner_post(struct uffdm_region *r, uint64_t addr);

/* range.c */
int uffdm__check_range(const void *addr, size_t len);

/*
 * failview.c: failing a range in one mapping.  The range becomes a fresh
 * view of fd at off, registered on a process-wide SIGBUS descriptor, with
 * the pages served[i] != 0 mapped again: one mapping, whatever the count.
 */
int uffdm__fail_view(int fd, off_t off, char *addr, size_t len, size_t page,
		     const uint8_t *served);

#define UFFDM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif

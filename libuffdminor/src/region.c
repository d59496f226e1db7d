// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A region: one memfd mapped twice.  Faults are taken on the view; pages
 * are made right through the backing view, which is never registered, so
 * writing there fills the page cache without faulting into the handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif
#define UFFDM_MFD_HUGE_2MB (21U << MFD_HUGE_SHIFT)
#define UFFDM_MFD_HUGE_1GB (30U << MFD_HUGE_SHIFT)

/* The default huge page size, from /proc/meminfo ("Hugepagesize: 2048 kB"). */
static size_t default_huge_page(void)
{
	char line[128];
	size_t kb = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

static int backing_geometry(enum uffdm_backing b, size_t *page, unsigned int *mfd)
{
	*mfd = MFD_CLOEXEC;
	switch (b) {
	case UFFDM_SHMEM:
		*page = (size_t)sysconf(_SC_PAGESIZE);
		return 0;
	case UFFDM_HUGETLB:
		*page = default_huge_page();
		*mfd |= MFD_HUGETLB;
		return *page ? 0 : -EOPNOTSUPP;
	case UFFDM_HUGETLB_2M:
		*page = 2UL << 20;
		*mfd |= MFD_HUGETLB | UFFDM_MFD_HUGE_2MB;
		return 0;
	case UFFDM_HUGETLB_1G:
		*page = 1UL << 30;
		*mfd |= MFD_HUGETLB | UFFDM_MFD_HUGE_1GB;
		return 0;
	}
	return -EINVAL;
}

static void *map_shared(int fd, size_t size)
{
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

/* One state word per page, all empty in generation 0. */
int uffdm__region_init_state(struct uffdm_region *r, uintptr_t uaddr)
{
	pthread_rwlockattr_t a;

	r->uaddr = uaddr;
	r->pstate = calloc(r->size / r->page, sizeof(*r->pstate));
	if (!r->pstate)
		return -ENOMEM;
	/*
	 * Writers first: a zap must not wait behind a stream of mappers; a
	 * mapper that finds one waiting reads events until it is through.
	 */
	pthread_rwlockattr_init(&a);
#ifdef __GLIBC__
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
	pthread_rwlock_init(&r->zap_lock, &a);
	pthread_rwlockattr_destroy(&a);
	r->lock_init = true;
	return 0;
}

static size_t words_bytes(const struct uffdm_region *r)
{
	return r->size / r->page * sizeof(*r->pstate);
}

/* Shared: the words, then the tail on a cache line of its own. */
static size_t tail_offset(const struct uffdm_region *r)
{
	return (words_bytes(r) + 63) & ~(size_t)63;
}

static size_t state_bytes(const struct uffdm_region *r)
{
	return tail_offset(r) + ((sizeof(struct uffdm_state_tail) + 63) & ~(size_t)63);
}

static void map_state(struct uffdm_region *r, void *map, int fd)
{
	r->pstate = map;
	r->tail = (struct uffdm_state_tail *)((char *)map + tail_offset(r));
	r->state_fd = fd;
	r->state_shared = true;
}

/* The states r keeps now, in private memory or in a shared memfd: gone. */
static void drop_state(struct uffdm_region *r)
{
	if (r->state_shared) {
		munmap(r->pstate, state_bytes(r));
		close(r->state_fd);
	} else {
		free(r->pstate);
	}
	r->pstate = NULL;
	r->tail = NULL;
	r->state_shared = false;
}

void uffdm__region_fini_state(struct uffdm_region *r)
{
	drop_state(r);
	if (r->lock_init)
		pthread_rwlock_destroy(&r->zap_lock);
	r->lock_init = false;
	uffdm_close(r->sigbus);
	r->sigbus = NULL;
}

void uffdm__region_free(struct uffdm_region *r)
{
	uffdm__local_remove(r);
	uffdm__region_fini_state(r);
	if (r->view && r->view != MAP_FAILED)
		munmap(r->view, r->size);
	if (r->backing_view && r->backing_view != MAP_FAILED)
		munmap(r->backing_view, r->size);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

size_t uffdm_backing_page_size(enum uffdm_backing backing)
{
	unsigned int mfd;
	size_t page;

	return backing_geometry(backing, &page, &mfd) ? 0 : page;
}

/*
 * On hugetlb the pages are reserved at mmap time, so an empty pool shows up
 * here as -ENOMEM rather than as SIGBUS on first touch.
 */
int uffdm_region_create(struct uffdm_region **out, enum uffdm_backing backing, size_t size)
{
	struct uffdm_region *r;
	unsigned int mfd;
	size_t page;
	int ret;

	if (!out || !size)
		return -EINVAL;
	ret = backing_geometry(backing, &page, &mfd);
	if (ret)
		return ret;
	if (size % page)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->backing = backing;
	r->size = size;
	r->page = page;
	r->fd = memfd_create("uffdminor", mfd);
	if (r->fd < 0 || ftruncate(r->fd, (off_t)size) < 0)
		goto fail;
	r->view = map_shared(r->fd, size);
	if (r->view == MAP_FAILED)
		goto fail;
	r->backing_view = map_shared(r->fd, size);
	if (r->backing_view == MAP_FAILED)
		goto fail;
	ret = uffdm__region_init_state(r, (uintptr_t)r->view);
	if (ret) {
		uffdm__region_free(r);
		return ret;
	}
	uffdm__local_add(r);
	*out = r;
	return 0;
fail:
	ret = -errno;
	uffdm__region_free(r);
	return ret;
}

void uffdm_region_destroy(struct uffdm_region *r)
{
	if (r)
		uffdm__region_free(r);
}

void *uffdm_region_view(const struct uffdm_region *r)
{
	return r ? r->view : NULL;
}

void *uffdm_region_backing(const struct uffdm_region *r)
{
	return r ? r->backing_view : NULL;
}

size_t uffdm_region_size(const struct uffdm_region *r)
{
	return r ? r->size : 0;
}

size_t uffdm_region_page_size(const struct uffdm_region *r)
{
	return r ? r->page : 0;
}

int uffdm_region_fd(const struct uffdm_region *r)
{
	return r ? r->fd : -EINVAL;
}

/* Written before the region is served, read by callbacks: the handler's lock orders them. */
void uffdm_region_set_user(struct uffdm_region *r, void *user)
{
	if (r)
		__atomic_store_n(&r->user, user, __ATOMIC_RELEASE);
}

void *uffdm_region_user(const struct uffdm_region *r)
{
	return r ? __atomic_load_n(&r->user, __ATOMIC_ACQUIRE) : NULL;
}

/*
 * 0.3: page states that outlive the page server.  The VMM moves r's states
 * into a memfd it owns and sends it with the userfaultfd; each page server
 * maps it (uffdm_region_adopt_state()), so a replacement finds what its
 * predecessor filled.  Not while a handler serves r: states never move
 * under a fault.
 */
int uffdm_region_state_fd(struct uffdm_region *r)
{
	size_t len;
	void *map;
	int fd;

	if (!r || !r->pstate)
		return -EINVAL;
	if (r->state_shared)
		return r->state_fd;
	if (uffdm_region_handler(r))
		return -EBUSY;
	len = state_bytes(r);
	fd = memfd_create("uffdm-pagestate", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	map = ftruncate(fd, (off_t)len) ? MAP_FAILED : map_shared(fd, len);
	if (map == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return err;
	}
	memcpy(map, r->pstate, words_bytes(r));
	free(r->pstate);
	map_state(r, map, fd);
	r->tail->pages = r->size / r->page;
	r->tail->page = r->page;
	r->tail->first_ns = 1;	/* nobody asked yet */
	return fd;
}

/*
 * A page a dead server owned (filling, deferred, completing) has no owner
 * left: empty again, in the same generation, for the new server to fill.
 */
static void take_over(struct uffdm_region *r)
{
	for (size_t i = 0; i < r->size / r->page; i++) {
		uint32_t old = __atomic_load_n(&r->pstate[i], __ATOMIC_ACQUIRE);
		unsigned int st = old & UFFDM_PS_MASK;

		/* a page failed and waiting for the owner's fence stays so */
		while (st != UFFDM_PAGE_EMPTY && st != UFFDM_PAGE_FILLED && st != UFFDM_PAGE_FAILED &&
		       st != UFFDM_PS_OWNER &&
		       !__atomic_compare_exchange_n(&r->pstate[i], &old,
						    (old & ~UFFDM_PS_MASK) | UFFDM_PAGE_EMPTY, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			st = old & UFFDM_PS_MASK;
	}
	r->rewake = true;
}

int uffdm_region_adopt_state(struct uffdm_region *r, int fd, unsigned int flags)
{
	const struct uffdm_state_tail *tail;
	struct stat st;
	void *map;

	if (!r || !r->pstate || (flags & ~UFFDM_STATE_TAKEOVER))
		return -EINVAL;
	if (uffdm_region_handler(r))
		return -EBUSY;
	if (fstat(fd, &st))
		return -errno;
	if ((uint64_t)st.st_size != state_bytes(r))
		return -EINVAL;	/* another region's states */
	map = map_shared(fd, state_bytes(r));
	if (map == MAP_FAILED)
		return -errno;
	tail = (const struct uffdm_state_tail *)((char *)map + tail_offset(r));
	if (tail->pages != r->size / r->page || tail->page != r->page) {
		munmap(map, state_bytes(r));
		return -EINVAL;	/* another region's states */
	}
	drop_state(r);
	map_state(r, map, fd);
	if (flags & UFFDM_STATE_TAKEOVER)
		take_over(r);
	return 0;
}

/*
 * The pages' contents are going: they must be filled again, so the next
 * fault runs the callback.  Advanced before the pages go, so no fault can
 * see them gone and still "filled".
 */
static void advance_generation(struct uffdm_region *r, size_t off, size_t len)
{
	for (size_t i = off / r->page; i < (off + len) / r->page; i++) {
		uint32_t old = __atomic_load_n(&r->pstate[i], __ATOMIC_RELAXED), new;

		do
			new = ((old >> UFFDM_PS_BITS) + 1) << UFFDM_PS_BITS | UFFDM_PAGE_EMPTY;
		while (!__atomic_compare_exchange_n(&r->pstate[i], &old, new, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	}
}

int uffdm_region_page_state(const struct uffdm_region *r, size_t off)
{
	unsigned int st;

	if (!r || !r->pstate)
		return -EINVAL;
	if (off >= r->size)
		return -ERANGE;
	st = __atomic_load_n(&r->pstate[off / r->page], __ATOMIC_ACQUIRE) & UFFDM_PS_MASK;
	/* Internal states beyond the public ones: failed, or fills in progress. */
	if (st == UFFDM_PS_OWNER)
		return UFFDM_PAGE_FAILED;
	return st > UFFDM_PAGE_FAILED ? UFFDM_PAGE_FILLING : (int)st;
}

/* Whole pages inside the region only: hugetlb refuses anything else anyway. */
static int check_span(const struct uffdm_region *r, size_t off, size_t len)
{
	if (!r || !len || off % r->page || len % r->page)
		return -EINVAL;
	if (off > r->size || len > r->size - off)
		return -ERANGE;
	return 0;
}

static int falloc(struct uffdm_region *r, int mode, size_t off, size_t len)
{
	int ret = check_span(r, off, len);

	if (ret)
		return ret;
	pthread_rwlock_wrlock(&r->zap_lock);
	if (mode & FALLOC_FL_PUNCH_HOLE)
		advance_generation(r, off, len);
	ret = fallocate(r->fd, mode, r->offset + (off_t)off, (off_t)len) < 0 ? -errno : 0;
	pthread_rwlock_unlock(&r->zap_lock);
	return ret;
}

/* Put pages in the page cache (zeroed), so touching the view is a minor fault. */
int uffdm_region_populate(struct uffdm_region *r, size_t off, size_t len)
{
	return falloc(r, 0, off, len);
}

/* Drop pages from the page cache: the next touch is a missing fault. */
int uffdm_region_discard(struct uffdm_region *r, size_t off, size_t len)
{
	return falloc(r, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
}

/*
 * Unmap pages from the view but keep them cached: the next touch is a minor
 * fault again.  With UFFD_FEATURE_EVENT_REMOVE this posts a REMOVE event
 * and blocks until it is read.
 */
int uffdm_region_zap(struct uffdm_region *r, size_t off, size_t len)
{
	int ret = check_span(r, off, len);

	if (ret)
		return ret;
	if (!r->view)	/* a view in another process: zap it there */
		return -EOPNOTSUPP;
	pthread_rwlock_wrlock(&r->zap_lock);
	advance_generation(r, off, len);
	ret = madvise((char *)r->view + off, len, MADV_DONTNEED) < 0 ? -errno : 0;
	pthread_rwlock_unlock(&r->zap_lock);
	return ret;
}

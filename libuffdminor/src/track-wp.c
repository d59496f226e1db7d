// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Synchronous uffd-wp dirty tracking, for kernels where neither PAGEMAP_SCAN
 * (6.7) nor soft-dirty serves: 6.1 on hugetlb, whose pagemap shows no
 * soft-dirty bit, or any kernel without CONFIG_MEM_SOFT_DIRTY.
 *
 * The view is write-protected whole.  The first write to a page in a round
 * stops its writer in a WP fault; our thread sets the page's bit and lifts
 * the protection of that page, which wakes the writer.  Later writes to the
 * page in the same round cost nothing.
 *
 * Not the library's fault handler: it lifts the protection after its callback
 * returns, outside any lock of ours, and collect needs the bit and the
 * lifting to be one step (see uffdm__wp_collect).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "track.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22	/* 5.14; the feature we need is 5.19 */
#endif

#define WP_BATCH 64

struct track_wp {
	uint8_t *view;
	size_t size, page;
	struct uffdm *u;	/* synchronous WP faults of the range */
	pthread_t tid;
	bool running;
	pthread_mutex_t lock;	/* a fault's bit + unprotect vs collect's take + protect */
	int stop_fd;		/* eventfd: readable once the thread must stop */
	int err;		/* the thread's first failure, for collect to report */
	uint8_t *bits;		/* pages written since the last collect */
};

/*
 * No retry on EAGAIN: the kernel refuses only while a non-cooperative
 * event (fork, mremap, remove, unmap) is unread, and this descriptor asks
 * for none of them.
 */
static int protect(struct track_wp *w, uint8_t *addr, size_t len, bool wp)
{
	return uffdm_writeprotect(w->u, addr, len, wp);
}

/*
 * The bit before the unprotect, both under the lock: a page is writable
 * without a fault only while its bit is set in the bitmap collect will take.
 */
static void wp_fault(struct track_wp *w, uint64_t addr)
{
	uint64_t off = addr - (uintptr_t)w->view;
	int ret;

	if (addr < (uintptr_t)w->view || off >= w->size)
		return;
	pthread_mutex_lock(&w->lock);
	track_bit_set(w->bits, off / w->page);
	ret = protect(w, w->view + off / w->page * w->page, w->page, false);
	if (ret && !w->err)
		w->err = ret;
	pthread_mutex_unlock(&w->lock);
}

static void *wp_thread(void *arg)
{
	struct track_wp *w = arg;
	struct uffdm_event ev[WP_BATCH];
	struct pollfd pfd[2] = {
		{ .fd = uffdm_fd(w->u), .events = POLLIN },
		{ .fd = w->stop_fd, .events = POLLIN },
	};
	int n;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		n = uffdm_events_read(w->u, ev, WP_BATCH, UFFDM_READ_NONBLOCK);
		for (int i = 0; i < n; i++)
			if (ev[i].kind == UFFDM_EVENT_WP)
				wp_fault(w, ev[i].addr);
	}
	return NULL;
}

/*
 * A page with no pte may stay writable after UFFDIO_WRITEPROTECT: only 6.4's
 * UFFD_FEATURE_WP_UNPOPULATED promises otherwise.  a caller may not have
 * written its memory before tracking: map every page anyway, so no kernel has a hole to skip.
 */
static int populate(struct track_wp *w)
{
	return madvise(w->view, w->size, MADV_POPULATE_READ) ? -errno : 0;
}

/* Does a write to a protected page reach our thread?  It must, or nothing will. */
static int self_test(struct track_wp *w)
{
	bool seen;
	int ret;

	track_write_same(w->view + 64);	/* the first record may be in use */
	pthread_mutex_lock(&w->lock);
	seen = track_bit_get(w->bits, 0);
	memset(w->bits, 0, track_bits_len(w->size, w->page));
	ret = w->err ? w->err : protect(w, w->view, w->page, true);
	pthread_mutex_unlock(&w->lock);
	return ret ? ret : seen ? 0 : -EOPNOTSUPP;
}

static int wp_alloc(struct track_wp **out, uint8_t *view, size_t size, size_t page)
{
	struct track_wp *w = calloc(1, sizeof(*w));

	*out = w;
	if (!w)
		return -ENOMEM;
	w->view = view;
	w->size = size;
	w->page = page;
	pthread_mutex_init(&w->lock, NULL);
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (w->stop_fd < 0)
		return -errno;
	w->bits = calloc(1, track_bits_len(w->size, w->page));
	return w->bits ? 0 : -ENOMEM;
}

static int wp_arm(struct track_wp *w)
{
	int ret = uffdm_open(&w->u, UFFDM_OPEN_NONBLOCK, UFFD_FEATURE_WP_HUGETLBFS_SHMEM);

	if (!ret)
		ret = populate(w);
	if (!ret)
		ret = uffdm_range_register(w->u, w->view, w->size,
					   UFFDM_REGISTER_WP | UFFDM_REGISTER_NO_MINOR, NULL);
	if (!ret)
		ret = protect(w, w->view, w->size, true);
	if (!ret)
		ret = uffdm__thread_start(&w->tid, wp_thread, w);
	if (!ret)
		w->running = true;
	return ret;
}

/* The probe is the start: a kernel without the feature fails it here. */
int uffdm__wp_start(struct track_wp **out, uint8_t *view, size_t size, size_t page)
{
	int ret = wp_alloc(out, view, size, page);

	if (!ret)
		ret = wp_arm(*out);
	if (!ret)
		ret = self_test(*out);
	if (ret) {
		uffdm__wp_stop(*out);
		*out = NULL;
	}
	return ret;
}

/*
 * The caller has paused every writer (uffdm_tracker_needs_quiesce), which is
 * what makes this race-free:
 *  - a writer parks only between writes, and a write that faulted finished
 *    only after its page's unprotect, which came after its bit: so every
 *    write since the last collect has its bit in w->bits now;
 *  - nobody writes between taking the bits and protecting again, so no
 *    write can land on a page that is writable yet has no bit left;
 *  - a fault still queued from before (two writers on one page queue two
 *    messages; the first unprotect wakes both) is served after we unlock,
 *    into the new bitmap: its unprotect comes with a bit, a page sent once
 *    more, never a write lost.  Without the lock that late unprotect could
 *    fall after our protect while its bit fell before our take.
 * The last look protects nothing again: the writers never resume here.
 */
int uffdm__wp_collect(struct track_wp *w, uint8_t *bitmap, bool last)
{
	size_t n = track_bits_len(w->size, w->page);
	int ret;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < n; i++)
		bitmap[i] |= w->bits[i];
	memset(w->bits, 0, n);
	ret = w->err;
	if (!ret && !last)
		ret = protect(w, w->view, w->size, true);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/*
 * The thread first, so nothing lifts protection behind us; then lift it all,
 * which also wakes any writer still asleep on it (close would too).
 */
void uffdm__wp_stop(struct track_wp *w)
{
	uint64_t one = 1;

	if (!w)
		return;
	if (w->running) {
		/* a fresh eventfd's counter cannot overflow: only EINTR */
		while (write(w->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		pthread_join(w->tid, NULL);
	}
	if (w->u) {
		protect(w, w->view, w->size, false);
		uffdm_range_unregister(w->u, w->view, w->size);
		uffdm_close(w->u);
		w->u = NULL;
	}
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	pthread_mutex_destroy(&w->lock);
	free(w->bits);
	free(w);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Failing a range of this process in one mapping (issue 31).
 *
 * A fence (fence.c) is a mapping of an empty file: served pages cannot be
 * in it, so failing every other page of a region cost one fence and one
 * split of the view per failed page, and past vm.max_map_count (65 530)
 * mmap() and then UNREGISTER failed with -ENOMEM.
 *
 * Here the whole range becomes one fresh view of the same file, at the
 * same offset, registered on a descriptor opened with UFFD_FEATURE_SIGBUS,
 * whose faults are SIGBUS without an event.  The served pages are mapped
 * into it first with UFFDIO_CONTINUE (one call a run of them, from the
 * page cache: their bytes do not move), then mremap(MREMAP_FIXED) puts it
 * over the range in one step under the mmap lock: no window in which a
 * view without a registration could map a stale page or a hole's zeroes.
 *
 * That descriptor must carry UFFD_FEATURE_EVENT_REMAP: without it mremap
 * drops the registration of what it moves (mremap_userfaultfd_prep(), 6.1
 * and later).  With it, every mremap of such a view waits until the event
 * is read, so the descriptor has a reader thread, and both live as long as
 * the process: closing it would drop the registrations and turn every
 * failed page back into what the page cache holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef MREMAP_MAYMOVE
#define MREMAP_MAYMOVE	1
#endif
#ifndef MREMAP_FIXED
#define MREMAP_FIXED	2
#endif

/* Regions whose view this process mapped: whose file a failed range is. */
static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uffdm_region *local_head;

void uffdm__local_add(struct uffdm_region *r)
{
	pthread_mutex_lock(&local_lock);
	r->next_local = local_head;
	local_head = r;
	r->listed = true;
	pthread_mutex_unlock(&local_lock);
}

void uffdm__local_remove(struct uffdm_region *r)
{
	struct uffdm_region **p;

	if (!r->listed)
		return;
	pthread_mutex_lock(&local_lock);
	for (p = &local_head; *p; p = &(*p)->next_local)
		if (*p == r) {
			*p = r->next_local;
			break;
		}
	pthread_mutex_unlock(&local_lock);
}

int uffdm__region_file_at(const void *addr, size_t len, off_t *off)
{
	uintptr_t a = (uintptr_t)addr;
	int fd = -ENOENT;

	pthread_mutex_lock(&local_lock);
	for (struct uffdm_region *r = local_head; r; r = r->next_local) {
		uintptr_t v = (uintptr_t)r->view;

		if (a >= v && a - v <= r->size && len <= r->size - (a - v)) {
			*off = r->offset + (off_t)(a - v);
			fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
			if (fd < 0)
				fd = -errno;
			break;
		}
	}
	pthread_mutex_unlock(&local_lock);
	return fd;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct uffdm *fail_ctx;	/* never closed: see above */
static int fail_err;

/* Reads (and drops) the REMAP events a mremap waits for; never ends. */
static void *reader(void *arg)
{
	const struct uffdm *s = arg;
	struct uffd_msg msg[16];
	struct timespec pause = { 0, 1000 * 1000 };

	for (;;)
		if (read(s->fd, msg, sizeof(msg)) < 0 && errno != EINTR)
			nanosleep(&pause, NULL);	/* never a busy loop */
	return arg;
}

static void open_fail_ctx(void)
{
	pthread_t tid;
	struct uffdm *s;

	fail_err = uffdm_open(&s, 0, UFFD_FEATURE_SIGBUS | UFFD_FEATURE_EVENT_REMAP);
	if (fail_err)
		return;
	fail_err = uffdm__thread_start(&tid, reader, s);
	if (fail_err) {
		uffdm_close(s);
		return;
	}
	pthread_detach(tid);
	__atomic_store_n(&fail_ctx, s, __ATOMIC_RELEASE);
}

static struct uffdm *fail_ctx_get(int *err)
{
	pthread_once(&once, open_fail_ctx);
	*err = fail_err;
	return __atomic_load_n(&fail_ctx, __ATOMIC_ACQUIRE);
}

/*
 * Another thread's mremap of a failed view makes CONTINUE on s answer
 * EAGAIN until the reader has read its event: a moment.  Past this many
 * tries the caller falls back to fences.
 */
#define EAGAIN_TRIES	10000

/* Map the served runs of view v (registered on s) from the page cache. */
static int continue_served(struct uffdm *s, char *v, size_t n, size_t page,
			   const uint8_t *served)
{
	unsigned int tries = 0;

	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && served[j] == served[i]; j++)
			;
		for (size_t done = 0; served[i] && done < (j - i) * page;) {
			ssize_t m = uffdm_continue(s, v + i * page + done, (j - i) * page - done,
						   UFFDM_DONTWAKE);

			if (m == -EAGAIN && tries++ < EAGAIN_TRIES) {
				sched_yield();
				continue;
			}
			if (m <= 0)
				return m ? (int)m : -EIO;
			done += (size_t)m;
		}
	}
	return 0;
}

int uffdm__fail_view(int fd, off_t off, char *addr, size_t len, size_t page,
		     const uint8_t *served)
{
	struct uffdm *s = fail_ctx_get(&(int){ 0 });
	void *v, *moved;
	int ret;

	if (!s)
		return fail_err;
	v = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	if (v == MAP_FAILED)
		return -errno;
	/*
	 * Not in a child of fork(2): without EVENT_FORK (which needs
	 * CAP_SYS_PTRACE) its copy would lose the registration and read the
	 * page cache; absent there, a touch is SIGSEGV, never a silent zero.
	 */
	ret = madvise(v, len, MADV_DONTFORK) ? -errno : 0;
	if (!ret)
		ret = uffdm_range_register(s, v, len, UFFDM_REGISTER_MISSING, NULL);
	if (!ret)
		ret = continue_served(s, v, len / page, page, served);
	if (ret) {
		munmap(v, len);
		return ret;
	}
	moved = mremap(v, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, addr);
	if (moved == MAP_FAILED) {
		ret = -errno;
		munmap(v, len);
	}
	return ret;
}

/*
 * Each mapping of [a, a+len) of this process on whichever descriptor
 * holds it: since 6.x UNREGISTER refuses a range spanning two contexts
 * (EINVAL).  One call or a few a mapping, however many pages failed.
 */
static int unregister_maps(struct uffdm *const *ctx, size_t nctx, uintptr_t a, size_t len)
{
	uintptr_t start, end;
	char line[512];
	int ret = 0, one;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &start, &end) != 2 || end <= a || start >= a + len)
			continue;
		start = start < a ? a : start;
		end = end > a + len ? a + len : end;
		one = -EINVAL;
		for (size_t i = 0; one && i < nctx; i++)
			if (ctx[i])
				one = uffdm_range_unregister(ctx[i], (void *)start, end - start);
		if (!ret)
			ret = one;
	}
	fclose(f);
	return ret;
}

/* Another process's view: page by page, each on whichever descriptor holds it. */
static int unregister_pages(struct uffdm *const *ctx, size_t nctx, struct uffdm_region *r)
{
	int ret = 0;

	for (size_t o = 0; o < r->size; o += r->page) {
		void *p = (void *)(r->uaddr + o);
		int one = -EINVAL;

		for (size_t i = 0; one && i < nctx; i++)
			if (ctx[i])
				one = uffdm_range_unregister(ctx[i], p, r->page);
		if (!ret)
			ret = one;
	}
	return ret;
}

int uffdm_region_unregister(struct uffdm *u, struct uffdm_region *r)
{
	struct uffdm *ctx[] = { u, r ? r->sigbus : NULL, u ? u->sigbus : NULL,
				__atomic_load_n(&fail_ctx, __ATOMIC_ACQUIRE) };
	int ret;

	if (!u || !r)
		return -EINVAL;
	ret = uffdm_range_unregister(u, (void *)r->uaddr, r->size);
	if (ret != -EINVAL || (!ctx[1] && !ctx[2] && !ctx[3]))
		return ret;
	if (uffdm__view_here(u, r))
		return unregister_maps(ctx, UFFDM_ARRAY_SIZE(ctx), r->uaddr, r->size);
	return unregister_pages(ctx, UFFDM_ARRAY_SIZE(ctx), r);
}

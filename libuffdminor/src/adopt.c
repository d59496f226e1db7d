// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Descriptors made elsewhere: a userfaultfd received over SCM_RIGHTS (a
 * page server in another process, as Firecracker and Cloud Hypervisor
 * run theirs), its failure-path SIGBUS descriptor, and failing a whole
 * range at once when the process serving it is gone.
 *
 * A userfaultfd serves the mm of the process that created it, whoever
 * holds it: ioctls on an adopted descriptor act on that mm.  So its
 * failure path must be a descriptor from that mm too; opening our own
 * would register addresses of *our* mm.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define UFFDM_ANON_NAME "anon_inode:[userfaultfd]"
/* fs/userfaultfd.c: set in the context's features once UFFDIO_API is done */
#define UFFDM_KERNEL_INITIALIZED (1u << 31)
/* What UFFDIO_API answers in ioctls: the same on every kernel since 4.3 */
#define UFFDM_API_IOCTLS ((1ull << _UFFDIO_REGISTER) | (1ull << _UFFDIO_UNREGISTER) | \
			  (1ull << _UFFDIO_API))

/* 1 for a userfaultfd, 0 for another file, or -errno (/proc not mounted). */
static int is_userfaultfd(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -errno;
	link[n] = '\0';
	return strcmp(link, UFFDM_ANON_NAME) == 0;
}

/*
 * The context's features as the kernel keeps them, from fdinfo's
 * "API:\t<api>:<features>:<ioctls>" line (every kernel since 4.3).
 */
static int fdinfo_features(int fd, uint32_t *features)
{
	unsigned long long api, ioctls;
	char path[64], line[256];
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "API:\t%llx:%x:%llx", &api, features, &ioctls) == 3) {
			ret = api == UFFD_API ? 0 : -EPROTO;
			break;
		}
	fclose(f);
	return ret;
}

static int check_descriptor(int fd)
{
	int ret;

	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return -EBADF;
	ret = is_userfaultfd(fd);
	if (ret < 0)
		return ret;
	return ret ? 0 : -EBADF;
}

/*
 * The features the sender negotiated; when it never issued UFFDIO_API,
 * issue it now (it cannot be repeated, so there is nothing to lose).
 */
static int adopt_features(int fd, uint64_t want, uint64_t *granted)
{
	struct uffdio_api api;
	uint32_t kf;
	int ret = fdinfo_features(fd, &kf);

	if (ret)
		return ret;
	if (!(kf & UFFDM_KERNEL_INITIALIZED)) {
		ret = uffdm__api(fd, want, &api);
		if (ret)
			return ret;
		*granted = want;
		return 0;
	}
	*granted = kf & ~UFFDM_KERNEL_INITIALIZED;
	return (want & ~*granted) ? -EOPNOTSUPP : 0;
}

int uffdm_adopt(struct uffdm **out, int fd, uint64_t features, unsigned int flags)
{
	struct uffdm_probe p;
	struct uffdm *u;
	uint64_t granted;
	int fl, ret;

	if (!out || flags)
		return -EINVAL;
	ret = check_descriptor(fd);
	if (ret)
		return ret;
	ret = uffdm_probe(&p);
	if (ret)
		return ret;
	ret = adopt_features(fd, features, &granted);
	if (ret)
		return ret;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->fd = fd;
	u->fence_fd = -1;
	u->features = granted;
	u->ioctls = UFFDM_API_IOCTLS;
	u->avail = p.features;
	u->nonblock = fl & O_NONBLOCK;
	u->adopted = true;
	*out = u;
	return 0;
}

int uffdm_sigbus_adopt(struct uffdm *u, int fd)
{
	struct uffdm *s;
	int ret;

	if (!u || u->sigbus)
		return u ? -EBUSY : -EINVAL;
	ret = uffdm_adopt(&s, fd, UFFD_FEATURE_SIGBUS, 0);
	if (ret)
		return ret;
	if (!__atomic_compare_exchange_n(&u->sigbus, &(struct uffdm *){ NULL }, s, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		free(s);	/* the fd stays the caller's */
		return -EBUSY;
	}
	return 0;
}

/*
 * Opened on first use, once per descriptor; an adopted descriptor serves
 * another mm, where we cannot open one: it must have been adopted too.
 */
int uffdm__sigbus(struct uffdm *u, struct uffdm **out)
{
	struct uffdm *s = __atomic_load_n(&u->sigbus, __ATOMIC_ACQUIRE);
	int ret;

	if (!s && u->adopted)
		return -EOPNOTSUPP;
	if (!s) {
		/* as the handler's own: WP on shmem and hugetlbfs needs its feature */
		ret = uffdm_open(&s, u->flags & ~UFFDM_OPEN_NONBLOCK, UFFD_FEATURE_SIGBUS |
				 (u->avail & UFFD_FEATURE_WP_HUGETLBFS_SHMEM));
		if (ret)
			return ret;
		if (!__atomic_compare_exchange_n(&u->sigbus, &(struct uffdm *){ NULL }, s, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			uffdm_close(s);
			s = __atomic_load_n(&u->sigbus, __ATOMIC_ACQUIRE);
		}
	}
	*out = s;
	return 0;
}

int uffdm__sigbus_open(struct uffdm *u, uint64_t features, struct uffdm **out)
{
	struct uffdm *s = __atomic_load_n(&u->sigbus, __ATOMIC_ACQUIRE);
	int fd, ret;

	*out = NULL;
	if (!u->adopted)
		return uffdm_open(out, u->flags & ~UFFDM_OPEN_NONBLOCK, features);
	if (!s)
		return 0;
	fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = uffdm_adopt(out, fd, UFFD_FEATURE_SIGBUS, 0);
	if (ret)
		close(fd);
	return ret;
}

int uffdm_sigbus_fd(struct uffdm *u)
{
	struct uffdm *s;
	int ret;

	if (!u)
		return -EINVAL;
	ret = uffdm__sigbus(u, &s);
	return ret ? ret : s->fd;
}

/*
 * Poison every page of the range not mapped yet; mapped ones answer EEXIST.
 * Partial progress comes back as bytes; -EAGAIN (an unread event) is an
 * error here: the caller falls back to the SIGBUS descriptor.
 */
static int poison_holes(struct uffdm *u, char *p, size_t len, size_t page)
{
	ssize_t done;

	while (len) {
		done = uffdm_poison(u, p, len, UFFDM_DONTWAKE);
		if (done == -EEXIST)
			done = (ssize_t)page;
		if (done < 0)
			return (int)done;
		p += done;
		len -= (size_t)done;
	}
	return 0;
}

static int move_run(struct uffdm *u, struct uffdm *s, void *addr, size_t len)
{
	int ret = uffdm_range_unregister(u, addr, len);

	return ret ? ret : uffdm_range_register(s, addr, len, UFFDM_REGISTER_MISSING, NULL);
}

/*
 * Move the range to the SIGBUS descriptor: between the two ioctls a fault
 * on an unregistered page is served from the page cache; see
 * uffdm_range_fail(3).  Pages a handler failed already are registered
 * there, and since 6.x neither descriptor takes a range spanning both
 * contexts (EINVAL, EBUSY): then page by page, each ending on s.
 */
static int move_to_sigbus(struct uffdm *u, void *addr, size_t len, size_t page)
{
	struct uffdm *s;
	int ret = uffdm__sigbus(u, &s);

	if (ret)
		return ret;
	ret = move_run(u, s, addr, len);
	if (ret != -EINVAL && ret != -EBUSY)
		return ret;
	ret = 0;
	for (char *p = addr; p < (char *)addr + len; p += page) {
		uffdm_range_unregister(u, p, page);	/* EINVAL: s has it already */
		if (uffdm_range_register(s, p, page, UFFDM_REGISTER_MISSING, NULL) && !ret)
			ret = -EIO;
	}
	return ret;
}

/* Beside UFFDM_PM_*: a touch would wait; failed already (poisoned). */
#define PG_WAIT		4u
#define PG_DONE		8u

static bool to_fence(uint8_t st)
{
	return (st & (PG_WAIT | PG_DONE)) == PG_WAIT;
}

static bool hole(uint8_t st)
{
	return (st & (PG_WAIT | UFFDM_PM_MAPPED)) == PG_WAIT;
}

/*
 * Whether a touch of each page would wait for a server: not mapped, or
 * mapped uffd-wp write-protected (a write would).  A page mapped writable
 * works without one and is kept.  With WP_ASYNC on u no write waits: the
 * protection is a tracker's (pagemap-scan), the page was served, and
 * failing it would lose its bytes.  Unreadable pagemap: every page waits
 * (failing a page that worked beats leaving a thread asleep).
 */
static uint8_t *page_states(const struct uffdm *u, char *addr, size_t n, size_t page)
{
	uint8_t *st = malloc(n);
	int pm = uffdm__pagemap_open();

	if (st) {
		uffdm__pages_mapped(pm, addr, n, page, st);
		for (size_t i = 0; i < n; i++)
			if (!(st[i] & UFFDM_PM_MAPPED) ||
			    ((st[i] & UFFDM_PM_WP) && !(u->features & UFFD_FEATURE_WP_ASYNC)))
				st[i] |= PG_WAIT;
	}
	if (pm >= 0)
		close(pm);
	return st;
}

/* One POISON a run of holes; a page mapped meanwhile (EEXIST) is left to a fence. */
static int poison_runs(struct uffdm *u, char *addr, size_t n, size_t page, uint8_t *st)
{
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && hole(st[j]) == hole(st[i]); j++)
			;
		for (size_t k = i; hole(st[i]) && k < j;) {
			ssize_t done = uffdm_poison(u, addr + k * page, (j - k) * page, UFFDM_DONTWAKE);

			if (done == -EEXIST) {
				k++;
				continue;
			}
			if (done <= 0)
				return done ? (int)done : -EIO;
			for (size_t m = 0; m < (size_t)done / page; m++)
				st[k + m] |= PG_DONE;
			k += (size_t)done / page;
		}
	}
	return 0;
}

/* [first, last] of the pages to fence in one view of the region's file, the others kept. */
static int fail_in_view(char *addr, size_t page, const uint8_t *st, size_t first, size_t last)
{
	size_t n = last + 1 - first;
	uint8_t *served = malloc(n);
	off_t off;
	int fd = uffdm__region_file_at(addr + first * page, n * page, &off), ret = fd;

	if (fd >= 0 && served) {
		for (size_t i = 0; i < n; i++)
			served[i] = !(st[first + i] & PG_WAIT);
		ret = uffdm__fail_view(fd, off, addr + first * page, n * page, page, served);
	} else if (fd >= 0) {
		ret = -ENOMEM;
	}
	if (fd >= 0)
		close(fd);
	free(served);
	return ret;
}

/*
 * The pages to fence: one run takes one fence (fence.c).  Several, with
 * served pages between, take one view of a region's file over them all
 * (failview.c), not a mapping each.  Not with WP_ASYNC: the new view is
 * not the tracker's, so writes there would go unseen; nor over a mapping
 * no region made here (no file to view): a fence a run then.
 */
static int fence_pages(struct uffdm *u, char *addr, size_t n, size_t page, const uint8_t *st)
{
	size_t first = n, last = 0, runs = 0;
	int ret = 0;

	for (size_t i = 0; i < n; i++)
		if (to_fence(st[i])) {
			runs += first == n || !to_fence(st[i - 1]);
			first = first == n ? i : first;
			last = i;
		}
	if (!runs)
		return 0;
	if (runs > 1 && !(u->features & UFFD_FEATURE_WP_ASYNC) &&
	    !fail_in_view(addr, page, st, first, last))
		return 0;
	for (size_t i = first, j; !ret && i <= last; i = j) {
		for (j = i + 1; j <= last && to_fence(st[j]) == to_fence(st[i]); j++)
			;
		if (to_fence(st[i]))
			ret = uffdm__fence(u, addr + i * page, (j - i) * page);
	}
	return ret;
}

/*
 * In this process: what a touch would wait for fails, by POISON where the
 * page is not mapped (unless told not to; a run in one call), else in one
 * mapping (fence_pages()).  No window: no page is ever unregistered.
 */
static int fail_local(struct uffdm *u, char *addr, size_t len, size_t page, bool poison)
{
	size_t n = len / page;
	uint8_t *st;
	int ret = uffdm__fence_prepare(u);

	if (!ret && !uffdm__fence_usable(u))
		ret = -EOPNOTSUPP;
	if (ret || !n)
		return ret;
	st = page_states(u, addr, n, page);
	if (!st)
		return -ENOMEM;
	if (poison)
		ret = poison_runs(u, addr, n, page, st);
	if (!ret)
		ret = fence_pages(u, addr, n, page, st);
	free(st);
	return ret;
}

/*
 * Every page of [addr, addr+len) a touch would wait on now (not mapped, or
 * write-protected) faults with SIGBUS from here on, and every thread
 * waiting on one is woken into that SIGBUS.  The wake comes last whatever
 * failed: a thread must never stay asleep.
 */
int uffdm_range_fail(struct uffdm *u, void *addr, size_t len, size_t page, unsigned int flags)
{
	bool poison;
	int ret, woke;

	if (!u || !page || (page & (page - 1)) || (uintptr_t)addr % page || len % page ||
	    (flags & ~UFFDM_FAIL_SIGBUS_FD))
		return -EINVAL;
	ret = uffdm__check_range(addr, len);
	if (ret)
		return ret;
	poison = !(flags & UFFDM_FAIL_SIGBUS_FD) && (u->avail & UFFD_FEATURE_POISON);
	/* an adopted descriptor's mm is another process's: no fence there */
	ret = u->adopted ? -EOPNOTSUPP : fail_local(u, addr, len, page, poison);
	if (ret && poison)
		ret = poison_holes(u, addr, len, page);
	if (ret)
		ret = move_to_sigbus(u, addr, len, page);
	woke = uffdm_wake(u, addr, len);
	return ret ? ret : woke;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Registering ranges, reading events and the resolving ioctls.  Thin
 * wrappers, but each turns the kernel's mixed conventions (ioctl -1+errno,
 * a negated errno or a byte count in an out field) into one: bytes done or
 * a negated errno.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "internal.h"

#define UFFDM_READ_BATCH 64

int uffdm__check_range(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;

	if (!addr || !len || a + len < a)
		return -EINVAL;
	return 0;
}

static int uffd_ioctl(const struct uffdm *u, unsigned long req, void *arg)
{
	if (ioctl(u->fd, req, arg) < 0)
		return -errno;
	return 0;
}

static void set_range(struct uffdio_range *r, const void *addr, size_t len)
{
	r->start = (uintptr_t)addr;
	r->len = len;
}

int uffdm_range_register(struct uffdm *u, void *addr, size_t len, unsigned int flags,
			 uint64_t *ioctls)
{
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MINOR };
	uint64_t need = (uint64_t)1 << _UFFDIO_CONTINUE;
	int ret;

	if (!u || (flags & ~(UFFDM_REGISTER_MISSING | UFFDM_REGISTER_WP |
			     UFFDM_REGISTER_NO_MINOR)))
		return -EINVAL;
	/*
	 * Without MINOR: a missing-fault server (QEMU-style postcopy) or a
	 * write tracker must not see minor faults on pages already cached.
	 */
	if (flags & UFFDM_REGISTER_NO_MINOR) {
		if (!(flags & (UFFDM_REGISTER_MISSING | UFFDM_REGISTER_WP)))
			return -EINVAL;
		reg.mode = 0;
		need = 0;
	}
	ret = uffdm__check_range(addr, len);
	if (ret)
		return ret;
	if (flags & UFFDM_REGISTER_MISSING)
		reg.mode |= UFFDIO_REGISTER_MODE_MISSING;
	if (flags & UFFDM_REGISTER_WP)
		reg.mode |= UFFDIO_REGISTER_MODE_WP;
	set_range(&reg.range, addr, len);
	ret = uffd_ioctl(u, UFFDIO_REGISTER, &reg);
	if (ret)
		return ret;
	/*
	 * Test only the bit we need: kernels add ioctl bits (6.6 added
	 * POISON) and a mask compared whole would break on each of them.
	 */
	if ((reg.ioctls & need) != need) {
		uffd_ioctl(u, UFFDIO_UNREGISTER, &reg.range);
		return -EOPNOTSUPP;
	}
	if (ioctls)
		*ioctls = reg.ioctls;
	return 0;
}

int uffdm_range_unregister(struct uffdm *u, void *addr, size_t len)
{
	struct uffdio_range range;
	int ret;

	if (!u)
		return -EINVAL;
	ret = uffdm__check_range(addr, len);
	if (ret)
		return ret;
	set_range(&range, addr, len);
	return uffd_ioctl(u, UFFDIO_UNREGISTER, &range);
}

int uffdm_region_register(struct uffdm *u, struct uffdm_region *r, unsigned int flags,
			  uint64_t *ioctls)
{
	if (!r)
		return -EINVAL;
	return uffdm_range_register(u, (void *)r->uaddr, r->size, flags, ioctls);
}

/*
 * The kernel puts bytes done, or a negated errno, in an out field, and on
 * partial progress still fails the ioctl with EAGAIN: bytes done win.
 */
static ssize_t done_or_error(int ret, int64_t done)
{
	if (done > 0)
		return (ssize_t)done;
	if (ret)
		return ret;
	return done < 0 ? (ssize_t)done : 0;
}

static int check_call(const struct uffdm *u, const void *addr, size_t len)
{
	return u ? uffdm__check_range(addr, len) : -EINVAL;
}

ssize_t uffdm_continue(struct uffdm *u, void *addr, size_t len, unsigned int flags)
{
	struct uffdio_continue c = { 0 };
	int ret = check_call(u, addr, len);

	if (ret)
		return ret;
	if (flags & ~(UFFDM_DONTWAKE | UFFDM_WP))
		return -EINVAL;
	/* 6.1-6.3 would take MODE_WP for an unknown bit: -EINVAL, unhelpfully. */
	if ((flags & UFFDM_WP) && !(u->avail & UFFD_FEATURE_WP_UNPOPULATED))
		return -EOPNOTSUPP;
	set_range(&c.range, addr, len);
	if (flags & UFFDM_DONTWAKE)
		c.mode |= UFFDIO_CONTINUE_MODE_DONTWAKE;
	if (flags & UFFDM_WP)
		c.mode |= UFFDIO_CONTINUE_MODE_WP;
	ret = uffd_ioctl(u, UFFDIO_CONTINUE, &c);
	return done_or_error(ret, c.mapped);
}

ssize_t uffdm_poison(struct uffdm *u, void *addr, size_t len, unsigned int flags)
{
	struct uffdio_poison p = { 0 };
	int ret = check_call(u, addr, len);

	if (ret)
		return ret;
	if (flags & ~UFFDM_DONTWAKE)
		return -EINVAL;
	if (!(u->avail & UFFD_FEATURE_POISON))
		return -EOPNOTSUPP;
	set_range(&p.range, addr, len);
	if (flags & UFFDM_DONTWAKE)
		p.mode |= UFFDIO_POISON_MODE_DONTWAKE;
	ret = uffd_ioctl(u, UFFDIO_POISON, &p);
	return done_or_error(ret, p.updated);
}

ssize_t uffdm_copy(struct uffdm *u, void *dst, const void *src, size_t len,
		   unsigned int flags)
{
	struct uffdio_copy c = { 0 };
	int ret = check_call(u, dst, len);

	if (ret)
		return ret;
	if (!src || (flags & ~(UFFDM_DONTWAKE | UFFDM_WP)))
		return -EINVAL;
	c.dst = (uintptr_t)dst;
	c.src = (uintptr_t)src;
	c.len = len;
	if (flags & UFFDM_DONTWAKE)
		c.mode |= UFFDIO_COPY_MODE_DONTWAKE;
	if (flags & UFFDM_WP)
		c.mode |= UFFDIO_COPY_MODE_WP;
	ret = uffd_ioctl(u, UFFDIO_COPY, &c);
	return done_or_error(ret, c.copy);
}

ssize_t uffdm_zeropage(struct uffdm *u, void *addr, size_t len, unsigned int flags)
{
	struct uffdio_zeropage z = { 0 };
	int ret = check_call(u, addr, len);

	if (ret)
		return ret;
	if (flags & ~UFFDM_DONTWAKE)
		return -EINVAL;
	set_range(&z.range, addr, len);
	if (flags & UFFDM_DONTWAKE)
		z.mode |= UFFDIO_ZEROPAGE_MODE_DONTWAKE;
	ret = uffd_ioctl(u, UFFDIO_ZEROPAGE, &z);
	return done_or_error(ret, z.zeropage);
}

int uffdm_wake(struct uffdm *u, void *addr, size_t len)
{
	struct uffdio_range range;
	int ret = check_call(u, addr, len);

	if (ret)
		return ret;
	set_range(&range, addr, len);
	return uffd_ioctl(u, UFFDIO_WAKE, &range);
}

/* Clearing write protection also wakes the threads waiting on it. */
int uffdm_writeprotect(struct uffdm *u, void *addr, size_t len, bool wp)
{
	struct uffdio_writeprotect w = { 0 };
	int ret = check_call(u, addr, len);

	if (ret)
		return ret;
	set_range(&w.range, addr, len);
	w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
	return uffd_ioctl(u, UFFDIO_WRITEPROTECT, &w);
}

static enum uffdm_event_kind fault_kind(uint64_t flags)
{
	if (flags & UFFD_PAGEFAULT_FLAG_WP)
		return UFFDM_EVENT_WP;
	if (flags & UFFD_PAGEFAULT_FLAG_MINOR)
		return UFFDM_EVENT_MINOR;
	return UFFDM_EVENT_MISSING;
}

int uffdm_event_decode(const struct uffd_msg *msg, struct uffdm_event *ev)
{
	if (!msg || !ev)
		return -EINVAL;
	memset(ev, 0, sizeof(*ev));
	ev->raw = *msg;
	ev->fork_fd = -1;
	switch (msg->event) {
	case UFFD_EVENT_PAGEFAULT:
		ev->kind = fault_kind(msg->arg.pagefault.flags);
		if (msg->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE)
			ev->flags |= UFFDM_FAULT_WRITE;
		ev->addr = msg->arg.pagefault.address;
		ev->tid = msg->arg.pagefault.feat.ptid;
		break;
	case UFFD_EVENT_FORK:
		ev->kind = UFFDM_EVENT_FORK;
		ev->fork_fd = (int)msg->arg.fork.ufd;
		break;
	case UFFD_EVENT_REMAP:
		ev->kind = UFFDM_EVENT_REMAP;
		ev->addr = msg->arg.remap.from;
		ev->end = msg->arg.remap.to;
		ev->len = msg->arg.remap.len;
		break;
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		ev->kind = msg->event == UFFD_EVENT_REMOVE ? UFFDM_EVENT_REMOVE : UFFDM_EVENT_UNMAP;
		ev->addr = msg->arg.remove.start;
		ev->end = msg->arg.remove.end;
		break;
	default:
		/* A newer kernel's event: kept raw, not dropped. */
		ev->kind = UFFDM_EVENT_UNKNOWN;
		break;
	}
	return 0;
}

static int wait_readable(int fd, int timeout)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int n = poll(&pfd, 1, timeout);

	if (n < 0)
		return -errno;
	return n;
}

static ssize_t read_msgs(int fd, struct uffd_msg *msgs, unsigned int n)
{
	ssize_t got = read(fd, msgs, n * sizeof(*msgs));

	if (got < 0)
		return -errno;
	return got / (ssize_t)sizeof(*msgs);
}

/*
 * One read, with a poll first only where the descriptor's mode differs
 * from the call's: a non-blocking read on a non-blocking descriptor, what
 * the handler threads do on every batch, costs one syscall.
 */
static ssize_t read_batch(struct uffdm *u, struct uffd_msg *msgs, unsigned int n, bool nonblock)
{
	ssize_t got;
	int ret;

	for (;;) {
		if (u->nonblock != nonblock) {
			ret = wait_readable(u->fd, nonblock ? 0 : -1);
			if (ret == -EINTR)	/* a signal is no answer: wait on */
				continue;
			if (ret <= 0)
				return ret;
		}
		got = read_msgs(u->fd, msgs, n);
		if (got == -EINTR)
			continue;
		if (got != -EAGAIN)
			return got;
		/* Nothing, or another reader took it: only a blocking read waits again. */
		if (nonblock)
			return 0;
	}
}

/*
 * Reads up to max events in one go.  Blocking: waits for at least one, even
 * on a non-blocking descriptor.  UFFDM_READ_NONBLOCK: 0 when none pending.
 */
int uffdm_events_read(struct uffdm *u, struct uffdm_event *ev, unsigned int max,
		      unsigned int flags)
{
	struct uffd_msg msgs[UFFDM_READ_BATCH];
	ssize_t got;

	if (!u || !ev || !max || (flags & ~UFFDM_READ_NONBLOCK))
		return -EINVAL;
	if (max > UFFDM_READ_BATCH)
		max = UFFDM_READ_BATCH;
	got = read_batch(u, msgs, max, flags & UFFDM_READ_NONBLOCK);
	if (got < 0)
		return (int)got;
	for (ssize_t i = 0; i < got; i++)
		uffdm_event_decode(&msgs[i], &ev[i]);
	return (int)got;
}

/* The page size after `cur` to try, 0 after the largest. */
static size_t next_page_size(size_t cur)
{
	static const size_t sizes[] = { 2UL << 20, 1UL << 30 };

	for (size_t i = 0; i < UFFDM_ARRAY_SIZE(sizes); i++)
		if (sizes[i] > cur)
			return sizes[i];
	return 0;
}

/*
 * Map [addr, addr+len) and wake its waiters, whatever races happened:
 * EEXIST means a page is mapped already (another resolver was first;
 * CONTINUE then wakes no one, so we do) and the pages after it are still
 * to map: step over it and go on.  Its size is not known here: 4 KiB
 * first, and when the kernel refuses the next address (EINVAL: inside a
 * huge page), back to the mapped page and step by 2 MiB, then 1 GiB.
 * EAGAIN means a non-cooperative event is unread, and the kernel refuses
 * until somebody reads it: read events into spill and retry.
 * Returns 0 when we mapped it all, 1 when some was already mapped (and
 * the rest is mapped now), -EAGAIN when spill is full, or the kernel's error.
 */
int uffdm_resolve(struct uffdm *u, void *addr, size_t len, struct uffdm_event *spill,
		  unsigned int spill_max, unsigned int *nspill)
{
	char *p = addr;
	size_t step = 0;	/* the last step over a mapped page */
	ssize_t done;
	int got, ret = 0;

	if (!u || (spill_max && (!spill || !nspill)) || (nspill && *nspill > spill_max))
		return -EINVAL;
	while (len) {
		done = uffdm_continue(u, p, len, 0);
		if (done > 0) {
			p += done;
			len -= (size_t)done;
			continue;
		}
		if (done == -EINVAL && step && next_page_size(step)) {
			p -= step;
			len += step;
			step = next_page_size(step);
			if (step > len)
				break;
			done = -EEXIST;
		}
		if (done == -EEXIST) {
			if (!step)
				step = (size_t)sysconf(_SC_PAGESIZE);
			got = uffdm_wake(u, p, step < len ? step : len);
			if (got)
				return got;
			ret = 1;
			if (step >= len)
				break;
			p += step;
			len -= step;
			continue;
		}
		if (done != -EAGAIN)
			return done ? (int)done : -EIO;
		if (!spill_max || *nspill == spill_max)
			return -EAGAIN;
		got = uffdm_events_read(u, spill + *nspill, spill_max - *nspill,
					UFFDM_READ_NONBLOCK);
		if (got < 0)
			return got;
		*nspill += (unsigned int)got;
		/* Someone else is reading it; let them finish. */
		if (!got)
			sched_yield();
	}
	return ret;
}

/*
 * 0.2: UFFDIO_MOVE (6.8): resolve a MISSING fault by moving the source's
 * pages into the faulting range instead of copying them.  Anonymous
 * private memory only, both sides (the kernel says -EINVAL for shmem,
 * hugetlbfs or a shared mapping); the source is left a hole.
 */
ssize_t uffdm_move(struct uffdm *u, void *dst, void *src, size_t len, unsigned int flags)
{
	struct uffdio_move m = { 0 };
	int ret = check_call(u, dst, len);

	if (ret)
		return ret;
	if (!src || (flags & ~(UFFDM_DONTWAKE | UFFDM_MOVE_ALLOW_SRC_HOLES)))
		return -EINVAL;
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
	ret = uffd_ioctl(u, UFFDIO_MOVE, &m);
	return done_or_error(ret, m.move);
}

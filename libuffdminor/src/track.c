// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Dirty tracking of a mapping, the best the kernel offers:
 *   pagemap-scan  PAGEMAP_SCAN + UFFD_FEATURE_WP_ASYNC (6.7+): read and
 *                 re-protect in one ioctl, no pause of the writers;
 *   soft-dirty    /proc/self/pagemap bit 55 + clear_refs "4": a write between
 *                 the read and the clear would be lost, so writers pause;
 *   uffd-wp       synchronous write-protect faults (5.19+, track-wp.c): the
 *                 first write to a page in a round waits for our thread;
 *                 writers pause while the view is protected again;
 *   none          every page is dirty in every round.
 * Soft-dirty fails its probe on hugetlbfs, so there 6.1 gets uffd-wp.
 * Came from examples/live-migrate, its first user.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "track.h"

struct uffdm_tracker {
	enum uffdm_track_kind kind;
	uint8_t *view;
	size_t size, page;
	struct uffdm *u;	/* pagemap-scan: WP_ASYNC; uffd-wp: synchronous WP */
	struct track_wp *wp;	/* uffd-wp: the fault thread and its bitmap */
	int pagemap_fd;
	int pagemap_err;	/* why pagemap_fd is -1 */
	uint64_t *buf;
	size_t buf_len;
};

static size_t track_bitmap_len(const struct uffdm_tracker *t)
{
	return track_bits_len(t->size, t->page);
}

/* PAGEMAP_SCAN (6.7, <linux/fs.h>): the system headers here may be older. */
struct uffdm_page_region {
	uint64_t start, end, categories;
};

struct uffdm_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define UFFDM_PAGEMAP_SCAN		_IOWR('f', 16, struct uffdm_pm_scan_arg)
#define UFFDM_PAGE_IS_WRITTEN		(1 << 1)
#define UFFDM_PM_SCAN_WP_MATCHING	(1 << 0)
#define UFFDM_PM_SCAN_CHECK_WPASYNC	(1 << 1)

#define PM_SOFT_DIRTY	(1ull << 55)
#define SCAN_VEC	512
#define BASE_PAGE	4096u	/* pagemap's unit on x86_64 and arm64 (4K kernels) */

static const char *const names[] = {
	[UFFDM_TRACK_AUTO] = "auto",
	[UFFDM_TRACK_PAGEMAP_SCAN] = "pagemap-scan",
	[UFFDM_TRACK_SOFT_DIRTY] = "soft-dirty",
	[UFFDM_TRACK_UFFD_WP] = "uffd-wp",
	[UFFDM_TRACK_NONE] = "none",
};

/* auto: the first that starts; none never fails */
static const enum uffdm_track_kind auto_order[] = {
	UFFDM_TRACK_PAGEMAP_SCAN, UFFDM_TRACK_SOFT_DIRTY, UFFDM_TRACK_UFFD_WP, UFFDM_TRACK_NONE,
};

const char *uffdm_track_name(enum uffdm_track_kind kind)
{
	return (unsigned int)kind < UFFDM_ARRAY_SIZE(names) ? names[kind] : NULL;
}

int uffdm_track_parse(const char *s)
{
	for (unsigned int k = 0; s && k < UFFDM_ARRAY_SIZE(names); k++)
		if (!strcmp(s, names[k]))
			return (int)k;
	return -EINVAL;
}

static int clear_refs(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, "4", 1) != 1)
		ret = -errno;
	close(fd);
	return ret;
}

static int scan(struct uffdm_tracker *t, uint8_t *bitmap, bool last)
{
	struct uffdm_page_region *vec = (struct uffdm_page_region *)t->buf;
	uint64_t start = (uintptr_t)t->view, end = start + t->size;

	while (start < end) {
		struct uffdm_pm_scan_arg a = {
			.size = sizeof(a),
			.flags = last ? 0 : UFFDM_PM_SCAN_WP_MATCHING | UFFDM_PM_SCAN_CHECK_WPASYNC,
			.start = start, .end = end, .vec = (uintptr_t)vec, .vec_len = SCAN_VEC,
			.category_mask = UFFDM_PAGE_IS_WRITTEN,
			.return_mask = UFFDM_PAGE_IS_WRITTEN,
		};
		long n = ioctl(t->pagemap_fd, UFFDM_PAGEMAP_SCAN, &a);

		if (n < 0)
			return -errno;
		for (long i = 0; bitmap && i < n; i++)
			for (uint64_t p = vec[i].start; p < vec[i].end; p += BASE_PAGE)
				track_bit_set(bitmap, (p - (uintptr_t)t->view) / t->page);
		if (a.walk_end <= start)
			return -EIO;
		start = a.walk_end;
	}
	return 0;
}

static int soft_dirty(struct uffdm_tracker *t, uint8_t *bitmap, bool last)
{
	size_t n4k = t->size / BASE_PAGE, per = t->page / BASE_PAGE;
	off_t off = (off_t)((uintptr_t)t->view / BASE_PAGE * 8);

	if (pread(t->pagemap_fd, t->buf, n4k * 8, off) != (ssize_t)(n4k * 8))
		return -EIO;
	for (size_t i = 0; i < n4k; i++)
		if (t->buf[i] & PM_SOFT_DIRTY)
			track_bit_set(bitmap, i / per);
	/* the last look: nothing will be asked again, so no clearing walk */
	return last ? 0 : clear_refs();
}

/* Does a page just written show up soft-dirty after clear_refs? */
static bool soft_dirty_works(struct uffdm_tracker *t)
{
	uint64_t e = 0;
	off_t off = (off_t)((uintptr_t)t->view / BASE_PAGE * 8);

	if (clear_refs())
		return false;
	track_write_same(t->view + 64);
	return pread(t->pagemap_fd, &e, 8, off) == 8 && (e & PM_SOFT_DIRTY);
}

static int start_scan(struct uffdm_tracker *t)
{
	uint64_t f = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM |
		     UFFD_FEATURE_WP_UNPOPULATED;
	int ret;

	if (t->pagemap_fd < 0)
		return t->pagemap_err;
	ret = uffdm_open(&t->u, 0, f);
	if (ret)
		return ret;
	ret = uffdm_range_register(t->u, t->view, t->size,
				   UFFDM_REGISTER_WP | UFFDM_REGISTER_NO_MINOR, NULL);
	if (!ret)
		ret = scan(t, NULL, false);	/* protect everything: the baseline */
	if (ret) {
		uffdm_close(t->u);
		t->u = NULL;
	}
	return ret;
}

static int start_soft_dirty(struct uffdm_tracker *t)
{
	if (t->pagemap_fd < 0)
		return t->pagemap_err;
	return soft_dirty_works(t) ? clear_refs() : -EOPNOTSUPP;
}

static int start_kind(struct uffdm_tracker *t, enum uffdm_track_kind k)
{
	switch (k) {
	case UFFDM_TRACK_PAGEMAP_SCAN:
		return start_scan(t);
	case UFFDM_TRACK_SOFT_DIRTY:
		return start_soft_dirty(t);
	case UFFDM_TRACK_UFFD_WP:
		return uffdm__wp_start(&t->wp, t->view, t->size, t->page);
	default:
		return 0;
	}
}

/* A VmFlags line of smaps names uffd registrations: um, uw, ui. */
static bool uffd_flags(const char *line)
{
	return strstr(line, " um") || strstr(line, " uw") || strstr(line, " ui");
}

/*
 * Whether part of [addr, addr+len) is registered on a userfaultfd: memory
 * a handler serves.  No kind can watch it from a second descriptor (its
 * registration is EBUSY), and soft-dirty's probe would write into a page
 * the handler owns.  Unreadable smaps: not known to be.
 */
static bool range_served(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false, served = false;

	if (!f)
		return false;
	while (!served && fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = s < hi && e > lo;
		else if (in && !strncmp(line, "VmFlags:", 8))
			served = uffd_flags(line);
	}
	fclose(f);
	return served;
}

/* Without pagemap only the kinds that read it fail: uffd-wp needs none. */
static int open_pagemap(struct uffdm_tracker *t)
{
	t->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (t->pagemap_fd < 0) {
		t->pagemap_err = -errno;
		return 0;
	}
	t->buf_len = t->size / BASE_PAGE > SCAN_VEC * 3 ? t->size / BASE_PAGE : SCAN_VEC * 3;
	t->buf = calloc(t->buf_len, 8);
	return t->buf ? 0 : -ENOMEM;
}

static int check_args(struct uffdm_tracker **out, enum uffdm_track_kind kind, void *addr,
		      size_t len, size_t page, unsigned int flags)
{
	if (!out || flags || (unsigned int)kind >= UFFDM_ARRAY_SIZE(names))
		return -EINVAL;
	if (!page || (page & (page - 1)) || page % BASE_PAGE)
		return -EINVAL;
	if ((uintptr_t)addr % page || !len || len % page)
		return -EINVAL;
	return uffdm__check_range(addr, len);
}

int uffdm_tracker_start(struct uffdm_tracker **out, enum uffdm_track_kind kind, void *addr,
			size_t len, size_t page, unsigned int flags)
{
	struct uffdm_tracker *t;
	int ret = check_args(out, kind, addr, len, page, flags);

	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->view = addr;
	t->size = len;
	t->page = page;
	t->kind = UFFDM_TRACK_NONE;
	ret = open_pagemap(t);
	/* 0.3: auto never falls to "none" in silence on memory a handler serves */
	if (!ret && kind == UFFDM_TRACK_AUTO && range_served(addr, len))
		ret = -EBUSY;
	if (!ret && kind != UFFDM_TRACK_AUTO) {
		ret = start_kind(t, kind);
		t->kind = kind;
	}
	for (size_t i = 0; !ret && kind == UFFDM_TRACK_AUTO && i < UFFDM_ARRAY_SIZE(auto_order);
	     i++)
		if (!start_kind(t, auto_order[i])) {
			t->kind = auto_order[i];
			break;
		}
	if (ret) {
		t->kind = UFFDM_TRACK_NONE;	/* what start_kind failed to start is torn down */
		uffdm_tracker_stop(t);
		return ret;
	}
	*out = t;
	return 0;
}

enum uffdm_track_kind uffdm_tracker_kind(const struct uffdm_tracker *t)
{
	return t ? t->kind : UFFDM_TRACK_NONE;
}

/* Both read and then re-arm: a write in between would be lost. */
bool uffdm_tracker_needs_quiesce(const struct uffdm_tracker *t)
{
	return t && (t->kind == UFFDM_TRACK_SOFT_DIRTY || t->kind == UFFDM_TRACK_UFFD_WP);
}

int uffdm_tracker_collect(struct uffdm_tracker *t, uint8_t *bitmap, unsigned int flags)
{
	bool last = flags & UFFDM_TRACK_LAST;

	if (!t || !bitmap || (flags & ~UFFDM_TRACK_LAST))
		return -EINVAL;
	switch (t->kind) {
	case UFFDM_TRACK_PAGEMAP_SCAN:
		return scan(t, bitmap, last);
	case UFFDM_TRACK_SOFT_DIRTY:
		return soft_dirty(t, bitmap, last);
	case UFFDM_TRACK_UFFD_WP:
		return uffdm__wp_collect(t->wp, bitmap, last);
	default:
		memset(bitmap, 0xff, track_bitmap_len(t));
		return 0;
	}
}

void uffdm_tracker_stop(struct uffdm_tracker *t)
{
	if (!t)
		return;
	uffdm__wp_stop(t->wp);
	t->wp = NULL;
	if (t->u) {
		uffdm_range_unregister(t->u, t->view, t->size);
		uffdm_close(t->u);
	}
	if (t->pagemap_fd >= 0)
		close(t->pagemap_fd);
	free(t->buf);
	free(t);
}

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
 *
 * Memory a handler serves (registered MINOR on its descriptor, 0.3): no
 * second descriptor can register it (EBUSY), so uffd-wp cannot, and
 * pagemap-scan only through the handler's own registration, when the
 * handler opened its descriptor with WP_ASYNC and registered MINOR|WP.
 * Soft-dirty needs no registration and, probed on a page of its own,
 * touches none of the caller's.  Auto never falls back to none there.
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
	struct uffdm *u;	/* pagemap-scan: WP_ASYNC, ours (NULL: the handler's) */
	unsigned int reg;	/* the range's registrations before us: REG_* */
	struct track_wp *wp;	/* uffd-wp: the fault thread and its bitmap */
	int pagemap_fd;
	int pagemap_err;	/* why pagemap_fd is -1 */
	uint64_t *buf;
	size_t buf_len;
	uint8_t *first;		/* served memory: mapped at the start, for the first collection */
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

#define SCAN_VEC	512
#define BASE_PAGE	TRACK_BASE_PAGE

/* A range's userfaultfd registrations, from smaps' VmFlags (um, uw, ui). */
#define REG_MISSING	(1u << 0)
#define REG_WP		(1u << 1)
#define REG_MINOR	(1u << 2)

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

static int scan(struct uffdm_tracker *t, uint8_t *bitmap, uint64_t flags)
{
	struct uffdm_page_region *vec = (struct uffdm_page_region *)t->buf;
	uint64_t start = (uintptr_t)t->view, end = start + t->size;

	while (start < end) {
		struct uffdm_pm_scan_arg a = {
			.size = sizeof(a),
			.flags = flags,
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

/*
 * Re-protecting collects: on our own registration the kernel checks that
 * every VMA is WP_ASYNC.  On the handler's it skips those that are not:
 * the start checked them all, and what has left the registration since is
 * a page the handler failed (a fence, which no write reaches).
 */
static uint64_t scan_flags(const struct uffdm_tracker *t, bool last)
{
	if (last)
		return 0;
	return UFFDM_PM_SCAN_WP_MATCHING | (t->u ? UFFDM_PM_SCAN_CHECK_WPASYNC : 0);
}

/*
 * The handler's registration, when it is MINOR|WP on a WP_ASYNC descriptor
 * (6.7+): WP_ASYNC is the whole descriptor's, so we cannot add it, and with
 * it the kernel resolves every WP fault itself, so it cannot clash with a
 * handler that takes WP faults.  The first scan, which asks the kernel to
 * check exactly that, is the probe.  A page the handler maps afterwards is
 * mapped writable (UFFDIO_CONTINUE overwrites the WP marker): written.
 */
static int start_scan_served(struct uffdm_tracker *t)
{
	int ret;

	if (!(t->reg & REG_MINOR) || !(t->reg & REG_WP))
		return -EBUSY;	/* another tracker's range, or no WP to share */
	ret = scan(t, NULL, UFFDM_PM_SCAN_WP_MATCHING | UFFDM_PM_SCAN_CHECK_WPASYNC);
	if (ret == -ENOTTY || ret == -EINVAL)
		return -EOPNOTSUPP;	/* no PAGEMAP_SCAN (before 6.7) */
	return ret == -EPERM ? -EBUSY : ret;	/* a descriptor without WP_ASYNC */
}

static int start_scan(struct uffdm_tracker *t)
{
	uint64_t f = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM |
		     UFFD_FEATURE_WP_UNPOPULATED;
	int ret;

	if (t->pagemap_fd < 0)
		return t->pagemap_err;
	if (t->reg)
		return start_scan_served(t);
	ret = uffdm_open(&t->u, 0, f);
	if (ret)
		return ret;
	ret = uffdm_range_register(t->u, t->view, t->size,
				   UFFDM_REGISTER_WP | UFFDM_REGISTER_NO_MINOR, NULL);
	if (!ret)
		ret = scan(t, NULL, scan_flags(t, false));	/* protect everything: the baseline */
	if (ret) {
		uffdm_close(t->u);
		t->u = NULL;
	}
	return ret;
}

static int start_soft_dirty(struct uffdm_tracker *t)
{
	int ret;

	if (t->pagemap_fd < 0)
		return t->pagemap_err;
	ret = uffdm__sd_usable(t->pagemap_fd, t->page);
	return ret ? ret : uffdm__clear_refs();
}

static int start_kind(struct uffdm_tracker *t, enum uffdm_track_kind k)
{
	switch (k) {
	case UFFDM_TRACK_PAGEMAP_SCAN:
		return start_scan(t);
	case UFFDM_TRACK_SOFT_DIRTY:
		return start_soft_dirty(t);
	case UFFDM_TRACK_UFFD_WP:
		/* refused before its populate would fault every page into the handler */
		if (t->reg)
			return -EBUSY;
		return uffdm__wp_start(&t->wp, t->view, t->size, t->page);
	default:
		return 0;
	}
}

/* A VmFlags line of smaps names uffd registrations: um, uw, ui. */
static unsigned int uffd_flags(const char *line)
{
	return (strstr(line, " um") ? REG_MISSING : 0) | (strstr(line, " uw") ? REG_WP : 0) |
	       (strstr(line, " ui") ? REG_MINOR : 0);
}

/*
 * The registrations of [addr, addr+len) on userfaultfds, REG_* of every
 * VMA in it: memory a handler serves (MINOR, MISSING) or another tracker
 * watches (WP).  A second descriptor cannot register any of it (EBUSY).
 * Unreadable smaps: not known to be.
 */
static unsigned int range_registered(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	unsigned int reg = 0;
	bool in = false;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = s < hi && e > lo;
		else if (in && !strncmp(line, "VmFlags:", 8))
			reg |= uffd_flags(line);
	}
	fclose(f);
	return reg;
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

/*
 * Auto: the first kind that starts.  On registered memory never none
 * (0.3): every page dirty every round, in silence, is no tracking; -EBUSY
 * says that nothing here works beside the registration.
 */
static int start_auto(struct uffdm_tracker *t)
{
	for (size_t i = 0; i < UFFDM_ARRAY_SIZE(auto_order); i++) {
		if (auto_order[i] == UFFDM_TRACK_NONE && t->reg)
			return -EBUSY;
		if (!start_kind(t, auto_order[i])) {
			t->kind = auto_order[i];
			return 0;
		}
	}
	return 0;
}

/*
 * Memory a handler serves: a page it maps while the start runs may be
 * protected (or have its bit cleared) before or after it is mapped, so
 * whether the first collection showed it depended on timing (issue 31).
 * Pinned down: the first collection also reports every page mapped when
 * the start returns (read after the kind started, so a page mapped later
 * is written in the kind's own eyes).  A round 0 copies served pages anyway.
 */
static int note_mapped(struct uffdm_tracker *t)
{
	size_t per = t->page / BASE_PAGE, n4k = t->size / BASE_PAGE;
	uint64_t ent[512];

	t->first = calloc(1, track_bitmap_len(t));
	if (!t->first)
		return -ENOMEM;
	for (size_t i = 0, k; i < n4k; i += k) {
		off_t off = (off_t)(((uintptr_t)t->view / BASE_PAGE + i) * sizeof(ent[0]));

		k = n4k - i < UFFDM_ARRAY_SIZE(ent) ? n4k - i : UFFDM_ARRAY_SIZE(ent);
		if (pread(t->pagemap_fd, ent, k * sizeof(ent[0]), off) != (ssize_t)(k * sizeof(ent[0])))
			return -EIO;
		for (size_t j = 0; j < k; j++)
			if (ent[j] >> 63 & 1)
				track_bit_set(t->first, (i + j) / per);
	}
	return 0;
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
	t->reg = range_registered(addr, len);
	ret = open_pagemap(t);
	if (!ret && kind == UFFDM_TRACK_AUTO)
		ret = start_auto(t);
	else if (!ret) {
		ret = start_kind(t, kind);
		t->kind = kind;
	}
	if (!ret && (t->reg & REG_MINOR))
		ret = note_mapped(t);
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

static int collect_kind(struct uffdm_tracker *t, uint8_t *bitmap, bool last)
{
	switch (t->kind) {
	case UFFDM_TRACK_PAGEMAP_SCAN:
		return scan(t, bitmap, scan_flags(t, last));
	case UFFDM_TRACK_SOFT_DIRTY:
		return uffdm__sd_collect(t->pagemap_fd, t->view, t->size, t->page, t->buf, bitmap,
					 last);
	case UFFDM_TRACK_UFFD_WP:
		return uffdm__wp_collect(t->wp, bitmap, last);
	default:
		memset(bitmap, 0xff, track_bitmap_len(t));
		return 0;
	}
}

int uffdm_tracker_collect(struct uffdm_tracker *t, uint8_t *bitmap, unsigned int flags)
{
	int ret;

	if (!t || !bitmap || (flags & ~UFFDM_TRACK_LAST))
		return -EINVAL;
	ret = collect_kind(t, bitmap, flags & UFFDM_TRACK_LAST);
	if (!ret && t->first) {
		for (size_t i = 0; i < track_bitmap_len(t); i++)
			bitmap[i] |= t->first[i];
		free(t->first);
		t->first = NULL;
	}
	return ret;
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
	free(t->first);
	free(t);
}

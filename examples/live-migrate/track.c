// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Dirty tracking on the source, the best the kernel offers:
 *   pagemap-scan  PAGEMAP_SCAN + UFFD_FEATURE_WP_ASYNC (6.7+): read and
 *                 re-protect in one ioctl, no pause of the writers;
 *   soft-dirty    /proc/self/pagemap bit 55 + clear_refs "4": a write between
 *                 the read and the clear would be lost, so writers pause;
 *   uffd-wp       synchronous write-protect faults (5.19+, track-wp.c): the
 *                 first write to a page in a round waits for our thread;
 *                 writers pause while the view is protected again;
 *   none          every page is dirty in every round.
 * Soft-dirty fails its probe on hugetlbfs, so there 6.1 gets uffd-wp.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "lm.h"

/* PAGEMAP_SCAN (6.7): the system headers here are 6.1's. */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start, end, categories;
};

struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define PAGEMAP_SCAN		_IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WRITTEN		(1 << 1)
#define PM_SCAN_WP_MATCHING	(1 << 0)
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)
#endif

#define PM_SOFT_DIRTY	(1ull << 55)
#define SCAN_VEC	512

static const char *const names[LM_TRACK_END] = {
	[LM_TRACK_PAGEMAP_SCAN] = "pagemap-scan", [LM_TRACK_SOFT_DIRTY] = "soft-dirty",
	[LM_TRACK_NONE] = "none", [LM_TRACK_UFFD_WP] = "uffd-wp",
};

/* auto: the first that starts; none never fails */
static const enum lm_track_kind auto_order[] = {
	LM_TRACK_PAGEMAP_SCAN, LM_TRACK_SOFT_DIRTY, LM_TRACK_UFFD_WP, LM_TRACK_NONE,
};

const char *lm_track_name(unsigned int kind)
{
	return kind < LM_TRACK_END ? names[kind] : "auto";
}

int lm_track_parse(const char *s)
{
	if (!strcmp(s, "auto"))
		return LM_TRACK_END;
	for (int k = 0; k < LM_TRACK_END; k++)
		if (!strcmp(s, names[k]))
			return k;
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

static int scan(struct lm_tracker *t, uint8_t *bitmap, bool last)
{
	struct page_region *vec = (struct page_region *)t->buf;
	uint64_t start = (uintptr_t)t->view, end = start + t->size;

	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a),
			.flags = last ? 0 : PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
			.start = start, .end = end, .vec = (uintptr_t)vec, .vec_len = SCAN_VEC,
			.category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN,
		};
		long n = ioctl(t->pagemap_fd, PAGEMAP_SCAN, &a);

		if (n < 0)
			return -errno;
		for (long i = 0; bitmap && i < n; i++)
			for (uint64_t p = vec[i].start; p < vec[i].end; p += 4096)
				bit_set(bitmap, (p - (uintptr_t)t->view) / t->page);
		if (a.walk_end <= start)
			return -EIO;
		start = a.walk_end;
	}
	return 0;
}

static int soft_dirty(struct lm_tracker *t, uint8_t *bitmap, bool last)
{
	size_t n4k = t->size / 4096, per = t->page / 4096;
	off_t off = (off_t)((uintptr_t)t->view / 4096 * 8);

	if (pread(t->pagemap_fd, t->buf, n4k * 8, off) != (ssize_t)(n4k * 8))
		return -EIO;
	for (size_t i = 0; i < n4k; i++)
		if (t->buf[i] & PM_SOFT_DIRTY)
			bit_set(bitmap, i / per);
	/* the last look: nothing will be asked again, so no clearing walk */
	return last ? 0 : clear_refs();
}

/* Does a page just written show up soft-dirty after clear_refs? */
static bool soft_dirty_works(struct lm_tracker *t)
{
	uint64_t e = 0;
	off_t off = (off_t)((uintptr_t)t->view / 4096 * 8);

	if (clear_refs())
		return false;
	lm_write_same(t->view + 64);
	return pread(t->pagemap_fd, &e, 8, off) == 8 && (e & PM_SOFT_DIRTY);
}

static int start_scan(struct lm_tracker *t)
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

static int start_soft_dirty(struct lm_tracker *t)
{
	if (t->pagemap_fd < 0)
		return t->pagemap_err;
	return soft_dirty_works(t) ? clear_refs() : -EOPNOTSUPP;
}

static int start_kind(struct lm_tracker *t, enum lm_track_kind k)
{
	switch (k) {
	case LM_TRACK_PAGEMAP_SCAN:
		return start_scan(t);
	case LM_TRACK_SOFT_DIRTY:
		return start_soft_dirty(t);
	case LM_TRACK_UFFD_WP:
		return lm_wp_start(t);
	default:
		return 0;
	}
}

/* Without pagemap only the kinds that read it fail: uffd-wp needs none. */
static int open_pagemap(struct lm_tracker *t)
{
	t->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (t->pagemap_fd < 0) {
		t->pagemap_err = -errno;
		return 0;
	}
	t->buf_len = t->size / 4096 > SCAN_VEC * 3 ? t->size / 4096 : SCAN_VEC * 3;
	t->buf = calloc(t->buf_len, 8);
	return t->buf ? 0 : -ENOMEM;
}

int lm_track_start(struct lm_tracker *t, unsigned int want, uint8_t *view, size_t size,
		   size_t page)
{
	int ret;

	memset(t, 0, sizeof(*t));
	t->view = view;
	t->size = size;
	t->page = page;
	t->kind = LM_TRACK_NONE;
	ret = open_pagemap(t);
	if (ret)
		return ret;
	if (want != LM_TRACK_END) {
		ret = start_kind(t, want);
		if (!ret)
			t->kind = want;
		return ret;
	}
	for (size_t i = 0; i < sizeof(auto_order) / sizeof(auto_order[0]); i++)
		if (!start_kind(t, auto_order[i])) {
			t->kind = auto_order[i];
			break;
		}
	return 0;
}

/* Both read and then re-arm: a write in between would be lost. */
bool lm_track_needs_quiesce(const struct lm_tracker *t)
{
	return t->kind == LM_TRACK_SOFT_DIRTY || t->kind == LM_TRACK_UFFD_WP;
}

int lm_track_collect(struct lm_tracker *t, uint8_t *bitmap, bool last)
{
	switch (t->kind) {
	case LM_TRACK_PAGEMAP_SCAN:
		return scan(t, bitmap, last);
	case LM_TRACK_SOFT_DIRTY:
		return soft_dirty(t, bitmap, last);
	case LM_TRACK_UFFD_WP:
		return lm_wp_collect(t, bitmap, last);
	default:
		memset(bitmap, 0xff, (t->size / t->page + 7) / 8);
		return 0;
	}
}

void lm_track_stop(struct lm_tracker *t)
{
	lm_wp_stop(t);
	if (t->u) {
		uffdm_range_unregister(t->u, t->view, t->size);
		uffdm_close(t->u);
	}
	if (t->pagemap_fd >= 0)
		close(t->pagemap_fd);
	free(t->buf);
	memset(t, 0, sizeof(*t));
	t->pagemap_fd = -1;
}

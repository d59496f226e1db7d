/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Dirty tracking: what track.c and its synchronous uffd-wp kind (track-wp.c) share. */
#ifndef UFFDM_TRACK_H
#define UFFDM_TRACK_H

#include "internal.h"

struct track_wp;

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

static inline size_t track_bitmap_len(const struct uffdm_tracker *t)
{
	return (t->size / t->page + 7) / 8;
}

static inline void track_bit_set(uint8_t *b, uint64_t i)
{
	b[i / 8] |= (uint8_t)(1u << (i % 8));
}

static inline bool track_bit_get(const uint8_t *b, uint64_t i)
{
	return b[i / 8] & (1u << (i % 8));
}

/*
 * A write that changes nothing, for probes: the page sees a write fault.
 * The zero is hidden from the compiler: clang turns an atomic add of a
 * constant 0 into a fenced load, which writes nothing.
 */
static inline void track_write_same(void *p)
{
	uint64_t zero = 0;

	__asm__("" : "+r"(zero));
	__atomic_fetch_add((uint64_t *)p, zero, __ATOMIC_SEQ_CST);
}

/* track-wp.c */
int uffdm__wp_start(struct uffdm_tracker *t);
int uffdm__wp_collect(struct uffdm_tracker *t, uint8_t *bitmap, bool last);
void uffdm__wp_stop(struct uffdm_tracker *t);

#endif

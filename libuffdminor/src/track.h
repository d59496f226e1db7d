/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Dirty tracking: the helpers the front end (track.c) and its backends
 * share, the soft-dirty backend (track-sd.c) and the synchronous uffd-wp
 * backend (track-wp.c), which know nothing of the front end: they get
 * their range (and the uffd-wp one owns its descriptor).
 */
#ifndef UFFDM_TRACK_H
#define UFFDM_TRACK_H

#include "internal.h"

struct track_wp;

#define TRACK_BASE_PAGE	4096u	/* pagemap's unit on x86_64 and arm64 (4K kernels) */

/* Bytes of a bitmap with one bit per page of size bytes. */
static inline size_t track_bits_len(size_t size, size_t page)
{
	return (size / page + 7) / 8;
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

/* track-sd.c: soft-dirty, probed on a scratch page of the library's own */
int uffdm__clear_refs(void);
int uffdm__sd_usable(int pagemap_fd, size_t page);
int uffdm__sd_collect(int pagemap_fd, const uint8_t *view, size_t size, size_t page,
		      uint64_t *buf, uint8_t *bitmap, bool last);

/* track-wp.c: [view, view+size) in pages of page bytes; *out NULL on failure */
int uffdm__wp_start(struct track_wp **out, uint8_t *view, size_t size, size_t page);
int uffdm__wp_collect(struct track_wp *w, uint8_t *bitmap, bool last);
void uffdm__wp_stop(struct track_wp *w);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The watchdog's stall judgement (watchdog.c), free of descriptors and
 * clocks so that a test drives it tick by tick (test/test-stall.c). Not
 * part of the API: the version script keeps it out of the shared library.
 */
#ifndef UFFDM_STALL_H
#define UFFDM_STALL_H

#include <stdbool.h>
#include <stdint.h>

struct uffdm__stall {
	uint64_t served;	/* ended + completed over the regions, last seen */
	uint64_t progress_at;	/* when served last moved, or nothing waited */
	uint64_t waiting_since;	/* work seen waiting since, served unchanged (0: none) */
};

/*
 * One tick at now (ns): n faults served or pages completed so far, waiting
 * whether a fault is queued or in a server's hands; deferred(arg) says
 * whether a deferred page waits (asked only after limit without progress).
 * True: stalled.
 */
bool uffdm__stall_tick(struct uffdm__stall *st, uint64_t now, uint64_t limit, uint64_t n,
		       bool waiting, bool (*deferred)(void *arg), void *arg);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The page-state machine (pagestate.c) as its host sees it.  It knows
 * nothing of handler threads or event loops: whoever serves (handler.c's
 * threads, an application's loop, a completing thread) gives it a server
 * (the descriptor, the failure path, the callback, and how to count and
 * where events go) and a caller (who counts, and where events read while
 * resolving are set aside).
 */
#ifndef UFFDM_PAGESTATE_H
#define UFFDM_PAGESTATE_H

#include "internal.h"

enum counter {
	C_MINOR, C_MISSING, C_WP, C_EVENTS, C_RESOLVED, C_FAILED, C_EEXIST, C_EAGAIN,
	C_MESSAGES, C_FILLS, C_DUP, C_DEFERRED, C_COMPLETED, C_OUTSIDE, C_REQUEUED,
	C_LAT_SUM, C_CB_NS, C_IOCTL_NS, C_UNSERVED, C_NR
};

/* What the host does for the state machine; who is the caller's. */
struct ps_ops {
	void (*count)(void *who, enum counter c, uint64_t n);
	/* a timed step's start; then step_time() adds its time to counter c */
	uint64_t (*step_start)(void *who);
	void (*step_time)(void *who, enum counter c, uint64_t t0);
	/* a non-cooperative event read while resolving a fault */
	void (*event)(void *who, const struct uffdm_event *ev);
};

struct ps_server {
	struct uffdm *u;
	bool poison;		/* fail with UFFDIO_POISON where it can */
	uffdm_fault_fn fault;
	void *arg;
	const struct ps_ops *ops;
};

/* One serving thread for one call: spill may be NULL (max 0). */
struct ps_caller {
	const struct ps_server *srv;
	void *who;
	struct uffdm_event *spill;
	unsigned int *nspill, max;
};

/*
 * Tests only (test-zaprace.c links the static library; the shared one does
 * not export it): called between a run's "filled" and its mapping, the
 * window a zap can fall into.
 */
extern void (*uffdm__test_after_fill)(struct uffdm_region *r, size_t off, size_t len);

/* A fault message for a page of r. */
void uffdm__ps_serve(const struct ps_caller *c, struct uffdm_region *r,
		     const struct uffdm_event *ev);
/* Work in hand no count shows yet (a read batch): one fault begun on r, or given back. */
void uffdm__ps_hold(struct uffdm_region *r, bool hold);
/*
 * A fault outside every region: poisoned, fenced, left to the owner of its
 * mm through owner's shared states (NULL: none), or moved to sigbus (may
 * be NULL).
 */
void uffdm__ps_fail_outside(const struct ps_caller *c, struct uffdm *sigbus,
			    struct uffdm_region *owner, const struct uffdm_event *ev);
/* Whole pages of r: 0, -EINVAL, -ERANGE. */
int uffdm__ps_check_span(const struct uffdm_region *r, size_t off, size_t len);
/* uffdm_handler_complete(3) and uffdm_handler_claim(3) once the handler is checked. */
int uffdm__ps_complete(const struct ps_caller *c, struct uffdm_region *r, size_t off,
		       size_t len, int err);
int uffdm__ps_claim(struct uffdm_region *r, size_t off, bool wait);
/* Stopping: pages deferred, then pages never served, fail. */
void uffdm__ps_fail_deferred(const struct ps_caller *c, struct uffdm_region *r);
void uffdm__ps_fail_unserved(const struct ps_caller *c, struct uffdm_region *r);
bool uffdm__region_busy(const struct uffdm_region *r);

#endif

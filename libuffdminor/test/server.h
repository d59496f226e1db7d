/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A page server in a process of its own, for the tests of a server that is
 * replaced or lost (test-replace.c, test-watchdog.c): forked while the VMM
 * (the test) has no thread yet, it waits for "go", adopts the VMM's
 * userfaultfd, SIGBUS descriptor and region (its page states shared:
 * uffdm_region_state_fd() was called), and serves with fault until told
 * to quit (its control pipe closed) or killed.
 */
#ifndef UFFDM_TEST_SERVER_H
#define UFFDM_TEST_SERVER_H

#include <sys/types.h>

#include "uffdminor.h"

struct page_server {
	uffdm_fault_fn fault;
	void *arg;
	unsigned int state_flags;	/* UFFDM_STATE_TAKEOVER for a replacement */
};

/* The server's pid; *ctl: write a byte for go, close it for quit. */
pid_t page_server_fork(struct uffdm *vmm, struct uffdm_region *r, const struct page_server *ps,
		       int *ctl);
void page_server_go(int ctl);

#endif

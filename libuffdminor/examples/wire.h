/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the VMM sends its pager over a Unix socket, once: four descriptors
 * (SCM_RIGHTS) and where the memory is.  Firecracker and Cloud Hypervisor
 * send the same things (their userfaultfd, the guest memory's file, the
 * regions with the VMM's addresses); the wire format is ours.
 */
#ifndef UFFDM_EXAMPLE_WIRE_H
#define UFFDM_EXAMPLE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC	0x5247503331354bull	/* "K513PGR" */
#define WIRE_VERSION	2

/*
 * fds: [0] the userfaultfd, [1] the guest memory's memfd, [2] the SIGBUS
 * descriptor, [3] the page states (uffdm_region_state_fd(3))
 */
enum { WIRE_UFFD, WIRE_MEMFD, WIRE_SIGBUS, WIRE_STATE, WIRE_NFDS };

/* hello.flags: this pager replaces one that died (UFFDM_STATE_TAKEOVER) */
#define WIRE_TAKEOVER	(1u << 0)

struct wire_hello {
	uint64_t magic;
	uint32_t version, nfds;
	uint64_t view;		/* the registered view, in the VMM's address space */
	uint64_t size;		/* bytes, from offset in the memfd */
	uint64_t offset;
	uint32_t flags;		/* WIRE_* */
	uint32_t pad;
};

/* The pager's answer once it serves: one byte. */
#define WIRE_READY 'R'

int wire_send(int sock, const int *fds, unsigned int n, const void *data, size_t len);
/* Exactly len bytes and exactly n descriptors, or a negated errno (nothing left open). */
int wire_recv(int sock, int *fds, unsigned int n, void *data, size_t len);

/* The page i of the "snapshot": what the pager writes and the VMM checks. */
void snapshot_page(void *page, size_t len, size_t i);
int snapshot_check(const void *page, size_t len, size_t i);

struct uffdm_region;
struct uffdm_event;
/* The fault callback both use: the page from the snapshot, through the backing view. */
int snapshot_fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev);

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm-pager: serves the minor faults of another process's memory.
 *
 *   uffdm-pager --fd N [--threads T]
 *
 * Descriptor N is a Unix socket to the VMM.  It sends (wire.h) its
 * userfaultfd, the guest memory's memfd and its SIGBUS descriptor, with
 * the registered view's address.  The pager adopts the userfaultfd, maps
 * only a backing view of the memfd, fills each faulting page there ("from
 * a snapshot") and lets the library CONTINUE it in the VMM's mm.  It
 * serves until the VMM closes the socket, then prints its counters.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uffdminor.h"
#include "wire.h"

struct pager {
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_handler *h;
};

static int die(const char *what, int err)
{
	fprintf(stderr, "uffdm-pager: %s: %s\n", what, strerror(-err));
	return 1;
}

static int check_hello(const struct wire_hello *w)
{
	if (w->magic != WIRE_MAGIC || w->version != WIRE_VERSION || w->nfds != WIRE_NFDS)
		return -EPROTO;
	return 0;
}

/* Adopt what the VMM sent; the descriptors are ours to close whatever happens. */
static int setup(struct pager *pg, int sock)
{
	struct wire_hello w;
	int fds[WIRE_NFDS], ret;

	ret = wire_recv(sock, fds, WIRE_NFDS, &w, sizeof(w));
	if (ret)
		return die("receiving the VMM's descriptors", ret);
	ret = check_hello(&w);
	if (!ret)
		ret = uffdm_adopt(&pg->u, fds[WIRE_UFFD], 0, 0);
	if (ret) {
		close(fds[WIRE_UFFD]);
		close(fds[WIRE_SIGBUS]);
		close(fds[WIRE_STATE]);
		fds[WIRE_STATE] = -1;
	} else {
		ret = uffdm_sigbus_adopt(pg->u, fds[WIRE_SIGBUS]);
		if (ret)
			close(fds[WIRE_SIGBUS]);
	}
	if (!ret)
		ret = uffdm_region_from_fd(&pg->r, fds[WIRE_MEMFD], (off_t)w.offset, w.size,
					   w.view, 0);
	close(fds[WIRE_MEMFD]);	/* the region holds its own */
	/* the states live in the VMM's memfd: a replacement finds what we filled */
	if (!ret) {
		ret = uffdm_region_adopt_state(pg->r, fds[WIRE_STATE],
					       w.flags & WIRE_TAKEOVER ? UFFDM_STATE_TAKEOVER : 0);
		if (ret)
			close(fds[WIRE_STATE]);
	} else if (fds[WIRE_STATE] >= 0) {
		close(fds[WIRE_STATE]);
	}
	return ret ? die("adopting the VMM's memory", ret) : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fd", required_argument, NULL, 'f' },
		{ "threads", required_argument, NULL, 't' },
		{ 0 },
	};
	struct uffdm_handler_config cfg = { .threads = 2, .fault = snapshot_fill };
	struct pager pg = { 0 };
	struct uffdm_stats st;
	int sock = -1, c, ret;
	char byte;

	while ((c = getopt_long(argc, argv, "f:t:", opts, NULL)) != -1) {
		if (c == 'f')
			sock = atoi(optarg);
		else if (c == 't')
			cfg.threads = (unsigned int)atoi(optarg);
		else
			return 2;
	}
	if (sock < 0) {
		fprintf(stderr, "usage: uffdm-pager --fd N [--threads T]\n");
		return 2;
	}
	if (setup(&pg, sock))
		return 1;
	ret = uffdm_handler_start(&pg.h, pg.u, pg.r, &cfg);
	if (ret)
		return die("starting the handler", ret);
	if (write(sock, (char[]){ WIRE_READY }, 1) != 1)
		return die("telling the VMM", -errno);
	/* The VMM closes its end when it is done. */
	while (read(sock, &byte, 1) > 0)
		;
	uffdm_handler_stop(pg.h, &st);
	fprintf(stderr, "uffdm-pager: served %llu faults (%llu failed, %llu pages filled); "
		"read-to-wake p50 %llu ns p99 %llu ns\n", (unsigned long long)st.minor,
		(unsigned long long)st.failed, (unsigned long long)st.fills,
		(unsigned long long)st.p50_ns, (unsigned long long)st.p99_ns);
	uffdm_region_destroy(pg.r);
	uffdm_close(pg.u);
	return 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The drills' relay: one thread relays every connection between a source
 * and a destination (poll, non-blocking reads, no thread per leg), walking
 * each direction frame by frame so a drill knows where the migration is.
 * What it does at its moment is the drill's: the hooks below.
 */
#ifndef LM_DRILL_RELAY_H
#define LM_DRILL_RELAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lm.h"

#define DR_MAXC 16		/* connections: main, urgent, rejoins */

struct dr_leg {
	int from, to;
	uint8_t hdr[sizeof(struct lm_hdr)];
	size_t hgot;
	uint64_t left;		/* bytes of the current frame still to come */
	unsigned int nframes;
	bool mark;		/* the drill's: the current frame is one it watches */
	bool held;		/* stalled: never read again */
};

struct dr {
	int lfd;
	char dest[64];
	struct dr_leg leg[2 * DR_MAXC];	/* 2k: source to destination, 2k+1 back */
	int nconn;
	int sink[DR_MAXC];	/* accepted, never answered */
	int nsink;
	atomic_int stop;
	pthread_t tid;
	/* n bytes read on leg i: how many go on; *now: the drill's moment */
	size_t (*scan)(struct dr *d, int i, uint8_t *b, size_t n, bool *now);
	void (*fire)(struct dr *d);
	/* a new connection c: true to relay it (the hook may keep or close it) */
	bool (*admit)(struct dr *d, int c);
	void (*tick)(struct dr *d);	/* each turn of the loop, or NULL */
};

/* Close every leg; rst: with a reset, not a FIN. */
void dr_close_all(struct dr *d, bool rst);
/* Close c with a reset. */
void dr_reset(int c);
/* Feed header byte b to leg i: true when a header is whole (in *h), the
 * frame's length (and tag, after the handshake) then in g->left. */
bool dr_header(struct dr_leg *g, int i, uint8_t b, struct lm_hdr *h);
/* Start the thread (after every fork: a fork copies held locks); stop it. */
int dr_start(struct dr *d);
void dr_stop(struct dr *d);

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later
/* The drills' relay (drill-relay.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "drill-relay.h"

void dr_reset(int c)
{
	struct linger l = { 1, 0 };

	setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(c);
}

void dr_close_all(struct dr *d, bool rst)
{
	for (int i = 0; i < 2 * d->nconn; i += 2) {
		struct dr_leg *g = &d->leg[i];

		if (g->from < 0)
			continue;
		if (rst) {
			dr_reset(g->from);
			dr_reset(g->to);
		} else {
			close(g->from);
			close(g->to);
		}
		g->from = g->to = g[1].from = g[1].to = -1;
	}
}

bool dr_header(struct dr_leg *g, int i, uint8_t b, struct lm_hdr *h)
{
	g->hdr[g->hgot++] = b;
	if (g->hgot < sizeof(g->hdr))
		return false;
	g->hgot = 0;
	memcpy(h, g->hdr, sizeof(*h));
	g->left = h->len + (g->nframes++ >= lm_clear_frames(i % 2 == 0) ? LM_TAGLEN : 0);
	return true;
}

static void accept_one(struct dr *d)
{
	int c = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK), t;

	if (c < 0 || !d->admit(d, c))
		return;
	t = d->nconn < DR_MAXC ? lm_connect(d->dest) : -1;
	if (t < 0) {
		close(c);
		return;
	}
	fcntl(t, F_SETFL, fcntl(t, F_GETFL) | O_NONBLOCK);
	d->leg[2 * d->nconn] = (struct dr_leg){ .from = c, .to = t };
	d->leg[2 * d->nconn + 1] = (struct dr_leg){ .from = t, .to = c };
	d->nconn++;
}

/* Write all of it: the far side reads (a small wait now and then is fine). */
static void put(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (poll(&p, 1, 1000) <= 0)
				return;
			continue;
		}
		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

/* One read on leg i, relayed up to the drill's moment: whether it came. */
static bool relay_leg(struct dr *d, int i)
{
	static uint8_t buf[1 << 16];
	struct dr_leg *g = &d->leg[i];
	ssize_t got = read(g->from, buf, sizeof(buf));
	bool now = false;

	if (got <= 0) {
		if (got < 0 && errno == EAGAIN)
			return false;
		shutdown(g->to, SHUT_WR);
		g->held = true;	/* read no more: its end is gone */
		return false;
	}
	put(g->to, buf, d->scan(d, i, buf, (size_t)got, &now));
	if (now)
		d->fire(d);
	return now;
}

static void *relay_main(void *arg)
{
	struct dr *d = arg;

	while (!atomic_load(&d->stop)) {
		struct pollfd pf[1 + 2 * DR_MAXC];
		int idx[2 * DR_MAXC], n = 1;

		if (d->tick)
			d->tick(d);
		pf[0] = (struct pollfd){ .fd = d->lfd, .events = POLLIN };
		for (int i = 0; i < 2 * d->nconn; i++) {
			if (d->leg[i].from < 0 || d->leg[i].held)
				continue;
			idx[n - 1] = i;
			pf[n++] = (struct pollfd){ .fd = d->leg[i].from, .events = POLLIN };
		}
		if (poll(pf, (nfds_t)n, 20) <= 0)
			continue;
		if (pf[0].revents & POLLIN)
			accept_one(d);
		for (int k = 1; k < n; k++) {
			struct dr_leg *g = &d->leg[idx[k - 1]];

			if (!pf[k].revents || g->from < 0 || g->held)
				continue;
			if (relay_leg(d, idx[k - 1]))
				break;	/* the legs changed */
		}
	}
	dr_close_all(d, false);
	while (d->nsink)
		close(d->sink[--d->nsink]);
	return NULL;
}

int dr_start(struct dr *d)
{
	return pthread_create(&d->tid, NULL, relay_main, d);
}

void dr_stop(struct dr *d)
{
	atomic_store(&d->stop, 1);
	pthread_join(d->tid, NULL);
	close(d->lfd);
}

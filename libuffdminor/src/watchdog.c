// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The VMM's watchdog over a page server in another process (0.3).
 *
 * The kernel never fails a fault whose server is gone: while the VMM holds
 * its reference to the userfaultfd the fault sleeps for ever, and without
 * it the sleeper wakes into the page cache's content (test-release.c).  So
 * the process whose memory it is watches the server.  Death: its pidfd
 * turns readable, or its socket hangs up.  A stall: work waits - a fault
 * queued and unread, a fault a server began and did not end, a deferred
 * page - while the servers' counts in the shared page states stand still
 * for stall_ms.  A busy machine slows serving; it does not stop it all.
 *
 * On either, the application's lost() chooses: a new server that took
 * over (replace), or failure of every page not filled, which the watchdog
 * does, so no application has to get that order right by itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pagestate.h"
#include "stall.h"

struct uffdm_watchdog {
	struct uffdm *u;
	struct uffdm_region **r;
	unsigned int nr;
	struct uffdm_watchdog_params p;
	int fd;			/* the server now: pidfd or socket */
	bool pidfd;
	int stop_fd;		/* eventfd: readable once stopping */
	pthread_t tid;
	struct uffdm__stall st;	/* stall detection, the thread's own */
	uint64_t lost_at;	/* the last replacement's loss */
	/*
	 * Faults begun and never ended by lost servers: a server killed
	 * while it held some leaves them counted for ever.  Not work the
	 * server now has in hand.
	 */
	uint64_t stale;
	struct uffdm_watchdog_report rep;
	/* fails for good what a server in another process could not (owner.c) */
	struct uffdm__owner *owner;
};

static uint64_t load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

/* Faults served or pages completed, and faults in a server's hands now. */
static uint64_t served(const struct uffdm_watchdog *w, uint64_t *inflight)
{
	uint64_t n = 0;

	*inflight = 0;
	for (unsigned int i = 0; i < w->nr; i++) {
		const struct uffdm_state_tail *t = w->r[i]->tail;
		uint64_t ended;

		if (!t)
			continue;
		ended = load(&t->ended);
		*inflight += load(&t->begun) - ended;
		n += ended + load(&t->completed);
	}
	return n;
}

/* Level-triggered: readable while a fault or event is queued and unread. */
static bool queued(const struct uffdm_watchdog *w)
{
	struct pollfd pfd = { .fd = uffdm_fd(w->u), .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static bool deferred(const struct uffdm_watchdog *w)
{
	for (unsigned int i = 0; i < w->nr; i++)
		if (w->r[i]->tail && uffdm__region_busy(w->r[i]))
			return true;
	return false;
}

/*
 * Stalled: work seen waiting at a tick, nothing served since, for limit.
 * Serving a fault moves the count, so work seen waiting and still no count
 * moved means that same work still waits.  Deferred pages are looked for
 * (a scan of every state) only once nothing moved for limit: while idle
 * that is once a period, and a stalled completer is seen within two.  The
 * clock starts when the work is first seen waiting, never at the last
 * progress: a server idle for minutes is not stalled by its next fault.
 */
bool uffdm__stall_tick(struct uffdm__stall *st, uint64_t now, uint64_t limit, uint64_t n,
		       bool waiting, bool (*deferred)(void *arg), void *arg)
{
	if (n != st->served) {
		st->served = n;
		st->progress_at = now;
		st->waiting_since = 0;
		return false;
	}
	if (!limit)
		return false;
	waiting = waiting || (now - st->progress_at >= limit && deferred(arg));
	if (!waiting) {
		st->waiting_since = 0;
		if (now - st->progress_at >= limit)
			st->progress_at = now;	/* idle is not a stall */
		return false;
	}
	if (!st->waiting_since)
		st->waiting_since = now;
	return now - st->waiting_since >= limit;
}

static bool deferred_cb(void *arg)
{
	return deferred(arg);
}

static bool stalled(struct uffdm_watchdog *w, uint64_t now)
{
	uint64_t inflight, n = served(w, &inflight);

	return uffdm__stall_tick(&w->st, now, (uint64_t)w->p.stall_ms * 1000000, n,
				 inflight > w->stale || queued(w), deferred_cb, w);
}

/* A socket, or a pidfd (its fdinfo names a Pid), else -EINVAL. */
static int server_kind(int fd, bool *pidfd)
{
	char path[64], line[128];
	struct stat st;
	bool found = false;
	FILE *f;

	if (fd < 0 || fstat(fd, &st))
		return -EBADF;
	*pidfd = !S_ISSOCK(st.st_mode);
	if (!*pidfd)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, "Pid:", 4);
	fclose(f);
	return found ? 0 : -EINVAL;
}

static void fail_all(struct uffdm_watchdog *w)
{
	for (unsigned int i = 0; i < w->nr; i++) {
		struct uffdm_region *r = w->r[i];

		uffdm_range_fail(w->u, r->view, r->size, r->page, w->p.fail_flags);
	}
	w->rep.failed = true;
}

/* The server is lost: a replacement to watch on (false), or the pages failed (true). */
static bool lose(struct uffdm_watchdog *w, enum uffdm_server_loss why, uint64_t now)
{
	uint64_t inflight, before;
	bool pidfd;
	int fd;

	if (why == UFFDM_SERVER_DIED)
		w->rep.died++;
	else
		w->rep.stalled++;
	/* A stalled server that woke would serve beside its replacement. */
	if (why == UFFDM_SERVER_STALLED && w->pidfd)
		syscall(SYS_pidfd_send_signal, w->fd, SIGKILL, NULL, 0);
	/* what it marked for us and died before asking: failed whatever comes next */
	uffdm__owner_kick(w->owner);
	/* before lost(): the replacement may serve before it returns */
	before = served(w, &inflight);
	for (unsigned int i = 0; i < w->nr; i++)
		if (w->r[i]->tail)
			__atomic_store_n(&w->r[i]->tail->first_ns, 0, __ATOMIC_RELEASE);
	fd = w->p.lost ? w->p.lost(why, w->p.arg) : -1;
	if (fd >= 0 && !server_kind(fd, &pidfd)) {
		w->fd = fd;
		w->pidfd = pidfd;
		w->rep.replaced++;
		w->st = (struct uffdm__stall){ .served = before, .progress_at = uffdm__now_ns() };
		w->stale = inflight;
		w->lost_at = now;
		return false;
	}
	fail_all(w);
	return true;
}

static int tick_ms(const struct uffdm_watchdog *w)
{
	unsigned int t = w->p.stall_ms / 8;

	if (!w->p.stall_ms)
		return -1;
	return t < 10 ? 10 : t > 100 ? 100 : (int)t;
}

static void *watch(void *arg)
{
	struct uffdm_watchdog *w = arg;

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = w->stop_fd, .events = POLLIN },
			/* a socket: the peer's close, never its data */
			{ .fd = w->fd, .events = w->pidfd ? POLLIN : POLLRDHUP },
		};
		int n = poll(pfd, 2, tick_ms(w));
		uint64_t now;

		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && pfd[0].revents)
			break;
		now = uffdm__now_ns();
		if (n > 0 && pfd[1].revents) {
			if (lose(w, UFFDM_SERVER_DIED, now))
				break;
		} else if (stalled(w, now) && lose(w, UFFDM_SERVER_STALLED, now)) {
			break;
		}
	}
	return NULL;
}

static int copy_params(struct uffdm_watchdog_params *to, const struct uffdm_watchdog_params *p)
{
	*to = (struct uffdm_watchdog_params){ 0 };
	if (!p || p->size < sizeof(*to))
		return -EINVAL;
	memcpy(to, p, sizeof(*to));
	return 0;
}

/* Regions of this process's memory; with a stall limit, their states shared. */
static int check_regions(struct uffdm_region *const *regions, unsigned int nr, bool stall)
{
	if (!regions || !nr)
		return -EINVAL;
	for (unsigned int i = 0; i < nr; i++)
		if (!regions[i] || !regions[i]->view || (stall && !regions[i]->tail))
			return -EINVAL;
	return 0;
}

static void free_watchdog(struct uffdm_watchdog *w)
{
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	free(w->r);
	free(w);
}

/* The descriptor is polled: non-blocking, as the handler sets it too. */
static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int uffdm_watchdog_start(struct uffdm_watchdog **out, struct uffdm *u,
			 struct uffdm_region *const *regions, unsigned int nr,
			 const struct uffdm_watchdog_params *p)
{
	struct uffdm_watchdog *w;
	uint64_t inflight;
	int ret;

	if (!out || !u)
		return -EINVAL;
	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->stop_fd = -1;
	ret = copy_params(&w->p, p);
	if (!ret)
		ret = check_regions(regions, nr, w->p.stall_ms);
	if (!ret)
		ret = server_kind(w->p.server_fd, &w->pidfd);
	if (!ret && (w->p.fail_flags & ~UFFDM_FAIL_SIGBUS_FD))
		ret = -EINVAL;
	if (!ret)
		ret = set_nonblock(uffdm_fd(u));
	if (ret)
		goto err;
	w->r = malloc(nr * sizeof(*w->r));
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (!w->r || w->stop_fd < 0) {
		ret = w->r ? -errno : -ENOMEM;
		goto err;
	}
	memcpy(w->r, regions, nr * sizeof(*w->r));
	w->u = u;
	w->nr = nr;
	w->fd = w->p.server_fd;
	w->st.served = served(w, &inflight);
	w->st.progress_at = uffdm__now_ns();
	ret = uffdm__owner_start(&w->owner, u, regions, nr, w->p.fail_flags);
	if (ret)
		goto err;
	ret = uffdm__thread_start(&w->tid, watch, w);
	if (ret)
		goto err;
	*out = w;
	return 0;
err:
	uffdm__owner_stop(w->owner);
	free_watchdog(w);
	return ret;
}

/* The last loss a replacement took over -> the first fault a server served since. */
static uint64_t takeover_ns(const struct uffdm_watchdog *w)
{
	uint64_t first = 0;

	for (unsigned int i = 0; i < w->nr; i++) {
		uint64_t t = w->r[i]->tail ? load(&w->r[i]->tail->first_ns) : 0;

		if (t > w->lost_at && (!first || t < first))
			first = t;
	}
	return w->lost_at && first ? first - w->lost_at : 0;
}

int uffdm_watchdog_stop(struct uffdm_watchdog *w, struct uffdm_watchdog_report *report)
{
	uint64_t one = 1;

	if (!w)
		return -EINVAL;
	if (report && report->size < sizeof(*report))
		return -EINVAL;		/* nothing stopped: call again */
	while (write(w->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	pthread_join(w->tid, NULL);
	uffdm__owner_stop(w->owner);	/* its last pass fails what was asked */
	w->rep.takeover_ns = takeover_ns(w);
	if (report) {
		/* a newer caller's larger struct: the fields it adds stay as they were */
		w->rep.size = report->size;
		memcpy(report, &w->rep, sizeof(w->rep));
	}
	free_watchdog(w);
	return 0;
}

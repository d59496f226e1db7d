// SPDX-License-Identifier: LGPL-2.1-or-later
/* Turning decoded fanotify events into reported events and map updates. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "decode.h"
#include "snap.h"
#include "watch.h"

#define APPEAR	(FW_CREATE | FW_MOVED_TO)
#define CONTENT	(FW_OPEN | FW_ACCESS | FW_MODIFY | FW_ATTRIB | FW_CLOSE_WRITE | \
		 FW_CLOSE_NOWRITE)
#define GONE	(FW_DELETE | FW_MOVED_FROM)

static void snap_note(struct fw_dir *d, const char *name, bool present, bool isdir);

void fw_stamp(struct fw_ctx *c)
{
	struct timespec ts;
	struct tm tm;

	if (!c->want_time)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (c->o->fmt.format) {
		localtime_r(&ts.tv_sec, &tm);
		if (!strftime(c->timestr, sizeof(c->timestr),
			      c->o->fmt.timefmt ? c->o->fmt.timefmt : "%H:%M:%S", &tm))
			c->timestr[0] = '\0';
	}
	gmtime_r(&ts.tv_sec, &tm);
	strftime(c->isotime, sizeof(c->isotime), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(c->isotime + 19, sizeof(c->isotime) - 19, ".%06ldZ",
		 ts.tv_nsec / 1000);
}

static bool passes(struct fw_ctx *c, const struct fw_dir *d, const char *name)
{
	char buf[8192];

	if (!fw_filter_active(&c->o->filter))
		return true;
	if (snprintf(buf, sizeof(buf), "%s%s", d->path, name) >= (int)sizeof(buf))
		return true;
	if (!*name && d->pathlen > 1)
		buf[d->pathlen - 1] = '\0';	/* a directory: match without '/' */
	return fw_filter_pass(&c->o->filter, buf);
}

void fw_emit(struct fw_ctx *c, uint32_t bit, const struct fw_dir *d,
	     const char *name, bool isdir, bool scan, bool self,
	     const struct fw_dir *od, const char *oname)
{
	struct fw_out e = {
		.mask = bit, .isdir = isdir, .scan = scan, .self = self,
		.dir = d ? d->path : "", .name = name ? name : "",
		.odir = od ? od->path : NULL, .oname = oname,
	};

	if (c->done || !(bit & (c->o->events | FW_Q_OVERFLOW)))
		return;
	if (self && c->o->no_self)
		return;
	if (d && !passes(c, d, e.name))
		return;
	fw_print(c->o->out, &c->o->fmt, &e, c->timestr, c->isotime);
	c->printed++;
	if (!c->o->monitor)
		c->done = true;
}

static struct fw_dir *lookup(struct fw_ctx *c, const struct fw_obj *o)
{
	return o->fsid ? fw_dirmap_find(&c->map, o->fsid, o->fh) : NULL;
}

/* The watched subdirectory a dirent event is about, if any. */
static struct fw_dir *subdir(struct fw_ctx *c, const struct fw_raw *ev,
			     struct fw_dir *parent, const char *name)
{
	struct fw_dir *d = lookup(c, &ev->child);

	return d ? d : fw_dir_child(parent, name);
}

/* A directory was created or moved in under -r: watch it (and report
 * what a scan finds inside a new one: it may have filled up already). */
static void adopt(struct fw_ctx *c, struct fw_dir *parent, const char *name,
		  bool report)
{
	struct fw_dir *d;

	if (!c->o->recursive || fw_excluded(c, parent, name))
		return;
	d = fw_watch_dir(c, parent, name);
	if (d)
		fw_scan(c, d, report);
}

/* A watched directory is gone from its parent: report and forget it. */
static void drop_dir(struct fw_ctx *c, struct fw_dir *d, bool self)
{
	/*
	 * Our O_PATH fd pins the dentry, so the kernel's DELETE_SELF would
	 * only come once we close it: report it here instead.
	 */
	fw_emit(c, FW_DELETE_SELF, d, "", true, false, self, NULL, NULL);
	fw_unwatch_tree(c, d);
}

/* The order in which the bits of one merged event happened. */
static const uint32_t order[] = {
	FW_CREATE, FW_MOVED_TO, FW_OPEN, FW_ACCESS, FW_MODIFY, FW_ATTRIB,
	FW_CLOSE_WRITE, FW_CLOSE_NOWRITE, FW_MOVED_FROM, FW_DELETE,
};

/* A directory renamed over an (empty) watched one: that one is gone. */
static void replaced(struct fw_ctx *c, struct fw_dir *parent, const char *name,
		     const struct fw_dir *mover, bool self)
{
	struct fw_dir *old = parent ? fw_dir_child(parent, name) : NULL;

	if (old && old != mover)
		drop_dir(c, old, self);
}

/* Unpaired renames: a directory arrived; is it one we watch already? */
static void moved_here(struct fw_ctx *c, struct fw_dir *d, const char *name,
		       bool self)
{
	struct fw_dir *n = fw_dir_at(c, d, name);

	replaced(c, d, name, n, self);
	if (n && n->parent && !fw_dir_reparent(n, d, name))
		n->moved = true;	/* its MOVE_SELF is then no departure */
	else if (!n)
		adopt(c, d, name, false);
}

static void name_bits(struct fw_ctx *c, const struct fw_raw *ev,
		      struct fw_dir *d, const char *name, uint32_t bits)
{
	bool isdir = ev->mask & FW_ONDIR, self = ev->pid == c->pid;
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		uint32_t b = order[i];
		struct fw_dir *s;

		if (!(bits & b))
			continue;
		fw_emit(c, b, d, name, isdir, false, self, NULL, NULL);
		if (!isdir)
			continue;
		if (b == FW_CREATE) {
			adopt(c, d, name, true);
		} else if (b == FW_MOVED_TO) {
			moved_here(c, d, name, self);
		} else if (b == FW_DELETE && (s = subdir(c, ev, d, name))) {
			drop_dir(c, s, self);
		}
	}
}

/*
 * Several bits for one name: the kernel merged them; fstatat says the
 * order.  Returns whether the name exists after the reported events.
 */
static bool name_event(struct fw_ctx *c, const struct fw_raw *ev,
		       struct fw_dir *d, const char *name)
{
	uint32_t m = ev->mask;
	struct stat st;

	if ((m & APPEAR) && (m & GONE) &&
	    !fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		/* It exists now: the old one went first, then the new one came. */
		name_bits(c, ev, d, name, m & GONE);
		name_bits(c, ev, d, name, m & ~GONE);
		return true;
	}
	name_bits(c, ev, d, name, m);
	return !(m & GONE);
}

static void name_event_noted(struct fw_ctx *c, const struct fw_raw *ev,
			     struct fw_dir *d, const char *name)
{
	bool present = name_event(c, ev, d, name);

	snap_note(d, name, present, ev->mask & FW_ONDIR);
}

/*
 * A top directory moved: nothing reports where to, but the kernel knows
 * its path; later events use it (absolute) rather than the stale one.
 */
static void follow_root(struct fw_dir *d)
{
	char link[64], path[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", d->fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0 || path[0] != '/')
		return;
	path[n] = '\0';
	if (n > 10 && !strcmp(path + n - 10, " (deleted)"))
		return;
	fw_dir_rename_root(d, path);
}

static void self_event(struct fw_ctx *c, const struct fw_raw *ev, struct fw_dir *d)
{
	bool self = ev->pid == c->pid;

	name_bits(c, ev, d, "", ev->mask & CONTENT);
	if (ev->mask & FW_MOVE_SELF) {
		fw_emit(c, FW_MOVE_SELF, d, "", true, false, self, NULL, NULL);
		if (d->moved)
			d->moved = false;	/* its rename was seen and followed */
		else if (d->parent)
			fw_unwatch_tree(c, d);	/* it left the watched tree */
		else
			follow_root(d);
	}
	if ((ev->mask & FW_DELETE_SELF) && (d = lookup(c, &ev->dir))) {
		fw_emit(c, FW_DELETE_SELF, d, "", true, false, self, NULL, NULL);
		fw_unwatch_tree(c, d);
	}
}

/* FAN_RENAME (5.17+): old and new location in one event. */
static void rename_event(struct fw_ctx *c, const struct fw_raw *ev)
{
	struct fw_dir *od = lookup(c, &ev->old), *nd = lookup(c, &ev->new);
	bool isdir = ev->mask & FW_ONDIR, self = ev->pid == c->pid;
	const char *on = ev->old.name, *nn = ev->new.name;
	struct fw_dir *s = NULL;

	/* The kernel leaves out the record of a directory we do not watch. */
	if (!on)
		od = NULL;
	if (!nn)
		nd = NULL;
	if (isdir && od)
		s = subdir(c, ev, od, on);
	if (od && nd)
		fw_emit(c, FW_MOVED_FROM | FW_MOVED_TO, nd, nn, isdir, false, self, od, on);
	else if (od)
		fw_emit(c, FW_MOVED_FROM, od, on, isdir, false, self, NULL, NULL);
	else if (nd)
		fw_emit(c, FW_MOVED_TO, nd, nn, isdir, false, self, NULL, NULL);
	snap_note(od, on, false, isdir);
	snap_note(nd, nn, true, isdir);
	if (!isdir)
		return;
	replaced(c, nd, nn, s, self);
	if (s && nd && !fw_dir_reparent(s, nd, nn))
		s->moved = true;
	else if (s)
		fw_unwatch_tree(c, s);
	else if (nd)
		adopt(c, nd, nn, false);
}

static void overflow(struct fw_ctx *c)
{
	c->overflows++;
	if (c->overflows == 1 || !(c->overflows & (c->overflows - 1)))
		fw_warn(c, "the event queue overflowed (fs.fanotify.max_queued_events = %ld): events were lost%s",
			fw_sysctl("max_queued_events"), c->o->rescan ? "; rescanning" :
			"; --rescan-on-overflow rescans the tree");
	fw_emit(c, FW_Q_OVERFLOW, NULL, "", false, false, false, NULL, NULL);
	if (c->o->rescan)
		fw_rescan(c);
}

/*
 * --rescan-on-overflow: the snapshot holds what the reader was told, not
 * what the disk holds now (events are read late): a name last reported
 * present stays present, with its state if it still exists, so a rescan
 * reports its deletion or change if those events get lost.
 */
static void snap_note(struct fw_dir *d, const char *name, bool present, bool isdir)
{
	struct stat st;

	if (!d || !d->snap)
		return;
	if (!present)
		fw_snap_set(d->snap, name, NULL);
	else if (!fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW))
		fw_snap_set(d->snap, name, &st);
	else
		fw_snap_set_unknown(d->snap, name, isdir);
}

static void handle_event(struct fw_ctx *c, const struct fw_raw *ev)
{
	struct fw_dir *d;

	if (ev->overflow)
		return overflow(c);
	if (ev->mask & FW_RENAME)
		return rename_event(c, ev);
	d = lookup(c, &ev->dir);
	if (!d)
		return;		/* a directory we no longer watch */
	if (!ev->dir.name || !strcmp(ev->dir.name, "."))
		self_event(c, ev, d);
	else
		name_event_noted(c, ev, d, ev->dir.name);
}

void fw_handle_buffer(struct fw_ctx *c, const void *buf, size_t len)
{
	size_t off = 0;
	struct fw_raw ev;
	int r;

	fw_stamp(c);
	while ((r = fw_decode(buf, len, &off, &ev)) != FW_DECODE_END) {
		if (r == FW_DECODE_OK)
			handle_event(c, &ev);
	}
}

/*
 * Our O_PATH fds keep a removed root's dentry alive, so its DELETE_SELF
 * would never come: look at the link count of the roots now and then.
 */
static void check_roots(struct fw_ctx *c)
{
	size_t i;

	for (i = 0; i < c->map.nbucket; i++) {
		struct fw_dir *d = c->map.bucket[i], *n;
		struct stat st;

		for (; d; d = n) {
			n = d->hnext;
			if (d->parent || fstat(d->fd, &st) || st.st_nlink)
				continue;
			fw_emit(c, FW_DELETE_SELF, d, "", true, false, false, NULL, NULL);
			fw_unwatch_tree(c, d);
			n = c->map.bucket[i];	/* the chain changed: restart it */
		}
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int flush(struct fw_ctx *c)
{
	if (fflush(c->o->out) || ferror(c->o->out)) {
		if (errno != EPIPE)
			fw_err("cannot write events: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The kernel wakes a reader for every queued event, so under a steady
 * trickle each wakeup would carry one event.  After a small batch, wait a
 * millisecond so the next read carries many (and the kernel merges more):
 * a fraction of the wakeups for 1 ms of latency.  A full buffer means the
 * queue is long: read on at once.
 */
static void settle(const struct fw_ctx *c, ssize_t n, size_t size)
{
	static const struct timespec ms = { 0, 1000000 };

	if (c->o->monitor && (size_t)n < size / 4)
		nanosleep(&ms, NULL);
}

int fw_run(struct fw_ctx *c)
{
	static uint64_t buf[256 * 1024 / sizeof(uint64_t)];
	struct pollfd p = { .fd = c->fan, .events = POLLIN };
	int64_t last = now_ms(), checked = last;

	for (;;) {
		int64_t t = now_ms(), tmo = 1000;
		ssize_t n;
		int r;

		if (c->o->timeout) {
			int64_t left = last + c->o->timeout * 1000ll - t;

			if (left <= 0)
				return c->printed ? 0 : 2;
			tmo = left < tmo ? left : tmo;
		}
		if (t - checked >= 1000) {
			check_roots(c);
			checked = t;
			if (flush(c))
				return 1;
		}
		if (!c->map.count) {
			fw_warn(c, "no watched directory is left");
			return c->printed || c->o->monitor ? 0 : 1;
		}
		if (c->done)
			return 0;
		r = poll(&p, 1, (int)tmo);
		if (r < 0 && errno != EINTR) {
			fw_err("poll: %s", strerror(errno));
			return 1;
		}
		if (r <= 0)
			continue;
		n = read(c->fan, buf, sizeof(buf));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			fw_err("reading fanotify events: %s", strerror(errno));
			return 1;
		}
		fw_handle_buffer(c, buf, n);
		fw_setup_done(c);
		if (flush(c))
			return 1;
		last = now_ms();
		settle(c, n, sizeof(buf));
	}
}

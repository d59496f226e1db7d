// SPDX-License-Identifier: LGPL-2.1-or-later
/* Turning decoded fanotify events into reported events and map updates. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "decode.h"
#include "snap.h"
#include "watch.h"

#define APPEAR	(FW_CREATE | FW_MOVED_TO)
#define CONTENT	(FW_OPEN | FW_ACCESS | FW_MODIFY | FW_ATTRIB | FW_CLOSE_WRITE | \
		 FW_CLOSE_NOWRITE)
#define GONE	(FW_DELETE | FW_MOVED_FROM)

/* A file handle kept beyond the event that gave it. */
struct fw_hbuf {
	struct file_handle fh;
	unsigned char b[128];			/* MAX_HANDLE_SZ */
};

static void snap_note(struct fw_ctx *c, struct fw_dir *d, const char *name,
		      bool present, bool isdir);
static void whiteout_left(struct fw_ctx *c, struct fw_dir *d, const char *name,
			  bool self);
static bool same_fh(const struct fw_obj *a, const struct fw_obj *b);

static struct fw_dir *lookup(struct fw_ctx *c, const struct fw_obj *o)
{
	return o->fsid ? fw_dirmap_find(&c->map, o->fsid, o->fh) : NULL;
}

/*
 * Adopt the directory the event names (by handle, 5.17+), never another
 * one that has its name by the time the event is read.
 */
static void adopt_child(struct fw_ctx *c, const struct fw_raw *ev,
			struct fw_dir *parent, const char *name)
{
	struct fw_want w = { .fh = ev->child.fh };

	if (!c->have_target || !ev->child.fsid)
		return fw_adopt(c, parent, name, NULL, true);
	w.fsid[0] = ev->child.fsid[0];
	w.fsid[1] = ev->child.fsid[1];
	fw_adopt(c, parent, name, &w, true);
}

/*
 * The watched subdirectory a dirent event is about.  With
 * FAN_REPORT_TARGET_FID (5.17+) the event names it by handle, and a handle
 * we do not know is a directory we do not watch: never guess by name, or
 * another directory that has (or had) that name gets relabeled.  Before
 * 5.17 the name is all there is.
 */
static struct fw_dir *subdir(struct fw_ctx *c, const struct fw_raw *ev,
			     struct fw_dir *parent, const char *name)
{
	struct fw_dir *d;

	if (!c->have_target)
		return parent ? fw_dir_child(parent, name) : NULL;
	d = lookup(c, &ev->child);
	return d && !d->is_file ? d : NULL;
}

/* A watched directory is gone from its parent: report and forget it. */
static void drop_dir(struct fw_ctx *c, struct fw_dir *d, bool self)
{
	/*
	 * A cached O_PATH fd pins the dentry, so the kernel's DELETE_SELF
	 * might only come once it is closed: report it here instead.
	 */
	fw_emit1(c, FW_DELETE_SELF, d, "", true, false, self);
	fw_unwatch_tree(c, d);
}

/* The order in which the bits of one merged event happened. */
static const uint32_t order[] = {
	FW_CREATE, FW_MOVED_TO, FW_OPEN, FW_ACCESS, FW_MODIFY, FW_ATTRIB,
	FW_CLOSE_WRITE, FW_CLOSE_NOWRITE, FW_MOVED_FROM, FW_DELETE,
};

/*
 * A directory renamed over an (empty) watched one: the one our map has
 * at that name (as of this event, not as of now) is gone.
 */
static void replaced(struct fw_ctx *c, struct fw_dir *parent, const char *name,
		     const struct fw_dir *mover, bool self)
{
	struct fw_dir *old = parent ? fw_dir_child(parent, name) : NULL;

	if (old && old != mover)
		drop_dir(c, old, self);
}

/*
 * Cookies pair the two halves of a rename, as inotify's do.  FAN_RENAME
 * gives both at once; the kernel's MOVED_FROM and MOVED_TO (unpaired mode)
 * name the same child handle, so the last few MOVED_FROMs are remembered.
 */
#define NRING 16
static struct {
	int32_t fsid[2];
	unsigned int hb;
	int type;
	unsigned char h[128];
	uint32_t cookie;
} ring[NRING];
static unsigned int ring_at;

static bool same_obj(unsigned int i, const struct fw_obj *o)
{
	return ring[i].cookie && ring[i].fsid[0] == o->fsid[0] &&
	       ring[i].fsid[1] == o->fsid[1] && ring[i].hb == o->fh->handle_bytes &&
	       ring[i].type == o->fh->handle_type &&
	       !memcmp(ring[i].h, o->fh->f_handle, ring[i].hb);
}

static uint32_t half_cookie(struct fw_ctx *c, const struct fw_raw *ev, bool from)
{
	const struct fw_obj *o = &ev->child;
	unsigned int i;
	uint32_t k;

	if (!c->have_target || !o->fsid || o->fh->handle_bytes > sizeof(ring[0].h))
		return ++c->cookie;
	if (!from) {
		for (i = 0; i < NRING; i++) {
			if (same_obj(i, o)) {
				k = ring[i].cookie;
				ring[i].cookie = 0;
				return k;
			}
		}
		return ++c->cookie;
	}
	i = ring_at++ % NRING;
	ring[i].fsid[0] = o->fsid[0];
	ring[i].fsid[1] = o->fsid[1];
	ring[i].hb = o->fh->handle_bytes;
	ring[i].type = o->fh->handle_type;
	memcpy(ring[i].h, o->fh->f_handle, ring[i].hb);
	return ring[i].cookie = ++c->cookie;
}

/* Unpaired renames: a directory arrived; is it one we watch already? */
/*
 * s moved within the tree to where the map has it now.  A quiet subtree
 * whose report its move hid (fw_report_quiet) is reported there.
 */
static void moved_within(struct fw_ctx *c, struct fw_dir *s)
{
	s->leaving = false;
	if (s->report_due && s->quiet)
		fw_report_quiet(c, s);
}

static void moved_here(struct fw_ctx *c, const struct fw_raw *ev, struct fw_dir *d,
		       const char *name, bool self)
{
	struct fw_dir *n = c->have_target ? subdir(c, ev, d, name) : fw_dir_at(c, d, name);

	replaced(c, d, name, n, self);
	if (n && n->parent && !fw_dir_reparent(n, d, name))
		moved_within(c, n);
	else if (!n)
		adopt_child(c, ev, d, name);
}

/*
 * Where a watched directory that a rename took to a place out of view
 * (not marked then) is in the tree now, if it is: where a scan met it
 * (noted), or where a scan adopted it before the rename was read (the
 * map has it somewhere else than d/name).  NULL: it left the tree.
 */
static struct fw_dir *found_at(struct fw_ctx *c, struct fw_dir *s, const struct fw_dir *d,
			       const char *name, const char **at)
{
	struct fw_dir *p;

	if (!s || !s->parent)
		return NULL;
	if ((p = fw_met_at(c, s, at)))
		return p;
	if (s->parent == d && name && !strcmp(s->name, name))
		return NULL;
	*at = s->name;
	return s->parent;
}

/*
 * Unpaired renames: a watched directory's MOVED_FROM.  If a scan has met
 * it in the tree already (at a directory not marked when it moved in, so
 * no MOVED_TO may come), report where it is now; else it leaves unless a
 * MOVED_TO follows.
 */
static void moved_from_dir(struct fw_ctx *c, const struct fw_raw *ev,
			   struct fw_ev *e, struct fw_dir *s)
{
	const char *name;
	struct fw_dir *p = found_at(c, s, e->d, e->name, &name);

	if (!p) {
		s->leaving = true;
		return;
	}
	e->mask = FW_MOVED_TO;
	e->d = p;
	e->name = name;
	e->cookie = half_cookie(c, ev, false);
	fw_emit(c, e);
	fw_dir_reparent(s, p, name);
}

static void name_bits(struct fw_ctx *c, const struct fw_raw *ev,
		      struct fw_dir *d, const char *name, uint32_t bits)
{
	bool isdir = ev->mask & FW_ONDIR, self = ev->pid == c->pid;
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		struct fw_ev e = { .d = d, .name = name, .isdir = isdir, .self = self };
		uint32_t b = order[i];
		struct fw_dir *s;

		if (!(bits & b))
			continue;
		e.mask = b;
		if (b & (FW_MOVED_FROM | FW_MOVED_TO))
			e.cookie = half_cookie(c, ev, b == FW_MOVED_FROM);
		fw_emit(c, &e);
		if (b == FW_MOVED_FROM)
			whiteout_left(c, d, name, self);
		if (!isdir)
			continue;
		if (b == FW_CREATE) {
			adopt_child(c, ev, d, name);
			if ((s = subdir(c, ev, d, name)) && s->quiet)
				fw_report_quiet(c, s);
		} else if (b == FW_MOVED_TO) {
			moved_here(c, ev, d, name, self);
		} else if (b == FW_MOVED_FROM && (s = subdir(c, ev, d, name))) {
			moved_from_dir(c, ev, &e, s);
		} else if (b == FW_DELETE && (s = subdir(c, ev, d, name))) {
			drop_dir(c, s, self);
		}
	}
}

/*
 * Is the object at name now the one a merged event is about?  Another
 * one (of another type, or another handle) means this one came and went:
 * create x; rm x; mkdir x merges the file's CREATE and DELETE, and the
 * directory there now says nothing of their order.
 */
static bool is_now(const struct fw_ctx *c, const struct fw_raw *ev, int dfd,
		   const char *name, const struct stat *st)
{
	struct {
		struct file_handle fh;
		unsigned char b[128];
	} h = { .fh.handle_bytes = sizeof(h.b) };
	const struct file_handle *fh = ev->child.fh;
	int mnt;

	if (!S_ISDIR(st->st_mode) != !(ev->mask & FW_ONDIR))
		return false;
	if (!c->have_target || !ev->child.fsid ||
	    name_to_handle_at(dfd, name, &h.fh, &mnt, 0))
		return true;	/* nothing to compare: the type has to do */
	return h.fh.handle_bytes == fh->handle_bytes && h.fh.handle_type == fh->handle_type &&
	       !memcmp(h.b, fh->f_handle, fh->handle_bytes);
}

/*
 * The read buffer being handled and the offset past the event in hand,
 * for a look ahead; and DELETEs held back to a later point of it.
 */
static struct {
	const void *buf;
	size_t len, off;
} cur;

#define NLATER 16
static struct later {
	size_t after;			/* handled once the events up to here are */
	struct fw_raw ev;		/* pointers into cur.buf */
} later[NLATER];
static unsigned int nlater;

/* Does e put the object ev names back at ev's name (a rename or link to it)? */
static bool brings_back(const struct fw_raw *e, const struct fw_raw *ev, const char *name)
{
	const struct fw_obj *to = (e->mask & FW_RENAME) ? &e->new :
				  (e->mask & APPEAR) ? &e->dir : NULL;

	return to && to->name && !strcmp(to->name, name) && same_fh(to, &ev->dir) &&
	       same_fh(&e->child, &ev->child);
}

/* Does e take another object than ev's away from ev's name? */
static bool takes_other(const struct fw_raw *e, const struct fw_raw *ev, const char *name)
{
	const struct fw_obj *from = (e->mask & FW_RENAME) ? &e->old :
				    (e->mask & GONE) ? &e->dir : NULL;

	return from && from->name && !strcmp(from->name, name) && same_fh(from, &ev->dir) &&
	       e->child.fsid && !same_fh(&e->child, &ev->child);
}

/*
 * The end of the last event in the rest of the buffer that puts ev's object
 * back at name, or 0.  The kernel merges a DELETE into the CREATE (or
 * MOVED_TO) of the same object at the same name however far back it is
 * queued: create d; exchange d b; exchange b d; rm d comes as CREATE|DELETE d
 * before the exchanges, and read there, the rm undoes a CREATE the
 * exchanges then redo.  It came after the object's last return.
 */
static size_t last_return(const struct fw_raw *ev, const char *name,
			  bool (*match)(const struct fw_raw *, const struct fw_raw *, const char *))
{
	size_t off = cur.off, found = 0;
	struct fw_raw e;
	int r;

	while ((r = fw_decode(cur.buf, cur.len, &off, &e)) != FW_DECODE_END)
		if (r == FW_DECODE_OK && match(&e, ev, name))
			found = off;
	return found;
}

static void handle_event(struct fw_ctx *c, const struct fw_raw *ev);

/* Handle the held-back DELETEs due once the events before off are. */
static void handle_later(struct fw_ctx *c, size_t off)
{
	unsigned int i = 0;
	struct fw_raw ev;

	while (i < nlater) {
		if (later[i].after > off) {
			i++;
			continue;
		}
		ev = later[i].ev;
		later[i] = later[--nlater];
		handle_event(c, &ev);
	}
}

/*
 * A CREATE (or MOVED_TO) with the DELETE of the same object merged into it,
 * the object gone now: the DELETE is held back past the object's last
 * return to that name in this buffer, if there is one.
 */
static bool hold_delete(struct fw_ctx *c, const struct fw_raw *ev, const char *name)
{
	uint64_t m = ev->mask;
	size_t after;

	if (!c->have_target || !ev->child.fsid || !cur.buf || nlater == NLATER ||
	    !(m & APPEAR) || (m & GONE) != FW_DELETE ||
	    !(after = last_return(ev, name, brings_back)))
		return false;
	later[nlater].after = after;
	later[nlater].ev = *ev;
	later[nlater++].ev.mask = FW_DELETE | (m & FW_ONDIR);
	return true;
}

/*
 * The other way round, the object there now: it left, then came back
 * (unlink c; mkdir c; mv c out; ln y c comes as DELETE|CREATE c first).
 * It came back after the last event in this buffer that takes another
 * object away from that name: the CREATE is held back past it.
 */
static bool hold_create(struct fw_ctx *c, const struct fw_raw *ev, const char *name)
{
	size_t after;

	if (!c->have_target || !ev->child.fsid || !cur.buf || nlater == NLATER ||
	    !(after = last_return(ev, name, takes_other)))
		return false;
	later[nlater].after = after;
	later[nlater].ev = *ev;
	later[nlater++].ev.mask &= ~(uint64_t)GONE;
	return true;
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
	int dfd;

	if ((m & APPEAR) && (m & GONE) && (dfd = fw_dir_fd(&c->map, d)) >= 0 &&
	    !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) && is_now(c, ev, dfd, name, &st)) {
		/* It exists now: the old one went first, then the new one came. */
		name_bits(c, ev, d, name, m & GONE);
		if (!hold_create(c, ev, name))
			name_bits(c, ev, d, name, m & ~GONE);
		return true;
	}
	if ((m & APPEAR) && (m & GONE) && hold_delete(c, ev, name)) {
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

	snap_note(c, d, name, present, ev->mask & FW_ONDIR);
}

/*
 * A top directory or file target moved: nothing reports where to, but
 * the kernel knows its path; later events use it (absolute).
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
	if (d->is_file && d->pathlen > 1 && d->path[d->pathlen - 1] == '/')
		d->path[--d->pathlen] = '\0';
}

static void self_event(struct fw_ctx *c, const struct fw_raw *ev, struct fw_dir *d)
{
	bool self = ev->pid == c->pid;

	name_bits(c, ev, d, "", ev->mask & CONTENT);
	if (ev->mask & FW_MOVE_SELF) {
		fw_emit1(c, FW_MOVE_SELF, d, "", true, false, self);
		if (!d->parent)
			follow_root(d);
		else if (!c->have_rename && d->leaving) {
			/*
			 * Its MOVED_FROM had no MOVED_TO: it left.  d is freed,
			 * and a DELETE_SELF merged into this event is out of
			 * the tree too.
			 */
			fw_unwatch_tree(c, d);
			return;
		}
	}
	if (ev->mask & FW_DELETE_SELF) {
		fw_emit1(c, FW_DELETE_SELF, d, "", true, false, self);
		fw_unwatch_tree(c, d);
	}
}

/* A file given as a target: its own events, with an empty name. */
static void file_event(struct fw_ctx *c, const struct fw_raw *ev, struct fw_dir *t)
{
	bool self = ev->pid == c->pid;
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (ev->mask & CONTENT & order[i])
			fw_emit1(c, order[i], t, "", false, false, self);
	if (ev->mask & FW_MOVE_SELF) {
		fw_emit1(c, FW_MOVE_SELF, t, "", false, false, self);
		follow_root(t);
	}
	/* Unlinking sends ATTRIB; our fd delays DELETE_SELF: check now. */
	if ((ev->mask & FW_DELETE_SELF) ||
	    ((ev->mask & FW_ATTRIB) && !fstat(t->fd, &st) && !st.st_nlink)) {
		fw_emit1(c, FW_DELETE_SELF, t, "", false, false, self);
		fw_unwatch_tree(c, t);
	}
}

/*
 * RENAME_WHITEOUT leaves a whiteout (a 0:0 character device) at the old
 * name, and the kernel reports no CREATE for it: look.  If it is gone
 * already, its DELETE is still queued; if a later one is there, its own
 * rename reports it again, which a consumer takes as a no-op.
 */
#define NLOOK 16
static struct look {
	int32_t fsid[2];
	struct fw_hbuf dir;
	bool self;
	char name[256];
} looks[NLOOK];
static unsigned int nlook;

static void whiteout_left(struct fw_ctx *c, struct fw_dir *d, const char *name,
			  bool self)
{
	struct stat st;
	struct look *l;
	int dfd;

	if (!d || !name)
		return;
	if ((dfd = fw_dir_fd(&c->map, d)) < 0) {
		/*
		 * d's path is behind a rename not handled yet (its own,
		 * further on in this buffer): look once the buffer is done.
		 */
		if ((errno != ESTALE && errno != ENOENT) || nlook == NLOOK || strlen(name) >= sizeof(l->name) ||
		    d->handle_bytes > sizeof(l->dir.b))
			return;
		l = &looks[nlook++];
		l->fsid[0] = d->fsid[0];
		l->fsid[1] = d->fsid[1];
		l->dir.fh.handle_bytes = d->handle_bytes;
		l->dir.fh.handle_type = d->handle_type;
		memcpy(l->dir.b, d->handle, d->handle_bytes);
		l->self = self;
		strcpy(l->name, name);
		return;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISCHR(st.st_mode) || st.st_rdev)
		return;
	fw_emit1(c, FW_CREATE, d, name, false, false, self);
	snap_note(c, d, name, true, false);
}

/* The whiteouts whose directory could not be reached when they were left. */
static void whiteouts_late(struct fw_ctx *c)
{
	unsigned int i;
	struct fw_dir *d;

	for (i = 0; i < nlook; i++)
		if ((d = fw_dirmap_find(&c->map, looks[i].fsid, &looks[i].dir.fh)) &&
		    fw_dir_fd(&c->map, d) >= 0)
			whiteout_left(c, d, looks[i].name, looks[i].self);
	nlook = 0;
}

static bool same_fh(const struct fw_obj *a, const struct fw_obj *b)
{
	return a->fsid && b->fsid && a->fsid[0] == b->fsid[0] &&
	       a->fsid[1] == b->fsid[1] &&
	       a->fh->handle_bytes == b->fh->handle_bytes &&
	       a->fh->handle_type == b->fh->handle_type &&
	       !memcmp(a->fh->f_handle, b->fh->f_handle, a->fh->handle_bytes);
}

/* Both records absent (a directory we do not watch), or the same place. */
static bool same_place(const struct fw_obj *a, const struct fw_obj *b)
{
	if (!a->name || !b->name)
		return !a->name && !b->name;
	return !strcmp(a->name, b->name) && same_fh(a, b);
}

/*
 * RENAME_EXCHANGE comes as two FAN_RENAMEs, a->b then b->a, each naming
 * the object it moved.  Two plain renames can look the same (mv a b;
 * mv b a), but then both name the same object: after the first, the
 * object at b is the one that came from a.  Needs the child's handle
 * (FAN_REPORT_TARGET_FID).
 */
static bool is_exchange(const struct fw_ctx *c, const struct fw_raw *e1,
			const struct fw_raw *e2)
{
	return c->have_target && (e2->mask & FW_RENAME) &&
	       (e1->old.name || e1->new.name) &&
	       same_place(&e1->old, &e2->new) && same_place(&e1->new, &e2->old) &&
	       e1->child.fsid && e2->child.fsid && !same_fh(&e1->child, &e2->child);
}

/* A watched directory that now has another's place, or leaves the tree. */
static void swap_in(struct fw_ctx *c, struct fw_dir *s, struct fw_dir *to,
		    const char *name)
{
	if (s && to && !fw_dir_reparent(s, to, name))
		moved_within(c, s);
	else if (s)
		fw_unwatch_tree(c, s);
}

/* One half of a rename, where d is a directory we watch. */
static void half(struct fw_ctx *c, struct fw_ev *e, uint32_t mask,
		 const struct fw_dir *d, const char *name, bool isdir, uint32_t cookie)
{
	if (!d)
		return;
	e->mask = mask, e->d = d, e->name = name;
	e->isdir = isdir, e->cookie = cookie;
	fw_emit(c, e);
}

/*
 * The last object events put at a name, a few dozen names back: the map
 * knows directories only, and an exchange whose half the kernel merged
 * away shows as a rename over an object it cannot replace.
 */
#define NPLACE 64
static struct place {
	bool used, isdir;
	int32_t fsid[2];
	struct fw_hbuf dir, obj;
	char name[256];
} places[NPLACE];
static unsigned int place_next;

static bool hbuf_set(struct fw_hbuf *h, const struct fw_obj *o)
{
	if (!o->fsid || o->fh->handle_bytes > sizeof(h->b))
		return false;
	h->fh.handle_bytes = o->fh->handle_bytes;
	h->fh.handle_type = o->fh->handle_type;
	memcpy(h->b, o->fh->f_handle, o->fh->handle_bytes);
	return true;
}

static bool hbuf_is(const struct fw_hbuf *h, const struct file_handle *fh)
{
	return h->fh.handle_bytes == fh->handle_bytes && h->fh.handle_type == fh->handle_type &&
	       !memcmp(h->b, fh->f_handle, fh->handle_bytes);
}

static struct place *place_find(const struct fw_obj *dir, const char *name)
{
	unsigned int i;

	for (i = 0; dir->fsid && name && i < NPLACE; i++)
		if (places[i].used && !strcmp(places[i].name, name) &&
		    places[i].fsid[0] == dir->fsid[0] && places[i].fsid[1] == dir->fsid[1] &&
		    hbuf_is(&places[i].dir, dir->fh))
			return &places[i];
	return NULL;
}

/* Who is at dir/name now, as far as events said: obj, or unknown (NULL). */
static void place_note(const struct fw_obj *dir, const char *name, const struct fw_obj *obj,
		       bool isdir)
{
	struct place *p = place_find(dir, name);

	if (!obj || !obj->fsid || !name || strlen(name) >= sizeof(p->name)) {
		if (p)
			p->used = false;
		return;
	}
	if (!p) {
		p = &places[place_next++ % NPLACE];
		p->used = false;
		if (!hbuf_set(&p->dir, dir))
			return;
		p->fsid[0] = dir->fsid[0];
		p->fsid[1] = dir->fsid[1];
		strcpy(p->name, name);
	}
	p->isdir = isdir;
	p->used = hbuf_set(&p->obj, obj);
}

/* What a name event says of the object at its name. */
static void place_event(const struct fw_raw *ev)
{
	uint64_t m = ev->mask;

	if (!ev->dir.name || !(m & (APPEAR | GONE)))
		return;
	place_note(&ev->dir, ev->dir.name, (m & GONE) ? NULL : &ev->child, m & FW_ONDIR);
}

/*
 * Report an exchange as both MOVED_FROMs, then both MOVED_TOs, so a
 * consumer that pairs cookies detaches both before it attaches either;
 * nothing is replaced, so there is no DELETE_SELF.
 */
static void exchange_event(struct fw_ctx *c, const struct fw_raw *e1,
			   const struct fw_raw *e2)
{
	const char *an = e1->old.name, *bn = e1->new.name;
	struct fw_dir *ad = an ? lookup(c, &e1->old) : NULL;
	struct fw_dir *bd = bn ? lookup(c, &e1->new) : NULL;
	bool xdir = e1->mask & FW_ONDIR, ydir = e2->mask & FW_ONDIR;
	bool self = e1->pid == c->pid;
	struct fw_ev e = { .self = self };
	struct fw_dir *x = xdir ? subdir(c, e1, ad, an) : NULL;
	struct fw_dir *y = ydir ? subdir(c, e2, bd, bn) : NULL;
	struct fw_dir *xd = bd, *yd = ad, *p;	/* where each one went */
	const char *xn = bn, *yn = an, *n;
	uint32_t kx = ++c->cookie, ky = ++c->cookie;

	if (x && !x->parent)
		x = NULL;	/* a root: its MOVE_SELF follows it */
	if (y && !y->parent)
		y = NULL;
	/* to a directory not marked then, but whose scan has met it since */
	if (!bd && (p = found_at(c, x, ad, an, &n)))
		xd = p, xn = n;
	if (!ad && (p = found_at(c, y, bd, bn, &n)))
		yd = p, yn = n;
	half(c, &e, FW_MOVED_FROM, ad, an, xdir, kx);
	half(c, &e, FW_MOVED_FROM, bd, bn, ydir, ky);
	half(c, &e, FW_MOVED_TO, xd, xn, xdir, kx);
	half(c, &e, FW_MOVED_TO, yd, yn, ydir, ky);
	snap_note(c, ad, an, true, ydir);
	snap_note(c, bd, bn, true, xdir);
	swap_in(c, x, xd, xn);
	swap_in(c, y, yd, yn);
	if (xdir && !x && bd)
		adopt_child(c, e1, bd, bn);
	if (ydir && !y && ad)
		adopt_child(c, e2, ad, an);
	place_note(&e1->old, an, &e2->child, ydir);
	place_note(&e1->new, bn, &e1->child, xdir);
}

/*
 * Read late, a rename may be behind the map: a scan already adopted s at a
 * later place (not the one this rename leaves), and this rename's target
 * no longer leads to it.  Moving it back would lose it when the rename
 * that took it further comes without its new record.
 */
static bool ahead(struct fw_ctx *c, struct fw_dir *s, const struct fw_dir *od,
		  const char *on, struct fw_dir *nd, const char *nn)
{
	return (s->parent != od || !on || strcmp(s->name, on)) &&
	       fw_dir_at(c, nd, nn) != s && fw_dir_at(c, s->parent, s->name) == s;
}

/*
 * A rename of ev's object over the one events last put at the new name,
 * which it cannot replace (a directory over a file, or the other way
 * round), and that one is at the old name now: an exchange whose other
 * half the kernel merged into an identical earlier FAN_RENAME.  The other
 * object for that exchange, in e2.
 */
static bool over_unreplaceable(struct fw_ctx *c, const struct fw_raw *ev, struct fw_dir *od,
			       const char *on, struct fw_raw *e2, struct fw_hbuf *h)
{
	const struct place *p = place_find(&ev->new, ev->new.name);
	struct fw_hbuf now = { .fh.handle_bytes = sizeof(now.b) };
	int dfd, mnt;

	if (!p || p->isdir == !!(ev->mask & FW_ONDIR) || (dfd = fw_dir_fd(&c->map, od)) < 0 ||
	    name_to_handle_at(dfd, on, &now.fh, &mnt, 0) || !hbuf_is(&p->obj, &now.fh))
		return false;
	*h = p->obj;
	e2->mask = FW_RENAME | (p->isdir ? FW_ONDIR : 0);
	e2->child.fsid = p->fsid;
	e2->child.fh = &h->fh;
	return true;
}

/*
 * The watched directory the map has at the new name is at the old name
 * now: not renamed over (that would have removed it) but exchanged, the
 * FAN_RENAME of its half merged by the kernel into an identical earlier
 * one (mv d b; exchange b d; exchange b d).  Handled as the exchange.
 */
static bool exchanged_back(struct fw_ctx *c, const struct fw_raw *ev, struct fw_dir *od,
			   const char *on, struct fw_dir *nd, const char *nn)
{
	struct fw_dir *t = nd && nn ? fw_dir_child(nd, nn) : NULL;
	struct fw_hbuf h;
	struct fw_raw e2 = {
		.mask = FW_RENAME | FW_ONDIR, .pid = ev->pid,
		.old = ev->new, .new = ev->old,
	};

	if (!c->have_target || !od || !on)
		return false;
	if (t && t->handle_bytes <= sizeof(h.b) && lookup(c, &ev->child) != t &&
	    fw_dir_at(c, od, on) == t) {
		h.fh.handle_bytes = t->handle_bytes;
		h.fh.handle_type = t->handle_type;
		memcpy(h.b, t->handle, t->handle_bytes);
		e2.child.fsid = t->fsid;
		e2.child.fh = &h.fh;
	} else if (!over_unreplaceable(c, ev, od, on, &e2, &h)) {
		return false;
	}
	exchange_event(c, ev, &e2);
	return true;
}

/* FAN_RENAME (5.17+): old and new location in one event. */
static void rename_event(struct fw_ctx *c, const struct fw_raw *ev)
{
	struct fw_dir *od = lookup(c, &ev->old), *nd = lookup(c, &ev->new);
	bool isdir = ev->mask & FW_ONDIR, self = ev->pid == c->pid;
	const char *on = ev->old.name, *nn = ev->new.name;
	struct fw_ev e = { .isdir = isdir, .self = self, .cookie = ++c->cookie };
	struct fw_dir *s = NULL, *p;
	const char *mn;

	/* The kernel leaves out the record of a directory we do not watch. */
	if (!on)
		od = NULL;
	if (!nn)
		nd = NULL;
	if (isdir)
		s = subdir(c, ev, od, on);
	if (s && !s->parent)
		s = NULL;	/* a root: its MOVE_SELF follows it */
	if (on && nn && exchanged_back(c, ev, od, on, nd, nn))
		return;
	place_note(&ev->old, on, NULL, false);
	place_note(&ev->new, nn, &ev->child, isdir);
	/*
	 * No new record: the directory it went to is not marked (yet).  If
	 * that directory's scan already found this one there, it is in the
	 * tree: pair the MOVED_FROM with where it is now, not "it left".
	 */
	if (od && !nd && (p = found_at(c, s, od, on, &mn)))
		nd = p, nn = mn;
	if (od && nd) {
		e.mask = FW_MOVED_FROM | FW_MOVED_TO;
		e.d = nd, e.name = nn, e.od = od, e.oname = on;
	} else if (od) {
		e.mask = FW_MOVED_FROM, e.d = od, e.name = on;
	} else {
		e.mask = FW_MOVED_TO, e.d = nd, e.name = nn;
	}
	if (od || nd)
		fw_emit(c, &e);
	snap_note(c, od, on, false, isdir);
	snap_note(c, nd, nn, true, isdir);
	whiteout_left(c, od, on, self);
	if (!isdir)
		return;
	replaced(c, nd, nn, s, self);
	if (s && nd && ahead(c, s, od, on, nd, nn)) {
		s->leaving = false;	/* a scan met it further on: it stays there */
	} else if (s && nd && !fw_dir_reparent(s, nd, nn)) {
		moved_within(c, s);
		if (!on && s->quiet)
			fw_report_quiet(c, s);	/* came in during setup */
	} else if (s)
		fw_unwatch_tree(c, s);		/* it left the watched tree */
	else if (nd)
		adopt_child(c, ev, nd, nn);	/* it came in: report what it holds */
}

static void overflow(struct fw_ctx *c)
{
	c->overflows++;
	if (c->overflows == 1 || !(c->overflows & (c->overflows - 1)))
		fw_warn(c, "the event queue overflowed (fs.fanotify.max_queued_events = %ld): events were lost%s",
			fw_sysctl("max_queued_events"), c->o->rescan ? "; rescanning" :
			"; --rescan-on-overflow rescans the tree");
	fw_emit1(c, FW_Q_OVERFLOW, NULL, "", false, false, false);
	if (c->o->rescan)
		fw_rescan(c);
}

/*
 * --rescan-on-overflow: the snapshot holds what the reader was told, not
 * what the disk holds now (events are read late): a name last reported
 * present stays present, with its state if it still exists, so a rescan
 * reports its deletion or change if those events get lost.
 */
static void snap_note(struct fw_ctx *c, struct fw_dir *d, const char *name,
		      bool present, bool isdir)
{
	struct stat st;
	int dfd;

	if (!d || !d->snap)
		return;
	if (!present)
		fw_snap_set(d->snap, name, NULL);
	else if ((dfd = fw_dir_fd(&c->map, d)) >= 0 &&
		 !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		fw_snap_set(d->snap, name, &st);
	else
		fw_snap_set_unknown(d->snap, name, isdir);
}

static void handle_event(struct fw_ctx *c, const struct fw_raw *ev)
{
	struct fw_dir *d;

	if (ev->overflow)
		return overflow(c);
	if (c->nfiles && (d = lookup(c, &ev->child)) && d->is_file)
		file_event(c, ev, d);
	if (ev->mask & FW_RENAME)
		return rename_event(c, ev);
	place_event(ev);
	d = lookup(c, &ev->dir);
	if (d && d->is_file)
		return;
	if (!d)
		return;		/* a directory we no longer watch */
	if (!ev->dir.name || !strcmp(ev->dir.name, "."))
		self_event(c, ev, d);
	else
		name_event_noted(c, ev, d, ev->dir.name);
}

/* The next event that is not a MOVE_SELF alone (an exchange has those between its halves). */
static int next_half(const void *buf, size_t len, size_t *off, struct fw_raw *ev)
{
	int r;

	while ((r = fw_decode(buf, len, off, ev)) == FW_DECODE_OK &&
	       !(ev->mask & ~(FW_MOVE_SELF | FW_ONDIR)))
		;
	return r;
}

static bool only(const struct fw_raw *ev, uint64_t bit)
{
	return (ev->mask & ~(uint64_t)FW_ONDIR) == bit;
}

/*
 * A MOVED_TO, maybe with the DELETE of the same object at the same name
 * merged into it (exchange, then rm): that DELETE is handled after.
 */
static bool arrived(const struct fw_raw *ev)
{
	return only(ev, FW_MOVED_TO) || only(ev, FW_MOVED_TO | FW_DELETE);
}

/*
 * Unpaired renames: an exchange is MOVED_FROM a, MOVED_TO b (object x),
 * MOVED_FROM b, MOVED_TO a (object y).  Fold it into the two FAN_RENAMEs
 * it would have been (p), and ask is_exchange().
 */
static bool unpaired_exchange(const struct fw_ctx *c, const struct fw_raw e[4],
			      struct fw_raw p[2])
{
	int i;

	if (!arrived(&e[1]) || !only(&e[2], FW_MOVED_FROM) ||
	    !arrived(&e[3]) || !same_fh(&e[0].child, &e[1].child) ||
	    !same_fh(&e[2].child, &e[3].child))
		return false;
	for (i = 0; i < 2; i++) {
		p[i] = e[2 * i];
		p[i].mask = FW_RENAME | (e[2 * i].mask & FW_ONDIR);
		p[i].old = e[2 * i].dir;
		p[i].new = e[2 * i + 1].dir;
	}
	return is_exchange(c, &p[0], &p[1]);
}

/* The n events at e as the two FAN_RENAMEs of an exchange (p), if they are. */
static bool as_exchange(const struct fw_ctx *c, const struct fw_raw e[4], int n,
			struct fw_raw p[2])
{
	static const struct fw_obj none;
	int i;

	if (n == 4)
		return unpaired_exchange(c, e, p);
	p[0] = e[0];
	p[1] = e[1];
	if (e[0].mask & FW_RENAME)
		return is_exchange(c, p, p + 1);
	/*
	 * Unpaired, with the other place not watched (or not marked yet):
	 * only MOVED_TO x (one object), MOVED_FROM x (the other) come, in
	 * an order that reads as the new one leaving.
	 */
	if (!only(&e[1], FW_MOVED_FROM))
		return false;
	for (i = 0; i < 2; i++)
		p[i].mask = FW_RENAME | (e[i].mask & FW_ONDIR);
	p[0].old = none;
	p[0].new = e[0].dir;
	p[1].old = e[1].dir;
	p[1].new = none;
	return is_exchange(c, p, p + 1);
}

/*
 * Handle the events in buf; returns the bytes used.  With hold, a
 * FAN_RENAME at the very end is left unused: it may be the first half of
 * an exchange whose second half the next read brings.
 */
static size_t handle_events(struct fw_ctx *c, const void *buf, size_t len, bool hold)
{
	size_t off = 0, at;
	struct fw_raw ev;
	int r;

	fw_stamp(c);
	cur.buf = buf;
	cur.len = len;
	while (handle_later(c, off), at = off,
	       (r = fw_decode(buf, len, &off, &ev)) != FW_DECODE_END) {
		struct fw_raw e[4], p[2];
		size_t next = off, mid = off;
		int k, n;

		if (r != FW_DECODE_OK)
			continue;
		cur.off = off;
		n = (ev.mask & FW_RENAME) ? 2 : !c->have_target ? 1 :
		    only(&ev, FW_MOVED_FROM) ? 4 : only(&ev, FW_MOVED_TO) ? 2 : 1;
		if (n == 1) {
			handle_event(c, &ev);
			continue;
		}
		/* An exchange is 2 (FAN_RENAME) or 4 events: look ahead. */
		e[0] = ev;
		for (k = 1; k < n && (r = next_half(buf, len, &next, &e[k])) == FW_DECODE_OK; k++)
			;
		/*
		 * Not with a half held back for after this very event: that
		 * one is in this buffer, which the next read overwrites.
		 */
		if (k < n && r == FW_DECODE_END && hold && !nlater) {
			cur.buf = NULL;
			return at;
		}
		if (k < n || !as_exchange(c, e, n, p)) {
			handle_event(c, &ev);
			continue;
		}
		exchange_event(c, p, p + 1);
		while (mid < next && fw_decode(buf, len, &mid, &ev) == FW_DECODE_OK)
			if (!(ev.mask & ~(FW_MOVE_SELF | FW_ONDIR)))
				handle_event(c, &ev);	/* the MOVE_SELFs */
		for (k = 1; n == 4 && k < 4; k += 2) {
			e[k].mask &= ~(uint64_t)FW_MOVED_TO;
			if (e[k].mask & FW_DELETE)
				handle_event(c, &e[k]);	/* merged into it */
		}
		off = next;
	}
	handle_later(c, SIZE_MAX);
	whiteouts_late(c);
	cur.buf = NULL;
	return off;
}

void fw_handle_buffer(struct fw_ctx *c, const void *buf, size_t len)
{
	handle_events(c, buf, len, false);
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
			fw_emit1(c, FW_DELETE_SELF, d, "", !d->is_file, false, false);
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
	struct pollfd p[2] = {
		{ .fd = c->fan, .events = POLLIN },
		{ .fd = c->hooks.fd, .events = POLLIN },
	};
	int64_t last = now_ms(), checked = last;
	size_t held = 0;	/* bytes of a FAN_RENAME kept at buf's start */

	for (;;) {
		int64_t t = now_ms(), tmo = 1000;
		ssize_t n = 0;
		int r;

		if (c->o->timeout) {
			int64_t left = last + c->o->timeout * 1000ll - t;

			if (left <= 0)
				return c->printed ? 0 : 2;
			tmo = left < tmo ? left : tmo;
		}
		if (c->hooks.tick && (r = c->hooks.tick(c, t)))
			return r < 0 ? 0 : r;	/* -1: a normal end */
		if (c->hooks.deadline) {
			int64_t d = c->hooks.deadline(c, t);

			if (d >= 0 && d < tmo)
				tmo = d;
		}
		if (c->pending && tmo > 10)
			tmo = 10;	/* directories wait for a rename to be read */
		if (held && tmo > 2)
			tmo = 2;	/* an exchange's second half comes at once */
		if (t - checked >= 1000) {
			check_roots(c);
			checked = t;
			if (flush(c))
				return 1;
		}
		if (!c->map.count) {
			fw_warn(c, "nothing watched is left");
			return c->printed || c->o->monitor ? 0 : 1;
		}
		if (c->done)
			return 0;
		r = poll(p, c->hooks.fd >= 0 ? 2 : 1, (int)tmo);
		if (r < 0 && errno != EINTR) {
			fw_err("poll: %s", strerror(errno));
			return 1;
		}
		bool hooked = r > 0 && c->hooks.fd >= 0 && p[1].revents;

		if (hooked)
			c->hooks.on_fd(c);
		/* After a hook (a command ended), read what it caused, too. */
		if (r > 0 && (p[0].revents || hooked)) {
			n = read(c->fan, (char *)buf + held, sizeof(buf) - held);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				fw_err("reading fanotify events: %s", strerror(errno));
				return 1;
			}
			if (n > 0) {
				/* what a command caused is its own: hold nothing */
				size_t len = held + n, used = handle_events(c, buf, len, !hooked);

				held = len - used;
				memmove(buf, (char *)buf + used, held);
				last = now_ms();
			}
		}
		if (held && (hooked || n <= 0)) {
			fw_handle_buffer(c, buf, held);	/* no second half came */
			held = 0;
		}
		if (c->pending)
			fw_retry_pending(c);
		if (c->skipped)
			fw_retry_skipped(c);
		fw_setup_done(c);
		if (flush(c))
			return 1;
		if (n > 0 && !c->pending)
			settle(c, n, sizeof(buf));
	}
}

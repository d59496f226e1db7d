// SPDX-License-Identifier: LGPL-2.1-or-later
/* Setting up the group, marking directories and scanning them. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>

#include "mount.h"
#include "prep.h"
#include "snap.h"
#include "watch.h"

struct fw_pending {
	struct fw_pending *next;
	int32_t fsid[2];
	struct file_handle *fh;		/* the parent's */
	struct file_handle *want_fh;	/* the child's, or NULL */
	struct fw_want want;
	bool report;
	unsigned int tries;
	char name[];
};

/* A top directory that cannot be watched is an error, a subdirectory not. */
static void __attribute__((format(printf, 3, 4)))
complain(const struct fw_ctx *c, bool fatal, const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fatal)
		fw_err("%s", msg);
	else
		fw_warn(c, "%s", msg);
}

static bool kernel_older_than(int maj, int min)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return false;
	return a < maj || (a == maj && b < min);
}

static void init_error(int err)
{
	struct utsname u;

	uname(&u);
	if (err == EPERM && kernel_older_than(5, 13))
		fw_err("Linux %s refuses fanotify to normal users: it needs Linux 5.13 or later (or run as root)",
		       u.release);
	else if (err == EPERM)
		fw_err("fanotify_init refused (EPERM): unprivileged fanotify is not allowed here (a security module or seccomp policy?)");
	else if (err == EINVAL)
		fw_err("Linux %s lacks FAN_REPORT_DFID_NAME: fanwatch needs Linux 5.9 or later (5.13 as a normal user)",
		       u.release);
	else if (err == ENOSYS)
		fw_err("this kernel has no fanotify (CONFIG_FANOTIFY is off)");
	else if (err == EMFILE)
		fw_err("too many fanotify groups for this user (fs.fanotify.max_user_groups = %ld); close other watchers",
		       fw_sysctl("max_user_groups"));
	else
		fw_err("fanotify_init: %s", strerror(err));
}

/* Events the map needs whatever the user asked for. */
static uint64_t internal_mask(const struct fw_ctx *c)
{
	uint64_t m = FW_CREATE | FW_DELETE | FW_DELETE_SELF | FW_MOVE_SELF;

	return m | (c->have_rename ? FW_RENAME : FW_MOVED_FROM | FW_MOVED_TO);
}

int fw_open(struct fw_ctx *c, struct fw_opts *o)
{
	unsigned int base = FW_CLASS_NOTIF | FW_CLOEXEC | FW_NONBLOCK |
			    FW_REPORT_DFID_NAME | FW_REPORT_FID;
	uint32_t user = o->events & ~(FW_MOVED_FROM | FW_MOVED_TO);

	memset(c, 0, sizeof(*c));
	c->o = o;
	c->pid = getpid();
	c->sink = fw_print_sink;
	c->hooks.fd = -1;
	c->want_time = o->fmt.style == FW_STYLE_JSON ||
		       fw_format_wants_time(o->fmt.format);
	/*
	 * 5.17 added FAN_RENAME and FAN_REPORT_TARGET_FID together: asking
	 * for the latter is the probe.  With it, every dirent event names its
	 * child by handle, so no directory is ever identified by its name.
	 * --unpaired-renames keeps it but takes the kernel's MOVED_FROM and
	 * MOVED_TO instead of FAN_RENAME (the 5.13-5.16 path).  EINVAL means
	 * an older kernel; FID alone (5.9) still names a file target.
	 */
	c->fan = fanotify_init(base | FW_REPORT_TARGET_FID, O_RDONLY | O_CLOEXEC);
	c->have_target = c->fan >= 0;
	c->have_rename = c->have_target && !o->unpaired;
	if (c->fan < 0 && errno == EINVAL)
		c->fan = fanotify_init(base, O_RDONLY | O_CLOEXEC);
	if (c->fan < 0 && errno == EINVAL)
		c->fan = fanotify_init(base & ~FW_REPORT_FID, O_RDONLY | O_CLOEXEC);
	if (c->fan < 0) {
		init_error(errno);
		return -1;
	}
	c->markmask = user | internal_mask(c) | FW_ONDIR | FW_EVENT_ON_CHILD;
	if (fw_dirmap_init(&c->map)) {
		fw_err("out of memory");
		return -1;
	}
	return 0;
}

static void unmark(struct fw_dir *d, void *arg)
{
	struct fw_ctx *c = arg;

	/*
	 * A directory that left the tree keeps its mark unless we still hold
	 * an fd for it (a removed one loses it with its inode): drop it then.
	 */
	if (d->is_file)
		c->nfiles--;
	else if (d->fd >= 0)
		fanotify_mark(c->fan, FW_MARK_REMOVE, c->markmask, d->fd, ".");
}

void fw_unwatch_tree(struct fw_ctx *c, struct fw_dir *d)
{
	fw_dirmap_remove_tree(&c->map, d, unmark, c);
}

static void free_pending(struct fw_pending *p)
{
	struct fw_pending *n;

	for (; p; p = n) {
		n = p->next;
		free(p->fh);
		free(p->want_fh);
		free(p);
	}
}

void fw_close(struct fw_ctx *c)
{
	free_pending(c->pending);
	c->pending = NULL;
	free_pending(c->skipped);
	c->skipped = NULL;
	fw_prepper_free(c->prep);
	c->prep = NULL;
	fw_dirmap_free(&c->map);
	if (c->fan >= 0)
		close(c->fan);
	c->fan = -1;
}

static const char *fs_name(long type)
{
	switch ((unsigned long)type) {
	case 0x65735546: return "fuse";
	case 0x794c7630: return "overlayfs";
	case 0x9123683e: return "btrfs";
	case 0x6969: return "nfs";
	case 0xff534d42: return "cifs";
	case 0x9fa0: return "proc";
	case 0x62656572: return "sysfs";
	default: return NULL;
	}
}

/* One message per reason a directory cannot be watched. */
static void mark_error(struct fw_ctx *c, bool fatal, const char *path, int fd, int err)
{
	struct statfs sf;
	const char *fs = NULL;
	char fsbuf[32];

	if (fd >= 0 && !fstatfs(fd, &sf)) {
		fs = fs_name(sf.f_type);
		if (!fs) {
			snprintf(fsbuf, sizeof(fsbuf), "type 0x%lx", (unsigned long)sf.f_type);
			fs = fsbuf;
		}
	}
	switch (err) {
	case ENODEV:
		complain(c, fatal, "cannot watch %s: its filesystem (%s) reports a zero fsid (ENODEV), which fanotify cannot identify",
			path, fs ? fs : "?");
		break;
	case EOPNOTSUPP:
		complain(c, fatal, "cannot watch %s: its filesystem (%s) does not support file handles (EOPNOTSUPP)",
			path, fs ? fs : "?");
		break;
	case EXDEV:
		complain(c, fatal, "cannot watch %s: its fsid differs from its filesystem's root (%s, e.g. a btrfs subvolume: EXDEV)",
			path, fs ? fs : "?");
		break;
	case EACCES:
		complain(c, fatal, "cannot watch %s: permission denied (a fanotify mark needs read permission on it: chmod u+r)%s",
			 path, fatal ? "" : "; skipped");
		break;
	case EMFILE:
	case ENFILE:
		complain(c, fatal, "cannot watch %s: out of file descriptors (fanwatch keeps at most %zu); raise ulimit -n",
			 path, c->map.maxfd);
		break;
	default:
		complain(c, fatal, "cannot watch %s: %s", path, strerror(err));
	}
}

/*
 * A mount point inside the tree that cannot be watched, named as one (a
 * FUSE mount was reported as "a btrfs subvolume"): what it is, why, and
 * what to do.  A zero fsid (FUSE, 9p) can be watched from 6.8 on by a
 * group that watches nothing on another filesystem: EXDEV here, ENODEV
 * before.
 */
static void mount_error(struct fw_ctx *c, const char *path, int fd, int mnt, int err)
{
	char desc[1200];
	const char *why, *todo = "; watch it separately";

	fw_mount_desc(fd, mnt, desc, sizeof(desc));
	switch (err) {
	case ENODEV:
		why = "its filesystem reports a zero fsid (ENODEV)";
		todo = "; Linux 6.8 and later can watch it on its own";
		break;
	case EXDEV:
		why = "fanotify can watch a filesystem without an fsid of its own only alone (EXDEV)";
		break;
	case EOPNOTSUPP:
		why = "its filesystem does not support file handles (EOPNOTSUPP)";
		todo = "";
		break;
	default:
		why = strerror(err);
	}
	fw_warn(c, "%s is a mount point (%s): not watched: %s%s", path, desc, why, todo);
}

/* The errors mark_error() explains alike for a mount point and a directory. */
static bool mount_neutral(int err)
{
	return err == EACCES || err == EMFILE || err == ENFILE || err == ENOENT ||
	       err == ESTALE;
}

/* Subdirectory names a listing found, with the inode number it gave. */
struct namelist {
	char **v;
	ino_t *ino;
	size_t n, cap;
};

static void namelist_add(struct namelist *l, const char *s, ino_t ino)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		l->ino = realloc(l->ino, l->cap * sizeof(*l->ino));
		if (!l->v || !l->ino) {
			fw_err("out of memory");
			exit(1);
		}
	}
	l->ino[l->n] = ino;
	if (!(l->v[l->n++] = strdup(s))) {
		fw_err("out of memory");
		exit(1);
	}
}

static void namelist_free(struct namelist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->ino);
}

/*
 * Room for one more frame in a walk's stack of n frames (capacity *cap):
 * walks keep their levels on the heap, as a tree may be deeper than any
 * stack.
 */
static void *frames_grow(void *v, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	*cap = *cap ? 2 * *cap : 16;
	v = realloc(v, *cap * size);
	if (!v) {
		fw_err("out of memory");
		exit(1);
	}
	return v;
}

#define COUNT_OPEN	(O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* A directory count_dirs() is in: its subdirectories, the next to enter. */
struct count_level {
	struct namelist subs;
	size_t next;
};

struct count_walk {
	struct count_level *lv;
	size_t n, cap;
};

/* A level for the directory fd refers to, with its subdirectories (by d_type). */
static void count_push(struct count_walk *w, int fd)
{
	int lfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct count_level *t;
	struct dirent *de;
	DIR *dir;

	w->lv = frames_grow(w->lv, w->n, &w->cap, sizeof(*w->lv));
	t = &w->lv[w->n++];
	memset(t, 0, sizeof(*t));
	if (lfd < 0 || !(dir = fdopendir(lfd))) {
		if (lfd >= 0)
			close(lfd);
		return;
	}
	while ((de = readdir(dir)))
		if (de->d_type == DT_DIR && strcmp(de->d_name, ".") &&
		    strcmp(de->d_name, ".."))
			namelist_add(&t->subs, de->d_name, de->d_ino);
	closedir(dir);
}

/* From the directory fd refers to, to its parent: fd is closed. */
static int count_up(int fd)
{
	int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	close(fd);
	return up;
}

/*
 * Count the directories of a subtree the mark limit leaves unwatched.
 * Depth first on one descriptor, back up by "..", the names still to
 * visit a level on the heap: any depth, no stack, one fd.  A count for a
 * message: a rename meanwhile may make it a little off.
 */
static unsigned int count_dirs(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, COUNT_OPEN), sub;
	struct count_walk w = { 0 };
	unsigned int count = 1;

	if (fd >= 0)
		count_push(&w, fd);
	while (w.n) {
		struct count_level *t = &w.lv[w.n - 1];

		if (t->next < t->subs.n) {
			count++;
			sub = openat(fd, t->subs.v[t->next++], COUNT_OPEN);
			if (sub < 0)
				continue;
			close(fd);
			fd = sub;
			count_push(&w, fd);	/* may move t */
		} else {
			namelist_free(&t->subs);
			if (--w.n && (fd = count_up(fd)) < 0)
				break;
		}
	}
	while (w.n)
		namelist_free(&w.lv[--w.n].subs);
	free(w.lv);
	if (fd >= 0)
		close(fd);
	return count;
}

struct fh_buf {
	struct file_handle fh;
	unsigned char data[128];	/* MAX_HANDLE_SZ */
};

static char *join(const struct fw_dir *parent, const char *name)
{
	char *p;

	if (!parent)
		return strdup(name);
	if (asprintf(&p, "%s%s", parent->path, name) < 0)
		return NULL;
	return p;
}

/*
 * One directory found at a second path, parent/name (mount id mnt), one of
 * the two through a mount point (a bind mount): an inode mark reports a
 * change once, under the path it was watched at, so the paths below the
 * other never appear.  Say so, once.  Neither a mount point: a move.
 */
static void mount_again(struct fw_ctx *c, struct fw_dir *d, struct fw_dir *parent,
			const char *name, int mnt)
{
	bool here = mnt != parent->mnt_id;
	int dl = (int)d->pathlen - (d->pathlen > 1 && d->path[d->pathlen - 1] == '/');
	char desc[1200], *p;

	if (d->mount_said || (!here && !(d->parent && d->mnt_id != d->parent->mnt_id)) ||
	    (d->parent == parent && d->name && !strcmp(d->name, name)))
		return;
	d->mount_said = true;
	p = join(parent, name);
	fw_mount_desc(-1, here ? mnt : d->mnt_id, desc, sizeof(desc));
	if (here)
		fw_warn(c, "%s is a mount point (%s): %s and %.*s are one directory, watched once: its changes are reported under %.*s only",
			p ? p : name, desc, p ? p : name, dl, d->path, dl, d->path);
	else
		fw_warn(c, "%.*s is a mount point (%s): %.*s and %s are one directory, watched once: its changes are reported under %.*s only",
			dl, d->path, desc, dl, d->path, p ? p : name, dl, d->path);
	free(p);
}

static bool same_handle(const struct file_handle *a, const struct file_handle *b)
{
	return a->handle_bytes == b->handle_bytes && a->handle_type == b->handle_type &&
	       !memcmp(a->f_handle, b->f_handle, a->handle_bytes);
}

/*
 * Mark the directory fd refers to.  Through "." (an O_PATH fd alone is
 * EBADF to fanotify_mark) needs search permission on it; a directory that
 * can be listed but not searched is marked through its parent instead,
 * and the name checked to still lead to the same handle.
 */
static int mark_dir(struct fw_ctx *c, struct fw_dir *parent, const char *name,
		    int fd, unsigned int flags, uint64_t mask,
		    const struct file_handle *fh)
{
	struct fh_buf h = { .fh.handle_bytes = sizeof(h.data) };
	int pfd, mnt;

	if (!fanotify_mark(c->fan, flags, mask, fd, "."))
		return 0;
	if (errno != EACCES)
		return -1;
	pfd = parent ? fw_dir_fd(&c->map, parent) : AT_FDCWD;
	if ((parent && pfd < 0) || fanotify_mark(c->fan, flags, mask, pfd, name))
		return -1;
	if (name_to_handle_at(pfd, name, &h.fh, &mnt, 0) || !same_handle(&h.fh, fh)) {
		errno = ENOENT;	/* replaced meanwhile: as if it had gone */
		return -1;
	}
	return 0;
}

/*
 * The fsid of the directory fd refers to: its parent's when it is on the
 * same mount of a simple filesystem (statfs costs a per-CPU counter sum on
 * ext4), else statfs.
 */
static int fd_fsid(int fd, const struct fw_dir *parent, int mnt,
		   int32_t fsid[2], bool *simple_fs)
{
	struct statfs sf;

	if (parent && parent->simple_fs && parent->mnt_id == mnt) {
		fsid[0] = parent->fsid[0];
		fsid[1] = parent->fsid[1];
		*simple_fs = parent->simple_fs;
		return 0;
	}
	if (fstatfs(fd, &sf))
		return -1;
	memcpy(fsid, &sf.f_fsid, 2 * sizeof(int32_t));
	*simple_fs = fw_is_simple_fs(sf.f_type);
	return 0;
}

/* Is the directory fd refers to (handle fh) the one wanted? */
static bool is_wanted(int fd, const int32_t fsid[2], const struct file_handle *fh,
		      const struct fw_want *w)
{
	struct stat st;

	if (!w)
		return true;
	if (w->fh && (w->fsid[0] != fsid[0] || w->fsid[1] != fsid[1] ||
		      !same_handle(fh, w->fh)))
		return false;
	return !w->ino || (!fstat(fd, &st) && st.st_ino == w->ino);
}

/*
 * A directory we watch, found again by a scan at parent/name: moved here
 * by a rename not read yet, or seen twice (a bind mount, a root inside
 * another).  A moved one is noted (d->met), not moved: events read before
 * its rename still name it at its old place.  When that rename comes
 * without the new directory's record (it was not marked then), events.c
 * finds it here instead of reading "it left the tree".
 */
static void found_again(struct fw_ctx *c, struct fw_dir *d, struct fw_dir *parent,
			const char *name)
{
	size_t len = strlen(name) + 1;
	struct fw_met *m;

	if (!parent || !d->parent || d->is_file ||
	    (d->parent == parent && !strcmp(d->name, name)) ||
	    fw_dir_at(c, d->parent, d->name) == d || !(m = malloc(sizeof(*m) + len)))
		return;
	m->fsid[0] = parent->fsid[0];
	m->fsid[1] = parent->fsid[1];
	m->fh.handle_bytes = parent->handle_bytes;
	m->fh.handle_type = parent->handle_type;
	memcpy(m->data, parent->handle, parent->handle_bytes);
	memcpy(m->name, name, len);
	free(d->met);
	d->met = m;
}

/* Where a scan met d since, if that still holds; NULL otherwise. */
struct fw_dir *fw_met_at(struct fw_ctx *c, struct fw_dir *d, const char **name)
{
	struct fw_dir *p;
	const struct fw_dir *a;

	if (!d->met || !(p = fw_dirmap_find(&c->map, d->met->fsid, &d->met->fh)))
		return NULL;
	/*
	 * Still there?  When the map's path to p is behind renames not read
	 * yet (ESTALE, ENOENT), the disk cannot say: the note, made after
	 * every queued event, stands; a later move has its own event.
	 */
	if (fw_dir_fd(&c->map, p) >= 0 ? fw_dir_at(c, p, d->met->name) != d :
	    errno != ESTALE && errno != ENOENT)
		return NULL;
	for (a = p; a; a = a->parent)
		if (a == d)
			return NULL;	/* the map is behind: no loop */
	*name = d->met->name;
	return p;
}

/*
 * Mark the object fd refers to and enter it in the map; fd is then the
 * map's.  Another directory than the one wanted is neither: ENOENT, as if
 * the wanted one had gone (it has, from that name).
 */
static struct fw_dir *mark_fd(struct fw_ctx *c, struct fw_dir *parent,
			      const char *name, int fd, bool isfile,
			      const struct fw_want *want)
{
	struct fh_buf h = { .fh.handle_bytes = sizeof(h.data) };
	unsigned int flags = FW_MARK_ADD | (isfile ? 0 : FW_MARK_ONLYDIR);
	uint64_t mask = c->markmask;
	int32_t fsid[2];
	bool simple_fs = false;
	struct fw_dir *d;
	int mnt = -1, err = 0;

	if (isfile) {
		mask = (c->o->events & FW_FILE_MASK) | FW_DELETE_SELF | FW_MOVE_SELF;
		flags |= c->o->no_deref ? FW_MARK_DONT_FOLLOW : 0;
	}
	if (name_to_handle_at(fd, "", &h.fh, &mnt, AT_EMPTY_PATH))
		err = errno, mnt = -1;	/* no handle: fw_is_mount_point asks statx */
	else if (fd_fsid(fd, parent, mnt, fsid, &simple_fs))
		err = errno;
	else if (!is_wanted(fd, fsid, &h.fh, want))
		err = ENOENT;
	else if (isfile ? fanotify_mark(c->fan, flags, mask, AT_FDCWD, name) :
		 mark_dir(c, parent, name, fd, flags, mask, &h.fh))
		err = errno;
	if (err) {
		char *p = join(parent, name);

		if (err == ENOSPC) {
			c->unwatched += isfile ? 1 : count_dirs(fd, ".");
		} else if (parent && !isfile && !mount_neutral(err) &&
			   fw_is_mount_point(fd, mnt, fw_dir_fd(&c->map, parent), parent->mnt_id)) {
			mount_error(c, p ? p : name, fd, mnt, err);
		} else if (!(parent && err == ENOENT)) {
			mark_error(c, !parent, p ? p : name, fd, err);
		}
		free(p);
		return NULL;
	}
	d = fw_dirmap_find(&c->map, fsid, &h.fh);
	if (d) {
		if (parent)
			mount_again(c, d, parent, name, mnt);
		found_again(c, d, parent, name);
		errno = EEXIST;	/* already watched (bind mount, repeated root) */
		return NULL;
	}
	d = fw_dir_new(fsid, &h.fh, fd, parent, name, name);
	if (!d || fw_dirmap_insert(&c->map, d)) {
		fw_err("out of memory");
		exit(1);
	}
	d->mnt_id = mnt;
	d->simple_fs = simple_fs;
	if (isfile) {
		d->is_file = true;
		if (d->pathlen > 1 && d->path[d->pathlen - 1] == '/')
			d->path[--d->pathlen] = '\0';
		c->nfiles++;
	}
	return d;
}

struct fw_dir *fw_dir_at(struct fw_ctx *c, struct fw_dir *parent, const char *name)
{
	struct fh_buf h = { .fh.handle_bytes = sizeof(h.data) };
	int mnt, pfd = fw_dir_fd(&c->map, parent);

	if (pfd < 0 || name_to_handle_at(pfd, name, &h.fh, &mnt, 0))
		return NULL;
	return fw_dirmap_find(&c->map, parent->fsid, &h.fh);
}

/* parent/name could not be opened for lack of search permission on parent. */
static void not_searchable(struct fw_ctx *c, struct fw_dir *parent, const char *name,
			   int pfd)
{
	struct stat st;

	if (fstat(pfd, &st))
		st.st_mode = 0;
	fw_warn(c, "cannot watch %s%s: %s can be listed but not searched (mode %04o): watching what is inside needs search (x) permission on it too (chmod u+x); skipped",
		parent->path, name, parent->path, st.st_mode & 07777);
}

struct fw_dir *fw_watch_dir(struct fw_ctx *c, struct fw_dir *parent,
			    const char *name, const struct fw_want *want)
{
	int flags = O_PATH | O_DIRECTORY | O_CLOEXEC | (parent ? O_NOFOLLOW : 0);
	int pfd = parent ? fw_dir_fd(&c->map, parent) : AT_FDCWD;
	int fd, err;
	struct fw_dir *d;

	if (parent && pfd < 0) {
		errno = ESTALE;	/* parent's name chain is behind a rename */
		return NULL;
	}
	fd = openat(pfd, name, flags);
	if (fd < 0) {
		err = errno;
		if (parent && err == EACCES) {
			not_searchable(c, parent, name, pfd);
		} else if (!parent || (err != ENOENT && err != ENOTDIR)) {
			char *p = join(parent, name);

			mark_error(c, !parent, p ? p : name, -1, err);
			free(p);
		}
		errno = err;
		return NULL;
	}
	d = mark_fd(c, parent, name, fd, false, want);
	if (!d) {
		err = errno;
		close(fd);
		errno = err;
	}
	return d;
}

static bool excluded(struct fw_ctx *c, const struct fw_dir *parent, const char *name)
{
	char *p;
	bool ex;

	if (!c->o->filter.has_ex)
		return false;
	p = join(parent, name);
	ex = p && fw_filter_excluded(&c->o->filter, p, true);
	free(p);
	return ex;
}

static struct fw_pending *new_pending(const struct fw_dir *parent, const char *name)
{
	size_t hb = sizeof(struct file_handle) + parent->handle_bytes;
	struct fw_pending *p = calloc(1, sizeof(*p) + strlen(name) + 1);

	if (!p || !(p->fh = malloc(hb))) {
		fw_err("out of memory");
		exit(1);
	}
	p->fsid[0] = parent->fsid[0];
	p->fsid[1] = parent->fsid[1];
	p->fh->handle_bytes = parent->handle_bytes;
	p->fh->handle_type = parent->handle_type;
	memcpy(p->fh->f_handle, parent->handle, parent->handle_bytes);
	strcpy(p->name, name);
	return p;
}

/*
 * Remember a directory git's ignore files leave out: an edit to them may
 * bring it back (fw_retry_skipped), and only its parent's handle says
 * where it is then.
 */
static void skip_add(struct fw_ctx *c, const struct fw_dir *parent, const char *name)
{
	struct fw_pending *p;

	for (p = c->skipped; p; p = p->next)
		if (p->fsid[0] == parent->fsid[0] && p->fsid[1] == parent->fsid[1] &&
		    p->fh->handle_bytes == parent->handle_bytes &&
		    !memcmp(p->fh->f_handle, parent->handle, parent->handle_bytes) &&
		    !strcmp(p->name, name))
			return;
	p = new_pending(parent, name);
	p->next = c->skipped;
	c->skipped = p;
}

/* -r leaves out directories matching --exclude, matched without the '/'. */
bool fw_excluded(struct fw_ctx *c, const struct fw_dir *parent, const char *name)
{
	bool ex = excluded(c, parent, name);

	if (ex && c->o->filter.vcs)
		skip_add(c, parent, name);
	return ex;
}

/*
 * An ignore file changed: watch (quietly: what they hold is no change)
 * the skipped directories no longer ignored; forget those gone.
 */
void fw_retry_skipped(struct fw_ctx *c)
{
	struct fw_pending *list = c->skipped, *p, *n;
	struct stat st;
	uint64_t gen;
	int fd;

	if (!c->o->filter.vcs || (gen = fw_vcs_generation(c->o->filter.vcs)) == c->vcs_gen)
		return;
	c->vcs_gen = gen;
	c->skipped = NULL;
	for (p = list; p; p = n) {
		struct fw_dir *parent = fw_dirmap_find(&c->map, p->fsid, p->fh);

		n = p->next;
		fd = parent ? fw_dir_fd(&c->map, parent) : -1;
		if (fd >= 0 && !fstatat(fd, p->name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISDIR(st.st_mode)) {
			if (excluded(c, parent, p->name)) {
				p->next = c->skipped;	/* still ignored */
				c->skipped = p;
				continue;
			}
			fw_adopt(c, parent, p->name, NULL, false);
		}
		p->next = NULL;
		free_pending(p);
	}
}

/* Remember parent/name, to watch and scan once parent can be reached. */
static void watch_later(struct fw_ctx *c, struct fw_dir *parent, const char *name,
			const struct fw_want *want, bool report)
{
	struct fw_pending *p = new_pending(parent, name);
	size_t hb;

	if (want) {
		p->want = *want;
		if (want->fh) {
			hb = sizeof(struct file_handle) + want->fh->handle_bytes;
			if (!(p->want_fh = malloc(hb))) {
				fw_err("out of memory");
				exit(1);
			}
			memcpy(p->want_fh, want->fh, hb);
			p->want.fh = p->want_fh;
		}
	}
	p->report = report;
	p->next = c->pending;
	c->pending = p;
}

/*
 * Setup lists a directory only to find its subdirectories: where st_nlink
 * counts them, one with none need not be listed.  Read after the mark, so
 * one made since is reported by its event.
 */
static bool no_subdirs(struct fw_ctx *c, struct fw_dir *d)
{
	struct stat st;
	int fd;

	if (!d->simple_fs || (fd = fw_dir_fd(&c->map, d)) < 0)
		return false;
	return !fstat(fd, &st) && st.st_nlink == 2;
}

/*
 * Watch parent/name as fw_adopt() does; the directory, if it is now to be
 * listed, else NULL.  The caller lists it: a walk, not a recursion.
 */
static struct fw_dir *adopt_one(struct fw_ctx *c, struct fw_dir *parent, const char *name,
				const struct fw_want *want, bool report)
{
	struct fw_dir *d;

	if (!c->o->recursive || fw_excluded(c, parent, name))
		return NULL;
	d = fw_watch_dir(c, parent, name, want);
	if (d && !report)
		d->quiet = true;
	if (d && (report || c->o->rescan || !no_subdirs(c, d)))
		return d;
	if (!d && errno == ESTALE)
		watch_later(c, parent, name, want, report);
	return NULL;
}

void fw_adopt(struct fw_ctx *c, struct fw_dir *parent, const char *name,
	      const struct fw_want *want, bool report)
{
	struct fw_dir *d = adopt_one(c, parent, name, want, report);

	if (d)
		fw_scan(c, d, report);
}

/* A rename read later fixes the name chain: try the waiting ones again. */
void fw_retry_pending(struct fw_ctx *c)
{
	struct fw_pending *list = c->pending, *p, *n;

	c->pending = NULL;
	for (p = list; p; p = n) {
		struct fw_dir *parent = fw_dirmap_find(&c->map, p->fsid, p->fh);

		n = p->next;
		if (parent && fw_dir_fd(&c->map, parent) >= 0) {
			fw_adopt(c, parent, p->name,
				 p->want.fh || p->want.ino ? &p->want : NULL, p->report);
		} else if (parent && ++p->tries < 1000) {
			p->next = c->pending;	/* still behind: keep it */
			c->pending = p;
			continue;
		} else if (parent) {
			fw_warn(c, "cannot reach %s to watch %s in it; its entries are not watched",
				parent->path, p->name);
		}
		free(p->fh);
		free(p->want_fh);
		free(p);
	}
}

static bool is_dir_entry(int dfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	return !fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
	       S_ISDIR(st.st_mode);
}

/*
 * A readable descriptor for listing d.  Through "." needs search
 * permission; the /proc magic link needs only read, which a directory
 * that can be listed but not searched has.
 */
static int open_listing(struct fw_ctx *c, struct fw_dir *d)
{
	int dfd = fw_dir_fd(&c->map, d), fd;
	char link[64];

	if (dfd < 0)
		return -1;
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dfd);
		fd = open(link, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			errno = EACCES;
	}
	return fd;
}

/*
 * A directory being walked: the subdirectories its listing found, and
 * those of them already adopted that wait to be listed in turn.  A walk
 * keeps one frame a level on the heap, so no depth exhausts the stack
 * (setup recursed adopt_batch -> fw_scan, ~11 KB a level, and died some
 * 800 levels down).  Its order is the recursion's: a batch is marked,
 * then each of its directories walked before the next batch is marked.
 */
struct walk_frame {
	struct fw_dir *d;
	struct namelist subs;
	size_t next;				/* subs[next] is the first not adopted */
	struct fw_dir *todo[FW_PREP_BATCH];	/* adopted, to be listed, in order */
	size_t ntodo, itodo;
};

struct walk {
	struct fw_ctx *c;
	bool report;				/* report what is found, as SCAN */
	struct walk_frame *f;
	size_t n, cap;
};

static void todo_add(struct walk_frame *t, struct fw_dir *d)
{
	if (d)
		t->todo[t->ntodo++] = d;
}

/*
 * Setup's adoption of up to FW_PREP_BATCH subdirectories of t->d: their
 * system calls run on two threads (prep.c), then each is entered in the map
 * here and left to list unless st_nlink says it has no subdirectory.  A
 * child whose calls failed takes the one-at-a-time path, which says why.
 */
static void adopt_batch(struct fw_ctx *c, struct walk_frame *t, size_t n)
{
	struct fw_dir *d = t->d;
	char **names = t->subs.v + t->next;
	struct fw_prep v[FW_PREP_BATCH];
	struct fw_prep_parent par = {
		.pfd = fw_dir_fd(&c->map, d), .fan = c->fan,
		.flags = FW_MARK_ADD | FW_MARK_ONLYDIR, .mask = c->markmask,
		.fsid = { d->fsid[0], d->fsid[1] }, .simple_fs = d->simple_fs, .mnt = d->mnt_id,
		.keep_leaf_fd = c->o->rescan,
	};
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (par.pfd < 0)	/* says why, or waits */
			todo_add(t, adopt_one(c, d, names[i], NULL, false));
		else if (!fw_excluded(c, d, names[i]))
			v[k++].name = names[i];
	}
	fw_prep_run(c->prep, &par, v, k);
	for (i = 0; i < k; i++) {
		struct fw_dir *nd;

		if (v[i].err) {
			todo_add(t, adopt_one(c, d, v[i].name, NULL, false));
			continue;
		}
		if ((nd = fw_dirmap_find(&c->map, v[i].fsid, &v[i].fh))) {
			if (v[i].fd >= 0)
				close(v[i].fd);	/* moved here, or a bind mount */
			mount_again(c, nd, d, v[i].name, v[i].mnt);
			found_again(c, nd, d, v[i].name);
			continue;
		}
		nd = fw_dir_new(v[i].fsid, &v[i].fh, v[i].fd, d, v[i].name, v[i].name);
		if (!nd || fw_dirmap_insert(&c->map, nd)) {
			fw_err("out of memory");
			exit(1);
		}
		nd->mnt_id = v[i].mnt;
		nd->simple_fs = v[i].simple_fs;
		nd->quiet = true;
		if (!v[i].leaf || c->o->rescan)
			todo_add(t, nd);
	}
}

/*
 * List d: its entries reported as created if report, its subdirectories
 * (with -r) into subs.  -1 when it cannot be listed (said why).
 */
static int list_dir(struct fw_ctx *c, struct fw_dir *d, bool report, struct namelist *subs)
{
	int fd = open_listing(c, d);
	struct dirent *de;
	DIR *dir;

	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (errno != ESTALE && errno != ENOENT)
			fw_warn(c, "cannot list %s: %s; its entries are not watched",
				d->path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (c->o->rescan && !d->snap)
		d->snap = fw_snap_new();
	while ((de = readdir(dir))) {
		struct stat st;
		bool isdir;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (d->snap && !fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			fw_snap_set(d->snap, de->d_name, &st);
			isdir = S_ISDIR(st.st_mode);
		} else {
			isdir = is_dir_entry(fd, de);
		}
		if (report)
			fw_emit1(c, FW_CREATE, d, de->d_name, isdir, true, false);
		if (isdir && c->o->recursive)
			namelist_add(subs, de->d_name, de->d_ino);
	}
	closedir(dir);
	return 0;
}

/* List d into a new frame on top of the walk; none if it cannot be. */
static void walk_push(struct walk *w, struct fw_dir *d)
{
	struct walk_frame *t;

	w->f = frames_grow(w->f, w->n, &w->cap, sizeof(*w->f));
	t = &w->f[w->n];
	memset(t, 0, sizeof(*t));
	t->d = d;
	if (list_dir(w->c, d, w->report, &t->subs))
		namelist_free(&t->subs);
	else
		w->n++;
}

/*
 * Adopt the next of t's subdirectories: mark first, then list, so what
 * appears in between is seen either way.  A reported directory is adopted
 * only if the name still leads to the one listed, or its contents would
 * be credited to the name; one at a time, each says why it failed.
 */
static void walk_adopt(struct walk *w, struct walk_frame *t)
{
	struct fw_ctx *c = w->c;
	size_t batch, left = t->subs.n - t->next;

	t->ntodo = t->itodo = 0;
	if (w->report) {
		struct fw_want want = { .ino = t->subs.ino[t->next] };

		todo_add(t, adopt_one(c, t->d, t->subs.v[t->next], &want, true));
		t->next++;
		return;
	}
	/* a batch holds its fds beside the cache's: at most as many */
	batch = c->map.maxfd < FW_PREP_BATCH ? c->map.maxfd : FW_PREP_BATCH;
	if (left > batch)
		left = batch;
	adopt_batch(c, t, left);
	t->next += left;
}

/*
 * top, found by setup's walk and so not reported (the starting state), has
 * a CREATE or MOVED_TO read since: it came during setup, and a consumer
 * knows nothing of what it holds.  Report its subtree's entries as SCAN,
 * parents first, iteratively (any depth).
 */
void fw_report_quiet(struct fw_ctx *c, struct fw_dir *top)
{
	struct fw_dir *d = top;

	while (d) {
		struct namelist subs = { 0 };

		if (d->quiet) {
			/*
			 * Moved by a rename not read yet (its name leads
			 * elsewhere): reported when that rename is read.
			 */
			d->quiet = false;
			d->report_due = list_dir(c, d, true, &subs) < 0 &&
					(errno == ESTALE || errno == ENOENT);
			d->quiet = d->report_due;
			namelist_free(&subs);
		}
		if (d->child) {
			d = d->child;
			continue;
		}
		while (d != top && !d->next)
			d = d->parent;
		d = d == top ? NULL : d->next;
	}
}

void fw_scan(struct fw_ctx *c, struct fw_dir *d, bool report)
{
	struct walk w = { .c = c, .report = report };

	walk_push(&w, d);
	while (w.n) {
		struct walk_frame *t = &w.f[w.n - 1];

		if (t->itodo < t->ntodo)
			walk_push(&w, t->todo[t->itodo++]);	/* may move t */
		else if (t->next < t->subs.n)
			walk_adopt(&w, t);
		else
			namelist_free(&w.f[--w.n].subs);
	}
	free(w.f);
}

static int add_file(struct fw_ctx *c, const char *path)
{
	int fd = open(path, O_PATH | O_CLOEXEC | (c->o->no_deref ? O_NOFOLLOW : 0));

	if (fd < 0) {
		fw_err("cannot watch '%s': %s", path, strerror(errno));
		return -1;
	}
	if (!mark_fd(c, NULL, path, fd, true, NULL)) {
		close(fd);
		if (errno == EEXIST)
			return 0;
		fw_setup_done(c);
		return -1;
	}
	return 0;
}

int fw_add_root(struct fw_ctx *c, const char *path)
{
	struct stat st;
	struct fw_dir *d;

	if ((c->o->no_deref ? lstat : stat)(path, &st)) {
		fw_err("cannot watch '%s': %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return add_file(c, path);	/* an inode mark on the file itself */
	d = fw_watch_dir(c, NULL, path, NULL);
	if (!d && errno == EEXIST)
		return 0;	/* given twice, or inside another -r root */
	if (!d) {
		fw_setup_done(c);	/* the mark limit, if that was it */
		return -1;
	}
	if (c->o->recursive && !c->prep)
		c->prep = fw_prepper_new();	/* until fw_setup_done() */
	/* --rescan-on-overflow needs the first snapshot even without -r. */
	if (c->o->recursive || c->o->rescan)
		fw_scan(c, d, false);
	return 0;
}

void fw_setup_done(struct fw_ctx *c)
{
	fw_prepper_free(c->prep);
	c->prep = NULL;
	if (!c->unwatched)
		return;
	long fs = fw_sysctl("max_user_marks");
	/* In a user namespace its own, possibly lower, limit applies too. */
	long ns = fw_read_long("/proc/sys/user/max_fanotify_marks");
	char nsmsg[96] = "";

	if (ns >= 0 && ns != fs)
		snprintf(nsmsg, sizeof(nsmsg), "; this user namespace's user.max_fanotify_marks = %ld", ns);
	fw_warn(c, "reached the fanotify mark limit (fs.fanotify.max_user_marks = %ld, per user%s): %u director%s left unwatched; raise it with 'sysctl fs.fanotify.max_user_marks=N'",
		fs, nsmsg, c->unwatched, c->unwatched == 1 ? "y" : "ies");
	c->unwatched = 0;
}

struct sweep_arg {
	struct fw_ctx *c;
	struct fw_dir *d;
};

static void report_gone(const struct fw_snap_ent *e, void *arg)
{
	struct sweep_arg *a = arg;
	struct fw_dir *s = e->isdir ? fw_dir_child(a->d, e->name) : NULL;

	fw_emit1(a->c, FW_DELETE, a->d, e->name, e->isdir, true, false);
	if (s)
		fw_unwatch_tree(a->c, s);
}

/*
 * Compare one directory with its snapshot; report and fix what differs.
 * New subdirectories go to fresh, adopted once its subtree is done.
 * False if it cannot be listed: nothing below it is rescanned then.
 */
static bool rescan_dir(struct fw_ctx *c, struct fw_dir *d, struct namelist *fresh)
{
	int fd = open_listing(c, d);
	struct sweep_arg arg = { c, d };
	struct fw_dir *ch;
	struct dirent *de;
	DIR *dir;

	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while ((de = readdir(dir))) {
		struct stat st;
		bool isdir;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		isdir = S_ISDIR(st.st_mode);
		switch (fw_snap_check(d->snap, de->d_name, &st)) {
		case FW_SNAP_SAME:
			break;
		case FW_SNAP_MODIFIED:
			fw_emit1(c, FW_MODIFY, d, de->d_name, isdir, true, false);
			break;
		case FW_SNAP_REPLACED:
			fw_emit1(c, FW_DELETE, d, de->d_name, isdir, true, false);
			if ((ch = fw_dir_child(d, de->d_name)))
				fw_unwatch_tree(c, ch);
			/* fall through */
		case FW_SNAP_NEW:
			fw_emit1(c, FW_CREATE, d, de->d_name, isdir, true, false);
			if (isdir && c->o->recursive)
				namelist_add(fresh, de->d_name, st.st_ino);
			break;
		}
	}
	closedir(dir);
	fw_snap_sweep(d->snap, report_gone, &arg);
	return true;
}

static void adopt_fresh(struct fw_ctx *c, struct fw_dir *d, struct namelist *fresh)
{
	size_t i;

	for (i = 0; i < fresh->n; i++) {
		struct fw_want w = { .ino = fresh->ino[i] };

		if (!fw_dir_child(d, fresh->v[i]))
			fw_adopt(c, d, fresh->v[i], &w, true);
	}
	namelist_free(fresh);
}

/* A directory being rescanned: the next child to visit, what it found new. */
struct rescan_frame {
	struct fw_dir *d, *next;
	struct namelist fresh;
};

struct rescan_walk {
	struct rescan_frame *f;
	size_t n, cap;
};

static void rescan_push(struct fw_ctx *c, struct rescan_walk *w, struct fw_dir *d)
{
	struct rescan_frame *t;

	w->f = frames_grow(w->f, w->n, &w->cap, sizeof(*w->f));
	t = &w->f[w->n++];
	memset(t, 0, sizeof(*t));
	t->d = d;
	t->next = rescan_dir(c, d, &t->fresh) ? d->child : NULL;
}

/*
 * Rescan a tree, each directory before its children, its new
 * subdirectories adopted after them; a frame a level on the heap, as a
 * tree may be deeper than any stack.  Rescanning a child changes only its
 * own subtree, so the sibling to visit next stays.
 */
static void rescan_tree(struct fw_ctx *c, struct fw_dir *root)
{
	struct rescan_walk w = { 0 };

	rescan_push(c, &w, root);
	while (w.n) {
		struct rescan_frame *t = &w.f[w.n - 1];
		struct fw_dir *ch = t->next;

		while (ch && !ch->snap)
			ch = ch->next;
		if (ch) {
			t->next = ch->next;
			rescan_push(c, &w, ch);		/* may move t */
		} else {
			adopt_fresh(c, t->d, &t->fresh);
			w.n--;
		}
	}
	free(w.f);
}

void fw_rescan(struct fw_ctx *c)
{
	struct fw_dir **roots = NULL;
	size_t i, n = 0;

	for (i = 0; i < c->map.nbucket; i++) {
		struct fw_dir *d;

		for (d = c->map.bucket[i]; d; d = d->hnext) {
			if (d->parent || !d->snap)
				continue;
			roots = realloc(roots, (n + 1) * sizeof(*roots));
			if (!roots)
				return;
			roots[n++] = d;
		}
	}
	for (i = 0; i < n; i++)
		rescan_tree(c, roots[i]);
	free(roots);
}

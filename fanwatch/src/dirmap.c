// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dirmap.h"
#include "snap.h"

static uint64_t hash_key(const int32_t fsid[2], int type, unsigned int n,
			 const unsigned char *h)
{
	uint64_t x = 1469598103934665603ull;	/* FNV-1a */
	unsigned int i;

	x = (x ^ (uint32_t)fsid[0]) * 1099511628211ull;
	x = (x ^ (uint32_t)fsid[1]) * 1099511628211ull;
	x = (x ^ (uint32_t)type) * 1099511628211ull;
	for (i = 0; i < n; i++)
		x = (x ^ h[i]) * 1099511628211ull;
	return x ^ (x >> 29);
}

static size_t slot(const struct fw_dirmap *m, const struct fw_dir *d)
{
	return hash_key(d->fsid, d->handle_type, d->handle_bytes, d->handle) &
	       (m->nbucket - 1);
}

/*
 * The fd cache bound: FANWATCH_FD_CACHE if set (tests make it tiny), else
 * a quarter of the soft RLIMIT_NOFILE, within 16..4096, so the user's
 * ulimit -n is never what limits the tree.
 */
static size_t fd_bound(void)
{
	const char *env = getenv("FANWATCH_FD_CACHE");
	long n = sysconf(_SC_OPEN_MAX) / 4;

	if (env && *env)
		n = strtol(env, NULL, 10);
	if (n < 2)
		n = 2;
	if (n > 4096 && !(env && *env))
		n = 4096;
	return (size_t)n;
}

int fw_dirmap_init(struct fw_dirmap *m)
{
	memset(m, 0, sizeof(*m));
	m->nbucket = 1024;
	m->maxfd = fd_bound();
	m->bucket = calloc(m->nbucket, sizeof(*m->bucket));
	return m->bucket ? 0 : -ENOMEM;
}

static void lru_unlink(struct fw_dirmap *m, struct fw_dir *d)
{
	if (d->lru_prev)
		d->lru_prev->lru_next = d->lru_next;
	else if (m->lru_head == d)
		m->lru_head = d->lru_next;
	if (d->lru_next)
		d->lru_next->lru_prev = d->lru_prev;
	else if (m->lru_tail == d)
		m->lru_tail = d->lru_prev;
	d->lru_prev = d->lru_next = NULL;
}

static void lru_push(struct fw_dirmap *m, struct fw_dir *d)
{
	d->lru_prev = NULL;
	d->lru_next = m->lru_head;
	if (m->lru_head)
		m->lru_head->lru_prev = d;
	m->lru_head = d;
	if (!m->lru_tail)
		m->lru_tail = d;
}

void fw_dir_drop_fd(struct fw_dirmap *m, struct fw_dir *d)
{
	if (d->fd < 0 || d->pinned)
		return;
	lru_unlink(m, d);
	close(d->fd);
	d->fd = -1;
	m->nfd--;
}

/* Put fd in d's cache slot, evicting the oldest entry beyond the bound. */
static void cache_fd(struct fw_dirmap *m, struct fw_dir *d, int fd)
{
	d->fd = fd;
	if (fd < 0 || d->pinned)
		return;
	lru_push(m, d);
	m->nfd++;
	while (m->nfd > m->maxfd && m->lru_tail != d)
		fw_dir_drop_fd(m, m->lru_tail);
}

static void free_dir(struct fw_dirmap *m, struct fw_dir *d)
{
	if (m)
		fw_dir_drop_fd(m, d);
	if (d->fd >= 0)
		close(d->fd);
	fw_snap_free(d->snap);
	free(d->met);
	free(d->name);
	free(d->path);
	free(d);
}

void fw_dirmap_free(struct fw_dirmap *m)
{
	size_t i;

	for (i = 0; i < m->nbucket; i++) {
		struct fw_dir *d = m->bucket[i], *n;

		for (; d; d = n) {
			n = d->hnext;
			free_dir(NULL, d);
		}
	}
	free(m->bucket);
	m->bucket = NULL;
	m->count = 0;
	m->nfd = 0;
	m->lru_head = m->lru_tail = NULL;
}

/* path = parent's path + name + "/", or rootpath with a '/' ensured. */
static int set_path(struct fw_dir *d, const char *rootpath)
{
	const char *pre = d->parent ? d->parent->path : "";
	const char *leaf = d->parent ? d->name : rootpath;
	size_t plen = strlen(pre), llen = strlen(leaf);
	bool slash = !(llen && leaf[llen - 1] == '/');
	char *p = malloc(plen + llen + 2);

	if (!p)
		return -ENOMEM;
	memcpy(p, pre, plen);
	memcpy(p + plen, leaf, llen);
	if (slash)
		p[plen + llen++] = '/';
	p[plen + llen] = '\0';
	free(d->path);
	d->path = p;
	d->pathlen = plen + llen;
	return 0;
}

static void link_child(struct fw_dir *parent, struct fw_dir *d)
{
	d->parent = parent;
	d->prev = NULL;
	d->next = parent ? parent->child : NULL;
	if (d->next)
		d->next->prev = d;
	if (parent)
		parent->child = d;
}

static void unlink_child(struct fw_dir *d)
{
	if (d->prev)
		d->prev->next = d->next;
	else if (d->parent)
		d->parent->child = d->next;
	if (d->next)
		d->next->prev = d->prev;
	d->prev = d->next = NULL;
}

struct fw_dir *fw_dir_new(const int32_t fsid[2], const struct file_handle *fh,
			  int fd, struct fw_dir *parent, const char *name,
			  const char *rootpath)
{
	struct fw_dir *d = calloc(1, sizeof(*d) + fh->handle_bytes);

	if (!d)
		return NULL;
	d->fd = fd;
	d->fsid[0] = fsid[0];
	d->fsid[1] = fsid[1];
	d->handle_type = fh->handle_type;
	d->handle_bytes = fh->handle_bytes;
	memcpy(d->handle, fh->f_handle, fh->handle_bytes);
	d->parent = parent;
	if ((parent && !(d->name = strdup(name))) || set_path(d, rootpath)) {
		d->fd = -1;	/* the caller still owns fd on failure */
		free_dir(NULL, d);
		return NULL;
	}
	return d;
}

struct fw_dir *fw_dirmap_find(const struct fw_dirmap *m, const int32_t fsid[2],
			      const struct file_handle *fh)
{
	uint64_t h = hash_key(fsid, fh->handle_type, fh->handle_bytes, fh->f_handle);
	struct fw_dir *d = m->bucket[h & (m->nbucket - 1)];

	for (; d; d = d->hnext)
		if (d->handle_bytes == fh->handle_bytes &&
		    d->handle_type == fh->handle_type &&
		    d->fsid[0] == fsid[0] && d->fsid[1] == fsid[1] &&
		    !memcmp(d->handle, fh->f_handle, fh->handle_bytes))
			return d;
	return NULL;
}

/*
 * Twice the buckets.  Only the table changes: the fd cache (its LRU list,
 * count and bound) stays as it is; resetting it with the table once left
 * a bound of 0 and cached fds outside the list, so every directory
 * inserted after the first growth evicted its own parent.
 */
static int grow(struct fw_dirmap *m)
{
	struct fw_dirmap n = { .nbucket = m->nbucket * 2 };
	size_t i;

	n.bucket = calloc(n.nbucket, sizeof(*n.bucket));
	if (!n.bucket)
		return -ENOMEM;
	for (i = 0; i < m->nbucket; i++) {
		struct fw_dir *d = m->bucket[i], *next;

		for (; d; d = next) {
			size_t s = slot(&n, d);

			next = d->hnext;
			d->hnext = n.bucket[s];
			n.bucket[s] = d;
		}
	}
	free(m->bucket);
	m->bucket = n.bucket;
	m->nbucket = n.nbucket;
	return 0;
}

int fw_dirmap_insert(struct fw_dirmap *m, struct fw_dir *d)
{
	size_t s;

	if (m->count >= m->nbucket && grow(m))
		return -ENOMEM;
	s = slot(m, d);
	d->hnext = m->bucket[s];
	m->bucket[s] = d;
	m->count++;
	if (d->parent)
		link_child(d->parent, d);
	d->pinned = !d->parent;
	cache_fd(m, d, d->fd);
	return 0;
}

bool fw_dir_is(const struct fw_dir *d, int fd)
{
	struct {
		struct file_handle fh;
		unsigned char b[128];	/* MAX_HANDLE_SZ */
	} h = { .fh.handle_bytes = sizeof(h.b) };
	int mnt;

	return !name_to_handle_at(fd, "", &h.fh, &mnt, AT_EMPTY_PATH) &&
	       h.fh.handle_bytes == d->handle_bytes &&
	       h.fh.handle_type == d->handle_type &&
	       !memcmp(h.b, d->handle, d->handle_bytes);
}

/* Open d under its parent's descriptor, which the caller has, and cache it. */
static int open_under_parent(struct fw_dirmap *m, struct fw_dir *d)
{
	int fd = openat(d->parent->fd, d->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		/* a file or symlink has the name now: d moved (rename unread) */
		if (errno == ENOTDIR || errno == ELOOP)
			errno = ESTALE;
		return -1;
	}
	/* The name may lead elsewhere now: only the handle says it is d. */
	if (!fw_dir_is(d, fd)) {
		close(fd);
		errno = ESTALE;
		return -1;
	}
	cache_fd(m, d, fd);
	return fd;
}

/*
 * Down from the nearest ancestor with a descriptor, a level at a time,
 * the chain gathered on the heap: a deep tree with an evicted cache must
 * not recurse a frame a level (a chain may be longer than PATH_MAX).
 * The cache evicts the oldest, never the one it takes, and keeps at least
 * two: a level's parent, cached just before it, is still open for it.
 */
int fw_dir_fd(struct fw_dirmap *m, struct fw_dir *d)
{
	struct fw_dir *a, **chain;
	size_t n = 0, i;
	int fd = -1;

	for (a = d; a && a->fd < 0; a = a->parent)
		n++;
	if (!a) {
		errno = EBADF;	/* a root without its descriptor */
		return -1;
	}
	if (!a->pinned && m->lru_head != a) {	/* the newest, as it is used */
		lru_unlink(m, a);
		lru_push(m, a);
	}
	if (!n)
		return d->fd;
	if (n == 1)
		return open_under_parent(m, d);
	chain = malloc(n * sizeof(*chain));
	if (!chain) {
		errno = ENOMEM;
		return -1;
	}
	for (a = d, i = n; i > 0; a = a->parent)
		chain[--i] = a;
	for (i = 0; i < n; i++)
		if ((fd = open_under_parent(m, chain[i])) < 0)
			break;
	free(chain);
	return fd;
}

static void unhash(struct fw_dirmap *m, struct fw_dir *d)
{
	struct fw_dir **pp = &m->bucket[slot(m, d)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == d) {
			*pp = d->hnext;
			m->count--;
			return;
		}
	}
}

/*
 * Children first, as a recursion would, but by the tree's own links: the
 * first leaf below, then back to its parent, whose next child is now its
 * first.  A subtree of any depth takes no stack.
 */
void fw_dirmap_remove_tree(struct fw_dirmap *m, struct fw_dir *d,
			   void (*fn)(struct fw_dir *d, void *arg), void *arg)
{
	struct fw_dir *x = d, *up;
	bool last;

	do {
		while (x->child)
			x = x->child;
		up = x->parent;
		last = x == d;
		if (fn)
			fn(x, arg);
		unlink_child(x);
		unhash(m, x);
		free_dir(m, x);
		x = up;
	} while (!last);
}

struct fw_dir *fw_dir_child(const struct fw_dir *parent, const char *name)
{
	struct fw_dir *c;

	for (c = parent->child; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

/* New paths for d and its subtree, parents first, walked by the tree's links. */
static int relabel(struct fw_dir *d)
{
	struct fw_dir *x = d;
	int ret;

	for (;;) {
		ret = set_path(x, NULL);
		if (ret)
			return ret;
		if (x->child) {
			x = x->child;
			continue;
		}
		while (x != d && !x->next)
			x = x->parent;
		if (x == d)
			return 0;
		x = x->next;
	}
}

int fw_dir_rename_root(struct fw_dir *d, const char *path)
{
	struct fw_dir *c;
	int ret = set_path(d, path);

	for (c = d->child; c && !ret; c = c->next)
		ret = relabel(c);
	return ret;
}

static bool met_is(const struct fw_met *m, const struct fw_dir *p, const char *name)
{
	return !strcmp(m->name, name) && m->fsid[0] == p->fsid[0] &&
	       m->fsid[1] == p->fsid[1] && m->fh.handle_bytes == p->handle_bytes &&
	       m->fh.handle_type == p->handle_type &&
	       !memcmp(m->data, p->handle, p->handle_bytes);
}

int fw_dir_reparent(struct fw_dir *d, struct fw_dir *newparent,
		    const char *newname)
{
	char *name = strdup(newname);

	if (!name || !d->parent) {
		free(name);
		return -EINVAL;
	}
	unlink_child(d);
	link_child(newparent, d);
	/*
	 * Where a scan met it was seen after every event queued: a rename
	 * read now may take it to a place on the way there (mv x y; mv y
	 * b/m read after b's scan met it at b/m), which leaves it news.
	 */
	if (d->met && met_is(d->met, newparent, newname)) {
		free(d->met);
		d->met = NULL;
	}
	free(d->name);
	d->name = name;
	return relabel(d);
}

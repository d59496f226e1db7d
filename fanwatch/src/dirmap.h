/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Directory handle map.  An unprivileged listener gets no event fd and may
 * not call open_by_handle_at(), so every watched directory is remembered by
 * the handle the kernel will report for it, and that handle is its only
 * identity.  Directories form a tree (parent, name in parent, children), so
 * a rename relabels a whole subtree and a directory leaving the tree takes
 * its subtree along.
 *
 * Descriptors: a root keeps its O_PATH fd; any other directory gets one on
 * demand (fw_dir_fd) by opening its name under its parent's fd, checked
 * against its handle, and keeps it in a bounded LRU cache, so a tree of any
 * size needs a bounded number of descriptors.
 */
#ifndef FW_DIRMAP_H
#define FW_DIRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>

/*
 * A scan met a watched directory at another place (its rename not read
 * yet): the new parent by handle (it may be gone by then), and the name.
 */
struct fw_met {
	int32_t fsid[2];
	struct file_handle fh;
	unsigned char data[128];	/* MAX_HANDLE_SZ */
	char name[];
};

struct fw_dir {
	struct fw_dir *hnext;			/* hash chain */
	struct fw_dir *parent;			/* NULL for a root */
	struct fw_dir *child, *prev, *next;	/* children; siblings */
	char *name;				/* name in parent; NULL for a root */
	char *path;				/* printable, ends in '/' */
	size_t pathlen;
	struct fw_dir *lru_prev, *lru_next;	/* fd cache, newest first */
	int fd;					/* O_PATH, or -1 if not cached */
	bool pinned;				/* a root: fd kept, never evicted */
	bool is_file;				/* a file given as target */
	bool leaving;				/* MOVED_FROM seen, no MOVED_TO yet */
	bool quiet;				/* adopted by setup's walk, unreported */
	bool report_due;			/* quiet, due a report its moving hid */
	struct fw_met *met;			/* where a scan met it since, or NULL */
	struct fw_snap *snap;			/* --rescan-on-overflow state, or NULL */
	int mnt_id;				/* from name_to_handle_at */
	bool simple_fs;				/* ext2/3/4, xfs or tmpfs: see walk.c */
	bool mount_said;			/* a bind mount showing it was named */
	int32_t fsid[2];
	int handle_type;
	unsigned int handle_bytes;
	unsigned char handle[];
};

struct fw_dirmap {
	struct fw_dir **bucket;
	size_t nbucket;
	size_t count;
	struct fw_dir *lru_head, *lru_tail;
	size_t nfd, maxfd;			/* cached fds, and the bound */
};

int fw_dirmap_init(struct fw_dirmap *m);
void fw_dirmap_free(struct fw_dirmap *m);

/* A new entry, not yet in the map; the handle is copied; fd (or -1) is
 * owned once inserted: a root's is kept, others' go to the cache. */
struct fw_dir *fw_dir_new(const int32_t fsid[2], const struct file_handle *fh,
			  int fd, struct fw_dir *parent, const char *name,
			  const char *rootpath);
struct fw_dir *fw_dirmap_find(const struct fw_dirmap *m, const int32_t fsid[2],
			      const struct file_handle *fh);
int fw_dirmap_insert(struct fw_dirmap *m, struct fw_dir *d);
/* Unlink d and its whole subtree from map and tree; calls fn on each first. */
void fw_dirmap_remove_tree(struct fw_dirmap *m, struct fw_dir *d,
			   void (*fn)(struct fw_dir *d, void *arg), void *arg);

/*
 * An O_PATH descriptor for d, borrowed: valid until the next call that may
 * evict (fw_dir_fd, fw_dirmap_insert).  -1 with errno ESTALE when the name
 * chain no longer leads to d (a rename not read yet), or the openat error.
 */
int fw_dir_fd(struct fw_dirmap *m, struct fw_dir *d);
/* Close d's cached fd, if any (it pins the dentry: DELETE_SELF waits). */
void fw_dir_drop_fd(struct fw_dirmap *m, struct fw_dir *d);
/* Does fd refer to the object with d's handle? */
bool fw_dir_is(const struct fw_dir *d, int fd);

struct fw_dir *fw_dir_child(const struct fw_dir *parent, const char *name);
/* A root's new path, relabeling its subtree. */
int fw_dir_rename_root(struct fw_dir *d, const char *path);
/* Move d under newparent as newname, relabeling its subtree. */
int fw_dir_reparent(struct fw_dir *d, struct fw_dir *newparent,
		    const char *newname);

#endif

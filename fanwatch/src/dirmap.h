/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Directory handle -> O_PATH descriptor map.  An unprivileged listener
 * gets no event fd and may not call open_by_handle_at(), so every watched
 * directory is remembered by the handle the kernel will report for it,
 * together with an O_PATH fd (for *at() calls) and its printable path.
 * Directories also form a tree (parent, children) so a rename relabels a
 * whole subtree and a directory leaving the tree takes its subtree along.
 */
#ifndef FW_DIRMAP_H
#define FW_DIRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>

struct fw_dir {
	struct fw_dir *hnext;			/* hash chain */
	struct fw_dir *parent;			/* NULL for a root */
	struct fw_dir *child, *prev, *next;	/* children; siblings */
	char *name;				/* name in parent; NULL for a root */
	char *path;				/* printable, ends in '/' */
	size_t pathlen;
	int fd;					/* O_PATH */
	bool moved;				/* relabeled by a rename, MOVE_SELF due */
	struct fw_snap *snap;			/* --rescan-on-overflow state, or NULL */
	int32_t fsid[2];
	int handle_type;
	unsigned int handle_bytes;
	unsigned char handle[];
};

struct fw_dirmap {
	struct fw_dir **bucket;
	size_t nbucket;
	size_t count;
};

int fw_dirmap_init(struct fw_dirmap *m);
void fw_dirmap_free(struct fw_dirmap *m);

/* A new entry, not yet in the map; the handle is copied, fd is owned. */
struct fw_dir *fw_dir_new(const int32_t fsid[2], const struct file_handle *fh,
			  int fd, struct fw_dir *parent, const char *name,
			  const char *rootpath);
struct fw_dir *fw_dirmap_find(const struct fw_dirmap *m, const int32_t fsid[2],
			      const struct file_handle *fh);
int fw_dirmap_insert(struct fw_dirmap *m, struct fw_dir *d);
/* Unlink d and its whole subtree from map and tree; calls fn on each first. */
void fw_dirmap_remove_tree(struct fw_dirmap *m, struct fw_dir *d,
			   void (*fn)(struct fw_dir *d, void *arg), void *arg);

struct fw_dir *fw_dir_child(const struct fw_dir *parent, const char *name);
/* A root's new path, relabeling its subtree. */
int fw_dir_rename_root(struct fw_dir *d, const char *path);
/* Move d under newparent as newname, relabeling its subtree. */
int fw_dir_reparent(struct fw_dir *d, struct fw_dir *newparent,
		    const char *newname);

#endif

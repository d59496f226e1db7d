/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Setup's system calls for a batch of subdirectories, on two threads: open,
 * handle, mark and link count of each child are independent of one another
 * and of the directory map, so a helper thread takes half of them while the
 * caller takes the other half. The map itself is only ever touched by the
 * caller, after the batch (walk.c).
 */
#ifndef FW_PREP_H
#define FW_PREP_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FW_PREP_BATCH	64	/* children in flight: fds held beyond the cache */

/* What every child of one batch shares: its parent and the mark. */
struct fw_prep_parent {
	int pfd;			/* the parent's O_PATH fd */
	int fan;
	unsigned int flags;		/* fanotify_mark flags */
	uint64_t mask;
	int32_t fsid[2];		/* the parent's, reused on the same simple mount */
	bool simple_fs;
	int mnt;
	bool keep_leaf_fd;		/* else a leaf's fd is closed here: nothing lists it */
};

/* One child: in name, out the rest. */
struct fw_prep {
	const char *name;
	int fd;				/* O_PATH, marked; -1 when err or a closed leaf's */
	int err;			/* errno of the step that failed, else 0 */
	int mnt;
	int32_t fsid[2];
	bool simple_fs;
	bool leaf;			/* st_nlink says no subdirectory (simple fs) */
	struct file_handle fh;
	unsigned char fh_data[128];	/* MAX_HANDLE_SZ */
};

struct fw_prepper;

/* A helper thread when there is a second CPU, else NULL (then one thread does all). */
struct fw_prepper *fw_prepper_new(void);
void fw_prepper_free(struct fw_prepper *p);
/* Open, identify and mark every child of v (n at most FW_PREP_BATCH). */
void fw_prep_run(struct fw_prepper *p, const struct fw_prep_parent *par,
		 struct fw_prep *v, size_t n);
/* Filesystems whose st_nlink counts subdirectories and whose mount has one fsid. */
bool fw_is_simple_fs(long type);

#endif

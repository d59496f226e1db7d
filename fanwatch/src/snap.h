/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * --rescan-on-overflow: what each watched directory held when fanwatch
 * last looked (by a scan or after an event on the name), so a rescan after
 * lost events can say what changed rather than list everything.
 */
#ifndef FW_SNAP_H
#define FW_SNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct fw_snap_ent {
	struct fw_snap_ent *next;
	uint64_t ino;
	int64_t mtime_ns, size;
	bool isdir, seen;
	char name[];
};

struct fw_snap {
	struct fw_snap_ent **b;
	size_t nb, n;
};

enum fw_snap_change { FW_SNAP_SAME, FW_SNAP_NEW, FW_SNAP_MODIFIED, FW_SNAP_REPLACED };

struct fw_snap *fw_snap_new(void);
void fw_snap_free(struct fw_snap *s);
/* Record name's state (st) or, with st NULL, its absence. */
void fw_snap_set(struct fw_snap *s, const char *name, const struct stat *st);
/* Record that name exists as far as the reader was told, state unknown. */
void fw_snap_set_unknown(struct fw_snap *s, const char *name, bool isdir);
/* Compare name's state on disk with the record, update it and mark it seen. */
enum fw_snap_change fw_snap_check(struct fw_snap *s, const char *name,
				  const struct stat *st);
/* Call fn for each record not seen since the last sweep, drop them, reset. */
void fw_snap_sweep(struct fw_snap *s,
		   void (*fn)(const struct fw_snap_ent *e, void *arg), void *arg);

#endif

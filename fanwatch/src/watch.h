/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The watcher: fanotify group, directory map, event handling. */
#ifndef FW_WATCH_H
#define FW_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "dirmap.h"
#include "filter.h"
#include "format.h"
#include "fw-uapi.h"

struct fw_opts {
	bool monitor, recursive, no_self, rescan;
	bool unpaired;			/* renames as MOVED_FROM + MOVED_TO lines */
	int quiet;			/* -q once: no banners; twice: no warnings */
	uint32_t events;		/* what the user wants printed */
	int timeout;			/* -t seconds, 0 = none */
	struct fw_filter filter;
	struct fw_fmt fmt;
	FILE *out;
};

struct fw_ctx {
	struct fw_opts *o;
	int fan;
	bool have_rename;		/* FAN_RENAME + FAN_REPORT_TARGET_FID (5.17) */
	uint64_t markmask;
	struct fw_dirmap map;
	pid_t pid;
	unsigned int unwatched;		/* directories left out by the mark limit */
	uint64_t printed;
	uint64_t overflows;
	bool done;			/* single-event mode got its event */
	bool want_time;
	char timestr[128];
	char isotime[40];
};

/* Create the fanotify group; prints why and returns -1 on failure. */
int fw_open(struct fw_ctx *c, struct fw_opts *o);
void fw_close(struct fw_ctx *c);
/* Watch a root directory (recursively with -r); -1 when it cannot be. */
int fw_add_root(struct fw_ctx *c, const char *path);
/* After the roots: report the directories the mark limit left out. */
void fw_setup_done(struct fw_ctx *c);

/* Mark dir `name` under parent and put it in the map; NULL if not watched. */
struct fw_dir *fw_watch_dir(struct fw_ctx *c, struct fw_dir *parent,
			    const char *name);
/* The watched directory parent/name is now, if it is one. */
struct fw_dir *fw_dir_at(struct fw_ctx *c, struct fw_dir *parent, const char *name);
/* List d; report entries as created (found by scan) if report; recurse with -r. */
void fw_scan(struct fw_ctx *c, struct fw_dir *d, bool report);
void fw_unwatch_tree(struct fw_ctx *c, struct fw_dir *d);
/* Is parent/name a directory --exclude keeps -r from watching? */
bool fw_excluded(struct fw_ctx *c, const struct fw_dir *parent, const char *name);
/* After an overflow: compare the tree with the snapshots, report changes. */
void fw_rescan(struct fw_ctx *c);

/* Handle a buffer returned by read(); output is left in o->out's buffer. */
void fw_handle_buffer(struct fw_ctx *c, const void *buf, size_t len);
void fw_emit(struct fw_ctx *c, uint32_t bit, const struct fw_dir *d,
	     const char *name, bool isdir, bool scan, bool self,
	     const struct fw_dir *od, const char *oname);
void fw_stamp(struct fw_ctx *c);
/* The main loop: returns the exit status (0 event/ok, 1 error, 2 timeout). */
int fw_run(struct fw_ctx *c);

void fw_warn(const struct fw_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* /proc/sys/fs/fanotify/NAME, or -1 when it cannot be read. */
long fw_sysctl(const char *name);
void fw_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

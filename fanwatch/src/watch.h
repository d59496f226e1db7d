/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The watcher, in three rooms that call in one direction only:
 *   events.c  kernel events -> map updates and reports; the main loop
 *   walk.c    group setup, marking, scanning, rescans (calls report.c)
 *   report.c  filtering and handing reports to the sink; messages
 * The sink is a callback: printing (format.c) or --exec (exec.c).
 */
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
	bool unpaired;			/* kernel MOVED_FROM/MOVED_TO, not FAN_RENAME */
	bool paired_text;		/* text: one "MOVED_FROM,MOVED_TO new <- old" line */
	bool no_deref;			/* -P: a symlink target is watched itself */
	bool daemon;			/* -d: background, errors to syslog */
	bool relative;			/* --relative: JSON paths as given */
	int quiet;			/* -q: no banners; -qq: nothing but errors */
	uint32_t events;		/* what the user wants reported */
	int timeout;			/* -t seconds, 0 = none */
	struct fw_filter filter;
	struct fw_fmt fmt;
	FILE *out;
};

struct fw_ctx;

/* Where reports go: printing, or the --exec collector. */
typedef void (*fw_sink_fn)(struct fw_ctx *c, const struct fw_out *e);

/* Hooks the main loop calls for --exec: an extra fd and a deadline. */
struct fw_loop_hooks {
	int fd;					/* polled for input, or -1 */
	void (*on_fd)(struct fw_ctx *c);
	/* ms until the hook must run (-1: no deadline); called every turn */
	int64_t (*deadline)(struct fw_ctx *c, int64_t now);
	/* 0 to go on; else the loop ends with this status (-1: status 0) */
	int (*tick)(struct fw_ctx *c, int64_t now);
};

struct fw_pending;

struct fw_ctx {
	struct fw_opts *o;
	int fan;
	bool have_rename;		/* FAN_RENAME in use (5.17+, not --unpaired-renames) */
	bool have_target;		/* FAN_REPORT_TARGET_FID: dirent events name the child */
	uint64_t markmask;
	struct fw_dirmap map;
	pid_t pid;
	unsigned int unwatched;		/* directories left out by the mark limit */
	unsigned int nfiles;		/* file targets */
	uint32_t cookie;		/* the last rename's cookie */
	uint64_t printed;
	uint64_t overflows;
	bool done;			/* single-event mode got its event */
	bool want_time;
	char timestr[128];
	char isotime[40];
	struct fw_pending *pending;	/* directories to adopt once reachable */
	struct fw_pending *skipped;	/* directories git's ignore files leave out */
	uint64_t vcs_gen;		/* fw_vcs_generation() when last retried */
	struct fw_prepper *prep;	/* setup's second thread (prep.c), or NULL */
	fw_sink_fn sink;
	void *sink_arg;
	struct fw_loop_hooks hooks;
};

/* One thing to report; for a rename both sides (od, oname: the old one). */
struct fw_ev {
	uint32_t mask;
	const struct fw_dir *d;
	const char *name;
	const struct fw_dir *od;
	const char *oname;
	uint32_t cookie;
	bool isdir, scan, self;
};

/*
 * Which directory an adoption is about.  An event names it by handle
 * (FAN_REPORT_TARGET_FID); a scan by the inode number readdir gave.  The
 * name may lead to another directory by the time it is opened (a reused
 * temporary name): that one is left alone, since its own CREATE or
 * MOVED_TO is still queued (its parent is marked) and reports it then.
 * All zero: whatever the name leads to (pre-5.17 kernels, setup).
 */
struct fw_want {
	int32_t fsid[2];
	const struct file_handle *fh;	/* NULL: no handle to compare */
	ino_t ino;			/* 0: no inode number to compare */
};

/* report.c */
void fw_stamp(struct fw_ctx *c);
void fw_emit(struct fw_ctx *c, const struct fw_ev *e);
void fw_emit1(struct fw_ctx *c, uint32_t bit, const struct fw_dir *d,
	      const char *name, bool isdir, bool scan, bool self);
void fw_print_sink(struct fw_ctx *c, const struct fw_out *e);
void fw_warn(const struct fw_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void fw_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* -d: messages go to syslog from now on. */
void fw_log_to_syslog(void);
/* /proc/sys/fs/fanotify/NAME, or -1 when it cannot be read. */
long fw_sysctl(const char *name);
long fw_read_long(const char *path);

/* walk.c */
/* Create the fanotify group; prints why and returns -1 on failure. */
int fw_open(struct fw_ctx *c, struct fw_opts *o);
void fw_close(struct fw_ctx *c);
/* Watch a root directory (recursively with -r) or file; -1 when it cannot be. */
int fw_add_root(struct fw_ctx *c, const char *path);
/* After the roots or a batch: report the directories the mark limit left out. */
void fw_setup_done(struct fw_ctx *c);
/*
 * Mark dir `name` under parent and put it in the map; NULL if not watched,
 * with errno ESTALE when parent itself cannot be reached by its name chain
 * right now (a rename of it not read yet: try again later).
 */
struct fw_dir *fw_watch_dir(struct fw_ctx *c, struct fw_dir *parent,
			    const char *name, const struct fw_want *want);
/* The watched directory parent/name is now, if it is one. */
struct fw_dir *fw_dir_at(struct fw_ctx *c, struct fw_dir *parent, const char *name);
/* Watch parent/name with -r (unless excluded) and scan it, reporting what
 * it holds if report; if parent cannot be reached now, later.  With want,
 * only if the name still leads to that directory. */
void fw_adopt(struct fw_ctx *c, struct fw_dir *parent, const char *name,
	      const struct fw_want *want, bool report);
/* After a batch of events: adopt what waited for a rename to be read. */
void fw_retry_pending(struct fw_ctx *c);
/* Watch the directories an edited ignore file no longer leaves out. */
void fw_retry_skipped(struct fw_ctx *c);
/* List d; report entries as created (found by scan) if report; recurse with -r. */
void fw_scan(struct fw_ctx *c, struct fw_dir *d, bool report);
void fw_unwatch_tree(struct fw_ctx *c, struct fw_dir *d);
/* Where a scan met d at a new place since (d->met), if it still is there. */
struct fw_dir *fw_met_at(struct fw_ctx *c, struct fw_dir *d, const char **name);
/* Report what a directory setup adopted silently holds (it came during setup). */
void fw_report_quiet(struct fw_ctx *c, struct fw_dir *top);
/* Is parent/name a directory --exclude keeps -r from watching? */
bool fw_excluded(struct fw_ctx *c, const struct fw_dir *parent, const char *name);
/* After an overflow: compare the tree with the snapshots, report changes. */
void fw_rescan(struct fw_ctx *c);

/* events.c */
/* Handle a buffer returned by read(); output is left in o->out's buffer. */
void fw_handle_buffer(struct fw_ctx *c, const void *buf, size_t len);
/* The main loop: returns the exit status (0 event/ok, 1 error, 2 timeout). */
int fw_run(struct fw_ctx *c);

#endif

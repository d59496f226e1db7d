/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Turning watcher events into text, CSV or JSON lines. */
#ifndef FW_FORMAT_H
#define FW_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One reported event: a single event bit, or MOVED_FROM|MOVED_TO for a rename. */
struct fw_out {
	uint32_t mask;
	bool isdir;
	bool scan;		/* found by a scan, not reported by the kernel */
	bool self;		/* caused by fanwatch itself */
	const char *dir;	/* %w: the watched directory's path, ends in '/' */
	const char *name;	/* %f: "" for an event on the directory itself */
	const char *odir;	/* the old location of a rename, or NULL */
	const char *oname;
	uint32_t cookie;	/* %c: the two halves of a rename share it; else 0 */
};

enum fw_style { FW_STYLE_TEXT, FW_STYLE_CSV, FW_STYLE_JSON };

struct fw_fmt {
	enum fw_style style;
	const char *format;	/* --format, or NULL for the default line */
	const char *timefmt;	/* strftime format for %T */
	bool no_newline;	/* --no-newline: nothing after a --format line */
};

/*
 * Names of the event bits and flags as inotifywait prints them, e.g.
 * "CLOSE_WRITE,CLOSE" or "CREATE,ISDIR" (no ISDIR on *_SELF); returns the
 * length.  bare: just the bits ("CLOSE_WRITE"), for JSON.
 */
size_t fw_event_names(char *buf, size_t size, const struct fw_out *e, char sep,
		      bool bare);
/* Parse "create,modify,..."; returns the mask or 0 with *bad set to the word. */
uint32_t fw_parse_events(const char *list, const char **bad, size_t *badlen);

void fw_print(FILE *f, const struct fw_fmt *fmt, const struct fw_out *e,
	      const char *timestr, const char *isotime);

/* Escapers, exposed for tests: RFC 4180 quoting; JSON that round-trips bytes. */
void fw_csv_field(FILE *f, const char *s);
void fw_json_string(FILE *f, const char *s);
/* Does the --format string use %T? */
bool fw_format_wants_time(const char *format);
/* The JSON schema version written in every object ("schema"). */
#define FW_JSON_SCHEMA 2

#endif

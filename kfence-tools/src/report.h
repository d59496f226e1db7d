/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A parser for KFENCE reports as the kernel prints them (mm/kfence/report.c,
 * 5.12 to 6.x): from /dev/kmsg records, dmesg output, serial console logs or
 * syslog files. It is fed one line at a time and hands back one record per
 * report, including reports cut short by a lost or truncated log.
 */
#ifndef KFENCE_REPORT_H
#define KFENCE_REPORT_H

#include <stdbool.h>
#include <stddef.h>

/* KFENCE_STACK_DEPTH in the kernel; more frames means garbled input. */
#define KFR_MAX_FRAMES 64

struct kfr_stack {
	char *frames[KFR_MAX_FRAMES];
	size_t n;
};

/* Who allocated or freed the object, and where. */
struct kfr_track {
	bool present;
	int pid;
	int cpu;
	char *time;		/* seconds since boot, as printed */
	struct kfr_stack stack;
};

struct kfr_report {
	char *kind;		/* out-of-bounds, use-after-free, memory-corruption,
				 * invalid-access, invalid-free */
	char *access;		/* read, write, or NULL when not an access */
	char *function;		/* the title's frame without offset or module */
	char *location;		/* the title's frame as printed */
	char *module;		/* the title frame's module, or NULL */
	char *address;		/* as printed: hashed unless no_hash_pointers */
	bool has_offset;
	long offset;		/* bytes from the object (OOB) or into it */
	char *side;		/* OOB: left or right of the object */
	long object;		/* kfence-#N, or -1 */
	char *object_start;
	char *object_end;
	long size;		/* -1 when unknown */
	char *cache;
	char *corrupted;	/* the canary dump of a memory corruption */
	struct kfr_stack stack;	/* where the bad access or free happened */
	struct kfr_track alloc;
	struct kfr_track free;
	int cpu;		/* from the CPU: ... PID: ... Comm: footer */
	int pid;
	char *comm;
	char *time;		/* of the title line, when the log has one */
	unsigned long line;	/* input line of the title */
	bool complete;		/* stacks, object and footer all seen */
};

enum kfr_section {
	KFR_NONE, KFR_HEAD, KFR_STACK, KFR_OBJECT, KFR_ALLOC, KFR_FREE, KFR_TAIL,
};

typedef void (*kfr_emit_fn)(const struct kfr_report *r, void *arg);

struct kfr_parser {
	kfr_emit_fn emit;
	void *arg;
	unsigned long lineno;
	bool active;		/* inside a report (title seen) */
	enum kfr_section section;
	unsigned long body_lines;
	struct kfr_report cur;
	unsigned long count;	/* reports emitted */
};

void kfr_parser_init(struct kfr_parser *p, kfr_emit_fn emit, void *arg);
/* One line of log, with or without its newline and log prefix. */
void kfr_parser_line(struct kfr_parser *p, const char *line);
/* End of input: a report still open is emitted as incomplete. */
void kfr_parser_finish(struct kfr_parser *p);

/*
 * The message part of a log line: skips a /dev/kmsg record header, a syslog
 * "<N>" level, a "Mon dd hh:mm:ss host kernel: " prefix, a "[ sec.usec]"
 * timestamp, whatever came before it, and a "[T123]"/"[C1]" caller id.
 * The timestamp goes to @ts as "sec.usec" ("" when the line has none);
 * *escaped tells a /dev/kmsg record, whose text has \xHH escapes.
 */
const char *kfr_message(const char *line, char *ts, size_t tssize, bool *escaped);

void kfr_report_clear(struct kfr_report *r);

/* Output: a multi-line text block, one JSON object per line, or one line. */
#include <stdio.h>
void kfr_print_text(FILE *f, const struct kfr_report *r, unsigned long n);
void kfr_print_json(FILE *f, const struct kfr_report *r);
void kfr_print_brief(FILE *f, const struct kfr_report *r);

#endif

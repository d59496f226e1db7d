/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A parser for KFENCE reports as the kernel prints them (mm/kfence/report.c,
 * 5.12 to 6.12): from /dev/kmsg records, dmesg output, serial console logs,
 * journal or syslog files, Android and netconsole logs. It is fed one line
 * at a time and hands back one record per report, including reports cut
 * short by a lost or truncated log, which say why they are incomplete.
 */
#ifndef KFENCE_REPORT_H
#define KFENCE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The version of the JSON records (kfence-report(1)); bump on any change. */
#define KFR_SCHEMA 3

/* KFENCE_STACK_DEPTH in the kernel; more frames means garbled input. */
#define KFR_MAX_FRAMES 64

/*
 * What the parser keeps of any input, so that a line of any length or a
 * log of any size costs memory in proportion to the reports open only
 * (kfence-report(1), LIMITS). The kernel prints no line over 1024 bytes.
 */
#define KFR_MAX_LINE 4096	/* bytes of a line looked at; the rest is cut */
#define KFR_MAX_FIELD 1024	/* bytes of a string field, its cut mark included */
#define KFR_CUT_MARK "[cut]"	/* ends a field that was longer than that */
#define KFR_MAX_STACK_TEXT 32768	/* bytes of all the frames of one report */

/* A field of @s[0, n): at most KFR_MAX_FIELD bytes, ending in KFR_CUT_MARK if cut. */
char *kfr_field(const char *s, size_t n);

struct kfr_stack {
	char *frames[KFR_MAX_FRAMES];	/* as printed, without leading space */
	char *src[KFR_MAX_FRAMES];	/* file:line from --vmlinux, or NULL */
	size_t n;
};

/* Who allocated or freed the object, and where. */
struct kfr_track {
	bool present;
	bool rcu;		/* 6.12: "rcu freeing by task" (not yet freed) */
	int pid;
	int cpu;		/* -1 before 5.15, which did not print it */
	char *time;		/* seconds since boot, as printed; NULL before 5.15 */
	struct kfr_stack stack;
};

struct kfr_report {
	/* what the title says */
	const char *detector;	/* "kfence", or "kasan" (mm/kasan/report.c) */
	char *kind;		/* out-of-bounds, use-after-free, memory-corruption,
				 * invalid-access, invalid-free, unknown; for KASAN
				 * its bug type as printed (slab-out-of-bounds, ...) */
	char *access;		/* read, write, or NULL when not an access */
	char *function;		/* the title's frame without offset or module */
	char *location;		/* the title's frame as printed */
	char *module;		/* the title frame's module, or NULL */
	/* what triage uses (title.c) */
	char *guilty;		/* first frame not on the skip list */
	char *title;		/* "KFENCE: use-after-free read in guilty" */
	char *bad_access;	/* "bad-access in guilty", KASAN-comparable */
	/* the detail line and the object */
	char *address;		/* as printed: hashed unless no_hash_pointers */
	bool has_offset;
	long offset;		/* bytes from the object (OOB) or into it */
	char *side;		/* left, right or inside the object */
	long object;		/* kfence-#N, or -1 */
	char *object_start;
	char *object_end;
	long size;		/* -1 when unknown */
	char *cache;
	char *corrupted;	/* the canary dump of a memory corruption */
	struct kfr_stack stack;	/* where the bad access or free happened */
	struct kfr_track alloc;
	struct kfr_track free;
	/* the footer (dump_stack_print_info) */
	int cpu;
	int uid;		/* 6.11+ prints it; -1 before */
	int pid;
	char *comm;
	char *taint;		/* the taint letters, "" when "Not tainted" */
	char *release;		/* uname -r of the kernel that printed it */
	/* where it was read */
	char *time;		/* seconds since boot of the title, or NULL */
	char *wallclock;	/* dmesg -T / syslog date of the title, or NULL */
	char *caller;		/* printk caller id ("T303", "C1"), or NULL */
	char *host;		/* from a syslog/journal prefix, or NULL */
	long long seq;		/* /dev/kmsg sequence number of the title, or -1 */
	long long last_seq;	/* of the report's last record, or -1 */
	unsigned long line;	/* input line of the title */
	bool complete;		/* every part seen, nothing lost in between */
	const char *reason;	/* why not complete (a KFR_R_* string), or NULL */
	/* how the title was made (title-rules.def) */
	int title_form;		/* index of the FORM row, -1 for none */
	unsigned title_families;	/* bit per FAMILY that skipped a frame */
};

/* Why a report is incomplete (the JSON "reason" values). */
#define KFR_R_TRUNCATED "truncated"		/* input ended inside it */
#define KFR_R_INTERRUPTED "interrupted"		/* a new report began */
#define KFR_R_INTERLEAVED "interleaved"		/* began inside another: lines mixed */
#define KFR_R_LOST "lost-records"		/* sequence gap, EPIPE, "messages dropped" */
#define KFR_R_FILTERED "filtered"		/* only KERN_ERR lines: console loglevel */
#define KFR_R_NO_DETAIL "no-detail"
#define KFR_R_NO_STACK "no-stack"
#define KFR_R_NO_OBJECT "no-object"
#define KFR_R_NO_FOOTER "no-footer"
#define KFR_R_TOO_LONG "too-long"		/* no closing ruler in KFR_MAX_BODY lines */
#define KFR_R_NO_TITLE "no-title"		/* begun at its detail line: title lost */

enum kfr_section {
	KFR_NONE, KFR_HEAD, KFR_STACK, KFR_OBJECT, KFR_ALLOC, KFR_FREE, KFR_TAIL,
};

typedef void (*kfr_emit_fn)(const struct kfr_report *r, void *arg);

/* One report being read; any number at once when printk caller ids, the
 * CPU column of an Android log or the hosts of a central syslog tell apart
 * the lines that interleave.
 */
struct kfr_slot {
	bool active;
	char caller[16];	/* "" when the log has no caller ids */
	char host[64];		/* "" when the lines name no host */
	int cpu;		/* Android's "c7" column, -1 when none */
	enum kfr_section section;
	unsigned long body_lines;
	bool detail;		/* the line after the title was seen */
	bool object_line;
	bool footer;
	bool kasan;		/* a KASAN report: its call trace follows the footer */
	size_t stack_text;	/* bytes of frames kept, up to KFR_MAX_STACK_TEXT */
	bool at_end_of_input;	/* its last line so far ended an input (a file) */
	const char *gap;	/* a KFR_R_* reason met while reading it */
	struct kfr_report cur;
};

struct kfr_parser {
	kfr_emit_fn emit;
	void *arg;
	unsigned long lineno;
	long long last_seq;	/* last /dev/kmsg sequence number, -1 if none */
	long long seq;		/* of the line being parsed, -1 if none */
	const char *host;	/* of the line being parsed (not owned) */
	char release[64];	/* netconsole's release prefix, or "" */
	unsigned long count;	/* reports emitted */
	bool line_cut;		/* the line being parsed was over KFR_MAX_LINE */
	char cut_line[KFR_MAX_LINE + 1];	/* its first KFR_MAX_LINE bytes */
	/* the reports being read: no cap, a slot is reused once emitted */
	struct kfr_slot **slots;
	size_t n_slots;
	size_t n_active;
};

void kfr_parser_init(struct kfr_parser *p, kfr_emit_fn emit, void *arg);
/* One line of log, with or without its newline and log prefix. */
void kfr_parser_line(struct kfr_parser *p, const char *line);
/*
 * Fast path for a buffer of whole lines [s, end): the start of the first
 * line the parser must be given (one holding "KFENCE: ", "KASAN: " or
 * "kfence-#", or any line while a report is open), or @end. The lines
 * passed over are counted as read. @sc caches where each trigger occurs
 * next in the buffer: zero it for each new buffer.
 */
struct kfr_scan {
	const char *end;
	const char *next[2];	/* the next 'K' and '#' triggers */
};
const char *kfr_parser_skip(struct kfr_parser *p, struct kfr_scan *sc,
			    const char *s, const char *end);
/* Records were lost (EPIPE on /dev/kmsg): open reports are incomplete. */
void kfr_parser_lost(struct kfr_parser *p);
/* Emit the open reports that lost records (a collector's end of run). */
void kfr_parser_finish_lost(struct kfr_parser *p);
/*
 * The next input (file) of the same stream begins: rotated logs of one
 * host, in order. A report open at the end of the last one goes on with
 * this one's lines; if a new report of its task begins first, it was cut
 * there (truncated), and is not mixed with the new one.
 */
void kfr_parser_next_input(struct kfr_parser *p);
/* End of one input (a file): open reports are emitted as truncated, and
 * what the parser holds is freed (it can go on with the next input).
 */
void kfr_parser_finish(struct kfr_parser *p);
/* Free what the parser holds (after finish). */
void kfr_parser_free(struct kfr_parser *p);

/* What kfr_message() found around the message of a log line. */
struct kfr_prefix {
	char ts[32];		/* "sec.usec" since boot, "" when none */
	char wallclock[40];	/* "Thu Dec  3 17:39:26 2026", "Dec 03 ...", "" */
	char caller[16];	/* "T123", "C1", "" */
	char host[64];		/* syslog/journal host name, "" */
	char release[64];	/* netconsole release prefix, "" */
	int cpu;		/* Android's cpu column, -1 when none */
	long long seq;		/* /dev/kmsg or netconsole sequence number, -1 */
	bool escaped;		/* /dev/kmsg text: \xHH escapes */
};

/*
 * The message part of a log line: skips a /dev/kmsg record header (and a
 * netconsole release before it), a syslog "<N>" level, a "Mon dd hh:mm:ss
 * host kernel: " or ISO-date prefix, a "[ sec.usec]" or dmesg -T "[date]"
 * timestamp, whatever came before it, a "[T123]"/"[C1]" caller id and an
 * Android "c7   6006 " cpu/pid column. What it found goes to @px.
 */
const char *kfr_message(const char *line, struct kfr_prefix *px);

void kfr_report_clear(struct kfr_report *r);

/* title.c: the title rules (title-rules.def) and the titles. */
struct kfr_title_family {
	const char *name;
	const char *corpus;	/* the corpus case that exercises it */
	const char *what;
	bool form_only;		/* applies only to the forms that name it */
	bool guilty_only;	/* STRIP rows: cut from the guilty frame's name */
};
struct kfr_title_form {
	const char *detector;
	const char *bug_type;	/* as the report names it, "*" for any */
	const char *title;	/* %k %A %a %g */
	int extra;		/* a form-only family, or -1 */
	const char *corpus;
};
const struct kfr_title_family *kfr_title_families(size_t *n);
const struct kfr_title_form *kfr_title_forms(size_t *n);
bool kfr_frame_skipped(const char *function);
/* The guilty frame when every frame is a helper (syzkaller's word) */
#define KFR_CORRUPTED "corrupted"
/* A guilty frame's name in a title: "__x64_sys_f" -> "sys_f", "SyS_f" -> "f" */
const char *kfr_title_name(const char *function, int *family);
/* The function of a frame as printed: "? f.isra.0+0x1/0x2 [m id]" -> "f" */
size_t kfr_frame_function(const char *frame, char *buf, size_t size);
void kfr_set_titles(struct kfr_report *r);
/* "KASAN: slab-use-after-free Read in f" and the like -> "bad-access in f" */
bool kfr_kasan_bad_access(const char *kasan_title, char *buf, size_t size);
/* The bucket key: title and the top @frames frames after the guilty one. */
void kfr_bucket(const struct kfr_report *r, int frames, char *buf, size_t size);

/* Output: a multi-line text block, one JSON object per line, or one line. */
struct kfr_meta {
	const char *boot_id;	/* NULL when unknown (saved logs) */
	const char *host;	/* overrides the log's when set */
	const char *release;	/* used when the report has none */
};
void kfr_print_text(FILE *f, const struct kfr_report *r, unsigned long n);
void kfr_print_json(FILE *f, const struct kfr_report *r, const struct kfr_meta *m);
void kfr_print_brief(FILE *f, const struct kfr_report *r);
/* The corpus tests' canonical form: one "key: value" line per field. */
void kfr_print_expect(FILE *f, const struct kfr_report *r);
void kfr_json_str(FILE *f, const char *s);

#endif

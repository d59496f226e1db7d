/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a fleet collector needs around the parser: a cursor that survives
 * restarts, buckets with counts, KFENCE's debugfs statistics, and
 * symbolization against a vmlinux.
 */
#ifndef KFENCE_FLEET_H
#define KFENCE_FLEET_H

#include "report.h"

#include <stdbool.h>
#include <stdio.h>

/*
 * The cursor file: the boot it belongs to, the first /dev/kmsg record not
 * yet fully read (a report still open when the collector stopped is read
 * again from its title), the title sequence numbers of reports already
 * printed at or after that record, and how many were printed this boot.
 */
#define KFR_CURSOR_DONE 32
struct kfr_cursor {
	char boot_id[64];
	long long next_seq;	/* -1: from the start of the log */
	long long done[KFR_CURSOR_DONE];
	size_t n_done;
	unsigned long emitted;	/* this boot, for --max-per-boot */
	unsigned long suppressed;
	/* the records read of reports still open, as read: if the ring
	 * overwrites them before the next run, it still has their start
	 */
	char **held;
	size_t n_held;
};

/* At most this many records held: a report is under 200 lines. */
#define KFR_CURSOR_HELD 4096

/* 0: read (or absent: fresh); 1: from another boot (message printed,
 * fresh); -1: unreadable or not a cursor (message printed).
 */
int kfr_cursor_load(struct kfr_cursor *c, const char *path, const char *boot_id);
/* Written to PATH.tmp, then renamed: a crash leaves the old or the new. */
int kfr_cursor_save(const struct kfr_cursor *c, const char *path);
bool kfr_cursor_done(const struct kfr_cursor *c, long long seq);
void kfr_cursor_mark(struct kfr_cursor *c, long long seq);
/* Forget done entries and held records below the next record to read. */
void kfr_cursor_advance(struct kfr_cursor *c, long long next_seq);
/* The sequence number of a /dev/kmsg record "prio,seq,usec,flags;text", or -1. */
long long kfr_record_seq(const char *rec);
/* Keep a copy of /dev/kmsg record @rec (its seq is @seq). */
void kfr_cursor_hold(struct kfr_cursor *c, const char *rec, long long seq);
/* Drop the records held (none is open), freeing them. */
void kfr_cursor_free(struct kfr_cursor *c);

/* Buckets for --summary. */
struct kfr_buckets;
struct kfr_buckets *kfr_buckets_new(int frames);
void kfr_buckets_add(struct kfr_buckets *b, const struct kfr_report *r, const char *seen);
void kfr_buckets_print(FILE *f, struct kfr_buckets *b, bool json);
void kfr_buckets_free(struct kfr_buckets *b);

/* One of our own JSON records (schema 2 or 3) back into @r, for --summary. */
bool kfr_json_record(const char *line, struct kfr_report *r);

/* --stats: /sys/kernel/debug/kfence/stats (or @path) as text or JSON. */
int kfr_stats(FILE *f, const char *path, const char *interval_path, bool json);
/* The same from an open stats file @in (@name for messages, NULL: no
 * message); @interval is sample_interval in ms, -1 when unknown.
 */
int kfr_stats_print(FILE *f, FILE *in, const char *name, long long interval, bool json);

/* --vmlinux: fill each frame's src with file:line (addr2line). */
struct kfr_symbols;
struct kfr_symbols *kfr_symbols_open(const char *vmlinux);
void kfr_symbolize(struct kfr_symbols *s, struct kfr_report *r);
void kfr_symbols_close(struct kfr_symbols *s);

#endif

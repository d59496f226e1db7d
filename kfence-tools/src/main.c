// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-report: read KFENCE reports from /dev/kmsg or saved logs and print
 * one record per report (text, JSON lines, one line each) or buckets with
 * counts; as a collector, resume after a restart from a cursor file.
 */
#include "fleet.h"
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

enum format { FMT_TEXT, FMT_JSON, FMT_BRIEF };

struct ctx {
	enum format format;
	unsigned long n;
	struct kfr_meta meta;
	struct kfr_buckets *buckets;	/* --summary */
	struct kfr_symbols *syms;	/* --vmlinux */
	struct kfr_cursor cursor;
	const char *cursor_path;	/* --cursor */
	long max_per_boot;		/* -1: no cap */
	bool live;			/* reading /dev/kmsg: seen = now */
	bool batch;			/* a regular file, no cursor: flush at the end */
	struct kfr_parser *parser;
	long long next_seq;		/* first record not read yet */
	int status;
};

static void usage(FILE *f)
{
	fputs("usage: kfence-report [OPTION...] [FILE...]\n"
	      "       kfence-report [OPTION...] --follow FILE\n"
	      "       kfence-report [OPTION...] --kmsg[=PATH] [--follow] [--cursor FILE]\n"
	      "       kfence-report --stats[=PATH] [--json]\n"
	      "\n"
	      "Print one record per KFENCE report found in kernel logs: dmesg\n"
	      "output, serial console logs, journal and syslog files, Android and\n"
	      "netconsole logs (FILE, or standard input when none or '-'), or the\n"
	      "kernel's log buffer (--kmsg).\n"
	      "\n"
	      "  -j, --json            one JSON object per report and line (schema 3)\n"
	      "  -b, --brief           one line per report: time kind access function\n"
	      "                        object cache completeness\n"
	      "  -s, --summary[=N]     buckets (title and top N frames, default 3) with\n"
	      "                        counts and first/last seen, instead of records\n"
	      "  -k, --kmsg[=PATH]     read /dev/kmsg (root, or kernel.dmesg_restrict=0),\n"
	      "                        or a file of /dev/kmsg records\n"
	      "  -f, --follow          with --kmsg or one FILE: keep waiting for new\n"
	      "                        reports (FILE: across its rotations)\n"
	      "  -c, --cursor FILE     with --kmsg: resume after the last report printed\n"
	      "                        by an earlier run of this boot; keep FILE current\n"
	      "  -m, --max-per-boot N  print at most N reports per boot (with --cursor,\n"
	      "                        across restarts); count the others\n"
	      "      --boot-id ID      the boot the records belong to (--kmsg: read from\n"
	      "                        /proc/sys/kernel/random/boot_id)\n"
	      "      --host NAME       the host name to put on each record (--kmsg:\n"
	      "                        this machine's)\n"
	      "  -S, --stats[=PATH]    print KFENCE's statistics\n"
	      "                        (/sys/kernel/debug/kfence/stats) and exit\n"
	      "  -V, --vmlinux FILE    add file:line to each frame (nm, addr2line)\n"
	      "  -h, --help            this text\n"
	      "\n"
	      "Exit status: 0 when the input was read (with or without reports),\n"
	      "1 when it could not be, 2 on a usage error.\n", f);
}

static void seen_now(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

/* The first record a restart must read again: a report still open. */
static long long resume_seq(const struct ctx *c)
{
	long long s = c->next_seq;

	for (size_t i = 0; i < c->parser->n_slots; i++) {
		const struct kfr_slot *sl = c->parser->slots[i];

		if (sl->active && sl->cur.seq >= 0 && sl->cur.seq < s)
			s = sl->cur.seq;
	}
	return s;
}

static void save_cursor(struct ctx *c)
{
	if (!c->cursor_path || c->next_seq < 0)
		return;
	kfr_cursor_advance(&c->cursor, resume_seq(c));
	if (kfr_cursor_save(&c->cursor, c->cursor_path))
		c->status = 1;
}

static void print_report(const struct kfr_report *r, void *arg)
{
	struct ctx *c = arg;
	char seen[64];

	if (c->cursor_path && r->seq >= 0 && kfr_cursor_done(&c->cursor, r->seq))
		return;	/* printed before the restart */
	if (c->max_per_boot >= 0 && c->cursor.emitted >= (unsigned long)c->max_per_boot) {
		if (!c->cursor.suppressed++)
			fprintf(stderr, "kfence-report: %ld reports printed this boot "
				"(--max-per-boot): counting the rest\n", c->max_per_boot);
		kfr_cursor_mark(&c->cursor, r->seq);
		save_cursor(c);
		return;
	}
	c->cursor.emitted++;
	c->n++;
	if (c->syms)
		kfr_symbolize(c->syms, (struct kfr_report *)r);	/* ours until we return */
	if (c->buckets) {
		if (c->live)
			seen_now(seen, sizeof(seen));
		else if (r->wallclock)
			snprintf(seen, sizeof(seen), "%s", r->wallclock);
		else if (r->time)
			snprintf(seen, sizeof(seen), "%s s", r->time);
		else
			snprintf(seen, sizeof(seen), "line %lu", r->line);
		kfr_buckets_add(c->buckets, r, seen);
	} else {
		switch (c->format) {
		case FMT_JSON:
			kfr_print_json(stdout, r, &c->meta);
			break;
		case FMT_BRIEF:
			kfr_print_brief(stdout, r);
			break;
		default:
			kfr_print_text(stdout, r, c->n);
			break;
		}
		/* a follower's reader (or a pipe's: the log may be live) wants
		 * each report as it comes, and the cursor must not run ahead of
		 * what was written; a saved file's reports go out in big writes
		 * (a write a report was 13 % of --json's time on a dense log)
		 */
		if (!c->batch && fflush(stdout)) {
			fprintf(stderr, "kfence-report: writing the output: %s\n", strerror(errno));
			exit(1);
		}
	}
	kfr_cursor_mark(&c->cursor, r->seq);
	save_cursor(c);
}

/*
 * Input is read in blocks; a line is handed on whole up to READ_LINE bytes
 * (a --summary JSON record, of our own, is under 400 KiB: about 64 KiB of
 * fields and frames (kfence-report(1), LIMITS), each byte written at most
 * 6 bytes long; only --vmlinux file:lines could make one longer), and a
 * longer one cut there, the rest of it read and dropped:
 * memory stays within the block whatever the input, and each byte is
 * looked at a bounded number of times, from a file or from a pipe.
 */
#define READ_BLOCK (4u << 20)
#define READ_LINE (1u << 20)

/* What one line is for: the parser, --summary, or --kmsg's records. */
typedef void (*line_fn)(struct ctx *c, char *line);

struct reader {
	struct ctx *c;
	line_fn fn;
	bool skip;		/* pass over runs of lines no report needs */
	bool dropping;		/* in the rest of a line cut at READ_LINE */
};

static volatile sig_atomic_t stopping;

static void print_report(const struct kfr_report *r, void *arg);

/* The lines of [s, last) to rd->fn; @last has a byte of room for a NUL. */
static void give_lines(struct reader *rd, char *s, char *last)
{
	struct kfr_scan sc = { 0 };
	char *nl;

	while (s < last && !stopping) {
		if (rd->skip) {
			s = (char *)kfr_parser_skip(rd->c->parser, &sc, s, last);
			if (s >= last)
				break;
		}
		nl = memchr(s, '\n', (size_t)(last - s));
		*(nl ? nl : last) = '\0';
		rd->fn(rd->c, s);
		s = nl ? nl + 1 : last;
	}
}

/*
 * buf[0, *len) holds the start of a line, then @fresh bytes just read:
 * hand on the lines they end, keep the one they begin. Only the fresh
 * bytes are searched, so a line that comes in many reads costs no more
 * than a short one.
 */
static void take(struct reader *rd, char *buf, size_t *len, size_t fresh, bool eof)
{
	char *nl;

	if (rd->dropping) {
		nl = memchr(buf, '\n', *len);
		if (!nl) {
			/* the end of a file ends the line too (--follow goes on
			 * with the next one)
			 */
			rd->dropping = !eof;
			*len = 0;
			return;
		}
		rd->dropping = false;
		*len -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, *len);
		fresh = *len;
	}
	nl = memrchr(buf + *len - fresh, '\n', fresh);
	if (eof) {
		give_lines(rd, buf, buf + *len);
		*len = 0;
	} else if (nl) {
		give_lines(rd, buf, nl + 1);
		*len -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, *len);
	}
	if (*len > READ_LINE) {
		/* no line is that long: its start is all anyone gets */
		give_lines(rd, buf, buf + READ_LINE);
		rd->dropping = true;
		*len = 0;
	}
}

/*
 * --follow FILE at the end of what @fd holds: the file @path names now,
 * once it is no longer @fd's (a rotation renamed it and a new one was
 * made), else -1. A file truncated in place (copytruncate) is read again
 * from its start.
 */
static int rotated(int fd, const char *path)
{
	struct stat now, old;

	if (fstat(fd, &old) || stat(path, &now))
		return -1;	/* moved away, the new one not made yet */
	if (now.st_dev == old.st_dev && now.st_ino == old.st_ino) {
		if (lseek(fd, 0, SEEK_CUR) > now.st_size)
			lseek(fd, 0, SEEK_SET);
		return -1;
	}
	return open(path, O_RDONLY | O_CLOEXEC);
}

/*
 * With @follow (the path of the file @fd is), the end of the file is not
 * the end: wait for more, and when the file is rotated, read what was
 * added to the old one, then go on with the new one as the same stream.
 */
static int read_lines(struct ctx *c, int fd, const char *name, line_fn fn, bool skip,
		      const char *follow)
{
	const struct timespec nap = { 0, 100 * 1000 * 1000 };
	struct reader rd = { .c = c, .fn = fn, .skip = skip };
	char *buf = malloc(READ_BLOCK + 1);
	size_t len = 0;
	ssize_t n;
	int ret = 0, next = -1;
	bool drained = false;

	if (!buf) {
		perror("kfence-report");
		exit(1);
	}
	while (!stopping) {
		n = read(fd, buf + len, READ_BLOCK - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "kfence-report: reading %s: %s\n", name, strerror(errno));
			ret = 1;
			break;
		}
		if (n == 0 && follow) {
			if (next < 0)
				next = rotated(fd, follow);
			if (next < 0 || !drained) {
				/* once rotated, one more read: the writer may
				 * have added to the old file before it moved on
				 */
				drained = next >= 0;
				if (next < 0)
					nanosleep(&nap, NULL);
				continue;
			}
			take(&rd, buf, &len, 0, true);
			kfr_parser_next_input(c->parser);
			close(fd);
			fd = next;
			next = -1;
			drained = false;
			continue;
		}
		len += (size_t)n;
		take(&rd, buf, &len, (size_t)n, n == 0);
		if (n == 0)
			break;
	}
	if (follow) {
		close(fd);
		if (next >= 0)
			close(next);
	}
	free(buf);
	return ret;
}

static void parser_line(struct ctx *c, char *line)
{
	kfr_parser_line(c->parser, line);
}

/* --summary also reads the JSON records a fleet's collectors wrote. */
static void summary_line(struct ctx *c, char *line)
{
	struct kfr_report rec;

	if (line[0] == '{') {
		memset(&rec, 0, sizeof(rec));
		if (kfr_json_record(line, &rec)) {
			print_report(&rec, c);
			kfr_report_clear(&rec);
			return;
		}
		kfr_report_clear(&rec);
	}
	kfr_parser_line(c->parser, line);
}

/*
 * A log read in big blocks: outside reports, the parser's scan skips
 * whole runs of lines at memmem() speed (JSON records hold a title, so
 * --summary's are not skipped).
 */
static int read_stream(struct kfr_parser *p, FILE *f, const char *name)
{
	struct ctx *c = p->arg;
	struct stat st;

	c->batch = !c->cursor_path && !fstat(fileno(f), &st) && S_ISREG(st.st_mode);
	return read_lines(c, fileno(f), name, c->buckets ? summary_line : parser_line, true,
			  NULL);
}

/* --follow FILE: read it and what is added to it, across its rotations. */
static int follow_file(struct ctx *c, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "kfence-report: cannot open '%s': %s\n", path, strerror(errno));
		return 1;
	}
	return read_lines(c, fd, path, parser_line, true, path);
}

static int read_file(struct kfr_parser *p, const char *path)
{
	FILE *f;
	int ret;

	if (!strcmp(path, "-"))
		return read_stream(p, stdin, "standard input");
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "kfence-report: cannot open '%s': %s\n", path, strerror(errno));
		return 1;
	}
	ret = read_stream(p, f, path);
	fclose(f);
	return ret;
}

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

/*
 * A collector asked to stop (SIGTERM from systemctl stop, ^C, SIGHUP) ends
 * its read and saves the cursor at the last record it read, not only at
 * its last report: its next run must not take the records read since for
 * records overwritten before they were read. No SA_RESTART: the blocked
 * read() returns EINTR.
 */
static void catch_stop(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/*
 * The records from @from to @to of the reports open when the last run
 * stopped, which the ring overwrote since: read again from the cursor's
 * copy, so that each of those reports still comes out, partial, with
 * reason lost-records (the sequence gap after them says so).
 */
static void replay_held(struct ctx *c, long long from, long long to)
{
	for (size_t i = 0; i < c->cursor.n_held; i++) {
		long long s = kfr_record_seq(c->cursor.held[i]);

		if (s >= from && s < to)
			kfr_parser_line(c->parser, c->cursor.held[i]);
	}
}

/* One /dev/kmsg record: skip what the cursor says was read, then parse. */
static void kmsg_record(struct ctx *c, char *rec)
{
	long long seq = kfr_record_seq(rec);

	if (rec[0] == ' ')
		return;	/* " KEY=value" dictionary lines of a saved kmsg */
	rec[strcspn(rec, "\n")] = '\0';
	if (seq >= 0 && c->cursor.next_seq >= 0 && seq < c->cursor.next_seq)
		return;
	if (seq >= 0 && c->cursor.next_seq >= 0 && c->next_seq < 0 &&
	    seq > c->cursor.next_seq) {
		fprintf(stderr, "kfence-report: records %lld-%lld were overwritten before they "
			"were read\n", c->cursor.next_seq, seq - 1);
		replay_held(c, c->cursor.next_seq, seq);
		kfr_parser_lost(c->parser);
	}
	kfr_parser_line(c->parser, rec);
	if (seq >= 0)
		c->next_seq = seq + 1;
	/* keep the records of open reports only: with none open, none */
	if (c->cursor_path && c->parser->n_active)
		kfr_cursor_hold(&c->cursor, rec, seq);
	else if (c->cursor_path)
		kfr_cursor_free(&c->cursor);
}

static int open_kmsg(const char *path, bool follow)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (follow ? 0 : O_NONBLOCK));

	if (fd < 0)
		fprintf(stderr, "kfence-report: cannot open %s: %s%s\n", path, strerror(errno),
			errno == EACCES || errno == EPERM ?
			" (run as root, or set kernel.dmesg_restrict=0)" : "");
	return fd;
}

/*
 * /dev/kmsg returns one record per read(): "prio,seq,usec,flags;text\n"
 * followed by " KEY=value" lines, which are not the message. A saved
 * copy (a regular file) or a pipe (ssh host cat /dev/kmsg) holds the same
 * records one per line, many to a read(): read those line by line, to
 * their end.
 */
static int read_kmsg_lines(struct ctx *c, const char *path, int fd)
{
	int ret;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	ret = read_lines(c, fd, path, kmsg_record, false, NULL);
	close(fd);
	return stopping ? 0 : ret;
}

static int read_kmsg(struct ctx *c, const char *path, bool follow)
{
	char buf[16384];
	struct stat st;
	ssize_t n;
	int fd = open_kmsg(path, follow);

	if (fd < 0)
		return 1;
	if (!fstat(fd, &st) && !S_ISCHR(st.st_mode))
		return read_kmsg_lines(c, path, fd);
	while (!stopping) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n < 0 && errno == EPIPE) {
			/* the ring buffer overwrote records we had not read */
			fprintf(stderr, "kfence-report: %s: records were lost\n", path);
			kfr_parser_lost(c->parser);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			fprintf(stderr, "kfence-report: reading %s: %s\n", path, strerror(errno));
			close(fd);
			return 1;
		}
		if (n == 0)
			break;
		buf[n] = '\0';
		kmsg_record(c, buf);
	}
	close(fd);
	return 0;
}

static char *read_line_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return NULL;
	if (!fgets(buf, (int)size, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? buf : NULL;
}

static bool parse_long(const char *s, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(s, &end, 10);
	return !errno && end != s && !*end && *v >= 0;
}

int main(int argc, char **argv)
{
	enum { OPT_BOOT_ID = 256, OPT_HOST };
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "brief", no_argument, NULL, 'b' },
		{ "summary", optional_argument, NULL, 's' },
		{ "kmsg", optional_argument, NULL, 'k' },
		{ "follow", no_argument, NULL, 'f' },
		{ "cursor", required_argument, NULL, 'c' },
		{ "max-per-boot", required_argument, NULL, 'm' },
		{ "boot-id", required_argument, NULL, OPT_BOOT_ID },
		{ "host", required_argument, NULL, OPT_HOST },
		{ "stats", optional_argument, NULL, 'S' },
		{ "vmlinux", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctx c = { .format = FMT_TEXT, .max_per_boot = -1, .next_seq = -1 };
	struct kfr_parser p;
	const char *kmsg = NULL, *stats = NULL, *vmlinux = NULL;
	char boot[64], host[256], release[128];
	struct utsname un;
	bool follow = false, stats_default = false;
	long frames = -1, v;
	int opt, ret = 0;

	while ((opt = getopt_long(argc, argv, "jbs::k::fc:m:S::V:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			c.format = FMT_JSON;
			break;
		case 'b':
			c.format = FMT_BRIEF;
			break;
		case 's':
			frames = 3;
			if (optarg && (!parse_long(optarg, &frames) || !frames || frames > 16)) {
				fprintf(stderr, "kfence-report: --summary=%s: want 1 to 16 frames\n",
					optarg);
				return 2;
			}
			break;
		case 'k':
			kmsg = optarg ? optarg : "/dev/kmsg";
			break;
		case 'f':
			follow = true;
			break;
		case 'c':
			c.cursor_path = optarg;
			break;
		case 'm':
			if (!parse_long(optarg, &v)) {
				fprintf(stderr, "kfence-report: --max-per-boot %s: not a count\n", optarg);
				return 2;
			}
			c.max_per_boot = v;
			break;
		case OPT_BOOT_ID:
			c.meta.boot_id = optarg;
			break;
		case OPT_HOST:
			c.meta.host = optarg;
			break;
		case 'S':
			stats = optarg ? optarg : "/sys/kernel/debug/kfence/stats";
			stats_default = !optarg;
			break;
		case 'V':
			vmlinux = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fputs("Try 'kfence-report --help'.\n", stderr);
			return 2;
		}
	}
	if (stats)
		return kfr_stats(stdout, stats, stats_default ?
				 "/sys/module/kfence/parameters/sample_interval" : NULL,
				 c.format == FMT_JSON);
	if (c.cursor_path && !kmsg) {
		fputs("kfence-report: --cursor needs --kmsg\n", stderr);
		return 2;
	}
	if (follow && !kmsg && (argc - optind != 1 || !strcmp(argv[optind], "-"))) {
		fputs("kfence-report: --follow needs --kmsg or one FILE\n", stderr);
		return 2;
	}
	if (kmsg && optind < argc) {
		fputs("kfence-report: --kmsg reads no files\n", stderr);
		return 2;
	}
	if (follow && frames > 0) {
		fputs("kfence-report: --summary prints at the end of the input: not with --follow\n",
		      stderr);
		return 2;
	}
	if (vmlinux && !(c.syms = kfr_symbols_open(vmlinux)))
		return 1;
	if (kmsg) {
		c.live = !strcmp(kmsg, "/dev/kmsg");
		if (!c.meta.boot_id && c.live)
			c.meta.boot_id = read_line_file("/proc/sys/kernel/random/boot_id", boot,
							sizeof(boot));
		if (!c.meta.host && c.live && !gethostname(host, sizeof(host)))
			c.meta.host = host;
		if (c.live && !uname(&un)) {
			snprintf(release, sizeof(release), "%s", un.release);
			c.meta.release = release;
		}
	}
	if (c.cursor_path) {
		if (!c.meta.boot_id) {
			fputs("kfence-report: --cursor needs the boot id: give --boot-id\n", stderr);
			return 2;
		}
		if (kfr_cursor_load(&c.cursor, c.cursor_path, c.meta.boot_id) < 0)
			return 1;
	}
	if (frames > 0)
		c.buckets = kfr_buckets_new((int)frames);
	if (!c.cursor_path)
		c.cursor.next_seq = -1;
	kfr_parser_init(&p, print_report, &c);
	c.parser = &p;
	if ((kmsg && follow && c.cursor_path) || (follow && !kmsg))
		catch_stop();
	if (kmsg)
		ret = read_kmsg(&c, kmsg, follow);
	else if (follow)
		ret = follow_file(&c, argv[optind++]);
	else if (optind == argc)
		ret = read_stream(&p, stdin, "standard input");
	/* the files of one host (rotated logs, in order) are one stream */
	for (int first = optind; optind < argc; optind++) {
		if (optind > first)
			kfr_parser_next_input(&p);
		ret |= read_file(&p, argv[optind]);
	}
	/* A collector with a cursor leaves a report still being printed to
	 * its next run, which reads it again from its title.
	 */
	if (c.cursor_path) {
		/* a report that lost records cannot be read again whole */
		kfr_parser_finish_lost(&p);
		save_cursor(&c);
	} else
		kfr_parser_finish(&p);
	if (c.buckets) {
		kfr_buckets_print(stdout, c.buckets, c.format == FMT_JSON);
		kfr_buckets_free(c.buckets);
	}
	if (c.cursor.suppressed)
		fprintf(stderr, "kfence-report: %lu reports this boot not printed "
			"(--max-per-boot %ld)\n", c.cursor.suppressed, c.max_per_boot);
	kfr_parser_free(&p);
	kfr_cursor_free(&c.cursor);
	kfr_symbols_close(c.syms);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "kfence-report: writing the output: %s\n", strerror(errno));
		ret = 1;
	}
	return ret | c.status;
}

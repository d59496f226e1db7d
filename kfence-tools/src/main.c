// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-report: read KFENCE reports from /dev/kmsg or saved logs and print
 * one record per report, as text, JSON lines or one line each.
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum format { FMT_TEXT, FMT_JSON, FMT_BRIEF };

struct out {
	enum format format;
	unsigned long n;
};

static void usage(FILE *f)
{
	fputs("usage: kfence-report [--json|--brief] [FILE...]\n"
	      "       kfence-report [--json|--brief] --kmsg [--follow]\n"
	      "\n"
	      "Print one record per KFENCE report found in kernel logs: dmesg\n"
	      "output, serial console logs, syslog files (FILE, or standard input\n"
	      "when none or '-'), or the kernel's log buffer (--kmsg).\n"
	      "\n"
	      "  -j, --json    one JSON object per report and line\n"
	      "  -b, --brief   one line per report: time kind access function\n"
	      "                object cache completeness\n"
	      "  -k, --kmsg    read /dev/kmsg (root, or kernel.dmesg_restrict=0)\n"
	      "  -f, --follow  with --kmsg: keep waiting for new reports\n"
	      "  -h, --help    this text\n"
	      "\n"
	      "Exit status: 0 when the input was read (with or without reports),\n"
	      "1 when it could not be, 2 on a usage error.\n", f);
}

static void print_report(const struct kfr_report *r, void *arg)
{
	struct out *o = arg;

	o->n++;
	switch (o->format) {
	case FMT_JSON:
		kfr_print_json(stdout, r);
		break;
	case FMT_BRIEF:
		kfr_print_brief(stdout, r);
		break;
	default:
		kfr_print_text(stdout, r, o->n);
		break;
	}
	/* a follower's reader wants each report as it comes */
	fflush(stdout);
}

static int read_stream(struct kfr_parser *p, FILE *f, const char *name)
{
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;

	while (getline(&line, &cap, f) >= 0)
		kfr_parser_line(p, line);
	if (ferror(f)) {
		fprintf(stderr, "kfence-report: reading %s: %s\n", name, strerror(errno));
		ret = 1;
	}
	free(line);
	return ret;
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

/*
 * /dev/kmsg returns one record per read(): "prio,seq,usec,flags;text\n"
 * followed by " KEY=value" lines, which are not the message.
 */
static int read_kmsg(struct kfr_parser *p, bool follow)
{
	char buf[16384];
	ssize_t n;
	char *nl;
	int fd = open("/dev/kmsg", O_RDONLY | (follow ? 0 : O_NONBLOCK));

	if (fd < 0) {
		fprintf(stderr, "kfence-report: cannot open /dev/kmsg: %s%s\n", strerror(errno),
			errno == EACCES || errno == EPERM ?
			" (run as root, or set kernel.dmesg_restrict=0)" : "");
		return 1;
	}
	for (;;) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n < 0 && errno == EPIPE) {
			/* the ring buffer overwrote records we had not read */
			fprintf(stderr, "kfence-report: /dev/kmsg: records were lost\n");
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			fprintf(stderr, "kfence-report: reading /dev/kmsg: %s\n", strerror(errno));
			close(fd);
			return 1;
		}
		if (n == 0)
			break;
		buf[n] = '\0';
		nl = strchr(buf, '\n');
		if (nl)
			*nl = '\0';
		kfr_parser_line(p, buf);
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "brief", no_argument, NULL, 'b' },
		{ "kmsg", no_argument, NULL, 'k' },
		{ "follow", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct out o = { .format = FMT_TEXT };
	struct kfr_parser p;
	bool kmsg = false, follow = false;
	int c, ret = 0;

	while ((c = getopt_long(argc, argv, "jbkfh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.format = FMT_JSON;
			break;
		case 'b':
			o.format = FMT_BRIEF;
			break;
		case 'k':
			kmsg = true;
			break;
		case 'f':
			follow = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fputs("Try 'kfence-report --help'.\n", stderr);
			return 2;
		}
	}
	if (follow && !kmsg) {
		fputs("kfence-report: --follow needs --kmsg\n", stderr);
		return 2;
	}
	if (kmsg && optind < argc) {
		fputs("kfence-report: --kmsg reads no files\n", stderr);
		return 2;
	}
	kfr_parser_init(&p, print_report, &o);
	if (kmsg)
		ret = read_kmsg(&p, follow);
	else if (optind == argc)
		ret = read_stream(&p, stdin, "standard input");
	for (; optind < argc; optind++)
		ret |= read_file(&p, argv[optind]);
	kfr_parser_finish(&p);
	return ret;
}

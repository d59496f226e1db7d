// SPDX-License-Identifier: LGPL-2.1-or-later
/* fanwatch: the command line, modelled on inotifywait's. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "fw-uapi.h"
#include "watch.h"

#define DEFAULT_EVENTS (FW_MODIFY | FW_ATTRIB | FW_CLOSE_WRITE | FW_MOVED_FROM | \
			FW_MOVED_TO | FW_CREATE | FW_DELETE | FW_DELETE_SELF | \
			FW_MOVE_SELF)

enum {
	OPT_FORMAT = 256, OPT_TIMEFMT, OPT_JSON, OPT_EXCLUDE, OPT_EXCLUDEI,
	OPT_INCLUDE, OPT_INCLUDEI, OPT_FROMFILE, OPT_NO_SELF, OPT_RESCAN,
	OPT_NO_NEWLINE, OPT_UNPAIRED, OPT_PAIRED, OPT_RELATIVE,
	OPT_EXEC, OPT_SETTLE, OPT_RESTART, OPT_POSTPONE, OPT_EXIT_ON_FAIL, OPT_IGNORE_FILE,
	OPT_NO_RECURSIVE, OPT_NO_VCS_IGNORE,
};

static struct fw_exec_opts exec_opts = { .settle_ms = 100 };

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "monitor", no_argument, NULL, 'm' },
	{ "recursive", no_argument, NULL, 'r' },
	{ "no-recursive", no_argument, NULL, OPT_NO_RECURSIVE },
	{ "no-vcs-ignore", no_argument, NULL, OPT_NO_VCS_IGNORE },
	{ "event", required_argument, NULL, 'e' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "timefmt", required_argument, NULL, OPT_TIMEFMT },
	{ "csv", no_argument, NULL, 'c' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "exclude", required_argument, NULL, OPT_EXCLUDE },
	{ "excludei", required_argument, NULL, OPT_EXCLUDEI },
	{ "include", required_argument, NULL, OPT_INCLUDE },
	{ "includei", required_argument, NULL, OPT_INCLUDEI },
	{ "timeout", required_argument, NULL, 't' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "outfile", required_argument, NULL, 'o' },
	{ "fromfile", required_argument, NULL, OPT_FROMFILE },
	{ "no-self", no_argument, NULL, OPT_NO_SELF },
	{ "rescan-on-overflow", no_argument, NULL, OPT_RESCAN },
	{ "no-newline", no_argument, NULL, OPT_NO_NEWLINE },
	{ "unpaired-renames", no_argument, NULL, OPT_UNPAIRED },
	{ "paired-renames", no_argument, NULL, OPT_PAIRED },
	{ "relative", no_argument, NULL, OPT_RELATIVE },
	{ "daemon", no_argument, NULL, 'd' },
	{ "no-dereference", no_argument, NULL, 'P' },
	{ "syslog", no_argument, NULL, 's' },
	{ "exec", required_argument, NULL, OPT_EXEC },
	{ "settle", required_argument, NULL, OPT_SETTLE },
	{ "restart", no_argument, NULL, OPT_RESTART },
	{ "postpone", no_argument, NULL, OPT_POSTPONE },
	{ "exit-on-failure", no_argument, NULL, OPT_EXIT_ON_FAIL },
	{ "ignore-file", required_argument, NULL, OPT_IGNORE_FILE },
	{ 0 }
};

static void usage(FILE *f)
{
	fputs("Usage: fanwatch [options] DIR|FILE|@EXCLUDED...\n"
	      "Watch directories for changes with fanotify, as a normal user.\n\n"
	      "  -m, --monitor          keep watching (default: exit after one event)\n"
	      "  -d, --daemon           like -m, in the background; needs -o; errors to syslog\n"
	      "  -r, --recursive        watch subdirectories, including new ones\n"
	      "  -P, --no-dereference   watch a symlink given as target, not what it points to\n"
	      "  -e, --event EV[,EV]    events: access modify attrib close_write close_nowrite\n"
	      "                         close open moved_to moved_from move move_self create\n"
	      "                         delete delete_self all (default: changes only);\n"
	      "                         repeat -e to add more\n"
	      "      --format FMT       %w dir, %f name, %e events, %Xe events split by X,\n"
	      "                         %c rename cookie, %T time (--timefmt), %o old path,\n"
	      "                         %0 NUL, %n newline\n"
	      "      --timefmt FMT      strftime(3) format for %T\n"
	      "      --no-newline       no newline after each --format line\n"
	      "  -c, --csv              CSV: dir,events,name (a rename: two rows)\n"
	      "      --json             one JSON object per line (absolute paths)\n"
	      "      --relative         JSON paths as given, not made absolute\n"
	      "      --exclude RE       skip paths matching RE (--excludei: ignoring case)\n"
	      "      --include RE       report only paths matching RE (--includei)\n"
	      "  -t, --timeout SECS     exit with status 2 after SECS without an event\n"
	      "  -q, --quiet            no banners (-qq: print nothing, not even events)\n"
	      "  -o, --outfile FILE     append events to FILE instead of stdout\n"
	      "      --fromfile FILE    read targets from FILE ('-': stdin), '@PATH' excludes\n"
	      "      --no-self          drop events caused by fanwatch itself\n"
	      "      --rescan-on-overflow  after a queue overflow, report what a rescan finds\n"
	      "      --paired-renames   text: one 'MOVED_FROM,MOVED_TO new <- old' line\n"
	      "      --unpaired-renames take the kernel's MOVED_FROM/MOVED_TO, not FAN_RENAME\n"
	      "      --ignore-file FILE .gitignore rules, relative to FILE's directory\n"
	      "      --exec CMD         run sh -c CMD on changes; changed paths in \"$@\"\n"
	      "                         and $FANWATCH_PATHS (one a line); implies -m and\n"
	      "                         -r; its own session (no terminal), stdin\n"
	      "                         /dev/null; .git/ and git's ignore files apply\n"
	      "      --no-recursive     with --exec: only the directories given\n"
	      "      --no-vcs-ignore    with --exec: no git ignore files, .git/ watched\n"
	      "      --settle MS        wait until MS ms without a change (default 100)\n"
	      "      --restart          a change during a run stops it and runs again\n"
	      "      --postpone         no run at start, only on the first change\n"
	      "      --exit-on-failure  end with the command's status when it fails\n"
	      "  -h, --help             this help\n\n"
	      "Exit status: 0 event seen or normal end, 1 error, 2 timeout.\n", f);
}

struct roots {
	char **v;
	size_t n, cap;
};

static void roots_add(struct roots *r, const char *s)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 8;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
	}
	if (!r->v || !(r->v[r->n++] = strdup(s))) {
		fw_err("out of memory");
		exit(1);
	}
}

/* A target, or "@PATH": that path and what is below it are left out. */
static int add_target(struct roots *r, struct fw_opts *o, const char *s)
{
	if (s[0] != '@') {
		roots_add(r, s);
		return 0;
	}
	if (fw_filter_add_path(&o->filter, s + 1)) {
		fw_err("out of memory");
		return -1;
	}
	return 0;
}

/* --fromfile: one target a line, as on the command line. */
static int read_fromfile(const char *file, struct roots *r, struct fw_opts *o)
{
	FILE *f = strcmp(file, "-") ? fopen(file, "re") : stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	if (!f) {
		fw_err("cannot read --fromfile '%s': %s", file, strerror(errno));
		return -1;
	}
	while (!ret && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (n)
			ret = add_target(r, o, line);
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return ret;
}

static int set_filter(struct fw_opts *o, int opt, const char *re)
{
	char err[128];
	bool inc = opt == OPT_INCLUDE || opt == OPT_INCLUDEI;
	bool icase = opt == OPT_EXCLUDEI || opt == OPT_INCLUDEI;

	if (!fw_filter_add(&o->filter, inc, icase, re, err, sizeof(err)))
		return 0;
	fw_err("bad regular expression '%s': %s", re, err);
	return -1;
}

static int parse_timeout(const char *s, int *t)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > 86400 * 365) {
		fw_err("bad --timeout '%s': give whole seconds (0 = none)", s);
		return -1;
	}
	*t = (int)v;
	return 0;
}

static int parse_ms(const char *s, int *ms)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > 3600000) {
		fw_err("bad --settle '%s': give milliseconds", s);
		return -1;
	}
	*ms = (int)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct fw_opts *o, struct roots *r)
{
	const char *outfile = NULL, *bad;
	bool no_recursive = false, no_vcs = false;
	size_t badlen;
	uint32_t m;
	int opt;

	o->events = 0;
	while ((opt = getopt_long(argc, argv, "hmdPsre:ct:qo:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'h': usage(stdout); exit(0);
		case 'm': o->monitor = true; break;
		case 'd': o->daemon = o->monitor = true; break;
		case 'P': o->no_deref = true; break;
		case 's': break;	/* inotifywait's --syslog: -d implies it here */
		case OPT_PAIRED: o->paired_text = true; break;
		case OPT_RELATIVE: o->relative = true; break;
		case OPT_EXEC: exec_opts.cmd = optarg; o->monitor = true; break;
		case OPT_NO_RECURSIVE: no_recursive = true; break;
		case OPT_NO_VCS_IGNORE: no_vcs = true; break;
		case OPT_RESTART: exec_opts.restart = true; break;
		case OPT_POSTPONE: exec_opts.postpone = true; break;
		case OPT_EXIT_ON_FAIL: exec_opts.exit_on_fail = true; break;
		case OPT_SETTLE:
			if (parse_ms(optarg, &exec_opts.settle_ms))
				return -1;
			break;
		case OPT_IGNORE_FILE:
			if ((errno = -fw_filter_add_ignore_file(&o->filter, optarg))) {
				fw_err("cannot read --ignore-file '%s': %s", optarg, strerror(errno));
				return -1;
			}
			break;
		case 'r': o->recursive = true; break;
		case 'c': o->fmt.style = FW_STYLE_CSV; break;
		case 'q': o->quiet++; break;
		case 'o': outfile = optarg; break;
		case OPT_JSON: o->fmt.style = FW_STYLE_JSON; break;
		case OPT_FORMAT: o->fmt.format = optarg; break;
		case OPT_TIMEFMT: o->fmt.timefmt = optarg; break;
		case OPT_NO_NEWLINE: o->fmt.no_newline = true; break;
		case OPT_NO_SELF: o->no_self = true; break;
		case OPT_RESCAN: o->rescan = true; break;
		case OPT_UNPAIRED: o->unpaired = true; break;
		case 't':
			if (parse_timeout(optarg, &o->timeout))
				return -1;
			break;
		case 'e':
			/* Each -e adds, as inotifywait's do. */
			m = fw_parse_events(optarg, &bad, &badlen);
			o->events |= m;
			if (!m) {
				fw_err("unknown event '%.*s' in -e %s (see fanwatch --help)",
				       (int)badlen, bad, optarg);
				return -1;
			}
			break;
		case OPT_EXCLUDE: case OPT_EXCLUDEI: case OPT_INCLUDE: case OPT_INCLUDEI:
			if (set_filter(o, opt, optarg))
				return -1;
			break;
		case OPT_FROMFILE:
			if (read_fromfile(optarg, r, o))
				return -1;
			break;
		default:
			fputs("Try 'fanwatch --help'.\n", stderr);
			return -1;
		}
	}
	/* "@PATH" among the targets excludes, as inotifywait's @<file>. */
	for (; optind < argc; optind++)
		if (add_target(r, o, argv[optind]))
			return -1;
	if (!o->events)
		o->events = DEFAULT_EVENTS;
	/* Refused as inotifywait refuses them. */
	if (o->fmt.format && o->fmt.style == FW_STYLE_CSV) {
		fw_err("-c and --format cannot both be specified");
		return -1;
	}
	if (o->fmt.format && o->fmt.style == FW_STYLE_JSON) {
		fw_err("--json and --format cannot both be specified");
		return -1;
	}
	if (o->fmt.timefmt && !o->fmt.format) {
		fw_err("--timefmt cannot be specified without --format");
		return -1;
	}
	if (fw_format_wants_time(o->fmt.format) && !o->fmt.timefmt) {
		fw_err("%%T is in --format string, but --timefmt was not specified");
		return -1;
	}
	if ((exec_opts.restart || exec_opts.postpone || exec_opts.exit_on_fail ||
	     no_recursive || no_vcs) && !exec_opts.cmd) {
		fw_err("--restart, --postpone, --exit-on-failure, --no-recursive and --no-vcs-ignore go with --exec CMD");
		return -1;
	}
	/* What a run-on-change tool is for: a project tree, as watchexec. */
	if (exec_opts.cmd) {
		o->recursive = !no_recursive;
		if (!no_vcs && (errno = -fw_filter_add_vcs(&o->filter))) {
			fw_err("--exec: %s", strerror(errno));
			return -1;
		}
	}
	if (o->daemon && !outfile) {
		fw_err("-d/--daemon needs -o/--outfile (its standard output is closed)");
		return -1;
	}
	if (!r->n) {
		fw_err("no directory to watch given (try 'fanwatch --help')");
		return -1;
	}
	o->out = stdout;
	if (outfile && !(o->out = fopen(outfile, "ae"))) {
		fw_err("cannot open --outfile '%s': %s", outfile, strerror(errno));
		return -1;
	}
	return 0;
}

/* JSON paths are absolute unless --relative: roots and @PATHs resolved. */
static void absolute_paths(struct fw_opts *o, struct roots *r)
{
	size_t i;
	char *p;

	for (i = 0; i < r->n; i++) {
		if (r->v[i][0] == '/' || !(p = realpath(r->v[i], NULL)))
			continue;
		free(r->v[i]);
		r->v[i] = p;
	}
	for (i = 0; i < o->filter.npaths; i++) {
		if (o->filter.paths[i][0] == '/' || !(p = realpath(o->filter.paths[i], NULL)))
			continue;
		free(o->filter.paths[i]);
		o->filter.paths[i] = p;
	}
}

/*
 * -d: once the watches are in place (so a script may go on at once), the
 * parent exits 0 and the child carries on in a new session, its messages
 * in syslog, as inotifywait's --daemon.
 */
static int daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0) {
		fw_err("cannot fork for --daemon: %s", strerror(errno));
		return -1;
	}
	if (pid > 0)
		_exit(0);
	setsid();
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	fw_log_to_syslog();
	return 0;
}

int main(int argc, char **argv)
{
	static char obuf[1 << 16];
	struct fw_opts o = { 0 };
	struct roots r = { 0 };
	struct fw_ctx c = { .fan = -1 };
	size_t i;
	int ret = 1;

	if (parse_args(argc, argv, &o, &r))
		goto out;
	if (o.fmt.style == FW_STYLE_JSON && !o.relative)
		absolute_paths(&o, &r);
	setvbuf(o.out, obuf, _IOFBF, sizeof(obuf));
	if (fw_open(&c, &o))
		goto out;
	if (exec_opts.cmd && fw_exec_setup(&c, &exec_opts))
		goto out;
	if (!o.quiet)
		fprintf(stderr, "Setting up watches.%s\n", o.recursive ?
			"  Beware: since -r was given, this may take a while!" : "");
	for (i = 0; i < r.n; i++)
		if (fw_add_root(&c, r.v[i]))
			goto out;
	fw_setup_done(&c);
	if (!o.quiet)
		fprintf(stderr, "Watches established.\n");
	if (o.daemon && daemonize())
		goto out;
	ret = fw_run(&c);
out:
	if (o.out)
		fflush(o.out);
	fw_close(&c);
	for (i = 0; i < r.n; i++)
		free(r.v[i]);
	free(r.v);
	fw_filter_free(&o.filter);
	return ret;
}

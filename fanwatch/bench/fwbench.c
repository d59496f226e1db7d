// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * fwbench: fanwatch against fsnotifywait -F and inotifywait -m -r on the
 * same workload.  The generator is in-process and issues the syscalls
 * directly (openat/write/close, renameat, unlinkat on fds of the 1000
 * directories), so the watchers, not the generator, are the bottleneck.
 *
 *   fwbench [--fanwatch PATH] [--dirs N] [--files N] [--rate OPS] [--overflow]
 *           [--setup TREE] [--base DIR] [--jobs N] [--repeat N]
 *
 * Run it as the user the watchers should run as (run-bench.sh uses nobody).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#define EVENTS "create,modify,close_write,move,delete"
#define PER_FILE 6	/* CREATE MODIFY CLOSE_WRITE MOVED_FROM MOVED_TO DELETE */

enum tool { NONE, FANWATCH, FSNOTIFYWAIT, INOTIFYWAIT, NTOOLS, FANWATCH_RESCAN = NTOOLS };
static const char *tool_name[] = { "none", "fanwatch", "fsnotifywait -F", "inotifywait",
				   "fanwatch --rescan-on-overflow" };

static const char *fanwatch = "fanwatch";
static int ndirs = 1000, nfiles = 100000;
static long rate = 20000;		/* ops per second, 0 = as fast as possible */
static int jobs = 1;			/* generator processes */
static int repeat = 1;			/* runs per tool; the cheapest is shown */
static const char *base = "/tmp";	/* where the workload tree goes */
static char root[4096], outdir[64];
static int *dfd;

struct result {
	double gen_wall, gen_cpu;	/* generator */
	double w_cpu;			/* watcher user+sys */
	long delivered, overflows, scans;
	int status;			/* watcher exit status, -1 still running at end */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Keep to `rate` operations a second: sleep until op k is due. */
static void pace(long k, double start, long jobrate)
{
	double due;
	struct timespec ts;

	if (!jobrate || k % 64)
		return;
	due = start + (double)k / jobrate - now();
	if (due > 0.0005) {
		ts.tv_sec = (time_t)due;
		ts.tv_nsec = (long)((due - ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

/* One generator process: files job, job + jobs, ... through three phases. */
static void generate(int job)
{
	static const char data[64] = "fwbench data";
	double t0 = now();
	long i, k = 0, jobrate = rate / jobs;
	char a[32], b[32];

	for (i = job; i < nfiles; i += jobs, k++) {
		int fd;

		pace(k, t0, jobrate);
		snprintf(a, sizeof(a), "f%ld", i);
		fd = openat(dfd[i % ndirs], a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, data, sizeof(data)) != sizeof(data))
			die("create");
		close(fd);
	}
	for (i = job; i < nfiles; i += jobs, k++) {
		pace(k, t0, jobrate);
		snprintf(a, sizeof(a), "f%ld", i);
		snprintf(b, sizeof(b), "g%ld", i);
		if (renameat(dfd[i % ndirs], a, dfd[i % ndirs], b))
			die("rename");
	}
	for (i = job; i < nfiles; i += jobs, k++) {
		pace(k, t0, jobrate);
		snprintf(b, sizeof(b), "g%ld", i);
		if (unlinkat(dfd[i % ndirs], b, 0))
			die("unlink");
	}
}

static double cpu_children(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/*
 * The generator runs as `jobs` child processes; the watcher is reaped
 * only later, so the RUSAGE_CHILDREN delta is the generators' alone.
 */
static void workload(struct result *r)
{
	double t0 = now(), c0 = cpu_children();
	int j;

	pid_t pid[64];

	for (j = 0; j < jobs; j++) {
		pid[j] = fork();
		if (pid[j] < 0)
			die("fork");
		if (!pid[j]) {
			generate(j);
			_exit(0);
		}
	}
	for (j = 0; j < jobs; j++) {
		int st;

		if (waitpid(pid[j], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			die("generator");
	}
	r->gen_wall = now() - t0;
	r->gen_cpu = cpu_children() - c0;
}

static void make_tree(void)
{
	char name[32];
	int i, rfd;

	snprintf(root, sizeof(root), "%s/fwbench.XXXXXX", base);
	strcpy(outdir, "/tmp/fwbench-out.XXXXXX");
	if (!mkdtemp(root) || !mkdtemp(outdir))
		die("mkdtemp");
	rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dfd = calloc(ndirs, sizeof(*dfd));
	if (rfd < 0 || !dfd)
		die(root);
	for (i = 0; i < ndirs; i++) {
		snprintf(name, sizeof(name), "d%03d", i);
		if (mkdirat(rfd, name, 0755))
			die(name);
		dfd[i] = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd[i] < 0)
			die(name);
	}
	close(rfd);
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st, (void)type, (void)f;
	return remove(p) && errno != ENOENT;
}

static void cleanup(void)
{
	if (root[0])
		nftw(root, rm_one, 64, FTW_DEPTH | FTW_PHYS);
	if (outdir[0])
		nftw(outdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

struct watcher {
	pid_t pid;
	int err;
	char out[128];
};

static void tool_argv(enum tool t, const char *dir, const char **argv)
{
	int n = 0;

	if (t == FANWATCH || t == FANWATCH_RESCAN) {
		argv[n++] = fanwatch;
		if (t == FANWATCH_RESCAN)
			argv[n++] = "--rescan-on-overflow";
	} else if (t == FSNOTIFYWAIT) {
		argv[n++] = "fsnotifywait";
		argv[n++] = "-F";
	} else {
		argv[n++] = "inotifywait";
	}
	argv[n++] = "-m";
	argv[n++] = "-r";
	argv[n++] = "-e";
	argv[n++] = EVENTS;
	argv[n++] = "--format";
	argv[n++] = "%w%f %e";
	argv[n++] = dir;
	argv[n] = NULL;
}

/* Start a watcher on dir and wait for its "Watches established." line. */
static double start_watcher(struct watcher *w, enum tool t, const char *dir)
{
	const char *argv[16];
	char buf[4096];
	size_t len = 0;
	double t0 = now();
	int e[2], out;

	tool_argv(t, dir, argv);
	snprintf(w->out, sizeof(w->out), "%s/%d.out", outdir, (int)t);
	out = open(w->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0 || pipe2(e, O_CLOEXEC))
		die("watcher output");
	w->pid = fork();
	if (!w->pid) {
		dup2(out, 1);
		dup2(e[1], 2);
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
	close(out);
	close(e[1]);
	w->err = e[0];
	for (;;) {
		struct pollfd p = { .fd = w->err, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 600000) <= 0)
			break;
		n = read(w->err, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += n;
		buf[len] = '\0';
		if (strstr(buf, "Watches established."))
			return now() - t0;
		if (len > sizeof(buf) / 2)
			len = 0;
	}
	fprintf(stderr, "fwbench: %s did not start: %s\n", tool_name[t], buf);
	exit(1);
}

static off_t size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

/* Wait until the output stops growing, then stop the watcher. */
static void stop_watcher(struct watcher *w, struct result *r)
{
	off_t last = -1, s;
	double stable = now();
	struct rusage ru;
	int st;

	r->status = -1;
	while (now() - stable < 1.5) {
		usleep(100000);
		s = size_of(w->out);
		if (s != last) {
			last = s;
			stable = now();
		}
		if (wait4(w->pid, &st, WNOHANG, &ru) == w->pid) {
			r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
	}
	if (r->status == -1) {
		kill(w->pid, SIGTERM);
		wait4(w->pid, &st, 0, &ru);
	}
	close(w->err);
	r->w_cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		   ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static bool is_event(const char *w, size_t n)
{
	static const char *const names[] = { "CREATE", "MODIFY", "CLOSE_WRITE",
					     "MOVED_FROM", "MOVED_TO", "DELETE" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !memcmp(w, names[i], n))
			return true;
	return false;
}

/* Count event names in the last field of each line, and overflow marks. */
static void count(const char *path, struct result *r)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	r->delivered = r->overflows = r->scans = 0;
	if (!f)
		return;
	while ((n = getline(&line, &cap, f)) > 0) {
		char *ev = strrchr(line, ' '), *w;

		if (strstr(line, "OVERFLOW"))
			r->overflows++;
		if (strstr(line, ",SCAN"))
			r->scans++;
		if (!ev)
			continue;
		for (w = ev + 1; *w && *w != '\n';) {
			size_t k = strcspn(w, ",\n");

			r->delivered += is_event(w, k);
			w += k + (w[k] == ',');
		}
	}
	free(line);
	fclose(f);
}

/* Watcher CPU per 1000 events it delivered (a watcher that quit early
 * handled fewer events; dividing by the expected count would flatter it). */
static double per_kevent(const struct result *r)
{
	return r->delivered ? r->w_cpu / (r->delivered / 1000.0) : 0;
}

static struct result run_once(enum tool t)
{
	struct result r = { 0 };
	struct watcher w;

	if (t != NONE)
		start_watcher(&w, t, root);
	workload(&r);
	if (t != NONE) {
		stop_watcher(&w, &r);
		count(w.out, &r);
		unlink(w.out);
	}
	return r;
}

/*
 * Other load on the machine only ever adds CPU time: of `repeat` runs the
 * cheapest is shown, but the most events lost in any of them.
 */
static struct result run_one(enum tool t)
{
	struct result best = run_once(t), r;
	int i;

	for (i = 1; i < repeat; i++) {
		r = run_once(t);
		if (r.delivered < best.delivered)
			best.delivered = r.delivered, best.overflows = r.overflows,
			best.status = r.status;
		if (t == NONE ? r.gen_cpu < best.gen_cpu : per_kevent(&r) < per_kevent(&best)) {
			r.delivered = best.delivered;
			r.overflows = best.overflows;
			r.status = best.status;
			best = r;
		}
	}
	return best;
}

static void print_row(enum tool t, const struct result *r, const struct result *base)
{
	long expected = (long)nfiles * PER_FILE;
	long lost = expected > r->delivered ? expected - r->delivered : 0;
	bool odd = lost || r->overflows || r->status >= 0;

	if (t == NONE) {
		printf("%-16s %10s %10s %9s %8s %11s %9.2f %9.2f %7s\n", tool_name[t],
		       "-", "-", "-", "-", "-", r->gen_wall, r->gen_cpu, "1.00");
		return;
	}
	printf("%-16s %10ld %10ld %9ld %8.2f %11.4f %9.2f %9.2f %7.2f%s\n",
	       tool_name[t], expected, r->delivered,
	       lost, r->w_cpu, per_kevent(r), r->gen_wall, r->gen_cpu,
	       r->gen_cpu / base->gen_cpu, odd ? "  (!)" : "");
	if (!odd)
		return;
	if (r->status >= 0)
		printf("%16s overflow lines: %ld; the watcher exited with status %d\n", "",
		       r->overflows, r->status);
	else
		printf("%16s overflow lines: %ld; the watcher kept running%s\n", "",
		       r->overflows, lost && !r->overflows ? ", events lost silently" : "");
}

static void header(void)
{
	printf("%-16s %10s %10s %9s %8s %11s %9s %9s %7s\n", "watcher", "expected",
	       "delivered", "lost", "cpu s", "cpu s/1k ev", "gen wall", "gen cpu",
	       "gen x");
}

static void compare(void)
{
	struct result r[NTOOLS];
	int t;

	printf("workload: %d files in %d dirs under %s: create+write, rename, delete = %ld events; %d generator%s, rate %ld ops/s%s; best of %d\n",
	       nfiles, ndirs, base, (long)nfiles * PER_FILE, jobs, jobs > 1 ? "s" : "",
	       rate, rate ? "" : " (unthrottled)", repeat);
	header();
	for (t = NONE; t < NTOOLS; t++) {
		r[t] = run_one(t);
		print_row(t, &r[t], &r[NONE]);
		fflush(stdout);
	}
	if (per_kevent(&r[FSNOTIFYWAIT]) > 0 && per_kevent(&r[INOTIFYWAIT]) > 0)
		printf("ratios (cpu per delivered event): fanwatch / fsnotifywait = %.2f (target <= 0.50), fanwatch / inotifywait = %.2f (target <= 1.00)\n\n",
		       per_kevent(&r[FANWATCH]) / per_kevent(&r[FSNOTIFYWAIT]),
		       per_kevent(&r[FANWATCH]) / per_kevent(&r[INOTIFYWAIT]));
}

/*
 * The queue overflowing for sure: each watcher is stopped (SIGSTOP) for
 * the whole workload and resumed after it.  What does each do then?
 */
static void stalled(void)
{
	static const enum tool tools[] = { FANWATCH, FANWATCH_RESCAN, FSNOTIFYWAIT, INOTIFYWAIT };
	size_t i;

	printf("stalled watchers: stopped during the workload (%ld events), resumed after it\n",
	       (long)nfiles * PER_FILE);
	printf("%-31s %10s %14s %10s %s\n", "watcher", "delivered", "overflow lines",
	       "SCAN lines", "afterwards");
	for (i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		struct result r = { 0 };
		struct watcher w;

		start_watcher(&w, tools[i], root);
		kill(w.pid, SIGSTOP);
		workload(&r);
		kill(w.pid, SIGCONT);
		stop_watcher(&w, &r);
		count(w.out, &r);
		unlink(w.out);
		printf("%-31s %10ld %14ld %10ld ", tool_name[tools[i]], r.delivered,
		       r.overflows, r.scans);
		if (r.status >= 0)
			printf("exited with status %d\n", r.status);
		else
			printf("kept running\n");
		fflush(stdout);
	}
	printf("\n");
}

static int dirs_seen;

static int count_dir(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)p, (void)st, (void)f;
	dirs_seen += type == FTW_D;
	return 0;
}

static void setup_time(const char *tree)
{
	double t[NTOOLS] = { 0 };
	struct result r;
	int i;

	nftw(tree, count_dir, 64, FTW_PHYS);
	printf("recursive watch setup on %s (%d directories), seconds until \"Watches established.\":\n",
	       tree, dirs_seen);
	for (i = FANWATCH; i < NTOOLS; i++) {
		struct watcher w;

		t[i] = start_watcher(&w, i, tree);
		stop_watcher(&w, &r);
		unlink(w.out);
		printf("  %-16s %8.3f s  (watcher cpu %.3f s)\n", tool_name[i], t[i], r.w_cpu);
	}
	printf("ratios: inotifywait / fanwatch = %.2f, fsnotifywait / fanwatch = %.2f (target > 1)\n\n",
	       t[INOTIFYWAIT] / t[FANWATCH], t[FSNOTIFYWAIT] / t[FANWATCH]);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fanwatch", required_argument, NULL, 'f' },
		{ "dirs", required_argument, NULL, 'd' },
		{ "files", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' },
		{ "overflow", no_argument, NULL, 'o' },
		{ "setup", required_argument, NULL, 's' },
		{ "base", required_argument, NULL, 'b' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "repeat", required_argument, NULL, 'R' },
		{ 0 }
	};
	const char *tree = NULL;
	bool overflow = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f': fanwatch = optarg; break;
		case 'd': ndirs = atoi(optarg); break;
		case 'n': nfiles = atoi(optarg); break;
		case 'r': rate = atol(optarg); break;
		case 'o': overflow = true; break;
		case 's': tree = optarg; break;
		case 'b': base = optarg; break;
		case 'j': jobs = atoi(optarg); break;
		case 'R': repeat = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: fwbench [--fanwatch PATH] [--dirs N] [--files N] [--rate OPS/s] [--overflow] [--setup TREE] [--base DIR] [--jobs N] [--repeat N]\n");
			return 1;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (tree) {
		strcpy(outdir, "/tmp/fwbench-out.XXXXXX");
		if (!mkdtemp(outdir))
			die("mkdtemp");
		setup_time(tree);
		cleanup();
		return 0;
	}
	if (ndirs < 1 || nfiles < 1 || jobs < 1 || jobs > 64 || repeat < 1)
		return 1;
	make_tree();
	if (!overflow) {
		compare();
	} else {
		/* Paced, then unpaced with more and more generator processes. */
		static const long rates[] = { 50000, 0, 0, 0, 0 };
		static const int njobs[] = { 1, 1, 2, 4, 8 };
		size_t i;

		for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
			rate = rates[i];
			jobs = njobs[i];
			compare();
		}
		jobs = 1;
		stalled();
	}
	cleanup();
	return 0;
}

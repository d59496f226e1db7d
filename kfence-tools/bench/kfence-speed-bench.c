// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-speed-bench: kfence-report against grep -c 'BUG: KFENCE' on the
 * same big, sparse log, in one sitting. It writes the log (--mb MiB of
 * ordinary kernel lines with one copy of the given report log every
 * --every lines), checks that both find the same number of reports, then
 * runs grep and kfence-report --json (or --mode summary: --summary, the
 * fleet's mode) alternately --runs times and prints
 * each pair's CPU time (user + system of the child, which a busy machine
 * disturbs less than wall time) and wall time, then min/median/max of the
 * ratio grep time / kfence-report time (1.0: as fast as grep; the goal is
 * at least 0.5).
 *
 * usage: kfence-speed-bench [--mb N] [--runs R] [--every L] [--dir D]
 *                           [--mode json|summary] [--kfence-report PATH] LOG
 */
#include "bench-util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f) {
		fprintf(stderr, "kfence-speed-bench: cannot open '%s': %s\n", path, strerror(errno));
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "kfence-speed-bench: cannot read '%s'\n", path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The log: noise lines with a copy of @rep every @every lines. */
static unsigned long write_log(const char *path, const char *rep, size_t rlen,
			       unsigned long rep_reports, size_t bytes, unsigned long every)
{
	FILE *f = fopen(path, "w");
	unsigned long line = 0, reports = 0;
	size_t written = 0;
	double ts = 5.0;

	if (!f) {
		fprintf(stderr, "kfence-speed-bench: cannot write '%s': %s\n", path, strerror(errno));
		exit(1);
	}
	while (written < bytes) {
		if (++line % every == 0) {
			fwrite(rep, 1, rlen, f);
			written += rlen;
			reports += rep_reports;
			continue;
		}
		ts += 0.000731;
		written += (size_t)fprintf(f, "[%12.6f] %s\n", ts, bench_noise[line % BENCH_N_NOISE]);
	}
	if (fclose(f)) {
		fprintf(stderr, "kfence-speed-bench: writing '%s' failed\n", path);
		exit(1);
	}
	return reports;
}

struct cost {
	double cpu, wall;
};

/* Run argv with stdout to @out (a path) and return its CPU and wall time. */
static struct cost run(char *const argv[], const char *out)
{
	struct rusage ru;
	struct cost c;
	double t0 = bench_now();
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (!pid) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(127);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0) {
		perror("wait4");
		exit(1);
	}
	c.wall = bench_now() - t0;
	c.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
		fprintf(stderr, "kfence-speed-bench: %s failed (status %d)\n", argv[0], status);
		exit(1);
	}
	return c;
}

static unsigned long count_lines(const char *path, const char *prefix)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	unsigned long n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += !strncmp(line, prefix, strlen(prefix));
	fclose(f);
	return n;
}

static void summary(const char *what, double *v, int n)
{
	bench_sort(v, n);
	printf("%-34s %8.2f %8.2f %8.2f\n", what, v[0], v[n / 2], v[n - 1]);
}

int main(int argc, char **argv)
{
	long mb = 200, runs = 7, every = 20000;
	const char *dir = "/tmp", *kr = NULL, *log = NULL, *mode = "--json";
	char label[64];
	char path[4096], out[4096], krbuf[4096], *rep, *self;
	size_t rlen;
	unsigned long rep_reports = 0, want;
	double *cpu_ratio, *wall_ratio, *grep_mb, *kfr_mb, mib;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mb") && i + 1 < argc)
			mb = atol(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atol(argv[++i]);
		else if (!strcmp(argv[i], "--every") && i + 1 < argc)
			every = atol(argv[++i]);
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--kfence-report") && i + 1 < argc)
			kr = argv[++i];
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = !strcmp(argv[++i], "summary") ? "--summary" : "--json";
		else if (argv[i][0] != '-' && !log)
			log = argv[i];
		else {
			fputs("usage: kfence-speed-bench [--mb N] [--runs R] [--every L] [--dir D] "
			      "[--mode json|summary] [--kfence-report PATH] LOG\n", stderr);
			return 2;
		}
	}
	if (!log || mb < 1 || runs < 1 || every < 2) {
		fputs("kfence-speed-bench: want a report log, --mb >= 1, --runs >= 1, --every >= 2\n",
		      stderr);
		return 2;
	}
	if (!kr) {
		/* the kfence-report built next to this program */
		self = strdup(argv[0]);
		snprintf(krbuf, sizeof(krbuf), "%s/kfence-report", dirname(self));
		free(self);
		kr = krbuf;
	}
	rep = slurp(log, &rlen);
	for (char *s = rep; (s = strstr(s, "BUG: KFENCE")); s++)
		rep_reports++;
	snprintf(path, sizeof(path), "%s/kfence-speed-bench.%d.log", dir, (int)getpid());
	snprintf(out, sizeof(out), "%s/kfence-speed-bench.%d.out", dir, (int)getpid());
	want = write_log(path, rep, rlen, rep_reports, (size_t)mb << 20, (unsigned long)every);
	mib = (double)mb;

	/* both must find every report (this run also warms the page cache) */
	{
		char *g[] = { "grep", "-c", "BUG: KFENCE", path, NULL };
		char *k[] = { (char *)kr, "--brief", path, NULL };
		unsigned long got_grep, got_kr;
		FILE *f;

		run(g, out);
		f = fopen(out, "r");
		if (!f || fscanf(f, "%lu", &got_grep) != 1)
			got_grep = 0;
		if (f)
			fclose(f);
		run(k, out);
		got_kr = count_lines(out, "");
		printf("log: %ld MiB, a report log of %lu reports every %ld lines: %lu reports; "
		       "grep -c finds %lu, kfence-report %lu\n", mb, rep_reports, every, want,
		       got_grep, got_kr);
		if (got_grep != want || got_kr != want) {
			fputs("kfence-speed-bench: the counts differ\n", stderr);
			unlink(path);
			unlink(out);
			return 1;
		}
	}
	cpu_ratio = calloc((size_t)runs, sizeof(double));
	wall_ratio = calloc((size_t)runs, sizeof(double));
	grep_mb = calloc((size_t)runs, sizeof(double));
	kfr_mb = calloc((size_t)runs, sizeof(double));
	printf("%-4s %12s %12s %12s %12s %10s %10s\n", "run", "grep cpu s", "kfr cpu s",
	       "grep wall s", "kfr wall s", "cpu ratio", "wall ratio");
	for (long i = 0; i < runs; i++) {
		char *g[] = { "grep", "-c", "BUG: KFENCE", path, NULL };
		char *k[] = { (char *)kr, (char *)mode, path, NULL };
		struct cost cg, ck;

		/* alternate who goes first: neither always gets the quieter
		 * moment. Output to a file: GNU grep stops at the first match
		 * when its output is /dev/null.
		 */
		if (i % 2) {
			ck = run(k, out);
			cg = run(g, out);
		} else {
			cg = run(g, out);
			ck = run(k, out);
		}
		cpu_ratio[i] = cg.cpu / (ck.cpu > 1e-6 ? ck.cpu : 1e-6);
		wall_ratio[i] = cg.wall / ck.wall;
		grep_mb[i] = mib / (cg.cpu > 1e-6 ? cg.cpu : 1e-6);
		kfr_mb[i] = mib / (ck.cpu > 1e-6 ? ck.cpu : 1e-6);
		printf("%-4ld %12.3f %12.3f %12.3f %12.3f %10.2f %10.2f\n", i + 1, cg.cpu, ck.cpu,
		       cg.wall, ck.wall, cpu_ratio[i], wall_ratio[i]);
	}
	printf("%-34s %8s %8s %8s\n", "", "min", "median", "max");
	summary("grep -c MiB/s (CPU)", grep_mb, (int)runs);
	snprintf(label, sizeof(label), "kfence-report %s MiB/s (CPU)", mode);
	summary(label, kfr_mb, (int)runs);
	summary("ratio grep/kfence-report (CPU)", cpu_ratio, (int)runs);
	summary("ratio grep/kfence-report (wall)", wall_ratio, (int)runs);
	unlink(path);
	unlink(out);
	free(rep);
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-parse-bench: how fast kfence-report's parser reads a kernel log,
 * against the cheapest scan that finds the same reports -- a grep-level
 * strstr() for "BUG: KFENCE: " over the same lines, in the same process,
 * in the same sitting -- and against grep(1) itself (grep -c -F on the same
 * bytes in a file, which also reads the file). The log is the given files repeated to --mb MiB
 * (default: the golden drill and KUnit logs, whose density of reports is
 * far above a real machine's: the worst case for the parser).
 *
 * --noise N adds N ordinary kernel lines after each copy of the logs, for
 * the density of a real machine (a report among thousands of lines).
 *
 * usage: kfence-parse-bench [--mb N] [--runs R] [--noise N] LOG...
 * Prints each run, then min/median/max of MB/s, reports/s and the ratio.
 */
#include "bench-util.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *load(int argc, char **argv, size_t want, size_t *len, unsigned long noise_n)
{
	char *one = NULL, *buf;
	size_t olen = 0, n = 0;

	for (int i = 0; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		long sz;

		if (!f) {
			perror(argv[i]);
			exit(1);
		}
		fseek(f, 0, SEEK_END);
		sz = ftell(f);
		rewind(f);
		one = realloc(one, olen + (size_t)sz);
		if (!one || fread(one + olen, 1, (size_t)sz, f) != (size_t)sz)
			exit(1);
		olen += (size_t)sz;
		fclose(f);
	}
	for (unsigned long k = 0; k < noise_n; k++) {
		char l[256];
		int m = snprintf(l, sizeof(l), "[%5lu.%06lu] %s\n", 100 + k / 1000,
				 k % 1000000, bench_noise[k % BENCH_N_NOISE]);

		one = realloc(one, olen + (size_t)m);
		if (!one)
			exit(1);
		memcpy(one + olen, l, (size_t)m);
		olen += (size_t)m;
	}
	if (!olen) {
		fputs("kfence-parse-bench: the logs are empty\n", stderr);
		exit(1);
	}
	buf = malloc(want + olen + 1);
	if (!buf)
		exit(1);
	while (n < want) {
		memcpy(buf + n, one, olen);
		n += olen;
	}
	buf[n] = '\0';
	free(one);
	*len = n;
	return buf;
}

static void count(const struct kfr_report *r, void *arg)
{
	(void)r;
	++*(unsigned long *)arg;
}

/* Both passes split lines the same way (getline's work), then differ. */
static unsigned long pass(char *buf, size_t len, bool parse)
{
	struct kfr_parser p;
	unsigned long found = 0;
	char *line = buf, *end = buf + len, *nl;

	if (parse)
		kfr_parser_init(&p, count, &found);
	for (; line < end; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(end - line));
		if (!nl)
			nl = end;
		*nl = '\0';
		if (parse)
			kfr_parser_line(&p, line);
		else if (strstr(line, "BUG: KFENCE: "))
			found++;
		*nl = '\n';
	}
	if (parse) {
		kfr_parser_finish(&p);
		kfr_parser_free(&p);
	}
	return found;
}

static void stat3(const char *what, double *v, int n)
{
	bench_sort(v, n);
	printf("%-26s min %10.1f  median %10.1f  max %10.1f\n", what, v[0], v[n / 2], v[n - 1]);
}

int main(int argc, char **argv)
{
	size_t mb = 64, len;
	unsigned long noise_n = 0;
	int runs = 5, i = 1;
	double pmb[32], gmb[32], prs[32], ratio[32], xmb[32];
	char tmp[] = "/tmp/kfence-parse-bench.XXXXXX", cmd[128];
	int fd;
	FILE *tf;
	unsigned long reps = 0, greps = 0;
	char *buf;

	for (; i < argc && argv[i][0] == '-'; i += 2) {
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--mb"))
			mb = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--runs"))
			runs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--noise"))
			noise_n = strtoul(argv[i + 1], NULL, 10);
		else
			break;
	}
	if (i >= argc || !mb || runs < 1 || runs > 32) {
		fputs("usage: kfence-parse-bench [--mb N] [--runs 1-32] [--noise N] LOG...\n", stderr);
		return 2;
	}
	buf = load(argc - i, argv + i, mb << 20, &len, noise_n);
	printf("log: %.1f MiB from %d file(s) + %lu other lines per copy, %d runs each\n",
	       (double)len / 1048576, argc - i, noise_n, runs);
	fd = mkstemp(tmp);
	tf = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!tf || fwrite(buf, 1, len, tf) != len || fclose(tf)) {
		perror(tmp);
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "grep -c -F 'BUG: KFENCE: ' %s >/dev/null", tmp);
	printf("%4s %12s %12s %12s %12s %8s\n", "run", "parse MB/s", "scan MB/s", "grep(1) MB/s",
	       "reports/s", "scan/parse");
	for (int r = 0; r < runs; r++) {
		double t0 = bench_now(), t1, t2, t3;

		greps = pass(buf, len, false);
		t1 = bench_now();
		reps = pass(buf, len, true);
		t2 = bench_now();
		if (system(cmd) < 0)
			return 1;
		t3 = bench_now();
		xmb[r] = (double)len / 1e6 / (t3 - t2);
		gmb[r] = (double)len / 1e6 / (t1 - t0);
		pmb[r] = (double)len / 1e6 / (t2 - t1);
		prs[r] = (double)reps / (t2 - t1);
		ratio[r] = gmb[r] / pmb[r];
		printf("%4d %12.1f %12.1f %12.1f %12.0f %7.2fx\n", r + 1, pmb[r], gmb[r], xmb[r],
		       prs[r], ratio[r]);
	}
	printf("reports: %lu parsed, %lu title lines found by the scan\n", reps, greps);
	stat3("parse MB/s", pmb, runs);
	stat3("grep-level scan MB/s", gmb, runs);
	stat3("grep -c -F MB/s", xmb, runs);
	stat3("parse reports/s", prs, runs);
	stat3("scan/parse time ratio", ratio, runs);
	unlink(tmp);
	free(buf);
	return reps == greps ? 0 : 1;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm-bench: sweep memory size x stale fraction x bandwidth, migrate the same
 * workload in each mode with --verify, and print downtime ratios against
 * minor mode and minor mode's fault latency percentiles.
 *
 *   lm-bench [--sizes 64M,256M] [--stale 0.01,0.1,0.3] [--bandwidth 1G,10G]
 *            [--backing shmem|hugetlb] [--track T] [--rtt 100us] [--precopy S]
 *            [--after S]
 */
#include <ctype.h>
#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lm.h"

struct row {
	char mode[32], verify[16];
	double downtime, p50, p99, max;
	int rc;
};

static const char *modes[] = { "minor", "stop-copy", "postcopy-missing" };

/* Run "lm run ..." in a child; parse its --row line. */
static void run(char **args, int nargs, struct row *r)
{
	int p[2], st;
	char line[512] = { 0 };
	FILE *f;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe(p))
		exit(1);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		alarm(600);
		dup2(p[1], 1);
		close(p[0]);
		st = lm_main(nargs, args);
		fflush(NULL);
		_exit(st);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	waitpid(pid, &st, 0);
	r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	/* mode stale downtime total paused push demand faults p50 p99 max ... verify */
	if (sscanf(line, "%31s %*s %lf %*s %*s %*s %*s %*s %lf %lf %lf %*s %*s %15s", r->mode,
		   &r->downtime, &r->p50, &r->p99, &r->max, r->verify) != 6)
		r->rc = r->rc ? r->rc : 99;
}

#define MAX_LIST	16
#define MAX_RUNS	20

/* A comma-separated list into at most MAX_LIST items; -1 if empty or longer. */
static int split(char *s, char **out)
{
	int n = 0;

	for (char *t = strtok(s, ","); t; t = strtok(NULL, ",")) {
		if (n == MAX_LIST)
			return -1;
		out[n++] = t;
	}
	return n ? n : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: lm-bench [options]   migrate one workload in every mode for each point\n"
"  --sizes LIST         region sizes, e.g. 64M,256M,1G (default 64M,128M)\n"
"  --stale LIST         stale fractions at pause (default 0.01,0.1,0.3)\n"
"  --bandwidth LIST     link rates in bits/s, e.g. 1G,10G (default 1G)\n"
"  --backing B          shmem (default) or hugetlb\n"
"  --track T            dirty tracking for lm (default auto)\n"
"  --rtt T              link round trip (default 100us)\n"
"  --precopy S          workload seconds before precopy (default 1)\n"
"  --after S            workload seconds after resume (default 0.5)\n"
"  --runs N             runs per point, modes interleaved; min/median/max (default 1)\n"
"  --load N             N busy loops (one process each) beside every run: the\n"
"                       switch-over on a busy machine (default 0)\n"
"Each point runs lm run --verify in minor, stop-copy and postcopy-missing mode\n"
"and prints downtime ratios against minor mode. Lists hold at most %d items.\n"
"exit: 0 every run verified, 1 usage, 4 a run failed\n", MAX_LIST);
}

struct bench {
	char *sizes[MAX_LIST], *stales[MAX_LIST], *bws[MAX_LIST];
	int ns, nst, nb;
	const char *backing, *track, *rtt, *precopy, *after;
	int runs;
	int load;		/* busy loops beside every run */
};

static int parse(struct bench *b, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sizes", 1, NULL, 's' }, { "stale", 1, NULL, 'f' },
		{ "bandwidth", 1, NULL, 'b' }, { "backing", 1, NULL, 'k' },
		{ "track", 1, NULL, 't' }, { "rtt", 1, NULL, 'r' },
		{ "precopy", 1, NULL, 'p' }, { "after", 1, NULL, 'a' },
		{ "runs", 1, NULL, 'n' }, { "load", 1, NULL, 'l' },
		{ "help", 0, NULL, 'h' }, { 0 }
	};
	static char def_sizes[] = "64M,128M", def_stales[] = "0.01,0.1,0.3", def_bws[] = "1G";
	char *sizes = def_sizes, *stales = def_stales, *bws = def_bws;
	int c;

	*b = (struct bench){ .backing = "shmem", .track = "auto", .rtt = "100us",
			     .precopy = "1", .after = "0.5", .runs = 1 };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sizes = optarg; break;
		case 'f': stales = optarg; break;
		case 'b': bws = optarg; break;
		case 'k': b->backing = optarg; break;
		case 't': b->track = optarg; break;
		case 'r': b->rtt = optarg; break;
		case 'p': b->precopy = optarg; break;
		case 'a': b->after = optarg; break;
		case 'n':
			b->runs = atoi(optarg);
			if (b->runs < 1 || b->runs > MAX_RUNS) {
				fprintf(stderr, "lm-bench: --runs must be in 1..%d\n", MAX_RUNS);
				return -1;
			}
			break;
		case 'l':
			b->load = atoi(optarg);
			if (b->load < 0 || b->load > 64 || !isdigit((unsigned char)optarg[0])) {
				fprintf(stderr, "lm-bench: --load must be in 0..64\n");
				return -1;
			}
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lm-bench: unexpected argument '%s'; see lm-bench --help\n",
			argv[optind]);
		return -1;
	}
	b->ns = split(sizes, b->sizes);
	b->nst = split(stales, b->stales);
	b->nb = split(bws, b->bws);
	if (b->ns < 0 || b->nst < 0 || b->nb < 0) {
		fprintf(stderr, "lm-bench: --sizes, --stale and --bandwidth each take 1 to %d "
			"comma-separated values\n", MAX_LIST);
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* min, median and max of n values (sorted in place) */
static void spread(double *v, int n, double out[3])
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	out[0] = v[0];
	out[1] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	out[2] = v[n - 1];
}

/*
 * One point of the sweep: the three modes on the same workload, --runs
 * times, the modes interleaved so each run's three share a sitting.
 * Returns 0 when every run verified, 1 when one failed, -1 when lm exited 1
 * or 10 (a refused option, a failed setup, a region that does not fit).
 */
static int point(const struct bench *b, char *size, char *stale, char *bw)
{
	double dt[3][MAX_RUNS], p50[MAX_RUNS], p99[MAX_RUNS], mx[MAX_RUNS];
	double d[3][3], q50[3], q99[3], qmx[3];
	bool ok = true;

	for (int i = 0; i < b->runs; i++) {
		for (int m = 0; m < 3; m++) {
			char *args[] = { "lm", "run", "--mode", (char *)modes[m], "--size", size,
				"--stale", stale, "--bandwidth", bw, "--rtt", (char *)b->rtt,
				"--backing", (char *)b->backing, "--track", (char *)b->track,
				"--precopy", (char *)b->precopy, "--after", (char *)b->after,
				"--verify", "--row", "-q", NULL };
			struct row r;

			run(args, (int)(sizeof(args) / sizeof(args[0])) - 1, &r);
			/* refused, or the region does not fit (10): the same at every run */
			if (r.rc == LM_EXIT_USAGE || r.rc == LM_EXIT_NOMEM) {
				printf("%-6s %-6s %-5s | lm exited %d: its message is above\n", size,
				       stale, bw, r.rc);
				return -1;
			}
			/* progress for whoever watches: a point can take minutes */
			fprintf(stderr, "lm-bench: %s %s %s run %d/%d %s: %.2f ms, exit %d, %s\n",
				size, stale, bw, i + 1, b->runs, modes[m], r.downtime, r.rc,
				r.verify[0] ? r.verify : "-");
			ok &= !r.rc && !strcmp(r.verify, "ok");
			dt[m][i] = r.downtime;
			if (!m) {
				p50[i] = r.p50;
				p99[i] = r.p99;
				mx[i] = r.max;
			}
		}
	}
	for (int m = 0; m < 3; m++)
		spread(dt[m], b->runs, d[m]);
	spread(p50, b->runs, q50);
	spread(p99, b->runs, q99);
	spread(mx, b->runs, qmx);
	printf("%-6s %-6s %-5s | %6.2f %6.2f %6.2f | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f | "
	       "%7.1fx %7.1fx | %8.0f %8.0f %8.0f | %-3s | %s\n", size, stale, bw,
	       d[0][0], d[0][1], d[0][2], d[1][0], d[1][1], d[1][2], d[2][0], d[2][1], d[2][2],
	       d[0][1] > 0 ? d[1][1] / d[0][1] : 0, d[0][1] > 0 ? d[2][1] / d[0][1] : 0,
	       q50[1], q99[1], qmx[1], d[0][1] < d[1][1] && d[0][1] < d[2][1] ? "yes" : "no",
	       ok ? "all pages ok" : "FAILED");
	fflush(stdout);
	return ok ? 0 : 1;
}

/* N processes that only spin, each dying with lm-bench; their pids in pid[]. */
static void start_load(int n, pid_t *pid)
{
	for (int i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (volatile unsigned long x = 0;; x++)
				;
		}
	}
}

static void stop_load(int n, const pid_t *pid)
{
	for (int i = 0; i < n; i++)
		if (pid[i] > 0) {
			kill(pid[i], SIGKILL);
			waitpid(pid[i], NULL, 0);
		}
}

int main(int argc, char **argv)
{
	pid_t hogs[64];
	struct bench b;
	int failed = 0;

	if (parse(&b, argc, argv))
		return 1;
	if (b.load)
		printf("load: %d busy loop%s beside every run\n", b.load, b.load > 1 ? "s" : "");
	start_load(b.load, hogs);
	printf("downtime ms over %d run%s: min median max; ratios of medians; fault latency "
	       "medians; 'won': minor's median below both baselines'\n", b.runs,
	       b.runs > 1 ? "s" : "");
	printf("%-6s %-6s %-5s | %-20s | %-23s | %-23s | %8s %8s | %8s %8s %8s | %-3s | %s\n",
	       "size", "stale", "link", "minor", "stop-copy", "postcopy-missing", "sc/minor",
	       "pm/minor", "p50-us", "p99-us", "max-us", "won", "verify");
	for (int i = 0; i < b.ns; i++)
		for (int j = 0; j < b.nst; j++)
			for (int k = 0; k < b.nb; k++) {
				int ret = point(&b, b.sizes[i], b.stales[j], b.bws[k]);

				/*
				 * lm's exit 1 is a refused option or a failed
				 * setup: on the first point it would repeat at
				 * every point; later (exit 10: a size the
				 * huge-page pool or the cgroup cannot hold) it is
				 * that point's failure.
				 */
				if (ret < 0 && !i && !j && !k) {
					stop_load(b.load, hogs);
					return 1;
				}
				failed += ret != 0;
			}
	stop_load(b.load, hogs);
	return failed ? 4 : 0;
}

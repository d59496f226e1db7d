// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm-bench: sweep memory size x stale fraction x bandwidth, migrate the same
 * workload in each mode with --verify, and print downtime ratios against
 * minor mode and minor mode's fault latency percentiles.
 *
 *   lm-bench [--sizes 64M,256M] [--stale 0.01,0.1,0.3] [--bandwidth 1G,10G]
 *            [--backing shmem|hugetlb] [--rtt 100us] [--precopy S] [--after S]
 */
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

static int split(char *s, char **out, int max)
{
	int n = 0;

	for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ","))
		out[n++] = t;
	return n;
}

int main(int argc, char **argv)
{
	char sizes_s[256] = "64M,128M", stales_s[256] = "0.01,0.1,0.3", bws_s[256] = "1G";
	const char *backing = "shmem", *rtt = "100us", *precopy = "1", *after = "0.5";
	char *sizes[16], *stales[16], *bws[16];
	int ns, nst, nb, failed = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--sizes"))
			snprintf(sizes_s, sizeof(sizes_s), "%s", argv[i + 1]);
		else if (!strcmp(argv[i], "--stale"))
			snprintf(stales_s, sizeof(stales_s), "%s", argv[i + 1]);
		else if (!strcmp(argv[i], "--bandwidth"))
			snprintf(bws_s, sizeof(bws_s), "%s", argv[i + 1]);
		else if (!strcmp(argv[i], "--backing"))
			backing = argv[i + 1];
		else if (!strcmp(argv[i], "--rtt"))
			rtt = argv[i + 1];
		else if (!strcmp(argv[i], "--precopy"))
			precopy = argv[i + 1];
		else if (!strcmp(argv[i], "--after"))
			after = argv[i + 1];
		else {
			fprintf(stderr, "lm-bench: unknown option '%s'\n", argv[i]);
			return 1;
		}
	}
	if (argc % 2 == 0) {
		fprintf(stderr, "lm-bench: option '%s' needs a value\n", argv[argc - 1]);
		return 1;
	}
	ns = split(sizes_s, sizes, 16);
	nst = split(stales_s, stales, 16);
	nb = split(bws_s, bws, 16);
	printf("%-6s %-6s %-5s | %10s %10s %10s | %8s %8s | %9s %9s %9s | %s\n", "size", "stale",
	       "link", "minor-ms", "stopcp-ms", "missing-ms", "sc/minor", "pm/minor", "p50-us",
	       "p99-us", "max-us", "verify");
	for (int a = 0; a < ns; a++)
		for (int b = 0; b < nst; b++)
			for (int c = 0; c < nb; c++) {
				struct row r[3];
				bool ok = true;

				for (int m = 0; m < 3; m++) {
					char *args[] = { "lm", "run", "--mode", (char *)modes[m],
						"--size", sizes[a], "--stale", stales[b],
						"--bandwidth", bws[c], "--rtt", (char *)rtt,
						"--backing", (char *)backing, "--precopy",
						(char *)precopy, "--after", (char *)after,
						"--verify", "--row", "-q", NULL };

					run(args, 21, &r[m]);
					ok &= !r[m].rc && !strcmp(r[m].verify, "ok");
				}
				failed += !ok;
				printf("%-6s %-6s %-5s | %10.2f %10.2f %10.2f | %7.1fx %7.1fx | "
				       "%9.0f %9.0f %9.0f | %s\n", sizes[a], stales[b], bws[c],
				       r[0].downtime, r[1].downtime, r[2].downtime,
				       r[0].downtime > 0 ? r[1].downtime / r[0].downtime : 0,
				       r[0].downtime > 0 ? r[2].downtime / r[0].downtime : 0,
				       r[0].p50, r[0].p99, r[0].max, ok ? "all pages ok" :
				       "FAILED");
				fflush(stdout);
			}
	return failed ? 4 : 0;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-ttd: how long KFENCE takes to catch a bug, in a guest with the
 * kfence_drill module loaded.
 *
 * A bug that runs at a steady rate (the drill's "chance" file: one
 * kmalloc, kfree and use-after-free read per write) is caught only when
 * KFENCE guarded that very allocation. KFENCE guards the first slab
 * allocation after its gate opens, once per sample interval, so with a
 * background load the expected wait is about
 *
 *     interval x (all allocations / drill allocations).
 *
 * For each sample interval, N trials: start firing at a random phase,
 * stop at the first report on /dev/kmsg. The allocation ratio is measured
 * apart, with the kmem tracepoints counting every slab allocation while
 * the load and the drill run alone (tracing slows both, so rates are
 * taken per load iteration and per drill write, which tracing does not
 * change). Prints one K513-TTD line per trial, a table, and TAP.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DRILL "/sys/kernel/debug/kfence_drill/"
#define INTERVAL "/sys/module/kfence/parameters/sample_interval"
#define TRACING "/sys/kernel/debug/tracing/"
#define TITLE "BUG: KFENCE: use-after-free read in drill_uaf_chance"

struct opts {
	int trials;
	int intervals[8];
	int n_intervals;
	long period_us;		/* between drill writes */
	int loaders;		/* background load processes */
	double timeout_s;	/* per trial */
	double calib_s;
	int hz;			/* the guest kernel's CONFIG_HZ */
	bool spin;		/* busy-wait between writes instead of sleeping */
};

static _Atomic unsigned long *load_iters;
static pid_t loader_pids[16];
static int n_loaders;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "kfence-ttd: %s: %s\n", what, strerror(errno));
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static long read_long(const char *path)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	return strtol(buf, NULL, 10);
}

/*
 * The background load: file and pipe churn on tmpfs, which allocates
 * struct file, pipe buffers and friends from several slab caches.
 */
static void loader(int id)
{
	char path[64], buf[64] = { 0 };
	int fd, p[2];

	snprintf(path, sizeof(path), "/tmp/kfence-ttd.%d", id);
	for (;;) {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			if (write(fd, buf, sizeof(buf)) < 0)
				_exit(1);
			close(fd);
		}
		if (pipe(p) == 0) {
			close(p[0]);
			close(p[1]);
		}
		atomic_fetch_add_explicit(load_iters, 1, memory_order_relaxed);
	}
}

static void start_load(int n)
{
	for (n_loaders = 0; n_loaders < n && n_loaders < 16; n_loaders++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0)
			loader(n_loaders);
		loader_pids[n_loaders] = pid;
	}
}

static void stop_load(void)
{
	for (int i = 0; i < n_loaders; i++) {
		kill(loader_pids[i], SIGKILL);
		waitpid(loader_pids[i], NULL, 0);
	}
	n_loaders = 0;
}

static void sleep_until(double t)
{
	struct timespec ts = { (time_t)t, (long)((t - (time_t)t) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * Sleeping wakes the drill from a timer, as KFENCE's own gate is opened
 * from a timer; spinning keeps it off the timer's schedule.
 */
static void wait_until(double t, bool spin)
{
	if (spin) {
		while (now_s() < t)
			;
		return;
	}
	sleep_until(t);
}

/* Any new /dev/kmsg record with the drill's title? */
static bool kmsg_caught(int kfd)
{
	char rec[8192];
	ssize_t n;
	bool caught = false;

	for (;;) {
		n = read(kfd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;
		if (n <= 0)
			return caught;
		rec[n] = '\0';
		if (strstr(rec, TITLE))
			caught = true;
	}
}

/* KFENCE's own counters, e.g. "total allocations" or "skipped allocations (covered)". */
static long kfence_stat(const char *name)
{
	char line[128];
	long v = -1;
	size_t n = strlen(name);
	FILE *f = fopen("/sys/kernel/debug/kfence/stats", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

static long tracing_count(void)
{
	char path[128], line[128];
	long total = 0, v;
	FILE *f;

	for (int cpu = 0; cpu < 64; cpu++) {
		snprintf(path, sizeof(path), TRACING "per_cpu/cpu%d/stats", cpu);
		f = fopen(path, "r");
		if (!f)
			break;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "entries: %ld", &v) == 1 ||
			    sscanf(line, "overrun: %ld", &v) == 1)
				total += v;
		}
		fclose(f);
	}
	return total;
}

static int tracing(bool on)
{
	const char *v = on ? "1" : "0";

	if (write_str(TRACING "events/kmem/kmalloc/enable", v) ||
	    write_str(TRACING "events/kmem/kmem_cache_alloc/enable", v))
		return -1;
	return on ? write_str(TRACING "trace", "") : 0;
}

struct calib {
	double idle_per_s;	/* allocations/s with nothing running */
	double per_load_iter;
	double per_drill_write;
	bool ok;
};

/* Allocations counted by the tracepoints over @secs of @what. */
static double traced(int chance_fd, const struct opts *o, int what, double secs,
		     unsigned long *units)
{
	double t0, next;
	unsigned long it0 = atomic_load(load_iters);

	*units = 0;
	if (tracing(true))
		return -1;
	if (what == 1)
		start_load(o->loaders);
	t0 = now_s();
	next = t0;
	while (now_s() - t0 < secs) {
		if (what == 2) {
			if (write(chance_fd, "1", 1) != 1)
				die("write " DRILL "chance");
			(*units)++;
			next += o->period_us / 1e6;
			wait_until(next, o->spin);
		} else {
			usleep(10000);
		}
	}
	if (what == 1) {
		stop_load();
		*units = atomic_load(load_iters) - it0;
	}
	tracing(false);
	return (double)tracing_count();
}

static struct calib calibrate(int chance_fd, const struct opts *o)
{
	struct calib c = { 0 };
	unsigned long u;
	double idle, e;

	idle = traced(chance_fd, o, 0, o->calib_s, &u);
	if (idle < 0) {
		fprintf(stderr, "kfence-ttd: no kmem tracepoints (%s): no estimate\n",
			strerror(errno));
		return c;
	}
	c.idle_per_s = idle / o->calib_s;
	e = traced(chance_fd, o, 1, o->calib_s, &u);
	c.per_load_iter = u ? (e - idle) / (double)u : 0;
	e = traced(chance_fd, o, 2, o->calib_s, &u);
	c.per_drill_write = u ? (e - idle) / (double)u : 0;
	c.ok = true;
	printf("# calibration (kmem tracepoints): %.0f allocations/s idle, %.1f per load iteration, %.1f per drill write\n",
	       c.idle_per_s, c.per_load_iter, c.per_drill_write);
	return c;
}

struct trial {
	double ms;		/* -1: not caught before the timeout */
	unsigned long writes;
	unsigned long iters;
	double secs;
};

static struct trial run_trial(int chance_fd, const struct opts *o, int interval)
{
	struct trial t = { .ms = -1 };
	int kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	unsigned long it0;
	double t0, next;

	if (kfd < 0)
		die("open /dev/kmsg");
	lseek(kfd, 0, SEEK_END);
	/* a random phase against KFENCE's timer, as a real bug would have */
	usleep((useconds_t)(rand() % (interval * 1000 + 1)));
	it0 = atomic_load(load_iters);
	t0 = now_s();
	next = t0;
	for (;;) {
		if (write(chance_fd, "1", 1) != 1)
			die("write " DRILL "chance");
		t.writes++;
		if (kmsg_caught(kfd)) {
			t.ms = (now_s() - t0) * 1e3;
			break;
		}
		if (now_s() - t0 > o->timeout_s)
			break;
		next += o->period_us / 1e6;
		wait_until(next, o->spin);
	}
	t.secs = now_s() - t0;
	t.iters = atomic_load(load_iters) - it0;
	close(kfd);
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double quantile(const double *sorted, int n, double q)
{
	double pos = q * (n - 1);
	int i = (int)pos;

	if (n == 0)
		return NAN;
	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	char *s, *tok, *save = NULL;
	int c;

	while ((c = getopt(argc, argv, "n:i:p:l:t:c:z:sh")) != -1) {
		switch (c) {
		case 'n':
			o->trials = atoi(optarg);
			break;
		case 'i':
			o->n_intervals = 0;
			s = optarg;
			while ((tok = strtok_r(s, ",", &save)) && o->n_intervals < 8) {
				o->intervals[o->n_intervals++] = atoi(tok);
				s = NULL;
			}
			break;
		case 'p':
			o->period_us = atol(optarg);
			break;
		case 'l':
			o->loaders = atoi(optarg);
			break;
		case 't':
			o->timeout_s = atof(optarg);
			break;
		case 'c':
			o->calib_s = atof(optarg);
			break;
		case 'z':
			o->hz = atoi(optarg);
			break;
		case 's':
			o->spin = true;
			break;
		default:
			fprintf(stderr,
				"usage: kfence-ttd [-n TRIALS] [-i MS,MS,...] [-p PERIOD_US] [-l LOADERS]\n"
				"                  [-t TIMEOUT_S] [-c CALIBRATION_S] [-z HZ] [-s]\n");
			exit(c == 'h' ? 0 : 2);
		}
	}
	if (o->trials < 1 || o->trials > 1000 || o->period_us < 1 || o->hz < 1 ||
	    o->loaders < 0 || o->loaders > 16 || o->n_intervals < 1) {
		fprintf(stderr, "kfence-ttd: bad arguments\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct opts o = {
		.trials = 10, .intervals = { 1, 10, 100 }, .n_intervals = 3,
		.period_us = 1000, .loaders = 1, .timeout_s = 120, .calib_s = 1, .hz = 250,
	};
	char old[32] = "", buf[32];
	const char *mode;
	int chance_fd, failed = 0;
	struct calib cal;
	long v;

	parse_args(argc, argv, &o);
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand((unsigned int)getpid());
	load_iters = mmap(NULL, sizeof(*load_iters), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (load_iters == MAP_FAILED)
		die("mmap");
	chance_fd = open(DRILL "chance", O_WRONLY);
	if (chance_fd < 0)
		die("open " DRILL "chance (is kfence_drill loaded?)");
	v = read_long(INTERVAL);
	if (v < 0)
		die("read " INTERVAL);
	snprintf(old, sizeof(old), "%ld", v);

	printf("1..%d\n", o.n_intervals);
	mode = o.spin ? "spin" : "sleep";
	printf("# drill: one use-after-free every %ld us (%s between); %d load process(es); %d trials; HZ=%d\n",
	       o.period_us, mode, o.loaders, o.trials, o.hz);
	cal = calibrate(chance_fd, &o);
	start_load(o.loaders);

	double table[8][6];

	for (int k = 0; k < o.n_intervals; k++) {
		int iv = o.intervals[k], caught = 0;
		double ms[1000], ratio_sum = 0;
		unsigned long w = 0;

		long hits0 = read_long(DRILL "hits");
		long kf0 = kfence_stat("total allocations");
		long cov0 = kfence_stat("skipped allocations (covered)");
		double t_start = now_s();

		snprintf(buf, sizeof(buf), "%d", iv);
		if (write_str(INTERVAL, buf))
			die("write " INTERVAL);
		for (int i = 0; i < o.trials; i++) {
			struct trial t = run_trial(chance_fd, &o, iv);
			double ratio = 0;

			if (cal.ok && t.writes)
				ratio = (cal.idle_per_s * t.secs + cal.per_load_iter * t.iters +
					 cal.per_drill_write * t.writes) / t.writes;
			ratio_sum += ratio;
			w += t.writes;
			printf("K513-TTD mode=%s interval=%d trial=%d ms=%.1f writes=%lu load_iters=%lu ratio=%.1f\n",
			       mode, iv, i, t.ms, t.writes, t.iters, ratio);
			if (t.ms >= 0)
				ms[caught++] = t.ms;
		}
		/* each KFENCE-owned drill object is a report: hits == caught */
		printf("# interval %d ms: KFENCE owned %ld of %lu drill allocations\n", iv,
		       read_long(DRILL "hits") - hits0, w);
		/*
		 * How many times the gate opened and was taken: if KFENCE chose
		 * uniformly among allocations, the drill would win 1 in "ratio".
		 */
		printf("K513-TTD-GATES mode=%s interval=%d seconds=%.2f kfence_allocs=%ld skipped_covered=%ld drill_wins=%ld\n",
		       mode, iv, now_s() - t_start, kfence_stat("total allocations") - kf0,
		       kfence_stat("skipped allocations (covered)") - cov0,
		       read_long(DRILL "hits") - hits0);
		qsort(ms, caught, sizeof(ms[0]), cmp_double);
		double mean = 0;

		for (int i = 0; i < caught; i++)
			mean += ms[i] / caught;
		/* the timer runs in jiffies: 1 ms becomes one 4 ms tick at HZ=250 */
		double tick = 1000.0 / o.hz;
		double eff = ceil(iv / tick) * tick;
		double ratio = ratio_sum / o.trials;

		table[k][0] = caught;
		table[k][1] = quantile(ms, caught, 0.5);
		table[k][2] = mean;
		table[k][3] = ratio;
		table[k][4] = iv * ratio;
		table[k][5] = eff * ratio;
		if (caught == o.trials) {
			printf("ok %d - interval %d ms: %d of %d trials caught\n", k + 1, iv,
			       caught, o.trials);
		} else {
			printf("not ok %d - interval %d ms: %d of %d trials caught within %.0f s\n",
			       k + 1, iv, caught, o.trials, o.timeout_s);
			failed = 1;
		}
		printf("K513-TTD-SUMMARY mode=%s interval=%d caught=%d median_ms=%.1f mean_ms=%.1f p10_ms=%.1f p90_ms=%.1f ratio=%.1f est_ms=%.1f est_tick_ms=%.1f writes=%lu\n",
		       mode, iv, caught, table[k][1], mean, quantile(ms, caught, 0.1),
		       quantile(ms, caught, 0.9), ratio, table[k][4], table[k][5], w);
	}
	stop_load();
	write_str(INTERVAL, old);

	printf("# %-11s %7s %10s %10s %8s %14s %16s\n", "interval_ms", "caught", "median_ms",
	       "mean_ms", "ratio", "est_ms=iv*r", "est_tick_ms");
	for (int k = 0; k < o.n_intervals; k++)
		printf("# %-11d %4.0f/%-2d %10.1f %10.1f %8.1f %14.1f %16.1f\n", o.intervals[k],
		       table[k][0], o.trials, table[k][1], table[k][2], table[k][3],
		       table[k][4], table[k][5]);
	return failed;
}

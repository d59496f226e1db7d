// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm-bench: how fast minor faults are served, in one table.
 *
 *   (a) the library's handler (uffdm_handler_*) with its fill-once page
 *       states, callback a no-op: the pages are already in the page cache,
 *       as after a background fill;
 *   (b) a raw handler written directly on the ioctls, same work (and no
 *       page states: it is only right for a callback that is idempotent);
 *   (c) the missing-fault way: MISSING registration, UFFDIO_COPY of one
 *       page per fault from a prepared buffer;
 *   (d) the library with deferred completion: the callback returns
 *       UFFDM_FILL_LATER and one completer thread completes each page;
 *   (e) the library in event-loop mode (0.3): no handler thread, one
 *       application thread polls uffdm_handler_fd() and calls
 *       uffdm_handler_serve() (64 at most per turn), whatever the row's
 *       handler count (one loop serves a handler).
 *
 * Faulting threads each read one byte of each of their pages once; faults/s
 * is pages over the wall time of the faulting; latency is from the read of
 * the event to the wake, as the library's histogram measures it (for (d)
 * it ends when the callback returns: the wait for the completer is not in
 * it).  Every way runs -r times, taking turns; the table shows the median
 * faults/s, and each ratio as median [min-max] over the reps, each rep's
 * ratio taken between runs made back to back.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "uffdminor.h"

#define MAX_THREADS 8
#define MAX_REPS 15
#define WAYS 5
/*
 * 1 µs buckets below 65 ms, then one overflow bucket: copying a 2 MiB page
 * under QEMU TCG takes several ms, which a 4 ms range clipped.
 */
#define HIST 65536

struct result {
	double faults_per_s;
	double cpu_us;		/* process CPU time per fault: robust to a busy machine */
	double p50_us, p99_us;
	const char *skip;
};

struct run {
	enum uffdm_backing backing;
	size_t page, npages;
	unsigned int faulters, handlers;
	struct uffdm_region *r;
	char *view;
	char *src;		/* (c): what UFFDIO_COPY copies from */
	double cpu_us;		/* set by fault_all */
	int raw_fd, stop_fd;
	bool copy;
	uint64_t hist[MAX_THREADS][HIST];
};

/*
 * Where threads run (-p): handler threads inherit the CPU set of the
 * thread that starts them, so the main thread switches sets before
 * starting handlers and faulters: handlers get the last CPU, faulters the
 * others.  Off by default: on the 2-vCPU development VM every fault then
 * costs two cross-CPU wakeups, which lowers throughput 4x without making
 * it steadier.
 */
static bool pin;
static unsigned int only_way = WAYS;	/* -w: run one way only (0 a .. 4 e); WAYS all */
static cpu_set_t all_cpus, handler_cpus, faulter_cpus;

static void setup_pinning(bool want)
{
	int last = -1, n = 0;

	sched_getaffinity(0, sizeof(all_cpus), &all_cpus);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all_cpus)) {
			last = c;
			n++;
		}
	pin = want && n >= 2;
	if (!pin)
		return;
	faulter_cpus = all_cpus;
	CPU_CLR(last, &faulter_cpus);
	CPU_ZERO(&handler_cpus);
	CPU_SET(last, &handler_cpus);
}

static void run_on(const cpu_set_t *set)
{
	if (pin)
		sched_setaffinity(0, sizeof(*set), set);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int noop(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return 0;
}

struct faulter {
	struct run *run;
	unsigned int idx;
	pthread_t t;
};

static void *fault_pages(void *arg)
{
	struct faulter *f = arg;
	struct run *run = f->run;
	size_t per = run->npages / run->faulters;
	volatile char sink = 0;

	for (size_t i = f->idx * per; i < (f->idx + 1) * per; i++)
		sink += run->view[i * run->page];
	(void)sink;
	return NULL;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Runs the faulting threads; returns faults per second, and leaves the
 * process CPU time per fault (faulters and handlers, user and kernel) in
 * run->cpu_us: on a loaded machine wall time measures the neighbours, CPU
 * time mostly the work.
 */
static double fault_all(struct run *run)
{
	struct faulter f[MAX_THREADS];
	uint64_t t0 = now_ns(), c0 = cpu_ns();
	double fps;

	run_on(&faulter_cpus);
	for (unsigned int i = 0; i < run->faulters; i++) {
		f[i] = (struct faulter){ run, i, 0 };
		pthread_create(&f[i].t, NULL, fault_pages, &f[i]);
	}
	run_on(&all_cpus);
	for (unsigned int i = 0; i < run->faulters; i++)
		pthread_join(f[i].t, NULL);
	fps = (double)run->npages * 1e9 / (double)(now_ns() - t0);
	run->cpu_us = (double)(cpu_ns() - c0) / 1000 / (double)run->npages;
	return fps;
}

/* ---- (b) and (c): the raw handler ---------------------------------- */

struct raw_thread {
	struct run *run;
	unsigned int idx;
	pthread_t t;
};

static void raw_resolve(struct run *run, uint64_t addr)
{
	uint64_t page = addr & ~((uint64_t)run->page - 1);
	struct uffdio_range range = { page, run->page };

	if (run->copy) {
		struct uffdio_copy c = { .dst = page, .src = (uintptr_t)run->src,
					 .len = run->page };

		if (ioctl(run->raw_fd, UFFDIO_COPY, &c) < 0 && errno == EEXIST)
			ioctl(run->raw_fd, UFFDIO_WAKE, &range);
	} else {
		struct uffdio_continue c = { .range = range };

		if (ioctl(run->raw_fd, UFFDIO_CONTINUE, &c) < 0 && errno == EEXIST)
			ioctl(run->raw_fd, UFFDIO_WAKE, &range);
	}
}

static void *raw_handler(void *arg)
{
	struct raw_thread *rt = arg;
	struct run *run = rt->run;
	struct pollfd pfd[2] = { { run->raw_fd, POLLIN, 0 }, { run->stop_fd, POLLIN, 0 } };
	struct uffd_msg msg[64];
	uint64_t t0, ns;
	ssize_t n;

	for (;;) {
		if (poll(pfd, 2, -1) < 0 || pfd[1].revents)
			break;
		n = read(run->raw_fd, msg, sizeof(msg));
		if (n <= 0)
			continue;
		t0 = now_ns();
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
			if (msg[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			raw_resolve(run, msg[i].arg.pagefault.address);
			ns = (now_ns() - t0) / 1000;
			run->hist[rt->idx][ns < HIST - 1 ? ns : HIST - 1]++;
		}
	}
	return NULL;
}

static int raw_open(struct run *run)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { (uintptr_t)run->view, run->page * run->npages },
		.mode = run->copy ? UFFDIO_REGISTER_MODE_MISSING : UFFDIO_REGISTER_MODE_MINOR,
	};

	run->raw_fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (run->raw_fd < 0)
		return -errno;
	if (ioctl(run->raw_fd, UFFDIO_API, &api) < 0 ||
	    ioctl(run->raw_fd, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	return 0;
}

static double pct_us(struct run *run, unsigned int pct)
{
	uint64_t total = 0, seen = 0, want;

	for (unsigned int t = 0; t < run->handlers; t++)
		for (unsigned int b = 0; b < HIST; b++)
			total += run->hist[t][b];
	want = (total * pct + 99) / 100;
	for (unsigned int b = 0; b < HIST; b++) {
		for (unsigned int t = 0; t < run->handlers; t++)
			seen += run->hist[t][b];
		if (seen >= want && seen)
			return b + 0.5;
	}
	return 0;
}

static struct result raw_run(struct run *run)
{
	struct raw_thread rt[MAX_THREADS];
	struct result res = { 0 };
	uint64_t one = 1;

	memset(run->hist, 0, sizeof(run->hist));
	if (raw_open(run) < 0) {
		res.skip = "raw open failed";
		return res;
	}
	run->stop_fd = eventfd(0, EFD_CLOEXEC);
	run_on(&handler_cpus);
	for (unsigned int i = 0; i < run->handlers; i++) {
		rt[i] = (struct raw_thread){ run, i, 0 };
		pthread_create(&rt[i].t, NULL, raw_handler, &rt[i]);
	}
	run_on(&all_cpus);
	res.faults_per_s = fault_all(run);
	res.cpu_us = run->cpu_us;
	if (write(run->stop_fd, &one, sizeof(one)) < 0)
		perror("write");
	for (unsigned int i = 0; i < run->handlers; i++)
		pthread_join(rt[i].t, NULL);
	close(run->stop_fd);
	close(run->raw_fd);
	res.p50_us = pct_us(run, 50);
	res.p99_us = pct_us(run, 99);
	return res;
}

/* ---- (a): the library --------------------------------------------- */

/* A descriptor and a handler on run->r (the caller picks the CPUs). */
static int lib_open(struct run *run, const struct uffdm_handler_config *cfg, struct uffdm **u,
		    struct uffdm_handler **h)
{
	int ret = uffdm_open(u, UFFDM_OPEN_NONBLOCK, 0);

	if (!ret)
		ret = uffdm_region_register(*u, run->r, 0, NULL);
	if (!ret)
		ret = uffdm_handler_start(h, *u, run->r, cfg);
	return ret;
}

/* Stop, close, and the handler's latencies into res. */
static void lib_close(struct uffdm_handler *h, struct uffdm *u, struct result *res)
{
	struct uffdm_stats st;

	uffdm_handler_stop(h, &st);
	uffdm_close(u);
	res->p50_us = (double)st.p50_ns / 1000;
	res->p99_us = (double)st.p99_ns / 1000;
}

static struct result lib_run(struct run *run)
{
	struct uffdm_handler_config cfg = { .threads = run->handlers, .fault = noop };
	struct result res = { 0 };
	struct uffdm_handler *h;
	struct uffdm *u;
	int ret;

	run_on(&handler_cpus);
	ret = lib_open(run, &cfg, &u, &h);
	run_on(&all_cpus);
	if (ret) {
		res.skip = "library open failed";
		return res;
	}
	res.faults_per_s = fault_all(run);
	res.cpu_us = run->cpu_us;
	lib_close(h, u, &res);
	return res;
}

/* ---- (e): the library, driven from the application's loop ------------ */

struct loop {
	struct uffdm_handler *h;
	int stop_fd;
	pthread_t tid;
};

static void *serve_loop(void *arg)
{
	struct loop *l = arg;
	struct pollfd pfd[2] = {
		{ .fd = uffdm_handler_fd(l->h), .events = POLLIN },
		{ .fd = l->stop_fd, .events = POLLIN },
	};

	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (uffdm_handler_serve(l->h, 64) < 0)
			break;
	}
	return NULL;
}

static struct result lib_loop_run(struct run *run)
{
	struct uffdm_handler_config cfg = { .flags = UFFDM_HANDLER_EVENT_LOOP, .fault = noop };
	struct loop l = { .stop_fd = eventfd(0, EFD_CLOEXEC) };
	struct result res = { 0 };
	uint64_t one = 1;
	struct uffdm *u;
	int ret;

	run_on(&handler_cpus);
	ret = l.stop_fd < 0 ? -errno : lib_open(run, &cfg, &u, &l.h);
	if (!ret)
		ret = -pthread_create(&l.tid, NULL, serve_loop, &l);
	run_on(&all_cpus);
	if (ret) {
		res.skip = "event-loop start failed";
		return res;
	}
	res.faults_per_s = fault_all(run);
	res.cpu_us = run->cpu_us;
	if (write(l.stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(l.tid, NULL);
	lib_close(l.h, u, &res);
	close(l.stop_fd);
	return res;
}

/* ---- (d): the library, deferred completion -------------------------- */

struct deferq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t *off;
	size_t head, tail, cap;
	bool done;
	struct uffdm_handler *h;
	struct uffdm_region *r;
};

static int defer(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct deferq *q = arg;

	(void)r; (void)ev;
	pthread_mutex_lock(&q->mu);
	q->off[q->tail++ % q->cap] = off;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return UFFDM_FILL_LATER;
}

/* Completes each deferred page (already in the cache: nothing to fill). */
static void *completer(void *arg)
{
	struct deferq *q = arg;
	size_t page = uffdm_region_page_size(q->r);

	for (;;) {
		size_t off;

		pthread_mutex_lock(&q->mu);
		while (q->head == q->tail && !q->done)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->head == q->tail) {
			pthread_mutex_unlock(&q->mu);
			return NULL;
		}
		off = q->off[q->head++ % q->cap];
		pthread_mutex_unlock(&q->mu);
		uffdm_handler_complete(q->h, q->r, off, page, 0);
	}
}

static struct result lib_deferred_run(struct run *run)
{
	struct deferq q = { .cap = run->npages, .r = run->r };
	struct uffdm_handler_config cfg = { .threads = run->handlers, .fault = defer, .arg = &q };
	struct result res = { 0 };
	struct uffdm_stats st;
	struct uffdm *u;
	pthread_t ct;
	int ret;

	q.off = calloc(q.cap, sizeof(*q.off));
	pthread_mutex_init(&q.mu, NULL);
	pthread_cond_init(&q.cv, NULL);
	run_on(&handler_cpus);
	ret = q.off ? lib_open(run, &cfg, &u, &q.h) : -ENOMEM;
	if (!ret)
		ret = -pthread_create(&ct, NULL, completer, &q);
	run_on(&all_cpus);
	if (ret) {
		res.skip = "library open failed";
		free(q.off);
		return res;
	}
	res.faults_per_s = fault_all(run);
	res.cpu_us = run->cpu_us;
	pthread_mutex_lock(&q.mu);
	q.done = true;
	pthread_cond_signal(&q.cv);
	pthread_mutex_unlock(&q.mu);
	pthread_join(ct, NULL);
	uffdm_handler_stop(q.h, &st);
	uffdm_close(u);
	free(q.off);
	res.p50_us = (double)st.p50_ns / 1000;
	res.p99_us = (double)st.p99_ns / 1000;
	return res;
}

/* ---- one row ------------------------------------------------------- */

/* A fresh region per measurement: every page must fault exactly once. */
static int fresh_region(struct run *run, bool populate)
{
	int ret = uffdm_region_create(&run->r, run->backing, run->page * run->npages);

	if (ret)
		return ret;
	run->view = uffdm_region_view(run->r);
	if (populate)
		ret = uffdm_region_populate(run->r, 0, uffdm_region_size(run->r));
	return ret;
}

typedef struct result (*measure_fn)(struct run *run);

/* Every rep of every way, for medians and ranges. */
struct series {
	struct result r[WAYS][MAX_REPS];
	unsigned int n;
	const char *skip[WAYS];
};

/*
 * The ways take turns within each rep, so that drift on a shared machine
 * (a build starting, the CPU clocking down) hits all of them alike rather
 * than whichever ran last.
 */
static void measure(struct run *run, unsigned int reps, struct series *s)
{
	static const measure_fn fn[WAYS] = {
		lib_run, raw_run, raw_run, lib_deferred_run, lib_loop_run,
	};

	memset(s, 0, sizeof(*s));
	for (unsigned int i = 0; i < reps; i++) {
		for (unsigned int w = 0; w < WAYS; w++) {
			run->copy = w == 2;
			if (only_way < WAYS && w != only_way) {
				s->skip[w] = "not run (-w)";
				continue;
			}
			if (s->skip[w])
				continue;
			if (fresh_region(run, !run->copy)) {
				s->skip[w] = "skipped: no huge pages";
				continue;
			}
			s->r[w][i] = fn[w](run);
			uffdm_region_destroy(run->r);
			s->skip[w] = s->r[w][i].skip;
		}
		s->n = i + 1;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median rep of a way (by faults/s), with its latencies. */
static struct result median_rep(const struct series *s, unsigned int w)
{
	double f[MAX_REPS];
	struct result m = { 0 };

	if (s->skip[w]) {
		m.skip = s->skip[w];
		return m;
	}
	for (unsigned int i = 0; i < s->n; i++)
		f[i] = s->r[w][i].faults_per_s;
	m.faults_per_s = median(f, s->n);
	for (unsigned int i = 0; i < s->n; i++)
		if (s->r[w][i].faults_per_s == m.faults_per_s || i == s->n - 1) {
			m.p50_us = s->r[w][i].p50_us;
			m.p99_us = s->r[w][i].p99_us;
			break;
		}
	return m;
}

static void print_way(struct result r)
{
	if (r.skip)
		printf("  %10s %7s %7s", "-", "-", "-");
	else
		printf("  %10.0f %7.1f %7.1f", r.faults_per_s, r.p50_us, r.p99_us);
}

/*
 * Ratio of way x to way y: median [min-max] of the reps' back-to-back
 * ratios, of faults/s, or with cpu of CPU per fault (y over x: above 1
 * means x does the work with less CPU).
 */
static void print_ratio_of(const struct series *s, unsigned int x, unsigned int y, bool cpu)
{
	double v[MAX_REPS], lo, hi;

	if (s->skip[x] || s->skip[y]) {
		printf("  %16s", "-");
		return;
	}
	for (unsigned int i = 0; i < s->n; i++)
		v[i] = cpu ? s->r[y][i].cpu_us / s->r[x][i].cpu_us :
			     s->r[x][i].faults_per_s / s->r[y][i].faults_per_s;
	qsort(v, s->n, sizeof(*v), cmp_double);
	lo = v[0];
	hi = v[s->n - 1];
	printf("  %4.2f [%4.2f-%4.2f]", median(v, s->n), lo, hi);
}

static void print_ratio(const struct series *s, unsigned int x, unsigned int y)
{
	print_ratio_of(s, x, y, false);
}

static void print_row(const char *name, unsigned int handlers, const struct series *s)
{
	/* No huge pages: every way says so, and nothing else is worth a column. */
	if (s->skip[0] && s->skip[1] && s->skip[2] && !strncmp(s->skip[0], "skipped", 7)) {
		printf("%-11s %2u  %s\n", name, handlers, s->skip[0]);
		return;
	}
	printf("%-11s %2u", name, handlers);
	print_way(median_rep(s, 0));
	print_way(median_rep(s, 1));
	print_ratio(s, 0, 1);
	print_way(median_rep(s, 2));
	print_ratio(s, 0, 2);
	print_way(median_rep(s, 3));
	print_ratio(s, 3, 0);
	print_ratio_of(s, 0, 1, true);
	print_ratio_of(s, 3, 0, true);
	print_way(median_rep(s, 4));
	print_ratio(s, 4, 1);
	printf("\n");
}

static void bench_backing(const char *name, enum uffdm_backing backing, size_t npages,
			  unsigned int faulters, unsigned int reps)
{
	static const unsigned int handlers[] = { 1, 2, 4 };
	struct run *run = calloc(1, sizeof(*run));

	run->backing = backing;
	run->page = uffdm_backing_page_size(backing);
	run->npages = npages - npages % faulters;
	run->faulters = faulters;
	run->src = mmap(NULL, run->page, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	memset(run->src, 0x5a, run->page);
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
		static struct series s;

		run->handlers = handlers[i];
		measure(run, reps, &s);
		print_row(name, handlers[i], &s);
	}
	munmap(run->src, run->page);
	free(run);
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-n 4k-pages] [-H 2m-pages] [-f faulting-threads] [-r reps] "
		"[-p (pin)] [-w a|b|c|d|e (one way only)]\n", argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long small = 16384, huge = 64, faulters = 4, reps = 3;
	bool want_pin = false;
	int opt;

	while ((opt = getopt(argc, argv, "n:H:f:r:pw:")) != -1) {
		switch (opt) {
		case 'n': small = strtoul(optarg, NULL, 0); break;
		case 'H': huge = strtoul(optarg, NULL, 0); break;
		case 'f': faulters = strtoul(optarg, NULL, 0); break;
		case 'r': reps = strtoul(optarg, NULL, 0); break;
		case 'p': want_pin = true; break;
		case 'w': only_way = (unsigned int)(optarg[0] - 'a'); break;
		default: usage(argv[0]);
		}
	}
	if (!small || !huge || !faulters || faulters > MAX_THREADS || !reps || reps > MAX_REPS ||
	    only_way > WAYS)
		usage(argv[0]);
	setup_pinning(want_pin);
	printf("uffdm-bench: %lu faulting threads, median of %lu, ratios median [min-max], %s; "
	       "pages already cached for (a),(b),(d); (c) copies a page per fault; "
	       "(d) defers every page to a completer thread; (e) one event loop, any ht; "
	       "cpu b/a and a/d: CPU per fault of the second over the first\n", faulters, reps,
	       pin ? "handlers pinned to the last CPU, faulters to the others" : "not pinned");
	printf("%-11s %2s  %10s %7s %7s  %10s %7s %7s  %16s  %10s %7s %7s  %16s  %10s %7s %7s  %16s"
	       "  %16s  %16s  %10s %7s %7s  %16s\n",
	       "memory", "ht", "(a)lib f/s", "p50us", "p99us", "(b)raw f/s", "p50us", "p99us",
	       "a/b", "(c)copy f/s", "p50us", "p99us", "a/c", "(d)defer f/s", "p50us", "p99us",
	       "d/a", "cpu b/a", "cpu a/d", "(e)loop f/s", "p50us", "p99us", "e/b");
	bench_backing("shmem 4K", UFFDM_SHMEM, small, (unsigned int)faulters, (unsigned int)reps);
	bench_backing("hugetlb 2M", UFFDM_HUGETLB_2M, huge, (unsigned int)faulters,
		      (unsigned int)reps);
	return 0;
}

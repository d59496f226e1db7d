// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm-vmm: the VMM half of an out-of-process pager, as Firecracker and
 * Cloud Hypervisor run theirs.
 *
 *   uffdm-vmm --pager PATH [--pages N] [--backing shmem|hugetlb] [--threads T]
 *             [--kill-after K | --stop-after K] [--stall-ms MS] [--in-process] [--reps R]
 *
 * It maps "guest memory" from a memfd, registers it for minor faults,
 * starts PATH as a separate process and sends it the userfaultfd, the
 * memfd and a SIGBUS descriptor over a Unix socket (wire.h).  T "vCPU"
 * threads then read every page once, each read timed, each page checked.
 *
 * The pager can die (--kill-after K: the VMM SIGKILLs it after K pages) or
 * stop answering (--stop-after K: SIGSTOP).  The kernel alone would not save the vCPUs: while the
 * VMM holds its own reference to the userfaultfd, an unserved fault
 * sleeps for ever, and had it closed that reference the pager's death
 * would wake them into the page cache's stale content (test-release.c).
 * So the VMM keeps the reference and the library's watchdog watches
 * (uffdm_watchdog_start): when the socket reports the pager gone, or a
 * fault has waited --stall-ms with no fault served meanwhile, it asks this
 * program (lost()): --replace starts a new pager that takes over, else the
 * watchdog fails the pages, and every vCPU still waiting, or touching a
 * page not yet served, gets SIGBUS.  Pages already served stay.
 *
 * --in-process serves the same faults with the library's handler in this
 * process, the baseline; --reps R alternates both R times and prints the
 * fault latencies side by side.
 *
 * Exit: 0 all pages right; 3 the pager was lost and the vCPUs that met it
 * got SIGBUS (none hung); 4 a page was wrong; 77 the kernel or the
 * hugepage pool lacks what is needed (the reason is printed); 1 error.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uffdminor.h"
#include "wire.h"

#define MAX_VCPUS 64

struct opts {
	const char *pager;
	size_t pages;
	enum uffdm_backing backing;
	unsigned int threads, reps;
	size_t kill_after;
	int kill_sig;		/* SIGKILL: it dies; SIGSTOP (--stop-after): it stops answering */
	unsigned int stall_ms;
	bool in_process;
	bool replace;		/* a pager that dies is replaced, not failed */
};

struct vm;

struct vcpu {
	struct vm *vm;
	pthread_t tid;
	size_t first, n;
	size_t bad;
	bool sigbus;
};

struct vm {
	const struct opts *o;
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_handler *h;	/* --in-process */
	size_t page;
	pid_t pager;
	int sock;
	struct uffdm_watchdog *wd;
	struct uffdm_watchdog_report rep;
	bool lost, replaced;
	size_t touched;
	uint64_t *lat;			/* per page, ns; 0 = not read */
	struct vcpu cpu[MAX_VCPUS];
};

struct result {
	size_t bad, sigbus_cpus, read;
	uint64_t p50, p99;
	bool lost;
};

static __thread sigjmp_buf *bus_jmp;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_sigbus(int sig)
{
	if (bus_jmp)
		siglongjmp(*bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int spawn_pager(struct vm *vm, unsigned int flags);

/*
 * The watchdog found the pager dead or stopped: it never serves again.
 * --replace (once): a new pager adopts the same userfaultfd and the page
 * states (in the memfd this VMM owns), takes over what the dead one owned
 * and serves on; every page it filled stays filled.  Else, or if it cannot
 * start, the watchdog fails the pages not served.
 */
static int lost(enum uffdm_server_loss why, void *arg)
{
	const char *what = why == UFFDM_SERVER_DIED ? "closed its socket (died)" : "stopped answering";
	struct vm *vm = arg;
	pid_t old = __atomic_load_n(&vm->pager, __ATOMIC_ACQUIRE);
	int sock = vm->sock;

	kill(old, SIGKILL);
	waitpid(old, NULL, 0);
	if (vm->o->replace && !vm->replaced) {
		vm->replaced = true;
		if (!spawn_pager(vm, WIRE_TAKEOVER)) {
			close(sock);
			fprintf(stderr, "uffdm-vmm: pager %s: a new pager took over\n", what);
			return vm->sock;
		}
	}
	__atomic_store_n(&vm->pager, -1, __ATOMIC_RELEASE);
	vm->lost = true;
	fprintf(stderr, "uffdm-vmm: pager %s: failing the pages it never served\n", what);
	return -1;
}

static void touch_one(struct vcpu *c, size_t i)
{
	struct vm *vm = c->vm;
	const char *p = (char *)uffdm_region_view(vm->r) + i * vm->page;
	uint64_t t0 = now_ns();
	int ok;

	ok = snapshot_check(p, vm->page, i);
	vm->lat[i] = now_ns() - t0;
	c->bad += !ok;
	if (__atomic_add_fetch(&vm->touched, 1, __ATOMIC_ACQ_REL) == vm->o->kill_after &&
	    __atomic_load_n(&vm->pager, __ATOMIC_ACQUIRE) > 0)	/* the crash or the stall we test */
		kill(__atomic_load_n(&vm->pager, __ATOMIC_ACQUIRE), vm->o->kill_sig);
}

/* A vCPU: reads its pages; SIGBUS ends it, as it would end a guest. */
static void *vcpu_run(void *arg)
{
	struct vcpu *c = arg;
	sigjmp_buf jb;
	volatile size_t i = c->first;

	bus_jmp = &jb;
	if (sigsetjmp(jb, 1)) {
		c->sigbus = true;
		return NULL;
	}
	for (; i < c->first + c->n; i++)
		touch_one(c, i);
	bus_jmp = NULL;
	return NULL;
}

static int skip_or_fail(const char *what, int err)
{
	char why[512] = "";

	if (err == -EPERM || err == -EACCES || err == -ENOSYS) {
		uffdm_open_explain(why, sizeof(why));
		printf("uffdm-vmm: skip: %s: %s\n", what, why);
		return 77;
	}
	if (err == -ENOMEM || err == -EOPNOTSUPP) {
		printf("uffdm-vmm: skip: %s: %s (hugetlb needs vm.nr_hugepages; minor faults "
		       "need Linux 5.13 hugetlbfs / 5.14 shmem)\n", what, strerror(-err));
		return 77;
	}
	fprintf(stderr, "uffdm-vmm: %s: %s\n", what, strerror(-err));
	return 1;
}

static int make_memory(struct vm *vm)
{
	size_t page = uffdm_backing_page_size(vm->o->backing);
	int ret;

	if (!page)
		return skip_or_fail("page size", -EOPNOTSUPP);
	vm->page = page;
	ret = uffdm_region_create(&vm->r, vm->o->backing, vm->o->pages * page);
	if (ret)
		return skip_or_fail("guest memory", ret);
	ret = uffdm_region_populate(vm->r, 0, uffdm_region_size(vm->r));
	if (!ret)
		ret = uffdm_open(&vm->u, 0, 0);
	if (!ret)
		ret = uffdm_region_register(vm->u, vm->r, 0, NULL);
	return ret ? skip_or_fail("registering guest memory", ret) : 0;
}

static void exec_pager(const char *path, int sock, unsigned int threads)
{
	char fd[16], t[16];

	if (dup2(sock, 3) < 0)
		_exit(127);
	snprintf(fd, sizeof(fd), "%d", 3);
	snprintf(t, sizeof(t), "%u", threads);
	execl(path, path, "--fd", fd, "--threads", t, (char *)NULL);
	fprintf(stderr, "uffdm-vmm: exec %s: %s\n", path, strerror(errno));
	_exit(127);
}

/* Start a pager, send it the memory, wait for it to serve. */
static int spawn_pager(struct vm *vm, unsigned int flags)
{
	struct wire_hello w = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION, .nfds = WIRE_NFDS,
		.view = (uintptr_t)uffdm_region_view(vm->r), .size = uffdm_region_size(vm->r),
		.flags = flags,
	};
	int fds[WIRE_NFDS], sv[2], ret;
	pid_t pid;
	char ready;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return skip_or_fail("socketpair", -errno);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return skip_or_fail("fork", -errno);
	if (pid == 0)
		exec_pager(vm->o->pager, sv[1], 2);
	close(sv[1]);
	__atomic_store_n(&vm->pager, pid, __ATOMIC_RELEASE);
	__atomic_store_n(&vm->sock, sv[0], __ATOMIC_SEQ_CST);
	fds[WIRE_UFFD] = uffdm_fd(vm->u);
	fds[WIRE_MEMFD] = uffdm_region_fd(vm->r);
	fds[WIRE_SIGBUS] = uffdm_sigbus_fd(vm->u);
	fds[WIRE_STATE] = uffdm_region_state_fd(vm->r);
	if (fds[WIRE_SIGBUS] < 0)
		return skip_or_fail("the SIGBUS descriptor", fds[WIRE_SIGBUS]);
	if (fds[WIRE_STATE] < 0)
		return skip_or_fail("the page states", fds[WIRE_STATE]);
	ret = wire_send(sv[0], fds, WIRE_NFDS, &w, sizeof(w));
	if (ret && ret != -EPIPE && ret != -ECONNRESET)
		return skip_or_fail("sending the descriptors", ret);
	/* a pager gone before the send is one that did not start */
	if (ret || read(sv[0], &ready, 1) != 1 || ready != WIRE_READY) {
		fprintf(stderr, "uffdm-vmm: the pager did not start (see its message)\n");
		return 1;
	}
	return 0;
}

static int start_pager(struct vm *vm)
{
	struct uffdm_watchdog_params wp = {
		.size = sizeof(wp), .stall_ms = vm->o->stall_ms, .lost = lost, .arg = vm,
	};
	int ret = spawn_pager(vm, 0);

	if (ret)
		return ret;
	wp.server_fd = vm->sock;
	ret = uffdm_watchdog_start(&vm->wd, vm->u, &vm->r, 1, &wp);
	return ret ? skip_or_fail("the watchdog", ret) : 0;
}

static int start_serving(struct vm *vm)
{
	struct uffdm_handler_config cfg = { .threads = 2, .fault = snapshot_fill };
	int ret;

	if (!vm->o->in_process)
		return start_pager(vm);
	ret = uffdm_handler_start(&vm->h, vm->u, vm->r, &cfg);
	return ret ? skip_or_fail("in-process handler", ret) : 0;
}

/*
 * The watchdog first (a pager told to go is no loss), then tell the pager
 * we are done (our end closing) and reap it, unless the watchdog did.
 */
static void stop_serving(struct vm *vm)
{
	if (vm->h)
		uffdm_handler_stop(vm->h, NULL);
	if (vm->sock < 0)
		return;
	vm->rep.size = sizeof(vm->rep);
	if (vm->wd)
		uffdm_watchdog_stop(vm->wd, &vm->rep);
	if (vm->rep.replaced)
		fprintf(stderr, "uffdm-vmm: the new pager served its first fault %.1f ms after "
			"the loss was seen\n", vm->rep.takeover_ns / 1e6);
	shutdown(vm->sock, SHUT_WR);
	if (vm->pager > 0) {
		if (!vm->wd)
			kill(vm->pager, SIGKILL);	/* it never got to serve */
		waitpid(vm->pager, NULL, 0);
	}
	close(vm->sock);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void summarize(struct vm *vm, struct result *res)
{
	size_t n = 0;

	for (size_t i = 0; i < vm->o->pages; i++)
		if (vm->lat[i])
			vm->lat[n++] = vm->lat[i];
	qsort(vm->lat, n, sizeof(*vm->lat), cmp_u64);
	res->read = n;
	res->p50 = n ? vm->lat[(n - 1) / 2] : 0;
	res->p99 = n ? vm->lat[(n - 1) * 99 / 100] : 0;
	for (unsigned int t = 0; t < vm->o->threads; t++) {
		res->bad += vm->cpu[t].bad;
		res->sigbus_cpus += vm->cpu[t].sigbus;
	}
	res->lost = vm->lost;
}

static int run_vcpus(struct vm *vm)
{
	size_t per = vm->o->pages / vm->o->threads;

	for (unsigned int t = 0; t < vm->o->threads; t++) {
		struct vcpu *c = &vm->cpu[t];

		c->vm = vm;
		c->first = t * per;
		c->n = t + 1 == vm->o->threads ? vm->o->pages - t * per : per;
		if (pthread_create(&c->tid, NULL, vcpu_run, c))
			return skip_or_fail("vCPU thread", -EAGAIN);
	}
	for (unsigned int t = 0; t < vm->o->threads; t++)
		pthread_join(vm->cpu[t].tid, NULL);
	return 0;
}

static int run_once(const struct opts *o, struct result *res)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	int ret;

	if (!vm)
		return 1;
	vm->o = o;
	vm->sock = -1;
	vm->lat = calloc(o->pages, sizeof(*vm->lat));
	ret = vm->lat ? make_memory(vm) : 1;
	if (!ret)
		ret = start_serving(vm);
	if (!ret)
		ret = run_vcpus(vm);
	stop_serving(vm);
	if (!ret)
		summarize(vm, res);
	/* the descriptor last: closing it first would wake a waiter into stale data */
	uffdm_region_destroy(vm->r);
	uffdm_close(vm->u);
	free(vm->lat);
	free(vm);
	return ret;
}

static void usage(void)
{
	fprintf(stderr, "usage: uffdm-vmm --pager PATH [--pages N] [--backing shmem|hugetlb] "
		"[--threads T] [--kill-after K [--replace] | --stop-after K] [--stall-ms MS] [--in-process] "
		"[--reps R]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "pager", required_argument, NULL, 'p' },
		{ "pages", required_argument, NULL, 'n' },
		{ "backing", required_argument, NULL, 'b' },
		{ "threads", required_argument, NULL, 't' },
		{ "kill-after", required_argument, NULL, 'k' },
		{ "stop-after", required_argument, NULL, 'S' },
		{ "stall-ms", required_argument, NULL, 's' },
		{ "in-process", no_argument, NULL, 'i' },
		{ "reps", required_argument, NULL, 'r' },
		{ "replace", no_argument, NULL, 'R' },
		{ 0 },
	};
	int c;

	*o = (struct opts){ .pages = 1024, .threads = 2, .stall_ms = 10000, .kill_sig = SIGKILL };
	while ((c = getopt_long(argc, argv, "p:n:b:t:k:S:s:ir:R", lo, NULL)) != -1) {
		switch (c) {
		case 'p': o->pager = optarg; break;
		case 'n': o->pages = strtoul(optarg, NULL, 0); break;
		case 't': o->threads = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'k': o->kill_after = strtoul(optarg, NULL, 0); break;
		case 'S':
			o->kill_after = strtoul(optarg, NULL, 0);
			o->kill_sig = SIGSTOP;
			break;
		case 's': o->stall_ms = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'i': o->in_process = true; break;
		case 'r': o->reps = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'R': o->replace = true; break;
		case 'b':
			if (!strcmp(optarg, "shmem"))
				o->backing = UFFDM_SHMEM;
			else if (!strcmp(optarg, "hugetlb"))
				o->backing = UFFDM_HUGETLB;
			else
				usage();
			break;
		default: usage();
		}
	}
	if ((!o->pager && !o->in_process) || !o->pages || !o->threads ||
	    o->threads > MAX_VCPUS || o->threads > o->pages || !o->stall_ms)
		usage();
}

static int report(const struct opts *o, const struct result *res)
{
	printf("uffdm-vmm: %s, %zu pages, %u vCPUs: %zu read, %zu wrong, %zu vCPUs got SIGBUS; "
	       "fault p50 %llu ns p99 %llu ns\n", o->in_process ? "in-process" : "out-of-process",
	       o->pages, o->threads, res->read, res->bad, res->sigbus_cpus,
	       (unsigned long long)res->p50, (unsigned long long)res->p99);
	if (res->bad)
		return 4;
	if (res->lost)
		return res->sigbus_cpus ? 3 : 1;
	return res->sigbus_cpus || res->read != o->pages ? 1 : 0;
}

static uint64_t median(uint64_t *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

/* R alternating runs of each; min/median/max of each percentile, and the ratio of medians. */
static int compare(struct opts *o)
{
	uint64_t v[2][2][64];	/* [in/out][p50/p99][rep] */
	struct result res;
	int ret;

	if (o->reps > 64 || !o->pager)
		usage();
	for (unsigned int i = 0; i < o->reps; i++)
		for (int m = 0; m < 2; m++) {
			o->in_process = m == 0;
			res = (struct result){ 0 };
			ret = run_once(o, &res);
			if (!ret)
				ret = report(o, &res);
			if (ret)
				return ret;
			v[m][0][i] = res.p50;
			v[m][1][i] = res.p99;
		}
	printf("%-16s %10s %10s %10s   %10s %10s %10s\n", "fault latency ns", "p50 min", "median",
	       "max", "p99 min", "median", "max");
	for (int m = 0; m < 2; m++) {
		uint64_t med[2];

		printf("%-16s", m ? "out-of-process" : "in-process");
		for (int q = 0; q < 2; q++) {
			med[q] = median(v[m][q], o->reps);
			printf(" %10llu %10llu %10llu  ", (unsigned long long)v[m][q][0],
			       (unsigned long long)med[q], (unsigned long long)v[m][q][o->reps - 1]);
		}
		printf("\n");
	}
	printf("ratio out/in (medians): p50 %.2fx p99 %.2fx\n",
	       (double)median(v[1][0], o->reps) / (double)median(v[0][0], o->reps),
	       (double)median(v[1][1], o->reps) / (double)median(v[0][1], o->reps));
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigbus, .sa_flags = SA_NODEFER };
	struct result res = { 0 };
	struct opts o;
	int ret;

	parse(argc, argv, &o);
	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o.reps)
		return compare(&o);
	ret = run_once(&o, &res);
	return ret ? ret : report(&o, &res);
}

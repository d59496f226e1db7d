// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

const struct mem_case shmem_case = { UFFDM_SHMEM, "shmem" };
const struct mem_case hugetlb_case = { UFFDM_HUGETLB, "hugetlb" };

/* What the helpers made and the case has not put yet. */
static struct uffdm *live_u[8];
static struct uffdm_region *live_r[8];

static void track(void **slots, size_t n, void *p)
{
	for (size_t i = 0; i < n; i++)
		if (!slots[i]) {
			slots[i] = p;
			return;
		}
}

static void untrack(void **slots, size_t n, void *p)
{
	for (size_t i = 0; i < n; i++)
		if (slots[i] == p)
			slots[i] = NULL;
}

void put_uffd(struct uffdm *u)
{
	untrack((void **)live_u, 8, u);
	uffdm_close(u);
}

void put_region(struct uffdm_region *r)
{
	untrack((void **)live_r, 8, r);
	uffdm_region_destroy(r);
}

struct uffdm *adopt_uffd(struct uffdm *u)
{
	track((void **)live_u, 8, u);
	return u;
}

/* Descriptors first: a region with EVENT_UNMAP would wait for a reader. */
void put_all(void)
{
	for (size_t i = 0; i < 8; i++)
		if (live_u[i])
			put_uffd(live_u[i]);
	for (size_t i = 0; i < 8; i++)
		if (live_r[i])
			put_region(live_r[i]);
}

struct uffdm_probe probe(void)
{
	struct uffdm_probe p;
	char why[512];
	int ret = uffdm_probe(&p);

	if (ret) {
		uffdm_open_explain(why, sizeof(why));
		SKIP_BECAUSE("no userfaultfd (%s): %s", strerror(-ret), why);
	}
	return p;
}

int kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &ma, &mi);
	return ma > major || (ma == major && mi >= minor);
}

/* x86_64 and arm64 select HAVE_ARCH_USERFAULTFD_MINOR; elsewhere MINOR may be absent. */
static bool arch_has_minor(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

/*
 * A feature the kernel must have, by version and architecture, that is
 * missing fails the case (a build that masks it must not turn the suite
 * into skips); otherwise it is a skip with the reason.
 */
static void need_minor(bool have, const char *feature, int major, int minor)
{
	if (have)
		return;
	if (arch_has_minor() && kernel_at_least(major, minor)) {
		put_all();
		fail_msg("kernel lacks %s although Linux %d.%d+ on this architecture has it",
			 feature, major, minor);
	}
	SKIP_BECAUSE("kernel lacks %s (Linux %d.%d+)", feature, major, minor);
}

const struct mem_case *need_case(void **state)
{
	const struct mem_case *mc = *state;
	struct uffdm_probe p = probe();

	if (mc->backing == UFFDM_SHMEM)
		need_minor(uffdm_probe_minor_shmem(&p), "UFFD_FEATURE_MINOR_SHMEM", 5, 14);
	else
		need_minor(uffdm_probe_minor_hugetlbfs(&p), "UFFD_FEATURE_MINOR_HUGETLBFS", 5, 13);
	return mc;
}

size_t case_page_size(const struct mem_case *mc)
{
	return uffdm_backing_page_size(mc->backing);
}

static long free_huge_pages(size_t page)
{
	char path[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages",
		 page / 1024);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

struct uffdm_region *make_region(const struct mem_case *mc, size_t npages)
{
	size_t page = case_page_size(mc);
	struct uffdm_region *r = NULL;
	long avail;
	int ret;

	if (!page)
		SKIP_BECAUSE("%s: no page size known", mc->name);
	if (mc->backing != UFFDM_SHMEM) {
		avail = free_huge_pages(page);
		if (avail >= 0 && (size_t)avail < npages)
			SKIP_BECAUSE("hugetlb: %zu free %zu kB huge pages needed, the pool has %ld "
				     "(vm.nr_hugepages)", npages, page / 1024, avail);
	}
	ret = uffdm_region_create(&r, mc->backing, npages * page);
	if (ret == -ENOMEM && mc->backing != UFFDM_SHMEM)
		SKIP_BECAUSE("hugetlb: no huge pages in the pool (ENOMEM)");
	assert_int_equal(ret, 0);
	track((void **)live_r, 8, r);
	return r;
}

struct uffdm *open_uffd(unsigned int flags, uint64_t features)
{
	struct uffdm *u = NULL;
	char why[512];
	int ret = uffdm_open(&u, flags, features);

	if (ret == -EOPNOTSUPP)
		SKIP_BECAUSE("kernel lacks features 0x%llx", (unsigned long long)features);
	if (ret) {
		uffdm_open_explain(why, sizeof(why));
		SKIP_BECAUSE("cannot open a userfaultfd (%s): %s", strerror(-ret), why);
	}
	track((void **)live_u, 8, u);
	return u;
}

struct uffdm_region *registered_region(struct uffdm *u, const struct mem_case *mc,
				       size_t npages, unsigned int reg_flags)
{
	struct uffdm_region *r = make_region(mc, npages);
	uint64_t ioctls = 0;

	assert_int_equal(uffdm_region_populate(r, 0, uffdm_region_size(r)), 0);
	assert_int_equal(uffdm_region_register(u, r, reg_flags, &ioctls), 0);
	assert_true(ioctls & (1ull << _UFFDIO_CONTINUE));
	return r;
}

/* Stamp both ends of the page: a page mapped at the wrong offset fails. */
void fill_page(void *page, size_t len, size_t i)
{
	uint64_t *w = page;

	w[0] = 0x5546464d00000000ull | i;
	w[len / sizeof(*w) - 1] = ~(uint64_t)i;
}

int check_page(const void *page, size_t len, size_t i)
{
	const uint64_t *w = page;

	return w[0] == (0x5546464d00000000ull | i) && w[len / sizeof(*w) - 1] == ~(uint64_t)i;
}

static void *reader_run(void *arg)
{
	struct page_reader *t = arg;
	size_t page = uffdm_region_page_size(t->r);
	sigjmp_buf jb;

	sigbus_jmp = &jb;
	if (sigsetjmp(jb, 1)) {
		t->result = READ_SIGBUS;
		return NULL;
	}
	t->ok = check_page((char *)uffdm_region_view(t->r) + t->i * page, page, t->i);
	t->result = t->ok ? READ_OK : READ_BAD;
	sigbus_jmp = NULL;
	return NULL;
}

void start_reader(struct page_reader *t, struct uffdm_region *r, size_t i)
{
	*t = (struct page_reader){ .r = r, .i = i };
	assert_int_equal(pthread_create(&t->tid, NULL, reader_run, t), 0);
}

int join_reader(struct page_reader *t)
{
	pthread_join(t->tid, NULL);
	return t->ok;
}

int join_reader_within(struct page_reader *t, unsigned int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	if (pthread_timedjoin_np(t->tid, NULL, &ts))
		fail_msg("the read of page %zu hung: nothing served or failed it", t->i);
	return t->result;
}

struct child_result run_child(int (*fn)(void *), void *arg, unsigned int seconds)
{
	struct child_result res = { 0 };
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka's handlers would catch what the parent wants to see. */
		static const int sigs[] = { SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGSYS };

		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL);
		/* A hang is what we test against: the watchdog turns it into SIGALRM. */
		alarm(seconds);
		_exit(fn(arg));
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	res.exited = WIFEXITED(st);
	res.status = res.exited ? WEXITSTATUS(st) : -1;
	res.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	return res;
}

void expect_child_sigbus(const struct mem_case *mc, size_t npages, int (*fn)(void *), void *arg)
{
	struct child_result res;

	put_region(make_region(mc, npages));	/* skip on an empty pool */
	res = run_child(fn, arg, 20);
	if (res.signal == SIGALRM)
		fail_msg("faulting thread hung: the watchdog fired");
	if (res.exited)
		fail_msg("child exited with status %d instead of dying of SIGBUS", res.status);
	assert_int_equal(res.signal, SIGBUS);
}

int drop_privileges(void)
{
	if (geteuid() != 0)
		return 0;
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		return -errno;
	return 0;
}

struct e2e_ctx {
	struct e2e *e;
	struct uffdm_region *r;
	uint32_t *count;
	size_t page;
};

struct faulter {
	struct e2e_ctx *c;
	size_t first, n, bad;
	pthread_t tid;
};

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct e2e_ctx *c = arg;
	size_t i = off / c->page;

	(void)ev;
	__atomic_fetch_add(&c->count[i], 1, __ATOMIC_RELAXED);
	fill_page((char *)uffdm_region_backing(r) + off, c->page, i);
	return 0;
}

static void *touch_pages(void *arg)
{
	struct faulter *f = arg;
	char *view = uffdm_region_view(f->c->r);

	for (size_t i = f->first; i < f->first + f->n; i++)
		if (!check_page(view + i * f->c->page, f->c->page, i))
			f->bad++;
	return NULL;
}

static int e2e_fail(struct e2e *e, int ret, const char *what)
{
	if (ret == -EOPNOTSUPP || ret == -EPERM || ret == -EACCES || ret == -ENOSYS)
		uffdm_open_explain(e->why, sizeof(e->why));
	else
		snprintf(e->why, sizeof(e->why), "%s: %s", what, strerror(-ret));
	return ret;
}

static int e2e_faults(struct e2e_ctx *c)
{
	struct e2e *e = c->e;
	struct faulter f[64] = { { 0 } };
	unsigned int n = e->fault_threads > 64 ? 64 : e->fault_threads;

	for (unsigned int t = 0; t < n; t++) {
		f[t] = (struct faulter){ c, t * e->pages_per_thread, e->pages_per_thread, 0, 0 };
		if (pthread_create(&f[t].tid, NULL, touch_pages, &f[t]))
			return -EAGAIN;
	}
	for (unsigned int t = 0; t < n; t++) {
		pthread_join(f[t].tid, NULL);
		e->bad += f[t].bad;
	}
	return 0;
}

static int e2e_serve(struct e2e_ctx *c, struct uffdm *u)
{
	struct uffdm_handler_config cfg = {
		.threads = c->e->handler_threads, .fault = stamp, .arg = c,
	};
	struct uffdm_handler *h;
	int ret;

	ret = uffdm_region_register(u, c->r, 0, NULL);
	if (ret)
		return e2e_fail(c->e, ret, "register");
	ret = uffdm_handler_start(&h, u, c->r, &cfg);
	if (ret)
		return e2e_fail(c->e, ret, "handler start");
	ret = e2e_faults(c);
	uffdm_handler_stop(h, &c->e->stats);
	return ret ? e2e_fail(c->e, ret, "fault threads") : 0;
}

int e2e_run(struct e2e *e)
{
	size_t total = e->pages_per_thread * e->fault_threads;
	struct e2e_ctx c = { .e = e };
	struct uffdm *u = NULL;
	int ret;

	ret = uffdm_region_create(&c.r, e->backing, total * case_page_size(
		e->backing == UFFDM_SHMEM ? &shmem_case : &hugetlb_case));
	if (ret)
		return e2e_fail(e, ret, "region create");
	c.page = uffdm_region_page_size(c.r);
	c.count = calloc(total, sizeof(*c.count));
	ret = c.count ? uffdm_region_populate(c.r, 0, uffdm_region_size(c.r)) : -ENOMEM;
	if (ret)
		e2e_fail(e, ret, "populate");
	if (!ret)
		ret = uffdm_open(&u, e->open_flags, 0);
	if (ret && !e->why[0])
		e2e_fail(e, ret, "open");
	if (!ret)
		ret = e2e_serve(&c, u);
	for (size_t i = 0; !ret && i < total; i++) {
		e->lost += c.count[i] == 0;
		e->dup += c.count[i] > 1;
	}
	uffdm_close(u);
	free(c.count);
	uffdm_region_destroy(c.r);
	return ret;
}

void e2e_check(const struct mem_case *mc, struct e2e *e)
{
	size_t total = e->pages_per_thread * e->fault_threads;
	int ret;

	e->backing = mc->backing;
	/* skips on a short pool, saying so */
	put_region(make_region(mc, total));
	ret = e2e_run(e);
	if (ret)
		fail_msg("%s", e->why);
	print_message("%zu pages, %u faulting x %u handler threads: minor %llu resolved %llu "
		      "eexist %llu eagain %llu, latency p50 %llu p99 %llu max %llu ns\n",
		      total, e->fault_threads, e->handler_threads,
		      (unsigned long long)e->stats.minor, (unsigned long long)e->stats.resolved,
		      (unsigned long long)e->stats.eexist, (unsigned long long)e->stats.eagain,
		      (unsigned long long)e->stats.p50_ns, (unsigned long long)e->stats.p99_ns,
		      (unsigned long long)e->stats.max_ns);
	assert_int_equal(e->lost, 0);
	assert_int_equal(e->dup, 0);
	assert_int_equal(e->bad, 0);
	assert_int_equal(e->stats.minor, total);
	assert_int_equal(e->stats.resolved, total);
	assert_int_equal(e->stats.failed, 0);
	assert_true(e->stats.p50_ns <= e->stats.p99_ns);
	assert_true(e->stats.p99_ns <= e->stats.max_ns);
}

static unsigned int count_lines(const char *path)
{
	unsigned int n = 0;
	FILE *f = fopen(path, "re");
	int c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

unsigned int open_fd_count(void)
{
	unsigned int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the directory's own descriptor */
}

unsigned int mapping_count(void)
{
	return count_lines("/proc/self/maps");
}

const struct track_case wp_shmem = { UFFDM_TRACK_UFFD_WP, &shmem_case };
const struct track_case wp_hugetlb = { UFFDM_TRACK_UFFD_WP, &hugetlb_case };
const struct track_case scan_shmem = { UFFDM_TRACK_PAGEMAP_SCAN, &shmem_case };
const struct track_case scan_hugetlb = { UFFDM_TRACK_PAGEMAP_SCAN, &hugetlb_case };
const struct track_case sd_shmem = { UFFDM_TRACK_SOFT_DIRTY, &shmem_case };
const struct track_case sd_hugetlb = { UFFDM_TRACK_SOFT_DIRTY, &hugetlb_case };

/* The feature bits a kind needs, 0 when only trying tells (soft-dirty). */
static uint64_t kind_features(enum uffdm_track_kind k)
{
	switch (k) {
	case UFFDM_TRACK_UFFD_WP:
		return UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
	case UFFDM_TRACK_PAGEMAP_SCAN:
		return UFFD_FEATURE_WP_ASYNC;
	default:
		return 0;
	}
}

/* Why soft-dirty does not start on mc (-EOPNOTSUPP); arm64 has no soft-dirty at all. */
static const char *sd_missing(const struct mem_case *mc)
{
	return mc->backing == UFFDM_SHMEM ? "kernel without CONFIG_MEM_SOFT_DIRTY (x86 only)" :
	       "hugetlbfs pages show no soft-dirty bit in pagemap, or no free huge page "
	       "for the probe";
}

struct uffdm_tracker *start_tracker(const struct track_case *c, struct uffdm_region *r)
{
	uint64_t need = kind_features(c->kind);
	struct uffdm_probe p = probe();
	struct uffdm_tracker *t = NULL;
	int ret;

	if (need && !uffdm_probe_has(&p, need))
		SKIP_BECAUSE("the kernel lacks %s tracking on %s (feature 0x%llx)",
			     uffdm_track_name(c->kind), c->mc->name, (unsigned long long)need);
	ret = uffdm_tracker_start(&t, c->kind, uffdm_region_view(r), uffdm_region_size(r),
				  uffdm_region_page_size(r), 0);
	if (!need && ret == -EOPNOTSUPP)
		SKIP_BECAUSE("%s tracking does not work on %s here (%s)",
			     uffdm_track_name(c->kind), c->mc->name, sd_missing(c->mc));
	if (ret)
		fail_msg("%s on %s: %s", uffdm_track_name(c->kind), c->mc->name, strerror(-ret));
	assert_int_equal(uffdm_tracker_kind(t), c->kind);
	return t;
}

bool bit_is_set(const uint8_t *bm, size_t i)
{
	return bm[i / 8] & (1u << (i % 8));
}

void write_pages(uint8_t *view, size_t page, const unsigned int *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		view[set[i] * page + 8]++;
}

bool in_set(unsigned int p, const unsigned int *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == p)
			return true;
	return false;
}

static int served_stamp(void *arg, struct uffdm_region *r, size_t off,
			const struct uffdm_event *ev)
{
	size_t page = uffdm_region_page_size(r);

	(void)arg;
	(void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, page, off / page);
	return 0;
}

/* What the handler's descriptor needs for pagemap-scan to share its range. */
static uint64_t served_features(bool wp_async)
{
	struct uffdm_probe p = probe();
	uint64_t f = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM |
		     UFFD_FEATURE_WP_UNPOPULATED;

	if (!wp_async)
		return 0;
	if (!uffdm_probe_has(&p, f))
		SKIP_BECAUSE("pagemap-scan on served memory needs the handler's descriptor "
			     "opened with UFFD_FEATURE_WP_ASYNC (6.7+); the kernel lacks it");
	return f;
}

void served_setup(struct served *s, const struct mem_case *mc, bool wp_async, size_t npages)
{
	void *state = (void *)mc;
	uint64_t f = served_features(wp_async);
	struct uffdm_handler_config cfg = { .threads = 2, .fault = served_stamp };

	need_case(&state);
	*s = (struct served){ 0 };
	s->u = open_uffd(0, f);
	s->r = registered_region(s->u, mc, npages, f ? UFFDM_REGISTER_WP : 0);
	assert_int_equal(uffdm_handler_start(&s->h, s->u, s->r, &cfg), 0);
}

void served_start(struct served *s, const struct track_case *c, size_t npages)
{
	int ret;

	served_setup(s, c->mc, c->kind == UFFDM_TRACK_PAGEMAP_SCAN, npages);
	ret = uffdm_tracker_start(&s->t, c->kind, uffdm_region_view(s->r),
				  uffdm_region_size(s->r), uffdm_region_page_size(s->r), 0);
	if (ret == -EOPNOTSUPP && c->kind == UFFDM_TRACK_SOFT_DIRTY) {
		uffdm_handler_stop(s->h, NULL);
		SKIP_BECAUSE("soft-dirty tracking does not work on %s here (%s)", c->mc->name,
			     sd_missing(c->mc));
	}
	if (ret)
		fail_msg("%s on served %s: %s", uffdm_track_name(c->kind), c->mc->name,
			 strerror(-ret));
	assert_int_equal(uffdm_tracker_kind(s->t), c->kind);
}

uint64_t served_fills(const struct served *s)
{
	struct uffdm_stats st;

	assert_int_equal(uffdm_handler_stats(s->h, &st), 0);
	return st.fills;
}

void served_stop(struct served *s)
{
	uffdm_tracker_stop(s->t);
	assert_int_equal(uffdm_handler_stop(s->h, NULL), 0);
	put_region(s->r);
	put_uffd(s->u);
}

__thread sigjmp_buf *sigbus_jmp;

void sigbus_jump(int sig)
{
	(void)sig;
	if (sigbus_jmp)
		siglongjmp(*sigbus_jmp, 1);
	_exit(40);
}

int read_sigbus_jump(const volatile char *p)
{
	sigjmp_buf jb;
	int got = 1;

	if (!sigsetjmp(jb, 1)) {
		sigbus_jmp = &jb;
		(void)*p;
		got = 0;
	}
	sigbus_jmp = NULL;
	return got;
}

void catch_sigbus(void)
{
	struct sigaction sa = { .sa_handler = sigbus_jump, .sa_flags = SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

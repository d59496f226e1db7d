// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Non-cooperative events through the handler: REMOVE (madvise), UNMAP
 * (munmap) and FORK reach the event callback, are counted, and the thread
 * that caused each one continues once the handler has read it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

struct seen {
	unsigned int kinds[UFFDM_EVENT_UNMAP + 1];
	uint64_t addr[UFFDM_EVENT_UNMAP + 1];
};

static int no_fault(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return -EIO;
}

static void on_event(void *arg, const struct uffdm_event *ev)
{
	struct seen *s = arg;

	if (ev->kind > UFFDM_EVENT_UNMAP)
		return;
	s->addr[ev->kind] = ev->addr;
	__atomic_fetch_add(&s->kinds[ev->kind], 1, __ATOMIC_RELEASE);
	/* The child's descriptor is ours now: dropping it lets the child run free. */
	if (ev->kind == UFFDM_EVENT_FORK)
		close(ev->fork_fd);
}

/* The event is complete once read; the callback runs just after. */
static unsigned int wait_kind(struct seen *s, enum uffdm_event_kind k)
{
	for (int i = 0; i < 5000 && !__atomic_load_n(&s->kinds[k], __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	return __atomic_load_n(&s->kinds[k], __ATOMIC_ACQUIRE);
}

static struct uffdm_handler *start(struct uffdm *u, struct uffdm_region *r, struct seen *s)
{
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = no_fault, .event = on_event, .arg = s,
	};
	struct uffdm_handler *h;

	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	return h;
}

/*
 * Close the descriptor before destroying the region: with EVENT_UNMAP a
 * munmap of a registered range waits for a reader that is gone.
 */
static void finish(struct uffdm_handler *h, struct uffdm *u, struct uffdm_region *r,
		   uint64_t events)
{
	struct uffdm_stats st;

	assert_int_equal(uffdm_handler_stop(h, &st), 0);
	assert_int_equal(st.events, events);
	assert_int_equal(st.minor + st.missing + st.wp, 0);
	put_uffd(u);
	put_region(r);
}

static void test_remove_unmap(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP);
	struct uffdm_region *r = registered_region(u, mc, 4, 0);
	size_t page = uffdm_region_page_size(r);
	char *view = uffdm_region_view(r);
	struct seen s = { 0 };
	struct uffdm_handler *h = start(u, r, &s);

	/* Each call returns only after the handler read its event. */
	assert_int_equal(uffdm_region_zap(r, page, page), 0);
	assert_int_equal(munmap(view + 3 * page, page), 0);
	assert_int_equal(wait_kind(&s, UFFDM_EVENT_REMOVE), 1);
	assert_int_equal(s.addr[UFFDM_EVENT_REMOVE], (uintptr_t)view + page);
	assert_int_equal(wait_kind(&s, UFFDM_EVENT_UNMAP), 1);
	assert_int_equal(s.addr[UFFDM_EVENT_UNMAP], (uintptr_t)view + 3 * page);
	finish(h, u, r, 2);
}

static void test_fork(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_handler *h;
	struct seen s = { 0 };
	int st, ret;
	pid_t pid;

	ret = uffdm_open(&u, 0, UFFD_FEATURE_EVENT_FORK);
	if (ret == -EPERM) {
		char why[256];

		uffdm_open_explain(why, sizeof(why));
		assert_non_null(strstr(why, "CAP_SYS_PTRACE"));
		SKIP_BECAUSE("%s", why);
	}
	assert_int_equal(ret, 0);
	r = registered_region(adopt_uffd(u), mc, 1, 0);
	h = start(u, r, &s);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(wait_kind(&s, UFFDM_EVENT_FORK), 1);
	finish(h, u, r, 1);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int no_fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return 0;
}

/* Without an event callback nobody owns the child's descriptor: the handler closes it. */
static void test_fork_no_callback(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = no_fill };
	struct uffdm_handler *h;
	struct uffdm_region *r;
	struct uffdm_stats st = { 0 };
	struct uffdm *u;
	int before, after = -1, wst, ret;
	pid_t pid;

	ret = uffdm_open(&u, 0, UFFD_FEATURE_EVENT_FORK);
	if (ret == -EPERM)
		SKIP_BECAUSE("UFFD_FEATURE_EVENT_FORK needs CAP_SYS_PTRACE");
	assert_int_equal(ret, 0);
	r = registered_region(adopt_uffd(u), mc, 1, 0);
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), 0);
	before = count_fds();
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &wst, 0), pid);
	for (int i = 0; i < 2000 && (st.events < 1 || after != before); i++) {
		usleep(1000);
		uffdm_handler_stats(h, &st);
		after = count_fds();
	}
	assert_int_equal(st.events, 1);
	assert_int_equal(after, before);
	assert_int_equal(uffdm_handler_stop(h, NULL), 0);
	put_uffd(u);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_remove_unmap),
		CROSS(test_fork),
		CROSS(test_fork_no_callback),
	};

	return cmocka_run_group_tests_name("noncoop", tests, NULL, NULL);
}

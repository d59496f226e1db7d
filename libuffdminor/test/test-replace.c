// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A page server replaced: the VMM (this process) keeps its userfaultfd and
 * the page states in a memfd it owns (uffdm_region_state_fd); server A, a
 * process, fills page 0, defers page 1 (it has read that fault) and is
 * killed; server B adopts the same descriptor and the states with
 * UFFDM_STATE_TAKEOVER and carries on.  Page 0 stays filled (B never fills
 * it), the fault A had read on page 1 is served by B, page 2 too, every
 * byte is right, and no page is filled twice.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "server.h"

#define NPAGES 4

struct shared {
	int fills[NPAGES];	/* fills that returned 0, by any server */
	int a_deferred;		/* server A has page 1 deferred */
};

struct server {
	struct shared *sh;
	bool is_a;
};

static int serve_cb(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct server *s = arg;
	size_t page = uffdm_region_page_size(r);

	(void)ev;
	if (s->is_a && off / page == 1) {
		__atomic_store_n(&s->sh->a_deferred, 1, __ATOMIC_RELEASE);
		return UFFDM_FILL_LATER;	/* ... and A dies before completing it */
	}
	fill_page((char *)uffdm_region_backing(r) + off, page, off / page);
	__atomic_add_fetch(&s->sh->fills[off / page], 1, __ATOMIC_ACQ_REL);
	return 0;
}

/*
 * The reader's result, or a failure as soon as the server that should
 * serve it has exited: never a hang on a dead server.
 */
static int join_served(struct page_reader *t, pid_t server)
{
	struct timespec ts;
	int st;

	for (;;) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (!pthread_timedjoin_np(t->tid, NULL, &ts))
			return t->ok;
		if (waitpid(server, &st, WNOHANG) == server)
			fail_msg("the server exited (status 0x%x) with page %zu unserved", st, t->i);
	}
}

static void test_replace_server(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, NPAGES, 0);
	size_t page = uffdm_region_page_size(r);
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct server sa = { .sh = sh, .is_a = true }, sb = { .sh = sh };
	struct page_server ps_a = { .fault = serve_cb, .arg = &sa };
	struct page_server ps_b = { .fault = serve_cb, .arg = &sb, .state_flags = UFFDM_STATE_TAKEOVER };
	struct page_reader t0, t1, t2;
	int state_fd = uffdm_region_state_fd(r), sigbus_fd = uffdm_sigbus_fd(u);
	int ctl_a, ctl_b, st;
	pid_t a, b;

	assert_true(sh != MAP_FAILED);
	assert_true(state_fd >= 0);
	assert_true(sigbus_fd >= 0);
	assert_int_equal(uffdm_region_state_fd(r), state_fd);	/* the same, kept by r */
	a = page_server_fork(u, r, &ps_a, &ctl_a);
	b = page_server_fork(u, r, &ps_b, &ctl_b);
	page_server_go(ctl_a);
	start_reader(&t0, r, 0);
	assert_true(join_served(&t0, a));
	start_reader(&t1, r, 1);
	while (!__atomic_load_n(&sh->a_deferred, __ATOMIC_ACQUIRE)) {
		assert_int_equal(waitpid(a, &st, WNOHANG), 0);
		usleep(1000);
	}
	/*
	 * The VMM sees the states its servers change.  The callback raised
	 * a_deferred before it returned, and the library records DEFERRED
	 * only after: until then the page reads FILLING, never anything else.
	 */
	assert_int_equal(uffdm_region_page_state(r, 0), UFFDM_PAGE_FILLED);
	while (uffdm_region_page_state(r, page) == UFFDM_PAGE_FILLING) {
		assert_int_equal(waitpid(a, &st, WNOHANG), 0);
		usleep(1000);
	}
	assert_int_equal(uffdm_region_page_state(r, page), UFFDM_PAGE_DEFERRED);
	kill(a, SIGKILL);
	assert_int_equal(waitpid(a, &st, 0), a);
	close(ctl_a);

	page_server_go(ctl_b);
	assert_true(join_served(&t1, b));	/* the fault A had read, served by B */
	start_reader(&t2, r, 2);
	assert_true(join_served(&t2, b));
	close(ctl_b);
	assert_int_equal(waitpid(b, &st, 0), b);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(sh->fills[i], 1);	/* none twice, page 0 not again */
	assert_int_equal(uffdm_region_unregister(u, r), 0);
	munmap(sh, sizeof(*sh));
	put_uffd(u);
	put_region(r);
}

static void test_state_refused(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm_region *r = make_region(mc, 2), *other = make_region(mc, 1);
	int fd = uffdm_region_state_fd(r);

	assert_true(fd >= 0);
	assert_int_equal(uffdm_region_state_fd(NULL), -EINVAL);
	assert_int_equal(uffdm_region_adopt_state(other, fd, 0), -EINVAL);	/* size */
	assert_int_equal(uffdm_region_adopt_state(other, fd, 4), -EINVAL);	/* flags */
	put_region(other);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_replace_server),
		CROSS(test_state_refused),
	};

	return cmocka_run_group_tests_name("replace", tests, NULL, NULL);
}

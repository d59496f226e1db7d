// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm_adopt: a userfaultfd made elsewhere, with its creator's features.
 * The foreign cases fork a "VMM" child that makes the memory, registers
 * it and sends its descriptors over a socketpair; this process serves its
 * faults through a region made with uffdm_region_from_fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "wire.h"	/* examples/: SCM_RIGHTS */

#define NPAGES 8

static void expect_not_uffd(int fd)
{
	struct uffdm *u = NULL;

	assert_int_equal(uffdm_adopt(&u, fd, 0, 0), -EBADF);
	assert_null(u);
	assert_true(fcntl(fd, F_GETFD) >= 0);	/* still the caller's */
	close(fd);
}

static void test_adopt_not_uffd(void **state)
{
	struct uffdm *u = NULL;
	int p[2], fd;

	(void)state;
	assert_int_equal(pipe(p), 0);
	close(p[1]);
	expect_not_uffd(p[0]);
	expect_not_uffd(eventfd(0, EFD_CLOEXEC));
	expect_not_uffd(memfd_create("not-uffd", MFD_CLOEXEC));
	expect_not_uffd(open("/dev/null", O_RDONLY | O_CLOEXEC));
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(fd);
	assert_int_equal(uffdm_adopt(&u, fd, 0, 0), -EBADF);	/* closed */
	assert_int_equal(uffdm_adopt(&u, -1, 0, 0), -EBADF);
	assert_int_equal(uffdm_adopt(NULL, 0, 0, 0), -EINVAL);
	assert_int_equal(uffdm_adopt(&u, 0, 0, 1u << 7), -EINVAL);	/* flags: 0 */
	assert_null(u);
}

static void test_adopt_features(void **state)
{
	struct uffdm_probe p = probe();
	uint64_t want = p.features & UFFD_FEATURE_THREAD_ID;
	struct uffdm *u = open_uffd(0, want), *a = NULL;
	int fd = fcntl(uffdm_fd(u), F_DUPFD_CLOEXEC, 0);

	(void)state;
	assert_true(fd >= 0);
	/* not granted to the creator: refused, and the descriptor stays ours */
	assert_int_equal(uffdm_adopt(&a, fd, UFFD_FEATURE_SIGBUS, 0), -EOPNOTSUPP);
	assert_int_equal(uffdm_adopt(&a, fd, want, 0), 0);
	adopt_uffd(a);
	assert_int_equal(uffdm_fd(a), fd);
	/* what was granted, not what the kernel offers (uffdm_features(u) in 0.1) */
	assert_true(uffdm_features(a) == want);
	assert_true(uffdm_ioctls(a) & (1ull << _UFFDIO_REGISTER));
	put_uffd(a);
	assert_true(fcntl(fd, F_GETFD) < 0);	/* uffdm_close closed it */
	put_uffd(u);
}

/* A descriptor nobody issued UFFDIO_API on: adopt issues it, once. */
static void test_adopt_uninitialized(void **state)
{
	struct uffdm_probe p = probe();
	uint64_t want = p.features & UFFD_FEATURE_THREAD_ID;
	struct uffdm *a, *b;
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY), dup_fd;

	(void)state;
	if (fd < 0)
		SKIP_BECAUSE("userfaultfd(2): %s", strerror(errno));
	assert_int_equal(uffdm_adopt(&a, fd, want, 0), 0);
	adopt_uffd(a);
	assert_true(uffdm_features(a) == want);
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	assert_int_equal(uffdm_adopt(&b, dup_fd, 0, 0), 0);
	adopt_uffd(b);
	assert_true(uffdm_features(b) == want);
	put_uffd(b);
	put_uffd(a);
}

/* ---- a VMM in another process ----------------------------------------- */

struct layout {
	uint64_t view, size;
	uint32_t nfds;
};

enum vmm_flags { VMM_SEND_SIGBUS = 1 };

/* The child: make, register, send, then on 'g' read every page; 0 = all right. */
static int vmm(int sock, enum uffdm_backing b, size_t page, unsigned int flags)
{
	struct uffdm_region *r;
	struct uffdm *u;
	struct layout l;
	int fds[4];
	char go;

	if (uffdm_region_create(&r, b, NPAGES * page) ||
	    uffdm_region_populate(r, 0, NPAGES * page) ||
	    uffdm_open(&u, 0, 0) || uffdm_region_register(u, r, 0, NULL))
		return 10;
	fds[0] = uffdm_fd(u);
	fds[1] = uffdm_region_fd(r);
	fds[2] = uffdm_region_state_fd(r);	/* a pager may adopt them or not */
	fds[3] = flags & VMM_SEND_SIGBUS ? uffdm_sigbus_fd(u) : -1;
	l = (struct layout){ (uintptr_t)uffdm_region_view(r), NPAGES * page,
			     flags & VMM_SEND_SIGBUS ? 4 : 3 };
	if (fds[2] < 0 || fds[l.nfds - 1] < 0 || wire_send(sock, fds, l.nfds, &l, sizeof(l)))
		return 11;
	if (read(sock, &go, 1) != 1 || go != 'g')
		return 0;	/* the pager gave up: nothing to touch */
	for (size_t i = 0; i < NPAGES; i++)
		if (!check_page((char *)uffdm_region_view(r) + i * page, page, i))
			return 12;
	return 0;
}

static pid_t fork_vmm(const struct mem_case *mc, unsigned int flags, int *sock)
{
	int sv[2];
	pid_t pid;

	put_region(make_region(mc, NPAGES));	/* skip on a short pool */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGBUS, SIG_DFL);
		close(sv[0]);
		alarm(30);	/* a hang becomes SIGALRM */
		_exit(vmm(sv[1], mc->backing, case_page_size(mc), flags));
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/* A pager's view of the child's memory: adopted descriptor, region over its memfd. */
struct pager {
	struct uffdm *u;
	struct uffdm_region *r;
	int state_fd, sigbus_fd;
};

static void pager_open(struct pager *pg, int sock, unsigned int nfds)
{
	struct layout l;
	int fds[4];

	assert_int_equal(wire_recv(sock, fds, nfds, &l, sizeof(l)), 0);
	assert_int_equal(nfds, l.nfds);
	assert_int_equal(uffdm_adopt(&pg->u, fds[0], 0, 0), 0);
	adopt_uffd(pg->u);
	assert_int_equal(uffdm_region_from_fd(&pg->r, fds[1], 0, l.size, l.view, 0), 0);
	close(fds[1]);	/* the region holds its own */
	pg->state_fd = fds[2];
	pg->sigbus_fd = nfds == 4 ? fds[3] : -1;
}

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	size_t page = uffdm_region_page_size(r);

	(void)arg; (void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, page, off / page);
	return 0;
}

static int refuse(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return -EIO;
}

static int wait_vmm(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
		fail_msg("the VMM's faulting thread hung: the watchdog fired");
	return st;
}

static void serve(struct pager *pg, int sock, uffdm_fault_fn fn, unsigned int hflags,
		  struct uffdm_stats *st)
{
	struct uffdm_handler_config cfg = { .threads = 2, .fault = fn, .flags = hflags };
	struct uffdm_handler *h;
	char c;

	assert_int_equal(uffdm_handler_start(&h, pg->u, pg->r, &cfg), 0);
	assert_int_equal(write(sock, "g", 1), 1);
	/* the VMM exits when done; its end closing tells us */
	assert_true(read(sock, &c, 1) <= 0);
	assert_int_equal(uffdm_handler_stop(h, st), 0);
}

static void test_adopt_foreign(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct pager pg;
	struct uffdm_stats st;
	int sock, status;
	pid_t pid = fork_vmm(mc, VMM_SEND_SIGBUS, &sock);

	/*
	 * Without POISON (before 6.6) the handler needs the page states the
	 * VMM shares (its watchdog fences what the pager fails); the SIGBUS
	 * descriptor is still accepted.
	 */
	pager_open(&pg, sock, 4);
	assert_int_equal(uffdm_sigbus_adopt(pg.u, pg.sigbus_fd), 0);
	assert_int_equal(uffdm_region_adopt_state(pg.r, pg.state_fd, 0), 0);
	assert_ptr_equal(uffdm_region_size(pg.r), NPAGES * case_page_size(mc));
	serve(&pg, sock, stamp, 0, &st);
	status = wait_vmm(pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(st.minor, NPAGES);
	assert_int_equal(st.resolved, NPAGES);
	uffdm_region_destroy(pg.r);
	put_uffd(pg.u);
	close(sock);
}

/*
 * The SIGBUS-descriptor path for another process's view (6.1's only one):
 * only the VMM can fail its pages without a window (its fence), so the
 * handler needs the region's states shared with the VMM's watchdog
 * (test-remotefail.c runs that).  Without them it is refused, not wrong,
 * whether or not the VMM sent its SIGBUS descriptor.
 */
static void refused_without_states(const struct mem_case *mc, unsigned int vmm_flags)
{
	struct uffdm_handler_config cfg = {
		.threads = 1, .fault = refuse, .flags = UFFDM_HANDLER_SIGBUS_FD,
	};
	struct uffdm_handler *h = NULL;
	struct pager pg;
	int sock, status;
	pid_t pid = fork_vmm(mc, vmm_flags, &sock);

	pager_open(&pg, sock, vmm_flags & VMM_SEND_SIGBUS ? 4 : 3);
	close(pg.state_fd);
	if (vmm_flags & VMM_SEND_SIGBUS) {
		assert_true(pg.sigbus_fd >= 0);
		assert_int_equal(uffdm_sigbus_adopt(pg.u, pg.sigbus_fd), 0);
		assert_int_equal(uffdm_sigbus_adopt(pg.u, pg.sigbus_fd), -EBUSY);
	} else {
		assert_int_equal(uffdm_sigbus_fd(pg.u), -EOPNOTSUPP);
	}
	assert_int_equal(uffdm_handler_start(&h, pg.u, pg.r, &cfg), -EOPNOTSUPP);
	assert_null(h);
	assert_int_equal(write(sock, "q", 1), 1);
	status = wait_vmm(pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	uffdm_region_destroy(pg.r);
	put_uffd(pg.u);	/* closes the adopted SIGBUS descriptor too */
	close(sock);
}

static void test_adopt_foreign_sigbus(void **state)
{
	refused_without_states(need_case(state), VMM_SEND_SIGBUS);
}

static void test_adopt_foreign_no_sigbus(void **state)
{
	refused_without_states(need_case(state), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adopt_not_uffd),
		cmocka_unit_test(test_adopt_features),
		cmocka_unit_test(test_adopt_uninitialized),
		CROSS(test_adopt_foreign),
		CROSS(test_adopt_foreign_sigbus),
		CROSS(test_adopt_foreign_no_sigbus),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("adopt", tests, NULL, NULL);
}

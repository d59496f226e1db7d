// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The out-of-process pager, run as users run it: uffdm-vmm starts
 * uffdm-pager, sends it its userfaultfd and memfd, and its vCPUs read
 * every page.  Then the pager dies mid-run, or stops answering: every
 * vCPU that meets an unserved page gets SIGBUS, none hangs (uffdm-vmm
 * exits 3).  Each case crossed over shmem and hugetlb.
 *
 *   uffdm-test-pager VMM PAGER
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <k513-test.h>

static const char *vmm_path, *pager_path;

/* Runs the VMM with extra arguments; its exit status, its output in out. */
static int run_vmm(const char *backing, const char *const *extra, char *out, size_t len)
{
	const char *argv[16] = { vmm_path, "--pager", pager_path, "--backing", backing };
	size_t n = 5, got = 0;
	bool hung = false;
	int p[2], st;
	ssize_t r;
	pid_t pid;

	while (*extra && n < 15)
		argv[n++] = *extra++;
	assert_int_equal(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);	/* the VMM and its pagers: one group to kill */
		dup2(p[1], 1);
		dup2(p[1], 2);
		alarm(90);	/* a hang would be the bug */
		execv(vmm_path, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	/*
	 * A stopped pager outlives a VMM killed by its alarm and holds the
	 * pipe: read with a deadline of our own, then kill the whole group,
	 * so a hang is this case's failure, never the suite's.
	 */
	for (int waited = 0; got + 1 < len;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };

		if (poll(&pfd, 1, 1000) == 0) {
			if (++waited < 100)
				continue;
			kill(-pid, SIGKILL);
			hung = true;
			break;
		}
		r = read(p[0], out + got, len - got - 1);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	out[got] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	print_message("%s", out);
	if (hung)
		fail_msg("uffdm-vmm or its pager still held the output after 100 s: killed (it hung)");
	if (WIFSIGNALED(st))
		fail_msg("uffdm-vmm died of signal %d%s", WTERMSIG(st),
			 WTERMSIG(st) == SIGALRM ? " (it hung)" : "");
	return WEXITSTATUS(st);
}

static void expect(void **state, const char *const *extra, int want, const char *must_say)
{
	char out[8192];
	int st = run_vmm(*state, extra, out, sizeof(out));

	if (st == 77) {
		char *why = strstr(out, "skip: ");

		why = why ? why + 6 : out;
		K513_SKIP("%.*s", (int)strcspn(why, "\n"), why);
	}
	assert_int_equal(st, want);
	if (must_say && !strstr(out, must_say))
		fail_msg("uffdm-vmm did not say \"%s\"", must_say);
}

/* 256 base pages; 32 huge pages (the guest reserves 192) */
static bool huge(void **state)
{
	return !strcmp(*state, "hugetlb");
}

static void test_pager_serves(void **state)
{
	const char *n = huge(state) ? "32" : "256";
	char want[64];

	snprintf(want, sizeof(want), "%s read, 0 wrong, 0 vCPUs got SIGBUS", n);
	expect(state, (const char *const[]){ "--pages", n, "--threads", "4", NULL }, 0, want);
}

static void test_pager_killed(void **state)
{
	expect(state, (const char *const[]){ "--pages", huge(state) ? "32" : "256",
					      "--kill-after", huge(state) ? "8" : "64", NULL }, 3,
	       "pager closed its socket (died)");
}

/*
 * Killed, then replaced (--replace): the new pager adopts the descriptor and
 * the page states and serves on; every page read right, no vCPU fails.
 */
static void test_pager_replaced(void **state)
{
	const char *n = huge(state) ? "32" : "256";
	char want[64];

	snprintf(want, sizeof(want), "%s read, 0 wrong, 0 vCPUs got SIGBUS", n);
	expect(state, (const char *const[]){ "--pages", n, "--threads", "4", "--kill-after",
					      huge(state) ? "8" : "64", "--replace", NULL }, 0, want);
}

static void test_pager_stopped(void **state)
{
	expect(state, (const char *const[]){ "--pages", huge(state) ? "32" : "256",
					      "--stop-after", huge(state) ? "8" : "64",
					      "--stall-ms", "2000", NULL }, 3,
	       "pager stopped answering");
}

static void test_pager_bad_path(void **state)
{
	char out[4096];
	const char *argv_pager = pager_path;
	int st;

	pager_path = "/nonexistent/uffdm-pager";
	st = run_vmm(*state, (const char *const[]){ "--pages", "8", NULL }, out, sizeof(out));
	pager_path = argv_pager;
	if (st == 77)
		K513_SKIP("%.*s", (int)strcspn(out, "\n"), out);
	assert_int_equal(st, 1);
	assert_non_null(strstr(out, "did not start"));
}

#define CROSS(fn) \
	{ #fn "/shmem", fn, NULL, NULL, (void *)"shmem" }, \
	{ #fn "/hugetlb", fn, NULL, NULL, (void *)"hugetlb" }

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_pager_serves),
		CROSS(test_pager_killed),
		CROSS(test_pager_replaced),
		CROSS(test_pager_stopped),
		CROSS(test_pager_bad_path),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: uffdm-test-pager VMM PAGER\n");
		return 2;
	}
	vmm_path = argv[1];
	pager_path = argv[2];
	return cmocka_run_group_tests_name("pager", tests, NULL, NULL);
}

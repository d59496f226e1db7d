// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm end to end and when things break: each mode migrates and verifies; a
 * source that dies mid-postcopy stops the destination's workload with exit
 * 3; a destination that dies before the switch-over makes the source resume
 * (exit 2); malformed frames close the connection with a message naming
 * the frame (exit 5).  Each run is a child under a deadline: never a hang.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

/* a TCG guest is slow: idle limits are generous, but a dead source is only
 * given a short while to rejoin */
static const char *tmo = "20000";

#define COMMON "--size", "4M", "--precopy", "0.2", "--after", "0.3", "--rounds", "2", \
	"--stale", "0.2", "-q", "--timeout", tmo

/* dest and source, the source tracking with track; returns both exit statuses */
static void migrate(const char *mode, const char *track, const char *src_inject,
		    const char *dst_inject, int *src_rc, int *dst_rc)
{
	char addr[64], lfd_s[16], src_inj[64], dst_inj[64];
	int lfd = lmt_listener(addr, sizeof(addr));
	pid_t d, s;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(src_inj, sizeof(src_inj), "%s", src_inject ? src_inject : "none");
	snprintf(dst_inj, sizeof(dst_inj), "%s", dst_inject ? dst_inject : "none");
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--mode", mode, "--verify",
				     "--inject", dst_inj, COMMON, NULL };
		const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--mode", mode, "--verify",
				     "--inject", src_inj, "--track", track, COMMON, NULL };

		d = lmt_spawn(lmt_path("test-dest.err"), lmt_path("test-dest.out"), da);
		close(lfd);
		s = lmt_spawn(lmt_path("test-src.err"), NULL, sa);
	}
	*src_rc = lmt_status(s);
	*dst_rc = lmt_status(d);
}

static void test_mode(const char *mode)
{
	int s, d;

	migrate(mode, "auto", NULL, NULL, &s, &d);
	assert_int_equal(d, LM_EXIT_OK);
	assert_int_equal(s, LM_EXIT_OK);
}

static void test_minor(void **state) { (void)state; test_mode("minor"); }

/* Synchronous uffd-wp forced, as 6.1 gets it for hugetlb; the report names it. */
static void skip_without_uffd_wp(void)
{
	struct uffdm_probe p;

	if (uffdm_probe(&p) || !uffdm_probe_has(&p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		K513_SKIP("the kernel lacks uffd-wp on shmem and hugetlb "
			  "(UFFD_FEATURE_WP_HUGETLBFS_SHMEM)");
}

static void test_minor_uffd_wp(void **state)
{
	int s, d;

	(void)state;
	skip_without_uffd_wp();
	migrate("minor", "uffd-wp", NULL, NULL, &s, &d);
	assert_int_equal(d, LM_EXIT_OK);
	assert_int_equal(s, LM_EXIT_OK);
	assert_true(lmt_file_has(lmt_path("test-dest.out"), "dirty tracking       uffd-wp"));
}

/* 2 MiB pages: one stale record makes a whole huge page stale. */
static void minor_hugetlb(const char *track)
{
	char addr[64], lfd_s[16];
	int lfd, s, d;
	pid_t dp, sp;

	if (uffdm_backing_page_size(UFFDM_HUGETLB) != 2u << 20 || access("/dev/hugepages", F_OK))
		K513_SKIP("no 2 MiB huge pages here");
	lfd = lmt_listener(addr, sizeof(addr));
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--backing", "hugetlb",
				     "--verify", "--size", "8M", "-q", NULL };
		const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--backing", "hugetlb", "--verify",
				     "--size", "8M", "--stale", "0.3", "--precopy", "0.2",
				     "--after", "0.3", "--track", track, "-q", NULL };

		dp = lmt_spawn(lmt_path("test-dest.err"), lmt_path("test-dest.out"), da);
		close(lfd);
		sp = lmt_spawn(lmt_path("test-src.err"), NULL, sa);
	}
	s = lmt_status(sp);
	d = lmt_status(dp);
	/* the source checks the pool before it allocates (exit 10) */
	if (s == LM_EXIT_NOMEM ||
	    (s == LM_EXIT_USAGE && lmt_file_has(lmt_path("test-src.err"), "Cannot allocate")))
		K513_SKIP("no free huge pages");
	assert_int_equal(s, LM_EXIT_OK);
	assert_int_equal(d, LM_EXIT_OK);
}

static void test_minor_hugetlb(void **state)
{
	(void)state;
	minor_hugetlb("auto");
}

/* What 6.1 picks for hugetlb, where soft-dirty fails its probe. */
static void test_minor_hugetlb_uffd_wp(void **state)
{
	(void)state;
	skip_without_uffd_wp();
	minor_hugetlb("uffd-wp");
	assert_true(lmt_file_has(lmt_path("test-dest.out"), "dirty tracking       uffd-wp"));
}
static void test_stopcopy(void **state) { (void)state; test_mode("stop-copy"); }
static void test_missing(void **state) { (void)state; test_mode("postcopy-missing"); }

static void source_dies(const char *mode)
{
	int s, d;

	tmo = "3000";
	migrate(mode, "auto", "die-postcopy", NULL, &s, &d);
	tmo = "20000";
	assert_int_equal(s, 9);
	assert_int_equal(d, LM_EXIT_SOURCE_LOST);
	assert_true(lmt_file_has(lmt_path("test-dest.err"), "source lost during postcopy"));
}

static void test_source_dies_minor(void **state) { (void)state; source_dies("minor"); }
static void test_source_dies_missing(void **state)
{
	(void)state;
	source_dies("postcopy-missing");
}

static void test_dest_dies(void **state)
{
	int s, d;

	(void)state;
	migrate("minor", "auto", NULL, "die-precopy", &s, &d);
	assert_int_equal(d, 9);
	assert_int_equal(s, LM_EXIT_ABORTED);
	assert_true(lmt_file_has(lmt_path("test-src.err"), "migration aborted"));
	assert_true(lmt_file_has(lmt_path("test-src.err"), "invariants hold"));
}

/*
 * Send raw bytes to a destination: it refuses them by name, allocates
 * nothing and keeps waiting for its real source.
 */
static void garbage(const void *bytes, size_t len, const char *word)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr)), fd;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "-q", "--timeout",
			     "3000", NULL };
	pid_t d;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	d = lmt_spawn(lmt_path("test-dest.err"), NULL, da);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, bytes, len), (ssize_t)len);
	shutdown(fd, SHUT_WR);
	assert_true(lmt_wait_for(lmt_path("test-dest.err"), word, 10));
	assert_true(lmt_file_has(lmt_path("test-dest.err"), "refused 127.0.0.1:"));
	assert_false(lmt_has_region(d));
	close(fd);
	kill(d, SIGTERM);
	assert_true(lmt_expect(d, LM_EXIT_INTERRUPTED));
}

static void test_malformed(void **state)
{
	static uint8_t b[256];
	struct lm_hello h = { .version = LM_VERSION, .size = 1 << 20, .page_size = 4096,
			      .nthreads = 2 };
	struct lm_hdr *hd = (struct lm_hdr *)b;
	size_t n;

	(void)state;
	n = lm_frame_encode(b, sizeof(b), LM_HELLO, 0, &h, NULL, 0);
	garbage(b, n - 5, "truncated HELLO");
	garbage(b, n, "expected AUTH, got HELLO");
	hd->magic = 0x12345678;
	garbage(b, n, "bad frame magic");
	n = lm_frame_encode(b, sizeof(b), LM_HELLO, 0, &h, NULL, 0);
	hd->len = 1u << 30;
	garbage(b, sizeof(*hd), "oversized HELLO");
	garbage(b, 7, "truncated frame header");
}

/* --plot: a PNG timeline; --json: one object with the numbers. */
static void test_plot_json(void **state)
{
	const char *png = lmt_path("test-plot.png");
	const char *args[] = { "run", "--mode", "minor", "--verify", "--json", "--plot", png,
			       COMMON, NULL };
	unsigned char magic[8] = { 0 };
	FILE *f;

	(void)state;
	if (system("command -v gnuplot >/dev/null 2>&1"))
		K513_SKIP("gnuplot is not installed (apt-get install gnuplot-nox)");
	unlink(png);
	assert_int_equal(lmt_status(lmt_spawn(lmt_path("test-run.err"), lmt_path("test-run.out"),
					      args)), 0);
	assert_true(lmt_file_has(lmt_path("test-run.out"), "\"downtime_ms\""));
	assert_true(lmt_file_has(lmt_path("test-run.out"), "\"switch_transit_ms\""));
	f = fopen(png, "rb");
	assert_non_null(f);
	assert_int_equal(fread(magic, 1, 8, f), 8);
	fclose(f);
	assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
	/* minor mode samples its faults too: gnuplot had something to plot */
	assert_false(lmt_file_has(lmt_path("test-run.err"), "gnuplot failed"));
	unlink(png);
}

/* The number after "key": in a one-line JSON file. */
static double json_num(const char *path, const char *key)
{
	char buf[8192] = { 0 }, pat[64];
	FILE *f = fopen(path, "r");
	const char *at;

	assert_non_null(f);
	assert_true(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = strstr(buf, pat);
	if (!at)
		fail_msg("%s has no %s: %s", path, key, buf);
	return strtod(at + strlen(pat), NULL);
}

/*
 * Two machines share no clock: the downtime is then the source's pause to
 * SWITCH sent, plus half a small frame's round trip just before the pause,
 * plus the destination's SWITCH to resume; the report says so.
 */
static void test_separate_clocks(void **state)
{
	const char *out = lmt_path("clock.out");
	const char *args[] = { "run", "--mode", "minor", "--json", COMMON, NULL };
	double down, est, pause, resume, rtt;

	(void)state;
	setenv("LM_SEPARATE_CLOCKS", "1", 1);
	assert_true(lmt_expect(lmt_spawn(lmt_path("clock.err"), out, args), 0));
	unsetenv("LM_SEPARATE_CLOCKS");
	assert_true(lmt_file_has(out, "\"clocks_shared\":false"));
	down = json_num(out, "downtime_ms");
	est = json_num(out, "downtime_est_ms");
	pause = json_num(out, "src_pause_to_switch_ms");
	resume = json_num(out, "dst_switch_to_resume_ms");
	rtt = json_num(out, "rtt_ms");
	print_message("# downtime %.3f ms = %.3f + %.3f / 2 + %.3f\n", down, pause, rtt, resume);
	assert_true(rtt > 0);
	assert_true(down == est);
	assert_true(fabs(est - (pause + rtt / 2 + resume)) < 0.002);
	assert_true(json_num(out, "switch_transit_ms") < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minor),
		cmocka_unit_test(test_minor_uffd_wp),
		cmocka_unit_test(test_minor_hugetlb),
		cmocka_unit_test(test_minor_hugetlb_uffd_wp),
		cmocka_unit_test(test_stopcopy),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_source_dies_minor),
		cmocka_unit_test(test_source_dies_missing),
		cmocka_unit_test(test_dest_dies),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_plot_json),
		cmocka_unit_test(test_separate_clocks),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

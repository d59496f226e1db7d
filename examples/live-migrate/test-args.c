// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Arguments and agreement: NaN, zero and out-of-range values are refused
 * with the option named (exit 1); --verify on either end applies to both
 * (the destination asks in CHALLENGE, HELLO carries the agreement); a
 * malformed frame from an authenticated peer is a protocol error (5), a
 * peer that goes away is a lost peer (6).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define ERR lmt_path("args.err")
#define OUT lmt_path("args.out")
#define DERR lmt_path("args-dest.err")
#define DOUT lmt_path("args-dest.out")

static void refused(const char *opt, const char *val, const char *word)
{
	const char *args[] = { "run", opt, val, NULL };

	print_message("# lm run %s %s\n", opt, val);
	assert_true(lmt_expect(lmt_spawn(ERR, NULL, args), LM_EXIT_USAGE));
	assert_true(lmt_file_has(ERR, opt));
	assert_true(lmt_file_has(ERR, word));
}

static void test_bad_values(void **state)
{
	(void)state;
	refused("--stale", "nan", "needs a number");
	refused("--stale", "inf", "needs a number");
	refused("--stale", "0", "must be in");
	refused("--stale", "1.5", "must be in");
	refused("--hot-frac", "-nan", "needs a number");
	refused("--bandwidth", "0", "must be in");
	refused("--bandwidth", "7", "must be in");
	refused("--bandwidth", "nan", "needs a number");
	refused("--rate", "0", "must be in");
	refused("--threads", "0", "must be in");
	refused("--threads", "65", "must be in");
	refused("--threads", "1.5", "whole number");
	refused("--rounds", "0", "must be in");
	refused("--timeout", "0", "must be in");
	refused("--timeout", "1e12", "must be in");
	refused("--size", "1e30", "must be in");
	refused("--size", "8193.5", "whole number");
	refused("--size", "10K", "multiple of the page size");
	refused("--precopy", "nan", "needs a number");
	refused("--after", "-1", "must be in");
	refused("--hot-share", "101", "must be in");
	refused("--handler-threads", "0", "must be in");
	refused("--max-size", "0", "must be in");
	refused("--rtt", "nan", "--rtt");
	refused("--rtt", "20s", "at most 10 s");
	refused("--size", "64Q", "bad number suffix");
}

/* --verify on one end only: both verify, and the report says so. */
static void one_sided_verify(bool on_dest)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--size", "4M",
			     "-q", on_dest ? "--verify" : NULL, NULL };
	const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--size", "4M",
			     "--precopy", "0.1", "--after", "0.2", "--stale", "0.2", "-q",
			     on_dest ? NULL : "--verify", NULL };
	pid_t d, s;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	d = lmt_spawn(DERR, DOUT, da);
	close(lfd);
	s = lmt_spawn(ERR, NULL, sa);
	assert_true(lmt_expect(s, LM_EXIT_OK));
	assert_true(lmt_expect(d, LM_EXIT_OK));
	assert_true(lmt_file_has(DOUT, "verify               every page matched"));
}

static void test_verify_dest_only(void **state)
{
	(void)state;
	one_sided_verify(true);
}

static void test_verify_source_only(void **state)
{
	(void)state;
	one_sided_verify(false);
}

/* An authenticated source sends a page past the region: exit 5, by name. */
static void test_protocol_error(void **state)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--size", "4M",
			     "-q", NULL };
	const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--size", "4M",
			     "--precopy", "0.1", "--after", "0.2", "-q", "--inject", "bad-frame",
			     NULL };
	pid_t d, s;

	(void)state;
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	d = lmt_spawn(DERR, NULL, da);
	close(lfd);
	s = lmt_spawn(ERR, NULL, sa);
	assert_true(lmt_expect(d, LM_EXIT_PROTOCOL));
	assert_true(lmt_file_has(DERR, "malformed PAGES frame"));
	assert_true(lmt_expect(s, LM_EXIT_ABORTED));
}

/*
 * The destination's verdict is the source's: a destination that finds a
 * page other than the source had it exits 4, and so does the source, both
 * printing the same outcome table (FIN carries it).
 */
static void test_verify_failed_both_ends(void **state)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--size", "4M",
			     "-q", "--verify", "--inject", "verify-fail", NULL };
	const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--size", "4M",
			     "--precopy", "0.1", "--after", "0.2", "--stale", "0.2", "-q", NULL };
	const char *rows[] = { "pages       1024 of 1024 mapped",
			       "verify      1023 verified, 1 mismatched", "invariants  hold",
			       "result      FAILED (exit 4)" };
	pid_t d, s;

	(void)state;
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	d = lmt_spawn(DERR, DOUT, da);
	close(lfd);
	s = lmt_spawn(ERR, NULL, sa);
	assert_true(lmt_expect(s, LM_EXIT_VERIFY));
	assert_true(lmt_expect(d, LM_EXIT_VERIFY));
	for (unsigned int i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_true(lmt_file_has(ERR, rows[i]));
		assert_true(lmt_file_has(DERR, rows[i]));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_verify_dest_only),
		cmocka_unit_test(test_verify_source_only),
		cmocka_unit_test(test_protocol_error),
		cmocka_unit_test(test_verify_failed_both_ends),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Closed to strangers: a destination admits only a source that proves the
 * shared key, checks what it asks for against --max-size, allocates nothing
 * for anyone else and keeps its door open for the real source; a second
 * source is refused while one migrates.  Also: how many bad-key handshakes
 * per second a destination refuses.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define DERR lmt_path("auth-dest.err")
#define SERR lmt_path("auth-src.err")
#define SERR2 lmt_path("auth-src2.err")

static char addr[64], lfd_s[16];

/* A destination on a fresh listener; extra arguments before the NULL. */
static pid_t dest(const char *key, const char *a1, const char *a2)
{
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[16] = { "dest", "--listen-fd", lfd_s, "--size", "4M", "-q", "--verify" };
	int n = 7;
	pid_t d;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	if (key) {
		da[n++] = "--key";
		da[n++] = key;
	}
	if (a1)
		da[n++] = a1;
	if (a2)
		da[n++] = a2;
	d = lmt_spawn(DERR, NULL, da);
	close(lfd);
	return d;
}

static pid_t source(const char *err, const char *key, const char *size, const char *precopy)
{
	const char *sa[] = { "source", "--to", addr, "--size", size, "--precopy", precopy,
			     "--after", "0.2", "-q", key ? "--key" : NULL, key, NULL };

	return lmt_spawn(err, NULL, sa);
}

/* the same, with progress lines: "... tracking T" once connected */
static pid_t source_loud(const char *err, const char *key, const char *size, const char *precopy)
{
	const char *sa[] = { "source", "--to", addr, "--size", size, "--precopy", precopy,
			     "--after", "0.2", "--key", key, NULL };

	return lmt_spawn(err, NULL, sa);
}

static const char *other_key(void)
{
	const char *path = lmt_path("auth-other.key");
	const char *args[] = { "keygen", path, NULL };

	unlink(path);
	assert_true(lmt_expect(lmt_spawn(NULL, NULL, args), 0));
	return path;
}

/* A wrong key: refused by name, nothing allocated, the door stays open. */
static void test_wrong_key(void **state)
{
	pid_t d = dest(lmt_key(), NULL, NULL);

	(void)state;
	assert_true(lmt_expect(source(SERR, other_key(), "4M", "0.1"), LM_EXIT_AUTH));
	assert_true(lmt_file_has(SERR, "the destination refused our key"));
	assert_true(lmt_wait_for(DERR, "wrong key", 5));
	assert_false(lmt_has_region(d));
	/* the real source still gets in */
	assert_true(lmt_expect(source(SERR, lmt_key(), "4M", "0.1"), LM_EXIT_OK));
	assert_true(lmt_expect(d, LM_EXIT_OK));
}

static void test_no_key(void **state)
{
	pid_t d = dest(lmt_key(), NULL, NULL);

	(void)state;
	assert_true(lmt_expect(source(SERR, NULL, "4M", "0.1"), LM_EXIT_USAGE));
	assert_true(lmt_file_has(SERR, "--key FILE is needed"));
	assert_false(lmt_has_region(d));
	assert_true(lmt_wait_catching(d, 10));
	kill(d, SIGTERM);
	assert_true(lmt_expect(d, LM_EXIT_INTERRUPTED));
}

static void test_bad_key_file(void **state)
{
	const char *path = lmt_path("auth-bad.key");
	FILE *f = fopen(path, "w");
	const char *args[] = { "dest", "--key", path, NULL };

	(void)state;
	assert_non_null(f);
	fputs("not a key\n", f);
	fclose(f);
	assert_true(lmt_expect(lmt_spawn(DERR, NULL, args), LM_EXIT_USAGE));
	assert_true(lmt_file_has(DERR, "does not hold a key"));
}

/* dest without --key prints one; the source given it migrates. */
static void test_printed_key(void **state)
{
	char buf[4096] = { 0 }, *p;
	const char *path = lmt_path("auth-printed.key");
	pid_t d = dest(NULL, NULL, NULL);
	FILE *f;

	(void)state;
	assert_true(lmt_wait_for(DERR, "lm: on the source", 10));
	f = fopen(DERR, "r");
	assert_non_null(f);
	assert_true(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	p = strstr(buf, "key is\n");
	assert_non_null(p);
	p += 7;
	p[2 * LM_KEYLEN] = 0;
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", p);
	fclose(f);
	chmod(path, 0600);
	assert_true(lmt_expect(source(SERR, path, "4M", "0.1"), LM_EXIT_OK));
	assert_true(lmt_expect(d, LM_EXIT_OK));
}

/* A failed start prints no secret: --listen is checked before a key is made. */
static void test_no_key_bad_listen(void **state)
{
	int busy = lmt_listener(addr, sizeof(addr));
	const char *noport[] = { "dest", "--listen", "127.0.0.1", NULL };
	const char *inuse[] = { "dest", "--listen", addr, NULL };

	(void)state;
	assert_true(lmt_expect(lmt_spawn(DERR, NULL, noport), LM_EXIT_USAGE));
	assert_false(lmt_file_has(DERR, "key is"));
	assert_true(lmt_expect(lmt_spawn(DERR, NULL, inuse), LM_EXIT_USAGE));
	assert_true(lmt_file_has(DERR, "cannot listen on"));
	assert_false(lmt_file_has(DERR, "key is"));
	close(busy);
}

/* A HELLO larger than --max-size (here: the --size the dest expects). */
static void test_max_size(void **state)
{
	pid_t d = dest(lmt_key(), NULL, NULL);

	(void)state;
	assert_true(lmt_expect(source(SERR, lmt_key(), "8M", "0.1"), LM_EXIT_USAGE));
	assert_true(lmt_file_has(SERR, "takes at most 4194304 bytes"));
	assert_true(lmt_file_has(SERR, "(its --size)"));
	assert_true(lmt_wait_for(DERR, "more than this destination takes: 4194304 bytes", 5));
	assert_false(lmt_has_region(d));
	assert_true(lmt_wait_catching(d, 10));
	kill(d, SIGTERM);
	assert_true(lmt_expect(d, LM_EXIT_INTERRUPTED));
}

static void test_max_size_option(void **state)
{
	pid_t d = dest(lmt_key(), "--max-size", "2M");

	(void)state;
	assert_true(lmt_expect(source(SERR, lmt_key(), "4M", "0.1"), LM_EXIT_USAGE));
	assert_true(lmt_file_has(SERR, "takes at most 2097152 bytes (its --max-size)"));
	assert_false(lmt_has_region(d));
	assert_true(lmt_wait_catching(d, 10));
	kill(d, SIGTERM);
	assert_true(lmt_expect(d, LM_EXIT_INTERRUPTED));
}

/*
 * No --size, no --max-size: the default is the smaller of MemAvailable and
 * the room left in the destination's cgroup (here a made-up one, LM_CGROUP:
 * memory.max 24 MiB, memory.current 16 MiB), and the refusal names it.
 */
static void test_max_size_cgroup(void **state)
{
	const char *da[] = { "dest", "--listen-fd", lfd_s, "-q", "--key", lmt_key(), NULL };
	char dir[4096], file[4096];
	int lfd = lmt_listener(addr, sizeof(addr));
	FILE *f;
	pid_t d;

	(void)state;
	/* the test's own directory stands for the cgroup: its files are removed at exit */
	snprintf(file, sizeof(file), "%s", lmt_path("memory.max"));
	assert_non_null(f = fopen(file, "w"));
	fprintf(f, "25165824\n");
	fclose(f);
	assert_non_null(f = fopen(lmt_path("memory.current"), "w"));
	fprintf(f, "16777216\n");
	fclose(f);
	snprintf(dir, sizeof(dir), "%s", file);
	*strrchr(dir, '/') = 0;
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	setenv("LM_CGROUP", dir, 1);
	d = lmt_spawn(DERR, NULL, da);
	unsetenv("LM_CGROUP");
	close(lfd);
	assert_true(lmt_expect(source(SERR, lmt_key(), "16M", "0.1"), LM_EXIT_USAGE));
	assert_true(lmt_file_has(SERR, "takes at most 8388608 bytes (the room left in its "
				 "cgroup: memory.max less memory.current)"));
	assert_true(lmt_wait_for(DERR, "memory.max less memory.current", 5));
	assert_false(lmt_has_region(d));
	/* what fits is taken */
	assert_true(lmt_expect(source(SERR, lmt_key(), "4M", "0.1"), LM_EXIT_OK));
	assert_true(lmt_expect(d, LM_EXIT_OK));
}

/* While one source migrates, a second one (with the key) is refused. */
static void test_second_source(void **state)
{
	pid_t d = dest(lmt_key(), NULL, NULL), s1, s2;

	(void)state;
	s1 = source_loud(SERR, lmt_key(), "4M", "1.5");
	/* s1 is connected (it says so) and in precopy */
	assert_true(lmt_wait_for(SERR, "tracking", 30));
	s2 = source(SERR2, lmt_key(), "4M", "0.1");
	assert_true(lmt_expect(s2, LM_EXIT_USAGE));
	assert_true(lmt_file_has(SERR2, "busy with another migration"));
	assert_true(lmt_expect(s1, LM_EXIT_OK));
	assert_true(lmt_expect(d, LM_EXIT_OK));
	assert_true(lmt_file_has(DERR, "a migration is in progress"));
}

/* Bad-key handshakes, back to back: each refused; how many per second. */
static void test_refusal_rate(void **state)
{
	uint8_t bad[LM_KEYLEN], session[LM_SESSION] = { 0 };
	pid_t d = dest(lmt_key(), NULL, NULL);
	const int n = 300;
	double t0;

	(void)state;
	lm_key_generate(bad);
	t0 = lmt_now();
	for (int i = 0; i < n; i++) {
		struct lm_hello h = { .version = LM_VERSION };
		struct lm_conn c;
		int fd = lm_connect(addr);

		assert_true(fd >= 0);
		assert_int_equal(lm_conn_init(&c, fd, "main", NULL, 5000), 0);
		assert_int_equal(lm_auth_client(&c, bad, LM_AUTH_MAIN, 0, session, NULL, &h, NULL),
				 -EACCES);
		lm_conn_close(&c);
	}
	print_message("# %d bad-key handshakes refused in %.2f s: %.0f per second\n", n,
		      lmt_now() - t0, n / (lmt_now() - t0));
	assert_false(lmt_has_region(d));
	assert_true(lmt_file_has(DERR, "one line per thousand"));
	kill(d, SIGTERM);
	assert_true(lmt_expect(d, LM_EXIT_INTERRUPTED));
}

/*
 * n strangers drip bytes at the door from before the source comes until
 * after it is gone: the source is admitted at once, each stranger is cut
 * off at its handshake's total deadline (--timeout 1500, however the bytes
 * trickle in), and the destination exits as soon as the source does.
 */
static void slowloris(int n)
{
	const char *da[] = { "dest", "--listen-fd", lfd_s, "--size", "4M", "--key", lmt_key(),
			     "--timeout", "1500", "--rtt", "1ms", NULL };
	const char *sa[] = { "source", "--to", addr, "--size", "4M", "--precopy", "2",
			     "--after", "0.3", "--key", lmt_key(), "--timeout", "1500", NULL };
	int lfd = lmt_listener(addr, sizeof(addr)), cuts;
	pid_t d, s, slow;
	double t_src;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	d = lmt_spawn(DERR, NULL, da);
	close(lfd);
	slow = lmt_slowloris_start(addr, n);
	usleep(300000);
	s = lmt_spawn(SERR, NULL, sa);
	assert_true(lmt_expect(s, LM_EXIT_OK));
	t_src = lmt_now();
	assert_true(lmt_expect(d, LM_EXIT_OK));
	print_message("# %d slowloris: the destination exited %.2f s after the source\n", n,
		      lmt_now() - t_src);
	assert_true(lmt_now() - t_src < 1.0);
	cuts = lmt_slowloris_stop(slow);
	print_message("# the strangers were cut off %d times\n", cuts);
	assert_true(cuts >= n);
	assert_true(lmt_file_has(DERR, "no handshake within 1500 ms"));
}

static void test_slowloris_1(void **state)
{
	(void)state;
	slowloris(1);
}

static void test_slowloris_50(void **state)
{
	(void)state;
	slowloris(50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_no_key),
		cmocka_unit_test(test_bad_key_file),
		cmocka_unit_test(test_printed_key),
		cmocka_unit_test(test_no_key_bad_listen),
		cmocka_unit_test(test_max_size),
		cmocka_unit_test(test_max_size_option),
		cmocka_unit_test(test_max_size_cgroup),
		cmocka_unit_test(test_second_source),
		cmocka_unit_test(test_refusal_rate),
		cmocka_unit_test(test_slowloris_1),
		cmocka_unit_test(test_slowloris_50),
	};

	signal(SIGPIPE, SIG_IGN);
	if (lm_crypto_init())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

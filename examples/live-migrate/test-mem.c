// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The room a region has (mem.c): the cgroup files of v2 and v1 and the huge
 * page pool read from fixture files, and what each end does with them --
 * a source that does not fit says so and exits 10 before it allocates, a
 * destination caps --max-size at its room and the refusal names the v1
 * files on a v1 host.  One case runs lm in a real child memory cgroup when
 * the host lets this test make one.
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

#define DERR lmt_path("mem-dest.err")
#define SERR lmt_path("mem-src.err")

/* dir/name holds text; dir made as needed */
static void put(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;

	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void test_cgroup_path(void **state)
{
	const char *v1 = "12:pids:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/\n";
	const char *v2 = "0::/user.slice/lm.scope\n";
	char out[256];

	(void)state;
	assert_true(lm_cgroup_path(v1, "memory", out, sizeof(out)));
	assert_string_equal(out, "/process_api/abc");
	assert_true(lm_cgroup_path(v1, "cpuacct", out, sizeof(out)));
	assert_string_equal(out, "/x");
	assert_false(lm_cgroup_path(v1, "cpuac", out, sizeof(out)));
	assert_false(lm_cgroup_path(v1, "pids", out, sizeof(out)));	/* the root */
	assert_false(lm_cgroup_path(v1, "", out, sizeof(out)));	/* v2's is the root */
	assert_true(lm_cgroup_path(v2, "", out, sizeof(out)));
	assert_string_equal(out, "/user.slice/lm.scope");
	assert_false(lm_cgroup_path(v2, "memory", out, sizeof(out)));
}

/* v1: the parent's limit binds, the child's "no limit" (a huge number) does not */
static void test_room_v1(void **state)
{
	char root[4096], a[4200], b[4300];
	struct lm_room r = { .bytes = UINT64_MAX };

	(void)state;
	snprintf(root, sizeof(root), "%s", lmt_path("v1"));
	snprintf(a, sizeof(a), "%s/a", root);
	snprintf(b, sizeof(b), "%s/b", a);
	put(root, "memory.limit_in_bytes", "9223372036854771712\n");
	put(root, "memory.usage_in_bytes", "5000000000\n");
	put(a, "memory.limit_in_bytes", "134217728\n");
	put(a, "memory.usage_in_bytes", "104857600\n");
	put(b, "memory.limit_in_bytes", "9223372036854771712\n");
	put(b, "memory.usage_in_bytes", "4096\n");
	lm_cgroup_room(&r, root, "/a/b", "memory.limit_in_bytes", "memory.usage_in_bytes",
		       LM_LIMIT_CGROUP_V1);
	assert_int_equal(r.bytes, 134217728 - 104857600);
	assert_int_equal(r.limit, LM_LIMIT_CGROUP_V1);
	assert_non_null(strstr(r.where, "memory.limit_in_bytes less memory.usage_in_bytes in "));
	assert_non_null(strstr(r.where, "/v1/a"));
	assert_null(strstr(r.where, "/v1/a/b"));
	assert_string_equal(lm_limit_name(r.limit), "the room left in its cgroup: "
			    "memory.limit_in_bytes less memory.usage_in_bytes");
}

/* v2: "max" is no limit; usage above the limit leaves no room, not a wrap */
static void test_room_v2(void **state)
{
	char root[4096], a[4200];
	struct lm_room r = { .bytes = UINT64_MAX };

	(void)state;
	snprintf(root, sizeof(root), "%s", lmt_path("v2"));
	snprintf(a, sizeof(a), "%s/a", root);
	put(root, "memory.max", "max\n");
	put(root, "memory.current", "1\n");
	put(a, "memory.max", "max\n");
	put(a, "memory.current", "1\n");
	lm_cgroup_room(&r, root, "/a", "memory.max", "memory.current", LM_LIMIT_CGROUP);
	assert_true(r.bytes == UINT64_MAX);
	put(a, "memory.max", "8388608\n");
	put(a, "memory.current", "9000000\n");
	lm_cgroup_room(&r, root, "/a", "memory.max", "memory.current", LM_LIMIT_CGROUP);
	assert_int_equal(r.bytes, 0);
	assert_int_equal(r.limit, LM_LIMIT_CGROUP);
}

static void test_hugepages_free(void **state)
{
	char root[4096], pool[4200];

	(void)state;
	snprintf(root, sizeof(root), "%s", lmt_path("hp"));
	snprintf(pool, sizeof(pool), "%s/hugepages-2048kB", root);
	mkdir(root, 0755);
	put(pool, "free_hugepages", "3\n");
	put(pool, "resv_hugepages", "1\n");
	assert_int_equal(lm_hugepages_free(root, 2u << 20), 2);
	assert_int_equal(lm_hugepages_free(root, 1u << 30), -1);
}

/* A made-up v1 cgroup with 8 MiB of room, for LM_CGROUP. */
static const char *v1_8m(void)
{
	static char dir[4096];

	snprintf(dir, sizeof(dir), "%s", lmt_path("cg8"));
	put(dir, "memory.limit_in_bytes", "25165824\n");
	put(dir, "memory.usage_in_bytes", "16777216\n");
	return dir;
}

static pid_t spawn_env(const char *var, const char *val, const char *err,
		       const char *const *args)
{
	pid_t pid;

	setenv(var, val, 1);
	pid = lmt_spawn(err, NULL, args);
	unsetenv(var);
	return pid;
}

/* A source that does not fit says which limit, before it allocates or connects. */
static void test_source_cgroup(void **state)
{
	const char *sa[] = { "source", "--key", lmt_key(), "--to", "127.0.0.1:1", "--size", "16M",
			     NULL };

	(void)state;
	assert_true(lmt_expect(spawn_env("LM_CGROUP", v1_8m(), SERR, sa), LM_EXIT_NOMEM));
	assert_true(lmt_file_has(SERR, "lm: source: a 16.0 MiB region does not fit: 8.0 MiB left "
				 "(memory.limit_in_bytes less memory.usage_in_bytes in "));
	assert_false(lmt_file_has(SERR, "connect"));
}

/* lm run holds two regions here: 6 MiB each does not fit in 8 MiB of room. */
static void test_run_two_regions(void **state)
{
	const char *ra[] = { "run", "--size", "6M", "-q", NULL };

	(void)state;
	assert_true(lmt_expect(spawn_env("LM_CGROUP", v1_8m(), SERR, ra), LM_EXIT_NOMEM));
	assert_true(lmt_file_has(SERR, "lm: run (source and destination: twice --size): a 12.0 MiB "
				 "region does not fit: 8.0 MiB left"));
}

/* No free huge pages: the pool and the file to raise, by name. */
static void test_source_hugetlb(void **state)
{
	char root[4096], pool[4200];
	const char *sa[] = { "source", "--key", lmt_key(), "--to", "127.0.0.1:1", "--size", "4M",
			     "--backing", "hugetlb", NULL };

	(void)state;
	snprintf(root, sizeof(root), "%s", lmt_path("hp0"));
	snprintf(pool, sizeof(pool), "%s/hugepages-2048kB", root);
	mkdir(root, 0755);
	put(pool, "free_hugepages", "0\n");
	if (uffdm_backing_page_size(UFFDM_HUGETLB) != 2u << 20)
		skip();	/* the fixture is a 2 MiB pool */
	assert_true(lmt_expect(spawn_env("LM_HUGEPAGES", root, SERR, sa), LM_EXIT_NOMEM));
	assert_true(lmt_file_has(SERR, "lm: source: 2 huge pages of 2048 kB are needed, 0 free: "
				 "raise "));
	assert_true(lmt_file_has(SERR, "hugepages-2048kB/nr_hugepages (the pool of 2 MiB huge "
				 "pages)"));
}

/* Free huge pages, but a cgroup hugetlb limit below the region: the limit by its file. */
static void test_source_hugetlb_cgroup(void **state)
{
	char root[4096], pool[4200], cg[4096];
	const char *sa[] = { "source", "--key", lmt_key(), "--to", "127.0.0.1:1", "--size", "4M",
			     "--backing", "hugetlb", NULL };
	pid_t pid;

	(void)state;
	if (uffdm_backing_page_size(UFFDM_HUGETLB) != 2u << 20)
		skip();
	snprintf(root, sizeof(root), "%s", lmt_path("hp100"));
	snprintf(pool, sizeof(pool), "%s/hugepages-2048kB", root);
	snprintf(cg, sizeof(cg), "%s", lmt_path("cghp"));
	mkdir(root, 0755);
	put(pool, "free_hugepages", "100\n");
	put(cg, "hugetlb.2MB.max", "2097152\n");
	put(cg, "hugetlb.2MB.current", "0\n");
	setenv("LM_HUGEPAGES", root, 1);
	pid = spawn_env("LM_CGROUP", cg, SERR, sa);
	unsetenv("LM_HUGEPAGES");
	assert_true(lmt_expect(pid, LM_EXIT_NOMEM));
	assert_true(lmt_file_has(SERR, "a 4.0 MiB region does not fit: 2.0 MiB left "
				 "(hugetlb.2MB.max less hugetlb.2MB.current in "));
}

/*
 * --max-size above the room is capped at it, saying so; the refusal names
 * the v1 files on a v1 cgroup (it named v2's), and what fits is taken.
 */
static void test_dest_max_size_capped(void **state)
{
	char addr[64], lfd_s[16];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "-q",
			     "--max-size", "1G", NULL };
	const char *big[] = { "source", "--key", lmt_key(), "--to", addr, "--size", "16M", "-q",
			      "--precopy", "0.1", "--after", "0.1", NULL };
	const char *fits[] = { "source", "--key", lmt_key(), "--to", addr, "--size", "4M", "-q",
			       "--precopy", "0.1", "--after", "0.1", NULL };
	pid_t d;

	(void)state;
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	d = spawn_env("LM_CGROUP", v1_8m(), DERR, da);
	close(lfd);
	assert_true(lmt_expect(lmt_spawn(SERR, NULL, big), LM_EXIT_USAGE));
	assert_true(lmt_file_has(SERR, "takes at most 8388608 bytes (the room left in its cgroup: "
				 "memory.limit_in_bytes less memory.usage_in_bytes)"));
	assert_true(lmt_file_has(DERR, "lm: destination: --max-size 1073741824 is more than its "
				 "room: it takes at most 8388608 bytes (memory.limit_in_bytes"));
	assert_true(lmt_expect(lmt_spawn(SERR, NULL, fits), LM_EXIT_OK));
	assert_true(lmt_expect(d, LM_EXIT_OK));
}

/* A destination with no free huge page cannot take any source: it says so at start. */
static void test_dest_hugetlb_none(void **state)
{
	char root[4096], pool[4200], lfd_s[16], addr[64];
	int lfd = lmt_listener(addr, sizeof(addr));
	const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "-q",
			     "--backing", "hugetlb", NULL };

	(void)state;
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(root, sizeof(root), "%s", lmt_path("hp0d"));
	snprintf(pool, sizeof(pool), "%s/hugepages-2048kB", root);
	mkdir(root, 0755);
	put(pool, "free_hugepages", "0\n");
	if (uffdm_backing_page_size(UFFDM_HUGETLB) != 2u << 20) {
		close(lfd);
		skip();
	}
	assert_true(lmt_expect(spawn_env("LM_HUGEPAGES", root, DERR, da), LM_EXIT_NOMEM));
	close(lfd);
	assert_true(lmt_file_has(DERR, "lm: destination: 1 huge pages of 2048 kB are needed, 0 "
				 "free: raise "));
}

/*
 * The real thing, when this test may make a child memory cgroup (v2 with
 * the memory controller delegated, or v1's memory hierarchy): 128 MiB, and
 * a source of 512 MiB in it.  Before the check it was OOM-killed (137)
 * without a word.
 */
static bool make_cgroup(char *dir, size_t len, const char **files)
{
	char text[4096] = "", path[4096], file[4600];
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (f) {
		text[fread(text, 1, sizeof(text) - 1, f)] = 0;
		fclose(f);
	}
	if (lm_cgroup_path(text, "memory", path, sizeof(path)) ||
	    !access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK)) {
		if (!lm_cgroup_path(text, "memory", path, sizeof(path)))
			path[0] = 0;
		snprintf(dir, len, "/sys/fs/cgroup/memory%s/lm-test-%d", path, (int)getpid());
		files[0] = "memory.limit_in_bytes";
	} else {
		if (!lm_cgroup_path(text, "", path, sizeof(path)))
			path[0] = 0;
		snprintf(dir, len, "/sys/fs/cgroup%s/lm-test-%d", path, (int)getpid());
		files[0] = "memory.max";
	}
	if (mkdir(dir, 0755))
		return false;
	snprintf(file, sizeof(file), "%s/%s", dir, files[0]);
	f = fopen(file, "w");
	if (f && fprintf(f, "%d\n", 128 << 20) > 0 && !fclose(f))
		return true;
	if (f)
		fclose(f);
	rmdir(dir);
	return false;
}

static pid_t spawn_in_cgroup(const char *dir, const char *err, char **argv, int argc);

static void test_real_cgroup(void **state)
{
	const char *files[1];
	char dir[4400];
	pid_t pid;
	int rc;

	(void)state;
	if (!make_cgroup(dir, sizeof(dir), files)) {
		print_message("# skip: cannot make a child memory cgroup here (%s)\n",
			      strerror(errno));
		skip();
	}
	{
		char *argv[] = { "lm", "source", "--key", (char *)lmt_key(), "--to", "127.0.0.1:1",
				 "--size", "512M", NULL };

		pid = spawn_in_cgroup(dir, SERR, argv, 8);
	}
	rc = lmt_status(pid);
	rmdir(dir);
	print_message("# lm source --size 512M in a 128 MiB cgroup (%s): exit %d\n", files[0], rc);
	if (rc == 77)
		skip();
	assert_int_equal(rc, LM_EXIT_NOMEM);
	assert_true(lmt_file_has(SERR, "a 512.0 MiB region does not fit"));
	assert_true(lmt_file_has(SERR, files[0]));
}

/* lm ARGV in a child inside the cgroup at dir; stderr to err */
static pid_t spawn_in_cgroup(const char *dir, const char *err, char **argv, int argc)
{
	char procs[4500];
	pid_t pid;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	pid = lmt_fork();
	if (!pid) {
		FILE *f = fopen(procs, "w");

		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f))
			_exit(77);
		if (!freopen(err, "w", stderr))
			_exit(100);
		setvbuf(stderr, NULL, _IONBF, 0);
		_exit(lm_main(argc, argv));
	}
	return pid;
}

/*
 * A destination in a 128 MiB cgroup told --max-size 1G: a 512 MiB source is
 * refused, naming the cgroup's room.  Before, it was admitted and the
 * destination OOM-killed (137) while it populated the region.
 */
static void test_real_cgroup_dest(void **state)
{
	const char *files[1];
	char dir[4400], addr[64], lfd_s[16];
	int lfd, s_rc, d_rc;
	pid_t d;

	(void)state;
	if (!make_cgroup(dir, sizeof(dir), files)) {
		print_message("# skip: cannot make a child memory cgroup here (%s)\n",
			      strerror(errno));
		skip();
	}
	lfd = lmt_listener(addr, sizeof(addr));
	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	{
		char *da[] = { "lm", "dest", "--key", (char *)lmt_key(), "--listen-fd", lfd_s,
			       "--max-size", "1G", NULL };

		d = spawn_in_cgroup(dir, DERR, da, 8);
	}
	close(lfd);
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", addr, "--size", "512M",
				     "-q", "--precopy", "0.1", "--after", "0.1", NULL };

		s_rc = lmt_status(lmt_spawn(SERR, NULL, sa));
	}
	kill(d, SIGTERM);
	d_rc = lmt_status(d);
	rmdir(dir);
	print_message("# a 512M source to a destination in a 128 MiB cgroup (--max-size 1G): "
		      "source %d, destination %d\n", s_rc, d_rc);
	if (d_rc == 77)
		skip();
	assert_int_equal(s_rc, LM_EXIT_USAGE);
	assert_true(lmt_file_has(SERR, "(the room left in its cgroup: "));
	assert_true(lmt_file_has(DERR, "--max-size 1073741824 is more than its room"));
	assert_int_equal(d_rc, LM_EXIT_INTERRUPTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_path),
		cmocka_unit_test(test_room_v1),
		cmocka_unit_test(test_room_v2),
		cmocka_unit_test(test_hugepages_free),
		cmocka_unit_test(test_source_cgroup),
		cmocka_unit_test(test_run_two_regions),
		cmocka_unit_test(test_source_hugetlb),
		cmocka_unit_test(test_source_hugetlb_cgroup),
		cmocka_unit_test(test_dest_max_size_capped),
		cmocka_unit_test(test_dest_hugetlb_none),
		cmocka_unit_test(test_real_cgroup),
		cmocka_unit_test(test_real_cgroup_dest),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Integration tests: run the fanwatch binary (argv[1]) as a normal user
 * against a scripted workload and compare the whole event stream.  Run as
 * root (CI, the guest), the test first drops to uid/gid 65534 in a private
 * directory under /tmp, so the watcher is always unprivileged.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <k513-test.h>

#define NOBODY 65534
#define LINE_TIMEOUT_MS 20000	/* slow TCG guests */

static const char *fanwatch;
static bool have_rename;	/* FAN_RENAME pairing: Linux 5.17+ */
static bool paired;		/* the running test expects paired renames */

struct proc {
	pid_t pid;
	int out, err;
	char obuf[1 << 16];
	size_t olen;
	char ebuf[1 << 16];
	size_t elen;
};

static struct proc P;
static void (*pre_exec)(void);	/* run in the child before exec */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Append what fd has to buf; -1 at EOF, 0 on timeout, 1 when data came. */
static int fill(int fd, char *buf, size_t *len, size_t cap, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = read(fd, buf + *len, cap - 1 - *len);
	if (n <= 0)
		return -1;
	*len += n;
	buf[*len] = '\0';
	return 1;
}

static void drain_err(int ms)
{
	while (fill(P.err, P.ebuf, &P.elen, sizeof(P.ebuf), ms) > 0)
		;
}

static bool wait_err(const char *what, int ms)
{
	int64_t end = now_ms() + ms;

	while (!strstr(P.ebuf, what)) {
		int left = (int)(end - now_ms());

		if (left <= 0 || fill(P.err, P.ebuf, &P.elen, sizeof(P.ebuf), left) < 0)
			return false;
	}
	return true;
}

static void spawn(const char *const *args, bool wait_ready)
{
	int o[2], e[2];
	const char *argv[32] = { fanwatch };
	size_t i;

	for (i = 0; args[i]; i++)
		argv[i + 1] = args[i];
	assert_int_equal(pipe2(o, O_CLOEXEC), 0);
	assert_int_equal(pipe2(e, O_CLOEXEC), 0);
	memset(&P, 0, sizeof(P));
	P.pid = fork();
	assert_true(P.pid >= 0);
	if (!P.pid) {
		dup2(o[1], 1);
		dup2(e[1], 2);
		if (pre_exec)
			pre_exec();
		execv(fanwatch, (char **)argv);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	P.out = o[0];
	P.err = e[0];
	if (wait_ready && !wait_err("Watches established.", LINE_TIMEOUT_MS))
		fail_msg("fanwatch did not start: %s", P.ebuf);
}

/* The next output line (without its newline), or NULL on timeout/EOF. */
static char *next_line(int ms)
{
	int64_t end = now_ms() + ms;
	char *nl, *line;

	while (!(nl = memchr(P.obuf, '\n', P.olen))) {
		int left = (int)(end - now_ms());

		if (left <= 0 || fill(P.out, P.obuf, &P.olen, sizeof(P.obuf), left) <= 0)
			return NULL;
	}
	line = strndup(P.obuf, nl - P.obuf);
	P.olen -= nl + 1 - P.obuf;
	memmove(P.obuf, nl + 1, P.olen);
	return line;
}

/* "~x" matches lines containing x; anything else must match exactly. */
static bool line_matches(const char *want, const char *got)
{
	if (want[0] == '~')
		return strstr(got, want + 1) != NULL;
	return !strcmp(want, got);
}

static void expect(const char *const *want)
{
	for (; *want; want++) {
		char *got = next_line(LINE_TIMEOUT_MS);

		drain_err(0);
		if (!got)
			fail_msg("expected \"%s\", got nothing (stderr: %s)", *want, P.ebuf);
		if (!line_matches(*want, got))
			fail_msg("expected \"%s\", got \"%s\"", *want, got);
		free(got);
	}
}

/*
 * The lines of want, in any order: the kernel reports a removed
 * directory's DELETE_SELF before its parent's DELETE when nothing else
 * holds the directory (inotify's order), after it when fanwatch still has
 * it open -- which depends on its descriptor cache, not on the workload.
 */
static void expect_unordered(const char *const *want)
{
	size_t n = 0, i;
	bool seen[8] = { false };

	while (want[n])
		n++;
	assert_true(n <= 8);
	for (size_t k = 0; k < n; k++) {
		char *got = next_line(LINE_TIMEOUT_MS);

		drain_err(0);
		if (!got)
			fail_msg("expected one of %zu lines, got nothing (stderr: %s)", n - k, P.ebuf);
		for (i = 0; i < n && (seen[i] || !line_matches(want[i], got)); i++)
			;
		if (i == n)
			fail_msg("got \"%s\", not one of the lines expected (first: \"%s\")", got, want[0]);
		seen[i] = true;
		free(got);
	}
}
#define EXPECT_UNORDERED(...) expect_unordered((const char *const[]){ __VA_ARGS__, NULL })

static void expect_quiet(int ms)
{
	char *got = next_line(ms);

	if (got)
		fail_msg("unexpected event \"%s\"", got);
}

/* A sanitizer build of fanwatch reports on stderr: that fails the test. */
static void check_sanitizers(void)
{
	if (strstr(P.ebuf, "runtime error") || strstr(P.ebuf, "Sanitizer"))
		fail_msg("fanwatch: %s", P.ebuf);
}

static int finish(void)
{
	int st;

	kill(P.pid, SIGTERM);
	waitpid(P.pid, &st, 0);
	drain_err(0);
	close(P.out);
	close(P.err);
	check_sanitizers();
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run fanwatch to its end; returns the exit status, stderr in P.ebuf. */
static int run(const char *const *args, void (*act)(void))
{
	int st;

	spawn(args, act != NULL);
	if (act)
		act();
	while (fill(P.err, P.ebuf, &P.elen, sizeof(P.ebuf), LINE_TIMEOUT_MS) > 0)
		;
	while (fill(P.out, P.obuf, &P.olen, sizeof(P.obuf), 100) > 0)
		;
	waitpid(P.pid, &st, 0);
	close(P.out);
	close(P.err);
	check_sanitizers();
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	if (*data)
		assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (type == FTW_DP || type == FTW_D)
		chmod(p, 0700);
	return remove(p) && errno != ENOENT;
}

static void rm_rf(const char *path)
{
	chmod(path, 0700);
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int fresh(void **state)
{
	(void)state;
	rm_rf("w");
	rm_rf("out");
	if (mkdir("w", 0755) || mkdir("out", 0755))
		return -1;
	return 0;
}

static const char *const monitor[] = { "-m", "-r", "w", NULL };

#define EXPECT(...) expect((const char *const[]){ __VA_ARGS__, NULL })
#define WROTE(dir, name) dir " CREATE " name, dir " MODIFY " name, dir " CLOSE_WRITE,CLOSE " name

static void expect_rename(const char *odir, const char *oname, const char *ndir,
			  const char *nname, bool isdir)
{
	char a[256], b[256];
	const char *flag = isdir ? ",ISDIR" : "";

	/* Two lines, as inotifywait prints a rename, from FAN_RENAME or not. */
	snprintf(a, sizeof(a), "%s MOVED_FROM%s %s", odir, flag, oname);
	snprintf(b, sizeof(b), "%s MOVED_TO%s %s", ndir, flag, nname);
	EXPECT(a, b);
}

static void workload(const char *const *args)
{
	spawn(args, true);
	assert_int_equal(mkdir("w/a", 0755), 0);
	EXPECT("w/ CREATE,ISDIR a");
	write_file("w/a/f", "hi");
	EXPECT(WROTE("w/a/", "f"));
	assert_int_equal(rename("w/a/f", "w/a/g"), 0);
	expect_rename("w/a/", "f", "w/a/", "g", false);
	assert_int_equal(mkdir("w/b", 0755), 0);
	EXPECT("w/ CREATE,ISDIR b");
	assert_int_equal(rename("w/a/g", "w/b/h"), 0);
	expect_rename("w/a/", "g", "w/b/", "h", false);
	/* A watched directory renamed: later paths must use the new name. */
	assert_int_equal(rename("w/b", "w/c"), 0);
	expect_rename("w/", "b", "w/", "c", true);
	EXPECT("w/c/ MOVE_SELF ");
	write_file("w/c/y", "x");
	EXPECT(WROTE("w/c/", "y"));
	assert_int_equal(chmod("w/c/y", 0600), 0);
	EXPECT("w/c/ ATTRIB y");
	assert_int_equal(unlink("w/c/h"), 0);
	assert_int_equal(unlink("w/c/y"), 0);
	EXPECT("w/c/ DELETE h", "w/c/ DELETE y");
	assert_int_equal(rmdir("w/c"), 0);
	EXPECT("w/ DELETE,ISDIR c", "w/c/ DELETE_SELF ");
	/* Leaving the tree is a half rename; the directory is then unwatched. */
	assert_int_equal(rename("w/a", "out/a"), 0);
	EXPECT("w/ MOVED_FROM,ISDIR a");
	if (!paired)	/* only its MOVE_SELF tells it left */
		EXPECT("w/a/ MOVE_SELF ");
	write_file("out/a/z", "lost");
	assert_int_equal(mkdir("w/d", 0755), 0);
	EXPECT("w/ CREATE,ISDIR d");
	/* Coming in is the other half; the newcomer is watched at once and
	 * what it holds is reported. */
	assert_int_equal(rename("out/a", "w/in"), 0);
	EXPECT("w/ MOVED_TO,ISDIR in", "w/in/ CREATE,SCAN z");
	write_file("w/in/k", "new");
	EXPECT(WROTE("w/in/", "k"));
	/* Renamed over an empty watched directory, which is gone then. */
	assert_int_equal(rename("w/in", "w/d"), 0);
	expect_rename("w/", "in", "w/", "d", true);
	EXPECT("w/d/ DELETE_SELF ", "w/d/ MOVE_SELF ");
	write_file("w/d/k2", "");
	EXPECT("w/d/ CREATE k2", "w/d/ CLOSE_WRITE,CLOSE k2");
	expect_quiet(300);
	assert_int_equal(finish(), 128 + SIGTERM);
}

static void workload_paired(void **state)
{
	(void)state;
	if (!have_rename)
		K513_SKIP("FAN_RENAME needs Linux 5.17+; the unpaired path is tested");
	paired = true;
	workload(monitor);
}

/* The 5.13-5.16 fallback, which --unpaired-renames selects anywhere. */
static void workload_unpaired(void **state)
{
	static const char *const args[] = { "-m", "-r", "--unpaired-renames", "w", NULL };

	(void)state;
	paired = false;
	workload(args);
}

#define ODD "q\"u,o\nte\xff"

/* A moved top directory: later events carry its new (absolute) path. */
static void root_moved(void **state)
{
	char cwd[256], want[512];

	(void)state;
	if (access("/proc/self/fd", F_OK))
		K513_SKIP("no /proc: fanwatch learns a moved root's path there");
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	spawn(monitor, true);
	assert_int_equal(rename("w", "out/w2"), 0);
	EXPECT("w/ MOVE_SELF ");
	write_file("out/w2/x", "");
	snprintf(want, sizeof(want), "%s/out/w2/ CREATE x", cwd);
	EXPECT(want);
	finish();
}

static void act_rmdir_root(void)
{
	assert_int_equal(rmdir("w"), 0);
}

/* A removed top directory: DELETE_SELF, then fanwatch ends (status 0). */
static void root_removed(void **state)
{
	(void)state;
	assert_int_equal(run(monitor, act_rmdir_root), 0);
	assert_non_null(strstr(P.obuf, "w/ DELETE_SELF \n"));
	assert_non_null(strstr(P.ebuf, "nothing watched is left"));
}

static void odd_names_csv(void **state)
{
	static const char *const args[] = { "-m", "--csv", "w", NULL };

	(void)state;
	spawn(args, true);
	write_file("w/" ODD, "");
	/* RFC 4180: the newline stays inside the quotes; bytes stay raw. */
	EXPECT("w/,CREATE,\"q\"\"u,o", "te\xff\"",
	       "w/,\"CLOSE_WRITE,CLOSE\",\"q\"\"u,o", "te\xff\"");
	finish();
}

static void odd_names_json(void **state)
{
	static const char *const args[] = { "-m", "--json", "w", NULL };

	(void)state;
	spawn(args, true);
	write_file("w/" ODD, "");
	EXPECT("~/w/q\\\"u,o\\nte\\udcff\",\"old_path\":null,\"cookie\":0,\"is_dir\":false,\"own_event\":false,\"scan\":false}",
	       "~{\"schema\":2,\"read_time\":\"");
	finish();
}

/* A new directory is marked, then scanned: nothing made inside is missed. */
static void new_dir_scanned(void **state)
{
	bool f = false, g = false;
	char *l;

	(void)state;
	spawn(monitor, true);
	assert_int_equal(mkdir("w/n", 0755), 0);
	write_file("w/n/f", "");
	assert_int_equal(mkdir("w/n/m", 0755), 0);
	write_file("w/n/m/g", "");
	while ((!f || !g) && (l = next_line(LINE_TIMEOUT_MS))) {
		f |= !strcmp(l, "w/n/ CREATE f") || !strcmp(l, "w/n/ CREATE,SCAN f");
		g |= !strcmp(l, "w/n/m/ CREATE g") || !strcmp(l, "w/n/m/ CREATE,SCAN g");
		free(l);
	}
	finish();
	assert_true(f);
	assert_true(g);
}

static void unreadable_subdir(void **state)
{
	(void)state;
	assert_int_equal(mkdir("w/old", 0), 0);
	spawn(monitor, true);
	assert_non_null(strstr(P.ebuf, "cannot watch w/old: permission denied"));
	assert_int_equal(mkdir("w/locked", 0), 0);
	EXPECT("w/ CREATE,ISDIR locked");
	assert_true(wait_err("cannot watch w/locked: permission denied", LINE_TIMEOUT_MS));
	write_file("w/after", "");
	EXPECT("w/ CREATE after", "w/ CLOSE_WRITE,CLOSE after");
	finish();
}

static void filters(void **state)
{
	static const char *const args[] = { "-m", "-r", "--exclude", "skip",
					    "--includei", "\\.C$|/d$", "w", NULL };

	(void)state;
	spawn(args, true);
	assert_int_equal(mkdir("w/skip", 0755), 0);
	write_file("w/skip/a.c", "");
	write_file("w/a.h", "");
	assert_int_equal(mkdir("w/d", 0755), 0);
	EXPECT("w/ CREATE,ISDIR d");
	write_file("w/d/b.c", "");
	EXPECT("w/d/ CREATE b.c", "w/d/ CLOSE_WRITE,CLOSE b.c");
	expect_quiet(300);
	finish();
}

static void own_events(void **state)
{
	static const char *const all[] = { "-m", "-r", "-e", "open", "--json", "w", NULL };
	static const char *const noself[] = { "-m", "-r", "-e", "open", "--json",
					      "--no-self", "w", NULL };

	(void)state;
	/* Scanning a new directory opens it: that open is fanwatch's own. */
	spawn(all, true);
	assert_int_equal(mkdir("w/s", 0755), 0);
	EXPECT("~\"own_event\":true");
	finish();
	spawn(noself, true);
	assert_int_equal(mkdir("w/t", 0755), 0);
	write_file("w/f", "");
	EXPECT("~/w/f\",\"old_path\":null,\"cookie\":0,\"is_dir\":false,\"own_event\":false");
	expect_quiet(300);
	finish();
}

static long queue_limit(void)
{
	FILE *f = fopen("/proc/sys/fs/fanotify/max_queued_events", "r");
	long max = 16384;

	if (f) {
		if (fscanf(f, "%ld", &max) != 1)
			max = 16384;
		fclose(f);
	}
	return max;
}

/*
 * Stop the watcher, make more events than the queue holds, resume it.
 * mknodat makes a file with one syscall and one event: this runs in slow
 * emulated guests too.
 */
static long flood(long max, void (*also)(void))
{
	int dfd = open("w", O_RDONLY | O_DIRECTORY);
	char name[32];
	long i;

	assert_true(dfd >= 0);
	kill(P.pid, SIGSTOP);
	for (i = 0; i < max + 100; i++) {
		snprintf(name, sizeof(name), "%ld", i);
		assert_int_equal(mknodat(dfd, name, S_IFREG | 0644, 0), 0);
	}
	close(dfd);
	if (also)
		also();		/* lost too: the queue is full */
	kill(P.pid, SIGCONT);
	return i;
}

static void change_old_files(void)
{
	unlink("w/0");		/* its CREATE is queued, its DELETE is lost */
	unlink("w/old");
	write_file("w/mod", "22");
}

/*
 * The overflow is reported (stderr and a Q_OVERFLOW line) after exactly a
 * queue's worth of events; with --rescan-on-overflow the lost creations,
 * a lost modification and lost deletions come back as SCAN events, so
 * every name is accounted for.
 */
static void overflow_rescan(void **state)
{
	static const char *const args[] = { "-m", "-r", "--rescan-on-overflow",
					    "--format", "%e %f", "w", NULL };
	long max = queue_limit(), files, created = 0, scanned = 0;
	bool overflowed = false, modified = false, deleted = false, first = false;
	char *l;

	(void)state;
	if (max > 100000)
		K513_SKIP("fs.fanotify.max_queued_events is %ld: too large to overflow here", max);
	write_file("w/old", "1");
	write_file("w/mod", "1");
	spawn(args, true);
	files = flood(max, change_old_files);
	while ((l = next_line(2000))) {
		if (!strcmp(l, "Q_OVERFLOW "))
			overflowed = true;
		else if (!strncmp(l, "CREATE ", 7))
			created++;
		else if (!strncmp(l, "CREATE,SCAN ", 12))
			scanned++;
		modified |= !strcmp(l, "MODIFY,SCAN mod");
		deleted |= !strcmp(l, "DELETE,SCAN old");
		first |= !strcmp(l, "DELETE,SCAN 0");
		if (!overflowed)
			assert_true(created <= max);
		free(l);
	}
	assert_true(wait_err("the event queue overflowed", LINE_TIMEOUT_MS));
	finish();
	assert_true(overflowed);
	assert_int_equal(created, max);
	assert_true(modified);
	assert_true(deleted);
	assert_true(first);
	assert_int_equal(created + scanned, files);
}

static void act_touch(void)
{
	write_file("w/x", "");
}

/*
 * The mark limit, reproduced without privilege: a new user namespace has
 * its own user.max_fanotify_marks, which its owner may lower.
 */
static int limit_marks(void)
{
	int fd;

	if (unshare(CLONE_NEWUSER))
		return -1;
	fd = open("/proc/sys/user/max_fanotify_marks", O_WRONLY);
	if (fd < 0 || write(fd, "3", 1) != 1)
		return -1;
	close(fd);
	return 0;
}

static void limit_marks_or_die(void)
{
	if (limit_marks())
		_exit(126);
}

/* Skip unless a user namespace can lower the mark limit, as limit_marks() does. */
static void need_mark_limit(void)
{
	pid_t pid = fork();
	int st;

	if (!pid)
		_exit(limit_marks() ? 1 : 0);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		K513_SKIP("no user namespaces (CONFIG_USER_NS): cannot lower the mark limit privately");
}

static void mark_limit(void **state)
{
	static const char *const args[] = { "-m", "-r", "w", NULL };

	(void)state;
	need_mark_limit();
	assert_int_equal(mkdir("w/a", 0755) | mkdir("w/a/b", 0755) |
			 mkdir("w/c", 0755) | mkdir("w/d", 0755) | mkdir("w/d/e", 0755), 0);
	pre_exec = limit_marks_or_die;
	spawn(args, true);
	pre_exec = NULL;
	assert_non_null(strstr(P.ebuf, "reached the fanotify mark limit (fs.fanotify.max_user_marks = "));
	assert_non_null(strstr(P.ebuf, "user.max_fanotify_marks = 3): 3 directories left unwatched"));
	finish();
}

/* The mark limit reached later, while a moved-in tree is scanned. */
static void mark_limit_mid_scan(void **state)
{
	static const char *const args[] = { "-m", "-r", "w", NULL };

	(void)state;
	need_mark_limit();
	assert_int_equal(mkdir("out/t", 0755) | mkdir("out/t/a", 0755) | mkdir("out/t/b", 0755) |
			 mkdir("out/t/c", 0755) | mkdir("out/t/d", 0755), 0);
	pre_exec = limit_marks_or_die;
	spawn(args, true);
	pre_exec = NULL;
	assert_int_equal(rename("out/t", "w/t"), 0);
	EXPECT("w/ MOVED_TO,ISDIR t");
	assert_true(wait_err("user.max_fanotify_marks = 3): 3 directories left unwatched", LINE_TIMEOUT_MS));
	finish();
}

static void act_skip_then_keep(void)
{
	write_file("w/skip/no", "");
	write_file("w/x", "");
}

/* --fromfile with an @exclusion, -o, --format with %T and --timefmt. */
static void fromfile_outfile(void **state)
{
	static const char *const args[] = { "-r", "--fromfile", "out/list", "-o", "out/log",
					    "--format", "[%T] %w%f %e", "--timefmt", "%%", NULL };
	char buf[256] = "";
	FILE *f;

	(void)state;
	assert_int_equal(mkdir("w/skip", 0755), 0);
	write_file("out/list", "w\n@w/skip\n");
	assert_int_equal(run(args, act_skip_then_keep), 0);
	assert_non_null(strstr(P.ebuf, "Watches established."));
	f = fopen("out/log", "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "[%] w/x CREATE\n");
}

/* A filesystem without file handles, reachable without privilege: procfs. */
static void no_file_handles(void **state)
{
	static const char *const args[] = { "/proc/self", NULL };

	(void)state;
	if (access("/proc/self", R_OK))
		K513_SKIP("no /proc to try a filesystem without file handles on");
	assert_int_equal(run(args, NULL), 1);
	assert_non_null(strstr(P.ebuf, "cannot watch /proc/self: its filesystem (proc) does not support file handles (EOPNOTSUPP)"));
}

static void exit_codes(void **state)
{
	static const char *const once[] = { "w", NULL };
	static const char *const tmo[] = { "-t", "1", "w", NULL };
	static const char *const twice[] = { "-r", "-t", "1", "w", "w/", NULL };
	static const char *const missing[] = { "w/nope", NULL };
	static const char *const badev[] = { "-e", "bogus", "w", NULL };
	static const char *const file[] = { "-t", "1", "w/file", NULL };
	static const char *const csvfmt[] = { "--csv", "--format", "%w", "w", NULL };
	static const char *const notimefmt[] = { "--format", "%T %f", "w", NULL };
	static const char *const timefmt_alone[] = { "--timefmt", "%Y", "w", NULL };
	static const char *const daemon_noout[] = { "-d", "w", NULL };
	static const char *const badre[] = { "--exclude", "(", "w", NULL };
	static const char *const none[] = { NULL };
	static const char *const badopt[] = { "--frobnicate", "w", NULL };

	(void)state;
	write_file("w/file", "");
	assert_int_equal(run(once, act_touch), 0);
	assert_non_null(strstr(P.obuf, "w/ CREATE x\n"));
	assert_int_equal(run(tmo, NULL), 2);
	assert_int_equal(run(twice, NULL), 2);	/* the same tree twice is fine */
	assert_int_equal(run(missing, NULL), 1);
	assert_non_null(strstr(P.ebuf, "cannot watch 'w/nope': No such file or directory"));
	assert_int_equal(run(badev, NULL), 1);
	assert_non_null(strstr(P.ebuf, "unknown event 'bogus'"));
	assert_int_equal(run(file, NULL), 2);	/* a file target, no event */
	assert_int_equal(run(csvfmt, NULL), 1);
	assert_non_null(strstr(P.ebuf, "-c and --format cannot both be specified"));
	assert_int_equal(run(notimefmt, NULL), 1);
	assert_non_null(strstr(P.ebuf, "%T is in --format string, but --timefmt was not specified"));
	assert_int_equal(run(timefmt_alone, NULL), 1);
	assert_non_null(strstr(P.ebuf, "--timefmt cannot be specified without --format"));
	assert_int_equal(run(daemon_noout, NULL), 1);
	assert_non_null(strstr(P.ebuf, "--daemon needs -o"));
	assert_int_equal(run(badre, NULL), 1);
	assert_non_null(strstr(P.ebuf, "bad regular expression"));
	assert_int_equal(run(none, NULL), 1);
	assert_non_null(strstr(P.ebuf, "no directory to watch"));
	assert_int_equal(run(badopt, NULL), 1);
}

/*
 * Build in a temporary directory, then rename it into place: what package
 * managers and atomic publishers do.  The stream is read as a consumer
 * would: a file reported under .tmp<i>/ (or the reused .tmp/) is in that
 * directory, and goes where the stream says it is renamed to.  Every file
 * must end up in final<i>/ for its own i (the last build, left in its
 * temporary directory, there); one carried into another final<j>/ was
 * credited to the wrong directory, one never reported there is lost.  A
 * tiny descriptor cache makes fanwatch find directories again by name
 * chain and handle, the hard path.
 */
#define ITER 300
#define FILES 5

static bool reuse_tmp;

static void tiny_fd_cache(void)
{
	setenv("FANWATCH_FD_CACHE", "4", 1);
}

static void publish_loop(void)
{
	char tmp[64], fin[64], f[160];
	int i, k;

	for (i = 0; i <= ITER; i++) {
		if (reuse_tmp)
			snprintf(tmp, sizeof(tmp), "w/.tmp");
		else
			snprintf(tmp, sizeof(tmp), "w/.tmp%d", i);
		snprintf(fin, sizeof(fin), "w/final%d", i);
		assert_int_equal(mkdir(tmp, 0755), 0);
		for (k = 0; k < FILES; k++) {
			snprintf(f, sizeof(f), "%s/f%d_%d", tmp, i, k);
			write_file(f, "x");
		}
		/* The last build stays unfinished: a reused name is there. */
		if (i < ITER)
			assert_int_equal(rename(tmp, fin), 0);
	}
	write_file("w/done", "");
}

/* Which temporary directory slot a name is: .tmp is 0, .tmp<i> is i. */
static int tmp_slot(const char *s)
{
	int n;

	if (strncmp(s, ".tmp", 4))
		return -1;
	if (!s[4] || s[4] == '/')
		return 0;
	return sscanf(s + 4, "%d", &n) == 1 && n >= 0 && n <= ITER ? n : -1;
}

/*
 * "EVENTS DIR NAME" lines (--format '%e %w %f').  held[i][k] is the slot
 * (+1) of the temporary directory the stream last put fi_k in.
 */
static void check_published(void)
{
	static unsigned short held[ITER + 1][FILES];
	static bool seen[ITER + 1][FILES];
	int bad = 0, missing = 0, from = -1, i, k;
	char *l;

	memset(held, 0, sizeof(held));
	memset(seen, 0, sizeof(seen));
	while ((l = next_line(60000))) {
		char ev[64], dir[128], name[128];
		int fi, fk, fj, slot;

		if (!strcmp(l, "CLOSE_WRITE,CLOSE w/ done") || !strcmp(l, "CREATE w/ done")) {
			free(l);
			break;
		}
		if (sscanf(l, "%63s %127s %127s", ev, dir, name) != 3) {
			free(l);
			continue;
		}
		if (strstr(ev, "MOVED_FROM") && !strcmp(dir, "w/"))
			from = tmp_slot(name);
		if (strstr(ev, "MOVED_TO") && !strcmp(dir, "w/") &&
		    sscanf(name, "final%d", &fj) == 1 && from >= 0) {
			for (i = 0; i <= ITER; i++) {
				for (k = 0; k < FILES; k++) {
					if (held[i][k] != from + 1)
						continue;
					held[i][k] = 0;
					if (i == fj)
						seen[i][k] = true;
					else if (bad++ < 5)
						print_error("f%d_%d carried into final%d/\n", i, k, fj);
				}
			}
			from = -1;
		}
		if (strstr(ev, "CREATE") && sscanf(name, "f%d_%d", &fi, &fk) == 2 &&
		    fi >= 0 && fi <= ITER && fk >= 0 && fk < FILES) {
			if (sscanf(dir, "w/final%d/", &fj) == 1)
				seen[fi][fk] |= fj == fi;
			else if (!strncmp(dir, "w/", 2) && (slot = tmp_slot(dir + 2)) >= 0)
				held[fi][fk] = slot + 1;
			if (sscanf(dir, "w/final%d/", &fj) == 1 && fj != fi && bad++ < 5)
				print_error("reported in the wrong directory: %s\n", l);
		}
		free(l);
	}
	/* The unfinished build: its files are still in their .tmp. */
	for (k = 0; k < FILES; k++)
		seen[ITER][k] = held[ITER][k] == (reuse_tmp ? 0 : ITER) + 1;
	for (i = 0; i <= ITER; i++)
		for (k = 0; k < FILES; k++)
			if (!seen[i][k] && missing++ < 5)
				print_error("never reported where it is: f%d_%d\n", i, k);
	finish();
	if (bad || missing)
		fail_msg("%d files credited to a wrong directory, %d of %d never reported where they are",
			 bad, missing, (ITER + 1) * FILES);
}

struct publish_case {
	bool reuse;		/* one .tmp name for every iteration */
	bool unpaired;		/* --unpaired-renames */
	bool tiny;		/* a 4-descriptor cache */
	bool stopped;		/* the watcher stopped while the loop runs */
};

/*
 * With the watcher stopped, every directory's CREATE is read after the
 * directory was filled and renamed (and, with a reused name, after the
 * name came back): the hard path, taken every time rather than when the
 * timing happens to, and well within the queue (about 8 events a turn).
 */
static void publish(void **state)
{
	const struct publish_case *pc = *state;
	const char *args[] = { "-m", "-r", "-e", "create", "-e", "move",
			       "--format", "%e %w %f", "w", NULL, NULL };

	if (pc->unpaired) {
		args[8] = "--unpaired-renames";
		args[9] = "w";
	}
	reuse_tmp = pc->reuse;
	pre_exec = pc->tiny ? tiny_fd_cache : NULL;
	spawn(args, true);
	pre_exec = NULL;
	if (pc->stopped)
		kill(P.pid, SIGSTOP);
	publish_loop();
	if (pc->stopped)
		kill(P.pid, SIGCONT);
	check_published();
}

#define PUBLISH(name, ...) { "publish_" #name, publish, fresh, NULL, \
	&(struct publish_case){ __VA_ARGS__ } }

/* A directory moved in: what it holds, at any depth, is CREATE,SCAN. */
static void moved_in_contents(void **state)
{
	static const char *const args[] = { "-m", "-r", "w", NULL };

	(void)state;
	assert_int_equal(mkdir("out/m", 0755) | mkdir("out/m/sub", 0755), 0);
	write_file("out/m/a", "1");
	write_file("out/m/sub/b", "2");
	spawn(args, true);
	assert_int_equal(rename("out/m", "w/m"), 0);
	EXPECT("w/ MOVED_TO,ISDIR m");
	/* readdir order: collect the three, in any order */
	{
		bool a = false, sub = false, b = false;
		int n;

		for (n = 0; n < 3; n++) {
			char *l = next_line(LINE_TIMEOUT_MS);

			assert_non_null(l);
			a |= !strcmp(l, "w/m/ CREATE,SCAN a");
			sub |= !strcmp(l, "w/m/ CREATE,ISDIR,SCAN sub");
			b |= !strcmp(l, "w/m/sub/ CREATE,SCAN b");
			free(l);
		}
		assert_true(a && sub && b);
	}
	write_file("w/m/sub/c", "");
	EXPECT("w/m/sub/ CREATE c", "w/m/sub/ CLOSE_WRITE,CLOSE c");
	finish();
}

/*
 * A big directory moved in is renamed while fanwatch scans it, with a
 * descriptor cache too small to hold it: its subdirectories are reached
 * again by name, which now leads nowhere until the rename is read.  No
 * file is lost and later paths use the new name.
 */
#define BIG 60

static void rename_while_scanning(void **state)
{
	static const char *const args[] = { "-m", "-r", "-e", "create", "--format", "%w %f",
					    "w", NULL };
	static bool seen[BIG];
	char p[128];
	int i, missing = 0;	/* here: how many were seen */
	char *l;

	(void)state;
	assert_int_equal(mkdir("out/big", 0755), 0);
	for (i = 0; i < BIG; i++) {
		snprintf(p, sizeof(p), "out/big/s%d", i);
		assert_int_equal(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "out/big/s%d/f%d", i, i);
		write_file(p, "");
	}
	memset(seen, 0, sizeof(seen));
	pre_exec = tiny_fd_cache;
	spawn(args, true);
	pre_exec = NULL;
	kill(P.pid, SIGSTOP);	/* both renames queued before it reads one */
	assert_int_equal(rename("out/big", "w/big"), 0);
	assert_int_equal(rename("w/big", "w/big2"), 0);
	kill(P.pid, SIGCONT);
	while (missing < BIG && (l = next_line(LINE_TIMEOUT_MS))) {
		int a, b;

		if (sscanf(l, "w/big2/s%d/ f%d", &a, &b) == 2 ||
		    sscanf(l, "w/big/s%d/ f%d", &a, &b) == 2)
			if (a == b && a >= 0 && a < BIG && !seen[a]) {
				seen[a] = true;
				missing++;
			}
		free(l);
	}
	if (missing < BIG)
		fail_msg("only %d of %d files reported", missing, BIG);
	/* Afterwards, events inside carry the new name. */
	write_file("w/big2/s7/late", "");
	EXPECT("w/big2/s7/ late");
	finish();
}

/* --paired-renames: inotifywait's two lines made one, the old path last. */
static void paired_text(void **state)
{
	static const char *const args[] = { "-m", "--paired-renames", "w", NULL };

	(void)state;
	if (!have_rename)
		K513_SKIP("FAN_RENAME needs Linux 5.17+");
	write_file("w/a", "");
	spawn(args, true);
	assert_int_equal(rename("w/a", "w/b"), 0);
	EXPECT("w/ MOVED_FROM,MOVED_TO b <- w/a");
	finish();
}

/* %c: the two halves share a cookie; other events have 0. */
static void cookies(void **state)
{
	static const char *const args[] = { "-m", "--format", "%c %e %f", "w", NULL };
	char *a, *b, *c2;
	unsigned int ca, cb;

	(void)state;
	spawn(args, true);
	write_file("w/a", "");
	EXPECT("0 CREATE a", "0 CLOSE_WRITE,CLOSE a");
	assert_int_equal(rename("w/a", "w/b"), 0);
	a = next_line(LINE_TIMEOUT_MS);
	b = next_line(LINE_TIMEOUT_MS);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(sscanf(a, "%u MOVED_FROM a", &ca), 1);
	assert_int_equal(sscanf(b, "%u MOVED_TO b", &cb), 1);
	assert_true(ca != 0 && ca == cb);
	assert_int_equal(rename("w/b", "w/c"), 0);
	c2 = next_line(LINE_TIMEOUT_MS);
	assert_non_null(c2);
	assert_int_equal(sscanf(c2, "%u MOVED_FROM b", &cb), 1);
	assert_true(cb != ca);
	free(a);
	free(b);
	free(c2);
	finish();
}

/* A watched subdirectory removed, replaced by a file, moved out. */
static void dir_gone(void **state)
{
	static const char *const args[] = { "-m", "-r", "w", NULL };

	(void)state;
	assert_int_equal(mkdir("w/x", 0755) | mkdir("w/y", 0755), 0);
	spawn(args, true);
	assert_int_equal(rmdir("w/x"), 0);
	EXPECT_UNORDERED("w/ DELETE,ISDIR x", "w/x/ DELETE_SELF ");
	write_file("w/x", "now a file");
	EXPECT("w/ CREATE x", "w/ MODIFY x", "w/ CLOSE_WRITE,CLOSE x");
	assert_int_equal(rename("w/y", "out/y"), 0);
	EXPECT("w/ MOVED_FROM,ISDIR y");
	if (!have_rename)
		EXPECT("w/y/ MOVE_SELF ");
	write_file("out/y/unseen", "");
	write_file("w/seen", "");
	EXPECT("w/ CREATE seen", "w/ CLOSE_WRITE,CLOSE seen");
	finish();
}

/*
 * Any tree size: a hard RLIMIT_NOFILE far below the number of directories
 * (as "ulimit -n 1024" is to a 100 000-directory tree) still leaves every
 * directory marked, counted in the group's fdinfo, and every leaf reports.
 */
#define TOPS 40
#define LEAVES 25
#define WIDE 150	/* one directory: setup's batches (at most the fd cache) many times over */
#define NOFILE 64

static void low_nofile(void)
{
	struct rlimit r = { NOFILE, NOFILE };

	setrlimit(RLIMIT_NOFILE, &r);
}

/* Inode marks of P's fanotify group, from /proc/PID/fdinfo; -1 if unseen. */
static long count_marks(void)
{
	char path[320], link[64], line[512];
	long marks = -1;
	struct dirent *de;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)P.pid);
	dir = opendir(path);
	assert_non_null(dir);
	while (marks < 0 && (de = readdir(dir))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)P.pid, de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0 || (link[n] = '\0', !strstr(link, "fanotify")))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)P.pid, de->d_name);
		f = fopen(path, "r");
		assert_non_null(f);
		for (marks = 0; fgets(line, sizeof(line), f);)
			marks += !strncmp(line, "fanotify ino:", 13);
		fclose(f);
	}
	closedir(dir);
	return marks;
}

static void tree_beyond_nofile(void **state)
{
	static const char *const args[] = { "-m", "-r", "-e", "create", "--format", "%w %f",
					    "w", NULL };
	char p[64];
	int i, k, seen = 0;
	char *l;

	(void)state;
	if (access("/proc/self/fdinfo", R_OK))
		K513_SKIP("no /proc: the marks are counted in fdinfo");
	for (i = 0; i < TOPS; i++) {
		snprintf(p, sizeof(p), "w/d%d", i);
		assert_int_equal(mkdir(p, 0755), 0);
		for (k = 0; k < LEAVES; k++) {
			snprintf(p, sizeof(p), "w/d%d/e%d", i, k);
			assert_int_equal(mkdir(p, 0755), 0);
		}
	}
	assert_int_equal(mkdir("w/wide", 0755), 0);
	for (k = 0; k < WIDE; k++) {
		snprintf(p, sizeof(p), "w/wide/e%d", k);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	pre_exec = low_nofile;
	spawn(args, true);
	pre_exec = NULL;
	assert_int_equal(count_marks(), 2 + TOPS + TOPS * LEAVES + WIDE);
	for (i = 0; i < TOPS; i++) {
		for (k = 0; k < LEAVES; k++) {
			snprintf(p, sizeof(p), "w/d%d/e%d/x", i, k);
			write_file(p, "");
		}
	}
	for (k = 0; k < WIDE; k++) {
		snprintf(p, sizeof(p), "w/wide/e%d/x", k);
		write_file(p, "");
	}
	write_file("w/done", "");
	while ((l = next_line(LINE_TIMEOUT_MS)) && strcmp(l, "w/ done")) {
		seen += !!strstr(l, "/ x");
		free(l);
	}
	free(l);
	drain_err(0);
	assert_null(strstr(P.ebuf, "warning"));
	finish();
	assert_int_equal(seen, TOPS * LEAVES + WIDE);
}

/*
 * Any depth: a chain of DEEP directories w/d/d/..., its path (2 bytes a
 * level) far beyond PATH_MAX, made and removed through descriptors.  Setup
 * once recursed a level at a time (adopt_batch -> fw_scan, ~11 KB of
 * stack each) and died of SIGSEGV some 800 levels down; the same under a
 * 128 KB stack (ulimit -s 128, half what the issue asked) shows that no
 * walk's stack use grows with depth: a recursion of 26 bytes a level
 * would overrun it.  Paths are printed whole, also beyond PATH_MAX
 * (fanwatch(1), LIMITS).
 */
#define DEEP 5000

#define CHAIN_OPEN	(O_RDONLY | O_DIRECTORY | O_CLOEXEC)

/* The bottom of the chain whose top is dfd/top, and its depth. */
static int chain_bottom(int dfd, const char *top, int *depth)
{
	int fd = openat(dfd, top, CHAIN_OPEN), n;

	for (*depth = fd >= 0; fd >= 0 && (n = openat(fd, "d", CHAIN_OPEN)) >= 0; ++*depth) {
		close(fd);
		fd = n;
	}
	return fd;
}

/*
 * The chain is made once and parked beside w between the tests (as
 * "chain"), moved in as w/d for each: making and removing it took
 * seconds a test on a loaded host.  Returns its bottom's fd.
 */
static int make_chain(void)
{
	int fd, n, i;

	if (access("chain", F_OK)) {
		fd = open(".", CHAIN_OPEN);
		for (i = 0; i < DEEP; i++) {
			assert_true(fd >= 0);
			assert_int_equal(mkdirat(fd, i ? "d" : "chain", 0755), 0);
			n = openat(fd, i ? "d" : "chain", CHAIN_OPEN);
			close(fd);
			fd = n;
		}
		close(fd);
	}
	assert_int_equal(rename("chain", "w/d"), 0);
	fd = chain_bottom(AT_FDCWD, "w/d", &i);
	assert_int_equal(i, DEEP);
	return fd;
}

/* Teardown: what the test made at the bottom removed, the chain parked. */
static int park_chain(void **state)
{
	int fd, depth;

	(void)state;
	pre_exec = NULL;
	if (P.pid > 0 && !waitpid(P.pid, NULL, WNOHANG)) {	/* a failed test's */
		kill(P.pid, SIGKILL);
		waitpid(P.pid, NULL, 0);
	}
	rename("w/x", "w/d");	/* where a failed test left it */
	rename("out/x", "w/d");
	fd = chain_bottom(AT_FDCWD, "w/d", &depth);
	if (fd >= 0) {
		unlinkat(fd, "f", 0);
		unlinkat(fd, "g", 0);
		unlinkat(fd, "h", 0);
		unlinkat(fd, "new", 0);
		unlinkat(fd, "e/f", 0);
		unlinkat(fd, "e", AT_REMOVEDIR);
		close(fd);
	}
	return depth == DEEP && !rename("w/d", "chain") ? 0 : -1;
}

/* After the tests, bottom up: nftw cannot, the paths are too long. */
static void remove_chain(void)
{
	int depth, fd = chain_bottom(AT_FDCWD, "chain", &depth), n;

	for (; fd >= 0 && depth > 1; depth--) {
		n = openat(fd, "..", CHAIN_OPEN);
		close(fd);
		fd = n;
		if (fd >= 0 && unlinkat(fd, "d", AT_REMOVEDIR))
			break;
	}
	if (fd >= 0)
		close(fd);
	rmdir("chain");
}

/* P did not say it is watching: fail with the signal that ended it, if one did. */
static void fail_not_ready(void)
{
	int st;

	kill(P.pid, SIGKILL);	/* nothing, if it is dead already */
	waitpid(P.pid, &st, 0);
	drain_err(0);
	close(P.out);
	close(P.err);
	if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
		fail_msg("fanwatch died of signal %d (%s) during setup: %s",
			 WTERMSIG(st), strsignal(WTERMSIG(st)), P.ebuf);
	fail_msg("fanwatch did not get ready in %d ms: %s", LINE_TIMEOUT_MS, P.ebuf);
}

/* The chain's path with suffix, its top renamed to top: "w/TOP/d/.../d/". */
static char *deep_line(const char *top, const char *suffix)
{
	size_t len = 2 + strlen(top) + 1 + 2 * (DEEP - 1);
	char *s = malloc(len + strlen(suffix) + 1), *p;
	int i;

	assert_non_null(s);
	p = s + sprintf(s, "w/%s/", top);
	for (i = 1; i < DEEP; i++, p += 2)
		memcpy(p, "d/", 2);
	strcpy(p, suffix);
	return s;
}

static void expect_deep(const char *top, const char *suffix)
{
	char *want = deep_line(top, suffix);

	EXPECT(want);
	free(want);
}

static void create_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	close(fd);
}

static void deep_chain_run(void (*limit)(void))
{
	static const char *const args[] = { "-m", "-r", "-e", "create", "-e", "move", "w", NULL };
	static const char *const tmo[] = { "-r", "-t", "1", "w", NULL };
	int fd = make_chain();

	pre_exec = limit;
	spawn(args, false);
	if (!wait_err("Watches established.", LINE_TIMEOUT_MS))
		fail_not_ready();
	create_at(fd, "f");
	expect_deep("d", " CREATE f");
	/*
	 * New directories at the top take the descriptor cache (4 with the
	 * tiny one): the one made at the bottom is then marked through its
	 * parent's descriptor, opened again from the root, DEEP levels.
	 */
	assert_int_equal(mkdir("w/t0", 0755) | mkdir("w/t1", 0755) |
			 mkdir("w/t2", 0755) | mkdir("w/t3", 0755), 0);
	EXPECT("w/ CREATE,ISDIR t0", "w/ CREATE,ISDIR t1", "w/ CREATE,ISDIR t2",
	       "w/ CREATE,ISDIR t3");
	assert_int_equal(mkdirat(fd, "e", 0755), 0);
	expect_deep("d", " CREATE,ISDIR e");
	create_at(fd, "e/f");
	expect_deep("d", "e/ CREATE f");
	/* Renamed, the chain is relabeled; moved out, unwatched: both a walk of DEEP levels. */
	assert_int_equal(rename("w/d", "w/x"), 0);
	expect_rename("w/", "d", "w/", "x", true);
	create_at(fd, "g");
	expect_deep("x", " CREATE g");
	assert_int_equal(rename("w/x", "out/x"), 0);
	EXPECT("w/ MOVED_FROM,ISDIR x");
	create_at(fd, "h");
	write_file("w/done", "");
	EXPECT("w/ CREATE done");
	close(fd);
	/* the default action, as inotifywait: not a crash on the way out */
	assert_int_equal(finish(), 128 + SIGTERM);
	assert_int_equal(rename("out/x", "w/d"), 0);
	assert_int_equal(run(tmo, NULL), 2);
	pre_exec = NULL;
}

static void deep_chain(void **state)
{
	(void)state;
	deep_chain_run(NULL);
}

/* ulimit -s 128, and a 4-descriptor cache: the bottom is reopened from the top */
static void small_stack(void)
{
	struct rlimit r;

	getrlimit(RLIMIT_STACK, &r);
	r.rlim_cur = 128 * 1024;
	setrlimit(RLIMIT_STACK, &r);
	setenv("FANWATCH_FD_CACHE", "4", 1);
}

static void deep_chain_small_stack(void **state)
{
	(void)state;
	deep_chain_run(small_stack);
}

static int bottom_fd = -1;

static void create_at_bottom(void)
{
	create_at(bottom_fd, "new");	/* lost with the overflow */
}

/* A rescan after an overflow walks the chain too, under the small stack. */
static void deep_chain_rescan(void **state)
{
	static const char *const args[] = { "-m", "-r", "--rescan-on-overflow", "-e", "create",
					    "w", NULL };
	long max = queue_limit();
	bool seen = false;
	char *want, *l;

	(void)state;
	if (max > 100000)
		K513_SKIP("fs.fanotify.max_queued_events is %ld: too large to overflow here", max);
	bottom_fd = make_chain();
	want = deep_line("d", " CREATE,SCAN new");
	pre_exec = small_stack;
	spawn(args, false);
	if (!wait_err("Watches established.", LINE_TIMEOUT_MS))
		fail_not_ready();
	flood(max, create_at_bottom);
	close(bottom_fd);
	while (!seen && (l = next_line(LINE_TIMEOUT_MS))) {
		seen = !strcmp(l, want);
		free(l);
	}
	free(want);
	if (!seen)
		fail_msg("no rescan event from the bottom of the chain (stderr: %s)", P.ebuf);
	assert_int_equal(finish(), 128 + SIGTERM);
	pre_exec = NULL;
}

static void limit_marks_small_stack(void)
{
	limit_marks_or_die();
	small_stack();
}

/* The mark limit three levels down: the rest of the chain is counted, as deep. */
static void deep_chain_mark_limit(void **state)
{
	static const char *const args[] = { "-m", "-r", "w", NULL };

	(void)state;
	need_mark_limit();
	close(make_chain());
	pre_exec = limit_marks_small_stack;
	spawn(args, false);
	if (!wait_err("Watches established.", LINE_TIMEOUT_MS))
		fail_not_ready();
	pre_exec = NULL;
	assert_non_null(strstr(P.ebuf, "user.max_fanotify_marks = 3): 4998 directories left unwatched"));
	assert_int_equal(finish(), 128 + SIGTERM);
}

/* A directory that can be listed but not searched: say what it needs. */
static void listable_not_searchable(void **state)
{
	static const char *const args[] = { "-m", "-r", "w", NULL };

	(void)state;
	assert_int_equal(mkdir("w/r", 0755) | mkdir("w/r/sub", 0755), 0);
	assert_int_equal(chmod("w/r", 0644), 0);
	spawn(args, true);
	assert_non_null(strstr(P.ebuf, "cannot watch w/r/sub: w/r/ can be listed but not searched (mode 0644): watching what is inside needs search (x) permission"));
	finish();
	chmod("w/r", 0755);
}

/* Write s to the file at path (a /proc file: one write). */
static int put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

/*
 * A user and mount namespace of its own, as the same user, where w/b is a
 * bind mount of w/a, w/r a ramfs (no file handles) and w/t a tmpfs.
 * 0, or an errno.
 */
static int mounts_in_ns(void)
{
	char map[64];

	/* after root's setuid() to 65534 /proc/self is root's: made ours */
	if (prctl(PR_SET_DUMPABLE, 1) || unshare(CLONE_NEWUSER | CLONE_NEWNS))
		return errno;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned int)getuid(), (unsigned int)getuid());
	if (put("/proc/self/uid_map", map) || put("/proc/self/setgroups", "deny"))
		return errno;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned int)getgid(), (unsigned int)getgid());
	if (put("/proc/self/gid_map", map) ||
	    mount("w/a", "w/b", NULL, MS_BIND, NULL) ||
	    mount("fw-ramfs", "w/r", "ramfs", 0, NULL) ||
	    mount("fw-tmpfs", "w/t", "tmpfs", 0, NULL))
		return errno;
	return 0;
}

static void mounts_in_ns_or_die(void)
{
	if (mounts_in_ns())
		_exit(126);
}

/*
 * Mount points inside the tree (issue 34: a bind mount left 13 paths
 * unreported without a word, a FUSE mount was named "a btrfs subvolume"):
 * a tmpfs is watched, the others each named as a mount point.
 */
static void mounts_inside(void **state)
{
	char cwd[1024], path[1200];
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(mkdir("w/a", 0755) | mkdir("w/b", 0755) | mkdir("w/r", 0755) |
			 mkdir("w/t", 0755), 0);
	write_file("w/a/f", "");
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(mounts_in_ns());
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		K513_SKIP("no user and mount namespace for a normal user here (%s): no mount to put inside the tree",
			  WIFEXITED(st) ? strerror(WEXITSTATUS(st)) : "killed");
	pre_exec = mounts_in_ns_or_die;
	spawn(monitor, true);
	pre_exec = NULL;
	if (!strstr(P.ebuf, "w/r is a mount point (ramfs): not watched: its filesystem does not support file handles (EOPNOTSUPP)") ||
	    !strstr(P.ebuf, "w/b is a mount point (") || !strstr(P.ebuf, "a bind mount of its /") ||
	    !strstr(P.ebuf, "/w/a): w/b and w/a are one directory, watched once"))
		fail_msg("mount points not named: %s", P.ebuf);
	/* the tmpfs, seen through fanwatch's own mount namespace */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(path, sizeof(path), "/proc/%d/root%s/w/t/x", (int)P.pid, cwd);
	write_file(path, "");
	EXPECT("w/t/ CREATE x", "w/t/ CLOSE_WRITE,CLOSE x");
	finish();
}

static bool kernel_at_least(int maj, int min)
{
	struct utsname u;
	int a = 0, b = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &a, &b);
	return a > maj || (a == maj && b >= min);
}

/* Root makes a private directory for uid 65534 and becomes that user. */
static int become_nobody(char *dir)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return -1;
	}
	if (geteuid() == 0) {
		if (chown(dir, NOBODY, NOBODY) || setgroups(0, NULL) ||
		    setgid(NOBODY) || setuid(NOBODY)) {
			perror("dropping to uid 65534");
			return -1;
		}
	}
	if (chdir(dir)) {
		perror(dir);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(workload_paired, fresh),
		cmocka_unit_test_setup(workload_unpaired, fresh),
		cmocka_unit_test_setup(root_moved, fresh),
		cmocka_unit_test_setup(root_removed, fresh),
		cmocka_unit_test_setup(odd_names_csv, fresh),
		cmocka_unit_test_setup(odd_names_json, fresh),
		cmocka_unit_test_setup(new_dir_scanned, fresh),
		cmocka_unit_test_setup(unreadable_subdir, fresh),
		cmocka_unit_test_setup(filters, fresh),
		cmocka_unit_test_setup(own_events, fresh),
		cmocka_unit_test_setup(overflow_rescan, fresh),
		cmocka_unit_test_setup(mark_limit, fresh),
		cmocka_unit_test_setup(mark_limit_mid_scan, fresh),
		cmocka_unit_test_setup(fromfile_outfile, fresh),
		cmocka_unit_test_setup(no_file_handles, fresh),
		cmocka_unit_test_setup(exit_codes, fresh),
		PUBLISH(unique, .reuse = false),
		PUBLISH(reused, .reuse = true),
		PUBLISH(unique_unpaired, .unpaired = true),
		PUBLISH(reused_unpaired, .reuse = true, .unpaired = true),
		PUBLISH(reused_tiny_cache, .reuse = true, .tiny = true),
		PUBLISH(unique_stopped, .stopped = true),
		PUBLISH(reused_stopped, .reuse = true, .stopped = true),
		PUBLISH(unique_unpaired_stopped, .unpaired = true, .stopped = true),
		PUBLISH(reused_unpaired_stopped, .reuse = true, .unpaired = true,
			.stopped = true),
		cmocka_unit_test_setup(moved_in_contents, fresh),
		cmocka_unit_test_setup(rename_while_scanning, fresh),
		cmocka_unit_test_setup(paired_text, fresh),
		cmocka_unit_test_setup(cookies, fresh),
		cmocka_unit_test_setup(dir_gone, fresh),
		cmocka_unit_test_setup(listable_not_searchable, fresh),
		cmocka_unit_test_setup(tree_beyond_nofile, fresh),
		cmocka_unit_test_setup(mounts_inside, fresh),
	};
	/*
	 * Depth: fanwatch's own stack and heap at 5 000 levels, the same code
	 * on every kernel (meson test fanwatch-deep, host only).
	 */
	const struct CMUnitTest deep[] = {
		cmocka_unit_test_setup_teardown(deep_chain, fresh, park_chain),
		cmocka_unit_test_setup_teardown(deep_chain_small_stack, fresh, park_chain),
		cmocka_unit_test_setup_teardown(deep_chain_rescan, fresh, park_chain),
		cmocka_unit_test_setup_teardown(deep_chain_mark_limit, fresh, park_chain),
	};
	char dir[] = "/tmp/fanwatch-test.XXXXXX";
	bool want_deep;
	int ret;

	if (argc < 2 || (argc > 2 && strcmp(argv[2], "deep"))) {
		fprintf(stderr, "usage: %s /path/to/fanwatch [deep]\n", argv[0]);
		return 1;
	}
	want_deep = argc > 2;
	/* Resolved before become_nobody() changes directory. */
	fanwatch = realpath(argv[1], NULL);
	if (!fanwatch) {
		perror(argv[1]);
		return 1;
	}
	have_rename = kernel_at_least(5, 17);
	signal(SIGPIPE, SIG_IGN);
	if (become_nobody(dir))
		return 1;
	if (want_deep)
		ret = cmocka_run_group_tests_name("deep", deep, NULL, NULL);
	else
		ret = cmocka_run_group_tests(tests, NULL, NULL);
	remove_chain();
	fresh(NULL);
	rm_rf("w");
	rm_rf("out");
	if (chdir("/tmp") || rmdir(dir))
		perror(dir);
	return ret;
}

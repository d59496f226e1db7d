// SPDX-License-Identifier: LGPL-2.1-or-later
/* What lm's end-to-end tests share. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "lm.h"
#include "test-util.h"

int lmt_listener(char *addr, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 128), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, len, "127.0.0.1:%u", ntohs(sa.sin_port));
	return fd;
}

pid_t lmt_fork(void)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		alarm(LM_TEST_DEADLINE);
	return pid;
}

/* The start of a file as a string; false when it cannot be read. */
static bool slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	buf[fread(buf, 1, len - 1, f)] = 0;
	fclose(f);
	return true;
}

/*
 * A file's text as TAP comments, a line each (run-guest shows them for a
 * failing case). cmocka's print_message cuts a message at 1 KiB, newline
 * and all: one whole file in one message glued the next result line onto
 * its last, and the guest's parser lost that result.
 */
static void print_lines(char *buf)
{
	for (char *save, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		print_message("#   %.900s\n", l);
}

/* Each child's stderr file, for lmt_expect's report. */
static struct {
	pid_t pid;
	const char *errfile;
} spawned[64];
static unsigned int nspawned;

pid_t lmt_spawn(const char *errfile, const char *outfile, const char *const *args)
{
	/* lm runs in the test's own directory: a source's checkpoint lands there */
	const char *dir = lmt_dir();
	pid_t pid = lmt_fork();
	char *argv[48];
	int n = 0;

	if (pid) {
		spawned[nspawned % 64].pid = pid;
		spawned[nspawned++ % 64].errfile = errfile;
		return pid;
	}
	if ((errfile && !freopen(errfile, "w", stderr)) || chdir(dir))
		_exit(100);
	setvbuf(stderr, NULL, _IONBF, 0);	/* freopen made it buffered */
	if (!freopen(outfile ? outfile : "/dev/null", "w", stdout))
		_exit(100);
	argv[n++] = "lm";
	while (*args && n < 47)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	n = lm_main(n, argv);
	fflush(NULL);
	_exit(n);
}

int lmt_status(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

int lmt_status_within(pid_t pid, double seconds)
{
	double end = lmt_now() + seconds;
	int st;

	while (lmt_now() < end) {
		pid_t got = waitpid(pid, &st, WNOHANG);

		assert_true(got >= 0);
		if (got == pid)
			return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

bool lmt_expect(pid_t pid, int want)
{
	int got = lmt_status(pid);
	const char *errfile = NULL;
	char buf[8192];

	if (got == want)
		return true;
	for (unsigned int i = 0; i < 64; i++)
		if (spawned[i].pid == pid)
			errfile = spawned[i].errfile;
	print_message("# lm (pid %d) exited %d, not %d\n", (int)pid, got, want);
	if (errfile && slurp(errfile, buf, sizeof(buf))) {
		print_message("# its stderr (%s):\n", errfile);
		print_lines(buf);
	}
	return false;
}

bool lmt_file_says(const char *path, const char *word)
{
	char buf[16384];

	return slurp(path, buf, sizeof(buf)) && strstr(buf, word);
}

bool lmt_file_has(const char *path, const char *word)
{
	char buf[16384];
	bool found;

	if (!slurp(path, buf, sizeof(buf)))
		return false;
	found = strstr(buf, word) != NULL;
	if (!found) {
		print_message("# %s lacks '%s':\n", path, word ? word : "");
		print_lines(buf);
	}
	return found;
}

bool lmt_wait_for(const char *path, const char *word, double seconds)
{
	double end = lmt_now() + seconds;

	while (lmt_now() < end) {
		char buf[16384];

		if (slurp(path, buf, sizeof(buf)) && strstr(buf, word))
			return true;
		usleep(20000);
	}
	return lmt_file_has(path, word);
}

bool lmt_has_region(pid_t pid)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "memfd:") || strstr(line, "/dev/hugepages"))
			found = true;
	fclose(f);
	return found;
}

static char tmp_dir[64];
static pid_t tmp_owner;

/* At exit of the program that made it (not of its children): remove it. */
static void remove_tmp_dir(void)
{
	DIR *d;
	struct dirent *e;

	if (getpid() != tmp_owner || !(d = opendir(tmp_dir)))
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(tmp_dir);
}

/* The directory of lmt_path's files, made on first use. */
const char *lmt_dir(void)
{
	if (!tmp_dir[0]) {
		snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/lm-test-XXXXXX");
		assert_non_null(mkdtemp(tmp_dir));
		tmp_owner = getpid();
		atexit(remove_tmp_dir);
	}
	return tmp_dir;
}

/*
 * A file in a directory of this test program's own: programs meson runs in
 * parallel, or two test runs side by side, never read each other's logs.
 */
const char *lmt_path(const char *name)
{
	static struct {
		char name[48];
		char path[128];
	} cache[32];
	static unsigned int n;

	lmt_dir();
	for (unsigned int i = 0; i < n; i++)
		if (!strcmp(cache[i].name, name))
			return cache[i].path;
	assert_true(n < 32 && strlen(name) < sizeof(cache[0].name));
	snprintf(cache[n].name, sizeof(cache[n].name), "%s", name);
	snprintf(cache[n].path, sizeof(cache[n].path), "%s/%s", tmp_dir, name);
	return cache[n++].path;
}

const char *lmt_key(void)
{
	static const char *path;

	if (!path) {
		const char *args[] = { "keygen", NULL, NULL };

		path = lmt_path("test.key");
		args[1] = path;
		unlink(path);
		assert_int_equal(lmt_status(lmt_spawn(NULL, NULL, args)), 0);
	}
	return path;
}

double lmt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A signal sent before the program installed its handler kills it instead:
 * a test that interrupts a freshly spawned lm waits for SigCgt to show it.
 */
bool lmt_wait_catching(pid_t pid, double seconds)
{
	char path[64], line[256];
	unsigned long long caught;
	int tries = (int)(seconds * 100);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	while (tries-- > 0) {
		f = fopen(path, "r");
		caught = 0;
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "SigCgt: %llx", &caught) == 1)
				break;
		if (f)
			fclose(f);
		if (caught & (1ull << (SIGTERM - 1)))
			return true;
		usleep(10000);
	}
	return false;
}

/* ---- slowloris: strangers that hold the door a byte at a time -------- */

bool lmt_nofile(int n)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)n + 64;	/* stdio, the test's own, a margin */

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return false;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur >= want;
}

static volatile sig_atomic_t slow_quit;

static void slow_stop(int sig)
{
	(void)sig;
	slow_quit = 1;
}

int lmt_dial(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd >= 0 && connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The child: n connections, one byte of a plausible AUTH frame each per 100 ms. */
static void slow_child(const char *addr, int n, const char *countfile)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)atoi(strchr(addr, ':') + 1)) };
	uint8_t frame[256];
	struct lm_auth a = { .kind = LM_AUTH_MAIN };
	size_t len = lm_frame_encode(frame, sizeof(frame), LM_AUTH, 0, &a, NULL, 0);
	int fd[LM_DOOR_SLOTS], at[LM_DOOR_SLOTS], cuts = 0;
	FILE *f;

	signal(SIGTERM, slow_stop);
	lmt_nofile(n);
	for (int k = 0; k < n; k++)
		fd[k] = -1;
	while (!slow_quit) {
		for (int k = 0; k < n; k++) {
			uint8_t junk[256];

			if (fd[k] < 0) {
				fd[k] = lmt_dial(&sa);
				at[k] = 0;
				continue;
			}
			/* the CHALLENGE, a REFUSE, or the end */
			if (recv(fd[k], junk, sizeof(junk), MSG_DONTWAIT) == 0 ||
			    send(fd[k], frame + at[k] % len, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				if (errno == EAGAIN && at[k] == 0)
					continue;	/* still connecting */
				close(fd[k]);
				fd[k] = -1;
				cuts++;
				continue;
			}
			/* never the last byte: the frame is never whole */
			if (++at[k] % len == len - 1)
				at[k] = 0;
		}
		usleep(100000);
	}
	f = fopen(countfile, "w");
	if (f) {
		fprintf(f, "%d\n", cuts);
		fclose(f);
	}
	_exit(0);
}

pid_t lmt_slowloris_start(const char *addr, int n)
{
	pid_t pid;

	assert_true(n > 0 && n <= LM_DOOR_SLOTS);
	pid = lmt_fork();
	if (!pid)
		slow_child(addr, n, lmt_path("slowloris.count"));
	return pid;
}

int lmt_slowloris_stop(pid_t pid)
{
	FILE *f;
	int cuts = -1;

	kill(pid, SIGTERM);
	assert_int_equal(lmt_status(pid), 0);
	f = fopen(lmt_path("slowloris.count"), "r");
	if (f) {
		if (fscanf(f, "%d", &cuts) != 1)
			cuts = -1;
		fclose(f);
	}
	return cuts;
}

/* "with N of M pages mapped" or "pages N of M mapped" in the destination's log */
bool lmt_dest_holds_all(const char *log)
{
	char buf[16384], *p;
	unsigned long long n, m;
	FILE *f = fopen(log, "r");

	if (!f)
		return false;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
	fclose(f);
	if (strstr(buf, "holds every page"))
		return true;
	for (p = buf; (p = strstr(p, " of ")); p++) {
		char *q = p, *end;

		while (q > buf && q[-1] >= '0' && q[-1] <= '9')
			q--;
		if (q == p || sscanf(q, "%llu of %llu", &n, &m) != 2 || n != m || !m)
			continue;
		strtoull(p + 4, &end, 10);
		if (!strncmp(end, " pages mapped", 13) || !strncmp(end, " mapped", 7))
			return true;
	}
	return false;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-report on hostile input, generated here and piped in (nothing is
 * stored): a 256 MiB line that begins like a KFENCE title, a report of
 * huge frames, hundreds of MiB of ordinary lines and thousands of reports.
 * For each run the child's peak RSS and CPU time come from wait4(), so
 * the checks are on memory and on how CPU grows with the input (twice
 * the input, about twice the CPU: linear, not quadratic), never on the
 * wall clock of a loaded machine. Prints TAP.
 *
 * usage: kfence-bounded-test KFENCE-REPORT
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ul << 20)

/* What a run read and cost. */
struct run {
	long rss_kib;		/* peak resident set of the child */
	double cpu;		/* user + system seconds of the child */
	size_t out;		/* bytes it wrote */
	char head[65536];	/* the start of what it wrote */
	bool ok;		/* exited 0 */
};

/* One generated input: @gen writes it to @fd. */
typedef void (*gen_fn)(int fd, size_t n);

static const char *kr;
static int tests, failed;

static void check(bool ok, const char *what)
{
	printf("%sok %d - %s\n", ok ? "" : "not ", ++tests, what);
	failed |= !ok;
}

static void put(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;	/* the child is gone: its status says why */
		s += w;
		n -= (size_t)w;
	}
}

static void put_s(int fd, const char *s)
{
	put(fd, s, strlen(s));
}

/* @n bytes of @c, a MiB a write */
static void put_run(int fd, char c, size_t n)
{
	static char block[MiB];

	memset(block, c, sizeof(block));
	for (; n >= sizeof(block); n -= sizeof(block))
		put(fd, block, sizeof(block));
	put(fd, block, n);
}

/* A title line of @n bytes with no newline for all of them, then a line. */
static void gen_long_title(int fd, size_t n)
{
	put_s(fd, "[    1.000000] BUG: KFENCE: use-after-free read in ");
	put_run(fd, 'A', n);
	put_s(fd, "\n[    1.000001] next line\n");
}

/* A report whose stack is @n bytes of frames of 3000 bytes each. */
static void gen_huge_frames(int fd, size_t n)
{
	char frame[3100];

	memset(frame, 'f', 3000);
	strcpy(frame + 3000, "+0x1/0x2\n");
	put_s(fd, "==================================================================\n"
	      "BUG: KFENCE: use-after-free read in victim+0x1/0x2\n\n"
	      "Use-after-free read at 0x00000000952d865c (in kfence-#1):\n");
	for (size_t done = 0; done < n; done += 3000)
		put_s(fd, frame);
	put_s(fd, "==================================================================\n");
}

/* @n bytes of ordinary dmesg lines, none of a report */
static void gen_ordinary(int fd, size_t n)
{
	static char block[MiB];
	const char line[] = "[ 1234.567890] usb 1-1: new high-speed USB device number 2 using ehci\n";
	size_t l = sizeof(line) - 1, fill = sizeof(block) / l * l;

	for (size_t i = 0; i + l <= fill; i += l)
		memcpy(block + i, line, l);
	for (size_t done = 0; done < n; done += fill)
		put(fd, block, fill);
}

static const char report[] =
	"[   44.674898] ==================================================================\n"
	"[   44.675017] BUG: KFENCE: use-after-free read in drill_uaf_read+0x9/0xd [kfence_drill]\n"
	"[   44.675017] \n"
	"[   44.675124] Use-after-free read at 0x00000000952d865c (in kfence-#179):\n"
	"[   44.675181]  drill_uaf_read+0x9/0xd [kfence_drill]\n"
	"[   44.675203]  fire_write+0xa3/0xc3 [kfence_drill]\n"
	"[   44.675218]  vfs_write+0x9b/0x15c\n"
	"[   44.675282] \n"
	"[   44.675315] kfence-#179: 0x00000000952d865c-0x000000000cc9b5e0, size=32, cache=kmalloc-32\n"
	"[   44.675326] allocated by task 303 on cpu 1 at 44.674679s:\n"
	"[   44.675395]  drill_get_object+0x2d/0xab [kfence_drill]\n"
	"[   44.675476] freed by task 303 on cpu 1 at 44.674801s:\n"
	"[   44.675511]  drill_uaf_read+0x9/0xd [kfence_drill]\n"
	"[   44.675621] CPU: 1 PID: 303 Comm: sh Tainted: G    B      O     N 6.1.192 #1\n"
	"[   44.675686] ==================================================================\n";

/* @n bytes of short reports, each titled in a function of its own */
static void gen_distinct(int fd, size_t n)
{
	char rep[512];
	int len;

	for (size_t done = 0, i = 0; done < n; done += (size_t)len, i++) {
		len = snprintf(rep, sizeof(rep),
			       "==================================================================\n"
			       "BUG: KFENCE: use-after-free read in victim_%zu+0x1/0x2\n\n"
			       "Use-after-free read at 0x00000000952d865c (in kfence-#1):\n"
			       " victim_%zu+0x1/0x2\n"
			       "==================================================================\n",
			       i, i);
		put(fd, rep, (size_t)len);
	}
}

/* @n bytes of whole reports, one after another */
static void gen_reports(int fd, size_t n)
{
	for (size_t done = 0; done < n; done += sizeof(report) - 1)
		put(fd, report, sizeof(report) - 1);
}

/*
 * kfence-report @args reading what @gen writes (@n) on a pipe, or from a
 * memfd (a regular file) when @file. The child may use at most 30 s of
 * CPU (RLIMIT_CPU): a quadratic reader is stopped, not waited for.
 */
static struct run run_on(gen_fn gen, size_t n, bool file, const char *const *args)
{
	struct run r = { 0 };
	int in[2], out = memfd_create("kfence-bounded-out", 0), status = 0;
	struct rusage ru;
	struct stat st;
	pid_t pid;
	ssize_t got;

	if (out < 0)
		exit(99);
	if (file) {
		in[0] = memfd_create("kfence-bounded", 0);
		in[1] = dup(in[0]);
		gen(in[1], n);
		lseek(in[0], 0, SEEK_SET);
	} else if (pipe(in)) {
		exit(99);
	}
	pid = fork();
	if (pid == 0) {
		struct rlimit cpu = { 30, 30 };
		char *argv[8] = { (char *)kr };

		for (int i = 0; args[i] && i < 6; i++)
			argv[i + 1] = (char *)args[i];
		setrlimit(RLIMIT_CPU, &cpu);
		dup2(in[0], 0);
		dup2(out, 1);
		close(in[1]);
		execv(kr, argv);
		_exit(127);
	}
	close(in[0]);
	if (!file)
		gen(in[1], n);
	close(in[1]);
	wait4(pid, &status, 0, &ru);
	/* the output went to a file: the child never waits for us */
	if (!fstat(out, &st))
		r.out = (size_t)st.st_size;
	got = pread(out, r.head, sizeof(r.head) - 1, 0);
	r.head[got > 0 ? got : 0] = '\0';
	close(out);
	r.ok = WIFEXITED(status) && !WEXITSTATUS(status);
	r.rss_kib = ru.ru_maxrss;
	r.cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
		(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	return r;
}

/*
 * Peak RSS allowed: the 4 MiB block, the parser, the C library.  Under
 * AddressSanitizer (tests/run-sanitizers) freed memory waits in its
 * quarantine (256 MiB by default) and every mapping has shadow: still a
 * bound that the input's size must not move, only a larger one.
 */
#ifdef __SANITIZE_ADDRESS__
#define RSS_KIB (512 * 1024)
#else
#define RSS_KIB (32 * 1024)
#endif

static void bounded(const char *what, gen_fn gen, size_t n, bool file,
		    const char *const *args, const char *must_hold, size_t max_out)
{
	struct run r = run_on(gen, n, file, args);
	char msg[512];

	snprintf(msg, sizeof(msg), "%s, %zu MiB: %s, peak RSS %ld KiB <= %d KiB, "
		 "output %zu bytes <= %zu (cpu %.2f s)", what, n / MiB,
		 r.ok ? "exit 0" : "killed or failed", r.rss_kib, RSS_KIB, r.out, max_out, r.cpu);
	check(r.ok && r.rss_kib <= RSS_KIB && r.out <= max_out, msg);
	if (must_hold) {
		snprintf(msg, sizeof(msg), "%s: the output holds '%s'", what, must_hold);
		check(strstr(r.head, must_hold) != NULL, msg);
	}
}

/*
 * CPU time for @n and 2 @n bytes of input: linear when the second is about
 * twice the first. The slack (0.1 s, and 3x rather than 2x) keeps a run
 * too short to time, or a loaded machine, from failing it; a quadratic
 * reader takes 4x and, at these sizes, seconds.
 */
static void linear(const char *what, gen_fn gen, size_t n, const char *const *args)
{
	struct run a = run_on(gen, n, false, args), b = run_on(gen, 2 * n, false, args);
	char msg[512];

	snprintf(msg, sizeof(msg), "%s: %zu MiB took %.3f s of CPU, %zu MiB %.3f s "
		 "(<= 3x + 0.1 s: linear)", what, n / MiB, a.cpu, 2 * n / MiB, b.cpu);
	check(a.ok && b.ok && b.cpu <= 3 * a.cpu + 0.1, msg);
}

int main(int argc, char **argv)
{
	static const char *const json[] = { "--json", NULL };
	static const char *const summary[] = { "--summary", NULL };
	static const char *const kmsg[] = { "--json", "--kmsg=/dev/stdin", NULL };

	if (argc != 2) {
		fprintf(stderr, "usage: %s KFENCE-REPORT\n", argv[0]);
		return 2;
	}
	kr = argv[1];
	signal(SIGPIPE, SIG_IGN);
	bounded("a 256 MiB title line on a pipe", gen_long_title, 256 * MiB, false, json,
		"[cut]\",", 64 * 1024);
	bounded("the same line, --summary", gen_long_title, 256 * MiB, false, summary,
		"[cut]", 64 * 1024);
	bounded("the same line as a saved /dev/kmsg", gen_long_title, 256 * MiB, false, kmsg,
		NULL, 64 * 1024);
	bounded("a 128 MiB title line in a file", gen_long_title, 128 * MiB, true, json,
		"\"reason\":\"too-long\"", 64 * 1024);
	bounded("a report of 64 MiB of 3000-byte frames", gen_huge_frames, 64 * MiB, false,
		json, "\"reason\":\"too-long\"", 512 * 1024);
	bounded("ordinary lines", gen_ordinary, 512 * MiB, false, json, NULL, 0);
	bounded("reports one after another", gen_reports, 64 * MiB, false, json, NULL,
		200 * MiB);
	linear("a title line that does not end, on a pipe", gen_long_title, 64 * MiB, json);
	linear("ordinary lines", gen_ordinary, 256 * MiB, json);
	linear("reports one after another", gen_reports, 16 * MiB, json);
	linear("--summary of reports each in a bucket of its own", gen_distinct, 8 * MiB,
	       summary);
	printf("1..%d\n", tests);
	return failed;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-buildbench: a compile-like workload for KFENCE overhead runs, where
 * no compiler exists (an initramfs guest of either architecture).  What a
 * build asks of the kernel is what KFENCE's sampled allocations meet: a
 * process per translation unit (fork, execve of a dynamically linked
 * program, its mmaps and page faults), headers opened and read by every
 * unit, an object written to a temporary name and renamed into place, and
 * one link reading every object, with JOBS units running at once as make -j
 * runs them.  The "compiler" is this program run again (--cc): it hashes
 * the unit's tokens into a table it allocates, as a front end would.
 * Prints "Time: SECONDS" like hackbench and kfence-fsbench.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"

#define HEADERS 24
#define SRC_LINES 400
#define SRC_SIZE (SRC_LINES * 128)

static void die(const char *what, const char *path)
{
	fprintf(stderr, "kfence-buildbench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd))
		die("writing", path);
}

/* read_all PATH: the file's bytes, NUL-terminated, or exit. */
static char *read_all(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		die("opening", path);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		die("reading", path);
	close(fd);
	buf[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return buf;
}

/* The sources: HEADERS shared headers and UNITS units of SRC_LINES lines. */
static void make_tree(const char *dir, int units)
{
	char path[512];
	char *text = malloc(SRC_SIZE);
	size_t n;

	if (!text)
		die("allocating", "sources");
	if (mkdir(dir, 0700) && errno != EEXIST)
		die("mkdir", dir);
	for (int h = 0; h < HEADERS; h++) {
		snprintf(path, sizeof(path), "%s/h%d.h", dir, h);
		n = (size_t)snprintf(text, SRC_SIZE, "#define H%d %d\nint f%d(int);\n", h, h, h);
		write_file(path, text, n);
	}
	for (int u = 0; u < units; u++) {
		n = 0;
		/* each line is under 64 bytes: SRC_SIZE is never reached */
		for (int l = 0; l < SRC_LINES && n < SRC_SIZE; l++)
			n += (size_t)snprintf(text + n, SRC_SIZE - n,
					      "static int v%d_%d = f%d(H%d) + %d;\n",
					      u, l, l % HEADERS, l % HEADERS, l * u);
		snprintf(path, sizeof(path), "%s/u%d.c", dir, u);
		write_file(path, text, n);
	}
	free(text);
}

/* The "compiler": read the headers and the unit, hash its tokens, emit. */
static int cc(const char *dir, const char *unit)
{
	char path[512], tmp[512], *src, *tok, *save;
	uint32_t *table = calloc(4096, sizeof(*table));
	uint32_t h;
	size_t len;

	if (!table)
		die("allocating", "the symbol table");
	for (int i = 0; i < HEADERS; i++) {
		snprintf(path, sizeof(path), "%s/h%d.h", dir, i);
		free(read_all(path, &len));
	}
	snprintf(path, sizeof(path), "%s/%s.c", dir, unit);
	src = read_all(path, &len);
	for (tok = strtok_r(src, " \n;=+()", &save); tok; tok = strtok_r(NULL, " \n;=+()", &save)) {
		h = 2166136261u;
		for (const char *c = tok; *c; c++)
			h = (h ^ (uint8_t)*c) * 16777619u;
		table[h % 4096] += h;
	}
	snprintf(tmp, sizeof(tmp), "%s/%s.o.tmp", dir, unit);
	snprintf(path, sizeof(path), "%s/%s.o", dir, unit);
	write_file(tmp, (const char *)table, 4096 * sizeof(*table));
	if (rename(tmp, path))
		die("renaming", tmp);
	free(src);
	free(table);
	return 0;
}

static pid_t spawn(const char *self, const char *dir, int unit)
{
	char name[32];
	pid_t pid;

	snprintf(name, sizeof(name), "u%d", unit);
	pid = fork();
	if (pid < 0)
		die("fork", "");
	if (pid == 0) {
		execl(self, self, "--cc", dir, name, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void reap(void)
{
	int st;

	if (wait(&st) < 0)
		die("wait", "");
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "kfence-buildbench: a unit failed (status 0x%x)\n", st);
		exit(1);
	}
}

/* make -jJOBS: every unit compiled, then linked; the objects removed. */
static void build(const char *self, const char *dir, int units, int jobs)
{
	char path[512], *obj;
	size_t len, total = 0;
	int running = 0;

	for (int u = 0; u < units; u++) {
		if (running == jobs) {
			reap();
			running--;
		}
		spawn(self, dir, u);
		running++;
	}
	while (running--)
		reap();
	for (int u = 0; u < units; u++) {
		snprintf(path, sizeof(path), "%s/u%d.o", dir, u);
		obj = read_all(path, &len);
		total += len;
		free(obj);
		if (unlink(path))
			die("removing", path);
	}
	if (total != (size_t)units * 4096 * sizeof(uint32_t)) {
		fprintf(stderr, "kfence-buildbench: the link read %zu bytes\n", total);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *dir;
	int units, jobs, rounds;
	char self[4096];
	double t0;
	ssize_t n;

	if (argc == 4 && !strcmp(argv[1], "--cc"))
		return cc(argv[2], argv[3]);
	dir = argc > 1 ? argv[1] : "/tmp/kfence-buildbench";
	units = argc > 2 ? atoi(argv[2]) : 64;
	jobs = argc > 3 ? atoi(argv[3]) : 2;
	rounds = argc > 4 ? atoi(argv[4]) : 1;
	if (argc > 5 || units < 1 || jobs < 1 || rounds < 1) {
		fprintf(stderr, "usage: kfence-buildbench [DIR [UNITS [JOBS [ROUNDS]]]]\n");
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		die("readlink", "/proc/self/exe");
	self[n] = '\0';
	make_tree(dir, units);
	t0 = bench_now();
	for (int r = 0; r < rounds; r++)
		build(self, dir, units, jobs);
	printf("Time: %.3f\n", bench_now() - t0);
	return 0;
}

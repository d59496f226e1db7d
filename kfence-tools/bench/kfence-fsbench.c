// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-fsbench: a file-system-heavy workload for KFENCE overhead runs.
 * Metadata churn allocates from many slab caches (dentries, inodes, files,
 * names): per round, create N files in a fresh directory with 4 KiB each,
 * stat, rename, list and read them back, then remove them all. Prints
 * "Time: SECONDS" like hackbench, so one parser reads both.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what, const char *path)
{
	fprintf(stderr, "kfence-fsbench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void one_round(const char *dir, int n, const char *data, size_t len)
{
	char a[512], b[512], buf[4096];
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, i;

	if (mkdir(dir, 0700) && errno != EEXIST)
		fail("mkdir", dir);
	for (i = 0; i < n; i++) {
		snprintf(a, sizeof(a), "%s/f%d", dir, i);
		fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, data, len) != (ssize_t)len)
			fail("create", a);
		close(fd);
	}
	for (i = 0; i < n; i++) {
		snprintf(a, sizeof(a), "%s/f%d", dir, i);
		snprintf(b, sizeof(b), "%s/renamed-%d", dir, i);
		if (stat(a, &st) || rename(a, b))
			fail("stat/rename", a);
	}
	d = opendir(dir);
	if (!d)
		fail("opendir", dir);
	while ((de = readdir(d)))
		;
	closedir(d);
	for (i = 0; i < n; i++) {
		snprintf(b, sizeof(b), "%s/renamed-%d", dir, i);
		fd = open(b, O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
			fail("read", b);
		close(fd);
		if (unlink(b))
			fail("unlink", b);
	}
	if (rmdir(dir))
		fail("rmdir", dir);
}

int main(int argc, char **argv)
{
	const char *base = argc > 1 ? argv[1] : "/tmp/kfence-fsbench";
	int files = argc > 2 ? atoi(argv[2]) : 500;
	int rounds = argc > 3 ? atoi(argv[3]) : 10;
	static char data[4096];
	struct timespec t0, t1;

	if (argc > 4 || files < 1 || rounds < 1) {
		fprintf(stderr, "usage: kfence-fsbench [DIR [FILES [ROUNDS]]]\n");
		return 2;
	}
	memset(data, 'k', sizeof(data));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int r = 0; r < rounds; r++)
		one_round(base, files, data, sizeof(data));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("Time: %.3f\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

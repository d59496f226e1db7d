// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * --vmlinux FILE: frames to file:line with binutils. `nm` gives each text
 * symbol's address once; a frame "f+0x3f/0x48" is then f's address plus
 * 0x3f, which `addr2line` turns into a source line (one run per report,
 * all its addresses at once). Frames of modules ("[mod]") would need the
 * module's .ko and its load address: they are left alone. A hex frame (no
 * KALLSYMS) is used as is, which is right only without KASLR.
 */
#include "fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct sym {
	char *name;
	unsigned long long addr;
};

struct kfr_symbols {
	char *path;
	struct sym *v;
	size_t n;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct sym *)a)->name, ((const struct sym *)b)->name);
}

/* Runs @argv with stdout to a pipe; returns the read end, or NULL. */
static FILE *run(char *const argv[], pid_t *pid)
{
	int fds[2];

	if (pipe(fds))
		return NULL;
	*pid = fork();
	if (*pid < 0)
		return NULL;
	if (!*pid) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	return fdopen(fds[0], "r");
}

static int finish(FILE *f, pid_t pid)
{
	int st = 0;

	fclose(f);
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct kfr_symbols *kfr_symbols_open(const char *vmlinux)
{
	char magic[4], line[1024], type, name[512];
	unsigned long long addr;
	struct kfr_symbols *s;
	FILE *f = fopen(vmlinux, "rb");
	size_t cap = 0;
	pid_t pid;
	int st;
	char *argv[] = { "nm", "--defined-only", (char *)vmlinux, NULL };

	if (!f) {
		fprintf(stderr, "kfence-report: cannot read vmlinux '%s': %s\n", vmlinux,
			strerror(errno));
		return NULL;
	}
	if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "\177ELF", 4)) {
		fclose(f);
		fprintf(stderr, "kfence-report: '%s' is not an ELF file (--vmlinux wants the "
			"kernel's uncompressed vmlinux, with symbols)\n", vmlinux);
		return NULL;
	}
	fclose(f);
	s = calloc(1, sizeof(*s));
	f = s ? run(argv, &pid) : NULL;
	if (!f) {
		free(s);
		fprintf(stderr, "kfence-report: cannot run nm: %s\n", strerror(errno));
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %511s", &addr, &type, name) != 3 ||
		    !strchr("tTwW", type))
			continue;
		if (s->n == cap) {
			cap = cap ? 2 * cap : 4096;
			s->v = realloc(s->v, cap * sizeof(*s->v));
			if (!s->v)
				exit(1);
		}
		s->v[s->n].name = strdup(name);
		s->v[s->n++].addr = addr;
	}
	st = finish(f, pid);
	if (st == 127) {
		fprintf(stderr, "kfence-report: --vmlinux needs nm and addr2line "
			"(apt-get install binutils)\n");
		kfr_symbols_close(s);
		return NULL;
	}
	if (!s->n) {
		fprintf(stderr, "kfence-report: '%s' has no symbols (stripped?)\n", vmlinux);
		kfr_symbols_close(s);
		return NULL;
	}
	qsort(s->v, s->n, sizeof(*s->v), by_name);
	s->path = strdup(vmlinux);
	return s;
}

/* The address of a frame, or 0 when it cannot be known here. */
static unsigned long long frame_addr(const struct kfr_symbols *s, const char *frame)
{
	char name[512];
	const char *f = frame, *plus;
	struct sym key, *hit;
	size_t n;

	if (f[0] == '?' && f[1] == ' ')
		f += 2;
	if (strchr(f, '['))
		return 0;	/* a module's frame */
	if (f[0] == '0' && f[1] == 'x')
		return strtoull(f, NULL, 16);
	plus = strchr(f, '+');
	n = plus ? (size_t)(plus - f) : 0;
	if (!n || n >= sizeof(name))
		return 0;
	memcpy(name, f, n);
	name[n] = '\0';
	key.name = name;
	hit = bsearch(&key, s->v, s->n, sizeof(*s->v), by_name);
	return hit ? hit->addr + strtoull(plus + 1, NULL, 16) : 0;
}

static void symbolize_stack(struct kfr_symbols *s, struct kfr_stack *st)
{
	char *argv[KFR_MAX_FRAMES + 5], addrs[KFR_MAX_FRAMES][24], line[1024];
	size_t idx[KFR_MAX_FRAMES], n = 0, k = 0;
	unsigned long long a;
	FILE *f;
	pid_t pid;

	argv[0] = "addr2line";
	argv[1] = "-e";
	argv[2] = s->path;
	for (size_t i = 0; i < st->n; i++) {
		a = frame_addr(s, st->frames[i]);
		if (!a)
			continue;
		snprintf(addrs[n], sizeof(addrs[n]), "0x%llx", a);
		argv[3 + n] = addrs[n];
		idx[n++] = i;
	}
	if (!n)
		return;
	argv[3 + n] = NULL;
	f = run(argv, &pid);
	if (!f)
		return;
	while (k < n && fgets(line, sizeof(line), f)) {
		line[strcspn(line, " \n")] = '\0';
		if (line[0] != '?' && !strstr(line, ":?") && strcmp(line + strlen(line) - 2, ":0")) {
			free(st->src[idx[k]]);
			st->src[idx[k]] = kfr_field(line, strlen(line));
		}
		k++;
	}
	finish(f, pid);
}

void kfr_symbolize(struct kfr_symbols *s, struct kfr_report *r)
{
	symbolize_stack(s, &r->stack);
	symbolize_stack(s, &r->alloc.stack);
	symbolize_stack(s, &r->free.stack);
}

void kfr_symbols_close(struct kfr_symbols *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].name);
	free(s->v);
	free(s->path);
	free(s);
}

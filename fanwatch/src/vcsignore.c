// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ignore.h"
#include "vcsignore.h"

/* One directory's .gitignore, as last read, and whether .git is there. */
struct level {
	struct level *next;		/* hash chain */
	struct fw_ignore ig;		/* no rules if there is no file */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool top;			/* holds .git: the repository's top */
	char dir[];
};

struct fw_vcs {
	struct level **bucket;
	size_t nbucket, count;
};

struct fw_vcs *fw_vcs_new(void)
{
	struct fw_vcs *v = calloc(1, sizeof(*v));

	if (v && !(v->bucket = calloc(v->nbucket = 256, sizeof(*v->bucket)))) {
		free(v);
		v = NULL;
	}
	return v;
}

static uint64_t hash(const char *s, size_t n)
{
	uint64_t x = 1469598103934665603ull;	/* FNV-1a */

	while (n--)
		x = (x ^ (unsigned char)*s++) * 1099511628211ull;
	return x;
}

static void grow(struct fw_vcs *v)
{
	size_t n = v->nbucket * 2, i;
	struct level **b = calloc(n, sizeof(*b)), *l, *next;

	if (!b)
		return;
	for (i = 0; i < v->nbucket; i++) {
		for (l = v->bucket[i]; l; l = next) {
			size_t s = hash(l->dir, strlen(l->dir)) & (n - 1);

			next = l->next;
			l->next = b[s];
			b[s] = l;
		}
	}
	free(v->bucket);
	v->bucket = b;
	v->nbucket = n;
}

static bool same_file(const struct level *l, const struct stat *st)
{
	return l->dev == st->st_dev && l->ino == st->st_ino && l->size == st->st_size &&
	       l->mtime.tv_sec == st->st_mtim.tv_sec &&
	       l->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* (Re)read dir/.gitignore into l; no file is no rules. */
static void load(struct level *l, const char *file, const struct stat *st)
{
	char *text = NULL;
	size_t cap = 0;
	FILE *in;

	fw_ignore_free(&l->ig);
	l->dev = st ? st->st_dev : 0;
	l->ino = st ? st->st_ino : 0;
	l->size = st ? st->st_size : -1;
	l->mtime = st ? st->st_mtim : (struct timespec){ 0 };
	if (!st || !(in = fopen(file, "re")))
		return;
	if (getdelim(&text, &cap, '\0', in) < 0 && !text)
		text = strdup("");
	fclose(in);
	if (text && fw_ignore_parse(&l->ig, l->dir, text))
		fw_ignore_free(&l->ig);
	free(text);
}

/* The level for the directory path[0..n), current with its .gitignore. */
static struct level *level(struct fw_vcs *v, const char *path, size_t n)
{
	size_t s = hash(path, n) & (v->nbucket - 1);
	char file[4096 + 16];
	struct level *l;
	struct stat st, *sp = &st;

	if (n + 16 > sizeof(file))
		return NULL;
	memcpy(file, path, n);
	strcpy(file + n, n > 1 ? "/.gitignore" : ".gitignore");
	if (stat(file, &st) || !S_ISREG(st.st_mode))
		sp = NULL;
	for (l = v->bucket[s]; l; l = l->next) {
		if (strlen(l->dir) != n || memcmp(l->dir, path, n))
			continue;
		if (sp ? !same_file(l, sp) : l->size != -1)
			load(l, file, sp);
		return l;
	}
	l = calloc(1, sizeof(*l) + n + 1);
	if (!l)
		return NULL;
	memcpy(l->dir, path, n);
	strcpy(file + n, n > 1 ? "/.git" : ".git");
	l->top = !lstat(file, &st);
	strcpy(file + n, n > 1 ? "/.gitignore" : ".gitignore");
	load(l, file, sp);
	if (v->count >= v->nbucket)
		grow(v);
	s = hash(path, n) & (v->nbucket - 1);
	l->next = v->bucket[s];
	v->bucket[s] = l;
	v->count++;
	return l;
}

static bool in_git_dir(const char *p)
{
	const char *g = p;

	while ((g = strstr(g, "/.git"))) {
		if (g[5] == '/' || !g[5])
			return true;
		g += 5;
	}
	return false;
}

bool fw_vcs_ignored(struct fw_vcs *v, const char *abspath, bool isdir)
{
	size_t n = strlen(abspath);

	while (n > 1 && abspath[n - 1] == '/')
		n--;
	if (in_git_dir(abspath))
		return true;
	/* From the path's own directory up: the deepest file that says decides. */
	for (;;) {
		struct level *l;
		int d;

		while (n > 0 && abspath[n - 1] != '/')
			n--;
		if (!n)
			return false;
		l = level(v, abspath, n > 1 ? n - 1 : 1);
		if (!l)
			return false;
		d = l->ig.n ? fw_ignore_decide(&l->ig, abspath, isdir) : -1;
		if (d >= 0)
			return d;
		if (l->top || n == 1)
			return false;
		n--;
	}
}

void fw_vcs_free(struct fw_vcs *v)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < v->nbucket; i++) {
		struct level *l, *next;

		for (l = v->bucket[i]; l; l = next) {
			next = l->next;
			fw_ignore_free(&l->ig);
			free(l);
		}
	}
	free(v->bucket);
	free(v);
}

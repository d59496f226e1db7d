// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filter.h"

int fw_filter_add_ignore_file(struct fw_filter *f, const char *file)
{
	char *abs = realpath(file, NULL), *dir, *text = NULL;
	struct fw_ignore *nv;
	size_t cap = 0;
	FILE *in;
	int ret;

	if (!abs)
		return -errno;
	in = fopen(abs, "re");
	if (!in) {
		ret = -errno;
		free(abs);
		return ret;
	}
	/* at EOF at once (an empty file) getdelim leaves text unterminated */
	if (getdelim(&text, &cap, '\0', in) < 0) {
		free(text);
		text = strdup("");
	}
	fclose(in);
	dir = strrchr(abs, '/');
	if (dir == abs)
		dir[1] = '\0';
	else
		*dir = '\0';
	nv = realloc(f->ig, (f->nig + 1) * sizeof(*nv));
	ret = -ENOMEM;
	if (nv && text) {
		f->ig = nv;
		ret = fw_ignore_parse(&f->ig[f->nig], abs, text);
		if (!ret)
			f->nig++;
	}
	if (!f->cwd)
		f->cwd = getcwd(NULL, 0);
	f->has_ex = true;
	free(text);
	free(abs);
	return ret;
}

int fw_filter_add_vcs(struct fw_filter *f)
{
	if (!f->cwd && !(f->cwd = getcwd(NULL, 0)))
		return -errno;
	if (!f->vcs && !(f->vcs = fw_vcs_new()))
		return -ENOMEM;
	f->has_ex = true;
	return 0;
}

static bool ignored(const struct fw_filter *f, const char *path, bool isdir)
{
	char *abs = NULL;
	size_t i;
	bool ig = false;

	if (!f->nig && !f->vcs)
		return false;
	if (path[0] != '/') {
		while (path[0] == '.' && path[1] == '/')
			path += 2;
		if (!f->cwd || asprintf(&abs, "%s/%s", f->cwd, path) < 0)
			return false;
		path = abs;
	}
	for (i = 0; i < f->nig && !ig; i++)
		ig = fw_ignore_match(&f->ig[i], path, isdir);
	if (!ig && f->vcs)
		ig = fw_vcs_ignored(f->vcs, path, isdir);
	free(abs);
	return ig;
}

int fw_filter_add(struct fw_filter *f, bool include, bool icase,
		  const char *re, char *err, size_t errlen)
{
	regex_t **v = include ? &f->in : &f->ex;
	size_t *n = include ? &f->nin : &f->nex;
	regex_t r, *nv;
	int ret = regcomp(&r, re, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));

	if (ret) {
		regerror(ret, &r, err, errlen);
		return -1;
	}
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv) {
		regfree(&r);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	nv[(*n)++] = r;
	*v = nv;
	f->has_ex = f->nex || f->npaths;
	return 0;
}

int fw_filter_add_path(struct fw_filter *f, const char *path)
{
	size_t len = strlen(path);
	char **nv = realloc(f->paths, (f->npaths + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	f->paths = nv;
	while (len > 1 && path[len - 1] == '/')
		len--;
	if (!(nv[f->npaths] = strndup(path, len)))
		return -ENOMEM;
	f->npaths++;
	f->has_ex = true;
	return 0;
}

static bool any(const regex_t *v, size_t n, const char *path)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!regexec(&v[i], path, 0, NULL, 0))
			return true;
	return false;
}

static bool below(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

bool fw_filter_excluded(const struct fw_filter *f, const char *path, bool isdir)
{
	size_t i;

	if (any(f->ex, f->nex, path) || ignored(f, path, isdir))
		return true;
	for (i = 0; i < f->npaths; i++)
		if (below(path, f->paths[i]))
			return true;
	return false;
}

bool fw_filter_pass(const struct fw_filter *f, const char *path, bool isdir)
{
	if (fw_filter_excluded(f, path, isdir))
		return false;
	return !f->nin || any(f->in, f->nin, path);
}

void fw_filter_free(struct fw_filter *f)
{
	size_t i;

	for (i = 0; i < f->nex; i++)
		regfree(&f->ex[i]);
	for (i = 0; i < f->nin; i++)
		regfree(&f->in[i]);
	for (i = 0; i < f->npaths; i++)
		free(f->paths[i]);
	for (i = 0; i < f->nig; i++)
		fw_ignore_free(&f->ig[i]);
	free(f->ig);
	fw_vcs_free(f->vcs);
	free(f->cwd);
	free(f->ex);
	free(f->in);
	free(f->paths);
	memset(f, 0, sizeof(*f));
}

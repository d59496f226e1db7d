// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/stat.h>

#include "ignore.h"
#include "vcsignore.h"

#define RECHECK_MS 20		/* repository-wide files stat()ed at most this often */

/* A file read whole and watched by stat: an ignore file or a config. */
struct watched {
	char *path;			/* NULL: none */
	dev_t dev;
	ino_t ino;
	off_t size;			/* -1: absent */
	struct timespec mtime;
};

/* What a repository adds below its .gitignore files. */
struct repo {
	struct repo *next;
	char *common;			/* the git directory holding info/ and config */
	const char *top;		/* the top level's dir */
	struct watched config;		/* GIT_DIR/config: core.excludesFile */
	struct watched exclude;		/* GIT_DIR/info/exclude */
	struct watched excludes;	/* core.excludesFile, or git's default */
	struct fw_ignore exclude_ig, excludes_ig;
	int64_t checked;		/* ms, when the files were last stat()ed */
	uint64_t user_gen;		/* of the user's configs, when resolved */
	bool checked_once;
};

/* One directory's .gitignore, as last read, and whether .git is there. */
struct level {
	struct level *next;		/* hash chain */
	struct fw_ignore ig;		/* no rules if there is no file */
	struct watched file;
	bool top;			/* holds .git: the repository's top */
	struct repo *repo;		/* if top */
	char dir[];
};

struct fw_vcs {
	struct level **bucket;
	size_t nbucket, count;
	struct repo *repos;
	struct watched user[3];		/* system, XDG and ~/.gitconfig */
	uint64_t user_gen;		/* counts changes to them */
	uint64_t gen;			/* counts changes to any rule file */
	int64_t user_checked;
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

/*
 * Has w's file changed (appeared, gone, rewritten) since last seen?  The
 * first look at a file is a change too.
 */
static bool changed(struct watched *w, bool first)
{
	struct stat st;
	bool now = w->path && !stat(w->path, &st) && S_ISREG(st.st_mode);

	if (!now) {
		if (w->size == -1 && !first)
			return false;
		w->size = -1;
		return true;
	}
	if (!first && w->dev == st.st_dev && w->ino == st.st_ino &&
	    w->size == st.st_size && w->mtime.tv_sec == st.st_mtim.tv_sec &&
	    w->mtime.tv_nsec == st.st_mtim.tv_nsec)
		return false;
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	w->size = st.st_size;
	w->mtime = st.st_mtim;
	return true;
}

/* The whole file, or NULL if there is none. */
static char *slurp(const char *path)
{
	char *text = NULL;
	size_t cap = 0;
	FILE *in = path ? fopen(path, "re") : NULL;

	if (!in)
		return NULL;
	/* at EOF at once (an empty file) getdelim leaves text unterminated */
	if (getdelim(&text, &cap, '\0', in) < 0) {
		free(text);
		text = strdup("");
	}
	fclose(in);
	return text;
}

/* (Re)read the rules of w into ig, relative to base; no file, no rules. */
static void load(struct fw_ignore *ig, const struct watched *w, const char *base)
{
	char *text = w->size >= 0 ? slurp(w->path) : NULL;

	fw_ignore_free(ig);
	if (text && fw_ignore_parse(ig, base, text))
		fw_ignore_free(ig);
	free(text);
}

static void set_path(struct watched *w, char *path)
{
	free(w->path);
	w->path = path;
	w->size = -1;
}

static char *home_path(const char *rest)
{
	const char *home = getenv("HOME");
	char *p;

	if (!home || !*home || asprintf(&p, "%s/%s", home, rest) < 0)
		return NULL;
	return p;
}

/* $XDG_CONFIG_HOME/git/NAME, or ~/.config/git/NAME, as git finds it. */
static char *xdg_path(const char *name)
{
	const char *x = getenv("XDG_CONFIG_HOME");
	char *p;

	if (!x || !*x)
		return home_path(name[0] == 'c' ? ".config/git/config" : ".config/git/ignore");
	if (asprintf(&p, "%s/git/%s", x, name) < 0)
		return NULL;
	return p;
}

/* The user's config files, in git's order (a later one decides). */
static void user_configs(struct fw_vcs *v)
{
	const char *sys = getenv("GIT_CONFIG_SYSTEM"), *glob = getenv("GIT_CONFIG_GLOBAL");
	char *nosys = getenv("GIT_CONFIG_NOSYSTEM");
	bool first = !v->user_checked;
	int i;

	if (first) {
		if (!nosys || !*nosys || !strcmp(nosys, "0") || !strcasecmp(nosys, "false"))
			set_path(&v->user[0], strdup(sys ? sys : "/etc/gitconfig"));
		if (glob) {
			set_path(&v->user[2], strdup(glob));
		} else {
			set_path(&v->user[1], xdg_path("config"));
			set_path(&v->user[2], home_path(".gitconfig"));
		}
	} else if (now_ms() - v->user_checked < RECHECK_MS) {
		return;
	}
	v->user_checked = now_ms();
	for (i = 0; i < 3; i++)
		if (changed(&v->user[i], first))
			v->user_gen++;
}

/*
 * core.excludesFile from one config file's text, if it sets it: the
 * last "excludesfile" of a [core] section (names without case), its
 * value unquoted, comments dropped.  [include] is not followed.
 */
static char *config_excludes(const char *text)
{
	char *copy = strdup(text ? text : ""), *line, *save = NULL, *found = NULL;
	bool core = false;

	for (line = copy ? strtok_r(copy, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *k = line + strspn(line, " \t"), *eq, *o, *i;
		bool quoted = false;

		if (*k == '[') {
			core = !strncasecmp(k, "[core]", 6);
			continue;
		}
		eq = strchr(k, '=');
		if (!core || !eq)
			continue;
		*eq = '\0';
		k[strcspn(k, " \t")] = '\0';
		if (strcasecmp(k, "excludesfile"))
			continue;
		for (i = o = eq + 1 + strspn(eq + 1, " \t"); *i; i++) {
			if (*i == '"') {
				quoted = !quoted;
			} else if (!quoted && (*i == '#' || *i == ';')) {
				break;
			} else if (*i == '\\' && i[1]) {
				i++;
				*o++ = *i == 't' ? '\t' : *i == 'n' ? '\n' : *i;
			} else {
				*o++ = *i;
			}
		}
		while (o > eq + 1 && (o[-1] == ' ' || o[-1] == '\t' || o[-1] == '\r'))
			o--;
		*o = '\0';
		free(found);
		found = strdup(eq + 1 + strspn(eq + 1, " \t"));
	}
	free(copy);
	return found;
}

/* Where r's core.excludesFile is now: its configs, or git's default. */
static char *excludes_path(struct fw_vcs *v, struct repo *r)
{
	const char *files[4] = { v->user[0].path, v->user[1].path, v->user[2].path,
				 r->config.path };
	char *val = NULL, *text, *c, *p;
	int i;

	for (i = 0; i < 4; i++) {
		text = slurp(files[i]);
		c = text ? config_excludes(text) : NULL;
		if (c) {
			free(val);
			val = c;
		}
		free(text);
	}
	if (!val)
		return xdg_path("ignore");
	if (!*val) {
		free(val);
		return NULL;
	}
	if (!strncmp(val, "~/", 2))
		p = home_path(val + 2);
	else if (val[0] == '/')
		p = strdup(val);
	else if (asprintf(&p, "%s/%s", r->top, val) < 0)
		p = NULL;	/* git reads a relative one from the top */
	free(val);
	return p;
}

/* Bring r's files up to date; bump v->gen if any rules changed. */
static void refresh_repo(struct fw_vcs *v, struct repo *r)
{
	bool first = !r->checked_once;

	if (!first && now_ms() - r->checked < RECHECK_MS)
		return;
	user_configs(v);
	r->checked = now_ms();
	if (changed(&r->config, first) || r->user_gen != v->user_gen || first) {
		char *p = excludes_path(v, r);

		r->user_gen = v->user_gen;
		if (!p || !r->excludes.path || strcmp(p, r->excludes.path)) {
			set_path(&r->excludes, p);	/* another file: read it */
			first = true;
		} else {
			free(p);
		}
	}
	if (changed(&r->excludes, first)) {
		load(&r->excludes_ig, &r->excludes, r->top);
		v->gen++;
	}
	if (changed(&r->exclude, !r->checked_once)) {
		load(&r->exclude_ig, &r->exclude, r->top);
		v->gen++;
	}
	r->checked_once = true;
}

/* The git directory that top/.git names: itself, or "gitdir: X" and its commondir. */
static char *common_dir(const char *top)
{
	char *git, *text, *gd = NULL, *cd, *common = NULL;
	struct stat st;

	if (asprintf(&git, "%s/.git", top) < 0)
		return NULL;
	if (stat(git, &st) || S_ISDIR(st.st_mode))
		return git;
	text = slurp(git);
	free(git);
	if (!text || strncmp(text, "gitdir: ", 8)) {
		free(text);
		return NULL;
	}
	text[strcspn(text, "\r\n")] = '\0';
	if (text[8] == '/' ? !(gd = strdup(text + 8)) :
	    asprintf(&gd, "%s/%s", top, text + 8) < 0) {
		free(text);
		return NULL;
	}
	free(text);
	if (asprintf(&cd, "%s/commondir", gd) >= 0 && (text = slurp(cd))) {
		text[strcspn(text, "\r\n")] = '\0';
		if (text[0] == '/' ? !(common = strdup(text)) :
		    asprintf(&common, "%s/%s", gd, text) < 0)
			common = NULL;
		free(text);
	}
	free(cd);
	if (common) {
		free(gd);
		return common;
	}
	return gd;
}

static struct repo *new_repo(struct fw_vcs *v, struct level *l)
{
	struct repo *r = calloc(1, sizeof(*r));
	char *p;

	if (!r || !(r->common = common_dir(l->dir))) {
		free(r);
		return NULL;
	}
	r->top = l->dir;
	r->config.size = r->exclude.size = r->excludes.size = -1;
	if (asprintf(&p, "%s/config", r->common) >= 0)
		set_path(&r->config, p);
	if (asprintf(&p, "%s/info/exclude", r->common) >= 0)
		set_path(&r->exclude, p);
	r->next = v->repos;
	v->repos = r;
	return r;
}

/* The level for the directory path[0..n), current with its .gitignore. */
static struct level *level(struct fw_vcs *v, const char *path, size_t n)
{
	size_t s = hash(path, n) & (v->nbucket - 1);
	char file[4096 + 16];
	struct level *l;
	struct stat st;

	if (n + 16 > sizeof(file))
		return NULL;
	for (l = v->bucket[s]; l; l = l->next) {
		if (strlen(l->dir) != n || memcmp(l->dir, path, n))
			continue;
		if (changed(&l->file, false)) {
			load(&l->ig, &l->file, l->dir);
			v->gen++;
		}
		return l;
	}
	l = calloc(1, sizeof(*l) + n + 1);
	if (!l)
		return NULL;
	memcpy(l->dir, path, n);
	memcpy(file, path, n);
	strcpy(file + n, n > 1 ? "/.git" : ".git");
	l->top = !lstat(file, &st);
	strcpy(file + n, n > 1 ? "/.gitignore" : ".gitignore");
	if (!(l->file.path = strdup(file))) {
		free(l);
		return NULL;
	}
	l->file.size = -1;
	changed(&l->file, true);
	load(&l->ig, &l->file, l->dir);
	if (l->top)
		l->repo = new_repo(v, l);
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

/*
 * What git's chain says of path itself (its directories not looked at):
 * the .gitignore files of lv[0..n), deepest first, then the repository's
 * info/exclude, then core.excludesFile; 1 ignored, else 0.
 */
static bool chain(struct level **lv, size_t n, struct repo *r, const char *path, bool isdir)
{
	int d = -1;

	while (n-- && d < 0)
		if (lv[n]->ig.n)
			d = fw_ignore_last(&lv[n]->ig, path, isdir);
	if (d < 0 && r && r->exclude_ig.n)
		d = fw_ignore_last(&r->exclude_ig, path, isdir);
	if (d < 0 && r && r->excludes_ig.n)
		d = fw_ignore_last(&r->excludes_ig, path, isdir);
	return d == 1;
}

/*
 * The levels from the repository's top (or /) down to path's directory,
 * in *lv (n of them); the repository, if any.  -1 if one cannot be had.
 */
static int levels(struct fw_vcs *v, const char *path, size_t len, struct level ***lv,
		  size_t *n, struct repo **r)
{
	size_t cap = 16, k = len;
	struct level **a = malloc(cap * sizeof(*a)), *l;

	*n = 0;
	*r = NULL;
	while (a) {
		while (k > 0 && path[k - 1] != '/')
			k--;
		if (!k)
			break;
		l = level(v, path, k > 1 ? k - 1 : 1);
		if (!l)
			break;
		if (*n == cap) {
			struct level **na = realloc(a, (cap *= 2) * sizeof(*a));

			if (!na)
				break;
			a = na;
		}
		a[(*n)++] = l;
		if (l->top || k == 1) {
			*r = l->top ? l->repo : NULL;
			/* shallowest first */
			for (k = 0; k < *n / 2; k++) {
				l = a[k];
				a[k] = a[*n - 1 - k];
				a[*n - 1 - k] = l;
			}
			*lv = a;
			return 0;
		}
		k--;
	}
	free(a);
	return -1;
}

bool fw_vcs_ignored(struct fw_vcs *v, const char *abspath, bool isdir)
{
	size_t len = strlen(abspath), n, i;
	struct level **lv;
	struct repo *r;
	char *p;
	bool ig = false;

	while (len > 1 && abspath[len - 1] == '/')
		len--;
	if (in_git_dir(abspath))
		return true;
	if (!(p = strndup(abspath, len)))
		return false;
	if (levels(v, p, len, &lv, &n, &r)) {
		free(p);
		return false;
	}
	if (r)
		refresh_repo(v, r);
	/*
	 * As git: each directory between the top and the path first, with
	 * the files above it; below an ignored one nothing comes back.
	 */
	for (i = 1; i < n && !ig; i++)
		ig = chain(lv, i, r, lv[i]->dir, true);
	if (!ig)
		ig = chain(lv, n, r, p, isdir);
	free(lv);
	free(p);
	return ig;
}

uint64_t fw_vcs_generation(struct fw_vcs *v)
{
	struct repo *r;

	for (r = v->repos; r; r = r->next)
		refresh_repo(v, r);
	return v->gen;
}

static void free_repo(struct repo *r)
{
	free(r->common);
	free(r->config.path);
	free(r->exclude.path);
	free(r->excludes.path);
	fw_ignore_free(&r->exclude_ig);
	fw_ignore_free(&r->excludes_ig);
	free(r);
}

void fw_vcs_free(struct fw_vcs *v)
{
	struct repo *r, *rn;
	size_t i;

	if (!v)
		return;
	for (i = 0; i < v->nbucket; i++) {
		struct level *l, *next;

		for (l = v->bucket[i]; l; l = next) {
			next = l->next;
			fw_ignore_free(&l->ig);
			free(l->file.path);
			free(l);
		}
	}
	for (r = v->repos; r; r = rn) {
		rn = r->next;
		free_repo(r);
	}
	for (i = 0; i < 3; i++)
		free(v->user[i].path);
	free(v->bucket);
	free(v);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "ignore.h"

/* One [...] class at p against c; *end set past it, or NULL if unclosed. */
static bool match_class(const char *p, char c, const char **end)
{
	const char *j = p + 1;
	char buf[256], s[2] = { c, 0 };
	size_t n;

	if (*j == '!' || *j == '^')
		j++;
	if (*j == ']')
		j++;
	while (*j && *j != ']')
		j++;
	if (!*j || (size_t)(j - p + 2) > sizeof(buf)) {
		*end = NULL;
		return false;
	}
	n = j - p + 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	if (buf[1] == '^')
		buf[1] = '!';
	*end = j + 1;
	return c != '/' && !fnmatch(buf, s, 0);
}

/*
 * "**" crosses '/' only as a whole component (git's wildmatch): at the
 * start or after '/', and at the end or before '/'; elsewhere it is "*".
 */
static bool glob_at(const char *start, const char *p, const char *s);

bool fw_glob(const char *p, const char *s)
{
	return glob_at(p, p, s);
}

static bool glob_at(const char *start, const char *p, const char *s)
{
	const char *t, *end;

	for (;;) {
		switch (*p) {
		case '\0':
			return !*s;
		case '*':
			if (p[1] == '*' && (p == start || p[-1] == '/') &&
			    (!p[2] || p[2] == '/')) {
				p += 2;
				if (*p == '/') {	/* "**" "/": zero or more directories */
					for (t = s;; t++) {
						if (glob_at(start, p + 1, t))
							return true;
						t = strchr(t, '/');
						if (!t)
							return false;
					}
				}
				for (t = s;; t++) {	/* "**": anything, '/' too */
					if (glob_at(start, p, t))
						return true;
					if (!*t)
						return false;
				}
			}
			while (*p == '*')
				p++;
			for (t = s;; t++) {
				if (glob_at(start, p, t))
					return true;
				if (!*t || *t == '/')
					return false;
			}
		case '?':
			if (!*s || *s == '/')
				return false;
			p++, s++;
			break;
		case '[':
			if (!*s)
				return false;
			if (match_class(p, *s, &end)) {
				p = end, s++;
				break;
			}
			if (end)
				return false;
			/* an unclosed '[' is itself */
			if (*s != '[')
				return false;
			p++, s++;
			break;
		case '\\':
			if (p[1])
				p++;
			/* fall through */
		default:
			if (*p != *s)
				return false;
			p++, s++;
		}
	}
}

static int add_rule(struct fw_ignore *ig, char *line)
{
	struct fw_ignore_rule r = { 0 }, *nv;
	size_t n = strlen(line);
	char *slash;

	/* Trailing spaces go unless escaped with a backslash. */
	while (n && line[n - 1] == ' ' && !(n > 1 && line[n - 2] == '\\'))
		line[--n] = '\0';
	if (!n || line[0] == '#')
		return 0;
	if (line[0] == '!') {
		r.neg = true;
		line++, n--;
	} else if (line[0] == '\\' && (line[1] == '#' || line[1] == '!')) {
		line++, n--;
	}
	if (n && line[n - 1] == '/') {
		r.dironly = true;
		line[--n] = '\0';
	}
	if (!n)
		return 0;
	slash = strchr(line, '/');
	r.anchored = slash != NULL;
	if (line[0] == '/')
		line++;
	if (!(r.pat = strdup(line)))
		return -ENOMEM;
	nv = realloc(ig->r, (ig->n + 1) * sizeof(*nv));
	if (!nv) {
		free(r.pat);
		return -ENOMEM;
	}
	ig->r = nv;
	ig->r[ig->n++] = r;
	return 0;
}

int fw_ignore_parse(struct fw_ignore *ig, const char *base, const char *text)
{
	char *copy = strdup(text), *line, *save = NULL;
	size_t n = strlen(base);
	int ret = 0;

	memset(ig, 0, sizeof(*ig));
	while (n > 1 && base[n - 1] == '/')
		n--;
	if (!copy || !(ig->base = strndup(base, n))) {
		free(copy);
		return -ENOMEM;
	}
	for (line = strtok_r(copy, "\n", &save); line && !ret;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t l = strlen(line);

		if (l && line[l - 1] == '\r')
			line[l - 1] = '\0';
		ret = add_rule(ig, line);
	}
	free(copy);
	return ret;
}

/* The last rule matching rel decides: 1 ignored, 0 re-included, -1 none. */
static int decide(const struct fw_ignore *ig, const char *rel, bool isdir)
{
	const char *base = strrchr(rel, '/');
	size_t i = ig->n;

	base = base ? base + 1 : rel;
	while (i--) {
		const struct fw_ignore_rule *r = &ig->r[i];

		if (r->dironly && !isdir)
			continue;
		if (fw_glob(r->pat, r->anchored ? rel : base))
			return !r->neg;
	}
	return -1;
}

int fw_ignore_last(const struct fw_ignore *ig, const char *abspath, bool isdir)
{
	size_t bl = strlen(ig->base);

	if (strncmp(abspath, ig->base, bl) || (abspath[bl] != '/' && bl > 1) ||
	    !abspath[bl + (bl > 1)])
		return -1;
	return decide(ig, abspath + bl + (bl > 1), isdir);
}

int fw_ignore_decide(const struct fw_ignore *ig, const char *abspath, bool isdir)
{
	size_t bl = strlen(ig->base);
	char *rel, *p;
	int d = -1;

	if (strncmp(abspath, ig->base, bl) || (abspath[bl] != '/' && bl > 1))
		return -1;
	rel = strdup(abspath + bl + (bl > 1));
	if (!rel)
		return -1;
	/* Each parent directory first: below an ignored one, nothing comes back. */
	for (p = strchr(rel, '/'); p && d != 1; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (*rel && decide(ig, rel, true) == 1)
			d = 1;
		*p = '/';
	}
	if (d != 1 && *rel)
		d = decide(ig, rel, isdir);
	free(rel);
	return d;
}

bool fw_ignore_match(const struct fw_ignore *ig, const char *abspath, bool isdir)
{
	return fw_ignore_decide(ig, abspath, isdir) == 1;
}

void fw_ignore_free(struct fw_ignore *ig)
{
	size_t i;

	for (i = 0; i < ig->n; i++)
		free(ig->r[i].pat);
	free(ig->r);
	free(ig->base);
	memset(ig, 0, sizeof(*ig));
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * --ignore-file: .gitignore rules (gitignore(5)), matched against paths
 * relative to the directory that holds the file: blank lines and # skip,
 * \ escapes, trailing spaces dropped, ! re-includes, a trailing / means
 * directories only, a / elsewhere anchors the pattern to that directory,
 * otherwise it matches a name at any depth; * ? [..] do not cross /, **
 * does as a whole component (elsewhere it is *); the last match wins, and below an ignored directory nothing can
 * be re-included.
 */
#ifndef FW_IGNORE_H
#define FW_IGNORE_H

#include <stdbool.h>
#include <stddef.h>

struct fw_ignore_rule {
	char *pat;
	bool neg, dironly, anchored;
};

struct fw_ignore {
	char *base;			/* absolute directory, no trailing '/' */
	struct fw_ignore_rule *r;
	size_t n;
};

/* Parse rules read from text; base is the directory they apply to. */
int fw_ignore_parse(struct fw_ignore *ig, const char *base, const char *text);
/* What the rules say of the absolute path: 1 ignored, 0 re-included, -1 nothing. */
int fw_ignore_decide(const struct fw_ignore *ig, const char *abspath, bool isdir);
/*
 * The last rule matching the absolute path itself, its directories not
 * looked at: 1 ignored, 0 re-included, -1 none (for git's chain).
 */
int fw_ignore_last(const struct fw_ignore *ig, const char *abspath, bool isdir);
/* Is the absolute path (a directory if isdir) ignored? */
bool fw_ignore_match(const struct fw_ignore *ig, const char *abspath, bool isdir);
void fw_ignore_free(struct fw_ignore *ig);
/* The glob matcher, exposed for tests. */
bool fw_glob(const char *pat, const char *s);

#endif

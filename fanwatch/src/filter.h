/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * --exclude/--include: POSIX extended regexes matched against whole paths,
 * as many of each as given (inotifywait keeps only the last); and the
 * "@PATH" lines of --fromfile: a path and what is below it left out.
 */
#ifndef FW_FILTER_H
#define FW_FILTER_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "ignore.h"
#include "vcsignore.h"

struct fw_filter {
	struct fw_ignore *ig;	/* --ignore-file rule sets */
	size_t nig;
	char *cwd;		/* to make relative paths absolute for them */
	regex_t *ex, *in;
	size_t nex, nin;
	char **paths;		/* @PATH exclusions, without a trailing '/' */
	size_t npaths;
	bool has_ex;		/* any exclusion: regex or path */
	struct fw_vcs *vcs;	/* .git/ and nested .gitignore files, or NULL */
};

/* Returns 0, or -1 with the regcomp message in err; patterns add up. */
int fw_filter_add(struct fw_filter *f, bool include, bool icase,
		  const char *re, char *err, size_t errlen);
int fw_filter_add_path(struct fw_filter *f, const char *path);
/* An --ignore-file; its rules apply below its directory. -errno. */
int fw_filter_add_ignore_file(struct fw_filter *f, const char *file);
/* Leave out .git/ and what .gitignore files say, at every level. -errno. */
int fw_filter_add_vcs(struct fw_filter *f);
static inline bool fw_filter_active(const struct fw_filter *f)
{
	return f->has_ex || f->nin;
}
bool fw_filter_pass(const struct fw_filter *f, const char *path, bool isdir);
/* Exclusions only: decides which directories -r leaves unwatched. */
bool fw_filter_excluded(const struct fw_filter *f, const char *path, bool isdir);
void fw_filter_free(struct fw_filter *f);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --exclude/--include: POSIX extended regexes matched against whole paths. */
#ifndef FW_FILTER_H
#define FW_FILTER_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

struct fw_filter {
	regex_t ex, in;
	bool has_ex, has_in;
};

/* Returns 0, or -1 with the regcomp message in err. A later one replaces. */
int fw_filter_set(struct fw_filter *f, bool include, bool icase,
		  const char *re, char *err, size_t errlen);
static inline bool fw_filter_active(const struct fw_filter *f)
{
	return f->has_ex || f->has_in;
}
bool fw_filter_pass(const struct fw_filter *f, const char *path);
/* Only --exclude: decides which directories -r leaves unwatched. */
bool fw_filter_excluded(const struct fw_filter *f, const char *path);
void fw_filter_free(struct fw_filter *f);

#endif

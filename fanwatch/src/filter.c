// SPDX-License-Identifier: LGPL-2.1-or-later
#include "filter.h"

int fw_filter_set(struct fw_filter *f, bool include, bool icase,
		  const char *re, char *err, size_t errlen)
{
	regex_t *r = include ? &f->in : &f->ex;
	bool *has = include ? &f->has_in : &f->has_ex;
	regex_t n;
	int ret = regcomp(&n, re, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));

	if (ret) {
		regerror(ret, &n, err, errlen);
		return -1;
	}
	if (*has)
		regfree(r);
	*r = n;
	*has = true;
	return 0;
}

bool fw_filter_pass(const struct fw_filter *f, const char *path)
{
	if (f->has_ex && !regexec(&f->ex, path, 0, NULL, 0))
		return false;
	if (f->has_in && regexec(&f->in, path, 0, NULL, 0))
		return false;
	return true;
}

bool fw_filter_excluded(const struct fw_filter *f, const char *path)
{
	return f->has_ex && !regexec(&f->ex, path, 0, NULL, 0);
}

void fw_filter_free(struct fw_filter *f)
{
	if (f->has_ex)
		regfree(&f->ex);
	if (f->has_in)
		regfree(&f->in);
	f->has_ex = f->has_in = false;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/* Mount points inside a watched tree: detection and names. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mount.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/* fd's mount id from statx (5.8), or -1. */
static int statx_mnt_id(int fd)
{
	struct statx sx;

	if (fd < 0 || statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return -1;
	return (int)sx.stx_mnt_id;
}

bool fw_is_mount_point(int fd, int mnt, int pfd, int pmnt)
{
	struct statx sx;
	struct stat a, b;

	/* the usual case: both ids from name_to_handle_at, no system call */
	if (mnt >= 0 && pmnt >= 0)
		return mnt != pmnt;
	if (fd < 0)
		return false;
	if (!statx(fd, "", AT_EMPTY_PATH, 0, &sx) &&
	    (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return sx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
	/* before 5.8: another device than the parent's is another mount */
	return pfd >= 0 && !fstat(fd, &a) && !fstat(pfd, &b) && a.st_dev != b.st_dev;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;
	unsigned int c;

	for (; *s; s++) {
		if (s[0] == '\\' && sscanf(s + 1, "%3o", &c) == 1 && strlen(s) >= 4) {
			*o++ = (char)c;
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/*
 * A mountinfo line: ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS...] - TYPE
 * SOURCE SUPEROPTS.  The type and the root within its filesystem.
 */
static bool mountinfo_of(int mnt, char *type, size_t tlen, char *root, size_t rlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *sep, *r;
	size_t cap = 0;
	bool found = false;
	int id;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%d", &id) != 1 || id != mnt || !(sep = strstr(line, " - ")))
			continue;
		r = strtok(line, " ");
		for (int i = 0; r && i < 3; i++)
			r = strtok(NULL, " ");
		if (!r)
			break;
		unescape(r);
		snprintf(root, rlen, "%s", r);
		sep[3 + strcspn(sep + 3, " \n")] = '\0';
		unescape(sep + 3);
		snprintf(type, tlen, "%s", sep + 3);
		found = true;
	}
	free(line);
	fclose(f);
	return found;
}

void fw_mount_desc(int fd, int mnt, char *buf, size_t len)
{
	char type[64], root[1024];

	if (mnt < 0)
		mnt = statx_mnt_id(fd);
	if (mnt < 0 || !mountinfo_of(mnt, type, sizeof(type), root, sizeof(root)))
		snprintf(buf, len, "type unknown");
	else if (strcmp(root, "/"))
		snprintf(buf, len, "%s, a bind mount of its %s", type, root);
	else
		snprintf(buf, len, "%s", type);
}

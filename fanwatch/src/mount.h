/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mount points inside a watched tree (issue 34): found by the mount id
 * name_to_handle_at gives, named from /proc/self/mountinfo.
 */
#ifndef FW_MOUNT_H
#define FW_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Is the directory fd (mount id mnt, or -1 when it has no file handle) the
 * root of another mount than its parent's (pfd, mount id pmnt)?
 */
bool fw_is_mount_point(int fd, int mnt, int pfd, int pmnt);
/* "TYPE" or "TYPE, a bind mount of ROOT" for mount mnt (-1: fd's). */
void fw_mount_desc(int fd, int mnt, char *buf, size_t len);

#endif

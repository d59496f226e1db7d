/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What --exec leaves out by default, as watchexec and git do: anything
 * in a .git directory, and what the .gitignore files say — the one in the
 * path's directory and in every directory above it, up to the top of the
 * repository (the directory holding .git) or /.  A deeper file decides
 * before a shallower one.  The files are read when first needed and read
 * again when they change (checked by stat on every use).
 */
#ifndef FW_VCSIGNORE_H
#define FW_VCSIGNORE_H

#include <stdbool.h>

struct fw_vcs;

struct fw_vcs *fw_vcs_new(void);
/* Is the absolute path (a directory if isdir) left out? */
bool fw_vcs_ignored(struct fw_vcs *v, const char *abspath, bool isdir);
void fw_vcs_free(struct fw_vcs *v);

#endif

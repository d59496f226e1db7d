/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What --exec leaves out by default, as git check-ignore decides:
 * anything in a .git directory, and what git's chain of ignore files
 * says — the .gitignore in the path's directory and in every directory
 * above it up to the top of the repository (the directory holding .git)
 * or /, a deeper file deciding first, then the repository's
 * info/exclude, then core.excludesFile (from the system, XDG, ~/.gitconfig
 * and repository configs; by default $XDG_CONFIG_HOME/git/ignore or
 * ~/.config/git/ignore).  Each directory on the way down is decided
 * first, with the files above it: nothing below an ignored directory
 * comes back.  The files are read when first needed and read again when
 * they change: a .gitignore checked by stat on every use, the
 * repository-wide files at most every 20 ms.
 */
#ifndef FW_VCSIGNORE_H
#define FW_VCSIGNORE_H

#include <stdbool.h>
#include <stdint.h>

struct fw_vcs;

struct fw_vcs *fw_vcs_new(void);
/* Is the absolute path (a directory if isdir) left out? */
bool fw_vcs_ignored(struct fw_vcs *v, const char *abspath, bool isdir);
/*
 * Counts the changes to the rule files read so far (the repository-wide
 * ones stat()ed now): when it moves, an ignored directory may be back.
 */
uint64_t fw_vcs_generation(struct fw_vcs *v);
void fw_vcs_free(struct fw_vcs *v);

#endif

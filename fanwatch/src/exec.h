/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --exec: run a command when the watched tree changes. */
#ifndef FW_EXEC_H
#define FW_EXEC_H

#include <stdbool.h>

struct fw_ctx;

struct fw_exec_opts {
	const char *cmd;		/* run as sh -c CMD fanwatch PATH... */
	int settle_ms;			/* quiet time before a run */
	bool restart;			/* a change during a run restarts it */
	bool postpone;			/* no run at start */
	bool exit_on_fail;		/* a failed run ends fanwatch with its status */
};

/* Make c's reports feed the command; -1 (said why) if it cannot. */
int fw_exec_setup(struct fw_ctx *c, const struct fw_exec_opts *eo);

#endif

// SPDX-License-Identifier: LGPL-2.1-or-later
/* A page server in a process of its own: server.h. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common.h"
#include "server.h"

/* A server's failed step, on stderr: the VMM sees only its exit status. */
static void server_exit(const char *step, int ret)
{
	fprintf(stderr, "page server: %s: %s\n", step, strerror(-ret));
	_exit(3);
}

static void run_server(struct uffdm *vmm, struct uffdm_region *r, const struct page_server *ps,
		       int ctl)
{
	struct uffdm_handler_config cfg = { .threads = 1, .fault = ps->fault, .arg = ps->arg };
	struct uffdm_region *mine;
	struct uffdm_handler *h;
	struct uffdm *u;
	char c;
	int ret;

	if (read(ctl, &c, 1) != 1)	/* go, or the VMM is gone */
		_exit(0);
	ret = uffdm_adopt(&u, dup(uffdm_fd(vmm)), 0, 0);
	if (ret)
		server_exit("uffdm_adopt", ret);
	/* without POISON (6.1) only the VMM's SIGBUS descriptor can fail a page */
	ret = uffdm_sigbus_adopt(u, dup(uffdm_sigbus_fd(vmm)));
	if (ret)
		server_exit("uffdm_sigbus_adopt", ret);
	ret = uffdm_region_from_fd(&mine, uffdm_region_fd(r), 0, uffdm_region_size(r),
				   (uintptr_t)uffdm_region_view(r), 0);
	if (ret)
		server_exit("uffdm_region_from_fd", ret);
	ret = uffdm_region_adopt_state(mine, dup(uffdm_region_state_fd(r)), ps->state_flags);
	if (ret)
		server_exit("uffdm_region_adopt_state", ret);
	ret = uffdm_handler_start(&h, u, mine, &cfg);
	if (ret)
		server_exit("uffdm_handler_start", ret);
	if (read(ctl, &c, 1) < 0)	/* quit */
		_exit(3);
	_exit(uffdm_handler_stop(h, NULL) ? 4 : 0);
}

pid_t page_server_fork(struct uffdm *vmm, struct uffdm_region *r, const struct page_server *ps,
		       int *ctl)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		/* a failed assertion must not leave a stopped server holding our output */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[1]);
		run_server(vmm, r, ps, p[0]);
	}
	close(p[0]);
	*ctl = p[1];
	return pid;
}

void page_server_go(int ctl)
{
	assert_int_equal(write(ctl, "g", 1), 1);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/* Cells in forked children, watched for silence: cells.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "cells.h"

/* ---- the child ---------------------------------------------------------- */

static int report_fd = -1;

void cell_say(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(report_fd, buf, (size_t)n) < 0)
		_exit(3);
}

static __thread sigjmp_buf *bus_jmp;

static void on_sigbus(int sig)
{
	if (bus_jmp)
		siglongjmp(*bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

void cells_catch_sigbus(void)
{
	signal(SIGBUS, on_sigbus);
	signal(SIGSEGV, SIG_DFL);	/* cmocka's handler is the parent's business */
}

int touch(volatile char *p, bool wr, char *got)
{
	sigjmp_buf jb;
	int bus = 1;

	bus_jmp = &jb;
	/* atomic: threads race on the byte on purpose (TSan would say so) */
	if (!sigsetjmp(jb, 1)) {
		char c = 'W';

		if (wr)
			__atomic_store_n(p, c, __ATOMIC_RELAXED);
		else
			c = __atomic_load_n(p, __ATOMIC_RELAXED);
		if (got)
			*got = c;
		bus = 0;
	}
	bus_jmp = NULL;
	return bus;
}

static void *touch_thread(void *arg)
{
	struct toucher *t = arg;

	t->sigbus = touch(t->p, t->wr, &t->got);
	return NULL;
}

void start_touch(struct toucher *t, volatile char *p, bool wr)
{
	*t = (struct toucher){ .p = p, .wr = wr };
	if (pthread_create(&t->tid, NULL, touch_thread, t))
		_exit(3);
}

int join_touch(struct toucher *t, unsigned int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	return pthread_timedjoin_np(t->tid, NULL, &ts) ? -ETIMEDOUT : 0;
}

/* ---- the parent --------------------------------------------------------- */

struct running {
	pid_t pid;
	int fd;
	size_t cell;
	time_t heard;
	char last[256];
	size_t len;
};

static void spawn(struct running *rn, const void *cell, size_t i, int (*run)(const void *))
{
	int p[2];

	if (pipe(p))
		fail_msg("pipe: %s", strerror(errno));
	fflush(NULL);
	rn->pid = fork();
	if (rn->pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (!rn->pid) {
		close(p[0]);
		report_fd = p[1];
		cells_catch_sigbus();
		_exit(run(cell));
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	rn->fd = p[0];
	rn->cell = i;
	rn->heard = time(NULL);
	rn->len = 0;
	strcpy(rn->last, "phase start");
}

/* Keep the last whole line; 1 at end of file. */
static int drain(struct running *rn)
{
	char buf[512];
	ssize_t n = read(rn->fd, buf, sizeof(buf));

	if (n == 0)
		return 1;
	if (n < 0)
		return 0;
	rn->heard = time(NULL);
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			rn->last[rn->len] = 0;
			rn->len = 0;
		} else if (rn->len < sizeof(rn->last) - 1) {
			if (!rn->len)
				rn->last[0] = 0;
			rn->last[rn->len++] = buf[i];
		}
	}
	return 0;
}

static void finish(struct running *rn, struct verdict *v, bool silent)
{
	int st = 0;

	if (silent)
		kill(rn->pid, SIGKILL);
	waitpid(rn->pid, &st, 0);
	close(rn->fd);
	if (silent)
		snprintf(v->text, sizeof(v->text), "FAIL no progress for %d s (%s)", CELL_SILENCE_S,
			 rn->last);
	else if (WIFSIGNALED(st))
		snprintf(v->text, sizeof(v->text), "FAIL killed by signal %d (%s)", WTERMSIG(st),
			 rn->last);
	else if (!strncmp(rn->last, "PASS", 4) || !strncmp(rn->last, "SKIP", 4) ||
		 !strncmp(rn->last, "FAIL", 4))
		snprintf(v->text, sizeof(v->text), "%s", rn->last);
	else
		snprintf(v->text, sizeof(v->text), "FAIL exit %d (%s)", WEXITSTATUS(st), rn->last);
	v->fail = !strncmp(v->text, "FAIL", 4);
	v->skip = !strncmp(v->text, "SKIP", 4);
	rn->pid = 0;
}

void cells_run(const void *cells, size_t size, size_t n, int (*run)(const void *cell),
	       unsigned int parallel, struct verdict *v)
{
	struct running *rn = calloc(parallel, sizeof(*rn));
	struct pollfd *pfd = calloc(parallel, sizeof(*pfd));
	size_t next = 0, done = 0;

	if (!rn || !pfd)
		fail_msg("out of memory");
	while (done < n) {
		for (unsigned int s = 0; s < parallel; s++) {
			if (!rn[s].pid && next < n) {
				spawn(&rn[s], (const char *)cells + next * size, next, run);
				next++;
			}
			pfd[s] = (struct pollfd){ .fd = rn[s].pid ? rn[s].fd : -1, .events = POLLIN };
		}
		poll(pfd, parallel, 1000);
		for (unsigned int s = 0; s < parallel; s++) {
			if (!rn[s].pid)
				continue;
			if (drain(&rn[s])) {
				finish(&rn[s], &v[rn[s].cell], false);
				done++;
			} else if (time(NULL) - rn[s].heard > CELL_SILENCE_S) {
				finish(&rn[s], &v[rn[s].cell], true);
				done++;
			}
		}
	}
	free(pfd);
	free(rn);
}

void cells_report(const char *mem, size_t n, const struct verdict *v)
{
	size_t failed = 0, skipped = 0;

	for (size_t i = 0; i < n; i++) {
		print_message("# %-8s %-48s %s\n", mem, v[i].name, v[i].text);
		failed += v[i].fail;
		skipped += v[i].skip;
	}
	print_message("# %s: %zu cells, %zu failed, %zu skipped\n", mem, n, failed, skipped);
	if (failed)
		fail_msg("%zu of %zu cells failed (table above)", failed, n);
}

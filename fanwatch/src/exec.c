// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * --exec: collect the changed paths, wait until the tree has been quiet
 * for --settle ms, run the command once with them; at most one run at a
 * time, changes during a run queue one more (or restart it with
 * --restart).  A command that changes files it watches would loop.  The
 * listener is not told which process made a change (an unprivileged
 * group gets pid 0 for others' events), so a rerun is not started when
 * every path that changed during a run also changed during the run before
 * (the command rewrites the same files), nor after MAX_CHAIN runs in a
 * row that only changes made during the run before had started (it makes
 * new names each time: timestamped files, temporaries renamed into
 * place); that is said once, naming a path to put in --ignore-file.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include "exec.h"
#include "watch.h"

#define MAX_ARGS 1000			/* beyond: FANWATCH_PATHS_DROPPED */
#define MAX_CHAIN 2			/* self-started reruns in a row */

struct pathset {
	char **v;
	size_t n, cap;
};

static struct {
	struct fw_exec_opts o;
	int sigfd;
	pid_t child;			/* 0: none running */
	int64_t last_event;		/* ms, when a change last came */
	int64_t kill_at;		/* --restart/stop: SIGKILL after SIGTERM */
	struct pathset todo;		/* changes for the next run */
	struct pathset during, prev;	/* changed while this / the last run ran */
	bool due;			/* a run is wanted */
	bool idle_change;		/* a change came while nothing ran */
	unsigned int chain;		/* runs in a row started only by changes
					 * made during the run before */
	bool exited;			/* reaped; its last events not yet read */
	int status;
	bool warned_loop;
	int stop;			/* status to end with, +1; 0 = go on */
} X;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool set_has(const struct pathset *s, const char *p)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], p))
			return true;
	return false;
}

static void set_add(struct pathset *s, const char *p)
{
	if (s->n > 4 * MAX_ARGS || set_has(s, p))
		return;
	if (s->n == s->cap) {
		char **nv = realloc(s->v, (s->cap = s->cap ? 2 * s->cap : 64) * sizeof(*nv));

		if (!nv)
			return;
		s->v = nv;
	}
	if ((s->v[s->n] = strdup(p)))
		s->n++;
}

static void set_clear(struct pathset *s)
{
	while (s->n)
		free(s->v[--s->n]);
}

static void add_path(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s%s", dir, name) < 0)
		return;
	set_add(&X.todo, p);
	if (X.child)
		set_add(&X.during, p);
	else
		X.idle_change = true;
	free(p);
	X.due = true;
	X.last_event = now_ms();
}

static void exec_sink(struct fw_ctx *c, const struct fw_out *e)
{
	(void)c;
	if (e->mask & FW_Q_OVERFLOW) {
		X.due = true;	/* something changed; what is unknown */
		X.last_event = now_ms();
		return;
	}
	add_path(e->dir, e->name);
	if (e->odir)
		add_path(e->odir, e->oname);
	if (X.child && !X.exited && X.o.restart && !X.kill_at) {
		kill(-X.child, SIGTERM);
		X.kill_at = now_ms() + 2000;
	}
}

static void start(struct fw_ctx *c)
{
	size_t n = X.todo.n, len = 0, i;
	bool dropped = n > MAX_ARGS;
	char **argv = calloc(n + 5, sizeof(*argv)), *env;
	pid_t pid;

	if (!argv)
		return;
	for (i = 0; i < n; i++)
		len += strlen(X.todo.v[i]) + 1;
	env = malloc(len + 1);
	if (!env) {
		free(argv);
		return;
	}
	env[0] = '\0';
	for (i = 0, len = 0; i < n; i++) {
		size_t l = strlen(X.todo.v[i]);

		memcpy(env + len, X.todo.v[i], l);
		env[len + l] = '\n';
		len += l + 1;
	}
	env[len ? len - 1 : 0] = '\0';
	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = (char *)X.o.cmd;
	argv[3] = "fanwatch";
	for (i = 0; i < n && !dropped; i++)
		argv[4 + i] = X.todo.v[i];
	fflush(c->o->out);
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setpgid(0, 0);
		setenv("FANWATCH_PATHS", dropped ? "" : env, 1);
		if (dropped)
			setenv("FANWATCH_PATHS_DROPPED", "1", 1);
		else
			unsetenv("FANWATCH_PATHS_DROPPED");
		execv("/bin/sh", argv);
		_exit(127);
	}
	free(argv);
	free(env);
	if (pid < 0) {
		fw_err("--exec: cannot fork: %s", strerror(errno));
		return;
	}
	setpgid(pid, pid);
	X.child = pid;
	X.chain = X.idle_change ? 0 : X.chain + 1;
	X.idle_change = false;
	X.kill_at = 0;
	X.due = false;
	set_clear(&X.todo);
	set_clear(&X.during);
}

/* Once: the command seems to change what it watches; which path, and why. */
static void warn_loop(struct fw_ctx *c, bool same_paths)
{
	if (same_paths)
		fw_warn(c, "--exec: the command itself changes %s (it changed during two runs in a row); not rerunning for it: add it to --ignore-file",
			X.during.v[0]);
	else
		fw_warn(c, "--exec: the command itself changes what it watches, e.g. %s (changes made while it ran started %u runs in a row); not rerunning for them: add its outputs to --ignore-file",
			X.during.v[0], MAX_CHAIN);
}

/* The run ended: the exit status policy, and the feedback-loop guard. */
static void ended(struct fw_ctx *c, int st)
{
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	bool killed = X.kill_at != 0;
	size_t i, own = 0;

	X.child = 0;
	X.exited = false;
	X.kill_at = 0;
	if (code == 126 || code == 127) {
		fw_err("--exec: '%s' could not be run (exit %d: %s); check the command",
		       X.o.cmd, code, code == 127 ? "command not found" : "not executable");
		X.stop = 1 + 1;
		return;
	}
	if (code && !killed) {
		fw_warn(c, "--exec: '%s' exited with status %d", X.o.cmd, code);
		if (X.o.exit_on_fail) {
			X.stop = code + 1;
			return;
		}
	}
	for (i = 0; i < X.during.n; i++)
		own += set_has(&X.prev, X.during.v[i]);
	if (X.during.n && !killed && (own == X.during.n || X.chain >= MAX_CHAIN)) {
		if (!X.warned_loop)
			warn_loop(c, own == X.during.n);
		X.warned_loop = true;
		X.due = false;
		set_clear(&X.todo);
	}
	/* Remember what changed during this run, for the next one. */
	set_clear(&X.prev);
	for (i = 0; i < X.during.n; i++)
		set_add(&X.prev, X.during.v[i]);
	set_clear(&X.during);
}

static void on_signal(struct fw_ctx *c)
{
	struct signalfd_siginfo si;
	int st;
	pid_t p;

	while (read(X.sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
			if (X.child)
				kill(-X.child, SIGTERM);
			X.stop = 1;	/* a normal end, status 0 */
		}
	}
	(void)c;
	/*
	 * The run's own writes are queued already but not read: they are read
	 * before the next tick, which then judges the run (ended()).
	 */
	if (X.child && !X.exited && (p = waitpid(X.child, &st, WNOHANG)) == X.child) {
		X.exited = true;
		X.status = st;
	}
}

static int64_t deadline(struct fw_ctx *c, int64_t now)
{
	int64_t d = -1;

	(void)c;
	if (X.exited)
		return 0;
	if (X.due && !X.child) {
		d = X.last_event + X.o.settle_ms - now;
		d = d < 0 ? 0 : d;
	}
	if (X.kill_at) {
		int64_t k = X.kill_at - now;

		k = k < 0 ? 0 : k;
		d = d < 0 || k < d ? k : d;
	}
	return d;
}

static int tick(struct fw_ctx *c, int64_t now)
{
	if (X.exited)
		ended(c, X.status);
	if (X.kill_at && now >= X.kill_at && X.child && !X.exited) {
		kill(-X.child, SIGKILL);
		X.kill_at = now + 1000000;
	}
	if (X.stop) {
		int st;

		if (X.child && !X.exited) {	/* leave no command behind */
			static const struct timespec ms10 = { 0, 10000000 };
			int i;

			kill(-X.child, SIGTERM);
			for (i = 0; i < 200 && waitpid(X.child, &st, WNOHANG) == 0; i++)
				nanosleep(&ms10, NULL);
			kill(-X.child, SIGKILL);
			waitpid(X.child, &st, WNOHANG);
		}
		return X.stop - 1 ? X.stop - 1 : -1;
	}
	if (X.due && !X.child && now - X.last_event >= X.o.settle_ms)
		start(c);
	return 0;
}

int fw_exec_setup(struct fw_ctx *c, const struct fw_exec_opts *eo)
{
	sigset_t set;

	memset(&X, 0, sizeof(X));
	X.o = *eo;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	X.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (X.sigfd < 0) {
		fw_err("--exec: signalfd: %s", strerror(errno));
		return -1;
	}
	c->sink = exec_sink;
	c->hooks.fd = X.sigfd;
	c->hooks.on_fd = on_signal;
	c->hooks.deadline = deadline;
	c->hooks.tick = tick;
	X.due = !eo->postpone;
	X.idle_change = true;		/* the first run is the user's */
	X.last_event = now_ms() - eo->settle_ms;
	return 0;
}

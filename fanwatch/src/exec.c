// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * --exec: collect the changed paths, wait until the tree has been quiet
 * for --settle ms, run the command once with them; at most one run at a
 * time, changes during a run queue one more (or restart it with
 * --restart).
 *
 * A command that changes files it watches would loop.  The kernel does
 * not say who made a change (an unprivileged listener gets pid 0 for
 * every process but itself), so the command's writes cannot be told from
 * the user's by the event.  They are told by their result.  While a run
 * runs, each path is fingerprinted (whether it exists, its type, size and
 * a hash of its bytes) when an event saying a change is complete (a
 * close after writing, a rename, a creation or removal; not a bare
 * MODIFY, which may be a write half done) is read, and once more when
 * the run ends.  The run may have read any of those versions; it has seen
 * the final one only if none of them differs from it.  So a change is the
 * command's own, and starts no run, when the path was created during the
 * run and is gone again (a temporary), or when every version seen during
 * the run is one it had when the last run that changed it ended, or one
 * seen during that run (the same bytes written again, and the same steps
 * towards them).  Anything else (an edit, an edit undone before the run
 * ended: v2, v3, v2) starts one more run.  A change made while no run
 * runs forgets what the path held, so the next run's writes to it are
 * judged afresh.  What this cannot tell: an edit and its undo both read
 * late (the same millisecond), or the very steps the run before also saw.
 * A command whose output differs every time (a timestamp) is never at a
 * fixed point, and its writes look like a user saving during every run:
 * after MAX_CHAIN runs in a row started only by changes made during the
 * run before, the next such run waits twice as long as the last (up to
 * MAX_BACKOFF ms), with one warning naming a path; it still runs.  A
 * change made while no command runs ends the back-off.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "exec.h"
#include "watch.h"

#define MAX_ARGS 1000			/* beyond: FANWATCH_PATHS_DROPPED */
#define MAX_CHAIN 8			/* chained runs before backing off */
#define MAX_BACKOFF 30000		/* ms */
#define HASH_MAX (16 << 20)		/* bytes hashed; beyond, size and mtime */
#define NSEEN 4				/* versions remembered a path and run */

/* What a path held when a run ended: all zero if it did not exist. */
struct fprint {
	uint64_t hash;
	off_t size;
	mode_t type;
};

/* The versions of a path seen during one run, and the one it ended with. */
struct trail {
	struct fprint end;		/* X.last only */
	struct fprint seen[NSEEN];
	unsigned int nseen;
	bool many;			/* more than NSEEN distinct ones */
	bool born;			/* X.during: its first event a creation */
};

struct pathset {
	char **v;
	struct trail *t;		/* per path, for X.during and X.last */
	size_t n, cap;
};

static struct {
	struct fw_exec_opts o;
	int sigfd;
	pid_t child;			/* 0: none running */
	int64_t last_event;		/* ms, when a change last came */
	int64_t kill_at;		/* --restart/stop: SIGKILL after SIGTERM */
	struct pathset todo;		/* changes for the next run */
	struct pathset during;		/* changed while this run runs */
	struct pathset last;		/* fingerprints left by the runs */
	bool due;			/* a run is wanted */
	bool idle_change;		/* a change came while nothing ran */
	unsigned int chain;		/* runs in a row started only by changes
					 * made during the run before */
	int64_t backoff;		/* ms added to the settle time */
	bool exited;			/* reaped; its last events not yet read */
	bool stopping;			/* we ended it (Ctrl-C, SIGTERM, SIGHUP) */
	int status;
	bool warned_loop;
	bool lost;			/* the queue overflowed during this run */
	int stop;			/* status to end with, +1; 0 = go on */
} X;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Index of p in s, or -1. */
static long set_find(const struct pathset *s, const char *p)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], p))
			return (long)i;
	return -1;
}

/* Index of p, added if new; -1 if it cannot be. */
static long set_add(struct pathset *s, const char *p)
{
	long i = set_find(s, p);

	if (i >= 0 || s->n > 4 * MAX_ARGS)
		return i;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		char **nv = realloc(s->v, cap * sizeof(*nv));
		struct trail *nt;

		if (nv)
			s->v = nv;
		nt = realloc(s->t, cap * sizeof(*nt));
		if (nt)
			s->t = nt;
		if (!nv || !nt)
			return -1;
		s->cap = cap;
	}
	if (!(s->v[s->n] = strdup(p)))
		return -1;
	memset(&s->t[s->n], 0, sizeof(s->t[0]));
	return (long)s->n++;
}

/* Drop entry i (order is not kept). */
static void set_del(struct pathset *s, size_t i)
{
	free(s->v[i]);
	s->n--;
	s->v[i] = s->v[s->n];
	s->t[i] = s->t[s->n];
}

static void set_clear(struct pathset *s)
{
	while (s->n)
		free(s->v[--s->n]);
}

/* What path holds now; see the top of this file. */
static struct fprint fingerprint(const char *path)
{
	struct fprint f = { 0 };
	unsigned char buf[65536];
	struct stat st;
	off_t done = 0;
	ssize_t n;
	int fd;

	if (lstat(path, &st))
		return f;
	f.type = st.st_mode & S_IFMT;
	f.size = st.st_size;
	f.hash = 1469598103934665603ull;	/* FNV-1a */
	if (!S_ISREG(st.st_mode) || st.st_size > HASH_MAX ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
		/* Not hashed: its times stand in (any write changes them). */
		f.hash ^= (uint64_t)st.st_mtim.tv_sec * 1000000000ull + st.st_mtim.tv_nsec;
		f.hash ^= (uint64_t)st.st_ino << 17;
		return f;
	}
	while (done < HASH_MAX && (n = read(fd, buf, sizeof(buf))) > 0) {
		ssize_t i;

		for (i = 0; i < n; i++)
			f.hash = (f.hash ^ buf[i]) * 1099511628211ull;
		done += n;
	}
	close(fd);
	return f;
}

static bool same_print(const struct fprint *a, const struct fprint *b)
{
	return a->hash == b->hash && a->size == b->size && a->type == b->type;
}

/* Add f to the versions t saw, unless there already. */
static void saw(struct trail *t, const struct fprint *f)
{
	unsigned int i;

	for (i = 0; i < t->nseen; i++)
		if (same_print(&t->seen[i], f))
			return;
	if (t->nseen < NSEEN)
		t->seen[t->nseen++] = *f;
	else
		t->many = true;
}

/*
 * A change to dir/name; complete (not a bare MODIFY) says the version
 * there now is one a run may read.
 */
static void add_path(const char *dir, const char *name, bool created, bool complete)
{
	size_t n = X.during.n;
	long i;
	char *p;

	if (asprintf(&p, "%s%s", dir, name) < 0)
		return;
	set_add(&X.todo, p);
	if (X.child) {
		i = set_add(&X.during, p);
		if (i >= 0 && (size_t)i == n)	/* its first change in this run */
			X.during.t[i].born = created;
		if (i >= 0 && complete) {
			struct fprint now = fingerprint(p);

			saw(&X.during.t[i], &now);
		}
	} else {
		X.idle_change = true;
		X.backoff = 0;	/* the user's: no more waiting */
		/* Someone else's version: the command's next writes are news. */
		i = set_find(&X.last, p);
		if (i >= 0)
			set_del(&X.last, i);
	}
	free(p);
	X.due = true;
	X.last_event = now_ms();
}

/*
 * Signal the run's session (its process group): until the child has made
 * it (just after fork), the child alone.
 */
static void kill_run(int sig)
{
	if (kill(-X.child, sig) && errno == ESRCH)
		kill(X.child, sig);
}

static void exec_sink(struct fw_ctx *c, const struct fw_out *e)
{
	(void)c;
	if (e->mask & FW_Q_OVERFLOW) {
		X.due = true;	/* something changed; what is unknown */
		X.lost |= X.child != 0;
		X.last_event = now_ms();
		return;
	}
	add_path(e->dir, e->name, e->mask & (FW_CREATE | FW_MOVED_TO),
		 e->mask & ~FW_MODIFY);
	if (e->odir)
		add_path(e->odir, e->oname, false, true);
	if (X.child && !X.exited && X.o.restart && !X.kill_at) {
		kill_run(SIGTERM);
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

		int null = open("/dev/null", O_RDONLY);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGTTOU, SIG_DFL);	/* ignored by fanwatch only */
		signal(SIGTTIN, SIG_DFL);
		/*
		 * Its own session, so its own process group (--restart stops
		 * all of it) and no controlling terminal: nothing in it is
		 * ever stopped by the terminal (SIGTTOU when it prints with
		 * stty tostop or sets modes, SIGTTIN when it reads), which
		 * would hang the run, as a background job it would be.  Its
		 * output still reaches the terminal; /dev/tty cannot be
		 * opened (ENXIO); its stdin is /dev/null.
		 */
		setsid();
		if (null >= 0 && null != 0) {
			dup2(null, 0);
			close(null);
		}
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
	X.child = pid;
	X.chain = X.idle_change ? 0 : X.chain + 1;
	X.idle_change = false;
	X.kill_at = 0;
	X.stopping = false;
	X.due = false;
	set_clear(&X.todo);
	set_clear(&X.during);
}

/* Is every version in t (and now) one that l saw or ended with? */
static bool seen_before(const struct trail *t, const struct fprint *now,
			const struct trail *l)
{
	unsigned int i, k;
	bool known;

	if (t->many || l->many)
		return false;
	for (i = 0; i <= t->nseen; i++) {
		const struct fprint *f = i < t->nseen ? &t->seen[i] : now;

		known = same_print(f, &l->end);
		for (k = 0; k < l->nseen && !known; k++)
			known = same_print(f, &l->seen[k]);
		if (!known)
			return false;
	}
	return true;
}

/*
 * The run ended: drop from the next run's paths those the command itself
 * changed, as the fingerprints tell; is any change left?
 */
static bool judge_changes(void)
{
	size_t i;
	bool left = false;

	for (i = 0; i < X.during.n; i++) {
		const char *p = X.during.v[i];
		struct trail *t = &X.during.t[i];
		struct fprint now = fingerprint(p);
		long j = set_find(&X.last, p), k;
		bool own = (t->born && !now.type) ||
			   (j >= 0 && seen_before(t, &now, &X.last.t[j]));

		if (own && (k = set_find(&X.todo, p)) >= 0)
			set_del(&X.todo, k);
		left |= !own;
		if (j < 0)
			j = set_add(&X.last, p);
		if (j >= 0) {
			X.last.t[j] = *t;
			X.last.t[j].end = now;
		}
	}
	/* Paths beyond what is remembered: unknown, so not the command's. */
	return (left && X.todo.n) || X.during.n > 4 * MAX_ARGS;
}

/* A command that keeps changing what it watches: wait longer each time. */
static void back_off(struct fw_ctx *c)
{
	if (X.chain < MAX_CHAIN || !X.due)
		return;
	X.backoff = X.backoff ? 2 * X.backoff : X.o.settle_ms + 100;
	if (X.backoff > MAX_BACKOFF)
		X.backoff = MAX_BACKOFF;
	if (!X.warned_loop && X.during.n)
		fw_warn(c, "--exec: changes made while the command ran, with different bytes each time (e.g. %s), started %u runs in a row; each such run now waits longer (%lld ms, doubling); if the command writes them itself, add them to .gitignore or --ignore-file",
			X.during.v[0], X.chain + 1, (long long)X.backoff);
	X.warned_loop = true;
}

/* The run ended: the exit status policy, and the feedback-loop guard. */
static void ended(struct fw_ctx *c, int st)
{
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	bool killed = X.kill_at != 0 || X.stopping;

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
	if (X.during.n && !killed && !X.lost) {
		X.due = judge_changes();
		back_off(c);
	}
	X.lost = false;
	set_clear(&X.during);
}

static void on_signal(struct fw_ctx *c)
{
	struct signalfd_siginfo si;
	int st;
	pid_t p;

	(void)c;
	while (read(X.sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM ||
		    si.ssi_signo == SIGHUP) {
			if (X.child)
				kill_run(SIGTERM);
			X.stopping = true;	/* its status is ours, not news */
			X.stop = 1;	/* a normal end, status 0 */
		}
	}
	/*
	 * The run's own writes are queued already but not read: they are read
	 * before the next tick, which then judges the run (ended()).
	 */
	if (X.child && !X.exited &&
	    (p = waitpid(X.child, &st, WNOHANG | WUNTRACED)) == X.child) {
		/*
		 * Stopped: not by the terminal, which the run does not have,
		 * so by someone's signal; fanwatch waits for no stopped run.
		 */
		if (WIFSTOPPED(st)) {
			kill_run(SIGCONT);
			return;
		}
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
		d = X.last_event + X.o.settle_ms + X.backoff - now;
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
		kill_run(SIGKILL);
		X.kill_at = now + 1000000;
	}
	if (X.stop) {
		int st;

		if (X.child && !X.exited) {	/* leave no command behind */
			static const struct timespec ms10 = { 0, 10000000 };
			int i;

			kill_run(SIGTERM);
			for (i = 0; i < 200 && waitpid(X.child, &st, WNOHANG) == 0; i++)
				nanosleep(&ms10, NULL);
			kill_run(SIGKILL);
			waitpid(X.child, &st, WNOHANG);
		}
		return X.stop - 1 ? X.stop - 1 : -1;
	}
	if (X.due && !X.child && now - X.last_event >= X.o.settle_ms + X.backoff)
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
	sigaddset(&set, SIGHUP);	/* the terminal closed: as SIGTERM */
	sigprocmask(SIG_BLOCK, &set, NULL);
	X.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (X.sigfd < 0) {
		fw_err("--exec: signalfd: %s", strerror(errno));
		return -1;
	}
	/*
	 * Never stopped by the terminal: fanwatch reads none, and its
	 * messages, printed as a background job under stty tostop, must
	 * not stop it with runs to do.  The command gets the defaults back
	 * (see start()).
	 */
	signal(SIGTTOU, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
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

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The model-based differential test (issue 34): random sequences of VFS
 * operations against fanwatch, run as a normal user.  For each sequence
 * the tree fw-rebuild makes from fanwatch's stream must equal the tree on
 * disk, path by path, unless the stream itself said events were lost
 * (Q_OVERFLOW without --rescan-on-overflow).  Never silence.
 *
 *   fw-model FANWATCH FW_REBUILD [DIR] [--seconds N] [--seed S]
 *            [--ops N] [--case 'OP;OP;...'] [--no-literal] [--shrink-s N]
 *
 * Without --seconds: the literal cases below (each a shrunk reproducer of
 * something the generator found) and a few fixed seeds, in a few seconds
 * (and one random seed with FW_MODEL_RANDOM=1 in the environment).  With --seconds N: seeds from a random start until N
 * seconds have passed.  Run as root without DIR, it drops to uid 65534 in
 * a private directory on a tmpfs; run-rebuild.sh hands it a directory on
 * ext4, xfs or btrfs.  A failing sequence is printed with its seed, then
 * shrunk (delta debugging, each candidate replayed up to three times since
 * timing matters) to a minimal reproducer printed in the --case syntax.
 * Output is TAP.  Exit: 0 pass, 1 fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#define RENAME_WHITEOUT (1 << 2)
#endif
#define NOBODY 65534
#define STILL_MS 20000		/* a stream that stops growing this long is stuck */
#define CHAIN_MAX 60		/* levels of one chain op: paths stay below PATH_MAX */

/*
 * The operation set.  Paths are relative to the case directory: "w/..."
 * is watched, "o/..." is outside.  Config ops come first and pick how
 * fanwatch runs; START spawns it (the ops before it build the initial
 * tree); STOP/CONT freeze it so events are read late.
 */
enum kind {
	K_CREATE, K_WRITE, K_MKDIR, K_RMDIR, K_UNLINK, K_LINK, K_SYMLINK,
	K_RENAME, K_EXCHANGE, K_NOREPLACE, K_WHITEOUT, K_MOVEIN, K_MOVEOUT,
	K_FLIP, K_CHAIN, K_TREE, K_BURST, K_RMTREE, K_STOP, K_CONT, K_PAUSE,
	K_START, K_EARLY, K_RESCAN, K_UNPAIRED, K_FDCACHE, NKIND
};

static const char *const kname[NKIND] = {
	"create", "write", "mkdir", "rmdir", "unlink", "link", "symlink",
	"rename", "exchange", "noreplace", "whiteout", "movein", "moveout",
	"flip", "chain", "tree", "burst", "rmtree", "stop", "cont", "pause",
	"start", "early", "rescan", "unpaired", "fdcache",
};

struct op {
	enum kind k;
	char a[200], b[200];
	int n;
};

struct seq {
	struct op *v;
	size_t n, cap;
};

static const char *fanwatch, *rebuild;
static char base[4096];
static unsigned int nrun;
static unsigned long whiteout_eperm, burst_n;

/* ---- random numbers (xorshift64*), reproducible from the seed ---- */

static uint64_t rs;

static uint64_t rnd(void)
{
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 2685821657736338717ull;
}

static unsigned int pick(unsigned int n)
{
	return n ? rnd() % n : 0;
}

static void die(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static void push(struct seq *s, const struct op *o)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			die("realloc");
	}
	s->v[s->n++] = *o;
}

/* ---- the truth: listing, as find -printf '%P' with a '/' on directories ---- */

struct list {
	char **p;
	size_t n, cap;
};

static struct list *cur_list;
static size_t strip;

static void list_add(struct list *l, const char *p)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->p = realloc(l->p, l->cap * sizeof(*l->p));
		if (!l->p)
			die("realloc");
	}
	l->p[l->n++] = strdup(p);
}

static void list_free(struct list *l)
{
	while (l->n)
		free(l->p[--l->n]);
	free(l->p);
	l->p = NULL;
	l->cap = 0;
}

static int list_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	char buf[4200];

	(void)st;
	if (!f->level)
		return 0;
	snprintf(buf, sizeof(buf), "%s%s", p + strip, type == FTW_D ? "/" : "");
	list_add(cur_list, buf);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* An empty list has no array, and qsort(NULL, 0) is undefined. */
static void sort_list(struct list *l)
{
	if (l->n)
		qsort(l->p, l->n, sizeof(*l->p), cmp);
}

static void listing(const char *dir, struct list *l)
{
	cur_list = l;
	strip = strlen(dir) + 1;
	nftw(dir, list_one, 64, FTW_PHYS);
	sort_list(l);
}

static int write_list(const char *file, const struct list *l)
{
	FILE *f = fopen(file, "w");
	size_t i;

	if (!f)
		return -1;
	for (i = 0; i < l->n; i++)
		fwrite(l->p[i], strlen(l->p[i]) + 1, 1, f);
	return fclose(f);
}

static void read_list(const char *file, struct list *l)
{
	FILE *f = fopen(file, "r");
	char *rec = NULL;
	size_t n = 0;

	if (!f)
		return;
	while (getdelim(&rec, &n, '\0', f) > 0)
		list_add(l, rec);
	free(rec);
	fclose(f);
	sort_list(l);
}

/* ---- operand choice: what the watched tree holds now ---- */

struct cands {
	struct list dirs, files, empty;
};

static struct cands *cc;

/* Burst directories hold thousands of files: never pick inside them. */
static int cand_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	if (type == FTW_D || type == FTW_DNR) {
		list_add(&cc->dirs, p);
		if (f->level && !strncmp(p + f->base, "burst", 5))
			return FTW_SKIP_SUBTREE;
	} else {
		list_add(&cc->files, p);
	}
	return 0;
}

static bool is_empty_dir(const char *p)
{
	int fd = open(p, O_RDONLY | O_DIRECTORY);
	char buf[256];
	long n;

	if (fd < 0)
		return false;
	n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && n <= 48;	/* "." and ".." only */
}

static void candidates(struct cands *c)
{
	size_t i;

	cc = c;
	nftw("w", cand_one, 64, FTW_PHYS | FTW_ACTIONRETVAL);
	for (i = 1; i < c->dirs.n; i++)
		if (is_empty_dir(c->dirs.p[i]))
			list_add(&c->empty, c->dirs.p[i]);
}

static void cands_free(struct cands *c)
{
	list_free(&c->dirs);
	list_free(&c->files);
	list_free(&c->empty);
}

/* Few names, so they collide: reused names are where watchers go wrong. */
static void new_name(char *out, size_t sz, const struct cands *c, const char *recent)
{
	static const char *const names[] = { "a", "b", "c", "d", "x", "y" };
	const char *d = recent[0] && pick(3) == 0 ? recent : c->dirs.p[pick(c->dirs.n)];

	snprintf(out, sz, "%s/%s", d, names[pick(6)]);
}

static const char *any_entry(const struct cands *c)
{
	size_t nd = c->dirs.n - 1, n = nd + c->files.n;	/* not w itself */
	size_t i = pick(n);

	if (!n)
		return NULL;
	return i < nd ? c->dirs.p[i + 1] : c->files.p[i - nd];
}

/* ---- executing one operation on the truth ---- */

static pid_t fw_pid;
static bool stopped;
static char *slurp(const char *file, size_t *len);

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (type == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

static void rmtree(const char *p)
{
	nftw(p, rm_one, 64, FTW_DEPTH | FTW_PHYS);
}

static void touch(const char *p)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd >= 0)
		close(fd);
}

/* A populated tree at p: n directories in two levels, two files each. */
static void tree(const char *p, int n)
{
	char q[4200];
	int i;

	if (mkdir(p, 0755))
		return;
	for (i = 0; i < n; i++) {
		snprintf(q, sizeof(q), "%s/t%d", p, i % 4);
		mkdir(q, 0755);
		snprintf(q, sizeof(q), "%s/t%d/s%d", p, i % 4, i);
		mkdir(q, 0755);
		snprintf(q, sizeof(q), "%s/t%d/s%d/f", p, i % 4, i);
		touch(q);
		snprintf(q, sizeof(q), "%s/t%d/g%d", p, i % 4, i);
		touch(q);
	}
}

static void chain(const char *p, int n)
{
	char q[4200];
	size_t l;

	snprintf(q, sizeof(q), "%s", p);
	if (mkdir(q, 0755))
		return;
	while (n-- > 1 && (l = strlen(q)) + 3 < sizeof(q)) {
		memcpy(q + l, "/d", 3);
		if (mkdir(q, 0755))
			return;
	}
	strcat(q, "/end");
	touch(q);
}

static void burst(const char *p, int n)
{
	char q[4200];
	int i;

	if (mkdir(p, 0755) && errno != EEXIST)
		return;
	for (i = 0; i < n; i++) {
		snprintf(q, sizeof(q), "%s/%d", p, i);
		touch(q);
	}
}

static void rename2(const char *a, const char *b, unsigned int flags)
{
	if (syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, flags) && errno == EPERM &&
	    (flags & RENAME_WHITEOUT))
		whiteout_eperm++;
}

static void flip(const char *p)
{
	struct stat st;
	char q[4200];

	if (lstat(p, &st))
		return;
	if (S_ISDIR(st.st_mode)) {
		rmtree(p);
		touch(p);
	} else {
		unlink(p);
		mkdir(p, 0755);
		snprintf(q, sizeof(q), "%s/in", p);
		touch(q);
	}
}

static void signal_fw(int sig)
{
	if (fw_pid > 0)
		kill(fw_pid, sig);
	stopped = sig == SIGSTOP;
}

/*
 * During setup only a change in a directory fanwatch has marked can be
 * reported: one before the mark is what fanwatch's walk finds, the
 * starting state, as with inotifywait.  So until "Watches established",
 * an operation waits for the marks on the directories it changes (the
 * window between a directory's mark and its scan), read from fanwatch's
 * /proc/PID/fdinfo: "fanotify ino:HEX sdev:HEX ...".
 */
static bool established;

static bool is_marked(const struct stat *st)
{
	unsigned long want_dev = (major(st->st_dev) << 20) | minor(st->st_dev);
	char path[64], line[512];
	bool found = false;
	int fd;

	for (fd = 3; fd < 16 && !found; fd++) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)fw_pid, fd);
		if (!(f = fopen(path, "r")))
			continue;
		while (!found && fgets(line, sizeof(line), f)) {
			unsigned long ino, dev;

			found = sscanf(line, "fanotify ino:%lx sdev:%lx", &ino, &dev) == 2 &&
				ino == st->st_ino && dev == want_dev;
		}
		fclose(f);
	}
	return found;
}

static bool setup_over(void)
{
	size_t len;
	char *b;

	if (!established && (b = slurp("err", &len))) {
		established = memmem(b, len, "Watches established", 19);
		free(b);
	}
	return established;
}

static void wait_marked(const char *p)
{
	char dir[4200], *slash;
	struct stat st;
	int i;

	snprintf(dir, sizeof(dir), "%s", p);
	if (fw_pid <= 0 || stopped || strncmp(dir, "w/", 2) || !(slash = strrchr(dir, '/')))
		return;
	*slash = '\0';
	for (i = 0; i < 2000 && !setup_over(); i++) {
		if (stat(dir, &st) || !S_ISDIR(st.st_mode) || is_marked(&st))
			return;
		usleep(1000);
	}
}

static void exec_op(const struct op *o, int *outside)
{
	char q[4200];
	int fd;

	if (o->k < K_STOP) {
		wait_marked(o->a);
		wait_marked(o->b);
	}
	switch (o->k) {
	case K_CREATE: touch(o->a); break;
	case K_WRITE:
		fd = open(o->a, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			if (write(fd, "x", 1) < 0)
				break;
			close(fd);
		}
		break;
	case K_MKDIR: mkdir(o->a, 0755); break;
	case K_RMDIR: rmdir(o->a); break;
	case K_UNLINK: unlink(o->a); break;
	case K_LINK: link(o->a, o->b); break;
	case K_SYMLINK: if (symlink("target", o->a)) break; break;
	case K_RENAME: rename2(o->a, o->b, 0); break;
	case K_EXCHANGE: rename2(o->a, o->b, RENAME_EXCHANGE); break;
	case K_NOREPLACE: rename2(o->a, o->b, RENAME_NOREPLACE); break;
	case K_WHITEOUT: rename2(o->a, o->b, RENAME_WHITEOUT); break;
	case K_MOVEIN:
		snprintf(q, sizeof(q), "o/in%d", (*outside)++);
		tree(q, o->n);
		rename2(q, o->a, 0);
		break;
	case K_MOVEOUT:
		snprintf(q, sizeof(q), "o/out%d", (*outside)++);
		rename2(o->a, q, 0);
		break;
	case K_FLIP: flip(o->a); break;
	case K_CHAIN: chain(o->a, o->n); break;
	case K_TREE: tree(o->a, o->n); break;
	case K_BURST: burst(o->a, o->n); break;
	case K_RMTREE: rmtree(o->a); break;
	case K_STOP:
		/* stopped during setup, it would mark nothing: let it finish */
		for (fd = 0; fw_pid > 0 && fd < 20000 && !setup_over(); fd++)
			usleep(1000);
		signal_fw(SIGSTOP);
		break;
	case K_CONT: signal_fw(SIGCONT); break;
	case K_PAUSE: usleep(o->n * 1000); break;
	default: break;
	}
}

/* ---- drawing one operation from the current tree ---- */

static unsigned long max_queued(void)
{
	FILE *f = fopen("/proc/sys/fs/fanotify/max_queued_events", "r");
	unsigned long n = 16384;

	if (f) {
		if (fscanf(f, "%lu", &n) != 1)
			n = 16384;
		fclose(f);
	}
	return n;
}

static void draw(struct op *o, bool started, bool allow_burst, char *recent)
{
	struct cands c = { 0 };
	const char *e;
	unsigned int r;

	candidates(&c);
	memset(o, 0, sizeof(*o));
	r = pick(started ? 100 : 60);
	e = any_entry(&c);
	if (r < 10) {
		o->k = K_CREATE;
		new_name(o->a, sizeof(o->a), &c, recent);
	} else if (r < 20) {
		o->k = K_MKDIR;
		new_name(o->a, sizeof(o->a), &c, recent);
		snprintf(recent, sizeof(o->a), "%s", o->a);
	} else if (r < 24 && c.files.n) {
		o->k = K_WRITE;
		snprintf(o->a, sizeof(o->a), "%s", c.files.p[pick(c.files.n)]);
	} else if (r < 28 && c.empty.n) {
		o->k = K_RMDIR;
		snprintf(o->a, sizeof(o->a), "%s", c.empty.p[pick(c.empty.n)]);
	} else if (r < 32 && c.files.n) {
		o->k = K_UNLINK;
		snprintf(o->a, sizeof(o->a), "%s", c.files.p[pick(c.files.n)]);
	} else if (r < 35 && c.files.n) {
		o->k = K_LINK;
		snprintf(o->a, sizeof(o->a), "%s", c.files.p[pick(c.files.n)]);
		new_name(o->b, sizeof(o->b), &c, recent);
	} else if (r < 37) {
		o->k = K_SYMLINK;
		new_name(o->a, sizeof(o->a), &c, recent);
	} else if (r < 42) {
		o->k = K_MOVEIN;
		o->n = 1 + pick(6);
		new_name(o->a, sizeof(o->a), &c, recent);
	} else if (r < 45) {
		o->k = K_TREE;
		o->n = 1 + pick(started ? 8 : 40);
		new_name(o->a, sizeof(o->a), &c, recent);
	} else if (r < 47) {
		o->k = K_CHAIN;
		o->n = 2 + pick(CHAIN_MAX);
		new_name(o->a, sizeof(o->a), &c, recent);
	} else if (r < 60 && e) {
		/* renames: onto a new name, a file, an empty directory, or flags */
		unsigned int how = pick(7);

		o->k = (enum kind[]){ K_RENAME, K_RENAME, K_RENAME, K_EXCHANGE,
				      K_NOREPLACE, K_WHITEOUT, K_EXCHANGE }[how];
		snprintf(o->a, sizeof(o->a), "%s", e);
		if (how == 1 && c.files.n)
			snprintf(o->b, sizeof(o->b), "%s", c.files.p[pick(c.files.n)]);
		else if (how == 2 && c.empty.n)
			snprintf(o->b, sizeof(o->b), "%s", c.empty.p[pick(c.empty.n)]);
		else if (o->k == K_EXCHANGE && (e = any_entry(&c)))
			snprintf(o->b, sizeof(o->b), "%s", e);
		else
			new_name(o->b, sizeof(o->b), &c, recent);
	} else if (r < 66 && e) {
		o->k = K_RENAME;		/* into the directory made last */
		snprintf(o->a, sizeof(o->a), "%s", e);
		snprintf(o->b, sizeof(o->b), "%s/%s", recent[0] ? recent : "w", "m");
	} else if (r < 72 && c.dirs.n > 1) {
		o->k = pick(2) ? K_MOVEOUT : K_RMTREE;
		snprintf(o->a, sizeof(o->a), "%s", c.dirs.p[1 + pick(c.dirs.n - 1)]);
	} else if (r < 76 && e) {
		o->k = K_FLIP;
		snprintf(o->a, sizeof(o->a), "%s", e);
	} else if (r < 86) {
		o->k = stopped ? K_CONT : K_STOP;
	} else if (r < 90) {
		o->k = K_PAUSE;
		o->n = 1 + pick(30);
	} else if (r < 91 && allow_burst) {
		o->k = K_BURST;
		o->n = burst_n;
		new_name(o->a, sizeof(o->a), &c, recent);
		memcpy(strrchr(o->a, '/') + 1, "burst", 6);
	} else {
		o->k = K_CREATE;
		new_name(o->a, sizeof(o->a), &c, recent);
	}
	cands_free(&c);
}

/* ---- the literal syntax: "kind a b n;kind a;..." ---- */

static void print_seq(FILE *f, const struct seq *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		const struct op *o = &s->v[i];

		fprintf(f, "%s%s", i ? ";" : "", kname[o->k]);
		if (o->a[0])
			fprintf(f, " %s", o->a);
		if (o->b[0])
			fprintf(f, " %s", o->b);
		if (o->n)
			fprintf(f, " %d", o->n);
	}
}

static int parse_seq(const char *text, struct seq *s)
{
	char *copy = strdup(text), *save = NULL, *t;

	for (t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
		char w[4][200] = { { 0 } };
		struct op o = { 0 };
		int k, n = sscanf(t, " %199s %199s %199s %199s", w[0], w[1], w[2], w[3]), j;

		for (k = 0; k < NKIND && strcmp(kname[k], w[0]); k++)
			;
		if (n < 1 || k == NKIND) {
			printf("Bail out! --case: no operation '%s'\n", t);
			free(copy);
			return -1;
		}
		o.k = k;
		for (j = 1; j < n; j++) {
			char *end;
			long v = strtol(w[j], &end, 10);

			if (!*end)
				o.n = v;
			else if (!o.a[0])
				memcpy(o.a, w[j], sizeof(o.a));
			else
				memcpy(o.b, w[j], sizeof(o.b));
		}
		push(s, &o);
	}
	free(copy);
	return 0;
}

/* ---- one run: the truth, fanwatch, the rebuilt tree, the verdict ---- */

struct verdict {
	bool fail;
	char why[1024];
	size_t missing, invented, total;
	char first[2][256];
};

static bool has(const struct seq *s, enum kind k)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->v[i].k == k)
			return true;
	return false;
}

static void spawn_fw(const struct seq *s)
{
	const char *argv[24] = { fanwatch };
	int n = 1, fd;

	if (has(s, K_UNPAIRED))
		argv[n++] = "--unpaired-renames";
	if (has(s, K_RESCAN))
		argv[n++] = "--rescan-on-overflow";
	argv[n++] = "-m";
	argv[n++] = "-r";
	for (const char *const *e = (const char *const[]){ "create", "delete", "move",
							   "delete_self", NULL }; *e; e++) {
		argv[n++] = "-e";
		argv[n++] = *e;
	}
	argv[n++] = "--no-newline";
	argv[n++] = "--format";
	argv[n++] = "%e|%c|%w%f%0";
	argv[n++] = "w";
	argv[n] = NULL;
	fw_pid = fork();
	if (fw_pid < 0)
		die("fork");
	if (fw_pid)
		return;
	fd = open("stream", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	dup2(fd, 1);
	fd = open("err", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	dup2(fd, 2);
	if (has(s, K_FDCACHE))
		setenv("FANWATCH_FD_CACHE", "4", 1);
	execv(fanwatch, (char **)argv);
	_exit(127);
}

static char *slurp(const char *file, size_t *len)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;
	ssize_t n;

	*len = 0;
	if (fd < 0 || fstat(fd, &st) || !(buf = malloc(st.st_size + 1))) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	n = read(fd, buf, st.st_size);
	close(fd);
	*len = n > 0 ? n : 0;
	return buf;
}

/* Until FILE holds NEEDLE (len bytes): false once it stops growing, or fanwatch died. */
static bool wait_for_ms(const char *file, const char *needle, size_t nlen, int still_ms);

static bool wait_for(const char *file, const char *needle, size_t nlen)
{
	return wait_for_ms(file, needle, nlen, STILL_MS);
}

static bool wait_for_ms(const char *file, const char *needle, size_t nlen, int still_ms)
{
	long last = -1;
	int still = 0;

	for (;;) {
		size_t len;
		char *b = slurp(file, &len);
		bool found = b && memmem(b, len, needle, nlen);

		free(b);
		if (found)
			return true;
		if (waitpid(fw_pid, NULL, WNOHANG) == fw_pid) {
			fw_pid = -1;
			return false;
		}
		if ((long)len != last) {
			last = len;
			still = 0;
		} else if (++still * 5 > still_ms) {
			return false;
		}
		usleep(5000);
	}
}

/*
 * After an overflow, --rescan-on-overflow may report the end marker (as
 * SCAN) before its rescan is through: wait until the stream has not grown
 * for half a second.
 */
static void settle_after_overflow(void)
{
	size_t len, last = 0;
	int still = 0;
	char *b = slurp("stream", &len);
	bool ovf = b && memmem(b, len, "Q_OVERFLOW", 10);

	free(b);
	while (ovf && fw_pid > 0 && still < 100) {
		free(slurp("stream", &len));
		still = len == last ? still + 1 : 0;
		last = len;
		usleep(5000);
	}
}

static int run_rebuild(void)
{
	pid_t p = fork();
	int st;

	if (p < 0)
		die("fork");
	if (!p) {
		int in = open("stream", O_RDONLY), out = open("rebuilt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open("rebuild.err", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		execl(rebuild, rebuild, "w/", "initial", (char *)NULL);
		_exit(127);
	}
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void compare(const struct list *rebuilt, const struct list *found, struct verdict *v)
{
	size_t i = 0, j = 0;

	while (i < rebuilt->n || j < found->n) {
		int c = i == rebuilt->n ? 1 : j == found->n ? -1 : strcmp(rebuilt->p[i], found->p[j]);

		if (!c) {
			i++, j++;
		} else if (c < 0) {
			if (!v->invented++)
				snprintf(v->first[1], sizeof(v->first[1]), "%s", rebuilt->p[i]);
			i++;
		} else {
			if (!v->missing++)
				snprintf(v->first[0], sizeof(v->first[0]), "%s", found->p[j]);
			j++;
		}
	}
	v->total = found->n;
}

/*
 * The end marker's CREATE is lost if the queue is still full (overflowed)
 * when it is made: make it again while the stream stays still for 2 s,
 * up to 20 s of stillness in all.
 */
static bool end_marker(void)
{
	char name[32], needle[40];
	int i;

	for (i = 0; i < 10 && fw_pid > 0; i++) {
		snprintf(name, sizeof(name), "w/.fw-end%.0d", i);
		snprintf(needle, sizeof(needle), "|%s", name);
		touch(name);
		/* with its NUL: .fw-end is not .fw-end1 */
		if (wait_for_ms("stream", needle, strlen(needle) + 1, 2000))
			return true;
		unlink(name);
	}
	return false;
}

static void finish(const struct seq *s, struct verdict *v)
{
	struct list rebuilt = { 0 }, found = { 0 };
	int st = 0, rc;

	signal_fw(SIGCONT);
	/* The end marker must come after setup, or nothing reports it. */
	if (fw_pid > 0 && !wait_for("err", "Watches established", 19)) {
		snprintf(v->why, sizeof(v->why), "fanwatch never got ready");
		v->fail = true;
	}
	if (!end_marker()) {
		snprintf(v->why, sizeof(v->why), fw_pid < 0 ? "fanwatch died before the end marker" :
			 "the stream stopped before the end marker");
		v->fail = true;
	}
	settle_after_overflow();
	if (fw_pid > 0) {
		kill(fw_pid, SIGTERM);
		waitpid(fw_pid, &st, 0);
		if (WIFSIGNALED(st) && WTERMSIG(st) != SIGTERM) {
			snprintf(v->why, sizeof(v->why), "fanwatch killed by signal %d", WTERMSIG(st));
			v->fail = true;
		}
	}
	fw_pid = -1;
	rc = run_rebuild();
	read_list("rebuilt", &rebuilt);
	listing("w", &found);
	compare(&rebuilt, &found, v);
	list_free(&rebuilt);
	list_free(&found);
	if (rc == 3 && !has(s, K_RESCAN))
		return;		/* the stream said it lost events: allowed */
	if (rc != 0 && rc != 3 && !v->fail) {
		snprintf(v->why, sizeof(v->why), "fw-rebuild failed (%d)", rc);
		v->fail = true;
	}
	if ((v->missing || v->invented) && !v->fail) {
		snprintf(v->why, sizeof(v->why), "%zu of %zu paths missing (%s), %zu invented (%s)",
			 v->missing, v->total, v->first[0], v->invented, v->first[1]);
		v->fail = true;
	}
}

static void fresh_case_dir(void)
{
	char d[4200];

	snprintf(d, sizeof(d), "%s/run", base);
	if (chdir(base))
		die(base);
	rmtree("run");
	if (mkdir(d, 0755) || chdir(d) || mkdir("w", 0755) || mkdir("o", 0755))
		die(d);
}

static void start(const struct seq *s)
{
	struct list init = { 0 };

	listing("w", &init);
	write_list("initial", &init);
	list_free(&init);
	spawn_fw(s);
	if (!has(s, K_EARLY) && !wait_for("err", "Watches established", 19))
		signal_fw(SIGCONT);	/* finish() says it never got ready */
}

/* Replay a recorded sequence (shrinking, literal cases). */
static void replay(const struct seq *s, struct verdict *v)
{
	int outside = 0;
	size_t i;

	nrun++;
	memset(v, 0, sizeof(*v));
	fresh_case_dir();
	stopped = false;
	established = false;
	fw_pid = -1;
	for (i = 0; i < s->n; i++) {
		if (s->v[i].k == K_START)
			start(s);
		else
			exec_op(&s->v[i], &outside);
	}
	if (fw_pid < 0 && !has(s, K_START))
		start(s);
	finish(s, v);
}

/* Draw and run a sequence from a seed, recording it. */
static void generate(uint64_t seed, int nops, bool allow_burst, struct seq *s, struct verdict *v)
{
	char recent[200] = "";
	struct op o = { 0 };
	int outside = 0, i, nprep;

	nrun++;
	rs = seed * 0x9e3779b97f4a7c15ull + 1;
	memset(v, 0, sizeof(*v));
	fresh_case_dir();
	stopped = false;
	established = false;
	fw_pid = -1;
	for (enum kind k = K_EARLY; k <= K_FDCACHE; k++) {
		if (pick(4))
			continue;
		o.k = k;
		push(s, &o);
	}
	nprep = pick(12);
	for (i = 0; i < nprep + 1 + nops; i++) {
		if (i == nprep) {
			memset(&o, 0, sizeof(o));
			o.k = K_START;
			push(s, &o);
			start(s);
			continue;
		}
		draw(&o, i > nprep, allow_burst, recent);
		if (i < nprep && (o.k == K_STOP || o.k == K_CONT || o.k == K_PAUSE))
			continue;
		if (o.k == K_BURST) {
			/*
			 * Files made in a directory fanwatch has not marked
			 * make no events: make it, let fanwatch mark it, then
			 * fill it stopped, so the queue overflows.
			 */
			struct op pre[4] = { { .k = K_CONT }, { .k = K_MKDIR },
					     { .k = K_PAUSE, .n = 100 }, { .k = K_STOP } };
			int j;

			memcpy(pre[1].a, o.a, sizeof(o.a));
			for (j = 0; j < 4; j++) {
				push(s, &pre[j]);
				exec_op(&pre[j], &outside);
			}
		}
		push(s, &o);
		exec_op(&o, &outside);
	}
	finish(s, v);
}

/* ---- shrinking: drop chunks while some replay still fails ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool fails(const struct seq *s, struct verdict *v)
{
	int t;

	for (t = 0; t < 3; t++) {
		replay(s, v);
		if (v->fail)
			return true;
	}
	return false;
}

static void shrink(struct seq *s, int64_t budget_ms)
{
	int64_t end = now_ms() + budget_ms;
	struct verdict v;
	size_t chunk = s->n / 2 ? s->n / 2 : 1, i;
	struct seq t = { 0 };

	while (chunk >= 1 && now_ms() < end) {
		bool progress = false;

		for (i = 0; i < s->n && now_ms() < end; ) {
			size_t j, n = i + chunk > s->n ? s->n - i : chunk;

			t.n = 0;
			for (j = 0; j < s->n; j++)
				if ((j < i || j >= i + n) || s->v[j].k == K_START)
					push(&t, &s->v[j]);
			if (t.n < s->n && fails(&t, &v)) {
				s->n = t.n;
				if (t.n)
					memcpy(s->v, t.v, t.n * sizeof(*t.v));
				progress = true;
			} else {
				i += n;
			}
		}
		if (!progress)
			chunk /= 2;
	}
	free(t.v);
}

/* ---- the driver ---- */

static unsigned int ntest;
static int failed;

/* The failed run's stream, for the log (the kept directory may not last). */
static void print_stream(void)
{
	size_t len, i, n = 0;
	char *b = slurp("stream", &len);

	for (i = 0; b && i < len && n < 40; n++) {
		size_t l = strnlen(b + i, len - i);

		printf("# stream: %.*s\n", (int)(l > 200 ? 200 : l), b + i);
		i += l + 1;
	}
	free(b);
}

static void report(const char *name, struct seq *s, const struct verdict *v,
		   int64_t shrink_ms)
{
	char keep[4200];

	ntest++;
	if (!v->fail) {
		printf("ok %u - %s\n", ntest, name);
		fflush(stdout);
		return;
	}
	if (!strncmp(name, "todo", 4)) {
		printf("not ok %u - %s: %s # TODO issue 34, not fixed yet\n", ntest, name, v->why);
		return;
	}
	failed = 1;
	printf("not ok %u - %s: %s\n# sequence (%zu ops): ", ntest, name, v->why, s->n);
	print_seq(stdout, s);
	printf("\n");
	print_stream();
	snprintf(keep, sizeof(keep), "%s/failed-%u", base, ntest);
	if (chdir(base) == 0)
		rename("run", keep);
	printf("# kept in %s\n", keep);
	fflush(stdout);
	if (shrink_ms <= 0)
		return;
	shrink(s, shrink_ms);
	printf("# shrunk (%zu ops, --case): '", s->n);
	print_seq(stdout, s);
	printf("'\n");
	fflush(stdout);
}

/*
 * Shrunk reproducers of what the generator found (issue 34), kept as
 * literal cases: each failed before its fix.
 */
static const char *const literal[] = {
	/* RENAME_EXCHANGE of two watched directories: a false DELETE_SELF */
	"mkdir w/a;mkdir w/b;create w/a/f;create w/b/g;start;exchange w/a w/b",
	"mkdir w/a;mkdir w/b;create w/a/f;create w/b/g;start;stop;exchange w/a w/b;cont",
	/* a directory exchanged with a file: read as two renames in a row */
	"mkdir w/a;create w/a/f;create w/c;start;exchange w/a w/c",
	/* the same through the kernel's MOVED_FROM/MOVED_TO (5.13-5.16) */
	"unpaired;mkdir w/a;mkdir w/b;create w/a/f;create w/b/g;start;exchange w/a w/b",
	"unpaired;mkdir w/a;create w/a/f;create w/c;start;exchange w/a w/c",
	/* ... with a directory not marked yet: MOVED_TO x came before MOVED_FROM x */
	"unpaired;create w/a;mkdir w/c;link w/a w/c/x;start;mkdir w/c/y;mkdir w/c/y/d;create w/c/y/d/f;exchange w/c/y/d w/c/x",
	/* ... with the last MOVED_TO and a DELETE of that object merged */
	"unpaired;mkdir w/y;create w/a;start;exchange w/y w/a;flip w/y",
	/* the whiteout RENAME_WHITEOUT leaves has no CREATE from the kernel */
	"create w/a;start;whiteout w/a w/x",
	/* a type flip: the file's CREATE and DELETE merged, read as DELETE first */
	"start;create w/x;flip w/x",
	"start;mkdir w/x;flip w/x",
	"unpaired;start;create w/x;flip w/x",
	/* mkdir b; mv a b/, read late: b's scan found a first, then "a left" */
	"mkdir w/a;create w/a/f;start;stop;mkdir w/b;rename w/a w/b/m;cont",
	"unpaired;mkdir w/a;create w/a/f;start;stop;mkdir w/b;rename w/a w/b/m;cont",
	/* exchanged with a directory not marked yet, whose scan met it first */
	"movein w/a 5;start;tree w/a/t2/d 3;exchange w/a/t1/s1 w/a/t2/d/t1/s1",
	"tree w/c 21;start;chain w/c/y 39;exchange w/c/y/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d w/c/t1/s13",
	/* a scan met t3 where its rename put it: later DELETEs inside it were
	   printed at that place, before the rename that took it there */
	"tree w/b 15;exchange w/b/t1/s5 w/b/t2/s6/f;start;mkdir w/b/t2/s6/f/y;movein w/b/t2/s6/f/y/y 5;unlink w/b/t3/s7/f;unlink w/b/t2/s6/f/y/y/t0/s4/f;rename w/b/t3 w/b/t2/s6/f/y/y/t0/s4",
	/* ... and one a scan adopted (new to it) before its CREATE and rename */
	"mkdir w/d;mkdir w/d/d;movein w/d/d/y 6;start;mkdir w/d/d/y/t3/d;chain w/d/d/y/t0/b 13;rename w/d/d/y/t0/b w/d/d/y/t3/d/m;rmtree w/d/d/y/t3/d/m/d/d/d/d/d/d/d;pause 26;rmdir w/d/d/y/t3/d/m/d/d/d/d/d/d",
	/*
	 * Read late, a stale MOVED_TO put a directory back in the map where
	 * a scan no longer found it, and the next rename (no new record)
	 * unwatched it: a CREATE below it lost.
	 */
	"start;mkdir w/d;movein w/x 3;rename w/x w/d/m;pause 20;create w/d/m/t1/s1/x",
	"start;movein w/c 2;movein w/a 3;exchange w/a w/c/t0/g0;mkdir w/c/t0/g0/t0/a;pause 28;mkdir w/c/t0/g0/t0/a/x",
	/* moved in during setup, after the root's mark, before its walk */
	"early;tree w/a 40;start;movein w/y 4",
	/* a use after free: MOVE_SELF (left the tree) merged with DELETE_SELF */
	"unpaired;movein w/d 3;start;movein w/d/b 5;rename w/d/t1/s1 w/d/b/t3/d;flip w/d/b/t3/d",
	/* a queue overflow (the burst dir marked first), then --rescan-on-overflow */
	"rescan;start;mkdir w/a;mkdir w/burst;pause 100;stop;burst w/burst 17384;mkdir w/a/z;create w/a/z/f;cont",
	/* rename over an empty directory: fw-rebuild took its DELETE_SELF */
	"mkdir w/a;mkdir w/a/s;create w/a/s/f;mkdir w/e;start;rename w/a w/e",
	/*
	 * The kernel merged the last DELETE into the first CREATE of the
	 * same object, before the renames that took it away and back
	 */
	"start;create w/b;rename w/b w/m;rename w/m w/b;unlink w/b",
	"start;create w/b;create w/d;exchange w/b w/d;exchange w/d w/b;unlink w/d",
	/*
	 * b's scan met the exchanged directory at b/m; the exchange, read
	 * after, forgot that, and the rename to b/m read as "it left"
	 */
	"chain w/d 60;rename w/d/d/d/d/d/d w/b;start;mkdir w/b/b;exchange w/d w/b/d/d/d;rename w/d w/b/b/m",
	/* a link's DELETE and its return merged, another object between */
	"create w/d;link w/d w/c;link w/d w/a;rename w/a w/y;start;flip w/c;moveout w/c;link w/y w/c",
	/* ... unpaired: y's CREATE, MOVED_FROM and MOVED_TO merged, x's between */
	"unpaired;symlink w/x;start;create w/y;exchange w/x w/y;exchange w/y w/x",
	/*
	 * Moved in during setup, reported at its MOVED_TO; one of its
	 * directories renamed by then (a whiteout at its name): its listing
	 * failed ("Not a directory") and its files were never reported
	 */
	"early;start;movein w/x 3;whiteout w/x/t0/s0 w/x/t2/s2/c",
	/* the second exchange's FAN_RENAME of d merged into the first rename's */
	"mkdir w/d;start;whiteout w/d w/b;exchange w/b w/d;exchange w/b w/d",
	/* ... the file's half merged away: a directory "renamed over" a file */
	"symlink w/y;create w/y;start;create w/x;exchange w/target w/x;exchange w/x w/target;flip w/x;exchange w/x w/target",
	/*
	 * d's scan met s0 at d/m; read later, its rename (d not marked then)
	 * could not check that on disk, d's path behind an exchange: "left"
	 */
	"fdcache;movein w/x 2;movein w/y 4;start;tree w/y/t3/s3/x 2;whiteout w/x w/y/t3/s3/x/a;mkdir w/y/t3/s3/x/a/t0/s0/b;pause 30;mkdir w/y/t3/s3/x/a/t0/s0/b/d;rename w/y/t3/s3/x/t0/s0 w/y/t3/s3/x/a/t0/s0/b/d/m;mkdir w/y/t3/s3/x/a/a;tree w/y/t3/s3/x/a/a/b 4;exchange w/y/t3/s3/x/a/a/b/t3/s3/f w/y/t3/s3/x/a/t0/s0",
	/* a whiteout left in t3, read after t3's own rename: not looked for */
	"fdcache;movein w/x 6;movein w/x/t1/y 4;write w/x/t1/s5/f;start;movein w/x/t1/y/t2/s2/c 4;create w/x/t1/y/t1/s1/b/b;flip w/x/t1/y/t1/g1;movein w/x/t1/y/t2/s2/c/t3/a 6;whiteout w/x/t1/y/t2/s2/c/t3/s3 w/x/t3/s3/x;rename w/x/t1/y/t2/s2/c/t3 w/x/t0/s0/b",
	NULL
};

/* Found and not fixed yet: run, reported as TAP TODO (not a failure). */
static const char *const todo[] = {
	/*
	 * Unpaired: a watched directory renamed twice with a file removed
	 * in between: the DELETE is not printed and the directory is
	 * rescanned as new (main's fanwatch too; 6 of 6 runs).
	 */
	"unpaired;movein w/d 3;mkdir w/d/x;start;rename w/d/t2 w/d/x/c;unlink w/d/x/c/g2;rename w/d/x/c w/d/t0/s0/d",
	NULL
};

static uint64_t fixed_seeds[] = { 1, 2, 3, 4, 5, 6, 7, 8 };

/*
 * As root: a tmpfs of its own under /tmp (the guests' /tmp may be none),
 * or else a tmpfs directory; a child drops to uid 65534 and runs the
 * test, the parent unmounts after it.
 */
static void as_nobody(void)
{
	char mnt[64] = "/tmp/fw-model.XXXXXX";
	bool mounted;
	pid_t pid;
	int st;

	if (!mkdtemp(mnt))
		return;
	mounted = !mount("fw-model", mnt, "tmpfs", 0, "size=512m,mode=0755");
	if (!mounted) {
		rmdir(mnt);
		return;		/* private_dir() looks for a tmpfs directory */
	}
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		snprintf(base, sizeof(base), "%s/model", mnt);
		if (mkdir(base, 0755) || chown(base, NOBODY, NOBODY) || setgroups(0, NULL) ||
		    setgid(NOBODY) || setuid(NOBODY))
			die("dropping to uid 65534");
		return;
	}
	if (waitpid(pid, &st, 0) != pid)
		st = 1 << 8;
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
	exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

static void private_dir(const char *arg)
{
	const char *cands[] = { "/dev/shm", "/tmp", NULL };
	struct statfs sf;
	size_t i;

	if (arg) {
		snprintf(base, sizeof(base), "%s/model", arg);
		rmtree(base);
		if (mkdir(base, 0755))
			die(base);
		return;
	}
	if (geteuid() == 0) {
		as_nobody();
		if (base[0])
			return;		/* the child, on its own tmpfs */
	}
	for (i = 0; cands[i]; i++) {
		if (statfs(cands[i], &sf) || sf.f_type != 0x01021994)	/* TMPFS_MAGIC */
			continue;
		snprintf(base, sizeof(base), "%s/fw-model.XXXXXX", cands[i]);
		if (mkdtemp(base))
			break;
	}
	if (!cands[i]) {
		printf("1..0 # SKIP no tmpfs to work in (cannot mount one, no /dev/shm or /tmp tmpfs)\n");
		exit(0);
	}
	if (geteuid() == 0) {
		if (chown(base, NOBODY, NOBODY) || setgroups(0, NULL) || setgid(NOBODY) ||
		    setuid(NOBODY))
			die("dropping to uid 65534");
	}
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *lit = NULL;
	long seconds = 0, nops = 40, shrink_s = 60;
	uint64_t seed = 0;
	bool have_seed = false, literals = true;
	struct verdict v;
	char name[128];
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fputs("usage: fw-model FANWATCH FW_REBUILD [DIR] [--seconds N] [--seed S] [--ops N] [--case OPS] [--no-literal] [--shrink-s N]\n", stderr);
		return 2;
	}
	fanwatch = realpath(argv[1], NULL);
	rebuild = realpath(argv[2], NULL);
	if (!fanwatch || !rebuild) {
		fprintf(stderr, "fw-model: %s: %s\n", fanwatch ? argv[2] : argv[1], strerror(errno));
		return 2;
	}
	for (i = 3; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-' && !dir) {
			dir = a;
			continue;
		}
		if (!val) {
			fprintf(stderr, "fw-model: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--seconds"))
			seconds = atol(val);
		else if (!strcmp(a, "--seed"))
			seed = strtoull(val, NULL, 0), have_seed = true;
		else if (!strcmp(a, "--ops"))
			nops = atol(val);
		else if (!strcmp(a, "--case"))
			lit = val;
		else if (!strcmp(a, "--shrink-s"))
			shrink_s = atol(val);
		else if (!strcmp(a, "--no-literal"))
			literals = false, i--;
		else {
			fprintf(stderr, "fw-model: unknown option %s\n", a);
			return 2;
		}
		i++;
	}
	private_dir(dir);
	burst_n = max_queued() + 1000;
	signal(SIGPIPE, SIG_IGN);
	if (have_seed && !seconds)
		literals = false;	/* --seed S alone: that seed only */
	if (lit) {
		struct seq s = { 0 };

		if (parse_seq(lit, &s))
			return 2;
		replay(&s, &v);
		report("--case", &s, &v, shrink_s * 1000);
		goto out;
	}
	if (!have_seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
	}
	if (!seconds) {
		for (i = 0; literals && literal[i]; i++) {
			struct seq s = { 0 };
			int t;

			parse_seq(literal[i], &s);
			snprintf(name, sizeof(name), "literal %d: %.90s", i, literal[i]);
			for (t = 0; t < 3; t++) {	/* timing: three tries to show it */
				replay(&s, &v);
				if (v.fail)
					break;
			}
			report(name, &s, &v, 0);
			free(s.v);
		}
		for (i = 0; literals && todo[i]; i++) {
			struct seq s = { 0 };

			parse_seq(todo[i], &s);
			snprintf(name, sizeof(name), "todo %d: %.90s", i, todo[i]);
			replay(&s, &v);
			report(name, &s, &v, 0);
			free(s.v);
		}
		for (i = 0; literals && i < (int)(sizeof(fixed_seeds) / sizeof(*fixed_seeds)); i++) {
			struct seq s = { 0 };

			generate(fixed_seeds[i], nops, false, &s, &v);
			snprintf(name, sizeof(name), "seed %llu", (unsigned long long)fixed_seeds[i]);
			report(name, &s, &v, shrink_s * 1000);
			free(s.v);
		}
	}
	/* the short run's random seed only when asked: it finds the bugs not
	 * fixed yet (about 0.3 % of seeds), and the test command must not
	 * turn red by chance; the long mode is where seeds are explored
	 */
	if (seconds || have_seed || getenv("FW_MODEL_RANDOM")) {
		int64_t until = now_ms() + seconds * 1000;

		do {
			struct seq s = { 0 };

			/* one seed in eight overflows the queue: ~0.3 s each */
			generate(seed, nops, seconds && seed % 8 == 0, &s, &v);
			snprintf(name, sizeof(name), "seed %llu%s", (unsigned long long)seed,
				 seconds || have_seed ? "" : " (random: rerun with --seed)");
			report(name, &s, &v, shrink_s * 1000);
			free(s.v);
			seed++;
		} while (now_ms() < until);
	}
out:
	if (whiteout_eperm)
		printf("# RENAME_WHITEOUT: EPERM %lu times (needs CAP_MKNOD; a normal user cannot)\n",
		       whiteout_eperm);
	printf("# %u runs\n1..%u\n", nrun, ntest);
	if (!failed && chdir("/") == 0)
		rmtree(base);
	return failed;
}

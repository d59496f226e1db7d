// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * --exec's ignore chain against git's own answer: for each seed, a random
 * repository (directories, files, .gitignore files at random levels,
 * .git/info/exclude, core.excludesFile set in ~/.gitconfig, in the
 * repository's config or left to its XDG default), every path asked of
 * `git check-ignore` and of fw_vcs_ignored(), compared path by path.
 * Then info/exclude, the excludes file and one more rule file are
 * rewritten in turn, and every path asked again of the same fw_vcs (an
 * edit applies from the next question on).
 *
 * usage: test-gitignore-diff [SEEDS [FIRST-SEED]]   (TAP; a skip without git)
 * A failure prints the seed, the paths that differ and the rule files.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "vcsignore.h"

#define MAXP 256

static const char *names[] = {
	"a", "b", "c", "build", "out", "doc", "deep", "x.o", "keep.o", "y.log",
	"ab", "a.b", "sp ace", "#h", "!b",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static const char *pats[] = {
	"*.o", "!keep.o", "build/", "/a", "a/", "b", "*.log", "!*.log", "deep/**",
	"**/out", "a/**/c", "doc/*", "!doc/x.o", "c/", "!c/", "x*", "?.o", "[ab]",
	"**/b/", "a**b", "b/**", "!b/", "# comment", "\\#h", "\\!b", "*", "!a/b",
	"a/b", "/deep/", "!/deep/a", "**/c/**", "out/", "!out", "*.b", "[!a]",
	"a?", "sp\\ ace", "sp ace", "ab ", "!*/", "*/", "!build/x.o", "deep/*/c",
	"/b/c", "c/a", "!deep", "**", "doc/**/b", "!/a",
};
#define NPATS (sizeof(pats) / sizeof(pats[0]))

struct path {
	char rel[256];
	bool dir;
};

static struct path paths[MAXP];
static int npaths;
static char root[64], repo[128];
static unsigned int rnd_state;

static unsigned int rnd(unsigned int n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % n;
}

static void die(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static void put(const char *path, const char *text)
{
	char tmp[1024];
	FILE *f;

	/* a new inode each time: a rewrite within one clock tick shows */
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) || rename(tmp, path))
		die(path);
}

static void mkdirs(const char *path)
{
	char p[512];
	size_t i;

	snprintf(p, sizeof(p), "%s", path);
	for (i = 1; p[i]; i++) {
		if (p[i] != '/')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			die(p);
		p[i] = '/';
	}
	if (mkdir(p, 0755) && errno != EEXIST)
		die(p);
}

/* A random rule file: 0 (an empty file) to 5 patterns. */
static void rules(char *out, size_t len)
{
	int n = rnd(6), i;

	out[0] = '\0';
	for (i = 0; i < n; i++) {
		strncat(out, pats[rnd(NPATS)], len - strlen(out) - 2);
		strcat(out, "\n");
	}
}

static void make_tree(void)
{
	char buf[1200];
	int i;

	npaths = 0;
	for (i = 0; i < 60 && npaths < MAXP; i++) {
		struct path *p = &paths[npaths];
		int parent = npaths && rnd(4) ? (int)rnd(npaths) : -1;
		const char *name = names[rnd(NNAMES)];
		int k;

		if (parent >= 0 && !paths[parent].dir)
			continue;
		snprintf(buf, sizeof(buf), "%s%s%s", parent >= 0 ? paths[parent].rel : "",
			 parent >= 0 ? "/" : "", name);
		for (k = 0; k < npaths && strcmp(paths[k].rel, buf); k++)
			;
		if (k < npaths || strlen(buf) >= sizeof(p->rel))
			continue;
		strcpy(p->rel, buf);
		p->dir = rnd(2);
		snprintf(buf, sizeof(buf), "%s/%s", repo, p->rel);
		if (p->dir)
			mkdirs(buf);
		else
			put(buf, "x\n");
		npaths++;
	}
}

/* The rule files of this repository: .gitignore files, exclude, excludesFile. */
static char files[40][512];
static int nfiles;

static void make_rules(void)
{
	char buf[1024], text[512];
	int i;

	nfiles = 0;
	snprintf(files[nfiles++], sizeof(files[0]), "%s/.gitignore", repo);
	for (i = 0; i < npaths && nfiles < 30; i++)
		if (paths[i].dir && rnd(3) == 0 &&
		    snprintf(files[nfiles++], sizeof(files[0]), "%s/%s/.gitignore", repo,
			     paths[i].rel) >= (int)sizeof(files[0]))
			die("path too long");
	snprintf(files[nfiles++], sizeof(files[0]), "%s/.git/info/exclude", repo);
	/* core.excludesFile: ~/.gitconfig, the repository's config, or the XDG default */
	switch (rnd(4)) {
	case 0:
		snprintf(buf, sizeof(buf), "%s/home/.gitconfig", root);
		put(buf, "[user]\n\tname = t\n[core]\n\texcludesFile = ~/gex # here\n");
		snprintf(files[nfiles++], sizeof(files[0]), "%s/home/gex", root);
		break;
	case 1:
		snprintf(buf, sizeof(buf), "%s/.git/config", repo);
		{
			FILE *f = fopen(buf, "a");

			if (!f || fprintf(f, "[Core]\n\tExcludesFile = \"%s/rex\"\n", root) < 0 ||
			    fclose(f))
				die(buf);
		}
		snprintf(files[nfiles++], sizeof(files[0]), "%s/rex", root);
		break;
	case 2:
		snprintf(buf, sizeof(buf), "%s/xdg/git", root);
		mkdirs(buf);
		snprintf(files[nfiles++], sizeof(files[0]), "%s/xdg/git/ignore", root);
		break;
	default:
		snprintf(buf, sizeof(buf), "%s/home/.config/git", root);
		mkdirs(buf);
		snprintf(files[nfiles++], sizeof(files[0]), "%s/home/.config/git/ignore", root);
		break;
	}
	for (i = 0; i < nfiles; i++) {
		rules(text, sizeof(text));
		put(files[i], text);
	}
}

/* One NUL-ended string from f. */
static bool fgets_z(char *buf, size_t len, FILE *f)
{
	size_t n = 0;
	int c;

	while ((c = getc(f)) != EOF && c && n + 1 < len)
		buf[n++] = (char)c;
	buf[n] = '\0';
	return c != EOF || n;
}

/* git's answer: ignored[i] for each path. */
static void ask_git(bool *ignored)
{
	char list[128], cmd[1024], line[600];
	FILE *f;
	int i;

	snprintf(list, sizeof(list), "%s/list", root);
	f = fopen(list, "w");
	if (!f)
		die(list);
	for (i = 0; i < npaths; i++)
		fprintf(f, "%s%c", paths[i].rel, 0);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cd '%s' && git check-ignore --no-index -z --stdin < '%s' > '%s.out'; test $? -le 1",
		 repo, list, list);
	if (system(cmd))
		die("git check-ignore");
	snprintf(cmd, sizeof(cmd), "%s.out", list);
	f = fopen(cmd, "r");
	if (!f)
		die(cmd);
	memset(ignored, 0, npaths * sizeof(*ignored));
	while (fgets_z(line, sizeof(line), f))
		for (i = 0; i < npaths; i++)
			if (!strcmp(paths[i].rel, line))
				ignored[i] = true;
	fclose(f);
}

static void dump_rules(void)
{
	int i;

	for (i = 0; i < nfiles; i++) {
		FILE *f = fopen(files[i], "r");
		char line[256];

		printf("#   %s:\n", files[i] + strlen(root));
		while (f && fgets(line, sizeof(line), f))
			printf("#     %s", line);
		if (f)
			fclose(f);
	}
}

/* Compare every path; the number that differ. */
static int compare(struct fw_vcs *v, unsigned int seed, const char *when, int *ign)
{
	bool git[MAXP];
	char abs[512];
	int i, bad = 0;

	ask_git(git);
	for (i = 0; i < npaths; i++) {
		bool fw;

		if (snprintf(abs, sizeof(abs), "%s/%s", repo, paths[i].rel) >= (int)sizeof(abs))
			die("path too long");
		fw = fw_vcs_ignored(v, abs, paths[i].dir);
		if (ign)
			*ign += git[i];
		if (fw != git[i]) {
			printf("#   seed %u %s: %s%s: git %s, fanwatch %s\n", seed, when,
			       paths[i].rel, paths[i].dir ? "/" : "",
			       git[i] ? "ignores" : "keeps", fw ? "ignores" : "keeps");
			bad++;
		}
	}
	if (bad)
		dump_rules();
	return bad;
}

/* Rewrite rule file i with new random rules. */
static void edit_one(int i)
{
	char text[512];

	rules(text, sizeof(text));
	put(files[i], text);
}

static int one_seed(unsigned int num, unsigned int seed)
{
	char buf[2048];
	struct fw_vcs *v;
	int bad, i, edits = 0, ign = 0;

	rnd_state = seed;
	snprintf(buf, sizeof(buf), "rm -rf '%s/home' '%s/xdg' '%s/r' '%s/gex' '%s/rex' && "
		 "mkdir -p '%s/home' '%s/xdg' && git init -q '%s/r'",
		 root, root, root, root, root, root, root, root);
	if (system(buf))
		die("git init");
	make_tree();
	make_rules();
	v = fw_vcs_new();
	if (!v)
		die("fw_vcs_new");
	bad = compare(v, seed, "start", &ign);
	/* rule files edited, asked of the same fw_vcs: exclude, excludesFile, one more */
	for (i = 0; i < 3 && !bad; i++, edits++) {
		int f = i < 2 ? nfiles - 2 + i : (int)rnd(nfiles);

		edit_one(f);
		usleep(25000);	/* past the 20 ms between looks at the repository's files */
		snprintf(buf, sizeof(buf), "after editing %s", files[f] + strlen(root));
		bad = compare(v, seed, buf, NULL);
	}
	fw_vcs_free(v);
	printf("%s %u - seed %u: %d paths, %d rule files, %d edits, %d ignored by git%s\n",
	       bad ? "not ok" : "ok", num, seed, npaths, nfiles, edits, ign,
	       bad ? ", paths differ" : "");
	return bad;
}

int main(int argc, char **argv)
{
	unsigned int n = argc > 1 ? strtoul(argv[1], NULL, 0) : 20;
	unsigned int first = argc > 2 ? strtoul(argv[2], NULL, 0) : 1, s;
	char buf[600];
	int failed = 0;

	if (system("git --version > /dev/null 2>&1")) {
		printf("1..0 # SKIP no git\n");
		return 0;
	}
	snprintf(root, sizeof(root), "/tmp/fw-gitdiff.XXXXXX");
	if (!mkdtemp(root))
		die("mkdtemp");
	snprintf(repo, sizeof(repo), "%s/r", root);
	snprintf(buf, sizeof(buf), "%s/home", root);
	setenv("HOME", buf, 1);
	unsetenv("GIT_CONFIG_GLOBAL");
	unsetenv("GIT_DIR");
	unsetenv("GIT_WORK_TREE");
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	printf("1..%u\n# seeds %u..%u (rerun one: %s 1 SEED)\n", n, first, first + n - 1, argv[0]);
	for (s = first; s < first + n; s++) {
		/* half the seeds with XDG_CONFIG_HOME set */
		snprintf(buf, sizeof(buf), "%s/xdg", root);
		if (s & 1)
			setenv("XDG_CONFIG_HOME", buf, 1);
		else
			unsetenv("XDG_CONFIG_HOME");
		failed += one_seed(s - first + 1, s) != 0;
	}
	snprintf(buf, sizeof(buf), "rm -rf '%s'", root);
	if (system(buf))
		return 1;
	return failed != 0;
}

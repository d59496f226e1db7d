// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A consumer of fanwatch's event stream, as a user would write one: it
 * rebuilds the tree from the events alone and prints it, one path a
 * record (NUL-terminated, directories with a trailing '/', sorted), for
 * comparison with find(1).  The tests in tests/rebuild/ use it; a path it
 * prints that find does not is one fanwatch invented, and the reverse one
 * fanwatch lost.
 *
 * Input: NUL-terminated records "EVENTS|COOKIE|PATH" from
 *   fanwatch -m -r --format '%e|%c|%w%f%0' --no-newline ROOT
 * Usage: fw-rebuild ROOT/ [INITIAL] < stream
 * INITIAL: the tree when the watch began, as printed (find -printf).
 *
 * The rules are the inotify ones: CREATE and MOVED_TO add a path (and its
 * missing parents, which then count as invented if wrong), MOVED_FROM
 * detaches a subtree until the MOVED_TO with its cookie reattaches it,
 * DELETE removes a subtree, DELETE_SELF only the root's (a subdirectory's
 * repeats a DELETE or follows a rename over it).  A scan (CREATE,SCAN) may
 * be ahead of events read later: a MOVED_TO onto a directory the consumer
 * already holds merges into it (a rename cannot replace a non-empty
 * directory, so the entries there came from a scan that saw the future).
 * Q_OVERFLOW is reported on stderr and makes the exit status 3.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
	char *name;
	bool isdir;
	struct node *parent, *child, *next;
};

struct parked {
	unsigned long cookie;
	struct node *n;
	struct parked *next;
};

static struct node root = { .name = "", .isdir = true };
static struct parked *parked;

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p) {
		fputs("fw-rebuild: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static struct node *child(struct node *d, const char *name, size_t len)
{
	struct node *c;

	for (c = d->child; c; c = c->next)
		if (strlen(c->name) == len && !memcmp(c->name, name, len))
			return c;
	return NULL;
}

static void attach(struct node *d, struct node *c)
{
	c->parent = d;
	c->next = d->child;
	d->child = c;
}

static void detach(struct node *c)
{
	struct node **pp = &c->parent->child;

	while (*pp != c)
		pp = &(*pp)->next;
	*pp = c->next;
	c->next = NULL;
	c->parent = NULL;
}

static void free_tree(struct node *n)
{
	while (n->child) {
		struct node *c = n->child;

		n->child = c->next;
		free_tree(c);
	}
	free(n->name);
	free(n);
}

/*
 * The node at path (relative to the root, trailing '/' ignored); with
 * make, missing components are created (as directories but the last).
 * *parent gets the directory that holds (or would hold) it.
 */
static struct node *walk(const char *path, bool make, bool isdir,
			 struct node **parent)
{
	struct node *d = &root, *c = NULL;
	const char *p = path;

	for (;;) {
		const char *s = strchr(p, '/');
		size_t len = s ? (size_t)(s - p) : strlen(p);
		bool last = !s || !s[1];

		if (!len && last)
			break;
		c = child(d, p, len);
		if (!c && !make)
			return NULL;
		if (!c) {
			c = xmalloc(sizeof(*c));
			c->name = strndup(p, len);
			c->isdir = !last || isdir;
			attach(d, c);
		}
		if (last) {
			if (parent)
				*parent = d;
			return c;
		}
		d = c;
		p = s + 1;
	}
	if (parent)
		*parent = NULL;
	return c;
}

static void remove_path(const char *path)
{
	struct node *n = walk(path, false, false, NULL);

	if (n && n != &root) {
		detach(n);
		free_tree(n);
	}
}

/* Move src's children into dst, merging directories met on the way. */
static void merge(struct node *dst, struct node *src)
{
	while (src->child) {
		struct node *c = src->child, *o;

		detach(c);
		o = child(dst, c->name, strlen(c->name));
		if (o && o->isdir && c->isdir) {
			merge(o, c);
			free_tree(c);
			continue;
		}
		if (o) {
			detach(o);
			free_tree(o);
		}
		attach(dst, c);
	}
}

static void moved_to(const char *path, unsigned long cookie, bool isdir)
{
	struct parked **pp = &parked, *p;
	struct node *dst, *dir, *n;
	const char *base;

	for (; *pp && (*pp)->cookie != cookie; pp = &(*pp)->next)
		;
	p = *pp;
	if (!p || !cookie) {
		walk(path, true, isdir, NULL);
		return;
	}
	*pp = p->next;
	n = p->n;
	free(p);
	/*
	 * A scan that saw the future (another object at the old name) made
	 * the node parked here; the event knows the type of what moved.
	 */
	if (n->isdir != isdir) {
		while (n->child) {
			struct node *c = n->child;

			n->child = c->next;
			free_tree(c);
		}
		n->isdir = isdir;
	}
	dst = walk(path, false, false, NULL);
	if (dst && dst->isdir && n->isdir) {
		merge(dst, n);
		free_tree(n);
		return;
	}
	if (dst) {
		detach(dst);
		free_tree(dst);
	}
	dst = walk(path, true, isdir, &dir);
	/* Put n where the placeholder walk() made is. */
	base = strrchr(path, '/');
	detach(dst);
	free_tree(dst);
	free(n->name);
	n->name = strdup(base && base[1] ? base + 1 : path);
	attach(dir, n);
}

static void moved_from(const char *path, unsigned long cookie)
{
	struct node *n = walk(path, false, false, NULL);
	struct parked *p;

	if (!n || n == &root)
		return;
	detach(n);
	if (!cookie) {
		free_tree(n);
		return;
	}
	p = xmalloc(sizeof(*p));
	p->cookie = cookie;
	p->n = n;
	p->next = parked;
	parked = p;
}

static bool has_word(const char *events, const char *w)
{
	size_t n = strlen(w);
	const char *p = events;

	while ((p = strstr(p, w))) {
		if ((p == events || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
		p += n;
	}
	return false;
}

static int overflowed;

static void apply(char *rec, const char *rootp, size_t rootlen)
{
	char *bar1 = strchr(rec, '|'), *bar2, *path;
	unsigned long cookie;
	bool isdir;

	if (!bar1 || !(bar2 = strchr(bar1 + 1, '|')))
		return;
	*bar1 = '\0';
	cookie = strtoul(bar1 + 1, NULL, 10);
	path = bar2 + 1;
	if (has_word(rec, "Q_OVERFLOW")) {
		overflowed++;
		return;
	}
	if (strncmp(path, rootp, rootlen))
		return;
	path += rootlen;
	isdir = has_word(rec, "ISDIR");
	/* A merged event's words come in the order they happened. */
	if (has_word(rec, "MOVED_FROM"))
		moved_from(path, cookie);
	if (has_word(rec, "CREATE"))
		walk(path, true, isdir, NULL);
	if (has_word(rec, "MOVED_TO"))
		moved_to(path, cookie, isdir);
	/*
	 * A subdirectory's DELETE_SELF repeats its parent's DELETE, or it is
	 * the directory a rename replaced, printed (as inotifywait does)
	 * after the MOVED_TO under the name the arrival now has: only the
	 * root's own says something new.
	 */
	if (has_word(rec, "DELETE") || (has_word(rec, "DELETE_SELF") && !*path))
		remove_path(path);
}

static size_t npaths, cap;
static char **paths;

static void collect(const struct node *d, const char *pre)
{
	const struct node *c;

	for (c = d->child; c; c = c->next) {
		char *p;

		if (asprintf(&p, "%s%s%s", pre, c->name, c->isdir ? "/" : "") < 0)
			exit(1);
		if (npaths == cap) {
			cap = cap ? 2 * cap : 1024;
			paths = realloc(paths, cap * sizeof(*paths));
			if (!paths)
				exit(1);
		}
		paths[npaths++] = p;
		if (c->isdir)
			collect(c, p);
	}
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	char *rec = NULL;
	size_t n = 0, i;

	if (argc != 2 && argc != 3) {
		fputs("usage: fw-rebuild ROOT/ [INITIAL] < stream\n", stderr);
		return 1;
	}
	if (argc == 3) {
		FILE *f = fopen(argv[2], "r");

		if (!f) {
			perror(argv[2]);
			return 1;
		}
		while (getdelim(&rec, &n, '\0', f) > 0) {
			size_t l = strlen(rec);

			walk(rec, true, l && rec[l - 1] == '/', NULL);
		}
		fclose(f);
	}
	while (getdelim(&rec, &n, '\0', stdin) > 0)
		apply(rec, argv[1], strlen(argv[1]));
	free(rec);
	collect(&root, "");
	qsort(paths, npaths, sizeof(*paths), cmp);
	for (i = 0; i < npaths; i++)
		fwrite(paths[i], strlen(paths[i]) + 1, 1, stdout);
	for (i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	while (root.child) {
		struct node *c = root.child;

		root.child = c->next;
		free_tree(c);
	}
	while (parked) {
		struct parked *p = parked;

		parked = p->next;
		free_tree(p->n);
		free(p);
	}
	if (overflowed)
		fprintf(stderr, "fw-rebuild: %d queue overflows in the stream\n", overflowed);
	return overflowed ? 3 : 0;
}

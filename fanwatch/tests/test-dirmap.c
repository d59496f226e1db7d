// SPDX-License-Identifier: LGPL-2.1-or-later
/* The handle map: lookup, growth, subtree removal and relabeling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <cmocka.h>

#include "dirmap.h"

struct h {
	struct file_handle fh;
	unsigned char b[16];
};

static const int32_t fsid[2] = { 1, 2 };

static struct h handle(unsigned int n)
{
	struct h h = { .fh.handle_bytes = 12, .fh.handle_type = 1 };

	memcpy(h.b, &n, sizeof(n));
	return h;
}

static struct fw_dir *add(struct fw_dirmap *m, unsigned int n, struct fw_dir *parent,
			  const char *name)
{
	struct h h = handle(n);
	struct fw_dir *d = fw_dir_new(fsid, &h.fh, -1, parent, name, name);

	assert_non_null(d);
	assert_int_equal(fw_dirmap_insert(m, d), 0);
	return d;
}

static struct fw_dir *find(struct fw_dirmap *m, unsigned int n)
{
	struct h h = handle(n);

	return fw_dirmap_find(m, fsid, &h.fh);
}

static void lookup_and_growth(void **state)
{
	struct fw_dirmap m;
	struct fw_dir *root;
	const int32_t other[2] = { 1, 3 };
	struct h h = handle(1);
	unsigned int i;
	char name[16];

	(void)state;
	assert_int_equal(fw_dirmap_init(&m), 0);
	root = add(&m, 0, NULL, "top");
	assert_string_equal(root->path, "top/");
	for (i = 1; i < 5000; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		add(&m, i, root, name);
	}
	assert_int_equal(m.count, 5000);
	assert_true(m.nbucket >= 4096);
	for (i = 0; i < 5000; i++)
		assert_non_null(find(&m, i));
	assert_string_equal(find(&m, 4321)->path, "top/d4321/");
	assert_null(find(&m, 5000));
	/* The same handle on another filesystem is another directory. */
	assert_null(fw_dirmap_find(&m, other, &h.fh));
	assert_ptr_equal(fw_dir_child(root, "d17"), find(&m, 17));
	fw_dirmap_free(&m);
}

/*
 * The fd cache keeps its bound and its list across the table's growth:
 * every cached fd is in the list, and the newest ones are the cached ones
 * (a reset once made each insert evict everything else).
 */
static void fd_cache_across_growth(void **state)
{
	struct fw_dirmap m;
	struct fw_dir *root, *d[3000], *l;
	unsigned int i, cached = 0, listed = 0;
	char name[16];

	(void)state;
	setenv("FANWATCH_FD_CACHE", "8", 1);
	assert_int_equal(fw_dirmap_init(&m), 0);
	unsetenv("FANWATCH_FD_CACHE");
	root = add(&m, 0, NULL, "top");
	for (i = 0; i < 3000; i++) {
		struct h h = handle(i + 1);
		int fd = open("/", O_PATH | O_CLOEXEC);

		assert_true(fd >= 0);
		snprintf(name, sizeof(name), "d%u", i);
		d[i] = fw_dir_new(fsid, &h.fh, fd, root, name, name);
		assert_non_null(d[i]);
		assert_int_equal(fw_dirmap_insert(&m, d[i]), 0);
	}
	assert_true(m.nbucket >= 2048);
	assert_int_equal(m.maxfd, 8);
	for (i = 0; i < 3000; i++)
		cached += d[i]->fd >= 0;
	for (l = m.lru_head; l; l = l->lru_next)
		listed++;
	assert_int_equal(cached, 8);
	assert_int_equal(listed, 8);
	assert_int_equal(m.nfd, 8);
	for (i = 3000 - 8; i < 3000; i++)
		assert_true(d[i]->fd >= 0);
	fw_dirmap_free(&m);
}

static unsigned int removed;

static void count(struct fw_dir *d, void *arg)
{
	(void)d;
	(void)arg;
	removed++;
}

static void subtree_remove_and_reparent(void **state)
{
	struct fw_dirmap m;
	struct fw_dir *r, *a, *b, *c, *x;

	(void)state;
	assert_int_equal(fw_dirmap_init(&m), 0);
	r = add(&m, 1, NULL, "w/");
	a = add(&m, 2, r, "a");
	b = add(&m, 3, a, "b");
	c = add(&m, 4, b, "c");
	x = add(&m, 5, r, "x");
	assert_string_equal(c->path, "w/a/b/c/");

	/* mv w/a/b w/x/renamed: the whole subtree follows. */
	assert_int_equal(fw_dir_reparent(b, x, "renamed"), 0);
	assert_string_equal(b->path, "w/x/renamed/");
	assert_string_equal(c->path, "w/x/renamed/c/");
	assert_null(fw_dir_child(a, "b"));
	assert_ptr_equal(fw_dir_child(x, "renamed"), b);
	/* A root cannot be reparented. */
	assert_int_not_equal(fw_dir_reparent(r, x, "loop"), 0);

	removed = 0;
	fw_dirmap_remove_tree(&m, x, count, NULL);
	assert_int_equal(removed, 3);
	assert_int_equal(m.count, 2);
	assert_null(find(&m, 4));
	assert_non_null(find(&m, 2));
	assert_null(fw_dir_child(r, "x"));
	fw_dirmap_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lookup_and_growth),
		cmocka_unit_test(fd_cache_across_growth),
		cmocka_unit_test(subtree_remove_and_reparent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

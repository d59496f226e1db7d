// SPDX-License-Identifier: LGPL-2.1-or-later
/* Rescan snapshots: what counts as new, changed, replaced or gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "snap.h"

static struct stat file(ino_t ino, time_t mtime, off_t size)
{
	struct stat st = { .st_ino = ino, .st_size = size, .st_mode = S_IFREG | 0644 };

	st.st_mtim.tv_sec = mtime;
	return st;
}

static unsigned int gone;
static char last_gone[32];

static void on_gone(const struct fw_snap_ent *e, void *arg)
{
	(void)arg;
	gone++;
	snprintf(last_gone, sizeof(last_gone), "%s", e->name);
}

static void changes(void **state)
{
	struct fw_snap *s = fw_snap_new();
	struct stat a = file(10, 100, 5), b = file(11, 100, 5), dir = a;
	char name[16];
	int i;

	(void)state;
	assert_non_null(s);
	fw_snap_set(s, "a", &a);
	fw_snap_set(s, "b", &b);
	fw_snap_set_unknown(s, "told", false);
	dir.st_mode = S_IFDIR | 0755;
	dir.st_ino = 12;
	fw_snap_set(s, "d", &dir);

	assert_int_equal(fw_snap_check(s, "a", &a), FW_SNAP_SAME);
	b.st_size = 6;
	assert_int_equal(fw_snap_check(s, "b", &b), FW_SNAP_MODIFIED);
	assert_int_equal(fw_snap_check(s, "b", &b), FW_SNAP_SAME);	/* updated */
	a.st_ino = 20;
	assert_int_equal(fw_snap_check(s, "a", &a), FW_SNAP_REPLACED);
	/* Told present, state unknown: found again means changed since. */
	assert_int_equal(fw_snap_check(s, "told", &b), FW_SNAP_MODIFIED);
	/* A directory's mtime follows its entries: not a change of its own. */
	dir.st_mtim.tv_sec = 999;
	assert_int_equal(fw_snap_check(s, "d", &dir), FW_SNAP_SAME);
	assert_int_equal(fw_snap_check(s, "new", &b), FW_SNAP_NEW);

	/* Everything was seen but "gone", added without a check. */
	fw_snap_set(s, "gone", &b);
	gone = 0;
	fw_snap_sweep(s, on_gone, NULL);
	assert_int_equal(gone, 1);
	assert_string_equal(last_gone, "gone");
	/* The sweep reset "seen": unchecked now, all go next time. */
	gone = 0;
	fw_snap_sweep(s, on_gone, NULL);
	assert_int_equal(gone, 5);	/* a b told d new */
	assert_int_equal(s->n, 0);

	/* Growth keeps every entry findable. */
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		fw_snap_set(s, name, &a);
	}
	fw_snap_set(s, "f500", NULL);
	assert_int_equal(s->n, 999);
	assert_int_equal(fw_snap_check(s, "f999", &a), FW_SNAP_SAME);
	assert_int_equal(fw_snap_check(s, "f500", &a), FW_SNAP_NEW);
	fw_snap_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(changes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

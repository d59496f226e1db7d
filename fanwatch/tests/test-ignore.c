// SPDX-License-Identifier: LGPL-2.1-or-later
/* --ignore-file: git's rules, case by case (gitignore(5)). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ignore.h"

static void globs(void **state)
{
	(void)state;
	assert_true(fw_glob("*.o", "a.o"));
	assert_false(fw_glob("*.o", "d/a.o"));		/* * stops at / */
	assert_true(fw_glob("**/a.o", "a.o"));		/* zero directories */
	assert_true(fw_glob("**/a.o", "x/y/a.o"));
	assert_true(fw_glob("a/**", "a/b/c"));
	assert_true(fw_glob("a/**/b", "a/b"));
	assert_true(fw_glob("a/**/b", "a/x/y/b"));
	assert_false(fw_glob("a/**/b", "a/xb"));
	assert_true(fw_glob("a**b", "axyb"));		/* not a whole component: "*" */
	assert_false(fw_glob("a**b", "a/b"));
	assert_false(fw_glob("x/a**", "x/a/b"));
	assert_true(fw_glob("?.c", "x.c"));
	assert_false(fw_glob("?.c", "/.c"));
	assert_true(fw_glob("[a-c]x", "bx"));
	assert_true(fw_glob("[!a-c]x", "dx"));
	assert_false(fw_glob("[^a-c]x", "ax"));
	assert_true(fw_glob("\\*lit", "*lit"));
	assert_false(fw_glob("\\*lit", "xlit"));
	assert_true(fw_glob("[x", "[x"));		/* unclosed: literal */
}

static void rules(void **state)
{
	struct fw_ignore ig;

	(void)state;
	assert_int_equal(fw_ignore_parse(&ig, "/r",
		"# comment\n"
		"\n"
		"*.o\n"
		"!keep.o\n"
		"build/\n"
		"/top\n"
		"doc/*.html\n"
		"\\#hash\n"
		"trail   \n"
		"esc\\ \n"
		"deep/\n"
		"!deep/inside\n"), 0);
	assert_true(fw_ignore_match(&ig, "/r/a.o", false));
	assert_true(fw_ignore_match(&ig, "/r/x/y/a.o", false));
	assert_false(fw_ignore_match(&ig, "/r/keep.o", false));
	assert_true(fw_ignore_match(&ig, "/r/build", true));
	assert_false(fw_ignore_match(&ig, "/r/build", false));	/* dirs only */
	assert_true(fw_ignore_match(&ig, "/r/build/x.c", false));	/* below it */
	assert_true(fw_ignore_match(&ig, "/r/top", false));
	assert_false(fw_ignore_match(&ig, "/r/sub/top", false));	/* anchored */
	assert_true(fw_ignore_match(&ig, "/r/doc/a.html", false));
	assert_false(fw_ignore_match(&ig, "/r/doc/x/a.html", false));
	assert_true(fw_ignore_match(&ig, "/r/#hash", false));
	assert_true(fw_ignore_match(&ig, "/r/trail", false));
	assert_true(fw_ignore_match(&ig, "/r/esc\\ ", false) ||
		    fw_ignore_match(&ig, "/r/esc ", false));
	/* Nothing below an ignored directory comes back. */
	assert_true(fw_ignore_match(&ig, "/r/deep/inside", false));
	assert_false(fw_ignore_match(&ig, "/elsewhere/a.o", false));
	assert_false(fw_ignore_match(&ig, "/rr/a.o", false));
	fw_ignore_free(&ig);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(globs),
		cmocka_unit_test(rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/* Output lines and escaping: inotifywait's words, RFC 4180 CSV, JSON that round-trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "format.h"
#include "fw-uapi.h"

static char *out;
static size_t outlen;

static FILE *open_out(void)
{
	FILE *f;

	free(out);
	out = NULL;
	f = open_memstream(&out, &outlen);
	assert_non_null(f);
	return f;
}

static const char *print(const struct fw_fmt *fmt, const struct fw_out *e)
{
	FILE *f = open_out();

	fw_print(f, fmt, e, "12:00:00", "2026-12-03T09:00:00.000000Z");
	fclose(f);
	return out;
}

static const char *csv(const char *s)
{
	FILE *f = open_out();

	fw_csv_field(f, s);
	fclose(f);
	return out;
}

static const char *json(const char *s)
{
	FILE *f = open_out();

	fw_json_string(f, s);
	fclose(f);
	return out;
}

static void event_names(void **state)
{
	struct fw_out e = { .mask = FW_CREATE, .isdir = true, .scan = true };
	const char *bad = NULL;
	size_t badlen = 0;
	char buf[64];

	(void)state;
	assert_int_equal(fw_event_names(buf, sizeof(buf), &e, ',', false), 17);
	assert_string_equal(buf, "CREATE,ISDIR,SCAN");
	fw_event_names(buf, sizeof(buf), &e, ',', true);
	assert_string_equal(buf, "CREATE");
	/* As inotifywait prints them: IN_CLOSE named too, no ISDIR on _SELF. */
	e.mask = FW_CLOSE_WRITE;
	e.scan = false;
	fw_event_names(buf, sizeof(buf), &e, ',', false);
	assert_string_equal(buf, "CLOSE_WRITE,CLOSE,ISDIR");
	e.mask = FW_CLOSE_NOWRITE;
	fw_event_names(buf, sizeof(buf), &e, ':', false);
	assert_string_equal(buf, "CLOSE_NOWRITE:CLOSE:ISDIR");
	e.mask = FW_MOVE_SELF;
	fw_event_names(buf, sizeof(buf), &e, ',', false);
	assert_string_equal(buf, "MOVE_SELF");
	e.mask = FW_MOVED_FROM | FW_MOVED_TO;
	e.isdir = e.scan = false;
	fw_event_names(buf, sizeof(buf), &e, ':', false);
	assert_string_equal(buf, "MOVED_FROM:MOVED_TO");
	fw_event_names(buf, 8, &e, ':', false);	/* truncated, still terminated */
	assert_string_equal(buf, "MOVED_F");
	assert_int_equal(fw_parse_events("create,Close,move", &bad, &badlen),
			 FW_CREATE | FW_CLOSE_WRITE | FW_CLOSE_NOWRITE |
			 FW_MOVED_FROM | FW_MOVED_TO);
	assert_int_equal(fw_parse_events("modify,bogus", &bad, &badlen), 0);
	assert_int_equal(badlen, 5);
	assert_memory_equal(bad, "bogus", 5);
	assert_int_equal(fw_parse_events("q_overflow", &bad, &badlen), 0);
}

/* RFC 4180 (and inotifywait's leading/trailing-space rule); raw bytes. */
static void csv_escaping(void **state)
{
	(void)state;
	assert_string_equal(csv("plain name.txt"), "plain name.txt");
	assert_string_equal(csv("back\\slash"), "back\\slash");
	assert_string_equal(csv("a,b"), "\"a,b\"");
	assert_string_equal(csv("say \"hi\""), "\"say \"\"hi\"\"\"");
	assert_string_equal(csv("two\nlines\r"), "\"two\nlines\r\"");
	assert_string_equal(csv(" pad"), "\" pad\"");
	assert_string_equal(csv("bad\xff\x01"), "bad\xff\x01");
	assert_string_equal(csv("caf\xc3\xa9"), "caf\xc3\xa9");
}

static void json_escaping(void **state)
{
	(void)state;
	assert_string_equal(json("a\"b\\c"), "\"a\\\"b\\\\c\"");
	assert_string_equal(json("new\nline\ttab\x01"), "\"new\\nline\\ttab\\u0001\"");
	assert_string_equal(json("bad\xfe"), "\"bad\\udcfe\"");
	assert_string_equal(json("\xe2\x82\xac"), "\"\xe2\x82\xac\"");
	assert_string_equal(json("cut\xe2\x82"), "\"cut\\udce2\\udc82\"");
}

static void lines(void **state)
{
	struct fw_fmt text = { 0 }, c = { .style = FW_STYLE_CSV },
		      j = { .style = FW_STYLE_JSON },
		      f = { .format = "%T %w%f %e %:e %o|%%%0x" };
	struct fw_out e = { .mask = FW_CREATE, .isdir = true, .dir = "w/", .name = "d" };
	struct fw_out r = { .mask = FW_MOVED_FROM | FW_MOVED_TO, .dir = "w/b/",
			    .name = "new\n", .odir = "w/a/", .oname = "old", .self = true,
			    .cookie = 7 };
	struct fw_fmt fc = { .format = "%c %e %w%f" };

	(void)state;
	assert_string_equal(print(&text, &e), "w/ CREATE,ISDIR d\n");
	assert_string_equal(print(&text, &r), "w/b/ MOVED_FROM,MOVED_TO new\n <- w/a/old\n");
	assert_string_equal(print(&c, &e), "w/,\"CREATE,ISDIR\",d\n");
	assert_string_equal(print(&c, &r), "w/b/,\"MOVED_FROM,MOVED_TO\",\"new\n\"\n");
	assert_string_equal(print(&j, &r),
		"{\"schema\":2,\"read_time\":\"2026-12-03T09:00:00.000000Z\",\"events\":[\"MOVED_FROM\",\"MOVED_TO\"],"
		"\"path\":\"w/b/new\\n\",\"old_path\":\"w/a/old\",\"cookie\":7,\"is_dir\":false,"
		"\"own_event\":true,\"scan\":false}\n");
	r.mask = FW_MOVED_TO;
	assert_string_equal(print(&fc, &r), "7 MOVED_TO w/b/new\n\n");
	print(&f, &e);
	assert_int_equal(outlen, strlen("12:00:00 w/d CREATE,ISDIR CREATE:ISDIR |%") + 3);
	assert_string_equal(out, "12:00:00 w/d CREATE,ISDIR CREATE:ISDIR |%");
	assert_memory_equal(out + outlen - 3, "\0x\n", 3);
	assert_true(fw_format_wants_time(f.format));
	assert_false(fw_format_wants_time("%w%f"));
	free(out);
	out = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(event_names),
		cmocka_unit_test(csv_escaping),
		cmocka_unit_test(json_escaping),
		cmocka_unit_test(lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * kfence-report unit tests on golden reports captured from our guest: the
 * tree's KFENCE KUnit suite (every report kind the kernel has) and the
 * kfence-drill module, as dmesg text and as raw /dev/kmsg records. The
 * data files are the program's arguments (absolute paths), so the same
 * binary runs on the host and in the guest.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static const char *data_files[16];
static size_t n_data_files;

/* The reports of one parse, deep-copied through the text they print as. */
struct collected {
	size_t n;
	struct kfr_report r[64];
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void copy_stack(struct kfr_stack *d, const struct kfr_stack *s)
{
	d->n = s->n;
	for (size_t i = 0; i < s->n; i++) {
		d->frames[i] = strdup(s->frames[i]);
		d->src[i] = dup_or_null(s->src[i]);
	}
}

static void copy_track(struct kfr_track *d, const struct kfr_track *s)
{
	*d = *s;
	d->time = dup_or_null(s->time);
	copy_stack(&d->stack, &s->stack);
}

static void collect(const struct kfr_report *r, void *arg)
{
	struct collected *c = arg;
	struct kfr_report *d;

	if (c->n >= sizeof(c->r) / sizeof(c->r[0])) {
		c->n++;
		return;
	}
	d = &c->r[c->n++];
	*d = *r;
	d->kind = dup_or_null(r->kind);
	d->access = dup_or_null(r->access);
	d->function = dup_or_null(r->function);
	d->location = dup_or_null(r->location);
	d->module = dup_or_null(r->module);
	d->address = dup_or_null(r->address);
	d->side = dup_or_null(r->side);
	d->object_start = dup_or_null(r->object_start);
	d->object_end = dup_or_null(r->object_end);
	d->cache = dup_or_null(r->cache);
	d->corrupted = dup_or_null(r->corrupted);
	d->comm = dup_or_null(r->comm);
	d->time = dup_or_null(r->time);
	d->guilty = dup_or_null(r->guilty);
	d->title = dup_or_null(r->title);
	d->bad_access = dup_or_null(r->bad_access);
	d->taint = dup_or_null(r->taint);
	d->release = dup_or_null(r->release);
	d->wallclock = dup_or_null(r->wallclock);
	d->caller = dup_or_null(r->caller);
	d->host = dup_or_null(r->host);
	copy_stack(&d->stack, &r->stack);
	copy_track(&d->alloc, &r->alloc);
	copy_track(&d->free, &r->free);
}

static void collected_free(struct collected *c)
{
	size_t n = c->n < 64 ? c->n : 64;

	for (size_t i = 0; i < n; i++)
		kfr_report_clear(&c->r[i]);
	free(c);
}

static const char *data_path(const char *name)
{
	for (size_t i = 0; i < n_data_files; i++) {
		char *copy = strdup(data_files[i]);
		bool match = !strcmp(basename(copy), name);

		free(copy);
		if (match)
			return data_files[i];
	}
	return NULL;
}

static char *slurp(const char *name, size_t *len)
{
	const char *path = data_path(name);
	FILE *f;
	char *buf;
	long n;

	if (!path)
		fail_msg("data file %s was not given on the command line", name);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Feed the first @len bytes of @text, line by line. */
static struct collected *parse_text(const char *text, size_t len)
{
	struct collected *c = calloc(1, sizeof(*c));
	struct kfr_parser p;
	char *copy = strndup(text, len), *line, *save = NULL;

	assert_non_null(c);
	kfr_parser_init(&p, collect, c);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		kfr_parser_line(&p, line);
	kfr_parser_finish(&p);
	free(copy);
	return c;
}

static struct collected *parse_file(const char *name)
{
	size_t len;
	char *text = slurp(name, &len);
	struct collected *c = parse_text(text, len);

	free(text);
	return c;
}

static const struct kfr_report *find(const struct collected *c, const char *function,
				     size_t nth)
{
	for (size_t i = 0; i < c->n && i < 64; i++)
		if (c->r[i].function && !strcmp(c->r[i].function, function) && nth-- == 0)
			return &c->r[i];
	fail_msg("no report #%zu in %s", nth, function);
	return NULL;
}

static void assert_str(const char *got, const char *want)
{
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
}

static void test_kunit_all_reports(void **state)
{
	struct collected *c = parse_file("kunit-dmesg.log");

	(void)state;
	/* 25 cases; 23 reports in this run's log, all with their footer */
	assert_int_equal(c->n, 23);
	for (size_t i = 0; i < c->n; i++) {
		assert_true(c->r[i].complete);
		assert_int_equal(c->r[i].pid > 0, 1);
		assert_str(c->r[i].comm, "kunit_try_catch");
		assert_true(c->r[i].stack.n >= 1);
		/* the title names the frame the access stack starts with */
		assert_int_equal(strncmp(c->r[i].stack.frames[0], c->r[i].function,
					 strlen(c->r[i].function)), 0);
	}
	collected_free(c);
}

static void test_kunit_out_of_bounds(void **state)
{
	struct collected *c = parse_file("kunit-dmesg.log");
	const struct kfr_report *r = find(c, "test_out_of_bounds_read", 0);

	(void)state;
	assert_str(r->kind, "out-of-bounds");
	assert_str(r->access, "read");
	assert_str(r->location, "test_out_of_bounds_read+0x73/0x15b");
	assert_null(r->module);
	assert_str(r->address, "0x(____ptrval____)");
	assert_true(r->has_offset);
	assert_int_equal(r->offset, 1);
	assert_str(r->side, "left");
	assert_int_equal(r->object, 38);
	assert_int_equal(r->size, 32);
	assert_str(r->cache, "kmalloc-32");
	assert_str(r->time, "0.497808");
	assert_int_equal(r->cpu, 0);
	assert_int_equal(r->pid, 31);
	assert_int_equal(r->stack.n, 5);
	assert_str(r->stack.frames[4], "ret_from_fork+0x1f/0x30");
	assert_true(r->alloc.present);
	assert_int_equal(r->alloc.pid, 31);
	assert_str(r->alloc.time, "0.496803");
	assert_int_equal(r->alloc.stack.n, 6);
	assert_str(r->alloc.stack.frames[0], "test_alloc+0xde/0x2b2");
	assert_false(r->free.present);

	r = find(c, "test_out_of_bounds_read", 1);
	assert_int_equal(r->offset, 32);
	assert_str(r->side, "right");

	r = find(c, "test_out_of_bounds_write", 0);
	assert_str(r->kind, "out-of-bounds");
	assert_str(r->access, "write");
	collected_free(c);
}

static void test_kunit_use_after_free(void **state)
{
	struct collected *c = parse_file("kunit-dmesg.log");
	const struct kfr_report *r = find(c, "test_use_after_free_read", 0);

	(void)state;
	assert_str(r->kind, "use-after-free");
	assert_str(r->access, "read");
	assert_int_equal(r->object, 95);
	/* addresses are hashed: no offset can be worked out */
	assert_false(r->has_offset);
	assert_true(r->alloc.present);
	assert_true(r->free.present);
	assert_int_equal(r->free.pid, 35);
	assert_int_equal(r->free.cpu, 0);
	assert_str(r->free.time, "0.635540");
	assert_str(r->free.stack.frames[0], "test_use_after_free_read+0x72/0xbc");
	collected_free(c);
}

static void test_kunit_corruption(void **state)
{
	struct collected *c = parse_file("kunit-dmesg.log");
	const struct kfr_report *r = find(c, "test_corruption", 0);

	(void)state;
	assert_str(r->kind, "memory-corruption");
	assert_null(r->access);
	assert_str(r->corrupted, "[ ! . . . . . . . . . . . . . . . ]");
	assert_int_equal(r->object, 85);
	assert_true(r->free.present);

	r = find(c, "test_kmalloc_aligned_oob_write", 0);
	assert_str(r->kind, "memory-corruption");
	assert_str(r->cache, "kmalloc-96");
	collected_free(c);
}

static void test_kunit_invalid(void **state)
{
	struct collected *c = parse_file("kunit-dmesg.log");
	const struct kfr_report *r = find(c, "test_invalid_access", 0);

	(void)state;
	assert_str(r->kind, "invalid-access");
	assert_str(r->access, "read");
	assert_int_equal(r->object, -1);
	assert_false(r->alloc.present);
	assert_int_equal(r->stack.n, 5);

	r = find(c, "test_double_free", 0);
	assert_str(r->kind, "invalid-free");
	assert_null(r->access);
	assert_int_equal(r->object, 132);
	assert_true(r->free.present);

	r = find(c, "test_invalid_addr_free", 0);
	assert_str(r->kind, "invalid-free");
	assert_false(r->free.present);
	collected_free(c);
}

static const struct {
	const char *function, *kind, *access;
} drill[] = {
	{ "drill_oob_read", "out-of-bounds", "read" },
	{ "drill_oob_write", "out-of-bounds", "write" },
	{ "drill_redzone_write", "memory-corruption", NULL },
	{ "drill_uaf_read", "use-after-free", "read" },
	{ "drill_uaf_write", "use-after-free", "write" },
	{ "drill_invalid_free", "invalid-free", NULL },
	{ "drill_double_free", "invalid-free", NULL },
};

static void check_drill(const struct collected *c)
{
	assert_int_equal(c->n, 7);
	for (size_t i = 0; i < 7; i++) {
		const struct kfr_report *r = &c->r[i];

		assert_str(r->function, drill[i].function);
		assert_str(r->kind, drill[i].kind);
		assert_str(r->access, drill[i].access);
		assert_str(r->module, "kfence_drill");
		assert_str(r->cache, "kmalloc-32");
		assert_int_equal(r->size, 32);
		assert_str(r->comm, "sh");
		assert_true(r->complete);
		/* the allocation came from the drill, through kmalloc */
		assert_true(r->alloc.stack.n >= 3);
		assert_int_equal(strncmp(r->alloc.stack.frames[2], "drill_get_object+", 17), 0);
		/* a bug found at free is reported with the free as its stack */
		if (!strcmp(drill[i].kind, "invalid-free") ||
		    !strcmp(drill[i].kind, "memory-corruption"))
			assert_int_equal(strncmp(r->stack.frames[0], "kfree+", 6) &&
					 strncmp(r->stack.frames[0], "drill_", 6), 0);
	}
	/* KFENCE puts each object at a random end of its page: the drill
	 * reads and writes on whichever side the guard page is
	 */
	assert_true(c->r[0].has_offset);
	assert_int_equal(c->r[0].offset, !strcmp(c->r[0].side, "left") ? 1 : 32);
	assert_non_null(c->r[2].corrupted);
	assert_true(c->r[3].free.present);
	assert_true(c->r[6].free.present);
	assert_false(c->r[5].free.present);
}

static void test_drill_dmesg(void **state)
{
	struct collected *c = parse_file("drill-dmesg.log");

	(void)state;
	check_drill(c);
	collected_free(c);
}

static void assert_same_stack(const struct kfr_stack *a, const struct kfr_stack *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		assert_string_equal(a->frames[i], b->frames[i]);
}

/* /dev/kmsg records (with \x0a escapes) read the same as dmesg text. */
static void test_drill_kmsg(void **state)
{
	struct collected *k = parse_file("drill-kmsg.log");
	struct collected *d = parse_file("drill-dmesg.log");

	(void)state;
	check_drill(k);
	for (size_t i = 0; i < 7; i++) {
		assert_str(k->r[i].time, d->r[i].time);
		assert_str(k->r[i].location, d->r[i].location);
		assert_str(k->r[i].address, d->r[i].address);
		assert_int_equal(k->r[i].object, d->r[i].object);
		assert_str(k->r[i].alloc.time, d->r[i].alloc.time);
		assert_same_stack(&k->r[i].stack, &d->r[i].stack);
		assert_same_stack(&k->r[i].alloc.stack, &d->r[i].alloc.stack);
		assert_same_stack(&k->r[i].free.stack, &d->r[i].free.stack);
	}
	collected_free(k);
	collected_free(d);
}

/*
 * Booted with no_hash_pointers: real addresses (so offsets can be worked
 * out for every kind), the redzone bytes, and a register dump and call
 * trace after the footer that must not leak into the stacks.
 */
static void test_drill_no_hash_pointers(void **state)
{
	struct collected *c = parse_file("drill-nohash-dmesg.log");

	(void)state;
	check_drill(c);
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(c->r[i].stack.n, 7);
		assert_true(c->r[i].has_offset);
		assert_int_equal(strncmp(c->r[i].address, "0xff", 4), 0);
	}
	assert_str(c->r[2].corrupted, "[ 0x2a ]");
	/* the redzone write is one byte outside the object, either side */
	assert_int_equal(c->r[2].offset, !strcmp(c->r[2].side, "left") ? 1 : 32);
	/* use-after-free at the object's first byte; the invalid free at +1 */
	assert_str(c->r[3].side, "inside");
	assert_int_equal(c->r[3].offset, 0);
	assert_str(c->r[5].side, "inside");
	assert_int_equal(c->r[5].offset, 1);
	collected_free(c);
}

/* Every prefix a saved log may carry gives the same message and time. */
static void test_prefixes(void **state)
{
	static const struct {
		const char *line, *caller, *host, *wall, *release;
		long long seq;
	} cases[] = {
		{ "[   12.345678] BUG: KFENCE: x", "", "", "", "", -1 },
		{ "  | [   12.345678] BUG: KFENCE: x", "", "", "", "", -1 },
		{ "<3>[   12.345678] BUG: KFENCE: x", "", "", "", "", -1 },
		{ "[   12.345678][  T123] BUG: KFENCE: x", "T123", "", "", "", -1 },
		{ "[   12.345678] [  T123] BUG: KFENCE: x", "T123", "", "", "", -1 },
		{ "[   12.345678] [ T6006]c7   6006 BUG: KFENCE: x", "T6006", "", "", "", -1 },
		{ "3,1234,12345678,-;BUG: KFENCE: x", "", "", "", "", 1234 },
		{ "3,1234,12345678,-,caller=C1;BUG: KFENCE: x", "C1", "", "", "", 1234 },
		{ "6.1.0-18-amd64,3,1234,12345678,-;BUG: KFENCE: x", "", "", "",
		  "6.1.0-18-amd64", 1234 },
		{ "Dec  3 10:00:00 host kernel: [   12.345678] BUG: KFENCE: x", "", "host",
		  "Dec  3 10:00:00", "", -1 },
		{ "[   12.345678] host kernel: BUG: KFENCE: x", "", "host", "", "", -1 },
		{ "2026-12-03T10:00:00+0000 host kernel: [   12.345678] BUG: KFENCE: x", "",
		  "host", "2026-12-03T10:00:00+0000", "", -1 },
	};
	struct kfr_prefix px;
	const char *msg;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msg = kfr_message(cases[i].line, &px);
		/* the parser skips the space after the prefix */
		assert_string_equal(msg + (msg[0] == ' '), "BUG: KFENCE: x");
		assert_string_equal(px.ts, "12.345678");
		assert_string_equal(px.caller, cases[i].caller);
		assert_string_equal(px.host, cases[i].host);
		assert_string_equal(px.wallclock, cases[i].wall);
		assert_string_equal(px.release, cases[i].release);
		assert_true(px.seq == cases[i].seq);
		assert_int_equal(px.escaped, cases[i].seq >= 0);
	}
	msg = kfr_message("[Thu Dec  3 17:39:26 2026] BUG: KFENCE: x", &px);
	assert_string_equal(msg, " BUG: KFENCE: x");
	assert_string_equal(px.wallclock, "Thu Dec  3 17:39:26 2026");
	assert_string_equal(px.ts, "");
	assert_string_equal(kfr_message("BUG: KFENCE: x", &px), "BUG: KFENCE: x");
	assert_string_equal(px.ts, "");
}

/* A log cut at any line: never a crash, at most one incomplete report. */
static void test_truncated_everywhere(void **state)
{
	size_t len, cut, incomplete;
	char *text = slurp("kunit-dmesg.log", &len);
	struct collected *c;

	(void)state;
	for (cut = 0; cut <= len; cut += 97) {
		c = parse_text(text, cut);
		assert_true(c->n <= 23);
		incomplete = 0;
		for (size_t i = 0; i < c->n; i++)
			incomplete += !c->r[i].complete;
		assert_true(incomplete <= 1);
		collected_free(c);
	}
	free(text);
}

/* Lines lost from the middle of a report: the rest is still read. */
static void test_lost_lines(void **state)
{
	const char *text =
		"[ 1.0] ==================================================================\n"
		"[ 1.0] BUG: KFENCE: use-after-free write in drill_uaf_write+0x1/0x2 [kfence_drill]\n"
		"[ 1.1]  drill_uaf_write+0x1/0x2 [kfence_drill]\n"
		"[ 1.1]  fire_write+0x3/0x4 [kfence_drill]\n"
		"[ 1.1] random: something unrelated\n"
		"[ 1.2] BUG: KFENCE: invalid free in drill_double_free+0x1/0x2 [kfence_drill]\n"
		"[ 1.2] Invalid free of 0x(ptrval) (in kfence-#7):\n"
		"[ 1.2] ==================================================================\n";
	struct collected *c = parse_text(text, strlen(text));

	(void)state;
	assert_int_equal(c->n, 2);
	assert_str(c->r[0].kind, "use-after-free");
	assert_str(c->r[0].access, "write");
	assert_str(c->r[0].function, "drill_uaf_write");
	assert_str(c->r[0].module, "kfence_drill");
	assert_int_equal(c->r[0].stack.n, 2);
	assert_false(c->r[0].complete);
	assert_str(c->r[1].kind, "invalid-free");
	assert_int_equal(c->r[1].object, 7);
	assert_false(c->r[1].complete);
	collected_free(c);
}

/* A serial console at loglevel 4 shows only the KERN_ERR lines. */
static void test_console_only(void **state)
{
	const char *text =
		"[    0.497505] ==================================================================\n"
		"[    0.497808] BUG: KFENCE: out-of-bounds read in test_out_of_bounds_read+0x73/0x15b\n"
		"[    0.497808] \n"
		"[    0.498347] Out-of-bounds read at 0x(____ptrval____) (1B left of kfence-#38):\n"
		"[    0.498616] \n"
		"[    0.499044] \n"
		"[    0.499242] CPU: 0 PID: 31 Comm: kunit_try_catch Tainted: G                 N 6.1.192 #1 \n"
		"[    0.499494] ==================================================================\n";
	struct collected *c = parse_text(text, strlen(text));

	(void)state;
	assert_int_equal(c->n, 1);
	assert_str(c->r[0].kind, "out-of-bounds");
	assert_int_equal(c->r[0].object, 38);
	assert_int_equal(c->r[0].offset, 1);
	assert_int_equal(c->r[0].pid, 31);
	assert_false(c->r[0].complete);
	collected_free(c);
}

/*
 * A 5.12-style object line cut right after its "]" (the fuzzer's find):
 * nothing is read past the end of the line, and the object is still kept.
 */
static void test_object_line_cut_at_bracket(void **state)
{
	const char *text =
		"[ 1.0] BUG: KFENCE: invalid free in drill_double_free+0x1/0x2\n"
		"[ 1.0] Invalid free of 0x(ptrval) (in kfence-#7):\n"
		"[ 1.0] kfence-#7 [0x1000-0x1007, size=8, cache=kmalloc-8]";
	struct collected *c = parse_text(text, strlen(text));

	(void)state;
	assert_int_equal(c->n, 1);
	assert_int_equal(c->r[0].object, 7);
	assert_int_equal(c->r[0].size, 8);
	assert_str(c->r[0].cache, "kmalloc-8");
	assert_false(c->r[0].alloc.present);
	collected_free(c);
}

/* Garbage in: bytes flipped at random never crash the parser. */
static void garble(const char *name)
{
	size_t len;
	char *text = slurp(name, &len);
	unsigned int seed = 1;

	for (int round = 0; round < 50; round++) {
		char *g = strdup(text);

		for (int i = 0; i < 200; i++) {
			seed = seed * 1103515245 + 12345;
			g[(seed >> 8) % len] = (char)(seed >> 16 | 1);
		}
		collected_free(parse_text(g, len));
		free(g);
	}
	free(text);
}

static void test_garbled(void **state)
{
	(void)state;
	garble("kunit-dmesg.log");
	garble("drill-kmsg.log");
}

static void test_json_escapes(void **state)
{
	struct kfr_report r;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	(void)state;
	memset(&r, 0, sizeof(r));
	kfr_report_clear(&r);
	r.kind = strdup("use-after-free");
	r.comm = strdup("a\"b\\c\x01\xff");
	r.time = strdup("1..2");
	kfr_print_json(f, &r, NULL);
	fclose(f);
	assert_non_null(strstr(buf, "\"comm\":\"a\\\"b\\\\c\\u0001\\u00ff\""));
	/* a time that is not a number is null: the field is a number or null */
	assert_non_null(strstr(buf, "\"time\":null"));
	assert_non_null(strstr(buf, "\"object\":null"));
	free(buf);
	kfr_report_clear(&r);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kunit_all_reports),
		cmocka_unit_test(test_kunit_out_of_bounds),
		cmocka_unit_test(test_kunit_use_after_free),
		cmocka_unit_test(test_kunit_corruption),
		cmocka_unit_test(test_kunit_invalid),
		cmocka_unit_test(test_drill_dmesg),
		cmocka_unit_test(test_drill_kmsg),
		cmocka_unit_test(test_drill_no_hash_pointers),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_truncated_everywhere),
		cmocka_unit_test(test_lost_lines),
		cmocka_unit_test(test_console_only),
		cmocka_unit_test(test_object_line_cut_at_bracket),
		cmocka_unit_test(test_garbled),
		cmocka_unit_test(test_json_escapes),
	};

	for (int i = 1; i < argc && n_data_files < 16; i++)
		data_files[n_data_files++] = argv[i];
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: the input is a kernel log; every line goes through the
 * prefix reader and the parser, every record through each printer, the
 * bucket key and the --summary buckets (printed as text and JSON at the end),
 * and the whole input is read once more as a --stats file, whose JSON must
 * be ASCII with no key twice (checked here: a sanitizer would not see it).
 * The fast path kfence-report reads files with (kfr_parser_skip over whole
 * buffers) must give exactly the records of the line-by-line parse. Build: meson with CC=clang (target fuzz-kfence-report), or
 * kfence-tools/fuzz/run-fuzz.sh, which also runs it on the seed corpus.
 */
#include "fleet.h"
#include "report.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *sink;

static void on_report(const struct kfr_report *r, void *arg)
{
	struct kfr_meta m = { .boot_id = "b", .host = NULL, .release = "r" };
	char bucket[512];

	if (arg)
		kfr_buckets_add(arg, r, "seen");
	kfr_print_json(sink, r, &m);
	kfr_print_text(sink, r, 1);
	kfr_print_brief(sink, r);
	kfr_print_expect(sink, r);
	kfr_bucket(r, 3, bucket, sizeof(bucket));
	fputs(bucket, sink);
}

/* The keys of the "stats" object: printable ASCII, each once. */
static void check_stats_json(const char *out, size_t n)
{
	const char *k = strstr(out, "\"stats\":{"), *e;
	char seen[64][80];
	size_t nk = 0;

	for (size_t i = 0; i < n; i++)
		assert(out[i] == '\n' || (out[i] >= 0x20 && out[i] < 0x7f));
	if (!k)
		return;
	for (k += 9; *k == '"' || (*k == ',' && *++k == '"'); k = e + strcspn(e, ",}")) {
		e = strchr(k + 1, '"');
		assert(e && e - k - 1 < 80);
		for (size_t i = 0; i < nk; i++)
			assert(strncmp(seen[i], k + 1, (size_t)(e - k - 1)) || seen[i][e - k - 1]);
		if (nk < 64)
			snprintf(seen[nk++], sizeof(seen[0]), "%.*s", (int)(e - k - 1), k + 1);
	}
}

/* The input as a --stats file, as text and as JSON. */
static void fuzz_stats(const uint8_t *data, size_t size)
{
	char *out = NULL;
	size_t n = 0;
	FILE *in, *o;

	for (int json = 0; json < 2; json++) {
		in = fmemopen((void *)data, size, "r");
		o = open_memstream(&out, &n);
		if (!in || !o)
			abort();
		kfr_stats_print(o, in, NULL, 100, json);
		fclose(o);
		fclose(in);
		if (json)
			check_stats_json(out, n);
		free(out);
		out = NULL;
	}
}

static void to_json(const struct kfr_report *r, void *arg)
{
	struct kfr_meta m = { 0 };

	kfr_print_json(arg, r, &m);
}

/* @lines (NUL-separated, @size bytes) parsed line by line and by blocks */
static void same_as_blocks(const char *data, size_t size)
{
	char *a = NULL, *b = NULL, *buf = malloc(size + 1), *s, *nl, *end;
	size_t an = 0, bn = 0;
	struct kfr_parser p;
	struct kfr_scan sc = { 0 };
	FILE *fa = open_memstream(&a, &an), *fb = open_memstream(&b, &bn);

	if (!buf || !fa || !fb)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	kfr_parser_init(&p, to_json, fa);
	for (s = buf; s; s = nl ? nl + 1 : NULL) {
		nl = memchr(s, '\n', size - (size_t)(s - buf));
		if (nl)
			*nl = '\0';
		kfr_parser_line(&p, s);
		if (nl)
			*nl = '\n';
	}
	kfr_parser_finish(&p);
	kfr_parser_free(&p);
	kfr_parser_init(&p, to_json, fb);
	end = buf + size;
	for (s = buf; s <= end; s = nl + 1) {
		s = (char *)kfr_parser_skip(&p, &sc, s, end);
		if (s >= end && (s > buf && s[-1] == '\n'))
			break;
		nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			nl = end;
		*nl = '\0';
		kfr_parser_line(&p, s);
	}
	kfr_parser_finish(&p);
	kfr_parser_free(&p);
	fclose(fa);
	fclose(fb);
	if (an != bn || memcmp(a, b, an)) {
		fprintf(stderr, "line-by-line and block parses differ:\n%.*s\n---\n%.*s\n",
			(int)an, a, (int)bn, b);
		abort();
	}
	free(a);
	free(b);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kfr_buckets *b = kfr_buckets_new(3);
	struct kfr_parser p;
	struct kfr_report rec;
	char *buf = malloc(size + 1), *line, *nl, out[256];

	if (!buf)
		return 0;
	if (!sink)
		sink = fopen("/dev/null", "w");
	memcpy(buf, data, size);
	buf[size] = '\0';
	kfr_parser_init(&p, on_report, b);
	memset(&rec, 0, sizeof(rec));
	kfr_report_clear(&rec);
	for (line = buf; line; line = nl ? nl + 1 : NULL) {
		nl = memchr(line, '\n', size - (size_t)(line - buf));
		if (nl)
			*nl = '\0';
		kfr_parser_line(&p, line);
		kfr_kasan_bad_access(line, out, sizeof(out));
		if (kfr_json_record(line, &rec))
			on_report(&rec, b);
		if (line[0] == '\1')
			kfr_parser_lost(&p);
		if (line[0] == '\2')
			kfr_parser_finish(&p);
		if (line[0] == '\3')
			kfr_parser_next_input(&p);	/* the next rotated file */
	}
	kfr_parser_finish(&p);
	kfr_parser_free(&p);
	kfr_report_clear(&rec);
	/* --summary: the text table and the JSON lines, even of no bucket */
	kfr_buckets_print(sink, b, false);
	kfr_buckets_print(sink, b, true);
	kfr_buckets_free(b);
	if (size)
		fuzz_stats(data, size);
	same_as_blocks((const char *)data, size);
	free(buf);
	return 0;
}

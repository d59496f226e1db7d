// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: the input is a kernel log; every line goes through the
 * prefix reader and the parser, every record through each printer and the
 * bucket key. Build: meson with CC=clang (target fuzz-kfence-report), or
 * kfence-tools/fuzz/run-fuzz.sh, which also runs it on the seed corpus.
 */
#include "fleet.h"
#include "report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *sink;

static void on_report(const struct kfr_report *r, void *arg)
{
	struct kfr_meta m = { .boot_id = "b", .host = NULL, .release = "r" };
	char bucket[512];

	(void)arg;
	kfr_print_json(sink, r, &m);
	kfr_print_text(sink, r, 1);
	kfr_print_brief(sink, r);
	kfr_print_expect(sink, r);
	kfr_bucket(r, 3, bucket, sizeof(bucket));
	fputs(bucket, sink);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kfr_parser p;
	struct kfr_report rec;
	char *buf = malloc(size + 1), *line, *nl, out[256];

	if (!buf)
		return 0;
	if (!sink)
		sink = fopen("/dev/null", "w");
	memcpy(buf, data, size);
	buf[size] = '\0';
	kfr_parser_init(&p, on_report, NULL);
	memset(&rec, 0, sizeof(rec));
	kfr_report_clear(&rec);
	for (line = buf; line; line = nl ? nl + 1 : NULL) {
		nl = memchr(line, '\n', size - (size_t)(line - buf));
		if (nl)
			*nl = '\0';
		kfr_parser_line(&p, line);
		kfr_kasan_bad_access(line, out, sizeof(out));
		if (kfr_json_record(line, &rec))
			on_report(&rec, NULL);
		if (line[0] == '\1')
			kfr_parser_lost(&p);
		if (line[0] == '\2')
			kfr_parser_finish(&p);
	}
	kfr_parser_finish(&p);
	kfr_parser_free(&p);
	kfr_report_clear(&rec);
	free(buf);
	return 0;
}

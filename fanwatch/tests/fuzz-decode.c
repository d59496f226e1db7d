// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target for the event decoder: any bytes a read() could return
 * (a hostile or buggy kernel, a truncated buffer) are split into events
 * without reading outside the buffer, and every name found is escaped for
 * each output format.  Seeds: tests/fuzz-corpus (made by mkcorpus.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "format.h"

static void use_name(FILE *f, const struct fw_obj *o)
{
	if (o->name) {
		fw_json_string(f, o->name);
		fw_csv_field(f, o->name);
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t len)
{
	static FILE *null;
	/* A copy with the alignment read() gives: the decoder relies on it. */
	unsigned long long *buf = malloc(len + 8);
	size_t off = 0, n = 0;
	struct fw_raw ev;
	int r;

	if (!null)
		null = fopen("/dev/null", "w");
	if (!buf)
		return 0;
	memcpy(buf, data, len);
	while ((r = fw_decode(buf, len, &off, &ev)) != FW_DECODE_END && n++ < 100000) {
		if (off > len)
			abort();
		if (r == FW_DECODE_OK) {
			use_name(null, &ev.dir);
			use_name(null, &ev.old);
			use_name(null, &ev.new);
		}
	}
	free(buf);
	return 0;
}

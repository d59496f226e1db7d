// SPDX-License-Identifier: LGPL-2.1-or-later
/* Record parsing against synthetic event buffers, laid out as the kernel does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "decode.h"

struct buf {
	unsigned char b[4096] __attribute__((aligned(8)));
	size_t len;
	size_t ev;	/* start of the event being built */
};

static void begin(struct buf *b, uint64_t mask, int32_t pid)
{
	struct fw_event_metadata md = {
		.event_len = sizeof(md), .vers = FW_METADATA_VERSION,
		.metadata_len = sizeof(md), .mask = mask, .fd = FW_NOFD, .pid = pid,
	};

	b->ev = b->len;
	memcpy(b->b + b->len, &md, sizeof(md));
	b->len += sizeof(md);
}

/* A fid record: fsid, a 8-byte handle whose bytes are `tag`, maybe a name. */
static void record(struct buf *b, uint8_t type, unsigned char tag, const char *name)
{
	struct fw_info_fid info = { .hdr.info_type = type, .fsid = { 7, 9 } };
	struct { struct file_handle fh; unsigned char h[8]; } fh = {
		.fh.handle_bytes = 8, .fh.handle_type = 1,
	};
	size_t start = b->len, nlen = name ? strlen(name) + 1 : 0;
	uint32_t event_len;

	memset(fh.h, tag, sizeof(fh.h));
	b->len += sizeof(info);
	memcpy(b->b + b->len, &fh, sizeof(fh));
	b->len += sizeof(fh);
	if (name)
		memcpy(b->b + b->len, name, nlen);
	b->len += nlen;
	b->len = (b->len + 3) & ~(size_t)3;	/* the kernel pads records to 4 */
	info.hdr.len = b->len - start;
	memcpy(b->b + start, &info, sizeof(info));
	/* events may start 4-aligned, like the kernel's: no struct store there */
	event_len = (uint32_t)(b->len - b->ev);
	memcpy(b->b + b->ev + offsetof(struct fw_event_metadata, event_len), &event_len,
	       sizeof(event_len));
}

static void several_records(void **state)
{
	struct buf b = { 0 };
	struct fw_raw ev;
	size_t off = 0;

	(void)state;
	begin(&b, FW_CREATE | FW_ONDIR, 0);
	record(&b, FW_INFO_DFID_NAME, 0xaa, "sub");
	record(&b, FW_INFO_FID, 0xbb, NULL);
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_OK);
	assert_int_equal(off, b.len);
	assert_int_equal(ev.nrec, 2);
	assert_string_equal(ev.dir.name, "sub");
	assert_int_equal(ev.dir.fsid[0], 7);
	assert_int_equal(ev.dir.fh->f_handle[0], 0xaa);
	assert_non_null(ev.child.fh);
	assert_null(ev.child.name);
	assert_int_equal(ev.child.fh->f_handle[7], 0xbb);
	assert_null(ev.old.fsid);
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_END);
}

static void rename_three_records(void **state)
{
	struct buf b = { 0 };
	struct fw_raw ev;
	size_t off = 0;

	(void)state;
	begin(&b, FW_RENAME, 42);
	record(&b, FW_INFO_OLD_DFID_NAME, 1, "from");
	record(&b, FW_INFO_NEW_DFID_NAME, 2, "to");
	record(&b, FW_INFO_FID, 3, NULL);
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_OK);
	assert_int_equal(ev.nrec, 3);
	assert_int_equal(ev.pid, 42);
	assert_string_equal(ev.old.name, "from");
	assert_string_equal(ev.new.name, "to");
	assert_int_equal(ev.new.fh->f_handle[0], 2);
	assert_int_equal(ev.child.fh->f_handle[0], 3);
	assert_null(ev.dir.fsid);
}

static void dot_name_and_unknown_record(void **state)
{
	struct buf b = { 0 };
	struct fw_raw ev;
	size_t off = 0;

	(void)state;
	begin(&b, FW_DELETE_SELF | FW_ONDIR, 0);
	record(&b, 4 /* pidfd-like: skipped by length */, 0, NULL);
	record(&b, FW_INFO_DFID_NAME, 5, ".");
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_OK);
	assert_int_equal(ev.nrec, 2);
	assert_string_equal(ev.dir.name, ".");
}

static void overflow_then_event(void **state)
{
	struct buf b = { 0 };
	struct fw_raw ev;
	size_t off = 0;

	(void)state;
	begin(&b, FW_Q_OVERFLOW, 0);	/* no record: event_len is the header */
	begin(&b, FW_MODIFY, 0);
	record(&b, FW_INFO_DFID_NAME, 1, "f");
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_OK);
	assert_true(ev.overflow);
	assert_int_equal(ev.nrec, 0);
	assert_int_equal(off, sizeof(struct fw_event_metadata));
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_OK);
	assert_false(ev.overflow);
	assert_string_equal(ev.dir.name, "f");
}

static void malformed(void **state)
{
	struct buf b = { 0 };
	struct fw_event_metadata *md;
	struct fw_info_header *hdr;
	struct fw_raw ev;
	size_t off;

	(void)state;
	begin(&b, FW_MODIFY, 0);
	record(&b, FW_INFO_DFID_NAME, 1, "name");
	/* A read cut in the middle of an event: nothing is decoded. */
	off = 0;
	assert_int_equal(fw_decode(b.b, sizeof(*md) - 1, &off, &ev), FW_DECODE_END);
	off = 0;
	assert_int_equal(fw_decode(b.b, b.len - 4, &off, &ev), FW_DECODE_BAD);
	/* A record claiming more than the event holds. */
	hdr = (void *)(b.b + sizeof(*md));
	hdr->len += 64;
	off = 0;
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_BAD);
	assert_int_equal(off, b.len);	/* skipped, the next event is reachable */
	hdr->len -= 64;
	/* A name without its NUL inside the record. */
	memset(b.b + b.len - 8, 'x', 8);
	off = 0;
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_BAD);
	/* A wrong metadata version. */
	md = (void *)b.b;
	md->vers = 2;
	off = 0;
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_BAD);
	/* event_len below the header cannot be walked past. */
	md->event_len = 4;
	off = 0;
	assert_int_equal(fw_decode(b.b, b.len, &off, &ev), FW_DECODE_BAD);
	assert_int_equal(off, b.len);
}

/* Whatever the bytes, decoding ends, stays inside the buffer, and names end in it. */
static void mutated_buffers(void **state)
{
	struct buf b = { 0 };
	unsigned int seed = 1, i;

	(void)state;
	begin(&b, FW_RENAME, 0);
	record(&b, FW_INFO_OLD_DFID_NAME, 1, "from");
	record(&b, FW_INFO_NEW_DFID_NAME, 2, "to");
	begin(&b, FW_Q_OVERFLOW, 0);
	begin(&b, FW_CREATE, 0);
	record(&b, FW_INFO_DFID_NAME, 3, "x");
	record(&b, FW_INFO_FID, 4, NULL);
	for (i = 0; i < 20000; i++) {
		unsigned char m[sizeof(b.b)] __attribute__((aligned(8)));
		size_t off = 0, len = b.len - (i % 7), steps = 0;
		struct fw_raw ev;
		int k;

		memcpy(m, b.b, b.len);
		for (k = 0; k < 1 + (int)(i % 4); k++) {
			seed = seed * 1103515245 + 12345;
			m[(seed >> 8) % b.len] = (unsigned char)(seed >> 20);
		}
		enum fw_decode_ret r;

		while ((r = fw_decode(m, len, &off, &ev)) != FW_DECODE_END) {
			assert_true(off <= len);
			assert_true(++steps <= len);
			if (r == FW_DECODE_OK && ev.dir.name)
				assert_true((const unsigned char *)ev.dir.name + strlen(ev.dir.name) < m + len);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(several_records),
		cmocka_unit_test(rename_three_records),
		cmocka_unit_test(dot_name_and_unknown_record),
		cmocka_unit_test(overflow_then_event),
		cmocka_unit_test(malformed),
		cmocka_unit_test(mutated_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

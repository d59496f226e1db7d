// SPDX-License-Identifier: LGPL-2.1-or-later
/* Frame parsing: every malformed frame is refused with a message naming it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto.h"

static const struct lm_geom geom = { .npages = 100, .page_size = 4096 };
static uint8_t buf[sizeof(struct lm_hdr) + LM_MAX_PAYLOAD];
static uint8_t page[4096 * 2];
static char err[200];

static int decode(size_t len, const struct lm_geom *g)
{
	struct lm_frame f;

	err[0] = 0;
	return lm_frame_decode(buf, len, g, &f, err, sizeof(err));
}

static void expect(int ret, const char *word)
{
	assert_true(ret < 0);
	if (!strstr(err, word))
		fail_msg("error '%s' does not name '%s'", err, word);
}

static void test_valid(void **state)
{
	struct lm_hello h = { .version = LM_VERSION, .size = 1 << 20, .page_size = 4096,
			      .nthreads = 2 };
	struct lm_pages p = { .first = 98, .count = 2 };
	struct lm_resp r = { .page = 5, .status = LM_RESP_DATA };
	struct lm_fin fin = { .npages = 100, .mapped = 100, .verified = 100, .rc = 4 };
	struct lm_progress pr = { .mapped = 50, .phase = LM_PHASE_MAPPING };
	struct lm_geom none = { 0 };
	size_t n;

	(void)state;
	n = lm_frame_encode(buf, sizeof(buf), LM_HELLO, 0, &h, NULL, 0);
	assert_int_equal(decode(n, &none), 0);
	n = lm_frame_encode(buf, sizeof(buf), LM_PAGES, LM_F_PUSH, &p, page, 2 * 4096);
	assert_int_equal(decode(n, &geom), 0);
	n = lm_frame_encode(buf, sizeof(buf), LM_RESP, 0, &r, page, 4096);
	assert_int_equal(decode(n, &geom), 0);
	n = lm_frame_encode(buf, sizeof(buf), LM_FIN, 0, &fin, NULL, 0);
	assert_int_equal(decode(n, &geom), 0);
	fin.rc = 256;
	n = lm_frame_encode(buf, sizeof(buf), LM_FIN, 0, &fin, NULL, 0);
	assert_int_equal(decode(n, &geom), -EBADMSG);
	n = lm_frame_encode(buf, sizeof(buf), LM_PROGRESS, 0, &pr, NULL, 0);
	assert_int_equal(decode(n, &geom), 0);
}

static void test_header(void **state)
{
	struct lm_req q = { .page = 1 };
	struct lm_hdr *h = (struct lm_hdr *)buf;
	size_t n;

	(void)state;
	expect(decode(10, &geom), "truncated frame header");
	n = lm_frame_encode(buf, sizeof(buf), LM_REQ, 0, &q, NULL, 0);
	h->magic ^= 1;
	expect(decode(n, &geom), "magic");
	h->magic ^= 1;
	h->type = 77;
	expect(decode(n, &geom), "unknown frame type 77");
	h->type = LM_REQ;
	h->flags = 0x100;
	expect(decode(n, &geom), "REQ frame: unknown flags");
	h->flags = 0;
	h->len = 1u << 30;
	expect(decode(n, &geom), "oversized REQ");
	h->len = 4;
	expect(decode(n, &geom), "short REQ");
	h->len = sizeof(q);
	expect(decode(n - 1, &geom), "truncated REQ");
}

static void test_payload(void **state)
{
	struct lm_pages p = { .first = 99, .count = 2 };
	struct lm_stale s = { .first = 0, .nbits = 101 };
	struct lm_resp r = { .page = 5, .status = 9 };
	struct lm_hello h = { .version = LM_VERSION, .size = 1 << 20, .page_size = 3000,
			      .nthreads = 2 };
	struct lm_geom none = { 0 };
	struct lm_req q = { .page = 100 };
	struct lm_round rd = { 0 };	/* ROUND's fixed part is larger than a REQ */
	size_t n;

	(void)state;
	n = lm_frame_encode(buf, sizeof(buf), LM_PAGES, 0, &p, page, 2 * 4096);
	expect(decode(n, &geom), "malformed PAGES");
	p.first = 0;
	n = lm_frame_encode(buf, sizeof(buf), LM_PAGES, 0, &p, page, 4096);
	expect(decode(n, &geom), "malformed PAGES");
	n = lm_frame_encode(buf, sizeof(buf), LM_STALE, 0, &s, page, 13);
	expect(decode(n, &geom), "malformed STALE");
	n = lm_frame_encode(buf, sizeof(buf), LM_RESP, 0, &r, NULL, 0);
	expect(decode(n, &geom), "malformed RESP");
	n = lm_frame_encode(buf, sizeof(buf), LM_REQ, 0, &q, NULL, 0);
	expect(decode(n, &geom), "malformed REQ");
	n = lm_frame_encode(buf, sizeof(buf), LM_HELLO, 0, &h, NULL, 0);
	expect(decode(n, &none), "malformed HELLO");
	n = lm_frame_encode(buf, sizeof(buf), LM_REQ, 0, &q, NULL, 0);
	expect(decode(n, &none), "REQ frame before HELLO");
	n = lm_frame_encode(buf, sizeof(buf), LM_ROUND, 0, &rd, page, 8);
	expect(decode(n, &geom), "ROUND frame");
}

/* The handshake comes before HELLO; each field is checked like the rest. */
static void test_handshake(void **state)
{
	struct lm_geom none = { 0 };
	struct lm_challenge ch = { .version = LM_VERSION };
	struct lm_auth a = { .kind = LM_AUTH_URGENT };
	struct lm_refuse r = { .why = LM_REFUSE_BUSY };
	struct lm_need nd = { .first = 96, .nbits = 4 };
	size_t n;

	(void)state;
	n = lm_frame_encode(buf, sizeof(buf), LM_CHALLENGE, 0, &ch, NULL, 0);
	assert_int_equal(decode(n, &none), 0);
	ch.version = LM_VERSION + 1;
	n = lm_frame_encode(buf, sizeof(buf), LM_CHALLENGE, 0, &ch, NULL, 0);
	expect(decode(n, &none), "malformed CHALLENGE frame: protocol version");
	ch.version = LM_VERSION;
	ch.flags = 0x80;
	n = lm_frame_encode(buf, sizeof(buf), LM_CHALLENGE, 0, &ch, NULL, 0);
	expect(decode(n, &none), "malformed CHALLENGE frame: unknown flags");
	n = lm_frame_encode(buf, sizeof(buf), LM_AUTH, 0, &a, NULL, 0);
	assert_int_equal(decode(n, &none), 0);
	expect(decode(n - 1, &none), "truncated AUTH");
	a.kind = LM_AUTH_KIND_END;
	n = lm_frame_encode(buf, sizeof(buf), LM_AUTH, 0, &a, NULL, 0);
	expect(decode(n, &none), "malformed AUTH frame: unknown connection kind");
	n = lm_frame_encode(buf, sizeof(buf), LM_REFUSE, 0, &r, NULL, 0);
	assert_int_equal(decode(n, &none), 0);
	r.why = LM_REFUSE_END;
	n = lm_frame_encode(buf, sizeof(buf), LM_REFUSE, 0, &r, NULL, 0);
	expect(decode(n, &none), "malformed REFUSE frame");
	/* NEED is about pages: only after HELLO, and inside the region */
	n = lm_frame_encode(buf, sizeof(buf), LM_NEED, 0, &nd, page, 1);
	expect(decode(n, &none), "NEED frame before HELLO");
	assert_int_equal(decode(n, &geom), 0);
	nd.nbits = 5;
	n = lm_frame_encode(buf, sizeof(buf), LM_NEED, 0, &nd, page, 1);
	expect(decode(n, &geom), "malformed NEED frame");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_payload),
		cmocka_unit_test(test_handshake),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

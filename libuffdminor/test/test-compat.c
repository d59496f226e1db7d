// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A binary built against 0.1 keeps working with 0.2: it binds to the
 * LIBUFFDMINOR_0.1 versions of uffdm_handler_start/_stats/_stop and passes
 * the 0.1 (smaller) layouts of uffdm_handler_config and uffdm_stats.  The
 * 0.2 calls must not read past the old config nor write past the old
 * stats: both are followed by a canary here.  A 0.2 config with non-zero
 * reserved space is refused.
 */
#include <errno.h>
#include <string.h>

#include "common.h"

struct config_v01 {
	unsigned int threads;
	unsigned int flags;
	uffdm_fault_fn fault;
	uffdm_event_fn event;
	void *arg;
};

struct stats_v01 {
	uint64_t minor, missing, wp, events, resolved, failed, eexist, eagain;
	uint64_t p50_ns, p99_ns, max_ns;
};

int start_v01(struct uffdm_handler **out, struct uffdm *u, struct uffdm_region *r,
	      const struct config_v01 *cfg);
int stats_v01(const struct uffdm_handler *h, struct stats_v01 *st);
int stop_v01(struct uffdm_handler *h, struct stats_v01 *st);
__asm__(".symver start_v01,uffdm_handler_start@LIBUFFDMINOR_0.1");
__asm__(".symver stats_v01,uffdm_handler_stats@LIBUFFDMINOR_0.1");
__asm__(".symver stop_v01,uffdm_handler_stop@LIBUFFDMINOR_0.1");

#define CANARY 0xdeadbeefcafef00dull

static int stamp(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)ev;
	fill_page((char *)uffdm_region_backing(r) + off, uffdm_region_page_size(r),
		  off / uffdm_region_page_size(r));
	return 0;
}

static void test_v01_binary(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 4, 0);
	size_t page = uffdm_region_page_size(r);
	struct {
		struct config_v01 c;
		uint64_t after[8];	/* what a 0.2 call would read as reserved */
	} cfg = { .c = { .threads = 2, .fault = stamp } };
	struct {
		struct stats_v01 st;
		uint64_t canary[64];
	} out;
	struct uffdm_handler *h;

	memset(cfg.after, 0xff, sizeof(cfg.after));
	for (size_t i = 0; i < 64; i++)
		out.canary[i] = CANARY;
	assert_int_equal(start_v01(&h, u, r, &cfg.c), 0);
	for (size_t i = 0; i < 4; i++)
		assert_true(check_page((char *)uffdm_region_view(r) + i * page, page, i));
	assert_int_equal(stats_v01(h, &out.st), 0);
	for (size_t i = 0; i < 64; i++)
		assert_int_equal(out.canary[i], CANARY);
	assert_int_equal(stop_v01(h, &out.st), 0);
	for (size_t i = 0; i < 64; i++)
		assert_int_equal(out.canary[i], CANARY);
	assert_int_equal(out.st.minor, 4);
	assert_int_equal(out.st.resolved, 4);
	put_uffd(u);
	put_region(r);
}

static void test_reserved_refused(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	struct uffdm_handler_config cfg = { .threads = 1, .fault = stamp };
	struct uffdm_handler *h;

	cfg.reserved[7] = 1;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	cfg.reserved[7] = 0;
	cfg.flags = 1u << 31;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	put_uffd(u);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CROSS(test_v01_binary),
		CROSS(test_reserved_refused),
	};

	return cmocka_run_group_tests_name("compat", tests, NULL, NULL);
}

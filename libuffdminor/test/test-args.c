// SPDX-License-Identifier: LGPL-2.1-or-later
/* Argument validation: every bad argument is refused with -EINVAL (or -ERANGE). */
#include <errno.h>
#include <sys/mman.h>

#include "common.h"

static int fault_ok(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	(void)arg; (void)r; (void)off; (void)ev;
	return 0;
}

static void test_null_args(void **state)
{
	struct uffdm_event ev;
	struct uffdm_handler *h;
	struct uffdm_handler_config cfg = { .threads = 1, .fault = fault_ok };
	char buf[8];

	(void)state;
	assert_int_equal(uffdm_probe(NULL), -EINVAL);
	assert_int_equal(uffdm_open(NULL, 0, 0), -EINVAL);
	assert_int_equal(uffdm_fd(NULL), -EINVAL);
	assert_int_equal(uffdm_open_explain(NULL, 8), -EINVAL);
	assert_int_equal(uffdm_open_explain(buf, 0), -EINVAL);
	assert_int_equal(uffdm_region_create(NULL, UFFDM_SHMEM, 4096), -EINVAL);
	assert_int_equal(uffdm_region_fd(NULL), -EINVAL);
	assert_int_equal(uffdm_region_populate(NULL, 0, 4096), -EINVAL);
	assert_int_equal(uffdm_range_register(NULL, buf, 4096, 0, NULL), -EINVAL);
	assert_int_equal(uffdm_region_register(NULL, NULL, 0, NULL), -EINVAL);
	assert_int_equal(uffdm_event_decode(NULL, &ev), -EINVAL);
	assert_int_equal(uffdm_events_read(NULL, &ev, 1, 0), -EINVAL);
	assert_int_equal(uffdm_continue(NULL, buf, 4096, 0), -EINVAL);
	assert_int_equal(uffdm_wake(NULL, buf, 4096), -EINVAL);
	assert_int_equal(uffdm_handler_start(NULL, NULL, NULL, &cfg), -EINVAL);
	assert_int_equal(uffdm_handler_start(&h, NULL, NULL, &cfg), -EINVAL);
	assert_int_equal(uffdm_handler_stats(NULL, NULL), -EINVAL);
	assert_int_equal(uffdm_handler_stop(NULL, NULL), -EINVAL);
	uffdm_close(NULL);
	uffdm_region_destroy(NULL);
}

static void test_open_flags(void **state)
{
	struct uffdm *u;

	(void)state;
	assert_int_equal(uffdm_open(&u, 1u << 31, 0), -EINVAL);
	assert_int_equal(uffdm_open(&u, UFFDM_OPEN_NO_DEVICE | UFFDM_OPEN_NO_SYSCALL, 0),
			 -EINVAL);
}

/* A region must be whole pages of its type; spans must stay inside it. */
static void test_region_args(void **state)
{
	const struct mem_case *mc = need_case(state);
	size_t page = case_page_size(mc);
	struct uffdm_region *r;

	assert_int_equal(uffdm_region_create(&r, mc->backing, 0), -EINVAL);
	assert_int_equal(uffdm_region_create(&r, mc->backing, page + page / 2), -EINVAL);
	assert_int_equal(uffdm_region_create(&r, (enum uffdm_backing)42, page), -EINVAL);
	r = make_region(mc, 2);
	assert_int_equal(uffdm_region_populate(r, 0, 0), -EINVAL);
	assert_int_equal(uffdm_region_populate(r, 1, page), -EINVAL);
	assert_int_equal(uffdm_region_populate(r, page, 2 * page), -ERANGE);
	assert_int_equal(uffdm_region_discard(r, 2 * page, page), -ERANGE);
	assert_int_equal(uffdm_region_zap(r, 0, page / 2 ? page / 2 : 1), -EINVAL);
	put_region(r);
}

static void test_call_args(void **state)
{
	const struct mem_case *mc = need_case(state);
	struct uffdm *u = open_uffd(0, 0);
	struct uffdm_region *r = registered_region(u, mc, 1, 0);
	struct uffdm_handler_config cfg = { .threads = 0, .fault = fault_ok };
	size_t page = uffdm_region_page_size(r);
	void *view = uffdm_region_view(r);
	struct uffdm_handler *h;
	struct uffdm_event ev;
	unsigned int n = 0;

	assert_int_equal(uffdm_range_register(u, view, page, 1u << 7, NULL), -EINVAL);
	assert_int_equal(uffdm_range_register(u, NULL, page, 0, NULL), -EINVAL);
	assert_int_equal(uffdm_range_unregister(u, view, 0), -EINVAL);
	assert_int_equal(uffdm_continue(u, view, page, 1u << 9), -EINVAL);
	assert_int_equal(uffdm_continue(u, view, 0, 0), -EINVAL);
	assert_int_equal(uffdm_poison(u, view, page, 1u << 9), -EINVAL);
	assert_int_equal(uffdm_copy(u, view, NULL, page, 0), -EINVAL);
	assert_int_equal(uffdm_zeropage(u, view, page, UFFDM_WP), -EINVAL);
	assert_int_equal(uffdm_events_read(u, &ev, 0, 0), -EINVAL);
	assert_int_equal(uffdm_events_read(u, &ev, 1, 1u << 5), -EINVAL);
	assert_int_equal(uffdm_resolve(u, view, page, NULL, 4, &n), -EINVAL);
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	cfg.threads = 65;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	cfg.threads = 1;
	cfg.fault = NULL;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	cfg.fault = fault_ok;
	cfg.flags = 1u << 30;
	assert_int_equal(uffdm_handler_start(&h, u, r, &cfg), -EINVAL);
	put_uffd(u);
	put_region(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null_args),
		cmocka_unit_test(test_open_flags),
		CROSS(test_region_args),
		CROSS(test_call_args),
	};

	return cmocka_run_group_tests_name("args", tests, NULL, NULL);
}

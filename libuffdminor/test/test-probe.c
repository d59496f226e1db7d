// SPDX-License-Identifier: LGPL-2.1-or-later
/* Probe: features and ioctls come from a throw-away descriptor, bits kept. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static void test_probe_features(void **state)
{
	struct uffdm_probe p = probe(), again;
	uint64_t base = (1ull << _UFFDIO_API) | (1ull << _UFFDIO_REGISTER) |
			(1ull << _UFFDIO_UNREGISTER);

	(void)state;
	print_message("features 0x%llx ioctls 0x%llx\n", (unsigned long long)p.features,
		      (unsigned long long)p.ioctls);
	assert_int_equal(p.ioctls & base, base);
	assert_int_equal(uffdm_probe(&again), 0);
	assert_memory_equal(&p, &again, sizeof(p));
	assert_false(uffdm_probe_has(&p, 0));
	/* A kernel cannot report what it predates; a build may leave things out. */
	assert_true(!uffdm_probe_minor_shmem(&p) || kernel_at_least(5, 14));
	assert_true(!uffdm_probe_minor_hugetlbfs(&p) || kernel_at_least(5, 13));
	assert_true(!uffdm_probe_continue_wp(&p) || kernel_at_least(6, 4));
	assert_true(!uffdm_probe_poison(&p) || kernel_at_least(6, 6));
	assert_true(!uffdm_probe_move(&p) || kernel_at_least(6, 8));
}

/*
 * The descriptor reports what was granted, not what the kernel offers
 * (UFFDIO_API answers with every feature it knows); asking the impossible
 * is refused cleanly.
 */
static void test_open_features(void **state)
{
	struct uffdm_probe p = probe();
	struct uffdm *u = open_uffd(0, UFFD_FEATURE_EVENT_REMOVE);

	(void)state;
	assert_true(uffdm_fd(u) >= 0);
	assert_int_equal(uffdm_features(u), UFFD_FEATURE_EVENT_REMOVE);
	assert_true(uffdm_ioctls(u) & (1ull << _UFFDIO_REGISTER));
	put_uffd(u);
	u = open_uffd(0, 0);
	assert_int_equal(uffdm_features(u), 0);
	put_uffd(u);
	assert_int_equal(uffdm_open(&u, 0, 1ull << 62), -EOPNOTSUPP);
	assert_int_equal(uffdm_open(&u, 0, ~p.features & (1ull << 62)), -EOPNOTSUPP);
}

/* Both ways in work for root; unprivileged use is test-unpriv's. */
static void test_open_paths(void **state)
{
	struct uffdm *u;
	int ret;

	(void)state;
	probe();
	ret = uffdm_open(&u, UFFDM_OPEN_NO_DEVICE, 0);
	assert_int_equal(ret, 0);
	put_uffd(u);
	ret = uffdm_open(&u, UFFDM_OPEN_NO_SYSCALL | UFFDM_OPEN_NONBLOCK, 0);
	if (ret == -ENOENT || ret == -EACCES)
		SKIP_BECAUSE("/dev/userfaultfd unusable here (%s)", strerror(-ret));
	assert_int_equal(ret, 0);
	put_uffd(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_features),
		cmocka_unit_test(test_open_features),
		cmocka_unit_test(test_open_paths),
	};

	return cmocka_run_group_tests_name("probe", tests, NULL, NULL);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Helpers every cmocka suite of the project shares. Include after <cmocka.h>.
 */
#ifndef K513_TEST_H
#define K513_TEST_H

/*
 * cmocka 1.1's skip() takes no reason, so print one as a TAP comment right
 * before it: the guest's result parser (vm/guest/results.awk) attaches the
 * comment to the skipped case, and a human reading the log sees why.
 */
#define K513_SKIP(...) do { \
	print_message("# skip reason: " __VA_ARGS__); \
	print_message("\n"); \
	skip(); \
} while (0)

#endif

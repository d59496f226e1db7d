// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A bounded, deterministic mutation fuzzer for the frame parser: valid
 * frames of every type, mutated (bit flips, interesting values, cuts,
 * growth, header splices), decoded; a decode that succeeds must describe
 * bytes inside the buffer.  Under ASan/UBSan builds this finds more.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto.h"
#include "fuzz-seeds.h"

#define ITERATIONS 300000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static size_t mutate(uint8_t *b, size_t len)
{
	static const uint8_t interesting[] = { 0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40, 0x10 };
	unsigned int rounds = 1 + next() % 4;

	while (rounds--) {
		uint64_t r = next();
		size_t at = len ? (size_t)(r >> 16) % len : 0;

		switch (r % 6) {
		case 0: if (len) b[at] ^= (uint8_t)(1u << (r >> 8) % 8); break;
		case 1: if (len) b[at] = interesting[(r >> 8) % sizeof(interesting)]; break;
		case 2: len = (size_t)(r >> 8) % (len + 1); break;
		case 3: {
			size_t grow = (r >> 8) % 64;

			if (len + grow <= CAP) {
				for (size_t i = 0; i < grow; i++)
					b[len + i] = (uint8_t)next();
				len += grow;
			}
			break;
		}
		case 4: /* a field of the header: type, flags, len */
			if (len >= 12)
				b[4 + (r >> 8) % 8] = (uint8_t)(r >> 24);
			break;
		default: /* small payload-field values in the first 16 payload bytes */
			if (len >= 40)
				b[24 + (r >> 8) % 16] = (uint8_t)((r >> 24) % 4);
			break;
		}
	}
	return len;
}

static void test_fuzz(void **state)
{
	static uint8_t seed[LM_FUZZ_SEEDS][CAP], b[CAP];
	size_t lens[LM_FUZZ_SEEDS], nseeds = lm_fuzz_seeds(seed, lens), ok = 0;
	struct lm_geom g = { .npages = 256, .page_size = 4096 }, none = { 0 };
	char err[200];

	(void)state;
	for (unsigned long i = 0; i < ITERATIONS; i++) {
		size_t s = next() % nseeds, len;
		struct lm_frame f;
		int ret;

		memcpy(b, seed[s], lens[s]);
		len = mutate(b, lens[s]);
		err[0] = 0;
		ret = lm_frame_decode(b, len, i % 7 ? &g : &none, &f, err, sizeof(err));
		if (ret) {
			assert_true(ret == -EBADMSG || ret == -EMSGSIZE);
			assert_true(err[0] != 0);
			continue;
		}
		ok++;
		assert_true(f.data >= b && f.data + f.data_len <= b + len);
		assert_true((const uint8_t *)f.fixed >= b && (const uint8_t *)f.fixed <= f.data);
	}
	print_message("# %d mutated frames, %zu decoded as valid\n", ITERATIONS, ok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fuzz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

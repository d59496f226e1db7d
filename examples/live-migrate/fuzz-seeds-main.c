// SPDX-License-Identifier: LGPL-2.1-or-later
/* lm-fuzz-seeds DIR: write the seed frames, one file each, for libFuzzer. */
#include <stdio.h>
#include <string.h>

#include "fuzz-seeds.h"

int main(int argc, char **argv)
{
	static uint8_t seed[LM_FUZZ_SEEDS][CAP];
	size_t len[LM_FUZZ_SEEDS], n = lm_fuzz_seeds(seed, len);

	if (argc != 2) {
		fprintf(stderr, "usage: lm-fuzz-seeds DIR\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		struct lm_hdr h;
		FILE *f;

		memcpy(&h, seed[i], sizeof(h));
		snprintf(path, sizeof(path), "%s/%02zu-%s", argv[1], i, lm_type_name(h.type));
		f = fopen(path, "wb");
		if (!f || fwrite(seed[i], 1, len[i], f) != len[i] || fclose(f)) {
			perror(path);
			return 1;
		}
	}
	return 0;
}

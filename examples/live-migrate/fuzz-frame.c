// SPDX-License-Identifier: LGPL-2.1-or-later
/* libFuzzer target for the frame parser (built when clang is present). */
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lm_geom g = { .npages = 256, .page_size = 4096 }, none = { 0 };
	struct lm_frame f;
	char err[200];

	lm_frame_decode(data, size, size % 2 ? &g : &none, &f, err, sizeof(err));
	return 0;
}

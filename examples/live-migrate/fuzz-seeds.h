/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef LM_FUZZ_SEEDS_H
#define LM_FUZZ_SEEDS_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define CAP (sizeof(struct lm_hdr) + 3 * 4096 + 64)
#define LM_FUZZ_SEEDS 24

/* Fill seed[i] with frame i and len[i] with its length; the count. */
size_t lm_fuzz_seeds(uint8_t seed[][CAP], size_t *len);

#endif

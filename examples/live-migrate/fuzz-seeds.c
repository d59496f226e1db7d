// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * One valid frame of every type: the mutation fuzzer's seeds and, written
 * out by lm-fuzz-seeds, the libFuzzer corpus in fuzz-corpus/.  A new frame
 * type is a new line here.
 */
#include <stdint.h>
#include <string.h>

#include "proto.h"
#include "fuzz-seeds.h"

size_t lm_fuzz_seeds(uint8_t seed[][CAP], size_t *len)
{
	static const uint8_t zero[3 * 4096];
	struct lm_hello h = { .version = LM_VERSION, .size = 1 << 20, .page_size = 4096,
			      .nthreads = 2 };
	struct lm_pages p = { .first = 3, .count = 2 };
	struct lm_stale s = { .first = 0, .nbits = 64 };
	struct lm_hashes hs = { .first = 1, .count = 3 };
	struct lm_resp r = { .page = 2, .status = LM_RESP_DATA };
	struct lm_req q = { .page = 7 };
	struct lm_round rd = { .round = 1, .pages = 5 };
	struct lm_switch sw = { .nstale = 3 };
	struct lm_done d = { .rounds = 2 };
	struct lm_challenge ch = { .version = LM_VERSION, .flags = LM_CHAL_VERIFY };
	struct lm_auth au = { .kind = LM_AUTH_REJOIN_MAIN };
	struct lm_auth_ok ok = { { 1 } };
	struct lm_refuse rf = { .why = LM_REFUSE_SIZE, .max_size = 1 << 20 };
	struct lm_need nd = { .first = 8, .nbits = 70 };
	struct lm_fin fin = { .npages = 256, .mapped = 256, .verified = 256 };
	struct lm_progress pr = { .mapped = 7, .phase = LM_PHASE_RUNNING };
	size_t n = 0;

	len[n] = lm_frame_encode(seed[n], CAP, LM_HELLO, 0, &h, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_PAGES, LM_F_PUSH, &p, zero, 8192), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_STALE, LM_F_LAST, &s, zero, 8), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_HASHES, 0, &hs, zero, 24), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_RESP, 0, &r, zero, 4096), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_REQ, 0, &q, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_ROUND, 0, &rd, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_SWITCH, 0, &sw, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_DONE, 0, &d, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_FIN, 0, &fin, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_CHALLENGE, 0, &ch, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_AUTH, 0, &au, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_AUTH_OK, 0, &ok, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_REFUSE, 0, &rf, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_NEED, LM_F_LAST, &nd, zero, 9), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_PROGRESS, 0, &pr, NULL, 0), n++;
	len[n] = lm_frame_encode(seed[n], CAP, LM_ADMIT, 0, NULL, NULL, 0), n++;
	return n;
}


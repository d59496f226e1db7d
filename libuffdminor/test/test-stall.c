// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The watchdog's stall judgement (src/stall.h) driven tick by tick with an
 * injected clock: each row scripts what the servers' counts and the queue
 * show at every tick and names the first tick that must judge a stall
 * (or none). test-watchdog shows the same against real servers, where
 * where a tick falls is up to the scheduler; here it is exact, so a
 * judgement that forgets when the waiting began (and measures from the
 * last progress instead) fails idle_then_slow every time.
 *
 *   row               script (limit 500 ms, a tick every 50 ms)          first stall
 *   idle_forever      nothing waits, nothing served                        never
 *   stuck             a fault waits from 100 ms, never served              600 ms
 *   slow_progress     a fault always waits, one served every 400 ms        never
 *   idle_then_slow    idle 1400 ms, then a fault served after 250 ms       never
 *   progress_then_stuck  one served at 450 ms, then waits for ever         1000 ms
 *   deferred_only     a page deferred from 0, nothing queued or in hand    1000 ms
 */
#include <stdint.h>

#include "common.h"
#include "../src/stall.h"

#define MS		1000000ull
#define LIMIT		(500 * MS)
#define TICK		(50 * MS)
#define END		(3000 * MS)

struct script {
	const char *name;
	/* at t (ms): how many served, whether a fault waits, whether a page is deferred */
	void (*at)(uint64_t t, uint64_t *n, bool *waiting, bool *deferred);
	uint64_t first_stall_ms;	/* 0: never */
};

static bool deferred_now;
static unsigned int early_asks;		/* deferred() asked before the limit */
static struct uffdm__stall *judged;
static uint64_t judged_now;

static bool ask_deferred(void *arg)
{
	(void)arg;
	if (judged_now - judged->progress_at < LIMIT)
		early_asks++;
	return deferred_now;
}

static void idle_forever(uint64_t t, uint64_t *n, bool *w, bool *d)
{
	(void)t;
	*n = 0, *w = false, *d = false;
}

static void stuck(uint64_t t, uint64_t *n, bool *w, bool *d)
{
	*n = 0, *w = t >= 100, *d = false;
}

static void slow_progress(uint64_t t, uint64_t *n, bool *w, bool *d)
{
	*n = t / 400, *w = true, *d = false;
}

static void idle_then_slow(uint64_t t, uint64_t *n, bool *w, bool *d)
{
	*n = t >= 1650, *w = t >= 1400 && t < 1650, *d = false;
}

static void progress_then_stuck(uint64_t t, uint64_t *n, bool *w, bool *d)
{
	*n = t >= 450, *w = true, *d = false;
}

static void deferred_only(uint64_t t, uint64_t *n, bool *w, bool *d)
{
	(void)t;
	*n = 0, *w = false, *d = true;
}

static const struct script rows[] = {
	{ "idle_forever", idle_forever, 0 },
	{ "stuck", stuck, 600 },
	{ "slow_progress", slow_progress, 0 },
	{ "idle_then_slow", idle_then_slow, 0 },
	{ "progress_then_stuck", progress_then_stuck, 1000 },
	{ "deferred_only", deferred_only, 1000 },
};

static void test_row(void **state)
{
	const struct script *s = *state;
	struct uffdm__stall st = { 0 };
	uint64_t first = 0;

	early_asks = 0;
	judged = &st;
	for (uint64_t now = TICK; now <= END && !first; now += TICK) {
		uint64_t n;
		bool waiting;

		s->at(now / MS, &n, &waiting, &deferred_now);
		judged_now = now;
		if (uffdm__stall_tick(&st, now, LIMIT, n, waiting, ask_deferred, NULL))
			first = now / MS;
	}
	print_message("# %s: first stall at %llu ms (want %llu)\n", s->name,
		      (unsigned long long)first, (unsigned long long)s->first_stall_ms);
	assert_int_equal(first, s->first_stall_ms);
	assert_int_equal(early_asks, 0);	/* the deferred scan waits for the limit */
}

int main(void)
{
	struct CMUnitTest tests[sizeof(rows) / sizeof(rows[0])];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		tests[i] = (struct CMUnitTest){ rows[i].name, test_row, NULL, NULL,
						 (void *)&rows[i] };
	return cmocka_run_group_tests_name("stall", tests, NULL, NULL);
}

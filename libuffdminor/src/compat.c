// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Binaries linked against 0.1 keep working: they pass the 0.1 layouts of
 * uffdm_handler_config and uffdm_stats, which 0.2 grew, and bind to the
 * LIBUFFDMINOR_0.1 versions of the three calls that take them.  These
 * copy between the layouts; new builds bind to the 0.2 (default) ones.
 */
#include <errno.h>
#include <string.h>

#include "handler.h"

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

int uffdm__handler_start_v01(struct uffdm_handler **out, struct uffdm *u,
			     struct uffdm_region *r, const struct config_v01 *cfg);
int uffdm__handler_stats_v01(const struct uffdm_handler *h, struct stats_v01 *st);
int uffdm__handler_stop_v01(struct uffdm_handler *h, struct stats_v01 *st);

__asm__(".symver uffdm__handler_start_v01,uffdm_handler_start@LIBUFFDMINOR_0.1");
__asm__(".symver uffdm__handler_stats_v01,uffdm_handler_stats@LIBUFFDMINOR_0.1");
__asm__(".symver uffdm__handler_stop_v01,uffdm_handler_stop@LIBUFFDMINOR_0.1");

int uffdm__handler_start_v01(struct uffdm_handler **out, struct uffdm *u,
			     struct uffdm_region *r, const struct config_v01 *cfg)
{
	struct uffdm_handler_config c = { 0 };

	if (!cfg)
		return -EINVAL;
	/* 0.1 had no flag for outside faults: they were failed, as without it now. */
	c.threads = cfg->threads;
	c.flags = cfg->flags;
	c.fault = cfg->fault;
	c.event = cfg->event;
	c.arg = cfg->arg;
	return uffdm__handler_start(out, u, r, &c);
}

static void to_v01(const struct uffdm_stats *s, struct stats_v01 *o)
{
	*o = (struct stats_v01){
		.minor = s->minor, .missing = s->missing, .wp = s->wp, .events = s->events,
		.resolved = s->resolved, .failed = s->failed, .eexist = s->eexist,
		.eagain = s->eagain, .p50_ns = s->p50_ns, .p99_ns = s->p99_ns,
		.max_ns = s->max_ns,
	};
}

int uffdm__handler_stats_v01(const struct uffdm_handler *h, struct stats_v01 *st)
{
	struct uffdm_stats s;
	int ret;

	if (!st)
		return -EINVAL;
	ret = uffdm__handler_stats(h, &s);
	if (!ret)
		to_v01(&s, st);
	return ret;
}

int uffdm__handler_stop_v01(struct uffdm_handler *h, struct stats_v01 *st)
{
	struct uffdm_stats s;
	int ret = uffdm__handler_stop(h, st ? &s : NULL);

	if (st && h)
		to_v01(&s, st);
	return ret;
}

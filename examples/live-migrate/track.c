// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Dirty tracking on the source: libuffdminor's tracker (uffdm_tracker_start(3):
 * pagemap-scan, soft-dirty, uffd-wp or none, chosen at run time).  lm only
 * keeps its own numbering of the kinds, which goes on the wire.
 */
#include <errno.h>
#include <string.h>

#include "lm.h"

static const enum uffdm_track_kind to_lib[LM_TRACK_END + 1] = {
	[LM_TRACK_PAGEMAP_SCAN] = UFFDM_TRACK_PAGEMAP_SCAN,
	[LM_TRACK_SOFT_DIRTY] = UFFDM_TRACK_SOFT_DIRTY,
	[LM_TRACK_NONE] = UFFDM_TRACK_NONE,
	[LM_TRACK_UFFD_WP] = UFFDM_TRACK_UFFD_WP,
	[LM_TRACK_END] = UFFDM_TRACK_AUTO,
};

static enum lm_track_kind from_lib(enum uffdm_track_kind k)
{
	for (int i = 0; i < LM_TRACK_END; i++)
		if (to_lib[i] == k)
			return (enum lm_track_kind)i;
	return LM_TRACK_NONE;
}

const char *lm_track_name(unsigned int kind)
{
	return uffdm_track_name(to_lib[kind < LM_TRACK_END ? kind : LM_TRACK_END]);
}

int lm_track_parse(const char *s)
{
	int k = uffdm_track_parse(s);

	return k < 0 ? k : k == UFFDM_TRACK_AUTO ? LM_TRACK_END : (int)from_lib(k);
}

int lm_track_start(struct lm_tracker *t, unsigned int want, uint8_t *view, size_t size,
		   size_t page)
{
	int ret;

	memset(t, 0, sizeof(*t));
	t->kind = LM_TRACK_NONE;
	ret = uffdm_tracker_start(&t->t, to_lib[want < LM_TRACK_END ? want : LM_TRACK_END],
				  view, size, page, 0);
	if (!ret)
		t->kind = from_lib(uffdm_tracker_kind(t->t));
	return ret;
}

bool lm_track_needs_quiesce(const struct lm_tracker *t)
{
	return uffdm_tracker_needs_quiesce(t->t);
}

int lm_track_collect(struct lm_tracker *t, uint8_t *bitmap, bool last)
{
	return uffdm_tracker_collect(t->t, bitmap, last ? UFFDM_TRACK_LAST : 0);
}

void lm_track_stop(struct lm_tracker *t)
{
	uffdm_tracker_stop(t->t);
	t->t = NULL;
}

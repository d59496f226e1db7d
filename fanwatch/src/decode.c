// SPDX-License-Identifier: LGPL-2.1-or-later
#include <string.h>

#include "decode.h"

/* A fid record: fsid, then a file handle, then (for *_NAME) a name. */
static int parse_fid(const unsigned char *rec, size_t len, bool named,
		     struct fw_obj *obj)
{
	const struct fw_info_fid *info = (const void *)rec;
	size_t fhoff = sizeof(*info);
	const struct file_handle *fh;
	size_t end;

	if (len < fhoff + sizeof(*fh))
		return -1;
	fh = (const void *)(rec + fhoff);
	end = fhoff + sizeof(*fh) + fh->handle_bytes;
	if (end > len)
		return -1;
	obj->fsid = info->fsid;
	obj->fh = fh;
	obj->name = NULL;
	if (!named)
		return 0;
	/* The name must end inside the record, or it is not ours to read. */
	if (end >= len || !memchr(rec + end, '\0', len - end))
		return -1;
	obj->name = (const char *)rec + end;
	return 0;
}

static int parse_record(const unsigned char *rec, size_t len, struct fw_raw *ev)
{
	const struct fw_info_header *hdr = (const void *)rec;

	switch (hdr->info_type) {
	case FW_INFO_FID:
		return parse_fid(rec, len, false, &ev->child);
	case FW_INFO_DFID:
		return parse_fid(rec, len, false, &ev->dir);
	case FW_INFO_DFID_NAME:
		return parse_fid(rec, len, true, &ev->dir);
	case FW_INFO_OLD_DFID_NAME:
		return parse_fid(rec, len, true, &ev->old);
	case FW_INFO_NEW_DFID_NAME:
		return parse_fid(rec, len, true, &ev->new);
	default:
		return 0;	/* pidfd, error, or newer: not needed */
	}
}

enum fw_decode_ret fw_decode(const void *buf, size_t len, size_t *off,
			     struct fw_raw *ev)
{
	const unsigned char *p = (const unsigned char *)buf + *off;
	struct fw_event_metadata m, *md = &m;
	size_t left = len - *off, pos;

	if (*off >= len || left < sizeof(*md))
		return FW_DECODE_END;
	/* Events are 4-byte aligned but the mask is a u64: copy, don't cast. */
	memcpy(md, p, sizeof(*md));
	/*
	 * The kernel pads events and their records to 4 bytes
	 * (FANOTIFY_EVENT_ALIGN); anything else is not an event, and refusing
	 * it keeps every record and handle we hand out 4-byte aligned.
	 */
	if (md->event_len < sizeof(*md) || md->event_len > left || md->event_len % 4) {
		*off = len;	/* cannot find the next event: drop the rest */
		return FW_DECODE_BAD;
	}
	*off += md->event_len;
	if (md->vers != FW_METADATA_VERSION || md->metadata_len < sizeof(*md) ||
	    md->metadata_len > md->event_len || md->metadata_len % 4)
		return FW_DECODE_BAD;

	memset(ev, 0, sizeof(*ev));
	ev->mask = md->mask;
	ev->pid = md->pid;
	/* The overflow event carries no record: never look past its header. */
	if (md->mask & FW_Q_OVERFLOW) {
		ev->overflow = true;
		return FW_DECODE_OK;
	}
	for (pos = md->metadata_len; pos + sizeof(struct fw_info_header) <= md->event_len;) {
		const struct fw_info_header *hdr = (const void *)(p + pos);

		if (hdr->len < sizeof(*hdr) || hdr->len % 4 || pos + hdr->len > md->event_len)
			return FW_DECODE_BAD;
		if (parse_record(p + pos, hdr->len, ev) < 0)
			return FW_DECODE_BAD;
		ev->nrec++;
		pos += hdr->len;
	}
	return FW_DECODE_OK;
}

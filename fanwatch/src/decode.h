/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Splitting a read() buffer of fanotify events into decoded events. */
#ifndef FW_DECODE_H
#define FW_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>

#include "fw-uapi.h"

/* One object reported by an info record: a file handle, maybe a name. */
struct fw_obj {
	const int32_t *fsid;		/* NULL when the record was absent */
	const struct file_handle *fh;
	const char *name;		/* NULL for records without a name */
};

struct fw_raw {
	uint64_t mask;
	int32_t pid;
	bool overflow;
	struct fw_obj dir;	/* DFID_NAME or DFID: the parent, or the dir itself */
	struct fw_obj old;	/* OLD_DFID_NAME (FAN_RENAME) */
	struct fw_obj new;	/* NEW_DFID_NAME (FAN_RENAME) */
	struct fw_obj child;	/* FID: the target of a dirent event */
	unsigned int nrec;	/* info records seen, including skipped types */
};

enum fw_decode_ret {
	FW_DECODE_END = 0,	/* no complete event left */
	FW_DECODE_OK = 1,
	FW_DECODE_BAD = -1,	/* malformed event; *off moved past it if possible */
};

/*
 * Decode the event at buf + *off and advance *off past it.  Every info
 * record is looked at by type; unknown types are skipped by length.
 */
enum fw_decode_ret fw_decode(const void *buf, size_t len, size_t *off,
			     struct fw_raw *ev);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fanotify UAPI pieces fanwatch relies on.  glibc's <sys/fanotify.h>
 * only declares the two syscalls and pulls in whatever <linux/fanotify.h>
 * the build machine has; the record layouts and the 5.17 rename bits are
 * restated here so the program builds against old headers and decodes
 * what newer kernels send.
 */
#ifndef FW_UAPI_H
#define FW_UAPI_H

#include <stdint.h>
#include <sys/fanotify.h>

#define FW_ACCESS		0x00000001u
#define FW_MODIFY		0x00000002u
#define FW_ATTRIB		0x00000004u
#define FW_CLOSE_WRITE		0x00000008u
#define FW_CLOSE_NOWRITE	0x00000010u
#define FW_OPEN			0x00000020u
#define FW_MOVED_FROM		0x00000040u
#define FW_MOVED_TO		0x00000080u
#define FW_CREATE		0x00000100u
#define FW_DELETE		0x00000200u
#define FW_DELETE_SELF		0x00000400u
#define FW_MOVE_SELF		0x00000800u
#define FW_Q_OVERFLOW		0x00004000u
#define FW_RENAME		0x10000000u	/* 5.17 */
#define FW_ONDIR		0x40000000u
#define FW_EVENT_ON_CHILD	0x08000000u

/* What an inode mark on a file (not a directory) can report. */
#define FW_FILE_MASK		(FW_ACCESS | FW_MODIFY | FW_ATTRIB | FW_CLOSE_WRITE | \
				 FW_CLOSE_NOWRITE | FW_OPEN | FW_DELETE_SELF | FW_MOVE_SELF)

#define FW_CLASS_NOTIF		0x00000000u
#define FW_CLOEXEC		0x00000001u
#define FW_NONBLOCK		0x00000002u
#define FW_REPORT_FID		0x00000200u	/* 5.1 */
#define FW_REPORT_DIR_FID	0x00000400u	/* 5.9 */
#define FW_REPORT_NAME		0x00000800u	/* 5.9 */
#define FW_REPORT_TARGET_FID	0x00001000u	/* 5.17 */
#define FW_REPORT_DFID_NAME	(FW_REPORT_DIR_FID | FW_REPORT_NAME)

#define FW_MARK_ADD		0x00000001u
#define FW_MARK_REMOVE		0x00000002u
#define FW_MARK_DONT_FOLLOW	0x00000004u
#define FW_MARK_ONLYDIR		0x00000008u

#define FW_METADATA_VERSION	3
#define FW_NOFD			(-1)

#define FW_INFO_FID		1
#define FW_INFO_DFID_NAME	2
#define FW_INFO_DFID		3
#define FW_INFO_OLD_DFID_NAME	10	/* 5.17 */
#define FW_INFO_NEW_DFID_NAME	12	/* 5.17 */

struct fw_event_metadata {
	uint32_t event_len;
	uint8_t vers;
	uint8_t reserved;
	uint16_t metadata_len;
	uint64_t mask __attribute__((aligned(8)));
	int32_t fd;
	int32_t pid;
};

struct fw_info_header {
	uint8_t info_type;
	uint8_t pad;
	uint16_t len;
};

/* Followed by a struct file_handle and, for *_NAME types, a NUL-ended name. */
struct fw_info_fid {
	struct fw_info_header hdr;
	int32_t fsid[2];
};

#endif

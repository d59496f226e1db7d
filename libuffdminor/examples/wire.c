// SPDX-License-Identifier: LGPL-2.1-or-later
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uffdminor.h"
#include "wire.h"

#define WIRE_MAX_FDS 8

int wire_send(int sock, const int *fds, unsigned int n, const void *data, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)] = { 0 };
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = CMSG_SPACE(sizeof(int) * n),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	if (!n || n > WIRE_MAX_FDS)
		return -EINVAL;
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	if (sendmsg(sock, &msg, MSG_NOSIGNAL) != (ssize_t)len)
		return -errno ? -errno : -EIO;
	return 0;
}

int wire_recv(int sock, int *fds, unsigned int n, void *data, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)] = { 0 };
	struct iovec iov = { .iov_base = data, .iov_len = len };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	unsigned int got = 0;
	struct cmsghdr *cm;
	ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	int ret = r == (ssize_t)len ? 0 : r < 0 ? -errno : -EPROTO;

	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (got < n)
				fds[got++] = fd;
			else
				close(fd), ret = -EPROTO;
		}
	}
	if (!ret && (got != n || (msg.msg_flags & MSG_CTRUNC)))
		ret = -EPROTO;
	if (ret)
		while (got)
			close(fds[--got]);
	return ret;
}

/* Both ends of the page: a page mapped at the wrong offset fails. */
void snapshot_page(void *page, size_t len, size_t i)
{
	uint64_t *w = page;

	w[0] = 0x534e415000000000ull | i;
	w[len / sizeof(*w) - 1] = ~(uint64_t)i;
}

int snapshot_check(const void *page, size_t len, size_t i)
{
	const uint64_t *w = page;

	return w[0] == (0x534e415000000000ull | i) && w[len / sizeof(*w) - 1] == ~(uint64_t)i;
}

int snapshot_fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	size_t page = uffdm_region_page_size(r);

	(void)arg; (void)ev;
	snapshot_page((char *)uffdm_region_backing(r) + off, page, off / page);
	return 0;
}

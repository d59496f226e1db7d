// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Opening a userfaultfd, probing what the kernel offers, and explaining a
 * refusal in terms an administrator can act on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define UFFDM_DEVICE "/dev/userfaultfd"

/*
 * What the last failed open in this thread tried, for uffdm_open_explain().
 * Thread-local so concurrent opens do not mix their stories.
 */
static __thread struct {
	bool valid;
	unsigned int flags;
	int dev_err;		/* 0: not tried */
	int sys_err;		/* 0: not tried */
	int api_err;		/* the descriptor opened, UFFDIO_API refused */
	uint64_t features;	/* what UFFDIO_API was asked for */
} last_refusal;

static int kernel_flags(unsigned int flags)
{
	int kf = 0;

	if (!(flags & UFFDM_OPEN_NO_CLOEXEC))
		kf |= O_CLOEXEC;
	if (flags & UFFDM_OPEN_NONBLOCK)
		kf |= O_NONBLOCK;
	if (!(flags & UFFDM_OPEN_KERNEL_FAULTS))
		kf |= UFFD_USER_MODE_ONLY;
	return kf;
}

static int open_device(int kf)
{
	int dev, fd;

	dev = open(UFFDM_DEVICE, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -errno;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, kf);
	if (fd < 0)
		fd = -errno;
	close(dev);
	return fd;
}

static int open_syscall(int kf)
{
	int fd = (int)syscall(SYS_userfaultfd, kf);

	return fd < 0 ? -errno : fd;
}

/*
 * The device first: its permissions are the administrator's explicit grant
 * and it needs no sysctl.  Then the syscall, which works unprivileged for
 * user-mode-only descriptors since 5.11.
 */
int uffdm__raw_open(unsigned int flags)
{
	int kf = kernel_flags(flags);
	int dev_err = 0, sys_err = 0, fd;

	if (!(flags & UFFDM_OPEN_NO_DEVICE)) {
		fd = open_device(kf);
		if (fd >= 0)
			return fd;
		dev_err = fd;
	}
	if (!(flags & UFFDM_OPEN_NO_SYSCALL)) {
		fd = open_syscall(kf);
		if (fd >= 0)
			return fd;
		sys_err = fd;
	}
	last_refusal.valid = true;
	last_refusal.flags = flags;
	last_refusal.dev_err = dev_err;
	last_refusal.sys_err = sys_err;
	last_refusal.api_err = 0;
	/* The syscall's answer is the more telling one (EPERM vs ENOENT). */
	if (sys_err)
		return sys_err;
	return dev_err ? dev_err : -EINVAL;
}

int uffdm__api(int fd, uint64_t features, struct uffdio_api *api)
{
	memset(api, 0, sizeof(*api));
	api->api = UFFD_API;
	api->features = features;
	if (ioctl(fd, UFFDIO_API, api) < 0)
		return -errno;
	return 0;
}

/*
 * UFFDIO_API may be issued once per descriptor, so probing spends a
 * throw-away one.  The answer cannot change while we run: cache it.
 */
int uffdm_probe(struct uffdm_probe *p)
{
	static struct uffdm_probe cached;
	static int cached_ok;
	struct uffdio_api api;
	int fd, ret;

	if (!p)
		return -EINVAL;
	if (__atomic_load_n(&cached_ok, __ATOMIC_ACQUIRE)) {
		*p = cached;
		return 0;
	}
	fd = uffdm__raw_open(0);
	if (fd < 0)
		return fd;
	ret = uffdm__api(fd, 0, &api);
	close(fd);
	if (ret)
		return ret;
	p->features = api.features;
	p->ioctls = api.ioctls;
	cached = *p;
	__atomic_store_n(&cached_ok, 1, __ATOMIC_RELEASE);
	return 0;
}

bool uffdm_probe_has(const struct uffdm_probe *p, uint64_t features)
{
	return p && features && (p->features & features) == features;
}

bool uffdm_probe_minor_shmem(const struct uffdm_probe *p)
{
	return uffdm_probe_has(p, UFFD_FEATURE_MINOR_SHMEM);
}

bool uffdm_probe_minor_hugetlbfs(const struct uffdm_probe *p)
{
	return uffdm_probe_has(p, UFFD_FEATURE_MINOR_HUGETLBFS);
}

bool uffdm_probe_poison(const struct uffdm_probe *p)
{
	return uffdm_probe_has(p, UFFD_FEATURE_POISON);
}

/*
 * CONTINUE_MODE_WP has no feature bit of its own; it came in 6.4 together
 * with WP_UNPOPULATED, which does.
 */
bool uffdm_probe_continue_wp(const struct uffdm_probe *p)
{
	return uffdm_probe_has(p, UFFD_FEATURE_WP_UNPOPULATED);
}

bool uffdm_probe_move(const struct uffdm_probe *p)
{
	return uffdm_probe_has(p, UFFD_FEATURE_MOVE);
}

int uffdm_open(struct uffdm **out, unsigned int flags, uint64_t features)
{
	struct uffdm_probe p;
	struct uffdio_api api;
	struct uffdm *u;
	int fd, ret;

	if (!out || (flags & ~UFFDM_OPEN_ALL) ||
	    (flags & UFFDM_OPEN_NO_DEVICE && flags & UFFDM_OPEN_NO_SYSCALL))
		return -EINVAL;
	ret = uffdm_probe(&p);
	if (ret)
		return ret;
	/* Refuse here: a refused UFFDIO_API would spoil the descriptor. */
	if (features & ~p.features)
		return -EOPNOTSUPP;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	fd = uffdm__raw_open(flags);
	if (fd < 0) {
		free(u);
		return fd;
	}
	ret = uffdm__api(fd, features, &api);
	if (ret) {
		last_refusal.valid = true;
		last_refusal.api_err = ret;
		last_refusal.features = features;
		close(fd);
		free(u);
		return ret;
	}
	u->fd = fd;
	u->fence_fd = -1;
	u->flags = flags;
	/* UFFDIO_API answers with every feature it knows; ours are the ones asked for. */
	u->features = features & api.features;
	u->ioctls = api.ioctls;
	u->avail = p.features;
	u->nonblock = flags & UFFDM_OPEN_NONBLOCK;
	*out = u;
	return 0;
}

void uffdm_close(struct uffdm *u)
{
	if (!u)
		return;
	uffdm_close(u->sigbus);
	if (u->fence_fd >= 0)
		close(u->fence_fd);
	close(u->fd);
	free(u);
}

int uffdm_fd(const struct uffdm *u)
{
	return u ? u->fd : -EINVAL;
}

uint64_t uffdm_features(const struct uffdm *u)
{
	return u ? u->features : 0;
}

uint64_t uffdm_ioctls(const struct uffdm *u)
{
	return u ? u->ioctls : 0;
}

static const char *sysctl_value(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/vm/unprivileged_userfaultfd", "re");

	if (!f)
		return "unreadable";
	if (!fgets(buf, (int)len, f))
		snprintf(buf, len, "unreadable");
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static size_t explain_device(char *buf, size_t len)
{
	struct stat st;

	if (!last_refusal.dev_err)
		return (size_t)snprintf(buf, len, UFFDM_DEVICE ": not tried; ");
	if (stat(UFFDM_DEVICE, &st) < 0)
		return (size_t)snprintf(buf, len, UFFDM_DEVICE ": %s (Linux 6.1+); ",
					strerror(-last_refusal.dev_err));
	return (size_t)snprintf(buf, len,
				UFFDM_DEVICE ": %s (mode %04o owner %u:%u; this process is %u:%u); ",
				strerror(-last_refusal.dev_err), st.st_mode & 07777,
				st.st_uid, st.st_gid, geteuid(), getegid());
}

/*
 * Writes why the last open in this thread was refused: each path tried and
 * its error, the device's permissions and the sysctl.  Returns the length
 * it wanted to write, as snprintf does.
 */
int uffdm_open_explain(char *buf, size_t len)
{
	char val[32];
	size_t n;

	if (!buf || !len)
		return -EINVAL;
	if (!last_refusal.valid)
		return snprintf(buf, len, "no userfaultfd open was refused in this thread");
	if (last_refusal.api_err)
		return snprintf(buf, len, "the descriptor opened but UFFDIO_API refused features "
				"0x%llx: %s%s", (unsigned long long)last_refusal.features,
				strerror(-last_refusal.api_err),
				last_refusal.features & UFFD_FEATURE_EVENT_FORK ?
				" (UFFD_FEATURE_EVENT_FORK needs CAP_SYS_PTRACE)" : "");
	n = explain_device(buf, len);
	if (n >= len)
		return (int)n;
	n += (size_t)snprintf(buf + n, len - n, "userfaultfd(2)%s: %s; ",
			      last_refusal.flags & UFFDM_OPEN_KERNEL_FAULTS ?
			      " with kernel-mode faults" : " user-mode only",
			      last_refusal.sys_err ? strerror(-last_refusal.sys_err) :
			      "not tried");
	if (n >= len)
		return (int)n;
	n += (size_t)snprintf(buf + n, len - n,
			      "vm.unprivileged_userfaultfd=%s (trapping kernel-mode faults needs it at 1 "
			      "or CAP_SYS_PTRACE; user-mode-only descriptors need Linux 5.11+; "
			      "granting access to " UFFDM_DEVICE " needs none of these)",
			      sysctl_value(val, sizeof(val)));
	return (int)n;
}

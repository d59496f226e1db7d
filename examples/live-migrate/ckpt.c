// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The source's checkpoint: after SWITCH, a source that cannot learn how the
 * migration ended still holds every page as it was at the pause -- the
 * pages the destination may lack among them.  Freeing them would leave the
 * workload on neither end whenever the destination cannot run on, so they
 * go to a file first, and `lm resume FILE` runs the workload from it.
 *
 * The file: a header (magic, region and page size, a BLAKE2b-256 hash of
 * the region) and the region's bytes.  Mode 0600: it is the workload's
 * memory, which crossed the network encrypted.  Written to FILE.tmp, synced
 * and renamed, so a FILE that exists is whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sodium.h>

#include "lm.h"

#define CKPT_MAGIC "LMCKPT01"

struct ckpt_hdr {
	char magic[8];
	uint64_t size;
	uint32_t page_size;
	uint32_t mode;
	uint8_t hash[32];
};

static void region_hash(uint8_t out[32], const uint8_t *mem, size_t size)
{
	crypto_generichash(out, 32, mem, size, NULL, 0);
}

/* All n bytes written (out) or read; -errno, or -ENODATA at an early end. */
static int io_all(int fd, void *buf, size_t n, bool out)
{
	uint8_t *b = buf;

	while (n) {
		ssize_t r = out ? write(fd, b, n) : read(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : out ? -EIO : -ENODATA;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

int lm_ckpt_write(const char *path, const uint8_t *mem, size_t size, size_t page,
		  enum lm_mode mode)
{
	struct ckpt_hdr h = { .size = size, .page_size = (uint32_t)page, .mode = mode };
	char tmp[4096];
	int fd, ret;

	memcpy(h.magic, CKPT_MAGIC, sizeof(h.magic));
	region_hash(h.hash, mem, size);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ret = io_all(fd, &h, sizeof(h), true);
	if (!ret)
		ret = io_all(fd, (void *)mem, size, true);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* The region from path, checked against its hash; NULL and a message if not. */
static uint8_t *ckpt_load(const char *path, struct ckpt_hdr *h)
{
	uint8_t hash[32], *mem;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;
	off_t len;

	if (fd < 0) {
		fprintf(stderr, "lm: resume: cannot open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	len = lseek(fd, 0, SEEK_END);
	lseek(fd, 0, SEEK_SET);
	ret = io_all(fd, h, sizeof(*h), false);
	if (ret || memcmp(h->magic, CKPT_MAGIC, sizeof(h->magic)) || !h->size ||
	    h->size % WL_REC || len != (off_t)(sizeof(*h) + h->size)) {
		fprintf(stderr, "lm: resume: %s is not a whole lm checkpoint\n", path);
		close(fd);
		return NULL;
	}
	mem = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "lm: resume: cannot map %llu bytes: %s\n",
			(unsigned long long)h->size, strerror(errno));
		close(fd);
		return NULL;
	}
	ret = io_all(fd, mem, h->size, false);
	close(fd);
	region_hash(hash, mem, h->size);
	if (!ret && sodium_memcmp(hash, h->hash, sizeof(hash)))
		ret = -EBADMSG;
	if (ret) {
		fprintf(stderr, "lm: resume: %s: %s\n", path, ret == -EBADMSG ?
			"the region does not match its hash (damaged)" : strerror(-ret));
		munmap(mem, h->size);
		return NULL;
	}
	return mem;
}

/*
 * lm resume FILE: the workload from a source's checkpoint runs --after
 * seconds, here, and its invariants are checked.  0 when they hold, 4 when
 * the file or the workload is damaged, 1 when it cannot be read.
 */
int lm_resume(const struct lm_opts *o, const char *path)
{
	struct workload wl = { .rate = o->wl.rate };
	struct ckpt_hdr h;
	char err[160] = "";
	uint64_t before;
	uint8_t *mem = ckpt_load(path, &h);
	int ret;

	if (!mem)
		return access(path, R_OK) ? LM_EXIT_USAGE : LM_EXIT_VERIFY;
	if (wl_check(mem, h.size, err, sizeof(err)) || wl_start(&wl, mem, h.size, mem)) {
		fprintf(stderr, "lm: resume: %s: the workload in it is damaged: %s\n", path, err);
		return LM_EXIT_VERIFY;
	}
	before = wl_ops(&wl);
	lm_sleep_until(lm_now_ns() + (uint64_t)(o->after_s * 1e9));
	wl_pause(&wl);
	wl_stop(&wl);
	ret = wl_check(mem, h.size, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "lm: resume: workload invariant broken: %s\n", err);
		return LM_EXIT_VERIFY;
	}
	fprintf(stderr, "lm: resume: %s matches its hash; the workload ran on from it: %llu ops "
		"(%llu before), invariants hold\n", path, (unsigned long long)wl_ops(&wl),
		(unsigned long long)before);
	munmap(mem, h.size);
	return LM_EXIT_OK;
}

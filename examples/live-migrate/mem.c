// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm: the room a region has before it is allocated.  A region larger than
 * the memory cgroup lets this process have is not refused by mmap or
 * fallocate: the kernel OOM-kills the process while it formats or receives
 * the pages, without a word.  So both ends ask first: MemAvailable (or the
 * huge page pool), and the limit less the usage of the cgroup and each of
 * its ancestors, v2's files or v1's, whichever this host has.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lm.h"

static bool read_u64(const char *dir, const char *file, uint64_t *v)
{
	char path[4200], buf[64];
	unsigned long long x;
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return false;
	/* "max" (v2's no limit) is not a number: no limit here */
	ok = fgets(buf, sizeof(buf), f) && sscanf(buf, "%llu", &x) == 1;
	fclose(f);
	*v = x;
	return ok;
}

/* r takes room when it is smaller, with its limit and the files that say so */
static void room_min(struct lm_room *r, uint64_t room, unsigned int limit, const char *fmt,
		     const char *a, const char *b, const char *c)
{
	if (room >= r->bytes)
		return;
	r->bytes = room;
	r->limit = limit;
	snprintf(r->where, sizeof(r->where), fmt, a, b, c);
}

/*
 * Room under the cgroup at root/path and each of its ancestors up to root:
 * the smallest limit less usage.  The files are max_f and cur_f (v2's
 * memory.max and memory.current, v1's memory.limit_in_bytes and
 * memory.usage_in_bytes, or a hugetlb pair).  v1's "no limit" is a huge
 * number, not "max": anything from 2^62 up counts as none.
 */
void lm_cgroup_room(struct lm_room *r, const char *root, const char *path, const char *max_f,
		    const char *cur_f, unsigned int limit)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s%s", root, path);
	for (;;) {
		uint64_t max, cur;
		char *slash;

		if (read_u64(dir, max_f, &max) && max < (1ull << 62) && read_u64(dir, cur_f, &cur))
			room_min(r, max > cur ? max - cur : 0, limit, "%s less %s in %s", max_f,
				 cur_f, dir);
		slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < strlen(root))
			break;
		*slash = 0;
	}
}

/* Whether the comma-separated list [l, end) names ctrl; "" only the empty list (v2). */
static bool lists(const char *l, const char *end, const char *ctrl)
{
	size_t n = strlen(ctrl);

	if (!n)
		return l == end;
	while (l < end) {
		const char *comma = memchr(l, ',', (size_t)(end - l)), *e = comma ? comma : end;

		if ((size_t)(e - l) == n && !strncmp(l, ctrl, n))
			return true;
		l = e + 1;
	}
	return false;
}

/*
 * This process's cgroup path for a v1 controller, or v2's (ctrl ""), from
 * the text of /proc/self/cgroup ("4:memory:/a", "3:cpu,cpuacct:/", "0::/b");
 * false when it is the root or not there.
 */
bool lm_cgroup_path(const char *text, const char *ctrl, char *out, size_t len)
{
	while (text && *text) {
		const char *nl = strchr(text, '\n'), *end = nl ? nl : text + strlen(text);
		const char *c1 = memchr(text, ':', (size_t)(end - text));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;

		if (c2 && lists(c1 + 1, c2, ctrl) && end - c2 - 1 > 1) {
			snprintf(out, len, "%.*s", (int)(end - c2 - 1), c2 + 1);
			return true;
		}
		text = nl ? nl + 1 : end;
	}
	return false;
}

/* The free huge pages of this size (less those reserved), from sysfs, or
 * -1 when the kernel has no pool of it. */
int64_t lm_hugepages_free(const char *sysfs, size_t page)
{
	char dir[512];
	uint64_t free_p, resv = 0;

	snprintf(dir, sizeof(dir), "%s/hugepages-%zukB", sysfs, page >> 10);
	if (!read_u64(dir, "free_hugepages", &free_p))
		return -1;
	read_u64(dir, "resv_hugepages", &resv);
	return free_p > resv ? (int64_t)(free_p - resv) : 0;
}

static void meminfo_room(struct lm_room *r)
{
	char line[256];
	unsigned long long v;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			room_min(r, (uint64_t)v << 10, LM_LIMIT_MEMAVAIL, "%s%s%s",
				 "MemAvailable in /proc/meminfo", "", "");
	if (f)
		fclose(f);
}

static void read_self_cgroup(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "r");

	buf[0] = 0;
	if (f) {
		buf[fread(buf, 1, len - 1, f)] = 0;
		fclose(f);
	}
}

/* A huge page size: "2MB" as the kernel's file names have it (sep "",
 * unit "B"), or "2 MiB" for people (sep " ", unit "iB"). */
static void page_name(char *out, size_t len, size_t page, const char *sep, const char *unit)
{
	if (page >= (1u << 30) && !(page % (1u << 30)))
		snprintf(out, len, "%zu%sG%s", page >> 30, sep, unit);
	else if (page >= (1u << 20) && !(page % (1u << 20)))
		snprintf(out, len, "%zu%sM%s", page >> 20, sep, unit);
	else
		snprintf(out, len, "%zu%sK%s", page >> 10, sep, unit);
}

/* The room under this process's cgroups, v2's and v1's; or under the one
 * at LM_CGROUP (tests), whose files say which version it is. */
static void cgroups_room(struct lm_room *r, unsigned int backing, size_t page)
{
	const char *fake = getenv("LM_CGROUP");
	char text[4096], path[4096], hmax[64], hcur[64], hmax1[64], hcur1[64], hs[24];

	/* the kernel's names: hugetlb.2MB, hugetlb.1GB, hugetlb.64KB (arm64) */
	page_name(hs, sizeof(hs), page, "", "B");

	snprintf(hmax, sizeof(hmax), "hugetlb.%s.max", hs);
	snprintf(hcur, sizeof(hcur), "hugetlb.%s.current", hs);
	snprintf(hmax1, sizeof(hmax1), "hugetlb.%s.limit_in_bytes", hs);
	snprintf(hcur1, sizeof(hcur1), "hugetlb.%s.usage_in_bytes", hs);
	if (fake) {
		if (backing == UFFDM_SHMEM) {
			lm_cgroup_room(r, fake, "", "memory.max", "memory.current", LM_LIMIT_CGROUP);
			lm_cgroup_room(r, fake, "", "memory.limit_in_bytes", "memory.usage_in_bytes",
				       LM_LIMIT_CGROUP_V1);
		} else {
			lm_cgroup_room(r, fake, "", hmax, hcur, LM_LIMIT_CGROUP_HUGETLB);
			lm_cgroup_room(r, fake, "", hmax1, hcur1, LM_LIMIT_CGROUP_HUGETLB);
		}
		return;
	}
	read_self_cgroup(text, sizeof(text));
	if (backing == UFFDM_SHMEM) {
		if (lm_cgroup_path(text, "", path, sizeof(path)))
			lm_cgroup_room(r, "/sys/fs/cgroup", path, "memory.max", "memory.current",
				       LM_LIMIT_CGROUP);
		if (lm_cgroup_path(text, "memory", path, sizeof(path)))
			lm_cgroup_room(r, "/sys/fs/cgroup/memory", path, "memory.limit_in_bytes",
				       "memory.usage_in_bytes", LM_LIMIT_CGROUP_V1);
		return;
	}
	if (lm_cgroup_path(text, "", path, sizeof(path)))
		lm_cgroup_room(r, "/sys/fs/cgroup", path, hmax, hcur, LM_LIMIT_CGROUP_HUGETLB);
	if (lm_cgroup_path(text, "hugetlb", path, sizeof(path)))
		lm_cgroup_room(r, "/sys/fs/cgroup/hugetlb", path, hmax1, hcur1,
			       LM_LIMIT_CGROUP_HUGETLB);
}

void lm_mem_room(struct lm_room *r, unsigned int backing)
{
	size_t page = uffdm_backing_page_size(backing);
	const char *sysfs = getenv("LM_HUGEPAGES");	/* tests: a made-up pool */

	*r = (struct lm_room){ .bytes = UINT64_MAX, .limit = LM_LIMIT_MEMAVAIL };
	if (backing == UFFDM_SHMEM) {
		meminfo_room(r);
	} else {
		char dir[512], size[24];
		int64_t n = lm_hugepages_free(sysfs ? sysfs : "/sys/kernel/mm/hugepages", page);

		/* no sysfs here (a bare container): unknown, and mmap will say */
		if (n < 0 && access(sysfs ? sysfs : "/sys/kernel/mm/hugepages", F_OK)) {
			cgroups_room(r, backing, page);
			return;
		}

		page_name(size, sizeof(size), page, " ", "iB");
		snprintf(dir, sizeof(dir), "%s/hugepages-%zukB", sysfs ? sysfs :
			 "/sys/kernel/mm/hugepages", page >> 10);
		room_min(r, n < 0 ? 0 : (uint64_t)n * page, LM_LIMIT_HUGEPAGES,
			 "%s/%s (the pool of %s huge pages)", dir, "nr_hugepages", size);
		r->pool_page = page;
	}
	cgroups_room(r, backing, page);
}

/*
 * Whether size fits in r; else a line that says which limit and the file,
 * for who (source, destination).
 */
bool lm_mem_fits(const struct lm_room *r, uint64_t size, const char *who)
{
	if (size <= r->bytes)
		return true;
	if (r->limit == LM_LIMIT_HUGEPAGES)
		fprintf(stderr, "lm: %s: %llu huge pages of %zu kB are needed, %llu free: raise "
			"%s\n", who, (unsigned long long)(size / r->pool_page), r->pool_page >> 10,
			(unsigned long long)(r->bytes / r->pool_page), r->where);
	else
		fprintf(stderr, "lm: %s: a %.1f MiB region does not fit: %.1f MiB left (%s)\n",
			who, (double)size / 1048576, (double)r->bytes / 1048576, r->where);
	return false;
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Titles that bucket. KFENCE names the frame where the bad access or free
 * happened, which is often a string or allocator helper ("use-after-free
 * read in memcmp", "memory corruption in krealloc"): useless to tell bugs
 * apart. Like syzkaller's pkg/report, the title names the first frame of
 * the stack that is not on the skip list below: the caller that is to
 * blame. The list is documented in kfence-report(1); keep the two equal.
 */
#include "report.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trailing '*' matches any suffix; otherwise the name must be equal. */
static const char *const skip_list[] = {
	/* KFENCE and the slab allocators */
	"kfence_*", "__kfence_*", "kmalloc*", "__kmalloc*", "__do_kmalloc*",
	"kmem_cache_*", "__kmem_cache_*", "kfree", "kfree_sensitive", "kvfree*",
	"__kfree*", "kvmalloc*", "__kvmalloc*", "kzalloc*", "kvzalloc*",
	"kcalloc*", "krealloc*", "__krealloc*", "kvrealloc*", "kmemdup*",
	"kstrdup*", "kstrndup", "memdup_user*", "vmemdup_user", "strndup_user",
	"slab_*", "__slab_*", "___slab_*", "do_slab_free", "___cache_free",
	"__cache_free", "cache_alloc_refill", "kasan_*", "__kasan_*", "__asan_*",
	"kmsan_*", "__kmsan_*",
	/* KASAN's report path, at the top of its call trace */
	"dump_stack*", "__dump_stack", "show_stack", "print_report",
	"print_address_description*", "check_memory_region*",
	/* string and memory helpers (arm64's are __pi_memcmp, __pi_strlen...) */
	"__pi_*", "memcpy*", "__memcpy*", "memmove", "__memmove", "memset*", "__memset",
	"memcmp", "__memcmp", "bcmp", "memzero_explicit", "memchr*", "memscan", "strcmp", "strncmp",
	"strcasecmp", "strncasecmp", "strlen", "strnlen", "strcpy", "strncpy",
	"strscpy*", "sized_strscpy", "strlcpy", "strcat", "strncat", "strlcat",
	"strchr", "strnchr", "strrchr", "strstr", "strnstr", "strsep", "strpbrk",
	"strspn", "strcspn", "__fortify_*", "fortify_*", "rep_movs_alternative",
	"rep_stos_alternative", "copy_user_*", "_copy_to_user", "_copy_from_user",
	"__copy_*", "__arch_copy_*", "copy_to_user*", "copy_from_user*",
	"vsnprintf", "snprintf", "scnprintf", "vscnprintf", "sprintf", "vsprintf",
	"string", "string_nocheck", "widen_string", "pointer", "format_decode",
	/* KUnit and the test harness (only reached when nothing else is left) */
	"kunit_*", "__kunit_*", "kthread", "ret_from_fork*", "worker_thread",
	"process_one_work",
	NULL,
};

bool kfr_frame_skipped(const char *fn)
{
	for (const char *const *p = skip_list; *p; p++) {
		size_t n = strlen(*p);

		if ((*p)[n - 1] == '*' ? !strncmp(fn, *p, n - 1) : !strcmp(fn, *p))
			return true;
	}
	return false;
}

/*
 * The function of a frame: "? " (unreliable) dropped, the offset and the
 * module dropped, and a compiler suffix (.isra.0, .constprop.0, .part.0,
 * .cold) dropped so that two builds of one kernel bucket together. A hex
 * frame from a kernel without KALLSYMS is its address.
 */
size_t kfr_frame_function(const char *frame, char *buf, size_t size)
{
	const char *s = frame;
	size_t n;

	if (s[0] == '?' && s[1] == ' ')
		s += 2;
	n = strcspn(s, "+ ");
	if (!(s[0] == '0' && s[1] == 'x')) {
		const char *dot = memchr(s, '.', n);

		if (dot && dot > s)
			n = (size_t)(dot - s);
	}
	if (n >= size)
		n = size - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return n;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d) {
		perror("kfence-report");
		exit(1);
	}
	return d;
}

/* The frame to blame: the first of the stack not on the skip list. */
static void set_guilty(struct kfr_report *r)
{
	char fn[256];

	/* an interleaved report's stack may be another report's */
	for (size_t i = 0; !(r->reason && !strcmp(r->reason, KFR_R_INTERLEAVED)) && i < r->stack.n; i++) {
		kfr_frame_function(r->stack.frames[i], fn, sizeof(fn));
		if (fn[0] && !kfr_frame_skipped(fn)) {
			r->guilty = xstrdup(fn);
			return;
		}
	}
	/* no stack, or all of it skipped: the frame KFENCE named */
	if (r->location) {
		kfr_frame_function(r->location, fn, sizeof(fn));
		r->guilty = xstrdup(fn);
	}
}

static const char *kind_words(const struct kfr_report *r, char *buf, size_t size)
{
	const char *k = r->kind ? r->kind : "unknown";

	if (!strcmp(k, "memory-corruption"))
		return "memory corruption";
	if (!strcmp(k, "invalid-free"))
		return "invalid free";
	if (!strcmp(k, "invalid-access"))
		k = "invalid";
	snprintf(buf, size, "%s%s%s", k, r->access ? " " : "", r->access ? r->access : "");
	return buf;
}

void kfr_set_titles(struct kfr_report *r)
{
	char words[64], buf[512];
	const char *kw;
	bool is_free = r->kind && !strcmp(r->kind, "invalid-free");

	free(r->guilty);
	free(r->title);
	free(r->bad_access);
	r->guilty = r->title = r->bad_access = NULL;
	set_guilty(r);
	kw = kind_words(r, words, sizeof(words));
	if (r->detector && !strcmp(r->detector, "kasan")) {
		/* syzbot's KASAN form: "KASAN: slab-use-after-free Read in f" */
		snprintf(words, sizeof(words), "%s%s%s", r->kind ? r->kind : "unknown",
			 r->access ? (r->access[0] == 'r' ? " Read" : " Write") : "", "");
		kw = words;
		is_free = r->kind && strlen(r->kind) >= 5 &&
			  !strcmp(r->kind + strlen(r->kind) - 5, "-free") &&
			  !strstr(r->kind, "use-after-free");
	}
	if (r->guilty) {
		snprintf(buf, sizeof(buf), "%s: %s in %s",
			 r->detector && !strcmp(r->detector, "kasan") ? "KASAN" : "KFENCE", kw,
			 r->guilty);
		r->title = xstrdup(buf);
		snprintf(buf, sizeof(buf), "%s in %s", is_free ? "bad-free" : "bad-access",
			 r->guilty);
		r->bad_access = xstrdup(buf);
	} else {
		snprintf(buf, sizeof(buf), "%s: %s",
			 r->detector && !strcmp(r->detector, "kasan") ? "KASAN" : "KFENCE", kw);
		r->title = xstrdup(buf);
	}
}

/*
 * KASAN's titles ("KASAN: slab-use-after-free Read in f", syzbot's form,
 * or the kernel's "BUG: KASAN: double-free in f+0x1/0x2") in the same
 * form: a bug that one kernel caught with KFENCE and another with KASAN
 * lands in one bucket. The function goes through the same skip list only
 * as far as the title can tell: KASAN names its frame after skipping its
 * own internals, like KFENCE.
 */
bool kfr_kasan_bad_access(const char *t, char *buf, size_t size)
{
	const char *k = strstr(t, "KASAN: "), *in;
	char fn[256];
	size_t kl;
	bool is_free;

	if (!k)
		return false;
	k += 7;
	in = strstr(k, " in ");
	if (!in || !in[4])
		return false;
	kfr_frame_function(in + 4, fn, sizeof(fn));
	/* "double-free", "invalid-free", "double-free or invalid-free": a bad
	 * free; everything else (slab-out-of-bounds, [slab-]use-after-free,
	 * wild-memory-access, ...) is a bad access
	 */
	kl = strcspn(k, " ");
	is_free = kl >= 5 && !strncmp(k + kl - 5, "-free", 5) &&
		  !memmem(k, kl, "use-after-free", 14);
	snprintf(buf, size, "%s in %s", is_free ? "bad-free" : "bad-access", fn);
	return true;
}

void kfr_bucket(const struct kfr_report *r, int frames, char *buf, size_t size)
{
	char fn[256];
	size_t len, i = 0;
	int taken = 0;

	snprintf(buf, size, "%s", r->title ? r->title : "KFENCE: unknown");
	if (!r->guilty)
		return;
	/* start at the guilty frame: frames above it are helpers */
	for (; i < r->stack.n; i++) {
		kfr_frame_function(r->stack.frames[i], fn, sizeof(fn));
		if (!strcmp(fn, r->guilty))
			break;
	}
	for (i++; i < r->stack.n && taken < frames - 1; i++, taken++) {
		kfr_frame_function(r->stack.frames[i], fn, sizeof(fn));
		len = strlen(buf);
		snprintf(buf + len, size - len, " | %s", fn);
	}
}

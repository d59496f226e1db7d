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

enum { EXACT, PREFIX, SUFFIX, SUB, STRIP };
enum { SCOPE_ALL, SCOPE_FORM, SCOPE_GUILTY };

/* The families of title-rules.def, as bit numbers. */
enum family {
#define FAMILY(id, scope, corpus, what) F_##id,
#define SKIP(family, how, text)
#define FORM(det, type, fmt, extra, corpus)
#include "title-rules.def"
#undef FAMILY
#undef SKIP
#undef FORM
	F_COUNT, F_NONE = -1
};

static const struct skip_rule {
	int family;
	int how;
	const char *text;
} skip_rules[] = {
#define FAMILY(id, scope, corpus, what)
#define SKIP(family, how, text) { F_##family, how, text },
#define FORM(det, type, fmt, extra, corpus)
#include "title-rules.def"
#undef FAMILY
#undef SKIP
#undef FORM
};

static const struct kfr_title_family families[] = {
#define FAMILY(id, scope, corpus, what) { #id, corpus, what, SCOPE_##scope == SCOPE_FORM, \
						 SCOPE_##scope == SCOPE_GUILTY },
#define SKIP(family, how, text)
#define FORM(det, type, fmt, extra, corpus)
#include "title-rules.def"
#undef FAMILY
#undef SKIP
#undef FORM
};

static const struct kfr_title_form forms[] = {
#define FAMILY(id, scope, corpus, what)
#define SKIP(family, how, text)
#define FORM(det, type, fmt, extra, corpus) { #det, type, fmt, F_##extra, corpus },
#include "title-rules.def"
#undef FAMILY
#undef SKIP
#undef FORM
};

#define N_SKIP (sizeof(skip_rules) / sizeof(skip_rules[0]))
#define N_FORMS (sizeof(forms) / sizeof(forms[0]))

_Static_assert(F_COUNT <= 31, "title-rules.def: at most 31 families");

const struct kfr_title_family *kfr_title_families(size_t *n)
{
	*n = F_COUNT;
	return families;
}

const struct kfr_title_form *kfr_title_forms(size_t *n)
{
	*n = N_FORMS;
	return forms;
}

/*
 * @pat against [s, e): '*' any run of characters, '#' one digit. With
 * @open_end the pattern may end before @e (a PREFIX or SUB rule).
 */
static bool glob(const char *pat, const char *s, const char *e, bool open_end)
{
	for (; *pat; pat++, s++) {
		if (*pat == '*') {
			for (const char *t = e; t >= s; t--)
				if (glob(pat + 1, t, e, open_end))
					return true;
			return false;
		}
		if (s == e || (*pat == '#' ? !isdigit((unsigned char)*s) : *pat != *s))
			return false;
	}
	return open_end || s == e;
}

/* A rule whose text has a wildcard: rare, so slower than memmem() is fine. */
static bool glob_rule(const struct skip_rule *k, const char *fn, size_t fl)
{
	const char *e = fn + fl;

	switch (k->how) {
	case EXACT:
		return glob(k->text, fn, e, false);
	case PREFIX:
		return glob(k->text, fn, e, true);
	case SUFFIX:
		for (const char *s = fn; s <= e; s++)
			if (glob(k->text, s, e, false))
				return true;
		return false;
	default:
		for (const char *s = fn; s <= e; s++)
			if (glob(k->text, s, e, true))
				return true;
		return false;
	}
}

static bool rule_matches(const struct skip_rule *k, const char *fn, size_t fl)
{
	size_t tl = strlen(k->text);

	if (strpbrk(k->text, "*#"))
		return glob_rule(k, fn, fl);
	switch (k->how) {
	case EXACT:
		return fl == tl && !memcmp(fn, k->text, tl);
	case PREFIX:
		return fl >= tl && !memcmp(fn, k->text, tl);
	case SUFFIX:
		return fl >= tl && !memcmp(fn + fl - tl, k->text, tl);
	default:
		return memmem(fn, fl, k->text, tl) != NULL;
	}
}

/*
 * A log names the same few hundred functions over and over: remember the
 * last verdict for each (per thread, a direct-mapped table), so that a
 * frame costs one hash, not a pass over every rule.
 */
#define VERDICTS 1024
static __thread struct verdict {
	char fn[48];
	signed char extra, family;
} verdicts[VERDICTS];

static int match_rules(const char *fn, size_t fl, int extra);

/*
 * The family of the first rule that skips @fn: the generic families, and
 * @extra (a form's own family, F_NONE for none). -1 when kept.
 */
static int skip_family(const char *fn, int extra)
{
	size_t fl = strlen(fn);
	unsigned h = 2166136261u ^ (unsigned)(extra + 1);
	struct verdict *v;

	if (fl >= sizeof(verdicts[0].fn))
		return match_rules(fn, fl, extra);
	for (size_t i = 0; i < fl; i++)
		h = (h ^ (unsigned char)fn[i]) * 16777619u;
	v = &verdicts[h % VERDICTS];
	if (v->fn[0] && v->extra == extra && !strcmp(v->fn, fn))
		return v->family;
	memcpy(v->fn, fn, fl + 1);
	v->extra = (signed char)extra;
	v->family = (signed char)match_rules(fn, fl, extra);
	return v->family;
}

static int match_rules(const char *fn, size_t fl, int extra)
{
	for (size_t i = 0; i < N_SKIP; i++) {
		const struct skip_rule *k = &skip_rules[i];

		if ((families[k->family].form_only && k->family != extra) ||
		    families[k->family].guilty_only)
			continue;
		if (rule_matches(k, fn, fl))
			return k->family;
	}
	return -1;
}

bool kfr_frame_skipped(const char *fn)
{
	return skip_family(fn, F_NONE) >= 0;
}

/*
 * The guilty frame's name as a title gives it: a syscall's entry prefix
 * ("__x64_sys_", "__do_sys_", "SyS_", ...) cut, so that one syscall titles
 * alike on every architecture and kernel version. Each STRIP row is tried
 * on the whole name and the shortest result wins (so "__se_sys_f" gives
 * "f", not "sys_f"). *@family: the family of the row used, -1 for none.
 */
const char *kfr_title_name(const char *fn, int *family)
{
	const char *best = fn;

	*family = -1;
	for (size_t i = 0; i < N_SKIP; i++) {
		const struct skip_rule *k = &skip_rules[i];
		size_t tl = strlen(k->text);

		if (k->how != STRIP || strncmp(fn, k->text, tl) || !fn[tl])
			continue;
		if (fn + tl > best) {
			best = fn + tl;
			*family = k->family;
		}
	}
	return best;
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

/* A title string: capped as any field (a cut one says so). */
static char *xstrdup(const char *s)
{
	return kfr_field(s, strlen(s));
}

static bool inline_frame(const char *f)
{
	size_t n = strlen(f);

	return n > 9 && !strcmp(f + n - 9, " [inline]");
}

static void set_guilty_name(struct kfr_report *r, const char *fn)
{
	int fam;
	const char *name = kfr_title_name(fn, &fam);

	if (fam >= 0)
		r->title_families |= 1u << fam;
	r->guilty = xstrdup(name);
}

/*
 * The frame to blame: the function the title line names, then each frame of
 * the stack, the first that no rule skips; never a "? " frame (the
 * unwinder's guess) nor an inlined one. The families that skipped frames on the way go to
 * r->title_families (the corpus test checks each family's case uses it).
 */
static void set_guilty(struct kfr_report *r, int extra)
{
	/* an interleaved report's stack may be another report's */
	bool own = !(r->reason && !strcmp(r->reason, KFR_R_INTERLEAVED));
	char fn[KFR_MAX_FIELD + 1];
	int fam;

	for (size_t i = 0; i <= (own ? r->stack.n : 0); i++) {
		const char *f = i ? r->stack.frames[i - 1] : r->location;

		/* syzkaller titles the raw report: the "[inline]" frames a
		 * symbolizer adds are not candidates
		 */
		if (!f || (f[0] == '?' && f[1] == ' ') || inline_frame(f))
			continue;
		kfr_frame_function(f, fn, sizeof(fn));
		if (!fn[0])
			continue;
		fam = skip_family(fn, extra);
		if (fam < 0) {
			set_guilty_name(r, fn);
			return;
		}
		r->title_families |= 1u << fam;
	}
	/* every frame was a helper, or there was none of the report's own:
	 * like syzkaller, "corrupted", which buckets apart from real frames
	 */
	if (r->location || r->stack.n)
		r->guilty = xstrdup(KFR_CORRUPTED);
}

/*
 * A form's bug type: the report's, "*" for any, or NO_DETAIL for a bad
 * access whose detail line ("Read of size N ...") never came: syzkaller
 * then titles the title line as printed (its function, no frame skipped).
 */
#define NO_DETAIL "!detail"

static bool bad_free(const struct kfr_report *r);

static bool form_fits(const struct kfr_title_form *f, const struct kfr_report *r)
{
	const char *det = r->detector ? r->detector : "kfence";

	if (strcmp(f->detector, det))
		return false;
	if (!strcmp(f->bug_type, NO_DETAIL))
		return !r->access && r->location && r->kind && !bad_free(r);
	return !strcmp(f->bug_type, "*") || (r->kind && !strcmp(f->bug_type, r->kind));
}

/* An invalid or double free, as opposed to a bad access. */
static bool bad_free(const struct kfr_report *r)
{
	bool kasan = r->detector && !strcmp(r->detector, "kasan");
	size_t kl = r->kind ? strlen(r->kind) : 0;

	if (!kasan)
		return r->kind && !strcmp(r->kind, "invalid-free");
	return kl >= 5 && !strcmp(r->kind + kl - 5, "-free") &&
	       !strstr(r->kind, "use-after-free");
}

/* Append @s, cut at @size - 1 as snprintf() would (but a call a byte of a form was one tenth of a report's cost). */
static void put(char *buf, size_t size, size_t *len, const char *s)
{
	size_t n = strlen(s);

	if (n > size - 1 - *len)
		n = size - 1 - *len;
	memcpy(buf + *len, s, n);
	*len += n;
	buf[*len] = '\0';
}

/*
 * Expand a form: %k bug type, %A Read/Write, %a read/write, %g guilty, %z
 * " at addr ADDR" when the title line carried the address (before 4.12).
 */
static void expand(const char *fmt, const struct kfr_report *r, char *buf, size_t size)
{
	size_t len = 0;
	char one[2] = "";

	buf[0] = '\0';
	for (const char *c = fmt; *c; c++) {
		if (c[0] != '%' || !c[1]) {
			one[0] = *c;
			put(buf, size, &len, one);
			continue;
		}
		c++;
		if (*c == 'k') {
			put(buf, size, &len, r->kind ? r->kind : "unknown");
		} else if ((*c == 'a' || *c == 'A') && r->access) {
			put(buf, size, &len, *c == 'a' ? r->access :
			    r->access[0] == 'r' ? "Read" : "Write");
		} else if (*c == 'a' || *c == 'A') {
			if (len && buf[len - 1] == ' ')
				buf[--len] = '\0';	/* no access: no word */
		} else if (*c == 'z') {
			if (r->address && !r->access)
				put(buf, size, &len, " at addr ADDR");
		} else if (*c == 'g' && r->guilty) {
			put(buf, size, &len, r->guilty);
		} else if (*c == 'g' && len >= 4 && !strcmp(buf + len - 4, " in ")) {
			len -= 4;		/* no frame: "KASAN: null-ptr-deref Read" */
			buf[len] = '\0';
		}
	}
}

void kfr_set_titles(struct kfr_report *r)
{
	char buf[2 * KFR_MAX_FIELD];
	bool kasan = r->detector && !strcmp(r->detector, "kasan");
	size_t i;

	free(r->guilty);
	free(r->title);
	free(r->bad_access);
	r->guilty = r->title = r->bad_access = NULL;
	r->title_families = 0;
	for (i = 0; i < N_FORMS && !form_fits(&forms[i], r); i++)
		;
	r->title_form = i < N_FORMS ? (int)i : -1;
	/* KASAN's old "null-ptr-deref on address A" title names no frame */
	if (i < N_FORMS && !strcmp(forms[i].bug_type, NO_DETAIL)) {
		kfr_frame_function(r->location, buf, sizeof(buf));
		r->guilty = xstrdup(buf);
	} else if (!(kasan && !r->location)) {
		set_guilty(r, i < N_FORMS ? forms[i].extra : F_NONE);
	}
	expand(i < N_FORMS ? forms[i].title : kasan ? "KASAN: %k %A in %g" :
	       "KFENCE: %k %a in %g", r, buf, sizeof(buf));
	r->title = xstrdup(buf);
	if (!r->guilty)
		return;
	snprintf(buf, sizeof(buf), "%s in %s", bad_free(r) ? "bad-free" : "bad-access", r->guilty);
	r->bad_access = xstrdup(buf);
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
	char fn[KFR_MAX_FIELD + 1];
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
	char fn[KFR_MAX_FIELD + 1];
	size_t len, i = 0;
	int taken = 0;

	snprintf(buf, size, "%s", r->title ? r->title : "KFENCE: unknown");
	if (!r->guilty)
		return;
	/* start at the guilty frame: frames above it are helpers */
	for (; i < r->stack.n; i++) {
		int fam;

		kfr_frame_function(r->stack.frames[i], fn, sizeof(fn));
		if (!strcmp(kfr_title_name(fn, &fam), r->guilty))
			break;
	}
	for (i++; i < r->stack.n && taken < frames - 1; i++, taken++) {
		kfr_frame_function(r->stack.frames[i], fn, sizeof(fn));
		len = strlen(buf);
		snprintf(buf + len, size - len, " | %s", fn);
	}
}

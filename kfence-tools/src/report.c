// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * KFENCE report parser: a line-driven state machine. The kernel prints a
 * report as printk lines between two ===== rulers; other CPUs' messages may
 * interleave, lines may be lost, and a saved log may end mid-report, so
 * every line is recognised on its own and anything unknown is skipped.
 * With printk caller ids each task's report is read apart from the others.
 *
 * The formats, from mm/kfence/report.c and lib/dump_stack.c:
 *   5.12-14  kfence-#N [0xS-0xE, size=Z, cache=C] allocated by task P:
 *            freed by task P:
 *   5.15+    kfence-#N: 0xS-0xE, size=Z, cache=C
 *            allocated by task P on cpu C at T.s:
 *   6.12     allocated by task P on cpu C at T.s (A.s ago):
 *            rcu freeing by task P on cpu C at T.s (A.s ago):
 *   footer   CPU: N PID: P Comm: X Tainted: F RELEASE #V
 *   6.11+    CPU: N UID: U PID: P Comm: X Tainted: F RELEASE #V
 */
#include "report.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A report is under 200 lines; far more without a ruler means garbage. */
#define KFR_MAX_BODY 1000

static char *xstrndup(const char *s, size_t n)
{
	char *d = strndup(s, n);

	if (!d) {
		perror("kfence-report");
		exit(1);
	}
	return d;
}

char *kfr_field(const char *s, size_t n)
{
	const size_t mark = sizeof(KFR_CUT_MARK) - 1, keep = KFR_MAX_FIELD - mark;
	char *d;

	n = strnlen(s, n);
	if (n <= KFR_MAX_FIELD)
		return xstrndup(s, n);
	d = malloc(KFR_MAX_FIELD + 1);
	if (!d) {
		perror("kfence-report");
		exit(1);
	}
	memcpy(d, s, keep);
	memcpy(d + keep, KFR_CUT_MARK, mark + 1);
	return d;
}

static void set_str(char **dst, const char *s, size_t n)
{
	free(*dst);
	*dst = kfr_field(s, n);
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void stack_clear(struct kfr_stack *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->frames[i]);
		free(st->src[i]);
	}
	memset(st, 0, sizeof(*st));
}

static void track_clear(struct kfr_track *t)
{
	free(t->time);
	stack_clear(&t->stack);
	memset(t, 0, sizeof(*t));
	t->pid = t->cpu = -1;
}

void kfr_report_clear(struct kfr_report *r)
{
	char **strs[] = {
		&r->kind, &r->access, &r->function, &r->location, &r->module,
		&r->guilty, &r->title, &r->bad_access, &r->address, &r->side,
		&r->object_start, &r->object_end, &r->cache, &r->corrupted,
		&r->comm, &r->taint, &r->release, &r->time, &r->wallclock,
		&r->caller, &r->host,
	};

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		free(*strs[i]);
	stack_clear(&r->stack);
	track_clear(&r->alloc);
	track_clear(&r->free);
	memset(r, 0, sizeof(*r));
	r->object = -1;
	r->size = -1;
	r->cpu = r->uid = r->pid = -1;
	r->seq = r->last_seq = -1;
	r->alloc.pid = r->alloc.cpu = -1;
	r->free.pid = r->free.cpu = -1;
}

static void slot_reset(struct kfr_slot *sl)
{
	kfr_report_clear(&sl->cur);
	sl->active = false;
	sl->caller[0] = '\0';
	sl->host[0] = '\0';
	sl->cpu = -1;
	sl->section = KFR_NONE;
	sl->body_lines = 0;
	sl->detail = sl->object_line = sl->footer = sl->kasan = false;
	sl->stack_text = 0;
	sl->at_end_of_input = false;
	sl->gap = NULL;
}

void kfr_parser_init(struct kfr_parser *p, kfr_emit_fn emit, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->emit = emit;
	p->arg = arg;
	p->last_seq = p->seq = -1;
}

void kfr_parser_free(struct kfr_parser *p)
{
	for (size_t i = 0; i < p->n_slots; i++) {
		kfr_report_clear(&p->slots[i]->cur);
		free(p->slots[i]);
	}
	free(p->slots);
	p->slots = NULL;
	p->n_slots = p->n_active = 0;
}

static const char *skip_space(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Length of @s without trailing white space (and a CRLF's CR). */
static size_t trimmed_len(const char *s)
{
	size_t n = strlen(s);

	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	return n;
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return n > 0;
}

/* "sym+0x1f/0x49", "sym.isra.0+0x1/0x2", or a bare "0xffffffff81234567" */
static bool frame_token(const char *s, size_t n)
{
	const char *plus, *slash;

	if (n > 2 && s[0] == '0' && s[1] == 'x')
		return n >= 10 && n <= 18 && all_hex(s + 2, n - 2);
	plus = memchr(s, '+', n);
	if (!plus || plus == s)
		return false;
	for (const char *c = s; c < plus; c++)
		if (!isalnum((unsigned char)*c) && !strchr("_.$", *c))
			return false;
	slash = memchr(plus, '/', (size_t)(s + n - plus));
	return slash && plus[1] == '0' && plus[2] == 'x' && all_hex(plus + 3, (size_t)(slash - plus - 3)) &&
	       slash[1] == '0' && slash[2] == 'x' && all_hex(slash + 3, (size_t)(s + n - slash - 3));
}

/* A bare symbol (an inlined frame of a symbolized trace has no offset). */
static bool symbol_token(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.$", s[i]))
			return false;
	return n > 0 && !isdigit((unsigned char)s[0]);
}

/* " path/file.c:123" as scripts/decode_stacktrace.sh and syzbot add it:
 * the length of the source part at @s (0 if none).
 */
static size_t source_part(const char *s, size_t n)
{
	size_t t, c;

	if (n < 4 || s[0] != ' ' || s[1] == '[')
		return 0;
	t = 1 + strcspn(s + 1, " ");
	if (t > n)
		t = n;
	for (c = t; c > 1 && s[c - 1] != ':'; c--)
		;
	if (c <= 2 || c == t || strspn(s + c, "0123456789") != t - c || !memchr(s + 1, '.', c - 1))
		return 0;
	return t;
}

/* " [module]", " [module buildid]" or " [inline]" filling @s exactly */
static bool module_part(const char *s, size_t n)
{
	size_t i;

	if (n < 4 || s[0] != ' ' || s[1] != '[' || s[n - 1] != ']')
		return false;
	for (i = 2; i < n - 1 && s[i] != ' '; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_-", s[i]))
			return false;
	return i == n - 1 || all_hex(s + i + 1, n - 2 - i);
}

/*
 * A stack frame line: "? " (unreliable, in a show_regs() trace), a frame
 * token, then nothing, " [module]" or, with CONFIG_STACKTRACE_BUILD_ID,
 * " [module buildid]". A symbolized trace (decode_stacktrace.sh, syzbot)
 * adds " file.c:123" before the module, and has inlined frames
 * "f file.h:12 [inline]" without an offset. Returns the length of the
 * source part in *src_len (0 when there is none).
 */
static bool frame_line(const char *s, size_t n, size_t *src_off, size_t *src_len)
{
	size_t t, sp, skip = 0;

	*src_off = *src_len = 0;
	if (n > 2 && s[0] == '?' && s[1] == ' ') {
		skip = 2;
		s += 2;
		n -= 2;
	}
	t = strcspn(s, " ");
	if (t > n)
		t = n;
	sp = source_part(s + t, n - t);
	if (!frame_token(s, t) && !(sp && symbol_token(s, t) && t + sp < n &&
				    !strncmp(s + t + sp, " [inline]", n - t - sp)))
		return false;
	if (sp) {
		*src_off = skip + t + 1;
		*src_len = sp - 1;
	}
	t += sp;
	return t == n || module_part(s + t, n - t);
}

/* Before 4.15 x86 printed each frame's address first: "[<ffffffff81cb0bb9>] f+0x83/0xba" */
static void skip_frame_address(const char **s, size_t *n)
{
	const char *e;

	if (*n > 4 && (*s)[0] == '[' && (*s)[1] == '<' && (e = memchr(*s, ']', *n)) &&
	    e[-1] == '>' && (size_t)(e - *s) + 2 < *n && e[1] == ' ') {
		*n -= (size_t)(e + 2 - *s);
		*s = e + 2;
	}
}

static bool is_frame(const char *s, size_t n)
{
	size_t off, len;

	skip_frame_address(&s, &n);
	return frame_line(s, n, &off, &len);
}

/* A frame of @st, unless the report holds KFR_MAX_STACK_TEXT bytes of them. */
static void stack_add(struct kfr_slot *sl, struct kfr_stack *st, const char *s, size_t n)
{
	size_t off, len;

	if (st->n >= KFR_MAX_FRAMES)
		return;
	skip_frame_address(&s, &n);
	if (sl->stack_text + n > KFR_MAX_STACK_TEXT) {
		if (!sl->gap)
			sl->gap = KFR_R_TOO_LONG;
		return;
	}
	sl->stack_text += n;
	/* a symbolized log's file:line is the frame's source */
	if (frame_line(s, n, &off, &len) && len)
		st->src[st->n] = kfr_field(s + off, len);
	st->frames[st->n++] = kfr_field(s, n);
}

/* "F+0x1/0x2 [mod buildid]" -> function F, module mod */
static void set_function(struct kfr_report *r, const char *s, size_t n)
{
	const char *sp = memchr(s, ' ', n), *plus;
	size_t fn;

	set_str(&r->location, s, n);
	fn = sp ? (size_t)(sp - s) : n;
	plus = memchr(s, '+', fn);
	set_str(&r->function, s, plus ? (size_t)(plus - s) : fn);
	if (sp && sp[1] == '[' && s[n - 1] == ']')
		set_str(&r->module, sp + 2, strcspn(sp + 2, " ]"));
}

/* Each kind of report: how its title and its detail line begin. */
static const struct {
	const char *prefix;
	const char *kind;
	bool has_access;
	const char *detail;
} titles[] = {
	{ "out-of-bounds ", "out-of-bounds", true, "Out-of-bounds " },
	{ "use-after-free ", "use-after-free", true, "Use-after-free " },
	{ "memory corruption", "memory-corruption", false, "Corrupted memory at " },
	{ "invalid free", "invalid-free", false, "Invalid free of " },
	{ "invalid ", "invalid-access", true, "Invalid " },
};

#define N_TITLES (sizeof(titles) / sizeof(titles[0]))

/* Kind and access of titles[i], the access word at @s; "unknown" past the end. */
static void set_kind(struct kfr_report *r, size_t i, const char *s)
{
	if (i == N_TITLES) {
		set_str(&r->kind, "unknown", 7);
		return;
	}
	set_str(&r->kind, titles[i].kind, strlen(titles[i].kind));
	if (!titles[i].has_access)
		return;
	if (starts(s, "read"))
		set_str(&r->access, "read", 4);
	else if (starts(s, "write"))
		set_str(&r->access, "write", 5);
}

/* The kind of a detail line ("Use-after-free read at ..."), or N_TITLES. */
static size_t detail_kind(const char *s)
{
	size_t i;

	for (i = 0; i < N_TITLES; i++)
		if (starts(s, titles[i].detail))
			break;
	return i;
}

/* After "BUG: KFENCE: " */
static void parse_title(struct kfr_report *r, const char *s, size_t n)
{
	const char *in, *end = s + n;
	size_t i;

	for (i = 0; i < N_TITLES; i++)
		if (starts(s, titles[i].prefix))
			break;
	if (i < N_TITLES)
		s += strlen(titles[i].prefix);
	set_kind(r, i, s);
	in = strstr(s, " in ");
	if (in && in + 4 < end)
		set_function(r, in + 4, (size_t)(end - in - 4));
}

/* "kfence-#N" anywhere in @s */
static void find_object(struct kfr_report *r, const char *s)
{
	const char *k = strstr(s, "kfence-#");

	if (k && isdigit((unsigned char)k[8]))
		r->object = strtol(k + 8, NULL, 10);
}

/* The token after @after up to a space, colon or end */
static void find_address(struct kfr_report *r, const char *s, const char *after)
{
	const char *a = strstr(s, after), *e;

	if (!a)
		return;
	a += strlen(after);
	for (e = a; *e && *e != ' ' && *e != '\n' && *e != '\r'; e++)
		;
	if (e > a && e[-1] == ':')
		e--;
	if (e > a)
		set_str(&r->address, a, (size_t)(e - a));
}

/* The line after the title: what, where and which object. */
static bool parse_detail(struct kfr_report *r, const char *s)
{
	const char *q;
	long off;
	char side[8];

	if (starts(s, "Out-of-bounds ") || starts(s, "Use-after-free ") ||
	    starts(s, "Invalid read at") || starts(s, "Invalid write at")) {
		find_address(r, s, " at ");
	} else if (starts(s, "Invalid free of ")) {
		find_address(r, s, " of ");
	} else if (starts(s, "Corrupted memory at ")) {
		find_address(r, s, " at ");
		q = strchr(s, '[');
		if (q && strchr(q, ']'))
			set_str(&r->corrupted, q, (size_t)(strchr(q, ']') - q + 1));
	} else {
		return false;
	}
	find_object(r, s);
	/* the last '(': a hashed address may print as 0x(____ptrval____) */
	q = strrchr(s, '(');
	if (q && sscanf(q, "(%ldB %7s of", &off, side) == 2 &&
	    (!strcmp(side, "left") || !strcmp(side, "right"))) {
		r->has_offset = true;
		r->offset = off;
		set_str(&r->side, side, strlen(side));
	}
	return true;
}

/* "START-END" up to @stop */
static void set_range(struct kfr_report *r, const char *s, const char *stop)
{
	const char *dash = strchr(s, '-');

	if (dash && stop && dash < stop) {
		set_str(&r->object_start, s, (size_t)(dash - s));
		set_str(&r->object_end, dash + 1, (size_t)(stop - dash - 1));
	}
}

static bool parse_track_at(struct kfr_track *t, const char *s, const char *verb);

/*
 * 5.15+:   "kfence-#N: 0xSTART-0xEND, size=S, cache=C"
 * 5.12-14: "kfence-#N [0xSTART-0xEND, size=S, cache=C] allocated by task P:"
 * Returns 2 when the line also opened the allocation track.
 */
static int parse_object(struct kfr_report *r, const char *s, size_t n)
{
	const char *q, *c, *close;

	if (!starts(s, "kfence-#") || !isdigit((unsigned char)s[8]))
		return 0;
	r->object = strtol(s + 8, NULL, 10);
	q = s + 8 + strspn(s + 8, "0123456789");
	if (starts(q, ": ")) {
		set_range(r, q + 2, strchr(q, ','));
		close = s + n;
	} else if (starts(q, " [")) {
		close = strchr(q, ']');
		set_range(r, q + 2, strchr(q, ','));
	} else {
		return 1;	/* "kfence-#N unused" */
	}
	c = strstr(q, "size=");
	if (c)
		r->size = strtol(c + 5, NULL, 10);
	c = strstr(q, "cache=");
	if (c && close && close > c + 6)
		set_str(&r->cache, c + 6, (size_t)(close - c - 6));
	/* "] allocated by ...": close[1] may be the terminating NUL. */
	if (close && close[0] == ']' && close[1] == ' ' &&
	    parse_track_at(&r->alloc, close + 2, "allocated"))
		return 2;
	return 1;
}

/*
 * "allocated by task P on cpu C at T.s:" (5.15+), 6.12's "... at
 * T.s (A.s ago):", 5.12-5.14's "allocated by task P:", and 6.12's "rcu freeing
 * by task ...".
 */
static bool parse_track_at(struct kfr_track *t, const char *s, const char *verb)
{
	int pid, cpu, used = 0;
	char fmt[64];
	const char *at, *rest;

	if (!starts(s, verb) || !starts(s + strlen(verb), " by task "))
		return false;
	snprintf(fmt, sizeof(fmt), "%s by task %%d%%n", verb);
	if (sscanf(s, fmt, &pid, &used) != 1 || !used)
		return false;
	rest = s + used;
	if (*rest != ':' && !starts(rest, " on cpu "))
		return false;
	track_clear(t);
	t->present = true;
	t->pid = pid;
	used = 0;
	if (sscanf(rest, " on cpu %d%n", &cpu, &used) == 1 && used) {
		t->cpu = cpu;
		at = strstr(rest, " at ");
		if (at) {
			size_t n = strspn(at + 4, "0123456789.");

			if (n)
				t->time = kfr_field(at + 4, n);
		}
	}
	return true;
}

static int parse_track(struct kfr_report *r, const char *s)
{
	if (parse_track_at(&r->alloc, s, "allocated"))
		return KFR_ALLOC;
	if (parse_track_at(&r->free, s, "freed"))
		return KFR_FREE;
	if (parse_track_at(&r->free, s, "rcu freeing")) {
		r->free.rcu = true;
		return KFR_FREE;
	}
	return 0;
}

/*
 * dump_stack_print_info(): "CPU: 0 [UID: 0 ]PID: 31 Comm: kunit_try_catch
 * [Kdump: loaded ]Tainted: G    B    N 6.1.192 #1" or "... Not tainted ...".
 * The comm may hold spaces: it ends where the taint begins.
 */
static bool parse_task(struct kfr_report *r, const char *s, size_t n)
{
	int cpu, uid = -1, pid, used = 0;
	const char *c, *t, *e = s + n, *rel = NULL, *ce;
	char taint[32];
	size_t len = 0, tl;

	if (!starts(s, "CPU: ") || sscanf(s, "CPU: %d %n", &cpu, &used) != 1 || !used)
		return false;
	c = s + used;
	used = 0;
	if (sscanf(c, "UID: %d %n", &uid, &used) == 1 && used)
		c += used;
	used = 0;
	if (sscanf(c, "PID: %d Comm: %n", &pid, &used) != 1 || !used)
		return false;
	c += used;
	r->cpu = cpu;
	r->uid = uid;
	r->pid = pid;
	t = strstr(c, " Tainted: ");
	ce = strstr(c, " Not tainted ");
	if (ce && (!t || ce < t)) {
		rel = ce + strlen(" Not tainted ");
		t = ce;
	} else if (t) {
		/* one letter per flag that is set, blanks for the others */
		for (rel = t + strlen(" Tainted: "); rel < e; rel += tl) {
			rel = skip_space(rel);
			tl = strcspn(rel, " ");
			if (tl != 1 || !isupper((unsigned char)*rel))
				break;
			if (len < sizeof(taint) - 1)
				taint[len++] = *rel;
		}
	} else {
		t = e;
	}
	ce = t;
	if (ce - c >= 14 && starts(ce - 14, " Kdump: loaded"))
		ce -= 14;
	while (ce > c && ce[-1] == ' ')
		ce--;
	set_str(&r->comm, c, (size_t)(ce - c));
	taint[len] = '\0';
	set_str(&r->taint, taint, len);
	if (rel && rel < e) {
		rel = skip_space(rel);
		set_str(&r->release, rel, strcspn(rel, " \r\n"));
	}
	return true;
}

/*
 * A real kernel address (no_hash_pointers): the kernel half has the top
 * bit set, while a hashed pointer prints as 0x00000000xxxxxxxx.
 */
static bool kernel_addr(const char *s, unsigned long long *v)
{
	char *end;

	if (!s || strncmp(s, "0x", 2) || !isxdigit((unsigned char)s[2]))
		return false;
	*v = strtoull(s, &end, 16);
	return *end == '\0' && (*v >> 63);
}

/*
 * Where the address lies against the object, for the reports that do not
 * say (use-after-free, corruption, invalid free): only possible with real
 * addresses, since each hashed pointer is hashed on its own. Same
 * convention as KFENCE's out-of-bounds line: left is counted from the
 * object's start backwards, right and inside from its start.
 */
static void derive_offset(struct kfr_report *r)
{
	unsigned long long a, start, end;
	const char *side;

	if (r->has_offset || !kernel_addr(r->address, &a) ||
	    !kernel_addr(r->object_start, &start) || !kernel_addr(r->object_end, &end))
		return;
	if (a < start) {
		r->offset = (long)(start - a);
		side = "left";
	} else {
		r->offset = (long)(a - start);
		side = a > end ? "right" : "inside";
	}
	r->has_offset = true;
	set_str(&r->side, side, strlen(side));
}

static bool needs_object(const struct kfr_report *r)
{
	return r->kind && strcmp(r->kind, "invalid-access") && strcmp(r->kind, "unknown");
}

/* "double-free or invalid-free", "double-free", "invalid-free" */
static bool kasan_free_kind(const char *kind)
{
	size_t n = kind ? strlen(kind) : 0;

	return n >= 5 && !strcmp(kind + n - 5, "-free") && !strstr(kind, "use-after-free");
}

/* Why the report in @sl, closed by its ruler, is not whole; NULL if it is. */
static const char *missing(const struct kfr_slot *sl)
{
	const struct kfr_report *r = &sl->cur;

	if (sl->gap)
		return sl->gap;
	/* a console at the default loglevel shows only a report's KERN_ERR
	 * lines (title, detail, footer): its stacks and object are KERN_WARNING
	 */
	if (sl->detail && sl->footer && !r->stack.n && !sl->object_line)
		return KFR_R_FILTERED;
	/* KASAN before 6.0 printed no detail line for a bad free */
	if (!sl->detail && !(sl->kasan && kasan_free_kind(r->kind)))
		return KFR_R_NO_DETAIL;
	if (!r->stack.n)
		return KFR_R_NO_STACK;
	if (!sl->kasan && needs_object(r) && (!sl->object_line || !r->alloc.present))
		return KFR_R_NO_OBJECT;
	if (!sl->footer)
		return KFR_R_NO_FOOTER;
	return NULL;
}

/*
 * Why the report in @sl is not whole at a ruler. A ruler first thing in
 * the next input, after a report the last one cut short, is most likely
 * the next report's opening one: the report was truncated there.
 */
static const char *ruler_closes(const struct kfr_slot *sl)
{
	const char *why = missing(sl);

	return why && !sl->gap && sl->at_end_of_input ? KFR_R_TRUNCATED : why;
}

static void emit(struct kfr_parser *p, struct kfr_slot *sl, const char *reason)
{
	struct kfr_report *r = &sl->cur;

	derive_offset(r);
	r->reason = reason;
	r->complete = !reason;
	kfr_set_titles(r);
	if (!r->release && p->release[0])
		r->release = xstrndup(p->release, strlen(p->release));
	p->count++;
	p->n_active--;
	if (p->emit)
		p->emit(r, p->arg);
	slot_reset(sl);
}

static bool is_ruler(const char *s, size_t n)
{
	return n >= 20 && strspn(s, "=") == n;
}

/*
 * The report a line belongs to: same task (caller id) and CPU column on the
 * same host. A report whose title came without a host (a paste that lost
 * the title's prefix) takes the host of the first line that has one.
 */
static struct kfr_slot *slot_find(struct kfr_parser *p, const struct kfr_prefix *px)
{
	struct kfr_slot *sl, *hostless = NULL;

	for (size_t i = 0; i < p->n_slots; i++) {
		sl = p->slots[i];
		if (!sl->active || sl->cpu != px->cpu || strcmp(sl->caller, px->caller))
			continue;
		if (!strcmp(sl->host, px->host))
			return sl;
		if (!sl->host[0])
			hostless = sl;
	}
	if (hostless && px->host[0]) {
		snprintf(hostless->host, sizeof(hostless->host), "%s", px->host);
		if (!hostless->cur.host)
			hostless->cur.host = xstrndup(px->host, strlen(px->host));
	}
	return hostless;
}

/*
 * A free slot: there is no cap on the reports open at once (a central log
 * of 200 hosts may have 200 open), and each closes on its ruler, at
 * KFR_MAX_BODY lines, or at the end of the input.
 */
static struct kfr_slot *slot_new(struct kfr_parser *p)
{
	struct kfr_slot **v;

	for (size_t i = 0; i < p->n_slots; i++)
		if (!p->slots[i]->active)
			return p->slots[i];
	if (!(p->n_slots & (p->n_slots - 1))) {
		v = realloc(p->slots, (p->n_slots ? 2 * p->n_slots : 4) * sizeof(*v));
		if (!v) {
			perror("kfence-report");
			exit(1);
		}
		p->slots = v;
	}
	v = &p->slots[p->n_slots];
	*v = calloc(1, sizeof(**v));
	if (!*v) {
		perror("kfence-report");
		exit(1);
	}
	p->n_slots++;
	kfr_report_clear(&(*v)->cur);
	slot_reset(*v);
	return *v;
}

static char *dup_or_null(const char *s)
{
	return s && s[0] ? xstrndup(s, strlen(s)) : NULL;
}

/*
 * After "BUG: KASAN: ": "slab-use-after-free in f+0x1c/0x30 [mod]", before
 * 4.12 "use-after-free in f+0x1c/0x30 at addr ffff8800...", and before 4.16
 * "null-ptr-deref on address 0000000000000010" (no function).
 */
static void parse_kasan_title(struct kfr_report *r, const char *s, size_t n)
{
	const char *in = strstr(s, " in "), *end = s + n, *at;
	size_t kl = in && in < end ? (size_t)(in - s) : strcspn(s, " ");

	set_str(&r->kind, s, kl);
	if (!in || in + 4 >= end)
		return;
	at = strstr(in + 4, " at addr ");
	if (at && at < end) {
		find_address(r, at, " addr ");
		end = at;
	}
	set_function(r, in + 4, (size_t)(end - in - 4));
}

static bool lost_some(const struct kfr_slot *sl)
{
	return sl->gap && !strcmp(sl->gap, KFR_R_LOST);
}

/* A new report of @px's task and host, in a slot of its own. */
static struct kfr_slot *open_slot(struct kfr_parser *p, const struct kfr_prefix *px)
{
	struct kfr_slot *sl = slot_find(p, px);
	bool mixed = false;

	if (sl && lost_some(sl)) {
		/* its end was most likely among the records lost */
		emit(p, sl, KFR_R_LOST);
	} else if (sl && sl->at_end_of_input) {
		/* the last input ended inside it, and this one goes on elsewhere */
		emit(p, sl, sl->gap ? sl->gap : KFR_R_TRUNCATED);
	} else if (sl) {
		/* Without caller ids, a report whose footer was not seen yet
		 * may still be printing on another CPU: its remaining lines
		 * cannot be told from the new report's.
		 */
		mixed = !px->caller[0] && sl->section != KFR_TAIL;
		emit(p, sl, mixed ? KFR_R_INTERLEAVED : KFR_R_INTERRUPTED);
	} else {
		sl = slot_new(p);
	}
	sl->active = true;
	p->n_active++;
	snprintf(sl->caller, sizeof(sl->caller), "%s", px->caller);
	snprintf(sl->host, sizeof(sl->host), "%s", px->host);
	sl->cpu = px->cpu;
	sl->section = KFR_HEAD;
	sl->gap = mixed ? KFR_R_INTERLEAVED : NULL;
	sl->cur.line = p->lineno;
	sl->cur.seq = sl->cur.last_seq = px->seq;
	sl->cur.time = dup_or_null(px->ts);
	sl->cur.wallclock = dup_or_null(px->wallclock);
	sl->cur.caller = dup_or_null(px->caller);
	sl->cur.host = dup_or_null(px->host);
	return sl;
}

static struct kfr_slot *start_report(struct kfr_parser *p, const char *title,
				     const struct kfr_prefix *px)
{
	bool kasan = starts(title, "BUG: KASAN: ");
	const char *s = title + strlen(kasan ? "BUG: KASAN: " : "BUG: KFENCE: ");
	struct kfr_slot *sl = open_slot(p, px);

	sl->kasan = kasan;
	sl->cur.detector = kasan ? "kasan" : "kfence";
	if (kasan)
		parse_kasan_title(&sl->cur, s, trimmed_len(s));
	else
		parse_title(&sl->cur, s, trimmed_len(s));
	return sl;
}

/*
 * A detail line with no report open ("Use-after-free read at 0x... (in
 * kfence-#179):"): the log lost the report's title (it begins inside the
 * report, or the title's records were overwritten). The rest is read as a
 * report of the kind and access the detail line gives, with reason no-title.
 */
static struct kfr_slot *start_headless(struct kfr_parser *p, const char *s,
				       const struct kfr_prefix *px)
{
	size_t k = detail_kind(s);
	struct kfr_slot *sl;

	if (k == N_TITLES || !strstr(s, "kfence-#"))
		return NULL;
	sl = open_slot(p, px);
	sl->gap = KFR_R_NO_TITLE;
	sl->cur.detector = "kfence";
	set_kind(&sl->cur, k, s + strlen(titles[k].detail));
	return sl;
}

static struct kfr_stack *section_stack(struct kfr_slot *sl)
{
	switch (sl->section) {
	case KFR_STACK:
		return &sl->cur.stack;
	case KFR_ALLOC:
		return &sl->cur.alloc.stack;
	case KFR_FREE:
		return &sl->cur.free.stack;
	default:
		return NULL;
	}
}

/* A part seen twice: two reports' lines are mixed in this one. */
static void seen_twice(struct kfr_slot *sl, bool twice)
{
	if (twice && !sl->gap)
		sl->gap = KFR_R_INTERLEAVED;
}

/*
 * A KASAN report (mm/kasan/report.c): "Read of size 1 at addr A by task
 * C/P", the footer, then "Call Trace:" and the stack (its first frames are
 * KASAN's own: the skip list passes over them), "Allocated by task P:",
 * "Freed by task P:", and "which belongs to the cache C of size Z".
 */
static void kasan_line(struct kfr_slot *sl, const char *s, size_t n)
{
	struct kfr_report *r = &sl->cur;
	struct kfr_stack *st;
	const char *c;
	int pid;

	/* "Read at addr A by task": hardware tags, which know no size */
	if (!sl->detail && (starts(s, "Read of size ") || starts(s, "Write of size ") ||
			    starts(s, "Read at addr ") || starts(s, "Write at addr ") ||
			    starts(s, "Free of addr "))) {
		sl->detail = true;
		if (s[0] != 'F')
			set_str(&r->access, s[0] == 'R' ? "read" : "write", s[0] == 'R' ? 4 : 5);
		if (strstr(s, " addr "))	/* the size read is not the object's */
			find_address(r, s, " addr ");
	} else if (!sl->footer && parse_task(r, s, n)) {
		sl->footer = true;
		sl->section = KFR_HEAD;
	} else if (starts(s, "Call Trace:") || starts(s, "Call trace:")) {
		sl->section = r->stack.n ? KFR_TAIL : KFR_STACK;
	} else if (sscanf(s, "Allocated by task %d:", &pid) == 1) {
		track_clear(&r->alloc);
		r->alloc.present = true;
		r->alloc.pid = pid;
		sl->section = KFR_ALLOC;
	} else if (sscanf(s, "Freed by task %d:", &pid) == 1) {
		track_clear(&r->free);
		r->free.present = true;
		r->free.pid = pid;
		sl->section = KFR_FREE;
	} else if (starts(s, "The buggy address") || starts(s, "Last potentially") ||
		   starts(s, "Second to last") || starts(s, "Memory state")) {
		sl->section = KFR_OBJECT;	/* no frames there */
	} else if ((c = strstr(s, "which belongs to the cache "))) {
		c += strlen("which belongs to the cache ");
		set_str(&r->cache, c, strcspn(c, " "));
		c = strstr(c, " of size ");
		if (c)
			r->size = strtol(c + 9, NULL, 10);
		sl->object_line = true;
	} else if ((st = section_stack(sl)) && is_frame(s, n)) {
		stack_add(sl, st, s, n);
	}
}

static void body_line(struct kfr_slot *sl, const char *s, size_t n)
{
	struct kfr_report *r = &sl->cur;
	struct kfr_stack *st;
	bool had_alloc = r->alloc.present, had_free = r->free.present;
	int obj, tr;

	if (sl->kasan) {
		kasan_line(sl, s, n);
		return;
	}
	if (sl->section == KFR_TAIL) {
		/* Hardware name, registers, call trace: only a second footer
		 * (another report's) matters
		 */
		seen_twice(sl, starts(s, "CPU: ") && strstr(s, " PID: ") && strstr(s, " Comm: "));
		return;
	}
	if (sl->section == KFR_HEAD && !sl->detail && parse_detail(r, s)) {
		sl->detail = true;
		sl->section = KFR_STACK;
	} else if ((obj = parse_object(r, s, n))) {
		seen_twice(sl, sl->object_line);
		sl->object_line = true;
		sl->section = obj == 2 ? KFR_ALLOC : KFR_OBJECT;
		seen_twice(sl, obj == 2 && had_alloc);
	} else if ((tr = parse_track(r, s))) {
		seen_twice(sl, tr == KFR_ALLOC ? had_alloc : had_free);
		sl->section = (enum kfr_section)tr;
	} else if (parse_task(r, s, n)) {
		sl->footer = true;
		sl->section = KFR_TAIL;
	} else if (strstr(s, "(in kfence-#")) {
		find_object(r, s);	/* a split pr_cont() line */
	} else if (sl->section == KFR_HEAD && !r->stack.n && is_frame(s, n)) {
		/* the detail line was lost: frames still belong to it */
		sl->section = KFR_STACK;
		stack_add(sl, &r->stack, s, n);
	} else if (parse_detail(r, s)) {
		seen_twice(sl, true);
	} else {
		st = section_stack(sl);
		if (st && is_frame(s, n))
			stack_add(sl, st, s, n);
	}
}

/*
 * A line of another task's stack dump (show_stack(), the hung-task and
 * lockup detectors, sched_show_task()): KFENCE prints none of these before
 * its footer, and its stack_trace_print() never prints a "? " frame.
 */
static bool foreign_trace_line(const char *s, size_t n)
{
	static const char *const marks[] = {
		"Call Trace:", "Call trace:", "<TASK>", "</TASK>", "<IRQ>", "</IRQ>",
		"<NMI>", "</NMI>", "INFO: task ",
	};

	/* every line of an open report comes here: most begin otherwise */
	if (!strchr("C<It?", s[0]))
		return false;
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		if (starts(s, marks[i]))
			return true;
	if (starts(s, "task:") && strstr(s, " state:"))
		return true;
	return s[0] == '?' && s[1] == ' ' && is_frame(s, n);
}

/*
 * Without caller ids (or an Android CPU column) another task's stack dump
 * mixes its frames into a report's own: once one of its lines shows up
 * before the footer, no frame of the report can be trusted to be its own,
 * and the title may not take one (interleaved: set_guilty()). A KASAN
 * report's own trace follows its footer: until then frames are not taken.
 * True when @s is such a line (not the report's).
 */
static bool check_foreign(struct kfr_slot *sl, const char *s, size_t n,
			  const struct kfr_prefix *px)
{
	if (px->caller[0] || px->cpu >= 0 || sl->section == KFR_TAIL ||
	    (sl->kasan && sl->footer) || !foreign_trace_line(s, n))
		return false;
	seen_twice(sl, true);
	if (sl->kasan)
		sl->section = KFR_OBJECT;	/* a section without frames */
	return true;
}

/* A report with a line longer than the kernel prints is no sound one. */
static void cut_in(const struct kfr_parser *p, struct kfr_slot *sl)
{
	if (p->line_cut && !sl->gap)
		sl->gap = KFR_R_TOO_LONG;
}

static void parse_message(struct kfr_parser *p, const char *msg, const struct kfr_prefix *px)
{
	const char *s = skip_space(msg);
	const char *title = strstr(s, "BUG: KFENCE: ");
	size_t n = trimmed_len(s);
	struct kfr_slot *sl;

	if (!title && (title = strstr(s, "BUG: KASAN: "))) {
		/* KASAN prints one title line per inlined frame: the first
		 * opens the report, the others repeat it
		 */
		sl = slot_find(p, px);
		if (sl && sl->kasan && !sl->detail)
			return;
	}
	if (title) {
		sl = start_report(p, title, px);
		cut_in(p, sl);
		return;
	}
	sl = slot_find(p, px);
	if (!sl)
		sl = start_headless(p, s, px);
	if (!sl)
		return;
	if (px->seq >= 0)
		sl->cur.last_seq = px->seq;
	if (is_ruler(s, n)) {
		emit(p, sl, ruler_closes(sl));
		return;
	}
	sl->at_end_of_input = false;
	if (!n)
		return;
	if (++sl->body_lines > KFR_MAX_BODY) {
		emit(p, sl, KFR_R_TOO_LONG);
		return;
	}
	cut_in(p, sl);
	if (!check_foreign(sl, s, n, px))
		body_line(sl, s, n);
}

static int hexval(char c)
{
	if (isdigit((unsigned char)c))
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * /dev/kmsg escapes unprintable bytes as \xHH: a report's "...\n\n" title
 * comes out as "...\x0a". Decode, then parse each embedded line.
 */
static void parse_escaped(struct kfr_parser *p, const char *msg, const struct kfr_prefix *px)
{
	char *buf = xstrndup(msg, strlen(msg)), *d = buf, *line;
	const char *s;

	for (s = msg; *s; s++) {
		if (s[0] == '\\' && s[1] == 'x' && hexval(s[2]) >= 0 && hexval(s[3]) >= 0) {
			*d++ = (char)(hexval(s[2]) << 4 | hexval(s[3]));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
	for (line = buf; line; ) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		parse_message(p, line, px);
		line = nl ? nl + 1 : NULL;
	}
	free(buf);
}

/* Records were lost on @host ("": any host): its open reports miss lines. */
static void lost_on(struct kfr_parser *p, const char *host)
{
	for (size_t i = 0; i < p->n_slots; i++) {
		struct kfr_slot *sl = p->slots[i];

		if (sl->active && !sl->gap && (!host[0] || !strcmp(sl->host, host)))
			sl->gap = KFR_R_LOST;
	}
}

void kfr_parser_lost(struct kfr_parser *p)
{
	lost_on(p, "");
}

/*
 * The log says it lost lines: a console's "** 23 printk messages dropped
 * **" (5.10+ on a line of its own, before that in front of the next line
 * printed) or journald's "Missed 23 kernel messages" (it fell behind
 * /dev/kmsg). Any report open on that host may have lost lines, of its own
 * or of its end, that nothing else would tell.
 */
static bool says_lines_lost(const char *line)
{
	/* every line of an open report comes here: one scan, for the word
	 * both messages have
	 */
	const char *m = strstr(line, "messages");

	if (!m)
		return false;
	if (m - line >= 7 && !strncmp(m - 7, "printk ", 7) && !strncmp(m + 8, " dropped", 8))
		return true;
	return m - line >= 7 && !strncmp(m - 7, "kernel ", 7) && strstr(line, "Missed ");
}

static void finish_all(struct kfr_parser *p, const char *reason)
{
	struct kfr_slot *first;

	/* in input order, so that records come out as their reports began */
	for (;;) {
		first = NULL;
		for (size_t i = 0; i < p->n_slots; i++)
			if (p->slots[i]->active &&
			    (!first || p->slots[i]->cur.line < first->cur.line))
				first = p->slots[i];
		if (!first)
			break;
		emit(p, first, first->gap ? first->gap : reason);
	}
}

/* What a line outside a report must hold to matter (kfr_parser_line). */
static const char triggers[3][9] = { "KFENCE: ", "KASAN: ", "kfence-#" };

/*
 * Newlines in [s, end), 32 bytes a step with the compiler's vector
 * extensions (two SSE2 or NEON registers, one AVX2 register where the CPU
 * has it: the x86-64 build carries both, chosen at load time): counting
 * the lines passed over must not cost more than finding the reports.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__)
#define WIDE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#ifndef WIDE_CLONES
#define WIDE_CLONES
#endif

WIDE_CLONES static size_t count_lines(const char *s, const char *end)
{
	typedef unsigned char v32 __attribute__((vector_size(32)));
	v32 nl;
	size_t n = 0;

	memset(&nl, '\n', sizeof(nl));
	while (end - s >= 32) {
		v32 acc = { 0 };
		int steps = 0;

		/* each lane counts to at most 255 before it is added up */
		for (; end - s >= 32 && steps < 255; s += 32, steps++) {
			v32 v;

			memcpy(&v, s, 32);
			acc -= (v32)(v == nl);	/* a match is all ones: -1 */
		}
		for (int i = 0; i < 32; i++)
			n += acc[i];
	}
	for (; s < end; s++)
		n += *s == '\n';
	return n;
}

/*
 * The next line that can matter: "KFENCE: " or "KASAN: " (found by
 * memchr() for the rare 'K') or "kfence-#" (by memchr() for '#'), with
 * each search's result kept in @sc until the scan passes it.
 */
static const char *next_k(const char *s, const char *end)
{
	while ((s = memchr(s, 'K', (size_t)(end - s)))) {
		if ((end - s >= 8 && !memcmp(s, triggers[0], 8)) ||
		    (end - s >= 7 && !memcmp(s, triggers[1], 7)))
			return s;
		s++;
	}
	return end;
}

static const char *next_hash(const char *s, const char *base, const char *end)
{
	while ((s = memchr(s, '#', (size_t)(end - s)))) {
		if (s - base >= 7 && !memcmp(s - 7, triggers[2], 8))
			return s - 7;
		s++;
	}
	return end;
}

/*
 * Nearly every line of a log is no report's: instead of looking at each,
 * find the next trigger over the whole buffer (as grep does), and count
 * the newlines passed over.
 */
const char *kfr_parser_skip(struct kfr_parser *p, struct kfr_scan *sc,
			    const char *s, const char *end)
{
	const char *hit, *line;

	if (p->n_active || s >= end)
		return s;
	if (sc->end != end) {
		memset(sc, 0, sizeof(*sc));
		sc->end = end;
	}
	if (!sc->next[0] || sc->next[0] < s)
		sc->next[0] = next_k(s, end);
	if (!sc->next[1] || sc->next[1] < s)
		sc->next[1] = next_hash(s + 7 < end ? s + 7 : end, s, end);
	hit = sc->next[0] < sc->next[1] ? sc->next[0] : sc->next[1];
	for (line = hit; line > s && line[-1] != '\n'; line--)
		;
	if (line > s) {
		p->lineno += count_lines(s, line);
		p->last_seq = -1;	/* the numbers skipped are unknown, not lost */
	}
	return line;
}

/*
 * Only the first KFR_MAX_LINE bytes of a line are looked at (the kernel
 * prints under 1024): no line costs more than that, whatever its length.
 */
static const char *cap_line(struct kfr_parser *p, const char *line)
{
	p->line_cut = strnlen(line, KFR_MAX_LINE + 1) > KFR_MAX_LINE;
	if (!p->line_cut)
		return line;
	memcpy(p->cut_line, line, KFR_MAX_LINE);
	p->cut_line[KFR_MAX_LINE] = '\0';
	return p->cut_line;
}

void kfr_parser_line(struct kfr_parser *p, const char *line)
{
	struct kfr_prefix px;
	const char *msg;

	p->lineno++;
	line = cap_line(p, line);
	/* Nearly every line of a log is no report's: outside a report only a
	 * title matters, or a detail line whose title was lost. The sequence
	 * numbers skipped are unknown, not lost.
	 */
	if (!p->n_active && !strstr(line, triggers[0]) && !strstr(line, triggers[1]) &&
	    !strstr(line, triggers[2])) {
		p->last_seq = -1;
		return;
	}
	msg = kfr_message(line, &px);
	if (p->n_active && says_lines_lost(line))
		lost_on(p, px.host);
	if (px.seq >= 0) {
		/* /dev/kmsg numbers every record: a jump is a loss, a step
		 * back another boot (or another log appended)
		 */
		if (p->last_seq >= 0 && px.seq > p->last_seq + 1)
			kfr_parser_lost(p);
		else if (p->last_seq >= 0 && px.seq <= p->last_seq)
			finish_all(p, KFR_R_TRUNCATED);
		p->last_seq = px.seq;
	}
	if (px.release[0])
		snprintf(p->release, sizeof(p->release), "%s", px.release);
	if (px.escaped)
		parse_escaped(p, msg, &px);
	else
		parse_message(p, msg, &px);
}

void kfr_parser_next_input(struct kfr_parser *p)
{
	for (size_t i = 0; i < p->n_slots; i++)
		if (p->slots[i]->active)
			p->slots[i]->at_end_of_input = true;
}

void kfr_parser_finish_lost(struct kfr_parser *p)
{
	for (size_t i = 0; i < p->n_slots; i++)
		if (p->slots[i]->active && lost_some(p->slots[i]))
			emit(p, p->slots[i], KFR_R_LOST);
}

void kfr_parser_finish(struct kfr_parser *p)
{
	finish_all(p, KFR_R_TRUNCATED);
	/* nothing is open now: give back the slots (a caller that only
	 * finishes, as before they were allocated, leaks nothing)
	 */
	kfr_parser_free(p);
	p->last_seq = -1;
	p->release[0] = '\0';
}

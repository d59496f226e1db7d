// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * KFENCE report parser: a line-driven state machine. The kernel prints a
 * report as printk lines between two ===== rulers; other CPUs' messages may
 * interleave, lines may be lost, and a saved log may end mid-report, so
 * every line is recognised on its own and anything unknown is skipped.
 */
#include "report.h"

#include <ctype.h>
#include <inttypes.h>
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

static void set_str(char **dst, const char *s, size_t n)
{
	free(*dst);
	*dst = xstrndup(s, n);
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void stack_clear(struct kfr_stack *st)
{
	for (size_t i = 0; i < st->n; i++)
		free(st->frames[i]);
	st->n = 0;
}

static void track_clear(struct kfr_track *t)
{
	free(t->time);
	stack_clear(&t->stack);
	memset(t, 0, sizeof(*t));
}

void kfr_report_clear(struct kfr_report *r)
{
	char **strs[] = {
		&r->kind, &r->access, &r->function, &r->location, &r->module,
		&r->address, &r->side, &r->object_start, &r->object_end,
		&r->cache, &r->corrupted, &r->comm, &r->time,
	};

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		free(*strs[i]);
	stack_clear(&r->stack);
	track_clear(&r->alloc);
	track_clear(&r->free);
	memset(r, 0, sizeof(*r));
	r->object = -1;
	r->size = -1;
	r->cpu = -1;
	r->pid = -1;
	r->alloc.pid = r->alloc.cpu = -1;
	r->free.pid = r->free.cpu = -1;
}

void kfr_parser_init(struct kfr_parser *p, kfr_emit_fn emit, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->emit = emit;
	p->arg = arg;
	kfr_report_clear(&p->cur);
}

static const char *skip_space(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* "[  12.345678]" at @s: copy the number to @ts and return the end. */
static const char *timestamp(const char *s, char *ts, size_t tssize)
{
	const char *q = s + 1, *num;
	size_t n;

	if (*s != '[')
		return NULL;
	while (*q == ' ')
		q++;
	num = q;
	while (isdigit((unsigned char)*q) || *q == '.')
		q++;
	if (q == num || *q != ']' || !strchr(num, '.') || strchr(num, '.') > q)
		return NULL;
	n = (size_t)(q - num);
	if (n >= tssize)
		n = tssize - 1;
	memcpy(ts, num, n);
	ts[n] = '\0';
	return q + 1;
}

/* /dev/kmsg: "prio,seq,usec,flags[,...];message" */
static const char *kmsg_header(const char *s, char *ts, size_t tssize)
{
	const char *semi = strchr(s, ';');
	unsigned long long usec;
	int prio, used = 0;
	unsigned long long seq;

	if (!semi || semi - s > 64)
		return NULL;
	if (sscanf(s, "%d,%llu,%llu,%n", &prio, &seq, &usec, &used) != 3 || !used)
		return NULL;
	snprintf(ts, tssize, "%llu.%06llu", usec / 1000000, usec % 1000000);
	return semi + 1;
}

/* "Dec  3 10:00:00 host kernel: " or an ISO date from journalctl/rsyslog */
static const char *syslog_prefix(const char *s)
{
	const char *k = strstr(s, " kernel: ");

	if (!k || k - s > 80)
		return NULL;
	if (!(isupper((unsigned char)s[0]) && islower((unsigned char)s[1])) &&
	    !isdigit((unsigned char)s[0]))
		return NULL;
	return k + strlen(" kernel: ");
}

const char *kfr_message(const char *line, char *ts, size_t tssize, bool *escaped)
{
	const char *s = line, *q, *end;

	ts[0] = '\0';
	*escaped = false;
	q = kmsg_header(s, ts, tssize);
	if (q) {
		*escaped = true;
		return q;
	}
	q = syslog_prefix(s);
	if (q)
		s = q;
	if (s[0] == '<') {
		q = s + 1;
		while (isdigit((unsigned char)*q))
			q++;
		if (q > s + 1 && *q == '>')
			s = q + 1;
	}
	/* A timestamp within the first few columns ends any prefix before
	 * it (a console's, or a test harness's "  | ").
	 */
	for (q = s; *q && q - s < 32; q++) {
		if (*q != '[')
			continue;
		end = timestamp(q, ts, tssize);
		if (!end)
			continue;
		s = end;
		/* CONFIG_PRINTK_CALLER: "[  T123]" or "[    C1]" */
		q = s;
		if (*q == '[') {
			q = skip_space(q + 1);
			if ((*q == 'T' || *q == 'C') && isdigit((unsigned char)q[1])) {
				q += 1 + strspn(q + 1, "0123456789");
				if (*q == ']')
					s = q + 1;
			}
		}
		break;
	}
	return s;
}

/* Length of @s without trailing white space and newline. */
static size_t trimmed_len(const char *s)
{
	size_t n = strlen(s);

	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	return n;
}

/* A stack frame line: "sym+0x1/0x2", optionally " [module]", or "0x..." */
static bool is_frame(const char *s, size_t n)
{
	size_t i = 0;

	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == '?'))
		return false;
	if (s[0] == '?' && n > 2 && s[1] == ' ')
		i = 2;	/* unreliable frame in a show_regs() trace */
	for (; i < n && s[i] != ' '; i++) {
		if (!isalnum((unsigned char)s[i]) && !strchr("_.+/$", s[i]))
			return false;
	}
	if (i == n)
		return true;
	/* " [module]" */
	return s[i + 1] == '[' && s[n - 1] == ']' && !memchr(s + i + 1, ' ', n - i - 1);
}

static void stack_add(struct kfr_stack *st, const char *s, size_t n)
{
	if (st->n < KFR_MAX_FRAMES)
		st->frames[st->n++] = xstrndup(s, n);
}

/* "F+0x1/0x2 [mod]" -> function F, module mod */
static void set_function(struct kfr_report *r, const char *s, size_t n)
{
	const char *sp = memchr(s, ' ', n), *plus;
	size_t fn;

	set_str(&r->location, s, n);
	fn = sp ? (size_t)(sp - s) : n;
	plus = memchr(s, '+', fn);
	set_str(&r->function, s, plus ? (size_t)(plus - s) : fn);
	if (sp && sp[1] == '[' && s[n - 1] == ']')
		set_str(&r->module, sp + 2, (size_t)(s + n - 1 - (sp + 2)));
}

static const struct {
	const char *prefix;
	const char *kind;
	bool has_access;
} titles[] = {
	{ "out-of-bounds ", "out-of-bounds", true },
	{ "use-after-free ", "use-after-free", true },
	{ "memory corruption", "memory-corruption", false },
	{ "invalid free", "invalid-free", false },
	{ "invalid ", "invalid-access", true },
};

/* After "BUG: KFENCE: " */
static void parse_title(struct kfr_report *r, const char *s, size_t n)
{
	const char *in, *end = s + n;
	size_t i;

	for (i = 0; i < sizeof(titles) / sizeof(titles[0]); i++)
		if (starts(s, titles[i].prefix))
			break;
	if (i == sizeof(titles) / sizeof(titles[0])) {
		set_str(&r->kind, "unknown", 7);
	} else {
		set_str(&r->kind, titles[i].kind, strlen(titles[i].kind));
		if (titles[i].has_access) {
			s += strlen(titles[i].prefix);
			if (starts(s, "read"))
				set_str(&r->access, "read", 4);
			else if (starts(s, "write"))
				set_str(&r->access, "write", 5);
		}
	}
	in = strstr(s, " in ");
	if (in && in + 4 < end)
		set_function(r, in + 4, (size_t)(end - in - 4));
}

/* "kfence-#N" anywhere in @s */
static void find_object(struct kfr_report *r, const char *s)
{
	const char *k = strstr(s, "kfence-#");

	if (k)
		r->object = strtol(k + 8, NULL, 10);
}

/* The token after "at " up to a space, colon or end */
static void find_address(struct kfr_report *r, const char *s, const char *after)
{
	const char *a = strstr(s, after), *e;

	if (!a)
		return;
	a += strlen(after);
	for (e = a; *e && *e != ' ' && *e != '\n'; e++)
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

/* "kfence-#N: 0xSTART-0xEND, size=S, cache=C" */
static bool parse_object(struct kfr_report *r, const char *s, size_t n)
{
	const char *colon, *dash, *comma, *c;

	if (!starts(s, "kfence-#"))
		return false;
	r->object = strtol(s + 8, NULL, 10);
	colon = strstr(s, ": 0x");
	if (!colon)
		return true;	/* "kfence-#N unused" */
	dash = strchr(colon + 2, '-');
	comma = strchr(colon + 2, ',');
	if (dash && comma && dash < comma) {
		set_str(&r->object_start, colon + 2, (size_t)(dash - colon - 2));
		set_str(&r->object_end, dash + 1, (size_t)(comma - dash - 1));
	}
	c = strstr(s, "size=");
	if (c)
		r->size = strtol(c + 5, NULL, 10);
	c = strstr(s, "cache=");
	if (c)
		set_str(&r->cache, c + 6, (size_t)(s + n - c - 6));
	return true;
}

/* "allocated by task P on cpu C at T.s:" */
static bool parse_track(struct kfr_track *t, const char *s, const char *verb)
{
	int pid, cpu, used = 0;
	char fmt[64];
	const char *at;

	snprintf(fmt, sizeof(fmt), "%s by task %%d on cpu %%d%%n", verb);
	if (sscanf(s, fmt, &pid, &cpu, &used) != 2 || !used)
		return false;
	track_clear(t);
	t->present = true;
	t->pid = pid;
	t->cpu = cpu;
	at = strstr(s + used, " at ");
	if (at) {
		size_t n = strspn(at + 4, "0123456789.");

		if (n)
			t->time = xstrndup(at + 4, n);
	}
	return true;
}

/*
 * "CPU: 0 PID: 31 Comm: kunit_try_catch Tainted: ...", or since 6.11
 * "CPU: 0 UID: 0 PID: 31 Comm: ..." (the taint flags then follow on a
 * "Tainted:" line of their own).
 */
static bool parse_task(struct kfr_report *r, const char *s)
{
	int cpu, pid, used = 0;
	const char *c;

	if ((sscanf(s, "CPU: %d PID: %d Comm: %n", &cpu, &pid, &used) != 2 || !used) &&
	    (sscanf(s, "CPU: %d UID: %*u PID: %d Comm: %n", &cpu, &pid, &used) != 2 || !used))
		return false;
	r->cpu = cpu;
	r->pid = pid;
	c = s + used;
	set_str(&r->comm, c, strcspn(c, " \n"));
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

static void emit(struct kfr_parser *p, bool complete)
{
	derive_offset(&p->cur);
	p->cur.complete = complete;
	p->count++;
	if (p->emit)
		p->emit(&p->cur, p->arg);
	kfr_report_clear(&p->cur);
	p->active = false;
	p->section = KFR_NONE;
	p->body_lines = 0;
}

static bool is_ruler(const char *s, size_t n)
{
	return n >= 20 && strspn(s, "=") == n;
}

static void start_report(struct kfr_parser *p, const char *title, const char *ts)
{
	const char *s = title + strlen("BUG: KFENCE: ");

	if (p->active)
		emit(p, false);
	p->active = true;
	p->section = KFR_HEAD;
	p->cur.line = p->lineno;
	if (ts[0])
		p->cur.time = xstrndup(ts, strlen(ts));
	parse_title(&p->cur, s, trimmed_len(s));
}

static struct kfr_stack *section_stack(struct kfr_parser *p)
{
	switch (p->section) {
	case KFR_STACK:
		return &p->cur.stack;
	case KFR_ALLOC:
		return &p->cur.alloc.stack;
	case KFR_FREE:
		return &p->cur.free.stack;
	default:
		return NULL;
	}
}

static void body_line(struct kfr_parser *p, const char *s, size_t n)
{
	struct kfr_report *r = &p->cur;
	struct kfr_stack *st;

	if (p->section == KFR_TAIL)
		return;	/* Hardware name, registers, call trace */
	if (p->section == KFR_HEAD && parse_detail(r, s)) {
		p->section = KFR_STACK;
	} else if (parse_object(r, s, n)) {
		p->section = KFR_OBJECT;
	} else if (parse_track(&r->alloc, s, "allocated")) {
		p->section = KFR_ALLOC;
	} else if (parse_track(&r->free, s, "freed")) {
		p->section = KFR_FREE;
	} else if (parse_task(r, s)) {
		p->section = KFR_TAIL;
	} else if (strstr(s, "(in kfence-#")) {
		find_object(r, s);	/* a split pr_cont() line */
	} else if (p->section == KFR_HEAD && !r->stack.n && is_frame(s, n)) {
		/* the detail line was lost: frames still belong to it */
		p->section = KFR_STACK;
		stack_add(&r->stack, s, n);
	} else {
		st = section_stack(p);
		if (st && is_frame(s, n))
			stack_add(st, s, n);
	}
}

/*
 * Complete: the footer's task line came before the closing ruler, and the
 * stack and object lines are there. A console at the default loglevel
 * shows only a report's KERN_ERR lines (title, detail, footer): its
 * stacks and object are KERN_WARNING.
 */
static bool whole(const struct kfr_parser *p)
{
	const struct kfr_report *r = &p->cur;

	return p->section == KFR_TAIL && r->stack.n &&
	       (r->cache || (r->kind && !strcmp(r->kind, "invalid-access")));
}

static void parse_message(struct kfr_parser *p, const char *msg, const char *ts)
{
	const char *s = skip_space(msg);
	const char *title = strstr(s, "BUG: KFENCE: ");
	size_t n = trimmed_len(s);

	if (title) {
		start_report(p, title, ts);
		return;
	}
	if (is_ruler(s, n)) {
		if (p->active)
			emit(p, whole(p));
		return;
	}
	if (!p->active || !n)
		return;
	if (++p->body_lines > KFR_MAX_BODY) {
		emit(p, false);
		return;
	}
	body_line(p, s, n);
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
static void parse_escaped(struct kfr_parser *p, const char *msg, const char *ts)
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
		parse_message(p, line, ts);
		line = nl ? nl + 1 : NULL;
	}
	free(buf);
}

void kfr_parser_line(struct kfr_parser *p, const char *line)
{
	char ts[32];
	bool escaped;
	const char *msg = kfr_message(line, ts, sizeof(ts), &escaped);

	p->lineno++;
	if (escaped)
		parse_escaped(p, msg, ts);
	else
		parse_message(p, msg, ts);
}

void kfr_parser_finish(struct kfr_parser *p)
{
	if (p->active)
		emit(p, false);
}

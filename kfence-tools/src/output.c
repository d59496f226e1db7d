// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Printing parsed reports: text for people, JSON lines for tools (schema
 * KFR_SCHEMA, documented in kfence-report(1): every field is always there
 * with one type, null when unknown), one line per report for scripts, and
 * the corpus tests' canonical form.
 */
#include "report.h"

#include <stdio.h>
#include <string.h>

static const char *or_dash(const char *s)
{
	return s ? s : "-";
}

/*
 * JSON string escaping. Logs are not guaranteed to be UTF-8 (a task name
 * is any bytes), so bytes above 0x7f are escaped as \u00XX: always valid
 * JSON, exact for ASCII, Latin-1 for the rest.
 */
void kfr_json_str(FILE *f, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *c, *run;
	char esc[6] = { '\\', 'u', '0', '0' };

	if (!s) {
		fputs("null", f);
		return;
	}
	putc('"', f);
	/* runs of bytes that need no escape go out in one write: a record
	 * is mostly those, and a stdio call a byte was most of --json's time
	 */
	for (c = run = (const unsigned char *)s; *c; c++) {
		if (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\')
			continue;
		fwrite(run, 1, (size_t)(c - run), f);
		run = c + 1;
		if (*c == '"' || *c == '\\') {
			putc('\\', f);
			putc(*c, f);
			continue;
		}
		esc[4] = hex[*c >> 4];
		esc[5] = hex[*c & 15];
		fwrite(esc, 1, sizeof(esc), f);
	}
	fwrite(run, 1, (size_t)(c - run), f);
	putc('"', f);
}

/* Seconds as the kernel prints them: a JSON number, or null. */
static void json_seconds(FILE *f, const char *s)
{
	size_t i = strspn(s ? s : "", "0123456789");

	if (s && i && (!s[i] || (s[i] == '.' && s[i + 1] &&
				 !s[i + 1 + strspn(s + i + 1, "0123456789")])))
		fputs(s, f);
	else
		fputs("null", f);
}

static void json_key(FILE *f, const char *key, bool first)
{
	if (!first)
		putc(',', f);
	putc('"', f);
	fputs(key, f);
	fputs("\":", f);
}

static void json_skey(FILE *f, const char *key, const char *v)
{
	json_key(f, key, false);
	kfr_json_str(f, v);
}

static void json_int(FILE *f, const char *key, long long v, bool known)
{
	json_key(f, key, false);
	if (known)
		fprintf(f, "%lld", v);
	else
		fputs("null", f);
}

static void json_strings(FILE *f, const char *key, char *const *v, size_t n)
{
	json_key(f, key, false);
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		kfr_json_str(f, v[i]);
	}
	fputc(']', f);
}

static void json_stack(FILE *f, const struct kfr_stack *st)
{
	json_strings(f, "stack", st->frames, st->n);
	json_strings(f, "stack_src", st->src, st->n);
}

static void json_track(FILE *f, const char *key, const struct kfr_track *t)
{
	json_key(f, key, false);
	if (!t->present) {
		fputs("null", f);
		return;
	}
	fputs("{\"pid\":", f);
	if (t->pid >= 0)
		fprintf(f, "%d", t->pid);
	else
		fputs("null", f);
	json_int(f, "cpu", t->cpu, t->cpu >= 0);
	json_key(f, "time", false);
	json_seconds(f, t->time);
	json_key(f, "rcu", false);
	fputs(t->rcu ? "true" : "false", f);
	json_stack(f, &t->stack);
	fputc('}', f);
}

void kfr_print_json(FILE *f, const struct kfr_report *r, const struct kfr_meta *m)
{
	const char *host = m && m->host ? m->host : r->host;
	const char *release = r->release ? r->release : m ? m->release : NULL;

	fputc('{', f);
	json_key(f, "schema", true);
	fprintf(f, "%d", KFR_SCHEMA);
	json_skey(f, "detector", r->detector ? r->detector : "kfence");
	json_skey(f, "kind", r->kind);
	json_skey(f, "access", r->access);
	json_skey(f, "title", r->title);
	json_skey(f, "bad_access", r->bad_access);
	json_skey(f, "guilty", r->guilty);
	json_skey(f, "function", r->function);
	json_skey(f, "location", r->location);
	json_skey(f, "module", r->module);
	json_skey(f, "address", r->address);
	json_int(f, "offset", r->offset, r->has_offset);
	json_skey(f, "side", r->side);
	json_int(f, "object", r->object, r->object >= 0);
	json_skey(f, "object_start", r->object_start);
	json_skey(f, "object_end", r->object_end);
	json_int(f, "size", r->size, r->size >= 0);
	json_skey(f, "cache", r->cache);
	json_skey(f, "corrupted", r->corrupted);
	json_stack(f, &r->stack);
	json_track(f, "alloc", &r->alloc);
	json_track(f, "free", &r->free);
	json_int(f, "cpu", r->cpu, r->cpu >= 0);
	json_int(f, "uid", r->uid, r->uid >= 0);
	json_int(f, "pid", r->pid, r->pid >= 0);
	json_skey(f, "comm", r->comm);
	json_skey(f, "taint", r->taint);
	json_skey(f, "release", release);
	json_skey(f, "host", host);
	json_skey(f, "boot_id", m ? m->boot_id : NULL);
	json_key(f, "time", false);
	json_seconds(f, r->time);
	json_skey(f, "wallclock", r->wallclock);
	json_skey(f, "caller", r->caller);
	json_int(f, "seq", r->seq, r->seq >= 0);
	json_int(f, "line", (long long)r->line, true);
	json_key(f, "complete", false);
	fputs(r->complete ? "true" : "false", f);
	json_skey(f, "reason", r->reason);
	fputs("}\n", f);
}

static void text_stack(FILE *f, const struct kfr_stack *st)
{
	for (size_t i = 0; i < st->n; i++) {
		fprintf(f, "    %s", st->frames[i]);
		if (st->src[i])
			fprintf(f, "  %s", st->src[i]);
		fputc('\n', f);
	}
}

static void text_track(FILE *f, const char *verb, const struct kfr_track *t)
{
	if (!t->present)
		return;
	fprintf(f, "  %s by task %d", verb, t->pid);
	if (t->cpu >= 0)
		fprintf(f, " on cpu %d", t->cpu);
	if (t->time)
		fprintf(f, " at %s s", t->time);
	fputs(":\n", f);
	text_stack(f, &t->stack);
}

void kfr_print_text(FILE *f, const struct kfr_report *r, unsigned long n)
{
	fprintf(f, "report %lu: %s", n, or_dash(r->title));
	if (!r->complete)
		fprintf(f, " (incomplete: %s)", or_dash(r->reason));
	fputc('\n', f);
	if (r->function && (!r->guilty || strcmp(r->function, r->guilty)))
		fprintf(f, "  KFENCE named %s\n", r->location);
	fprintf(f, "  time %s s, input line %lu", or_dash(r->time), r->line);
	if (r->pid >= 0)
		fprintf(f, ", task %d (%s) on cpu %d", r->pid, or_dash(r->comm), r->cpu);
	if (r->release)
		fprintf(f, ", kernel %s", r->release);
	fputc('\n', f);
	fprintf(f, "  address %s", or_dash(r->address));
	if (r->has_offset)
		fprintf(f, ", %ld bytes %s of the object", r->offset, or_dash(r->side));
	if (r->corrupted)
		fprintf(f, ", bytes %s", r->corrupted);
	fputc('\n', f);
	if (r->object >= 0) {
		fprintf(f, "  object kfence-#%ld", r->object);
		if (r->object_start)
			fprintf(f, " %s-%s", r->object_start, or_dash(r->object_end));
		if (r->size >= 0)
			fprintf(f, ", size %ld", r->size);
		if (r->cache)
			fprintf(f, ", cache %s", r->cache);
		fputc('\n', f);
	}
	if (r->stack.n) {
		fputs("  stack:\n", f);
		text_stack(f, &r->stack);
	}
	text_track(f, "allocated", &r->alloc);
	text_track(f, r->free.rcu ? "rcu freeing" : "freed", &r->free);
	fputc('\n', f);
}

/*
 * time kind access function object cache completeness: seven columns, as
 * scripts (awk) read them; the completeness is "complete" or
 * "incomplete:REASON". The title is in the text and JSON forms.
 */
void kfr_print_brief(FILE *f, const struct kfr_report *r)
{
	fprintf(f, "%s %s %s %s", or_dash(r->time), or_dash(r->kind),
		or_dash(r->access), or_dash(r->function));
	if (r->object >= 0)
		fprintf(f, " kfence-#%ld", r->object);
	else
		fputs(" -", f);
	fprintf(f, " %s %s%s%s\n", or_dash(r->cache),
		r->complete ? "complete" : "incomplete", r->reason ? ":" : "",
		r->reason ? r->reason : "");
}

static void expect_stack(FILE *f, const char *name, const struct kfr_stack *st)
{
	fprintf(f, "%s:%s\n", name, st->n ? "" : " -");
	for (size_t i = 0; i < st->n; i++)
		fprintf(f, "  %s\n", st->frames[i]);
}

static void expect_track(FILE *f, const char *name, const struct kfr_track *t)
{
	char sub[32];

	if (!t->present) {
		fprintf(f, "%s: -\n", name);
		return;
	}
	fprintf(f, "%s: pid %d cpu %d time %s%s\n", name, t->pid, t->cpu,
		or_dash(t->time), t->rcu ? " rcu" : "");
	snprintf(sub, sizeof(sub), "%s_stack", name);
	expect_stack(f, sub, &t->stack);
}

void kfr_print_expect(FILE *f, const struct kfr_report *r)
{
	fprintf(f, "title: %s\n", or_dash(r->title));
	fprintf(f, "bad_access: %s\n", or_dash(r->bad_access));
	fprintf(f, "detector: %s\n", r->detector ? r->detector : "kfence");
	fprintf(f, "kind: %s\n", or_dash(r->kind));
	fprintf(f, "access: %s\n", or_dash(r->access));
	fprintf(f, "function: %s\n", or_dash(r->function));
	fprintf(f, "module: %s\n", or_dash(r->module));
	fprintf(f, "address: %s\n", or_dash(r->address));
	if (r->has_offset)
		fprintf(f, "offset: %ld %s\n", r->offset, or_dash(r->side));
	else
		fputs("offset: -\n", f);
	fprintf(f, "object: %ld size %ld cache %s\n", r->object, r->size, or_dash(r->cache));
	fprintf(f, "range: %s %s\n", or_dash(r->object_start), or_dash(r->object_end));
	fprintf(f, "corrupted: %s\n", or_dash(r->corrupted));
	expect_stack(f, "stack", &r->stack);
	expect_track(f, "alloc", &r->alloc);
	expect_track(f, "free", &r->free);
	fprintf(f, "task: cpu %d uid %d pid %d comm %s\n", r->cpu, r->uid, r->pid,
		or_dash(r->comm));
	fprintf(f, "kernel: taint %s release %s\n", r->taint ? (r->taint[0] ? r->taint : "none") : "-",
		or_dash(r->release));
	fprintf(f, "log: time %s wallclock %s caller %s host %s seq %lld\n",
		or_dash(r->time), or_dash(r->wallclock), or_dash(r->caller),
		or_dash(r->host), r->seq);
	fprintf(f, "complete: %s\n", r->complete ? "yes" : or_dash(r->reason));
}

// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Printing parsed reports: text for people, JSON lines for tools, and one
 * line per report for scripts (grep, awk).
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
static void json_str(FILE *f, const char *s)
{
	const unsigned char *c;

	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20 || *c >= 0x7f)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

/* Seconds as the kernel prints them, or a string if they are not a number. */
static void json_seconds(FILE *f, const char *s)
{
	size_t i = strspn(s ? s : "", "0123456789");

	if (!s) {
		fputs("null", f);
	} else if (i && (!s[i] || (s[i] == '.' && s[i + 1] &&
				  !s[i + 1 + strspn(s + i + 1, "0123456789")]))) {
		fputs(s, f);
	} else {
		json_str(f, s);
	}
}

static void json_key(FILE *f, const char *key, bool first)
{
	fprintf(f, "%s\"%s\":", first ? "" : ",", key);
}

static void json_int(FILE *f, const char *key, long v, bool known)
{
	json_key(f, key, false);
	if (known)
		fprintf(f, "%ld", v);
	else
		fputs("null", f);
}

static void json_stack(FILE *f, const struct kfr_stack *st)
{
	fputc('[', f);
	for (size_t i = 0; i < st->n; i++) {
		if (i)
			fputc(',', f);
		json_str(f, st->frames[i]);
	}
	fputc(']', f);
}

static void json_track(FILE *f, const char *key, const struct kfr_track *t)
{
	json_key(f, key, false);
	if (!t->present) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"pid\":%d,\"cpu\":%d,\"time\":", t->pid, t->cpu);
	json_seconds(f, t->time);
	fputs(",\"stack\":", f);
	json_stack(f, &t->stack);
	fputc('}', f);
}

void kfr_print_json(FILE *f, const struct kfr_report *r)
{
	fputc('{', f);
	json_key(f, "kind", true);
	json_str(f, r->kind);
	json_key(f, "access", false);
	json_str(f, r->access);
	json_key(f, "function", false);
	json_str(f, r->function);
	json_key(f, "location", false);
	json_str(f, r->location);
	json_key(f, "module", false);
	json_str(f, r->module);
	json_key(f, "address", false);
	json_str(f, r->address);
	json_int(f, "offset", r->offset, r->has_offset);
	json_key(f, "side", false);
	json_str(f, r->side);
	json_int(f, "object", r->object, r->object >= 0);
	json_key(f, "object_start", false);
	json_str(f, r->object_start);
	json_key(f, "object_end", false);
	json_str(f, r->object_end);
	json_int(f, "size", r->size, r->size >= 0);
	json_key(f, "cache", false);
	json_str(f, r->cache);
	json_key(f, "corrupted", false);
	json_str(f, r->corrupted);
	json_key(f, "stack", false);
	json_stack(f, &r->stack);
	json_track(f, "alloc", &r->alloc);
	json_track(f, "free", &r->free);
	json_int(f, "cpu", r->cpu, r->cpu >= 0);
	json_int(f, "pid", r->pid, r->pid >= 0);
	json_key(f, "comm", false);
	json_str(f, r->comm);
	json_key(f, "time", false);
	json_seconds(f, r->time);
	json_int(f, "line", (long)r->line, true);
	json_key(f, "complete", false);
	fputs(r->complete ? "true" : "false", f);
	fputs("}\n", f);
}

static void text_stack(FILE *f, const struct kfr_stack *st)
{
	for (size_t i = 0; i < st->n; i++)
		fprintf(f, "    %s\n", st->frames[i]);
}

static void text_track(FILE *f, const char *verb, const struct kfr_track *t)
{
	if (!t->present)
		return;
	fprintf(f, "  %s by task %d on cpu %d at %s s:\n", verb, t->pid, t->cpu,
		or_dash(t->time));
	text_stack(f, &t->stack);
}

void kfr_print_text(FILE *f, const struct kfr_report *r, unsigned long n)
{
	fprintf(f, "report %lu: %s%s%s in %s%s\n", n, r->kind,
		r->access ? " " : "", r->access ? r->access : "",
		or_dash(r->function), r->complete ? "" : " (incomplete)");
	fprintf(f, "  time %s s, input line %lu", or_dash(r->time), r->line);
	if (r->pid >= 0)
		fprintf(f, ", task %d (%s) on cpu %d", r->pid, or_dash(r->comm), r->cpu);
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
	text_track(f, "freed", &r->free);
	fputc('\n', f);
}

void kfr_print_brief(FILE *f, const struct kfr_report *r)
{
	fprintf(f, "%s %s %s %s", or_dash(r->time), or_dash(r->kind),
		or_dash(r->access), or_dash(r->function));
	if (r->object >= 0)
		fprintf(f, " kfence-#%ld", r->object);
	else
		fputs(" -", f);
	fprintf(f, " %s %s\n", or_dash(r->cache), r->complete ? "complete" : "incomplete");
}

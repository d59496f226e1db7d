// SPDX-License-Identifier: LGPL-2.1-or-later
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format.h"
#include "fw-uapi.h"

static const struct {
	uint32_t bit;
	const char *name;
} names[] = {
	{ FW_ACCESS, "ACCESS" },	 { FW_MODIFY, "MODIFY" },
	{ FW_ATTRIB, "ATTRIB" },	 { FW_CLOSE_WRITE, "CLOSE_WRITE" },
	{ FW_CLOSE_NOWRITE, "CLOSE_NOWRITE" }, { FW_OPEN, "OPEN" },
	{ FW_MOVED_FROM, "MOVED_FROM" }, { FW_MOVED_TO, "MOVED_TO" },
	{ FW_CREATE, "CREATE" },	 { FW_DELETE, "DELETE" },
	{ FW_DELETE_SELF, "DELETE_SELF" }, { FW_MOVE_SELF, "MOVE_SELF" },
	{ FW_Q_OVERFLOW, "Q_OVERFLOW" },
};

/* Words accepted by -e besides the single events above. */
static const struct {
	const char *word;
	uint32_t mask;
} groups[] = {
	{ "close", FW_CLOSE_WRITE | FW_CLOSE_NOWRITE },
	{ "move", FW_MOVED_FROM | FW_MOVED_TO },
	{ "all", 0xfffu },
};

static size_t put(char *buf, size_t size, size_t at, const char *s, char sep)
{
	size_t n = strlen(s);

	if (at && at < size)
		buf[at] = sep;
	at += !!at;
	if (at < size)
		memcpy(buf + at, s, at + n < size ? n : size - at);
	return at + n;
}

size_t fw_event_names(char *buf, size_t size, const struct fw_out *e, char sep,
		      bool bare)
{
	size_t at = 0, i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (e->mask & names[i].bit)
			at = put(buf, size, at, names[i].name, sep);
	if (bare)
		goto out;
	/* inotifywait names IN_CLOSE too, and no ISDIR on the watch itself. */
	if (e->mask & (FW_CLOSE_WRITE | FW_CLOSE_NOWRITE))
		at = put(buf, size, at, "CLOSE", sep);
	if (e->isdir && !(e->mask & (FW_DELETE_SELF | FW_MOVE_SELF)))
		at = put(buf, size, at, "ISDIR", sep);
	if (e->scan)
		at = put(buf, size, at, "SCAN", sep);
out:
	if (size)
		buf[at < size ? at : size - 1] = '\0';
	return at;
}

static uint32_t word_mask(const char *w, size_t n)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == n && !strncasecmp(w, names[i].name, n))
			return names[i].bit;
	for (i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (strlen(groups[i].word) == n && !strncasecmp(w, groups[i].word, n))
			return groups[i].mask;
	return 0;
}

uint32_t fw_parse_events(const char *list, const char **bad, size_t *badlen)
{
	uint32_t mask = 0, m;
	const char *w = list;

	while (*w) {
		size_t n = strcspn(w, ",");

		m = word_mask(w, n);
		if (!m || m == FW_Q_OVERFLOW) {
			*bad = w;
			*badlen = n;
			return 0;
		}
		mask |= m;
		w += n + (w[n] == ',');
	}
	if (!mask) {
		*bad = list;
		*badlen = 0;
	}
	return mask;
}

/* Length of the valid UTF-8 sequence at s, or 0 if the byte starts none. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned int c = s[0], n, i, cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and beyond U+10FFFF are not UTF-8. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

static const char hex[] = "0123456789abcdef";

/* Quoted when it must be (RFC 4180), or starts or ends with a space, as
 * inotifywait does; a quote inside is doubled; all other bytes are raw. */
static bool csv_needs_quotes(const char *s)
{
	size_t n = strlen(s);

	return strpbrk(s, ",\"\r\n") || (n && (s[0] == ' ' || s[n - 1] == ' '));
}

/*
 * RFC 4180: a field that holds a comma, a quote, CR or LF is quoted and a
 * quote doubled; a newline stays a newline inside the quotes (a record
 * may span lines, as the RFC allows).  Bytes that are not UTF-8 are
 * written as they are: read with errors="surrogateescape", they round-trip.
 */
void fw_csv_field(FILE *f, const char *str)
{
	const char *s;

	if (!csv_needs_quotes(str)) {
		fputs(str, f);
		return;
	}
	putc('"', f);
	for (s = str; *s; s++) {
		if (*s == '"')
			putc('"', f);
		putc(*s, f);
	}
	putc('"', f);
}

/*
 * A JSON string.  Bytes that are not UTF-8 become \udcXX (a lone low
 * surrogate, as Python's surrogateescape does), so the byte can be
 * recovered and the line stays one line.
 */
static void json_escape(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;

	for (; *s; s += n) {
		n = utf8_len(s);
		if (*s == '"' || *s == '\\') {
			putc('\\', f);
			putc(*s, f);
		} else if (*s == '\n') {
			fputs("\\n", f);
		} else if (*s == '\t') {
			fputs("\\t", f);
		} else if (!n) {
			fprintf(f, "\\udc%c%c", hex[*s >> 4], hex[*s & 15]);
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u00%c%c", hex[*s >> 4], hex[*s & 15]);
		} else {
			fwrite(s, 1, n, f);
		}
		n += !n;
	}
}

void fw_json_string(FILE *f, const char *str)
{
	putc('"', f);
	json_escape(f, str);
	putc('"', f);
}

/* dir ends in '/', so no UTF-8 sequence spans the two parts. */
static void json_path(FILE *f, const char *dir, const char *name)
{
	putc('"', f);
	json_escape(f, dir);
	json_escape(f, name);
	putc('"', f);
}

static void print_json(FILE *f, const struct fw_out *e, const char *isotime)
{
	struct fw_out bits = *e;
	char ev[160];

	fw_event_names(ev, sizeof(ev), &bits, '"', true);
	fprintf(f, "{\"schema\":%d,\"read_time\":\"%s\",\"events\":[",
		FW_JSON_SCHEMA, isotime ? isotime : "");
	if (*ev) {
		/* names contain no quote or backslash: join them with "," */
		char *p;

		putc('"', f);
		for (p = ev; *p; p++) {
			if (*p == '"')
				fputs("\",\"", f);
			else
				putc(*p, f);
		}
		putc('"', f);
	}
	fputs("],\"path\":", f);
	json_path(f, e->dir, e->name);
	fputs(",\"old_path\":", f);
	if (e->odir)
		json_path(f, e->odir, e->oname);
	else
		fputs("null", f);
	fprintf(f, ",\"cookie\":%u,\"is_dir\":%s,\"own_event\":%s,\"scan\":%s}\n",
		e->cookie, e->isdir ? "true" : "false", e->self ? "true" : "false",
		e->scan ? "true" : "false");
}

/* inotifywait's three columns: a rename comes as its two halves. */
static void print_csv(FILE *f, const struct fw_out *e)
{
	char ev[160];

	fw_event_names(ev, sizeof(ev), e, ',', false);
	fw_csv_field(f, e->dir);
	putc(',', f);
	fw_csv_field(f, ev);
	putc(',', f);
	fw_csv_field(f, e->name);
	putc('\n', f);
}

static void print_events(FILE *f, const struct fw_out *e, char sep)
{
	char ev[160];

	fw_event_names(ev, sizeof(ev), e, sep, false);
	fputs(ev, f);
}

static const char *format_escape(FILE *f, const char *p, const struct fw_out *e,
				 const char *timestr)
{
	switch (p[1]) {
	case 'w':
		fputs(e->dir, f);
		return p + 2;
	case 'f':
		fputs(e->name, f);
		return p + 2;
	case 'o':	/* fanwatch: the old path of a rename */
		if (e->odir) {
			fputs(e->odir, f);
			fputs(e->oname, f);
		}
		return p + 2;
	case 'e':
		print_events(f, e, ',');
		return p + 2;
	case 'c':
		fprintf(f, "%u", e->cookie);
		return p + 2;
	case 'T':
		fputs(timestr ? timestr : "", f);
		return p + 2;
	case '0':
		putc('\0', f);
		return p + 2;
	case 'n':
		putc('\n', f);
		return p + 2;
	case '%':
		putc('%', f);
		return p + 2;
	}
	if (p[1] && p[2] == 'e') {	/* %Xe: events separated by X */
		print_events(f, e, p[1]);
		return p + 3;
	}
	putc('%', f);
	return p + 1;
}

void fw_print(FILE *f, const struct fw_fmt *fmt, const struct fw_out *e,
	      const char *timestr, const char *isotime)
{
	const char *p;

	if (fmt->style == FW_STYLE_JSON)
		return print_json(f, e, isotime);
	if (fmt->style == FW_STYLE_CSV)
		return print_csv(f, e);
	if (!fmt->format) {
		fputs(e->dir, f);
		putc(' ', f);
		print_events(f, e, ',');
		putc(' ', f);
		fputs(e->name, f);
		if (e->odir) {
			fputs(" <- ", f);
			fputs(e->odir, f);
			fputs(e->oname, f);
		}
		putc('\n', f);
		return;
	}
	for (p = fmt->format; *p;) {
		const char *q = strchr(p, '%');

		if (!q) {
			fputs(p, f);
			break;
		}
		fwrite(p, 1, q - p, f);
		p = format_escape(f, q, e, timestr);
	}
	if (!fmt->no_newline)
		putc('\n', f);
}

bool fw_format_wants_time(const char *format)
{
	return format && strstr(format, "%T");
}

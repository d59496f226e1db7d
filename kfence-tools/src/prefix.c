// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What log pipelines put in front of a kernel message. Each form is
 * recognised on its own, from the left, so they combine the way real
 * pipelines stack them (a journal line around a dmesg timestamp, a serial
 * capture around a caller id):
 *
 *   /dev/kmsg            6,1090,44627362,-,caller=T303;msg
 *   netconsole + release 6.1.0-18-amd64,6,1090,44627362,-;msg
 *   dmesg                [   44.627362] msg
 *   caller ids           [   44.627362] [  T303] msg, [   44.6][  T303] msg
 *   Android              [   44.627362] [ T6006]c7   6006 msg
 *   dmesg -T             [Thu Dec  3 17:39:26 2026] msg
 *   syslog, journalctl   Dec  3 17:39:26 host kernel: msg
 *   journalctl -o short-precise / short-iso / short-full / short-unix /
 *   short-monotonic      Dec 03 17:39:26.627362 host kernel: msg
 *                        2026-12-03T17:39:26+0000 host kernel: msg
 *                        Thu 2026-12-03 17:39:26 UTC host kernel: msg
 *                        1764783566.627362 host kernel: msg
 *                        [   44.627362] host kernel: msg
 *   dmesg --time-format=iso
 *                        2026-12-03T17:39:26,627362+00:00 msg
 *   serial, test harness anything short, then one of the timestamps
 */
#include "report.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_field(char *dst, size_t size, const char *s, size_t n)
{
	if (n >= size)
		n = size - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* "[  12.345678]" at @s: the number goes to px->ts; returns the end. */
static const char *mono_stamp(const char *s, struct kfr_prefix *px)
{
	const char *q = s + 1, *num, *dot = NULL;

	if (*s != '[')
		return NULL;
	while (*q == ' ')
		q++;
	num = q;
	for (; isdigit((unsigned char)*q) || *q == '.'; q++)
		if (*q == '.')
			dot = q;
	if (q == num || *q != ']' || !dot || dot == num)
		return NULL;
	copy_field(px->ts, sizeof(px->ts), num, (size_t)(q - num));
	return q + 1;
}

/* A word of letters or UTF-8 bytes (a month or weekday in any locale). */
static size_t name_word(const char *s)
{
	size_t m = 0;

	while (m < 12 && (isalpha((unsigned char)s[m]) || (unsigned char)s[m] >= 0x80))
		m++;
	return m;
}

/* "hh:mm:ss" and an optional ".123456" fraction at @s: its length, or 0. */
static size_t clock_time(const char *s)
{
	if (strnlen(s, 8) < 8 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
	    s[2] != ':' || s[5] != ':' || !isdigit((unsigned char)s[7]))
		return 0;
	if (s[8] == '.' && isdigit((unsigned char)s[9]))
		return 9 + strspn(s + 9, "0123456789");
	return 8;
}

/*
 * "Dec  3 17:39:26" or "Dec 03 17:39:26" (journalctl -o short-precise: with
 * ".123456") at @s: its length, or 0. The month is whatever journalctl's
 * locale calls it ("sty", "Dez", "paź").
 */
static size_t bsd_date(const char *s)
{
	size_t m = name_word(s), t;

	if (m < 3 || s[m] != ' ' || strnlen(s, m + 4) < m + 4)
		return 0;
	s += m + 1;
	if (!(isdigit((unsigned char)s[0]) || s[0] == ' ') || !isdigit((unsigned char)s[1]) ||
	    s[2] != ' ')
		return 0;
	t = clock_time(s + 3);
	return t ? m + 1 + 3 + t : 0;
}

/* journalctl -o short-full: "Thu 2026-12-03 17:39:26 UTC" at @s, or 0. */
static size_t full_date(const char *s)
{
	size_t m = name_word(s), t;

	if (m < 2 || s[m] != ' ' || strnlen(s + m + 1, 11) < 11 ||
	    strspn(s + m + 1, "0123456789") != 4 || s[m + 5] != '-' || s[m + 8] != '-' ||
	    s[m + 11] != ' ')
		return 0;
	t = clock_time(s + m + 12);
	if (!t || s[m + 12 + t] != ' ')
		return 0;
	t += m + 13;
	return t + strcspn(s + t, " ");
}

/* journalctl -o short-unix: "1764783566.675017" at @s, or 0. */
static size_t unix_stamp(const char *s)
{
	size_t n = strspn(s, "0123456789");

	if (n < 9 || s[n] != '.' || !isdigit((unsigned char)s[n + 1]))
		return 0;
	return n + 1 + strspn(s + n + 1, "0123456789");
}

/* "2026-12-03T17:39:26[.frac][+zone]" at @s: its length, or 0. */
static size_t iso_date(const char *s)
{
	size_t n;

	if (strnlen(s, 19) < 19 || strspn(s, "0123456789") != 4 || s[4] != '-' || s[7] != '-' ||
	    s[10] != 'T')
		return 0;
	n = 11 + strspn(s + 11, "0123456789:.,+-Z");
	return n >= 19 ? n : 0;
}

/* dmesg -T: "[Thu Dec  3 17:39:26 2026]" at @s: returns the end. */
static const char *wall_stamp(const char *s, struct kfr_prefix *px)
{
	const char *q;

	if (*s != '[' || strnlen(s, 6) < 6 || !isalpha((unsigned char)s[1]) || s[4] != ' ' ||
	    !bsd_date(s + 5))
		return NULL;
	q = strchr(s, ']');
	if (!q || q - s > 34)
		return NULL;
	copy_field(px->wallclock, sizeof(px->wallclock), s + 1, (size_t)(q - s - 1));
	return q + 1;
}

/*
 * /dev/kmsg: "prio,seq,usec,flags[,caller=T1][,...];message". Netconsole's
 * extended format is the same, with the kernel release first when its
 * "release" option is on.
 */
static const char *kmsg_header(const char *s, struct kfr_prefix *px)
{
	const char *semi = strchr(s, ';'), *c, *f;
	unsigned long long usec, seq;
	int prio, used = 0;
	size_t rl = strcspn(s, ",; ");

	if (!semi || semi - s > 200)
		return NULL;
	if (s[rl] == ',' && rl && strspn(s, "0123456789") < rl && strchr(s, '.') &&
	    strchr(s, '.') < s + rl) {
		copy_field(px->release, sizeof(px->release), s, rl);
		s += rl + 1;
	}
	if (sscanf(s, "%d,%llu,%llu,%n", &prio, &seq, &usec, &used) != 3 || !used ||
	    s + used > semi)
		return NULL;
	snprintf(px->ts, sizeof(px->ts), "%llu.%06llu", usec / 1000000, usec % 1000000);
	px->seq = (long long)seq;
	px->escaped = true;
	/* flags, then optional fields */
	for (f = strchr(s + used, ','); f && f < semi; f = strchr(f + 1, ',')) {
		if (strncmp(f + 1, "caller=", 7))
			continue;
		c = f + 8;
		copy_field(px->caller, sizeof(px->caller), c, strcspn(c, ",;"));
	}
	return semi + 1;
}

/* "host kernel: " right at @s (after a date): the host goes to px->host. */
static const char *syslog_host(const char *s, struct kfr_prefix *px)
{
	const char *k;
	size_t hl;

	while (*s == ' ')
		s++;
	hl = strcspn(s, " ");
	k = s + hl;
	if (!hl || strncmp(k, " kernel: ", 9))
		return NULL;
	copy_field(px->host, sizeof(px->host), s, hl);
	return k + 9;
}

/* "[  T123]" or "[    C1]" at @s (CONFIG_PRINTK_CALLER). */
static const char *caller_id(const char *s, struct kfr_prefix *px)
{
	const char *q = s + 1, *id;

	if (*s != '[')
		return NULL;
	while (*q == ' ')
		q++;
	id = q;
	if ((*q != 'T' && *q != 'C') || !isdigit((unsigned char)q[1]))
		return NULL;
	q += 1 + strspn(q + 1, "0123456789");
	if (*q != ']')
		return NULL;
	copy_field(px->caller, sizeof(px->caller), id, (size_t)(q - id));
	return q + 1;
}

/* Android's "c7   6006 " after the caller id: cpu and pid columns. */
static const char *android_cols(const char *s, struct kfr_prefix *px)
{
	const char *q = s;
	int cpu;

	if (*q != 'c' || !isdigit((unsigned char)q[1]))
		return s;
	cpu = (int)strtol(q + 1, NULL, 10) & 0xffffff;	/* only compared */
	q += 1 + strspn(q + 1, "0123456789");
	if (*q != ' ')
		return s;
	q += strspn(q, " ");
	if (!isdigit((unsigned char)*q))
		return s;
	q += strspn(q, "0123456789");
	if (*q != ' ')
		return s;
	px->cpu = cpu;
	return q + 1;
}

/* After a timestamp: an optional caller id, then Android's columns. */
static const char *after_stamp(const char *s, struct kfr_prefix *px)
{
	const char *q = s[0] == ' ' && s[1] == '[' ? s + 1 : s, *c;

	c = caller_id(q, px);
	if (!c)
		return s;
	return android_cols(c, px);
}

const char *kfr_message(const char *line, struct kfr_prefix *px)
{
	const char *s = line, *q, *end;
	size_t n;

	memset(px, 0, sizeof(*px));
	px->seq = -1;
	px->cpu = -1;
	q = kmsg_header(s, px);
	if (q)
		return q;
	/* syslog / journal: a date, a host and "kernel: " */
	n = bsd_date(s);
	if (!n)
		n = iso_date(s);
	if (!n)
		n = full_date(s);
	if (!n)
		n = unix_stamp(s);
	if (n && (q = syslog_host(s + n, px))) {
		copy_field(px->wallclock, sizeof(px->wallclock), s, n);
		s = q;
	} else if ((end = mono_stamp(s, px)) && (q = syslog_host(end, px))) {
		s = q;	/* journalctl -o short-monotonic */
	} else if ((n = iso_date(s)) && s[n] == ' ') {
		/* dmesg --time-format=iso: the date, then the message */
		px->ts[0] = '\0';
		copy_field(px->wallclock, sizeof(px->wallclock), s, n);
		s += n + 1;
	} else {
		px->ts[0] = '\0';
	}
	if (s[0] == '<') {
		q = s + 1 + strspn(s + 1, "0123456789");
		if (q > s + 1 && *q == '>')
			s = q + 1;
	}
	/* A timestamp within the first few columns ends any prefix before it
	 * (a console's, or a test harness's "  | ").
	 */
	for (q = s; *q && q - s < 32; q++) {
		if (*q != '[')
			continue;
		end = mono_stamp(q, px);
		if (!end)
			end = wall_stamp(q, px);
		if (end)
			return after_stamp(end, px);
	}
	/* dmesg -t keeps the caller id */
	end = caller_id(s, px);
	return end ? android_cols(end, px) : s;
}

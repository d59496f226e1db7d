// SPDX-License-Identifier: LGPL-2.1-or-later
/* What the watcher reports: filtering, rename splitting, the sink; messages. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "watch.h"

static bool use_syslog;

static void vsay(int prio, const char *prefix, const char *fmt, va_list ap)
{
	if (use_syslog) {
		vsyslog(prio, fmt, ap);
		return;
	}
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void fw_log_to_syslog(void)
{
	openlog("fanwatch", LOG_PID, LOG_USER);
	use_syslog = true;
}

void fw_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(LOG_ERR, "fanwatch: ", fmt, ap);
	va_end(ap);
}

void fw_warn(const struct fw_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->o->quiet > 1)
		return;
	va_start(ap, fmt);
	vsay(LOG_WARNING, "fanwatch: warning: ", fmt, ap);
	va_end(ap);
}

long fw_read_long(const char *path)
{
	long v = -1;
	FILE *f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

long fw_sysctl(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/sys/fs/fanotify/%s", name);
	return fw_read_long(path);
}

/* The time events were read, for %T and JSON's read_time. */
void fw_stamp(struct fw_ctx *c)
{
	struct timespec ts;
	struct tm tm;

	if (!c->want_time)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (c->o->fmt.format) {
		localtime_r(&ts.tv_sec, &tm);
		if (!strftime(c->timestr, sizeof(c->timestr),
			      c->o->fmt.timefmt ? c->o->fmt.timefmt : "%H:%M:%S", &tm))
			c->timestr[0] = '\0';
	}
	gmtime_r(&ts.tv_sec, &tm);
	strftime(c->isotime, sizeof(c->isotime), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(c->isotime + 19, sizeof(c->isotime) - 19, ".%06ldZ",
		 ts.tv_nsec / 1000);
}

static bool passes(const struct fw_ctx *c, const struct fw_dir *d, const char *name,
		   bool isdir)
{
	char buf[8192];

	if (!d || !fw_filter_active(&c->o->filter))
		return true;
	if (snprintf(buf, sizeof(buf), "%s%s", d->path, name) >= (int)sizeof(buf))
		return true;
	if (!*name && d->pathlen > 1 && buf[d->pathlen - 1] == '/')
		buf[d->pathlen - 1] = '\0';	/* a directory: match without '/' */
	return fw_filter_pass(&c->o->filter, buf, isdir || !*name);
}

static void out(struct fw_ctx *c, const struct fw_ev *e)
{
	struct fw_out o = {
		.mask = e->mask, .isdir = e->isdir, .scan = e->scan,
		.self = e->self, .cookie = e->cookie,
		.dir = e->d ? e->d->path : "", .name = e->name ? e->name : "",
		.odir = e->od ? e->od->path : NULL, .oname = e->oname,
	};

	c->sink(c, &o);
	c->printed++;
	if (!c->o->monitor)
		c->done = true;
}

static void out1(struct fw_ctx *c, uint32_t bit, const struct fw_dir *d,
		 const char *name, const struct fw_ev *e)
{
	struct fw_ev one = *e;

	if (c->done || !(bit & (c->o->events | FW_Q_OVERFLOW)) || !passes(c, d, name, e->isdir))
		return;
	one.mask = bit;
	one.d = d;
	one.name = name;
	one.od = NULL;
	one.oname = NULL;
	out(c, &one);
}

/*
 * A rename with both sides known is one report in JSON (and in text with
 * --paired-renames); elsewhere it is two, MOVED_FROM then MOVED_TO with
 * one cookie, as inotifywait prints it, each side filtered on its own.
 */
void fw_emit(struct fw_ctx *c, const struct fw_ev *e)
{
	const struct fw_opts *o = c->o;
	bool pairable;

	if (c->done || (e->self && o->no_self))
		return;
	if (e->mask != (FW_MOVED_FROM | FW_MOVED_TO)) {
		out1(c, e->mask, e->d, e->name, e);
		return;
	}
	pairable = (o->events & FW_MOVED_FROM) && (o->events & FW_MOVED_TO) &&
		   (o->fmt.style == FW_STYLE_JSON ||
		    (o->fmt.style == FW_STYLE_TEXT && o->paired_text));
	if (!pairable) {
		out1(c, FW_MOVED_FROM, e->od, e->oname, e);
		out1(c, FW_MOVED_TO, e->d, e->name, e);
	} else if (passes(c, e->d, e->name, e->isdir) ||
		   passes(c, e->od, e->oname, e->isdir)) {
		out(c, e);
	}
}

void fw_emit1(struct fw_ctx *c, uint32_t bit, const struct fw_dir *d,
	      const char *name, bool isdir, bool scan, bool self)
{
	struct fw_ev e = {
		.mask = bit, .d = d, .name = name, .isdir = isdir,
		.scan = scan, .self = self,
	};

	fw_emit(c, &e);
}

void fw_print_sink(struct fw_ctx *c, const struct fw_out *e)
{
	if (c->o->quiet > 1)
		return;		/* -qq: the exit status is the answer */
	fw_print(c->o->out, &c->o->fmt, e, c->timestr, c->isotime);
}

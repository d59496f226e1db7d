// SPDX-License-Identifier: LGPL-2.1-or-later
/* The migration report: a table, JSON, one demo row, a gnuplot timeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lm.h"

static double mib(uint64_t b)
{
	return (double)b / 1048576.0;
}

static void table(const struct lm_report *r)
{
	const struct lm_done *s = &r->src;

	printf("mode                 %s\n", lm_mode_name(r->mode));
	printf("memory               %.0f MiB, %llu pages of %llu bytes\n", mib(r->size),
	       (unsigned long long)r->npages, (unsigned long long)r->page_size);
	printf("dirty tracking       %s (workload paused %.1f ms for it)\n",
	       lm_track_name(s->track), (double)s->track_pause_ns / 1e6);
	printf("stale at pause       %llu pages (%.1f%%)\n", (unsigned long long)r->stale,
	       100.0 * (double)r->stale / (double)r->npages);
	printf("downtime             %.3f ms%s\n", r->downtime_ms,
	       r->clocks_shared ? "" : " (no shared clock: estimated, see below)");
	printf("  of which           %.3f ms source pause to SWITCH sent, %.3f ms SWITCH "
	       "received to the workload running\n", r->src_pause_ms, r->dst_resume_ms);
	/* pacing, socket buffers and the frames queued ahead of SWITCH */
	if (r->transit_ms >= 0)
		printf("                     %.3f ms SWITCH in transit\n", r->transit_ms);
	else
		printf("                     %.3f ms SWITCH in transit: half the round trip of "
		       "a small frame measured just before the pause\n", r->transit_est_ms);
	if (r->clocks_shared)
		printf("  without the clock  %.3f ms (the estimate two machines would give)\n",
		       r->downtime_est_ms);
	if (s->drain_ns)
		printf("                     (before the pause: %.3f ms for the link to empty)\n",
		       (double)s->drain_ns / 1e6);
	printf("total time           %.1f ms (precopy %.1f ms, postcopy %.1f ms)\n",
	       r->total_ms, (double)s->t_precopy_ns / 1e6, r->postcopy_ms);
	printf("precopy              %.2f MiB, %llu pages, %llu rounds\n",
	       mib(s->bytes_precopy), (unsigned long long)s->pages_precopy,
	       (unsigned long long)s->rounds + 1);
	printf("while paused         %.2f MiB\n", mib(s->bytes_paused));
	printf("postcopy push        %.2f MiB, %llu pages\n", mib(s->bytes_push),
	       (unsigned long long)s->pages_push);
	printf("on demand            %.2f MiB, %llu pages, %llu requests\n",
	       mib(s->bytes_demand), (unsigned long long)s->pages_demand,
	       (unsigned long long)s->requests);
	printf("faults               %llu (%llu asked the source)\n",
	       (unsigned long long)r->faults, (unsigned long long)r->faults_demand);
	printf("fault latency        p50 %.1f us, p99 %.1f us, max %.1f us\n",
	       (double)r->lat_p50_ns / 1e3, (double)r->lat_p99_ns / 1e3,
	       (double)r->lat_max_ns / 1e3);
	if (r->mode != LM_MODE_STOPCOPY)
		printf("fault callback       longest %.1f us (never waits); requests %llu sent at "
		       "once, %llu queued for the sender (a full socket %llu times)\n",
		       (double)r->callback_max_ns / 1e3, (unsigned long long)r->asks_direct,
		       (unsigned long long)r->asks_queued, (unsigned long long)r->asks_full);
	printf("workload             %.0f ops/s before, %.0f ops/s after resume\n",
	       r->ops_before, r->ops_after);
	printf("verify               %s\n", !r->verify ? "off (invariants only)" :
	       r->mismatched ? "FAILED" : "every page matched");
	printf("invariants           %s\n", r->invariants_ok ? "hold" : "BROKEN");
}

static void json(const struct lm_report *r)
{
	const struct lm_done *s = &r->src;

	printf("{\"mode\":\"%s\",\"size\":%llu,\"page_size\":%llu,\"pages\":%llu,"
	       "\"tracking\":\"%s\",\"stale_pages\":%llu,\"downtime_ms\":%.3f,"
	       "\"src_pause_to_switch_ms\":%.3f,\"dst_switch_to_resume_ms\":%.3f,"
	       "\"switch_transit_ms\":%.3f,\"drain_ms\":%.3f,\"rtt_ms\":%.3f,"
	       "\"downtime_est_ms\":%.3f,"
	       "\"total_ms\":%.1f,\"postcopy_ms\":%.1f,\"precopy_ms\":%.1f,",
	       lm_mode_name(r->mode), (unsigned long long)r->size,
	       (unsigned long long)r->page_size, (unsigned long long)r->npages,
	       lm_track_name(s->track), (unsigned long long)r->stale, r->downtime_ms, r->src_pause_ms,
	       r->dst_resume_ms, r->transit_ms, (double)s->drain_ns / 1e6, (double)s->rtt_ns / 1e6,
	       r->downtime_est_ms,
	       r->total_ms, r->postcopy_ms, (double)s->t_precopy_ns / 1e6);
	printf("\"bytes\":{\"precopy\":%llu,\"paused\":%llu,\"push\":%llu,\"demand\":%llu},"
	       "\"pages_push\":%llu,\"pages_demand\":%llu,\"requests\":%llu,\"rounds\":%llu,",
	       (unsigned long long)s->bytes_precopy, (unsigned long long)s->bytes_paused,
	       (unsigned long long)s->bytes_push, (unsigned long long)s->bytes_demand,
	       (unsigned long long)s->pages_push, (unsigned long long)s->pages_demand,
	       (unsigned long long)s->requests, (unsigned long long)s->rounds + 1);
	printf("\"faults\":%llu,\"faults_demand\":%llu,\"fault_latency_ns\":{\"p50\":%llu,"
	       "\"p99\":%llu,\"max\":%llu},\"callback_max_ns\":%llu,"
	       "\"requests_queued\":%llu,\"urgent_socket_full\":%llu,\"ops_per_s_before\":%.0f,\"ops_per_s_after\":%.0f,"
	       "\"verify\":%s,\"mismatched\":%llu,\"invariants_ok\":%s,\"clocks_shared\":%s}\n",
	       (unsigned long long)r->faults, (unsigned long long)r->faults_demand,
	       (unsigned long long)r->lat_p50_ns, (unsigned long long)r->lat_p99_ns,
	       (unsigned long long)r->lat_max_ns, (unsigned long long)r->callback_max_ns,
	       (unsigned long long)r->asks_queued, (unsigned long long)r->asks_full,
	       r->ops_before, r->ops_after,
	       r->verify ? "true" : "false", (unsigned long long)r->mismatched,
	       r->invariants_ok ? "true" : "false", r->clocks_shared ? "true" : "false");
}

#define ROW_FMT "%-17s %8s %9s %7s %8s %8s %7s %9s %9s %9s %9s %10s %10s %-6s\n"

static void row(const struct lm_report *r)
{
	char c[14][32];

	if (!r) {
		printf(ROW_FMT, "mode", "stale", "downtime", "total", "paused", "push",
		       "demand", "faults", "p50", "p99", "max", "ops/s-bef", "ops/s-aft",
		       "verify");
		printf(ROW_FMT, "", "pages", "ms", "s", "MiB", "MiB", "pages", "", "us", "us",
		       "us", "", "", "");
		return;
	}
	snprintf(c[0], 32, "%s", lm_mode_name(r->mode));
	snprintf(c[1], 32, "%llu", (unsigned long long)r->stale);
	snprintf(c[2], 32, "%.2f", r->downtime_ms);
	snprintf(c[3], 32, "%.2f", r->total_ms / 1e3);
	snprintf(c[4], 32, "%.2f", mib(r->src.bytes_paused));
	snprintf(c[5], 32, "%.2f", mib(r->src.bytes_push));
	snprintf(c[6], 32, "%llu", (unsigned long long)r->src.pages_demand);
	snprintf(c[7], 32, "%llu", (unsigned long long)r->faults);
	snprintf(c[8], 32, "%.0f", (double)r->lat_p50_ns / 1e3);
	snprintf(c[9], 32, "%.0f", (double)r->lat_p99_ns / 1e3);
	snprintf(c[10], 32, "%.0f", (double)r->lat_max_ns / 1e3);
	snprintf(c[11], 32, "%.0f", r->ops_before);
	snprintf(c[12], 32, "%.0f", r->ops_after);
	snprintf(c[13], 32, "%s", r->mismatched || !r->invariants_ok ? "FAIL" :
		 r->verify ? "ok" : "inv-ok");
	printf(ROW_FMT, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10],
	       c[11], c[12], c[13]);
}

void lm_report_print(const struct lm_report *r, const struct lm_opts *o)
{
	if (!r || o->row)
		row(r);
	else if (o->json)
		json(r);
	else
		table(r);
	fflush(stdout);
}

int lm_report_plot(const char *png, const char *data, uint64_t t_resume_ns, uint64_t nfaults)
{
	char script[8192], lat[4200];
	FILE *p;
	int st;

	/* no fault asked the source (all mapped ahead): an empty panel, said so */
	if (nfaults)
		snprintf(lat, sizeof(lat), "set logscale y\n"
			 "plot '%s' index 1 using 1:2 with points pt 7 ps 0.3 title 'faults'\n",
			 data);
	else
		snprintf(lat, sizeof(lat), "set yrange [0:1]\nset xrange [0:1]\n"
			 "set label 'no fault waited for the source' at graph 0.5, graph 0.5 "
			 "center\nplot NaN notitle\n");
	snprintf(script, sizeof(script),
		 "set terminal pngcairo size 1000,700 noenhanced\n"
		 "set output '%s'\n"
		 "set multiplot layout 2,1 title 'lm: transfer rate and fault latency'\n"
		 "set xlabel 'seconds since resume (the dashed line)'\n"
		 "set ylabel 'MB/s received'\n"
		 "set arrow from 0, graph 0 to 0, graph 1 nohead dt 2\n"
		 "plot '%s' index 0 using (($1 - %llu) / 1e9):2 with steps title 'rate'\n"
		 "set ylabel 'fault latency (us)'\n"
		 "%s"
		 "unset multiplot\n", png, data, (unsigned long long)t_resume_ns, lat);
	p = popen("gnuplot 2>&1", "w");
	if (!p)
		return -1;
	fputs(script, p);
	st = pclose(p);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/*
 * The outcome, as the destination decided it: both ends print this same
 * table on stderr (the destination's verdict travels in FIN), so the two
 * logs cannot disagree about what happened.
 */
void lm_outcome_print(const struct lm_fin *f, const struct lm_opts *o, const char *side)
{
	if (o->quiet && !f->rc)
		return;
	fprintf(stderr, "lm: %s: outcome (the destination's verdict)\n", side);
	fprintf(stderr, "lm:   pages       %llu of %llu mapped\n", (unsigned long long)f->mapped,
		(unsigned long long)f->npages);
	if (f->flags & LM_FIN_VERIFY)
		fprintf(stderr, "lm:   verify      %llu verified, %llu mismatched\n",
			(unsigned long long)f->verified, (unsigned long long)f->mismatched);
	else
		fprintf(stderr, "lm:   verify      off\n");
	fprintf(stderr, "lm:   invariants  %s\n", f->flags & LM_FIN_INVARIANTS ? "hold" :
		"BROKEN");
	fprintf(stderr, "lm:   SIGBUS      %s\n", f->flags & LM_FIN_SIGBUS ?
		"a workload thread got one" : "none");
	fprintf(stderr, "lm:   result      %s (exit %u)\n", f->rc ? "FAILED" : "ok", f->rc);
}

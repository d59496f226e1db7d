/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What kfence-tools' host benchmarks share: ordinary kernel lines to pad a
 * log with, a monotonic clock, and min/median/max of a series of runs.
 */
#ifndef KFENCE_BENCH_UTIL_H
#define KFENCE_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static const char *const bench_noise[] = {
	"e1000e 0000:00:19.0 eth0: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: Rx/Tx",
	"audit: type=1400 audit(1701612000.123:42): apparmor=\"STATUS\" operation=\"profile_load\"",
	"EXT4-fs (sda1): mounted filesystem with ordered data mode. Quota mode: none.",
	"nf_conntrack: default automatic helper assignment has been turned off for security reasons",
	"systemd[1]: Started Journal Service.",
	"usb 1-1: new high-speed USB device number 2 using xhci_hcd",
	"TCP: request_sock_TCP: Possible SYN flooding on port 443. Sending cookies.",
	"kworker/u8:2: page allocation failure: order:0, mode:0x820(GFP_ATOMIC)",
};

#define BENCH_N_NOISE (sizeof(bench_noise) / sizeof(bench_noise[0]))

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts @v: then v[0], v[n / 2] and v[n - 1] are min, median and max. */
static inline void bench_sort(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp);
}

#endif

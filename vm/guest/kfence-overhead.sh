#!/bin/sh
# shellcheck shell=sh
# KFENCE overhead: hackbench (when the guest has it), kfence-fsbench (a
# file-system workload) and kfence-buildbench (a compile-like one: make -j2
# of processes that read headers and write objects) with KFENCE off
# (sample_interval=0), at 100 ms and at 10 ms, switched at run time, runs
# interleaved (the order rotates each round, so drift in the host's load
# spreads over all configurations). "off2" is a second KFENCE-off run: its
# ratio to "off" is the noise floor. Prints K513-OVH lines, a table of
# ratios to "off" (mean, sample standard deviation, min, max over rounds)
# and TAP. The verdict compares the 100 ms ratio's 95% interval with 1% and
# with the noise floor (the same interval of off2/off).
# Usage: kfence-overhead.sh [ROUNDS]
IV=/sys/module/kfence/parameters/sample_interval
rounds=${1:-5}
HB=/usr/bin/hackbench
CONFIGS="off 100 10 off2"
out=/tmp/kfence-ovh.txt
: >"$out"

set_config() {
	case $1 in
	off*) echo 0 >$IV ;;
	*) echo "$1" >$IV ;;
	esac
}

# run_one WORKLOAD CONFIG ROUND CMD...: one timed run, "Time: S" parsed
run_one() {
	w=$1 c=$2 r=$3
	shift 3
	set_config "$c"
	t=$("$@" 2>&1 | awk '/^Time:/ { print $2 }')
	[ -n "$t" ] || t=NaN
	echo "K513-OVH workload=$w config=$c round=$r seconds=$t" | tee -a "$out"
}

workloads=2
[ -x $HB ] && workloads=3
echo "1..$workloads"
[ -x $HB ] || echo "# $HB is missing: run the guest with --extra $HB"
old=$(cat $IV)
r=1
while [ "$r" -le "$rounds" ]; do
	# rotate the order by the round number
	order=$(echo "$CONFIGS" | awk -v r="$r" '{ for (i = 0; i < NF; i++)
		printf "%s ", $((i + r) % NF + 1) }')
	for c in $order; do
		[ -x $HB ] && run_one hackbench "$c" "$r" $HB -g 4 -f 10 -l 1000
		run_one fsbench "$c" "$r" kfence-fsbench /tmp/kfence-fsbench 1000 10
		run_one build "$c" "$r" kfence-buildbench /tmp/kfence-buildbench 64 2 6
	done
	r=$((r + 1))
done
echo "$old" >$IV

awk '
# busybox awk has no sqrt(): Newton iterations
function root(x,    y, i) {
	if (x <= 0)
		return 0
	y = x < 1 ? 1 : x
	for (i = 0; i < 60; i++)
		y = (y + x / y) / 2
	return y
}
function sd(s, ss, n) { return n > 1 ? root((ss - s * s / n) / (n - 1)) : 0 }
function median(a, n,    i, j, x) {
	for (i = 2; i <= n; i++) {
		x = a[i]
		for (j = i - 1; j >= 1 && a[j] > x; j--)
			a[j + 1] = a[j]
		a[j + 1] = x
	}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	t[f["workload"], f["config"], f["round"]] = f["seconds"]
	w[f["workload"]] = 1
	if (f["round"] > R) R = f["round"]
}
END {
	printf "# %-10s %-6s %3s %8s %8s %8s %8s %8s %8s %8s\n", "workload", "config", "n",
		"mean_s", "ratio", "sd", "ci95", "min", "median", "max"
	for (wl in w) {
		for (ci = 1; ci <= 4; ci++) {
			cf = ci == 1 ? "off" : ci == 2 ? "off2" : ci == 3 ? "100" : "10"
			s = ss = n = sum = 0; mx = 0; mn = 1e9
			for (r = 1; r <= R; r++) {
				base = t[wl, "off", r]; x = t[wl, cf, r]
				if (base == "" || x == "" || base == "NaN" || x == "NaN" || base + 0 == 0)
					continue
				q = x / base; s += q; ss += q * q; n++; sum += x; v[n] = q
				if (q > mx) mx = q
				if (q < mn) mn = q
			}
			if (n == 0) { printf "# %-10s %-6s no data\n", wl, cf; continue }
			m = s / n; d = sd(s, ss, n)
			ratio[wl, cf] = m; ci95[wl, cf] = 2 * d / root(n)
			printf "# %-10s %-6s %3d %8.3f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f\n", wl, cf, n,
				sum / n, m, d, 2 * d / root(n), mn, median(v, n), mx
		}
	}
	k = 0
	for (wl in w) {
		k++
		if (!((wl, "100") in ratio)) { print "not ok " k " - " wl ": no data"; continue }
		lo = ratio[wl, "100"] - ci95[wl, "100"]; hi = ratio[wl, "100"] + ci95[wl, "100"]
		floor = ci95[wl, "off2"] + (ratio[wl, "off2"] > 1 ? ratio[wl, "off2"] - 1 : 1 - ratio[wl, "off2"])
		verdict = hi <= 1.01 ? "within 1%" : (lo <= 1 + floor ? "not distinguishable from the noise floor" : "above 1% and the noise floor")
		printf "ok %d - %s: 100 ms %+.2f%% (95%% CI %+.2f..%+.2f), 10 ms %+.2f%%, off2 %+.2f%%; noise floor ±%.2f%%: %s\n",
			k, wl, (ratio[wl, "100"] - 1) * 100, (lo - 1) * 100, (hi - 1) * 100,
			(ratio[wl, "10"] - 1) * 100, (ratio[wl, "off2"] - 1) * 100, floor * 100, verdict
	}
}' "$out"

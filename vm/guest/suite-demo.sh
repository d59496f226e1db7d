# shellcheck shell=sh
# The main job: migrate one workload three ways in this guest -- minor
# faults (ours), stop-and-copy, and QEMU-style postcopy with missing faults
# -- and end in a side-by-side table.  Every mode runs with --verify: each
# page is checked against the source's hash as it first becomes visible.
# No fixed wall-clock limit: lm bounds every wait itself (--timeout of no
# progress), and lm_watched stops a run only when it has printed nothing
# for LM_STALL seconds.
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh
# shellcheck source=vm/guest/lm-watch.sh
. /lib/k513/lm-watch.sh

LM=/opt/k513/bin/lm
DEMO_ARGS="--size 64M --threads 2 --stale 0.1 --bandwidth 1G --rounds 3 --precopy 1 --after 1 --verify"

demo() {
	echo "K513-DEMO $*"
}

# What dirty tracking this kernel offers; 'none' is legal, and said.
tracker=$($LM run --size 4M --precopy 0.1 --after 0.1 2>&1 >/dev/null </dev/null |
	sed -n 's/.*tracking \([a-z-]*\).*/\1/p' | head -n 1)
demo "live migration: 64 MiB shmem, 2 writer threads, 10% of memory hot (stale at pause),"
demo "1 Gbit/s emulated link, --verify; kernel $(uname -r); dirty tracking: ${tracker:-unknown}"
if [ "$tracker" = none ]; then
	demo "NOTE: this kernel has no dirty tracker (no PAGEMAP_SCAN, soft-dirty or uffd-wp):"
	demo "every page counts as written in every round, so stop-copy sends all memory while"
	demo "paused and the stale fractions below are what the workload would have written;"
	demo "minor mode's downtime does not depend on it. Every page is still verified."
fi
rows=/tmp/lm-rows
: >"$rows"
for mode in minor stop-copy postcopy-missing; do
	echo "K513-BEGIN lm-$mode"
	# shellcheck disable=SC2086 # word splitting of DEMO_ARGS is wanted
	lm_watched /tmp/lm-row /tmp/lm-err $LM run --mode "$mode" $DEMO_ARGS --row
	rc=$lm_rc
	sed 's/^/  | /' /tmp/lm-err /tmp/lm-row
	if [ "$rc" -eq 0 ]; then
		echo "K513-RESULT live-migrate $mode PASS"
		cat /tmp/lm-row >>"$rows"
	else
		echo "K513-RESULT live-migrate $mode FAIL exit status $rc"
		echo "$mode: failed, exit status $rc" >>"$rows"
	fi | tee -a "$RESULTS"
	echo "K513-END lm-$mode rc=$rc"
done

demo ""
$LM row-header | while IFS= read -r line; do demo "$line"; done
while IFS= read -r line; do demo "$line"; done <"$rows"
awk '$1 == "minor" { m = $3 } $1 == "stop-copy" { s = $3 } $1 == "postcopy-missing" { p = $3 }
	END { if (m > 0) printf "K513-DEMO one guest, downtime: minor %.2f ms, stop-copy %.2f ms, postcopy-missing %.2f ms (%.1fx, %.1fx)\n", m, s, p, s / m, p / m }' "$rows"

# The sweep: does minor-mode downtime stay flat as memory and the stale
# fraction grow?  Every run verifies every page; three runs per point.
# Without a tracker stop-copy sends all memory paused: the sweep stays at
# 64 MiB there, so its cost stays that of the main job.
sizes=64M,256M
[ "$tracker" = none ] && sizes=64M
demo ""
demo "sweep: memory ($sizes) x stale fraction at 1 Gbit/s, 100 us RTT, 3 runs per point"
echo "K513-BEGIN lm-bench"
lm_watched /tmp/lm-bench /tmp/lm-bench.err /opt/k513/bin/lm-bench --sizes "$sizes" \
	--stale 0.01,0.1,0.3 --bandwidth 1G --precopy 0.5 --after 0.3 --runs 3
rc=$lm_rc
sed 's/^/  | /' /tmp/lm-bench.err
while IFS= read -r line; do demo "$line"; done </tmp/lm-bench
if [ "$rc" -eq 0 ]; then
	echo "K513-RESULT live-migrate bench-sweep PASS"
else
	echo "K513-RESULT live-migrate bench-sweep FAIL exit status $rc"
fi | tee -a "$RESULTS"
echo "K513-END lm-bench rc=$rc"
finish

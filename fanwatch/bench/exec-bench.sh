#!/bin/bash
# Run-on-change latency: the time from a write to the command's start, for
# fanwatch --exec, entr and an inotifywait loop, on the same edit loop, in
# one sitting; and the watcher's CPU for the loop.  Prints min/median/max.
#   fanwatch/bench/exec-bench.sh [BUILD_DIR] [EDITS]
# (watchexec is not in Debian 12: not compared.)
set -u
build=$(realpath "${1:-build}")
edits=${2:-20}
fw="$build/fanwatch/fanwatch"
for t in entr inotifywait python3; do
	command -v $t >/dev/null || { echo "exec-bench.sh: $t missing" >&2; exit 1; }
done
work=$(mktemp -d /tmp/fw-exec-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/d"
echo 0 > "$work/d/f"
stamp='date +%s%N >> '"$work/log"

cpu_of() {	# utime+stime of a pid and its reaped children (the runs), in seconds
	awk '{ printf "%.3f", ($14 + $15 + $16 + $17) / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"
}

# edit_loop: write the file, wait until the command logged a new line.
edit_loop() {
	: > "$work/writes"
	sleep 1
	for i in $(seq "$edits"); do
		n=$(wc -l < "$work/log")
		date +%s%N >> "$work/writes"
		echo "$i" >> "$work/d/f"
		for _ in $(seq 400); do
			[ "$(wc -l < "$work/log")" -gt "$n" ] && break
			sleep 0.005
		done
		sleep 0.3
	done
}

report() {
	python3 - "$1" "$work/writes" "$work/log" "$2" <<'P'
import statistics, sys
name, writes, log, cpu = sys.argv[1:5]
w = [int(x) for x in open(writes)]
l = sorted(int(x) for x in open(log))
lat, missed = [], 0
for i, t in enumerate(w):
    nxt = w[i + 1] if i + 1 < len(w) else float("inf")
    after = [x for x in l if t <= x < nxt]
    if after:
        lat.append((after[0] - t) / 1e6)
    else:
        missed += 1
lat.sort()
if not lat:
    lat = [float("nan")]
print(f"{name:30s} runs {len(w) - missed:3d}/{len(w)}  latency ms min {lat[0]:7.1f} median {statistics.median(lat):7.1f} max {lat[-1]:7.1f}  cpu (watcher + command runs) {float(cpu):.3f} s")
P
}

run() {	# run NAME CMD...: the watcher in the background, then the loop
	local name=$1; shift
	: > "$work/log"
	"$@" >/dev/null 2>&1 &
	local pid=$!
	edit_loop
	local cpu
	cpu=$(cpu_of "$pid")
	kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null

	report "$name" "$cpu"
}

echo "load: $(uptime)"
echo "$edits edits of one file, 0.3 s apart"
run "fanwatch --exec (settle 100)" "$fw" -q --postpone --exec "$stamp" "$work/d"
run "fanwatch --exec --settle 10" "$fw" -q --postpone --settle 10 --exec "$stamp" "$work/d"
run "entr -n -p" sh -c "echo '$work/d/f' | exec entr -n -p sh -c '$stamp'"
run "inotifywait loop" sh -c "while inotifywait -qq -e close_write '$work/d'; do $stamp; done"
echo "load: $(uptime)"

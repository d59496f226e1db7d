#!/bin/bash
# Recursive setup on a tree of TOP x PER_TOP directories (default 100 x
# 999 + 101 = 100 001) under a hard ulimit -n 1024: fanwatch against
# inotifywait (and fsnotifywait -F, when installed), run in turns in one
# sitting.  Each run: wall time until "Watches established.", the
# watcher's CPU time (user + sys from /proc) at that moment, and whether a
# file made afterwards in every leaf directory is reported (so every
# directory was watched).  Prints medians and fanwatch's ratios.
#   fanwatch/bench/setup-bench.sh [BUILD_DIR] [RUNS] [TOP] [PER_TOP]
# Run it as the user who will run fanwatch (nobody is what it is for).
set -u
build=$(realpath "${1:-build}")
runs=${2:-3}
top=${3:-100}
per=${4:-999}
fw="$build/fanwatch/fanwatch"
work=$(mktemp -d /tmp/fw-setup-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
python3 -c "
import os
for i in range($top):
    for j in range($per):
        os.makedirs(f't/d{i}/e{j}')
"
dirs=$(find t -type d | wc -l)
tck=$(getconf CLK_TCK)
echo "load: $(uptime)"
echo "tree: $dirs directories on $(stat -f -c %T t); ulimit -n 1024; $runs runs each, in turns"

# one CMD...: prints "WALL_MS CPU_MS REPORTED". The watcher's stderr is
# read from a pipe, so the clock stops at "Watches established." without
# a polling loop: one (forking grep every 10 ms) took CPU from the watcher
# and was a load of its own, worse for a watcher that sets up on two
# threads.
one() {
	(
	ulimit -n 1024
	rm -f err.fifo; : >err
	mkfifo err.fifo
	start=$(date +%s%N)
	"$@" 2>err.fifo >out &
	pid=$!
	exec 3<err.fifo
	ok=0
	while IFS= read -r line <&3; do
		case $line in *"Watches established"*) ok=1; break ;; esac
		echo "$line" >>err
	done
	end=$(date +%s%N)
	if [ "$ok" -eq 0 ]; then
		echo "FAIL $(grep -v Setting err | head -1 | tr ' ;' '__')"
		exit 1
	fi
	read -r -a st < /proc/$pid/stat
	cpu=$(( (st[13] + st[14]) * 1000 / tck ))
	cat <&3 >/dev/null &	# the rest of stderr, so the watcher never blocks
	python3 -c "
for i in range($top):
    for j in range($per):
        open(f't/d{i}/e{j}/x', 'w').close()
open('t/done', 'w').close()"
	for _ in $(seq 600); do grep -q ' done$' out && break; sleep 0.1; done
	kill $pid; wait $pid 2>/dev/null
	echo "$(( (end - start) / 1000000 )) $cpu $(grep -c ' x$' out)"
	find t -name x -delete; rm -f t/done err
	# neither the kernel's freeing of the group's marks (after it closes)
	# nor the writeback of the files made and removed in the next run
	sync
	sleep 2
	)
}

tools=(fanwatch inotifywait)
command -v fsnotifywait > /dev/null && tools+=(fsnotifywait)
declare -A res
for r in $(seq "$runs"); do
	for tool in "${tools[@]}"; do
		case $tool in
		fanwatch) cmd=("$fw") ;;
		fsnotifywait) cmd=(fsnotifywait -F) ;;
		*) cmd=("$tool") ;;
		esac
		res[$tool]+="$(one "${cmd[@]}" -m -r -e create --format '%w %f' t);"
	done
done
for tool in "${tools[@]}"; do echo "$tool ${res[$tool]}"; done | python3 -c "
import statistics, sys
med = {}
for line in sys.stdin:
    tool, rows = line.split(' ', 1)
    rows = [r.split() for r in rows.strip().strip(';').split(';') if r.strip()]
    bad = [r for r in rows if r[0] == 'FAIL']
    if bad:
        print(tool.ljust(13), f'failed {len(bad)} of {len(rows)} runs:', bad[0][1].replace('_', ' '))
        continue
    wall = sorted(int(r[0]) / 1000 for r in rows)
    cpu = sorted(int(r[1]) / 1000 for r in rows)
    rep = min(int(r[2]) for r in rows)
    med[tool] = (statistics.median(wall), statistics.median(cpu))
    print(tool.ljust(13), f'setup s min {wall[0]:.2f} median {med[tool][0]:.2f} max {wall[-1]:.2f};',
          f'CPU s median {med[tool][1]:.2f};', f'leaf files reported (worst run) {rep} of {$top * $per}')
fw = med['fanwatch']
for t in med:
    if t != 'fanwatch':
        print(f'fanwatch / {t}: setup time {fw[0] / med[t][0]:.2f}x, CPU {fw[1] / max(med[t][1], 0.001):.2f}x (medians)')
"
echo "load: $(uptime)"

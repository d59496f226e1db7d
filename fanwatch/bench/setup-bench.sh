#!/bin/bash
# Recursive setup on a tree of N directories (default 100 000) under a hard
# ulimit -n 1024, fanwatch against inotifywait, several runs in one sitting:
# seconds until "Watches established.", and whether a file made afterwards
# in every leaf directory is reported (so every directory was watched).
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
echo "load: $(uptime)"
echo "tree: $dirs directories; ulimit -n 1024; $runs runs each"

one() {	# one CMD...: prints "SECONDS REPORTED"
	(
	ulimit -n 1024
	start=$(date +%s%N)
	"$@" 2>err >out &
	pid=$!
	while ! grep -q "Watches established" err 2>/dev/null; do
		kill -0 $pid 2>/dev/null || { echo "died: $(cat err)" >&2; exit 1; }
		sleep 0.02
	done
	end=$(date +%s%N)
	python3 -c "
for i in range($top):
    for j in range($per):
        open(f't/d{i}/e{j}/x', 'w').close()
open('t/done', 'w').close()"
	for _ in $(seq 300); do grep -q ' done$' out && break; sleep 0.1; done
	kill $pid; wait $pid 2>/dev/null
	echo "$(( (end - start) / 1000000 )) $(grep -c ' x$' out)"
	find t -name x -delete; rm -f t/done
	)
}

for tool in fanwatch inotifywait; do
	cmd=("$fw")
	[ $tool = inotifywait ] && cmd=(inotifywait)
	res=()
	for r in $(seq "$runs"); do
		res+=("$(one "${cmd[@]}" -m -r -e create --format '%w %f' t)")
	done
	printf '%s\n' "${res[@]}" | python3 -c "
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
t = sorted(int(a) / 1000 for a, b in rows)
rep = min(int(b) for a, b in rows)
print(f'$tool'.ljust(12), f'setup s min {t[0]:.2f} median {statistics.median(t):.2f} max {t[-1]:.2f}', f'leaf files reported (worst run) {rep} of {$top * $per}')"
done
echo "load: $(uptime)"

#!/bin/bash
# Tarball extraction under a recursive watch: fanwatch, fsnotifywait -F and
# inotifywait -m -r on the same tar, several runs in one sitting.  A path is
# "lost" if it exists after extraction but the watcher never named it (by
# CREATE, MOVED_TO or a scan); CPU is the watcher's, per 1000 lines printed.
#   fanwatch/bench/tar-bench.sh [BUILD_DIR] [RUNS] [SOURCE_DIR]
# SOURCE_DIR (default /usr/include + /usr/share/doc) is tarred once, uncompressed.
set -u
build=$(realpath "${1:-build}")
runs=${2:-3}
src=${3:-}
fw="$build/fanwatch/fanwatch"
work=$(mktemp -d /tmp/fw-tar-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -n "$src" ]; then
	tar -C "$(dirname "$src")" -cf "$work/src.tar" "$(basename "$src")"
else
	tar -C /usr -cf "$work/src.tar" include share/doc 2>/dev/null
fi
echo "load: $(uptime)"
hz=$(getconf CLK_TCK)

one() {	# one NAME CMD...: prints "lost reported lines cpu_s"
	rm -rf "$work/x"; mkdir "$work/x"
	"$@" -m -r -e create -e moved_to --format '%w%f' "$work/x" >"$work/out" 2>"$work/err" &
	local pid=$! i=0
	until grep -q "Watches established" "$work/err" 2>/dev/null; do
		sleep 0.02; i=$((i + 1)); [ $i -gt 500 ] && break
	done
	tar -C "$work/x" -xf "$work/src.tar"
	: > "$work/x/zz-done"
	for _ in $(seq 600); do grep -q 'zz-done$' "$work/out" && break; sleep 0.1; done
	local cpu
	cpu=$(awk '{ print ($14 + $15) / '"$hz"' }' "/proc/$pid/stat")
	kill $pid; wait $pid 2>/dev/null
	( cd "$work/x" && find . -mindepth 1 | sed "s|^\.|$work/x|" ) | sort > "$work/want"
	sed 's|/$||' "$work/out" | sort -u > "$work/got"
	echo "$(comm -23 "$work/want" "$work/got" | wc -l) $(wc -l < "$work/want") $(wc -l < "$work/out") $cpu"
}

for tool in fanwatch fsnotifywait inotifywait; do
	case $tool in
	fanwatch) cmd=("$fw") ;;
	fsnotifywait) cmd=(fsnotifywait -F) ;;
	inotifywait) cmd=(inotifywait) ;;
	esac
	res=()
	for r in $(seq "$runs"); do res+=("$(one "${cmd[@]}")"); done
	printf '%s\n' "${res[@]}" | python3 -c "
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
lost = sorted(r[0] for r in rows); cpk = sorted(1000 * r[3] / max(r[2], 1) for r in rows)
print('${cmd[*]}'.split('/')[-1].ljust(16), f'paths {int(rows[0][1])}', f'lost min {lost[0]:.0f} median {statistics.median(lost):.0f} max {lost[-1]:.0f}',
      f'cpu s/1k lines min {cpk[0]:.4f} median {statistics.median(cpk):.4f} max {cpk[-1]:.4f}')"
done
echo "load: $(uptime)"

#!/bin/sh
# Run the fanwatch benchmark as user nobody (the case fanwatch is for).
#   fanwatch/bench/run-bench.sh [BUILD_DIR] [KERNEL_TREE]
# BUILD_DIR defaults to ./build; KERNEL_TREE (an unpacked source tree,
# ~5000 directories) adds the recursive-setup timing.
set -eu
build=$(realpath "${1:-build}")
tree=${2:-}
bench="$build/fanwatch/fwbench"
here=$(cd "$(dirname "$0")" && pwd)
fw="$build/fanwatch/fanwatch"
for tool in fsnotifywait inotifywait; do
	command -v "$tool" >/dev/null || { echo "run-bench.sh: $tool missing (apt-get install inotify-tools)" >&2; exit 1; }
done
as_nobody() {
	if [ "$(id -u)" = 0 ]; then
		setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	else
		"$@"
	fi
}
cd /tmp
echo "== steady rate, below the queue limit"
as_nobody "$bench" --fanwatch "$fw" --files 100000 --dirs 1000 --rate 20000 --base /tmp --repeat 3
# tmpfs lets the generator outrun the watchers (on a disk it is the
# bottleneck); then 1, 2, 4, 8 unpaced generator processes.
echo "== raising the rate until the queue (fs.fanotify/inotify max_queued_events) overflows"
as_nobody "$bench" --fanwatch "$fw" --files 30000 --dirs 1000 --overflow --base /dev/shm
if [ -n "$tree" ]; then
	echo "== recursive setup"
	as_nobody "$bench" --fanwatch "$fw" --setup "$tree"
fi
echo "== tarball extraction (paths lost, CPU per 1k lines)"
as_nobody "$here/tar-bench.sh" "$build" 3
echo "== recursive setup on 100 000 directories, ulimit -n 1024"
as_nobody "$here/setup-bench.sh" "$build" 3
echo "== --exec latency against entr and an inotifywait loop"
as_nobody "$here/exec-bench.sh" "$build" 20
